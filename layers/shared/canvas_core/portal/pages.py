"""The portal's files (assets/): HTML pages, CSS and JS, read once per container with importlib.resources and
answered with the headers every portal response carries."""

from __future__ import annotations

from functools import cache
from html import escape
from importlib import resources
from string import Template
from typing import Any

from aws_lambda_powertools.event_handler import Response

from canvas_core.errors import NotFoundError

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}

# Every portal answer: nothing inline runs, no framing, nothing cached (pages and data are per account).
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
}


class AssetNotFoundError(NotFoundError):
    def __init__(self, name: str):
        super().__init__(f"Not found: {name}")


@cache
def asset(name: str) -> tuple[bytes, str]:
    """(bytes, content type) of a file of assets/; only plain names of the kinds served."""
    suffix = "." + name.rsplit(".", 1)[-1] if "." in name else ""
    if "/" in name or "\\" in name or name.startswith(".") or suffix not in CONTENT_TYPES:
        raise AssetNotFoundError(name)
    try:
        data = resources.files("canvas_core.portal").joinpath("assets", name).read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        raise AssetNotFoundError(name) from None
    return data, CONTENT_TYPES[suffix]


def asset_response(name: str) -> Response[str]:
    data, content_type = asset(name)
    return Response(status_code=200, content_type=content_type, body=data.decode("utf-8"))


def error_page(status_code: int, title: str, message: str, path: str) -> Response[str]:
    """A page saying what could not be shown (assets/error_page.html), with a link back to the portal. Its links are
    relative to `path`, the request's path, so that they hold under API Gateway's stage prefix too."""
    base = "../" * max(path.count("/") - 1, 0)
    page = Template(asset("error_page.html")[0].decode("utf-8"))
    body = page.substitute(base=base, title=escape(title), message=escape(message))
    return Response(status_code=status_code, content_type=CONTENT_TYPES[".html"], body=body)


def with_security_headers(response: dict[str, Any]) -> dict[str, Any]:
    """Add the headers to a proxy result (multiValueHeaders, as the REST resolver answers)."""
    headers = response.setdefault("multiValueHeaders", {})
    for name, value in SECURITY_HEADERS.items():
        headers[name] = [value]
    return response
