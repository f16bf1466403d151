"""The steps web research is made of, shared by web-research-block and deep-research-block: plan search
queries, search, read the top results through the guarded fetcher, and take notes on each source with its
URL. Model answers that are not in the asked shape (the offline provider's, for one) fall back to plain
rules, so research runs the same with any provider."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, Field

from canvas_core.blocks.context import BlockContext
from canvas_core.errors import BlockFatalError, BlockRetryableError
from canvas_core.gather.fetch import Fetcher, FetchError
from canvas_core.gather.index import STOPWORDS
from canvas_core.gather.pages import PageError, WebPage, read_page, urls_in
from canvas_core.gather.search import SearchError, SearchProvider, SearchResult, get_search_provider
from canvas_core.models.items import Source
from canvas_core.providers.structured import StructuredOutputError
from canvas_core.settings import GatherSettings

NOTE_SOURCE_CHARS = 12_000
MAX_QUERIES = 8  # a structured answer's list is bounded: a small model runs on otherwise


@dataclass
class Note:
    """What one source said, with where it is: a URL, or a file and its page."""

    title: str
    url: str | None
    text: str
    snippet: str = ""
    read: bool = True  # False when only the search snippet could be used
    file_name: str | None = None
    page: int | None = None

    def source(self) -> Source:
        return Source(
            title=self.title, url=self.url, snippet=self.snippet or None, file_name=self.file_name, page=self.page
        )

    def where(self) -> str:
        if self.url:
            return self.url
        return f"{self.file_name}" + (f", page {self.page}" if self.page else "")


# Why a research block with nothing to research fails: the setting that would give it the web.
NO_SEARCH_PROVIDER = (
    "No web search provider is configured (SEARCH_PROVIDER=none), so this block could not research the web: set "
    "SEARCH_PROVIDER to searxng (with SEARCH_API_URL), brave or tavily (with SEARCH_API_KEY)"
)


def search_provider(settings: GatherSettings) -> SearchProvider:
    """The configured search provider; a misconfiguration fails the block with its reason."""
    try:
        return get_search_provider(settings)
    except SearchError as exc:
        raise BlockFatalError(str(exc)) from exc


def task_of(ctx: BlockContext) -> str:
    return (ctx.node.instructions or ctx.run.prompt).strip()


class SearchQueries(BaseModel):
    """The search queries a model writes for a task (a structured answer: providers/structured.py)."""

    queries: list[Annotated[str, Field(min_length=2, max_length=200)]] = Field(max_length=MAX_QUERIES)


def plan_queries(ctx: BlockContext, task: str, count: int, known: list[str] | None = None) -> list[str]:
    """Search queries for a task: asked of the model as a structured answer, else the task itself."""
    avoid = f"\nQueries already run (do not repeat them): {json.dumps(known)}" if known else ""
    try:
        answer = ctx.structured(
            f"Write up to {count} web search queries that together find good sources for this task.{avoid}"
            f"\n\nTask: {task}",
            SearchQueries,
            role="researcher",
        )
        queries = [q for q in answer.queries if q.strip()]
        reason = "it held no query"
    except StructuredOutputError as exc:
        queries, reason = [], str(exc)
    if not queries:
        ctx.note(f"The model's search queries could not be used ({reason}); the task itself was searched")
    queries = [" ".join(q.split())[:200] for q in queries if q not in (known or [])][:count]
    return queries or [plain_query(task)]


def plain_query(text: str, words: int = 16) -> str:
    """A search query from a task: its first sentence, without URLs, up to a number of words."""
    for url in urls_in(text):
        text = text.replace(url, " ")
    first = re.split(r"(?<=[.?!])\s", " ".join(text.split()), maxsplit=1)[0]
    return " ".join(first.split()[:words]).strip(" .") or "research"


def key_terms(text: str, exclude: str = "", count: int = 3) -> list[str]:
    """The most frequent words of a text that the excluded text does not use (follow-up query material)."""
    excluded = set(re.findall(r"[^\W\d_]+", exclude.lower()))
    counts: dict[str, int] = {}
    for word in re.findall(r"[^\W\d_]{4,}", text.lower()):
        if word not in STOPWORDS and word not in excluded:
            counts[word] = counts.get(word, 0) + 1
    return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:count]]


def search(ctx: BlockContext, provider: SearchProvider, query: str, limit: int) -> list[SearchResult]:
    ctx.usage.searches += 1
    try:
        return provider.search(query, limit)
    except SearchError as exc:
        raise (BlockRetryableError if exc.transient else BlockFatalError)(str(exc)) from exc


def read_results(
    ctx: BlockContext,
    task: str,
    results: list[SearchResult],
    fetcher: Fetcher,
    seen: set[str],
    max_pages: int,
    allowed: Callable[[], bool] = lambda: True,
) -> list[Note]:
    """Read up to `max_pages` results not seen before and take notes on each; a page that cannot be read
    is noted from its search snippet, with the reason."""
    notes: list[Note] = []
    for result in results:
        if len(notes) >= max_pages or not allowed():
            break
        if result.url in seen:
            continue
        seen.add(result.url)
        try:
            page = read_page(result.url, fetcher)
        except (FetchError, PageError) as exc:
            text = f"{result.snippet}\n\n(The page could not be read: {exc})".strip()
            notes.append(Note(title=result.title, url=result.url, text=text, snippet=result.snippet, read=False))
            continue
        ctx.usage.pages_fetched += 1
        notes.append(take_notes(ctx, task, page, result.snippet))
    return notes


def take_notes(ctx: BlockContext, task: str, page: WebPage, snippet: str = "") -> Note:
    completion = ctx.complete(
        f"Take notes from this source for the task below: the facts, figures and quotes that bear on it, "
        f"each as a short bullet. Task: {task}\n\nMaterial:\n# {page.title}\n{page.text[:NOTE_SOURCE_CHARS]}",
        role="researcher",
    )
    return Note(title=page.title, url=page.url, text=completion.text.strip(), snippet=snippet or page.snippet())


def render_notes(notes: list[Note], first_number: int = 1) -> str:
    parts = []
    for number, note in enumerate(notes, start=first_number):
        parts.append(f"### [{number}] {note.title}\n{note.where()}\n\n{note.text}")
    return "\n\n".join(parts)
