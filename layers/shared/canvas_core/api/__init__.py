"""The HTTP side: the resolver factory with the one error map, the responses routes declare, and request body
reading."""

from canvas_core.api.app import answers, caller_account, create_app, handle, ok

__all__ = ["answers", "caller_account", "create_app", "handle", "ok"]
