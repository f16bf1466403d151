"""The offline provider: deterministic, no network. It writes extractively from the material a run has
gathered (the sentences that bear most on the task, in their order, with the numbers of their sources, and
what the material's tables show) and says plainly, in its model id and in its text, that no language model
was called. Every source the material cites is cited by at least one point, so the answer draws on every
source it lists. Asked for a deliverable with an outline (agents/outline.py), it writes one `## `
section per item from the material bearing on that item, and says so plainly where there is none. It does
not plan: the planner plans by rules when the provider is offline."""

from __future__ import annotations

import re
from dataclasses import dataclass

from canvas_core.observability import tracer
from canvas_core.prompt_format import (
    CITATION,
    LEGEND_MARK,
    MATERIAL_MARK,
    NOT_COVERED,
    NOTHING_YET,
    is_generic,
    is_internal,
    outline_in,
)
from canvas_core.providers.base import Completion, fit_input
from canvas_core.sentences import sentences

MODEL_ID = "offline/extractive-v1"
NOTICE = "Offline answer: no language model was called (this deployment uses the deterministic offline provider)."
NO_MATERIAL = "No material was provided beyond the prompt itself."
KEY_POINTS = "Key points from the material:"
MAX_POINTS = {"writer": 10}
DEFAULT_MAX_POINTS = 8
POINTS_PER_PART = 4
SUMMARY_POINTS = 3
LEADING_PARTS = ("Summary", "Overview")
MAX_TABLES = 5
# Lines of earlier offline answers that are scaffolding, not material.
SCAFFOLDING = re.compile(
    r"^(offline answer:|task:|question:|key points from the material:|no material was provided|sources$)",
    re.IGNORECASE,
)
IMAGE_LINE = re.compile(r"^Image (?P<name>[^:\n]{1,200}): (?:PNG|JPEG|GIF|WEBP|SVG)\b", re.MULTILINE)
UPLOADED_IMAGE = "is an image the requester provided"  # prompt_format.py IMAGE_NAMED
TABLE_ASKED = re.compile(r"\bmarkdown table\b", re.IGNORECASE)
LIST_ASKED = re.compile(r"\bmarkdown list\b", re.IGNORECASE)
# Words too common to say what a sentence is about.
STOPWORDS = frozenset(
    re.findall(
        r"[a-z]+",
        "about above after again against also among and any are because been before being below between both but "
        "can could did does doing down during each few for from further had has have having her here hers him his "
        "how into its itself just more most not now off once only other our out over own same she should some "
        "such than that the their them then there these they this those through too under until very was were "
        "what when where which while who whom why will with would you your write answer short please give make "
        "tell explain describe",
    )
)


@dataclass(frozen=True)
class Point:
    text: str
    section: int  # which input it comes from


class OfflineProvider:
    name = "offline"

    @tracer.capture_method
    def complete(self, *, system: str, prompt: str, role: str) -> Completion:
        prompt = fit_input(system, prompt)
        task, _, material = prompt.partition(MATERIAL_MARK)
        material, _, legend = material.partition(LEGEND_MARK)
        items, _ = outline_in(task)
        text = _outlined(task, material, legend, items) if items else _answer(task, material, legend, role)
        return Completion(
            text=text, model_id=MODEL_ID, input_tokens=_tokens(system + prompt), output_tokens=_tokens(text)
        )


def _answer(task: str, material: str, legend: str, role: str) -> str:
    lead = _first_paragraph(task)
    label = "" if re.match(r"^(question|task):", lead, re.IGNORECASE) else "Task: "
    lines = [NOTICE, "", f"{label}{lead}"]
    points = _key_points(task, material, legend, MAX_POINTS.get(role, DEFAULT_MAX_POINTS))
    wants_table, wants_list = bool(TABLE_ASKED.search(task)), bool(LIST_ASKED.search(task))
    if not points and (wants_table or wants_list):
        # A block that needs a table or a list gets the request's own parts, said to be just that.
        lines += ["", f"{NO_MATERIAL} The items below restate the request."]
        points = _request_parts(task)
    elif not points:
        lines += ["", NO_MATERIAL]
    if points and wants_table:
        lines += ["", "| # | Point |", "|---|---|"]
        lines += [f"| {i} | {p.replace('|', '/')} |" for i, p in enumerate(points, start=1)]
    elif points:
        lines += ["", KEY_POINTS, *(f"- {p}" for p in points)]
    return "\n".join(lines)


def _outlined(task: str, material: str, legend: str, items: list[str]) -> str:
    """One `## ` section per outline item: the points that bear on the item (named items first, each point used
    once), the best of the rest under the generic items (Summary, Overview, Next steps ...), and a plain
    statement where the material holds nothing for an item."""
    points = _points(material, legend)
    keywords = _stems(task)
    taken: set[int] = set()
    chosen: dict[str, list[int]] = {item: [] for item in items}
    named = [i for i in items if not is_generic(i)]
    for n, point in enumerate(points):
        stems = _stems(point.text)
        scores = [len(_stems(item) & stems) for item in named]
        if scores and max(scores) > 0:
            best = named[scores.index(max(scores))]
            if len(chosen[best]) < POINTS_PER_PART:
                chosen[best].append(n)
                taken.add(n)
    ranked = sorted(range(len(points)), key=lambda n: (-len(keywords & _stems(points[n].text)), n))
    rest = [n for n in ranked if n not in taken]
    for item in (i for i in items if is_generic(i)):
        if item in LEADING_PARTS:
            # A summary restates the best points, whichever part also holds them.
            chosen[item] = sorted((rest + [n for n in ranked if n not in rest])[:SUMMARY_POINTS])
            rest = [n for n in rest if n not in chosen[item]]
        else:
            chosen[item] = sorted(rest[:POINTS_PER_PART])
            rest = rest[POINTS_PER_PART:]
    lines: list[str] = []
    for item in items:
        lines += [f"## {item}", ""]
        if chosen[item]:
            lines += [f"- {points[n].text}" for n in sorted(chosen[item])]
        else:
            lines.append(NOT_COVERED if material.strip() else NOTHING_YET)
        lines.append("")
    return "\n".join(lines).strip()


def _request_parts(task: str) -> list[str]:
    lead = re.sub(r"^(question|task):\s*", "", _first_paragraph(task), flags=re.IGNORECASE)
    parts = [p for p in sentences(lead) if len(p) > 3]
    return parts or [lead]


def _first_paragraph(text: str) -> str:
    return " ".join(text.strip().split("\n\n")[0].split())


def _key_points(task: str, material: str, legend: str, limit: int) -> list[str]:
    """The points of the material that share most words with the task, in the material's order; every source
    the material cites is cited by at least one of them (its best point)."""
    points = _points(material, legend)
    keywords = _stems(task)
    ranked = sorted(range(len(points)), key=lambda i: (-len(keywords & _stems(points[i].text)), i))
    chosen = set(ranked[:limit])
    cited = {n for i in chosen for n in CITATION.findall(points[i].text)}
    for i in ranked:
        missing = set(CITATION.findall(points[i].text)) - cited
        if missing:
            chosen.add(i)
            cited |= missing
    return [points[i].text for i in sorted(chosen)]


def _points(material: str, legend: str = "") -> list[Point]:
    """Sentences of each section, in order, then what its tables show. A section that cites nothing itself and
    has one source (a file, a page) gives each of its points that source's number; a section that cites keeps
    its own citations."""
    found: list[Point] = []
    seen: set[str] = set()
    tables: set[str] = set()  # a table another input copied is described once
    for index, (heading, body) in enumerate(_sections(material)):
        refs = CITATION.findall(heading)
        mark = f" [{refs[0]}]" if len(refs) == 1 and not CITATION.search(body) else ""
        name = re.sub(r"\s*\(sources?( \[\d+\])+\)\s*$", "", heading.removeprefix("## ")).strip()
        if len(refs) > 1 and not CITATION.search(body):
            body = _cite_pages(body, refs, legend)
        said = [*_sentences(body), *_table_facts(body, name, tables)]
        image = IMAGE_LINE.search(body)
        if not said and image:
            # An image with nothing to quote is still part of the material: the answer names it (a deliverable,
            # which shows the image itself, drops the line).
            said = [f"{image.group('name')} {UPLOADED_IMAGE}."]
        for sentence in said:
            key = re.sub(r"\s+([.!?,;:])", r"\1", CITATION.sub("", sentence)).strip().lower()
            if len(key) < 20 or key in seen:
                continue
            seen.add(key)
            if len(sentence) > 300:
                sentence = sentence[:297].rstrip() + "..."
            text = _cite(sentence, mark)
            found.append(Point(text, index))
    return found


def _cite_pages(body: str, refs: list[str], legend: str) -> str:
    """A file read page by page (`### Page n` under it) has a source per page: each line of a page is marked
    with its page's number."""
    pages = {}
    for ref in refs:
        found = re.search(rf"^\[{ref}\] .*, page (\d+)", legend, re.MULTILINE)
        if found:
            pages[found.group(1)] = ref
    out, mark = [], ""
    for line in body.splitlines():
        page = re.match(r"^#+\s*Page (\d+)\s*$", line.strip())
        if page:
            mark = pages.get(page.group(1), "")
            out.append(line)
        elif mark and line.strip() and not line.lstrip().startswith(("#", "|")):
            out.append(" ".join(_cite(s, f" [{mark}]") for s in sentences(line)))
        else:
            out.append(line)
    return "\n".join(out)


def _sentences(body: str) -> list[str]:
    out: list[str] = []
    for line in body.splitlines():
        stripped = line.strip()
        if stripped.startswith(("#", "|")):
            continue  # a title or a table row: tables are read as tables below
        line = stripped.strip(" \t-*>")
        if not line or SCAFFOLDING.match(line) or re.match(r"^\[\d+\]\s", line) or is_internal(line):
            continue
        out += [s for s in sentences(line) if not is_internal(s)]
    return out


def _table_facts(body: str, name: str, described: set[str]) -> list[str]:
    """What a section's tables show, in a sentence per measured column: where it is highest and lowest, and
    its total when the column adds up."""
    if "|" not in body:
        return []
    from canvas_core.render.structure import adds_up, chart_columns, plain, table_caption, tables_in_content
    from canvas_core.tables import column_kinds, data_rows, typed_value

    facts = []
    for table in tables_in_content(body, caption=name)[:MAX_TABLES]:
        columns = chart_columns(table)
        signature = repr((table.headers, table.rows[:3]))
        if columns is None or signature in described:
            continue
        described.add(signature)
        label, values = columns
        rows, kinds = data_rows(table), column_kinds(table)
        caption = table_caption(name, table.caption if table.caption != name else "")
        for c in values:
            header = plain(table.headers[c])
            sums = kinds[c] in ("number", "currency") and adds_up(header)
            figures = _by_label(rows, label, c, sums)
            if len(figures) < 2:
                continue
            (high, high_value), (low, low_value) = max(figures, key=lambda f: f[1]), min(figures, key=lambda f: f[1])
            like = next(r[c] for r in rows if typed_value(r[c]).kind != "empty")
            grouped = len(figures) < len([r for r in rows if typed_value(r[c]).kind != "empty"])
            measure = header if header.lower() == caption.lower() else f"{header} in {caption}"
            if grouped:
                measure += f" by {plain(table.headers[label])}" + ("" if sums else " (average)")
            fact = (
                f"{measure}: highest for {high} ({_number_text(high_value, like)}), lowest for {low} "
                f"({_number_text(low_value, like)})"
            )
            if sums:
                fact += f"; {_number_text(sum(f[1] for f in figures), like)} in all"
            named = fact.split(":", 1)[0]
            facts.append((fact if "_" in named else fact[:1].upper() + fact[1:]) + ".")
    return facts


def _by_label(rows: list[list[str]], label: int, column: int, sums: bool) -> list[tuple[str, float]]:
    """(label, figure) per distinct label: rows that share a label add up (or average, for a measure that does
    not add up), so a category's figure is the category's."""
    from canvas_core.render.structure import plain
    from canvas_core.tables import typed_value

    found: dict[str, list[float]] = {}
    for row in rows:
        value = typed_value(row[column]).value
        if isinstance(value, int | float) and not isinstance(value, bool):
            found.setdefault(plain(row[label]) or "—", []).append(float(value))
    return [(name, sum(v) if sums else sum(v) / len(v)) for name, v in found.items()]


def _number_text(value: float, like: str) -> str:
    """A figure written as its column's cells are: with their currency symbol, with two decimals when they
    show two (amounts), else with what decimals it has (at most two)."""
    symbol = next((ch for ch in like if ch in "$€£¥"), "")
    two_places = bool(re.search(r"\.\d\d(?!\d)", like))
    text = f"{value:,.2f}" if two_places else f"{value:,.2f}".rstrip("0").rstrip(".")
    if not symbol:
        return text
    return f"{symbol}{text}" if like.strip().lstrip("-(").startswith(symbol) else f"{text} {symbol}"


def _sections(material: str) -> list[tuple[str, str]]:
    """(heading, body) of each `## ` section; text before the first heading is a section without one."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    for line in material.splitlines():
        if line.startswith("## "):
            sections.append((line, []))
        else:
            sections[-1][1].append(line)
    return [(heading, "\n".join(lines)) for heading, lines in sections]


def _cite(sentence: str, mark: str) -> str:
    if not mark or CITATION.search(sentence):
        return sentence
    match = re.search(r"[.!?]+$", sentence)
    return sentence[: match.start()] + mark + match.group(0) if match else sentence + mark


def _stems(text: str) -> set[str]:
    return {w[:5] for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) >= 3 and w not in STOPWORDS}


def _tokens(text: str) -> int:
    # About four characters a token, the usual rule of thumb for English.
    return max(1, len(text) // 4)
