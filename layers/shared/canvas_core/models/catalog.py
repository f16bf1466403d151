"""The vocabulary of the contract: templates, the 17 block types, statuses, and which blocks a template allows."""

from __future__ import annotations

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

_B = BlockType
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
