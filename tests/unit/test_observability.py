"""canvas_core/observability.py: business metrics flushed as CloudWatch embedded metrics, and nothing kept while
metrics are off."""

from __future__ import annotations

import json

import pytest

from canvas_core import observability
from canvas_core.observability import count, metrics

pytestmark = pytest.mark.unit


@metrics.log_metrics
def handler(event: dict, context: object) -> dict:
    count("BlocksCompleted", step=event["block_type"])
    return event


def emitted(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith('{"_aws"')]


def test_nothing_is_kept_or_printed_while_metrics_are_off(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given metrics turned off, as in the component tier
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "CanvasRunService")
    # When a handler counts, many times over
    for _ in range(150):
        handler({"block_type": "memo-block"}, None)
    # Then nothing waits to be flushed, and nothing was printed
    assert observability.metrics.provider.metric_set == {}
    assert emitted(capsys.readouterr().out) == []
