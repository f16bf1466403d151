"""A block writes its own node, so a taken-over one could name another account's object as its spilled output or
its file (docs/isolation.md): the trusted code that reads or signs those keys (the DAG, a run's end) reads only the
run's account's objects."""

from __future__ import annotations

import pytest

from canvas_core.adapters.artifacts import ArtifactStore
from canvas_core.adapters.store import Store
from canvas_core.auth import create_account_with_key
from canvas_core.canvas import get_canvas_dag
from canvas_core.models.items import Artifact, CanvasItem, NodeItem, RunItem
from canvas_core.orchestration import finalize_run

pytestmark = pytest.mark.component

RUN, CANVAS, THEIR_RUN = (
    "7a1c2d4e-0000-4000-8000-000000000101",
    "6f1c2d4e-0000-4000-8000-000000000102",
    "7a1c2d4e-0000-4000-8000-000000000103",
)


def test_a_node_naming_another_accounts_objects_reads_and_signs_none_of_them(aws):
    # Given account B's spilled output and file, and a node of account A's run that names them
    mine, _ = create_account_with_key(credits=100)
    theirs, _ = create_account_with_key(credits=100)
    files, store = ArtifactStore(), Store()
    their_text, their_file = f"content/{theirs}/{THEIR_RUN}/b.txt", f"artifacts/{theirs}/{THEIR_RUN}/a/secret.pdf"
    files.put(their_text, b"their secret text", "text/plain")
    files.put(their_file, b"%PDF their secret", "application/pdf")
    own_file = f"artifacts/{mine}/{RUN}/a/report.pdf"
    files.put(own_file, b"%PDF mine", "application/pdf")
    stolen = Artifact(id="x", type="pdf", name="secret.pdf", s3_key=their_file, size_bytes=17)
    own = Artifact(id="y", type="pdf", name="report.pdf", s3_key=own_file, size_bytes=9)
    store.put_run(
        RunItem(
            run_id=RUN, account_id=mine, canvas_id=CANVAS, prompt="p", template="auto", created_at_ms=0,
            estimated_duration_ms=0,
        )
    )  # fmt: skip
    store.put_canvas(CanvasItem(canvas_id=CANVAS, account_id=mine, run_id=RUN, canvas_name="c"))
    node = NodeItem(
        canvas_id=CANVAS, block_id="b1", name="Block", type="text-block", status="completed",
        content="a preview", content_key=their_text, artifacts=[stolen, own],
    )  # fmt: skip
    store.put_graph([node], [], CANVAS)

    # When A reads the canvas and the run ends
    dag = get_canvas_dag(CANVAS, mine)
    finalize_run(RUN)

    # Then the DAG shows the preview, not B's text, and the run's files are A's own only
    assert [n.content for n in dag.nodes] == ["a preview"]
    assert [a.s3_key for a in store.get_run(RUN).artifacts] == [own_file]
