"""ZIP archives: every limit checked from the directory before anything is unpacked."""

from __future__ import annotations

import tracemalloc
import zipfile

import pytest

from canvas_core.gather.archive import (
    ArchiveError,
    ArchiveLimits,
    EncryptedArchiveError,
    UnsafeArchiveError,
    check_archive,
    read_members,
)
from tests.fakes import files

pytestmark = pytest.mark.unit


@pytest.fixture
def nothing_unpacked(monkeypatch):
    """Fails the test if any member is opened for reading."""

    def refuse(*args, **kwargs):
        raise AssertionError("a member was unpacked")

    monkeypatch.setattr(zipfile.ZipFile, "open", refuse)


@pytest.mark.parametrize(
    ("archive", "message"),
    [
        (files.overlapping_zip_bomb(), "looks like a zip bomb"),
        (files.overlapping_zip_bomb(kernel_bytes=1000, copies=3), "overlapping entries"),
        (files.ratio_zip_bomb(), "expands 1028 times (limit 100)"),
        (files.declared_entries(files.zip_of({"a.txt": b"a"}), 60_000), "has 60000 entries (limit 1000)"),
        (files.zip_of({"../../etc/cron.d/evil": b"x"}), "unsafe path: '../../etc/cron.d/evil'"),
        (files.zip_of({"/etc/passwd": b"x"}), "unsafe path"),
        (files.zip_of({"C:/Windows/evil.dll": b"x"}), "unsafe path"),
        (files.zip_of({"a/..\\..\\evil.txt": b"x"}), "unsafe path"),
        (files.symlink_zip(), "a symbolic link"),
    ],
)
def test_hostile_archives_are_refused_before_unpacking(nothing_unpacked, archive, message):
    with pytest.raises(UnsafeArchiveError) as refused:
        check_archive(archive, ArchiveLimits(), label="upload.zip")
    assert message in str(refused.value)
    assert str(refused.value).startswith("upload.zip")


def test_a_zip_bomb_is_refused_with_bounded_memory():
    # Given an archive of 33 KB that declares 4 GB
    bomb = files.overlapping_zip_bomb()
    # When
    tracemalloc.start()
    try:
        with pytest.raises(UnsafeArchiveError):
            list(read_members(bomb, ArchiveLimits()))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Then the work stayed within a few times the archive's own size
    assert peak < 2 * 1024 * 1024


def test_entry_count_total_size_and_ratio_limits_are_the_settings(monkeypatch):
    # Given tight limits from the environment
    monkeypatch.setenv("ZIP_MAX_ENTRIES", "2")
    monkeypatch.setenv("ZIP_MAX_TOTAL_BYTES", "100")
    limits = ArchiveLimits.from_settings()
    # Then
    with pytest.raises(UnsafeArchiveError, match=r"has 3 entries \(limit 2\)"):
        check_archive(files.zip_of({"a": b"1", "b": b"2", "c": b"3"}), limits)
    with pytest.raises(UnsafeArchiveError, match="unpacks to more than 100 bytes"):
        check_archive(files.zip_of({"a": b"x" * 101}), limits)


def test_an_encrypted_archive_is_refused():
    with pytest.raises(EncryptedArchiveError, match="encrypted"):
        check_archive(files.encrypted_member_zip())


def test_unsupported_compression_is_refused():
    with pytest.raises(UnsafeArchiveError, match="compression method"):
        check_archive(files.zip_of({"a.txt": b"hello"}, zipfile.ZIP_BZIP2))


def test_a_member_that_unpacks_past_its_declared_size_is_stopped():
    # Given an archive whose directory understates a member's size
    raw = bytearray(files.zip_of({"a.txt": b"y" * 5000}))
    cd = raw.find(b"PK\x01\x02")
    raw[cd + 24 : cd + 28] = (10).to_bytes(4, "little")
    # Then reading it stops with a reason, not with 5000 bytes
    with pytest.raises(ArchiveError):
        list(read_members(bytes(raw)))


def test_not_a_zip_is_refused():
    with pytest.raises(ArchiveError, match="not a readable ZIP archive"):
        check_archive(b"just text")


def test_members_are_read_with_their_names_and_junk_left_out():
    archive = files.zip_of({"docs/a.txt": b"alpha", "__MACOSX/docs/._a.txt": b"junk", "docs/": b""})
    assert [(m.name, m.data) for m in read_members(archive)] == [("docs/a.txt", b"alpha")]
