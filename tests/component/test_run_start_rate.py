"""The per-account limit of runs started in a minute (MAX_RUNS_PER_MINUTE, template parameter
MaxRunStartsPerMinutePerAccount, 30 by default): a start beyond it answers 429 with Retry-After, the seconds left
of the minute; runs and re-runs count alike; the count is held in the write that stores the run."""

from __future__ import annotations

import threading

import pytest

from canvas_core import clock, settings
from canvas_core.adapters.store import START_WINDOW_MS, Store
from canvas_core.adapters.store import runs as runs_table
from canvas_core.errors import TooManyRunStartsError
from canvas_core.models.items import CanvasItem, RunItem
from tests.support import body_of, header, load_event

pytestmark = pytest.mark.component


def create(function, context, api_key: str) -> dict:
    return function("api/create_run")(load_event("create_run", api_key=api_key), context)


def cancel(function, context, api_key: str, run_id: str) -> dict:
    event = load_event("cancel_run", api_key=api_key, path_parameters={"run_id": run_id})
    return function("api/cancel_run")(event, context)


@pytest.fixture
def minute(monkeypatch) -> list[int]:
    """The clock of the functions, set to 12 s into a minute; tests move it with `minute[0] += ms`."""
    now = [1_790_000_000_000 // START_WINDOW_MS * START_WINDOW_MS + 12_000]
    for module in (clock, runs_table):
        monkeypatch.setattr(module, "now_ms", lambda: now[0])
    return now


@pytest.fixture
def three_a_minute(monkeypatch) -> None:
    monkeypatch.setenv("MAX_RUNS_PER_MINUTE", "3")
    monkeypatch.setenv("MAX_CONCURRENT_RUNS", "100")
    settings.reset()


def stored_runs(aws) -> int:
    return aws.ddb.scan(TableName=aws.settings.runs_table, Select="COUNT")["Count"]


def test_a_start_past_the_minutes_limit_is_refused_with_the_seconds_left(
    aws, account, function, context, minute, three_a_minute
):
    # Given an account that started its three runs of this minute, each cancelled at once
    for _ in range(3):
        response = create(function, context, account.api_key)
        assert response["statusCode"] == 200, response["body"]
        assert cancel(function, context, account.api_key, body_of(response)["data"]["run_id"])["statusCode"] == 200
    # When it starts a fourth, 12 s into the minute
    response = create(function, context, account.api_key)
    # Then it is refused with the contract's error shape, told to come back when the minute is over
    assert response["statusCode"] == 429
    assert body_of(response) == {
        "success": False,
        "error": "Too many runs started: the limit is 3 per minute per account",
    }
    assert header(response, "Retry-After") == "48"
    assert stored_runs(aws) == 3
    # And the next minute it may start runs again
    minute[0] += 48_000
    assert create(function, context, account.api_key)["statusCode"] == 200


def test_the_limit_is_per_account_and_reported_with_the_account(aws, account, function, context, three_a_minute):
    from canvas_core.auth import create_account_with_key

    for _ in range(3):
        assert create(function, context, account.api_key)["statusCode"] == 200
    _, other_key = create_account_with_key()
    assert create(function, context, other_key)["statusCode"] == 200
    seen = function("api/account")(load_event("get_account", api_key=account.api_key), context)
    assert body_of(seen)["data"]["limits"]["max_runs_per_minute"] == 3


def test_the_count_is_held_in_the_write_when_the_read_was_stale(aws, account, minute, three_a_minute):
    # Given an account whose minute is spent, and a start that read the account before any of it
    stale = Store().get_account(account.account_id)
    for index in range(3):
        assert Store().admit_run(*run_and_canvas(account.account_id, index), 100, max_starts_per_minute=3)
    # When it stores its run with what it read
    with pytest.raises(TooManyRunStartsError) as refused:
        Store().admit_run(*run_and_canvas(account.account_id, 9), 100, max_starts_per_minute=3, account=stale)
    # Then DynamoDB's condition refuses it: nothing of it is stored
    assert refused.value.retry_after_seconds == 48
    assert Store().get_run(run_and_canvas(account.account_id, 9)[0].run_id) is None
    assert int(Store().get_account(account.account_id)["active_runs"]) == 3


def test_starts_racing_each_other_never_pass_the_limit(aws, account, minute, three_a_minute):
    # Given twelve starts at once for one account
    outcomes: list[str] = []
    barrier = threading.Barrier(12)

    def start(index: int) -> None:
        barrier.wait()
        try:
            admitted = Store().admit_run(*run_and_canvas(account.account_id, index), 100, max_starts_per_minute=3)
            outcomes.append("admitted" if admitted else "full")
        except TooManyRunStartsError:
            outcomes.append("refused")

    threads = [threading.Thread(target=start, args=(i,)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then exactly three were admitted
    assert sorted(outcomes) == ["admitted"] * 3 + ["refused"] * 9
    assert stored_runs(aws) == 3


def run_and_canvas(account_id: str, index: int) -> tuple[RunItem, CanvasItem]:
    run = RunItem(
        run_id=f"7a1c2d4e-0000-4000-8000-{index:012d}",
        account_id=account_id,
        canvas_id=f"6f1c2d4e-0000-4000-8000-{index:012d}",
        prompt="p",
        template="auto",
        created_at_ms=0,
        estimated_duration_ms=0,
    )
    return run, CanvasItem(canvas_id=run.canvas_id, account_id=account_id, run_id=run.run_id, canvas_name="p")
