"""The run's tables analysed for a block (canvas_core/analysis/): the uploaded CSV, TSV, XLSX and Parquet files
read whole from their uploads, and the tables table-blocks gathered, each loaded into the engine and analysed
for the request (the plan by the model when the provider is one, by rules offline). Blocks that deliver or
answer show these results, so every number they state is the engine's. Not a block type itself."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from canvas_core.agents.material import Section as MaterialSection
from canvas_core.analysis.analyse import analyse
from canvas_core.analysis.answers import Answer, answer_questions
from canvas_core.analysis.engine import EXCEL_MAX_ROWS, AnalysisError, Dataset, ResultTable, load_file, load_rows
from canvas_core.analysis.findings import Analysis, number, percent, unit_of
from canvas_core.analysis.instructions import read_revision, revise_dataset
from canvas_core.analysis.plan import ROWS, AnalysisPlan, Measure
from canvas_core.analysis.query import measure_phrase
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
    """The analyses of the run's tables for `request` (at most three tables, uploads first): each question the
    request asks answered first (analysis/answers.py), from the tables it is about; then each such table's
    breakdowns. Instructions given after planning (an approval's, a re-run's) revise every figure."""
    ask = _structured_ask(ctx) if ctx.asks_model else None
    datasets = _datasets(ctx)
    revised = revision_text(ctx)
    if ctx.node.revision and request.strip() == ctx.node.revision.strip():
        request = ctx.run.prompt  # the block's new instructions revise the questions asked, they do not replace them
    revision = read_revision(revised, datasets) if revised else None
    kept: list[str] = []
    if revision is not None:
        for dataset in datasets:
            kept += revise_dataset(dataset, revision)
    answers = answer_questions(datasets, request, revised, ask)
    for note in answers.notes:
        ctx.note(note)
    if answers.items:
        # The tables the questions are about, and no other (a workbook's sheet nobody asked about stays out).
        datasets = [d for d in datasets if any(a.dataset is d for a in answers.items)] or datasets
    found = []
    for dataset in datasets[:MAX_DATASETS]:
        mine = [a for a in answers.items if a.dataset is dataset]
        try:
            # The questions' own queries were the model's to read; the breakdowns beside them are the rules' (one
            # model call a question, not one more for the supporting detail).
            analysis = analyse(dataset, request, None if answers.items else ask)
        except AnalysisError:
            analysis = None  # a table the engine cannot compute over is shown as it is, as before the analysis
        if analysis is None and mine:
            analysis = Analysis(
                dataset=dataset, plan=AnalysisPlan(measures=[Measure(column=ROWS, aggregate="count")]), results=[]
            )
        if analysis is None:
            continue
        if mine:
            analysis.answers = mine
            analysis.asked = True
            analysis.answer = " ".join(a.sentence for a in mine)
            analysis.findings = [a.sentence for a in mine] + analysis.findings
        if kept:
            analysis.notes.append(
                f"Revised by the instructions “{_excerpt(revised)}”: only rows with {'; '.join(kept)}."
            )
            analysis.findings.append(analysis.notes[-1])
        found.append(analysis)
        if analysis.plan.chosen_by == "rules" and analysis.plan.note:
            ctx.note(f"{analysis.source}: {analysis.plan.note}")
    return found


def _structured_ask(ctx: BlockContext) -> Any:
    """The analyst's structured model call: a prompt and a schema in, the schema's instance out."""

    def ask(prompt: str, schema: type[BaseModel]) -> BaseModel:
        return ctx.structured(prompt, schema, role="analyst")

    return ask


def revision_text(ctx: BlockContext) -> str:
    """The instructions that revise this block's analysis: the requester's agent_instructions, and those given
    after planning to this block or to an input it reads (an approval's, a re-run's)."""
    parts = [ctx.run.agent_instructions or "", ctx.node.revision or "", *(n.revision or "" for n in ctx.inputs)]
    unique = list(dict.fromkeys(p.strip() for p in parts if p and p.strip()))
    return "\n".join(unique)


def revised_audience(ctx: BlockContext) -> str:
    """Whom instructions given after planning (or the requester's) address the deliverable to ("address it to
    the support leads"), else nothing."""
    from canvas_core.analysis.instructions import AUDIENCE

    found = AUDIENCE.search(revision_text(ctx))
    audience = found.group(1).strip() if found else ""
    return audience[:1].upper() + audience[1:]


def _excerpt(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
    for answer in answered(analyses):
        # Each question first: its answer, then the table that computed it.
        blocks: list[Paragraph | BulletList | Table] = [Paragraph(answer.sentence), answer_table(answer)]
        sections.append(Section(title=_question_caption(answer.question), blocks=blocks, level=2))
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
    computed = computed_section(analyses)
    if computed is not None:
        appendix.append(computed)
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
    for answer in answered(analyses):
        table = answer_table(answer)
        chart = answer_chart(answer)
        table.chart = chart.chart if chart is not None else "none"
        tables.append(table)
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
        if COMPUTED_HEADING in section.content:
            # An answer's note of how its figures were computed is for its reader, not material to write from.
            content = section.content.split(COMPUTED_HEADING)[0].strip()
            section = MaterialSection(name=section.name, content=content, refs=section.refs)
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
        cite = f" [{number_of}]" if number_of else ""
        if analysis.answers:
            # One paragraph per question asked, each opening with its answer.
            leads += [_cited(a.sentence, cite) for a in analysis.answers]
        elif analysis.answer and analysis.asked:
            leads.append(_cited(analysis.answer, cite))
    return "\n\n".join(leads)


def _cited(sentence: str, cite: str) -> str:
    if not cite:
        return sentence
    return sentence[:-1] + cite + "." if sentence.endswith(".") else sentence + cite


# ---- the questions' answers as what deliverables show --------------------------------------------------------------


def answered(analyses: list[Analysis]) -> list[Answer]:
    """The questions answered with a result, in the order they were asked."""
    return [a for analysis in analyses for a in analysis.answers if a.result is not None]


def answer_table(answer: Answer, exact: bool = False) -> Table:
    """A question's result as a table, captioned with the question: figures formatted (or `exact`), and a
    dimension by a time grain pivoted, the dimension's values as rows and the periods as columns."""
    result = answer.result
    assert result is not None and answer.query is not None
    query = answer.query
    caption = _question_caption(answer.question)
    if query.dimensions and query.grain and query.rank is None and query.compare is None:
        # Pivoted: a row per group, a column per period.
        keys = len(query.dimensions)
        periods = sorted({str(r[keys]) for r in result.rows})
        values: dict[tuple[str, ...], dict[str, object]] = {}
        for row in result.rows:
            values.setdefault(tuple(str(v) for v in row[:keys]), {})[str(row[keys])] = row[keys + 1]
        # Large figures in a pivot of many periods read as whole numbers (the workbook keeps them exact).
        whole = (
            not exact
            and len(periods) > 4
            and all(isinstance(v, int | float) and abs(v) >= 100 for by in values.values() for v in by.values())
        )
        rows = [
            [
                *group,
                *(
                    _figure(
                        round(v) if whole and isinstance(v := by_period.get(p), float) else by_period.get(p),
                        result.formats[0],
                        exact,
                    )
                    for p in periods
                ),
            ]
            for group, by_period in values.items()
        ]
        sums = list(range(keys, keys + len(periods))) if query.measure.aggregate in ("sum", "count") else None
        return Table(headers=[*query.dimensions, *periods], rows=rows, caption=caption, sum_columns=sums)
    rows = []
    for row in result.rows:
        cells = [str(v) for v in row[: result.labels]]
        cells += [_figure(v, kind, exact) for v, kind in zip(row[result.labels :], result.formats, strict=False)]
        rows.append(cells)
    headers = list(result.headers)
    if query.rank is not None and query.rank.within is not None and result.labels == 2:
        # "The top product per region": a row per region, its top product beside it.
        at = query.dimensions.index(query.rank.within)
        if at == 1:
            headers[0], headers[1] = headers[1], headers[0]
            rows = [[r[1], r[0], *r[2:]] for r in rows]
    if result.labels == 0:
        headers = [h[:1].upper() + h[1:] for h in headers]
    return Table(headers=headers, rows=rows, caption=caption, chart="none" if result.labels == 0 else "")


def answer_chart(answer: Answer) -> Table | None:
    """What a chart of a question's result draws: its groups (or periods) and one figure (the percent change of
    a comparison), with the measure and its unit as the axis title; None for a single figure."""
    result = answer.result
    if result is None or answer.query is None or result.labels == 0 or not 2 <= len(result.rows) <= 24:
        return None
    query = answer.query
    at = result.labels + (3 if query.compare is not None else 0)
    if query.measure.aggregate == "share" and query.share_of is None:
        at = result.labels + 1
    column = query.measure.column
    unit = ""
    if column and answer.dataset is not None:
        found = answer.dataset.column(column)
        unit = (found.unit if found else "") or unit_of(column)
    header = result.headers[at] if query.compare is not None else measure_phrase(query.measure)
    if unit and result.formats[at - result.labels] != "percent":
        header += f" ({unit})"
    rows = [
        [", ".join(str(v) for v in r[: result.labels]), _figure(r[at], result.formats[at - result.labels], False)]
        for r in result.rows
        if r[at] is not None
    ]
    label = " and ".join(result.headers[: result.labels])
    kind = "line" if query.grain and len(query.dimensions) == 0 else "bar"
    return Table(headers=[label, header], rows=rows, caption=_question_caption(answer.question), chart=kind)


def computed_lines(analyses: list[Analysis]) -> list[list[str]]:
    """How each figure was computed: the question, the query in words, the rows it covered, the SQL."""
    lines = []
    for analysis in analyses:
        for answer in analysis.answers:
            if answer.query is None:
                lines.append([answer.question, "not computed: " + answer.sentence, "", ""])
                continue
            used = number(answer.result.rows_used) if answer.result is not None else ""
            sql = " ".join(answer.result.sql.split()) if answer.result is not None else ""
            lines.append([answer.question, answer.query.describe(), used, sql])
    return lines


def computed_section(analyses: list[Analysis]) -> Section | None:
    """'How this was computed': a line per question, the query that computed its answer."""
    lines = computed_lines(analyses)
    if not lines:
        return None
    items = [f"{question}: {how}" + (f" ({used} rows)" if used else "") for question, how, used, _ in lines]
    return Section(title="How this was computed", blocks=[BulletList(items=items)])


COMPUTED_HEADING = "How this was computed:"


def computed_markdown(analyses: list[Analysis]) -> str:
    lines = computed_lines(analyses)
    if not lines:
        return ""
    return (
        COMPUTED_HEADING
        + "\n"
        + "\n".join(f"- {question}: {how}" + (f" ({used} rows)" if used else "") for question, how, used, _ in lines)
    )


def _question_caption(question: str, limit: int = 90) -> str:
    text = " ".join(question.split()).rstrip("?.!")
    text = text[:1].upper() + text[1:]
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"


def unanswered_parts(parts: list[str], analyses: list[Analysis]) -> list[str]:
    """The outline's parts other than the questions the analysis answers (those get their own slide or
    section, with their figures, rather than a drafted one)."""
    asked = [set(re.findall(r"\w+", a.question.lower())) for a in answered(analyses)]

    def covered(part: str) -> bool:
        said = set(re.findall(r"\w+", part.lower()))
        return bool(said) and any(len(said & q) >= 0.8 * len(said) for q in asked)

    return [p for p in parts if not covered(p)]
