"""The persona agents that own blocks: who they are, which model role they call with, and their system prompt.

Every persona's system prompt carries the requester's `agent_instructions` (tone, rigour, audience, citation
requirements), so they reach every block, whatever its type.
"""

from __future__ import annotations

from dataclasses import dataclass

from canvas_core.models.catalog import BLOCK_CATALOG, BlockType


@dataclass(frozen=True)
class Persona:
    name: str
    role: str  # the model role it calls with (providers map a role to a model id)
    charge: str  # what it does, in the words its system prompt uses


PERSONAS: dict[str, Persona] = {
    p.name: p
    for p in (
        Persona("Planner", "planner", "You split a request into subtasks and wire the blocks that do them."),
        Persona(
            "Researcher",
            "researcher",
            "You gather and read sources and report what they say, faithfully and with their references.",
        ),
        Persona("Librarian", "librarian", "You read the files the requester uploaded and make their content findable."),
        Persona(
            "Analyst",
            "analyst",
            "You work through one subtask: compare, quantify and reason from the material, separating what it "
            "shows from what you infer.",
        ),
        Persona(
            "Reviewer",
            "reviewer",
            "You check the team's findings against the material: unsupported claims, gaps, contradictions and "
            "missing citations, and what the final answer must fix.",
        ),
        Persona(
            "Writer",
            "writer",
            "You turn the team's material into the answer the requester asked for, citing the sources it rests on.",
        ),
        Persona("Designer", "designer", "You design visual deliverables: images, pages and slides."),
        Persona("Engineer", "engineer", "You build working software deliverables: apps and prototypes."),
    )
}

# Who runs each block type: its entry in the block catalogue (models/catalog.py).
BLOCK_PERSONAS: dict[BlockType, str] = {kind: spec.persona for kind, spec in BLOCK_CATALOG.items()}


def persona_for(block_type: BlockType | str) -> str:
    return BLOCK_PERSONAS[BlockType(block_type)]


def find_persona(name: str | None) -> Persona | None:
    """The persona called `name` (any case), or None."""
    if not name:
        return None
    return next((p for p in PERSONAS.values() if p.name.lower() == name.strip().lower()), None)


def role_of(persona_name: str | None, default: str = "writer") -> str:
    persona = find_persona(persona_name)
    return persona.role if persona else default


def system_prompt(persona_name: str | None, agent_instructions: str | None, duty: str = "") -> str:
    """A persona's system prompt: who it is, what it does, the requester's instructions, and its duty here."""
    persona = find_persona(persona_name)
    name = persona.name if persona else (persona_name or "Assistant")
    parts = [f"You are the {name} agent of a multi-agent research team, working on one block of a canvas."]
    if persona:
        parts.append(persona.charge)
    parts.append(instructions_clause(agent_instructions))
    if duty:
        parts.append(duty)
    return "\n".join(p for p in parts if p)


def instructions_clause(agent_instructions: str | None) -> str:
    if not agent_instructions or not agent_instructions.strip():
        return ""
    return (
        "Instructions from the requester, which every agent follows (tone, rigour, audience, citations): "
        + agent_instructions.strip()
    )
