"""The base of every model: schemas are built on first use, so each Lambda pays only for the models it uses. And how
a request model's validator refuses a request with the status and text a client sees."""

from collections.abc import Iterable, Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from canvas_core.errors import ServiceError


class Model(BaseModel):
    model_config = ConfigDict(defer_build=True)


# An id the contract types `string, uuid` (runs, canvases, blocks, tasks, artifacts): a string in Python, `format:
# uuid` in the OpenAPI document, as the path parameters that take it are.
Uuid = Annotated[str, Field(json_schema_extra={"format": "uuid"})]


class RequestRefused(ValueError):
    """Raised by a validator of a request model to refuse the request with a ServiceError, its status and its
    exact text. Pydantic keeps the exception in the error's context, and the API's one validation-error handler
    (canvas_core/api/app.py) answers with the ServiceError it carries."""

    def __init__(self, error: ServiceError) -> None:
        super().__init__(error.message)
        self.error = error


def refusal(errors: Iterable[Mapping[str, Any]]) -> ServiceError | None:
    """The ServiceError of the first RequestRefused among pydantic's `errors()`, if any."""
    for error in errors:
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, RequestRefused):
            return cause.error
    return None
