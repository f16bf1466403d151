"""Over HTTP on the embedded stack: each of the 14 upload formats becomes the right block and its content
reaches the canvas; and a run whose web blocks are refused by the SSRF policy still ends, with each
block's reason in the run's errors."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from canvas_core import orchestration
from canvas_core.gather import fetch
from canvas_core.models.catalog import TaskType
from canvas_core.models.items import EdgeItem, NodeItem, RunItem, TaskItem
from canvas_core.planner import Plan, parent_task_id, persona_task_id
from tests.e2e.conftest import poll_until_finished
from tests.fakes import files
from tests.fakes.servers import FakeWeb

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

IMAGE_TYPES = {"png", "jpeg", "gif", "webp", "svg"}
CONTENT_TYPES = {
    "png": "image/png",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "svg": "image/svg+xml",
    "pdf": "application/pdf",
    "csv": "text/csv",
    "txt": "text/plain",
    "md": "text/markdown",
    "yaml": "application/yaml",
    "json": "application/json",
    "zip": "application/zip",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}
FORMATS = files.all_formats()
# At most 10 files a run: the 14 formats in two runs.
BATCHES = [list(FORMATS)[:7], list(FORMATS)[7:]]


@pytest.mark.parametrize("batch", BATCHES, ids=["images-pdf-docx", "tables-text-zip"])
def test_each_upload_format_becomes_its_block_and_reaches_the_canvas(http, batch):
    # Given one small real file of each format
    uploads = [("files", (name, FORMATS[name][0], CONTENT_TYPES[name.rsplit(".", 1)[1]])) for name in batch]
    # When
    response = http.post("/v1/run", data={"prompt": "Summarize the Marker lines of the uploaded files."}, files=uploads)
    assert response.status_code == 200, response.text
    data = poll_until_finished(http, response.json()["data"]["run_id"])
    # Then the run completed and each file is a block of the right type, with its content and source
    assert data["status"] == "completed", data
    nodes = http.get(f"/v1/canvas/{data['canvas_id']}/dag").json()["data"]["nodes"]
    by_name = {n["name"]: n for n in nodes}
    for name in batch:
        node = by_name[name]
        expected = "image-block" if name.rsplit(".", 1)[1] in IMAGE_TYPES else "file-block"
        assert (node["type"], node["status"]) == (expected, "completed"), node
        assert FORMATS[name][1] in node["content"], node["content"]
        assert node["sources"] and node["sources"][0]["file_name"].startswith(name)
    # And what the files said reaches the answer
    documents = [n for n in batch if n.rsplit(".", 1)[1] not in IMAGE_TYPES]
    assert any(FORMATS[n][1] in data["result"]["final_output"] for n in documents), data["result"]["final_output"]


def test_a_corrupt_upload_fails_its_block_and_the_run_goes_on(http):
    response = http.post(
        "/v1/run",
        data={"prompt": "What do the files say?"},
        files=[
            ("files", ("broken.pdf", b"%PDF-1.4\n%not really a pdf\n", "application/pdf")),
            ("files", ("notes.txt", b"The pilot starts in May with twelve schools.", "text/plain")),
        ],
    )
    data = poll_until_finished(http, response.json()["data"]["run_id"])
    assert data["status"] == "partial", data
    [error] = [e for e in data["errors"] if e.get("block_type") == "file-block"]
    assert "broken.pdf could not be read as a PDF: it is damaged" in error["error"]
    assert "twelve schools" in data["result"]["final_output"]


# ---------------------------------------------------------------------------------------------- SSRF

REFUSED = {
    "http://127.0.0.1:{port}/page": "Refused to fetch 127.0.0.1: a loopback address",
    "http://10.1.2.3/": "Refused to fetch 10.1.2.3: a private address",
    "http://169.254.10.20/": "Refused to fetch 169.254.10.20: a link-local address",
    "http://169.254.169.254/latest/meta-data/iam/security-credentials/": "a cloud metadata address",
    "http://[::1]:{port}/page": "Refused to fetch ::1: a loopback address",
    "http://[fd00::7]/": "Refused to fetch fd00::7: a private address",
    "http://intranet.example/": "Refused to fetch intranet.example (resolves to 10.8.0.2): a private address",
    "http://news.example/moved": "Refused to fetch 192.168.1.20: a private address",
}


@pytest.fixture
def web() -> Iterator[FakeWeb]:
    with FakeWeb() as server:
        server.page("/page", "<html><title>Loopback page</title><main><p>Nobody should read this.</p></main></html>")
        server.page(
            "/story",
            "<html><title>Shore news</title><main><p>The council opened two new rock pool trails this spring.</p>"
            "</main></html>",
        )
        server.redirect("/moved", "http://192.168.1.20/admin")
        yield server


@pytest.fixture
def dns(monkeypatch, web) -> list[str]:
    """Names resolving as a public site and an intranet host would; connections land on the fake server.
    Returns the addresses connected to (a refused address never is)."""
    names = {"news.example": ["93.184.216.34"], "intranet.example": ["10.8.0.2"]}
    connected: list[str] = []
    monkeypatch.setattr(fetch, "resolve_host", lambda host, port: names[host])

    def connect(address: str, port: int, timeout: float) -> socket.socket:
        connected.append(address)
        return socket.create_connection(("127.0.0.1", web.port), timeout=timeout)

    monkeypatch.setattr(fetch, "open_connection", connect)
    return connected


def web_plan(urls: list[str]):
    """A plan of one web-block per URL, and a text-block that carries the readable one (the last URL)."""

    def plan(run: RunItem, provider=None) -> Plan:
        canvas = run.canvas_id
        nodes = [
            NodeItem(
                canvas_id=canvas,
                block_id=f"{canvas[:24]}{i:012d}",
                name=f"Fetch {i}",
                type="web-block",
                url=url,
                persona="Researcher",
                position=i,
            )
            for i, url in enumerate(urls)
        ]
        answer = NodeItem(
            canvas_id=canvas,
            block_id=f"{canvas[:24]}{len(urls):012d}",
            name="Answer",
            type="text-block",
            inputs=[nodes[-1].block_id],
            persona="Writer",
            position=len(urls),
        )
        parent = TaskItem(
            canvas_id=canvas, task_id=parent_task_id(canvas), name="Fetch the pages", task_type=TaskType.PARENT
        )
        tasks = [parent] + [
            TaskItem(
                canvas_id=canvas,
                task_id=persona_task_id(canvas, n.block_id),
                parent_id=parent.task_id,
                name=f"{n.persona}: {n.name}",
                task_type=TaskType.PERSONA,
                block_id=n.block_id,
                position=n.position + 1,
            )
            for n in [*nodes, answer]
        ]
        return Plan(
            nodes=[*nodes, answer],
            edges=[EdgeItem(source_id=nodes[-1].block_id, target_id=answer.block_id)],
            tasks=tasks,
        )

    return plan


def test_web_blocks_refused_by_the_ssrf_policy_fail_and_the_run_still_ends(http, monkeypatch, web, dns):
    # Given a plan fetching forbidden addresses, and one public page
    urls = [u.format(port=web.port) for u in REFUSED] + ["http://news.example/story"]
    monkeypatch.setattr(orchestration, "plan_canvas", web_plan(urls))
    # When
    response = http.post("/v1/run", data={"prompt": "Read these pages", "blocks": '["web-block","text-block"]'})
    data = poll_until_finished(http, response.json()["data"]["run_id"])
    # Then the run ended, with the public page's content
    assert data["status"] == "partial", data
    assert "two new rock pool trails" in data["result"]["final_output"]
    # And each refused block failed with its reason
    errors = {e["block_id"][-12:]: e for e in data["errors"]}
    for i, reason in enumerate(REFUSED.values()):
        error = errors[f"{i:012d}"]
        assert error["block_type"] == "web-block" and reason in error["error"], error
        assert error["recoverable"] is False
    # And nothing connected to a refused address: only the public site's, for the story and the redirect
    assert set(dns) == {"93.184.216.34"}
    assert sorted(r.path for r in web.requests) == ["/moved", "/story"]
    nodes = http.get(f"/v1/canvas/{data['canvas_id']}/dag").json()["data"]["nodes"]
    assert [n["status"] for n in nodes] == ["error"] * len(REFUSED) + ["completed", "completed"]
