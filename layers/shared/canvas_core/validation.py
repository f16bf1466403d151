"""The rules of POST /v1/run: what a valid request is, and the message a client gets when it is not.
A rejected request creates nothing and costs nothing: these checks run before any write."""

from __future__ import annotations

import io
import json
import zipfile
from urllib.parse import urlparse

from canvas_core.config import Settings
from canvas_core.errors import (
    BadRequestError,
    InvalidBlocksError,
    InvalidFileError,
    InvalidTemplateError,
    PayloadTooLargeError,
)
from canvas_core.models.api import CreateRunRequest, UploadedFile
from canvas_core.models.catalog import DOCUMENT_EXTENSIONS, IMAGE_EXTENSIONS, BlockType, Template
from canvas_core.models.forms import FilePart, Form
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


def validate_create_request(form: Form, settings: Settings) -> CreateRunRequest:
    fields = form.fields
    return CreateRunRequest(
        prompt=_prompt(fields.get("prompt"), settings.max_prompt_chars),
        template=_template(fields.get("template")),
        blocks=_blocks(fields.get("blocks")),
        agent_instructions=_agent_instructions(fields.get("agent_instructions")),
        webhook_url=_webhook_url(fields.get("webhook_url")),
        files=_files(form.files, settings),
    )


def _prompt(value: str | None, max_chars: int) -> str:
    if value is None:
        raise BadRequestError("prompt is required")
    # Control characters are dropped, not refused: no document can hold them and no request means them.
    prompt = strip_control(value).strip()
    if not prompt:
        raise BadRequestError("prompt must not be blank")
    if len(prompt) > max_chars:
        raise BadRequestError(f"prompt is too long: {len(prompt)} characters (maximum {max_chars})")
    return prompt


def _template(value: str | None) -> str:
    # An empty form field means "not given", as HTML forms send it.
    if value is None or not value.strip():
        return Template.AUTO.value
    if value not in VALID_TEMPLATES:
        raise InvalidTemplateError(value, VALID_TEMPLATES)
    return value


def _blocks(value: str | None) -> list[str] | None:
    if value is None or not value.strip():
        return None
    if json_depth(value) > MAX_JSON_DEPTH:
        raise InvalidBlocksError(f"Invalid blocks: nested more than {MAX_JSON_DEPTH} levels deep; {_BLOCKS_SHAPE}")
    try:
        parsed = json.loads(value)
    except (json.JSONDecodeError, RecursionError):
        parsed = None
    if not isinstance(parsed, list) or not all(isinstance(b, str) for b in parsed):
        raise InvalidBlocksError(f"Invalid blocks: {_BLOCKS_SHAPE}")
    if not parsed:
        raise InvalidBlocksError("Invalid blocks: the array is empty; omit blocks to let the template decide")
    for block in parsed:
        if block not in VALID_BLOCKS:
            hint = f" (did you mean '{block}-block'?)" if f"{block}-block" in VALID_BLOCKS else ""
            raise InvalidBlocksError(
                f"Invalid blocks: unknown block type '{block}'{hint}. Valid block types: {', '.join(VALID_BLOCKS)}"
            )
    return list(dict.fromkeys(parsed))


def _agent_instructions(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    if len(value) > MAX_AGENT_INSTRUCTIONS_CHARS:
        raise BadRequestError(
            f"agent_instructions is too long: {len(value)} characters (maximum {MAX_AGENT_INSTRUCTIONS_CHARS})"
        )
    return strip_control(value).strip() or None


def _webhook_url(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    parsed = urlparse(value.strip())
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise BadRequestError("Invalid webhook_url: expected an absolute http or https URL")
    return value.strip()


def _files(parts: list[FilePart], settings: Settings) -> list[UploadedFile]:
    if len(parts) > settings.max_files:
        raise BadRequestError(f"Too many files: {len(parts)} (maximum {settings.max_files})")
    total = sum(len(p.data) for p in parts)
    if total > settings.max_upload_bytes:
        raise PayloadTooLargeError(f"Files too large: {total} bytes in all (maximum {settings.max_upload_bytes})")
    return [_file(part, settings.max_file_bytes) for part in parts]


def _file(part: FilePart, max_bytes: int) -> UploadedFile:
    name = part.filename.replace("\\", "/").rsplit("/", 1)[-1].strip()
    if not name:
        raise InvalidFileError("A file part has no file name")
    extension = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if extension not in IMAGE_EXTENSIONS | DOCUMENT_EXTENSIONS:
        allowed = ", ".join(sorted(IMAGE_EXTENSIONS | DOCUMENT_EXTENSIONS))
        raise InvalidFileError(f"Unsupported file type: {name}. Allowed extensions: {allowed}")
    if not part.data:
        raise InvalidFileError(f"File {name} is empty")
    if len(part.data) > max_bytes:
        raise PayloadTooLargeError(f"File {name} is too large: {len(part.data)} bytes (maximum {max_bytes})")
    if extension == "json" and json_depth(_text(part.data) or "") > MAX_JSON_DEPTH:
        raise InvalidFileError(f"File {name} is nested too deeply: more than {MAX_JSON_DEPTH} levels")
    if not _content_matches(extension, part.data):
        raise InvalidFileError(f"File {name} does not contain what its extension says ({extension})")
    return UploadedFile(name=name, extension=extension, content_type=_CONTENT_TYPES[extension], data=part.data)


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
