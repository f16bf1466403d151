"""presentation-block: a slide deck (.pptx): a title slide, then content slides with titles (text split so
it stays inside its box), charts and tables where the inputs have data, and sources in the speaker notes."""

from __future__ import annotations

from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.blocks.deliverable import CITE, compose, draft, sources, store
from canvas_core.render import pptx
from canvas_core.render.structure import to_markdown

INSTRUCTIONS = (
    "Write this as a slide deck in Markdown: '# ' with the deck's title, then one '## ' heading per slide (eight "
    "to fifteen slides), each followed by three to six '- ' bullets of at most twenty words. Put figures in pipe "
    f"tables (| a | b |) under their own '## ' heading. {CITE}"
)


def run(ctx: BlockContext) -> BlockOutput:
    deck = compose(ctx, draft(ctx, INSTRUCTIONS))
    deck.subtitle = deck.subtitle or "Prepared by the research team"
    data = pptx.render_deck(deck)
    artifact = store(ctx, deck.title, "pptx", data, pptx.CONTENT_TYPE, pptx.check_pptx, label="slide deck")
    slides = pptx.plan_slides(deck)
    outline = "\n".join(f"{n}. {s.title}" for n, s in enumerate(slides, start=2))
    content = f"# {deck.title}\n\nSlides:\n1. {deck.title}\n{outline}\n\n{to_markdown(deck)}"
    return BlockOutput(content=content, sources=sources(ctx), artifacts=[artifact])
