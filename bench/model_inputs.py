"""What a model call is given: the input tokens of every call the blocks and the Planner make, over one run of each
template on the embedded stack, with and without a large upload (long enough that its material would exceed the
input budget if it were sent whole).

Every call goes through a provider, and each provider keeps its input to MODEL_INPUT_TOKEN_BUDGET
(`providers/base.py`, `fit_input`): the figures are the tokens the offline provider counted for each call, as
it answered it (four characters a token), so the maximum shows whether any call went past the budget. The
stack's functions get the budget as the template's ModelInputTokenBudget parameter: MODEL_INPUT_TOKEN_BUDGET in
the benchmark's environment sets it (default 24,000). `python -m bench model_inputs` runs it.
"""

from __future__ import annotations

import logging
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

from bench.makespan import percentile
from canvas_core.auth import authenticate
from canvas_core.models.api import CreateRunRequest, UploadedFile
from canvas_core.models.catalog import Template
from canvas_core.providers.base import Completion, input_token_budget
from canvas_core.providers.offline import OfflineProvider
from canvas_core.runs import create_run
from canvas_local.stack import LocalStack

API_KEY = "sk_canvas_bench_model_inputs_key_00000000"
PROMPT = {
    Template.AUTO: "Tell me about the tide pools of the north shore and what lives in them.",
    Template.DEEP_RESEARCH: "Research how warming affects tide pools of the north shore.",
    Template.REPORT: "Write a report on the tide pools of the north shore: animals, temperature, visitors.",
    Template.SLIDES: "Make slides about the tide pools of the north shore covering animals, tides and safety.",
    Template.MEMO: "Write a memo to the parks board on protecting the tide pools of the north shore.",
    Template.EXCEL: "Build a spreadsheet budget for tide pool walks: guides, signs, first aid, transport.",
    Template.APP: "Build an app to log animals seen in the tide pools of the north shore.",
    Template.LANDING_PAGE: "Make a landing page for guided walks to the tide pools of the north shore.",
}
# About 77,000 tokens of notes: three times the default budget, so the material blocks read has to be cut.
LARGE_NOTES_LINES = 4_000
RUN_TIMEOUT_S = 600


def large_notes() -> bytes:
    lines = [
        f"Survey {n}: pool {n % 40} held {n % 7 + 1} anemones, {n % 5} hermit crabs and water at {12 + n % 9} degrees."
        for n in range(LARGE_NOTES_LINES)
    ]
    return ("# Field notes\n" + "\n".join(lines) + "\n").encode()


@contextmanager
def recorded_calls() -> Iterator[list[int]]:
    """While active, the input tokens of every offline model call, from any thread of the stack."""
    calls: list[int] = []
    lock = threading.Lock()
    complete = OfflineProvider.complete

    def recording(self: OfflineProvider, *, system: str, prompt: str, role: str) -> Completion:
        completion = complete(self, system=system, prompt=prompt, role=role)
        with lock:
            calls.append(completion.input_tokens)
        return completion

    with mock.patch.object(OfflineProvider, "complete", recording):
        yield calls


def main() -> None:
    for noisy in ("werkzeug", "botocore", "canvas_local"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    notes = UploadedFile(name="notes.md", extension="md", content_type="text/markdown", data=large_notes())
    started = time.monotonic()
    runs = 0
    budget = input_token_budget()
    overrides = {"LogLevel": "WARNING", "ModelInputTokenBudget": str(budget)}
    stack = LocalStack(api_keys=[API_KEY], parameter_overrides=overrides)
    with stack, recorded_calls() as calls:
        account_id = authenticate({"X-API-KEY": API_KEY})
        prefix = stack.state_machine_arns["RunCanvasStateMachine"].replace(":stateMachine:", ":execution:")
        for template in Template:
            for files in ([], [notes]):
                request = CreateRunRequest(prompt=PROMPT[template], template=template, files=files)
                created = create_run(request, account_id)
                ended = stack.wait_for_execution(f"{prefix}:{created.run_id}", timeout=RUN_TIMEOUT_S)
                runs += 1
                if ended["status"] != "SUCCEEDED":
                    raise RuntimeError(f"{template.value}: execution {ended['status']}")
        recorded = list(calls)
    if not recorded:
        raise RuntimeError("no model call was recorded")
    print(f"model_calls {len(recorded)} ({runs} runs, {time.monotonic() - started:.0f}s)")
    print(f"model_input_tokens_p50_per_call {statistics.median(recorded):.0f}")
    print(f"model_input_tokens_p95_per_call {percentile([float(t) for t in recorded], 0.95):.0f}")
    print(f"model_input_tokens_max_per_call {max(recorded)} (budget {budget})")
    print(f"model_calls_at_the_budget {sum(1 for t in recorded if t >= budget * 0.95)}")


if __name__ == "__main__":
    main()
