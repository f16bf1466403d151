"""Every block type runs over HTTP on the embedded stack with the offline provider: two runs that ask for all of
them between them (the planner takes deep research in place of web research where both are asked), beside an
upload, plan a block of each type asked and run each one's function to its end, so that the record of what each
block function calls (tests/iam_observed.yaml) has every one of them."""

from __future__ import annotations

import json

import pytest

from canvas_core.models.catalog import BlockType
from tests.e2e.conftest import poll_until_finished

pytestmark = pytest.mark.e2e

NOTES = b"# Tide pools\nSea anemones and hermit crabs live in the tide pools of the north shore.\n"
# The blocks that read from outside have nothing to read here (no search provider, no link in the prompt): they
# end failed, naming what they lack.
GATHERING = {b.value for b in (BlockType.WEB, BlockType.WEB_RESEARCH, BlockType.DEEP_RESEARCH, BlockType.YT)}
EVERY_TYPE_BUT_WEB_RESEARCH = [b.value for b in BlockType if b not in (BlockType.FILE, BlockType.WEB_RESEARCH)]


@pytest.mark.parametrize(
    "asked", [EVERY_TYPE_BUT_WEB_RESEARCH, [BlockType.WEB_RESEARCH.value, BlockType.TEXT.value]], ids=["most", "web"]
)
def test_a_run_plans_a_block_of_each_type_asked_and_runs_each_to_its_end(http, asked):
    # Given a run asking for these block types (an upload makes a file block)
    response = http.post(
        "/v1/run",
        data={"prompt": "Everything about the tide pools of the north shore", "blocks": json.dumps(asked)},
        files=[("files", ("notes.md", NOTES, "text/markdown"))],
    )
    assert response.status_code == 200, response.text

    # When it ends
    data = poll_until_finished(http, response.json()["data"]["run_id"], timeout=240)
    nodes = http.get(f"/v1/canvas/{data['canvas_id']}/dag").json()["data"]["nodes"]

    # Then it planned a block of each type asked, and each ran to an end: completed, or failed saying why
    assert {n["type"] for n in nodes} == {*asked, BlockType.FILE.value}
    assert data["status"] in ("completed", "partial"), data["errors"]
    assert {e["block_type"] for e in data["errors"]} <= GATHERING, data["errors"]
    assert all(n["status"] in ("completed", "error") for n in nodes), [(n["type"], n["status"]) for n in nodes]
