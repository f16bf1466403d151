"""The model providers against fake servers that speak their wire formats (Converse through boto3's
bedrock-runtime client; OpenAI-compatible chat completions over HTTP), and the offline provider."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from canvas_core import settings
from canvas_core.errors import BlockFatalError, BlockRetryableError
from canvas_core.providers import get_provider
from canvas_core.providers.bedrock import BedrockProvider, bedrock_runtime
from canvas_core.providers.offline import MODEL_ID, NOTICE, OfflineProvider
from canvas_core.providers.openai import OpenAIProvider, _secret_api_key
from canvas_core.providers.roles import model_for_role
from tests.fakes.model_servers import FakeBedrock, FakeOpenAI, tokens

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("model_env")]

SYSTEM = "You are the Writer agent."
PROMPT = "Question: What lives in tide pools?"


@pytest.fixture
def bedrock() -> Iterator[FakeBedrock]:
    with FakeBedrock() as fake:
        yield fake


@pytest.fixture
def openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(api_key="sk-test") as fake:
        yield fake


def bedrock_provider(fake: FakeBedrock, **options) -> BedrockProvider:
    return BedrockProvider(runtime=bedrock_runtime(fake.url, "us-east-1"), backoff_seconds=0, **options)


def openai_provider(fake: FakeOpenAI, **options) -> OpenAIProvider:
    options.setdefault("api_key", "sk-test")
    return OpenAIProvider(base_url=fake.base_url, backoff_seconds=0, **options)


# ---- Bedrock (Converse)


def test_bedrock_calls_the_role_model_and_reports_its_token_usage(bedrock, monkeypatch):
    # Given a model per role
    monkeypatch.setenv("PLANNER_MODEL_ID", "amazon.nova-lite-v1:0")
    monkeypatch.setenv("WRITER_MODEL_ID", "us.amazon.nova-pro-v1:0")
    provider = bedrock_provider(bedrock)
    # When
    planned = provider.complete(system=SYSTEM, prompt=PROMPT, role="planner")
    written = provider.complete(system=SYSTEM, prompt=PROMPT, role="writer")
    # Then each call went to its role's model, with the system prompt and the prompt as Converse sends them
    assert [c.model for c in bedrock.calls] == ["amazon.nova-lite-v1:0", "us.amazon.nova-pro-v1:0"]
    assert bedrock.calls[0].body["system"] == [{"text": SYSTEM}]
    assert bedrock.calls[0].body["messages"] == [{"role": "user", "content": [{"text": PROMPT}]}]
    assert written.text == "Answer from us.amazon.nova-pro-v1:0: tide pools hold anemones and crabs [1]."
    assert (written.model_id, planned.model_id) == ("us.amazon.nova-pro-v1:0", "amazon.nova-lite-v1:0")
    assert written.input_tokens == tokens(SYSTEM + " " + PROMPT)
    assert written.output_tokens == tokens(written.text)


def test_bedrock_endpoint_comes_from_the_environment(bedrock, monkeypatch):
    # Given no client passed in: the provider builds one for AWS_ENDPOINT_URL_BEDROCK_RUNTIME
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", bedrock.url)
    monkeypatch.setenv("WRITER_MODEL_ID", "amazon.nova-micro-v1:0")
    # When
    completion = get_provider("bedrock").complete(system=SYSTEM, prompt=PROMPT, role="writer")
    # Then
    assert completion.model_id == "amazon.nova-micro-v1:0" and bedrock.calls[0].model == "amazon.nova-micro-v1:0"


@pytest.mark.parametrize("code,status", [("ThrottlingException", 429), ("InternalServerException", 500)])
def test_bedrock_retries_a_passing_failure(bedrock, code, status):
    # Given the first call is throttled (or fails inside Bedrock)
    bedrock.fail_next(status, code)
    # When
    completion = bedrock_provider(bedrock).complete(system=SYSTEM, prompt=PROMPT, role="writer")
    # Then the second attempt answered
    assert len(bedrock.calls) == 2
    assert completion.text.startswith("Answer from")


def test_bedrock_throttled_on_every_attempt_raises_a_retryable_block_error(bedrock):
    # Given
    bedrock.fail_next(429, "ThrottlingException", times=3, message="Too many requests, please wait")
    # When
    with pytest.raises(BlockRetryableError) as raised:
        bedrock_provider(bedrock, attempts=3).complete(system=SYSTEM, prompt=PROMPT, role="writer")
    # Then the state machine can retry the block later, and the reason says what happened
    assert "ThrottlingException" in str(raised.value) and "Too many requests" in str(raised.value)
    assert len(bedrock.calls) == 3


@pytest.mark.parametrize(
    "code,status",
    [("ValidationException", 400), ("AccessDeniedException", 403), ("ResourceNotFoundException", 404)],
)
def test_bedrock_refusals_are_fatal_with_bedrocks_message(bedrock, code, status):
    # Given
    bedrock.fail_next(status, code, message="The model id is not valid here")
    # When
    with pytest.raises(BlockFatalError) as raised:
        bedrock_provider(bedrock).complete(system=SYSTEM, prompt=PROMPT, role="writer")
    # Then no retry, and the block's reason is Bedrock's
    assert len(bedrock.calls) == 1
    assert code in str(raised.value) and "The model id is not valid here" in str(raised.value)


def test_bedrock_unreachable_is_retryable():
    # Given an endpoint nobody listens on
    runtime = bedrock_runtime(f"http://127.0.0.1:{free_port()}", "us-east-1")
    # When / Then
    with pytest.raises(BlockRetryableError, match="unreachable"):
        BedrockProvider(runtime=runtime, backoff_seconds=0, attempts=2).complete(
            system=SYSTEM, prompt=PROMPT, role="writer"
        )


# ---- OpenAI-compatible chat completions


def test_openai_sends_chat_completions_with_the_key_and_the_role_model(openai, monkeypatch):
    # Given
    monkeypatch.setenv("RESEARCHER_MODEL_ID", "llama3.1:8b")
    monkeypatch.setenv("WRITER_MODEL_ID", "gpt-4o-mini")
    provider = openai_provider(openai)
    # When
    researched = provider.complete(system=SYSTEM, prompt=PROMPT, role="analyst")
    written = provider.complete(system=SYSTEM, prompt=PROMPT, role="writer")
    # Then
    first = openai.calls[0]
    assert first.headers["authorization"] == "Bearer sk-test"
    assert first.body == {
        "model": "llama3.1:8b",
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}],
        "max_tokens": 2048,
    }
    assert (researched.model_id, written.model_id) == ("llama3.1:8b", "gpt-4o-mini")
    assert written.text == "Answer from gpt-4o-mini: tide pools hold anemones and crabs [1]."
    assert (written.input_tokens, written.output_tokens) == (tokens(SYSTEM + " " + PROMPT), tokens(written.text))


def test_openai_configured_from_the_environment(openai, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", openai.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_API_KEY_SECRET_ARN", raising=False)
    completion = get_provider("openai").complete(system=SYSTEM, prompt=PROMPT, role="writer")
    assert completion.model_id == OpenAIProvider.DEFAULT_MODEL_ID
    assert openai.calls[0].headers["authorization"] == "Bearer sk-test"


def test_openai_retries_429_and_5xx_honouring_retry_after(openai):
    # Given a rate limit, then an overloaded server
    openai.fail_next(429, "rate_limit_exceeded", retry_after="0", message="Rate limit reached for requests")
    openai.fail_next(503, "overloaded")
    # When
    completion = openai_provider(openai).complete(system=SYSTEM, prompt=PROMPT, role="writer")
    # Then
    assert len(openai.calls) == 3 and completion.text.startswith("Answer from")


def test_openai_rate_limited_on_every_attempt_raises_a_retryable_block_error(openai):
    openai.fail_next(429, "rate_limit_exceeded", times=2, retry_after="0", message="Rate limit reached")
    with pytest.raises(BlockRetryableError) as raised:
        openai_provider(openai, attempts=2).complete(system=SYSTEM, prompt=PROMPT, role="writer")
    assert "429" in str(raised.value) and "Rate limit reached" in str(raised.value)


def test_openai_exhausted_quota_is_not_retried(openai):
    openai.fail_next(429, "insufficient_quota", message="You exceeded your current quota")
    with pytest.raises(BlockFatalError, match="You exceeded your current quota"):
        openai_provider(openai).complete(system=SYSTEM, prompt=PROMPT, role="writer")
    assert len(openai.calls) == 1


def test_openai_wrong_key_is_fatal_with_the_endpoints_message(openai):
    with pytest.raises(BlockFatalError) as raised:
        openai_provider(openai, api_key="sk-wrong").complete(system=SYSTEM, prompt=PROMPT, role="writer")
    assert "401" in str(raised.value) and "Incorrect API key provided" in str(raised.value)


def test_openai_unknown_model_says_to_set_the_model_ids(openai):
    openai.fail_next(404, "model_not_found", message="The model `amazon.nova-pro-v1:0` does not exist")
    with pytest.raises(BlockFatalError) as raised:
        openai_provider(openai).complete(system=SYSTEM, prompt=PROMPT, role="writer")
    assert "does not exist" in str(raised.value) and "PlannerModelId/WriterModelId" in str(raised.value)


def test_openai_answer_that_is_not_json_is_fatal(openai):
    # Given a 200 answer that is an HTML page (a proxy in the way, say)
    openai.answer_raw_next(b"<html><body>Welcome</body></html>")
    # When / Then
    with pytest.raises(BlockFatalError, match="not JSON"):
        openai_provider(openai).complete(system=SYSTEM, prompt=PROMPT, role="writer")


def test_openai_unreachable_endpoint_is_retryable():
    provider = OpenAIProvider(base_url=f"http://127.0.0.1:{free_port()}/v1", backoff_seconds=0, attempts=2)
    with pytest.raises(BlockRetryableError, match="unreachable"):
        provider.complete(system=SYSTEM, prompt=PROMPT, role="writer")


def test_openai_key_from_secrets_manager(openai, monkeypatch):
    # Given the key only in a secret, as JSON
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", openai.base_url)
    _secret_api_key.cache_clear()
    from canvas_core.adapters.aws import reset_clients

    reset_clients()
    with mock_aws():
        arn = boto3.client("secretsmanager", region_name="us-east-1").create_secret(
            Name="openai", SecretString=json.dumps({"api_key": "sk-test"})
        )["ARN"]
        monkeypatch.setenv("OPENAI_API_KEY_SECRET_ARN", arn)
        # When
        get_provider("openai").complete(system=SYSTEM, prompt=PROMPT, role="writer")
    # Then
    assert openai.calls[0].headers["authorization"] == "Bearer sk-test"
    _secret_api_key.cache_clear()
    reset_clients()


def test_openai_secret_that_cannot_be_read_is_fatal(monkeypatch):
    _secret_api_key.cache_clear()
    from canvas_core.adapters.aws import reset_clients

    reset_clients()
    with mock_aws():
        missing = "arn:aws:secretsmanager:us-east-1:123456789012:secret:nope-AbCdEf"
        with pytest.raises(BlockFatalError, match="could not be read"):
            _secret_api_key(missing)
        arn = boto3.client("secretsmanager", region_name="us-east-1").create_secret(
            Name="odd", SecretString=json.dumps({"token": "x"})
        )["ARN"]
        with pytest.raises(BlockFatalError, match="without an `api_key`"):
            _secret_api_key(arn)
    _secret_api_key.cache_clear()
    reset_clients()


# ---- choosing a provider and a model


def test_provider_is_chosen_by_model_provider(monkeypatch):
    monkeypatch.setenv("MODEL_PROVIDER", "offline")
    assert isinstance(get_provider(), OfflineProvider)
    monkeypatch.setenv("MODEL_PROVIDER", "bedrock")
    settings.reset()
    assert isinstance(get_provider(), BedrockProvider)
    with pytest.raises(ValueError, match="Unknown model provider: 'gemini'"):
        get_provider("gemini")


def test_model_per_role_precedence():
    env = {"WRITER_MODEL_ID": "w", "RESEARCHER_MODEL_ID": "r", "PLANNER_MODEL_ID": "p", "REVIEWER_MODEL_ID": "rv"}
    assert model_for_role("planner", "d", env) == "p"
    assert model_for_role("writer", "d", env) == "w"
    assert model_for_role("analyst", "d", env) == "r"
    assert model_for_role("reviewer", "d", env) == "rv"
    assert model_for_role("designer", "d", env) == "w"
    assert model_for_role("planner", "d", {"WRITER_MODEL_ID": "w"}) == "w"
    assert model_for_role("analyst", "d", {}) == "d"


# ---- offline


def test_offline_writes_extractively_and_says_so():
    # Given material with one source per section
    prompt = (
        "Question: What do the notes say about the launch?\n\nMaterial:\n"
        "## notes.txt (sources [1])\nThe beta starts in January with fifty customers. Launch is planned for March.\n"
        "## weather.txt (sources [2])\nIt rained on most days of the trial period in the north.\n\n"
        "Sources:\n[1] notes.txt\n[2] weather.txt"
    )
    # When
    first = OfflineProvider().complete(system=SYSTEM, prompt=prompt, role="writer")
    again = OfflineProvider().complete(system=SYSTEM, prompt=prompt, role="writer")
    # Then
    assert first == again and first.model_id == MODEL_ID
    assert first.text.startswith(NOTICE)
    assert "Question: What do the notes say about the launch?" in first.text
    assert "- Launch is planned for March [1]." in first.text
    assert "- It rained on most days of the trial period in the north [2]." in first.text
    assert first.input_tokens > 0 and first.output_tokens > 0


def test_offline_keeps_the_points_that_bear_on_the_task():
    material = "\n".join(f"Filler sentence number {i} about nothing in particular." for i in range(12))
    prompt = f"Task: When is the launch?\n\nMaterial:\n## notes\n{material}\nThe launch happens on the first of March."
    text = OfflineProvider().complete(system="", prompt=prompt, role="analyst").text
    assert "The launch happens on the first of March." in text
    assert text.count("\n- ") == 8


def test_offline_without_material_says_so_and_answers_a_table_request_with_the_request():
    plain = OfflineProvider().complete(system="", prompt="Explain tides", role="analyst").text
    assert "Task: Explain tides" in plain and "No material was provided beyond the prompt itself." in plain
    table = (
        OfflineProvider()
        .complete(
            system="",
            prompt="Tabulate tide pool animals.\n\nAnswer with one markdown table and nothing else.",
            role="x",
        )
        .text
    )
    assert "| # | Point |" in table and "| 1 | Tabulate tide pool animals. |" in table


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_offline_keeps_a_sections_own_citations_and_skips_titles_and_repeats():
    # Given an analysis that cites its file for one point but not for another, and repeats a point
    prompt = (
        "Question: How warm are the tide pools?\n\nMaterial:\n"
        "## Analysis (sources [1])\n# Warming of the tide pools\n"
        "- Water temperature in the pools rose by two degrees [1].\n"
        "- No web search provider is configured for the tide pools search.\n"
        "## Review (sources [1])\n- Water temperature in the pools rose by two degrees [1] .\n"
    )
    # When
    text = OfflineProvider().complete(system="", prompt=prompt, role="writer").text
    # Then
    assert text.count("Water temperature in the pools rose by two degrees") == 1
    assert "- No web search provider is configured for the tide pools search.\n" in text + "\n"
    assert "Warming of the tide pools" not in text


def test_offline_reads_tables_as_figures_not_as_rows_and_skips_lines_about_the_work():
    # Given a file-block's typed table and an image-block's metadata
    prompt = (
        "Question: How did sales go?\n\nMaterial:\n"
        "## sales.xlsx (sources [1])\n### Sheet Q1\n\nColumns: Region (text), Q1 (integer), Q2 (integer)\n\n"
        "| Region | Q1 | Q2 |\n| --- | ---: | ---: |\n| North | 120 | 140 |\n| South | 95 | 110 |\n| West | 80 | 99 |\n"
        "## logo.png (sources [2])\nImage logo.png: PNG, 200x80 pixels, RGB colour, 291 bytes.\n\n"
        "Sources:\n[1] sales.xlsx\n[2] logo.png"
    )
    # When
    text = OfflineProvider().complete(system="", prompt=prompt, role="writer").text
    # Then what the table shows, per measured column, and the image named (its source cited), no rows or types
    assert "- Q1 in Sales (Q1): highest for North (120), lowest for West (80); 295 in all [1]." in text
    assert "- Q2 in Sales (Q1): highest for North (140), lowest for West (99); 349 in all [1]." in text
    assert "- logo.png is an image the requester provided [2]." in text
    assert "Columns:" not in text and "| North |" not in text and "200x80" not in text


def test_offline_cites_every_source_of_its_material_and_each_page_of_a_pdf():
    # Given twelve strong points from one file, and a weaker one from a second and a PDF read page by page
    strong = " ".join(f"The launch plan step {i} is ready for the launch." for i in range(12))
    prompt = (
        "Question: Is the launch ready?\n\nMaterial:\n"
        f"## plan.txt (sources [1])\n{strong}\n"
        "## weather.txt (sources [2])\nIt rained on most days of the trial period in the north.\n"
        "## report.pdf (sources [3] [4])\n### Page 1\n\nThe budget was approved in May.\n\n"
        "### Page 2\n\nThe venue holds three hundred people.\n\n"
        "Sources:\n[1] plan.txt\n[2] weather.txt\n[3] report.pdf, page 1\n[4] report.pdf, page 2"
    )
    # When
    text = OfflineProvider().complete(system="", prompt=prompt, role="writer").text
    # Then every source is cited at least once, each PDF page by its own number
    assert all(f"[{n}]" in text for n in (1, 2, 3, 4))
    assert "- The budget was approved in May [3]." in text
    assert "- The venue holds three hundred people [4]." in text


def test_offline_writes_a_section_per_outline_item_from_the_material_bearing_on_it():
    from canvas_core.prompt_format import NOT_COVERED, outline_text

    # Given a deliverable's request with an outline, and material on two of its three items
    task = "Write a report.\n\n" + outline_text(["Summary", "Running costs", "Installation", "Emissions"])
    prompt = (
        f"{task}\n\nMaterial:\n## notes.md (sources [1])\n"
        "A heat pump costs 900 pounds a year to run. Installing a heat pump takes three days.\n\nSources:\n[1] notes.md"
    )
    # When
    text = OfflineProvider().complete(system="", prompt=prompt, role="writer").text
    # Then one section per item, in order, and plainly nothing where the material has nothing; no scaffolding
    sections = [line for line in text.splitlines() if line.startswith("## ")]
    assert sections == ["## Summary", "## Running costs", "## Installation", "## Emissions"]
    running, installation, emissions = (
        text.split("## Running costs")[1].split("## Installation")[0],
        (text.split("## Installation")[1].split("## Emissions")[0]),
        text.split("## Emissions")[1],
    )
    assert "900 pounds a year to run [1]" in running and "three days [1]" in installation
    assert emissions.strip() == NOT_COVERED
    assert NOTICE not in text and "Task:" not in text
