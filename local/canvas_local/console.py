"""`canvas serve`'s console for a person: where it listens, a line per run start and end, warnings and errors on one
line each. The functions' JSON logs and embedded metrics, which Powertools writes to standard output, go to a log
file instead: `JsonLog` stands in for `sys.stdout` and watches the lines that pass."""

from __future__ import annotations

import io
import json
import logging
import threading
import time
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from canvas_local.stack import RunEnd

# What a function's JSON line must say to reach the console (the rest is in the log file only).
CONSOLE_LEVELS = {"WARNING", "ERROR", "CRITICAL"}
# The message CreateRunFunction logs, with the run's id among its keys, once the run is admitted (canvas_core/runs.py).
RUN_CREATED = "Run created"


class Console:
    """One line at a time to the person's terminal, whichever thread writes it."""

    def __init__(self, out: IO[str]):
        self._out = out
        self._lock = threading.Lock()

    def say(self, text: str) -> None:
        with self._lock:
            self._out.write(f"{time.strftime('%H:%M:%S')} {text}\n")
            self._out.flush()

    def run_started(self, run_id: str, template: str | None) -> None:
        self.say(f"run {run_id} started" + (f" ({template})" if template else ""))

    def run_ended(self, end: RunEnd) -> None:
        duration = f"{end.duration_seconds:.1f}s" if end.duration_seconds is not None else "?"
        self.say(f"run {end.run_id} {end.status} in {duration}, {end.credits} credits")


class JsonLog(io.TextIOBase):
    """Stands in for `sys.stdout`: every line goes to `log`; a JSON line at WARNING or above is also said on the
    console in one line, and a run's creation as its start. Lines are gathered per thread, since `print` writes a
    line and its newline apart."""

    def __init__(self, log: IO[str], console: Console):
        self._log = log
        self._console = console
        self._lock = threading.Lock()
        self._partial = threading.local()

    def write(self, text: str) -> int:
        pending: str = getattr(self._partial, "text", "") + text
        *lines, self._partial.text = pending.split("\n")
        if lines:
            with self._lock:
                self._log.write("".join(f"{line}\n" for line in lines))
                self._log.flush()
            for line in lines:
                self._watch(line)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            self._log.flush()

    def _watch(self, line: str) -> None:
        if not line.startswith("{"):
            return
        try:
            entry = json.loads(line)
        except ValueError:
            return
        if not isinstance(entry, dict) or "level" not in entry:
            return  # an embedded metric
        if entry.get("message") == RUN_CREATED and entry.get("run_id"):
            self._console.run_started(str(entry["run_id"]), entry.get("template"))
        elif entry["level"] in CONSOLE_LEVELS:
            self._console.say(one_line(entry))


def one_line(entry: dict[str, Any]) -> str:
    """A function's JSON log line as a person reads it: level, function, message, run, and the exception's last line."""
    where = entry.get("function_name") or entry.get("service") or ""
    text = f"{entry['level']} {where}: {entry.get('message', '')}".replace("\n", " ")
    if entry.get("run_id"):
        text += f" (run {entry['run_id']})"
    if entry.get("exception_name"):
        text += f" [{entry['exception_name']}]"
    return text


class OneLineFormatter(logging.Formatter):
    """The stack's own warnings and errors on one line each: a traceback is cut to its exception."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        bare = logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None, "stack_info": None})
        text = super().format(bare)
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            text += f" [{type(exc).__name__}: {exc}]"
        return text.replace("\n", " ")
