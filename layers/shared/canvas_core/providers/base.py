"""The provider interface: one completion call with a system prompt, and the usage it cost.

`role` says which agent is calling (planner, researcher, analyst, reviewer, writer, ...); a provider maps it
to a model id (`roles.py`). A provider raises `BlockRetryableError` for a passing failure (throttling, a 5xx,
a timeout) once its own retries are spent, and `BlockFatalError` for one that retrying cannot fix.

Every call is bounded both ways: its output by the role's cap (`roles.max_output_tokens`), and its input by
MODEL_INPUT_TOKEN_BUDGET (`fit_input`): a prompt that would not fit is cut, with a note in its place saying so,
rather than sent whole. An answer the model stopped at the output cap is `AnswerCutError`, never taken as complete.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from canvas_core.errors import BlockFatalError
from canvas_core.settings import provider_settings

CHARS_PER_TOKEN = 4  # the usual rule of thumb for English, where no tokenizer is at hand
# The share of a cut prompt kept from its end: a request may close with its question or its list of sources.
TAIL_SHARE = 0.2
CUT_NOTE = (
    "\n\n[... {left_out} characters of the input were left out here to fit the model's input budget of "
    "{budget} tokens; work from what remains ...]\n\n"
)


@dataclass(frozen=True)
class Completion:
    text: str
    model_id: str
    input_tokens: int = 0
    output_tokens: int = 0


class ModelProvider(Protocol):
    def complete(self, *, system: str, prompt: str, role: str) -> Completion: ...


def provider_name(provider: object) -> str:
    """`offline`, `bedrock`, `openai`, or the class name of another provider (a test's fake)."""
    return getattr(provider, "name", None) or type(provider).__name__


class AnswerCutError(BlockFatalError):
    """The model stopped at the call's output cap: the answer is incomplete. Not retried (the same request would be
    cut again); the message names the variable that raises the cap."""

    def __init__(self, model_id: str, role: str, cap: int):
        self.cap = cap
        variable = f"{role.upper()}_MAX_OUTPUT_TOKENS"
        super().__init__(
            f"{model_id}'s answer was cut off at the output cap of {cap} tokens and was not used "
            f"(raise {variable} or MODEL_MAX_OUTPUT_TOKENS, or ask for less)"
        )


def estimate_tokens(text: str) -> int:
    """Tokens in `text`, from its characters."""
    return -(-len(text) // CHARS_PER_TOKEN)


def input_token_budget() -> int:
    return provider_settings().model_input_token_budget


def fit_input(system: str, prompt: str, budget: int | None = None) -> str:
    """`prompt`, cut in the middle with a note when it and `system` together would exceed `budget` tokens
    (MODEL_INPUT_TOKEN_BUDGET by default): its start (the request) and its end are kept."""
    budget = input_token_budget() if budget is None else budget
    if estimate_tokens(system) + estimate_tokens(prompt) <= budget:
        return prompt
    note_room = len(CUT_NOTE) + 40
    room = max(0, (budget - estimate_tokens(system)) * CHARS_PER_TOKEN - note_room)
    tail = int(room * TAIL_SHARE)
    head = room - tail
    left_out = len(prompt) - head - tail
    note = CUT_NOTE.format(left_out=left_out, budget=budget)
    return prompt[:head] + note + (prompt[len(prompt) - tail :] if tail else "")
