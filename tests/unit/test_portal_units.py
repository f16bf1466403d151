"""The portal's pure parts: the viewer's layout (columns by longest path), the origin check, asset names."""

from __future__ import annotations

import re

import pytest

from canvas_core.errors import NotFoundError
from canvas_core.models.items import EdgeItem, NodeItem
from canvas_core.portal.pages import asset
from canvas_core.portal.sessions import CrossOriginRefusedError, check_same_origin
from canvas_core.portal.viewer import layout

pytestmark = pytest.mark.unit


def nodes(*ids: str) -> list[NodeItem]:
    return [NodeItem(canvas_id="c", block_id=i, name=i, type="text-block", position=n) for n, i in enumerate(ids)]


def edges(*pairs: str) -> list[EdgeItem]:
    return [EdgeItem(source_id=p[0], target_id=p[1]) for p in pairs]


def test_a_blocks_column_is_its_longest_path_of_inputs():
    # Given a -> b -> d and a -> d, c alone
    positions, width, height = layout(nodes("a", "b", "c", "d"), edges("ab", "bd", "ad"))
    column = {block: x for block, (x, _) in positions.items()}

    # Then a and c start, b follows a, and d comes after b (not beside it), every arrow pointing right
    assert column["a"] == column["c"] < column["b"] < column["d"]
    assert positions["a"][1] < positions["c"][1]
    assert width > column["d"] and height > max(y for _, y in positions.values())


def test_a_cycle_or_an_unknown_block_does_not_break_the_layout():
    positions, _, _ = layout(nodes("a", "b"), edges("ab", "ba", "az"))
    assert set(positions) == {"a", "b"}
    assert layout([], []) == ({}, 32, 32)


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Host": "x.example", "Origin": "https://x.example"},
        {"host": "127.0.0.1:3000", "origin": "http://127.0.0.1:3000"},
    ],
)
def test_same_origin_or_no_origin_passes(headers):
    check_same_origin(headers)


@pytest.mark.parametrize("origin", ["https://evil.example", "null", "http://127.0.0.1:3001"])
def test_another_origin_is_refused(origin):
    with pytest.raises(CrossOriginRefusedError):
        check_same_origin({"Host": "127.0.0.1:3000", "Origin": origin})


def test_only_the_portals_own_files_are_served():
    data, content_type = asset("portal.js")
    assert data and content_type == "text/javascript; charset=utf-8"
    for name in ("../sessions.py", "sessions.py", "__init__.py", ".x.js", "nothing.css", "assets/portal.js"):
        with pytest.raises(NotFoundError):
            asset(name)


def test_the_stylesheet_keeps_hidden_elements_hidden_whatever_their_display():
    # Given the stylesheet, which makes #who a flex box, and the page, whose signed-in parts start hidden
    css = asset("portal.css")[0].decode()
    page = asset("portal.html")[0].decode()

    # Then a rule hides every element with the hidden attribute, above any display rule of an id or a class
    rules = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    assert re.search(r"(^|\})\s*\[hidden\]\s*\{\s*display:\s*none\s*!important;?\s*\}", rules)
    assert re.search(r"#who\s*\{[^}]*display:\s*flex", rules)
    for element in ('<div id="who" hidden>', '<div id="signed-in" hidden>'):
        assert element in page


def test_the_portals_tables_scroll_within_their_cards():
    css = re.sub(r"/\*.*?\*/", "", asset("portal.css")[0].decode(), flags=re.S)
    page = asset("portal.html")[0].decode()
    assert re.search(r"\.table-wrap\s*\{[^}]*overflow-x:\s*auto", css)
    assert page.count("<table>") == len(re.findall(r'<div class="table-wrap"[^>]*><table>', page)) == 4
