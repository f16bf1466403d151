"""Idempotency-Key: a keyed request answers what the first request with its key got, for 24 hours, through the
Powertools idempotency utility over the idempotency table (IDEMPOTENCY_TABLE_NAME)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from canvas_core.adapters.aws import client
from canvas_core.errors import ConflictError
from canvas_core.settings import api_settings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

IDEMPOTENCY_TTL_SECONDS = 24 * 3600


def call_once[R: BaseModel](
    work: Callable[..., R], output: type[R], scope: BaseModel, lambda_context: Any = None, **arguments: Any
) -> R:
    """`work(scope=scope, **arguments)`, or the `output` an earlier call of `work` with an equal `scope` answered
    within 24 hours; only the scope is compared, not the arguments. 409 while that earlier call is still running."""
    from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError

    once, config = _idempotent(work, output, api_settings().idempotency_table, client("dynamodb"))
    if lambda_context is not None:
        config.register_lambda_context(lambda_context)
    try:
        return once(scope=scope, **arguments)
    except IdempotencyAlreadyInProgressError:
        raise ConflictError("A request with this Idempotency-Key is still being processed; retry shortly") from None


def _idempotent[R: BaseModel](
    work: Callable[..., R], output: type[R], table_name: str, dynamodb: Any
) -> tuple[Callable[..., R], IdempotencyConfig]:
    # Imported on the first keyed request only (the utility wires a good deal); built per request, because the
    # config holds the invocation's Lambda context and no two invocations may share it.
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
        idempotent_function,
    )
    from aws_lambda_powertools.utilities.idempotency.serialization.pydantic import PydanticSerializer

    config = IdempotencyConfig(expires_after_seconds=IDEMPOTENCY_TTL_SECONDS)
    persistence = DynamoDBPersistenceLayer(table_name=table_name, boto3_client=dynamodb)
    # Powertools leaves idempotent_function's return unannotated; the function keeps its signature.
    once: Callable[..., R] = idempotent_function(
        data_keyword_argument="scope",
        persistence_store=persistence,
        config=config,
        output_serializer=PydanticSerializer(model=output),
    )(work)
    return once, config
