"""image-block over an uploaded image through its Lambda handler, under moto, with the model provider against the
fake Bedrock server (127.0.0.1): the image reaches the model, its description sits beside the metadata, and the
block's credits count the call; offline, the block keeps to the metadata."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from canvas_core.adapters.store import Store
from canvas_core.models.api import CreateRunRequest, UploadedFile
from canvas_core.models.catalog import TaskType
from canvas_core.models.items import NodeItem, TaskItem
from canvas_core.planner import persona_task_id
from canvas_core.pricing import usage_credits
from canvas_core.runs import create_run
from tests.fakes import files
from tests.fakes.model_servers import IMAGE_TOKENS, FakeBedrock, Image, tokens

pytestmark = pytest.mark.component

VISION = "us.amazon.nova-lite-v1:0"
DESCRIPTION = "A red square on a white ground; no text."
PNG = files.image("png", (8, 6))


@pytest.fixture
def bedrock(aws, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeBedrock]:
    with FakeBedrock(reply=lambda call: DESCRIPTION) as fake:
        for name, value in {
            "MODEL_PROVIDER": "bedrock",
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": fake.url,
            "WRITER_MODEL_ID": "amazon.nova-pro-v1:0",
            "VISION_MODEL_ID": VISION,
            "MODEL_RETRY_BACKOFF_SECONDS": "0",
        }.items():
            monkeypatch.setenv(name, value)
        yield fake


def image_block(account, name: str = "red.png", data: bytes = PNG) -> tuple[SimpleNamespace, NodeItem]:
    """A run with one uploaded image and an image-block over it."""
    request = CreateRunRequest(
        prompt="What colours does the brand use?",
        template="auto",
        files=[UploadedFile(name=name, extension=name.rsplit(".", 1)[1], content_type="image/png", data=data)],
    )
    run = Store().get_run(create_run(request, account.account_id).run_id)
    node = NodeItem(
        canvas_id=run.canvas_id,
        block_id=f"{run.canvas_id[:8]}-0",
        name=name,
        type="image-block",
        upload_id=run.uploads[0].file_id,
    )
    Store().put_graph([node], [], run.canvas_id)
    Store().put_tasks(
        [
            TaskItem(
                canvas_id=run.canvas_id,
                task_id=persona_task_id(run.canvas_id, node.block_id),
                name=f"Researcher: {name}",
                task_type=TaskType.PERSONA,
                block_id=node.block_id,
            )
        ]
    )
    return SimpleNamespace(run_id=run.run_id, canvas_id=run.canvas_id, account_id=run.account_id), node


def run_block(function, context, ids: SimpleNamespace, node: NodeItem) -> NodeItem:
    event = {**vars(ids), "block_id": node.block_id, "block_type": node.type}
    function("blocks/image_block")(event, context)
    return Store().get_nodes(ids.canvas_id, [node.block_id])[0]


def balance(account_id: str) -> int:
    return int(Store().get_account(account_id)["credits_balance"])


def test_an_uploaded_image_is_described_by_the_vision_model_and_charged(bedrock, account, function, context):
    # Given an uploaded PNG and a first call that is throttled
    bedrock.fail_next(429, "ThrottlingException")
    ids, node = image_block(account)
    before = Store().get_run(ids.run_id).reserved_credits
    # When
    done = run_block(function, context, ids, node)
    # Then the retry sent the image's bytes to the vision model
    assert [c.model for c in bedrock.calls] == [VISION, VISION]
    assert bedrock.calls[1].images == [Image("png", PNG)]
    # and the description sits beside the metadata
    assert done.status.value == "completed"
    assert done.content.startswith("Image red.png: PNG, 8x6 pixels")
    assert done.content.endswith(f"Description: {DESCRIPTION}")
    # and the block's credits are that call's tokens
    call = bedrock.calls[1]
    used = (VISION, tokens(call.system + " " + call.prompt) + IMAGE_TOKENS, tokens(DESCRIPTION))
    assert done.models_used == [VISION]
    assert done.credits == usage_credits([used]) > 0
    # spent from what the run set aside (the account settles with it when the run ends)
    assert before - Store().get_run(ids.run_id).reserved_credits == done.credits
    # and the call is a task in the run's tree
    tasks = [t.name for t in Store().get_tasks(ids.canvas_id) if t.task_type == TaskType.TOOL_CALL]
    assert f"Model call: {VISION} ({used[1]} tokens in, {used[2]} out)" in tasks


def test_a_model_that_cannot_see_images_leaves_the_metadata(bedrock, account, function, context):
    # Given a model that refuses image input
    bedrock.fail_next(400, "ValidationException", message="This model doesn't support image input")
    ids, node = image_block(account)
    # When
    done = run_block(function, context, ids, node)
    # Then the block completes with what the file says of itself, and says why there is no description
    assert done.status.value == "completed"
    assert done.content.startswith("Image red.png: PNG, 8x6 pixels")
    assert "Description: (not available: Bedrock ValidationException" in done.content
    assert (done.models_used, done.credits) == ([], 0)
    # and why, as a note stored with its completion for the run's errors
    assert len(done.notes) == 1
    assert done.notes[0].startswith("The image red.png was not described (Bedrock ValidationException")
    assert done.notes[0].endswith("; its metadata was kept")


def test_offline_an_uploaded_image_keeps_to_its_metadata(aws, account, function, context):
    ids, node = image_block(account, "photo.jpg", files.image("jpeg", (5, 5)))
    done = run_block(function, context, ids, node)
    assert done.status.value == "completed"
    assert done.content.startswith("Image photo.jpg: JPEG, 5x5 pixels") and "Description" not in done.content
    assert (done.models_used, done.credits) == ([], 0)
    assert done.notes == []  # offline there is no model to fall back from
