"""presentation-block: a slide deck (.pptx): a title slide, a slide per part of the outline the plan gave it
(as many as the request asked for, when it said how many), charts and tables of the inputs' data, and sources
in the speaker notes. Text is split so it stays inside its box."""

from __future__ import annotations

from canvas_core.agents.outline import generic_parts
from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.blocks.deliverable import (
    CITE,
    compose,
    draft,
    input_figures,
    input_tables,
    outline,
    outline_instructions,
    sources,
    store,
)
from canvas_core.render import pptx
from canvas_core.render.structure import to_markdown

INSTRUCTIONS = (
    "Write this as a slide deck in Markdown: '# ' with the deck's title, then one '## ' heading per slide (eight "
    "to fifteen slides), each followed by three to six '- ' bullets of at most twenty words. Put figures in pipe "
    f"tables (| a | b |) under their own '## ' heading. {CITE}"
)


def run(ctx: BlockContext) -> BlockOutput:
    plan = outline(ctx)
    tables = input_tables(ctx)
    parts = slide_parts(list(plan.items), plan.count, sum(min(2, pptx.visual_slides(t)) for t in tables))
    instructions = INSTRUCTIONS
    if plan.count:
        instructions += f" The deck has exactly {plan.count} slides: the title slide and {plan.count - 1} more."
    instructions = f"{instructions}\n\n{outline_instructions(parts, 'slide')}".strip()
    deck = compose(ctx, draft(ctx, instructions), parts=parts)
    deck.figures = input_figures(ctx)
    limit = plan.count - 1 if plan.count else None
    data = pptx.render_deck(deck, max_slides=limit)
    artifact = store(ctx, deck.title, "pptx", data, pptx.CONTENT_TYPE, pptx.check_pptx, label="slide deck")
    slides = pptx.plan_slides(deck, max_slides=limit)
    outline_lines = "\n".join(f"{n}. {s.title}" for n, s in enumerate(slides, start=2))
    content = f"# {deck.title}\n\nSlides:\n1. {deck.title}\n{outline_lines}\n\n{to_markdown(deck)}"
    return BlockOutput(content=content, sources=sources(ctx), artifacts=[artifact])


def slide_parts(items: list[str], count: int | None, data_slides: int) -> list[str]:
    """The slides to write: one per item; with a number of slides asked for, as many as fit beside the title
    slide and the data's slides (items past the last slot share it, and generic parts fill what is left)."""
    if not count:
        return items
    slots = max(1, count - 1 - data_slides)
    if not items:
        return generic_parts(slots)
    if len(items) > slots:
        return [*items[: slots - 1], "; ".join(items[slots - 1 :])]
    extra = slots - len(items)
    lead = ["Overview"] if extra >= 1 else []
    tail = ["Next steps"] if extra >= 2 else []
    middle = [p for p in generic_parts(extra + 2)[1:-1]][: extra - len(lead) - len(tail)]
    return [*lead, *items, *middle, *tail]
