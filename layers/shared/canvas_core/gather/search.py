"""Web search behind one small interface, chosen by SEARCH_PROVIDER:

- `none` (the default): no search; blocks say so and work from their other inputs.
- `searxng`: a SearXNG instance's JSON API (`GET {SEARCH_API_URL}/search?q=...&format=json`).
- `brave`: the Brave Search API (`GET .../res/v1/web/search`, header `X-Subscription-Token`).
- `tavily`: the Tavily API (`POST .../search`, `Authorization: Bearer`).

The search endpoint is the operator's choice, so it may be on a private network: it is reached with private
addresses allowed (cloud metadata and link-local addresses stay refused). The pages a search finds are
fetched by the blocks through the guarded fetcher, under the SSRF policy.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlencode

from canvas_core.gather.fetch import Fetcher, FetchError, FetchTransientError
from canvas_core.settings import GatherSettings, gather_settings

PROVIDERS = ("none", "searxng", "brave", "tavily")
BRAVE_URL = "https://api.search.brave.com/res/v1/web/search"
TAVILY_URL = "https://api.tavily.com/search"


class SearchError(Exception):
    """The search did not answer; `transient` says whether trying again may help."""

    def __init__(self, message: str, transient: bool = False):
        super().__init__(message)
        self.transient = transient


@dataclass
class SearchResult:
    title: str
    url: str
    snippet: str = ""


class SearchProvider(Protocol):
    name: str

    def search(self, query: str, limit: int) -> list[SearchResult]: ...


class NoSearch:
    name = "none"

    def search(self, query: str, limit: int) -> list[SearchResult]:
        return []


class _HttpSearch:
    name = "http"

    def __init__(self, api_url: str, api_key: str, fetcher: Fetcher):
        self.api_url, self.api_key, self.fetcher = api_url, api_key, fetcher

    def _json(
        self, url: str, method: str = "GET", body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> dict[str, Any]:
        try:
            page = self.fetcher.fetch(url, method=method, body=body, headers=headers)
        except FetchError as exc:
            raise SearchError(f"The {self.name} search failed: {exc}", isinstance(exc, FetchTransientError)) from exc
        try:
            parsed = json.loads(page.text())
        except json.JSONDecodeError as exc:
            raise SearchError(f"The {self.name} search answered with something other than JSON") from exc
        if not isinstance(parsed, dict):
            raise SearchError(f"The {self.name} search answered with an unexpected shape")
        return parsed


class SearxngSearch(_HttpSearch):
    name = "searxng"

    def search(self, query: str, limit: int) -> list[SearchResult]:
        data = self._json(f"{self.api_url.rstrip('/')}/search?{urlencode({'q': query, 'format': 'json'})}")
        return _results(data.get("results"), "url", "title", "content", limit)


class BraveSearch(_HttpSearch):
    name = "brave"

    def search(self, query: str, limit: int) -> list[SearchResult]:
        url = f"{self.api_url or BRAVE_URL}?{urlencode({'q': query, 'count': min(limit, 20)})}"
        data = self._json(url, headers={"Accept": "application/json", "X-Subscription-Token": self.api_key})
        return _results((data.get("web") or {}).get("results"), "url", "title", "description", limit)


class TavilySearch(_HttpSearch):
    name = "tavily"

    def search(self, query: str, limit: int) -> list[SearchResult]:
        body = json.dumps({"query": query, "max_results": limit, "search_depth": "basic"}).encode()
        data = self._json(
            self.api_url or TAVILY_URL,
            method="POST",
            body=body,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.api_key}"},
        )
        return _results(data.get("results"), "url", "title", "content", limit)


def get_search_provider(settings: GatherSettings | None = None, fetcher: Fetcher | None = None) -> SearchProvider:
    settings = settings or gather_settings()
    name = settings.search_provider
    if name == "none":
        return NoSearch()
    if name not in PROVIDERS:
        raise SearchError(f"Unknown search provider {name!r} (SEARCH_PROVIDER: one of {', '.join(PROVIDERS)})")
    if name == "searxng" and not settings.search_api_url:
        raise SearchError("SEARCH_PROVIDER is searxng but SEARCH_API_URL is not set")
    api_key = search_api_key(settings)
    if name in ("brave", "tavily") and not api_key:
        raise SearchError(f"SEARCH_PROVIDER is {name} but SEARCH_API_KEY is not set")
    fetcher = fetcher or Fetcher(settings, allow_private=True)
    providers: dict[str, type[SearxngSearch | BraveSearch | TavilySearch]] = {
        "searxng": SearxngSearch,
        "brave": BraveSearch,
        "tavily": TavilySearch,
    }
    provider = providers[name]
    return provider(settings.search_api_url, api_key, fetcher)


def search_api_key(settings: GatherSettings) -> str:
    """SEARCH_API_KEY when set (offline, the embedded stack), else the secret SEARCH_API_KEY_SECRET_ARN names: read
    when a block first searches, as only the blocks that search may read it."""
    if settings.search_api_key or not settings.search_api_key_secret_arn:
        return settings.search_api_key
    from canvas_core.secrets import secret_api_key

    return secret_api_key(settings.search_api_key_secret_arn, "search API key")


def _results(items: object, url_key: str, title_key: str, snippet_key: str, limit: int) -> list[SearchResult]:
    found, seen = [], set()
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        url = str(item.get(url_key) or "").strip()
        if not url.startswith(("http://", "https://")) or url in seen:
            continue
        seen.add(url)
        found.append(
            SearchResult(
                title=_plain(item.get(title_key)) or url,
                url=url,
                snippet=_plain(item.get(snippet_key))[:500],
            )
        )
        if len(found) >= limit:
            break
    return found


def _plain(value: object) -> str:
    # Brave marks matches with <strong>; entities come escaped.
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", str(value or ""))).split())
