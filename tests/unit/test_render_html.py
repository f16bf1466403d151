"""canvas_core/render/html.py and html_check.py: single-file pages that parse back whole and self-contained,
whose controls are wired to their script, and in which text from inputs never becomes markup or script."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import canvas_core.render
from canvas_core.render import RenderCheckError
from canvas_core.render.html import (
    AppSpec,
    Feature,
    LandingPage,
    asset,
    finish_model_html,
    render_app,
    render_landing_page,
    render_prototype,
)
from canvas_core.render.html_check import check_html, parse_html
from canvas_core.render.structure import Reference, parse_markdown

pytestmark = pytest.mark.unit

# What a hostile web page or file might carry into a run.
PAYLOADS = [
    "<script>alert('pwned')</script>",
    "</script><script>alert('pwned')</script>",
    '"><img src=x onerror="alert(1)">',
    "<!--<script>",
    "javascript:alert(1)",
    "\u2028</ScRiPt >",
]
HOSTILE = " ".join(PAYLOADS)


def material():
    return parse_markdown(
        f"Lead {HOSTILE}\n\n## Findings\n- First {HOSTILE}\n- [click](javascript:alert(1))\n\n"
        f"| Name | Value |\n|---|---|\n| {HOSTILE} | 2 |\n"
    )


def app_spec():
    deliverable = material()
    return AppSpec(
        title=f"Tracker {HOSTILE}",
        task=f"Build a tracker {HOSTILE}",
        sections=deliverable.sections,
        tables=deliverable.tables(),
        references=[
            Reference(f"Source {HOSTILE}", "javascript:alert(2)"),
            Reference("Ok", "https://example.org/a?b=1&c=2"),
        ],
    )


def landing_page():
    deliverable = material()
    return LandingPage(
        title=f"Acme {HOSTILE}",
        tagline=f"Tag {HOSTILE}",
        features=[Feature(f"Fast {HOSTILE}", f"Really {HOSTILE}")],
        sections=deliverable.sections,
        cta="Join the beta",
        image=(b"\x89PNG\r\n\x1a\n", "image/png"),
        references=[Reference(f"Source {HOSTILE}", "https://example.org/s")],
    )


def strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    return [s for v in value for s in strings(v)] if isinstance(value, list) else []


PAGES = {
    "app": lambda: render_app(app_spec()),
    "prototype": lambda: render_prototype(app_spec()),
    "landing_page": lambda: render_landing_page(landing_page()),
}


@pytest.mark.parametrize("kind", PAGES)
def test_text_from_inputs_never_becomes_script_or_markup(kind):
    # When
    page = PAGES[kind]()
    view = check_html(page, require_script=True)
    # Then the page has exactly its own script, no handler attributes and no script URLs
    assert len(view.scripts) == 1 and "pwned" not in view.scripts[0]
    assert view.handler_attributes == []
    assert not any(link.lower().startswith("javascript:") for link in view.links)
    assert "img" not in view.tags or kind == "landing_page"  # the landing page's own hero image only
    assert view.tags.count("script") == len(view.scripts) + len(view.data_islands)
    # And the hostile text is shown as text (or carried as inert JSON data), intact
    for island in view.data_islands:
        assert "<" not in island and ">" not in island
        assert any(HOSTILE in text for text in strings(json.loads(island)))
    if not view.data_islands:
        assert PAYLOADS[0] in view.text and PAYLOADS[2] in view.text


@pytest.mark.parametrize("kind", PAGES)
def test_pages_are_whole_responsive_and_their_controls_are_wired(kind):
    view = check_html(PAGES[kind](), require_script=True)
    page = PAGES[kind]()
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    assert "@media (max-width" in page
    assert view.controls() and view.wired_controls() == view.controls()


ASSETS = {
    "app": ("base.css", "app.css", "app.js"),
    "prototype": ("base.css", "prototype.css", "prototype.js"),
    "landing_page": ("base.css", "landing.css", "landing.js"),
}


@pytest.mark.parametrize("kind", PAGES)
def test_each_page_holds_its_stylesheets_and_script_inline_once(kind):
    # When
    page = PAGES[kind]()
    view = check_html(page, require_script=True)
    # Then each asset file is in the page, whole and once; its script is the page's one script
    for name in ASSETS[kind]:
        assert page.count(asset(name)) == 1
    [script] = view.scripts
    assert script.strip() == asset(ASSETS[kind][2]).strip()


def test_every_asset_file_is_used_by_a_page():
    shipped = {p.name for p in (Path(canvas_core.render.__file__).parent / "assets").iterdir()}
    assert shipped == {name for names in ASSETS.values() for name in names}


def test_the_app_has_its_controls_and_data():
    view = check_html(render_app(app_spec()), require_script=True)
    assert set(view.controls()) == {
        "filter", "section-filter", "clear-done", "copy-summary", "export-csv", "rows-filter-0"
    }  # fmt: skip
    [island] = view.data_islands
    data = json.loads(island)
    assert [s["title"] for s in data["sections"]] == ["", "Findings"]
    assert data["tables"][0]["headers"] == ["Name", "Value"]
    assert [s["url"] for s in data["sources"]] == [None, "https://example.org/a?b=1&c=2"]


def test_the_prototype_has_a_screen_per_section_and_navigation():
    view = check_html(render_prototype(app_spec()), require_script=True)
    screens = [i for i, tag in view.ids.items() if i.startswith("screen-") and tag == "section"]
    assert len(screens) == 5  # start, the two sections, data, sources
    assert {"prev", "next", "go-0", "go-4"} <= set(view.wired_controls())


def test_the_landing_page_has_semantic_sections_and_a_call_to_action():
    page = render_landing_page(landing_page())
    view = check_html(page, require_script=True)
    assert {"header", "nav", "main", "section", "footer", "h1", "form"} <= set(view.tags)
    assert {"features", "signup", "signup-form"} <= set(view.ids)
    assert view.links.count("#signup") == 2  # the hero's button and the navigation
    assert 'class="cta-button" href="#signup">Join the beta</a>' in page
    assert 'src="data:image/png;base64,iVBORw0KGgo="' in page


def test_a_model_page_is_made_self_contained():
    # Given a model's answer with prose around the page and external resources in it
    answer = """Here is your app:
```html
<!DOCTYPE html><html><head><title>Calc</title>
<script src="https://cdn.example.com/lib.js"></script>
<link rel="stylesheet" href="https://cdn.example.com/x.css">
<meta http-equiv="refresh" content="0;url=https://evil.example">
</head><body><button id="go">Go</button><iframe src="https://evil.example"></iframe>
<script>document.getElementById("go").addEventListener("click", function () {});</script></body></html>
```"""
    # When
    page = finish_model_html(answer)
    view = check_html(page, require_script=True)
    # Then
    assert view.external == [] and "iframe" not in view.tags and "link" not in view.tags
    assert "refresh" not in page
    assert view.wired_controls() == ["go"]


def test_an_answer_without_a_document_gives_no_page():
    assert finish_model_html("Sorry, I cannot help with that.") is None


@pytest.mark.parametrize(
    ("page", "problem"),
    [
        ("<html><head><title>t</title></head><body></body></html>", "no <!DOCTYPE html>"),
        ("<!DOCTYPE html><html><head></head><body></body></html>", "no <title>"),
        ("<!DOCTYPE html><html><head><title>t</title></head><body><div></body></html>", "<div> is not closed"),
        ("<!DOCTYPE html><html><head><title>t</title></head><body></span></body></html>", "</span> closes nothing"),
        (
            '<!DOCTYPE html><html><head><title>t</title><script src="https://x.org/a.js"></script></head>'
            "<body></body></html>",
            "loads https://x.org/a.js from elsewhere",
        ),
        (
            '<!DOCTYPE html><html><head><title>t</title></head><body><a href="javascript:x()">a</a></body></html>',
            "javascript: URL",
        ),
        ("<!DOCTYPE html><html><head><title>t</title></head><body></body></html>", "no script"),
    ],
)
def test_a_page_that_is_not_whole_and_self_contained_fails_the_check(page, problem):
    with pytest.raises(RenderCheckError, match=problem.replace("(", r"\(")):
        check_html(page, require_script=True)


def test_a_page_that_is_not_utf8_fails_the_check():
    with pytest.raises(RenderCheckError, match="not UTF-8"):
        check_html(b"\xff\xfe<html>")


def test_optional_end_tags_are_allowed():
    view = parse_html("<!DOCTYPE html><html><head><title>t</title><body><ul><li>a<li>b</ul><p>x<p>y</body></html>")
    assert view.errors == []
