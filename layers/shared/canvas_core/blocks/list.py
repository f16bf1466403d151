"""list-block: an expandable list (items with sub-items) served as the node's content, as a nested markdown
list. The model lists what the block's task asks for over the inputs; when its answer holds no list, the
lists already in the inputs are used."""

from __future__ import annotations

from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.blocks.research import task_of
from canvas_core.errors import BlockFatalError
from canvas_core.tables import parse_list, render_list

MAX_ITEMS = 200


def run(ctx: BlockContext) -> BlockOutput:
    task = task_of(ctx)
    material = ctx.material()
    ask = (
        f"{task}\n\nAnswer with a markdown list: one item per line starting with '- ', and the details of an "
        "item as sub-items indented under it." + (f"\n\nMaterial:\n{material}" if material else "")
    )
    items = parse_list(ctx.complete(ask, role="analyst").text)
    if not items:
        items = parse_list(material)
        if items:
            ctx.note("The model's answer held no list; the lists in the block's inputs were used")
    if not items:
        raise BlockFatalError("No list could be built: the model's answer and the inputs hold no list items")
    items = items[:MAX_ITEMS]
    content = f"{len(items)} items\n\n{render_list(items)}"
    return BlockOutput(content=content, sources=ctx.input_sources())
