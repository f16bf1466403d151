"""The `canvas` client commands against a fake of the API on 127.0.0.1: retries and backoff, one-line errors and
exit codes, polling, artifact files that never overwrite, and the DAG as Mermaid and DOT."""

from __future__ import annotations

import functools
import json
import socket
import uuid
from pathlib import Path

import pytest

from canvas_local import cli
from canvas_local.client import commands
from canvas_local.client.downloads import download_artifact, safe_name, unique_path
from canvas_local.client.http import ApiError, CanvasClient, CanvasError, PollSchedule, RetryPolicy
from canvas_local.client.views import dag_dot, dag_mermaid
from tests.fakes.canvas_api import KEY, FakeCanvasApi, json_response
from tests.fakes.servers import Response

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]

RUNS = {"success": True, "data": {"runs": [], "next_cursor": None}}


@pytest.fixture(scope="module")
def server():
    with FakeCanvasApi() as fake:
        yield fake


@pytest.fixture
def api(server: FakeCanvasApi) -> FakeCanvasApi:
    """The module's fake API, with no routes and no requests yet (a server's shutdown costs half a second)."""
    server.routes.clear()
    server.requests.clear()
    return server


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits the commands' clients ask for, recorded instead of slept."""
    waits: list[float] = []
    monkeypatch.setattr(commands, "CanvasClient", functools.partial(CanvasClient, sleep=waits.append))
    return waits


def answers(*responses: Response):
    """A route that gives `responses` in turn, then the last one again."""
    served = iter(responses)
    last = [responses[-1]]

    def answer(_request) -> Response:
        last[0] = next(served, last[0])
        return last[0]

    return answer


def canvas(api: FakeCanvasApi, *args: str) -> int:
    return cli.main([*args, "--base-url", api.url(""), "--api-key", KEY])


# ---------------------------------------------------------------- retries


def test_a_429_is_retried_after_the_seconds_its_retry_after_gives(api):
    # Given a service that is busy once, and says for how long
    api.route(
        "/v1/runs",
        answers(json_response({"success": False, "error": "busy"}, 429, {"Retry-After": "3"}), json_response(RUNS)),
    )
    waits: list[float] = []

    # When
    with CanvasClient(api.url(""), KEY, sleep=waits.append) as client:
        page = client.list_runs()

    # Then the second attempt came after exactly the wait asked for
    assert page == RUNS["data"]
    assert waits == [3.0]
    assert len(api.requests) == 2


def test_503_twice_then_200_backs_off_exponentially_with_jitter(api):
    # Given a service that fails twice
    failure = json_response({"success": False, "error": "Internal server error"}, 503)
    api.route("/v1/runs", answers(failure, failure, json_response(RUNS)))
    waits: list[float] = []
    policy = RetryPolicy(attempts=5, base_seconds=1.0, cap_seconds=8.0)

    # When
    with CanvasClient(api.url(""), KEY, retry=policy, sleep=waits.append) as client:
        page = client.list_runs()

    # Then it waited twice, each in the upper half of a doubling ceiling (1 s, then 2 s)
    assert page == RUNS["data"]
    assert len(waits) == 2
    assert 0.5 <= waits[0] <= 1.0
    assert 1.0 <= waits[1] <= 2.0


def test_backoff_is_capped():
    policy = RetryPolicy(base_seconds=0.5, cap_seconds=8.0)

    assert all(4.0 <= policy.backoff(attempt) <= 8.0 for attempt in range(5, 12))


def test_a_5xx_that_persists_is_reported_after_the_last_attempt(api):
    api.route("/v1/runs", json_response({"success": False, "error": "Internal server error"}, 500))
    waits: list[float] = []

    client = CanvasClient(api.url(""), KEY, retry=RetryPolicy(attempts=3), sleep=waits.append)
    with client, pytest.raises(ApiError) as raised:
        client.list_runs()

    assert str(raised.value) == "Internal server error (500)"
    assert len(api.requests) == 3 and len(waits) == 2


def test_a_retry_after_longer_than_a_minute_is_not_waited_for(api):
    api.route("/v1/runs", json_response({"success": False, "error": "slow down"}, 429, {"Retry-After": "3600"}))
    waits: list[float] = []

    slow_down = r"slow down; the service asks to retry after 3600 s \(429\)"
    with CanvasClient(api.url(""), KEY, sleep=waits.append) as client, pytest.raises(ApiError, match=slow_down):
        client.list_runs()

    assert waits == [] and len(api.requests) == 1


def test_a_retried_create_carries_the_same_idempotency_key(api):
    # Given a create answered 502 once (the run may have been created: the answer was lost)
    run = api.script_run([api.ended("completed", "done")])
    bad_gateway = json_response({"success": False, "error": "Bad gateway"}, 502)
    api.route("/v1/run", _then(lambda _request: bad_gateway, api.routes["/v1/run"]))

    # When
    with CanvasClient(api.url(""), KEY, sleep=lambda _: None) as client:
        data = client.create_run("p", idempotency_key="key-1")

    # Then both attempts carried the key, so the service starts the run once
    assert data["run_id"] == run.run_id
    assert [r.headers.get("idempotency-key") for r in api.requests] == ["key-1", "key-1"]


def _then(first, second):
    calls = []

    def answer(request):
        calls.append(request)
        return first(request) if len(calls) == 1 else second(request)

    return answer


def test_4xx_is_not_retried(api):
    api.route("/v1/runs", json_response({"success": False, "error": "Invalid or revoked API key"}, 401))

    with CanvasClient(api.url(""), KEY, sleep=lambda _: pytest.fail("no wait")) as client, pytest.raises(ApiError):
        client.list_runs()

    assert len(api.requests) == 1


# ---------------------------------------------------------------- errors as the commands print them


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_connection_refused_is_one_line_and_exit_1(sleeps, capsys):
    # Given no service on the port
    port = closed_port()

    # When
    status = cli.main(["runs", "--base-url", f"http://127.0.0.1:{port}", "--api-key", KEY])

    # Then it tried 5 times, then said so in one line
    out, err = capsys.readouterr()
    assert status == 1
    assert out == ""
    assert err.splitlines() == [
        f"canvas runs: cannot reach http://127.0.0.1:{port}: connection refused (after 5 attempts)"
    ]
    assert len(sleeps) == 4


KEY_HINT = ": check the API key (CANVAS_API_KEY or --api-key)"
NO_CREDITS = "Insufficient credits: the account balance is 0; add credits to start a run"


@pytest.mark.parametrize(
    ("status", "error", "line"),
    [
        (401, "Invalid or revoked API key", f"Invalid or revoked API key (401){KEY_HINT}"),
        (404, "Run not found: {id}", "Run not found: {id} (404)"),
        (402, NO_CREDITS, f"{NO_CREDITS} (402)"),
    ],
)
def test_api_errors_are_one_line_and_exit_1(api, sleeps, capsys, status, error, line):
    run_id = str(uuid.uuid4())
    api.route(f"/v1/run/{run_id}", json_response({"success": False, "error": error.format(id=run_id)}, status))

    code = canvas(api, "status", run_id)

    err = capsys.readouterr().err
    assert code == 1
    assert err.splitlines() == [f"canvas status: {line.format(id=run_id)}"]
    assert sleeps == []


def test_a_non_json_error_page_is_reported_in_one_line(api, sleeps, capsys):
    api.route("/v1/runs", Response(403, b"<html>\n<body>Forbidden by proxy</body>\n</html>", {}))

    assert canvas(api, "runs") == 1

    assert capsys.readouterr().err.splitlines() == [
        "canvas runs: Forbidden: <html> <body>Forbidden by proxy</body> </html> (403)"
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["run", "x", "--file", "/nonexistent/notes.txt"],
            "canvas run: cannot read /nonexistent/notes.txt: No such file or directory",
        ),
        (
            ["run", "x", "--base-url", "127.0.0.1:3000"],
            "canvas run: the base URL must start with http:// or https://, not '127.0.0.1:3000'",
        ),
    ],
)
def test_usage_errors_exit_2_before_anything_is_sent(sleeps, capsys, argv, message):
    assert cli.main([*argv, "--api-key", KEY]) == 2
    assert capsys.readouterr().err.splitlines() == [message]


@pytest.mark.parametrize(
    ("sizes", "message"),
    [
        ([5 * 1024 * 1024], "canvas run: {0} is 5 MiB: the service takes files of at most 4 MiB"),
        ([3 * 1024 * 1024, 2 * 1024 * 1024], "canvas run: the files are 5 MiB in all: the service takes at most 4 MiB"),
        ([1] * 11, "canvas run: too many files: 11 (the service takes at most 10)"),
    ],
)
def test_files_the_service_would_refuse_are_refused_before_anything_is_sent(
    api, sleeps, capsys, tmp_path, sizes, message
):
    # Given files past the service's limits (4 MiB each and in all, 10 files)
    paths = []
    for index, size in enumerate(sizes):
        paths += ["--file", str(tmp_path / f"f{index}.txt")]
        (tmp_path / f"f{index}.txt").write_bytes(b"x" * size)
    # When they are to be uploaded, Then the command stops with a usage error naming the limit, and sends nothing
    assert canvas(api, "run", "x", *paths) == 2
    assert capsys.readouterr().err.splitlines() == [message.format(tmp_path / "f0.txt")]
    assert api.requests == []


def test_no_api_key_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.delenv("CANVAS_API_KEY", raising=False)

    assert cli.main(["runs"]) == 2
    assert capsys.readouterr().err.splitlines() == ["canvas runs: no API key: set CANVAS_API_KEY or pass --api-key"]


def test_a_bad_option_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["run", "x", "--blocks", "prompt,nope"])
    assert exited.value.code == 2
    assert "unknown block type nope-block" in capsys.readouterr().err


# ---------------------------------------------------------------- following a run


def test_polls_start_fast_and_slow_down_to_five_seconds():
    intervals = PollSchedule().intervals()

    first = [next(intervals) for _ in range(10)]

    assert first[:3] == [0.5, 0.75, 1.125]
    assert first == sorted(first) and first[-1] == 5.0


@pytest.mark.parametrize(("status", "code"), [("completed", 0), ("partial", 3), ("failed", 4)])
def test_wait_exits_with_the_runs_outcome(api, sleeps, capsys, tmp_path, status, code):
    # Given a run that runs for two polls, then ends
    errors = [] if status == "completed" else [{"error": "Block 1 failed on purpose", "block_type": "text-block"}]
    run = api.script_run(
        [api.running(0, 2), api.running(1, 2), api.ended(status, "# Answer\n\nAll done.", errors=errors)]
    )

    # When
    result = canvas(api, "wait", run.run_id, "--out", str(tmp_path))

    # Then
    out, err = capsys.readouterr()
    assert result == code
    assert run.polls == 3
    assert sleeps == [0.5, 0.75]
    if status != "failed":
        assert out == "# Answer\n\nAll done.\n"  # not a terminal: the markdown itself
    assert f"{status.capitalize()} in 0:00:02 · 3 credits" in err
    assert ("✗ text-block: Block 1 failed on purpose" in err) == (status != "completed")


def test_json_prints_the_final_status_only(api, sleeps, capsys, tmp_path):
    run = api.script_run([api.running(0, 1), api.ended("completed", "Done.")])

    assert canvas(api, "wait", run.run_id, "--json", "--out", str(tmp_path)) == 0

    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data["status"] == "completed" and data["result"]["final_output"] == "Done."
    assert err == ""


def test_ctrl_c_leaves_the_run_running_and_says_how_to_resume(api, monkeypatch, capsys, tmp_path):
    # Given a run still running, and Ctrl-C pressed while the command waits between polls
    run = api.script_run([api.running(0, 2)])

    def interrupt(_seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(commands, "CanvasClient", functools.partial(CanvasClient, sleep=interrupt))

    # When
    code = canvas(api, "wait", run.run_id, "--out", str(tmp_path / "files"))

    # Then
    err = capsys.readouterr().err
    assert code == 130
    assert f"Resume with: canvas wait {run.run_id} --out {tmp_path / 'files'}" in err
    assert [r.method for r in api.requests] == ["GET", "GET"]  # a poll and the canvas read: nothing cancelled


def test_losing_the_service_while_following_says_how_to_follow_again(api, sleeps, capsys, tmp_path):
    # Given a run that is running, then a service that fails every poll
    run = api.script_run([api.running(0, 2)])
    poll = api.routes[f"/v1/run/{run.run_id}"]
    failure = json_response({"success": False, "error": "Internal server error"}, 502)
    api.route(f"/v1/run/{run.run_id}", _then(poll, lambda _request: failure))

    # When
    code = canvas(api, "wait", run.run_id, "--out", str(tmp_path))

    # Then one line says what failed and how to pick the run up again
    assert code == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"canvas wait: Internal server error (502); the run goes on: follow it again with "
        f"canvas wait {run.run_id} --out {tmp_path}"
    )


def test_run_no_wait_prints_the_run_id(api, sleeps, capsys):
    run = api.script_run([api.running(0, 1)])

    assert canvas(api, "run", "A prompt", "--no-wait") == 0

    out, err = capsys.readouterr()
    assert out == f"{run.run_id}\n"
    assert f"canvas wait {run.run_id}" in err


def test_run_uploads_files_as_multipart_with_the_fields_given(api, sleeps, tmp_path):
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n")
    api.script_run([api.ended("completed", "Done.")])

    code = canvas(
        api, "run", "Summarize", "--file", str(notes), "--blocks", "prompt,text-block", "--instructions", "Be brief",
        "--template", "memo", "--json", "--out", str(tmp_path),
    )  # fmt: skip

    assert code == 0
    create = api.requests[0]
    assert create.headers["content-type"].startswith("multipart/form-data")
    assert b'name="blocks"\r\n\r\n["prompt-block", "text-block"]' in create.body
    assert b'name="agent_instructions"\r\n\r\nBe brief' in create.body
    assert b'name="template"\r\n\r\nmemo' in create.body
    assert b'filename="notes.md"' in create.body and b"# Notes\n" in create.body
    uuid.UUID(create.headers["idempotency-key"])


# ---------------------------------------------------------------- artifacts


def test_artifacts_are_saved_under_names_that_are_free(api, sleeps, tmp_path):
    # Given a folder that already holds report.docx, and report-2.docx being downloaded
    (tmp_path / "report.docx").write_bytes(b"mine")
    (tmp_path / "report-2.docx.part").write_bytes(b"")
    data = b"PK\x03\x04 a docx"
    run = api.script_run([api.ended("completed", "Done.", artifacts=[])], files={"report.docx": data})
    run.states[-1]["result"]["artifacts"] = [api.artifact("report.docx", len(data))]

    # When the run's files are downloaded twice
    assert canvas(api, "download", run.run_id, "--out", str(tmp_path)) == 0
    assert canvas(api, "download", run.run_id, "--out", str(tmp_path)) == 0

    # Then nothing was overwritten, and no .part file of ours is left
    assert (tmp_path / "report.docx").read_bytes() == b"mine"
    assert (tmp_path / "report-3.docx").read_bytes() == data
    assert (tmp_path / "report-4.docx").read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "report-2.docx.part", "report-3.docx", "report-4.docx", "report.docx",
    ]  # fmt: skip


def test_a_download_of_the_wrong_size_is_an_error_and_leaves_nothing(api, tmp_path):
    api.route("/files/short.xlsx", Response(200, b"12345", {}))
    artifact = {"id": "a", "name": "short.xlsx", "download_url": api.url("/files/short.xlsx"), "size_bytes": 9}

    with CanvasClient(api.url(""), KEY) as client, pytest.raises(CanvasError, match="5 bytes of 9"):
        download_artifact(client, artifact, tmp_path)

    assert list(tmp_path.iterdir()) == []


def test_the_api_key_goes_only_to_the_service(api, tmp_path):
    # Given an artifact served from another origin (a presigned URL) and one from the service itself
    with FakeCanvasApi() as storage:
        storage.route("/bucket/a.txt", Response(200, b"a", {}))
        api.route("/v1/files/b.txt", Response(200, b"b", {}))
        with CanvasClient(api.url(""), KEY) as client:
            download_artifact(client, {"name": "a.txt", "download_url": storage.url("/bucket/a.txt")}, tmp_path)
            download_artifact(client, {"name": "b.txt", "download_url": "/v1/files/b.txt"}, tmp_path)

    assert "x-api-key" not in storage.requests[0].headers
    assert api.requests[0].headers["x-api-key"] == KEY


@pytest.mark.parametrize(
    ("name", "safe"),
    [("../../etc/passwd", "passwd"), ("..\\..\\boot.ini", "boot.ini"), ("..", "fallback"), ("", "fallback"),
     ("a\x1b[31m.txt", "a[31m.txt"), ("report.docx", "report.docx")],
)  # fmt: skip
def test_artifact_names_stay_inside_the_folder(name, safe):
    assert safe_name(name, "fallback") == safe


def test_unique_names_number_before_the_extension(tmp_path):
    for name in ("report.docx", "report-2.docx", "notes", ".env"):
        (tmp_path / name).write_bytes(b"")

    assert unique_path(tmp_path, "report.docx").name == "report-3.docx"
    assert unique_path(tmp_path, "notes").name == "notes-2"
    assert unique_path(tmp_path, ".env").name == ".env-2"
    assert unique_path(tmp_path, "slides.pptx").name == "slides.pptx"


# ---------------------------------------------------------------- the DAG


DAG = {
    "canvas_id": "c0ffee00-0000-4000-8000-000000000000",
    "canvas_name": 'Tide "pools" #1',
    "nodes": [
        {"id": "a1", "name": 'Read "notes" <draft>', "type": "file-block", "status": "completed"},
        {"id": "b2", "name": "Outline\\plan", "type": "prompt-block", "status": "running"},
        {"id": "c3", "name": "Report", "type": "document-block", "status": "idle"},
    ],
    "edges": [{"source_id": "a1", "target_id": "b2"}, {"source_id": "b2", "target_id": "c3"}],
}


def test_dag_as_mermaid():
    assert dag_mermaid(DAG) == (
        "flowchart LR\n"
        '  n0["Read #quot;notes#quot; #lt;draft#gt;<br/>file-block · completed"]:::status_completed\n'
        '  n1["Outline\\plan<br/>prompt-block · running"]:::status_running\n'
        '  n2["Report<br/>document-block · idle"]:::status_idle\n'
        "  n0 --> n1\n"
        "  n1 --> n2\n"
        "  classDef status_completed fill:#dcfce7\n"
        "  classDef status_idle fill:#f3f4f6\n"
        "  classDef status_running fill:#fef9c3\n"
    )


def test_dag_as_dot():
    assert dag_dot(DAG) == (
        "digraph canvas {\n"
        '  label="Tide \\"pools\\" #1";\n'
        "  rankdir=LR;\n"
        '  node [shape=box, style="rounded,filled"];\n'
        '  "a1" [label="Read \\"notes\\" <draft>\\nfile-block · completed", fillcolor="#dcfce7"];\n'
        '  "b2" [label="Outline\\\\plan\\nprompt-block · running", fillcolor="#fef9c3"];\n'
        '  "c3" [label="Report\\ndocument-block · idle", fillcolor="#f3f4f6"];\n'
        '  "a1" -> "b2";\n'
        '  "b2" -> "c3";\n'
        "}\n"
    )


@pytest.mark.parametrize("fmt", ["mermaid", "dot", "json", "tree"])
def test_the_dag_command_prints_each_format(api, sleeps, capsys, fmt):
    canvas_id = DAG["canvas_id"]
    api.route(f"/v1/canvas/{canvas_id}/dag", json_response({"success": True, "data": DAG}))

    assert canvas(api, "dag", canvas_id, "--format", fmt) == 0

    out = capsys.readouterr().out
    expected = {
        "mermaid": dag_mermaid(DAG),
        "dot": dag_dot(DAG),
        "json": json.dumps(DAG, indent=2) + "\n",
    }
    if fmt in expected:
        assert out == expected[fmt]
    else:
        assert [line.split("── ")[-1] for line in out.splitlines()[1:]] == [
            'Read "notes" <draft> file-block completed',
            "Outline\\plan prompt-block running",
            "Report document-block idle",
        ]


def test_path_of_saved_file_is_reported(api, sleeps, capsys, tmp_path):
    run = api.script_run([api.ended("completed", "Done.")], files={"memo.docx": b"memo"})
    run.states[-1]["result"]["artifacts"] = [api.artifact("memo.docx", 4)]

    assert canvas(api, "wait", run.run_id, "--out", str(tmp_path / "new")) == 0

    assert f"Saved {Path(tmp_path / 'new' / 'memo.docx')} (4 B)" in capsys.readouterr().err


# ---------------------------------------------------------------- rerun


@pytest.mark.parametrize(("status", "code"), [("completed", 0), ("partial", 3), ("failed", 4)])
def test_rerun_posts_the_new_instructions_and_exits_with_the_new_runs_outcome(
    api, sleeps, capsys, tmp_path, status, code
):
    # Given a re-run that the service starts, and that ends after two polls
    run = api.script_run([api.running(0, 2), api.ended(status, "# Answer\n\nAgain.")])
    canvas_id, block_id = str(uuid.uuid4()), str(uuid.uuid4())
    api.route(f"/v1/canvas/{canvas_id}/blocks/{block_id}/rerun", api.routes["/v1/run"])

    # When
    result = canvas(
        api, "rerun", canvas_id, block_id, "--instructions", "Name the weakest region", "--out", str(tmp_path)
    )

    # Then the block's new instructions were posted as JSON, and the new run was followed to its end
    rerun = api.requests[0]
    assert (rerun.method, rerun.path) == ("POST", f"/v1/canvas/{canvas_id}/blocks/{block_id}/rerun")
    assert json.loads(rerun.body) == {"instructions": "Name the weakest region"}
    assert result == code
    assert run.polls == 2
    assert f"{status.capitalize()} in " in capsys.readouterr().err


def test_a_retried_rerun_carries_the_same_idempotency_key(api, sleeps, tmp_path):
    # Given a re-run answered 502 once (it may have started: the answer was lost)
    api.script_run([api.ended("completed", "done")])
    canvas_id, block_id = str(uuid.uuid4()), str(uuid.uuid4())
    bad_gateway = json_response({"success": False, "error": "Bad gateway"}, 502)
    api.route(f"/v1/canvas/{canvas_id}/blocks/{block_id}/rerun", _then(lambda _r: bad_gateway, api.routes["/v1/run"]))

    # When
    assert canvas(api, "rerun", canvas_id, block_id, "--out", str(tmp_path)) == 0

    # Then both attempts carried one key, so the service starts the re-run once
    keys = [r.headers.get("idempotency-key") for r in api.requests if r.path.endswith("/rerun")]
    assert len(keys) == 2 and keys[0] == keys[1]
    uuid.UUID(keys[0])


def test_rerun_without_instructions_posts_an_empty_object_and_no_wait_prints_the_run_id(api, sleeps, capsys):
    run = api.script_run([api.running(0, 1)])
    canvas_id, block_id = str(uuid.uuid4()), str(uuid.uuid4())
    api.route(f"/v1/canvas/{canvas_id}/blocks/{block_id}/rerun", api.routes["/v1/run"])

    assert canvas(api, "rerun", canvas_id, block_id, "--no-wait") == 0

    assert json.loads(api.requests[0].body) == {}
    assert capsys.readouterr().out == f"{run.run_id}\n"


def test_rerun_refused_by_the_service_is_one_line_and_exit_1(api, sleeps, capsys, tmp_path):
    canvas_id, block_id = str(uuid.uuid4()), str(uuid.uuid4())
    refusal = {
        "success": False,
        "error": "The run r1 of this canvas is still running: re-run a block once it has ended",
    }
    api.route(f"/v1/canvas/{canvas_id}/blocks/{block_id}/rerun", json_response(refusal, 409))

    assert canvas(api, "rerun", canvas_id, block_id, "--out", str(tmp_path)) == 1

    assert capsys.readouterr().err == f"canvas rerun: {refusal['error']} (409)\n"


def test_rerun_ids_must_be_uuids(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["rerun", "not-a-canvas", str(uuid.uuid4()), "--api-key", KEY])
    assert exited.value.code == 2
    assert "not a UUID: 'not-a-canvas'" in capsys.readouterr().err


@pytest.mark.parametrize("width", [60, 80, 140])
def test_runs_marks_a_rerun_with_the_run_and_block_it_reran(width):
    import io

    from rich.console import Console

    from canvas_local.client.views import runs_table

    # Given a page with a run and a re-run of its block "b2", alike but for rerun_of
    source_id, rerun_id, canvas_id = (str(uuid.uuid4()) for _ in range(3))
    run = {"created_at": "2026-01-02T03:04:05Z", "status": "completed", "template_used": "report", "prompt": "Tides"}
    page = {
        "runs": [
            {
                **run,
                "run_id": rerun_id,
                "canvas_id": canvas_id,
                "rerun_of": {"run_id": source_id, "canvas_id": canvas_id, "block_id": "b2"},
            },
            {**run, "run_id": source_id, "canvas_id": canvas_id, "rerun_of": None},
        ],
        "next_cursor": None,
    }

    # When canvas runs renders it
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(runs_table(page, width))

    # Then the re-run, and only it, says what it re-ran
    text = out.getvalue()
    assert text.count("re-run of") == 1
    assert f"re-run of {source_id} block b2" in text
    assert text.index(rerun_id) < text.index("re-run of")
