"""The README's commands, run as written on a fresh copy of the repository against `canvas serve`.

The README marks what is meant to be run with an HTML comment before the code block:
`<!-- readme-test: serve -->` (the `make run ARGS="..."` line: its ARGS start `canvas serve`; `make run` and
`make test` themselves are not run, this test runs inside `make test`), `<!-- readme-test: run -->` (bash, run in
order in one shell, as in one terminal) and `<!-- readme-test: file NAME -->` (saved as NAME, as the README asks).
The shell is a new terminal's: the copy's folder, no virtual environment active, no CANVAS_* variables. The test's
`canvas serve` listens on a free port, not the README's 3000, and the one line that names the service's address
(`export CANVAS_BASE_URL=http://127.0.0.1:3000`) is edited to it, as a reader on another port does; no other command
names the port. A command that fails, or an answer in the error shape, fails the test, naming the README line of its
block; so does anything the commands leave in the copy that git would see."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.conftest import canvas_serve

pytestmark = [pytest.mark.e2e, pytest.mark.serial, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
LOCAL_URL = "http://127.0.0.1:3000"
# The README's one line naming the service's address, which a reader on another port edits.
BASE_URL_LINE = re.compile(r"^export CANVAS_BASE_URL=http://127\.0\.0\.1:3000(?=\s)", re.M)
MARKED = re.compile(
    r"^<!-- readme-test: (?P<kind>serve|run|file (?P<name>[\w.-]+))\b[^>]*-->\n```(?P<lang>\w*)\n(?P<body>.*?)^```$",
    re.M | re.S,
)
# What a command prints when it went wrong without failing (curl exits 0 on an error answer).
FAILED_OUTPUT = re.compile(r'"success":\s*false|Traceback \(most recent call last\)|command not found')


@dataclass(frozen=True)
class Block:
    kind: str  # serve, run or file
    line: int  # of the README, where the code starts
    body: str
    name: str | None = None


def marked_blocks(text: str) -> list[Block]:
    return [
        Block(
            kind=m["kind"].split()[0],
            line=text.count("\n", 0, m.start("body")) + 1,
            body=m["body"],
            name=m["name"],
        )
        for m in MARKED.finditer(text)
    ]


def serve_args(blocks: list[Block]) -> list[str]:
    """The ARGS of the README's `make run ARGS="..."`, for `canvas serve`."""
    [serve] = [b for b in blocks if b.kind == "serve"]
    match = re.search(r'^make run ARGS="([^"]*)"', serve.body, re.M)
    assert match, f'README line {serve.line}: the serve block is not `make run ARGS="..."`'
    return shlex.split(match[1])


def script(blocks: list[Block], base_url: str) -> str:
    """One shell script of the run and file blocks, in the README's order, each announced by its line."""
    # -e: the first command that fails stops the run. No pipefail, as in a terminal: `curl | grep -q` may end curl
    # early by design.
    parts = ["set -e"]
    for block in (b for b in blocks if b.kind != "serve"):
        body = BASE_URL_LINE.sub(f"export CANVAS_BASE_URL={base_url}", block.body)
        # On a line of its own: curl's answers end without a newline.
        parts.append(f"printf '\\n>>> README line {block.line}\\n'")
        if block.kind == "file":
            parts.append(f"cat > {shlex.quote(str(block.name))} <<'README_FILE_END'\n{body}README_FILE_END")
        elif block.kind == "run":
            parts.append(body)
    return "\n".join(parts) + "\n"


def fresh_copy(destination: Path) -> Path:
    """The repository's tracked files as they are in the working tree, committed in a repository of their own as a
    clone's are, and the `.venv` that `make run` makes."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    git(destination, "init", "--quiet")
    git(destination, "add", "--all")
    git(destination, "commit", "--quiet", "--message", "The working tree's tracked files")
    (destination / ".venv").symlink_to(ROOT / ".venv")
    # `make run` makes .venv a folder, which .gitignore's `.venv/` covers; here it is a link, which that does not.
    with open(destination / ".git" / "info" / "exclude", "a", encoding="utf-8") as exclude:
        exclude.write("/.venv\n")
    return destination


def git(folder: Path, *args: str) -> str:
    identity = ["-c", "user.name=README test", "-c", "user.email=readme-test@example.invalid"]
    return subprocess.run(["git", *identity, *args], cwd=folder, capture_output=True, text=True, check=True).stdout


def new_terminal(home: Path) -> dict[str, str]:
    """A new terminal's environment: no virtual environment on PATH, nothing of this test run's settings. pip may
    not reach an index: what the README installs must be there already (`make test` installs it), offline."""
    venv_bin = str(Path(sys.executable).parent)
    path = ":".join(p for p in os.environ.get("PATH", "/usr/bin:/bin").split(":") if p and p != venv_bin)
    return {
        "PATH": path,
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "PIP_NO_INDEX": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }


def run_readme(blocks: list[Block], base_url: str, folder: Path, home: Path) -> str:
    """Run the blocks; their output, or an AssertionError naming the README line whose block went wrong."""
    result = subprocess.run(
        ["bash", "-c", script(blocks, base_url)],
        cwd=folder,
        env=new_terminal(home),
        capture_output=True,
        text=True,
        timeout=240,
    )
    output = result.stdout + result.stderr
    sections = re.split(r"^>>> (README line \d+)\n", result.stdout, flags=re.M)
    where = sections[-2] if len(sections) > 1 else "before the first block"  # the last block that started
    if result.returncode != 0:
        raise AssertionError(f"{where}: exit code {result.returncode}\n{output[-3000:]}")
    for label, text in zip(sections[1::2], sections[2::2], strict=True):
        if bad := FAILED_OUTPUT.search(text):
            raise AssertionError(f"{label}: printed {bad[0]!r}\n{text[-3000:]}")
    if bad := FAILED_OUTPUT.search(result.stderr):
        raise AssertionError(f"{where}: printed {bad[0]!r} on stderr\n{result.stderr[-3000:]}")
    return result.stdout


def test_the_readme_marks_the_serve_line_and_commands_that_use_the_local_service():
    # Given the README's marked blocks
    text = README.read_text("utf-8")
    blocks = marked_blocks(text)

    # Then the first is the `make run` line, whose ARGS canvas serve takes, and commands and a file follow it
    assert blocks and blocks[0].kind == "serve"
    assert "--api-key" in serve_args(blocks)
    assert sum(b.kind == "run" for b in blocks) >= 4 and any(b.kind == "file" for b in blocks)
    # And every block that talks to the local service is one the test runs, but for how to start it
    unmarked = [
        body
        for lang, body in re.findall(r"^```(\w*)\n(.*?)^```$", text, re.M | re.S)
        if LOCAL_URL in body and not any(body == b.body for b in blocks)
    ]
    starting = [body for body in unmarked if re.search(r"^\s*(\w+=\S+ +)*(make run|\S*canvas serve)", body, re.M)]
    assert unmarked == starting, "README blocks use the local service but are not run by this test"


def test_the_readme_names_the_services_address_once_for_the_commands_to_read():
    # Given the README's commands and the programs it saves to run
    blocks = marked_blocks(README.read_text("utf-8"))
    run = [b for b in blocks if b.kind == "run" or (b.kind == "file" and str(b.name).endswith(".py"))]

    # Then one line sets CANVAS_BASE_URL to the address `make run` serves, and nothing else names that address
    assert sum(len(BASE_URL_LINE.findall(b.body)) for b in run) == 1
    naming = [b.line for b in run if LOCAL_URL in BASE_URL_LINE.sub("", b.body)]
    assert not naming, f"README blocks at lines {naming} name {LOCAL_URL}: read $CANVAS_BASE_URL instead"


def test_a_command_that_fails_fails_the_run_naming_its_readme_line(tmp_path):
    # Given a README whose second block runs a command that does not exist
    text = (
        '<!-- readme-test: serve -->\n```bash\nmake run ARGS="--api-key k"\n```\n\n'
        "<!-- readme-test: run -->\n```bash\necho fine\n```\n\n"
        "<!-- readme-test: run -->\n```bash\ncanvas-no-such-command --help\necho never\n```\n"
    )
    blocks = marked_blocks(text)

    # When it is run
    with pytest.raises(AssertionError) as failed:
        run_readme(blocks, LOCAL_URL, tmp_path, tmp_path)

    # Then the failure names the block's line
    assert "README line 13: exit code 127" in str(failed.value)  # the line of its first command


def test_an_error_answer_fails_the_run_though_curl_exits_0(tmp_path):
    blocks = marked_blocks('<!-- readme-test: run -->\n```bash\necho \'{"success": false, "error": "x"}\'\n```\n')
    with pytest.raises(AssertionError, match="README line 3: printed"):
        run_readme(blocks, LOCAL_URL, tmp_path, tmp_path)


def test_the_readmes_commands_work_as_written_on_a_fresh_copy(tmp_path):
    # Given a fresh copy of the repository, set up as `make run` leaves it, and the service its README starts, on a
    # free port other than the README's
    blocks = marked_blocks(README.read_text("utf-8"))
    folder = fresh_copy(tmp_path / "canvas-run-service")
    home = tmp_path / "home"
    home.mkdir()
    with canvas_serve(*serve_args(blocks)) as served:
        assert served.base_url.startswith("http://127.0.0.1:") and served.base_url != LOCAL_URL
        # When the README's commands run in a new terminal in that folder, as written
        output = run_readme(blocks, served.base_url, folder, home)

    # Then every one worked: the runs' answers were printed, their files saved where the README says, and the
    # webhook receiver it starts got a delivery whose signature checked out
    assert output.count("Offline answer") >= 3, output[-3000:]
    saved = sorted(p.name for p in (folder / "scratch" / "reports").iterdir())
    assert any(name.endswith(".docx") for name in saved), saved
    assert re.search(r"^webhook\.ping evt_\S+ signature ok$", output, re.M), output[-3000:]
    # And the copy is as clean as it was: what the commands wrote is in folders git ignores
    assert git(folder, "status", "--porcelain", "--untracked-files=all") == ""
