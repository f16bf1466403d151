"""moto's server app (every service on one port) behind a server made for many concurrent callers.

moto's ThreadedMotoServer runs werkzeug's development server: it closes the connection after every response
and starts a thread for every connection, one at a time on its accept loop. With a few dozen blocks calling
DynamoDB at once, requests queued behind thread starts for most of a second. Here a fixed pool of threads
serves the connections, the kernel's listen queue is deep, and nothing is created per request.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import BaseWSGIServer

LOG = logging.getLogger(__name__)

WORKERS = 64
LISTEN_BACKLOG = 1024


class _PooledWSGIServer(BaseWSGIServer):
    multithread = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="moto-server")

    def process_request(self, request: Any, client_address: Any) -> None:
        self._pool.submit(self._serve_connection, request, client_address)

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)

    def server_close(self) -> None:
        super().server_close()
        self._pool.shutdown(wait=False, cancel_futures=True)


class MotoServer:
    """The part of ThreadedMotoServer's interface the stack uses: start, stop, get_host_and_port."""

    def __init__(self, ip_address: str = "127.0.0.1", port: int = 0):
        self._address = (ip_address, port)
        self._server: _PooledWSGIServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        app = DomainDispatcherApplication(create_backend_app)
        self._server = _PooledWSGIServer(*self._address, app, handler=MotoRequestHandler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.5}, name="moto-server", daemon=True
        )
        self._thread.start()

    def get_host_and_port(self) -> tuple[str, int]:
        if self._server is None:
            raise RuntimeError("moto's server is not started")
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None
