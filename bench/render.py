"""Render times of the deliverables: a 30-section report (.docx), a 20-slide deck (.pptx) and a 10,000-row
workbook (.xlsx), built from plain data by canvas_core/render as the blocks build them, then reopened with
their libraries as a block does before storing a file.

Each figure is the median of a few renders after one warm-up (imports and first-use caches excluded, as in a
warm Lambda). Targets on the reference machine: docx under 1 s, pptx under 1 s, xlsx under 2 s.
"""

from __future__ import annotations

import datetime as dt
import statistics
import time
from collections.abc import Callable

from canvas_core.render.structure import BulletList, Deliverable, Paragraph, Reference, Section
from canvas_core.tables import Table, typed_value

SAMPLES = 3
DECK_SLIDES = 20
PARAGRAPH = (
    "Tidal range depends on the shape of the coast and the basin behind it: funnel-shaped bays amplify the "
    "incoming wave, while open coasts see far less [1]. Local resonance matters as much as the Moon [2]."
)


def _table(rows: int, caption: str) -> Table:
    start = dt.date(2024, 1, 1)
    return Table(
        headers=["Station", "Range (m)", "Surveyed", "Visitors", "Share", "Budget"],
        rows=[
            [
                f"Station {n}",
                f"{(n % 170) / 10:.1f}",
                (start + dt.timedelta(days=n % 365)).isoformat(),
                f"{n * 7 % 5000:,}",
                f"{n % 100}%",
                f"${n * 13 % 90000:,}.50",
            ]
            for n in range(rows)
        ],
        caption=caption,
    )


def report(sections: int = 30) -> Deliverable:
    body = []
    for n in range(1, sections + 1):
        blocks = [
            Paragraph(PARAGRAPH),
            BulletList([f"Finding {n}.{k}: **{k * 3}%** of the change [1]" for k in range(5)]),
        ]
        if n % 3 == 0:
            blocks.append(_table(10, f"Stations, part {n // 3}"))
        blocks.append(Paragraph(PARAGRAPH))
        body.append(Section(title=f"Section {n}", blocks=blocks, level=1))
    references = [Reference(f"Source {n}", f"https://example.org/source/{n}") for n in range(1, 21)]
    return Deliverable("Tides along the coast", body, references, "Benchmark report", dt.date(2024, 5, 1))


def deck() -> Deliverable:
    """A title slide, 17 bullet slides, and a table that becomes a chart slide and a table slide: 20 slides."""
    body = [
        Section(
            title=f"Slide {n}",
            blocks=[BulletList([f"Point {k} about tides and coasts, briefly [1]" for k in range(5)])],
        )
        for n in range(1, 18)
    ]
    body.append(Section(title="Ranges", blocks=[_table(8, "Ranges by station")]))
    return Deliverable("Tides along the coast", body, [Reference("Source", "https://example.org")], "Benchmark deck")


def _cold(render: Callable[[object], bytes], spec: object) -> bytes:
    # Each Lambda invocation reads its cells afresh: no cell typed by an earlier sample.
    typed_value.cache_clear()
    return render(spec)


def median_seconds(work: Callable[[], object]) -> float:
    work()
    timings = []
    for _ in range(SAMPLES):
        start = time.perf_counter()
        work()
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


def main() -> None:
    from canvas_core.render import docx, pptx, xlsx

    document = report()
    slides = deck()
    # A deck asked for 20 slides (one nobody gave a length keeps to 15).
    assert len(pptx.plan_slides(slides, max_slides=DECK_SLIDES - 1)) + 1 == DECK_SLIDES
    workbook = xlsx.WorkbookSpec("Stations", [_table(10_000, "Stations")], [Reference("Source", "https://example.org")])
    docx_bytes, pptx_bytes, xlsx_bytes = (
        docx.render_report(document),
        pptx.render_deck(slides, max_slides=DECK_SLIDES - 1),
        xlsx.render_workbook(workbook),
    )
    print(f"render_docx_30_sections_s {median_seconds(lambda: docx.render_report(document)):.3f}")
    render_pptx = median_seconds(lambda: pptx.render_deck(slides, max_slides=DECK_SLIDES - 1))
    print(f"render_pptx_20_slides_s {render_pptx:.3f}")
    print(f"render_xlsx_10000_rows_s {median_seconds(lambda: _cold(xlsx.render_workbook, workbook)):.3f}")
    print(f"check_docx_30_sections_s {median_seconds(lambda: docx.check_docx(docx_bytes)):.3f}")
    print(f"check_pptx_20_slides_s {median_seconds(lambda: pptx.check_pptx(pptx_bytes)):.3f}")
    print(f"check_xlsx_10000_rows_s {median_seconds(lambda: xlsx.check_xlsx(xlsx_bytes)):.3f}")
