"""The Writer: the answer to the prompt, synthesized from what the other blocks produced, citing their sources
by number and ending with the numbered list of them.

The duties are what the text-block and prompt-block ask of their model (blocks/text.py, blocks/prompt.py).
`final_output` is what Finalize Run reports: the Writer's answer when it completed, otherwise a summary of the
blocks that finished, built without a model call (no cost, and nothing to fail at the last step).
"""

from __future__ import annotations

import re

from canvas_core.agents.material import number_sources, sources_list
from canvas_core.models.catalog import BlockType
from canvas_core.models.items import EdgeItem, NodeItem
from canvas_core.providers.offline import NOTICE

WRITER_DUTY = (
    "Write the answer from the material below. Cite it with the numbers of its sources in square brackets, "
    "e.g. [1] or [2][3], right after the claims they support; use only the numbers listed under Sources. Do not "
    "write a list of sources (it is added for you). Where the material does not cover something the request "
    "asks, say so rather than inventing it."
)
ANALYST_DUTY = (
    "Work on your task from the material below, when there is some. Cite the material with the numbers of its "
    "sources in square brackets, e.g. [1], right after the claims they support; mark what you infer beyond it."
)


def final_output(completed: list[NodeItem], edges: list[EdgeItem], file_names: list[str] | None = None) -> str:
    """The run's answer: the Writer's, else the outputs of the finished blocks nothing finished builds on; then
    the names of the files the run made (`file_names`, else the blocks' own)."""
    answer = _writer_answer(completed)
    text = (answer.content or "") if answer is not None else _summary(_frontier(completed, edges))
    files = file_names if file_names is not None else [a.name for n in completed for a in n.artifacts]
    if files:
        text = f"{text}\n\nFiles: {', '.join(files)}".strip()
    return text


def _writer_answer(completed: list[NodeItem]) -> NodeItem | None:
    writers = [n for n in completed if n.type == BlockType.TEXT.value and (n.content or "").strip()]
    return max(writers, key=lambda n: n.position) if writers else None


def _frontier(completed: list[NodeItem], edges: list[EdgeItem]) -> list[NodeItem]:
    done = {n.block_id for n in completed}
    built_on = {e.source_id for e in edges if e.target_id in done}
    return [n for n in completed if n.block_id not in built_on and (n.content or "").strip()]


def _summary(nodes: list[NodeItem]) -> str:
    if not nodes:
        return ""
    if len(nodes) == 1 and not nodes[0].sources:
        return (nodes[0].content or "").strip()
    sources, sections = number_sources(nodes)
    body = sections[0].content if len(nodes) == 1 else "\n\n".join(f"{s.name}:\n{s.content}" for s in sections)
    body = _notice_once(body)
    return f"{body}\n\n{sources_list(sources)}".strip() if sources else body


def _notice_once(text: str) -> str:
    """The offline provider's notice once, first, however many of the gathered outputs carry it."""
    if text.count(NOTICE) < 2:
        return text
    return f"{NOTICE}\n\n" + re.sub(r"\n{3,}", "\n\n", text.replace(NOTICE + "\n", "").replace(NOTICE, "")).strip()
