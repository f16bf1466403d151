"""Memory: what moto keeps for the life of the process, which a long-lived stack cannot.

- moto's `BaseModel.__new__` keeps every model object it ever makes (each DynamoDB item version, S3 key, SQS
  message) in a class-wide list for its dashboard; objects live as long as the backend holds them instead. Left out,
  traced memory grew 429 kB a run instead of 10.5 (`bench.memory --tracemalloc --without untracked_models`).
- moto's S3 keeps each object's bytes in a `SpooledTemporaryFile` held in memory up to 5 MB (`s3_models.tempfile`);
  each body lives in a file of the stack's data folder instead, opened only while it is read or written (a
  descriptor held per object would run a long-lived stack out of them). Left out, traced memory grew 37 kB a run
  instead of 10.5 (`--without disk_bodies`).
- moto's interpreter keeps every thread it ever starts in `TMP_THREADS`, and every execution (with its whole
  interpreter state) in its state machine. On Python 3.13 a finished thread whose object is still referenced keeps
  its stack mapped, so a long-lived stack ran out of address space: finished threads and all but the newest ended
  executions are dropped (the stack calls these as executions end; they replace no attribute).

What each buys is measured in docs/benchmarks.md ("What each moto patch buys")."""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path
from typing import Any, cast

from moto.core.common_models import BaseModel
from moto.s3 import models as s3_models
from moto.stepfunctions.parser import utils as sfn_utils
from moto.stepfunctions.parser.api import ExecutionStatus
from moto.stepfunctions.parser.backend.execution import Execution
from moto.stepfunctions.parser.models import stepfunctions_parser_backends

from canvas_local.moto_patch.locks import service_lock

_ORIGINAL_S3_TEMPFILE = s3_models.tempfile
_bodies_folder: Path | None = None


class DiskBody:
    """What FakeKey keeps an object's bytes in, in place of `tempfile.SpooledTemporaryFile`: a file in the data
    folder, opened only for each read or write, removed when moto closes the buffer (the key deleted, replaced or
    collected). FakeKey seeks, reads, writes, truncates and closes its buffer, nothing else."""

    def __init__(self, max_size: int = 0, *_: Any, **__: Any) -> None:
        if _bodies_folder is None:
            raise RuntimeError("install_disk_bodies was not called")
        self._path = _bodies_folder / uuid.uuid4().hex
        self._position = 0
        self._size = 0
        self.closed = False

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._position, os.SEEK_END: self._size}[whence]
        self._position = base + offset
        return self._position

    def tell(self) -> int:
        return self._position

    def truncate(self, size: int | None = None) -> int:
        size = self._position if size is None else size
        if size == 0:
            self._path.unlink(missing_ok=True)
        elif size < self._size:
            os.truncate(self._path, size)
        self._size = min(self._size, size)
        return size

    def write(self, data: bytes) -> int:
        if not data:
            return 0
        descriptor = os.open(self._path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            view = memoryview(data)
            while view:
                written = os.pwrite(descriptor, view, self._position)
                view = view[written:]
                self._position += written
        finally:
            os.close(descriptor)
        self._size = max(self._size, self._position)
        return len(data)

    def read(self, size: int = -1) -> bytes:
        if self._position >= self._size:
            return b""
        with self._path.open("rb") as body:
            body.seek(self._position)
            data = body.read(size if size >= 0 else -1)
        self._position += len(data)
        return data

    def close(self) -> None:
        self.closed = True
        self._path.unlink(missing_ok=True)


class _DiskTempfile:
    """moto.s3.models' `tempfile`, of which it uses `SpooledTemporaryFile` alone."""

    SpooledTemporaryFile = DiskBody


def install_disk_bodies(folder: Path) -> None:
    """S3 objects created from now on keep their bytes in files under `folder` (process-wide)."""
    global _bodies_folder
    folder.mkdir(parents=True, exist_ok=True)
    _bodies_folder = folder
    s3_models.tempfile = _DiskTempfile  # type: ignore[assignment]


def uninstall_disk_bodies() -> None:
    global _bodies_folder
    s3_models.tempfile = _ORIGINAL_S3_TEMPFILE
    _bodies_folder = None


def release_finished_threads() -> int:
    """Forget the interpreter's finished threads (their stacks are freed with them); returns how many."""
    threads = sfn_utils.TMP_THREADS
    # A thread appended but not yet started has no ident: not finished, only early.
    finished = [thread for thread in list(threads) if thread.ident is not None and not thread.is_alive()]
    released = 0
    for thread in finished:
        try:
            thread.join()
        except RuntimeError:  # it has an ident but is not marked started yet: starting, not finished
            continue
        with contextlib.suppress(ValueError):
            threads.remove(thread)
        released += 1
    return released


def forget_ended_executions(keep: int, account_id: str, region: str) -> int:
    """Keep every running execution and the newest `keep` ended ones; returns how many were dropped.

    Step Functions keeps history for 90 days; a process that holds every execution's interpreter state in
    memory cannot, so the embedded stack keeps a window (what the API reads of an ended run is in DynamoDB).
    """
    backend = stepfunctions_parser_backends[account_id][region]
    dropped = 0
    with service_lock("stepfunctions"):
        for machine in backend.state_machines:
            # moto types a machine's executions as its older backend's; the parser backend's machines hold its own
            executions = cast(list[Execution], machine.executions)
            ended = [e for e in executions if e.exec_status != ExecutionStatus.RUNNING]
            if len(ended) <= keep:
                continue
            ended.sort(key=lambda e: e.stop_date or e.start_date)
            gone = {id(e) for e in ended[: len(ended) - keep]}
            executions[:] = [e for e in executions if id(e) not in gone]
            dropped += len(gone)
    return dropped


_ORIGINAL_MODEL_NEW = BaseModel.__dict__["__new__"]


def install_untracked_models() -> None:
    """moto's `BaseModel.__new__` appends every model object it ever makes to its class's `instances_tracked`
    (read only by moto's /moto-api/data dashboard and, for S3 keys, by a reset), so every DynamoDB `Item`
    (a copy per write, its old versions, a transaction's rollback copies), S3 key and SQS message stays in memory
    for the life of the process, stored or not: most of what a run left behind. Objects are made untracked
    instead, and live as long as the backend holds them. Process-wide and idempotent."""
    BaseModel.__new__ = staticmethod(_untracked_new)  # type: ignore[method-assign]


def uninstall_untracked_models() -> None:
    BaseModel.__new__ = _ORIGINAL_MODEL_NEW  # type: ignore[method-assign]


def _untracked_new(cls: type[BaseModel], *args: Any, **kwargs: Any) -> Any:
    return super(BaseModel, cls).__new__(cls)  # what moto's makes, without the append
