"""Model text never reaches a file format unchecked: a long title, or one holding control characters, renders in
every format, within each format's limits (a docx or pptx core property of 255 characters, an Excel sheet name of
31 without []:*?/\\ and unique in its workbook, an HTML <title>)."""

from __future__ import annotations

import datetime as dt
import io
import re

import pytest
from docx import Document
from openpyxl import load_workbook
from pptx import Presentation

from canvas_core.render import docx, html, pptx, xlsx
from canvas_core.render.structure import MemoHeader, Reference, parse_markdown
from canvas_core.tables import Table
from canvas_core.textsafety import one_line

pytestmark = pytest.mark.unit

CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# 300 characters a model might write as a title, with a bell, a vertical tab, a NUL and an escape in it
LONG_TITLE = ("Quarterly\x07 review of\x0b the regional\x00 offices and their \x1bbudgets, " * 6)[:300]
BODY = "## Findings\nThe offices grew.\n\n| Office | Cost |\n|---|---|\n| North | 10 |\n| South | 12 |\n"


def deliverable():
    return parse_markdown(BODY, title=LONG_TITLE)


def assert_clean(text: str, limit: int) -> None:
    assert text and len(text) <= limit and not CONTROL.search(text)
    assert text.startswith("Quarterly review of the regional offices")


def test_a_long_title_with_control_characters_renders_as_a_report():
    data = docx.render_report(deliverable())
    document = Document(io.BytesIO(data))
    assert_clean(document.core_properties.title, 255)
    assert_clean(docx.check_docx(data).title, 300)


def test_a_long_subject_with_control_characters_renders_as_a_memo():
    header = MemoHeader(to="The\x07 board", sender="The CFO\x00", date=dt.date(2026, 3, 2), subject=LONG_TITLE)
    data = docx.render_memo(deliverable(), header)
    document = Document(io.BytesIO(data))
    assert_clean(document.core_properties.title, 255)
    text = "\n".join(p.text for p in document.paragraphs)
    assert "The board" in text and "The CFO" in text and not CONTROL.search(text)


def test_a_long_title_with_control_characters_renders_as_a_deck():
    data = pptx.render_deck(deliverable())
    deck = Presentation(io.BytesIO(data))
    assert_clean(deck.core_properties.title, 255)
    titles = [view.title for view in pptx.check_pptx(data)]
    assert_clean(titles[0], 300)
    assert all(not CONTROL.search(t) for t in titles)


def test_sheet_names_from_model_captions_keep_to_excels_rules():
    # Given captions a model wrote: long, with characters Excel refuses in a sheet name, control characters, and
    # two the same once cut to 31 characters
    captions = [LONG_TITLE, "Costs [draft]: travel/lodging*?\\", LONG_TITLE + " again", "'Quoted'", "\x07"]
    tables = [Table(headers=["Item", "Cost"], rows=[["a", "1"]], caption=c) for c in captions]
    # When
    data = xlsx.render_workbook(xlsx.WorkbookSpec(title=LONG_TITLE, tables=tables, references=[Reference("r")]))
    # Then
    book = load_workbook(io.BytesIO(data))
    assert_clean(book.properties.title, 255)
    names = book.sheetnames
    assert len(names) == len(captions) + 1 and len({n.lower() for n in names}) == len(names)
    for name in names:
        assert 0 < len(name) <= 31 and not re.search(r"[\[\]:*?/\\]", name) and not CONTROL.search(name)
        assert not name.startswith("'") and not name.endswith("'")


@pytest.mark.parametrize("page", ["app", "landing_page", "prototype"])
def test_a_long_title_with_control_characters_renders_as_an_html_page(page):
    parsed = deliverable()
    if page == "landing_page":
        text = html.render_landing_page(
            html.LandingPage(
                title=LONG_TITLE, tagline=LONG_TITLE, features=[html.Feature(LONG_TITLE, "x")], sections=parsed.sections
            )
        )
    else:
        spec = html.AppSpec(title=LONG_TITLE, task=LONG_TITLE, sections=parsed.sections)
        text = html.render_app(spec) if page == "app" else html.render_prototype(spec)
    title = re.search(r"<title>(.*?)</title>", text, re.DOTALL)
    assert title is not None
    assert_clean(title.group(1), html.MAX_TITLE_CHARS)
    assert not CONTROL.search(text)


def test_one_line_cuts_at_a_word_and_keeps_short_text_whole():
    assert one_line("A  short\ttitle\n") == "A short title"
    cut = one_line("word " * 100, 31)
    assert len(cut) <= 31 and cut.endswith("word…")
