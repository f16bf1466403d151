"""How fast, and in how little memory, hostile ZIP uploads are refused by the file-block's extraction.

Three archives: an overlapping-entry zip bomb (a 10 MiB kernel of zeros that 400 directory entries point at:
about 30 KB that declare 4 GiB), a single member that expands a thousand times, and a path-traversal archive.
Each is refused by `canvas_core.gather.extract.extract` as a file-block would refuse it; the figures are the
median time over the samples and the peak memory Python allocated during one refusal (tracemalloc).
Target: each refused in under a second, with a peak under 4 MiB.
"""

from __future__ import annotations

import contextlib
import io
import statistics
import struct
import time
import tracemalloc
import zipfile

from canvas_core.gather.extract import ExtractionError, extract

SAMPLES = 20


def _zip(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def overlapping_bomb(kernel_bytes: int = 10 * 1024 * 1024, copies: int = 400) -> bytes:
    single = _zip({"kernel.bin": b"\0" * kernel_bytes})
    end = single.rfind(b"PK\x05\x06")
    cd_size, cd_offset = struct.unpack("<II", single[end + 12 : end + 20])
    entry = single[cd_offset : cd_offset + cd_size]
    directory = b"".join(entry.replace(b"kernel.bin", b"k%05d.bin" % i) for i in range(copies))
    record = (
        single[end : end + 8] + struct.pack("<HHII", copies, copies, len(directory), cd_offset) + single[end + 20 :]
    )
    return single[:cd_offset] + directory + record


def refusal(data: bytes) -> tuple[float, int, str]:
    """(median ms, peak bytes, the reason) of refusing the archive."""
    times = []
    for _ in range(SAMPLES):
        start = time.perf_counter()
        with contextlib.suppress(ExtractionError):
            extract("upload.zip", "zip", data)
        times.append((time.perf_counter() - start) * 1000)
    tracemalloc.start()
    try:
        extract("upload.zip", "zip", data)
        reason = "NOT REFUSED"
    except ExtractionError as exc:
        reason = str(exc)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return statistics.median(times), peak, reason


def main() -> None:
    archives = {
        "overlapping_bomb": overlapping_bomb(),
        "ratio_bomb": _zip({"zeros.bin": b"\0" * (8 * 1024 * 1024)}),
        "path_traversal": _zip({"docs/readme.txt": b"hello", "../../etc/cron.d/evil": b"* * * * * root sh"}),
    }
    for name, data in archives.items():
        ms, peak, reason = refusal(data)
        print(f"zip_{name}_bytes {len(data)}")
        print(f"zip_{name}_refusal_ms {ms:.2f}")
        print(f"zip_{name}_peak_kib {peak / 1024:.0f}")
        print(f"zip_{name}_reason {reason}")
