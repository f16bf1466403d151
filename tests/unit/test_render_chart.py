"""canvas_core/render/chart.py (PNG charts and title cards drawn with Pillow) and the Bedrock image model
image-block calls when one is configured (canvas_core/blocks/image_generate.py), with a fake runtime."""

from __future__ import annotations

import base64
import io
import json

import pytest
from botocore.exceptions import ClientError
from PIL import Image

from canvas_core import settings
from canvas_core.blocks.image_generate import BedrockImageModel, image_model
from canvas_core.errors import BlockFatalError, BlockRetryableError
from canvas_core.render import RenderCheckError
from canvas_core.render.chart import HEIGHT, WIDTH, check_image, check_png, render_bar_chart, render_card
from canvas_core.tables import Table

pytestmark = pytest.mark.unit

SALES = Table(["Region", "Revenue", "Cost"], [["North", "$1,200", "$800"], ["South", "$-200", "$100"]], "Sales")


def pixels(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data)).convert("RGB")


def test_a_bar_chart_is_a_png_with_a_bar_per_row_and_series():
    # When
    data = render_bar_chart(SALES)
    # Then
    assert check_png(data) == (WIDTH, HEIGHT)
    colours = {c for _, c in pixels(data).getcolors(maxcolors=1_000_000)}
    assert (31, 78, 121) in colours and (46, 134, 171) in colours  # one colour per series


def test_a_table_without_numbers_cannot_be_charted():
    with pytest.raises(ValueError, match="no label column with numbers"):
        render_bar_chart(Table(["a", "b"], [["x", "y"], ["z", "w"]]))


def test_a_title_card_is_a_png():
    data = render_card("Four-day work week", "What the evidence says")
    assert check_png(data) == (WIDTH, HEIGHT)
    assert len(pixels(data).getcolors(maxcolors=1_000_000)) > 100  # a gradient and text, not a blank


def test_the_check_refuses_what_is_not_a_png():
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buffer, format="JPEG")
    assert check_image(buffer.getvalue())[0] == "jpeg"
    with pytest.raises(RenderCheckError, match="JPEG, not PNG"):
        check_png(buffer.getvalue())
    with pytest.raises(RenderCheckError, match="does not reopen as an image"):
        check_png(b"\x89PNG\r\n\x1a\n truncated")


class FakeRuntime:
    def __init__(self, answer: dict | None = None, error: str | None = None):
        self.answer, self.error, self.calls = answer, error, []

    def invoke_model(self, **request):
        self.calls.append(request)
        if self.error:
            raise ClientError({"Error": {"Code": self.error, "Message": "no"}}, "InvokeModel")
        return {"body": io.BytesIO(json.dumps(self.answer).encode())}


def test_bedrock_draws_with_a_text_to_image_request():
    # Given
    png = render_card("x")
    runtime = FakeRuntime({"images": [base64.b64encode(png).decode()]})
    # When
    data, model_id = BedrockImageModel("amazon.nova-canvas-v1:0", runtime).generate_image(
        prompt="A lighthouse", width=1280, height=720
    )
    # Then
    assert (data, model_id) == (png, "amazon.nova-canvas-v1:0")
    body = json.loads(runtime.calls[0]["body"])
    assert body["taskType"] == "TEXT_IMAGE" and body["textToImageParams"] == {"text": "A lighthouse"}
    assert body["imageGenerationConfig"]["width"] == 1280


@pytest.mark.parametrize(
    ("runtime", "error", "message"),
    [
        (FakeRuntime(error="ThrottlingException"), BlockRetryableError, "Bedrock ThrottlingException"),
        (FakeRuntime(error="ValidationException"), BlockFatalError, "Bedrock ValidationException"),
        (FakeRuntime({"images": [], "error": "blocked by content filters"}), BlockFatalError, "content filters"),
    ],
)
def test_bedrock_failures_say_whether_to_retry(runtime, error, message):
    with pytest.raises(error, match=message):
        BedrockImageModel("amazon.nova-canvas-v1:0", runtime).generate_image(prompt="x", width=16, height=16)


def test_the_image_model_is_the_providers_else_bedrocks_when_configured(monkeypatch):
    class Drawing:
        def generate_image(self, *, prompt, width, height):
            return b"", "fake"

    monkeypatch.delenv("IMAGE_MODEL_ID", raising=False)
    assert image_model(Drawing()) is not None
    assert image_model(object()) is None
    monkeypatch.setenv("IMAGE_MODEL_ID", "amazon.nova-canvas-v1:0")
    monkeypatch.setenv("MODEL_PROVIDER", "bedrock")
    settings.reset()
    assert isinstance(image_model(object()), BedrockImageModel)
    monkeypatch.setenv("MODEL_PROVIDER", "offline")
    settings.reset()
    assert image_model(object()) is None
