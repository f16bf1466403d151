"""What a reader of a deliverable sees of its make: each statement once per section and not again in the next
section, every table that shows part of a result saying which part and where the rest is, file names that are a
whole phrase of the title and unique in the run, and Word tables whose rows never break across a page."""

from __future__ import annotations

import io
import random
import re

import docx
import pytest

from canvas_core.agents.outline import FUNCTION_WORDS
from canvas_core.analysis.analyse import analyse
from canvas_core.analysis.engine import load_rows
from canvas_core.blocks.analysis import result_sections, shown_part
from canvas_core.blocks.deliverable import store
from canvas_core.blocks.presentation import analysis_slides
from canvas_core.prompt_format import NOT_COVERED
from canvas_core.render import docx as render_docx
from canvas_core.render import pptx
from canvas_core.render.structure import (
    MAX_FILE_STEM,
    BulletList,
    Deliverable,
    Paragraph,
    Section,
    drop_repeated_statements,
    file_name,
    statement_key,
)
from canvas_core.tables import Table

# ---- file names ---------------------------------------------------------------------------------------------------

LONG_TITLES = [
    "Monthly revenue by region and product for the first half of 2026 and what drove the change in each of them",
    "Heat pumps versus gas boilers: running costs, installation and emissions across the whole of the region",
    "A review of the harbour's spring tides and the moorings that are exposed to them during the storms of",
    "Quarterly bookings of the three studios with the classes, sessions and retreats that each of them offers",
]


@pytest.mark.parametrize("title", LONG_TITLES)
def test_a_long_titles_file_name_is_cut_between_words_and_never_ends_on_a_function_word(title):
    # Given a title longer than a file name keeps
    words = re.findall(r"[a-z0-9]+", title.lower())
    # When it names a file
    name = file_name(title, "pptx", stop_words=FUNCTION_WORDS)
    # Then the name is the title's first words, within the limit, ending on a word that carries meaning
    stem = name.removesuffix(".pptx")
    kept = stem.split("-")
    assert len(stem) <= MAX_FILE_STEM
    assert kept == words[: len(kept)]
    assert kept[-1] not in FUNCTION_WORDS


def test_a_whole_title_is_the_whole_file_name():
    title = "Monthly revenue by region for the first half of 2026"
    name = file_name(title, "docx", stop_words=FUNCTION_WORDS)
    assert name == "monthly-revenue-by-region-for-the-first-half-of-2026.docx"


def test_a_qualifier_survives_the_cut_and_a_taken_name_gets_a_number():
    title = LONG_TITLES[0]
    name = file_name(title, "xlsx", stop_words=FUNCTION_WORDS, qualifier="data")
    assert name.endswith("-data.xlsx") and len(name.removesuffix(".xlsx")) <= MAX_FILE_STEM
    assert name.removesuffix("-data.xlsx").split("-")[-1] not in FUNCTION_WORDS
    assert file_name("Sales review", "xlsx", taken=["Sales-Review.xlsx"]) == "sales-review-2.xlsx"
    assert file_name("Sales review", "xlsx", taken=["sales-review.xlsx", "sales-review-2.xlsx"]) == (
        "sales-review-3.xlsx"
    )


class _Files:
    def __init__(self) -> None:
        self.keys: list[str] = []

    def put(self, key: str, data: bytes, content_type: str) -> None:
        self.keys.append(key)


def test_files_a_block_stores_under_one_title_have_different_names_and_none_an_upload_has():
    from canvas_core.blocks.context import BlockContext
    from canvas_core.models.items import Artifact, NodeItem, RunItem, Upload
    from canvas_core.providers.offline import OfflineProvider

    # Given a run whose upload and input already hold the names the title gives
    upload = Upload(
        file_id="f1", name="sales-review.csv", extension="csv", content_type="text/csv", size_bytes=1, s3_key="u/1"
    )
    earlier = Artifact(id="a0", type="xlsx", name="sales-review.xlsx", s3_key="k", size_bytes=1)
    run = RunItem(
        run_id="r1",
        account_id="a",
        canvas_id="c",
        prompt="Sales review",
        template="excel",
        uploads=[upload],
        created_at_ms=0,
        estimated_duration_ms=0,
    )
    node = NodeItem(canvas_id="c", block_id="b2", name="Workbook", type="excel-block")
    before = NodeItem(canvas_id="c", block_id="b1", name="Sheet", type="excel-block", artifacts=[earlier])
    ctx = BlockContext(run=run, node=node, inputs=[before], files=_Files(), provider=OfflineProvider())  # type: ignore[arg-type]
    # When the block stores two workbooks and a CSV under the same title
    names = [
        store(ctx, "Sales review", kind, b"x", "application/octet-stream", lambda data: None, label="workbook").name
        for kind in ("xlsx", "xlsx", "csv")
    ]
    # Then each has a name of its own, none the upload's or the input's
    assert names == ["sales-review-2.xlsx", "sales-review-3.xlsx", "sales-review-2.csv"]
    # And a long title is cut as a title is, where a modifier starts, a qualifier after it
    long = "Monthly revenue by region and product for the first half of 2026"
    assert [
        store(ctx, long, "pptx", b"x", "x", lambda data: None, label="deck", qualifier=q).name for q in ("", "data")
    ] == [
        "monthly-revenue-by-region-and-product.pptx",
        "monthly-revenue-by-region-and-product-data.pptx",
    ]


# ---- statements said once -------------------------------------------------------------------------------------------


def test_a_statement_is_said_once_in_a_section_the_cited_and_fuller_one_staying():
    # Given a section stating a finding three ways: cited, bare, and as the first clause of a fuller sentence
    fact = "Harbour B had the largest catch by port: 1,204 t, 41 % of the total"
    deliverable = Deliverable(
        title="Catch",
        sections=[
            Section(
                "Ports",
                [
                    BulletList([f"{fact} [2].", "Landings rose in May [2]."]),
                    Paragraph(f"{fact}. Prices held steady."),
                    BulletList([f"{fact}; Harbour D the smallest: 88 t (3 %) [2].", f"  {fact} [2] ."]),
                ],
            )
        ],
    )
    # When
    drop_repeated_statements(deliverable)
    # Then each statement is there once: the fuller one, with its citation; what else was said stays
    said = [statement_key(s) for b in deliverable.sections[0].blocks for s in _statements(b)]
    assert len(said) == len(set(said))
    assert said == [
        statement_key("Landings rose in May."),
        statement_key("Prices held steady."),
        statement_key(f"{fact}; Harbour D the smallest: 88 t (3 %)."),
    ]
    assert "[2]" in deliverable.sections[0].blocks[-1].items[0]  # type: ignore[union-attr]


def test_a_section_does_not_repeat_the_section_before_it_and_one_left_empty_goes():
    # Given a summary, findings that repeat two of its sentences, and a part that only repeats the findings
    deliverable = Deliverable(
        title="Report",
        sections=[
            Section("Summary", [Paragraph("Sales grew by 4 % [1]. The west led. Costs were flat.")]),
            Section("Findings", [BulletList(["The west led [1].", "Returns fell to 2 %.", "Sales grew by 4 %."])]),
            Section("Returns", [BulletList(["Returns fell to 2 % [1]."])]),
            Section("Return rates", [BulletList(["Returns fell to 2 %."])]),
            Section("Outlook", [Paragraph("Sales grew by 4 %; the outlook is steady.")]),
        ],
    )
    # When
    drop_repeated_statements(deliverable)
    # Then Findings keeps only what Summary did not say, the parts only repeating it are gone (the section before
    # the second is Findings still), and Outlook, not next to Summary, says what it says
    assert [s.title for s in deliverable.sections] == ["Summary", "Findings", "Outlook"]
    assert deliverable.sections[1].blocks[0].items == ["Returns fell to 2 %."]  # type: ignore[union-attr]
    assert deliverable.sections[2].blocks[0].text == "Sales grew by 4 %; the outlook is steady."  # type: ignore[union-attr]


def test_parts_the_material_does_not_cover_each_say_so():
    deliverable = Deliverable(
        title="Audit",
        sections=[Section(part, [Paragraph(NOT_COVERED)]) for part in ("Stock", "Safety", "Staffing")],
    )
    drop_repeated_statements(deliverable)
    assert [(s.title, s.blocks) for s in deliverable.sections] == [
        (part, [Paragraph(NOT_COVERED)]) for part in ("Stock", "Safety", "Staffing")
    ]


def _statements(block):
    if isinstance(block, BulletList):
        return block.items
    if isinstance(block, Paragraph):
        return re.split(r"(?<=\.)\s+", block.text)
    return []


# ---- a part of a table says so ------------------------------------------------------------------------------------


def _trips(count: int = 300) -> list[list[object]]:
    rnd = random.Random(5)
    cities = ["Oslo", "Bergen", "Tromsø", "Bodø", "Ålesund"]
    modes = ["bus", "train", "ferry"]
    return [[rnd.choice(cities), rnd.choice(modes), rnd.randint(1, 9), rnd.randint(10, 900)] for _ in range(count)]


def _analysis(request: str):
    dataset = load_rows("trips.csv", ["city", "mode", "trips", "fare"], _trips())
    analysis = analyse(dataset, request, None)
    assert analysis is not None
    return analysis


def test_a_deck_slide_with_part_of_a_result_says_which_part_and_where_the_rest_is():
    # Given an analysis whose cross table has 15 combinations
    analysis = _analysis("Fare by city and mode")
    cross = next(r for r in analysis.results if r.kind == "cross")
    assert len(cross.rows) > pptx.TABLE_ROWS_PER_SLIDE
    # When the deck's slides of it are made
    sections = analysis_slides([analysis])
    # Then the table showing part of the combinations says "top 8 of 15" and where all of them are
    [table] = [b for s in sections for b in s.blocks if isinstance(b, Table) and b.caption.startswith(cross.caption)]
    shown = pptx.TABLE_ROWS_PER_SLIDE
    assert len(table.rows) == shown
    assert f"top {shown} of {len(cross.rows)}" in table.caption and "workbook" in table.caption
    # And the slide's title, what the reader sees, says so
    slides = pptx.plan_slides(Deliverable(title="T", sections=sections))
    [slide] = [s for s in slides if s.table is not None and s.table.rows == table.rows]
    assert f"top {shown} of {len(cross.rows)}" in slide.title


def test_a_reports_long_result_shows_its_largest_saying_so_and_is_whole_in_the_appendix():
    analysis = _analysis("Fare by city and mode")
    cross = next(r for r in analysis.results if r.kind == "cross")
    # When the report's sections are made with fewer rows than the result has
    sections, appendix = result_sections([analysis], max_rows=6)
    # Then its table says it is the top 6 and that the appendix holds all of them, and the appendix does
    [part] = [b for s in sections for b in s.blocks if isinstance(b, Table) and b.caption.startswith(cross.caption)]
    assert len(part.rows) == 6 and f"top 6 of {len(cross.rows)}" in part.caption and "appendix" in part.caption
    [whole] = [b for s in appendix for b in s.blocks if isinstance(b, Table)]
    assert len(whole.rows) == len(cross.rows)
    # And a result that fits is shown whole, as it is
    ranking_like = Table(["a", "b"], [["x", "1"]], caption="Small")
    assert shown_part(ranking_like, cross, 6, "the appendix") is ranking_like


def test_a_deck_asked_for_its_length_says_which_rows_and_columns_of_a_table_it_shows():
    # Given a table of 30 rows and 9 columns that is no chart, in a deck asked for 5 slides
    headers = [f"c{n}" for n in range(9)]
    rows = [[f"r{r}", *(f"text {r}-{c}" for c in range(8))] for r in range(30)]
    deck = Deliverable(title="T", sections=[Section("Data", [Table(headers, rows, caption="Register")])])
    # When its slides are planned
    slides = [s for s in pptx.plan_slides(deck, max_slides=4) if s.table is not None]
    # Then each table slide's title says which rows of the 30 and which columns of the 9 it shows
    assert slides and len(slides) < 30 // pptx.TABLE_ROWS_PER_SLIDE + 1
    for n, slide in enumerate(slides):
        first = n * pptx.TABLE_ROWS_PER_SLIDE + 1
        assert f"rows {first}\u2013{first + pptx.TABLE_ROWS_PER_SLIDE - 1} of 30" in slide.title
        assert f"first {pptx.TABLE_MAX_COLUMNS} of 9 columns" in slide.title


# ---- Word tables ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [6, 40])
def test_a_word_tables_rows_never_break_across_a_page_and_only_its_header_repeats(count):
    # Given a report with a table of `count` rows
    table = Table(["month", "revenue"], [[f"2026-{n:02d}", str(n * 100)] for n in range(1, count + 1)], "Per month")
    report = Deliverable(title="R", sections=[Section("Figures", [Paragraph("Text."), table])])
    # When it is rendered
    document = docx.Document(io.BytesIO(render_docx.render_report(report)))
    [grid] = document.tables
    # Then no row may split over a page, the header row alone repeats, and the caption stays with its table
    ns = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
    for n, row in enumerate(grid.rows):
        props = row._tr.trPr
        assert props is not None and props.find(f"{ns}cantSplit") is not None, n
        assert (props.find(f"{ns}tblHeader") is not None) == (n == 0), n
    assert len(grid.rows) == count + 1 and all(c.text for c in grid.rows[-1].cells)
    caption = next(p for p in document.paragraphs if p.text.startswith("Table 1"))
    assert caption.paragraph_format.keep_with_next
    # And a short table is kept on one page: each row but the last keeps with the next
    kept = [all(p.paragraph_format.keep_with_next for c in r.cells for p in c.paragraphs) for r in grid.rows]
    assert kept == ([True] * count + [False] if count <= render_docx.KEEP_WHOLE_ROWS else [False] * (count + 1))


# ---- a title the model wrote ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("title", LONG_TITLES)
def test_a_long_title_the_model_wrote_is_a_whole_phrase_of_at_most_80_characters(title):
    from canvas_core.blocks.deliverable import TITLE_LIMIT, compose
    from tests.unit.test_block_notes import _ctx, _Model

    # Given a draft whose one top-level heading, its title, is longer than a title may be
    ctx = _ctx("document-block", _Model(""))
    # When it is made a deliverable
    made = compose(ctx, f"# {title}\n\n## Findings\n\nRevenue grew in the North.")
    # Then its title is the start of the model's, cut as a whole phrase, within the limit
    assert 12 <= len(made.title) <= TITLE_LIMIT
    assert title.startswith(made.title)
    assert made.title.split()[-1].lower() not in FUNCTION_WORDS
    # And a title within the limit is kept as the model wrote it
    assert compose(ctx, "# What drives churn?\n\n## Findings\n\nPrices.").title == "What drives churn?"
