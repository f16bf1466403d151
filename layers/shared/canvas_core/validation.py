"""The rules of POST /v1/run: what a valid request is, and the message a client gets when it is not.
A rejected request creates nothing and costs nothing: these checks run before any write."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any
from urllib.parse import urlparse

from aws_lambda_powertools.event_handler.openapi.params import UploadFile
from pydantic import ConfigDict, Field, field_validator, model_validator

from canvas_core.errors import (
    BadRequestError,
    InvalidBlocksError,
    InvalidFileError,
    InvalidTemplateError,
    PayloadTooLargeError,
)
from canvas_core.models.api import CreateRunRequest, RerunBlockRequest, UploadedFile
from canvas_core.models.base import RequestRefused
from canvas_core.models.catalog import DOCUMENT_EXTENSIONS, IMAGE_EXTENSIONS, BlockType, Template
from canvas_core.settings import api_settings
from canvas_core.textsafety import MAX_JSON_DEPTH, json_depth, strip_control

MAX_AGENT_INSTRUCTIONS_CHARS = 10_000
VALID_TEMPLATES = [t.value for t in Template]
VALID_BLOCKS = [b.value for b in BlockType]
_BLOCKS_SHAPE = 'expected a JSON array of block type identifiers, e.g. ["prompt-block","text-block"]'

_CONTENT_TYPES = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "svg": "image/svg+xml",
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "csv": "text/csv",
    "txt": "text/plain",
    "md": "text/markdown",
    "yaml": "application/yaml",
    "yml": "application/yaml",
    "json": "application/json",
    "zip": "application/zip",
}


def max_body_bytes() -> int:
    """The largest request body read: the files, and room for the text fields and the multipart framing."""
    return api_settings().max_upload_bytes + 1024 * 1024


# What the request bodies' schemas say of a field they do not list: the server refuses it (400).
CLOSED_BODY = ConfigDict(json_schema_extra={"additionalProperties": False})


class CreateRunForm(CreateRunRequest):
    """The form of POST /v1/run, multipart/form-data or application/x-www-form-urlencoded. An empty field means
    "not given", as HTML forms send it. A refused request is answered with the first refusal, in field order; a
    field the form does not take is refused before any."""

    model_config = CLOSED_BODY

    prompt: str = Field(
        description="Required; at most MAX_PROMPT_CHARS characters (20,000 unless configured). Surrounding white "
        "space is trimmed and control characters are dropped; a blank prompt is refused.",
        # What the server refuses as blank: nothing but white space.
        json_schema_extra={"minLength": 1, "pattern": r"\S"},
    )
    template: Template = Field(default=Template.AUTO, description="Ignored in planning when `blocks` is given")
    blocks: list[str] | None = Field(
        default=None,
        description='A JSON array of block type identifiers, e.g. ["prompt-block","text-block"]; duplicates are '
        "dropped. Overrides `template`.",
    )
    agent_instructions: str | None = Field(
        default=None, description=f"At most {MAX_AGENT_INSTRUCTIONS_CHARS:,} characters"
    )
    webhook_url: str | None = Field(
        default=None,
        json_schema_extra={"format": "uri"},
        description="An absolute http(s) URL; accepted and stored, not honored (as the contract says)",
    )
    files: list[UploadedFile] = Field(
        default_factory=list,
        description="At most MAX_FILES files (10 unless configured), each a repeated `files` part",
    )
    review: bool = Field(
        default=False,
        description="Extension: `true` plans the run and waits for POST /v1/run/{run_id}/approve (or cancel) before "
        "any block runs; `false` (the default) runs it at once",
    )

    @model_validator(mode="before")
    @classmethod
    def _known_fields_and_prompt(cls, form: Any) -> Any:
        if not isinstance(form, dict):
            return form
        # A misspelt field (`instructions`, `template_name`) would otherwise start, and charge for, a run without it.
        unknown = sorted(name for name in form if name not in cls.model_fields)
        if unknown:
            raise RequestRefused(
                BadRequestError(
                    f"Unknown field {', '.join(map(repr, unknown))}: the form takes {', '.join(cls.model_fields)}"
                )
            )
        if form.get("prompt") is None:
            raise RequestRefused(BadRequestError("prompt is required"))
        return form

    @field_validator("prompt", mode="before")
    @classmethod
    def _prompt(cls, value: str) -> str:
        max_chars = api_settings().max_prompt_chars
        # Control characters are dropped, not refused: no document can hold them and no request means them.
        prompt = strip_control(value).strip()
        if not prompt:
            raise RequestRefused(BadRequestError("prompt must not be blank"))
        if len(prompt) > max_chars:
            raise RequestRefused(BadRequestError(f"prompt is too long: {len(prompt)} characters (maximum {max_chars})"))
        return prompt

    @field_validator("template", mode="before", json_schema_input_type=Template)
    @classmethod
    def _template(cls, value: str | None) -> str:
        if value is None or not value.strip():
            return Template.AUTO.value
        if value not in VALID_TEMPLATES:
            raise RequestRefused(InvalidTemplateError(value, VALID_TEMPLATES))
        return value

    @field_validator("blocks", mode="before", json_schema_input_type=str)
    @classmethod
    def _blocks(cls, value: str | None) -> list[str] | None:
        if value is None or not value.strip():
            return None
        if json_depth(value) > MAX_JSON_DEPTH:
            raise RequestRefused(
                InvalidBlocksError(f"Invalid blocks: nested more than {MAX_JSON_DEPTH} levels deep; {_BLOCKS_SHAPE}")
            )
        try:
            parsed = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            parsed = None
        if not isinstance(parsed, list) or not all(isinstance(b, str) for b in parsed):
            raise RequestRefused(InvalidBlocksError(f"Invalid blocks: {_BLOCKS_SHAPE}"))
        if not parsed:
            raise RequestRefused(
                InvalidBlocksError("Invalid blocks: the array is empty; omit blocks to let the template decide")
            )
        for block in parsed:
            if block not in VALID_BLOCKS:
                hint = f" (did you mean '{block}-block'?)" if f"{block}-block" in VALID_BLOCKS else ""
                raise RequestRefused(
                    InvalidBlocksError(
                        f"Invalid blocks: unknown block type '{block}'{hint}. "
                        f"Valid block types: {', '.join(VALID_BLOCKS)}"
                    )
                )
        return list(dict.fromkeys(parsed))

    @field_validator("agent_instructions", mode="before", json_schema_input_type=str)
    @classmethod
    def _agent_instructions(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if len(value) > MAX_AGENT_INSTRUCTIONS_CHARS:
            raise RequestRefused(
                BadRequestError(
                    f"agent_instructions is too long: {len(value)} characters (maximum {MAX_AGENT_INSTRUCTIONS_CHARS})"
                )
            )
        return strip_control(value).strip() or None

    @field_validator("webhook_url", mode="before", json_schema_input_type=str)
    @classmethod
    def _webhook_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        parsed = urlparse(value.strip())
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise RequestRefused(BadRequestError("Invalid webhook_url: expected an absolute http or https URL"))
        return value.strip()

    @field_validator("review", mode="before", json_schema_input_type=bool)
    @classmethod
    def _review(cls, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        text = str(value or "").strip().lower()
        if text in ("", "false"):
            return False
        if text == "true":
            return True
        raise RequestRefused(BadRequestError("Invalid review: expected true or false"))

    @field_validator("files", mode="before", json_schema_input_type=list[UploadFile])
    @classmethod
    def _files(cls, parts: list[UploadFile]) -> list[UploadedFile]:
        settings = api_settings()
        if len(parts) > settings.max_files:
            raise RequestRefused(BadRequestError(f"Too many files: {len(parts)} (maximum {settings.max_files})"))
        total = sum(len(p.content) for p in parts)
        if total > settings.max_upload_bytes:
            raise RequestRefused(
                PayloadTooLargeError(f"Files too large: {total} bytes in all (maximum {settings.max_upload_bytes})")
            )
        return [_file(part, settings.max_file_bytes) for part in parts]


# A re-run's body holds its instructions and little else; past this it is refused unread (413).
MAX_RERUN_BODY_BYTES = 1024 * 1024


class RerunBlockForm(RerunBlockRequest):
    """The body of POST /v1/canvas/{canvas_id}/blocks/{block_id}/rerun: a JSON object, or a form. `instructions`
    are the chosen block's new instructions, held to agent_instructions' length; absent or blank, the block runs
    again with those it had."""

    model_config = CLOSED_BODY

    instructions: str | None = Field(
        default=None,
        description=f"The block's new instructions; at most {MAX_AGENT_INSTRUCTIONS_CHARS:,} characters. Surrounding "
        "white space is trimmed and control characters are dropped. Absent or blank: the block's own instructions.",
    )

    @model_validator(mode="before")
    @classmethod
    def _only_instructions(cls, body: Any) -> Any:
        # A misspelt field would otherwise re-run the block, and charge for it, on its old instructions.
        return only_instructions(body)

    @field_validator("instructions", mode="before", json_schema_input_type=str)
    @classmethod
    def _instructions(cls, value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            raise RequestRefused(BadRequestError("instructions must be a string"))
        text = strip_control(value).strip()
        if len(text) > MAX_AGENT_INSTRUCTIONS_CHARS:
            raise RequestRefused(
                BadRequestError(
                    f"instructions is too long: {len(text)} characters (maximum {MAX_AGENT_INSTRUCTIONS_CHARS})"
                )
            )
        return text or None


def _file(part: UploadFile, max_bytes: int) -> UploadedFile:
    name = (part.filename or "").replace("\\", "/").rsplit("/", 1)[-1].strip()
    data = part.content
    if not name:
        raise RequestRefused(InvalidFileError("A file part has no file name"))
    extension = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if extension not in IMAGE_EXTENSIONS | DOCUMENT_EXTENSIONS:
        allowed = ", ".join(sorted(IMAGE_EXTENSIONS | DOCUMENT_EXTENSIONS))
        raise RequestRefused(InvalidFileError(f"Unsupported file type: {name}. Allowed extensions: {allowed}"))
    if not data:
        raise RequestRefused(InvalidFileError(f"File {name} is empty"))
    if len(data) > max_bytes:
        raise RequestRefused(PayloadTooLargeError(f"File {name} is too large: {len(data)} bytes (maximum {max_bytes})"))
    if extension == "json" and json_depth(_text(data) or "") > MAX_JSON_DEPTH:
        raise RequestRefused(InvalidFileError(f"File {name} is nested too deeply: more than {MAX_JSON_DEPTH} levels"))
    if not _content_matches(extension, data):
        raise RequestRefused(InvalidFileError(f"File {name} does not contain what its extension says ({extension})"))
    return UploadedFile(name=name, extension=extension, content_type=_CONTENT_TYPES[extension], data=data)


def _content_matches(extension: str, data: bytes) -> bool:
    """Check the bytes against the format the extension names (magic numbers, or well-formed text)."""
    head = data[:16]
    match extension:
        case "png":
            return head.startswith(b"\x89PNG\r\n\x1a\n")
        case "jpg" | "jpeg":
            return head.startswith(b"\xff\xd8\xff")
        case "gif":
            return head.startswith((b"GIF87a", b"GIF89a"))
        case "webp":
            return head[:4] == b"RIFF" and head[8:12] == b"WEBP"
        case "pdf":
            return data[:1024].lstrip().startswith(b"%PDF-")
        case "zip":
            return head.startswith((b"PK\x03\x04", b"PK\x05\x06"))
        case "docx" | "xlsx":
            return head.startswith(b"PK\x03\x04") and _zip_has(data, "word/" if extension == "docx" else "xl/")
        case "svg":
            text = _text(data)
            return text is not None and "<svg" in text[:4096].lower()
        case "json":
            text = _text(data)
            try:
                json.loads(text or "")
            except (json.JSONDecodeError, RecursionError):
                return False
            return True
        case _:  # csv, txt, md, yaml, yml: readable text
            return _text(data) is not None


def _text(data: bytes) -> str | None:
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None


def _zip_has(data: bytes, prefix: str) -> bool:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return any(name.startswith(prefix) for name in archive.namelist())
    except zipfile.BadZipFile:
        return False


def only_instructions(body: Any) -> Any:
    """A body of `instructions` alone (an empty `files` part of a form aside): any other field is refused, 400."""
    if isinstance(body, dict):
        unknown = sorted(k for k in body if k != "instructions" and not (k == "files" and not body[k]))
        if unknown:
            raise RequestRefused(
                BadRequestError(f"Unknown field {', '.join(map(repr, unknown))}: the body takes only instructions")
            )
    return body
