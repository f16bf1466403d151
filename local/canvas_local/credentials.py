"""The embedded stack's AWS credentials: made at each start, the only ones moto's port accepts
(canvas_local.moto_server: `CallerCheck`), and how the operator's admin commands find them.

A running stack publishes them in a file readable by its user only, named after its AWS endpoint, in the user's
runtime directory (`$XDG_RUNTIME_DIR/canvas`, else `canvas-<uid>` in the temporary directory), as Jupyter publishes
a kernel's connection key; it is removed when the stack stops. `canvas create-account --endpoint-url URL` and the
other admin commands read the file for URL, so they work for the user who runs `canvas serve`, on its machine."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from botocore.credentials import Credentials

LOG = logging.getLogger(__name__)

# Loopback names an operator may give for the endpoint the stack prints.
_LOOPBACK = {"localhost": "127.0.0.1", "127.0.0.1": "127.0.0.1", "::1": "::1"}


@dataclass(frozen=True)
class StackCredentials:
    access_key_id: str
    secret_access_key: str

    @classmethod
    def generate(cls) -> StackCredentials:
        # Lower-case: moto reads an account id out of a 20-character upper-case key id, which would move the stack's
        # calls to another account (and off the in-process path, moto_server._signature_names_defaults).
        return cls(f"canvaslocal{secrets.token_hex(12)}", secrets.token_urlsafe(30))

    def botocore(self) -> Credentials:
        return Credentials(self.access_key_id, self.secret_access_key)


def runtime_dir() -> Path:
    base = os.environ.get("XDG_RUNTIME_DIR")
    return Path(base) / "canvas" if base else Path(tempfile.gettempdir()) / f"canvas-{os.getuid()}"


def credentials_file(endpoint_url: str) -> Path | None:
    """Where the stack at `endpoint_url` publishes its credentials, or None when the URL is not on loopback."""
    parts = urlsplit(endpoint_url)
    host = _LOOPBACK.get(parts.hostname or "")
    if host is None or parts.port is None:
        return None
    return runtime_dir() / f"aws-endpoint-{host.replace(':', '_')}-{parts.port}.json"


def publish(endpoint_url: str, credentials: StackCredentials) -> Path | None:
    """Write the credentials for the admin commands; None (and a warning) when the runtime directory is not the
    user's own, since another user could then read them."""
    path = credentials_file(endpoint_url)
    if path is None:
        return None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        held = path.parent.stat()
        if held.st_uid != os.getuid() or stat.S_IMODE(held.st_mode) & 0o077:
            LOG.warning("%s is not private to this user: admin commands need AWS_ACCESS_KEY_ID", path.parent)
            return None
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            json.dump(
                {"access_key_id": credentials.access_key_id, "secret_access_key": credentials.secret_access_key}, file
            )
    except OSError as exc:
        LOG.warning("Could not publish the stack's credentials for admin commands: %s", exc)
        return None
    return path


def withdraw(path: Path | None) -> None:
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink()


def published(endpoint_url: str) -> StackCredentials | None:
    """The credentials the stack at `endpoint_url` published, or None."""
    path = credentials_file(endpoint_url)
    if path is None:
        return None
    try:
        held = json.loads(path.read_text("utf-8"))
        return StackCredentials(str(held["access_key_id"]), str(held["secret_access_key"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
