"""web-research-block: search the web for the block's task and take notes on the top results.

Queries come from the model (or the task itself); each runs on the configured search provider
(canvas_core/gather/search.py); with SEARCH_PROVIDER=none the block fails naming the setting, and the blocks
reading it go on without it (the run ends `partial`). The top results are read through the SSRF-guarded
fetcher, and each source gets its notes under its number and URL.
"""

from __future__ import annotations

from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.blocks.research import (
    NO_SEARCH_PROVIDER,
    plan_queries,
    read_results,
    render_notes,
    search,
    search_provider,
    task_of,
)
from canvas_core.errors import BlockFatalError
from canvas_core.gather.fetch import Fetcher
from canvas_core.settings import gather_settings


def run(ctx: BlockContext) -> BlockOutput:
    settings = gather_settings()
    provider = search_provider(settings)
    task = task_of(ctx)
    if provider.name == "none":
        raise BlockFatalError(NO_SEARCH_PROVIDER)
    queries = plan_queries(ctx, task, settings.web_research_queries)
    results, seen_urls = [], set()
    for query in queries:
        for result in search(ctx, provider, query, settings.search_max_results):
            if result.url not in seen_urls:
                seen_urls.add(result.url)
                results.append(result)
    if not results:
        raise BlockFatalError(f"The web search ({provider.name}) found no results for: {'; '.join(queries)}")
    notes = read_results(ctx, task, results, Fetcher(settings), set(), settings.web_research_max_pages)
    content = (
        f"# Web research: {task}\n\nSearched ({provider.name}): {'; '.join(queries)}\n"
        f"Read {sum(n.read for n in notes)} of {len(notes)} sources.\n\n{render_notes(notes)}"
    )
    return BlockOutput(content=content, sources=[n.source() for n in notes])
