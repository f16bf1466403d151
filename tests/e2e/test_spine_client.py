"""The hosted API's official Python client (`spine-sdk`, imported as `spine`) against the embedded stack,
unchanged but for its base URL and key: runs, canvas reads, and the errors it maps by status."""

from __future__ import annotations

import uuid

import pytest
from spine import SpineClient
from spine.exceptions import AuthenticationError, BadRequestError, NotFoundError, SpineAPIError

from tests.e2e.conftest import KEY_A
from tests.support import PNG_1X1

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def client(service):
    with SpineClient(api_key=KEY_A, base_url=service.base_url) as spine:
        yield spine


def test_create_wait_and_read_the_canvas(client):
    # When
    handle = client.runs.create(
        "Summarize the main arguments for and against a four-day work week.",
        blocks=["prompt-block", "text-block"],
        agent_instructions="Be concise.",
    )
    result = handle.wait(poll_interval=0.2, timeout=60)
    # Then
    assert "four-day work week" in result.final_output
    assert result.artifacts == []
    snapshot = client.runs.get(handle.run_id)
    assert snapshot.status.value == "completed"
    assert snapshot.metadata.template_used == "auto"
    assert snapshot.metadata.credits_consumed == 0
    assert snapshot.blocks == ["prompt-block", "text-block"]
    assert snapshot.agent_instructions == "Be concise."
    assert handle.canvas_id == snapshot.canvas_id
    dag = client.canvas.get_dag(handle.canvas_id)
    assert [n.type for n in dag.nodes] == ["prompt-block", "text-block"]
    assert {n.status for n in dag.nodes} == {"completed"}
    assert [(e.source_id, e.target_id) for e in dag.edges] == [(dag.nodes[0].id, dag.nodes[1].id)]
    tree = client.canvas.get_tasks(handle.canvas_id)
    [parent] = tree.completed
    assert parent.task_type == "parent-task"
    persona = parent.children[0]
    one = client.canvas.get_task(handle.canvas_id, persona.task_id)
    assert one.task_type == "persona-task" and one.children[0].task_type == "tool-call-task"


def test_files_upload_through_the_client(client):
    handle = client.runs.create(
        "What is in these files?",
        template="auto",
        files=[("notes.md", b"# Notes\nThe bridge opens on Friday at noon.\n"), ("pixel.png", PNG_1X1)],
    )
    result = handle.wait(poll_interval=0.2, timeout=60)
    assert "The bridge opens on Friday at noon" in result.final_output


def test_progress_is_reported_while_running(client):
    handle = client.runs.create("Name three tide pool animals.")
    first = client.runs.get(handle.run_id)
    if first.status.value == "running":
        assert first.progress is not None and first.progress.tasks_total >= first.progress.tasks_completed
    handle.wait(poll_interval=0.2, timeout=60)


def test_errors_map_to_the_clients_exceptions(service, client):
    with pytest.raises(BadRequestError) as bad_template:
        client.runs.create("x", template="essay")
    assert bad_template.value.error_message == (
        "Invalid template: essay. Valid templates: app, auto, deep_research, excel, landing_page, memo, report, slides"
    )
    assert bad_template.value.request_id
    with pytest.raises(BadRequestError):
        client.runs.create("x", blocks=["essay-block"])
    missing = str(uuid.uuid4())
    with pytest.raises(NotFoundError) as not_found:
        client.runs.get(missing)
    assert not_found.value.error_message == f"Run not found: {missing}"
    with pytest.raises(NotFoundError):
        client.canvas.get_dag(missing)
    with (
        SpineClient(api_key="sk_canvas_wrong", base_url=service.base_url) as wrong,
        pytest.raises(AuthenticationError) as auth,
    ):
        wrong.runs.get(missing)
    assert auth.value.error_message == "Invalid or revoked API key"


def test_a_failed_run_raises_with_its_errors(client, monkeypatch):
    # Given a deployment whose document-block has no implementation (the handlers run in this process)
    monkeypatch.setattr("canvas_core.blocks.runner.implementation", lambda block_type: None)
    handle = client.runs.create("Write a report", blocks=["document-block"])
    with pytest.raises(SpineAPIError, match="not available in this deployment yet"):
        handle.wait(poll_interval=0.2, timeout=60)
    snapshot = client.runs.get(handle.run_id)
    assert snapshot.status.value == "failed"
    assert snapshot.errors[0].block_type == "document-block"
    assert snapshot.errors[0].recoverable is False
