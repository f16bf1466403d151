"""The estimate a create answers follows the configured model provider: seconds with the offline provider, the
minutes a model-calling run takes otherwise."""

from __future__ import annotations

import pytest

from canvas_core.estimates import estimate_duration_ms
from tests.support import body_of, load_event

pytestmark = pytest.mark.component


@pytest.mark.parametrize(("provider", "offline"), [("offline", True), ("bedrock", False), ("openai", False)])
def test_the_estimated_duration_follows_the_model_provider(
    aws, account, function, context, monkeypatch, provider, offline
):
    # Given
    monkeypatch.setenv("MODEL_PROVIDER", provider)
    # When
    event = load_event(
        "create_run", api_key=account.api_key, body="prompt=Write%20a%20report%20on%20tides&template=report"
    )
    response = function("api/create_run")(event, context)
    # Then
    assert response["statusCode"] == 200, response["body"]
    estimate = body_of(response)["data"]["estimated_duration_ms"]
    assert estimate == estimate_duration_ms("report", None, 0, offline=offline)
    assert (estimate < 10_000) if offline else (estimate > 60_000)
