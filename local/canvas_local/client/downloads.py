"""Saving a run's artifacts: each to `<name>.part`, checked against its `size_bytes`, then given its name, never
over a file that is there (`report.docx` is saved as `report-2.docx` when `report.docx` exists)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from canvas_local.client.http import CanvasClient, CanvasError

PART_SUFFIX = ".part"


def safe_name(name: str, fallback: str) -> str:
    """The artifact's file name without any directory part: a name from the service never leaves `--out`."""
    name = name.replace("\\", "/").rsplit("/", 1)[-1].strip()
    name = "".join(c for c in name if c.isprintable())
    return name if name not in ("", ".", "..") else fallback


def candidates(directory: Path, name: str) -> Iterator[Path]:
    """`name`, then `<stem>-2<suffix>`, `<stem>-3<suffix>`, … in `directory`."""
    path = Path(name)
    stem, suffix = (path.stem, path.suffix) if path.stem else (name, "")
    yield directory / name
    for number in itertools.count(2):
        yield directory / f"{stem}-{number}{suffix}"


def unique_path(directory: Path, name: str) -> Path:
    """The first candidate that is free: neither the file nor its `.part` exists."""
    return next(p for p in candidates(directory, name) if not _taken(p))


def download_artifact(client: CanvasClient, artifact: dict[str, Any], directory: Path) -> Path:
    """Save one artifact in `directory`; the path it was saved as."""
    name = safe_name(str(artifact.get("name") or ""), fallback=str(artifact.get("id") or "artifact"))
    part = _claim_part(directory, name)
    try:
        size = client.download(artifact["download_url"], part)
        expected = artifact.get("size_bytes")
        if expected is not None and size != expected:
            raise CanvasError(f"download of {name} is incomplete: {size} bytes of {expected}")
        return _publish(part, directory, name)
    finally:
        part.unlink(missing_ok=True)


def _taken(path: Path) -> bool:
    return path.exists() or path.with_name(path.name + PART_SUFFIX).exists()


def _claim_part(directory: Path, name: str) -> Path:
    """Create `<candidate>.part` for the first free candidate, exclusively: two downloads never share one."""
    for path in candidates(directory, name):
        if _taken(path):
            continue
        part = path.with_name(path.name + PART_SUFFIX)
        try:
            part.open("xb").close()
        except FileExistsError:
            continue
        return part
    raise AssertionError("unreachable: candidates never end")


def _publish(part: Path, directory: Path, name: str) -> Path:
    """Give the downloaded `part` the name it was claimed for, or the next free one if a file of that name
    appeared meanwhile. A hard link fails rather than replace a file; where links are not supported, a checked
    rename does."""
    for path in candidates(directory, name):
        if path.exists() or (path.with_name(path.name + PART_SUFFIX) != part and _taken(path)):
            continue
        try:
            os.link(part, path)
        except FileExistsError:
            continue
        except OSError:
            if path.exists():
                continue
            part.rename(path)
        return path
    raise AssertionError("unreachable: candidates never end")
