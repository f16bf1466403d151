"""Speed: moto's server routes each request and finds its action with work whose answer never changes, done once
here instead."""

from __future__ import annotations

import functools
from typing import Any

from moto.core import responses as moto_responses
from moto.moto_server.werkzeug_app import DomainDispatcherApplication

from canvas_local.moto_patch.patches import Replacement, SpeedPatch

_ORIGINAL_BACKEND_FOR_HOST = DomainDispatcherApplication.get_backend_for_host
_ORIGINAL_METHOD_NAMES = moto_responses.method_names_from_class


# backend_per_host: moto's `DomainDispatcherApplication.get_backend_for_host` lists moto's package folders and tries
# every service's URL pattern for each request (the WSGI app's: S3, SQS, EventBridge), under one lock for all
# requests; the service a host names does not change. Under 5% of a chain's CPU per block alone (five passes: 7, 4,
# 5, 4, 2%), kept with `traversal_types_once` and `items_copied_directly` (see there).
_backends_by_host: dict[str | None, Any] = {}


def _backend_for_host(self: DomainDispatcherApplication, host: str | None) -> Any:
    if host not in _backends_by_host:
        _backends_by_host[host] = _ORIGINAL_BACKEND_FOR_HOST(self, host)
    return _backends_by_host[host]


# handler_methods_listed_once: moto's `method_names_from_class` lists the methods of a request's handler class
# (inspect.getmembers) on every request, to find its action. Buys 6-7% of a chain's CPU per block (four passes: 6.2,
# 0.1, 6.1, 6.8%).
@functools.lru_cache(maxsize=256)
def _method_names(clazz: object) -> list[str]:
    return _ORIGINAL_METHOD_NAMES(clazz)


PATCHES = {
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
