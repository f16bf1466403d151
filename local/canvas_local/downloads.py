"""Download links on the embedded stack: what S3's presigned GET URLs are on AWS, served by the front door.

On AWS, `ArtifactStore.download_url` asks boto3 for a presigned GET: S3 checks its signature and expiry and serves
one object. moto's S3 checks neither, and its port serves every table and bucket, so the stack never hands it out:
its S3 clients' `generate_presigned_url` (botocore's, which this replaces for GETs on the stack's buckets) mints a
link to the front door instead, `GET /downloads/<bucket>/<key>?response-content-disposition=..&expires=..
&signature=..`, signed with HMAC-SHA256 under a key only the stack holds (kept in --state-dir, so links outlive a
restart, else made at start). The front door checks the signature and the expiry and answers with that one object.

A link starts with the address the client reached the API at (the request's Host), or with `public_url` when the
operator gave one (`canvas serve --public-url`, for a proxy or another host); a link minted outside any request (a
webhook's delivery) uses `public_url`, else the front door's own address."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import re
import secrets
import time
from collections.abc import Callable, Collection, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

from botocore.exceptions import ClientError
from botocore.signers import generate_presigned_url as botocore_generate_presigned_url

from canvas_local.frontdoor import DOWNLOADS, Request, Response, error_response

LOG = logging.getLogger(__name__)

KEY_FILE = "download-signing.key"
KEY_BYTES = 32
# The parameters of a presigned GET the links carry; any other (ResponseContentType, VersionId, ...) is refused.
SIGNED_PARAMS = frozenset({"Bucket", "Key", "ResponseContentDisposition"})
# What a Host header may be for a link to start with it: a name or an address, and a port.
_HOST = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$")

# The address the request being served reached the front door at (`http://<Host>`), for links minted on its thread.
_reached_at: ContextVar[str | None] = ContextVar("canvas_local_reached_at", default=None)


class DownloadLinks:
    """Mints and serves the stack's download links. `install(session)` gives the session's S3 clients the minting
    `generate_presigned_url`; the front door calls `serve` for a path under DOWNLOADS and runs each request inside
    `reached_at(host)`."""

    def __init__(
        self,
        secret: bytes,
        buckets: Collection[str],
        door_url: Callable[[], str],
        s3: Callable[[], Any],
        public_url: str | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self._secret = secret
        self._buckets = buckets
        self._door_url = door_url
        self._s3 = s3
        self.public_url = public_url.rstrip("/") if public_url else None
        self._clock = clock
        self._sessions: list[Any] = []

    # -------------------------------------------------- minting

    def install(self, session: Any) -> None:
        """S3 clients `session` (boto3 or botocore) creates from now on mint the stack's links for GETs."""
        # Registered last on the generic event: botocore adds its own `generate_presigned_url` there, first.
        session.events.register_last("creating-client-class", self._add_presigner)
        self._sessions.append(session)

    def uninstall(self) -> None:
        for session in self._sessions:
            session.events.unregister("creating-client-class", self._add_presigner)
        self._sessions = []

    def _add_presigner(self, class_attributes: dict[str, Any], event_name: str = "", **_: Any) -> None:
        if not event_name.endswith(".s3"):
            return
        links = self

        def generate_presigned_url(
            client: Any,
            ClientMethod: str,
            Params: dict[str, Any] | None = None,
            ExpiresIn: int = 3600,
            HttpMethod: str | None = None,
        ) -> str:
            params = Params or {}
            if params.get("Bucket") not in links._buckets:
                return str(botocore_generate_presigned_url(client, ClientMethod, Params, ExpiresIn, HttpMethod))
            if ClientMethod != "get_object" or HttpMethod not in (None, "GET") or not set(params) <= SIGNED_PARAMS:
                raise ValueError(f"the embedded stack mints download links for GETs only, not {ClientMethod} {params}")
            return links.link(params["Bucket"], params["Key"], params.get("ResponseContentDisposition"), ExpiresIn)

        class_attributes["generate_presigned_url"] = generate_presigned_url

    def link(self, bucket: str, key: str, disposition: str | None, expires_in: int) -> str:
        """A link that downloads `bucket`/`key` until `expires_in` seconds from now."""
        expires = int(self._clock()) + int(expires_in)
        query = {"response-content-disposition": disposition} if disposition else {}
        query |= {"expires": str(expires), "signature": self._sign(bucket, key, disposition or "", expires)}
        return f"{self.base_url()}{DOWNLOADS}{quote(bucket)}/{quote(key)}?{urlencode(query, quote_via=quote)}"

    def base_url(self) -> str:
        return self.public_url or _reached_at.get() or self._door_url()

    @contextlib.contextmanager
    def reached_at(self, host: str | None) -> Iterator[None]:
        """Links minted inside start with `http://<host>` (a Host header that is not a plain host is ignored)."""
        token = _reached_at.set(f"http://{host}" if host and _HOST.match(host) else None)
        try:
            yield
        finally:
            _reached_at.reset(token)

    def _sign(self, bucket: str, key: str, disposition: str, expires: int) -> str:
        message = "\n".join(("GET", bucket, key, disposition, str(expires))).encode("utf-8")
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    # -------------------------------------------------- serving

    def serve(self, request: Request) -> Response:
        """The object a link names, when its signature holds and it has not expired; 403 otherwise."""
        if request.method not in ("GET", "HEAD"):
            message = f"Method not allowed: {request.method} {request.path}"
            return error_response(405, message, [("Allow", "GET, HEAD")])
        bucket, _, key = request.path[len(DOWNLOADS) :].partition("/")
        query = parse_qs(request.query, keep_blank_values=True)
        disposition = _one(query, "response-content-disposition") or ""
        expires, signature = _one(query, "expires"), _one(query, "signature")
        if not key or not expires or not expires.isdigit() or not signature:
            return error_response(403, "Download refused: the link is not a signed download link")
        expected = self._sign(bucket, key, disposition, int(expires))
        if bucket not in self._buckets or not hmac.compare_digest(expected, signature):
            return error_response(403, "Download refused: the link's signature does not match")
        if int(expires) < self._clock():
            return error_response(403, "Download refused: the link has expired; read the run again for a fresh one")
        try:
            got = self._s3().get_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return error_response(404, "Not found: the file no longer exists")
            LOG.error("Download of %s/%s failed: %s", bucket, key, exc)
            return error_response(500, "Internal server error")
        headers = [
            ("Content-Type", got.get("ContentType") or "application/octet-stream"),
            # The door serves the portal too: a file is never run as a page of its origin.
            ("Content-Security-Policy", "sandbox"),
            ("X-Content-Type-Options", "nosniff"),
            ("Cache-Control", "private, no-store"),
        ]
        if got.get("ETag"):
            headers.append(("ETag", got["ETag"]))
        if disposition:
            headers.append(("Content-Disposition", disposition))
        return Response(200, headers, got["Body"].read())


def _one(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[-1] if values else None


def signing_key(state_dir: Path | None) -> bytes:
    """The key links are signed with: kept in `state_dir` (made there, readable by its owner only, on first use) so
    links outlive a restart; without one, new at each start."""
    if state_dir is None:
        return secrets.token_bytes(KEY_BYTES)
    path = state_dir / KEY_FILE
    try:
        secret = path.read_bytes()
    except FileNotFoundError:
        secret = b""
    if len(secret) >= KEY_BYTES:
        return secret
    secret = secrets.token_bytes(KEY_BYTES)
    state_dir.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(secret)
    return secret
