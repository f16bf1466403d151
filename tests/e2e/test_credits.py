"""Credits end to end: a run's blocks spend past what was set aside for it when it was admitted, so its reservation
is topped up from the account, and once the run ends the account shows what it spent. A scripted canvas
(bench/dags.py) gives the block its charge."""

from __future__ import annotations

import pytest

from bench.dags import Block, Dag, scripted
from tests.e2e.conftest import poll_until_finished

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def test_a_run_that_spends_past_its_reservation_is_topped_up_from_the_account(http):
    # Given the account as it stands, and a canvas whose block charges far more than a run is set aside
    before = http.get("/v1/account").json()["data"]
    prompt = "credits e2e: an expensive block"

    # When the run ends
    with scripted({prompt: Dag([Block(0.05, credits=400)])}):
        run_id = http.post("/v1/run", data={"prompt": prompt}).json()["data"]["run_id"]
        final = poll_until_finished(http, run_id)

    # Then it completed, charged what its block spent, and the account paid exactly that
    assert final["status"] == "completed", final
    spent = final["metadata"]["credits_consumed"]
    assert spent >= 400
    after = http.get("/v1/account").json()["data"]
    assert before["credits_balance"] - after["credits_balance"] == spent
    assert after["credits_used_this_month"] - before["credits_used_this_month"] == spent
