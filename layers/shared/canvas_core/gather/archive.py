"""ZIP archives read safely: every limit is checked from the archive's directory before a byte is unpacked,
so a zip bomb is refused at once, with bounded work and memory.

Checked first: the entry count the end record declares (before the directory is parsed), then for each
entry its path (no absolute paths, `..`, drive letters, backslashes or links), its encryption, its
compression method (stored or deflated: those unpack in bounded steps), its compression ratio, the total
uncompressed size, and that no two entries share bytes (the overlapping-entry bomb). Members are then read
in memory (nothing is written to disk) and never past the size they declared.
Also used on the ZIP containers of DOCX and XLSX before their libraries open them.
"""

from __future__ import annotations

import io
import stat
import struct
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass

from canvas_core.settings import GatherSettings, gather_settings

EOCD = b"PK\x05\x06"
ZIP64_LOCATOR = b"PK\x06\x07"
# Small members compress well by nature; a ratio only says "bomb" once the member is large.
RATIO_FLOOR_BYTES = 1024 * 1024
JUNK = ("__MACOSX/", ".DS_Store", "Thumbs.db")


class ArchiveError(Exception):
    """The archive cannot be read; the message says why."""


class UnsafeArchiveError(ArchiveError):
    """Refused before unpacking: over a limit, or a path that escapes the archive."""


class EncryptedArchiveError(ArchiveError):
    pass


@dataclass(frozen=True)
class ArchiveLimits:
    max_entries: int = 1000
    max_total_bytes: int = 50 * 1024 * 1024
    max_ratio: int = 100

    @classmethod
    def from_settings(cls, settings: GatherSettings | None = None) -> ArchiveLimits:
        s = settings or gather_settings()
        return cls(max_entries=s.zip_max_entries, max_total_bytes=s.zip_max_total_bytes, max_ratio=s.zip_max_ratio)


@dataclass
class Member:
    name: str
    data: bytes


def check_archive(
    data: bytes, limits: ArchiveLimits | None = None, label: str = "The archive"
) -> list[zipfile.ZipInfo]:
    """The archive's file entries, once every limit holds; raises an ArchiveError otherwise. Unpacks nothing."""
    limits = limits or ArchiveLimits.from_settings()
    declared = _declared_entries(data, label)
    if declared > limits.max_entries:
        raise UnsafeArchiveError(f"{label} has {declared} entries (limit {limits.max_entries})")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, EOFError) as exc:
        raise ArchiveError(f"{label} is not a readable ZIP archive ({exc})") from exc
    infos = archive.infolist()
    if len(infos) > limits.max_entries:
        raise UnsafeArchiveError(f"{label} has {len(infos)} entries (limit {limits.max_entries})")
    total = 0
    for info in infos:
        _check_path(info, label)
        if info.flag_bits & 0x1:
            raise EncryptedArchiveError(f"{label} is encrypted (password-protected entry {info.filename!r})")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise UnsafeArchiveError(
                f"{label} uses a compression method that is not supported ({info.compress_type}) for {info.filename!r}"
            )
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > RATIO_FLOOR_BYTES and ratio > limits.max_ratio:
            raise UnsafeArchiveError(
                f"{label} looks like a zip bomb: {info.filename!r} expands {ratio:.0f} times (limit {limits.max_ratio})"
            )
        total += info.file_size
        if total > limits.max_total_bytes:
            raise UnsafeArchiveError(
                f"{label} unpacks to more than {limits.max_total_bytes} bytes (limit ZIP_MAX_TOTAL_BYTES)"
            )
    _check_no_overlap(infos, len(data), label)
    return [i for i in infos if not i.is_dir()]


def read_members(data: bytes, limits: ArchiveLimits | None = None, label: str = "The archive") -> Iterator[Member]:
    """Each file of a checked archive with its bytes (system junk such as __MACOSX/ is left out)."""
    infos = check_archive(data, limits, label)
    archive = zipfile.ZipFile(io.BytesIO(data))
    for info in infos:
        if info.filename.startswith(JUNK) or info.filename.rsplit("/", 1)[-1] in JUNK:
            continue
        yield Member(name=info.filename, data=_read_bounded(archive, info, label))


def _read_bounded(archive: zipfile.ZipFile, info: zipfile.ZipInfo, label: str) -> bytes:
    chunks, total = [], 0
    try:
        with archive.open(info) as stream:
            while chunk := stream.read(64 * 1024):
                total += len(chunk)
                if total > info.file_size:
                    raise UnsafeArchiveError(f"{label}: {info.filename!r} unpacks past the size it declares")
                chunks.append(chunk)
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        raise ArchiveError(f"{label}: {info.filename!r} is damaged ({exc})") from exc
    return b"".join(chunks)


def _declared_entries(data: bytes, label: str) -> int:
    """The entry count of the end-of-central-directory record, read without parsing the directory."""
    at = data.rfind(EOCD, max(0, len(data) - 65_557))
    if at < 0 or at + 22 > len(data):
        raise ArchiveError(f"{label} is not a readable ZIP archive (no end record)")
    entries: int
    (entries,) = struct.unpack("<H", data[at + 10 : at + 12])
    if entries == 0xFFFF and data[at - 20 : at - 16] == ZIP64_LOCATOR:
        (offset,) = struct.unpack("<Q", data[at - 12 : at - 4])
        if offset + 40 <= len(data):
            (entries,) = struct.unpack("<Q", data[offset + 32 : offset + 40])
    return entries


def _check_path(info: zipfile.ZipInfo, label: str) -> None:
    name = info.orig_filename
    parts = name.replace("\\", "/").split("/")
    if (
        "\\" in name
        or "\x00" in name
        or name.startswith("/")
        or (len(name) > 1 and name[1] == ":")
        or any(part == ".." for part in parts)
    ):
        raise UnsafeArchiveError(f"{label} has an entry with an unsafe path: {name!r}")
    if stat.S_ISLNK(info.external_attr >> 16):
        raise UnsafeArchiveError(f"{label} has a symbolic link: {name!r}")


def _check_no_overlap(infos: list[zipfile.ZipInfo], size: int, label: str) -> None:
    ordered = sorted(infos, key=lambda i: i.header_offset)
    for current, following in zip(ordered, [*ordered[1:], None], strict=True):
        end = current.header_offset + 30 + current.compress_size
        limit = following.header_offset if following is not None else size
        if end > limit:
            raise UnsafeArchiveError(f"{label} has overlapping entries (a zip bomb): {current.filename!r}")
