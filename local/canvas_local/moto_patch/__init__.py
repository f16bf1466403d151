"""Everything the embedded stack does to moto beyond its public API, by purpose.

Correctness (moto answers otherwise than AWS, or breaks under the stack's threads):
- lambda_tasks.py: Lambda tasks run the stack's handlers in this process, not in Docker.
- step_functions.py: the 256 KB payload limit, StopExecution inside a Map, an execution's end reported.
- transactions.py: TransactWriteItems' `ClientRequestToken` honoured.
- locks.py: one request at a time per service, as moto's backends are not thread-safe.
State dir (`--state-dir`):
- journal.py: every acknowledged DynamoDB and S3 write handed to the journal before its answer leaves.
Memory (a long-lived stack's memory kept to what it stores):
- memory.py: model objects untracked, S3 bodies in files, finished threads and old executions dropped.
- packed_items.py: DynamoDB items kept packed.
Speed (kept only where a benchmark shows what it buys; the figure is beside each, and in docs/benchmarks.md,
"What each moto patch buys"):
- speed_server.py, speed_interpreter.py, speed_dynamodb.py, and the scans, queries (packed_items.py) and
  transactions (transactions.py) that read only what they need.
No patch: moto_api.py calls moto's own server API (its configuration, a reset).

tests/unit/test_moto_patch.py, test_moto_fast_paths.py and test_moto_expression_paths.py fail when a moto upgrade
moves or reshapes any of these seams, and compare what each shortcut answers with moto's own code.
"""

from __future__ import annotations

from canvas_local.moto_patch import packed_items, speed_dynamodb, speed_interpreter, speed_server, transactions
from canvas_local.moto_patch.journal import (
    ItemChange,
    ObjectChange,
    WriteJournal,
    install_write_journal,
    uninstall_write_journal,
)
from canvas_local.moto_patch.lambda_tasks import (
    SEAM_NAME,
    FunctionResolver,
    inject_lambda_faults,
    install,
    lambdas_in_process,
    uninstall,
)
from canvas_local.moto_patch.locks import backend_locks, install_backend_locks, service_lock, uninstall_backend_locks
from canvas_local.moto_patch.memory import (
    DiskBody,
    forget_ended_executions,
    install_disk_bodies,
    install_untracked_models,
    release_finished_threads,
    uninstall_disk_bodies,
    uninstall_untracked_models,
)
from canvas_local.moto_patch.moto_api import (
    disable_state_machine_execution,
    enable_state_machine_execution,
    reset_backends,
)
from canvas_local.moto_patch.packed_items import (
    PackedItems,
    PackedPartitions,
    install_packed_items,
    uninstall_packed_items,
)
from canvas_local.moto_patch.patches import SpeedPatch
from canvas_local.moto_patch.step_functions import (
    install_payload_limits,
    install_quiet_stops,
    on_execution_end,
    remove_execution_listener,
    uninstall_payload_limits,
    uninstall_quiet_stops,
)
from canvas_local.moto_patch.transactions import (
    install_item_level_transactions,
    install_transaction_tokens,
    uninstall_item_level_transactions,
    uninstall_transaction_tokens,
)

# What `install_caches` installs: the speed patches that need nothing else installed.
_CACHES = {
    **speed_server.PATCHES,
    **speed_interpreter.PATCHES,
    **speed_dynamodb.PATCHES,
    "queries_read_their_items": packed_items.PATCHES["queries_read_their_items"],
}


def speed_patches() -> dict[str, SpeedPatch]:
    """Every speed patch by name, wherever it is installed from (bench/moto_patches.py takes each out in turn)."""
    return {**_CACHES, **packed_items.PATCHES, **transactions.PATCHES}


def install_caches() -> None:
    """Process-wide and idempotent: the speed patches of speed_server.py, speed_interpreter.py and speed_dynamodb.py,
    and queries that read only the items they can answer with."""
    for patch in _CACHES.values():
        patch.install()


def uninstall_caches() -> None:
    for patch in _CACHES.values():
        patch.uninstall()


__all__ = [
    "SEAM_NAME",
    "DiskBody",
    "FunctionResolver",
    "ItemChange",
    "ObjectChange",
    "PackedItems",
    "PackedPartitions",
    "SpeedPatch",
    "WriteJournal",
    "backend_locks",
    "disable_state_machine_execution",
    "enable_state_machine_execution",
    "forget_ended_executions",
    "inject_lambda_faults",
    "install",
    "install_backend_locks",
    "install_caches",
    "install_disk_bodies",
    "install_item_level_transactions",
    "install_packed_items",
    "install_payload_limits",
    "install_quiet_stops",
    "install_transaction_tokens",
    "install_untracked_models",
    "install_write_journal",
    "lambdas_in_process",
    "on_execution_end",
    "release_finished_threads",
    "remove_execution_listener",
    "reset_backends",
    "service_lock",
    "speed_patches",
    "uninstall",
    "uninstall_backend_locks",
    "uninstall_caches",
    "uninstall_disk_bodies",
    "uninstall_item_level_transactions",
    "uninstall_packed_items",
    "uninstall_payload_limits",
    "uninstall_quiet_stops",
    "uninstall_transaction_tokens",
    "uninstall_untracked_models",
    "uninstall_write_journal",
]
