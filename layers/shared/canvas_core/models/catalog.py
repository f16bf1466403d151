"""The vocabulary of the contract: templates, the 17 block types, statuses, and which blocks a template allows; and
the block catalogue, one entry per block type that says everything the service knows of it besides its code."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Template(StrEnum):
    AUTO = "auto"
    DEEP_RESEARCH = "deep_research"
    REPORT = "report"
    SLIDES = "slides"
    MEMO = "memo"
    EXCEL = "excel"
    APP = "app"
    LANDING_PAGE = "landing_page"


class BlockType(StrEnum):
    PROMPT = "prompt-block"
    TABLE = "table-block"
    WEB = "web-block"
    WEB_RESEARCH = "web-research-block"
    FILE = "file-block"
    YT = "yt-block"
    MEMO = "memo-block"
    TEXT = "text-block"
    DOCUMENT = "document-block"
    PRESENTATION = "presentation-block"
    EXCEL = "excel-block"
    APP = "app-block"
    IMAGE = "image-block"
    LANDING_PAGE = "landing-page-block"
    LIST = "list-block"
    DEEP_RESEARCH = "deep-research-block"
    PROTOTYPE = "prototype-block"


@dataclass(frozen=True)
class BlockSpec:
    """What the service knows of a block type besides its code (its module in canvas_core/blocks, its Lambda in
    functions/blocks and template.yaml): the planner's catalogue, personas and estimates read it."""

    guide: str  # what it does, as the planner's prompt lists it
    persona: str  # the agent that runs it (canvas_core/agents/personas.py)
    typical_ms: int  # how long it typically takes, calling a model (canvas_core/estimates.py)
    # What it typically uses: input tokens, output tokens, searches, pages fetched, files written.
    usage: tuple[int, int, int, int, int]
    title: str | None = None  # a deliverable's node title
    duty: str | None = None  # a deliverable's task, added to the prompt


_B = BlockType
BLOCK_CATALOG: dict[BlockType, BlockSpec] = {
    _B.FILE: BlockSpec(
        "reads one uploaded document (created for each upload; do not plan it yourself)",
        "Librarian", 20_000, (6_000, 1_000, 0, 0, 0),
    ),
    _B.IMAGE: BlockSpec(
        "describes an uploaded image, or generates an image (e.g. a hero image) from its instructions",
        "Designer", 60_000, (1_500, 500, 0, 0, 1),
    ),
    _B.WEB: BlockSpec(
        "fetches one web page (put its URL in `url`) and extracts its main text",
        "Researcher", 20_000, (6_000, 1_000, 0, 1, 0),
    ),
    _B.WEB_RESEARCH: BlockSpec(
        "searches the web on its instructions and reads the best pages, with sources",
        "Researcher", 180_000, (20_000, 2_000, 3, 8, 0),
    ),
    _B.DEEP_RESEARCH: BlockSpec(
        "multi-round research on a broad question: many searches and pages, with sources",
        "Researcher", 600_000, (60_000, 6_000, 8, 24, 0),
    ),
    _B.YT: BlockSpec(
        "reads the transcript of one YouTube video (put its URL in `url`)",
        "Researcher", 30_000, (8_000, 1_000, 0, 1, 0),
    ),
    _B.PROMPT: BlockSpec(
        "one model call: works through a subtask over its inputs (analysis, comparison, reasoning)",
        "Analyst", 45_000, (3_000, 1_500, 0, 0, 0),
    ),
    _B.TABLE: BlockSpec(
        "builds a table of facts, figures or comparisons from its inputs",
        "Analyst", 60_000, (4_000, 2_000, 0, 0, 0),
    ),
    _B.LIST: BlockSpec(
        "builds a list of items (ideas, steps, options) from its inputs",
        "Analyst", 30_000, (3_000, 1_000, 0, 0, 0),
    ),
    _B.TEXT: BlockSpec(
        "the Writer: synthesizes its inputs into the written answer, citing sources by number",
        "Writer", 60_000, (4_000, 3_000, 0, 0, 0),
    ),
    _B.DOCUMENT: BlockSpec(
        "renders its inputs as a report document (.docx)",
        "Writer", 120_000, (8_000, 4_000, 0, 0, 1),
        "Report", "Turn the answer into a well-structured report document (.docx)",
    ),
    _B.PRESENTATION: BlockSpec(
        "renders its inputs as a slide deck (.pptx)",
        "Designer", 150_000, (8_000, 4_000, 0, 0, 1),
        "Slide deck", "Turn the answer into a clear slide deck (.pptx)",
    ),
    _B.MEMO: BlockSpec(
        "renders its inputs as a memo (.docx)",
        "Writer", 90_000, (6_000, 3_000, 0, 0, 1),
        "Memo", "Turn the answer into a concise memo (.docx)",
    ),
    _B.EXCEL: BlockSpec(
        "renders its inputs (tables especially) as a spreadsheet (.xlsx)",
        "Analyst", 90_000, (6_000, 3_000, 0, 0, 1),
        "Spreadsheet", "Turn the tables and figures into a spreadsheet (.xlsx)",
    ),
    _B.APP: BlockSpec(
        "builds a single-file web app (.html) from its inputs",
        "Engineer", 180_000, (8_000, 4_000, 0, 0, 1),
        "App", "Build a working single-file web app (.html)",
    ),
    _B.PROTOTYPE: BlockSpec(
        "builds a clickable prototype (.html) from its inputs",
        "Engineer", 180_000, (8_000, 4_000, 0, 0, 1),
        "Prototype", "Build a clickable prototype (.html)",
    ),
    _B.LANDING_PAGE: BlockSpec(
        "builds a landing page (.html) from its inputs (copy, images)",
        "Designer", 150_000, (8_000, 4_000, 0, 0, 1),
        "Landing page", "Build the landing page (.html)",
    ),
}  # fmt: skip


class RunStatus(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    PARTIAL = "partial"
    FAILED = "failed"


class NodeStatus(StrEnum):
    IDLE = "idle"
    RUNNING = "running"
    COMPLETED = "completed"
    ERROR = "error"
    SKIPPED = "skipped"


class TaskStatus(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    ERROR = "error"


class TaskType(StrEnum):
    PARENT = "parent-task"
    PERSONA = "persona-task"
    TOOL_CALL = "tool-call-task"


TERMINAL_NODE_STATUSES = frozenset({NodeStatus.COMPLETED, NodeStatus.ERROR, NodeStatus.SKIPPED})
TERMINAL_TASK_STATUSES = frozenset({TaskStatus.COMPLETED, TaskStatus.ERROR})

TEMPLATE_BLOCKS: dict[Template, frozenset[BlockType]] = {
    Template.AUTO: frozenset(BlockType),
    Template.DEEP_RESEARCH: frozenset({_B.PROMPT, _B.TABLE, _B.WEB, _B.WEB_RESEARCH, _B.FILE, _B.YT, _B.MEMO, _B.TEXT}),
    Template.REPORT: frozenset({_B.PROMPT, _B.TABLE, _B.WEB, _B.YT, _B.DOCUMENT, _B.TEXT}),
    Template.SLIDES: frozenset({_B.PROMPT, _B.TABLE, _B.WEB, _B.YT, _B.PRESENTATION, _B.TEXT}),
    Template.MEMO: frozenset({_B.PROMPT, _B.WEB, _B.YT, _B.MEMO, _B.TEXT}),
    Template.EXCEL: frozenset({_B.PROMPT, _B.TABLE, _B.WEB, _B.YT, _B.EXCEL, _B.TEXT}),
    Template.APP: frozenset({_B.PROMPT, _B.APP, _B.TEXT}),
    Template.LANDING_PAGE: frozenset({_B.PROMPT, _B.WEB, _B.IMAGE, _B.YT, _B.LANDING_PAGE, _B.TEXT}),
}

# Uploads become blocks by kind (the contract's file rules).
IMAGE_EXTENSIONS = frozenset({"png", "jpg", "jpeg", "gif", "webp", "svg"})
DOCUMENT_EXTENSIONS = frozenset({"pdf", "docx", "xlsx", "csv", "txt", "md", "yaml", "yml", "json", "zip"})
