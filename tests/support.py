"""Helpers every test tier shares: sample events from events/, multipart bodies, and the environment template.yaml
gives a function."""

from __future__ import annotations

import copy
import functools
import json
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from canvas_local.template import Template

ROOT = Path(__file__).resolve().parent.parent
EVENTS = ROOT / "events"


def load_event(name: str, **changes: Any) -> dict[str, Any]:
    """A fresh copy of events/<name>.json. `api_key` sets (or, as None, removes) the X-API-KEY header;
    `path_parameters` replaces the path parameters and rewrites the path; other keys replace top-level fields."""
    event = copy.deepcopy(json.loads((EVENTS / f"{name}.json").read_text()))
    if "api_key" in changes:
        _set_header(event, "X-API-KEY", changes.pop("api_key"))
    if "content_type" in changes:
        _set_header(event, "Content-Type", changes.pop("content_type"))
    if "path_parameters" in changes:
        params = changes.pop("path_parameters")
        event["pathParameters"] = params
        path = event["resource"]
        for key, value in params.items():
            path = path.replace("{" + key + "}", value)
        event["path"] = path
    event.update(changes)
    return event


def _set_header(event: dict[str, Any], name: str, value: str | None) -> None:
    for key in ("headers", "multiValueHeaders"):
        event[key] = {k: v for k, v in event[key].items() if k.lower() != name.lower()}
        if value is not None:
            event[key][name] = value if key == "headers" else [value]


def multipart(fields: dict[str, str], files: list[tuple[str, bytes, str]] = ()) -> tuple[str, bytes]:
    """(content type, body) of a multipart/form-data request with repeated `files` parts."""
    boundary = uuid.uuid4().hex
    chunks = []
    for name, value in fields.items():
        chunks.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode() + value.encode()
        )
    for filename, data, content_type in files:
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{filename}"\r\n'
            f"Content-Type: {content_type}\r\n\r\n"
        )
        chunks.append(head.encode() + data)
    body = b"\r\n".join(chunks) + f"\r\n--{boundary}--\r\n".encode()
    return f"multipart/form-data; boundary={boundary}", body


def body_of(response: dict[str, Any]) -> dict[str, Any]:
    return json.loads(response["body"])


def header(response: dict[str, Any], name: str) -> str | None:
    for key, value in (response.get("headers") or {}).items():
        if key.lower() == name.lower():
            return value
    for key, values in (response.get("multiValueHeaders") or {}).items():
        if key.lower() == name.lower():
            return values[0]
    return None


# Small real files of the accepted kinds.
PNG_1X1 = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201a5f6d0d10000000049454e44ae426082"
)


@functools.cache
def template() -> Template:
    from canvas_local.template import Template

    return Template(ROOT / "template.yaml")


def function_environment(logical_id: str) -> dict[str, str]:
    """The variables template.yaml gives a function (its entry and Globals), its resources named as the embedded
    stack names them."""
    return template().function_environment(logical_id)
