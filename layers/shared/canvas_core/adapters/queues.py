"""SQS: the webhook queue's messages (each delivery attempt, a ping) and its dead-letter queue."""

from __future__ import annotations

import json
import math
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from canvas_core.adapters.aws import LazyClient
from canvas_core.errors import StorageError

# SQS holds a message back at most this long; a longer wait is re-sent until it is due.
MAX_DELAY_SECONDS = 900


class Queue:
    """One queue, named by URL (or, on the embedded stack, by name: the URL is looked up once)."""

    sqs = LazyClient("sqs")

    def __init__(self, url_or_name: str, sqs: Any = None):
        self._target = url_or_name
        self._url = url_or_name if url_or_name.startswith(("http://", "https://")) else None
        self.sqs = sqs

    @property
    def url(self) -> str:
        if self._url is None:
            self._url = self._call(self.sqs.get_queue_url, QueueName=self._target)["QueueUrl"]
        return self._url

    def send(self, message: dict[str, Any], delay_seconds: float = 0) -> None:
        """Queue a JSON message, held back `delay_seconds` (rounded up; at most MAX_DELAY_SECONDS)."""
        delay = min(MAX_DELAY_SECONDS, max(0, math.ceil(delay_seconds)))
        self._call(self.sqs.send_message, QueueUrl=self.url, MessageBody=json.dumps(message), DelaySeconds=delay)

    @staticmethod
    def _call(operation: Any, **kwargs: Any) -> Any:
        try:
            return operation(**kwargs)
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"SQS: {exc}") from exc
