"""Structured output on every provider (providers/structured.py), against the local fakes: the request carries the
schema in the provider's own form, checked against the published request shapes (botocore's service model for
Bedrock's Converse, the OpenAI API's request types); an answer of the schema is accepted, one that ignores it is
refused with the reason; an endpoint that refuses the constraint is asked without it, and says so."""

from __future__ import annotations

import json
from typing import Literal

import botocore.session
import pytest
from botocore.validate import ParamValidator
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from pydantic import BaseModel, Field, TypeAdapter

from canvas_core.providers.bedrock import BedrockProvider, bedrock_runtime
from canvas_core.providers.openai import OpenAIProvider
from canvas_core.providers.structured import StructuredOutputError, complete_structured, strict_schema
from tests.fakes.model_servers import FakeBedrock, FakeOpenAI
from tests.fakes.recording_provider import RecordingProvider

pytestmark = pytest.mark.unit


class Pick(BaseModel):
    """A small schema, as small models are given: an enum, a bounded list, an optional field."""

    colour: Literal["red", "green", "blue"]
    sizes: list[int] = Field(max_length=3)
    note: str | None = None


VALID = {"colour": "green", "sizes": [1, 2], "note": None}


def test_a_strict_schema_requires_every_property_and_allows_no_other():
    schema = strict_schema(Pick)
    assert schema["required"] == ["colour", "sizes", "note"]
    assert schema["additionalProperties"] is False
    assert "default" not in json.dumps(schema) and "title" not in schema


def test_openai_sends_the_schema_as_a_strict_json_schema_response_format_of_the_published_shape():
    with FakeOpenAI(reply=lambda call: json.dumps(VALID)) as fake:
        provider = OpenAIProvider(base_url=fake.base_url, model_id="gpt-test", structured_output="json_schema")
        # When a structured answer is asked for
        answer = complete_structured(provider, system="Be brief.", prompt="Pick one.", role="analyst", schema=Pick)
        # Then the answer is the schema's instance, constrained
        assert answer.value == Pick(**VALID) and answer.unconstrained == ""
        [call] = fake.calls
    form = call.body["response_format"]
    expected = {"name": "Pick", "strict": True, "schema": strict_schema(Pick)}
    assert form == {"type": "json_schema", "json_schema": expected}
    # And the whole request is one the OpenAI API's request types accept
    TypeAdapter(CompletionCreateParamsNonStreaming).validate_python(call.body, strict=False)


def test_openai_sends_llama_cpp_pythons_json_object_form_when_configured():
    with FakeOpenAI(reply=lambda call: json.dumps(VALID)) as fake:
        provider = OpenAIProvider(base_url=fake.base_url, model_id="smol", structured_output="json_object")
        complete_structured(provider, system="", prompt="Pick one.", role="analyst", schema=Pick)
        assert fake.calls[0].body["response_format"] == {"type": "json_object", "schema": strict_schema(Pick)}


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I would pick green.", "the answer holds no valid JSON"),
        ('{"colour": "purple", "sizes": []}', "colour: Input should be 'red', 'green' or 'blue'"),
        ('{"colour": "red", "sizes": [1, 2, 3, 4]}', "sizes: List should have at most 3 items"),
    ],
)
def test_openai_an_answer_that_ignores_the_schema_is_refused_with_the_reason(reply, reason):
    with FakeOpenAI(reply=lambda call: reply) as fake:
        provider = OpenAIProvider(base_url=fake.base_url, model_id="gpt-test", structured_output="json_schema")
        with pytest.raises(StructuredOutputError, match=reason) as refused:
            complete_structured(provider, system="", prompt="Pick one.", role="analyst", schema=Pick)
    # And the call it cost is on the error, to be counted
    assert refused.value.completion is not None and refused.value.completion.model_id == "gpt-test"


REFUSED = "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model."


def test_openai_an_endpoint_refusing_the_schemas_bounds_is_sent_it_without_them_still_constrained():
    with FakeOpenAI(reply=lambda call: json.dumps(VALID)) as fake:
        fake.fail_next(400, "invalid_request_error", message="Invalid schema for response_format 'Pick': "
                       "'maxItems' is not permitted.", when=lambda call: "response_format" in call.body)  # fmt: skip
        provider = OpenAIProvider(base_url=fake.base_url, model_id="strict-model", structured_output="json_schema")
        answer = complete_structured(provider, system="", prompt="Pick one.", role="analyst", schema=Pick)
        first, second = (c.body["response_format"]["json_schema"]["schema"] for c in fake.calls)
    # Then the second request held the schema without its bounds, and the answer was still constrained and checked
    assert answer.value == Pick(**VALID) and answer.unconstrained == ""
    assert "maxItems" in json.dumps(first) and "maxItems" not in json.dumps(second)
    assert second["properties"]["colour"]["enum"] == ["red", "green", "blue"]


def test_openai_an_endpoint_refusing_the_constraint_is_asked_without_it_and_says_so():
    with FakeOpenAI(reply=lambda call: json.dumps(VALID)) as fake:
        fake.fail_next(
            400, "invalid_request_error", times=2, message=REFUSED, when=lambda call: "response_format" in call.body
        )
        provider = OpenAIProvider(base_url=fake.base_url, model_id="old-model", structured_output="json_schema")
        first = complete_structured(provider, system="", prompt="Pick one.", role="analyst", schema=Pick)
        second = complete_structured(provider, system="", prompt="Pick again.", role="analyst", schema=Pick)
        bodies = [c.body for c in fake.calls]
    # Then the answers are read from the text, each saying why it was not constrained, and the refusal is not repeated
    assert first.value == Pick(**VALID) and "refused the schema constraint" in first.unconstrained
    assert second.unconstrained == first.unconstrained
    assert ["response_format" in b for b in bodies] == [True, True, False, False]
    assert '"additionalProperties":false' in bodies[2]["messages"][-1]["content"]


@pytest.fixture
def bedrock(monkeypatch):
    with FakeBedrock(reply=lambda call: json.dumps(VALID)) as fake:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        yield fake, bedrock_runtime(fake.url, "us-east-1")


def test_bedrock_forces_a_tool_whose_input_schema_is_the_schema_in_convereses_published_shape(bedrock):
    fake, runtime = bedrock
    provider = BedrockProvider(model_id="amazon.nova-lite-v1:0", runtime=runtime)
    # When a structured answer is asked for
    answer = complete_structured(provider, system="Be brief.", prompt="Pick one.", role="analyst", schema=Pick)
    # Then it is the forced tool's input, as the schema's instance
    assert answer.value == Pick(**VALID) and answer.unconstrained == ""
    [call] = fake.calls
    tools = call.body["toolConfig"]
    assert tools["toolChoice"] == {"tool": {"name": "Pick"}}
    assert tools["tools"][0]["toolSpec"]["inputSchema"] == {"json": strict_schema(Pick)}
    # And the request is one botocore's service model for Converse validates
    converse = botocore.session.get_session().get_service_model("bedrock-runtime").operation_model("Converse")
    request = {"modelId": "amazon.nova-lite-v1:0", **{k: v for k, v in call.body.items() if k != "modelId"}}
    report = ParamValidator().validate(request, converse.input_shape)
    assert not report.has_errors(), report.generate_report()


def test_bedrock_a_model_that_answers_in_words_instead_of_the_tool_is_refused_with_the_reason(bedrock):
    fake, runtime = bedrock
    fake.replies(lambda call: "Green, I think.")
    provider = BedrockProvider(model_id="amazon.nova-lite-v1:0", runtime=runtime)
    with pytest.raises(StructuredOutputError, match="holds no valid JSON"):
        complete_structured(provider, system="", prompt="Pick one.", role="analyst", schema=Pick)


def test_a_provider_without_the_feature_is_asked_for_the_schemas_json_and_checked():
    # Given a provider with only text completion (a test's fake, say)
    provider = RecordingProvider(answers=[json.dumps(VALID)])
    # When a structured answer is asked for
    answer = complete_structured(provider, system="", prompt="Pick one.", role="analyst", schema=Pick)
    # Then the prompt carried the schema, and the answer was read and checked
    assert answer.value == Pick(**VALID)
    assert '"enum":["red","green","blue"]' in provider.calls[0].prompt
