"""Speed: work moto's Step Functions interpreter repeats for every execution, state or task, done once or more
cheaply here. Each parse remembered holds no execution state (that lives in each execution's environment)."""

from __future__ import annotations

import copy
import copyreg
import functools
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any

from moto.stepfunctions.parser.asl.component.common.path import result_path as sfn_result_path
from moto.stepfunctions.parser.asl.component.common.string import string_expression as sfn_string_expression
from moto.stepfunctions.parser.asl.component.state.exec import execute_state as sfn_execute_state
from moto.stepfunctions.parser.asl.component.state.exec.state_map import state_map as sfn_state_map
from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration import job as sfn_job
from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.distributed_iteration_component import (
    DistributedIterationComponentEvalInput,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.inline_iteration_component import (
    InlineIterationComponent,
    InlineIterationComponentEvalInput,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.job import JobPool
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
    state_task_service as sfn_state_task_service,
)
from moto.stepfunctions.parser.asl.eval import environment as sfn_environment
from moto.stepfunctions.parser.asl.eval import states as sfn_states
from moto.stepfunctions.parser.asl.eval.event import event_manager as sfn_event_manager
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
from moto.stepfunctions.parser.asl.utils import json_path as sfn_json_path

from canvas_local.moto_patch.patches import Replacement, SpeedPatch

_ORIGINAL_PARSE = AmazonStateLanguageParser.__dict__["parse"]
_ORIGINAL_JSON_PATH_PARSE = sfn_json_path.parse
_ORIGINAL_RESULT_PATH_PARSE = sfn_result_path.parse
_ORIGINAL_LAUNCH_WORKER = InlineIterationComponent._launch_worker
_ORIGINAL_TASK_THREAD = sfn_execute_state.Thread
# The interpreter's modules that copy state data (inputs, results, the stack, values picked by a path) with deepcopy.
INTERPRETER_COPYING_MODULES = (
    sfn_states,
    sfn_environment,
    sfn_execute_state,
    sfn_string_expression,
    sfn_result_path,
    sfn_state_map,
    sfn_job,
    sfn_state_task_service,
    sfn_event_manager,
)


# moto's `AmazonStateLanguageParser.parse` parses the ASL definition with ANTLR for every execution; the parsed
# program holds no execution state.
@functools.lru_cache(maxsize=32)
def _parse_once(definition: str) -> Any:
    return _ORIGINAL_PARSE.__func__(definition)


# moto's `json_path.parse` and `result_path.parse` (jsonpath_ng) build a new yacc parser for every path evaluated;
# a parsed path holds no data, so one serves all.


@functools.lru_cache(maxsize=1024)
def _json_path_once(path: str) -> Any:
    return _ORIGINAL_JSON_PATH_PARSE(path)


@functools.lru_cache(maxsize=1024)
def _result_path_once(path: str) -> Any:
    return _ORIGINAL_RESULT_PATH_PARSE(path)


class _NotPlain(Exception):
    pass


def copy_json(value: Any) -> Any:
    """What `copy.deepcopy` makes of JSON-shaped data (dicts with text keys, lists, text, numbers, booleans,
    None), built directly: moto's interpreter copies every state's input, result and picked values this way, and
    deepcopy's generic protocol was most of that cost. Anything else, and data holding one container twice (which
    deepcopy copies once), goes to deepcopy."""
    kind = type(value)
    if kind in _JSON_ATOMS:
        return value
    if kind is dict or kind is list:
        try:
            return _copy_container(value, set())
        except _NotPlain:
            pass
    elif _is_plain_class(kind):
        attributes = getattr(value, "__dict__", None)
        if attributes is not None and all(type(v) in _JSON_ATOMS for v in attributes.values()):
            # An object of a class without copy customisations, holding only text, numbers and the like (the
            # interpreter's program state): deepcopy makes a new one with the same attributes.
            copied = object.__new__(kind)
            copied.__dict__.update(attributes)
            return copied
    return copy.deepcopy(value)


_JSON_ATOMS = frozenset({str, int, float, bool, type(None)})
_plain_classes: dict[type, bool] = {}


def _is_plain_class(kind: type[object]) -> bool:
    plain = _plain_classes.get(kind)
    if plain is None:
        plain = _plain_classes[kind] = (
            kind.__new__ is object.__new__
            and kind.__reduce_ex__ is object.__reduce_ex__
            and kind.__reduce__ is object.__reduce__
            and kind.__getstate__ is object.__getstate__
            and not hasattr(kind, "__deepcopy__")
            and not hasattr(kind, "__setstate__")
            and kind not in copyreg.dispatch_table
            and not any(vars(base).get("__slots__") for base in kind.__mro__)  # abc.ABC's are empty
        )
    return plain


def _copy_container(value: Any, seen: set[int]) -> Any:
    if id(value) in seen:
        raise _NotPlain
    seen.add(id(value))
    if type(value) is dict:
        copied: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            kind = type(item)
            if kind in _JSON_ATOMS:
                copied[key] = item
            elif kind is dict or kind is list:
                copied[key] = _copy_container(item, seen)
            else:
                raise _NotPlain
        return copied
    items = []
    for item in value:
        kind = type(item)
        if kind in _JSON_ATOMS:
            items.append(item)
        elif kind is dict or kind is list:
            items.append(_copy_container(item, seen))
        else:
            raise _NotPlain
    return items


class _JsonCopy:
    """The `copy` module as the interpreter's modules see it once patched: `deepcopy` is `copy_json`."""

    @staticmethod
    def deepcopy(value: Any, memo: Any = None) -> Any:
        return copy.deepcopy(value, memo) if memo is not None else copy_json(value)

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)


_JSON_COPY = _JsonCopy()


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


# Every Task state runs its work on a thread of its own (`ExecutionState._evaluate_with_timeout`), so that the state
# can time out while the work goes on: a new thread per task, two per block, each start a round trip between two
# threads for the interpreter lock. The work runs on a thread kept from an earlier task instead, as Lambda runs
# every invocation of an environment on one thread; one idle for IDLE_TASK_THREAD_SECONDS ends.
IDLE_TASK_THREAD_SECONDS = 1.0


class TaskThread:
    """What `_evaluate_with_timeout` uses of `threading.Thread` (a target, `start`), and what `TMP_THREADS`' readers
    use (`ident`, `is_alive`, `join`), with the target run by an idle task thread, or a new one when none is."""

    _idle: list[_TaskRunner] = []
    _lock = threading.Lock()

    def __init__(self, target: Callable[[], None], daemon: bool | None = None, name: str | None = None):
        self._target = target
        self._done = threading.Event()
        self.ident: int | None = None

    def start(self) -> None:
        with TaskThread._lock:
            runner = TaskThread._idle.pop() if TaskThread._idle else None
        if runner is None:
            runner = _TaskRunner()
        self.ident = runner.ident
        runner.run(self)

    def is_alive(self) -> bool:
        return self.ident is not None and not self._done.is_set()

    def join(self, timeout: float | None = None) -> None:
        if self.ident is None:
            raise RuntimeError("cannot join thread before it is started")
        self._done.wait(timeout)

    def _run(self) -> None:
        try:
            self._target()
        finally:
            self._done.set()


class _TaskRunner:
    """One thread that runs the targets of task states, one at a time, and ends once idle long enough."""

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[TaskThread] = queue.SimpleQueue()
        thread = threading.Thread(target=self._serve, name="sfn-task", daemon=True)
        thread.start()
        self.ident = thread.ident

    def run(self, task: TaskThread) -> None:
        self._work.put(task)

    def _serve(self) -> None:
        while True:
            try:
                task = self._work.get(timeout=IDLE_TASK_THREAD_SECONDS)
            except queue.Empty:
                with TaskThread._lock:
                    if self in TaskThread._idle:
                        TaskThread._idle.remove(self)
                        return
                task = self._work.get()  # taken from the idle list just now: its task is on the way
            task._run()
            with TaskThread._lock:
                TaskThread._idle.append(self)


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
    "state_data_copied_as_json": SpeedPatch(
        tuple(Replacement(module, "copy", copy, _JSON_COPY) for module in INTERPRETER_COPYING_MODULES)
    ),
    "map_workers_for_items": SpeedPatch(
        (Replacement(InlineIterationComponent, "_launch_worker", _ORIGINAL_LAUNCH_WORKER, _launch_worker_with_work),)
    ),
    "task_threads_kept": SpeedPatch((Replacement(sfn_execute_state, "Thread", _ORIGINAL_TASK_THREAD, TaskThread),)),
}
