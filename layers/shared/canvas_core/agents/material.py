"""Material for a model call, with numbered sources.

A block's `content` cites its own `sources` as [1], [2], ... in their order. When a block reads others, their
sources are numbered again for it (duplicates merged) and the citations in their content are renumbered to
match, so every [n] in any block's output points at that block's n-th source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from canvas_core.models.items import NodeItem, Source
from canvas_core.prompt_format import ANSWER_SOURCES_MARK, CITATION, LEGEND_MARK, MATERIAL_MARK

SOURCES_HEADING = re.compile(r"^\s*(?:#{1,6}\s*|\*\*)?sources:?(?:\*\*)?:?\s*$", re.IGNORECASE)
SOURCE_LINE = re.compile(r"^\s*(?:\[\d{1,3}\]|\d{1,3}\.)\s+\S")
# What makes two sources one: how it is known (url, file or title), that value, and its page or snippet.
SourceKey = tuple[str, str, int | str | None]


@dataclass
class Section:
    name: str
    content: str
    refs: list[int] = field(default_factory=list)  # the numbers of the sources this section carries


def number_sources(inputs: list[NodeItem]) -> tuple[list[Source], list[Section]]:
    """The inputs' sources numbered once each, and their contents with citations renumbered to match."""
    sources: list[Source] = []
    numbers: dict[SourceKey, int] = {}
    sections: list[Section] = []
    for node in inputs:
        local: dict[int, int] = {}
        for i, source in enumerate(node.sources, start=1):
            key = source_key(source)
            if key not in numbers:
                sources.append(source)
                numbers[key] = len(sources)
            local[i] = numbers[key]
        content = renumber(strip_sources_section(node.content or ""), local)
        sections.append(Section(name=node.name, content=content, refs=sorted(set(local.values()))))
    return sources, sections


def source_key(source: Source) -> SourceKey:
    if source.url:
        return ("url", source.url.rstrip("/"), source.page)
    if source.file_name:
        return ("file", source.file_name, source.page)
    return ("title", source.title or "", source.snippet or "")


def renumber(text: str, mapping: dict[int, int]) -> str:
    if not mapping:
        return text
    return CITATION.sub(lambda m: f"[{mapping.get(int(m.group(1)), int(m.group(1)))}]", text)


def strip_sources_section(text: str) -> str:
    """A text without the trailing list of sources a Writer appends (the sources travel in `sources`)."""
    lines = text.rstrip().splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if SOURCES_HEADING.match(lines[i]):
            tail = [line for line in lines[i + 1 :] if line.strip()]
            if all(SOURCE_LINE.match(line) for line in tail):
                return "\n".join(lines[:i]).rstrip()
            break
    return text.strip()


def format_material(sections: list[Section], sources: list[Source]) -> str:
    """The inputs as the text a model reads: a heading per input (with the numbers of its sources), then the
    legend of sources. `compose` puts it after the task."""
    blocks = []
    for section in sections:
        marks = " ".join(f"[{n}]" for n in section.refs)
        heading = f"## {section.name}" + (f" (sources {marks})" if marks else "")
        blocks.append(f"{heading}\n{nest_headings(section.content)}".strip())
    material = "\n\n".join(blocks)
    if sources:
        material += LEGEND_MARK + "\n".join(f"[{n}] {describe(s)}" for n, s in enumerate(sources, start=1))
    return material


def nest_headings(content: str) -> str:
    """An input's own `#` and `##` headings as `###`, so they sit under the input's `## name` in the material."""
    return re.sub(r"^#{1,2}(?=\s)", "###", content, flags=re.MULTILINE)


def compose(task: str, sections: list[Section], sources: list[Source]) -> str:
    """A model prompt: the task, then the material (the offline provider reads the same layout)."""
    material = format_material(sections, sources) if sections else ""
    return f"{task}{MATERIAL_MARK}{material}" if material.strip() else task


def describe(source: Source) -> str:
    label = source.title or source.file_name or source.url or "Untitled source"
    parts = [label]
    if source.file_name and source.file_name != label:
        parts.append(f"({source.file_name})")
    if source.page is not None:
        parts[-1] += f", page {source.page}"
    if source.url and source.url != label:
        parts.append(f"- {source.url}")
    return " ".join(parts)


def sources_list(sources: list[Source]) -> str:
    """The numbered list of sources an answer ends with."""
    if not sources:
        return ""
    heading = ANSWER_SOURCES_MARK.lstrip("\n")
    return heading + "\n".join(f"[{n}] {describe(s)}" for n, s in enumerate(sources, start=1))
