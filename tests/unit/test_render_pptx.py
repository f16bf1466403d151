"""canvas_core/render/pptx.py: decks reopen in python-pptx with a title slide, titled content slides whose text
stays inside its box, charts and tables for data, and sources in the speaker notes."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from pptx import Presentation
from pptx.util import Emu, Inches

from canvas_core.render import RenderCheckError
from canvas_core.render.pptx import (
    BODY_HEIGHT,
    INSET,
    check_pptx,
    fits_body,
    plan_slides,
    render_deck,
    split_bullets,
)
from canvas_core.render.structure import Reference, parse_markdown

pytestmark = pytest.mark.unit

LONG_POINT = "This point is long enough to wrap over two or three lines of a slide when it is set at twenty points. "


def deck(extra: str = ""):
    deliverable = parse_markdown(
        "# Tides\n\n## Why tides happen\n- The Moon pulls the oceans [1]\n- The Sun adds to it [2]\n\n"
        "## Ranges\n\n| Place | Range (m) |\n|---|---|\n| Fundy | 16 |\n| Bristol | 15 |\n| Ungava | 17 |\n" + extra
    )
    deliverable.references = [Reference("Tides explained", "https://example.org/tides"), Reference("Notes")]
    deliverable.date = dt.date(2024, 5, 1)
    deliverable.subtitle = "Prepared by the research team"
    return deliverable


def test_a_deck_reopens_with_a_title_slide_titled_slides_chart_table_and_notes():
    # When
    slides = check_pptx(render_deck(deck()))
    # Then
    assert [s.title for s in slides] == ["Tides", "Why tides happen", "Ranges", "Ranges"]
    assert "Prepared by the research team" in slides[0].texts[0]
    assert slides[1].texts[:2] == ["The Moon pulls the oceans [1]", "The Sun adds to it [2]"]
    assert slides[2].has_chart and not slides[2].has_table
    assert slides[3].has_table
    assert slides[1].notes == "Sources:\n[1] Tides explained. https://example.org/tides\n[2] Notes"
    assert "[1] Tides explained" in slides[3].notes  # a slide citing nothing lists every source


def test_the_deck_is_widescreen_with_its_placeholders_inside_the_slide():
    prs = Presentation(io.BytesIO(render_deck(deck())))
    assert (prs.slide_width, prs.slide_height) == (Inches(13.333), Inches(7.5))
    for slide in prs.slides:
        for shape in slide.shapes:
            assert shape.left >= 0 and shape.left + shape.width <= prs.slide_width
            assert shape.top >= 0 and shape.top + shape.height <= prs.slide_height


def test_many_long_points_are_split_over_slides_that_each_fit():
    # Given thirty long points under one heading
    points = "\n".join(f"- {n}. {LONG_POINT * 2}" for n in range(30))
    # When
    slides = check_pptx(render_deck(deck(f"\n## Evidence\n{points}\n")))
    # Then the points run over several slides, in order, none overflowing (check_pptx would raise)
    evidence = [s for s in slides if s.title.startswith("Evidence")]
    assert len(evidence) > 3
    assert evidence[0].title == "Evidence" and evidence[1].title == "Evidence (cont.)"
    shown = [t for s in evidence for t in s.texts if LONG_POINT[:20] in t]
    assert [int(t.split(".")[0]) for t in shown] == list(range(30))


def test_a_paragraph_too_long_for_one_slide_is_cut_at_sentences():
    groups = split_bullets([LONG_POINT * 30])
    assert len(groups) > 1
    assert all(fits_body(g) for g in groups)


def test_a_long_table_is_paged_and_a_heading_without_content_is_a_divider():
    rows = "\n".join(f"| Place {n} | {n} |" for n in range(20))
    planned = plan_slides(deck(f"\n## Appendix\n\n## Stations\n\n| Station | Range |\n|---|---|\n{rows}\n"))
    titles = [s.title for s in planned]
    assert "Appendix" in titles and next(s for s in planned if s.title == "Appendix").divider
    assert [t for t in titles if t.startswith("Stations (")] == ["Stations (1/3)", "Stations (2/3)", "Stations (3/3)"]


def test_a_text_box_holding_more_than_it_shows_fails_the_check():
    # Given a rendered deck whose body text is then made far longer than its box
    prs = Presentation(io.BytesIO(render_deck(deck())))
    body = prs.slides[1].placeholders[1]
    body.text_frame.paragraphs[0].runs[0].text = LONG_POINT * 40
    assert Emu(body.height - 2 * INSET).pt == Emu(BODY_HEIGHT - 2 * INSET).pt
    buffer = io.BytesIO()
    prs.save(buffer)
    # When / Then
    with pytest.raises(RenderCheckError, match="slide 2 has more text than its box shows"):
        check_pptx(buffer.getvalue())


def test_a_file_that_is_not_a_deck_fails_the_check():
    with pytest.raises(RenderCheckError, match="does not reopen as a PowerPoint deck"):
        check_pptx(b"not a deck")
