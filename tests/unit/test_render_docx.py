"""canvas_core/render/docx.py: reports and memos reopen in python-docx with the structure a reader expects."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from docx import Document
from docx.table import Table as DocxTable
from docx.text.paragraph import Paragraph as DocxParagraph

from canvas_core.render import RenderCheckError
from canvas_core.render.chart import render_bar_chart
from canvas_core.render.docx import KEEP_LEAD_CHARS, check_docx, render_memo, render_report
from canvas_core.render.structure import Figure, MemoHeader, Reference, parse_markdown
from canvas_core.tables import Table

pytestmark = pytest.mark.unit

DRAFT = """# Tides and their causes

The Moon drives most of the tide [1].

## Findings

- Two high tides a day [1]
- Spring tides at new and full moon [2]

1. Observe
2. Record

| Place | Range (m) |
|---|---:|
| Bay of Fundy | 16 |
| Bristol Channel | 15 |

## Conclusion

Further reading: [NOAA](https://oceanservice.noaa.gov).
"""


def report():
    deliverable = parse_markdown(DRAFT)
    deliverable.references = [
        Reference("Tides explained", "https://example.org/tides"),
        Reference("Ocean notes", None, "notes.pdf, p. 3"),
    ]
    deliverable.date = dt.date(2024, 5, 1)
    return deliverable


def test_a_report_reopens_with_title_headings_lists_table_and_references():
    # When
    data = render_report(report())
    summary = check_docx(data)
    # Then
    assert summary.title == "Tides and their causes"
    assert summary.headings == [(1, "Findings"), (1, "Conclusion"), (1, "References")]
    assert "May 1, 2024" in summary.paragraphs[0]
    assert summary.tables[0] == [["Place", "Range (m)"], ["Bay of Fundy", "16"], ["Bristol Channel", "15"]]
    bullets = [p for p, s in zip(summary.paragraphs, summary.styles, strict=True) if s == "List Bullet"]
    numbered = [p for p, s in zip(summary.paragraphs, summary.styles, strict=True) if s == "List Number"]
    assert bullets == ["Two high tides a day [1]", "Spring tides at new and full moon [2]"]
    assert numbered == ["Observe", "Record"]
    assert "[1]\tTides explained. https://example.org/tides" in summary.paragraphs
    assert "[2]\tOcean notes, notes.pdf, p. 3" in summary.paragraphs
    assert "Table 1" in summary.paragraphs


def test_links_are_real_hyperlinks_and_pages_are_numbered():
    doc = Document(io.BytesIO(render_report(report())))
    targets = {r.target_ref for r in doc.part.rels.values() if r.is_external}
    assert {"https://oceanservice.noaa.gov", "https://example.org/tides"} <= targets
    footer = doc.sections[0].footer.paragraphs[0]._p.xml
    assert "PAGE" in footer


def test_each_ordered_list_counts_from_one():
    deliverable = parse_markdown("## A\n1. one\n2. two\n\n## B\n1. uno\n2. dos\n")
    doc = Document(io.BytesIO(render_report(deliverable)))
    num_ids = {p._p.pPr.numPr.numId.val for p in doc.paragraphs if p.style.name == "List Number"}
    assert len(num_ids) == 2  # a numbering per list, each restarting at 1


def test_a_memo_has_its_header_block_and_short_sections():
    # Given
    memo = parse_markdown("## Summary\nShip it.\n\n## Next steps\n- Tell the team")
    header = MemoHeader(to="The board", sender="CFO", date=dt.date(2024, 5, 1), subject="Budget 2025")
    # When
    summary = check_docx(render_memo(memo, header))
    # Then
    assert summary.paragraphs[:5] == [
        "MEMORANDUM",
        "TO:\tThe board",
        "FROM:\tCFO",
        "DATE:\tMay 1, 2024",
        "SUBJECT:\tBudget 2025",
    ]
    assert summary.headings == [(2, "Summary"), (2, "Next steps")]


def test_a_file_that_is_not_a_document_fails_the_check():
    with pytest.raises(RenderCheckError, match="does not reopen as a Word document"):
        check_docx(b"PK\x03\x04 not really a zip")


def test_an_empty_document_fails_the_check():
    buffer = io.BytesIO()
    Document().save(buffer)
    with pytest.raises(RenderCheckError, match="has no text"):
        check_docx(buffer.getvalue())


def _body_in_order(document) -> list:
    """The body's paragraphs and tables in the order they are laid out."""
    kinds = {"p": DocxParagraph, "tbl": DocxTable}
    return [
        kinds[child.tag.rsplit("}", 1)[1]](child, document)
        for child in document.element.body.iterchildren()
        if child.tag.rsplit("}", 1)[1] in kinds
    ]


@pytest.mark.parametrize("lead", ["", "A short lead.", "- a point\n- another point", "Numbers follow. " * 20])
@pytest.mark.parametrize("render", ["report", "memo"])
def test_a_heading_and_the_text_introducing_a_table_or_figure_never_end_a_page_without_it(lead, render):

    # Given sections that head a table, directly or after a short lead, and a report's figure
    table = "| Plan | Price |\n|---|---|\n| Basic | 9 |\n| Plus | 29 |\n"
    material = parse_markdown(f"## Plans\n\n{lead}\n\n{table}\n\nAfter the table.\n\n## Notes\n\nA closing line.")
    material.title = "Plans"
    if render == "report":
        chart = render_bar_chart(Table(["plan", "price"], [["Basic", "9"], ["Plus", "29"]]))
        material.figures = [Figure(chart, "image/png", "Prices")]
        data = render_report(material)
    else:
        data = render_memo(material, MemoHeader(to="A", sender="B", date=dt.date(2026, 1, 2), subject="Plans"))

    # When the document is read back
    document = Document(io.BytesIO(data))
    body = _body_in_order(document)

    # Then every heading keeps with what follows it
    headings = [p for p in document.paragraphs if p.style.name.startswith("Heading")]
    assert headings and all(p.paragraph_format.keep_with_next for p in headings), [p.text for p in headings]
    # And from the table's heading to the table, every paragraph keeps with the next, unless a long lead may
    # end the page before it (the heading then stays with that lead)
    [grid] = document.tables
    at = next(n for n, item in enumerate(body) if getattr(item, "_tbl", None) is grid._tbl)
    start = max(n for n, item in enumerate(body[:at]) if getattr(item, "text", "") == "Plans")
    between = body[start:at]
    kept = [p.paragraph_format.keep_with_next for p in between]
    if len(lead) <= KEEP_LEAD_CHARS:
        assert all(kept), [(p.text[:30], k) for p, k in zip(between, kept, strict=True)]
    else:
        assert kept[0] and kept[-1] and not kept[-2]
    # And a figure keeps with its caption under it
    if render == "report":
        picture = next(p for p in document.paragraphs if p._p.xpath(".//pic:pic"))
        assert picture.paragraph_format.keep_with_next
