"""scripts/lock_requirements.py: every requirements.txt has a lock that pins each requirement within its range; it
covers the embedded stack too: local/requirements.lock pins pyproject.toml's `local` extra within its ranges, and
the packages whose internals the stack patches (moto) are pinned to one version."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import textwrap
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


def write_project(root: Path, moto: str, pins: str | None) -> None:
    (root / "pyproject.toml").write_text(
        textwrap.dedent(f"""
        [project]
        name = "canvas-run-service"
        [project.optional-dependencies]
        local = [
            "canvas-run-service[blocks]",
            "{moto}",
            "jsonpath-ng>=1.16",
        ]
        """)
    )
    if pins is not None:
        (root / "local").mkdir(exist_ok=True)
        (root / "local" / "requirements.lock").write_text(pins)


def test_a_local_lock_with_moto_pinned_exactly_passes(root):
    # Given moto pinned exactly and a lock that agrees
    write_project(root, "moto[server,s3]==5.2.5", "moto==5.2.5\njsonpath-ng==1.16.0\nwerkzeug==3.1.9\n")

    # When the locks are checked
    # Then there is no problem, and the project's reference to itself is not a requirement to pin
    assert lock.local_problems() == []
    assert [r.name for r in lock.local_requirements()] == ["moto", "jsonpath-ng"]


@pytest.mark.parametrize(
    ("moto", "pins", "problem"),
    [
        ("moto[server]==5.2.5", None, "local/requirements.lock: missing (make lock)"),
        ("moto[server]==5.2.5", "jsonpath-ng==1.16.0\n", "local/requirements.lock: moto is not pinned (make lock)"),
        (
            "moto[server]==5.2.6",
            "moto==5.2.5\njsonpath-ng==1.16.0\n",
            "local/requirements.lock: moto==5.2.5 is outside moto[server]==5.2.6 (make lock)",
        ),
        (
            "moto[server]>=5.2.5,<5.3",
            "moto==5.2.5\njsonpath-ng==1.16.0\n",
            "pyproject.toml: moto[server]<5.3,>=5.2.5 must pin one version (==): the embedded stack patches it",
        ),
        (
            "moto[server]==5.2.*",
            "moto==5.2.5\njsonpath-ng==1.16.0\n",
            "pyproject.toml: moto[server]==5.2.* must pin one version (==): the embedded stack patches it",
        ),
    ],
)
def test_a_local_lock_or_moto_pin_that_does_not_hold_is_a_problem(root, moto, pins, problem):
    # Given pyproject.toml's local extra and its lock
    write_project(root, moto, pins)

    # When the locks are checked
    # Then the problem is named
    assert lock.local_problems() == [problem]


def test_the_repository_pins_the_moto_it_runs():
    # Given the repository's pyproject.toml and local/requirements.lock
    # Then they agree, moto is pinned exactly
    assert lock.local_problems() == []
    (moto,) = [r for r in lock.local_requirements() if r.name == "moto"]
    pins = lock.read_lock(ROOT / "local" / "requirements.lock")
    assert str(moto.specifier) == f"=={pins['moto']}"
    # And the moto these tests run on is that version
    assert importlib.metadata.version("moto") == pins["moto"]
