"""Body parsing for POST /v1/run: multipart/form-data (with repeated `files` parts) or
application/x-www-form-urlencoded. Through API Gateway, multipart bodies arrive base64-encoded."""

from __future__ import annotations

import base64
import binascii
from urllib.parse import parse_qsl

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from canvas_core.errors import BadRequestError, PayloadTooLargeError, UnsupportedMediaTypeError
from canvas_core.models.forms import FilePart, Form


def body_bytes(body: str | None, is_base64: bool) -> bytes:
    if not body:
        return b""
    if is_base64:
        try:
            return base64.b64decode(body, validate=True)
        except binascii.Error:
            raise BadRequestError("Request body is not valid base64") from None
    return body.encode("utf-8")


def parse_form(content_type: str | None, body: bytes, max_bytes: int) -> Form:
    if len(body) > max_bytes:
        raise PayloadTooLargeError(f"Request body too large: {len(body)} bytes (maximum {max_bytes})")
    media_type, params = parse_options_header(content_type or "")
    media = media_type.decode("latin-1").lower()
    if media == "multipart/form-data":
        boundary = params.get(b"boundary")
        if not boundary:
            raise BadRequestError("multipart/form-data body without a boundary")
        return _parse_multipart(boundary, body)
    if media in ("application/x-www-form-urlencoded", "") and b"\x00" not in body:
        try:
            pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
        except UnicodeDecodeError:
            raise BadRequestError("Form body is not valid UTF-8") from None
        form = Form()
        for name, value in pairs:
            form.fields.setdefault(name, value)
        return form
    raise UnsupportedMediaTypeError(
        f"Unsupported Content-Type: {media}. Send multipart/form-data or application/x-www-form-urlencoded"
    )


def _parse_multipart(boundary: bytes, body: bytes) -> Form:
    form = Form()
    state: dict = {}

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
            part_type = state["headers"].get("content-type", b"application/octet-stream")
            form.files.append(
                FilePart(
                    filename=options[b"filename"].decode("utf-8", "replace"),
                    content_type=part_type.decode("latin-1"),
                    data=bytes(state["data"]),
                )
            )
            if name != "files":
                raise BadRequestError(f"File part '{name}' not accepted: send files as repeated 'files' parts")
            return
        try:
            form.fields.setdefault(name, bytes(state["data"]).decode("utf-8"))
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
    return form
