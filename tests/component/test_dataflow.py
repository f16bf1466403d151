"""The release protocol of canvas_core/dataflow.py against DynamoDB (moto): a block is released exactly once,
whichever comes first of its parking and its last input ending, and a retried release counts nothing twice."""

from __future__ import annotations

import threading
import uuid

import pytest

from canvas_core.adapters.store import Store
from canvas_core.dataflow import register_wait, release_dependents, wire
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


def test_parking_and_the_last_input_racing_release_exactly_once(aws):
    # Given many blocks each with one input; each block's parking races its input's release
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
