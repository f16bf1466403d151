"""The planner: turns a run into a canvas (blocks and the edges that carry outputs forward) and the task tree
(one parent-task, a persona-task per block; tool-call-tasks are added as blocks run).

Uploads become blocks first (images → image-block, documents → file-block); then the answer blocks, within the
allowed set: explicit `blocks`, else the template's block types.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from canvas_core.models.catalog import (
    IMAGE_EXTENSIONS,
    TEMPLATE_BLOCKS,
    BlockType,
    TaskType,
    Template,
)
from canvas_core.models.items import EdgeItem, NodeItem, RunItem, TaskItem

MAX_BLOCKS = 40

PERSONAS: dict[BlockType, str] = {
    BlockType.PROMPT: "Researcher",
    BlockType.WEB: "Researcher",
    BlockType.WEB_RESEARCH: "Researcher",
    BlockType.DEEP_RESEARCH: "Researcher",
    BlockType.YT: "Researcher",
    BlockType.FILE: "Librarian",
    BlockType.TABLE: "Analyst",
    BlockType.LIST: "Analyst",
    BlockType.EXCEL: "Analyst",
    BlockType.IMAGE: "Designer",
    BlockType.APP: "Engineer",
    BlockType.PROTOTYPE: "Engineer",
    BlockType.LANDING_PAGE: "Designer",
    BlockType.PRESENTATION: "Writer",
    BlockType.DOCUMENT: "Writer",
    BlockType.MEMO: "Writer",
    BlockType.TEXT: "Writer",
}

# Blocks the minimal plan builds from, in order: an answer, then a note that carries it to the reader.
ANSWER_CHAIN = (BlockType.PROMPT, BlockType.TEXT)


@dataclass
class Plan:
    nodes: list[NodeItem] = field(default_factory=list)
    edges: list[EdgeItem] = field(default_factory=list)
    tasks: list[TaskItem] = field(default_factory=list)


def allowed_block_types(run: RunItem) -> list[BlockType]:
    if run.blocks:
        return [BlockType(b) for b in run.blocks]
    return sorted(TEMPLATE_BLOCKS[Template(run.template)], key=list(BlockType).index)


def plan_canvas(run: RunItem) -> Plan:
    plan = Plan()
    canvas_id = run.canvas_id

    def add(block_type: BlockType, name: str, inputs: list[NodeItem], **extra) -> NodeItem:
        node = NodeItem(
            canvas_id=canvas_id,
            block_id=_stable_id(canvas_id, f"node:{len(plan.nodes)}"),
            name=name,
            type=block_type.value,
            inputs=[i.block_id for i in inputs],
            persona=PERSONAS[block_type],
            position=len(plan.nodes),
            **extra,
        )
        plan.nodes.append(node)
        plan.edges += [EdgeItem(source_id=i.block_id, target_id=node.block_id) for i in inputs]
        return node

    gathered = [
        add(
            BlockType.IMAGE if upload.extension in IMAGE_EXTENSIONS else BlockType.FILE,
            upload.name,
            [],
            upload_id=upload.file_id,
        )
        for upload in run.uploads
    ]

    allowed = allowed_block_types(run)
    chain = [b for b in ANSWER_CHAIN if b in allowed] or allowed[: MAX_BLOCKS - len(gathered)]
    previous = gathered
    for block_type in chain:
        node = add(block_type, _block_name(block_type), previous, instructions=run.prompt)
        previous = [node]

    plan.tasks = _task_tree(run, plan.nodes)
    return plan


def _block_name(block_type: BlockType) -> str:
    names = {BlockType.PROMPT: "Answer the prompt", BlockType.TEXT: "Answer"}
    return names.get(block_type, block_type.value.removesuffix("-block").replace("-", " ").title())


def _task_tree(run: RunItem, nodes: list[NodeItem]) -> list[TaskItem]:
    parent = TaskItem(
        canvas_id=run.canvas_id,
        task_id=_stable_id(run.canvas_id, "task:parent"),
        name=f"Plan and answer: {_excerpt(run.prompt)}",
        task_type=TaskType.PARENT,
    )
    personas = [
        TaskItem(
            canvas_id=run.canvas_id,
            task_id=persona_task_id(run.canvas_id, node.block_id),
            parent_id=parent.task_id,
            name=f"{node.persona}: {node.name}",
            task_type=TaskType.PERSONA,
            block_id=node.block_id,
            position=i + 1,
        )
        for i, node in enumerate(nodes)
    ]
    return [parent, *personas]


def parent_task_id(canvas_id: str) -> str:
    return _stable_id(canvas_id, "task:parent")


def persona_task_id(canvas_id: str, block_id: str) -> str:
    return _stable_id(canvas_id, f"task:persona:{block_id}")


def tool_call_task_id(canvas_id: str, block_id: str) -> str:
    return _stable_id(canvas_id, f"task:tool:{block_id}")


def _stable_id(canvas_id: str, name: str) -> str:
    # Derived ids make a retried step write the same items instead of new ones.
    return str(uuid.uuid5(uuid.UUID(canvas_id), name))


def _excerpt(prompt: str, limit: int = 60) -> str:
    line = prompt.strip().splitlines()[0]
    return line if len(line) <= limit else line[: limit - 3].rstrip() + "..."
