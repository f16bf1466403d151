"""canvas_core/render/structure.py: block content read as sections, lists and tables; cells read as what they
say; the names and the markdown a deliverable is given."""

from __future__ import annotations

import datetime as dt

import pytest

from canvas_core.agents.outline import title_for
from canvas_core.render.structure import (
    BulletList,
    Deliverable,
    Paragraph,
    Reference,
    Section,
    Span,
    chart_columns,
    extract_fields,
    file_name,
    parse_markdown,
    plain,
    safe_url,
    spans,
    summable_columns,
    tables_in_content,
    to_markdown,
)
from canvas_core.tables import Table, column_kinds, typed_value

pytestmark = pytest.mark.unit

REPORT = """# Quarterly review

Revenue grew in every region [1].

## Findings

Key points:
- North led with **record** sales
- South recovered
  after a slow start

1. Hire
2. Expand

| Region | Revenue |
|---|---:|
| North | 1,200 |
| South | 800 |

### Detail

**Risks**

Currency exposure remains.

```
code stays verbatim
```
"""


def test_markdown_becomes_a_title_sections_lists_and_tables():
    # When
    report = parse_markdown(REPORT)
    # Then
    assert report.title == "Quarterly review"
    assert [(s.title, s.level) for s in report.sections] == [("", 1), ("Findings", 1), ("Detail", 2), ("Risks", 3)]
    lead, findings, _, risks = report.sections
    assert lead.blocks == [Paragraph("Revenue grew in every region [1].")]
    assert findings.blocks[0] == Paragraph("Key points:")
    assert findings.blocks[1] == BulletList(["North led with **record** sales", "South recovered after a slow start"])
    assert findings.blocks[2] == BulletList(["Hire", "Expand"], ordered=True)
    assert findings.blocks[3] == Table(["Region", "Revenue"], [["North", "1,200"], ["South", "800"]])
    assert risks.blocks == [Paragraph("Currency exposure remains."), Paragraph("code stays verbatim", code=True)]


def test_several_top_headings_are_sections_and_the_title_comes_from_the_caller():
    report = parse_markdown("# One\ntext\n# Two\nmore", title="Given")
    assert report.title == "Given"
    assert [s.title for s in report.sections] == ["One", "Two"]


def test_rules_are_breaks_and_a_pipe_over_a_rule_is_not_a_table():
    report = parse_markdown("either | or\n---\n\n***\nText")
    assert report.sections[0].blocks == [Paragraph("either | or"), Paragraph("Text")]


def test_table_rows_outside_a_table_are_not_points():
    report = parse_markdown("- a real point here\n- | North | 1200 | [1]\n")
    assert report.sections[0].blocks == [BulletList(["a real point here"])]


def test_memo_fields_are_taken_out_of_the_lead():
    # Given
    memo = parse_markdown("To: The board\nFrom: **CFO**\n\nSubject: Budget 2025\n\nIntro.\n\n## Summary\nCut costs.")
    # When
    fields = extract_fields(memo, ("to", "from", "subject"))
    # Then
    assert fields == {"to": "The board", "from": "CFO", "subject": "Budget 2025"}
    assert [s.title for s in memo.sections] == ["", "Summary"]
    assert memo.sections[0].blocks == [Paragraph("Intro.")]


@pytest.mark.parametrize(
    ("text", "value", "kind"),
    [
        ("1,234", 1234, "int"),
        ("-3", -3, "int"),
        ("(12)", -12, "int"),
        ("0.5", 0.5, "float"),
        ("12.5%", 0.125, "percent"),
        ("$1,200.50", 1200.5, "currency"),
        ("-$200", -200.0, "currency"),
        ("12 €", 12.0, "currency"),
        ("2024-01-05", dt.date(2024, 1, 5), "date"),
        ("Jan 5, 2024", dt.date(2024, 1, 5), "date"),
        ("5 January 2024", dt.date(2024, 1, 5), "date"),
        ("2024-01-05T10:30", dt.datetime(2024, 1, 5, 10, 30), "datetime"),
        ("007", "007", "text"),
        ("1234567890123456789", "1234567890123456789", "text"),
        ("12,34", "12,34", "text"),
        ("North", "North", "text"),
        ("", None, "empty"),
    ],
)
def test_cells_are_read_as_what_they_say(text, value, kind):
    typed = typed_value(text)
    assert (typed.value, typed.kind) == (value, kind)


def test_columns_are_typed_and_only_amounts_are_summed():
    # Given
    table = Table(
        ["Year", "Region", "Revenue", "Units", "Growth rate", "Share", "Opened"],
        [
            ["2023", "North", "$1,200", "10", "4", "40%", "2020-01-01"],
            ["2024", "South", "$800", "12", "5", "60%", "2021-06-30"],
        ],
    )
    # When / Then
    assert column_kinds(table) == ["year", "text", "currency", "number", "number", "percent", "date"]
    assert summable_columns(table) == [2, 3]
    assert chart_columns(table) == (0, [2, 3, 4])


def test_a_table_with_its_total_row_gets_no_second_total():
    table = Table(["Item", "Cost"], [["a", "1"], ["b", "2"], ["Total", "3"]])
    assert summable_columns(table) == []
    assert column_kinds(table) == ["text", "number"]


def test_tables_are_found_in_pipe_json_and_csv_content():
    # Given / When
    piped = tables_in_content("### Sales\n\nColumns: a (text)\n\n| a | b |\n|---|---|\n| x | 1 |", caption="input")
    rows = tables_in_content('[{"name": "x", "n": 1}, {"name": "y", "n": null}]', caption="rows")
    csv = tables_in_content("name,n\nx,1\ny,2\n", caption="data.csv", csv_text=True)
    prose = tables_in_content("Hello, world.\nFine, thanks.", caption="chat")
    # Then
    assert [(t.caption, t.headers, t.rows) for t in piped] == [("Sales", ["a", "b"], [["x", "1"]])]
    assert [(t.caption, t.headers, t.rows) for t in rows] == [("rows", ["name", "n"], [["x", "1"], ["y", ""]])]
    assert [(t.caption, t.rows) for t in csv] == [("data.csv", [["x", "1"], ["y", "2"]])]
    assert prose == []


def test_inline_markup_and_unsafe_links():
    assert spans("a **b** *c* `d` [e](https://x.org)") == [
        Span("a "),
        Span("b", bold=True),
        Span(" "),
        Span("c", italic=True),
        Span(" "),
        Span("d", code=True),
        Span(" "),
        Span("e", url="https://x.org"),
    ]
    assert spans("[e](javascript:steal)") == [Span("e", url=None)]
    assert safe_url("data:text/html,<b>") is None and safe_url("mailto:a@b.c") == "mailto:a@b.c"
    assert plain("**Bold** and [link](https://x.org)") == "Bold and link"


def test_titles_and_file_names_read_well():
    assert title_for("write a report on tides.\nMore detail") == "Tides"
    assert len(title_for("word " * 40)) <= 80 and "…" not in title_for("word " * 40)
    assert file_name("Quarterly Sales: Review (2024)!", "xlsx") == "quarterly-sales-review-2024.xlsx"
    assert file_name("Études économiques", "docx") == "etudes-economiques.docx"
    assert file_name("???", "html", fallback="app") == "app.html"


def test_a_deliverable_reads_back_as_markdown():
    deliverable = Deliverable(
        title="T",
        sections=[Section("S", [Paragraph("p"), BulletList(["a"]), Table(["h"], [["x|y"]])], level=1)],
        references=[Reference("Src", "https://x.org", "p. 2")],
    )
    assert to_markdown(deliverable) == (
        "# T\n\n## S\n\np\n\n- a\n\n| h |\n|---|\n| x\\|y |\n\n## References\n\n[1] Src. p. 2. https://x.org"
    )


@pytest.mark.parametrize(
    ("header", "adds"),
    [
        ("tickets", True),
        ("Number of tickets", True),
        ("Amount ($)", True),
        ("Visitors", True),
        ("avg_resolution_hours", False),
        ("Average price", False),
        ("ticket_id", False),
        ("customerId", False),
        ("#", False),
        ("No.", False),
        ("Growth rate", False),
        ("Share (%)", False),
        ("Year", False),
        ("tickets per day", False),
    ],
)
def test_only_columns_whose_sum_means_something_add_up(header, adds):
    from canvas_core.render.structure import adds_up

    assert adds_up(header) is adds


@pytest.mark.parametrize(
    ("source", "heading", "caption"),
    [
        ("sales.xlsx", "Sheet Q1", "Sales (Q1)"),
        ("sales.xlsx", "Sheet Sheet1", "Sales"),
        ("support_tickets.csv", "", "Support tickets"),
        ("Spreadsheet data", "sales.xlsx, sheet Q1", "Sales (Q1)"),
        ("quotes.docx", "Quotes received", "Quotes received"),
        ("Key facts table", "Tidal ranges", "Tidal ranges"),
        ("Answer", "", "Answer"),
    ],
)
def test_tables_are_captioned_after_their_file_or_heading(source, heading, caption):
    from canvas_core.render.structure import table_caption

    assert table_caption(source, heading) == caption
