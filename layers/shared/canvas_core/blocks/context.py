"""What a block implementation is given (its node, its inputs, the run, the providers) and what it gives back.

Implementations call models through `ctx.complete(...)` and store files through `ctx.save_artifact(...)`, so
that usage (models, tokens, searches, pages) and artifacts are recorded the same way for every block type.

An answer cut off at the call's output cap is never used (`AnswerCutError`). A small model that runs on, repeating
itself, until the cap stops it is asked once more for a shorter answer, within the cap; a second cut answer fails
the block with the cap and the setting that raises it.

A block that falls back when a model answer is unusable (no HTML in the app's answer, an analysis plan off the
table's schema, an image it could not have described) says why with `ctx.note(...)`: the reason is written with
its completion and lands in the run's errors, the block and the run still completed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel

from canvas_core.adapters.artifacts import ArtifactStore
from canvas_core.agents.personas import system_prompt
from canvas_core.clock import new_id
from canvas_core.models.items import Artifact, NodeItem, RunItem, Source
from canvas_core.observability import logger
from canvas_core.providers.base import AnswerCutError, Completion, ModelProvider, provider_name
from canvas_core.providers.structured import StructuredOutputError, complete_structured

# Asked after an answer cut at the cap: words are about three quarters of a token, so half the cap in words leaves
# room for the model's own overrun.
SHORTER_ANSWER = (
    "\n\nYour previous answer to this ran past the limit of {cap} tokens and was cut off. Answer again, "
    "complete and in at most {words} words; do not repeat yourself."
)


@dataclass
class Usage:
    """What a block consumed; credits are priced from it."""

    models_used: list[str] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    calls: list[tuple[str, int, int]] = field(default_factory=list)  # (model id, input tokens, output tokens)
    searches: int = 0
    pages_fetched: int = 0

    def record(self, completion: Completion) -> None:
        if completion.model_id not in self.models_used:
            self.models_used.append(completion.model_id)
        self.input_tokens += completion.input_tokens
        self.output_tokens += completion.output_tokens
        self.calls.append((completion.model_id, completion.input_tokens, completion.output_tokens))


@dataclass
class BlockContext:
    run: RunItem
    node: NodeItem
    inputs: list[NodeItem]
    files: ArtifactStore
    provider: ModelProvider
    usage: Usage = field(default_factory=Usage)
    saved: list[Artifact] = field(default_factory=list)  # the files this block stored, in order
    notes: list[str] = field(default_factory=list)  # why the block fell back, for the run's errors

    @property
    def asks_model(self) -> bool:
        """Whether a model answers this block: the offline provider's extractive answers are what it is meant to
        give, so a block falling back over them has nothing to report."""
        return provider_name(self.provider) != "offline"

    def note(self, reason: str) -> None:
        """Record why the block fell back (a model answer it could not use, a model call it went without): stored
        with its completion and listed in the run's errors at its end, the block still completed. Noted only
        when a model answers it (`asks_model`)."""
        if self.asks_model and reason not in self.notes:
            self.notes.append(reason)

    def material(self) -> str:
        """The inputs' outputs as one text, each under its block's name."""
        return "\n\n".join(f"## {n.name}\n{n.content or ''}".strip() for n in self.inputs)

    def input_sources(self) -> list[Source]:
        return [s for n in self.inputs for s in n.sources]

    def system_prompt(self) -> str:
        """The block's persona (canvas_core/agents/personas.py) with the requester's `agent_instructions`."""
        return system_prompt(self.node.persona, self.run.agent_instructions)

    def complete(self, prompt: str, role: str = "writer", system: str | None = None) -> Completion:
        """One model call, with this block's system prompt, recorded in its usage; asked once more for less when
        the answer was cut at the cap."""
        system = system or self.system_prompt()
        try:
            completion = self.provider.complete(system=system, prompt=prompt, role=role)
        except AnswerCutError as exc:
            logger.warning("A model answer was cut at the output cap; asking for a shorter one", extra={"role": role})
            shorter = prompt + SHORTER_ANSWER.format(cap=exc.cap, words=max(1, exc.cap // 2))
            completion = self.provider.complete(system=system, prompt=shorter, role=role)
        self.usage.record(completion)
        return completion

    def structured[T: BaseModel](self, prompt: str, schema: type[T], role: str, system: str | None = None) -> T:
        """One model call whose answer is an instance of `schema` (constrained to it where the provider can:
        providers/structured.py), recorded in this block's usage. StructuredOutputError when the answer is not one
        (cut at the cap included), for the caller to fall back on and say why."""
        system = system or self.system_prompt()
        try:
            answer = complete_structured(self.provider, system=system, prompt=prompt, role=role, schema=schema)
        except StructuredOutputError as exc:
            if exc.completion is not None:
                self.usage.record(exc.completion)
            raise
        except AnswerCutError as exc:
            raise StructuredOutputError(f"the answer was cut off at the output cap of {exc.cap} tokens") from exc
        self.usage.record(answer.completion)
        if answer.unconstrained:
            self.note(f"A structured answer was asked without its schema's constraint ({answer.unconstrained})")
        return answer.value

    def save_artifact(self, name: str, kind: str, data: bytes, content_type: str) -> Artifact:
        """Store a file this block produced under the account and run; it becomes a downloadable artifact."""
        artifact_id = new_id()
        key = f"artifacts/{self.run.account_id}/{self.run.run_id}/{artifact_id}/{name}"
        self.files.put(key, data, content_type)
        artifact = Artifact(id=artifact_id, type=kind, name=name, s3_key=key, size_bytes=len(data))
        self.saved.append(artifact)
        return artifact


@dataclass
class BlockOutput:
    content: str
    sources: list[Source] = field(default_factory=list)
    models_used: list[str] = field(default_factory=list)
    credits: int = 0
    artifacts: list[Artifact] = field(default_factory=list)
    url: str | None = None
