"""The plan as agents exchange it: steps with ids, block types and the ids of the steps whose outputs they read.

A model's plan is text; `parse_plan` turns it into these models or says precisely why it cannot, and nothing
downstream ever reads the raw text.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator

from canvas_core.models.catalog import BlockType

MAX_INSTRUCTIONS_CHARS = 4000


def block_type_name(value: object) -> object:
    """A block type as a model may write it (`Prompt`, `web_research`) in its `-block` form; other values as given."""
    if not isinstance(value, str):
        return value
    name = value.strip().lower().replace("_", "-").replace(" ", "-")
    return name if name.endswith("-block") else f"{name}-block"


class PlanStep(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    id: str = Field(min_length=1, max_length=64)
    type: str
    title: str = ""
    persona: str | None = None
    instructions: str = ""
    inputs: list[str] = Field(default_factory=list)
    # Set by the planner, never by a model: the upload a file- or image-block reads, the URL a web block fetches.
    upload_id: str | None = Field(default=None, exclude=True)
    url: str | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, value: object) -> object:
        return str(value).strip() if isinstance(value, int | str) else value

    @field_validator("inputs", mode="before")
    @classmethod
    def _inputs_as_text(cls, value: object) -> object:
        if value is None:
            return []
        if isinstance(value, str | int):
            value = [value]
        return [str(v).strip() for v in value] if isinstance(value, list) else value

    @field_validator("type", mode="before")
    @classmethod
    def _type_with_suffix(cls, value: object) -> object:
        return block_type_name(value)

    @field_validator("title", "instructions", mode="before")
    @classmethod
    def _text(cls, value: object) -> object:
        if value is None:
            return ""
        return value[:MAX_INSTRUCTIONS_CHARS] if isinstance(value, str) else value

    @property
    def block_type(self) -> BlockType | None:
        try:
            return BlockType(self.type)
        except ValueError:
            return None


class PlanSpec(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    steps: list[PlanStep]


class PlanParseError(ValueError):
    """A model's answer is not a plan; the message says why, for the next attempt's prompt."""


def parse_plan(text: str) -> PlanSpec:
    """The plan in a model's answer: one JSON object with `steps` (a bare array of steps is accepted too),
    possibly inside a Markdown code fence or after some prose."""
    data = _json_in(text)
    if isinstance(data, list):
        data = {"steps": data}
    if not isinstance(data, dict):
        raise PlanParseError("the answer is not a JSON object with a `steps` array")
    if "steps" not in data:
        for alias in ("blocks", "subtasks", "plan"):
            if isinstance(data.get(alias), list):
                data = {"steps": data[alias]}
                break
    try:
        spec = PlanSpec.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_url=False)[:5]
        )
        raise PlanParseError(f"the plan does not match the schema ({problems})") from None
    if not spec.steps:
        raise PlanParseError("the plan has no steps")
    return spec


def _json_in(text: str) -> object:
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, flags=re.DOTALL)
    candidates = [fenced.group(1)] if fenced else []
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start >= 0:
        end = max(text.rfind("}"), text.rfind("]"))
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    raise PlanParseError("the answer holds no valid JSON")


# ---- the plan a model is asked for, as a structured answer (providers/structured.py) -----------------------------

MODEL_MAX_STEPS = 12  # steps a model plans beyond the uploads: a schema a small model can fill
STEP_TITLE_CHARS = 80
STEP_INSTRUCTIONS_CHARS = 400


class _PlannedStepBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("type", mode="before", check_fields=False)
    @classmethod
    def _type_with_suffix(cls, value: object) -> object:
        return block_type_name(value)

    @field_validator("persona", mode="before", check_fields=False)
    @classmethod
    def _persona_case(cls, value: object) -> object:
        return value.strip().title() if isinstance(value, str) else value


def planned_canvas_schema(
    allowed: list[str], personas: list[str], upload_ids: list[str], max_steps: int = MODEL_MAX_STEPS
) -> type[BaseModel]:
    """The plan's schema for one request: a list of at most `max_steps` steps, each of an allowed block type, owned by
    a persona, reading uploads and steps by the ids the code gives them (`upload1`, `step1`, ...), so a model fills
    enums and short strings, never ids of its own."""
    readable = [*upload_ids, *(f"step{n}" for n in range(1, max_steps + 1))]
    # Enums of this request's values (typing's Literal, made at run time).
    kinds: Any = Literal.__getitem__(tuple(allowed))
    owners: Any = Literal.__getitem__(tuple(personas))
    ids: Any = Literal.__getitem__(tuple(readable))
    step: Any = create_model(
        "PlannedStep",
        __base__=_PlannedStepBase,
        type=(kinds, Field(description="the block type")),
        title=(str, Field(min_length=1, max_length=STEP_TITLE_CHARS)),
        persona=(owners, ...),
        instructions=(str, Field(max_length=STEP_INSTRUCTIONS_CHARS)),
        reads=(
            list[ids],
            Field(max_length=8, description="the ids of the uploads and earlier steps whose outputs this step needs"),
        ),
    )
    return create_model(
        "PlannedCanvas",
        __config__=ConfigDict(extra="forbid"),
        steps=(list[step], Field(min_length=1, max_length=max_steps)),
    )


def planned_steps(answer: BaseModel) -> list[PlanStep]:
    """A structured plan as the planner's steps: `stepN` for the Nth, reading what it named."""
    steps = getattr(answer, "steps", [])
    return [
        PlanStep(
            id=f"step{n}",
            type=s.type,
            title=s.title,
            persona=s.persona,
            instructions=s.instructions,
            inputs=list(dict.fromkeys(s.reads)),
        )
        for n, s in enumerate(steps, start=1)
    ]
