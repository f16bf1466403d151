"""What a run is told it will spend against what it is charged: every template runs once on the embedded stack
(offline provider) with `review=true`, and the estimate it waits for approval with (`estimated_credits`, the sum
of its planned blocks' estimates) is compared with what its blocks were charged once approved. The reservation
(`reserved_credits`, taken when it was admitted) is reported alongside.

Figures: `estimate_credit_ratio_p50` and `estimate_credit_ratio_max`, the ratio being
max(charged / estimated, estimated / charged) per template (1.0 is exact; 2.0 is off by a factor of two either way;
a run estimated at 0 and charged 0 counts 1.0, one estimated at 0 and charged more, or the other way, infinity);
then one line per template: `estimate <template> estimated=N charged=N reserved=N`.

`python -m bench estimates` (part of `make bench`).
"""

from __future__ import annotations

import logging
import statistics
import time

from canvas_core.adapters.store import Store
from canvas_core.auth import authenticate
from canvas_core.models.api import CreateRunRequest
from canvas_core.models.catalog import Template
from canvas_core.reviews import ApproveRunForm, approve_run
from canvas_core.runs import create_run
from canvas_local.stack import LocalStack

API_KEY = "sk_canvas_bench_estimates_key_000000000000"
# A prompt each template can make its deliverable from; `auto` is asked for a list, a table and a page as well.
PROMPTS: dict[Template, str] = {
    Template.AUTO: "Research the history of tide pools, list their main species in a table and write a short report",
    Template.DEEP_RESEARCH: "The ecology of tide pools on rocky shores",
    Template.REPORT: "A short report on tide pools",
    Template.SLIDES: "A short deck on tide pools",
    Template.MEMO: "A one-page memo on tide pools",
    Template.EXCEL: "A spreadsheet of tide pool species and where they live",
    Template.APP: "A small app to log tide pool visits",
    Template.LANDING_PAGE: "A landing page for a tide pool tour",
}


def credit_ratio(estimated: int, charged: int) -> float:
    """How far an estimate is from the charge, either way: 1.0 when equal."""
    if estimated == charged:
        return 1.0
    if min(estimated, charged) <= 0:
        return float("inf")
    return max(charged / estimated, estimated / charged)


def measure(template: Template, account_id: str, store: Store, stack: LocalStack) -> tuple[int, int, int]:
    """(estimated, charged, reserved) for one run of `template`."""
    created = create_run(CreateRunRequest(prompt=PROMPTS[template], template=template, review=True), account_id)
    deadline = time.monotonic() + 120
    while True:
        run = store.get_run(created.run_id, consistent=True)
        if run is not None and run.review_token:
            break
        if (run is not None and run.status.value != "running") or time.monotonic() > deadline:
            raise RuntimeError(f"the {template} run never waited for approval: {run}")
        time.sleep(0.05)
    estimated, reserved = run.estimated_credits or 0, run.reserved_credits or 0
    approve_run(created.run_id, account_id, ApproveRunForm())
    prefix = stack.state_machine_arns["RunCanvasStateMachine"].replace(":stateMachine:", ":execution:")
    stack.wait_for_execution(f"{prefix}:{created.run_id}", timeout=300)
    ended = store.get_run(created.run_id, consistent=True)
    assert ended is not None
    # The review's estimate leaves planning out (it is spent before the review): so does the charge compared.
    return estimated, ended.credits_consumed - ended.planning_credits, reserved


def main() -> None:
    for noisy in ("werkzeug", "botocore", "canvas_local"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    rows = []
    with LocalStack(api_keys=[API_KEY], parameter_overrides={"LogLevel": "WARNING"}) as stack:
        account_id = authenticate({"X-API-KEY": API_KEY})
        store = Store()
        for template in Template:
            rows.append((template, *measure(template, account_id, store, stack)))
    ratios = [credit_ratio(estimated, charged) for _, estimated, charged, _ in rows]
    print(f"estimate_credit_ratio_p50 {statistics.median(ratios):.2f}")
    print(f"estimate_credit_ratio_max {max(ratios):.2f}")
    for template, estimated, charged, reserved in rows:
        print(f"estimate {template.value} estimated={estimated} charged={charged} reserved={reserved}")


if __name__ == "__main__":
    main()
