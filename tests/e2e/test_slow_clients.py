"""Slow clients against the embedded stack's front door: hundreds of connections that trickle their heads or
bodies a byte at a time hold no worker, so everyone else's runs are created and polled as fast as ever."""

from __future__ import annotations

import math
import select
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from canvas_local.stack import LocalStack

pytestmark = [pytest.mark.e2e, pytest.mark.serial, pytest.mark.timeout(120)]

KEY = "sk_canvas_e2e_slow_clients_" + "s" * 24
SLOW_CLIENTS = 400
NORMAL_CLIENTS = 4
SECONDS = 15  # how long the normal clients work while the slow ones trickle
TRICKLE_EVERY = 1.0  # seconds between two bytes of one slow client


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    # Its clients start runs as fast as theirs end: the account's starts per minute (30 by default) are not the limit
    # this measures.
    with LocalStack(api_keys=[KEY], parameter_overrides={"MaxRunStartsPerMinutePerAccount": "1000"}) as local:
        yield local


class Tricklers:
    """SLOW_CLIENTS connections, half trickling a request's head and half its body, one byte each per tick; one
    answered (408 past the front door's deadline) or closed is replaced, so that many trickle all along."""

    def __init__(self, host: str, port: int):
        self.address = (host, port)
        self.connections: list[socket.socket] = []
        self.replaced = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tricklers", daemon=True)

    def __enter__(self) -> Tricklers:
        self.connections = [self._open(index) for index in range(SLOW_CLIENTS)]
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        for connection in self.connections:
            connection.close()

    def _open(self, index: int) -> socket.socket:
        connection = socket.create_connection(self.address, timeout=5)
        if index % 2:  # the head whole, then a body that never ends
            connection.sendall(b"POST /v1/run HTTP/1.1\r\nHost: slow\r\nContent-Length: 100000\r\n\r\n")
        else:  # a head that never ends
            connection.sendall(b"POST /v1/run HTTP/1.1\r\nHost: slow\r\nX-Pad: ")
        return connection

    def _run(self) -> None:
        deadline = time.monotonic() + SECONDS + 30
        while not self._stop.wait(TRICKLE_EVERY) and time.monotonic() < deadline:
            for index, connection in enumerate(self.connections):
                answered, _, _ = select.select([connection], [], [], 0)
                try:
                    if answered:
                        raise OSError("answered")
                    connection.sendall(b"a")
                except OSError:
                    connection.close()
                    self.connections[index] = self._open(index)
                    self.replaced += 1


def test_slow_clients_hold_no_worker_and_others_are_served_promptly(stack):
    # Given 400 connections trickling a byte a second, half of them heads and half bodies
    url = httpx.URL(stack.base_url)
    latencies: list[float] = []
    statuses: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        # a new connection per request: the slow clients must not have taken every one
        with httpx.Client(
            base_url=stack.base_url,
            headers={"X-API-KEY": KEY},
            timeout=10,
            limits=httpx.Limits(max_keepalive_connections=0),
        ) as client:
            deadline = time.monotonic() + SECONDS
            run_id = None
            while time.monotonic() < deadline:
                started = time.monotonic()
                if run_id is None:
                    response = client.post("/v1/run", data={"prompt": "A memo on slow lorises", "template": "memo"})
                    if response.status_code == 200:
                        run_id = response.json()["data"]["run_id"]
                else:
                    response = client.get(f"/v1/run/{run_id}")
                    if response.status_code == 200 and response.json()["data"]["status"] != "running":
                        run_id = None
                with lock:
                    latencies.append(time.monotonic() - started)
                    statuses.append(response.status_code)
                time.sleep(0.2)

    with Tricklers(url.host, url.port or 80) as tricklers:
        # When normal clients create runs and poll them meanwhile
        workers = [threading.Thread(target=work) for _ in range(NORMAL_CLIENTS)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(SECONDS + 30)

    # Then every request was answered, none 503, and 95 in 100 within a second
    assert statuses, "no request was made"
    assert set(statuses) == {200}, sorted(set(statuses))
    ordered = sorted(latencies)
    p95 = ordered[math.ceil(0.95 * len(ordered)) - 1]
    assert p95 < 1.0, f"p95 {p95:.2f}s over {len(ordered)} requests"
    # And the slow heads were cut off at the front door's deadline and replaced, so slow clients trickled throughout
    assert tricklers.replaced >= SLOW_CLIENTS // 2
