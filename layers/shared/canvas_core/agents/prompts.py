"""The Planner's prompts: the system prompt that sets its rules (the constraint, the block catalogue, the JSON
it must answer with, the requester's instructions) and the request it plans, and the retry after a bad answer."""

from __future__ import annotations

import json

from canvas_core.agents.catalog import BLOCK_GUIDE
from canvas_core.agents.checks import ANSWER_TITLE, Constraint
from canvas_core.agents.personas import PERSONAS, instructions_clause
from canvas_core.agents.schema import PlanStep
from canvas_core.models.catalog import BlockType

EXAMPLE = {
    "steps": [
        {
            "type": "web-research-block",
            "title": "Research: tide pool ecology",
            "persona": "Researcher",
            "instructions": "Search the web and gather sources on tide pool ecology",
            "reads": [],
        },
        {
            "type": "prompt-block",
            "title": "Which animals live where",
            "persona": "Analyst",
            "instructions": "From the research, explain which animals live in which zone of a tide pool and why",
            "reads": ["step1"],
        },
        {
            "type": "text-block",
            "title": ANSWER_TITLE,
            "persona": "Writer",
            "instructions": "Write the answer to the request",
            "reads": ["step2"],
        },
    ]
}


def planner_system_prompt(constraint: Constraint, agent_instructions: str | None, max_blocks: int) -> str:
    allowed = [b for b in BlockType if b in constraint.allowed and b != BlockType.FILE]
    catalogue = "\n".join(f"- {b.value}: {BLOCK_GUIDE[b]}" for b in allowed)
    personas = ", ".join(p for p in PERSONAS if p != "Planner")
    rules = [
        "Split the request into subtasks, give each a block of a type listed below, and wire the blocks into a "
        "directed acyclic graph: a step's `reads` are the ids of the earlier steps (step1 is the first step, step2 "
        "the second, ...) and uploaded files whose outputs it needs, so outputs carry forward.",
        f"Use only these block types:\n{catalogue}",
        f"Use at most {max_blocks} steps in all, uploaded files included; fewer is better when it does the job.",
        "Give every step an owner from these personas: " + personas + ".",
    ]
    if BlockType.TEXT in constraint.allowed:
        rules.append(
            f"End the analysis with one text-block titled '{ANSWER_TITLE}' owned by the Writer: it reads the "
            "findings and writes the answer."
        )
    if constraint.deliverable is not None:
        rules.append(
            f"The last step must be the {constraint.deliverable.value} (the deliverable); it reads the Writer's "
            "answer and nothing reads it."
        )
    if constraint.explicit:
        rules.append("The requester chose these block types explicitly: use each of them.")
    parts = [
        "You are the Planner agent of a multi-agent research team.",
        "\n".join(f"{i}. {rule}" for i, rule in enumerate(rules, start=1)),
        "Answer with one JSON object and nothing else, shaped like this example:\n" + json.dumps(EXAMPLE, indent=1),
        instructions_clause(agent_instructions),
    ]
    if agent_instructions:
        parts.append("Plan so that the blocks can meet those instructions (e.g. a review step when rigour is asked).")
    return "\n\n".join(p for p in parts if p)


def planner_request(prompt: str, template: str, uploads: list[PlanStep]) -> str:
    lines = [f"Request:\n{prompt}", "", f"Template: {template}"]
    if uploads:
        lines += ["", "Uploaded files (already blocks; use their ids as inputs):"]
        lines += [f"- {u.id}: {u.title} ({u.type})" for u in uploads]
    lines += ["", "Plan the steps."]
    return "\n".join(lines)


def replan_request(request: str, answer: str, reason: str) -> str:
    excerpt = answer if len(answer) <= 2000 else answer[:2000] + " ..."
    return (
        f"{request}\n\nYour previous answer could not be used: {reason}.\n"
        f"Previous answer:\n{excerpt}\n\nAnswer again with only the JSON object."
    )
