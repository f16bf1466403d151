"""Instructions given after planning revise the analysis, over HTTP on the embedded stack with the offline provider:
a re-run of the Answer with "Focus on <a region> only" states that region's figures and no other's, and an approval
with "use the median" answers with medians. Truths are computed here from the generated rows."""

from __future__ import annotations

import csv
import io
import random
import statistics
import time
from collections import defaultdict

import httpx
import pytest
from docx import Document

from tests.e2e.conftest import poll_until_finished

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

REGIONS = ["Harbour", "Uplands", "Riverside", "Old Town"]
CHANNELS = ["Phone", "Web", "Store"]


def orders(count: int = 300, seed: int = 77) -> list[dict]:
    rnd = random.Random(seed)
    return [
        {
            "region": rnd.choice(REGIONS),
            "channel": rnd.choice(CHANNELS),
            "amount": rnd.randint(10, 900),
        }
        for _ in range(count)
    ]


ROWS = orders()


def as_csv(rows: list[dict]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=["region", "channel", "amount"], lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def create(http: httpx.Client, prompt: str, **fields: str) -> dict:
    created = http.post(
        "/v1/run",
        data={"prompt": prompt, **fields},
        files=[("files", ("bookings.csv", as_csv(ROWS), "text/csv"))],
    )
    assert created.status_code == 200, created.text
    return created.json()["data"]


def answer_block(http: httpx.Client, canvas_id: str) -> dict:
    nodes = http.get(f"/v1/canvas/{canvas_id}/dag").json()["data"]["nodes"]
    return next(n for n in nodes if n["type"] == "text-block")


def opening(result: dict) -> str:
    return result["result"]["final_output"].split("\n")[0]


def test_a_rerun_with_only_one_region_states_that_regions_figures_alone(http):
    # Given a finished run answering a question per channel, and the truth for one region alone
    created = create(http, "What is the total amount by channel?")
    first = poll_until_finished(http, created["run_id"])
    assert first["status"] == "completed", first.get("errors")
    whole: dict[str, int] = defaultdict(int)
    harbour: dict[str, int] = defaultdict(int)
    for row in ROWS:
        whole[row["channel"]] += row["amount"]
        if row["region"] == "Harbour":
            harbour[row["channel"]] += row["amount"]
    assert all(f"{v:,}" in opening(first) for v in whole.values()), opening(first)

    # When its Answer is re-run with instructions to focus on one region
    block = answer_block(http, first["canvas_id"])
    rerun = http.post(
        f"/v1/canvas/{first['canvas_id']}/blocks/{block['id']}/rerun",
        json={"instructions": "Focus on the Harbour region only"},
    )
    assert rerun.status_code == 200, rerun.text
    again = poll_until_finished(http, rerun.json()["data"]["run_id"])

    # Then every figure the answer opens with is that region's, and the whole table's are gone
    assert again["status"] == "completed", again.get("errors")
    lead = opening(again)
    assert all(f"{v:,}" in lead for v in harbour.values()), lead
    assert not any(f"{v:,}" in lead for v in whole.values()), lead
    assert "Harbour" in lead


def test_an_approval_asking_for_the_median_answers_with_medians(http):
    # Given a run waiting for review that asks for the average per channel, and the medians computed here
    created = create(http, "What is the average amount per booking by channel?", review="true")
    run_id = created["run_id"]
    for _ in range(600):
        status = http.get(f"/v1/run/{run_id}").json()["data"]
        if status.get("awaiting_approval"):
            break
        time.sleep(0.1)
    medians = {c: statistics.median(r["amount"] for r in ROWS if r["channel"] == c) for c in CHANNELS}

    # When it is approved with "use the median" for its Answer
    block = answer_block(http, created["canvas_id"])
    approved = http.post(f"/v1/run/{run_id}/approve", json={"instructions": {block["id"]: "Use the median"}})
    assert approved.status_code == 200, approved.text
    result = poll_until_finished(http, run_id)

    # Then the answer opens with each channel's median
    assert result["status"] == "completed", result.get("errors")
    lead = opening(result)
    assert "median" in lead, lead
    for channel, value in medians.items():
        assert f"{channel} ({value:,.2f})" in lead, (channel, value, lead)


def test_a_memo_approved_with_the_median_and_an_audience_states_medians_to_that_audience(http):
    # Given a memo run waiting for review, asking for the average per region
    created = create(http, "Write a memo on the average amount per booking by region", template="memo", review="true")
    run_id = created["run_id"]
    for _ in range(600):
        if http.get(f"/v1/run/{run_id}").json()["data"].get("awaiting_approval"):
            break
        time.sleep(0.1)
    medians = {r: statistics.median(row["amount"] for row in ROWS if row["region"] == r) for r in REGIONS}
    nodes = http.get(f"/v1/canvas/{created['canvas_id']}/dag").json()["data"]["nodes"]
    memo = next(n for n in nodes if n["type"] == "memo-block")

    # When it is approved with instructions for the memo
    instructions = {memo["id"]: "Use the median; address it to the support leads"}
    assert http.post(f"/v1/run/{run_id}/approve", json={"instructions": instructions}).status_code == 200
    result = poll_until_finished(http, run_id)

    # Then the memo is addressed to them and states each region's median
    assert result["status"] == "completed", result.get("errors")
    [artifact] = [a for a in result["result"]["artifacts"] if a["type"] == "docx"]
    text = "\n".join(p.text for p in Document(io.BytesIO(httpx.get(artifact["download_url"]).content)).paragraphs)
    assert "Support leads" in text
    for region, value in medians.items():
        assert f"{region} ({value:,.2f})" in text, (region, value, text)
