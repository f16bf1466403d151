"""boto3 clients, built lazily and once per container (so moto can patch first and cold starts stay short); within
`invocation_credentials`, clients signed with the credentials an invocation was handed instead (a block's, vended
for its own run by the state machine: canvas_core/isolation.py). boto3 itself is imported with the first client, not
when a handler is imported: an API function's import is then what it needs to take a request, and boto3 comes with
its first call to AWS (docs/benchmarks.md, "Cold import")."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from canvas_core.models.blocks import BlockCredentials


class _HandedCredentials:
    """The clients of one invocation that was handed credentials, built as first used."""

    def __init__(self, credentials: BlockCredentials):
        self.credentials = credentials
        self.clients: dict[tuple[str, Callable[[Any], Any] | None], Any] = {}

    def client(self, service: str, wrap: Callable[[Any], Any] | None = None) -> Any:
        key = (service, wrap)
        if key not in self.clients:
            given = self.credentials
            built = _build(
                service,
                aws_access_key_id=given.access_key_id,
                aws_secret_access_key=given.secret_access_key,
                aws_session_token=given.session_token,
            )
            self.clients[key] = built if wrap is None else wrap(built)
        return self.clients[key]


# The services whose calls are made with handed credentials: the data a block may touch. Its own role calls the rest
# (the models, the secrets of their keys).
HANDED_SERVICES = frozenset({"dynamodb", "s3", "stepfunctions"})

_handed: ContextVar[_HandedCredentials | None] = ContextVar("canvas_handed_credentials", default=None)


@contextmanager
def invocation_credentials(credentials: BlockCredentials | None) -> Iterator[None]:
    """Every client the code within asks for is signed with `credentials` (None: the function's own role)."""
    token = _handed.set(_HandedCredentials(credentials) if credentials is not None else None)
    try:
        yield
    finally:
        _handed.reset(token)


def handed_credentials() -> BlockCredentials | None:
    """The credentials the current invocation was handed, if any."""
    handed = _handed.get()
    return handed.credentials if handed is not None else None


def _build(service: str, **credentials: str) -> Any:
    import boto3
    from botocore.config import Config

    # A Lambda invocation makes one call at a time; the embedded stack's environments share these clients from
    # many threads, and past the pool's size each call would open (and drop) a connection of its own.
    config = Config(
        retries={"mode": "standard", "max_attempts": 5},
        connect_timeout=5,
        read_timeout=30,
        max_pool_connections=64,
    )
    if service == "s3":
        # SigV4 presigned URLs: the only kind every region and the embedded stack accept.
        config = config.merge(Config(signature_version="s3v4"))
    return boto3.client(service, config=config, **credentials)


def client(service: str) -> Any:
    handed = _handed.get()
    return handed.client(service) if handed is not None and service in HANDED_SERVICES else _own_client(service)


@cache
def _own_client(service: str) -> Any:
    return _build(service)


@cache
def _own_wrapped_client(service: str, wrap: Callable[[Any], Any]) -> Any:
    return wrap(_own_client(service))


def _wrapped_client(service: str, wrap: Callable[[Any], Any]) -> Any:
    handed = _handed.get()
    if handed is not None and service in HANDED_SERVICES:
        return handed.client(service, wrap)
    return _own_wrapped_client(service, wrap)


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
    _own_client.cache_clear()
    _own_wrapped_client.cache_clear()
