"""Review: a run that waits after planning holds its parked task's token until approved, cancelled or timed out."""

from __future__ import annotations

import json
import uuid
from typing import Any

from canvas_core.adapters.store.base import APPROVAL_ABANDONED_MS
from canvas_core.adapters.store.runs import RunsTable


class RunReviews(RunsTable):
    def park_for_review(self, run_id: str, task_token: str, plan: dict[str, Any], estimated_credits: int) -> bool:
        """Store the token of the run's Await Approval task, the plan it resumes with and what its blocks are expected
        to spend; only while the run is `running` and not approved (False otherwise: it ended meanwhile)."""
        return self._update_running_run(
            run_id,
            "SET review_token = :token, review_plan = :plan, estimated_credits = :estimate",
            "attribute_not_exists(approved_at_ms)",
            token=task_token,
            plan=json.dumps(plan, separators=(",", ":")),
            estimate=estimated_credits,
        )

    def claim_approval(self, run_id: str, task_token: str, approved_at_ms: int, approver: str) -> bool:
        """True for exactly one caller, while the run is `running`, parked with `task_token` and no cancel has marked
        it: the one that may send the token. The token is taken off the run in the same write, so the run no longer
        shows as awaiting approval. Like `claim_release`, the claim names its caller (`approver`), so a resent write
        whose first answer was lost finds it its own. Until `settle_approval`, no cancel can mark the run."""
        return self._update_running_run(
            run_id,
            "SET approved_at_ms = :now, approved_by = :me REMOVE review_token",
            "attribute_not_exists(cancelled_at_ms) AND (review_token = :token OR approved_by = :me)",
            now=approved_at_ms,
            token=task_token,
            me=approver,
        )

    def settle_approval(self, run_id: str, approver: str, settled_at_ms: int) -> None:
        """Record that the approval `approver` claimed has handed the run on (`approval_settled_at_ms`): a cancel
        that reached the service after this ends the executing run; one that came before has lost to it."""
        self._update_running_run(
            run_id, "SET approval_settled_at_ms = :now", "approved_by = :me", now=settled_at_ms, me=approver
        )

    def claim_cancel(self, run_id: str, cancelled_at_ms: int, requested_at_ms: int | None = None) -> bool:
        """True for exactly one caller, while the run is `running` and no approval raced it: the cancel that ends it.
        Marked before its blocks are ended, so that the run's own end, which ending them may bring about, ends it
        cancelled too. Names its caller, as `claim_approval` does. A cancel and an approval exclude each other on
        this item: the approval's claim requires no cancel mark, and this mark requires no approval, or one settled
        before the cancel's request came (`requested_at_ms`, by default now), so two requests that overlapped end
        one way. An approval claimed long ago and never settled (its caller stopped halfway) no longer holds it."""
        return self._update_running_run(
            run_id,
            "SET cancelled_at_ms = :now, cancelled_by = :me",
            "(attribute_not_exists(cancelled_at_ms) OR cancelled_by = :me) AND (attribute_not_exists(approved_at_ms) "
            "OR approval_settled_at_ms < :requested OR approved_at_ms < :abandoned)",
            now=cancelled_at_ms,
            me=str(uuid.uuid4()),
            requested=cancelled_at_ms if requested_at_ms is None else requested_at_ms,
            abandoned=cancelled_at_ms - APPROVAL_ABANDONED_MS,
        )

    def unclaim_approval(self, run_id: str, task_token: str) -> None:
        """Give an approval back whose token could not be sent, so that the approval can be tried again (unless the
        run ended meanwhile: there is nothing left to approve)."""
        self._update_running_run(
            run_id,
            "SET review_token = :token REMOVE approved_at_ms, approved_by, approval_settled_at_ms",
            "attribute_not_exists(review_token)",
            token=task_token,
        )
