"""Domain errors. The API error map turns each into its HTTP status and `{success: false, error}` body;
the state machine matches block errors by class name in Retry and Catch."""

from __future__ import annotations


class ServiceError(Exception):
    """An error a client can act on: it carries the HTTP status and the message the client sees."""

    status_code = 500
    # When set, the answer carries `Retry-After: <seconds>`: the client may succeed by trying again later.
    retry_after_seconds: int | None = None

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


class InvalidCursorError(BadRequestError):
    def __init__(self) -> None:
        super().__init__("Invalid cursor: pass the next_cursor of the previous page unchanged")


class InvalidFileError(BadRequestError):
    pass


class PayloadTooLargeError(ServiceError):
    status_code = 413


class UnsupportedMediaTypeError(ServiceError):
    status_code = 415


class AuthenticationError(ServiceError):
    status_code = 401


class MissingApiKeyError(AuthenticationError):
    def __init__(self) -> None:
        super().__init__("X-API-KEY header required")


class InvalidApiKeyError(AuthenticationError):
    def __init__(self) -> None:
        super().__init__("Invalid or revoked API key")


class InsufficientCreditsError(ServiceError):
    status_code = 402


class ServiceBusyError(ServiceError):
    status_code = 503
    # DynamoDB sheds load for moments: a second is enough for most of its throttling to pass.
    retry_after_seconds = 1

    def __init__(self) -> None:
        super().__init__("The service is busy: please try again in a moment")


class ConflictError(ServiceError):
    status_code = 409


class TooManyConcurrentRunsError(ServiceError):
    status_code = 429
    # Runs take minutes: a client waiting for a slot gains nothing by asking more often.
    retry_after_seconds = 10

    def __init__(self, limit: int):
        super().__init__(f"Too many concurrent runs: the limit is {limit} per account")


class TooManyRunStartsError(ServiceError):
    """An account started as many runs (and re-runs) as it may in one minute."""

    status_code = 429

    def __init__(self, limit: int, retry_after_ms: int):
        super().__init__(f"Too many runs started: the limit is {limit} per minute per account")
        self.retry_after_seconds = max(1, -(-retry_after_ms // 1000))


class NotFoundError(ServiceError):
    status_code = 404


class RunNotFoundError(NotFoundError):
    def __init__(self, run_id: str):
        super().__init__(f"Run not found: {run_id}")


class CanvasNotFoundError(NotFoundError):
    # The contract answers an unknown canvas with the same text as an unknown run.
    def __init__(self, canvas_id: str):
        super().__init__(f"Run not found: {canvas_id}")


class BlockNotFoundError(NotFoundError):
    def __init__(self, block_id: str):
        super().__init__(f"Block not found: {block_id}")


class ArtifactNotFoundError(NotFoundError):
    def __init__(self, artifact_id: str):
        super().__init__(f"Artifact not found: {artifact_id}")


class TaskNotFoundError(NotFoundError):
    def __init__(self, task_id: str):
        super().__init__(f"Task not found: {task_id}")


class WebhookEndpointNotFoundError(NotFoundError):
    def __init__(self, endpoint_id: str):
        super().__init__(f"Webhook endpoint not found: {endpoint_id}")


class TooManyWebhookEndpointsError(ConflictError):
    def __init__(self, limit: int):
        super().__init__(f"Too many webhook endpoints: the limit is {limit} per account; delete one first")


class CreditsExhaustedError(Exception):
    """A debit would take an account's balance below zero: nothing of that write happened."""

    def __init__(self, credits: int, balance: int):
        super().__init__(f"needs {credits} credits, the account has {balance}")
        self.credits = credits
        self.balance = balance


class StorageError(Exception):
    """A storage service failed in a way the caller cannot fix (throttling after retries, access denied)."""


class StorageBusyError(StorageError):
    """DynamoDB still cancelled (a conflict with concurrent writers) or throttled a call after its retries: nothing
    of it was written, and the same call may succeed later (the state machine retries the step)."""


class BlockRetryableError(Exception):
    """A block failed for a passing reason (throttling, a provider's 5xx); the state machine retries it."""


class BlocksBusyError(Exception):
    """The block's account has as many blocks running as it may (MAX_RUNNING_BLOCKS_PER_ACCOUNT): nothing of the
    block was done, and the state machine starts it again a little later."""


class ReservationShortError(Exception):
    """A block's work is done but its run's reservation cannot pay for it, and a block may not take credits from its
    account's balance (docs/isolation.md): its output is kept, and the state machine's Scope Block step, trusted
    code, tops the reservation up (or skips the block when the balance cannot) before the block runs again and stores
    the output it kept."""

    def __init__(self, credits: int, reserved: int):
        super().__init__(f"The block needs {credits} credits; its run's reservation holds {reserved}")
        self.credits = credits
        self.reserved = reserved


class BlockFatalError(Exception):
    """A block failed for good; the state machine records the failure and skips its dependents."""


class ReviewRequested(Exception):
    """Plan Canvas planned a run created with `review=true`: the state machine's Catch parks it in Await Approval
    (a Catch rather than a Choice state, so that runs without review take no extra transition)."""
