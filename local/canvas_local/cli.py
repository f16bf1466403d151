"""`canvas serve`: the whole service on this machine (see stack.py), until Ctrl-C. `create-account`,
`grant-credits`, `create-key`, `list-keys` and `revoke-key` manage accounts and keys in a deployment's tables
(canvas_local/admin.py); `run`, `wait`, `status`, ... use a running service (canvas_local/client/)."""

from __future__ import annotations

import argparse
import errno
import logging
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO
from urllib.parse import urlsplit

from canvas_local import admin
from canvas_local.client import commands as client_commands
from canvas_local.defaults import DEFAULT_TEMPLATE, PROVIDERS
from canvas_local.faults import ENV_VAR, Faults, FaultSpecError
from canvas_local.faults import from_environment as faults_from_environment
from canvas_local.lambda_runtime import DEFAULT_CONCURRENCY

if TYPE_CHECKING:
    from canvas_local.console import Console


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="canvas", description="Canvas Run Service on one machine.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the API with moto standing in for AWS")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=3000, help="0 picks a free port")
    serve.add_argument(
        "--public-url",
        type=_public_url,
        default=None,
        metavar="URL",
        help="where clients reach the API, e.g. behind a proxy: what download links start with (default: the address "
        "each client reached the API at)",
    )
    serve.add_argument(
        "--api-key",
        action="append",
        default=[],
        metavar="KEY",
        help="seed an account holding KEY (repeatable); without it one key is generated",
    )
    serve.add_argument("--provider", choices=PROVIDERS, default="offline", help="MODEL_PROVIDER")
    serve.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep accounts, keys, runs, canvases, tasks and artifacts in DIR across restarts (default: memory only)",
    )
    serve.add_argument(
        "--max-concurrent-runs",
        type=_positive,
        default=None,
        metavar="N",
        help="runs one account may have running at once; the next create gets 429 (default: the template's, 10)",
    )
    serve.add_argument(
        "--max-runs-per-minute",
        type=_positive,
        default=None,
        metavar="N",
        help="runs and re-runs one account may start in a minute; the next gets 429 (default: the template's, 30)",
    )
    serve.add_argument(
        "--retention-days",
        type=_positive,
        default=None,
        metavar="N",
        help="days runs, canvases, tasks, idempotency records and files are kept; expired ones are swept as DynamoDB "
        "TTL and the S3 lifecycle rules remove them on AWS (default: the template's DataRetentionDays, 90)",
    )
    serve.add_argument(
        "--function-concurrency",
        type=_positive,
        default=DEFAULT_CONCURRENCY,
        metavar="N",
        help=f"execution environments per function, one invocation each at a time (default {DEFAULT_CONCURRENCY})",
    )
    serve.add_argument(
        "--webhook-allow-private-addresses",
        action="store_true",
        help="let webhook endpoints be on loopback and private addresses (refused by default; metadata stays refused)",
    )
    serve.add_argument(
        "--inject-faults",
        type=_faults,
        default=None,
        metavar="SPEC",
        help="AWS's failures at these rates, e.g. transaction_conflict=0.2,throttle=0.05,gsi_lag_ms=500,"
        "lambda_error=0.02 (default: $CANVAS_INJECT_FAULTS, else none)",
    )
    serve.add_argument(
        "--log-format",
        choices=("console", "json"),
        default="console",
        help="console: a line per run start and end, warnings and errors, the functions' JSON logs and metrics in "
        "--log-file; json: every JSON log and metric line on standard output (default console)",
    )
    serve.add_argument(
        "--log-file",
        type=Path,
        default=None,
        metavar="PATH",
        help=f"where the console format appends the JSON logs and metrics (default: {LOG_FILE_NAME} in --state-dir, "
        "else in the temporary directory)",
    )
    serve.add_argument("--template", type=Path, default=DEFAULT_TEMPLATE, help=argparse.SUPPRESS)
    # create-account, grant-credits, create-key, list-keys, revoke-key: a deployment's tables (canvas_local/admin.py)
    admin.register(commands)
    # run, wait, status, download, runs, dag, tasks: a running service, over HTTP (canvas_local/client/)
    client_commands.register(commands)
    return parser


LOG_FILE_NAME = "canvas-serve.log"
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_file_of(args: argparse.Namespace) -> Path:
    if args.log_file is not None:
        return Path(args.log_file)
    return (args.state_dir or Path(tempfile.gettempdir())) / LOG_FILE_NAME


def configure_output(args: argparse.Namespace) -> tuple[TextIO, Console | None, Path | None]:
    """Where `canvas serve` writes: with --log-format json, everything to standard output and standard error as
    they are; else the functions' JSON lines (Powertools writes them to `sys.stdout`) and the stack's own log to the
    log file, and a person's console on standard output. The stream the start lines go to, the console, the file."""
    from canvas_local.console import Console, JsonLog, OneLineFormatter

    if args.log_format == "json":
        logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
        return sys.stdout, None, None
    path = log_file_of(args)
    path.parent.mkdir(parents=True, exist_ok=True)
    log = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 (open until the process ends)
    terminal = sys.stdout
    console = Console(terminal)
    sys.stdout = JsonLog(log, console)
    to_file = logging.StreamHandler(log)
    to_file.setFormatter(logging.Formatter(LOG_FORMAT))
    to_console = logging.StreamHandler(sys.stderr)
    to_console.setLevel(logging.WARNING)
    to_console.setFormatter(OneLineFormatter())
    logging.basicConfig(level=logging.INFO, handlers=[to_file, to_console])
    return terminal, console, path


def _faults(text: str) -> Faults:
    try:
        return Faults.parse(text)
    except FaultSpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _public_url(text: str) -> str:
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise argparse.ArgumentTypeError("must be an http or https URL, e.g. https://canvas.example.com")
    return text.rstrip("/")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


# Threads waiting on I/O (an API request's next call to moto) get the interpreter back within 1 ms instead
# of 5: under load, a poll's latency is a chain of such waits behind threads doing block work.
SWITCH_INTERVAL_SECONDS = 0.001


# glibc gives each thread that allocates its own malloc arena, up to 8 per core, and an arena's freed pages are
# reused by its threads only: with the stack's dozens of threads, RSS grew about four times faster than the memory
# in use (docs/benchmarks.md, "Where a run's memory goes"). Two arenas, as MALLOC_ARENA_MAX=2 would give.
MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # glibc's malloc.h


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """mallopt(M_ARENA_MAX, arenas) for the threads started from now on; False where malloc is not glibc's."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(_M_ARENA_MAX, arenas))
    except (OSError, AttributeError):
        return False


# glibc serves an allocation of M_MMAP_THRESHOLD or more (128 KiB) with its own mapping, returned to the system when
# freed; but each such chunk freed raises the threshold to its size (up to 32 MiB), after which a run's large buffers
# (request bodies, rendered files, JSON) come from the heaps and leave them fragmented. Setting the threshold fixes it:
# under 20 clients, RSS grew about 100 kB a run instead of 160 (docs/benchmarks.md, "Load on `canvas serve`").
MMAP_THRESHOLD_BYTES = 128 * 1024
_M_MMAP_THRESHOLD = -3  # glibc's malloc.h


def fix_mmap_threshold(threshold: int = MMAP_THRESHOLD_BYTES) -> bool:
    """mallopt(M_MMAP_THRESHOLD, threshold), which also stops glibc moving it; False where malloc is not glibc's."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, threshold))
    except (OSError, AttributeError):
        return False


def serve(args: argparse.Namespace) -> int:
    # A bad fault spec is refused before anything of the process changes.
    try:
        faults = args.inject_faults or faults_from_environment(os.environ)
    except FaultSpecError as exc:
        print(f"canvas serve: {ENV_VAR}: {exc}", file=sys.stderr)
        return 2
    out, console, log_file = configure_output(args)
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    limit_malloc_arenas()
    fix_mmap_threshold()
    stopping = threading.Event()
    # SIGTERM (docker stop, kill) shuts down as cleanly as Ctrl-C; SIGINT is set too, because a process
    # started in the background by a non-interactive shell inherits it ignored.
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    overrides = {}
    if args.max_concurrent_runs is not None:
        overrides["MaxConcurrentRunsPerAccount"] = str(args.max_concurrent_runs)
    if args.max_runs_per_minute is not None:
        overrides["MaxRunStartsPerMinutePerAccount"] = str(args.max_runs_per_minute)
    if args.webhook_allow_private_addresses:
        overrides["WebhookAllowPrivateAddresses"] = "true"
    from canvas_core.settings import SettingsError
    from canvas_local.stack import LocalStack  # moto and the handlers: only `serve` needs them
    from canvas_local.state_dir import StateDirError

    stack = LocalStack(
        args.template,
        api_keys=args.api_key,
        generate_key=not args.api_key,
        host=args.host,
        port=args.port,
        provider=args.provider,
        parameter_overrides=overrides,
        function_concurrency=args.function_concurrency,
        state_dir=args.state_dir,
        faults=faults,
        retention_days=args.retention_days,
        on_run_end=console.run_ended if console is not None else None,
        public_url=args.public_url,
    )
    try:
        stack.start()
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        print(f"canvas serve: {args.host}:{args.port} is in use; choose another port with --port", file=sys.stderr)
        return 2
    except (StateDirError, SettingsError) as exc:
        print(f"canvas serve: {exc}", file=sys.stderr)
        return 2
    try:
        print(f"Canvas Run Service listening on {stack.base_url}", file=out, flush=True)
        if stack.generated_key:
            print(f"API key: {stack.generated_key}", file=out, flush=True)
        if args.state_dir is None:
            print(
                "State is kept in memory and lost when this process stops (--state-dir DIR keeps it)",
                file=out,
                flush=True,
            )
        else:
            print(f"State is kept in {args.state_dir}", file=out, flush=True)
        if log_file is not None:
            print(f"Logs (JSON) and metrics: {log_file} (--log-format json prints them here)", file=out, flush=True)
        print(f"Developer portal: {stack.base_url}/portal", file=out, flush=True)
        if args.public_url:
            print(f"Download links start with {args.public_url}", file=out, flush=True)
        print(f"AWS endpoint (for admin commands' --endpoint-url): {stack.endpoint_url}", file=out, flush=True)
        if faults:
            print(f"Injecting AWS's failures: {faults}", file=out, flush=True)
        while not stopping.wait(1):
            pass
        print("Shutting down: runs in flight are ended as failed", file=out, flush=True)
    finally:
        stack.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if hasattr(args, "client_command"):
        client_command: Callable[[argparse.Namespace], int] = args.client_command
        return client_command(args)
    if hasattr(args, "admin_command"):
        return admin.run(args)
    # moto's server and the AWS clients log every call the handlers make; the front door's log says what
    # the client did, and the handlers log through Powertools.
    for noisy in ("werkzeug", "httpx", "botocore", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # moto's interpreter logs as an error every IsPresent check that finds nothing (the state machine routes
    # each block with one); a block's real failure is logged by the Lambda runtime and kept on the run.
    logging.getLogger("moto.stepfunctions.parser.asl.component.eval_component").setLevel(logging.CRITICAL)
    # ... and every branch of a Parallel state it starts and ends, at INFO.
    logging.getLogger("moto.stepfunctions.parser.asl.component.state.exec.state_parallel").setLevel(logging.WARNING)
    return serve(args)


if __name__ == "__main__":
    sys.exit(main())
