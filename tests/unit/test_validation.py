"""The create-run rules (the form model's validators, and how a body is read), with the exact messages a client
sees."""

import base64
import json

import pytest
from aws_lambda_powertools.event_handler.openapi.params import UploadFile
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent
from pydantic import ValidationError

from canvas_core.api.forms import FormBody, read_body
from canvas_core.errors import (
    BadRequestError,
    InvalidBlocksError,
    InvalidFileError,
    InvalidTemplateError,
    PayloadTooLargeError,
    UnsupportedMediaTypeError,
)
from canvas_core.models.base import refusal
from canvas_core.settings import ApiSettings
from canvas_core.validation import CreateRunForm
from tests.support import PNG_1X1, function_environment, multipart

pytestmark = pytest.mark.unit
SETTINGS = ApiSettings.from_environ(function_environment("CreateRunFunction"))


@pytest.fixture(autouse=True)
def create_run_environment(environment_of):
    """The settings the rules read: the create-run function's."""
    environment_of("CreateRunFunction")


def validate(**fields):
    """The form as POST /v1/run reads it, or the error a client is answered with."""
    try:
        return CreateRunForm.model_validate(fields)
    except ValidationError as exc:
        raise refusal(exc.errors()) or exc from None


def upload(filename, content_type, data):
    return UploadFile(content=data, filename=filename, content_type=content_type)


def read(content_type, body, max_bytes, is_base64=False):
    event = APIGatewayProxyEvent(
        {"headers": {"Content-Type": content_type} if content_type else {}, "body": body, "isBase64Encoded": is_base64}
    )
    return read_body(event, FormBody(max_bytes=max_bytes))


def test_defaults_to_auto_template():
    # When
    request = validate(prompt="  Hello  ")
    # Then
    assert request.prompt == "Hello"
    assert request.template == "auto"
    assert request.blocks is None


def test_invalid_template_has_the_contract_text():
    with pytest.raises(InvalidTemplateError) as caught:
        validate(prompt="x", template="essay")
    assert caught.value.message == (
        "Invalid template: essay. Valid templates: app, auto, deep_research, excel, landing_page, memo, report, slides"
    )
    assert caught.value.status_code == 400


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "prompt is required"),
        ({"prompt": "   "}, "prompt must not be blank"),
        ({"prompt": "x" * 20001}, "prompt is too long: 20001 characters (maximum 20000)"),
        ({"prompt": "x", "webhook_url": "ftp://example.com"}, "Invalid webhook_url"),
        ({"prompt": "x", "agent_instructions": "y" * 10001}, "agent_instructions is too long"),
    ],
)
def test_bad_fields_are_refused(fields, message):
    with pytest.raises(BadRequestError) as caught:
        validate(**fields)
    assert caught.value.message.startswith(message)


@pytest.mark.parametrize(
    ("blocks", "message"),
    [
        ("prompt-block", "Invalid blocks: expected a JSON array"),
        ('{"a": 1}', "Invalid blocks: expected a JSON array"),
        ("[1, 2]", "Invalid blocks: expected a JSON array"),
        ("[]", "Invalid blocks: the array is empty"),
        ('["essay-block"]', "Invalid blocks: unknown block type 'essay-block'"),
        ('["prompt"]', "Invalid blocks: unknown block type 'prompt' (did you mean 'prompt-block'?)"),
    ],
)
def test_bad_blocks_are_refused(blocks, message):
    with pytest.raises(InvalidBlocksError) as caught:
        validate(prompt="x", blocks=blocks)
    assert caught.value.message.startswith(message)


def test_blocks_override_template_and_drop_duplicates():
    request = validate(prompt="x", template="report", blocks=json.dumps(["text-block", "prompt-block", "text-block"]))
    assert request.blocks == ["text-block", "prompt-block"]


def test_files_are_checked_by_extension_and_content():
    # Given a real PNG, a PNG that is not one, and an executable
    good = upload("pixel.png", "image/png", PNG_1X1)
    fake = upload("photo.png", "image/png", b"GIF89a not a png at all")
    exe = upload("tool.exe", "application/octet-stream", b"MZ\x90\x00")
    # Then
    assert validate(prompt="x", files=[good]).files[0].data == PNG_1X1
    with pytest.raises(InvalidFileError, match="does not contain what its extension says"):
        validate(prompt="x", files=[fake])
    with pytest.raises(InvalidFileError, match=r"Unsupported file type: tool\.exe"):
        validate(prompt="x", files=[exe])
    with pytest.raises(InvalidFileError, match="is empty"):
        validate(prompt="x", files=[upload("a.txt", "text/plain", b"")])
    with pytest.raises(InvalidFileError, match="does not contain"):
        validate(prompt="x", files=[upload("a.json", "application/json", b"{not json")])
    with pytest.raises(InvalidFileError, match="does not contain"):
        validate(prompt="x", files=[upload("a.docx", "application/zip", b"PK\x03\x04garbage")])


def test_file_count_and_size_limits():
    many = [upload(f"{i}.txt", "text/plain", b"hello") for i in range(SETTINGS.max_files + 1)]
    with pytest.raises(BadRequestError, match=f"Too many files: {SETTINGS.max_files + 1}"):
        validate(prompt="x", files=many)
    big = upload("big.txt", "text/plain", b"a" * (SETTINGS.max_upload_bytes + 1))
    with pytest.raises(PayloadTooLargeError):
        validate(prompt="x", files=[big])


def test_multipart_keeps_binary_bytes_and_repeated_files():
    # Given
    content_type, body = multipart(
        {"prompt": "Describe", "template": "auto"},
        [("a.png", PNG_1X1, "image/png"), ("b.txt", b"\xef\xbb\xbfhi\r\n", "text/plain")],
    )
    # When
    form = read(content_type, base64.b64encode(body).decode(), 10_000_000, is_base64=True)
    # Then
    files = form.pop("files")
    assert form == {"prompt": "Describe", "template": "auto"}
    assert [(f.filename, f.content) for f in files] == [("a.png", PNG_1X1), ("b.txt", b"\xef\xbb\xbfhi\r\n")]


def test_urlencoded_and_unsupported_bodies():
    assert read("application/x-www-form-urlencoded", "prompt=a+b&template=", 1000) == {
        "prompt": "a b",
        "template": "",
        "files": [],
    }
    assert read(None, "prompt=x", 1000)["prompt"] == "x"
    with pytest.raises(UnsupportedMediaTypeError, match="Unsupported Content-Type: application/json"):
        read("application/json", '{"prompt": "x"}', 1000)
    with pytest.raises(BadRequestError, match="without a boundary"):
        read("multipart/form-data", "--x--", 1000)
    with pytest.raises(PayloadTooLargeError, match=r"Request body too large: 1001 bytes \(maximum 1000\)"):
        read("application/x-www-form-urlencoded", "x" * 1001, 1000)
    with pytest.raises(BadRequestError, match="not valid base64"):
        read("multipart/form-data; boundary=x", "@@@", 1000, is_base64=True)


def test_file_part_under_another_name_is_refused():
    content_type, body = multipart({"prompt": "x"})
    body = body.replace(b'name="prompt"', b'name="document"; filename="a.txt"')
    with pytest.raises(BadRequestError, match="send files as repeated 'files' parts"):
        read(content_type, body.decode(), 10_000)


def test_control_characters_are_dropped_from_the_prompt_and_the_instructions():
    request = validate(prompt="Tides\x01 and\x00 waves\x7f\x9b,\tkept\nlines", agent_instructions="\x02Be brief\x1b")
    assert request.prompt == "Tides and waves,\tkept\nlines"
    assert request.agent_instructions == "Be brief"
    with pytest.raises(BadRequestError, match="prompt must not be blank"):
        validate(prompt="\x01\x02 \x03")


def test_json_nested_too_deeply_is_refused_without_recursing():
    deep = "[" * 100_000 + "]" * 100_000
    # blocks
    with pytest.raises(InvalidBlocksError) as caught:
        validate(prompt="x", blocks=deep)
    assert caught.value.status_code == 400 and caught.value.message.startswith("Invalid blocks: nested more than 200")
    # a .json upload
    with pytest.raises(InvalidFileError) as caught:
        validate(prompt="x", files=[upload("deep.json", "application/json", deep.encode())])
    assert caught.value.message == "File deep.json is nested too deeply: more than 200 levels"
    # nesting a person writes is fine, and brackets inside strings do not count
    shallow = json.dumps({"a": [[{"b": "[[[[[[" * 100}]]})
    assert validate(prompt="x", files=[upload("ok.json", "application/json", shallow.encode())]).files


@pytest.mark.parametrize("deep", [b"[" * 100_000, b'{"a":' * 5_000 + b"1" + b"}" * 5_000])
def test_a_json_body_nested_too_deeply_is_400_without_recursing(deep):
    # Given a route that reads JSON bodies (a re-run's, an approval's)
    event = APIGatewayProxyEvent({"headers": {"Content-Type": "application/json"}, "body": deep.decode()})
    # When its body nests deeper than anyone writes by hand
    with pytest.raises(BadRequestError) as caught:
        read_body(event, FormBody(max_bytes=1024 * 1024, accepts_json=True))
    # Then it is refused as a bad request, not a crash
    assert caught.value.status_code == 400
    assert caught.value.message == "Request body is nested too deeply: more than 200 levels"
    # And a body nested as people write it is read
    shallow = json.dumps({"instructions": {"b": "[[[" * 300}, "x": [[[1]]]})
    event = APIGatewayProxyEvent({"headers": {"Content-Type": "application/json"}, "body": shallow})
    assert read_body(event, FormBody(max_bytes=1024 * 1024, accepts_json=True))["x"] == [[[1]]]


def test_an_unsupported_body_is_told_every_type_its_route_reads():
    # Given a route that reads JSON as well as forms (a re-run's, an approval's)
    event = APIGatewayProxyEvent({"headers": {"Content-Type": "text/plain"}, "body": "instructions=x"})
    # When the body is of another type
    with pytest.raises(UnsupportedMediaTypeError) as caught:
        read_body(event, FormBody(max_bytes=1024, accepts_json=True))
    # Then the answer names JSON among what it may send
    assert caught.value.message == (
        "Unsupported Content-Type: text/plain. Send application/json, multipart/form-data or "
        "application/x-www-form-urlencoded"
    )
