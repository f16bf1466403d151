"""Model calls are bounded: each sends its role's output cap, an answer cut at the cap is never taken as complete,
a call that timed out waiting for its answer is not sent again, and no call sends more than the input budget."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from canvas_core.blocks.context import BlockContext
from canvas_core.errors import BlockFatalError
from canvas_core.models.items import NodeItem, RunItem
from canvas_core.providers.base import AnswerCutError, estimate_tokens, fit_input
from canvas_core.providers.bedrock import BedrockProvider, bedrock_runtime
from canvas_core.providers.offline import OfflineProvider
from canvas_core.providers.openai import OpenAIProvider
from canvas_core.providers.roles import ROLE_OUTPUT_TOKENS, call_timeout_seconds, max_output_tokens
from tests.fakes.model_servers import NO_CAP, Call, FakeBedrock, FakeOpenAI

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("model_env")]

SYSTEM = "You are the Writer agent."
PROMPT = "Question: What lives in tide pools?"
LONG_ANSWER = " ".join(f"word{i}" for i in range(300))


@pytest.fixture
def bedrock() -> Iterator[FakeBedrock]:
    with FakeBedrock() as fake:
        yield fake


@pytest.fixture
def openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def openai_provider(fake: FakeOpenAI, **options) -> OpenAIProvider:
    return OpenAIProvider(base_url=fake.base_url, backoff_seconds=0, **options)


def bedrock_provider(fake: FakeBedrock, read_timeout: float = 300, **options) -> BedrockProvider:
    return BedrockProvider(runtime=bedrock_runtime(fake.url, "us-east-1", read_timeout), backoff_seconds=0, **options)


# ---- the output cap


def test_the_fake_refuses_a_request_without_an_output_cap(openai):
    # Given a request as the provider sent it before it had a cap
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": PROMPT}]}).encode()
    request = urllib.request.Request(f"{openai.base_url}/chat/completions", data=body)
    # When / Then
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)
    assert refused.value.code == 400 and NO_CAP in refused.value.read().decode()


@pytest.mark.parametrize("role", ["planner", "writer", "reviewer", "vision"])
def test_openai_sends_the_roles_output_cap(openai, role):
    # When
    openai_provider(openai).complete(system=SYSTEM, prompt=PROMPT, role=role)
    # Then
    assert openai.calls[0].body["max_tokens"] == ROLE_OUTPUT_TOKENS[role]


def test_output_caps_come_from_the_environment_per_role(openai, bedrock, monkeypatch):
    # Given one cap for every role and another for the writer
    monkeypatch.setenv("MODEL_MAX_OUTPUT_TOKENS", "700")
    monkeypatch.setenv("WRITER_MAX_OUTPUT_TOKENS", "1500")
    # When
    for role in ("planner", "writer"):
        openai_provider(openai).complete(system=SYSTEM, prompt=PROMPT, role=role)
        bedrock_provider(bedrock).complete(system=SYSTEM, prompt=PROMPT, role=role)
    # Then
    assert [c.body["max_tokens"] for c in openai.calls] == [700, 1500]
    assert [c.body["inferenceConfig"]["maxTokens"] for c in bedrock.calls] == [700, 1500]
    assert (max_output_tokens("analyst"), max_output_tokens("writer")) == (700, 1500)


def test_bedrock_sends_the_roles_output_cap(bedrock):
    bedrock_provider(bedrock).complete(system=SYSTEM, prompt=PROMPT, role="planner")
    assert bedrock.calls[0].body["inferenceConfig"] == {"maxTokens": ROLE_OUTPUT_TOKENS["planner"]}


def test_a_call_may_take_the_time_its_cap_takes_and_no_longer(monkeypatch):
    monkeypatch.setenv("MODEL_MIN_TOKENS_PER_SECOND", "10")
    monkeypatch.setenv("MODEL_TIMEOUT_SECONDS", "200")
    assert call_timeout_seconds(1000) == pytest.approx(30 + 100)
    assert call_timeout_seconds(8000) == 200


# ---- an answer cut at the cap


def test_openai_answer_cut_at_the_cap_is_not_taken_as_complete(openai, monkeypatch):
    # Given a model whose answer is longer than the writer's cap
    monkeypatch.setenv("WRITER_MAX_OUTPUT_TOKENS", "50")
    openai.replies(lambda call: LONG_ANSWER)
    # When / Then: an error naming the cap and the setting, after one call (the same request would be cut again)
    with pytest.raises(AnswerCutError, match=r"cut off at the output cap of 50 tokens.*WRITER_MAX_OUTPUT_TOKENS"):
        openai_provider(openai).complete(system=SYSTEM, prompt=PROMPT, role="writer")
    assert len(openai.calls) == 1


def test_bedrock_answer_cut_at_the_cap_is_not_taken_as_complete(bedrock, monkeypatch):
    monkeypatch.setenv("MODEL_MAX_OUTPUT_TOKENS", "40")
    bedrock.replies(lambda call: LONG_ANSWER)
    with pytest.raises(AnswerCutError, match="output cap of 40 tokens"):
        bedrock_provider(bedrock).complete(system=SYSTEM, prompt=PROMPT, role="analyst")
    assert len(bedrock.calls) == 1


def block_context(provider) -> BlockContext:
    run = RunItem(
        run_id="run-1",
        account_id="acct",
        canvas_id="canvas-1",
        prompt="What lives in tide pools?",
        template="auto",
        created_at_ms=0,
        estimated_duration_ms=0,
    )
    node = NodeItem(canvas_id="canvas-1", block_id="b-1", name="Answer", type="text-block", persona="Writer")
    return BlockContext(run=run, node=node, inputs=[], files=None, provider=provider)  # it stores no file


def test_a_block_whose_answer_was_cut_asks_once_more_for_a_shorter_one(openai, monkeypatch):
    # Given a model that runs on past the writer's cap unless it is told its answer was cut
    monkeypatch.setenv("WRITER_MAX_OUTPUT_TOKENS", "50")
    openai.replies(lambda call: "Anemones and crabs [1]." if "was cut off" in call.prompt else LONG_ANSWER)
    ctx = block_context(openai_provider(openai))
    # When
    completion = ctx.complete(PROMPT, role="writer")
    # Then the second, shorter answer is the block's, asked for within the cap, and only it is in the usage
    assert completion.text == "Anemones and crabs [1]."
    assert [c.prompt.startswith(PROMPT) for c in openai.calls] == [True, True]
    assert "limit of 50 tokens" in openai.calls[1].prompt and "at most 25 words" in openai.calls[1].prompt
    assert openai.calls[1].body["max_tokens"] == 50
    assert len(ctx.usage.calls) == 1 and ctx.usage.output_tokens == completion.output_tokens


def test_a_block_whose_answer_is_cut_twice_fails_naming_the_cap(openai, monkeypatch):
    monkeypatch.setenv("WRITER_MAX_OUTPUT_TOKENS", "50")
    openai.replies(lambda call: LONG_ANSWER)
    ctx = block_context(openai_provider(openai))
    with pytest.raises(AnswerCutError, match=r"output cap of 50 tokens.*WRITER_MAX_OUTPUT_TOKENS"):
        ctx.complete(PROMPT, role="writer")
    assert len(openai.calls) == 2 and ctx.usage.calls == []


def test_an_answer_within_the_cap_is_complete(openai, monkeypatch):
    monkeypatch.setenv("WRITER_MAX_OUTPUT_TOKENS", "300")
    openai.replies(lambda call: LONG_ANSWER)
    assert openai_provider(openai).complete(system=SYSTEM, prompt=PROMPT, role="writer").text == LONG_ANSWER


# ---- timeouts


def slow(seconds: float):
    def reply(call: Call) -> str:
        time.sleep(seconds)
        return "late"

    return reply


def test_openai_call_that_times_out_waiting_is_not_sent_again(openai):
    # Given a server still generating when the client stops waiting
    openai.replies(slow(1.0))
    provider = openai_provider(openai, timeout_seconds=0.3, attempts=3)
    # When / Then
    with pytest.raises(BlockFatalError, match="not sent again"):
        provider.complete(system=SYSTEM, prompt=PROMPT, role="writer")
    assert len(openai.calls) == 1


def test_bedrock_call_that_times_out_waiting_is_not_sent_again(bedrock):
    bedrock.replies(slow(1.5))
    provider = bedrock_provider(bedrock, read_timeout=0.3, attempts=3)
    with pytest.raises(BlockFatalError, match="not sent again"):
        provider.complete(system=SYSTEM, prompt=PROMPT, role="writer")
    assert len(bedrock.calls) == 1


# ---- the input budget


def test_an_input_over_the_budget_is_cut_to_fit_with_a_note(openai, monkeypatch):
    # Given a budget of 2,000 tokens and a prompt of about 10,000
    monkeypatch.setenv("MODEL_INPUT_TOKEN_BUDGET", "2000")
    prompt = "Question: summarise the material.\n\nMaterial:\n" + "tide pools hold crabs. " * 1800 + "\nEND OF SOURCES"
    # When
    openai_provider(openai).complete(system=SYSTEM, prompt=prompt, role="writer")
    # Then what was sent fits, keeps the request and the end, and says it was cut
    sent = openai.calls[0].prompt
    assert estimate_tokens(SYSTEM) + estimate_tokens(sent) <= 2000
    assert sent.startswith("Question: summarise the material.") and sent.endswith("END OF SOURCES")
    assert "left out here to fit the model's input budget of 2000 tokens" in sent


def test_bedrock_and_offline_calls_keep_to_the_budget(bedrock, monkeypatch):
    monkeypatch.setenv("MODEL_INPUT_TOKEN_BUDGET", "1000")
    prompt = "Task: list the facts.\n\n" + "x" * 50_000
    bedrock_provider(bedrock).complete(system=SYSTEM, prompt=prompt, role="writer")
    offline = OfflineProvider().complete(system=SYSTEM, prompt=prompt, role="writer")
    assert estimate_tokens(SYSTEM) + estimate_tokens(bedrock.calls[0].prompt) <= 1000
    assert offline.input_tokens <= 1000


def test_an_input_within_the_budget_is_sent_whole():
    prompt = "Question: what lives in tide pools?\n" + "crabs " * 100
    assert fit_input(SYSTEM, prompt, budget=24_000) == prompt


def test_an_endpoint_that_takes_only_max_completion_tokens_gets_the_cap_that_way(openai):
    # Given an endpoint that refuses max_tokens, as OpenAI's reasoning models do
    openai.fail_next(
        400,
        "unsupported_parameter",
        message="Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' "
        "instead.",
    )
    # When two providers (two blocks of one container) call it
    first = openai_provider(openai).complete(system=SYSTEM, prompt=PROMPT, role="writer")
    openai_provider(openai).complete(system=SYSTEM, prompt=PROMPT, role="planner")
    # Then the cap went as max_completion_tokens, from then on
    assert first.text.startswith("Answer from")
    assert "max_tokens" in openai.calls[0].body
    assert [c.body.get("max_completion_tokens") for c in openai.calls[1:]] == [4096, 2048]
    assert not any("max_tokens" in c.body for c in openai.calls[1:])
