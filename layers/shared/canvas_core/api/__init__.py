"""The HTTP side: the resolver factory with the one error map, the responses routes declare, and request body
reading."""

from canvas_core.api.app import answers, caller_account, create_app, handle, ok
from canvas_core.models.api import SuccessBody

__all__ = ["SuccessBody", "answers", "caller_account", "create_app", "handle", "ok"]
