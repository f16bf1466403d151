"""What the deliverable blocks (document, memo, presentation, excel, app, prototype, landing page, generated
image) share: the request and the outline the plan gave it, the draft a model writes from the inputs, the
inputs' tables, images and sources, and storing a file only once it has reopened with its library. Not a block
type itself.

A deliverable carries the material, not the machinery: the lines blocks write for each other (the offline
notice, column types, image metadata, instructions to agents) are dropped from the draft, every outline item
gets its section (saying plainly when the material has nothing for it), and the inputs' tables are shown as
data."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable

from canvas_core.agents.material import compose as compose_prompt
from canvas_core.agents.material import number_sources, strip_sources_section
from canvas_core.agents.outline import FUNCTION_WORDS, Outline, read_request, shorten, title_for
from canvas_core.agents.personas import role_of, system_prompt
from canvas_core.analysis.findings import Analysis
from canvas_core.blocks.analysis import with_analyses
from canvas_core.blocks.context import BlockContext
from canvas_core.errors import BlockFatalError, StorageError
from canvas_core.models.catalog import IMAGE_EXTENSIONS
from canvas_core.models.items import Artifact, NodeItem, Source, Upload
from canvas_core.prompt_format import NOT_COVERED, NOTHING_YET, is_internal, outline_in, outline_text
from canvas_core.prompt_format import without_outline as _without_outline
from canvas_core.render import RenderCheckError
from canvas_core.render.structure import (
    MAX_FILE_STEM,
    BulletList,
    Deliverable,
    Figure,
    Paragraph,
    Reference,
    Section,
    file_name,
    parse_markdown,
    plain,
    same_data,
    table_caption,
    tables_in_content,
)
from canvas_core.tables import Table
from canvas_core.textsafety import strip_control

CSV_SUFFIXES = (".csv", ".tsv")
CITE = "Cite the sources by their number in square brackets, e.g. [1]; do not list them (they are added for you)."
DUTY = (
    "You make a deliverable file from the material: what you write is laid out as a document, deck, workbook or "
    "page. Use only what the material supports and say where it does not cover the request. Write for the "
    "requester's readers: never mention the material, the team, the agents or these instructions."
)
IMAGE_TYPES = {"png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif",
               "webp": "image/webp", "svg": "image/svg+xml"}  # fmt: skip
MAX_IMAGE_BYTES = 3 * 1024 * 1024
MAX_FIGURES = 6
CLOSING = re.compile(r"^(next steps|conclusions?|recommendations?|summary and next steps|outlook)\b", re.IGNORECASE)


def request(ctx: BlockContext) -> str:
    """What this block was asked to make (without the outline the plan wrote under it)."""
    return strip_control(_without_outline(ctx.node.instructions or ctx.run.prompt)).strip()


def outline(ctx: BlockContext) -> Outline:
    """The parts the deliverable is to have: the outline the plan wrote into its instructions, else the one the
    run's prompt asks for (a model's plan may not write one)."""
    from canvas_core.agents.rules import split_subtasks

    items, count = outline_in(ctx.node.instructions or "")
    asked = read_request(ctx.run.prompt, split_subtasks(ctx.run.prompt))
    if items or count:
        return Outline(
            items=tuple(items), count=count, subjects=asked.subjects, audience=asked.audience, sender=asked.sender
        )
    return asked


TITLE_LIMIT = 80


def title(ctx: BlockContext) -> str:
    """The deliverable's title when its writer gives none: from the request, never the prompt cut short."""
    return title_for(strip_control(ctx.run.prompt), TITLE_LIMIT)


def outline_instructions(items: list[str] | tuple[str, ...], part: str) -> str:
    """How a writer is told the outline: one `## ` part per item, in order (`outline_in` reads it back)."""
    if not items:
        return ""
    return (
        f"Give each item of the outline below its own '## ' {part}, titled with the item, in this order; where "
        f"the material has nothing for an item, say so in one sentence under it.\n\n{outline_text(items)}"
    )


def sources(ctx: BlockContext) -> list[Source]:
    """The inputs' sources, each once and numbered in order: the [n] a deliverable cites is the n-th."""
    return number_sources(ctx.inputs)[0]


def references(ctx: BlockContext) -> list[Reference]:
    return [_reference(s) for s in sources(ctx)]


def _reference(source: Source) -> Reference:
    title = strip_control(source.title or source.file_name or source.url or "Untitled source")
    parts = [
        source.file_name if source.file_name and source.file_name != title else "",
        f"p. {source.page}" if source.page else "",
        f"at {source.timestamp}" if source.timestamp else "",
    ]
    return Reference(title=title, url=source.url, detail=strip_control(", ".join(p for p in parts if p)))


def input_tables(ctx: BlockContext, exclude: frozenset[str] = frozenset()) -> list[Table]:
    """Tables the inputs carry (pipe tables, JSON rows, and CSV from a table-block or a .csv file), each once,
    captioned after the file or heading it came from (`sales.xlsx`, sheet `Q1` -> `Sales: Q1`); none of the
    inputs in `exclude` (their tables were analysed: blocks/analysis.py)."""
    found: list[Table] = []
    for node in (n for n in ctx.inputs if n.block_id not in exclude):
        csv_text = node.type == "table-block" or any(
            (s.file_name or "").lower().endswith(CSV_SUFFIXES) for s in node.sources
        )
        for table in tables_in_content(strip_control(node.content or ""), caption="", csv_text=csv_text):
            table.caption = table_caption(node.name, table.caption)
            if not any(same_data(table, seen) for seen in found):
                found.append(table)
    return found


def input_figures(ctx: BlockContext, uploads_only: bool = False) -> list[Figure]:
    """The images the inputs hold: uploaded images first, then those blocks drew (each at most 3 MiB)."""
    uploaded, drawn = [], []
    for node in ctx.inputs:
        upload = next((u for u in ctx.run.uploads if u.file_id == node.upload_id), None) if node.upload_id else None
        if upload is not None and upload.extension in IMAGE_EXTENSIONS and upload.size_bytes <= MAX_IMAGE_BYTES:
            data = _safe_image(ctx, upload)
            if data is not None:
                uploaded.append(Figure(data[0], data[1], upload.name, uploaded=True))
            continue
        for artifact in node.artifacts:
            mime = IMAGE_TYPES.get(artifact.type)
            if mime and artifact.size_bytes <= MAX_IMAGE_BYTES and not uploads_only:
                drawn.append(Figure(ctx.files.get(artifact.s3_key), mime, node.name))
    return (uploaded + drawn)[:MAX_FIGURES]


def _safe_image(ctx: BlockContext, upload: Upload) -> tuple[bytes, str] | None:
    """An uploaded image as it can be shown: an SVG only as its sanitized copy (image-block keeps one)."""
    if upload.extension != "svg":
        return ctx.files.get(upload.s3_key), IMAGE_TYPES[upload.extension]
    from canvas_core.blocks.image_upload import sanitized_svg_key

    try:
        return ctx.files.get(sanitized_svg_key(upload)), IMAGE_TYPES["svg"]
    except StorageError:  # the image-block did not keep a safe copy: the SVG is not shown
        return None


def material(ctx: BlockContext) -> str:
    """The inputs' contents under their names, citing the numbers `sources` gives their sources."""
    return "\n\n".join(f"## {s.name}\n{s.content}".strip() for s in number_sources(ctx.inputs)[1])


def draft(
    ctx: BlockContext,
    instructions: str,
    role: str = "writer",
    inputs: list[NodeItem] | None = None,
    analyses: list[Analysis] | None = None,
) -> str:
    """One model call: the request and how to write it, then the inputs (all, or `inputs`) as material with
    their sources numbered (agents/material.py), by the block's persona; with `analyses`, the engine's findings
    stand in for the analysed tables' rows (blocks/analysis.py). The answer without a trailing list of
    sources; an empty one is noted for the run's errors (the file is then made from the material alone)."""
    sources, sections = number_sources(ctx.inputs if inputs is None else inputs)
    if analyses:
        sections = with_analyses(sources, sections, analyses)
    completion = ctx.complete(
        compose_prompt(f"{request(ctx)}\n\n{instructions}", sections, sources),
        role=role_of(ctx.node.persona, role),
        system=system_prompt(ctx.node.persona, ctx.run.agent_instructions, DUTY),
    )
    answer = strip_sources_section(completion.text.strip())
    if not answer:
        ctx.note("The model's answer was empty; the file was made without its text")
    return answer


def compose(
    ctx: BlockContext,
    text: str,
    with_input_tables: bool = True,
    lead_title: str = "Summary",
    parts: list[str] | tuple[str, ...] = (),
    exclude: frozenset[str] = frozenset(),
) -> Deliverable:
    """The draft as a deliverable: titled (from the draft, else the request), without the lines blocks write for
    each other, its untitled text under `lead_title` when it has no headings, a section for each of `parts` the
    draft left out (saying the material does not cover it), the inputs' tables the draft does not already show
    under Data (but those of the inputs in `exclude`), the references, and the run's date."""
    deliverable = parse_markdown(strip_control(text), title=title(ctx))
    # A title the draft gave is held to what the request's would be: a whole phrase of at most TITLE_LIMIT characters.
    if len(deliverable.title) > TITLE_LIMIT:
        deliverable.title = shorten(deliverable.title, TITLE_LIMIT)
    drop_internal(deliverable)
    titled = [s for s in deliverable.sections if s.title]
    if deliverable.sections and not titled:
        deliverable.sections[0].title = lead_title
    tables = input_tables(ctx, exclude) if with_input_tables else []
    add_missing_parts(deliverable, parts, has_material=any((n.content or "").strip() for n in ctx.inputs))
    if not deliverable.sections and not tables:
        deliverable.sections.append(Section(title=lead_title, blocks=[Paragraph(NOTHING_YET)]))
    shown = deliverable.tables()
    missing = [t for t in tables if not any(same_data(t, s) for s in shown)]
    if missing:
        # The data goes before a closing part (next steps, a conclusion), not after it.
        closing = [n for n, s in enumerate(deliverable.sections) if s.level == 1 and CLOSING.search(s.title)]
        at = closing[-1] if closing and closing[-1] == _last_top(deliverable.sections) else len(deliverable.sections)
        deliverable.sections.insert(at, Section(title="Data", blocks=list(missing)))
    deliverable.references = references(ctx)
    deliverable.date = run_date(ctx)
    return deliverable


def _last_top(sections: list[Section]) -> int:
    return max((n for n, s in enumerate(sections) if s.level == 1), default=-1)


def drop_internal(deliverable: Deliverable) -> None:
    """Remove the lines blocks write for each other (prompt_format.py INTERNAL_LINE) from a draft. A section
    they alone filled goes too (offline scaffolding under "Summary"); a heading the writer left empty on purpose
    (a deck's section divider) stays."""
    emptied: list[Section] = []
    for section in deliverable.sections:
        kept = []
        for block in section.blocks:
            if isinstance(block, Paragraph) and not block.code:
                if is_internal(block.text, in_deliverable=True):
                    continue
                block.lines = [line for line in block.lines if not is_internal(line, in_deliverable=True)]
            elif isinstance(block, BulletList):
                block.items = [i for i in block.items if not is_internal(plain(i), in_deliverable=True)]
                if not block.items:
                    continue
            kept.append(block)
        if section.blocks and not kept:
            emptied.append(section)
        section.blocks = kept
    deliverable.sections = [
        s
        for n, s in enumerate(deliverable.sections)
        if not any(s is e for e in emptied) or _has_subsections(deliverable.sections, n)
    ]
    deliverable.sections = [s for s in deliverable.sections if s.blocks or s.title]


def _has_subsections(sections: list[Section], n: int) -> bool:
    return n + 1 < len(sections) and sections[n + 1].level > sections[n].level


def add_missing_parts(deliverable: Deliverable, parts: list[str] | tuple[str, ...], has_material: bool) -> None:
    """The outline's parts in its order, each with the section the draft wrote for it (and that section's
    subsections), or a new one saying plainly that the material does not cover it; whatever else the draft
    wrote stays, after them."""
    if not parts:
        return
    groups: list[list[Section]] = []
    for section in deliverable.sections:
        if groups and groups[-1][0].title and section.level > groups[-1][0].level:
            groups[-1].append(section)
        else:
            groups.append([section])
    ordered: list[Section] = []
    for part in parts:
        match = next((g for g in groups if g[0].title and _same_part(g[0].title, part)), None)
        if match is not None:
            groups.remove(match)
            ordered += match
        else:
            ordered.append(Section(title=part, blocks=[Paragraph(NOT_COVERED if has_material else NOTHING_YET)]))
    lead = [s for g in groups if not g[0].title for s in g]
    rest = [s for g in groups if g[0].title for s in g]
    deliverable.sections = lead + ordered + rest


def _same_part(heading: str, part: str) -> bool:
    def key(text: str) -> str:
        return re.sub(r"[^a-z0-9 ]+", "", re.sub(r"^\s*(\d+[.)]|[ivx]+\.)\s*", "", plain(text).lower())).strip()

    heading_key, part_key = key(heading), key(part)
    return bool(part_key) and (heading_key == part_key or heading_key.startswith(part_key + " "))


def run_date(ctx: BlockContext) -> dt.date:
    return dt.datetime.fromtimestamp(ctx.run.created_at_ms / 1000, tz=dt.UTC).date()


def store(
    ctx: BlockContext,
    title: str,
    kind: str,
    data: bytes,
    content_type: str,
    check: Callable[[bytes], object],
    label: str,
    qualifier: str = "",
) -> Artifact:
    """Reopen the file with `check` and store it; a file that does not reopen fails the block unstored. Its name
    is the title's (`qualifier` after it), a long one cut as a title is (where a clause ends or a modifier
    starts: "...by region and product", not "...for the first half of"), never on a function word, and not the
    name of a file the run already holds where this block sees it (the uploads, its inputs' files, its own)."""
    try:
        check(data)
    except RenderCheckError as exc:
        raise BlockFatalError(f"The {label} could not be produced: {exc}. Nothing was stored; run it again") from exc
    taken = [u.name for u in ctx.run.uploads] + [a.name for n in ctx.inputs for a in n.artifacts]
    taken += [a.name for a in ctx.saved]
    room = MAX_FILE_STEM - (len(qualifier) + 1 if qualifier else 0)
    name = file_name(
        shorten(title, room),
        kind,
        fallback=label.replace(" ", "-"),
        stop_words=FUNCTION_WORDS,
        taken=taken,
        qualifier=qualifier,
    )
    return ctx.save_artifact(name, kind, data, content_type)
