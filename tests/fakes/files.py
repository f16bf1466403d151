"""Small real files of each upload format, built in memory, and damaged or hostile variants of them."""

from __future__ import annotations

import io
import json
import struct
import zipfile


def pdf(pages: list[str]) -> bytes:
    """A PDF whose pages hold the given lines of text (Helvetica), written object by object."""
    objects: list[bytes] = []
    count = len(pages)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(count))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i, text in enumerate(pages):
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            f"/Contents {5 + 2 * i} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def encrypted_pdf(text: str, password: str = "secret") -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf([text]))))
    writer.encrypt(user_password=password, algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def docx(heading: str, paragraphs: list[str], table: list[list[str]] | None = None) -> bytes:
    from docx import Document

    document = Document()
    document.add_heading(heading, level=1)
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                grid.cell(r, c).text = value
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def xlsx(sheets: dict[str, list[list[object]]]) -> bytes:
    from openpyxl import Workbook

    workbook = Workbook()
    workbook.remove(workbook.active)
    for title, rows in sheets.items():
        sheet = workbook.create_sheet(title)
        for row in rows:
            sheet.append(row)
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def zip_of(members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def image(fmt: str, size: tuple[int, int] = (4, 3), colour: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A PNG, JPEG, GIF or WEBP made by Pillow."""
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, format=fmt.upper())
    return out.getvalue()


SVG = (
    b'<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="120" height="40">'
    b"<title>Quarterly badge</title>"
    b'<script>alert("x")</script>'
    b'<rect width="120" height="40" fill="navy" onclick="steal()"/>'
    b'<image xlink:href="https://tracker.example/pixel.png" width="1" height="1"/>'
    b'<a href="javascript:alert(1)"><text x="10" y="25" fill="white">Q3 growth 12%</text></a>'
    b'<foreignObject width="10" height="10"><iframe src="https://evil.example"/></foreignObject>'
    b"</svg>"
)


def overlapping_zip_bomb(kernel_bytes: int = 10 * 1024 * 1024, copies: int = 400) -> bytes:
    """A zip bomb of overlapping entries: one deflated kernel of zeros that `copies` directory entries all
    point at, so the archive declares copies x kernel_bytes while it is a few kilobytes."""
    single = zip_of({"kernel.bin": b"\0" * kernel_bytes})
    end = single.rfind(b"PK\x05\x06")
    (cd_size, cd_offset) = struct.unpack("<II", single[end + 12 : end + 20])
    entry = single[cd_offset : cd_offset + cd_size]
    directory = b"".join(entry.replace(b"kernel.bin", b"k%05d.bin" % i) for i in range(copies))
    record = (
        single[end : end + 8] + struct.pack("<HHII", copies, copies, len(directory), cd_offset) + single[end + 20 :]
    )
    return single[:cd_offset] + directory + record


def ratio_zip_bomb(member_bytes: int = 8 * 1024 * 1024) -> bytes:
    """One member of zeros that expands about a thousand times."""
    return zip_of({"zeros.bin": b"\0" * member_bytes})


def declared_entries(data: bytes, entries: int) -> bytes:
    """The archive with its end record claiming another entry count (the directory itself unchanged)."""
    end = data.rfind(b"PK\x05\x06")
    return data[: end + 8] + struct.pack("<HH", entries, entries) + data[end + 12 :]


def encrypted_member_zip(name: str = "secret.txt", data: bytes = b"classified") -> bytes:
    """A ZIP whose entry has the encryption flag set (as a password-protected archive has)."""
    raw = bytearray(zip_of({name: data}, zipfile.ZIP_STORED))
    raw[6] |= 0x1  # local header: general purpose flags
    cd = raw.find(b"PK\x01\x02")
    raw[cd + 8] |= 0x1  # central directory: general purpose flags
    return bytes(raw)


def symlink_zip() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        info = zipfile.ZipInfo("link-to-passwd")
        info.external_attr = 0o120777 << 16
        archive.writestr(info, "/etc/passwd")
    return out.getvalue()


def json_bytes(value: object) -> bytes:
    return json.dumps(value).encode()


def all_formats() -> dict[str, tuple[bytes, str]]:
    """One small real file of each of the 14 upload formats, each holding a marker its block must show."""
    return {
        "chart.png": (image("png", (5, 4)), "PNG, 5x4 pixels"),
        "photo.jpeg": (image("jpeg", (6, 5)), "JPEG, 6x5 pixels"),
        "anim.gif": (image("gif", (7, 6)), "GIF, 7x6 pixels"),
        "shot.webp": (image("webp", (8, 7)), "WEBP, 8x7 pixels"),
        "badge.svg": (SVG, "Q3 growth 12%"),
        "report.pdf": (
            pdf(["Marker PDF: the pilot cut costs by nine percent."]),
            "the pilot cut costs by nine percent",
        ),
        "memo.docx": (
            docx("Board memo", ["Marker DOCX: the board approved the budget."]),
            "the board approved the budget",
        ),
        "figures.xlsx": (xlsx({"Revenue": [["region", "revenue"], ["North", 1200], ["South", 900]]}), "North"),
        "people.csv": (b"name,age\nAda,36\nGrace,45\n", "Grace"),
        "notes.txt": (b"Marker TXT: the launch moved to March.", "the launch moved to March"),
        "readme.md": (b"# Plan\n\nMarker MD: hire two engineers.", "hire two engineers"),
        "config.yaml": (b"# settings\nregion: eu-west-1\nmarker: yaml keeps its comments\n", "yaml keeps its comments"),
        "data.json": (json_bytes({"marker": "JSON holds the totals", "total": 42}), "JSON holds the totals"),
        "bundle.zip": (
            zip_of({"docs/inner.txt": b"Marker ZIP: the archive member was read.", "docs/inner.csv": b"k,v\na,1\n"}),
            "the archive member was read",
        ),
    }
