"""The run's tables analysed for a block (canvas_core/analysis/): the uploaded CSV, TSV, XLSX and Parquet files
read whole from their uploads, and the tables table-blocks gathered, each loaded into the engine and analysed
for the request (the plan by the model when the provider is one, by rules offline). Blocks that deliver or
answer show these results, so every number they state is the engine's. Not a block type itself."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from canvas_core.agents.material import Section as MaterialSection
from canvas_core.analysis.analyse import analyse
from canvas_core.analysis.engine import EXCEL_MAX_ROWS, AnalysisError, Dataset, ResultTable, load_file, load_rows
from canvas_core.analysis.findings import Analysis, number, percent, unit_of
from canvas_core.blocks.context import BlockContext
from canvas_core.errors import StorageError
from canvas_core.gather.archive import ArchiveError, ArchiveLimits, check_archive
from canvas_core.models.items import Source, Upload
from canvas_core.render.structure import BulletList, Paragraph, Section, table_caption
from canvas_core.tables import Table, parse_markdown_tables

if TYPE_CHECKING:
    from canvas_core.render.xlsx import DataSheet  # openpyxl: only the blocks that write workbooks import it

TABULAR = ("csv", "tsv", "xlsx", "parquet")
MAX_DATASETS = 3


def run_analyses(ctx: BlockContext, request: str) -> list[Analysis]:
    """The analyses of the run's tables for `request` (at most three tables, uploads first)."""
    complete = None
    if getattr(ctx.provider, "name", "") != "offline":

        def complete(prompt: str) -> str:
            return ctx.complete(prompt, role="analyst").text

    found = []
    for dataset in _datasets(ctx)[:MAX_DATASETS]:
        try:
            analysis = analyse(dataset, request, complete)
        except AnalysisError:
            continue  # a table the engine cannot compute over is shown as it is, as before the analysis
        if analysis is not None:
            found.append(analysis)
            if analysis.plan.chosen_by == "rules" and analysis.plan.note:
                ctx.note(f"{analysis.source}: {analysis.plan.note}")
    return found


def analysed_inputs(ctx: BlockContext, analyses: list[Analysis]) -> frozenset[str]:
    """The inputs whose tables the analyses cover: their rows are shown as the analysis, not again as tables."""
    files = {a.source.split(", sheet ")[0] for a in analyses}
    return frozenset(
        n.block_id
        for n in ctx.inputs
        if any(s.file_name in files for s in n.sources) or any(a.dataset.origin == n.block_id for a in analyses)
    )


def _datasets(ctx: BlockContext) -> list[Dataset]:
    """The uploads' tables, else (a run without tabular uploads) those its input table-blocks gathered."""
    found: list[Dataset] = []
    for upload in ctx.run.uploads:
        if upload.extension in TABULAR:
            found += _load_upload(ctx, upload)
    if found:
        return found
    for node in ctx.inputs:
        if node.type == "table-block":
            for table in parse_markdown_tables(node.content or ""):
                if len(table.rows) >= 2:
                    dataset = load_rows(table.caption or node.name, table.headers, table.rows)
                    dataset.origin = node.block_id
                    found.append(dataset)
    return found


def _load_upload(ctx: BlockContext, upload: Upload) -> list[Dataset]:
    """An upload's tables; one that cannot be read (the file-block said why) gives none."""
    try:
        data = ctx.files.get(upload.s3_key)
        if upload.extension == "xlsx":
            check_archive(data, ArchiveLimits.from_settings(), label=upload.name)
        return load_file(upload.name, upload.extension, data)
    except (StorageError, ArchiveError, AnalysisError):
        return []


# ---- the results as what deliverables show ---------------------------------------------------------------------------


def as_table(result: ResultTable, analysis: Analysis, exact: bool = False) -> Table:
    """A result table with its figures written as a reader reads them (thousands separated, shares as %), or
    `exact`, as the engine computed them (a workbook formats them itself)."""
    summed = {m.column for m in analysis.plan.measures if m.adds_up}
    totals = [
        c
        for c in range(result.labels, len(result.headers))
        if result.headers[c] in summed and result.kind in ("breakdown", "cross", "series")
    ]
    rows = []
    for row in result.rows:
        cells = [str(v) for v in row[: result.labels]]
        for value, kind in zip(row[result.labels :], result.formats, strict=False):
            cells.append(_figure(value, kind, exact))
        rows.append(cells)
    return Table(headers=list(result.headers), rows=rows, caption=_caption(result, analysis), sum_columns=totals)


def _figure(value: object, kind: str, exact: bool) -> str:
    if not isinstance(value, int | float):
        return "" if value is None else str(value)
    if not exact:
        return percent(value) if kind == "percent" else number(value)
    scaled = round(value * 100, 8) if kind == "percent" else value
    text = repr(scaled) if isinstance(scaled, int) or "e" not in repr(scaled) else f"{scaled:.10f}".rstrip("0")
    return f"{text}%" if kind == "percent" else text


def chart_table(result: ResultTable, analysis: Analysis) -> Table:
    """A result as a chart draws it: its labels and the first measure only (one unit on the axis)."""
    label = result.headers[0] if result.labels == 1 else result.headers[result.labels - 1]
    first = analysis.plan.measures[0].column
    unit = next((c.unit for c in analysis.dataset.columns if c.name == first and c.unit), "") or unit_of(first)
    measure = result.headers[result.labels]
    header = measure + (f" ({unit})" if unit and unit not in measure else "")
    rows = [[str(r[result.labels - 1]), number(r[result.labels])] for r in result.rows if r[result.labels] is not None]
    return Table(headers=[label, header], rows=rows, caption=_caption(result, analysis))


def _caption(result: ResultTable, analysis: Analysis) -> str:
    return result.caption if result.kind != "totals" else f"Totals of {analysis.source}"


def findings_section(analyses: list[Analysis], title: str = "Key findings") -> Section:
    return Section(title=title, blocks=[BulletList(items=[f for a in analyses for f in a.findings])])


def result_sections(analyses: list[Analysis], max_rows: int = 25) -> tuple[list[Section], list[Section]]:
    """A document's analysis, and its appendix: per table, a section saying where the figures come from, then a
    subsection per result with its table; a result of more than `max_rows` rows shows its largest, saying so
    in its caption, and is whole in the appendix."""
    sections, appendix = [], []
    for analysis in analyses:
        lead = (
            f"Computed from all {number(analysis.dataset.rows)} rows of {analysis.source}; the analysis was chosen "
            f"by {analysis.plan.chosen_by}."
        )
        sections.append(Section(title=f"Analysis of {analysis.source}", blocks=[Paragraph(lead)]))
        for result in analysis.results:
            if result.kind == "totals":
                continue
            table = as_table(result, analysis)
            if len(table.rows) > max_rows:
                whole = as_table(result, analysis)
                appendix.append(Section(title=f"Appendix: {result.caption}", blocks=[whole]))
                table = shown_part(table, result, max_rows, "the appendix")
            sections.append(Section(title=result.caption, blocks=[table], level=2))
    return sections, appendix


def shown_part(table: Table, result: ResultTable, rows: int, rest: str) -> Table:
    """The first `rows` rows of a result's table, its caption saying which part they are ("top 8 of 12", the
    largest first, or "first 8 of 12 rows") and where all of them are (`rest`); the whole table when it fits."""
    if len(table.rows) <= rows:
        return table
    total = len(table.rows)
    part = f"top {rows} of {total}" if result.kind in ("breakdown", "cross") else f"first {rows} of {total} rows"
    caption = f"{table.caption}: {part} (all {total} in {rest})"
    return Table(headers=table.headers, rows=table.rows[:rows], caption=caption, chart=table.chart)


def analysis_tables(analyses: list[Analysis], preview_rows: int = 1000) -> list[Table]:
    """What a page shows of the analysis: each result as a table, then the first rows of the data (saying how
    many there are in all), drawn as a table only (a chart of some rows would not be the whole's)."""
    tables = []
    for analysis in analyses:
        tables += [as_table(r, analysis) for r in analysis.results if r.kind != "totals"]
        dataset = analysis.dataset
        shown = min(preview_rows, dataset.rows)
        rows = [[_text(v) for v in row] for row in dataset.iter_rows(limit=shown)]
        caption = table_caption(dataset.name)
        if shown < dataset.rows:
            caption += f": the first {number(shown)} of {number(dataset.rows)} rows (the analysis covers all of them)"
        tables.append(Table(headers=[c.name for c in dataset.columns], rows=rows, caption=caption, chart="none"))
    return tables


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def data_sheets(analyses: list[Analysis]) -> tuple[list[DataSheet], list[str]]:
    """Each analysed table whole, as a data sheet (up to a sheet's row limit), with the notes saying what was
    cut."""
    from canvas_core.render.xlsx import DataSheet

    sheets, notes = [], []
    for analysis in analyses:
        dataset = analysis.dataset
        totals = _column_totals(analysis)
        sheets.append(
            DataSheet(
                caption=table_caption(dataset.name),
                headers=[c.name for c in dataset.columns],
                rows=dataset.iter_rows(EXCEL_MAX_ROWS),
                row_count=min(dataset.rows, EXCEL_MAX_ROWS),
                totals=totals if dataset.rows <= EXCEL_MAX_ROWS else {},
            )
        )
        if dataset.rows > EXCEL_MAX_ROWS:
            notes.append(
                f"{dataset.name} has {number(dataset.rows)} rows; its sheet holds the first {number(EXCEL_MAX_ROWS)} "
                "(a sheet's limit). The analysis covers every row."
            )
    return sheets, notes


def _column_totals(analysis: Analysis) -> dict[int, float]:
    """The totals of the summed measures, from the engine's Totals result, by column position."""
    totals = next((r for r in analysis.results if r.kind == "totals"), None)
    if totals is None:
        return {}
    names = [c.name for c in analysis.dataset.columns]
    found = {}
    for measure, value in zip(analysis.plan.measures, totals.rows[0][1:], strict=True):
        if measure.aggregate == "sum" and value is not None and measure.column in names:
            found[names.index(measure.column)] = value
    return found


# ---- the results as material for a model --------------------------------------------------------------------------

_TABLE_LINE = re.compile(r"^\s*(\||Columns:\s|\[\d+ more rows not shown\]|\[truncated: )")


def with_analyses(
    sources: list[Source], sections: list[MaterialSection], analyses: list[Analysis]
) -> list[MaterialSection]:
    """The material with the engine's findings first, each citing its table's source, and the analysed tables'
    raw rows taken out of the inputs that carried them (a model, or the offline writer, would otherwise state
    figures of the rows it was shown, not of the whole table)."""
    numbers = {s.file_name: n for n, s in reversed(list(enumerate(sources, start=1))) if s.file_name}
    computed, covered = [], set()
    for analysis in analyses:
        number_of = numbers.get(analysis.source.split(", sheet ")[0])
        cite = f" [{number_of}]" if number_of else ""
        if number_of:
            covered.add(number_of)
        lines = [f"- {_cited(f, cite)}" for f in analysis.findings]
        lines.append(f"- Computed from all {number(analysis.dataset.rows)} rows of {analysis.source}{cite}.")
        computed.append(
            MaterialSection(name=f"Analysis of {analysis.source}", content="\n".join(lines), refs=sorted(covered))
        )
    kept = []
    for section in sections:
        if covered & set(section.refs):
            content = "\n".join(line for line in section.content.splitlines() if not _TABLE_LINE.match(line))
            section = MaterialSection(name=section.name, content=content.strip(), refs=section.refs)
        kept.append(section)
    return computed + kept


def answer_lead(analyses: list[Analysis], sources: list[Source]) -> str:
    """The answer the engine computed, citing the table's source: what the run's answer starts with, when the
    request asks about the table (a request about something else gets the findings as material only)."""
    numbers = {s.file_name: n for n, s in reversed(list(enumerate(sources, start=1))) if s.file_name}
    leads = []
    for analysis in analyses:
        number_of = numbers.get(analysis.source.split(", sheet ")[0])
        if analysis.answer and analysis.asked:
            leads.append(_cited(analysis.answer, f" [{number_of}]" if number_of else ""))
    return " ".join(leads)


def _cited(sentence: str, cite: str) -> str:
    if not cite:
        return sentence
    return sentence[:-1] + cite + "." if sentence.endswith(".") else sentence + cite
