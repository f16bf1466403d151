"""Images and the model providers: an uploaded image described by a multimodal model (a Converse image block; a
chat-completions `image_url` part) against the fake servers, through the image-block's upload path too, and the
Bedrock image model that draws for image-block."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError

from canvas_core import settings
from canvas_core.blocks import image_upload
from canvas_core.blocks.context import BlockContext
from canvas_core.blocks.image_generate import image_model
from canvas_core.blocks.image_upload import ImageDescriber
from canvas_core.errors import BlockFatalError, BlockRetryableError
from canvas_core.models.items import NodeItem, RunItem, Upload
from canvas_core.pricing import usage_credits
from canvas_core.providers import get_provider
from canvas_core.providers.bedrock import BedrockProvider, bedrock_runtime
from canvas_core.providers.offline import OfflineProvider
from canvas_core.providers.openai import OpenAIProvider
from tests.fakes import files
from tests.fakes.model_servers import IMAGE_TOKENS, FakeBedrock, FakeOpenAI, Image, tokens

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("model_env")]

SYSTEM = "You are the Researcher agent."
PROMPT = "Describe the image red.png for a research team."
PNG = files.image("png", (4, 4))
DESCRIPTION = "A red square on a white ground."


@pytest.fixture
def bedrock() -> Iterator[FakeBedrock]:
    with FakeBedrock(reply=lambda call: DESCRIPTION) as fake:
        yield fake


@pytest.fixture
def openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(reply=lambda call: DESCRIPTION, api_key="sk-test") as fake:
        yield fake


def bedrock_provider(fake: FakeBedrock, **options) -> BedrockProvider:
    return BedrockProvider(runtime=bedrock_runtime(fake.url, "us-east-1"), backoff_seconds=0, **options)


def openai_provider(fake: FakeOpenAI) -> OpenAIProvider:
    return OpenAIProvider(base_url=fake.base_url, api_key="sk-test", backoff_seconds=0)


class MemoryFiles:
    def __init__(self) -> None:
        self.objects: dict[str, tuple[bytes, str]] = {}

    def put(self, key: str, data: bytes, content_type: str) -> None:
        self.objects[key] = (data, content_type)

    def get(self, key: str) -> bytes:
        return self.objects[key][0]


def upload_context(name: str, data: bytes, provider) -> BlockContext:
    """An image-block over one uploaded file, as the runner builds it."""
    key = f"uploads/acct/run-1/f0/{name}"
    store = MemoryFiles()
    store.put(key, data, "application/octet-stream")
    upload = Upload(
        file_id="f0", name=name, extension=name.rsplit(".", 1)[1], content_type="x", size_bytes=len(data), s3_key=key
    )
    run = RunItem(
        run_id="run-1",
        account_id="acct",
        canvas_id="canvas-1",
        prompt="Tell me about the colours of the brand",
        template="auto",
        uploads=[upload],
        created_at_ms=0,
        estimated_duration_ms=0,
    )
    node = NodeItem(canvas_id="canvas-1", block_id="b-1", name=name, type="image-block", upload_id="f0")
    return BlockContext(run=run, node=node, inputs=[], files=store, provider=provider)


# ---- Bedrock: a Converse image block


def test_bedrock_sends_the_image_as_a_converse_image_block_to_the_vision_model(bedrock, monkeypatch):
    # Given a model for the vision role
    monkeypatch.setenv("WRITER_MODEL_ID", "amazon.nova-pro-v1:0")
    monkeypatch.setenv("VISION_MODEL_ID", "us.amazon.nova-lite-v1:0")
    # When
    completion = bedrock_provider(bedrock).describe_image(
        system=SYSTEM, prompt=PROMPT, image=PNG, image_format="png", role="vision"
    )
    # Then the bytes reached the model in the image block (boto3 sends them in base64), before the instruction
    [call] = bedrock.calls
    assert call.model == "us.amazon.nova-lite-v1:0"
    assert call.images == [Image("png", PNG)]
    [message] = call.body["messages"]
    assert message["role"] == "user"
    assert message["content"][0] == {"image": {"format": "png", "source": {"bytes": base64.b64encode(PNG).decode()}}}
    assert message["content"][1] == {"text": PROMPT}
    assert call.body["system"] == [{"text": SYSTEM}]
    # and the answer comes back with the tokens the image cost
    assert (completion.text, completion.model_id) == (DESCRIPTION, "us.amazon.nova-lite-v1:0")
    assert completion.input_tokens == tokens(SYSTEM + " " + PROMPT) + IMAGE_TOKENS
    assert completion.output_tokens == tokens(DESCRIPTION)


def test_bedrock_vision_role_uses_the_writers_model_without_one_of_its_own(bedrock, monkeypatch):
    monkeypatch.setenv("WRITER_MODEL_ID", "amazon.nova-pro-v1:0")
    monkeypatch.setenv("RESEARCHER_MODEL_ID", "amazon.nova-micro-v1:0")  # text only: not for images
    completion = bedrock_provider(bedrock).describe_image(
        system="", prompt=PROMPT, image=files.image("jpeg"), image_format="jpeg", role="vision"
    )
    assert completion.model_id == "amazon.nova-pro-v1:0" and bedrock.calls[0].images[0].format == "jpeg"
    assert "system" not in bedrock.calls[0].body


def test_bedrock_retries_a_throttled_image_description(bedrock):
    # Given the first call is throttled
    bedrock.fail_next(429, "ThrottlingException", message="Too many requests")
    # When
    completion = bedrock_provider(bedrock).describe_image(
        system=SYSTEM, prompt=PROMPT, image=PNG, image_format="png", role="vision"
    )
    # Then the second attempt, with the same image, answered
    assert completion.text == DESCRIPTION
    assert [c.images for c in bedrock.calls] == [[Image("png", PNG)]] * 2


def test_bedrock_refusing_the_image_is_fatal_with_bedrocks_message(bedrock):
    bedrock.fail_next(400, "ValidationException", message="Model does not support images")
    with pytest.raises(BlockFatalError, match=r"ValidationException.*Model does not support images"):
        bedrock_provider(bedrock).describe_image(
            system=SYSTEM, prompt=PROMPT, image=PNG, image_format="png", role="vision"
        )
    assert len(bedrock.calls) == 1


def test_bedrock_sends_no_format_a_converse_image_block_cannot_hold(bedrock):
    with pytest.raises(BlockFatalError, match="not SVG"):
        bedrock_provider(bedrock).describe_image(
            system=SYSTEM, prompt=PROMPT, image=files.SVG, image_format="svg", role="vision"
        )
    assert bedrock.calls == []


# ---- OpenAI-compatible: an image_url part with a data URL


def test_openai_sends_the_image_as_a_data_url_part(openai, monkeypatch):
    # Given
    monkeypatch.setenv("WRITER_MODEL_ID", "gpt-4o")
    # When
    completion = openai_provider(openai).describe_image(
        system=SYSTEM, prompt=PROMPT, image=PNG, image_format="png", role="vision"
    )
    # Then
    [call] = openai.calls
    assert call.body == {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": PROMPT},
                    {
                        "type": "image_url",
                        "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()},
                    },
                ],
            },
        ],
        "max_tokens": 1024,
    }
    assert call.images == [Image("png", PNG)]
    assert (completion.text, completion.model_id) == (DESCRIPTION, "gpt-4o")
    assert completion.input_tokens == tokens(SYSTEM + " " + PROMPT) + IMAGE_TOKENS


def test_openai_retries_a_rate_limited_image_description(openai):
    openai.fail_next(429, "rate_limit_exceeded", retry_after="0")
    completion = openai_provider(openai).describe_image(
        system=SYSTEM, prompt=PROMPT, image=files.image("webp"), image_format="webp", role="vision"
    )
    assert completion.text == DESCRIPTION and [c.images[0].format for c in openai.calls] == ["webp", "webp"]


# ---- which providers see images


def test_bedrock_and_openai_describe_images_and_offline_does_not():
    assert isinstance(BedrockProvider(), ImageDescriber)
    assert isinstance(OpenAIProvider(), ImageDescriber)
    assert not isinstance(OfflineProvider(), ImageDescriber)
    assert not isinstance(get_provider("offline"), ImageDescriber)


# ---- image-block over an upload, with a provider against the fakes


def test_an_uploaded_image_is_described_beside_its_metadata_and_the_usage_recorded(bedrock, monkeypatch):
    # Given
    monkeypatch.setenv("VISION_MODEL_ID", "amazon.nova-lite-v1:0")
    ctx = upload_context("red.png", PNG, bedrock_provider(bedrock))
    # When
    out = image_upload.run(ctx)
    # Then the image reached the model, and its words follow the metadata
    assert bedrock.calls[0].images == [Image("png", PNG)]
    assert "Tell me about the colours of the brand" in bedrock.calls[0].prompt
    lines = out.content.splitlines()
    assert lines[0].startswith("Image red.png: PNG, 4x4 pixels")
    assert lines[-1] == f"Description: {DESCRIPTION}"
    # and the call is in the block's usage, so its credits count it
    used_in = tokens(bedrock.calls[0].system + " " + bedrock.calls[0].prompt) + IMAGE_TOKENS
    assert ctx.usage.models_used == ["amazon.nova-lite-v1:0"]
    assert ctx.usage.calls == [("amazon.nova-lite-v1:0", used_in, tokens(DESCRIPTION))]
    assert usage_credits(ctx.usage.calls) > 0


def test_an_uploaded_image_is_described_through_openai_too(openai):
    ctx = upload_context("photo.jpg", files.image("jpeg"), openai_provider(openai))
    out = image_upload.run(ctx)
    assert openai.calls[0].images[0].format == "jpeg"
    assert f"Description: {DESCRIPTION}" in out.content
    assert ctx.usage.models_used == [OpenAIProvider.DEFAULT_MODEL_ID]


def test_a_model_refusing_the_image_leaves_the_metadata_and_says_why(bedrock):
    # Given a model that cannot take images
    bedrock.fail_next(400, "ValidationException", message="This model doesn't support image input")
    ctx = upload_context("red.png", PNG, bedrock_provider(bedrock))
    # When
    out = image_upload.run(ctx)
    # Then the block still completes with the metadata, and no model use is charged
    assert out.content.startswith("Image red.png: PNG, 4x4 pixels")
    assert "Description: (not available: Bedrock ValidationException" in out.content
    assert "doesn't support image input" in out.content
    assert ctx.usage.calls == []


def test_an_image_description_throttled_on_every_attempt_is_retried_later(bedrock):
    bedrock.fail_next(429, "ThrottlingException", times=3)
    ctx = upload_context("red.png", PNG, bedrock_provider(bedrock, attempts=3))
    with pytest.raises(BlockRetryableError, match="ThrottlingException"):
        image_upload.run(ctx)
    assert len(bedrock.calls) == 3


def test_an_svg_is_not_sent_to_the_model(bedrock):
    ctx = upload_context("badge.svg", files.SVG, bedrock_provider(bedrock))
    out = image_upload.run(ctx)
    assert bedrock.calls == [] and "Description" not in out.content
    assert "Text in the image: Quarterly badge; Q3 growth 12%" in out.content


def test_offline_describes_an_upload_by_its_metadata_only():
    ctx = upload_context("red.png", PNG, OfflineProvider())
    out = image_upload.run(ctx)
    assert out.content.startswith("Image red.png: PNG, 4x4 pixels") and "Description" not in out.content
    assert ctx.usage.calls == []


# ---- Bedrock's image model, for image-block without an upload


class InvokeRuntime:
    """bedrock-runtime's InvokeModel: fails with the given codes first, then answers."""

    def __init__(self, answer: dict, errors: tuple[str, ...] = ()):
        self.answer, self.errors, self.calls = answer, list(errors), []

    def invoke_model(self, **request):
        self.calls.append(request)
        if self.errors:
            raise ClientError({"Error": {"Code": self.errors.pop(0), "Message": "slow down"}}, "InvokeModel")
        return {"body": io.BytesIO(json.dumps(self.answer).encode())}


def test_bedrock_draws_with_the_image_model_only_when_one_is_set(monkeypatch):
    # Given no image model: the provider offers none, and image-block draws by itself
    provider = BedrockProvider(runtime=InvokeRuntime({}), backoff_seconds=0)
    assert provider.generate_image is None and image_model(provider) is None
    # When IMAGE_MODEL_ID names one, and the first call is throttled
    monkeypatch.setenv("IMAGE_MODEL_ID", "amazon.nova-canvas-v1:0")
    settings.reset()
    png = files.image("png", (16, 16))
    runtime = InvokeRuntime({"images": [base64.b64encode(png).decode()]}, errors=("ThrottlingException",))
    provider = BedrockProvider(runtime=runtime, backoff_seconds=0)
    data, model_id = image_model(provider).generate_image(prompt="A lighthouse", width=1280, height=720)
    # Then the retry drew it with a TEXT_IMAGE request
    assert (data, model_id) == (png, "amazon.nova-canvas-v1:0")
    assert len(runtime.calls) == 2 and runtime.calls[1]["modelId"] == "amazon.nova-canvas-v1:0"
    body = json.loads(runtime.calls[1]["body"])
    assert body["taskType"] == "TEXT_IMAGE" and body["textToImageParams"] == {"text": "A lighthouse"}
    assert (body["imageGenerationConfig"]["width"], body["imageGenerationConfig"]["height"]) == (1280, 720)
