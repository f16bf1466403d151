"""Cold-import time of the built functions (`make build`: .aws-sam/build) as Lambda loads them.

Each function is laid out as Lambda unpacks it: its folder as /var/task, the shared layer's `python` folder as
/opt/python, every file dated 1980-01-01 (the timestamp `sam build`'s zips give them), read-only, and imported by
a fresh interpreter that writes no bytecode (-B), sees no site-packages (-S) and no PYTHON* variables (-E), in
the environment the template gives the function. Each figure is the median of interleaved samples:

- `import boto3` from the layer (which ships boto3 and botocore, at one pinned version);
- the poll handler (GetRunFunction's `app`), the figure the target is about (within 1.5x of boto3), and the same
  with the DynamoDB and S3 clients its first request builds (boto3 is imported with the first of them);
- a heavy block (PresentationBlockFunction's `app`, with its two layers: the shared one and DuckDB's), and the
  same block with python-pptx imported as its first run does;
- the poll handler again without the built bytecode (as `sam build` made it before the bytecode step), to show
  what that step saves.

On a machine that is not arm64, the packages with compiled extensions (pydantic-core, wrapt, lxml, Pillow, ...)
cannot load from the arm64 build: the same pinned versions for this machine are installed once into
.aws-sam/bench-native/ (pip, bytecode compiled the same way) and put ahead of the layer; everything else, the
bulk of what is imported, is the built artifact.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / ".aws-sam" / "build"
SAMPLES = 15
SAMPLES_WITHOUT_BYTECODE = 5
ZIP_EPOCH = 315532800  # 1980-01-01T00:00:00Z

_TIMED_IMPORT = """
import sys, time
sys.path[:0] = {paths!r}
start = time.perf_counter()
for name in {modules!r}:
    __import__(name)
{then}
print((time.perf_counter() - start) * 1000)
"""

# What the poll handler's first request builds before its first call to AWS: its DynamoDB and S3 clients.
_FIRST_CLIENTS = """
from canvas_core.adapters.aws import client
client("dynamodb"), client("s3")
"""


def environment(logical_id: str) -> dict[str, str]:
    """What template.yaml gives the function (its entry and Globals, resources named as the embedded stack names
    them): its handler reads its settings as it is imported, as Lambda's cold start does."""
    from canvas_local.template import Template

    return Template(ROOT / "template.yaml").function_environment(logical_id)


def unpack(source: Path, target: Path, bytecode: bool = True) -> Path:
    """A copy of a built folder as Lambda would unpack it: 1980 timestamps, read-only."""
    shutil.copytree(source, target, ignore=None if bytecode else shutil.ignore_patterns("__pycache__"))
    for path in [target, *target.rglob("*")]:
        os.utime(path, (ZIP_EPOCH, ZIP_EPOCH), follow_symlinks=False)
    for path in [*target.rglob("*"), target]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode & 0o555)
    return target


def native_distributions(site: Path) -> list[str]:
    """`name==version` of the distributions under `site` that ship compiled extensions for another machine."""
    found = []
    for info in sorted(site.glob("*.dist-info")):
        record = (info / "RECORD").read_text(encoding="utf-8") if (info / "RECORD").is_file() else ""
        if ".so," in record and platform.machine() not in record:
            name, version = info.name[: -len(".dist-info")].rsplit("-", 1)
            found.append(f"{name}=={version}")
    return found


def native_overlay(*sites: Path) -> list[str]:
    """A folder with this machine's builds of the native distributions of `sites` ([] when none are needed)."""
    wanted = sorted({spec for site in sites for spec in native_distributions(site)})
    if not wanted:
        return []
    overlay = ROOT / ".aws-sam" / "bench-native" / hashlib.sha256(" ".join(wanted).encode()).hexdigest()[:12]
    if not overlay.is_dir():
        staging = overlay.with_suffix(".partial")
        shutil.rmtree(staging, ignore_errors=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
             "--only-binary=:all:", "--target", str(staging), *wanted],
            check=True,
        )  # fmt: skip
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash", staging],
            check=True,
        )
        staging.rename(overlay)
    return [str(overlay)]


def import_ms(modules: list[str], paths: list[str], environment: dict[str, str], then: str = "") -> float:
    """One cold import of `modules` (and `then`, code run after them), in milliseconds, in a fresh interpreter."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "AWS_DEFAULT_REGION": "us-east-1",
        # Lambda's own credentials arrive as variables too: a client built without them would ask the instance
        # metadata service.
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "POWERTOOLS_SERVICE_NAME": "canvas-run-service",
        **environment,
    }
    out = subprocess.run(
        [sys.executable, "-B", "-S", "-E", "-c", _TIMED_IMPORT.format(paths=paths, modules=modules, then=then)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=paths[-1],
    )
    return float(out.stdout.strip())


def make_writable(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o200)


def main() -> None:
    if not (BUILD / "SharedLayer" / "python").is_dir() or not (BUILD / "GetRunFunction").is_dir():
        # The other benchmarks need no build: say why there are no figures, and let them run.
        print("cold_import: skipped, no built artifacts in .aws-sam/build (run `make build` first)", file=sys.stderr)
        return
    scratch = Path(tempfile.mkdtemp(prefix="canvas-cold-import-"))
    try:
        # Lambda's order: /var/task, then /opt/python; this machine's native builds, when needed, come first.
        duckdb_layer = BUILD / "DuckDbLayer" / "python"
        native = native_overlay(BUILD / "SharedLayer" / "python", BUILD / "PresentationBlockFunction", duckdb_layer)
        opt = str(unpack(BUILD / "SharedLayer" / "python", scratch / "opt" / "python"))
        layer = [*native, opt]
        poll = [*native, str(unpack(BUILD / "GetRunFunction", scratch / "poll")), opt]
        # A block function's layers, as Lambda lays them out: the shared layer, then DuckDB's.
        duckdb = str(unpack(duckdb_layer, scratch / "duckdb" / "python"))
        block = [*native, str(unpack(BUILD / "PresentationBlockFunction", scratch / "block")), opt, duckdb]
        stale_opt = str(unpack(BUILD / "SharedLayer" / "python", scratch / "stale" / "python", bytecode=False))
        stale_poll = [*native, str(unpack(BUILD / "GetRunFunction", scratch / "stale-poll", bytecode=False)), stale_opt]

        poll_env, block_env = environment("GetRunFunction"), environment("PresentationBlockFunction")
        figures = ("boto3", "poll", "poll_clients", "block", "block_pptx")
        samples: dict[str, list[float]] = {name: [] for name in figures}
        # Interleaved, so that the machine's drift weighs on all alike.
        for _ in range(SAMPLES):
            samples["boto3"].append(import_ms(["boto3"], layer, {}))
            samples["poll"].append(import_ms(["app"], poll, poll_env))
            samples["poll_clients"].append(import_ms(["app"], poll, poll_env, then=_FIRST_CLIENTS))
            samples["block"].append(import_ms(["app"], block, block_env))
            samples["block_pptx"].append(import_ms(["app", "pptx"], block, block_env))
        stale = [import_ms(["app"], stale_poll, poll_env) for _ in range(SAMPLES_WITHOUT_BYTECODE)]
    finally:
        make_writable(scratch)
        shutil.rmtree(scratch, ignore_errors=True)

    boto3_ms, poll_ms = statistics.median(samples["boto3"]), statistics.median(samples["poll"])
    print(f"cold_import_boto3_ms {boto3_ms:.0f}")
    print(f"cold_import_poll_handler_ms {poll_ms:.0f}")
    print(f"cold_import_ratio {poll_ms / boto3_ms:.2f}")
    print(f"cold_import_poll_handler_with_clients_ms {statistics.median(samples['poll_clients']):.0f}")
    print(f"cold_import_presentation_block_ms {statistics.median(samples['block']):.0f}")
    print(f"cold_import_presentation_block_with_pptx_ms {statistics.median(samples['block_pptx']):.0f}")
    print(f"cold_import_poll_handler_without_bytecode_ms {statistics.median(stale):.0f}")


if __name__ == "__main__":
    main()
