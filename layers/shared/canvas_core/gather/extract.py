"""Text out of an uploaded file, with the library made for its format: pypdf (PDF, page by page),
python-docx (DOCX, headings and tables kept), openpyxl (XLSX, a table per sheet), csv (a typed table),
json, PyYAML (safe loading), plain text and markdown as they are; ZIP members each by their own type,
after the archive's limits are checked (archive.py). A file that cannot be read raises ExtractionError with
the reason a user can act on (corrupt, encrypted, unsafe)."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field, replace

from canvas_core.gather.archive import ArchiveError, ArchiveLimits, EncryptedArchiveError, check_archive, read_members
from canvas_core.gather.images import ImageError, image_info
from canvas_core.tables import render_table, table_from_csv, table_from_rows, tables_from_xlsx
from canvas_core.textsafety import MAX_JSON_DEPTH, json_depth

IMAGE_EXTENSIONS = {"png", "jpg", "jpeg", "gif", "webp", "svg"}
TEXT_EXTENSIONS = {"txt", "md", "markdown", "text", "log", "rst"}
MAX_PDF_PAGES = 500
MAX_TEXT_CHARS = 2_000_000  # what one file may add to the index


class ExtractionError(Exception):
    """The file cannot be read; the message names it and says why."""


@dataclass
class Section:
    """A part of a file with its own citation: a page of a PDF, a sheet, an archive member."""

    text: str
    file_name: str
    page: int | None = None
    heading: str | None = None


@dataclass
class Extraction:
    sections: list[Section]
    notes: list[str] = field(default_factory=list)  # what was left out and why

    def text(self, headings: bool = True) -> str:
        parts = []
        for section in self.sections:
            if headings and section.heading:
                parts.append(f"## {section.heading}\n\n{section.text}".strip())
            else:
                parts.append(section.text)
        if self.notes:
            parts.append("\n".join(f"Note: {n}" for n in self.notes))
        return "\n\n".join(p for p in parts if p.strip())


def extract(name: str, extension: str, data: bytes, limits: ArchiveLimits | None = None) -> Extraction:
    extension = extension.lower()
    readers = {
        "pdf": _pdf,
        "docx": _docx,
        "xlsx": _xlsx,
        "csv": _csv,
        "json": _json,
        "yaml": _yaml,
        "yml": _yaml,
    }
    if extension == "zip":
        return _zip(name, data, limits or ArchiveLimits.from_settings())
    if extension in TEXT_EXTENSIONS:
        return Extraction([Section(text=_decode(name, data), file_name=name)])
    reader = readers.get(extension)
    if reader is None:
        raise ExtractionError(f"{name}: .{extension} files are not read by file-block")
    if extension in ("docx", "xlsx"):
        _check_container(name, data, limits)
    return reader(name, data)


def _decode(name: str, data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise ExtractionError(f"{name} is not a text file (it holds binary data)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ExtractionError(f"{name} is not UTF-8 text (byte {exc.start} is invalid)") from exc


def _pdf(name: str, data: bytes) -> Extraction:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                unlocked = bool(reader.decrypt(""))  # many PDFs are encrypted with an empty user password
            except (DependencyError, NotImplementedError):
                unlocked = False
            if not unlocked:
                raise ExtractionError(f"{name} is encrypted (password-protected); upload an unencrypted copy")
        sections, notes = [], []
        pages = reader.pages
        count = len(pages)
        for number in range(min(count, MAX_PDF_PAGES)):
            text = (pages[number].extract_text() or "").strip()
            if text:
                sections.append(Section(text=text, file_name=name, page=number + 1, heading=f"Page {number + 1}"))
        if count > MAX_PDF_PAGES:
            notes.append(f"{name}: only the first {MAX_PDF_PAGES} of {count} pages were read")
    except ExtractionError:
        raise
    except FileNotDecryptedError as exc:
        raise ExtractionError(f"{name} is encrypted (password-protected); upload an unencrypted copy") from exc
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError) as exc:
        raise ExtractionError(f"{name} could not be read as a PDF: it is damaged ({type(exc).__name__})") from exc
    if not sections:
        raise ExtractionError(f"{name} has no text to read (a scanned PDF holds images of pages, not text)")
    return Extraction(sections, notes)


def _docx(name: str, data: bytes) -> Extraction:
    from docx import Document
    from docx.table import Table as DocxTable
    from docx.text.paragraph import Paragraph

    try:
        document = Document(io.BytesIO(data))
        lines = []
        for block in document.iter_inner_content():
            if isinstance(block, Paragraph):
                text = block.text.strip()
                if not text:
                    continue
                style = (block.style.name if block.style is not None else "") or ""
                if style.startswith("Heading") and style[-1:].isdigit():
                    lines.append("#" * min(int(style[-1]), 6) + " " + text)
                elif style == "Title":
                    lines.append(f"# {text}")
                elif style.startswith("List"):
                    lines.append(f"- {text}")
                else:
                    lines.append(text)
            elif isinstance(block, DocxTable):
                rows = [[cell.text.strip() for cell in row.cells] for row in block.rows]
                if rows:
                    lines.append(render_table(table_from_rows(rows), with_types=False))
    except Exception as exc:  # python-docx raises many kinds (KeyError, ValueError, lxml errors) on a broken file
        raise ExtractionError(
            f"{name} could not be read as a Word document: it is damaged ({type(exc).__name__})"
        ) from exc
    text = "\n\n".join(lines)
    if not text.strip():
        raise ExtractionError(f"{name} has no text to read")
    return Extraction([Section(text=text, file_name=name)])


def _xlsx(name: str, data: bytes) -> Extraction:
    try:
        tables = tables_from_xlsx(data)
    except Exception as exc:  # openpyxl raises many kinds on a broken workbook
        raise ExtractionError(
            f"{name} could not be read as an Excel workbook: it is damaged ({type(exc).__name__})"
        ) from exc
    if not tables:
        raise ExtractionError(f"{name} has no cells with values")
    sections = [
        Section(text=render_table(replace(t, caption="")), file_name=name, heading=f"Sheet {t.caption}") for t in tables
    ]
    return Extraction(sections)


def _csv(name: str, data: bytes) -> Extraction:
    table = table_from_csv(_decode(name, data))
    if not table.headers:
        raise ExtractionError(f"{name} has no rows")
    return Extraction([Section(text=render_table(table), file_name=name)])


def _json(name: str, data: bytes) -> Extraction:
    text = _decode(name, data)
    if json_depth(text) > MAX_JSON_DEPTH:
        raise ExtractionError(f"{name} is nested too deeply: more than {MAX_JSON_DEPTH} levels")
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExtractionError(f"{name} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    return Extraction([Section(text=json.dumps(parsed, indent=2, ensure_ascii=False), file_name=name)])


def _yaml(name: str, data: bytes) -> Extraction:
    import yaml

    text = _decode(name, data)
    try:
        for _ in yaml.safe_load_all(text):  # safe loading: no Python objects, no tags that run code
            pass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ExtractionError(f"{name} is not valid YAML{where}") from exc
    return Extraction([Section(text=text, file_name=name)])  # as written: comments are part of what it says


def _check_container(name: str, data: bytes, limits: ArchiveLimits | None) -> None:
    try:
        check_archive(data, limits, label=name)
    except EncryptedArchiveError as exc:
        raise ExtractionError(f"{name} is encrypted (password-protected); upload an unencrypted copy") from exc
    except ArchiveError as exc:
        raise ExtractionError(str(exc)) from exc


def _zip(name: str, data: bytes, limits: ArchiveLimits) -> Extraction:
    sections: list[Section] = []
    notes: list[str] = []
    read = 0
    try:
        members = list(read_members(data, limits, label=name))
    except EncryptedArchiveError as exc:
        raise ExtractionError(f"{exc}; upload an unencrypted archive") from exc
    except ArchiveError as exc:
        raise ExtractionError(str(exc)) from exc
    for member in members:
        member_name = f"{name}/{member.name}"
        extension = member.name.rsplit(".", 1)[-1].lower() if "." in member.name.rsplit("/", 1)[-1] else ""
        if extension == "zip":
            notes.append(f"{member_name}: archives inside archives are not opened")
            continue
        if extension in IMAGE_EXTENSIONS:
            try:
                info = image_info(extension, member.data, member_name)
            except ImageError as exc:
                notes.append(f"{member_name}: {exc}")
                continue
            described = f"Image {member.name}: {info.describe()}" + (f". Text: {info.text}" if info.text else "")
            sections.append(Section(text=described, file_name=member_name, heading=member.name))
            read += 1
            continue
        try:
            extracted = extract(member_name, extension, member.data, limits)
        except ExtractionError as exc:
            notes.append(str(exc))
            continue
        for section in extracted.sections:
            section.heading = member.name + (f", {section.heading}" if section.heading else "")
        sections += extracted.sections
        notes += extracted.notes
        read += 1
        if sum(len(s.text) for s in sections) > MAX_TEXT_CHARS:
            notes.append(f"{name}: stopped after {read} files ({MAX_TEXT_CHARS} characters read)")
            break
    if not sections:
        reasons = "; ".join(notes) if notes else "it holds no files"
        raise ExtractionError(f"{name} has nothing that could be read: {reasons}")
    return Extraction(sections, notes)
