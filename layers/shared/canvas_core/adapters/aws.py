"""boto3 clients, built lazily and once per container (so moto can patch first and cold starts stay short)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import boto3
from botocore.config import Config

# A Lambda invocation makes one call at a time; the embedded stack's environments share these clients from
# many threads, and past the pool's size each call would open (and drop) a connection of its own.
_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 5},
    connect_timeout=5,
    read_timeout=30,
    max_pool_connections=64,
)


@cache
def client(service: str) -> Any:
    if service == "s3":
        # SigV4 presigned URLs: the only kind every region and the embedded stack accept.
        return boto3.client("s3", config=_CONFIG.merge(Config(signature_version="s3v4")))
    return boto3.client(service, config=_CONFIG)


@cache
def _wrapped_client(service: str, wrap: Callable[[Any], Any]) -> Any:
    return wrap(client(service))


class LazyClient:
    """An adapter's boto3 client, as a class attribute: the one its constructor was given (`self.<name> = given`;
    None for none), else the container's, built on first use. With `wrap`, either is seen through `wrap(client)`,
    built once per client."""

    def __init__(self, service: str, wrap: Callable[[Any], Any] | None = None) -> None:
        self.service = service
        self.wrap = wrap
        self.key = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = f"_given_{name}"

    def __set__(self, adapter: object, given: Any) -> None:
        adapter.__dict__[self.key] = given if given is None or self.wrap is None else self.wrap(given)

    def __get__(self, adapter: object, owner: type | None = None) -> Any:
        if adapter is None:
            return self
        given = adapter.__dict__.get(self.key)
        if given is not None:
            return given
        return client(self.service) if self.wrap is None else _wrapped_client(self.service, self.wrap)


def reset_clients() -> None:
    """Forget cached clients (tests that point the service at a fresh endpoint call this)."""
    client.cache_clear()
    _wrapped_client.cache_clear()
