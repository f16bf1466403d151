"""`canvas serve` where its port is already taken: one line that says so, exit status 2, nothing started."""

from __future__ import annotations

import logging
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from canvas_local import cli
from tests.support import ROOT

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]

# What `main` changes for the whole process before serving.
CLI_LOGGERS = ("werkzeug", "httpx", "botocore", "urllib3", "moto.stepfunctions.parser.asl.component.eval_component")


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another process is listening on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.fixture
def process_settings() -> Iterator[None]:
    """Signal handlers and logger levels as they were: `serve` sets both for the process."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    levels = {name: logging.getLogger(name).level for name in CLI_LOGGERS}
    yield
    for sig, handler in handlers.items():
        signal.signal(sig, handler)
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


def test_serve_on_a_taken_port_says_so_in_one_line_and_returns_2(taken_port, process_settings, capsys):
    # Given a port another process listens on
    # When `canvas serve` is asked to use it
    status = cli.main(["serve", "--host", "127.0.0.1", "--port", str(taken_port)])

    # Then it prints one line naming the address and the way out, and exits 2
    out, err = capsys.readouterr()
    assert status == 2
    assert err.splitlines() == [
        f"canvas serve: 127.0.0.1:{taken_port} is in use; choose another port with --port",
    ]
    assert out == ""


def test_serve_on_a_taken_port_prints_only_that_line_as_a_command(taken_port):
    # Given a port another process listens on
    # When `canvas serve` runs as a command on it
    finished = subprocess.run(
        [sys.executable, "-m", "canvas_local.cli", "serve", "--port", str(taken_port)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=45,
    )

    # Then the user sees one line and exit status 2, with no traceback and no log
    assert finished.returncode == 2
    assert finished.stderr.splitlines() == [
        f"canvas serve: 127.0.0.1:{taken_port} is in use; choose another port with --port",
    ]
    assert finished.stdout == ""


def test_serve_with_a_state_dir_it_cannot_read_says_so_in_one_line_and_returns_2(tmp_path, process_settings, capsys):
    # Given a state directory whose snapshot is not one canvas wrote
    (tmp_path / "snapshot").mkdir()
    (tmp_path / "snapshot" / "manifest.json").write_text("not json")

    # When `canvas serve` is started on it
    status = cli.main(["serve", "--host", "127.0.0.1", "--port", "0", "--state-dir", str(tmp_path)])

    # Then it says what is wrong with the directory in one line, and exits 2 with nothing left running
    _, err = capsys.readouterr()
    assert status == 2
    [line] = [line for line in err.splitlines() if line.startswith("canvas serve:")]
    assert str(tmp_path / "snapshot") in line


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_serve_limits_malloc_arenas_on_glibc():
    # Given glibc's malloc; When the arenas are limited as `serve` limits them; Then glibc accepts it
    assert cli.limit_malloc_arenas() is True


# In a process of its own, so this one's malloc keeps its settings: a 4 MiB chunk is freed (glibc then raises its
# mmap threshold to 4 MiB by default), and a 1 MiB allocation follows; mallinfo2 says whether it got its own mapping.
_MMAP_PROBE = """
import ctypes, sys
from canvas_local.cli import fix_mmap_threshold
libc = ctypes.CDLL("libc.so.6")
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                                                "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "fixed":
    assert fix_mmap_threshold()
libc.free(libc.malloc(4 << 20))
before = libc.mallinfo2().hblkhd
chunk = libc.malloc(1 << 20)
print("mapped" if libc.mallinfo2().hblkhd - before >= 1 << 20 else "heap")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt and mallinfo2")
@pytest.mark.parametrize(("setting", "where"), [("default", "heap"), ("fixed", "mapped")])
def test_serve_keeps_large_allocations_in_their_own_mappings_after_a_larger_one_is_freed(setting, where):
    # Given glibc's malloc, as it starts or with the threshold `serve` fixes
    # When a 4 MiB buffer is freed and a 1 MiB one allocated
    probe = subprocess.run(
        [sys.executable, "-c", _MMAP_PROBE, setting],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={"PYTHONPATH": str(ROOT / "local"), "PATH": "/usr/bin:/bin"},
    )
    # Then by default glibc has raised its threshold and serves it from the heap; fixed, it still gets a mapping of
    # its own, given back to the system when freed
    assert probe.stdout.strip() == where
