"""Structured output: a pydantic model in, a validated instance out, whatever the provider.

Each provider constrains the model to the model's JSON schema in its own way, where it can:

- `openai`: `response_format` with the schema, in the form OPENAI_STRUCTURED_OUTPUT names: `json_schema`
  (the default: `{"type": "json_schema", "json_schema": {"name", "schema", "strict": true}}`, which OpenAI, vLLM,
  Ollama and llama.cpp's server take), `json_object` (llama-cpp-python's server: `{"type": "json_object",
  "schema": ...}`) or `none`;
- `bedrock`: Converse with one tool whose `inputSchema` is the schema, and `toolChoice` forcing that tool;
- any other (`offline`, a test's fake): none; the answer's JSON is read and checked.

An endpoint that refuses the constraint is asked again without it, once, and from then on for that endpoint and
model (`Structured.unconstrained` says why, for the run's errors). Either way the answer is validated against the
model: an answer that is not JSON, or not of the schema, is `StructuredOutputError` with the reason, never used.
Schemas are sent as pydantic makes them, made strict (every property required, no other property, no defaults):
small schemas (enums, bounded lists, short strings) are what a small model can fill.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from canvas_core.providers.base import Completion


class StructuredOutputError(ValueError):
    """The answer is not an instance of the schema; the message says why (for a retry's prompt, the run's errors)."""

    def __init__(self, reason: str, completion: Completion | None = None):
        super().__init__(reason)
        self.completion = completion


@dataclass(frozen=True)
class Structured[T: BaseModel]:
    value: T
    completion: Completion
    unconstrained: str = ""  # why the model was asked without the schema's constraint, when it was


def complete_structured[T: BaseModel](
    provider: object, *, system: str, prompt: str, role: str, schema: type[T], name: str = ""
) -> Structured[T]:
    """The model's answer to `prompt` as an instance of `schema`, constrained natively where the provider can; a
    provider without the feature answers in text, asked for JSON, and its JSON is read. StructuredOutputError when
    the answer does not validate (the completion is on the error, for its usage)."""
    name = name or schema.__name__
    unconstrained = ""
    native = getattr(provider, "complete_structured", None)
    if native is not None:
        completion, unconstrained = native(system=system, prompt=prompt, role=role, schema=schema, name=name)
    else:
        ask = f"{prompt}\n\nAnswer with one JSON object of this JSON schema, and nothing else:\n{schema_text(schema)}"
        completion = provider.complete(system=system, prompt=ask, role=role)  # type: ignore[attr-defined]
    return Structured(value=parse(completion, schema), completion=completion, unconstrained=unconstrained)


def parse[T: BaseModel](completion: Completion, schema: type[T]) -> T:
    """The answer's JSON object as an instance of `schema`, or StructuredOutputError saying why not."""
    try:
        return schema.model_validate(json_object(completion.text))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'the answer'}: {e['msg']}"
            for e in exc.errors(include_url=False)[:3]
        )
        raise StructuredOutputError(f"the answer does not match the schema ({problems})", completion) from None
    except ValueError as exc:
        raise StructuredOutputError(str(exc), completion) from None


def json_object(text: str) -> Any:
    """The JSON object in a model's answer: the whole answer, else inside a code fence, else from its first `{`
    to its last `}`."""
    text = (text or "").strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, flags=re.DOTALL)
    candidates = [text] + ([fenced.group(1)] if fenced else [])
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    raise ValueError("the answer holds no valid JSON")


BOUNDS = (
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
)


def strict_schema(schema: type[BaseModel], portable: bool = False) -> dict[str, Any]:
    """The model's JSON schema as strict structured output takes it: every object's properties all required (an
    optional one may be null), no other property allowed, no defaults or titles; `portable`, without length, size
    and range bounds too (some endpoints' strict modes refuse them)."""
    document = copy.deepcopy(schema.model_json_schema())

    def tighten(node: Any) -> None:
        if isinstance(node, dict):
            # Annotations, not properties of those names: a property's schema is a dict.
            for annotation in ("default", "title", *(BOUNDS if portable else ())):
                if annotation in node and not isinstance(node[annotation], dict):
                    del node[annotation]
            if node.get("type") == "object" and "properties" in node:
                node["required"] = list(node["properties"])
                node["additionalProperties"] = False
            for value in node.values():
                tighten(value)
        elif isinstance(node, list):
            for value in node:
                tighten(value)

    tighten(document)
    return document


def schema_text(schema: type[BaseModel]) -> str:
    return json.dumps(strict_schema(schema), separators=(",", ":"))


def refused_constraint(message: str) -> bool:
    """Whether an endpoint's error says it does not take the constraint (rather than refusing the call itself)."""
    return bool(re.search(r"response_format|json_schema|structured|toolconfig|tool use|tool_choice|tools?\b", message,
                          re.IGNORECASE))  # fmt: skip
