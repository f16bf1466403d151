"""What a re-run copies (canvas_core/reruns.py): the blocks downstream of the chosen one, each copied block as it
ended or as planned, and the task tree that says which is which."""

from __future__ import annotations

import uuid

import pytest

from canvas_core.models.catalog import NodeStatus, TaskStatus
from canvas_core.models.items import Artifact, EdgeItem, NodeItem, RerunOf, RunItem, Source
from canvas_core.reruns import copy_nodes, downstream_of, rerun_name, rerun_tasks

pytestmark = pytest.mark.unit

SOURCE, COPY = str(uuid.uuid4()), str(uuid.uuid4())


def node(name: str, inputs: list[str] = (), **fields) -> NodeItem:
    return NodeItem(
        canvas_id=SOURCE,
        block_id=name,
        name=name.upper(),
        type=fields.pop("type", "prompt-block"),
        inputs=list(inputs),
        status=fields.pop("status", NodeStatus.COMPLETED),
        content=f"{name} content",
        sources=[Source(title=f"{name} source")],
        credits=fields.pop("credits", 3),
        models_used=["m"],
        artifacts=[Artifact(id="f", type="docx", name=f"{name}.docx", s3_key=f"artifacts/x/{name}.docx", size_bytes=9)],
        instructions=f"{name} instructions",
        persona="Analyst",
        **fields,
    )


def edges(*pairs: str) -> list[EdgeItem]:
    return [EdgeItem(source_id=p[0], target_id=p[1]) for p in pairs]


def test_downstream_is_the_block_and_every_block_reading_it_directly_or_not():
    # a -> b -> d, a -> c -> d, d -> e, and f alone
    graph = edges("ab", "ac", "bd", "cd", "de")
    assert downstream_of("b", graph) == {"b", "d", "e"}
    assert downstream_of("a", graph) == {"a", "b", "c", "d", "e"}
    assert downstream_of("e", graph) == {"e"}
    assert downstream_of("f", graph) == {"f"}


def test_copied_blocks_to_run_are_as_planned_and_the_others_as_they_ended():
    # Given a -> b -> c, a -> c, with b chosen
    nodes = [node("a"), node("b", ["a"]), node("c", ["a", "b"])]
    again = downstream_of("b", edges("ab", "bc", "ac"))

    # When
    a, b, c = copy_nodes(nodes, again, COPY, "b", "New instructions")

    # Then a is reused whole, on the new canvas
    assert a.reused and a.canvas_id == COPY
    assert (a.status, a.content, a.sources, a.credits, a.artifacts) == (
        NodeStatus.COMPLETED,
        "a content",
        nodes[0].sources,
        3,
        nodes[0].artifacts,
    )
    # And b and c wait to run, with nothing of what they made, b with the new instructions
    for copied in (b, c):
        assert not copied.reused and copied.canvas_id == COPY
        assert (copied.status, copied.content, copied.sources, copied.credits) == (NodeStatus.IDLE, None, [], 0)
        assert (copied.artifacts, copied.models_used, copied.error) == ([], [], None)
    assert (b.instructions, c.instructions) == ("New instructions", "c instructions")
    # And each counts as pending only its inputs that run again
    assert (b.pending_inputs, c.pending_inputs) == (0, 1)
    # And the source's nodes are untouched
    assert nodes[1].content == "b content" and nodes[1].canvas_id == SOURCE


def test_without_new_instructions_a_block_runs_again_on_its_own():
    [copied] = copy_nodes([node("a")], {"a"}, COPY, "a", None)
    assert copied.instructions == "a instructions" and copied.status == NodeStatus.IDLE


def test_a_page_block_rerun_with_instructions_naming_an_address_reads_that_address():
    page = node("w", type="web-block", url="https://old.example/page", status=NodeStatus.ERROR)
    [moved] = copy_nodes([page], {"w"}, COPY, "w", "Read https://new.example/story. instead")
    [kept] = copy_nodes([page], {"w"}, COPY, "w", "Read it more carefully")
    assert (moved.url, kept.url) == ("https://new.example/story", "https://old.example/page")


def test_the_task_tree_says_which_blocks_are_reused_and_names_the_new_instructions():
    run = RunItem(
        run_id="r2",
        account_id="acc",
        canvas_id=COPY,
        prompt="p",
        template="auto",
        created_at_ms=0,
        estimated_duration_ms=0,
        rerun_of=RerunOf(run_id="r1", canvas_id=SOURCE, block_id="b"),
    )
    nodes = copy_nodes(
        [node("a"), node("x", status=NodeStatus.ERROR), node("b", ["a"])], {"b"}, COPY, "b", "Say it  twice\nplease"
    )

    parent, a, x, b = rerun_tasks(run, nodes, "b", "r1", "Say it  twice\nplease")

    assert parent.parent_id is None and parent.name == "Re-run B and what depends on it"
    assert (a.name, a.status) == ("Analyst: A (reused from run r1)", TaskStatus.COMPLETED)
    assert (x.name, x.status) == ("Analyst: X (reused from run r1)", TaskStatus.ERROR)
    assert (b.name, b.status) == ("Analyst: B (re-run with new instructions: Say it twice please)", TaskStatus.RUNNING)
    assert {t.parent_id for t in (a, x, b)} == {parent.task_id}


def test_a_rerun_canvas_is_named_once_as_a_rerun_and_kept_short():
    assert rerun_name("Tide tables") == "Re-run: Tide tables"
    assert rerun_name("Re-run: Tide tables") == "Re-run: Tide tables"
    long = rerun_name("x" * 200)
    assert len(long) == 80 and long.endswith("...")
