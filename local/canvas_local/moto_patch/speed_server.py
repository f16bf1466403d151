"""Speed: moto's server routes each request with work whose answer never changes, done once here instead."""

from __future__ import annotations

import functools
from typing import Any

from moto import backends as moto_backends
from moto.core import responses as moto_responses
from moto.moto_server.werkzeug_app import DomainDispatcherApplication

from canvas_local.moto_patch.patches import Replacement, SpeedPatch

_ORIGINAL_LIST_MODULES = moto_backends.list_of_moto_modules
_ORIGINAL_BACKEND_FOR_HOST = DomainDispatcherApplication.get_backend_for_host
_ORIGINAL_METHOD_NAMES = moto_responses.method_names_from_class


# moto's `list_of_moto_modules` lists moto's own package folders, and its dispatcher calls it for every request.
@functools.cache
def _moto_modules() -> tuple[Any, ...]:
    return tuple(_ORIGINAL_LIST_MODULES())


# moto's `DomainDispatcherApplication.get_backend_for_host` tries every service's URL pattern for each request,
# under one lock for all requests; the service a host names does not change.
_backends_by_host: dict[str | None, Any] = {}


def _backend_for_host(self: DomainDispatcherApplication, host: str | None) -> Any:
    if host not in _backends_by_host:
        _backends_by_host[host] = _ORIGINAL_BACKEND_FOR_HOST(self, host)
    return _backends_by_host[host]


# moto's `method_names_from_class` lists the methods of a request's handler class (inspect.getmembers) on every
# request, to find its action.
@functools.lru_cache(maxsize=256)
def _method_names(clazz: object) -> list[str]:
    return _ORIGINAL_METHOD_NAMES(clazz)


PATCHES = {
    "modules_listed_once": SpeedPatch(
        (Replacement(moto_backends, "list_of_moto_modules", _ORIGINAL_LIST_MODULES, _moto_modules),)
    ),
    "backend_per_host": SpeedPatch(
        (
            Replacement(
                DomainDispatcherApplication, "get_backend_for_host", _ORIGINAL_BACKEND_FOR_HOST, _backend_for_host
            ),
        )
    ),
    "handler_methods_listed_once": SpeedPatch(
        (Replacement(moto_responses, "method_names_from_class", _ORIGINAL_METHOD_NAMES, _method_names),)
    ),
}
