"""A web page read for its title and main text (HTML, plain text, JSON, or a PDF), through the guarded
fetcher; and the block errors a failed fetch becomes."""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass

from canvas_core.errors import BlockFatalError, BlockRetryableError
from canvas_core.gather.fetch import Fetcher, FetchError, FetchTransientError
from canvas_core.gather.html import extract_html

MAX_PAGE_CHARS = 60_000
# A host (an IPv6 literal in brackets included), then anything up to white space, quotes or brackets.
URL = re.compile(r"https?://(?:\[[0-9a-f:.%]+\]|[^\s<>\"'/()\[\]]+)[^\s<>\"'()\[\]]*", re.IGNORECASE)


class PageError(Exception):
    """The page was fetched but holds nothing readable."""


@dataclass
class WebPage:
    url: str
    title: str
    text: str
    description: str = ""

    def snippet(self, limit: int = 300) -> str:
        source = self.description or self.text
        flat = " ".join(source.replace("#", " ").split())
        return flat if len(flat) <= limit else flat[: limit - 1].rsplit(" ", 1)[0] + "…"


def read_page(url: str, fetcher: Fetcher) -> WebPage:
    """Fetch a URL and extract its title and main text; FetchError or PageError when it cannot be read."""
    page = fetcher.fetch(url)
    kind = page.content_type
    if kind in ("text/html", "application/xhtml+xml") or (not kind and page.body.lstrip()[:1] == b"<"):
        extracted = extract_html(page.text())
        title, text, description = extracted.title, extracted.text, extracted.description
    elif kind == "application/pdf":
        from canvas_core.gather.extract import ExtractionError, extract

        name = page.url.rstrip("/").rsplit("/", 1)[-1] or "document.pdf"
        try:
            extraction = extract(name, "pdf", page.body)
        except ExtractionError as exc:
            raise PageError(str(exc)) from exc
        title, text, description = name, extraction.text(), ""
    elif kind.startswith("text/") or kind in ("application/json", "application/xml") or kind.endswith("+json"):
        body = page.text()
        if kind.endswith("json"):
            with contextlib.suppress(json.JSONDecodeError):
                body = json.dumps(json.loads(body), indent=2, ensure_ascii=False)
        title, text, description = page.url, body.strip(), ""
    else:
        raise PageError(f"{page.url} is {kind or 'of an unknown type'}, not a page that can be read as text")
    if not text.strip():
        raise PageError(f"{page.url} has no readable text")
    if len(text) > MAX_PAGE_CHARS:
        text = text[:MAX_PAGE_CHARS] + f"\n\n[truncated: {len(text) - MAX_PAGE_CHARS} more characters]"
    return WebPage(url=page.url, title=title or page.url, text=text, description=description)


def block_error(exc: FetchError | PageError) -> Exception:
    """The block error a failed fetch becomes: retried when passing, recorded on the block otherwise."""
    if isinstance(exc, FetchTransientError):
        return BlockRetryableError(str(exc))
    return BlockFatalError(str(exc))


def urls_in(text: str | None) -> list[str]:
    return list(dict.fromkeys(u.rstrip(".,;:!?") for u in URL.findall(text or "")))
