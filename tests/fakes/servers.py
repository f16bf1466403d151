"""A small HTTP server on 127.0.0.1 for tests, with routes that answer as the real services do: HTML pages,
redirects, a SearXNG / Brave / Tavily search API, and YouTube's watch page, player API and timed text.

    with FakeWeb() as web:
        web.page("/article", "<html>...</html>")
        web.url("/article")  # http://127.0.0.1:<port>/article
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Self
from urllib.parse import parse_qs, urlsplit


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str | None] = field(default_factory=dict)  # None: leave the header out
    delay: float = 0.0  # seconds before answering (the server's stop ends the wait)


Route = Callable[[Request], Response]


class FakeWeb:
    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[Request] = []
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Self:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                fake._answer(self, "GET")

            def do_POST(self) -> None:
                fake._answer(self, "POST")

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None):
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.server_address[1]

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    # ------------------------------------------------------------------ routes

    def route(self, path: str, answer: Route | Response) -> None:
        self.routes[path] = answer if callable(answer) else (lambda _request, r=answer: r)

    def page(self, path: str, html: str, status: int = 200, content_type: str = "text/html; charset=utf-8") -> None:
        self.route(path, Response(status, html.encode(), {"Content-Type": content_type}))

    def redirect(self, path: str, location: str, status: int = 302) -> None:
        self.route(path, Response(status, b"", {"Location": location}))

    def searxng(self, results: dict[str, list[dict]], path: str = "/search") -> None:
        """SearXNG's JSON API: GET /search?q=...&format=json -> {"query", "results": [{url, title, content}]}."""

        def answer(request: Request) -> Response:
            if request.query.get("format") != ["json"]:
                return Response(403, b"Forbidden")
            query = request.query.get("q", [""])[0]
            return _json({"query": query, "number_of_results": 0, "results": _matching(results, query)})

        self.route(path, answer)

    def brave(self, results: dict[str, list[dict]], key: str, path: str = "/res/v1/web/search") -> None:
        """Brave Search: GET ?q=&count= with X-Subscription-Token
        -> {"web": {"results": [{url, title, description}]}}."""

        def answer(request: Request) -> Response:
            if request.headers.get("x-subscription-token") != key:
                return _json({"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID"}}, 401)
            query = request.query.get("q", [""])[0]
            items = [
                {"url": r["url"], "title": r["title"], "description": r.get("content", "")}
                for r in _matching(results, query)
            ]
            return _json({"type": "search", "query": {"original": query}, "web": {"type": "search", "results": items}})

        self.route(path, answer)

    def tavily(self, results: dict[str, list[dict]], key: str, path: str = "/search") -> None:
        """Tavily: POST JSON {query, max_results} with Authorization: Bearer -> {"results": [{url, title, content}]}."""

        def answer(request: Request) -> Response:
            if request.method != "POST":
                return Response(405, b"")
            if request.headers.get("authorization") != f"Bearer {key}":
                return _json({"detail": {"error": "Unauthorized: missing or invalid API key."}}, 401)
            query = json.loads(request.body or b"{}").get("query", "")
            return _json({"query": query, "results": _matching(results, query), "response_time": 0.1})

        self.route(path, answer)

    def youtube(self, video: str, title: str, captions: list[tuple[float, float, str]], kind: str = "") -> None:
        """YouTube as its clients see it: the watch page (with the Innertube key), the player API listing the
        caption tracks, and the timed text of a track."""
        key = "AIzaFakeInnertubeKey_123"
        self.page(
            "/watch",
            f'<html><head><title>{escape(title)} - YouTube</title></head><body><script>var ytcfg={{"INNERTUBE_API_KEY":'
            f' "{key}","INNERTUBE_CLIENT_VERSION":"2.2025"}};</script></body></html>',
        )

        def player(request: Request) -> Response:
            asked = json.loads(request.body or b"{}").get("videoId")
            if request.method != "POST" or request.query.get("key") != [key]:
                return Response(403, b"")
            if asked != video:
                return _json({"playabilityStatus": {"status": "ERROR", "reason": "This video is unavailable"}})
            track = {
                "baseUrl": self.url(f"/api/timedtext?v={video}&lang=en&fmt=srv3"),
                "name": {"runs": [{"text": "English"}]},
                "languageCode": "en",
                **({"kind": kind} if kind else {}),
            }
            return _json(
                {
                    "playabilityStatus": {"status": "OK"},
                    "videoDetails": {"videoId": video, "title": title},
                    "captions": {"playerCaptionsTracklistRenderer": {"captionTracks": [track]}},
                }
            )

        self.route("/youtubei/v1/player", player)
        texts = "".join(
            f'<text start="{start}" dur="{duration}">{escape(escape(text))}</text>'
            for start, duration, text in captions
        )
        self.route(
            "/api/timedtext",
            Response(
                200,
                f'<?xml version="1.0" encoding="utf-8" ?><transcript>{texts}</transcript>'.encode(),
                {"Content-Type": "text/xml; charset=UTF-8"},
            ),
        )

    # ------------------------------------------------------------------ serving

    def _answer(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        request = Request(
            method=method,
            path=parts.path,
            query=parse_qs(parts.query),
            headers={k.lower(): v for k, v in handler.headers.items()},
            body=handler.rfile.read(length) if length else b"",
        )
        self.requests.append(request)
        route = self.routes.get(parts.path)
        response = route(request) if route else Response(404, b"Not found", {"Content-Type": "text/plain"})
        if response.delay and self._stopping.wait(response.delay):
            return
        try:
            handler.send_response(response.status)
            headers = {"Content-Length": str(len(response.body)), **response.headers}
            if headers["Content-Length"] is None:  # no length: the body ends when the connection closes
                handler.close_connection = True
            for name, value in headers.items():
                if value is not None:
                    handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(response.body)
        except (BrokenPipeError, ConnectionResetError):
            pass


def _json(value: object, status: int = 200) -> Response:
    return Response(status, json.dumps(value).encode(), {"Content-Type": "application/json"})


def _matching(results: dict[str, list[dict]], query: str) -> list[dict]:
    """The results listed under the first key the query contains ("*" matches any query)."""
    for key, items in results.items():
        if key != "*" and key.lower() in query.lower():
            return items
    return results.get("*", [])
