"""The release protocol of canvas_core/dataflow.py against DynamoDB (moto): a block is released exactly once,
whichever comes first of its parking and its last input ending, an input is counted once whether its completion
or its release counts it, and a retried release counts nothing twice."""

from __future__ import annotations

import threading
import uuid

import pytest

from canvas_core.adapters.store import Store
from canvas_core.dataflow import claimable_by_completion, register_wait, release_dependents, release_ready, wire
from canvas_core.models.items import CanvasItem, EdgeItem, NodeItem

pytestmark = pytest.mark.component


class RecordingExecutions:
    """Stands in for Step Functions' SendTaskSuccess and records every token sent."""

    def __init__(self):
        self.sent: list[str] = []
        self._lock = threading.Lock()

    def send_task_success(self, task_token, output):
        with self._lock:
            self.sent.append(task_token)
        return True


def canvas(edges: list[tuple[int, int]], count: int) -> tuple[str, list[str]]:
    """A stored canvas of `count` blocks wired by `edges` (indices); returns its id and the block ids."""
    canvas_id = str(uuid.uuid4())
    ids = [str(uuid.uuid4()) for _ in range(count)]
    nodes = [
        NodeItem(canvas_id=canvas_id, block_id=b, name=f"b{i}", type="text-block", position=i)
        for i, b in enumerate(ids)
    ]
    edge_items = [EdgeItem(source_id=ids[s], target_id=ids[t]) for s, t in edges]
    wire(nodes, edge_items)
    store = Store()
    store.put_canvas(CanvasItem(canvas_id=canvas_id, account_id="a", run_id="r", canvas_name="c"))
    store.put_graph(nodes, edge_items, canvas_id)
    return canvas_id, ids


def test_a_block_without_inputs_is_released_when_it_parks(aws):
    canvas_id, [a] = canvas([], 1)
    sent = RecordingExecutions()
    assert register_wait(canvas_id, a, "token-a", executions=sent) == {"block_id": a, "released": True}
    assert sent.sent == ["token-a"]


def test_a_block_parked_first_is_released_by_its_last_input(aws):
    # Given a, b -> c, with c parked before either input ends
    canvas_id, [a, b, c] = canvas([(0, 2), (1, 2)], 3)
    sent = RecordingExecutions()
    assert register_wait(canvas_id, c, "token-c", executions=sent)["released"] is False
    # When a ends, c still waits for b; when b ends, c goes
    assert release_dependents(canvas_id, a, executions=sent)["released"] == []
    assert release_dependents(canvas_id, b, executions=sent)["released"] == [c]
    # Then
    assert sent.sent == ["token-c"]


def test_inputs_that_end_before_the_block_parks_release_it_at_parking(aws):
    canvas_id, [a, b] = canvas([(0, 1)], 2)
    sent = RecordingExecutions()
    assert release_dependents(canvas_id, a, executions=sent)["released"] == []
    assert register_wait(canvas_id, b, "token-b", executions=sent)["released"] is True
    assert sent.sent == ["token-b"]


def test_a_retried_release_counts_and_sends_nothing_twice(aws):
    canvas_id, [a, b, c] = canvas([(0, 2), (1, 2)], 3)
    sent = RecordingExecutions()
    register_wait(canvas_id, c, "token-c", executions=sent)
    for _ in range(3):
        release_dependents(canvas_id, a, executions=sent)
    assert Store().get_node_item(canvas_id, c)["pending_inputs"] == 1
    release_dependents(canvas_id, b, executions=sent)
    release_dependents(canvas_id, b, executions=sent)
    assert sent.sent == ["token-c"]


def test_a_failed_send_gives_the_release_back_for_the_retry(aws):
    canvas_id, [a, b] = canvas([(0, 1)], 2)

    class Flaky(RecordingExecutions):
        def send_task_success(self, task_token, output):
            if not self.sent and not getattr(self, "failed", False):
                self.failed = True
                raise RuntimeError("Step Functions unavailable")
            return super().send_task_success(task_token, output)

    flaky = Flaky()
    register_wait(canvas_id, b, "token-b", executions=flaky)
    with pytest.raises(RuntimeError):
        release_dependents(canvas_id, a, executions=flaky)
    assert release_dependents(canvas_id, a, executions=flaky)["released"] == [b]
    assert flaky.sent == ["token-b"]


def complete(canvas_id: str, block_id: str, dependents: list[str]) -> bool:
    """What the runner writes when a block completes: its output, and its count on each dependent."""
    store = Store()
    store.update_node(canvas_id, block_id, status="running")
    return store.complete_block(canvas_id, block_id, [], dependents=dependents, content="done") is not None


def test_a_completed_block_is_counted_by_its_completion_and_its_release_counts_nothing_more(aws):
    # Given a, b -> c, with c parked
    canvas_id, [a, b, c] = canvas([(0, 2), (1, 2)], 3)
    sent = RecordingExecutions()
    register_wait(canvas_id, c, "token-c", executions=sent)
    # When a completes (counted on c in the same write), and its release runs, twice
    assert complete(canvas_id, a, [c]) is True
    assert Store().get_node_item(canvas_id, c)["pending_inputs"] == 1
    for _ in range(2):
        assert release_dependents(canvas_id, a, executions=sent)["released"] == []
    # Then c still waits for b alone; b's completion and release send c's token, once
    assert Store().get_node_item(canvas_id, c)["pending_inputs"] == 1
    assert complete(canvas_id, b, [c]) is True
    assert release_dependents(canvas_id, b, executions=sent)["released"] == [c]
    assert release_dependents(canvas_id, b, executions=sent)["released"] == []
    assert release_dependents(canvas_id, a, executions=sent)["released"] == []
    assert sent.sent == ["token-c"]
    assert Store().get_node_item(canvas_id, c)["pending_inputs"] == 0


def test_a_completed_block_claims_only_dependents_ready_and_parked(aws):
    # Given a -> c, b -> c, a -> d: c parked, d not parked yet
    canvas_id, [a, b, c, d] = canvas([(0, 2), (1, 2), (0, 3)], 4)
    sent = RecordingExecutions()
    register_wait(canvas_id, c, "token-c", executions=sent)
    # When a completes and releases what it made ready: c still waits for b, d is ready but not parked
    assert complete(canvas_id, a, [c, d]) is True
    assert release_ready(canvas_id, a, [c, d], executions=sent)["released"] == []
    # Then d goes when it parks; c goes with b, once, however often the releases are retried
    assert register_wait(canvas_id, d, "token-d", executions=sent)["released"] is True
    assert complete(canvas_id, b, [c]) is True
    for _ in range(2):
        release_ready(canvas_id, b, [c], executions=sent)
        release_ready(canvas_id, a, [c, d], executions=sent)
    assert sent.sent == ["token-d", "token-c"]


def test_a_send_failing_after_a_completion_leaves_the_release_to_the_catch(aws):
    # Given a -> b, b parked, a completed
    canvas_id, [a, b] = canvas([(0, 1)], 2)
    sent = RecordingExecutions()
    register_wait(canvas_id, b, "token-b", executions=sent)
    complete(canvas_id, a, [b])

    class Unavailable(RecordingExecutions):
        def send_task_success(self, task_token, output):
            raise RuntimeError("Step Functions unavailable")

    # When the block's own release fails to send, and the state machine's Catch runs Release Dependents
    with pytest.raises(RuntimeError):
        release_ready(canvas_id, a, [b], executions=Unavailable())
    caught = {"Error": "RuntimeError", "Cause": "Step Functions unavailable"}
    # Then b is released once, and a stays completed
    assert release_dependents(canvas_id, a, executions=sent, error=caught)["released"] == [b]
    assert sent.sent == ["token-b"]
    assert Store().get_node_item(canvas_id, a)["status"] == "completed"
    assert Store().get_node_item(canvas_id, b)["pending_inputs"] == 0


def test_a_late_completion_counts_nothing(aws):
    # Given a -> b, with a recorded as failed (timed out) and counted on b by its release
    canvas_id, [a, b] = canvas([(0, 1)], 2)
    sent = RecordingExecutions()
    register_wait(canvas_id, b, "token-b", executions=sent)
    Store().update_node(canvas_id, a, status="running")
    release_dependents(canvas_id, a, executions=sent, error={"Error": "States.Timeout"})
    # When a's work ends late
    completed = Store().complete_block(canvas_id, a, [], dependents=[b], content="late")
    # Then its output and its count are dropped: b was counted and released once
    assert completed is None
    assert Store().get_node_item(canvas_id, b)["pending_inputs"] == 0
    assert Store().get_node_item(canvas_id, a)["status"] == "error"
    assert sent.sent == ["token-b"]


@pytest.mark.parametrize("counted_by_completion", [False, True])
def test_parking_and_the_last_input_racing_release_exactly_once(aws, counted_by_completion):
    # Given many blocks each with one input; each block's parking races its input's completion and release
    rounds = 25
    sent = RecordingExecutions()
    barrier_pairs = []
    for _ in range(rounds):
        canvas_id, [a, b] = canvas([(0, 1)], 2)
        barrier_pairs.append((canvas_id, a, b))

    def race(canvas_id, a, b):
        gate = threading.Barrier(2)

        def park():
            gate.wait()
            register_wait(canvas_id, b, f"token-{b}", executions=sent)

        def end_input():
            gate.wait()
            if counted_by_completion:
                complete(canvas_id, a, [b])
                release_ready(canvas_id, a, [b], executions=sent)
            else:
                release_dependents(canvas_id, a, executions=sent)

        threads = [threading.Thread(target=park), threading.Thread(target=end_input)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    # When
    for pair in barrier_pairs:
        race(*pair)
    # Then every block was released, and none twice
    assert sorted(sent.sent) == sorted(f"token-{b}" for _, _, b in barrier_pairs)


def start_and_complete(canvas_id: str, block_id: str, dependents: list[str], at_start: dict | None = None) -> dict:
    """What the runner does: read the dependents when the block starts, complete it claiming those waiting for it
    alone, then release. `at_start` is what the dependents looked like then (read now when not given)."""
    store = Store()
    store.update_node(canvas_id, block_id, status="running")
    claimable = claimable_by_completion(
        block_id, at_start if at_start is not None else store.get_node_items(canvas_id, dependents)
    )
    completion = store.complete_block(canvas_id, block_id, [], dependents=dependents, release=claimable, content="done")
    assert completion is not None
    return completion.released


def test_a_completion_claims_the_dependents_waiting_for_it_alone_and_sends_each_token_once(aws):
    # Given a -> c, b -> c, a -> d, a -> e: c parked and waiting for a alone (b ended), d parked, e not parked
    canvas_id, [a, b, c, d, e] = canvas([(0, 2), (1, 2), (0, 3), (0, 4)], 5)
    sent = RecordingExecutions()
    for block, token in ((c, "token-c"), (d, "token-d")):
        register_wait(canvas_id, block, token, executions=sent)
    assert release_dependents(canvas_id, b, executions=sent)["released"] == []
    # When a completes
    claimed = start_and_complete(canvas_id, a, [c, d, e])
    released = release_ready(canvas_id, a, [c, d, e], executions=sent, claimed=claimed)
    # Then its completion claimed c and d, whose tokens were sent; e goes when it parks; nothing goes twice
    assert claimed == {c: "token-c", d: "token-d"}
    assert released["released"] == [c, d] and sent.sent == ["token-c", "token-d"]
    assert register_wait(canvas_id, e, "token-e", executions=sent)["released"] is True
    for _ in range(2):
        release_ready(canvas_id, a, [c, d, e], executions=sent)
        release_dependents(canvas_id, a, executions=sent)
    assert sent.sent == ["token-c", "token-d", "token-e"]
    assert [Store().get_node_item(canvas_id, x)["pending_inputs"] for x in (c, d, e)] == [0, 0, 0]


def test_a_dependent_that_parked_again_is_claimed_by_the_release_with_its_new_token(aws):
    # Given a -> b, b parked when a started, then parked again with another token (its wait was retried)
    canvas_id, [a, b] = canvas([(0, 1)], 2)
    sent = RecordingExecutions()
    register_wait(canvas_id, b, "first-token", executions=sent)
    at_start = Store().get_node_items(canvas_id, [b])
    register_wait(canvas_id, b, "second-token", executions=sent)
    # When a completes with what it read when it started
    claimed = start_and_complete(canvas_id, a, [b], at_start=at_start)
    release_ready(canvas_id, a, [b], executions=sent, claimed=claimed)
    # Then the completion claimed nothing, was written whole, and the release sent the new token once
    assert claimed == {}
    assert Store().get_node_item(canvas_id, a)["status"] == "completed"
    assert sent.sent == ["second-token"]


def test_a_dependent_whose_other_input_ended_after_the_block_started_is_released_once(aws):
    # Given a -> c, b -> c, c parked, both inputs pending when a started; b ends while a works
    canvas_id, [a, b, c] = canvas([(0, 2), (1, 2)], 3)
    sent = RecordingExecutions()
    register_wait(canvas_id, c, "token-c", executions=sent)
    at_start = Store().get_node_items(canvas_id, [c])
    assert release_dependents(canvas_id, b, executions=sent)["released"] == []
    # When a completes
    claimed = start_and_complete(canvas_id, a, [c], at_start=at_start)
    release_ready(canvas_id, a, [c], executions=sent, claimed=claimed)
    # Then its completion did not claim c (two inputs were pending when a started); its release did
    assert claimed == {}
    assert sent.sent == ["token-c"]


def test_a_late_completion_claims_nothing(aws):
    # Given a -> b, b parked and waiting for a alone, a recorded as failed (timed out) and counted on b
    canvas_id, [a, b] = canvas([(0, 1)], 2)
    sent = RecordingExecutions()
    register_wait(canvas_id, b, "token-b", executions=sent)
    at_start = Store().get_node_items(canvas_id, [b])
    Store().update_node(canvas_id, a, status="running")
    release_dependents(canvas_id, a, executions=sent, error={"Error": "States.Timeout"})
    # When a's work ends late, with the claim it would have made
    claimable = claimable_by_completion(a, at_start)
    assert claimable == {b: "token-b"}
    completion = Store().complete_block(canvas_id, a, [], dependents=[b], release=claimable, content="late")
    # Then nothing was written, and b was released once
    assert completion is None
    assert Store().get_node_item(canvas_id, a)["status"] == "error"
    assert sent.sent == ["token-b"]


def test_a_dependent_listed_twice_is_sent_its_claimed_token_once(aws):
    # Given a -> b, b parked and waiting for a alone, and a's dependents listing b twice
    canvas_id, [a, b] = canvas([(0, 1)], 2)
    sent = RecordingExecutions()
    register_wait(canvas_id, b, "token-b", executions=sent)
    claimed = start_and_complete(canvas_id, a, [b, b])
    # When a releases them
    released = release_ready(canvas_id, a, [b, b], executions=sent, claimed=claimed)
    # Then b's token went once
    assert released["released"] == [b]
    assert sent.sent == ["token-b"]


def test_a_release_carries_what_a_dependent_with_one_input_would_read_within_its_limit(aws):
    # Given a -> b, a -> c, d -> c: b reads a alone, c reads a and d; a completed with a short output
    from canvas_core.dataflow import CARRIED_MAX_BYTES, carried_release
    from canvas_core.models.blocks import Release

    canvas_id, [a, b, c, _] = canvas([(0, 1), (0, 2), (3, 2)], 4)
    items = Store().get_node_items(canvas_id, [a, b, c])
    done = NodeItem.model_validate({**items[a], "status": "completed", "content": "a's output"})
    account = {"account_id": "acct", "credits_balance": 7}
    # When a's releases are built
    to_b, to_c = (carried_release(items[x], done, account) for x in (b, c))
    too_large = carried_release(items[b], done.model_copy(update={"content": "x" * CARRIED_MAX_BYTES}), account)
    # Then b's carries its node, a's output and the account; c's (two inputs) and one past the limit, the id alone
    release = Release.model_validate(to_b)
    assert release.block_id == b and release.node is not None and release.node.block_id == b
    assert release.node.inputs == [a] and release.node.dependents == []
    assert [(n.block_id, n.content) for n in release.inputs or []] == [(a, "a's output")]
    assert release.account == account
    assert to_c == {"block_id": c} and too_large == {"block_id": b}
