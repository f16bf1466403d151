"""Word documents (python-docx): the report of document-block, the memo of memo-block, and `check_docx`, which
reopens a file and reads back its headings and text (what a block verifies before storing it)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass, field

from docx import Document
from docx.document import Document as DocxDocument
from docx.enum.section import WD_ORIENT
from docx.enum.table import WD_TABLE_ALIGNMENT
from docx.enum.text import WD_ALIGN_PARAGRAPH, WD_TAB_ALIGNMENT
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.oxml.text.paragraph import CT_P
from docx.shared import Inches, Pt, RGBColor
from docx.text.paragraph import Paragraph as DocxParagraph

from canvas_core.render import RenderCheckError
from canvas_core.render.structure import (
    BulletList,
    Deliverable,
    Figure,
    MemoHeader,
    Paragraph,
    Section,
    long_date,
    plain,
    spans,
)
from canvas_core.tables import Table, column_kinds, has_total_row
from canvas_core.textsafety import one_line

CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
MAX_TABLE_ROWS = 100  # a longer table belongs in a spreadsheet; the report shows its head and says so
KEEP_WHOLE_ROWS = 20  # a table of at most this many rows fits a page: it starts on the page that can hold it
# A paragraph or list of at most this many characters right before a table (about ten lines) introduces it: it keeps
# with the table, and so does the heading above it; a longer one may end a page, the table starting the next.
KEEP_LEAD_CHARS = 1000
ACCENT = RGBColor(0x1F, 0x4E, 0x79)
MUTED = RGBColor(0x59, 0x59, 0x59)
LINK = RGBColor(0x05, 0x63, 0xC1)
TABLE_STYLE = "Light Grid Accent 1"
MAX_PROPERTY_CHARS = 255  # python-docx refuses a longer core property (title, subject)


def render_report(report: Deliverable) -> bytes:
    """A report: title and subtitle, headed sections, lists and tables, numbered references, page numbers."""
    doc = _new_document(report.title)
    doc.add_paragraph(one_line(report.title), style="Title")
    subtitle = " · ".join(p for p in (one_line(report.subtitle), _long_date(report)) if p)
    if subtitle:
        doc.add_paragraph(subtitle, style="Subtitle")
    _add_sections(doc, report.sections, heading_offset=0)
    _add_figures(doc, report.figures)
    if report.references:
        _heading(doc, "References", level=1)
        _add_references(doc, report)
    return _save(doc)


def _add_figures(doc: DocxDocument, figures: list[Figure]) -> None:
    """The images the report shows, each with a caption (`Figure n. name`); one Word cannot embed is named."""
    if not figures:
        return
    from canvas_core.render.chart import raster

    _heading(doc, "Figures", level=1)
    for n, figure in enumerate(figures, start=1):
        image = raster(figure.data, figure.mime)
        if image is None:
            doc.add_paragraph(f"{figure.caption} (an image this document cannot show).")
            continue
        doc.add_picture(io.BytesIO(image[0]), width=Inches(_figure_width(image[0])))
        # The caption under a figure stays on its page.
        doc.paragraphs[-1].alignment = WD_ALIGN_PARAGRAPH.CENTER
        doc.paragraphs[-1].paragraph_format.keep_with_next = True
        caption = doc.add_paragraph(style="Caption")
        caption.add_run(f"Figure {n}. {plain(figure.caption)}")


def _figure_width(data: bytes) -> float:
    """Inches: the page's text width for a large image, its own size at 96 dpi for a small one (a logo)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return max(0.5, min(6.5, image.width / 96))


def render_memo(memo: Deliverable, header: MemoHeader) -> bytes:
    """A memo: MEMORANDUM, the To / From / Date / Subject block under a rule, then short headed sections."""
    doc = _new_document(header.subject)
    banner = doc.add_paragraph()
    run = banner.add_run("MEMORANDUM")
    run.bold, run.font.size, run.font.color.rgb = True, Pt(22), ACCENT
    _spacing(banner, after=12)
    for label, value in (
        ("TO:", header.to),
        ("FROM:", header.sender),
        ("DATE:", long_date(header.date)),
        ("SUBJECT:", header.subject),
    ):
        line = doc.add_paragraph()
        line.paragraph_format.tab_stops.add_tab_stop(Inches(1.1), WD_TAB_ALIGNMENT.LEFT)
        label_run = line.add_run(label + "\t")
        label_run.bold = True
        line.add_run(one_line(value))
        _spacing(line, after=2)
    _rule(doc.add_paragraph())
    _add_sections(doc, memo.sections, heading_offset=1)
    if memo.references:
        _heading(doc, "Sources", level=2)
        _add_references(doc, memo)
    return _save(doc)


# ---- building blocks ------------------------------------------------------------------------------------------


def _new_document(title: str) -> DocxDocument:
    doc = Document()
    doc.core_properties.title = one_line(title, MAX_PROPERTY_CHARS)
    doc.core_properties.author = "Canvas Run Service"
    normal = doc.styles["Normal"]
    normal.font.name, normal.font.size = "Calibri", Pt(11)
    normal.paragraph_format.space_after = Pt(6)
    normal.paragraph_format.line_spacing = 1.15
    section = doc.sections[0]
    section.orientation = WD_ORIENT.PORTRAIT
    for side in ("left_margin", "right_margin", "top_margin", "bottom_margin"):
        setattr(section, side, Inches(1))
    _page_numbers(section.footer.paragraphs[0])
    return doc


def _add_sections(doc: DocxDocument, sections: list[Section], heading_offset: int) -> None:
    """A short text introducing a table keeps with the table's caption, which keeps with the table; with the
    heading above, which keeps with what follows it, the heading starts the page its table starts."""
    tables = 0
    for section in sections:
        if section.title:
            _heading(doc, one_line(section.title), level=min(section.level + heading_offset, 4))
        for n, block in enumerate(section.blocks):
            introduces_table = n + 1 < len(section.blocks) and isinstance(section.blocks[n + 1], Table)
            if isinstance(block, Paragraph):
                added, text = [_add_paragraph(doc, block)], block.text
            elif isinstance(block, BulletList):
                added, text = _add_list(doc, block), "".join(block.items)
            else:
                tables += 1
                _add_table(doc, block, tables)
                continue
            if introduces_table and len(text) <= KEEP_LEAD_CHARS:
                for p in added:
                    p.paragraph_format.keep_with_next = True


def _heading(doc: DocxDocument, text: str, level: int) -> None:
    """A heading never ends a page: it keeps with what follows, set on the paragraph whatever its style says."""
    doc.add_heading(text, level=level).paragraph_format.keep_with_next = True


def _add_paragraph(doc: DocxDocument, block: Paragraph) -> DocxParagraph:
    if block.code:
        p = doc.add_paragraph(style="No Spacing")
        run = p.add_run(block.text)
        run.font.name, run.font.size = "Consolas", Pt(9)
        _spacing(p, after=8)
        return p
    p = doc.add_paragraph()
    _add_spans(p, block.text)
    return p


def _add_list(doc: DocxDocument, block: BulletList) -> list[DocxParagraph]:
    style = "List Number" if block.ordered else "List Bullet"
    added = []
    for item in block.items:
        p = doc.add_paragraph(style=style)
        _add_spans(p, item)
        _spacing(p, after=3)
        added.append(p)
    if block.ordered and added:
        _restart_numbering(doc, added[0])
    return added


def _add_table(doc: DocxDocument, table: Table, number: int) -> None:
    rows = table.rows[:MAX_TABLE_ROWS]
    caption = doc.add_paragraph(style="Caption")
    caption.add_run(f"Table {number}" + (f". {plain(table.caption)}" if table.caption else ""))
    kinds = column_kinds(table)
    total_row = has_total_row(table) and len(rows) == len(table.rows)
    grid = doc.add_table(rows=1 + len(rows), cols=len(table.headers))
    grid.style = doc.styles[TABLE_STYLE]
    grid.alignment = WD_TABLE_ALIGNMENT.CENTER
    for r, (row, values) in enumerate(zip(grid.rows, [table.headers, *rows], strict=True)):
        for c, (cell, value) in enumerate(zip(row.cells, values, strict=False)):
            p = cell.paragraphs[0]
            run = p.add_run(plain(value))
            run.font.size = Pt(10)
            if r == 0 or (total_row and r == len(rows)):
                run.bold = True
            if r > 0 and kinds[c] in ("number", "currency", "percent"):
                p.alignment = WD_ALIGN_PARAGRAPH.RIGHT
    # A row never breaks across pages: a renderer that splits one (LibreOffice) draws the repeated header over an
    # empty remainder of it on the next page. The header row repeats on every page a long table spans, and a
    # short table (one page at most) is kept whole, with its caption, on the page it starts on.
    keep_whole = len(rows) <= KEEP_WHOLE_ROWS
    caption.paragraph_format.keep_with_next = True
    for r, row in enumerate(grid.rows):
        props = row._tr.get_or_add_trPr()
        props.append(OxmlElement("w:cantSplit"))
        if r == 0:
            props.append(OxmlElement("w:tblHeader"))
        if keep_whole and r < len(grid.rows) - 1:
            for cell in row.cells:
                for paragraph in cell.paragraphs:
                    paragraph.paragraph_format.keep_with_next = True
    if len(table.rows) > MAX_TABLE_ROWS:
        note = doc.add_paragraph()
        run = note.add_run(f"First {MAX_TABLE_ROWS} of {len(table.rows)} rows.")
        run.italic, run.font.color.rgb = True, MUTED
    doc.add_paragraph()


def _add_references(doc: DocxDocument, deliverable: Deliverable) -> None:
    for n, reference in enumerate(deliverable.references, start=1):
        p = doc.add_paragraph()
        p.paragraph_format.left_indent = Inches(0.4)
        p.paragraph_format.first_line_indent = Inches(-0.4)
        _spacing(p, after=4)
        p.add_run(f"[{n}]\t")
        p.add_run(reference.title).italic = True
        if reference.detail:
            p.add_run(f", {reference.detail}")
        if reference.url and reference.url != reference.title:
            p.add_run(". ")
            _add_hyperlink(p, reference.url, reference.url)


def _add_spans(p: DocxParagraph, text: str) -> None:
    for span in spans(text):
        if span.url:
            _add_hyperlink(p, span.text, span.url)
            continue
        run = p.add_run(span.text)
        run.bold = span.bold or None
        run.italic = span.italic or None
        if span.code:
            run.font.name = "Consolas"


def _add_hyperlink(p: DocxParagraph, text: str, url: str) -> None:
    rel_id = p.part.relate_to(url, RELATIONSHIP_TYPE.HYPERLINK, is_external=True)
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), rel_id)
    run = OxmlElement("w:r")
    props = OxmlElement("w:rPr")
    color = OxmlElement("w:color")
    color.set(qn("w:val"), str(LINK))
    underline = OxmlElement("w:u")
    underline.set(qn("w:val"), "single")
    props.extend([color, underline])
    text_element = OxmlElement("w:t")
    text_element.text = text
    text_element.set(qn("xml:space"), "preserve")
    run.extend([props, text_element])
    link.append(run)
    p._p.append(link)


def _restart_numbering(doc: DocxDocument, first: DocxParagraph) -> None:
    """Number an ordered list from 1: python-docx's List Number style otherwise counts on across lists."""
    numbering = doc.part.numbering_part.numbering_definitions._numbering
    style_num_id = doc.styles["List Number"].element.pPr.numPr.numId.val
    abstract_id = numbering.num_having_numId(style_num_id).abstractNumId.val
    num = numbering.add_num(abstract_id)
    num.add_lvlOverride(ilvl=0).add_startOverride(1)
    for p in _following_list_paragraphs(first):
        num_pr = p.get_or_add_pPr().get_or_add_numPr()
        num_pr.get_or_add_ilvl().val = 0
        num_pr.get_or_add_numId().val = num.numId


def _following_list_paragraphs(first: DocxParagraph) -> Iterator[CT_P]:
    p = first._p
    # python-docx types Paragraph.style as optional, but it falls back to the default style and is never None.
    style = first.style.style_id  # type: ignore[union-attr]
    while p is not None and p.tag == qn("w:p") and p.pPr is not None and p.pPr.pStyle is not None:
        if p.pPr.pStyle.val != style:
            break
        yield p
        p = p.getnext()


def _page_numbers(p: DocxParagraph) -> None:
    p.alignment = WD_ALIGN_PARAGRAPH.CENTER
    run = p.add_run()
    run.font.size, run.font.color.rgb = Pt(9), MUTED
    for kind, text in (("begin", None), (None, "PAGE"), ("end", None)):
        if kind:
            element = OxmlElement("w:fldChar")
            element.set(qn("w:fldCharType"), kind)
        else:
            element = OxmlElement("w:instrText")
            element.set(qn("xml:space"), "preserve")
            element.text = text
        run._r.append(element)


def _rule(p: DocxParagraph) -> None:
    borders = OxmlElement("w:pBdr")
    bottom = OxmlElement("w:bottom")
    for key, value in (("w:val", "single"), ("w:sz", "8"), ("w:space", "1"), ("w:color", str(ACCENT))):
        bottom.set(qn(key), value)
    borders.append(bottom)
    p._p.get_or_add_pPr().append(borders)
    _spacing(p, after=12)


def _spacing(p: DocxParagraph, after: int) -> None:
    p.paragraph_format.space_after = Pt(after)


def _long_date(deliverable: Deliverable) -> str:
    return long_date(deliverable.date) if deliverable.date else ""


def _save(doc: DocxDocument) -> bytes:
    buffer = io.BytesIO()
    doc.save(buffer)
    return buffer.getvalue()


# ---- the check ------------------------------------------------------------------------------------------------


@dataclass
class DocxSummary:
    """What a reopened document holds: its title, headings (level, text), other paragraphs, and tables."""

    title: str = ""
    headings: list[tuple[int, str]] = field(default_factory=list)
    paragraphs: list[str] = field(default_factory=list)
    styles: list[str] = field(default_factory=list)
    tables: list[list[list[str]]] = field(default_factory=list)


def check_docx(data: bytes) -> DocxSummary:
    """Reopen a .docx with python-docx and read it back; RenderCheckError when it does not open or is empty."""
    try:
        doc = Document(io.BytesIO(data))
        summary = DocxSummary()
        for p in doc.paragraphs:
            style = p.style.name if p.style is not None else ""
            if style == "Title":
                summary.title = p.text
            elif style.startswith("Heading "):
                summary.headings.append((int(style.removeprefix("Heading ")), p.text))
            elif p.text.strip():
                summary.paragraphs.append(p.text)
                summary.styles.append(style)
        summary.tables = [[[cell.text for cell in row.cells] for row in t.rows] for t in doc.tables]
    except Exception as exc:
        raise RenderCheckError(f"the file does not reopen as a Word document ({type(exc).__name__})") from exc
    if not (summary.title or summary.headings or summary.paragraphs):
        raise RenderCheckError("the Word document has no text")
    return summary
