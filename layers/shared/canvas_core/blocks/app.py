"""app-block: a web app in one self-contained HTML file whose script does what was asked.

The model writes the app (inline style and script, nothing loaded from elsewhere). Its answer is kept when it
parses as a whole document with a script and at least one control the script listens to; otherwise (the
offline provider, or an answer that fails those checks) the block ships the built-in app over the material:
search, filter and tick off the points, copy the open ones, sort the tables, export CSV. Over uploaded or
gathered tables, its data is the analysis (blocks/analysis.py): each result as a table with its chart, then
the data's first rows, saying how many there are.
"""

from __future__ import annotations

from collections.abc import Callable

from canvas_core.blocks.analysis import analysed_inputs, analysis_tables, run_analyses
from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.blocks.deliverable import (
    compose,
    draft,
    input_tables,
    material,
    references,
    request,
    sources,
    store,
    title,
)
from canvas_core.render import RenderCheckError, html, html_check
from canvas_core.render.structure import drop_repeated_statements, plain, same_data
from canvas_core.tables import Table

INSTRUCTIONS = (
    "Write a complete single-file web app that does what is asked: one HTML document (<!DOCTYPE html> ... "
    "</html>) with inline <style> and <script>; no external scripts, stylesheets, fonts or images, and no network "
    "requests. Give every control an id and make every button and input work. Treat the material as data to show: "
    "never copy text from it into script code. Answer with the HTML document only."
)


def run(ctx: BlockContext) -> BlockOutput:
    return build(ctx, INSTRUCTIONS, html.render_app, label="app")


def build(ctx: BlockContext, instructions: str, builtin: Callable[[html.AppSpec], str], label: str) -> BlockOutput:
    analyses = run_analyses(ctx, request(ctx))
    answer = draft(ctx, instructions, role="engineer", analyses=analyses)
    page, reason = _model_page(answer)
    page_title = title(ctx)
    if page is None:
        # Points for the built-in page: the answer when it is prose, else the inputs themselves; the data itself
        # comes from the inputs' tables.
        source_text = answer if "<" not in answer else material(ctx)
        outline = compose(ctx, source_text, with_input_tables=False)
        drop_repeated_statements(outline)
        analysed = analysed_inputs(ctx, analyses)
        tables = _unique([*analysis_tables(analyses), *input_tables(ctx, analysed), *outline.captioned_tables()])
        page_title = outline.title
        spec = html.AppSpec(page_title, _subtitle(ctx, tables), outline.sections, tables, outline.references)
        page = builtin(spec)
        view = html_check.parse_html(page)
        note = f"Built-in {label} ({reason})"
        ctx.note(f"{reason[0].upper()}{reason[1:]}; the built-in {label} was used")
    else:
        view = html_check.parse_html(page)
        page_title = plain(view.title) or page_title
        note = f"The {label} as the model wrote it, made self-contained"
    artifact = store(ctx, page_title, "html", page.encode("utf-8"), html.CONTENT_TYPE, _check, label=label)
    controls = ", ".join(view.wired_controls()) or "none"
    content = f"# {page_title}\n\n{note}. Controls wired to its script: {controls}."
    return BlockOutput(content=content, sources=sources(ctx), artifacts=[artifact])


def _subtitle(ctx: BlockContext, tables: list[Table]) -> str:
    """What the page is built from, for a reader: the files and pages its data and points come from."""
    names = list(dict.fromkeys(r.title for r in references(ctx)))
    if not names:
        return ""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"{'Data' if tables else 'Notes'} from {shown}"


def _model_page(answer: str) -> tuple[str | None, str]:
    """The model's page when it passes the checks, else None and why not."""
    page = html.finish_model_html(answer)
    if page is None:
        return None, "the model's answer held no HTML document"
    try:
        view = html_check.check_html(page, require_script=True)
    except RenderCheckError as exc:
        return None, f"the model's page failed its check: {exc}"
    if not view.wired_controls():
        return None, "the model's page has no control its script listens to"
    return page, ""


def _check(data: bytes) -> html_check.HtmlView:
    view = html_check.check_html(data, require_script=True)
    if not view.wired_controls():
        raise RenderCheckError("no control of the page is wired to its script")
    return view


def _unique(tables: list[Table]) -> list[Table]:
    out: list[Table] = []
    for table in tables:
        if not any(same_data(table, t) for t in out):
            out.append(table)
    return out
