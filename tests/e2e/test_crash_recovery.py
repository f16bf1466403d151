"""`canvas serve --state-dir` killed with SIGKILL under load loses nothing it acknowledged: bench/crash.py's cycles
(kill at a random moment, restart, check every run created, its Idempotency-Key and artifacts, the state's files and
the ledger), three of them here; `python -m bench.crash` runs ten."""

from __future__ import annotations

import pytest

from bench import crash

pytestmark = [pytest.mark.e2e, pytest.mark.serial, pytest.mark.timeout(300)]


def figures(text: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in text.splitlines() if line.startswith("crash_"))


def test_kill_9_under_load_loses_no_acknowledged_run_and_the_ledger_adds_up(capsys):
    # Given `canvas serve --state-dir` under load from four clients
    # When it is killed with SIGKILL three times at random moments, and started again after each
    status = crash.main(["--kills", "3", "--clients", "4", "--seed", "7"])

    # Then every run it answered 200 is there and ended, its key and files too, and the ledger adds up
    found = figures(capsys.readouterr().out)
    assert status == 0, found
    assert found["crash_kills"] == "3"
    assert int(found["crash_runs_acknowledged"]) > 0
    assert int(found["crash_idempotency_replays"]) == int(found["crash_runs_acknowledged"])
    assert found["crash_runs_left_running"] == "0"
    assert found["crash_ledger_mismatch_credits"] == "0"
    assert found["crash_problems"] == "0"
