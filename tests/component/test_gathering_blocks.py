"""The gathering blocks through their Lambda handlers, under moto, against local fake servers (127.0.0.1)
that speak the real protocols: HTML pages, redirects, SearXNG / Brave / Tavily JSON, YouTube's player API
and timed text. Addresses that the SSRF policy refuses are never connected to: the resolver and the
connector are stood in for where a test needs a name to resolve somewhere else."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from canvas_core.adapters.store import Store
from canvas_core.errors import BlockFatalError, BlockRetryableError
from canvas_core.gather import fetch
from canvas_core.models.api import CreateRunRequest, UploadedFile
from canvas_core.models.catalog import TaskType
from canvas_core.models.items import NodeItem, TaskItem
from canvas_core.planner import persona_task_id
from canvas_core.runs import create_run
from tests.fakes import files
from tests.fakes.servers import FakeWeb, Response

pytestmark = pytest.mark.component

FOLDERS = {
    "web-block": "blocks/web_block",
    "web-research-block": "blocks/web_research_block",
    "yt-block": "blocks/yt_block",
    "file-block": "blocks/file_block",
    "table-block": "blocks/table_block",
    "list-block": "blocks/list_block",
    "deep-research-block": "blocks/deep_research_block",
}
VIDEO = "dQw4w9WgXcQ"

ARTICLE = """<html><head><title>Rock pools | Shore Guide</title>
<meta name="description" content="A guide to rock pools."></head><body><nav>Home About Shop</nav>
<main><h1>Rock pools</h1>
<p>Rock pools form where the retreating tide leaves sea water in hollows of the shore.</p>
<p>Anemones, periwinkles and shore crabs live in them and survive the hours of low tide.</p></main>
<footer>Copyright Shore Guide</footer></body></html>"""


@pytest.fixture
def web() -> Iterator[FakeWeb]:
    with FakeWeb() as server:
        yield server


@pytest.fixture
def private_allowed(monkeypatch):
    """The operator setting the local fakes need: they serve from 127.0.0.1."""
    monkeypatch.setenv("WEB_ALLOW_PRIVATE_ADDRESSES", "true")


@pytest.fixture
def public_names(monkeypatch, web):
    """Names that resolve to public addresses, while every connection lands on the fake server; the policy
    checks the public address. Returns the addresses connected to."""
    connected: list[str] = []
    names = {"news.example": ["93.184.216.34"], "intranet.example": ["192.168.0.10"]}
    monkeypatch.setattr(fetch, "resolve_host", lambda host, port: names[host])

    def connect(address: str, port: int, timeout: float) -> socket.socket:
        connected.append(address)
        return socket.create_connection(("127.0.0.1", web.port), timeout=timeout)

    monkeypatch.setattr(fetch, "open_connection", connect)
    return connected


def new_run(account, prompt: str = "Research rock pools", uploads: dict[str, bytes] | None = None) -> SimpleNamespace:
    request = CreateRunRequest(
        prompt=prompt,
        template="auto",
        files=[
            UploadedFile(name=n, extension=n.rsplit(".", 1)[1], content_type="application/octet-stream", data=d)
            for n, d in (uploads or {}).items()
        ],
    )
    created = create_run(request, account.account_id)
    run = Store().get_run(created.run_id)
    return SimpleNamespace(
        run=run, ids={"run_id": run.run_id, "canvas_id": run.canvas_id, "account_id": run.account_id}
    )


def add_nodes(run: SimpleNamespace, *nodes: dict) -> list[NodeItem]:
    items = [
        NodeItem(canvas_id=run.run.canvas_id, block_id=f"{run.run.canvas_id[:8]}-{i}", position=i, **fields)
        for i, fields in enumerate(nodes)
    ]
    Store().put_graph(items, [], run.run.canvas_id)
    Store().put_tasks(
        [
            TaskItem(
                canvas_id=run.run.canvas_id,
                task_id=persona_task_id(run.run.canvas_id, i.block_id),
                name=f"Researcher: {i.name}",
                task_type=TaskType.PERSONA,
                block_id=i.block_id,
            )
            for i in items
        ]
    )
    return items


def run_block(function, context, run: SimpleNamespace, node: NodeItem) -> NodeItem:
    event = {**run.ids, "block_id": node.block_id, "block_type": node.type}
    function(FOLDERS[node.type])(event, context)
    return Store().get_nodes(run.run.canvas_id, [node.block_id])[0]


def failing_block(function, context, run, node, error=BlockFatalError) -> tuple[str, NodeItem]:
    with pytest.raises(error) as raised:
        run_block(function, context, run, node)
    return str(raised.value), Store().get_nodes(run.run.canvas_id, [node.block_id])[0]


# ---------------------------------------------------------------------------------------------- web-block


def test_web_block_reads_a_page_title_and_main_text(aws, account, function, context, web, private_allowed):
    # Given a page behind a redirect
    web.page("/guide/rock-pools", ARTICLE)
    web.redirect("/old", "/guide/rock-pools", 301)
    run = new_run(account)
    [node] = add_nodes(run, {"name": "Read the guide", "type": "web-block", "url": web.url("/old")})
    # When
    done = run_block(function, context, run, node)
    # Then
    assert done.status.value == "completed"
    assert done.content.startswith(
        f"# Rock pools | Shore Guide\n\nSource: {web.url('/guide/rock-pools')}\n\n# Rock pools"
    )
    assert "Anemones, periwinkles and shore crabs" in done.content
    assert "Home About Shop" not in done.content and "Copyright" not in done.content
    assert [s.model_dump(exclude_none=True) for s in done.sources] == [
        {"title": "Rock pools | Shore Guide", "url": web.url("/guide/rock-pools"), "snippet": "A guide to rock pools."}
    ]
    assert done.url == web.url("/guide/rock-pools")


def test_web_block_takes_the_url_from_its_instructions(aws, account, function, context, web, private_allowed):
    web.page("/notes.txt", "Plain notes about pools.", content_type="text/plain")
    run = new_run(account)
    [node] = add_nodes(run, {"name": "Notes", "type": "web-block", "instructions": f"Read {web.url('/notes.txt')}."})
    assert "Plain notes about pools." in run_block(function, context, run, node).content


def test_web_block_reads_a_pdf(aws, account, function, context, web, private_allowed):
    web.route(
        "/paper.pdf", Response(200, files.pdf(["Pools warm by four degrees."]), {"Content-Type": "application/pdf"})
    )
    run = new_run(account)
    [node] = add_nodes(run, {"name": "Paper", "type": "web-block", "url": web.url("/paper.pdf")})
    assert "Pools warm by four degrees." in run_block(function, context, run, node).content


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:{port}/guide", "Refused to fetch 127.0.0.1: a loopback address"),
        ("http://[::1]:{port}/guide", "Refused to fetch ::1: a loopback address"),
        ("http://10.20.30.40/", "Refused to fetch 10.20.30.40: a private address"),
        ("http://169.254.169.254/latest/meta-data/", "Refused to fetch 169.254.169.254: a cloud metadata address"),
        ("http://[fd00:ec2::254]/latest/", "a cloud metadata address"),
        ("http://169.254.1.1/", "a link-local address"),
        ("ftp://example.com/file", "only http and https URLs are fetched"),
    ],
)
def test_web_block_refuses_forbidden_addresses(aws, account, function, context, web, url, reason):
    # Given the default policy and a page served on loopback
    web.page("/guide", ARTICLE)
    run = new_run(account)
    [node] = add_nodes(run, {"name": "Fetch", "type": "web-block", "url": url.format(port=web.port)})
    # When
    message, failed = failing_block(function, context, run, node)
    # Then the block failed with the reason, and nothing reached the server
    assert reason in message
    assert failed.status.value == "error" and reason in failed.error
    assert web.requests == []


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://[::169.254.169.254]/latest/meta-data/", "a cloud metadata address"),
        ("http://[::a9fe:a9fe]/latest/meta-data/", "a cloud metadata address"),
        ("http://[64:ff9b::a9fe:a9fe]/", "a cloud metadata address"),
        ("http://255.255.255.255/", "the broadcast address"),
        ("http://240.1.2.3/", "a reserved address"),
    ],
)
def test_web_block_refuses_metadata_in_ipv6_forms_even_with_private_addresses_allowed(
    aws, account, function, context, private_allowed, url, reason
):
    run = new_run(account)
    [node] = add_nodes(run, {"name": "Fetch", "type": "web-block", "url": url})
    message, failed = failing_block(function, context, run, node)
    assert reason in message
    assert failed.status.value == "error" and reason in failed.error


def test_web_block_refuses_a_name_resolving_to_a_private_address(aws, account, function, context, public_names):
    run = new_run(account)
    [node] = add_nodes(run, {"name": "Intranet", "type": "web-block", "url": "http://intranet.example/wiki"})
    message, _ = failing_block(function, context, run, node)
    assert message.startswith("Refused to fetch intranet.example (resolves to 192.168.0.10): a private address")
    assert public_names == []


def test_web_block_refuses_a_redirect_to_a_private_address(aws, account, function, context, web, public_names):
    # Given a public page that redirects into the private network
    web.redirect("/story", "http://10.0.0.7/admin")
    run = new_run(account)
    [node] = add_nodes(run, {"name": "Story", "type": "web-block", "url": "http://news.example/story"})
    # When
    message, _ = failing_block(function, context, run, node)
    # Then the first hop was fetched, the redirect refused before connecting
    assert message.startswith("Refused to fetch 10.0.0.7: a private address")
    assert public_names == ["93.184.216.34"]
    assert [r.path for r in web.requests] == ["/story"]


@pytest.mark.parametrize(
    ("response", "error", "reason"),
    [
        (
            Response(200, b"x" * 5000, {"Content-Type": "text/html"}),
            BlockFatalError,
            "is too large: 5000 bytes (limit 4096)",
        ),
        (
            Response(200, b"x" * 5000, {"Content-Type": "text/html", "Content-Length": None}),
            BlockFatalError,
            "is too large: more than 4096 bytes",
        ),
        (
            Response(200, b"<p>late</p>", {"Content-Type": "text/html"}, delay=3),
            BlockRetryableError,
            "timed out after 0.5 s",
        ),
        (Response(404, b"gone"), BlockFatalError, "answered HTTP 404"),
        (Response(503, b"busy"), BlockRetryableError, "answered HTTP 503"),
        (Response(429, b"slow down"), BlockRetryableError, "answered HTTP 429"),
        (Response(200, files.image("png"), {"Content-Type": "image/png"}), BlockFatalError, "is image/png, not a page"),
        (
            Response(200, b"<html><body><script>x()</script></body></html>", {"Content-Type": "text/html"}),
            BlockFatalError,
            "has no readable text",
        ),
    ],
)
def test_web_block_limits_and_failures(
    aws, account, function, context, web, private_allowed, monkeypatch, response, error, reason
):
    # Given small limits
    monkeypatch.setenv("WEB_MAX_BYTES", "4096")
    monkeypatch.setenv("WEB_FETCH_TIMEOUT_SECONDS", "0.5")
    web.route("/page", response)
    run = new_run(account)
    [node] = add_nodes(run, {"name": "Fetch", "type": "web-block", "url": web.url("/page")})
    # When
    message, _ = failing_block(function, context, run, node, error)
    # Then
    assert reason in message


def test_too_many_redirects_fail_the_block(aws, account, function, context, web, private_allowed):
    web.redirect("/loop", "/loop")
    run = new_run(account)
    [node] = add_nodes(run, {"name": "Loop", "type": "web-block", "url": web.url("/loop")})
    message, _ = failing_block(function, context, run, node)
    assert "Too many redirects (more than 5)" in message


def test_an_unreachable_server_is_retried(aws, account, function, context, private_allowed):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    run = new_run(account)
    [node] = add_nodes(run, {"name": "Down", "type": "web-block", "url": f"http://127.0.0.1:{port}/"})
    message, _ = failing_block(function, context, run, node, BlockRetryableError)
    assert "could not be reached (ConnectionRefusedError)" in message


def test_web_block_without_a_url_fails(aws, account, function, context):
    run = new_run(account, prompt="No link here")
    [node] = add_nodes(run, {"name": "Nothing", "type": "web-block", "instructions": "Read the page"})
    message, _ = failing_block(function, context, run, node)
    assert message == "Block 'Nothing' has no URL to fetch (none in its node, instructions or prompt)"


# ---------------------------------------------------------------------------------------------- search


SEARCH_RESULTS = {
    "*": [
        {"url": "{base}/guide", "title": "Rock pools guide", "content": "Where rock pools form."},
        {"url": "{base}/crabs", "title": "Shore crabs", "content": "Crabs of the <strong>shore</strong>."},
        {"url": "http://10.9.9.9/internal", "title": "Internal", "content": "Should not be fetched."},
    ]
}


def serve_search_pages(web: FakeWeb) -> dict:
    web.page("/guide", ARTICLE)
    web.page(
        "/crabs", "<html><title>Shore crabs</title><main><p>Shore crabs hide under weed at low tide.</p></main></html>"
    )
    return {
        k: [{**r, "url": r["url"].format(base=web.url("").rstrip("/"))} for r in v] for k, v in SEARCH_RESULTS.items()
    }


@pytest.mark.parametrize("provider", ["searxng", "brave", "tavily"])
def test_web_research_searches_reads_and_notes_each_source(aws, account, function, context, web, monkeypatch, provider):
    # Given a search API and the pages it finds, on the fake server (private addresses allowed: it is loopback)
    results = serve_search_pages(web)
    {
        "searxng": lambda: web.searxng(results),
        "brave": lambda: web.brave(results, key="brave-key"),
        "tavily": lambda: web.tavily(results, key="tvly-key"),
    }[provider]()
    monkeypatch.setenv("SEARCH_PROVIDER", provider)
    monkeypatch.setenv(
        "SEARCH_API_URL",
        web.url("/search" if provider == "tavily" else "/res/v1/web/search" if provider == "brave" else ""),
    )
    monkeypatch.setenv("SEARCH_API_KEY", {"brave": "brave-key", "tavily": "tvly-key"}.get(provider, ""))
    monkeypatch.setenv("WEB_ALLOW_PRIVATE_ADDRESSES", "true")
    run = new_run(account)
    [node] = add_nodes(run, {"name": "Search", "type": "web-research-block", "instructions": "Rock pool animals"})
    # When
    done = run_block(function, context, run, node)
    # Then
    assert done.status.value == "completed"
    assert f"Searched ({provider}): Rock pool animals" in done.content
    assert f"### [1] Rock pools | Shore Guide\n{web.url('/guide')}" in done.content
    assert f"### [2] Shore crabs\n{web.url('/crabs')}" in done.content
    assert "Shore crabs hide under weed at low tide" in done.content
    assert [s.url for s in done.sources][:2] == [web.url("/guide"), web.url("/crabs")]
    assert done.sources[1].snippet == "Crabs of the shore."


def test_web_research_refuses_results_in_private_ranges(aws, account, function, context, web, monkeypatch):
    # Given the default policy: the search endpoint (the operator's) is reachable, result pages on private
    # addresses are not
    results = serve_search_pages(web)
    web.searxng(results)
    monkeypatch.setenv("SEARCH_PROVIDER", "searxng")
    monkeypatch.setenv("SEARCH_API_URL", web.url(""))
    run = new_run(account)
    [node] = add_nodes(run, {"name": "Search", "type": "web-research-block", "instructions": "Rock pool animals"})
    done = run_block(function, context, run, node)
    assert "Read 0 of 3 sources." in done.content
    assert "(The page could not be read: Refused to fetch 10.9.9.9: a private address" in done.content
    assert [r.path for r in web.requests] == ["/search"]


def test_web_research_with_a_wrong_api_key_fails(aws, account, function, context, web, monkeypatch):
    web.brave(serve_search_pages(web), key="right")
    monkeypatch.setenv("SEARCH_PROVIDER", "brave")
    monkeypatch.setenv("SEARCH_API_URL", web.url("/res/v1/web/search"))
    monkeypatch.setenv("SEARCH_API_KEY", "wrong")
    run = new_run(account)
    [node] = add_nodes(run, {"name": "Search", "type": "web-research-block", "instructions": "Rock pools"})
    message, _ = failing_block(function, context, run, node)
    assert message.startswith("The brave search failed:") and "answered HTTP 401" in message


def test_deep_research_reports_with_citations_from_search_and_files(
    aws, account, function, context, web, monkeypatch, private_allowed
):
    # Given a search API, its pages, and an uploaded file read by a file-block upstream
    web.searxng(serve_search_pages(web))
    monkeypatch.setenv("SEARCH_PROVIDER", "searxng")
    monkeypatch.setenv("SEARCH_API_URL", web.url(""))
    run = new_run(account, uploads={"survey.txt": b"Our survey counted 40 shore crabs in rock pools at low tide."})
    upload = run.run.uploads[0]
    file_node, deep = add_nodes(
        run,
        {"name": "survey.txt", "type": "file-block", "upload_id": upload.file_id},
        {"name": "Research", "type": "deep-research-block", "instructions": "How many shore crabs live in rock pools?"},
    )
    deep.inputs = [file_node.block_id]
    Store().put_graph([deep], [], run.run.canvas_id)
    run_block(function, context, run, file_node)
    # When
    done = run_block(function, context, run, deep)
    # Then
    assert done.status.value == "completed"
    assert done.content.startswith("# Deep research: How many shore crabs live in rock pools?")
    assert "[1] survey.txt (survey.txt)" in done.content
    assert f"Rock pools | Shore Guide ({web.url('/guide')})" in done.content
    assert "searched (searxng)" in done.content
    assert {s.file_name for s in done.sources if s.file_name} == {"survey.txt"}
    assert web.url("/crabs") in {s.url for s in done.sources}


# ---------------------------------------------------------------------------------------------- YouTube


@pytest.fixture
def youtube(web, monkeypatch, private_allowed) -> FakeWeb:
    monkeypatch.setenv("YOUTUBE_BASE_URL", web.url(""))
    web.youtube(
        VIDEO,
        "Life in a rock pool",
        [(0.0, 4.2, "Welcome to the shore."), (5.1, 3.0, "Here's an anemone."), (65.5, 2.0, "Now the crabs.")],
    )
    return web


def test_yt_block_gives_a_timestamped_transcript_that_links_to_each_moment(aws, account, function, context, youtube):
    run = new_run(account)
    [node] = add_nodes(run, {"name": "Video", "type": "yt-block", "url": f"https://youtu.be/{VIDEO}"})
    # When
    done = run_block(function, context, run, node)
    # Then
    assert done.content == (
        "# Life in a rock pool\n\n"
        f"Transcript (published, en) of https://www.youtube.com/watch?v={VIDEO}&t=0s\n\n"
        f"[0:00](https://www.youtube.com/watch?v={VIDEO}&t=0s) Welcome to the shore. Here's an anemone. [1]\n"
        f"[1:05](https://www.youtube.com/watch?v={VIDEO}&t=65s) Now the crabs. [2]"
    )
    assert [s.model_dump(exclude_none=True) for s in done.sources] == [
        {
            "title": "Life in a rock pool at 0:00",
            "url": f"https://www.youtube.com/watch?v={VIDEO}&t=0s",
            "snippet": "Welcome to the shore. Here's an anemone.",
            "timestamp": "0:00",
        },
        {
            "title": "Life in a rock pool at 1:05",
            "url": f"https://www.youtube.com/watch?v={VIDEO}&t=65s",
            "snippet": "Now the crabs.",
            "timestamp": "1:05",
        },
    ]
    assert [r.path for r in youtube.requests] == ["/watch", "/youtubei/v1/player", "/api/timedtext"]


def test_yt_block_failures(aws, account, function, context, youtube):
    run = new_run(account)
    unknown, no_link = add_nodes(
        run,
        {"name": "Gone", "type": "yt-block", "url": "https://www.youtube.com/watch?v=AAAAAAAAAAA"},
        {"name": "No link", "type": "yt-block", "instructions": "Summarize the talk"},
    )
    message, _ = failing_block(function, context, run, unknown)
    assert message == "The video AAAAAAAAAAA is not available: This video is unavailable"
    message, _ = failing_block(function, context, run, no_link)
    assert "has no YouTube video URL" in message


def test_yt_block_without_captions_or_when_throttled(aws, account, function, context, youtube):
    run = new_run(account)
    [node] = add_nodes(run, {"name": "Video", "type": "yt-block", "url": f"https://www.youtube.com/watch?v={VIDEO}"})
    youtube.route(
        "/youtubei/v1/player",
        Response(200, b'{"playabilityStatus": {"status": "OK"}, "videoDetails": {"title": "x"}}'),
    )
    message, _ = failing_block(function, context, run, node)
    assert message == f"The video {VIDEO} has no transcript (captions are off or not published)"
    # And a throttled YouTube is retried
    [again] = add_nodes(run, {"name": "Video 2", "type": "yt-block", "url": f"https://www.youtube.com/watch?v={VIDEO}"})
    youtube.route("/watch", Response(429, b"Too Many Requests"))
    message, _ = failing_block(function, context, run, again, BlockRetryableError)
    assert "YouTube did not answer" in message and "HTTP 429" in message


# ---------------------------------------------------------------------------------------------- table and list


def test_table_and_list_blocks_serve_structured_content(aws, account, function, context):
    # Given a CSV upload read by a file-block
    run = new_run(account, uploads={"pools.csv": b"pool,depth_cm,visited\nA,40,2025-03-01\nB,25,2025-03-02\n"})
    upload = run.run.uploads[0]
    file_node, table, listing = add_nodes(
        run,
        {"name": "pools.csv", "type": "file-block", "upload_id": upload.file_id},
        {"name": "Pools table", "type": "table-block", "instructions": "Tabulate the pools"},
        {"name": "Pools list", "type": "list-block", "instructions": "List what the survey found"},
    )
    table.inputs = listing.inputs = [file_node.block_id]
    Store().put_graph([table, listing], [], run.run.canvas_id)
    run_block(function, context, run, file_node)
    # When
    tabled = run_block(function, context, run, table)
    listed = run_block(function, context, run, listing)
    # Then
    assert tabled.content == (
        "### pools.csv\n\nColumns: pool (text), depth_cm (integer), visited (date)\n\n"
        "| pool | depth_cm | visited |\n| --- | ---: | --- |\n| A | 40 | 2025-03-01 |\n| B | 25 | 2025-03-02 |"
    )
    assert tabled.sources[0].file_name == "pools.csv"
    assert listed.status.value == "completed" and listed.content.split("\n\n", 1)[1].startswith("- ")


def test_a_csv_with_a_bare_carriage_return_is_read_as_a_spreadsheet_reads_it(aws, account, function, context):
    # Given a CSV whose unquoted field holds a bare CR, read by a file-block and tabulated downstream
    run = new_run(account, uploads={"cr.csv": b"a,b\nx,\ry\n"})
    upload = run.run.uploads[0]
    file_node, table = add_nodes(
        run,
        {"name": "cr.csv", "type": "file-block", "upload_id": upload.file_id},
        {"name": "Table", "type": "table-block", "instructions": "Tabulate it"},
    )
    table.inputs = [file_node.block_id]
    Store().put_graph([table], [], run.run.canvas_id)

    # When both run
    read = run_block(function, context, run, file_node)
    tabled = run_block(function, context, run, table)

    # Then the CR ends a row, as LF does
    assert read.status.value == "completed"
    assert tabled.status.value == "completed"
    assert tabled.content.endswith("| a | b |\n| --- | --- |\n| x |  |\n| y |  |"), tabled.content
