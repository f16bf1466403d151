"""Reading gathered text: a page's main text, tables and lists as data, YouTube ids and timed text."""

from __future__ import annotations

import csv

import pytest

from canvas_core.gather.html import extract_html
from canvas_core.gather.pages import urls_in
from canvas_core.gather.youtube import TranscriptError, moment_url, parse_timed_text, timestamp, video_id
from canvas_core.tables import (
    parse_list,
    parse_markdown_tables,
    render_list,
    render_table,
    table_from_csv,
    table_from_delimited_text,
)

pytestmark = pytest.mark.unit

ARTICLE = """<!doctype html><html><head><title>Tide pools &amp; their keepers</title>
<meta name="description" content="How tide pools work."><script>track()</script><style>p{}</style></head>
<body><header><nav><a href="/">Home</a> | <a href="/about">About</a></nav></header>
<div class="cookie-banner">We use cookies</div>
<article><h1>Tide pools</h1><p>Tide pools are rocky pools on the seashore that the sea fills at high tide.</p>
<p>They hold anemones, crabs and snails, which survive the hours when the water is gone.</p>
<ul><li>Anemones</li><li>Crabs</li></ul><div hidden>secret</div></article>
<aside>Related: shells</aside><footer>(c) 2025 Shore Society</footer></body></html>"""


def test_main_text_and_title_without_the_page_furniture():
    # When
    page = extract_html(ARTICLE)
    # Then
    assert page.title == "Tide pools & their keepers"
    assert page.description == "How tide pools work."
    assert page.text.startswith("# Tide pools\n\nTide pools are rocky pools on the seashore")
    assert "- Anemones\n- Crabs" in page.text
    for furniture in ("Home", "cookies", "track()", "shells", "Shore Society", "secret"):
        assert furniture not in page.text


def test_a_page_without_main_markup_keeps_its_body_text():
    page = extract_html("<p>First para.<p>Second para.<div class='content-with-sidebar'>" + "Body. " * 60)
    assert page.text.startswith("First para.\nSecond para.\nBody.")
    assert page.title == ""


def test_urls_are_found_in_text_ipv6_literals_included():
    assert urls_in("see http://[::1]:8080/x?y=1, and (https://example.com/a_b). Also https://a.b/c.") == [
        "http://[::1]:8080/x?y=1",
        "https://example.com/a_b",
        "https://a.b/c",
    ]


def test_csv_becomes_a_typed_table():
    table = table_from_csv("name;joined;score;active\nAda;2024-01-05;9.5;true\nBob;2023-12-01;7;false\n")
    assert table.headers == ["name", "joined", "score", "active"]
    assert table.types == ["text", "date", "number", "boolean"]
    assert table.rows == [["Ada", "2024-01-05", 9.5, True], ["Bob", "2023-12-01", 7.0, False]]


def test_a_rendered_table_reads_back_with_its_types():
    # Given
    table = table_from_csv("city,pop\nOslo,709000\nBergen,\n")
    # When
    text = render_table(table)
    [again] = parse_markdown_tables("Some intro.\n\n" + text + "\n\nAfter.")
    # Then
    assert text.startswith("Columns: city (text), pop (integer)")
    assert (again.headers, again.types, again.rows) == (
        ["city", "pop"],
        ["text", "integer"],
        [["Oslo", 709000], ["Bergen", None]],
    )


def test_markdown_tables_in_a_model_answer_are_found_with_their_heading():
    answer = "### Costs\n\n| item | cost |\n|:---|---:|\n| a \\| b | 1,200 |\n| c | 3 |\n\n| x |\n|---|\n| y |"
    first, second = parse_markdown_tables(answer)
    assert first.caption == "Costs" and first.rows == [["a | b", 1200], ["c", 3]]
    assert second.headers == ["x"] and second.rows == [["y"]]


def test_nested_lists_parse_and_render():
    items = parse_list("Intro\n- Fruit\n  - Apple\n  - Pear\n* Veg\n1. Bread\n    2) Rye\n")
    assert [(i.text, [c.text for c in i.children]) for i in items] == [
        ("Fruit", ["Apple", "Pear"]),
        ("Veg", []),
        ("Bread", ["Rye"]),
    ]
    assert render_list(items) == "- Fruit\n  - Apple\n  - Pear\n- Veg\n- Bread\n  - Rye"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://www.youtube.com/watch?v=dQw4w9WgXcQ&t=10s", "dQw4w9WgXcQ"),
        ("https://youtu.be/dQw4w9WgXcQ?si=abc", "dQw4w9WgXcQ"),
        ("https://m.youtube.com/shorts/dQw4w9WgXcQ", "dQw4w9WgXcQ"),
        ("https://www.youtube-nocookie.com/embed/dQw4w9WgXcQ", "dQw4w9WgXcQ"),
        ("https://www.youtube.com/watch?v=short", None),
        ("https://vimeo.com/123", None),
    ],
)
def test_video_ids(url, expected):
    assert video_id(url) == expected


def test_timed_text_in_both_formats():
    classic = (
        b'<transcript><text start="0.5" dur="2">It&amp;#39;s <font>here</font></text>'
        b'<text start="75" dur="1">Next</text></transcript>'
    )
    srv3 = b'<timedtext format="3"><body><p t="1500" d="900">Hello <s>there</s></p></body></timedtext>'
    assert [(s.start, s.text) for s in parse_timed_text(classic)] == [(0.5, "It's here"), (75.0, "Next")]
    assert [(s.start, s.duration, s.text) for s in parse_timed_text(srv3)] == [(1.5, 0.9, "Hello there")]
    with pytest.raises(TranscriptError, match="malformed timed text"):
        parse_timed_text(b"<transcript><text")


def test_moments_link_to_the_second():
    assert moment_url("dQw4w9WgXcQ", 75.9) == "https://www.youtube.com/watch?v=dQw4w9WgXcQ&t=75s"
    assert (timestamp(75.9), timestamp(3725)) == ("1:15", "1:02:05")


@pytest.fixture
def default_csv_field_limit():
    """csv's limit is process-wide and only ever raised: each test starts from Python's default."""
    previous = csv.field_size_limit(131_072)
    yield
    csv.field_size_limit(previous)


def test_delimited_text_with_a_field_past_pythons_default_csv_limit_is_a_table(default_csv_field_limit):
    # Given: a tab-separated text whose one cell (150,000 characters) is past csv's default field_size_limit
    cell = "x" * 150_000
    text = f"id\tbody\n1\t{cell}\n2\tend\n"
    # When
    table = table_from_delimited_text(text)
    # Then
    assert table is not None
    assert table.rows == [["1", cell], ["2", "end"]]
