"""deep-research-block: research in rounds within a budget, ending in a report with numbered citations.

Each round runs its queries on the files of the input file-blocks (their BM25 index) and on the web search
provider, reads the new results through the SSRF-guarded fetcher, and takes notes on each source. Then the
model decides whether to go on and with which queries (when its answer is not in the asked shape, research
goes on while a round still finds new sources, with queries built from what they said). The budget bounds
rounds, time, searches, pages read and model tokens (what credits are priced from); when it runs out, the
report is written from what was gathered. The report cites sources as [n]; they are listed under it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import BaseModel, Field

from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.blocks.research import (
    NO_SEARCH_PROVIDER,
    Note,
    key_terms,
    plain_query,
    plan_queries,
    read_results,
    render_notes,
    search,
    search_provider,
    task_of,
)
from canvas_core.errors import BlockFatalError, StorageError
from canvas_core.gather.fetch import Fetcher
from canvas_core.gather.index import Bm25Index, Chunk, Hit, index_key
from canvas_core.gather.search import SearchProvider
from canvas_core.providers.structured import StructuredOutputError
from canvas_core.settings import GatherSettings, gather_settings

QUERIES_PER_ROUND = 3
FILE_HITS_PER_QUERY = 3
REPORT_NOTE_CHARS = 60_000


@dataclass
class Budget:
    settings: GatherSettings
    started: float = field(default_factory=time.monotonic)
    rounds: int = 0
    stopped_by: str | None = None

    def allows(self, ctx: BlockContext, what: str = "work") -> bool:
        """True while every limit holds; the first limit reached is remembered as the reason research stopped."""
        s, usage = self.settings, ctx.usage
        checks = [
            (time.monotonic() - self.started >= s.deep_research_max_seconds, "time"),
            (usage.input_tokens + usage.output_tokens >= s.deep_research_max_model_tokens, "model tokens"),
            (what == "search" and usage.searches >= s.deep_research_max_searches, "searches"),
            (what == "page" and usage.pages_fetched >= s.deep_research_max_pages, "pages read"),
            (what == "round" and self.rounds >= s.deep_research_max_steps, "rounds"),
        ]
        for reached, name in checks:
            if reached:
                self.stopped_by = self.stopped_by or f"the {name} budget was reached"
                return False
        return True


def run(ctx: BlockContext) -> BlockOutput:
    settings = gather_settings()
    provider = search_provider(settings)
    task = task_of(ctx)
    budget = Budget(settings)
    fetcher = Fetcher(settings)
    notes: list[Note] = []
    seen: set[str] = set()
    ran: list[str] = []
    if provider.name == "none" and not any(n.type == "file-block" for n in ctx.inputs):
        # Nothing to research: a report from the prompt alone would pass for research.
        raise BlockFatalError(NO_SEARCH_PROVIDER)
    queries = plan_queries(ctx, task, QUERIES_PER_ROUND)
    while queries and budget.allows(ctx, "round"):
        budget.rounds += 1
        found = _research_round(ctx, budget, provider, fetcher, task, queries, seen, ran)
        notes += found
        if not found:
            budget.stopped_by = budget.stopped_by or "a round found no new sources"
            break
        queries = _next_queries(ctx, task, notes, found, ran) if budget.allows(ctx) else []
        if not queries:
            budget.stopped_by = budget.stopped_by or "the research was judged complete"
    return _report(ctx, task, provider, notes, ran, budget)


def _research_round(
    ctx: BlockContext,
    budget: Budget,
    provider: SearchProvider,
    fetcher: Fetcher,
    task: str,
    queries: list[str],
    seen: set[str],
    ran: list[str],
) -> list[Note]:
    found: list[Note] = []
    for query in queries:
        if not budget.allows(ctx, "search" if provider.name != "none" else "work"):
            break
        ran.append(query)
        for hit in search_inputs(ctx, query, FILE_HITS_PER_QUERY):
            key = f"file:{hit.chunk.file_name}:{hit.chunk.page}:{hash(hit.chunk.text)}"
            if key not in seen:
                seen.add(key)
                title = hit.chunk.file_name + (f", page {hit.chunk.page}" if hit.chunk.page else "")
                found.append(
                    Note(title=title, url=None, text=hit.chunk.text, file_name=hit.chunk.file_name, page=hit.chunk.page)
                )
        if provider.name == "none" or not budget.allows(ctx, "page"):
            continue  # no web search, or no page left to read what it would find
        results = search(ctx, provider, query, budget.settings.search_max_results)
        pages_left = budget.settings.deep_research_max_pages - ctx.usage.pages_fetched
        found += read_results(
            ctx, task, results, fetcher, seen, max(0, pages_left), allowed=lambda: budget.allows(ctx, "page")
        )
    return found


class ResearchDecision(BaseModel):
    """Whether to search further, and with which queries (a structured answer: providers/structured.py)."""

    search_more: bool
    queries: list[Annotated[str, Field(min_length=2, max_length=200)]] = Field(max_length=QUERIES_PER_ROUND)


def _next_queries(ctx: BlockContext, task: str, notes: list[Note], found: list[Note], ran: list[str]) -> list[str]:
    digest = "\n".join(f"- {n.title}: {n.text[:300]}" for n in notes[-20:])
    try:
        decision = ctx.structured(
            "You are researching the task below. Given the notes so far, decide whether more searching would "
            "improve the report (`search_more`), and if so with which new queries."
            f"\nQueries already run: {ran}\n\nTask: {task}\n\nNotes so far:\n{digest}",
            ResearchDecision,
            role="researcher",
        )
    except StructuredOutputError as exc:
        # Not a decision: follow what the new sources talk about that the queries did not ask yet.
        ctx.note(
            f"The model's decision on whether to search further could not be used ({exc}); "
            "the next queries, if any, came from the new sources' key terms"
        )
    else:
        if not decision.search_more:
            return []
        return [q for q in decision.queries if q.strip() and q not in ran][:QUERIES_PER_ROUND]
    base = plain_query(task, words=8)
    terms = key_terms(" ".join(n.text for n in found), exclude=" ".join([task, *ran]), count=2)
    return [q for q in (f"{base} {t}" for t in terms) if q not in ran]


def _report(
    ctx: BlockContext, task: str, provider: SearchProvider, notes: list[Note], ran: list[str], budget: Budget
) -> BlockOutput:
    inputs = ctx.material()
    material = render_notes(notes)[:REPORT_NOTE_CHARS]
    if inputs:
        material = f"{material}\n\n## From the canvas\n{inputs}"
    if notes:
        ask = (
            f"Write a research report for this task: {task}\nBase every claim on the numbered sources and cite "
            "them as [n]. Say where the sources disagree or fall short."
        )
    else:
        ask = f"Write a research report for this task: {task}\nNo sources were found; say so and what is missing."
    report = ctx.complete(f"{ask}\n\nMaterial:\n{material}" if material.strip() else ask, role="writer").text.strip()
    listed = "\n".join(f"[{i}] {n.title} ({n.where()})" for i, n in enumerate(notes, 1)) or "No sources were found."
    searched = provider.name if provider.name != "none" else "files only; no web search provider is configured"
    method = (
        f"{budget.rounds} rounds; searched ({searched}): {'; '.join(ran) or 'nothing'}; "
        f"{ctx.usage.pages_fetched} pages read; stopped because {budget.stopped_by or 'the research was complete'}."
    )
    content = f"# Deep research: {task}\n\n{report}\n\n## Sources\n{listed}\n\n## Method\n{method}"
    return BlockOutput(content=content, sources=[n.source() for n in notes] + ctx.input_sources())


def search_inputs(ctx: BlockContext, query: str, k: int = 5) -> list[Hit]:
    """BM25 over the chunks of every input file-block of this block (one index over all of them)."""
    chunks: list[Chunk] = []
    for node in ctx.inputs:
        if node.type != "file-block":
            continue
        try:
            data = ctx.files.get(index_key(ctx.run.account_id, ctx.run.run_id, node.block_id))
        except StorageError:
            continue  # a file-block from before indexes were kept, or one that failed
        chunks += Bm25Index.from_json(data).chunks
    return Bm25Index(chunks).search(query, k) if chunks else []
