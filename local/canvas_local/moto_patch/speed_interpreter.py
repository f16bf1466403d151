"""Speed: work moto's Step Functions interpreter repeats for every execution or path, done once here, and Map workers
started only for items there are. Each parse remembered holds no execution state (that lives in each execution's
environment). What each buys: `.venv/bin/python -m bench.moto_patches NAME` (docs/benchmarks.md, "What each moto
patch buys"), CPU per block of a chain of 20 blocks, with the patch against without it."""

from __future__ import annotations

import functools
import weakref
from typing import Any

from moto.stepfunctions.parser.asl.component.common.path import result_path as sfn_result_path
from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.distributed_iteration_component import (
    DistributedIterationComponentEvalInput,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.inline_iteration_component import (
    InlineIterationComponent,
    InlineIterationComponentEvalInput,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.job import JobPool
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
from moto.stepfunctions.parser.asl.utils import json_path as sfn_json_path

from canvas_local.moto_patch.patches import Replacement, SpeedPatch

_ORIGINAL_PARSE = AmazonStateLanguageParser.__dict__["parse"]
_ORIGINAL_JSON_PATH_PARSE = sfn_json_path.parse
_ORIGINAL_RESULT_PATH_PARSE = sfn_result_path.parse
_ORIGINAL_LAUNCH_WORKER = InlineIterationComponent._launch_worker


# asl_parsed_once: moto's `AmazonStateLanguageParser.parse` parses the ASL definition with ANTLR for every execution;
# the parsed program holds no execution state. Buys 15-19% of a chain's CPU per block.
@functools.lru_cache(maxsize=32)
def _parse_once(definition: str) -> Any:
    return _ORIGINAL_PARSE.__func__(definition)


# json_paths_parsed_once: moto's `json_path.parse` and `result_path.parse` (jsonpath_ng) build a new yacc parser for
# every path evaluated; a parsed path holds no data, so one serves all. Buys 38-40% of a chain's CPU per block.
@functools.lru_cache(maxsize=1024)
def _json_path_once(path: str) -> Any:
    return _ORIGINAL_JSON_PATH_PARSE(path)


@functools.lru_cache(maxsize=1024)
def _result_path_once(path: str) -> Any:
    return _ORIGINAL_RESULT_PATH_PARSE(path)


# map_workers_for_items: moto's `InlineIterationComponent._launch_worker` is called MaxConcurrency times by an inline
# Map whatever its number of items. Buys 8-9% of a chain's CPU per block.
# An inline Map starts MaxConcurrency workers (a thread and an environment frame each) whatever its number of
# items: 40 for a canvas of three blocks, twice (one Map for the blocks without inputs, one for the others). A
# worker takes items until none is left; one started when every item is taken ends at once, so the workers past
# the number of items are not started. Items are taken and run as before: at most MaxConcurrency at once.
_workers_started: weakref.WeakKeyDictionary[JobPool, int] = weakref.WeakKeyDictionary()


def _launch_worker_with_work(self: InlineIterationComponent, env: Any, eval_input: Any, job_pool: JobPool) -> Any:
    inline = isinstance(eval_input, InlineIterationComponentEvalInput)
    if inline and not isinstance(eval_input, DistributedIterationComponentEvalInput):
        started = _workers_started.get(job_pool, 0)
        if started >= len(eval_input.input_items):
            return None
        _workers_started[job_pool] = started + 1
    return _ORIGINAL_LAUNCH_WORKER(self, env=env, eval_input=eval_input, job_pool=job_pool)


PATCHES = {
    "asl_parsed_once": SpeedPatch(
        (Replacement(AmazonStateLanguageParser, "parse", _ORIGINAL_PARSE, staticmethod(_parse_once)),)
    ),
    "json_paths_parsed_once": SpeedPatch(
        (
            Replacement(sfn_json_path, "parse", _ORIGINAL_JSON_PATH_PARSE, _json_path_once),
            Replacement(sfn_result_path, "parse", _ORIGINAL_RESULT_PATH_PARSE, _result_path_once),
        )
    ),
    "map_workers_for_items": SpeedPatch(
        (Replacement(InlineIterationComponent, "_launch_worker", _ORIGINAL_LAUNCH_WORKER, _launch_worker_with_work),)
    ),
}
