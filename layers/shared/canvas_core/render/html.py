"""Single-file HTML deliverables (standard library only): the built-in app of app-block, the clickable
prototype of prototype-block, the landing page of landing-page-block; `finish_model_html` for an app a model
wrote; and `check_html`, which parses a file back and says what it holds.

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
from html.parser import HTMLParser

from canvas_core.render import RenderCheckError
from canvas_core.render.structure import (
    BulletList,
    Paragraph,
    Reference,
    Section,
    Table,
    long_date,
    plain,
    safe_url,
    spans,
)

CONTENT_TYPE = "text/html; charset=utf-8"


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
    return html.escape(text or "", quote=True)


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


def blocks_html(blocks: list, heading_level: int = 3) -> str:
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


def _references_data(references: list[Reference]) -> list[dict]:
    return [{"title": r.title, "url": safe_url(r.url), "detail": r.detail} for r in references]


_BASE_CSS = """
:root { --ink: #1f2933; --muted: #5f6b7a; --accent: #1f4e79; --accent-2: #f2994a; --line: #d9e2ec;
  --bg: #f7f9fb; --card: #ffffff; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--ink); background: var(--bg); line-height: 1.55; }
a { color: var(--accent); }
.wrap { max-width: 1080px; margin: 0 auto; padding: 0 1.25rem; }
button, input, select { font: inherit; }
button { cursor: pointer; border: 1px solid var(--accent); background: var(--accent); color: #fff;
  border-radius: .4rem; padding: .5rem .9rem; }
button.secondary { background: transparent; color: var(--accent); }
button:focus-visible, input:focus-visible, select:focus-visible, a:focus-visible {
  outline: 3px solid var(--accent-2); outline-offset: 2px; }
.table-wrap { overflow-x: auto; margin: 1rem 0; }
table { border-collapse: collapse; width: 100%; background: var(--card); }
caption { text-align: left; font-weight: 600; padding: .4rem 0; }
th, td { border: 1px solid var(--line); padding: .45rem .6rem; text-align: left; vertical-align: top; }
th { background: #eef2f7; }
.sources { color: var(--muted); font-size: .9rem; }
.detail { color: var(--muted); }
"""


def _document(title: str, body: str, css: str, script: str = "", data: str = "", lang: str = "en") -> str:
    return (
        f'<!DOCTYPE html>\n<html lang="{lang}">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{_BASE_CSS}{css}</style>\n</head>\n<body>\n{body}\n"
        f"{data}\n{f'<script>{script}</script>' if script else ''}\n</body>\n</html>\n"
    )


# ---- the built-in app -----------------------------------------------------------------------------------------

_APP_CSS = """
header.top { background: var(--accent); color: #fff; padding: 1.5rem 0; }
header.top h1 { margin: 0 0 .3rem; font-size: 1.7rem; }
header.top p { margin: 0; opacity: .9; }
main.wrap > section { margin: 1.6rem 0; }
.toolbar { display: flex; flex-wrap: wrap; gap: .6rem; align-items: center; margin: 1rem 0; }
.toolbar input[type=search] { flex: 1 1 16rem; padding: .5rem .7rem; border: 1px solid var(--line);
  border-radius: .4rem; }
.toolbar select { padding: .5rem; border: 1px solid var(--line); border-radius: .4rem; }
.toolbar label.inline { color: var(--muted); font-size: .9rem; }
#progress, .row-count { color: var(--muted); margin-left: auto; }
.data-card { background: var(--card); border: 1px solid var(--line); border-radius: .7rem; padding: 1rem 1.2rem;
  margin: 1rem 0 1.6rem; }
.data-card h3 { margin: .2rem 0 .4rem; }
.chart { margin: .5rem 0 1rem; }
.chart svg { width: 100%; height: auto; display: block; }
.chart .bar-label, .chart .axis { font-size: 12px; fill: var(--muted); }
.chart .value { font-size: 11px; fill: var(--ink); }
.chart-title { margin: 0 0 .2rem; font-weight: 600; color: var(--muted); font-size: .9rem; }
.legend { display: flex; gap: 1rem; flex-wrap: wrap; font-size: .85rem; color: var(--muted); margin-top: .3rem; }
.legend i { display: inline-block; width: .8rem; height: .8rem; border-radius: .15rem; margin-right: .3rem;
  vertical-align: -.1rem; }
.points { list-style: none; padding: 0; display: grid; gap: .5rem; }
.points li { background: var(--card); border: 1px solid var(--line); border-radius: .5rem; padding: .7rem .9rem;
  display: flex; gap: .7rem; align-items: flex-start; }
.points li.done span { text-decoration: line-through; color: var(--muted); }
.points .tag { font-size: .75rem; color: var(--muted); display: block; }
th.sortable { cursor: pointer; white-space: nowrap; }
th.sortable::after { content: " \\2195"; color: var(--muted); }
th.sortable[aria-sort=ascending]::after { content: " \\2191"; color: var(--ink); }
th.sortable[aria-sort=descending]::after { content: " \\2193"; color: var(--ink); }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.data-table td { white-space: nowrap; }
#status { min-height: 1.5rem; color: var(--muted); }
@media (max-width: 600px) { #progress, .row-count { margin-left: 0; width: 100%; } }
"""

# The app's behaviour. It reads the data island and builds every element with textContent: no input text is
# ever parsed as HTML. Each table can be searched, narrowed to one value of its category column and sorted by
# any column; its chart redraws with the rows shown.
_APP_JS = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("app-data").textContent);
  var SVG = "http://www.w3.org/2000/svg";
  var COLOURS = ["#1f4e79", "#2e86ab", "#f2994a"];
  var status = document.getElementById("status");
  function number(value) {
    var text = String(value).replace(/[\s,$€£¥%]/g, "").replace(/^\((.*)\)$/, "-$1");
    return /^-?(\d+\.?\d*|\.\d+)$/.test(text) ? parseFloat(text) : NaN;
  }
  function svg(tag, attrs, text) {
    var el = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) { el.setAttribute(k, attrs[k]); });
    if (text !== undefined) el.textContent = text;
    return el;
  }
  // One measure at a time (its own scale); rows that share a label are added up (or averaged, for a measure
  // such as an average or a rate that does not add up), so a category's bar is the category's figure.
  function drawChart(box, t, rows, measure) {
    box.textContent = "";
    if (!t.chart) return;
    var label = t.chart.label, sums = t.chart.sums[t.chart.values.indexOf(measure)];
    var groups = [], byName = {};
    rows.forEach(function (r) {
      var v = number(r[measure]);
      if (isNaN(v)) return;
      var name = String(r[label]);
      if (!(name in byName)) { byName[name] = { name: name, total: 0, count: 0 }; groups.push(byName[name]); }
      byName[name].total += v; byName[name].count += 1;
    });
    var merged = groups.some(function (g) { return g.count > 1; });
    var bars = groups.slice(0, 24).map(function (g) {
      var v = sums || g.count === 1 ? g.total : g.total / g.count;
      return { name: g.name, value: Math.round(v * 100) / 100 };
    });
    var title = document.createElement("p"); title.className = "chart-title";
    var how = merged ? (sums ? " (total)" : " (average)") : "";
    title.textContent = t.headers[measure] + how + " by " + t.headers[label];
    box.appendChild(title);
    // Drawn at the width it is shown at, so its lettering stays legible on a phone.
    var width = Math.max(320, Math.min(960, box.clientWidth || 820)), height = 300, left = 56, bottom = 48, top = 20;
    var values = bars.map(function (b) { return b.value; });
    var max = Math.max.apply(null, [0].concat(values)), min = Math.min.apply(null, [0].concat(values));
    var span = (max - min) || 1;
    var plot = svg("svg", { viewBox: "0 0 " + width + " " + height, role: "img", "aria-label": title.textContent });
    var y = function (v) { return top + (max - v) / span * (height - top - bottom); };
    for (var k = 0; k <= 4; k++) {
      var tick = min + span * k / 4, yy = y(tick);
      plot.appendChild(svg("line", { x1: left, x2: width - 8, y1: yy, y2: yy, stroke: "#d9e2ec" }));
      plot.appendChild(svg("text", { x: left - 6, y: yy + 4, "text-anchor": "end", "class": "axis" },
        Math.round(tick * 100) / 100));
    }
    var slot = (width - left - 8) / Math.max(1, bars.length), bar = Math.max(4, slot * 0.6);
    bars.forEach(function (b, i) {
      var x = left + i * slot + (slot - bar) / 2;
      var y0 = y(Math.max(0, b.value)), y1 = y(Math.min(0, b.value));
      var rect = svg("rect", { x: x, y: y0, width: bar, height: Math.max(1, y1 - y0), fill: COLOURS[0], rx: 2 });
      rect.appendChild(svg("title", {}, b.name + ": " + b.value));
      plot.appendChild(rect);
      if (bars.length <= 16) {
        plot.appendChild(svg("text", { x: x + bar / 2, y: y0 - 5, "text-anchor": "middle", "class": "value" },
          b.value));
      }
      plot.appendChild(svg("text", { x: x + bar / 2, y: height - bottom + 18, "text-anchor": "middle",
        "class": "bar-label" }, b.name.length > 14 ? b.name.slice(0, 13) + "…" : b.name));
    });
    box.appendChild(plot);
  }
  data.tables.forEach(function (t, i) {
    var card = document.querySelector('.data-card[data-table="' + i + '"]');
    var search = card.querySelector(".rows-filter");
    var pick = card.querySelector(".rows-column");
    var measure = card.querySelector(".chart-measure");
    var count = card.querySelector(".row-count");
    var chart = card.querySelector(".chart");
    var table = card.querySelector("table");
    var head = document.createElement("thead"), hr = document.createElement("tr");
    var body = document.createElement("tbody");
    var numeric = t.headers.map(function (h, c) {
      return t.rows.length > 0 && t.rows.every(function (r) { return r[c] === "" || !isNaN(number(r[c])); });
    });
    var sortBy = -1, ascending = true;
    if (pick && t.category !== null) {
      var seen = {};
      t.rows.forEach(function (r) { seen[r[t.category]] = true; });
      Object.keys(seen).sort().forEach(function (v) {
        var option = document.createElement("option"); option.value = v; option.textContent = v || "(empty)";
        pick.appendChild(option);
      });
    }
    function shown() {
      var q = search.value.trim().toLowerCase(), only = pick ? pick.value : "";
      var rows = t.rows.filter(function (r) {
        if (only && r[t.category] !== only) return false;
        return !q || r.some(function (c) { return String(c).toLowerCase().indexOf(q) !== -1; });
      });
      if (sortBy >= 0) {
        rows.sort(function (a, b) {
          var x = number(a[sortBy]), y = number(b[sortBy]);
          var c = numeric[sortBy] && !isNaN(x) && !isNaN(y)
            ? x - y : String(a[sortBy]).localeCompare(String(b[sortBy]));
          return ascending ? c : -c;
        });
      }
      return rows;
    }
    function render() {
      var rows = shown();
      body.textContent = "";
      rows.forEach(function (r) {
        var tr = document.createElement("tr");
        r.forEach(function (c, k) {
          var td = document.createElement("td"); td.textContent = c;
          if (numeric[k]) td.className = "num";
          tr.appendChild(td);
        });
        body.appendChild(tr);
      });
      count.textContent = rows.length + " of " + t.rows.length + " rows";
      if (t.chart) drawChart(chart, t, rows, measure ? Number(measure.value) : t.chart.values[0]);
    }
    t.headers.forEach(function (h, c) {
      var th = document.createElement("th"); th.textContent = h; th.className = "sortable"; th.scope = "col";
      th.tabIndex = 0;
      function sort() {
        ascending = sortBy === c ? !ascending : true; sortBy = c;
        Array.prototype.forEach.call(hr.children, function (other) { other.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        render();
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") sort(); });
      hr.appendChild(th);
    });
    head.appendChild(hr); table.appendChild(head); table.appendChild(body);
    search.addEventListener("input", render);
    if (pick) pick.addEventListener("change", render);
    if (measure) measure.addEventListener("change", render);
    render();
  });

  var storeKey = "canvas-app:" + data.title;
  var done = {};
  try { done = JSON.parse(localStorage.getItem(storeKey) || "{}"); } catch (e) { done = {}; }
  var filter = document.getElementById("filter");
  var section = document.getElementById("section-filter");
  var list = document.getElementById("points");
  var progress = document.getElementById("progress");
  var points = [];
  data.sections.forEach(function (s, si) {
    s.points.forEach(function (p, pi) { points.push({ key: si + ":" + pi, section: s.title, text: p }); });
    var option = document.createElement("option");
    option.value = s.title; option.textContent = s.title || "Overview";
    section.appendChild(option);
  });
  function save() { try { localStorage.setItem(storeKey, JSON.stringify(done)); } catch (e) { /* private mode */ } }
  function renderPoints() {
    var q = filter.value.trim().toLowerCase();
    var only = section.value;
    list.textContent = "";
    var visible = 0;
    points.forEach(function (p) {
      if (only && p.section !== only) return;
      if (q && p.text.toLowerCase().indexOf(q) === -1) return;
      visible += 1;
      var li = document.createElement("li");
      var box = document.createElement("input");
      box.type = "checkbox"; box.checked = !!done[p.key]; box.setAttribute("aria-label", "Mark as done");
      box.addEventListener("change", function () { done[p.key] = box.checked; save(); renderPoints(); });
      var text = document.createElement("span");
      var tag = document.createElement("small");
      tag.className = "tag"; tag.textContent = p.section || "Overview";
      text.appendChild(tag);
      text.appendChild(document.createTextNode(p.text));
      if (done[p.key]) li.className = "done";
      li.appendChild(box); li.appendChild(text); list.appendChild(li);
    });
    var ticked = points.filter(function (p) { return done[p.key]; }).length;
    progress.textContent = ticked + " of " + points.length + " done · " + visible + " shown";
  }
  filter.addEventListener("input", renderPoints);
  section.addEventListener("change", renderPoints);
  document.getElementById("clear-done").addEventListener("click", function () { done = {}; save(); renderPoints(); });
  document.getElementById("copy-summary").addEventListener("click", function () {
    var lines = points.filter(function (p) { return !done[p.key]; }).map(function (p) { return "- " + p.text; });
    var text = data.title + "\n" + lines.join("\n");
    if (navigator.clipboard) {
      navigator.clipboard.writeText(text).then(function () { status.textContent = "Open points copied."; },
        function () { status.textContent = "Copying is not allowed here."; });
    } else { status.textContent = "Copying is not available in this browser."; }
  });
  // A cell a spreadsheet would read as a formula is written as text (OWASP CSV injection).
  function cell(value) {
    var text = String(value);
    if (/^[=+\-@\t\r]/.test(text) && isNaN(number(text))) text = "'" + text;
    return '"' + text.replace(/"/g, '""') + '"';
  }
  document.getElementById("export-csv").addEventListener("click", function () {
    var csv = data.tables.map(function (t) {
      return [t.headers].concat(t.rows).map(function (r) { return r.map(cell).join(","); }).join("\n");
    }).join("\n\n");
    var lines = points.map(function (p) { return cell(p.section) + "," + cell(p.text); });
    var blob = new Blob([csv || ("Section,Point\n" + lines.join("\n"))], { type: "text/csv" });
    var link = document.createElement("a");
    link.href = URL.createObjectURL(blob); link.download = "export.csv";
    document.body.appendChild(link); link.click(); link.remove();
    status.textContent = "Exported export.csv.";
  });
  var sources = document.getElementById("sources");
  data.sources.forEach(function (s) {
    var li = document.createElement("li");
    var label = s.title + (s.detail ? " (" + s.detail + ")" : "");
    if (s.url && /^https?:\/\//i.test(s.url)) {
      var a = document.createElement("a"); a.href = s.url; a.rel = "noopener noreferrer"; a.textContent = label;
      li.appendChild(a);
    } else { li.textContent = label; }
    sources.appendChild(li);
  });
  renderPoints();
})();
"""

APP_CONTROLS = ("filter", "section-filter", "clear-done", "copy-summary", "export-csv")
MAX_CATEGORIES = 20  # a column with more distinct values is searched, not picked from


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
    css = (
        _APP_CSS
        + ".visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }"
    )
    return _document(spec.title, body, css, script=_APP_JS, data=json_island("app-data", data))


def _table_data(table: Table) -> dict:
    """A table as the app's script reads it: its text, the columns its chart draws, its category column."""
    from canvas_core.render.structure import adds_up, chart_columns, column_kinds

    rows = [[plain(c) for c in r] for r in table.rows]
    columns = chart_columns(table)
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


def _data_card(i: int, table: dict) -> str:
    caption = esc(table["caption"] or f"Table {i + 1}")
    pick = ""
    if table["category"] is not None:
        column = esc(table["headers"][table["category"]])
        pick = (
            f'<label class="inline" for="rows-column-{i}">{column}</label>'
            f'<select id="rows-column-{i}" class="rows-column" data-table="{i}"><option value="">All</option></select>'
        )
    chart = f'<div class="chart" data-table="{i}"' + ("></div>" if table["chart"] else " hidden></div>")
    if table["chart"] and len(table["chart"]["values"]) > 1:
        options = "".join(f'<option value="{c}">{esc(table["headers"][c])}</option>' for c in table["chart"]["values"])
        pick += (
            f'<label class="inline" for="chart-measure-{i}">Chart</label>'
            f'<select id="chart-measure-{i}" class="chart-measure" data-table="{i}">{options}</select>'
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

_PROTOTYPE_CSS = """
.shell { display: grid; grid-template-columns: 16rem 1fr; min-height: 100vh; }
.shell nav { background: var(--accent); color: #fff; padding: 1.2rem; }
.shell nav h1 { font-size: 1.1rem; margin: 0 0 1rem; }
.shell nav ol { list-style: none; padding: 0; margin: 0; display: grid; gap: .3rem; }
.shell nav button { width: 100%; text-align: left; background: transparent; border-color: transparent; }
.shell nav button[aria-current="step"] { background: rgba(255,255,255,.18); }
.screen { padding: 2rem; max-width: 60rem; }
.screen[hidden] { display: none; }
.pager { display: flex; gap: .6rem; align-items: center; padding: 0 2rem 2rem; }
#position { color: var(--muted); }
@media (max-width: 720px) {
  .shell { grid-template-columns: 1fr; }
  .shell nav ol { grid-auto-flow: column; overflow-x: auto; }
}
"""

_PROTOTYPE_JS = r"""
(function () {
  "use strict";
  var screens = Array.prototype.slice.call(document.querySelectorAll(".screen"));
  var tabs = Array.prototype.slice.call(document.querySelectorAll("[data-screen]"));
  var prev = document.getElementById("prev"), next = document.getElementById("next");
  var position = document.getElementById("position");
  var current = 0;
  function show(n) {
    current = Math.max(0, Math.min(screens.length - 1, n));
    screens.forEach(function (s, i) { s.hidden = i !== current; });
    tabs.forEach(function (t, i) {
      if (i === current) t.setAttribute("aria-current", "step"); else t.removeAttribute("aria-current");
    });
    prev.disabled = current === 0; next.disabled = current === screens.length - 1;
    position.textContent = "Screen " + (current + 1) + " of " + screens.length;
    if (location.hash !== "#screen-" + current) history.replaceState(null, "", "#screen-" + current);
    var heading = screens[current].querySelector("h2"); if (heading) heading.focus();
  }
  tabs.forEach(function (t, i) { t.addEventListener("click", function () { show(i); }); });
  prev.addEventListener("click", function () { show(current - 1); });
  next.addEventListener("click", function () { show(current + 1); });
  document.addEventListener("keydown", function (e) {
    if (e.target && /input|textarea|select/i.test(e.target.tagName)) return;
    if (e.key === "ArrowRight") show(current + 1);
    if (e.key === "ArrowLeft") show(current - 1);
  });
  var start = parseInt((location.hash.match(/^#screen-(\d+)$/) || [])[1] || "0", 10);
  show(isNaN(start) ? 0 : start);
})();
"""


def render_prototype(spec: AppSpec) -> str:
    """A clickable prototype: one screen per section, a side navigation, back and next, arrow keys."""
    opening = [Paragraph(spec.task)] if spec.task else []
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
    return _document(spec.title, body, _PROTOTYPE_CSS, script=_PROTOTYPE_JS)


# ---- the landing page -----------------------------------------------------------------------------------------

_LANDING_CSS = """
.site-header { position: sticky; top: 0; background: rgba(255,255,255,.95); border-bottom: 1px solid var(--line);
  z-index: 2; }
.site-header .wrap { display: flex; align-items: center; justify-content: space-between; gap: 1rem;
  padding-top: .8rem; padding-bottom: .8rem; }
.brand { font-weight: 700; color: var(--ink); text-decoration: none; display: flex; align-items: center;
  gap: .6rem; }
.brand .logo { height: 2.2rem; width: auto; max-width: 9rem; object-fit: contain; }
.site-header nav ul { display: flex; gap: 1.2rem; list-style: none; margin: 0; padding: 0; }
.site-header nav a { text-decoration: none; color: var(--muted); }
.hero { background: linear-gradient(135deg, #1f4e79, #14284a); color: #fff; padding: 4.5rem 0; }
.hero .wrap { display: grid; grid-template-columns: 1.2fr 1fr; gap: 2.5rem; align-items: center; }
.hero h1 { font-size: clamp(2rem, 5vw, 3.2rem); line-height: 1.1; margin: 0 0 1rem; }
.hero p { font-size: 1.2rem; opacity: .92; }
.hero img { width: 100%; height: auto; border-radius: .8rem; box-shadow: 0 1rem 2rem rgba(0,0,0,.25); }
.hero img.hero-logo { background: #fff; padding: 2rem; max-height: 18rem; object-fit: contain; }
.cta-button { display: inline-block; background: var(--accent-2); color: #14284a; font-weight: 700;
  padding: .85rem 1.4rem; border-radius: .5rem; text-decoration: none; margin-top: .6rem; }
section.band { padding: 3.5rem 0; }
section.band:nth-of-type(even) { background: #fff; }
.features { display: grid; grid-template-columns: repeat(auto-fit, minmax(15rem, 1fr)); gap: 1.2rem;
  list-style: none; padding: 0; }
.features li { background: var(--card); border: 1px solid var(--line); border-radius: .7rem; padding: 1.2rem; }
.features h3 { margin: 0 0 .4rem; font-size: 1.1rem; }
.signup form { display: flex; flex-wrap: wrap; gap: .6rem; max-width: 34rem; }
.signup input[type=email] { flex: 1 1 16rem; padding: .75rem; border: 1px solid var(--line); border-radius: .5rem; }
.signup button { background: var(--accent-2); border-color: var(--accent-2); color: #14284a; font-weight: 700; }
#signup-message { min-height: 1.5rem; margin-top: .6rem; font-weight: 600; }
footer { padding: 2rem 0 3rem; color: var(--muted); font-size: .9rem; }
@media (max-width: 760px) {
  .hero .wrap { grid-template-columns: 1fr; }
  .site-header nav ul { display: none; }
  .hero { padding: 3rem 0; }
}
"""

_LANDING_JS = r"""
(function () {
  "use strict";
  var form = document.getElementById("signup-form");
  var email = document.getElementById("signup-email");
  var message = document.getElementById("signup-message");
  form.addEventListener("submit", function (e) {
    e.preventDefault();
    if (!email.checkValidity()) { message.textContent = "Please enter a valid email address."; email.focus(); return; }
    message.textContent = "Thanks! We will be in touch at " + email.value + ".";
    form.reset();
  });
})();
"""


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
    css = (
        _LANDING_CSS
        + ".visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }"
    )
    return _document(page.title, body, css, script=_LANDING_JS)


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


# ---- the check ------------------------------------------------------------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"}
OPTIONAL_END = {"p", "li", "dt", "dd", "tr", "td", "th", "thead", "tbody", "tfoot", "option", "optgroup", "colgroup",
                "html", "head", "body", "rt", "rp", "caption"}  # fmt: skip
CONTROLS = {"button", "input", "select", "textarea"}
EXECUTABLE_TYPES = {"", "text/javascript", "application/javascript", "module"}


@dataclass
class HtmlView:
    """What a page holds, as a browser would see it."""

    title: str = ""
    doctype: bool = False
    tags: list[str] = field(default_factory=list)
    ids: dict[str, str] = field(default_factory=dict)  # id -> tag
    hooks: dict[str, list[str]] = field(default_factory=dict)  # id -> selectors that find it: data-x, .class
    forms: dict[str, str] = field(default_factory=dict)  # control id -> id of the form it is in
    scripts: list[str] = field(default_factory=list)  # executable inline scripts
    data_islands: list[str] = field(default_factory=list)
    external: list[str] = field(default_factory=list)  # src/href that load from elsewhere
    handler_attributes: list[str] = field(default_factory=list)  # onclick=... and the like
    links: list[str] = field(default_factory=list)
    text: str = ""
    errors: list[str] = field(default_factory=list)

    def controls(self) -> list[str]:
        return [i for i, tag in self.ids.items() if tag in CONTROLS or tag == "form"]

    def wired_controls(self) -> list[str]:
        """Controls the script finds (by id, data attribute or class) and listens to, and the buttons of a form
        it listens to."""
        code = "\n".join(self.scripts)
        if not ("addEventListener" in code or re.search(r"\.on\w+\s*=", code)):
            return []

        def found(i: str) -> bool:
            by_id = re.search(rf"""(getElementById\(\s*["']{re.escape(i)}["']|["'`]#{re.escape(i)}\b)""", code)
            return bool(by_id) or any(
                re.search(rf"""["'`][^"'`]*{re.escape(h)}\b""", code) for h in self.hooks.get(i, [])
            )

        return [i for i in self.controls() if found(i) or (i in self.forms and found(self.forms[i]))]


class _Checker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.view = HtmlView()
        self.stack: list[str] = []
        self.forms: list[tuple[str, str]] = []
        self._script: tuple[str, list[str]] | None = None
        self._in_title = False
        self._text: list[str] = []

    def handle_decl(self, decl: str) -> None:
        if decl.lower().startswith("doctype html"):
            self.view.doctype = True

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k.lower(): v or "" for k, v in attrs}
        self.view.tags.append(tag)
        if "id" in values:
            element_id = values["id"]
            self.view.ids.setdefault(element_id, tag)
            hooks = [f"[{k}" for k in values if k.startswith("data-")]
            hooks += [f".{c}" for c in values.get("class", "").split()]
            self.view.hooks[element_id] = hooks
            form = next((i for t, i in reversed(self.forms) if t == "form"), None)
            if form and tag in CONTROLS:
                self.view.forms[element_id] = form
        if tag == "form":
            self.forms.append(("form", values.get("id", "")))
        self.view.handler_attributes += [k for k in values if k.startswith("on")]
        for key in ("src", "href", "action", "formaction", "data"):
            target = values.get(key, "").strip()
            if target.lower().startswith("javascript:"):
                self.view.errors.append(f"<{tag}> has a javascript: URL")
            elif re.match(r"^(https?:)?//", target) and not (tag == "a" or (tag == "form" and key == "action")):
                self.view.external.append(target)
            elif tag == "a" and target:
                self.view.links.append(target)
        if tag == "script":
            self._script = (values.get("type", "").lower(), [])
        if tag == "title":
            self._in_title = True
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID and self.stack and self.stack[-1] == tag:
            self.stack.pop()

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if tag not in self.stack:
            self.view.errors.append(f"</{tag}> closes nothing")
            return
        while self.stack:
            open_tag = self.stack.pop()
            if open_tag == tag:
                break
            if open_tag not in OPTIONAL_END:
                self.view.errors.append(f"<{open_tag}> is not closed before </{tag}>")
        if tag == "script" and self._script is not None:
            kind, parts = self._script
            (self.view.scripts if kind in EXECUTABLE_TYPES else self.view.data_islands).append("".join(parts))
            self._script = None
        if tag == "title":
            self._in_title = False
        if tag == "form" and self.forms:
            self.forms.pop()

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self._script[1].append(data)
        elif self._in_title:
            self.view.title += data
        elif "style" not in self.stack:
            self._text.append(data)

    def close(self) -> None:
        super().close()
        unclosed = [t for t in self.stack if t not in OPTIONAL_END]
        if unclosed:
            self.view.errors.append(f"<{unclosed[-1]}> is never closed")
        self.view.text = re.sub(r"\s+", " ", "".join(self._text)).strip()


def parse_html(text: str) -> HtmlView:
    checker = _Checker()
    checker.feed(text)
    checker.close()
    return checker.view


def check_html(text: str | bytes, require_script: bool = False) -> HtmlView:
    """Parse a page back; RenderCheckError unless it is a whole, self-contained document (doctype, html, head,
    title, body; tags closed; nothing loaded from elsewhere) with, when `require_script`, a script."""
    try:
        source = text.decode("utf-8") if isinstance(text, bytes) else text
        view = parse_html(source)
    except UnicodeDecodeError as exc:
        raise RenderCheckError("the page is not UTF-8 text") from exc
    problems = list(view.errors)
    if not view.doctype:
        problems.append("no <!DOCTYPE html>")
    problems += [f"no <{t}>" for t in ("html", "head", "body") if t not in view.tags]
    if not view.title.strip():
        problems.append("no <title>")
    if view.external:
        problems.append(f"it loads {view.external[0]} from elsewhere")
    if require_script and not any(s.strip() for s in view.scripts):
        problems.append("no script")
    if problems:
        raise RenderCheckError("the page is not a whole, self-contained HTML document: " + "; ".join(problems))
    return view
