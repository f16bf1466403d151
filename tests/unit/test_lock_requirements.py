"""scripts/lock_requirements.py: every requirements.txt has a lock that pins each requirement within its range."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def load_script():
    spec = importlib.util.spec_from_file_location("lock_requirements", ROOT / "scripts" / "lock_requirements.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lock = load_script()


def write(folder: Path, requirements: str, pins: str | None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "requirements.txt").write_text(requirements)
    if pins is not None:
        (folder / "requirements.lock").write_text(pins)
    return folder / "requirements.txt"


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setattr(lock, "ROOT", tmp_path)
    return tmp_path


def test_a_lock_within_the_ranges_passes(root):
    path = write(root / "f", "-c requirements.lock\npypdf>=5.0  # PDF\nPillow>=10\n", "pypdf==6.1.0\npillow==12.2.0\n")

    assert lock.problems_of(path) == []


@pytest.mark.parametrize(
    ("pins", "problem"),
    [
        (None, "missing"),
        ("pillow==12.2.0\n", "pypdf is not pinned"),
        ("pypdf==4.3.0\npillow==12.2.0\n", "pypdf==4.3.0 is outside pypdf>=5.0"),
    ],
)
def test_a_lock_that_does_not_match_is_a_problem(root, pins, problem):
    path = write(root / "f", "pypdf>=5.0\nPillow>=10\n", pins)

    [found] = lock.problems_of(path)
    assert problem in found


def test_the_repository_locks_match_their_ranges():
    assert [p for path in lock.requirement_files() for p in lock.problems_of(path)] == []
    # And the layer ships boto3 and botocore, both pinned (resolved together, so a pair boto3 accepts)
    pins = lock.read_lock(ROOT / "layers" / "shared" / "requirements.lock")
    assert {"boto3", "botocore", "s3transfer"} <= set(pins)
