"""A deck's length, its appendix, its logo and which tables it charts (canvas_core/render/pptx.py, and the
presentation-block's choice of a logo): at most 15 slides unless a number is asked for, the appendix after
them, an uploaded logo in the corners rather than on a slide of its own, and charts only of rows whose labels
are each once, with value columns of one scale."""

from __future__ import annotations

import io

import pytest
from pptx import Presentation
from pptx.enum.shapes import MSO_SHAPE_TYPE

from canvas_core.blocks.presentation import split_logo
from canvas_core.render.pptx import MAX_SLIDES, check_pptx, plan_slides, render_deck
from canvas_core.render.structure import BulletList, Deliverable, Figure, Section
from canvas_core.tables import Table
from tests.fakes import files

pytestmark = pytest.mark.unit

LOGO = Figure(files.image("png", (120, 40), (181, 101, 29)), "image/png", "acme_logo.png", uploaded=True)
PHOTO = Figure(files.image("png", (64, 48), (30, 120, 200)), "image/png", "harbour.png", uploaded=True)


def sections(count: int) -> list[Section]:
    return [Section(title=f"Part {n}", blocks=[BulletList([f"Point {n}.{k}" for k in range(3)])]) for n in range(count)]


def test_a_deck_nobody_gave_a_length_keeps_to_fifteen_slides_then_its_appendix():
    # Given 30 parts and an appendix of two
    deck = Deliverable("Long", sections(30), appendix=sections(2))
    deck.appendix[0].title, deck.appendix[1].title = "Appendix: data", "Appendix: more"
    # When
    slides = check_pptx(render_deck(deck))
    # Then the title slide and 14 more, the first parts in order, then the appendix
    titles = [s.title for s in slides]
    assert titles[:MAX_SLIDES] == ["Long", *(f"Part {n}" for n in range(MAX_SLIDES - 1))]
    assert titles[MAX_SLIDES:] == ["Appendix: data", "Appendix: more"]


def test_a_length_asked_for_is_kept_and_the_appendix_still_follows():
    deck = Deliverable("Asked", sections(10), appendix=[Section("Appendix: data", [BulletList(["All rows"])])])
    assert [s.title for s in plan_slides(deck, max_slides=4)] == [
        "Part 0",
        "Part 1",
        "Part 2",
        "Part 3",
        "Appendix: data",
    ]


def test_the_logo_is_in_the_corners_not_on_a_slide_of_its_own():
    # Given a deck with a logo and a photo
    deck = Deliverable("Results", sections(2), figures=[PHOTO], logo=LOGO)
    # When
    data = render_deck(deck)
    # Then no slide is titled after the logo, the photo has its slide, and every slide shows the logo once
    titles = [s.title for s in check_pptx(data)]
    assert titles == ["Results", "Part 0", "Part 1", "harbour.png"]
    prs = Presentation(io.BytesIO(data))
    pictures = [[s for s in slide.shapes if s.shape_type == MSO_SHAPE_TYPE.PICTURE] for slide in prs.slides]
    assert [len(p) for p in pictures] == [1, 1, 1, 2]
    title_logo = pictures[0][0]
    assert title_logo.top < prs.slide_height // 4 and title_logo.left > prs.slide_width // 2  # top right
    corner = pictures[1][0]
    assert corner.top > prs.slide_height * 3 // 4 and corner.left < prs.slide_width // 4  # bottom left


@pytest.mark.parametrize(
    ("figures", "prompt", "logo"),
    [
        ([PHOTO, LOGO], "Slides on our results", "acme_logo.png"),
        ([PHOTO], "Slides on our results with our logo", "harbour.png"),
        ([PHOTO], "Slides on our results", None),
        ([PHOTO, Figure(PHOTO.data, "image/png", "team.png", uploaded=True)], "Use our logo", None),
    ],
)
def test_the_logo_is_an_upload_named_as_one_or_the_only_upload_of_a_request_for_one(figures, prompt, logo):
    found, rest = split_logo(figures, prompt)
    assert (found.caption if found else None) == logo
    assert [f.caption for f in rest] == [f.caption for f in figures if f is not found]


def chart_slides(table: Table) -> list[str]:
    deck = Deliverable("Data", [Section("Data", [table])])
    return [s.title for s in check_pptx(render_deck(deck)) if s.has_chart]


def test_rows_that_repeat_a_label_are_not_charted_and_unique_ones_are():
    repeated = Table(["month", "revenue"], [["2025-01", "10"], ["2025-01", "12"], ["2025-02", "9"]], "Sales")
    unique = Table(["month", "revenue"], [["2025-01", "22"], ["2025-02", "9"]], "Monthly")
    assert chart_slides(repeated) == []
    assert chart_slides(unique) == ["Monthly"]


def test_a_chart_draws_the_value_columns_of_one_scale_only():
    table = Table(["region", "revenue", "units", "cost"], [["N", "90000", "12", "61000"], ["S", "70000", "9", "50000"]])
    deck = Deliverable("Data", [Section("By region", [table])])
    prs = Presentation(io.BytesIO(render_deck(deck)))
    [chart] = [shape.chart for slide in prs.slides for shape in slide.shapes if shape.has_chart]
    assert [s.name for s in chart.plots[0].series] == ["revenue", "cost"]
    assert chart.value_axis.minimum_scale == 0
