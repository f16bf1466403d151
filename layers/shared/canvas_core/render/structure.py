"""The plain data every renderer works from, and how block content becomes it.

Blocks hand each other markdown-ish text. `parse_markdown` turns it into a `Deliverable`: a title, sections of
paragraphs, bullet lists and tables (`canvas_core.tables.Table`), and the references cited as [n].
`tables_in_content` finds tables in an input (pipe tables, CSV from a .csv file, JSON rows), and
`summable_columns` / `chart_columns` say which columns a total row adds up and a chart draws, from what each
column holds (`canvas_core.tables.column_kinds`), so that every format renders the same data the same way.
Standard library only.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass, field

from canvas_core.prompt_format import NOT_COVERED, NOTHING_YET
from canvas_core.sentences import sentences as sentences  # what renderers and blocks split text by
from canvas_core.tables import (
    SEPARATOR,
    Table,
    column_kinds,
    data_rows,
    has_total_row,
    split_row,
    table_from_delimited_text,
    table_from_json_rows,
)

# ---- the data ------------------------------------------------------------------------------------------------


@dataclass
class Paragraph:
    text: str
    code: bool = False
    # The lines as written (the text joins them): where a line break means something, e.g. a button's label.
    lines: list[str] = field(default_factory=list, compare=False, repr=False)


@dataclass
class BulletList:
    items: list[str]
    ordered: bool = False


Block = Paragraph | BulletList | Table


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)
    level: int = 1


@dataclass
class Reference:
    """A source as a reader cites it: its title, where it is, and what part (a file's page)."""

    title: str
    url: str | None = None
    detail: str = ""


@dataclass
class Figure:
    """An image a deliverable shows (an upload, or one a block drew), with its caption."""

    data: bytes
    mime: str
    caption: str
    uploaded: bool = False  # the requester's own image, not one a block drew


@dataclass
class Deliverable:
    title: str
    sections: list[Section] = field(default_factory=list)
    references: list[Reference] = field(default_factory=list)
    subtitle: str = ""
    date: dt.date | None = None
    figures: list[Figure] = field(default_factory=list)
    logo: Figure | None = None  # the requester's logo: shown as a logo (a deck's corner), not as a figure
    appendix: list[Section] = field(default_factory=list)  # after the body, outside a deck's slide count

    def tables(self) -> list[Table]:
        return [b for s in self.sections for b in s.blocks if isinstance(b, Table)]

    def captioned_tables(self) -> list[Table]:
        """The tables, each without a caption given its section's title."""
        for section in self.sections:
            for block in section.blocks:
                if isinstance(block, Table):
                    block.caption = block.caption or section.title
        return self.tables()


@dataclass
class MemoHeader:
    to: str
    sender: str
    date: dt.date
    subject: str


# ---- markdown-ish text -> Deliverable -------------------------------------------------------------------------

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_BOLD_LINE = re.compile(r"^\*\*([^*]{1,100}?)\*\*:?\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+•])\s+(.*)$")
_ORDERED = re.compile(r"^\s*\d{1,3}[.)]\s+(.*)$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_RULE = re.compile(r"^([-*_])(\s*\1){2,}$")  # a horizontal rule: a break, not content
_TABLE_FRAGMENT = re.compile(r"^\|.*\|(\s*\[\d{1,3}\])*\.?$")


def parse_markdown(text: str, title: str = "") -> Deliverable:
    """Sections, paragraphs, lists and pipe tables of a text. A lone top-level heading becomes the title
    (else `title`); content before the first heading is a section without a title."""
    lines = (text or "").replace("\r\n", "\n").split("\n")
    headings = [(i, m) for i, m in enumerate(_HEADING.match(line) for line in lines) if m]
    top_level = [i for i, m in headings if len(m.group(1)) == 1]
    # A single top-level heading that opens the headings is the title; several are sections.
    title_index = top_level[0] if len(top_level) == 1 and headings[0][0] == top_level[0] else -1

    sections: list[Section] = [Section(title="", level=1)]
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            written = [s.strip() for s in paragraph]
            sections[-1].blocks.append(Paragraph(" ".join(written), lines=written))
            paragraph.clear()

    def add_item(item: str, ordered: bool) -> None:
        if _TABLE_FRAGMENT.match(item.strip()):
            return  # a table row outside a table is noise, not a point
        blocks = sections[-1].blocks
        last = blocks[-1] if blocks else None
        if not (isinstance(last, BulletList) and last.ordered == ordered):
            last = BulletList(items=[], ordered=ordered)
            blocks.append(last)
        last.items.append(item.strip())

    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if _FENCE.match(line):
            flush()
            code: list[str] = []
            i += 1
            while i < len(lines) and not _FENCE.match(lines[i]):
                code.append(lines[i])
                i += 1
            sections[-1].blocks.append(Paragraph("\n".join(code), code=True))
        elif not stripped or _RULE.match(stripped):
            flush()
        elif heading := _HEADING.match(line):
            flush()
            if i == title_index:
                title = plain(heading.group(2))
            else:
                sections.append(Section(title=plain(heading.group(2)), level=len(heading.group(1))))
        elif bold := _BOLD_LINE.match(stripped):
            flush()
            sections.append(Section(title=bold.group(1).strip().rstrip(":"), level=4))
        elif "|" in stripped and i + 1 < len(lines) and SEPARATOR.match(lines[i + 1]) and "|" in lines[i + 1]:
            flush()
            rows = [split_row(line)]
            i += 2
            while i < len(lines) and "|" in lines[i] and lines[i].strip():
                rows.append(split_row(lines[i]))
                i += 1
            sections[-1].blocks.append(_table(rows))
            continue
        elif stripped.startswith("|") and stripped.endswith("|") and _is_table_start(lines, i):
            flush()
            rows = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                if not SEPARATOR.match(lines[i]):
                    rows.append(split_row(lines[i]))
                i += 1
            sections[-1].blocks.append(_table(rows))
            continue
        elif bullet := _BULLET.match(line):
            flush()
            add_item(bullet.group(1), ordered=False)
        elif numbered := _ORDERED.match(line):
            flush()
            add_item(numbered.group(1), ordered=True)
        elif line[:1] in " \t" and sections[-1].blocks and isinstance(sections[-1].blocks[-1], BulletList):
            # An indented line under a list item continues it.
            items = sections[-1].blocks[-1].items
            items[-1] = f"{items[-1]} {stripped}"
        else:
            paragraph.append(line)
        i += 1
    flush()

    kept = [s for s in sections if s.blocks or s.title]
    _normalize_levels(kept)
    return Deliverable(title=title, sections=kept)


def _is_table_start(lines: list[str], i: int) -> bool:
    return i + 1 < len(lines) and lines[i + 1].strip().startswith("|")


def _table(rows: list[list[str]]) -> Table:
    headers = rows[0]
    width = len(headers)
    body = [(r + [""] * width)[:width] for r in rows[1:]]
    return Table(headers=headers, rows=body)


def _normalize_levels(sections: list[Section]) -> None:
    """The shallowest heading level used becomes 1, deeper ones 2 or 3."""
    levels = sorted({s.level for s in sections if s.title})
    rank = {level: min(i + 1, 3) for i, level in enumerate(levels)}
    for s in sections:
        s.level = rank.get(s.level, 1)


def extract_fields(deliverable: Deliverable, names: tuple[str, ...]) -> dict[str, str]:
    """Lines such as `To: Board` from the untitled lead section, removed from it (a memo's header). Fields on
    consecutive lines arrive as one paragraph and are split at each label."""
    found: dict[str, str] = {}
    label = re.compile(rf"(?:^|\s)\**({'|'.join(names)})\**\s*:\**\s*", re.IGNORECASE)
    for section in deliverable.sections:
        if section.title:
            break
        kept: list[Block] = []
        for block in section.blocks:
            text = block.text if isinstance(block, Paragraph) and not block.code else ""
            labels = list(label.finditer(text))
            if not labels or labels[0].start() != 0:
                kept.append(block)
                continue
            for this, following in zip(labels, [*labels[1:], None], strict=True):
                value = text[this.end() : following.start() if following else None]
                found.setdefault(this.group(1).lower(), plain(value).strip())
        section.blocks = kept
    deliverable.sections = [s for s in deliverable.sections if s.blocks or s.title]
    return found


# ---- tables in block outputs ----------------------------------------------------------------------------------


def tables_in_content(text: str, caption: str = "", csv_text: bool = False) -> list[Table]:
    """The tables in one block's output, each captioned by the heading it sits under (else `caption`): its
    pipe tables, else JSON rows, else (when `csv_text`, for a CSV file) the whole text read as CSV or TSV."""
    parsed = parse_markdown(text)
    found = [(b, s.title) for s in parsed.sections for b in s.blocks if isinstance(b, Table)]
    if not found:
        read = (table_from_json_rows(text), table_from_delimited_text(text) if csv_text else None)
        found = [(t, "") for t in read if t]
    tables = []
    for n, (table, heading) in enumerate(found, start=1):
        table.caption = table.caption or heading or (caption if len(found) == 1 else f"{caption} ({n})")
        tables.append(table)
    return tables


_NOT_SUMMABLE = re.compile(
    r"\b(year|fy|id|rank|rate|ratio|percent|pct|share|avg|average|mean|median|price|score|age|index|code|zip|phone"
    r"|growth|margin|min|max|minimum|maximum|range|height|depth|length|width|weight|temperature|level|distance"
    r"|duration|speed|latitude|longitude|lat|lon|identifier|uuid|zipcode|postcode|version)\b",
    re.IGNORECASE,
)


def summable_columns(table: Table, kinds: list[str] | None = None) -> list[int]:
    """Columns a total row should add up: amounts and counts, not years, rates, prices, averages or ids. A table
    that names its totals (`sum_columns`, e.g. a budget's empty Amount column) gets those."""
    if table.sum_columns is not None:
        return list(table.sum_columns)
    if has_total_row(table) or len(table.rows) < 2:
        return []
    return [
        c
        for c, kind in enumerate(kinds or column_kinds(table))
        if kind in ("number", "currency") and adds_up(table.headers[c])
    ]


def same_data(table: Table, other: Table) -> bool:
    """Whether two tables are one: the same headers (markup aside) and first row."""
    return [plain(h) for h in table.headers] == [plain(h) for h in other.headers] and table.rows[:1] == other.rows[:1]


def adds_up(header: str) -> bool:
    """Whether a column so named holds quantities whose sum means something (`avg_resolution_hours`,
    `ticketId`, `Rate (%)`, `#` and `Year` do not)."""
    words = _header_words(header)
    if not re.search(r"[A-Za-z]", words) or "%" in words or re.search(r"\bper\b", words, re.IGNORECASE):
        return False
    return not (is_identifier(header) or _NOT_SUMMABLE.search(words))


_IDENTIFIER = re.compile(
    r"^\s*(#|no\.?|nr\.?|num(ber)?|ref(erence)?)\s*$|\b(id|ids|identifier|uuid|guid|code|zip|zipcode|postcode|phone|"
    r"sku|isbn|year|fy)\b",
    re.IGNORECASE,
)


def is_identifier(header: str) -> bool:
    """Whether a column so named labels rows (ids, codes, row numbers, years) rather than measuring them."""
    return bool(_IDENTIFIER.search(_header_words(header)))


def _header_words(header: str) -> str:
    """`avg_resolution_hours` -> `avg resolution hours`, `ticketId` -> `ticket Id`."""
    return re.sub(r"([a-z])([A-Z])", r"\1 \2", plain(header)).replace("_", " ").replace("-", " ")


MAX_CHART_POINTS = 24


def chart_columns(table: Table) -> tuple[int, list[int]] | None:
    """(label column, up to three value columns) when the table makes a sensible bar chart."""
    rows = data_rows(table)
    if not 2 <= len(rows) <= MAX_CHART_POINTS:
        return None
    kinds = column_kinds(table)
    label = next((c for c, k in enumerate(kinds) if k in ("text", "year", "date")), None)
    values = [
        c for c, k in enumerate(kinds) if k in ("number", "currency", "percent") and not is_identifier(table.headers[c])
    ][:3]
    if label is None or not values:
        return None
    return label, values


# ---- inline text ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    text: str
    bold: bool = False
    italic: bool = False
    code: bool = False
    url: str | None = None


_INLINE = re.compile(
    r"\*\*(?P<b>.+?)\*\*|__(?P<b2>.+?)__|`(?P<c>[^`]+)`|\[(?P<lt>[^\]]+)\]\((?P<lu>[^)\s]+)\)"
    r"|(?<![\w*])\*(?P<i>[^*\s](?:[^*]*?[^*\s])?)\*(?![\w*])|(?<![\w_])_(?P<i2>[^_\s](?:[^_]*?[^_\s])?)_(?![\w_])"
)


def spans(text: str) -> list[Span]:
    """Bold, italic, code and links of one line of markdown, as runs a renderer can style."""
    out: list[Span] = []
    pos = 0
    for m in _INLINE.finditer(text or ""):
        if m.start() > pos:
            out.append(Span(text[pos : m.start()]))
        if m.group("b") or m.group("b2"):
            out.append(Span(m.group("b") or m.group("b2"), bold=True))
        elif m.group("c"):
            out.append(Span(m.group("c"), code=True))
        elif m.group("lt"):
            out.append(Span(m.group("lt"), url=safe_url(m.group("lu"))))
        else:
            out.append(Span(m.group("i") or m.group("i2"), italic=True))
        pos = m.end()
    if pos < len(text or ""):
        out.append(Span(text[pos:]))
    return out


_MARKUP = re.compile(r"[*_`\[]")


def plain(text: str) -> str:
    """The text without its markdown markup."""
    if not _MARKUP.search(text or ""):
        return text or ""
    return "".join(s.text for s in spans(text))


def safe_url(url: str | None) -> str | None:
    """The URL when it is a web or mail address; anything else (javascript:, data:) is dropped."""
    if not url:
        return None
    url = url.strip()
    return url if re.match(r"^(https?://|mailto:)[^\s<>\"']+$", url, re.IGNORECASE) else None


# ---- statements said once ---------------------------------------------------------------------------------------

# What each part says of itself when the material has nothing for it: the next part may say it too.
_PLACEHOLDERS = frozenset(" ".join(t.lower().rstrip(".").split()) for t in (NOT_COVERED, NOTHING_YET))
_CITATION = re.compile(r"\s*\[\d+(?:\s*[,\u2013-]\s*\d+)*\]")


def statement_key(text: str) -> str:
    """A statement as compared with another: its words, without citation marks, emphasis, case or spacing."""
    return " ".join(_CITATION.sub("", plain(text)).split()).rstrip(" .;:!").lower()


def _says(longer: str, shorter: str) -> bool:
    """Whether statement `longer` says all `shorter` does: the same, or `shorter` and then more after a clause
    mark ("X had the highest: 5." is said by "X had the highest: 5; Y the lowest: 1.")."""
    return bool(shorter) and (
        longer == shorter
        or (longer.startswith(shorter) and longer[len(shorter) : len(shorter) + 1] in ";,:(")
        or longer.startswith(shorter + " (")
    )


def drop_repeated_statements(deliverable: Deliverable) -> None:
    """Each statement (a bullet, a sentence of a paragraph) once per section: one another statement of the section
    says as well (the same words without citation marks, or those and more) goes, the cited one of two equal ones
    staying; and none a section repeats from the section just before it. A section left with nothing (and no
    subsections) goes too."""
    previous: list[str] = []
    kept_sections: list[Section] = []
    for n, section in enumerate(deliverable.sections):
        units = [(b, i, text) for b, block in enumerate(section.blocks) for i, text in enumerate(_statements(block))]
        keys = [statement_key(text) for _, _, text in units]
        cited = [bool(_CITATION.search(text)) for _, _, text in units]

        dropped = {(b, i) for k, (b, i, _) in enumerate(units) if _repeated(k, keys, cited, previous)}
        if dropped:
            _drop_statements(section, dropped)
        emptied = bool(dropped) and not section.blocks
        if not emptied or _followed_by_subsection(deliverable.sections, n):
            kept_sections.append(section)
            previous = [key for k, key in enumerate(keys) if (units[k][0], units[k][1]) not in dropped]
    deliverable.sections = kept_sections


def _repeated(k: int, keys: list[str], cited: list[bool], previous: list[str]) -> bool:
    """Whether statement `k` of a section is said by the section before it, or by another of its own (of two
    equal ones, the cited one stays, else the first)."""
    if keys[k] not in _PLACEHOLDERS and any(_says(p, keys[k]) for p in previous):
        return True
    return any(
        j != k and _says(other, keys[k]) and (other != keys[k] or (cited[j], -j) > (cited[k], -k))
        for j, other in enumerate(keys)
    )


def _statements(block: Block) -> list[str]:
    if isinstance(block, BulletList):
        return list(block.items)
    if isinstance(block, Paragraph) and not block.code:
        return sentences(block.text)
    return []


def _drop_statements(section: Section, dropped: set[tuple[int, int]]) -> None:
    blocks: list[Block] = []
    for b, block in enumerate(section.blocks):
        kept = [t for i, t in enumerate(_statements(block)) if (b, i) not in dropped]
        if isinstance(block, BulletList) and len(kept) < len(block.items):
            if kept:
                blocks.append(BulletList(items=kept, ordered=block.ordered))
        elif isinstance(block, Paragraph) and not block.code and len(kept) < len(sentences(block.text)):
            if kept:
                blocks.append(Paragraph(" ".join(kept)))
        else:
            blocks.append(block)
    section.blocks = blocks


def _followed_by_subsection(sections: list[Section], n: int) -> bool:
    return n + 1 < len(sections) and sections[n + 1].level > sections[n].level


# ---- names ----------------------------------------------------------------------------------------------------


_FILE_NAME = re.compile(
    r"^(?P<stem>[^\\/]+?)\.(?P<ext>[A-Za-z][A-Za-z0-9]{1,4})(?:,\s*sheet\s+(?P<sheet>.+))?$", re.IGNORECASE
)


def table_caption(source_name: str, heading: str = "") -> str:
    """A table's caption from the file it came from and the heading it sat under: `sales.xlsx` and `Sheet Q1`
    -> `Sales (Q1)`; `support_tickets.csv` -> `Support tickets`; a table-block's `sales.xlsx, sheet Q1` ->
    `Sales (Q1)`; a document's heading (`Quotes received`), or any other name, as it is."""
    heading = plain(heading or "").strip()
    for text, under in ((heading, ""), (source_name or "", heading)):
        match = _FILE_NAME.match(text)
        if match is None:
            continue
        if under and not re.match(r"^sheet\s", under, re.IGNORECASE):
            return under  # a heading the table sat under in a document names it
        name = re.sub(r"[_\s-]+", " ", match["stem"]).strip()
        name = name[:1].upper() + name[1:]
        sheet = (match["sheet"] or re.sub(r"^sheet\s+", "", under, flags=re.IGNORECASE)).strip()
        if not sheet or re.fullmatch(r"sheet\s*\d*", sheet, re.IGNORECASE) or sheet.lower() == name.lower():
            return name
        return f"{name} ({sheet})"
    return heading or source_name


def long_date(day: dt.date) -> str:
    return f"{day:%B} {day.day}, {day.year}"


MAX_FILE_STEM = 60  # with its extension, a name stays short enough to read in a listing and to type


def file_name(
    title: str,
    extension: str,
    fallback: str = "deliverable",
    stop_words: frozenset[str] = frozenset(),
    taken: Collection[str] = (),
    qualifier: str = "",
) -> str:
    """A readable, portable file name: `Quarterly sales review` -> `quarterly-sales-review.xlsx`. A long title is
    cut between words, never after one of `stop_words` (a title's function words: "...first-half-of"), with
    `qualifier` kept after the cut (`...-data`); a name in `taken` gets `-2`, `-3`, ... instead."""
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    words = re.findall(r"[a-z0-9]+", ascii_title.lower())
    tail = re.findall(r"[a-z0-9]+", qualifier.lower())
    room = MAX_FILE_STEM - len("-".join(tail)) - (1 if tail else 0)
    kept: list[str] = []
    for word in words:
        if len("-".join([*kept, word])) > room:
            break
        kept.append(word)
    if words and not kept:
        kept = [words[0][:room]]
    while len(kept) > 1 and kept[-1] in stop_words:
        kept.pop()
    stem = "-".join((kept or [fallback]) + tail)
    used = {t.lower() for t in taken}
    name, n = f"{stem}.{extension}", 2
    while name.lower() in used:
        name, n = f"{stem}-{n}.{extension}", n + 1
    return name


# ---- back to markdown (a block's content, the run's final output) ---------------------------------------------


def to_markdown(deliverable: Deliverable) -> str:
    out: list[str] = [f"# {deliverable.title}"]
    if deliverable.subtitle:
        out.append(deliverable.subtitle)
    for section in deliverable.sections:
        if section.title:
            out.append("#" * (section.level + 1) + " " + section.title)
        out.extend(block_markdown(b) for b in section.blocks)
    if deliverable.references:
        out.append("## References")
        out.append("\n".join(f"[{n}] {reference_text(r)}" for n, r in enumerate(deliverable.references, start=1)))
    return "\n\n".join(out)


def block_markdown(block: Block) -> str:
    if isinstance(block, Paragraph):
        return f"```\n{block.text}\n```" if block.code else block.text
    if isinstance(block, BulletList):
        return "\n".join(f"{n}. {i}" if block.ordered else f"- {i}" for n, i in enumerate(block.items, start=1))
    rows = [block.headers, *block.rows]
    lines = ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    lines.insert(1, "|" + "---|" * len(block.headers))
    return "\n".join(lines)


def reference_text(reference: Reference) -> str:
    parts = [reference.title]
    if reference.detail:
        parts.append(reference.detail)
    if reference.url and reference.url != reference.title:
        parts.append(reference.url)
    return ". ".join(p.rstrip(".") for p in parts if p)
