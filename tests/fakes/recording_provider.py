"""A model provider for tests that records every call (system prompt, prompt, role) and answers from a script:
a list of answers used in turn, or a function of the call. Tokens are one per word."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from canvas_core.errors import BlockRetryableError
from canvas_core.providers.base import Completion


@dataclass
class RecordedCall:
    system: str
    prompt: str
    role: str


@dataclass
class RecordingProvider:
    answers: list[str] | Callable[[RecordedCall], str] = field(default_factory=lambda: ["A recorded answer [1]."])
    model_id: str = "test/recording-model"
    fail_with: Exception | None = None
    calls: list[RecordedCall] = field(default_factory=list)
    name: str = "recording"

    def complete(self, *, system: str, prompt: str, role: str) -> Completion:
        call = RecordedCall(system=system, prompt=prompt, role=role)
        self.calls.append(call)
        if self.fail_with is not None:
            raise self.fail_with
        if callable(self.answers):
            text = self.answers(call)
        else:
            text = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return Completion(
            text=text,
            model_id=f"{self.model_id}:{role}",
            input_tokens=len((system + " " + prompt).split()),
            output_tokens=len(text.split()),
        )

    def roles(self) -> list[str]:
        return [c.role for c in self.calls]


def throttled() -> BlockRetryableError:
    return BlockRetryableError("ThrottlingException (after 3 attempts)")
