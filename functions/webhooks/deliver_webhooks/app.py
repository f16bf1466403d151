"""Deliver Webhooks: the webhook queue's messages, a batch at a time; a message that fails is reported alone
(ReportBatchItemFailures), so SQS retries it and no other."""

import json
from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.observability import logger, metrics, tracer
from canvas_core.settings import delivery_settings
from canvas_core.webhooks.delivery import Deliveries

delivery_settings()  # read when the function starts: a bad setting fails it there, not a delivery
processor = BatchProcessor(event_type=EventType.SQS)


@cache
def deliveries() -> Deliveries:
    """Built once per container, on the first message (its clients and queue URLs are reused)."""
    return Deliveries()


def record_handler(record: SQSRecord) -> str:
    return deliveries().handle(json.loads(record.body)).value


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
