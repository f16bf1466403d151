"""web-block: one web page, fetched and read for its title and main text.

The URL is the node's `url`, else the first URL in its instructions, else in the run's prompt. The fetch
goes through the SSRF-guarded fetcher (canvas_core/gather/fetch.py); a refused or unreadable URL fails the
block with the reason, a passing failure (timeout, 429, 5xx) is retried by the state machine.
"""

from __future__ import annotations

from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.errors import BlockFatalError
from canvas_core.gather.fetch import Fetcher, FetchError
from canvas_core.gather.pages import PageError, block_error, read_page, urls_in
from canvas_core.models.items import Source


def run(ctx: BlockContext) -> BlockOutput:
    url = block_url(ctx)
    try:
        page = read_page(url, Fetcher())
    except (FetchError, PageError) as exc:
        raise block_error(exc) from exc
    ctx.usage.pages_fetched += 1
    content = f"# {page.title}\n\nSource: {page.url}\n\n{page.text}"
    return BlockOutput(
        content=content, sources=[Source(title=page.title, url=page.url, snippet=page.snippet())], url=page.url
    )


def block_url(ctx: BlockContext) -> str:
    if ctx.node.url and ctx.node.url.strip():
        return ctx.node.url.strip()
    for text in (ctx.node.instructions, ctx.run.prompt):
        found = urls_in(text)
        if found:
            return found[0]
    raise BlockFatalError(f"Block '{ctx.node.name}' has no URL to fetch (none in its node, instructions or prompt)")
