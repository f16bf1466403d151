"""The gathering blocks' behaviour with in-memory fakes: files, models, search and pages."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from canvas_core import settings
from canvas_core.blocks.context import BlockContext
from canvas_core.errors import BlockFatalError, BlockRetryableError, StorageError
from canvas_core.gather.fetch import BlockedAddressError, Page
from canvas_core.gather.index import index_key
from canvas_core.gather.search import SearchError, SearchResult
from canvas_core.models.items import NodeItem, RunItem, Upload
from canvas_core.providers.base import Completion
from canvas_core.providers.offline import OfflineProvider
from tests.fakes import files

pytestmark = pytest.mark.unit

CANVAS = "0b9e3c4d-8f21-4a6b-b1c2-5d7e9f0a1b2c"


class MemoryFiles:
    def __init__(self) -> None:
        self.objects: dict[str, tuple[bytes, str]] = {}

    def put(self, key: str, data: bytes, content_type: str) -> None:
        self.objects[key] = (data, content_type)

    def get(self, key: str) -> bytes:
        if key not in self.objects:
            raise StorageError(f"S3 get failed for {key}: NoSuchKey")
        return self.objects[key][0]


class ScriptedModel:
    """Answers each call with `answer(prompt)`; remembers the prompts."""

    def __init__(self, answer: Callable[[str], str]):
        self.answer, self.prompts = answer, []

    def complete(self, *, system: str, prompt: str, role: str) -> Completion:
        self.prompts.append(prompt)
        return Completion(text=self.answer(prompt), model_id="test/model", input_tokens=10, output_tokens=5)


class SeeingModel(ScriptedModel):
    def describe_image(self, *, system, prompt, image, image_format, role) -> Completion:
        self.prompts.append(f"{image_format}:{len(image)}")
        return Completion(text="A red square on white.", model_id="test/vision", input_tokens=50, output_tokens=6)


def context(
    node_type: str,
    *,
    uploads: dict[str, bytes] | None = None,
    inputs: list[NodeItem] | None = None,
    provider=None,
    instructions: str | None = "Research tide pools",
    url: str | None = None,
    store: MemoryFiles | None = None,
) -> BlockContext:
    store = store or MemoryFiles()
    items = []
    for i, (name, data) in enumerate((uploads or {}).items()):
        key = f"uploads/acct/run-1/f{i}/{name}"
        store.put(key, data, "application/octet-stream")
        items.append(
            Upload(
                file_id=f"f{i}",
                name=name,
                extension=name.rsplit(".", 1)[1],
                content_type="x",
                size_bytes=len(data),
                s3_key=key,
            )
        )
    run = RunItem(
        run_id="run-1",
        account_id="acct",
        canvas_id=CANVAS,
        prompt="Tell me about tide pools",
        template="auto",
        uploads=items,
        created_at_ms=0,
        estimated_duration_ms=0,
    )
    node = NodeItem(
        canvas_id=CANVAS,
        block_id="b-1",
        name="Block",
        type=node_type,
        instructions=instructions,
        url=url,
        upload_id=items[0].file_id if items and not inputs else None,
    )
    return BlockContext(run=run, node=node, inputs=inputs or [], files=store, provider=provider or OfflineProvider())


def file_node(ctx_store: MemoryFiles, name: str, data: bytes, block_id: str) -> NodeItem:
    """Run a file-block over an upload and return its node as a downstream block sees it."""
    from canvas_core.blocks import file

    ctx = context("file-block", uploads={name: data}, store=ctx_store)
    ctx.node.block_id = block_id
    out = file.run(ctx)
    return NodeItem(
        canvas_id=CANVAS,
        block_id=block_id,
        name=name,
        type="file-block",
        status="completed",
        content=out.content,
        sources=out.sources,
        upload_id=ctx.node.upload_id,
    )


# ---------------------------------------------------------------------------------------------- file-block


def test_file_block_gives_text_sources_per_page_and_stores_its_index():
    from canvas_core.blocks import file

    # Given
    ctx = context("file-block", uploads={"r.pdf": files.pdf(["Tides rise twice a day.", "Crabs hide."])})
    # When
    out = file.run(ctx)
    # Then
    assert out.content == "## Page 1\n\nTides rise twice a day.\n\n## Page 2\n\nCrabs hide."
    assert [(s.file_name, s.page) for s in out.sources] == [("r.pdf", 1), ("r.pdf", 2)]
    stored = json.loads(ctx.files.get(index_key("acct", "run-1", "b-1")))
    assert [c["page"] for c in stored["chunks"]] == [1, 2]


def test_file_block_fails_a_damaged_file_with_its_reason():
    from canvas_core.blocks import file

    ctx = context("file-block", uploads={"b.pdf": b"%PDF-1.4\n%broken\n"})
    with pytest.raises(BlockFatalError, match=r"b\.pdf could not be read as a PDF: it is damaged"):
        file.run(ctx)


def test_file_block_without_its_upload_fails():
    from canvas_core.blocks import file

    ctx = context("file-block")
    ctx.node.upload_id = "gone"
    with pytest.raises(BlockFatalError, match="The file for block 'Block' is missing from the run"):
        file.run(ctx)


# ---------------------------------------------------------------------------------------------- image-block


def test_image_block_is_described_by_a_multimodal_model():
    from canvas_core.blocks import image_upload

    model = SeeingModel(lambda p: "")
    ctx = context("image-block", uploads={"red.png": files.image("png", (4, 4))}, provider=model)
    out = image_upload.run(ctx)
    assert out.content.startswith("Image red.png: PNG, 4x4 pixels, RGB colour")
    assert "Description: A red square on white." in out.content
    assert ctx.usage.models_used == ["test/vision"]
    assert model.prompts == [f"png:{len(files.image('png', (4, 4)))}"]


def test_image_block_without_a_multimodal_model_keeps_the_metadata():
    from canvas_core.blocks import image_upload

    ctx = context("image-block", uploads={"p.gif": files.image("gif", (7, 6))})
    out = image_upload.run(ctx)
    assert out.content.startswith("Image p.gif: GIF, 7x6 pixels") and "Description" not in out.content
    assert ctx.usage.models_used == []


def test_svg_upload_is_sanitized_and_the_safe_copy_kept():
    from canvas_core.blocks import image_upload

    ctx = context("image-block", uploads={"badge.svg": files.SVG}, provider=SeeingModel(lambda p: ""))
    out = image_upload.run(ctx)
    assert "Sanitized for display: removed script, onclick attribute, external reference, foreignobject." in out.content
    assert "Text in the image: Quarterly badge; Q3 growth 12%" in out.content
    safe, content_type = ctx.files.objects["uploads/acct/run-1/f0/derived/sanitized.svg"]
    assert content_type == "image/svg+xml" and b"<script" not in safe and b"tracker.example" not in safe


def test_image_block_fails_an_unreadable_image():
    from canvas_core.blocks import image_upload

    ctx = context("image-block", uploads={"x.webp": b"RIFF\x00\x00\x00\x00WEBPVP8 "})
    with pytest.raises(BlockFatalError, match=r"x\.webp could not be read as a WEBP image"):
        image_upload.run(ctx)


# ---------------------------------------------------------------------------------------------- table and list


def test_table_block_reads_a_spreadsheet_input_with_its_types():
    from canvas_core.blocks import table

    store = MemoryFiles()
    sheet = files.xlsx({"Sales": [["region", "units", "day"], ["North", 12, "2025-01-02"], ["South", 7.5, None]]})
    node = file_node(store, "sales.xlsx", sheet, "in-1")
    ctx = context("table-block", inputs=[node], store=store)
    ctx.run.uploads = _uploads_of(store)
    out = table.run(ctx)
    assert out.content.startswith("### sales.xlsx, sheet Sales\n\nColumns: region (text), units (number), day (date)")
    assert "| North | 12 | 2025-01-02 |" in out.content
    assert out.sources[0].file_name == "sales.xlsx"


def _uploads_of(store: MemoryFiles) -> list[Upload]:
    return [
        Upload(
            file_id=key.split("/")[3],
            name=key.rsplit("/", 1)[1],
            extension=key.rsplit(".", 1)[1],
            content_type="x",
            size_bytes=len(data),
            s3_key=key,
        )
        for key, (data, _) in store.objects.items()
        if key.startswith("uploads/acct/run-1/f") and "/index/" not in key
    ]


def test_table_block_takes_markdown_tables_from_its_inputs_without_a_model_call():
    from canvas_core.blocks import table

    upstream = NodeItem(
        canvas_id=CANVAS,
        block_id="p",
        name="Prices",
        type="prompt-block",
        status="completed",
        content="Here:\n\n| fruit | price |\n|---|---|\n| apple | 1.5 |\n| pear | 2 |",
    )
    model = ScriptedModel(lambda p: pytest.fail("no model call expected"))
    out = table.run(context("table-block", inputs=[upstream], provider=model))
    assert out.content == (
        "### Prices\n\nColumns: fruit (text), price (number)\n\n| fruit | price |\n| --- | ---: |\n"
        "| apple | 1.5 |\n| pear | 2 |"
    )


def test_table_block_asks_the_model_when_the_inputs_hold_no_table():
    from canvas_core.blocks import table

    model = ScriptedModel(lambda p: "Sure:\n| pool | depth_m |\n|---|---|\n| A | 1 |\n| B | 2 |")
    ctx = context("table-block", provider=model)
    out = table.run(ctx)
    assert "Columns: pool (text), depth_m (integer)" in out.content
    assert "one markdown table" in model.prompts[0]
    assert ctx.notes == []  # the table asked for: no fallback to report


def test_table_block_makes_a_table_of_a_listed_answer():
    from canvas_core.blocks import table

    model = ScriptedModel(lambda p: "Key points:\n- Tide pools hold many anemones.\n- Sea stars hunt at low tide.")
    ctx = context("table-block", provider=model)
    out = table.run(ctx)
    assert out.content == (
        "Columns: # (integer), Item (text)\n\n| # | Item |\n| ---: | --- |\n"
        "| 1 | Tide pools hold many anemones. |\n| 2 | Sea stars hunt at low tide. |"
    )
    # and the run's errors will say the model's answer was a list, not a table
    assert ctx.notes == ["The model's answer held no table; the items it listed were made its rows"]


def test_table_block_offline_builds_a_table_from_its_material():
    from canvas_core.blocks import table

    upstream = NodeItem(
        canvas_id=CANVAS,
        block_id="p",
        name="Notes",
        type="text-block",
        status="completed",
        content="Tide pools hold many anemones and crabs. Sea stars hunt there at low tide.",
    )
    out = table.run(context("table-block", inputs=[upstream]))
    assert out.content.startswith("Columns: ") and "| Tide pools hold many anemones and crabs. |" in out.content


def test_table_block_fails_when_nothing_tabular_can_be_made():
    from canvas_core.blocks import table

    with pytest.raises(BlockFatalError, match="No table could be built"):
        table.run(context("table-block", provider=ScriptedModel(lambda p: "I cannot.")))


def test_list_block_gives_an_expandable_list():
    from canvas_core.blocks import list as list_block

    model = ScriptedModel(lambda p: "- Rocky shores\n  - Pools form in hollows\n- Sandy shores")
    out = list_block.run(context("list-block", provider=model))
    assert out.content == "2 items\n\n- Rocky shores\n  - Pools form in hollows\n- Sandy shores"


def test_list_block_falls_back_to_the_lists_in_its_inputs_then_fails():
    from canvas_core.blocks import list as list_block

    upstream = NodeItem(
        canvas_id=CANVAS, block_id="p", name="N", type="text-block", status="completed", content="- one\n- two"
    )
    ctx = context("list-block", inputs=[upstream], provider=ScriptedModel(lambda p: "No list."))
    out = list_block.run(ctx)
    assert out.content == "2 items\n\n- one\n- two"
    assert ctx.notes == ["The model's answer held no list; the lists in the block's inputs were used"]
    with pytest.raises(BlockFatalError, match="No list could be built"):
        list_block.run(context("list-block", provider=ScriptedModel(lambda p: "No list.")))


# ---------------------------------------------------------------------------------------------- research


class StubSearch:
    name = "stub"

    def __init__(self, results: dict[str, list[SearchResult]] | Exception):
        self.results, self.queries = results, []

    def search(self, query: str, limit: int) -> list[SearchResult]:
        if isinstance(self.results, Exception):
            raise self.results
        self.queries.append(query)
        return next((r for k, r in self.results.items() if k in query), self.results.get("*", []))[:limit]


class StubFetcher:
    def __init__(self, pages: dict[str, str]):
        self.pages, self.fetched = pages, []

    def __call__(self, settings=None):
        return self

    def fetch(self, url: str, **_) -> Page:
        self.fetched.append(url)
        if url not in self.pages:
            raise BlockedAddressError(f"Refused to fetch {url}: a private address")
        return Page(url=url, status=200, content_type="text/html", charset="utf-8", body=self.pages[url].encode())


def result(n: int) -> SearchResult:
    return SearchResult(title=f"Result {n}", url=f"https://site{n}.example/a", snippet=f"Snippet {n}.")


def page(n: int, text: str) -> str:
    return f"<html><title>Page {n}</title><body><main><p>{text}</p></main></body></html>"


def test_web_research_reads_results_and_notes_each_source(monkeypatch):
    from canvas_core.blocks import web_research

    search = StubSearch({"*": [result(1), result(2), result(3)]})
    fetcher = StubFetcher(
        {
            "https://site1.example/a": page(1, "Anemones close when the tide goes out."),
            "https://site2.example/a": page(2, "Crabs shelter under rocks during the day."),
        }
    )
    monkeypatch.setattr("canvas_core.blocks.research.get_search_provider", lambda settings: search)
    monkeypatch.setattr(web_research, "Fetcher", fetcher)
    model = ScriptedModel(
        lambda p: '{"queries": ["tide pool animals", "tide pool ecology"]}' if "web search queries" in p else "- noted"
    )
    ctx = context("web-research-block", provider=model)
    out = web_research.run(ctx)
    assert search.queries == ["tide pool animals", "tide pool ecology"]
    assert "### [1] Page 1\nhttps://site1.example/a\n\n- noted" in out.content
    assert (
        "### [3] Result 3\nhttps://site3.example/a\n\nSnippet 3.\n\n(The page could not be read: Refused" in out.content
    )
    assert [(s.title, s.url) for s in out.sources] == [
        ("Page 1", "https://site1.example/a"),
        ("Page 2", "https://site2.example/a"),
        ("Result 3", "https://site3.example/a"),
    ]
    assert (ctx.usage.searches, ctx.usage.pages_fetched) == (2, 2)
    assert ctx.notes == []  # the queries came as asked


def test_research_whose_queries_are_not_the_json_asked_for_searches_the_task_and_says_so(monkeypatch):
    from canvas_core.blocks import deep_research

    # Given a model that answers neither the queries nor the decision in the shape asked for
    search = StubSearch({"*": [result(1)]})
    monkeypatch.setattr("canvas_core.blocks.research.get_search_provider", lambda settings: search)
    monkeypatch.setattr(deep_research, "Fetcher", StubFetcher({"https://site1.example/a": page(1, "Crabs hide.")}))
    ctx = context("deep-research-block", provider=ScriptedModel(lambda p: "I would search for tide pools."))
    # When
    deep_research.run(ctx)
    # Then the task itself was searched, and both fallbacks are noted for the run's errors
    assert search.queries[0] == "Research tide pools"
    assert ctx.notes == [
        "The model's search queries could not be used (the answer holds no valid JSON); the task itself was searched",
        "The model's decision on whether to search further could not be used (the answer holds no valid JSON); "
        "the next queries, if any, came from the new sources' key terms",
    ]


@pytest.mark.parametrize("block_type", ["web-research-block", "deep-research-block"])
def test_research_without_a_search_provider_fails_naming_the_setting(monkeypatch, block_type):
    from canvas_core.blocks import deep_research, web_research

    # Given no search provider and no file to research
    monkeypatch.delenv("SEARCH_PROVIDER", raising=False)
    block = web_research if block_type == "web-research-block" else deep_research
    # When / Then the block fails, saying which setting gives it the web
    with pytest.raises(BlockFatalError, match=r"SEARCH_PROVIDER=none.*set SEARCH_PROVIDER to searxng"):
        block.run(context(block_type))


@pytest.mark.parametrize(
    ("failure", "raised", "message"),
    [
        (SearchError("The searxng search failed: HTTP 503", transient=True), BlockRetryableError, "HTTP 503"),
        (SearchError("The brave search failed: HTTP 401"), BlockFatalError, "HTTP 401"),
        ({"*": []}, BlockFatalError, "found no results for: Research tide pools"),
    ],
)
def test_web_research_search_failures(monkeypatch, failure, raised, message):
    from canvas_core.blocks import web_research

    monkeypatch.setattr("canvas_core.blocks.research.get_search_provider", lambda settings: StubSearch(failure))
    with pytest.raises(raised, match=message):
        web_research.run(context("web-research-block"))


def test_an_unknown_search_provider_fails_the_block(monkeypatch):
    from canvas_core.blocks import deep_research, web_research

    monkeypatch.setenv("SEARCH_PROVIDER", "bing")
    for module in (web_research, deep_research):
        with pytest.raises(BlockFatalError, match="Unknown search provider 'bing'"):
            module.run(context("web-research-block"))
    monkeypatch.setenv("SEARCH_PROVIDER", "brave")
    settings.reset()
    with pytest.raises(BlockFatalError, match="SEARCH_API_KEY is not set"):
        web_research.run(context("web-research-block"))


def test_deep_research_goes_round_by_round_and_reports_with_citations(monkeypatch):
    from canvas_core.blocks import deep_research

    search = StubSearch({"crabs": [result(2)], "*": [result(1)]})
    fetcher = StubFetcher(
        {
            "https://site1.example/a": page(1, "Anemones close at low tide."),
            "https://site2.example/a": page(2, "Crabs hide under rocks."),
        }
    )
    monkeypatch.setattr("canvas_core.blocks.research.get_search_provider", lambda settings: search)
    monkeypatch.setattr(deep_research, "Fetcher", fetcher)
    decisions = iter(['{"search_more": true, "queries": ["tide pool crabs"]}', '{"search_more": false, "queries": []}'])

    def answer(prompt: str) -> str:
        if "web search queries" in prompt:
            return '{"queries": ["tide pool anemones"]}'
        if "decide whether more searching" in prompt:
            return next(decisions)
        if prompt.startswith("Write a research report"):
            return "Anemones close at low tide [1]; crabs hide [2]."
        return "- a note"

    ctx = context("deep-research-block", provider=ScriptedModel(answer))
    out = deep_research.run(ctx)
    assert search.queries == ["tide pool anemones", "tide pool crabs"]
    assert out.content.startswith(
        "# Deep research: Research tide pools\n\nAnemones close at low tide [1]; crabs hide [2]."
    )
    assert "## Sources\n[1] Page 1 (https://site1.example/a)\n[2] Page 2 (https://site2.example/a)" in out.content
    assert (
        "2 rounds; searched (stub): tide pool anemones; tide pool crabs; 2 pages read; "
        "stopped because the research was judged complete." in out.content
    )
    assert [s.url for s in out.sources] == ["https://site1.example/a", "https://site2.example/a"]


def test_deep_research_stops_at_its_budget(monkeypatch):
    from canvas_core.blocks import deep_research

    counter = iter(range(1, 100))
    search = StubSearch({"*": []})
    search.search = lambda q, n: [result(next(counter))]
    fetcher = StubFetcher(
        {f"https://site{i}.example/a": page(i, f"Fact number {i} about pools.") for i in range(1, 100)}
    )
    monkeypatch.setattr("canvas_core.blocks.research.get_search_provider", lambda settings: search)
    monkeypatch.setattr(deep_research, "Fetcher", fetcher)
    monkeypatch.setenv("DEEP_RESEARCH_MAX_STEPS", "3")
    always_more = ScriptedModel(
        lambda p: f'{{"search_more": true, "queries": ["more {len(fetcher.fetched)}"]}}' if "decide" in p else "- n"
    )
    ctx = context("deep-research-block", provider=always_more)
    out = deep_research.run(ctx)
    assert "3 rounds;" in out.content and "stopped because the rounds budget was reached" in out.content
    monkeypatch.setenv("DEEP_RESEARCH_MAX_STEPS", "10")
    monkeypatch.setenv("DEEP_RESEARCH_MAX_PAGES", "2")
    settings.reset()
    ctx = context("deep-research-block", provider=always_more)
    out = deep_research.run(ctx)
    assert ctx.usage.pages_fetched == 2 and "the pages read budget was reached" in out.content


def test_deep_research_offline_works_from_the_canvas_files(monkeypatch):
    from canvas_core.blocks import deep_research

    monkeypatch.delenv("SEARCH_PROVIDER", raising=False)
    store = MemoryFiles()
    node = file_node(
        store, "pools.txt", b"Tide pools hold anemones. Anemones close their tentacles at low tide.", "in-1"
    )
    ctx = context("deep-research-block", inputs=[node], store=store, instructions="What do anemones do at low tide?")
    out = deep_research.run(ctx)
    assert "[1] pools.txt (pools.txt)" in out.content
    assert "searched (files only; no web search provider is configured)" in out.content
    assert "Anemones close their tentacles at low tide" in out.content
    assert out.sources[0].file_name == "pools.txt"


def test_deep_research_with_nothing_found_still_reports(monkeypatch):
    from canvas_core.blocks import deep_research

    class FindsNothing:
        name = "searxng"

        def search(self, query, limit):
            return []

    monkeypatch.setattr(deep_research, "search_provider", lambda settings: FindsNothing())
    out = deep_research.run(context("deep-research-block"))
    assert "No sources were found." in out.content and "stopped because a round found no new sources" in out.content
