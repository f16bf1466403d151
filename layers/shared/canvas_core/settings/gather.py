"""The gathering blocks' settings (docs/block-types.md): the guarded fetcher's, which the webhook deliveries
share, then search, YouTube, archives and the deep research budget."""

from __future__ import annotations

from typing import Any

from pydantic import field_validator

from canvas_core.settings.base import MIB, EnvSettings, env


class FetchSettings(EnvSettings):
    """The fetcher's (docs/block-types.md, "Fetching and SSRF")."""

    web_allow_private_addresses: bool = env("WEB_ALLOW_PRIVATE_ADDRESSES", False)
    web_fetch_timeout_seconds: float = env("WEB_FETCH_TIMEOUT_SECONDS", 15.0, gt=0)
    web_max_bytes: int = env("WEB_MAX_BYTES", 5 * MIB, gt=0)
    web_max_redirects: int = env("WEB_MAX_REDIRECTS", 5, ge=0)


class GatherSettings(FetchSettings):
    # Search: the provider's name is checked where it is chosen (gather/search.py), which fails only the
    # blocks that search.
    search_provider: str = env("SEARCH_PROVIDER", "none")
    search_api_url: str = env("SEARCH_API_URL", "")
    # The key itself wins over the secret holding it (gather/search.py).
    search_api_key: str = env("SEARCH_API_KEY", "", repr=False)
    search_api_key_secret_arn: str = env("SEARCH_API_KEY_SECRET_ARN", "")
    search_max_results: int = env("SEARCH_MAX_RESULTS", 5, ge=0)
    web_research_queries: int = env("WEB_RESEARCH_QUERIES", 3, ge=0)
    web_research_max_pages: int = env("WEB_RESEARCH_MAX_PAGES", 5, ge=0)
    # YouTube
    youtube_base_url: str = env("YOUTUBE_BASE_URL", "https://www.youtube.com")
    youtube_languages: tuple[str, ...] = env("YOUTUBE_TRANSCRIPT_LANGUAGES", ("en",), min_length=1)
    # Archives (ZIP uploads, and the ZIP containers of DOCX and XLSX)
    zip_max_entries: int = env("ZIP_MAX_ENTRIES", 1000, gt=0)
    zip_max_total_bytes: int = env("ZIP_MAX_TOTAL_BYTES", 50 * MIB, gt=0)
    zip_max_ratio: int = env("ZIP_MAX_RATIO", 100, gt=0)
    # Deep research budget
    deep_research_max_steps: int = env("DEEP_RESEARCH_MAX_STEPS", 4, ge=0)
    deep_research_max_seconds: float = env("DEEP_RESEARCH_MAX_SECONDS", 600.0, gt=0)
    deep_research_max_searches: int = env("DEEP_RESEARCH_MAX_SEARCHES", 12, ge=0)
    deep_research_max_pages: int = env("DEEP_RESEARCH_MAX_PAGES", 20, ge=0)
    deep_research_max_model_tokens: int = env("DEEP_RESEARCH_MAX_MODEL_TOKENS", 200_000, gt=0)

    @field_validator("search_provider", mode="before")
    @classmethod
    def _lower_case(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @field_validator("youtube_base_url", mode="before")
    @classmethod
    def _without_trailing_slash(cls, value: Any) -> Any:
        return value.rstrip("/") if isinstance(value, str) else value

    @field_validator("youtube_languages", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        """`en,de` from the environment; a sequence when built in code."""
        if isinstance(value, str):
            return tuple(lang.strip() for lang in value.split(",") if lang.strip())
        return value
