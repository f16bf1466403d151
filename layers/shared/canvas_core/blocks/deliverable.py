"""What the deliverable blocks (document, memo, presentation, excel, app, prototype, landing page, generated
image) share: the request, the draft a model writes from the inputs, the inputs' tables and sources, and
storing a file only once it has reopened with its library. Not a block type itself."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from canvas_core.agents.material import compose as compose_prompt
from canvas_core.agents.material import number_sources, strip_sources_section
from canvas_core.agents.personas import role_of, system_prompt
from canvas_core.blocks.context import BlockContext
from canvas_core.errors import BlockFatalError
from canvas_core.models.items import Artifact, NodeItem, Source
from canvas_core.render import RenderCheckError
from canvas_core.render.structure import (
    Deliverable,
    Reference,
    Section,
    Table,
    file_name,
    parse_markdown,
    tables_in_content,
    title_from,
)

CSV_SUFFIXES = (".csv", ".tsv")
CITE = "Cite the sources by their number in square brackets, e.g. [1]; do not list them (they are added for you)."
DUTY = (
    "You make a deliverable file from the material: what you write is laid out as a document, deck, workbook or "
    "page. Use only what the material supports and say where it does not cover the request."
)


def request(ctx: BlockContext) -> str:
    """What this block was asked to make."""
    return (ctx.node.instructions or ctx.run.prompt).strip()


def sources(ctx: BlockContext) -> list[Source]:
    """The inputs' sources, each once and numbered in order: the [n] a deliverable cites is the n-th."""
    return number_sources(ctx.inputs)[0]


def references(ctx: BlockContext) -> list[Reference]:
    return [_reference(s) for s in sources(ctx)]


def _reference(source: Source) -> Reference:
    title = source.title or source.file_name or source.url or "Untitled source"
    parts = [
        source.file_name if source.file_name and source.file_name != title else "",
        f"p. {source.page}" if source.page else "",
        f"at {source.timestamp}" if source.timestamp else "",
    ]
    return Reference(title=title, url=source.url, detail=", ".join(p for p in parts if p))


def input_tables(ctx: BlockContext) -> list[Table]:
    """Tables the inputs carry: pipe tables, JSON rows, and CSV from a table-block or a .csv file."""
    found: list[Table] = []
    for node in ctx.inputs:
        csv_text = node.type == "table-block" or any(
            (s.file_name or "").lower().endswith(CSV_SUFFIXES) for s in node.sources
        )
        found += tables_in_content(node.content or "", caption=node.name, csv_text=csv_text)
    return found


def material(ctx: BlockContext) -> str:
    """The inputs' contents under their names, citing the numbers `sources` gives their sources."""
    return "\n\n".join(f"## {s.name}\n{s.content}".strip() for s in number_sources(ctx.inputs)[1])


def draft(ctx: BlockContext, instructions: str, role: str = "writer", inputs: list[NodeItem] | None = None) -> str:
    """One model call: the request and how to write it, then the inputs (all, or `inputs`) as material with
    their sources numbered (agents/material.py), by the block's persona. The answer without a trailing list of
    sources."""
    sources, sections = number_sources(ctx.inputs if inputs is None else inputs)
    completion = ctx.complete(
        compose_prompt(f"{request(ctx)}\n\n{instructions}", sections, sources),
        role=role_of(ctx.node.persona, role),
        system=system_prompt(ctx.node.persona, ctx.run.agent_instructions, DUTY),
    )
    return strip_sources_section(completion.text.strip())


def compose(ctx: BlockContext, text: str, with_input_tables: bool = True, lead_title: str = "Summary") -> Deliverable:
    """The draft as a deliverable: titled (from the draft, else the request), its untitled text under
    `lead_title` when it has no headings, the inputs' tables the draft does not already show under Data, the
    references, and the run's date."""
    deliverable = parse_markdown(text, title=title_from(request(ctx)))
    titled = [s for s in deliverable.sections if s.title]
    if deliverable.sections and not titled:
        deliverable.sections[0].title = lead_title
    if with_input_tables:
        shown = deliverable.tables()
        missing = [t for t in input_tables(ctx) if not any(t.same_data(s) for s in shown)]
        if missing:
            deliverable.sections.append(Section(title="Data", blocks=list(missing)))
    deliverable.references = references(ctx)
    deliverable.date = run_date(ctx)
    return deliverable


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
) -> Artifact:
    """Reopen the file with `check` and store it; a file that does not reopen fails the block unstored."""
    try:
        check(data)
    except RenderCheckError as exc:
        raise BlockFatalError(f"The {label} could not be produced: {exc}. Nothing was stored; run it again") from exc
    return ctx.save_artifact(file_name(title, kind, fallback=label.replace(" ", "-")), kind, data, content_type)
