"""The embedded stack over real HTTP: the front door's proxy events and error shapes, presigned S3 URLs as
signed links to the front door, and `canvas serve` from start to Ctrl-C."""

from __future__ import annotations

import base64
import json
import os
import signal
import uuid

import httpx
import pytest

from canvas_core.settings import SettingsError
from tests.e2e.conftest import canvas_serve
from tests.support import ROOT, multipart

pytestmark = [pytest.mark.e2e, pytest.mark.serial, pytest.mark.timeout(60)]


def test_a_get_reaches_its_function_as_an_api_gateway_proxy_event(mini_stack):
    # Given a route with a path parameter, a repeated query parameter and a custom header
    url = f"{mini_stack.base_url}/v1/hello/ada?lang=en&tag=a&tag=b"

    # When a client calls it
    response = httpx.get(url, headers={"X-Trace": "t-1"})

    # Then the function saw the REST (v1) proxy event API Gateway would send
    assert response.status_code == 200
    event = response.json()["event"]
    assert event["resource"] == "/v1/hello/{name}"
    assert event["path"] == "/v1/hello/ada"
    assert event["httpMethod"] == "GET"
    assert event["pathParameters"] == {"name": "ada"}
    assert event["queryStringParameters"] == {"lang": "en", "tag": "b"}
    assert event["multiValueQueryStringParameters"] == {"lang": ["en"], "tag": ["a", "b"]}
    assert event["headers"]["X-Trace"] == "t-1"
    assert event["multiValueHeaders"]["X-Trace"] == ["t-1"]
    assert event["body"] is None
    assert event["isBase64Encoded"] is False
    context = event["requestContext"]
    assert context["stage"] == "test"
    assert context["resourcePath"] == "/v1/hello/{name}"
    assert context["httpMethod"] == "GET"
    assert context["identity"]["sourceIp"] == "127.0.0.1"
    assert uuid.UUID(context["requestId"])
    # ... and the function's response headers, single and multi-valued, reached the client
    assert response.headers["X-Single"] == "one"
    assert response.headers.get_list("X-Multi") == ["a", "b"]


def test_functions_get_the_environment_the_template_gives_them(mini_stack):
    # Given the template's Globals (!If, !Sub) and the function's own variables (!Ref of a state machine)
    # When the function reports its environment
    body = httpx.get(f"{mini_stack.base_url}/v1/hello/env").json()

    # Then the intrinsics were resolved with the local names
    assert body["greeting"] == "hello from us-east-1"
    assert body["state_machine_arn"] == mini_stack.state_machine_arns["MiniStateMachine"]
    assert mini_stack.environment["MODEL_PROVIDER"] == "offline"


def test_a_multipart_body_arrives_base64_encoded_byte_for_byte(mini_stack):
    # Given a multipart upload holding bytes that are not UTF-8
    content_type, body = multipart({"prompt": "hi"}, [("blob.bin", bytes(range(256)), "application/octet-stream")])

    # When it is posted
    response = httpx.post(f"{mini_stack.base_url}/v1/upload", content=body, headers={"Content-Type": content_type})

    # Then the function received it as base64 of exactly those bytes
    assert response.status_code == 201
    event = response.json()["event"]
    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == body


def test_a_json_body_arrives_as_text(mini_stack):
    # Given a JSON body
    # When it is posted
    response = httpx.post(f"{mini_stack.base_url}/v1/upload", json={"prompt": "hé"})

    # Then the function received the text itself
    event = response.json()["event"]
    assert event["isBase64Encoded"] is False
    assert json.loads(event["body"]) == {"prompt": "hé"}


@pytest.mark.parametrize(
    ("method", "path", "status", "error"),
    [
        ("GET", "/v1/nothing-here", 404, "Not found: GET /v1/nothing-here"),
        ("DELETE", "/v1/upload", 405, "Method not allowed: DELETE /v1/upload"),
        ("GET", "/v1/fail", 500, "Internal server error"),
    ],
)
def test_requests_no_function_answers_get_the_error_shape(mini_stack, method, path, status, error):
    # Given a request for an unknown route, a known route with another method, or a function that raises
    # When it is sent
    response = httpx.request(method, f"{mini_stack.base_url}{path}")

    # Then the answer is JSON in the service's error shape
    assert response.status_code == status
    assert response.headers["Content-Type"] == "application/json"
    assert response.json() == {"success": False, "error": error}


def test_a_body_over_six_megabytes_is_refused(mini_stack):
    # Given a body just over Lambda's 6 MB payload limit
    body = b"x" * (6 * 1024 * 1024 + 1)

    # When it is posted
    response = httpx.post(f"{mini_stack.base_url}/v1/upload", content=body)

    # Then it never reaches the function
    assert response.status_code == 413
    assert response.json()["success"] is False


def test_a_presigned_get_is_a_signed_link_to_the_front_door_not_to_moto(mini_stack):
    # Given an object in the template's bucket and a presigned GET minted by boto3, as ArtifactStore mints one
    s3 = mini_stack.client("s3")
    s3.put_object(Bucket="files-bucket", Key="artifacts/report.md", Body=b"# Report\n", ContentType="text/markdown")
    url = s3.generate_presigned_url(
        "get_object",
        Params={
            "Bucket": "files-bucket",
            "Key": "artifacts/report.md",
            "ResponseContentDisposition": 'attachment; filename="report.md"',
        },
        ExpiresIn=600,
    )

    # When a plain HTTP client follows it
    response = httpx.get(url)

    # Then it downloads the bytes under their name, from the front door: moto's port is never handed out
    assert url.startswith(f"{mini_stack.base_url}/downloads/files-bucket/artifacts/report.md?")
    assert mini_stack.endpoint_url not in url
    assert response.status_code == 200
    assert response.content == b"# Report\n"
    assert response.headers["Content-Type"] == "text/markdown"
    assert response.headers["Content-Disposition"] == 'attachment; filename="report.md"'


def test_canvas_serve_prints_its_url_and_key_then_stops_cleanly_on_ctrl_c():
    # Given `canvas serve` on a free port, with no key given
    with canvas_serve() as server:
        # When it says it listens
        listening, key_line = server.lines[:2]
        base_url = server.base_url

        # Then it answers at once, and the key it printed is an account's key
        assert listening.startswith("Canvas Run Service listening on http://127.0.0.1:")
        assert key_line.startswith("API key: sk_canvas_")
        api_key = key_line.removeprefix("API key: ")
        assert httpx.get(f"{base_url}/v1/nothing-here").status_code == 404
        missing_run = httpx.get(f"{base_url}/v1/run/{uuid.uuid4()}", headers={"X-API-KEY": api_key})
        assert missing_run.status_code != 401
        unknown_key = httpx.get(f"{base_url}/v1/run/{uuid.uuid4()}", headers={"X-API-KEY": "sk_canvas_nope"})
        assert unknown_key.status_code == 401

        # ... and Ctrl-C stops it with exit code 0
        server.process.send_signal(signal.SIGINT)
        assert server.process.wait(timeout=20) == 0


def test_operator_settings_in_the_environment_win_over_the_templates(local_stack_factory, monkeypatch):
    # Given an operator pointing the openai provider at their own endpoint and model
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    monkeypatch.setenv("WRITER_MODEL_ID", "llama3.2")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAREALKEY")
    # When
    stack = local_stack_factory(provider="openai")
    # Then their settings reach every function, and AWS stays moto with dummy keys
    for function in stack.functions.values():
        assert function.environment is not None
        assert function.environment["OPENAI_BASE_URL"] == "http://127.0.0.1:11434/v1"
        assert function.environment["WRITER_MODEL_ID"] == "llama3.2"
        assert function.environment["MODEL_PROVIDER"] == "openai"
        assert function.environment["AWS_ENDPOINT_URL"] == stack.endpoint_url
        assert function.environment["AWS_ACCESS_KEY_ID"] == stack.credentials.access_key_id
        assert function.environment["TASKS_TABLE_NAME"] == "TasksTable"
    # And the process's own environment (the stack's calls, a test's) holds them too
    assert os.environ["OPENAI_BASE_URL"] == "http://127.0.0.1:11434/v1"
    assert os.environ["AWS_ENDPOINT_URL"] == stack.endpoint_url


def test_each_function_is_given_only_its_template_entry_and_globals(local_stack_factory):
    # Given the stack of template.yaml
    stack = local_stack_factory()
    # Then a variable one function's entry gives is in its environment alone
    assert (
        stack.functions["CreateRunFunction"].environment["STATE_MACHINE_ARN"]
        == (stack.state_machine_arns["RunCanvasStateMachine"])
    )
    assert "STATE_MACHINE_ARN" not in stack.functions["GetRunFunction"].environment
    assert "WEBHOOK_DEAD_LETTER_QUEUE_URL" not in stack.functions["WebhookEndpointsFunction"].environment
    # And Globals reach every function
    assert all(f.environment["RUNS_TABLE_NAME"] == "RunsTable" for f in stack.functions.values())
    # And each is held to its own Timeout (Lambda's limits: lambda_runtime)
    timeouts = {name: stack.functions[name].timeout_seconds for name in ("PlanCanvasFunction", "GetRunFunction")}
    assert timeouts == {"PlanCanvasFunction": 300, "GetRunFunction": 29}


@pytest.mark.parametrize(
    "function, line",
    [
        ("CreateRunFunction", "          STATE_MACHINE_ARN: !Ref RunCanvasStateMachine\n"),
        # The endpoints' API and the delivery function keep theirs: on Lambda the portal would not see them.
        ("PortalFunction", "          WEBHOOK_QUEUE_URL: !Ref WebhookQueue\n"),
    ],
)
def test_a_function_whose_template_entry_lacks_a_variable_it_reads_stops_the_stack(
    tmp_path, local_stack_factory, function, line
):
    # Given template.yaml with one variable dropped from one function's entry
    text = (ROOT / "template.yaml").read_text()
    at = text.index(line, text.index(f"\n  {function}:\n"))
    (tmp_path / "template.yaml").write_text(text[:at] + text[at + len(line) :])
    for folder in ("functions", "layers", "statemachine"):
        (tmp_path / folder).symlink_to(ROOT / folder)

    # When the stack starts, Then it refuses, naming the function and the variable its cold start found unset
    variable = line.split(":")[0].strip()
    with pytest.raises(SettingsError, match=rf"{function}: .*{variable} is not set"):
        local_stack_factory(tmp_path / "template.yaml")


def test_with_bedrock_only_bedrock_leaves_the_machine(local_stack_factory, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAREALKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "real-secret")
    stack = local_stack_factory(provider="bedrock")
    assert os.environ["AWS_ENDPOINT_URL_BEDROCK_RUNTIME"] == "https://bedrock-runtime.us-east-1.amazonaws.com"
    assert os.environ["AWS_ENDPOINT_URL"] == stack.endpoint_url
    assert os.environ["AWS_ACCESS_KEY_ID"] == "AKIAREALKEY"
