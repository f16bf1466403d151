"""Request bodies as the API reads them, for Powertools to validate into a route's body model: a form,
multipart/form-data (files are repeated `files` parts) or application/x-www-form-urlencoded, and where a route
says so a JSON object. Through API Gateway, multipart bodies arrive base64-encoded.

Powertools 3.37 reads form bodies too (`Form`, `File`, `UploadFile`), but not as the contract needs, so the bytes
are read here and Powertools does the rest (validation into the model, the OpenAPI document). It chooses its parser
by the Content-Type's prefix alone: a JSON body, or one without a Content-Type, is parsed as JSON, where POST /v1/run
answers the first 415 and reads the second as a form. It decodes base64 without checking it, and limits no size
before parsing (413). Its multipart parser splits the body on the boundary, finds a part's `name="` by substring
(so a `filename="` before it is taken for the name) and answers a field that is not UTF-8 with a generic message;
and a single `files` part reaches the route as one file, not a list of one."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from aws_lambda_powertools.event_handler.openapi.params import Body, UploadFile
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent

from canvas_core.errors import BadRequestError, PayloadTooLargeError, UnsupportedMediaTypeError
from canvas_core.textsafety import MAX_JSON_DEPTH, json_depth

JSON = "application/json"
MULTIPART = "multipart/form-data"
URLENCODED = "application/x-www-form-urlencoded"


class FormBody(Body):  # type: ignore[misc]  # Powertools' Body subclasses pydantic's final FieldInfo too
    """A route's body, read by `read_body`: a form, or with `accepts_json` a JSON object too (the OpenAPI document
    lists each media type); a body of more than `max_bytes` bytes answers 413."""

    def __init__(
        self, *, max_bytes: int | Callable[[], int], accepts_json: bool = False, description: str | None = None
    ) -> None:
        self.media_types = ((JSON,) if accepts_json else ()) + (MULTIPART, URLENCODED)
        super().__init__(media_type=self.media_types[0], description=description)
        self.limit = max_bytes

    def max_bytes(self) -> int:
        return self.limit() if callable(self.limit) else self.limit


def read_body(event: BaseProxyEvent, spec: FormBody) -> dict[str, Any]:
    """The body's fields by name (the first of a repeated field), with a form's files, in order, under `files`."""
    # Imported by the routes that read a form only, not by every API function's cold start.
    from python_multipart.multipart import parse_options_header

    body = body_bytes(event.body, bool(event.is_base64_encoded))
    max_bytes = spec.max_bytes()
    if len(body) > max_bytes:
        raise PayloadTooLargeError(f"Request body too large: {len(body)} bytes (maximum {max_bytes})")
    media_type, params = parse_options_header(event.headers.get("content-type") or "")
    media = media_type.decode("latin-1").lower()
    if media == JSON and JSON in spec.media_types:
        return _json_object(body)
    if media == MULTIPART:
        boundary = params.get(b"boundary")
        if not boundary:
            raise BadRequestError("multipart/form-data body without a boundary")
        fields, files = _parse_multipart(boundary, body)
        return fields | {"files": files}
    if media in (URLENCODED, "") and b"\x00" not in body:
        return _parse_urlencoded(body) | {"files": []}
    readable = f"{', '.join(spec.media_types[:-1])} or {spec.media_types[-1]}"
    raise UnsupportedMediaTypeError(f"Unsupported Content-Type: {media}. Send {readable}")


def body_bytes(body: str | None, is_base64: bool) -> bytes:
    if not body:
        return b""
    if is_base64:
        try:
            return base64.b64decode(body, validate=True)
        except binascii.Error:
            raise BadRequestError("Request body is not valid base64") from None
    return body.encode("utf-8")


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        text = body.decode(json.detect_encoding(body)) if body else "{}"
        # json.loads recurses per level: measured first, a body a few hundred kilobytes deep is a 400, not a crash.
        if json_depth(text) > MAX_JSON_DEPTH:
            raise BadRequestError(f"Request body is nested too deeply: more than {MAX_JSON_DEPTH} levels")
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise BadRequestError("Request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise BadRequestError("Request body must be a JSON object")
    return data


def _parse_urlencoded(body: bytes) -> dict[str, Any]:
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise BadRequestError("Form body is not valid UTF-8") from None
    fields: dict[str, Any] = {}
    for name, value in pairs:
        fields.setdefault(name, value)
    return fields


def _parse_multipart(boundary: bytes, body: bytes) -> tuple[dict[str, Any], list[UploadFile]]:
    from python_multipart.exceptions import MultipartParseError
    from python_multipart.multipart import MultipartParser, parse_options_header

    fields: dict[str, Any] = {}
    files: list[UploadFile] = []
    state: dict[str, Any] = {}

    def on_part_begin() -> None:
        state.update(headers={}, data=bytearray(), header_field=b"", header_value=b"")

    def on_header_field(data: bytes, start: int, end: int) -> None:
        state["header_field"] += data[start:end]

    def on_header_value(data: bytes, start: int, end: int) -> None:
        state["header_value"] += data[start:end]

    def on_header_end() -> None:
        state["headers"][state["header_field"].decode("latin-1").lower()] = state["header_value"]
        state["header_field"], state["header_value"] = b"", b""

    def on_part_data(data: bytes, start: int, end: int) -> None:
        state["data"] += data[start:end]

    def on_part_end() -> None:
        disposition, options = parse_options_header(state["headers"].get("content-disposition", b""))
        if disposition.lower() != b"form-data" or b"name" not in options:
            raise BadRequestError("multipart part without a form-data name")
        name = options[b"name"].decode("utf-8", "replace")
        if b"filename" in options:
            if name != "files":
                raise BadRequestError(f"File part '{name}' not accepted: send files as repeated 'files' parts")
            part_type = state["headers"].get("content-type", b"application/octet-stream")
            files.append(
                UploadFile(
                    content=bytes(state["data"]),
                    filename=options[b"filename"].decode("utf-8", "replace"),
                    content_type=part_type.decode("latin-1"),
                )
            )
            return
        try:
            fields.setdefault(name, bytes(state["data"]).decode("utf-8"))
        except UnicodeDecodeError:
            raise BadRequestError(f"Form field '{name}' is not valid UTF-8") from None

    parser = MultipartParser(
        boundary,
        callbacks={
            "on_part_begin": on_part_begin,
            "on_header_field": on_header_field,
            "on_header_value": on_header_value,
            "on_header_end": on_header_end,
            "on_part_data": on_part_data,
            "on_part_end": on_part_end,
        },
    )
    try:
        parser.write(body)
        parser.finalize()
    except MultipartParseError as exc:
        raise BadRequestError(f"Malformed multipart/form-data body: {exc}") from None
    return fields, files
