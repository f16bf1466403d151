"""Domain errors. The API error map turns each into its HTTP status and `{success: false, error}` body;
the state machine matches block errors by class name in Retry and Catch."""

from __future__ import annotations


class ServiceError(Exception):
    """An error a client can act on: it carries the HTTP status and the message the client sees."""

    status_code = 500

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class BadRequestError(ServiceError):
    status_code = 400


class InvalidTemplateError(BadRequestError):
    def __init__(self, value: str, valid: list[str]):
        super().__init__(f"Invalid template: {value}. Valid templates: {', '.join(sorted(valid))}")


class InvalidBlocksError(BadRequestError):
    pass


class InvalidUuidError(BadRequestError):
    def __init__(self, name: str, value: str):
        super().__init__(f"Invalid {name}: {value!r} is not a UUID")


class InvalidFileError(BadRequestError):
    pass


class PayloadTooLargeError(ServiceError):
    status_code = 413


class UnsupportedMediaTypeError(ServiceError):
    status_code = 415


class AuthenticationError(ServiceError):
    status_code = 401


class MissingApiKeyError(AuthenticationError):
    def __init__(self):
        super().__init__("X-API-KEY header required")


class InvalidApiKeyError(AuthenticationError):
    def __init__(self):
        super().__init__("Invalid or revoked API key")


class InsufficientCreditsError(ServiceError):
    status_code = 402


class ConflictError(ServiceError):
    status_code = 409


class NotFoundError(ServiceError):
    status_code = 404


class RunNotFoundError(NotFoundError):
    def __init__(self, run_id: str):
        super().__init__(f"Run not found: {run_id}")


class CanvasNotFoundError(NotFoundError):
    # The contract answers an unknown canvas with the same text as an unknown run.
    def __init__(self, canvas_id: str):
        super().__init__(f"Run not found: {canvas_id}")


class TaskNotFoundError(NotFoundError):
    def __init__(self, task_id: str):
        super().__init__(f"Task not found: {task_id}")


class StorageError(Exception):
    """A storage service failed in a way the caller cannot fix (throttling after retries, access denied)."""


class BlockRetryableError(Exception):
    """A block failed for a passing reason (throttling, a provider's 5xx); the state machine retries it."""


class BlockFatalError(Exception):
    """A block failed for good; the state machine records the failure and skips its dependents."""
