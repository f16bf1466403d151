"""Single-file HTML deliverables (standard library only): the built-in app of app-block, the clickable
prototype of prototype-block, the landing page of landing-page-block; `finish_model_html` for an app a model
wrote. The pages' stylesheets and scripts are files in `assets/`; `html_check` parses a page back.

Text taken from inputs (the web, files, models) is never markup or script here: it is escaped into text, or
carried as JSON in a `<script type="application/json">` data island with `<`, `>` and `&` escaped, which the
page's own script reads and shows with `textContent`. Links keep only http(s) and mailto addresses.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import json
import re
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files
from typing import TypedDict

from canvas_core.render.structure import (
    Block,
    BulletList,
    Paragraph,
    Reference,
    Section,
    adds_up,
    chart_columns,
    long_date,
    plain,
    safe_url,
    spans,
)
from canvas_core.tables import Table, column_kinds
from canvas_core.textsafety import one_line, strip_control

CONTENT_TYPE = "text/html; charset=utf-8"
MAX_TITLE_CHARS = 120  # a <title> shows in a tab or a bookmark: the page's heading holds the whole title


@dataclass
class AppSpec:
    """What the built-in app and prototype show: points by section, tables, sources. `task` is the line under
    the title (what the page is built from), never instructions."""

    title: str
    task: str
    sections: list[Section]
    tables: list[Table] = field(default_factory=list)
    references: list[Reference] = field(default_factory=list)


@dataclass
class Feature:
    name: str
    text: str


@dataclass
class LandingPage:
    title: str
    tagline: str
    features: list[Feature]
    sections: list[Section]
    cta: str = "Get started"
    cta_note: str = ""
    image: tuple[bytes, str] | None = None  # (data, MIME type), embedded as a data URL
    image_alt: str = ""
    logo: tuple[bytes, str] | None = None  # shown beside the name in the header
    references: list[Reference] = field(default_factory=list)
    date: dt.date | None = None


# ---- text into HTML -------------------------------------------------------------------------------------------


def esc(text: str) -> str:
    return html.escape(strip_control(text or ""), quote=True)


def inline_html(text: str) -> str:
    """One line of markdown as escaped HTML: bold, italic, code, and links to web addresses only."""
    out = []
    for span in spans(text):
        piece = esc(span.text)
        if span.code:
            piece = f"<code>{piece}</code>"
        if span.bold:
            piece = f"<strong>{piece}</strong>"
        if span.italic:
            piece = f"<em>{piece}</em>"
        if span.url:
            piece = f'<a href="{esc(span.url)}" rel="noopener noreferrer">{piece}</a>'
        out.append(piece)
    return "".join(out)


def json_island(element_id: str, data: object) -> str:
    """Data for the page's script, inert: JSON in a non-executable script element that no text can close."""
    payload = json.dumps(data, ensure_ascii=True)
    payload = payload.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="{element_id}">{payload}</script>'


def blocks_html(blocks: list[Block]) -> str:
    out = []
    for block in blocks:
        if isinstance(block, Paragraph):
            out.append(
                f"<pre><code>{esc(block.text)}</code></pre>" if block.code else f"<p>{inline_html(block.text)}</p>"
            )
        elif isinstance(block, BulletList):
            tag = "ol" if block.ordered else "ul"
            out.append(f"<{tag}>" + "".join(f"<li>{inline_html(i)}</li>" for i in block.items) + f"</{tag}>")
        elif isinstance(block, Table):
            out.append(table_html(block))
    return "\n".join(out)


def table_html(table: Table) -> str:
    caption = f"<caption>{esc(plain(table.caption))}</caption>" if table.caption else ""
    head = "".join(f'<th scope="col">{esc(plain(h))}</th>' for h in table.headers)
    body = "".join("<tr>" + "".join(f"<td>{inline_html(c)}</td>" for c in row) + "</tr>" for row in table.rows)
    return f'<div class="table-wrap"><table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def references_html(references: list[Reference]) -> str:
    items = []
    for reference in references:
        url = safe_url(reference.url)
        title = esc(reference.title)
        link = f'<a href="{esc(url)}" rel="noopener noreferrer">{title}</a>' if url else title
        detail = f' <span class="detail">{esc(reference.detail)}</span>' if reference.detail else ""
        items.append(f"<li>{link}{detail}</li>")
    return '<ol class="sources">' + "".join(items) + "</ol>"


def _references_data(references: list[Reference]) -> list[SourceData]:
    return [{"title": r.title, "url": safe_url(r.url), "detail": r.detail} for r in references]


@cache
def asset(name: str) -> str:
    """A stylesheet or script of the pages (`assets/`), as the page holds it: byte for byte."""
    return files("canvas_core.render").joinpath("assets", name).read_text(encoding="utf-8")


def _document(title: str, body: str, css: str, script: str = "", data: str = "", lang: str = "en") -> str:
    script_element = f"<script>\n{script}</script>" if script else ""
    return (
        f'<!DOCTYPE html>\n<html lang="{lang}">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(one_line(title, MAX_TITLE_CHARS))}</title>\n"
        f"<style>\n{asset('base.css')}\n{css}</style>\n</head>\n<body>\n{body}\n"
        f"{data}\n{script_element}\n</body>\n</html>\n"
    )


# ---- the built-in app -----------------------------------------------------------------------------------------

MAX_CATEGORIES = 20  # a column with more distinct values is searched, not picked from


class ChartData(TypedDict):
    """A table's chart as the app's script draws it: the label column, the value columns, which of them add up."""

    label: int
    values: list[int]
    sums: list[bool]


class TableData(TypedDict):
    """A table in the app's data island."""

    caption: str
    headers: list[str]
    rows: list[list[str]]
    chart: ChartData | None
    category: int | None


class SourceData(TypedDict):
    """A source in a page's data island."""

    title: str
    url: str | None
    detail: str


def render_app(spec: AppSpec) -> str:
    """An interactive page over the material: each table with a search, a filter on its category column, sorting
    by any column and a bar chart that follows what is shown; the points to search, filter and tick off (kept in
    the browser), copy the open ones, export CSV."""
    tables = [_table_data(t) for t in spec.tables]
    data = {
        "title": spec.title,
        "sections": [{"title": s.title, "points": _points(s)} for s in spec.sections],
        "tables": tables,
        "sources": _references_data(spec.references),
    }
    cards = "".join(_data_card(i, t) for i, t in enumerate(tables))
    subtitle = f"<p>{esc(plain(spec.task))}</p>" if spec.task else ""
    points_title = "Notes" if tables else "Points"
    body = f"""<header class="top"><div class="wrap">
<h1>{esc(spec.title)}</h1>{subtitle}</div></header>
<main class="wrap">
<section aria-labelledby="tables-title"{"" if tables else " hidden"}>
<h2 id="tables-title">Data</h2>{cards}</section>
<section aria-labelledby="points-title">
<h2 id="points-title">{points_title}</h2>
<div class="toolbar" role="search">
<label class="visually-hidden" for="filter">Search the {points_title.lower()}</label>
<input id="filter" type="search" placeholder="Search the {points_title.lower()}…">
<label class="visually-hidden" for="section-filter">Section</label>
<select id="section-filter"><option value="">All sections</option></select>
<button id="clear-done" type="button" class="secondary">Clear ticks</button>
<button id="copy-summary" type="button">Copy open points</button>
<button id="export-csv" type="button" class="secondary">Export CSV</button>
<span id="progress" aria-live="polite"></span>
</div>
<p id="status" role="status"></p>
<ul id="points" class="points"></ul>
</section>
<section aria-labelledby="sources-title">
<h2 id="sources-title">Sources</h2><ol id="sources" class="sources"></ol></section>
</main>"""
    return _document(spec.title, body, asset("app.css"), script=asset("app.js"), data=json_island("app-data", data))


def _table_data(table: Table) -> TableData:
    """A table as the app's script reads it: its text, the columns its chart draws, its category column."""
    rows = [[plain(c) for c in r] for r in table.rows]
    columns = chart_columns(table) if table.chart != "none" else None
    kinds = column_kinds(table)
    category = next(
        (
            c
            for c, kind in enumerate(kinds)
            if kind == "text" and 1 < len({r[c] for r in rows if c < len(r)}) <= min(MAX_CATEGORIES, len(rows) - 1)
        ),
        None,
    )
    return {
        "caption": plain(table.caption),
        "headers": [plain(h) for h in table.headers],
        "rows": rows,
        "chart": {"label": columns[0], "values": columns[1], "sums": [adds_up(table.headers[c]) for c in columns[1]]}
        if columns
        else None,
        "category": category,
    }


def _data_card(i: int, table: TableData) -> str:
    caption = esc(table["caption"] or f"Table {i + 1}")
    pick = ""
    if table["category"] is not None:
        column = esc(table["headers"][table["category"]])
        pick = (
            f'<span class="pick"><label class="inline" for="rows-column-{i}">{column}</label>'
            f'<select id="rows-column-{i}" class="rows-column" data-table="{i}"><option value="">All</option></select>'
            "</span>"
        )
    chart = f'<div class="chart" data-table="{i}"' + ("></div>" if table["chart"] else " hidden></div>")
    if table["chart"] and len(table["chart"]["values"]) > 1:
        options = "".join(f'<option value="{c}">{esc(table["headers"][c])}</option>' for c in table["chart"]["values"])
        pick += (
            f'<span class="pick"><label class="inline" for="chart-measure-{i}">Chart</label>'
            f'<select id="chart-measure-{i}" class="chart-measure" data-table="{i}">{options}</select></span>'
        )
    return (
        f'<section class="data-card" data-table="{i}" aria-labelledby="table-title-{i}">'
        f'<h3 id="table-title-{i}">{caption}</h3><div class="toolbar">'
        f'<label class="visually-hidden" for="rows-filter-{i}">Search {caption}</label>'
        f'<input id="rows-filter-{i}" class="rows-filter" data-table="{i}" type="search" placeholder="Search rows…">'
        f'{pick}<span class="row-count" aria-live="polite"></span></div>{chart}'
        f'<div class="table-wrap"><table class="data-table"><caption class="visually-hidden">{caption}</caption>'
        "</table></div></section>"
    )


def _points(section: Section) -> list[str]:
    out = []
    for block in section.blocks:
        if isinstance(block, Paragraph) and not block.code:
            out.append(plain(block.text))
        elif isinstance(block, BulletList):
            out += [plain(i) for i in block.items]
    return out


# ---- the built-in prototype -----------------------------------------------------------------------------------


def render_prototype(spec: AppSpec) -> str:
    """A clickable prototype: one screen per section, a side navigation, back and next, arrow keys."""
    opening: list[Block] = [Paragraph(spec.task)] if spec.task else []
    screens = [Section(title=spec.title, blocks=opening)] + [s for s in spec.sections if s.blocks]
    if spec.tables:
        screens.append(Section(title="Data", blocks=list(spec.tables)))
    if spec.references:
        screens.append(Section(title="Sources", blocks=[]))
    nav = "".join(
        f'<li><button type="button" id="go-{i}" data-screen="{i}">{esc(s.title or "Overview")}</button></li>'
        for i, s in enumerate(screens)
    )
    parts = []
    for i, s in enumerate(screens):
        content = references_html(spec.references) if s.title == "Sources" and not s.blocks else blocks_html(s.blocks)
        parts.append(
            f'<section class="screen" id="screen-{i}" aria-labelledby="screen-title-{i}"{" hidden" if i else ""}>'
            f'<h2 id="screen-title-{i}" tabindex="-1">{esc(s.title or "Overview")}</h2>{content}</section>'
        )
    body = f"""<div class="shell">
<nav aria-label="Screens"><h1>{esc(spec.title)}</h1><ol>{nav}</ol></nav>
<main>
{"".join(parts)}
<div class="pager"><button id="prev" type="button" class="secondary">Back</button>
<button id="next" type="button">Next</button><span id="position" aria-live="polite"></span></div>
</main>
</div>"""
    return _document(spec.title, body, asset("prototype.css"), script=asset("prototype.js"))


# ---- the landing page -----------------------------------------------------------------------------------------


def _data_url(image: tuple[bytes, str]) -> str:
    data, mime = image
    return f"data:{esc(mime)};base64,{base64.b64encode(data).decode()}"


def render_landing_page(page: LandingPage) -> str:
    """Header and navigation, a hero with the call to action, feature cards, the content sections, a signup
    section (the call to action's target), sources in the footer. Responsive: one column on small screens."""
    image = ""
    if page.image:
        kind = ' class="hero-logo"' if page.image == page.logo else ""
        image = f'<img{kind} src="{_data_url(page.image)}" alt="{esc(page.image_alt or page.title)}">'
    logo = f'<img class="logo" src="{_data_url(page.logo)}" alt="">' if page.logo else ""
    nav_items = [("features", "Features")] if page.features else []
    sections_html = []
    for n, section in enumerate(s for s in page.sections if s.blocks):
        anchor = f"section-{n + 1}"
        nav_items.append((anchor, section.title or "About"))
        sections_html.append(
            f'<section class="band" id="{anchor}" aria-labelledby="{anchor}-title"><div class="wrap">'
            f'<h2 id="{anchor}-title">{esc(section.title or "About")}</h2>{blocks_html(section.blocks)}</div></section>'
        )
    nav_items.append(("signup", page.cta))
    nav = "".join(f'<li><a href="#{a}">{esc(label)}</a></li>' for a, label in nav_items)
    features = ""
    if page.features:
        cards = "".join(f"<li><h3>{esc(plain(f.name))}</h3><p>{inline_html(f.text)}</p></li>" for f in page.features)
        features = (
            '<section class="band" id="features" aria-labelledby="features-title"><div class="wrap">'
            f'<h2 id="features-title">Features</h2><ul class="features">{cards}</ul></div></section>'
        )
    sources = f"<h2>Sources</h2>{references_html(page.references)}" if page.references else ""
    dated = f"<p>Published {esc(long_date(page.date))}.</p>" if page.date else ""
    tagline = f"<p>{inline_html(page.tagline)}</p>" if page.tagline else ""
    body = f"""<header class="site-header"><div class="wrap"><a class="brand" href="#top">{logo}{esc(page.title)}</a>
<nav aria-label="Main"><ul>{nav}</ul></nav></div></header>
<main id="top">
<section class="hero" aria-labelledby="hero-title"><div class="wrap"><div>
<h1 id="hero-title">{esc(page.title)}</h1>
{tagline}
<a class="cta-button" href="#signup">{esc(page.cta)}</a>
</div>{f"<div>{image}</div>" if image else ""}</div></section>
{features}
{"".join(sections_html)}
<section class="band signup" id="signup" aria-labelledby="signup-title"><div class="wrap">
<h2 id="signup-title">{esc(page.cta)}</h2>
<p>{inline_html(page.cta_note or "Leave your email address and we will get back to you.")}</p>
<form id="signup-form" novalidate>
<label class="visually-hidden" for="signup-email">Email address</label>
<input id="signup-email" name="email" type="email" required placeholder="you@example.com" autocomplete="email">
<button id="signup-submit" type="submit">{esc(page.cta)}</button>
</form>
<p id="signup-message" role="status" aria-live="polite"></p>
</div></section>
</main>
<footer><div class="wrap">{sources}{dated}</div></footer>"""
    return _document(page.title, body, asset("landing.css"), script=asset("landing.js"))


# ---- an app a model wrote -------------------------------------------------------------------------------------

_DOCUMENT = re.compile(r"(<!DOCTYPE html.*?</html\s*>|<html.*?</html\s*>)", re.IGNORECASE | re.DOTALL)
_EXTERNAL = [
    re.compile(r"<script\b[^>]*\bsrc\s*=[^>]*>.*?</script\s*>", re.IGNORECASE | re.DOTALL),
    re.compile(r"<link\b[^>]*>", re.IGNORECASE),
    re.compile(r"<(iframe|object|embed|frame|frameset)\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL),
    re.compile(r"</?(iframe|object|embed|frame|frameset)\b[^>]*>", re.IGNORECASE),
    re.compile(r"<base\b[^>]*>", re.IGNORECASE),
    re.compile(r"<meta\b[^>]*http-equiv\s*=\s*['\"]?refresh[^>]*>", re.IGNORECASE),
]


def finish_model_html(text: str) -> str | None:
    """The HTML document in a model's answer, made self-contained (external scripts, stylesheets, frames and
    redirects removed); None when there is no whole document."""
    match = _DOCUMENT.search(text or "")
    if not match:
        return None
    document = match.group(1)
    if not document.lower().startswith("<!doctype"):
        document = "<!DOCTYPE html>\n" + document
    for pattern in _EXTERNAL:
        document = pattern.sub("", document)
    return document + "\n"
