"""The HTTP side: the resolver factory with the one error map, and request body parsing."""

from canvas_core.api.app import caller_account, create_app, handle, ok

__all__ = ["caller_account", "create_app", "handle", "ok"]
