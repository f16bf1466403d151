"""canvas_core/observability.py: business metrics flushed as CloudWatch embedded metrics by the handler that
added them, one execution environment's never by another's, and nothing kept while metrics are off."""

from __future__ import annotations

import json

import pytest

from canvas_core import observability
from canvas_core.observability import count, environment_logger, logger_scope, metrics

pytestmark = pytest.mark.unit


@metrics.log_metrics
def handler(event: dict, context: object) -> dict:
    count("BlocksCompleted", step=event["block_type"])
    return event


def emitted(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith('{"_aws"')]


@pytest.fixture
def metrics_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "CanvasRunService")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "canvas-run-service")


def test_each_environment_flushes_its_own_figures(metrics_on: None, capsys: pytest.CaptureFixture[str]) -> None:
    # Given two execution environments in one process, the first with a figure added and not yet flushed
    memo, web = environment_logger("memo-block/0"), environment_logger("web-block/0")
    with logger_scope(memo):
        count("BlockRetryableErrors", step="memo-block")
        # When the other environment's handler runs and returns meanwhile, then the first's
        with logger_scope(web):
            handler({"block_type": "web-block"}, None)
        handler({"block_type": "memo-block"}, None)
    # Then each line holds its own environment's figures, under its own dimensions
    first, second = emitted(capsys.readouterr().out)
    assert (first["step"], "BlocksCompleted" in first, "BlockRetryableErrors" in first) == ("web-block", True, False)
    assert (second["step"], second["BlockRetryableErrors"], second["BlocksCompleted"]) == ("memo-block", [1.0], [1.0])
    assert second["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "CanvasRunService"


def test_nothing_is_kept_or_printed_while_metrics_are_off(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given metrics turned off, as in the component tier
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "CanvasRunService")
    environment = environment_logger("memo-block/0")
    # When a handler counts, many times over
    with logger_scope(environment):
        for _ in range(150):
            handler({"block_type": "memo-block"}, None)
        # Then nothing waits to be flushed, and nothing was printed
        assert observability.metrics.provider.metric_set == {}
    assert emitted(capsys.readouterr().out) == []
