"""Slide decks (python-pptx) for presentation-block, and `check_pptx`, which reopens a deck and reads it back.

`plan_slides` turns a `Deliverable` into slides: a section's points become bullet slides, split so the text
fits its placeholder (the estimate below is deliberately generous per character); a table becomes a native
chart when it has a label and a number per row, and table slides of a few rows each (a table made to be drawn,
`Table.chart`, is its chart alone: bars for categories, a line for time). A deck keeps to the number of slides
asked for, else to MAX_SLIDES; its appendix (the data behind it) follows, outside that count. The requester's
logo sits on the title slide and in a corner of every other. Every content slide's speaker notes list the
sources it cites, or all of them.
"""

from __future__ import annotations

import io
import re
import textwrap
from dataclasses import dataclass, field
from typing import Any

from pptx import Presentation
from pptx.chart.data import CategoryChartData
from pptx.dml.color import RGBColor
from pptx.enum.chart import XL_CHART_TYPE, XL_LEGEND_POSITION
from pptx.enum.shapes import MSO_SHAPE
from pptx.enum.text import MSO_AUTO_SIZE, PP_ALIGN
from pptx.presentation import Presentation as PptxPresentation
from pptx.shapes.autoshape import Shape
from pptx.shapes.placeholder import SlidePlaceholder
from pptx.slide import Slide
from pptx.util import Emu, Inches, Length, Pt

from canvas_core.render import RenderCheckError
from canvas_core.render.structure import (
    BulletList,
    Deliverable,
    Figure,
    Paragraph,
    Section,
    chart_columns,
    long_date,
    plain,
    reference_text,
    sentences,
    spans,
)
from canvas_core.tables import Table, column_kinds, data_rows, typed_value
from canvas_core.textsafety import one_line

CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
MAX_PROPERTY_CHARS = 255  # python-pptx refuses a longer core property (title, subject)

SLIDE_WIDTH, SLIDE_HEIGHT = Inches(13.333), Inches(7.5)
MARGIN = Inches(0.6)
TITLE_TOP, TITLE_HEIGHT = Inches(0.3), Inches(1.2)
BODY_TOP, BODY_HEIGHT = Inches(1.7), Inches(5.15)
LEAD_HEIGHT, LEAD_PT = Inches(0.9), 16
CONTENT_WIDTH = Emu(SLIDE_WIDTH - 2 * MARGIN)
BODY_PT, TITLE_PT, SMALL_TITLE_PT = 20, 30, 24
PARAGRAPH_GAP_PT = 8
LINE_HEIGHT = 1.2  # a line is about 1.2 times the font size
CHAR_WIDTH = 0.55  # of the font size: above Calibri's average, so estimates err towards splitting
BULLET_INDENT = Inches(0.4)
INSET = Inches(0.1)
TABLE_ROWS_PER_SLIDE = 8
TABLE_MAX_COLUMNS = 6
TABLE_PT = 14
MAX_SLIDES = 15  # a deck nobody asked a length of: the title slide and 14 more, then the appendix
LOGO_HEIGHT, LOGO_MAX_WIDTH = Inches(0.9), Inches(2.6)
CORNER_LOGO_HEIGHT, CORNER_LOGO_MAX_WIDTH = Inches(0.4), Inches(1.4)
MAX_NOTES_SOURCES = 12
# python-pptx leaves RGBColor's constructor unannotated, hence the ignores on the colours.
ACCENT = RGBColor(0x1F, 0x4E, 0x79)  # type: ignore[no-untyped-call]
MUTED = RGBColor(0x6B, 0x6B, 0x6B)  # type: ignore[no-untyped-call]
# The HTML pages' palette.
SERIES_COLOURS = (ACCENT, RGBColor(0x2E, 0x86, 0xAB), RGBColor(0xF2, 0x99, 0x4A))  # type: ignore[no-untyped-call]
_CITATION = re.compile(r"\[(\d{1,3})\]")


@dataclass
class SlideSpec:
    title: str
    bullets: list[str] = field(default_factory=list)
    table: Table | None = None
    chart: Table | None = None
    figure: Figure | None = None
    divider: bool = False
    notes: str = ""
    lead: str = ""  # a sentence above the chart: what it shows, with its number


# ---- fitting text ---------------------------------------------------------------------------------------------


def chars_per_line(width_emu: int, font_pt: float) -> int:
    return max(8, int((Emu(width_emu).pt) / (font_pt * CHAR_WIDTH)))


def text_height_pt(paragraphs: list[str], width_emu: int, font_pt: float) -> float:
    """How tall the paragraphs stand when wrapped at `width_emu`, in points."""
    per_line = chars_per_line(width_emu, font_pt)
    lines = sum(max(1, len(textwrap.wrap(p, per_line))) for p in paragraphs)
    return lines * font_pt * LINE_HEIGHT + PARAGRAPH_GAP_PT * len(paragraphs)


def _body_text_width() -> int:
    return CONTENT_WIDTH - BULLET_INDENT - 2 * INSET


def _body_capacity_pt() -> float:
    return Emu(BODY_HEIGHT - 2 * INSET).pt


def fits_body(bullets: list[str]) -> bool:
    return text_height_pt(bullets, _body_text_width(), BODY_PT) <= _body_capacity_pt()


def _pieces(text: str) -> list[str]:
    """A point short enough for one slide: whole, else by sentences, else by words."""
    if fits_body([text]):
        return [text]
    out: list[str] = []
    for sentence in sentences(text):
        if fits_body([sentence]):
            out.append(sentence)
        else:
            out += textwrap.wrap(sentence, chars_per_line(_body_text_width(), BODY_PT) * 6)
    return out


def split_bullets(bullets: list[str]) -> list[list[str]]:
    """Bullets in groups that each fit the body placeholder, in order."""
    groups: list[list[str]] = [[]]
    for bullet in (piece for b in bullets for piece in _pieces(b)):
        if groups[-1] and not fits_body([*groups[-1], bullet]):
            groups.append([])
        groups[-1].append(bullet)
    return [g for g in groups if g]


def title_size(title: str) -> int:
    """The title's font size: smaller for a long title; what still does not fit two lines is shortened."""
    width, room = CONTENT_WIDTH - 2 * INSET, Emu(TITLE_HEIGHT - 2 * INSET).pt
    return TITLE_PT if text_height_pt([title], width, TITLE_PT) <= room else SMALL_TITLE_PT


def fit_title(title: str) -> str:
    """The title on one line of text (no control characters), shortened at a word to what two lines hold."""
    return one_line(title, chars_per_line(CONTENT_WIDTH - 2 * INSET, SMALL_TITLE_PT) * 2 - 2)


# ---- planning -------------------------------------------------------------------------------------------------


def plan_slides(deck: Deliverable, max_slides: int | None = None) -> list[SlideSpec]:
    """The content slides (the title slide aside): each section's points, split so they fit, its tables as a
    chart and table slides, then a slide per figure, then the appendix. With `max_slides` (the deck was asked
    for a number of slides), a section keeps to one slide, a table to its chart and first rows; what is still
    too many (more than `max_slides`, else than MAX_SLIDES less the title slide) is left out from the end,
    figures and repeated tables first. The appendix is not counted."""
    counted = max_slides is not None
    slides = _section_slides(deck.sections, counted)
    slides += [SlideSpec(title=plain(f.caption) or "Figure", figure=f) for f in deck.figures]
    slides = _fit(slides, max(1, max_slides if max_slides is not None else MAX_SLIDES - 1))
    slides += _section_slides(deck.appendix, counted=False)
    for slide in slides:
        slide.notes = _notes(slide, deck)
    return slides


def _section_slides(sections: list[Section], counted: bool) -> list[SlideSpec]:
    slides: list[SlideSpec] = []
    for section in sections:
        title = section.title or "Overview"
        bullets: list[str] = []
        visuals: list[SlideSpec] = []
        for block in section.blocks:
            if isinstance(block, Paragraph):
                if not block.code:
                    bullets += [block.text] if fits_body([block.text]) else sentences(block.text)
            elif isinstance(block, BulletList):
                bullets += block.items
            else:
                visuals += _table_slides(block, title, slides=2 if counted else None)
        if len(bullets) == 1 and len(visuals) == 1 and visuals[0].chart is not None and fits_body(bullets):
            # One finding and its chart: one slide, the finding above the chart.
            visuals[0].title, visuals[0].lead = title, bullets[0]
            slides += visuals
            continue
        groups = split_bullets(bullets)
        for n, group in enumerate(groups[:1] if counted else groups):
            slides.append(SlideSpec(title=title if n == 0 else f"{title} (cont.)", bullets=group))
        slides += visuals
        if not groups and not visuals and section.title:
            slides.append(SlideSpec(title=section.title, divider=True))
    return slides


def _fit(slides: list[SlideSpec], limit: int) -> list[SlideSpec]:
    """At most `limit` slides: figures go first, then table slides whose table has a chart, then the last."""
    slides = list(slides)
    charts = {s.chart.caption for s in slides if s.chart is not None}
    while len(slides) > limit:
        figure = next((s for s in reversed(slides) if s.figure is not None), None)
        repeated = next((s for s in reversed(slides) if s.table is not None and s.table.caption in charts), None)
        slides.remove(figure or repeated or slides[-1])
    return slides


def _table_slides(table: Table, section_title: str, slides: int | None = None) -> list[SlideSpec]:
    """A table's chart (when it makes one) and its rows in pages, at most `slides` in all; a title says what part
    of the table a slide shows when it does not show all of it (rows left out, columns past the sixth)."""
    name = plain(table.caption) or section_title
    out = []
    if chartable(table):
        out.append(SlideSpec(title=name, chart=table))
        if table.chart:
            return out
    columns = len(table.headers)
    if columns > TABLE_MAX_COLUMNS:
        name += f" (first {TABLE_MAX_COLUMNS} of {columns} columns)"
    chunks = [table.rows[i : i + TABLE_ROWS_PER_SLIDE] for i in range(0, len(table.rows), TABLE_ROWS_PER_SLIDE)]
    shown = chunks[: max(1, slides - len(out))] if slides is not None else chunks
    for n, rows in enumerate(shown or [[]]):
        if len(shown) < len(chunks):
            first = n * TABLE_ROWS_PER_SLIDE + 1
            suffix = f": rows {first}\u2013{first + len(rows) - 1} of {len(table.rows)}"
        else:
            suffix = f" ({n + 1}/{len(chunks)})" if len(chunks) > 1 else ""
        out.append(SlideSpec(title=name + suffix, table=Table(table.headers, rows, table.caption)))
    return out


def visual_slides(table: Table) -> int:
    """How many slides a table takes: its chart, when it makes one, and its rows in pages."""
    pages = max(1, -(-len(table.rows) // TABLE_ROWS_PER_SLIDE))
    if table.chart in ("bar", "line") and chartable(table):
        return 1
    return (1 if chartable(table) else 0) + pages


def chartable(table: Table) -> bool:
    """Whether a table makes a chart: a label and a number per row (`chart_columns`), each label once (a chart
    of rows that repeat a category draws it again and again: such rows are analysed first), and not marked as a
    table only (`chart="none"`)."""
    columns = chart_columns(table)
    if table.chart == "none" or columns is None:
        return False
    labels = [plain(r[columns[0]]) for r in data_rows(table)]
    return len(set(labels)) == len(labels)


def _notes(slide: SlideSpec, deck: Deliverable) -> str:
    if not deck.references:
        return ""
    text = " ".join([slide.title, *slide.bullets])
    cited = sorted({int(n) for n in _CITATION.findall(text) if 0 < int(n) <= len(deck.references)})
    numbers = cited or list(range(1, len(deck.references) + 1))[:MAX_NOTES_SOURCES]
    lines = [f"[{n}] {reference_text(deck.references[n - 1])}" for n in numbers]
    return "Sources:\n" + "\n".join(lines)


# ---- rendering ------------------------------------------------------------------------------------------------


def render_deck(deck: Deliverable, max_slides: int | None = None) -> bytes:
    prs = Presentation()
    _widescreen(prs)
    prs.core_properties.title = one_line(deck.title, MAX_PROPERTY_CHARS)
    prs.core_properties.author = "Canvas Run Service"
    _title_slide(prs, deck)
    planned = plan_slides(deck, max_slides)
    logo = _logo_image(deck)
    for number, spec in enumerate(planned, start=2):
        if spec.divider:
            slide = prs.slides.add_slide(prs.slide_layouts[2])
            _set_title(slide, spec.title, top=Inches(2.8))
            slide.placeholders[1].element.getparent().remove(slide.placeholders[1].element)
        elif spec.bullets:
            slide = prs.slides.add_slide(prs.slide_layouts[1])
            _set_title(slide, spec.title)
            _fill_body(slide.placeholders[1], spec.bullets)
        else:
            slide = prs.slides.add_slide(prs.slide_layouts[5])
            _set_title(slide, spec.title)
            if spec.chart is not None:
                _add_chart(slide, spec.chart, lead=spec.lead)
            elif spec.table is not None:
                _add_table(slide, spec.table)
            elif spec.figure is not None:
                _add_figure(slide, spec.figure)
        _decorate(slide, number, len(planned) + 1)
        if logo is not None:
            _add_logo(slide, logo, CORNER_LOGO_HEIGHT, CORNER_LOGO_MAX_WIDTH, corner="bottom-left")
        if spec.notes:
            slide.notes_slide.notes_text_frame.text = spec.notes
    buffer = io.BytesIO()
    prs.save(buffer)
    return buffer.getvalue()


def _widescreen(prs: PptxPresentation) -> None:
    """16:9, with the master's and layouts' placeholders stretched to match (slides added later inherit)."""
    ratio = SLIDE_WIDTH / prs.slide_width
    prs.slide_width, prs.slide_height = SLIDE_WIDTH, SLIDE_HEIGHT
    # python-pptx declares LayoutPlaceholders.__iter__ as a callable attribute, which mypy reads as taking no self.
    placeholders = [ph for layout in prs.slide_layouts for ph in layout.placeholders]  # type: ignore[misc]
    shapes = list(prs.slide_master.shapes) + placeholders
    for shape in shapes:
        shape.left, shape.width = int(shape.left * ratio), int(shape.width * ratio)


def _title_slide(prs: PptxPresentation, deck: Deliverable) -> None:
    slide = prs.slides.add_slide(prs.slide_layouts[0])
    fill = slide.background.fill
    fill.solid()
    fill.fore_color.rgb = ACCENT
    title = slide.shapes.title
    title.left, title.top, title.width, title.height = MARGIN, Inches(1.8), CONTENT_WIDTH, Inches(2.3)
    frame = title.text_frame
    frame.word_wrap = True
    frame.text = fit_title(deck.title)
    for run in frame.paragraphs[0].runs:
        run.font.size, run.font.bold, run.font.color.rgb = Pt(40 if len(deck.title) < 60 else 32), True, _WHITE
    subtitle = slide.placeholders[1]
    subtitle.left, subtitle.top, subtitle.width, subtitle.height = MARGIN, Inches(4.3), CONTENT_WIDTH, Inches(1.2)
    lines = [line for line in (deck.subtitle, long_date(deck.date) if deck.date else "") if line]
    subtitle.text_frame.text = "\n".join(lines) or " "
    for p in subtitle.text_frame.paragraphs:
        for run in p.runs:
            run.font.size, run.font.color.rgb = Pt(20), RGBColor(0xDD, 0xE6, 0xF0)  # type: ignore[no-untyped-call]
    if deck.references:
        slide.notes_slide.notes_text_frame.text = _notes(SlideSpec(title=deck.title), deck)
    logo = _logo_image(deck)
    if logo is not None:
        _add_logo(slide, logo, LOGO_HEIGHT, LOGO_MAX_WIDTH, corner="top-right")


def _logo_image(deck: Deliverable) -> tuple[bytes, int, int] | None:
    """The logo as a raster the deck can hold, with its pixel size; None without one (or one that cannot be
    shown)."""
    if deck.logo is None:
        return None
    from PIL import Image

    from canvas_core.render.chart import raster

    image = raster(deck.logo.data, deck.logo.mime)
    if image is None:
        return None
    with Image.open(io.BytesIO(image[0])) as opened:
        width, height = opened.size
    return image[0], width, height


def _add_logo(slide: Slide, logo: tuple[bytes, int, int], height: int, max_width: int, corner: str) -> None:
    """The logo at a corner of the slide, `height` tall (narrower when it would be wider than `max_width`)."""
    data, width_px, height_px = logo
    scale = min(height / height_px, max_width / width_px)
    width, tall = int(width_px * scale), int(height_px * scale)
    gap = Inches(0.25)
    left = SLIDE_WIDTH - MARGIN - width if corner == "top-right" else MARGIN
    top = gap + Inches(0.12) if corner == "top-right" else SLIDE_HEIGHT - gap - tall
    slide.shapes.add_picture(io.BytesIO(data), Emu(left), Emu(top), Emu(width), Emu(tall))


_WHITE = RGBColor(0xFF, 0xFF, 0xFF)  # type: ignore[no-untyped-call]


def _set_title(slide: Slide, text: str, top: Length = TITLE_TOP) -> None:
    title = slide.shapes.title
    assert title is not None  # every layout the deck uses has a title placeholder
    title.left, title.top, title.width, title.height = MARGIN, top, CONTENT_WIDTH, TITLE_HEIGHT
    frame = title.text_frame
    frame.word_wrap = True
    frame.auto_size = MSO_AUTO_SIZE.TEXT_TO_FIT_SHAPE
    text = fit_title(text)
    frame.text = text
    p = frame.paragraphs[0]
    p.alignment = PP_ALIGN.LEFT
    for run in p.runs:
        run.font.size, run.font.bold, run.font.color.rgb = Pt(title_size(text)), True, ACCENT


def _fill_body(body: SlidePlaceholder, bullets: list[str]) -> None:
    body.left, body.top, body.width, body.height = MARGIN, BODY_TOP, CONTENT_WIDTH, BODY_HEIGHT
    frame = body.text_frame
    frame.word_wrap = True
    # The split above keeps the text inside; the autofit flag keeps it there if someone edits the slide.
    frame.auto_size = MSO_AUTO_SIZE.TEXT_TO_FIT_SHAPE
    for side in ("margin_left", "margin_right", "margin_top", "margin_bottom"):
        setattr(frame, side, INSET)
    for n, bullet in enumerate(bullets):
        p = frame.paragraphs[0] if n == 0 else frame.add_paragraph()
        p.space_before, p.space_after, p.line_spacing = Pt(0), Pt(PARAGRAPH_GAP_PT), 1.0
        for span in spans(bullet):
            run = p.add_run()
            run.text = span.text
            run.font.size = Pt(BODY_PT)
            run.font.bold = span.bold or None
            run.font.italic = span.italic or None
            if span.url:
                run.hyperlink.address = span.url


def _add_table(slide: Slide, table: Table) -> None:
    columns = min(len(table.headers), TABLE_MAX_COLUMNS)
    kinds = column_kinds(table)
    rows = [table.headers[:columns], *(r[:columns] for r in table.rows)]
    height = Emu(Inches(0.5) * len(rows))
    shape = slide.shapes.add_table(len(rows), columns, MARGIN, BODY_TOP, CONTENT_WIDTH, height)
    grid = shape.table
    column_width = CONTENT_WIDTH // columns
    limit = chars_per_line(column_width - Inches(0.2), TABLE_PT) * 2  # two lines a cell
    for c in range(columns):
        grid.columns[c].width = column_width
    for r, values in enumerate(rows):
        grid.rows[r].height = Inches(0.5)
        for c, value in enumerate(values):
            text = plain(value)
            text = text if len(text) <= limit else text[: limit - 1] + "…"
            cell = grid.cell(r, c)
            cell.text = text
            p = cell.text_frame.paragraphs[0]
            cell.text_frame.word_wrap = True
            if r > 0 and kinds[c] in ("number", "currency", "percent"):
                p.alignment = PP_ALIGN.RIGHT
            for run in p.runs:
                run.font.size, run.font.bold = Pt(TABLE_PT), (r == 0) or None


def _add_chart(slide: Slide, table: Table, lead: str = "") -> None:
    label, values = chart_columns(table)  # type: ignore[misc]
    top, height = Emu(BODY_TOP), Emu(BODY_HEIGHT)
    if lead:
        box = slide.shapes.add_textbox(MARGIN, Emu(BODY_TOP - Inches(0.2)), CONTENT_WIDTH, LEAD_HEIGHT)
        box.text_frame.word_wrap = True
        paragraph = box.text_frame.paragraphs[0]
        run = paragraph.add_run()
        run.text = plain(lead)
        run.font.size = Pt(LEAD_PT)
        top, height = Emu(BODY_TOP + LEAD_HEIGHT - Inches(0.2)), Emu(BODY_HEIGHT - LEAD_HEIGHT + Inches(0.2))
    rows = data_rows(table)
    values = _one_scale(rows, values)
    # python-pptx leaves CategoryChartData unannotated, and types add_chart's data as its ChartData subclass.
    data = CategoryChartData()  # type: ignore[no-untyped-call]
    data.categories = [plain(r[label]) or "—" for r in rows]
    kinds = column_kinds(table)
    for c in values:
        data.add_series(plain(table.headers[c]), [_number(r[c]) for r in rows])  # type: ignore[no-untyped-call]
    long_labels = max(len(plain(r[label])) for r in rows) > 14
    chart_type = XL_CHART_TYPE.BAR_CLUSTERED if long_labels else XL_CHART_TYPE.COLUMN_CLUSTERED
    if table.chart == "line":
        chart_type = XL_CHART_TYPE.LINE_MARKERS
    frame = slide.shapes.add_chart(chart_type, MARGIN, top, CONTENT_WIDTH, height, data)  # type: ignore[arg-type]
    # python-pptx annotates add_chart as returning the Chart; it returns the GraphicFrame that holds it.
    chart = frame.chart  # type: ignore[attr-defined]
    chart.has_legend = len(values) > 1
    if chart.has_legend:
        chart.legend.position, chart.legend.include_in_layout = XL_LEGEND_POSITION.BOTTOM, False
    chart.font.size = Pt(12)
    chart.has_title = len(values) > 1  # one series: the slide's title names it
    axis = chart.value_axis
    # Axis titles: what the bars measure (its unit in the header) and what they are of.
    _axis_title(axis, plain(table.headers[values[0]]) if len(values) == 1 else "")
    _axis_title(chart.category_axis, plain(table.headers[label]))
    if all(kinds[c] == "percent" for c in values):
        axis.tick_labels.number_format = "0%"
        axis.tick_labels.number_format_is_linked = False
    else:
        axis.tick_labels.number_format = "#,##0"
        axis.tick_labels.number_format_is_linked = False
    numbers = [v for c in values for r in rows if (v := _number(r[c])) is not None]
    if table.chart != "line" and numbers and min(numbers) >= 0:
        axis.minimum_scale = 0  # bars are read by their length: they start at zero
    plot = chart.plots[0]
    if table.chart == "line":
        for series, colour in zip(plot.series, SERIES_COLOURS, strict=False):
            series.format.line.color.rgb = colour
            series.format.line.width = Pt(2.5)
            series.smooth = False
        return
    plot.gap_width = 60
    for series, colour in zip(plot.series, SERIES_COLOURS, strict=False):
        series.format.fill.solid()
        series.format.fill.fore_color.rgb = colour


def _axis_title(axis: Any, text: str) -> None:
    if not text:
        return
    axis.has_title = True
    axis.axis_title.text_frame.text = text
    axis.axis_title.text_frame.paragraphs[0].font.size = Pt(11)
    axis.axis_title.text_frame.paragraphs[0].font.bold = False


def _one_scale(rows: list[list[str]], columns: list[int]) -> list[int]:
    """The value columns that share the first one's scale (within a factor of ten): units beside revenue on
    one axis would be bars too small to see."""

    def peak(c: int) -> float:
        return max((abs(v) for r in rows if (v := _number(r[c])) is not None), default=0.0)

    first = peak(columns[0])
    return [c for c in columns if c == columns[0] or (first and 0.1 <= peak(c) / first <= 10)]


def _add_figure(slide: Slide, figure: Figure) -> None:
    """The image centred in the body area, as large as fits without stretching it."""
    from PIL import Image

    from canvas_core.render.chart import raster

    image = raster(figure.data, figure.mime)
    if image is None:
        box = slide.shapes.add_textbox(MARGIN, BODY_TOP, CONTENT_WIDTH, Inches(1))
        box.text_frame.text = f"{plain(figure.caption)} (an image this deck cannot show)"
        return
    with Image.open(io.BytesIO(image[0])) as opened:
        width, height = opened.size
    scale = min(CONTENT_WIDTH / width, BODY_HEIGHT / height, Inches(1) / 96 * 3)  # at most three times its size
    shown_width, shown_height = int(width * scale), int(height * scale)
    left = MARGIN + (CONTENT_WIDTH - shown_width) // 2
    top = BODY_TOP + (BODY_HEIGHT - shown_height) // 2
    slide.shapes.add_picture(io.BytesIO(image[0]), Emu(left), Emu(top), Emu(shown_width), Emu(shown_height))


def _number(text: str) -> float | None:
    value = typed_value(text).value
    return float(value) if isinstance(value, int | float) else None


def _decorate(slide: Slide, number: int, total: int) -> None:
    bar = slide.shapes.add_shape(MSO_SHAPE.RECTANGLE, Emu(0), Emu(0), SLIDE_WIDTH, Inches(0.12))
    bar.fill.solid()
    bar.fill.fore_color.rgb = ACCENT
    bar.line.fill.background()
    box = slide.shapes.add_textbox(
        Emu(SLIDE_WIDTH - MARGIN - Inches(1.5)), Emu(SLIDE_HEIGHT - Inches(0.55)), Inches(1.5), Inches(0.4)
    )
    p = box.text_frame.paragraphs[0]
    p.alignment = PP_ALIGN.RIGHT
    run = p.add_run()
    run.text = f"{number} / {total}"
    run.font.size, run.font.color.rgb = Pt(11), MUTED


# ---- the check ------------------------------------------------------------------------------------------------


@dataclass
class SlideView:
    title: str
    texts: list[str]
    notes: str
    has_table: bool
    has_chart: bool
    overflowing: list[str] = field(default_factory=list)


def check_pptx(data: bytes) -> list[SlideView]:
    """Reopen a .pptx with python-pptx and read every slide back; RenderCheckError when it does not open, has
    no slides, or a text box holds more text than it can show."""
    try:
        prs = Presentation(io.BytesIO(data))
        views = [_view(slide) for slide in prs.slides]
    except Exception as exc:
        raise RenderCheckError(f"the file does not reopen as a PowerPoint deck ({type(exc).__name__})") from exc
    if not views:
        raise RenderCheckError("the deck has no slides")
    for n, view in enumerate(views, start=1):
        if view.overflowing:
            raise RenderCheckError(f"slide {n} has more text than its box shows: {view.overflowing[0][:60]!r}")
    return views


def _view(slide: Slide) -> SlideView:
    title = slide.shapes.title.text if slide.shapes.title is not None else ""
    texts, overflowing = [], []
    for shape in slide.shapes:
        # Only a Shape (an autoshape, text box or placeholder) has a text frame.
        if not isinstance(shape, Shape):
            continue
        is_title = shape == slide.shapes.title
        paragraphs = [p for p in shape.text_frame.paragraphs if "".join(r.text for r in p.runs)]
        if not is_title:
            texts += ["".join(r.text for r in p.runs) for p in paragraphs]
        if paragraphs and shape.is_placeholder:
            size = max((r.font.size.pt for p in paragraphs for r in p.runs if r.font.size), default=18)
            width = shape.width - (0 if is_title else BULLET_INDENT) - 2 * INSET
            needed = text_height_pt(["".join(r.text for r in p.runs) for p in paragraphs], width, size)
            if needed > Emu(shape.height - 2 * INSET).pt:
                overflowing.append(paragraphs[0].runs[0].text)
    notes_frame = slide.notes_slide.notes_text_frame if slide.has_notes_slide else None
    notes = notes_frame.text if notes_frame is not None else ""
    return SlideView(
        title=title,
        texts=texts,
        notes=notes,
        has_table=any(s.has_table for s in slide.shapes),
        has_chart=any(s.has_chart for s in slide.shapes),
        overflowing=overflowing,
    )
