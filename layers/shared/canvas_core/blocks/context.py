"""What a block implementation is given (its node, its inputs, the run) and what it gives back."""

from __future__ import annotations

from dataclasses import dataclass, field

from canvas_core.adapters.artifacts import ArtifactStore
from canvas_core.models.items import Artifact, NodeItem, RunItem, Source
from canvas_core.providers.base import ModelProvider


@dataclass
class BlockContext:
    run: RunItem
    node: NodeItem
    inputs: list[NodeItem]
    files: ArtifactStore
    provider: ModelProvider

    def material(self) -> str:
        """The inputs' outputs as one text, each under its block's name."""
        return "\n\n".join(f"## {n.name}\n{n.content or ''}".strip() for n in self.inputs)

    def system_prompt(self) -> str:
        persona = self.node.persona or "Assistant"
        parts = [f"You are the {persona} agent of a research team, working on one block of a canvas."]
        if self.run.agent_instructions:
            parts.append(f"Instructions from the requester: {self.run.agent_instructions}")
        return "\n".join(parts)


@dataclass
class BlockOutput:
    content: str
    sources: list[Source] = field(default_factory=list)
    models_used: list[str] = field(default_factory=list)
    credits: int = 0
    artifacts: list[Artifact] = field(default_factory=list)
    url: str | None = None
