"""Settings of the gathering blocks, read from the environment on each call (template.yaml sets them on AWS,
the embedded stack from the same template; tests change them with monkeypatch)."""

from __future__ import annotations

import os
from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True)
class GatherSettings:
    # The fetcher (docs/block-types.md, "Fetching and SSRF")
    web_allow_private_addresses: bool = False
    web_fetch_timeout_seconds: float = 15.0
    web_max_bytes: int = 5 * MIB
    web_max_redirects: int = 5
    # Search
    search_provider: str = "none"
    search_api_url: str = ""
    search_api_key: str = ""
    search_max_results: int = 5
    web_research_queries: int = 3
    web_research_max_pages: int = 5
    # YouTube
    youtube_base_url: str = "https://www.youtube.com"
    youtube_languages: tuple[str, ...] = ("en",)
    # Archives (ZIP uploads, and the ZIP containers of DOCX and XLSX)
    zip_max_entries: int = 1000
    zip_max_total_bytes: int = 50 * MIB
    zip_max_ratio: int = 100
    # Deep research budget
    deep_research_max_steps: int = 4
    deep_research_max_seconds: float = 600.0
    deep_research_max_searches: int = 12
    deep_research_max_pages: int = 20
    deep_research_max_model_tokens: int = 200_000


def _bool(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


def _search_api_key() -> str:
    """SEARCH_API_KEY when set (offline, the embedded stack), else the secret SEARCH_API_KEY_SECRET_ARN names."""
    key = (os.environ.get("SEARCH_API_KEY") or "").strip()
    secret_arn = (os.environ.get("SEARCH_API_KEY_SECRET_ARN") or "").strip()
    if key or not secret_arn:
        return key
    from canvas_core.secrets import secret_api_key

    return secret_api_key(secret_arn, "search API key")


def gather_settings() -> GatherSettings:
    env = os.environ.get
    d = GatherSettings()
    return GatherSettings(
        web_allow_private_addresses=_bool(env("WEB_ALLOW_PRIVATE_ADDRESSES", "false")),
        web_fetch_timeout_seconds=float(env("WEB_FETCH_TIMEOUT_SECONDS") or d.web_fetch_timeout_seconds),
        web_max_bytes=int(env("WEB_MAX_BYTES") or d.web_max_bytes),
        web_max_redirects=int(env("WEB_MAX_REDIRECTS") or d.web_max_redirects),
        search_provider=(env("SEARCH_PROVIDER") or d.search_provider).strip().lower(),
        search_api_url=(env("SEARCH_API_URL") or "").strip(),
        search_api_key=_search_api_key(),
        search_max_results=int(env("SEARCH_MAX_RESULTS") or d.search_max_results),
        web_research_queries=int(env("WEB_RESEARCH_QUERIES") or d.web_research_queries),
        web_research_max_pages=int(env("WEB_RESEARCH_MAX_PAGES") or d.web_research_max_pages),
        youtube_base_url=(env("YOUTUBE_BASE_URL") or d.youtube_base_url).rstrip("/"),
        youtube_languages=tuple(
            lang.strip() for lang in (env("YOUTUBE_TRANSCRIPT_LANGUAGES") or "en").split(",") if lang.strip()
        ),
        zip_max_entries=int(env("ZIP_MAX_ENTRIES") or d.zip_max_entries),
        zip_max_total_bytes=int(env("ZIP_MAX_TOTAL_BYTES") or d.zip_max_total_bytes),
        zip_max_ratio=int(env("ZIP_MAX_RATIO") or d.zip_max_ratio),
        deep_research_max_steps=int(env("DEEP_RESEARCH_MAX_STEPS") or d.deep_research_max_steps),
        deep_research_max_seconds=float(env("DEEP_RESEARCH_MAX_SECONDS") or d.deep_research_max_seconds),
        deep_research_max_searches=int(env("DEEP_RESEARCH_MAX_SEARCHES") or d.deep_research_max_searches),
        deep_research_max_pages=int(env("DEEP_RESEARCH_MAX_PAGES") or d.deep_research_max_pages),
        deep_research_max_model_tokens=int(env("DEEP_RESEARCH_MAX_MODEL_TOKENS") or d.deep_research_max_model_tokens),
    )
