"""The HTTP client of the `canvas` commands: one method per endpoint, each returning the body's `data`.

What passes is retried, a bounded number of times: a connection that fails or breaks, 429 (after its
`Retry-After`) and 5xx, with exponential backoff and jitter in between. Creating a run is retried too: it carries
an `Idempotency-Key`, so a retried create never starts a second run. Anything else fails at once, as a
`CanvasError` whose text is the one line the commands print.
"""

from __future__ import annotations

import email.utils
import json
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx

TERMINAL_STATUSES = frozenset({"completed", "partial", "failed"})


def _user_agent() -> str:
    try:
        return f"canvas-cli/{metadata.version('canvas-run-service')}"
    except metadata.PackageNotFoundError:
        return "canvas-cli"


class CanvasError(Exception):
    """A call that failed for good. Its text is one line, fit to print as it is."""


class ApiError(CanvasError):
    """The service answered with an error status."""

    def __init__(self, status: int, message: str):
        hints = {401: ": check the API key (CANVAS_API_KEY or --api-key)"}
        super().__init__(f"{message} ({status}){hints.get(status, '')}")
        self.status = status
        self.message = message


class TransportError(CanvasError):
    """The service could not be reached, or the answer did not arrive."""


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5
    base_seconds: float = 0.5
    cap_seconds: float = 8.0
    # A longer Retry-After is not waited for: the command says when to try again instead.
    max_retry_after_seconds: float = 60.0

    def backoff(self, failed_attempts: int) -> float:
        """Seconds before the next attempt: doubling from `base_seconds` up to `cap_seconds`, half of it random
        ("equal jitter"), so that clients that failed together do not come back together."""
        ceiling: float = min(self.cap_seconds, self.base_seconds * 2 ** (failed_attempts - 1))
        return ceiling / 2 + random.uniform(0, ceiling / 2)


@dataclass(frozen=True)
class PollSchedule:
    """Polls start fast, so a short run ends promptly, and slow down to `cap_seconds` for long ones."""

    first_seconds: float = 0.5
    factor: float = 1.5
    cap_seconds: float = 5.0

    def intervals(self) -> Iterator[float]:
        interval = self.first_seconds
        while True:
            yield interval
            interval = min(self.cap_seconds, interval * self.factor)


class CanvasClient:
    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self._sleep = sleep or time.sleep
        headers = {"User-Agent": _user_agent(), "Accept": "application/json"}
        self._api = httpx.Client(base_url=self.base_url, headers=headers | {"X-API-KEY": api_key}, timeout=timeout)
        # Artifacts are fetched from presigned URLs, often on another host: the key is not sent there.
        self._files = httpx.Client(headers={"User-Agent": headers["User-Agent"]}, timeout=timeout)

    def __enter__(self) -> CanvasClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._api.close()
        self._files.close()

    # ------------------------------------------------------------------ endpoints

    def create_run(
        self,
        prompt: str,
        *,
        template: str | None = None,
        blocks: list[str] | None = None,
        instructions: str | None = None,
        files: Sequence[tuple[str, bytes, str]] = (),
        idempotency_key: str,
        review: bool = False,
    ) -> dict[str, Any]:
        """POST /v1/run: a form, multipart when there are files (each `(name, bytes, content type)`)."""
        form = {"prompt": prompt}
        if template:
            form["template"] = template
        if blocks:
            form["blocks"] = json.dumps(blocks)
        if instructions:
            form["agent_instructions"] = instructions
        if review:
            form["review"] = "true"
        parts = [("files", file) for file in files] or None
        return self._call("POST", "/v1/run", data=form, files=parts, headers={"Idempotency-Key": idempotency_key})

    def rerun_block(
        self, canvas_id: str, block_id: str, instructions: str | None = None, *, idempotency_key: str
    ) -> dict[str, Any]:
        """POST /v1/canvas/{canvas_id}/blocks/{block_id}/rerun: a JSON object, with the block's new instructions."""
        body = {"instructions": instructions} if instructions else {}
        path = f"/v1/canvas/{canvas_id}/blocks/{block_id}/rerun"
        return self._call("POST", path, json=body, headers={"Idempotency-Key": idempotency_key})

    def get_run(self, run_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/run/{run_id}")

    def approve_run(self, run_id: str, instructions: dict[str, str] | None = None) -> dict[str, Any]:
        """POST /v1/run/{run_id}/approve: a JSON object, with new instructions by block id."""
        return self._call("POST", f"/v1/run/{run_id}/approve", json={"instructions": instructions or {}})

    def cancel_run(self, run_id: str) -> dict[str, Any]:
        return self._call("POST", f"/v1/run/{run_id}/cancel")

    def list_runs(self, limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
        params = {k: v for k, v in {"limit": limit, "cursor": cursor}.items() if v is not None}
        return self._call("GET", "/v1/runs", params=params)

    def get_dag(self, canvas_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/canvas/{canvas_id}/dag")

    def get_tasks(self, canvas_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/canvas/{canvas_id}/tasks")

    def poll_run(self, run_id: str, schedule: PollSchedule | None = None) -> Iterator[dict[str, Any]]:
        """The run's status, again and again until it has ended (the last one yielded is terminal)."""
        intervals = (schedule or PollSchedule()).intervals()
        while True:
            run = self.get_run(run_id)
            yield run
            if run["status"] in TERMINAL_STATUSES:
                return
            self._sleep(next(intervals))

    def download(self, url: str, target: Path) -> int:
        """Write what `url` serves to `target`; the number of bytes written. Artifacts are files a Lambda wrote,
        a few megabytes at most, so the body is read whole: a retry then never leaves half a file."""
        data = self.fetch(url)
        target.write_bytes(data)
        return len(data)

    def fetch(self, url: str) -> bytes:
        """What `url` serves (an artifact's download URL), read whole."""
        url = str(self._api.base_url.join(url))
        # A relative URL is the service's own: only then does the key go with it.
        client = self._api if url.startswith(self.base_url + "/") else self._files
        response = self._send(client, "GET", url, what=url.split("?", 1)[0])
        if response.is_error:
            raise ApiError(response.status_code, f"download failed: {_error_text(response, _json(response))}")
        return response.content

    # ------------------------------------------------------------------ the calls

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = self._send(self._api, method, path, what=self.base_url, **kwargs)
        body = _json(response)
        if response.is_error or not isinstance(body, dict) or body.get("success") is not True:
            raise ApiError(response.status_code, _error_text(response, body))
        return body.get("data") or {}

    def _send(self, client: httpx.Client, method: str, url: str, *, what: str, **kwargs: Any) -> httpx.Response:
        """The response to the request, sent again while it fails in a way that passes; after the last attempt,
        a response that still says so is returned for the caller to report."""
        for number in range(1, self.retry.attempts + 1):
            last = number == self.retry.attempts
            try:
                response = client.request(method, url, **kwargs)
            except httpx.UnsupportedProtocol as exc:
                raise TransportError(f"cannot reach {what}: {exc}") from None
            except httpx.TransportError as exc:
                if last:
                    raise TransportError(
                        f"cannot reach {what}: {_reason(exc)} (after {self.retry.attempts} attempts)"
                    ) from None
                self._sleep(self.retry.backoff(number))
                continue
            if not (response.status_code == 429 or response.status_code >= 500) or last:
                return response
            wait = _retry_after_seconds(response.headers.get("Retry-After"))
            if wait is not None and wait > self.retry.max_retry_after_seconds:
                text = _error_text(response, _json(response))
                raise ApiError(response.status_code, f"{text}; the service asks to retry after {wait:.0f} s")
            self._sleep(wait if wait is not None else self.retry.backoff(number))
        raise AssertionError("unreachable: the last attempt returns or raises")


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _error_text(response: httpx.Response, body: Any) -> str:
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return " ".join(body["error"].split())
    text = " ".join(response.text.split())[:120]
    return f"{response.reason_phrase or 'HTTP error'}: {text}" if text else response.reason_phrase or "HTTP error"


def _reason(exc: httpx.TransportError) -> str:
    if isinstance(exc, httpx.ConnectError) and "refused" in str(exc).lower():
        return "connection refused"
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    return " ".join(str(exc).split()) or type(exc).__name__


def _retry_after_seconds(value: str | None) -> float | None:
    """Retry-After as seconds: a number, or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
