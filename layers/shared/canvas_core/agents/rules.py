"""Rule-based planning: deterministic, no model. The offline provider plans this way, and every planner falls
back to it when a model's plans stay unusable.

The prompt is split into subtasks (its list items, or its questions, or the whole prompt), and the canvas is
built in stages, each reading the one before: gather (uploads, the pages and videos the prompt links, web
research), analyse (one prompt-block per subtask, tables, lists, a review), write (the Writer's answer) and
deliver (the template's deliverable). What each template adds is in `_wanted`; signals in the prompt (words
such as "research", "table") add blocks where the constraint allows them, and with `auto` every deliverable the
prompt asks to be made (agents/deliverables.py) is a block of its own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from canvas_core.agents.catalog import DELIVERABLE_DUTIES, DELIVERABLE_TITLES
from canvas_core.agents.checks import ANSWER_TITLE, WRITER_TASK, Constraint
from canvas_core.agents.deliverables import named_deliverables
from canvas_core.agents.outline import read_request
from canvas_core.agents.schema import PlanStep
from canvas_core.models.catalog import BlockType, Template
from canvas_core.prompt_format import outline_text

B = BlockType
# The types these rules place where they belong (the deliverables besides: DELIVERABLE_TITLES); a file-block is
# an upload's, never planned.
PLACED_BY_RULES = {B.FILE, B.WEB, B.YT, B.WEB_RESEARCH, B.DEEP_RESEARCH, B.PROMPT, B.TABLE, B.LIST, B.TEXT, B.IMAGE}
MAX_SUBTASKS = 6
MAX_RESEARCH_STEPS = 4
MAX_WEB_PAGES = 5
MAX_VIDEOS = 3

# A host (an IPv6 literal in brackets included), then anything up to white space, quotes or brackets.
URL = re.compile(r"https?://(?:\[[0-9a-z:.%]+\]|[^\s<>\"'`/()\[\]]+)[^\s<>\"'`()\[\]]*", re.IGNORECASE)
YOUTUBE = re.compile(r"^https?://(www\.|m\.)?(youtube\.com/(watch|shorts|live)|youtu\.be/)", re.IGNORECASE)
ITEM = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)]|[a-z][.)])\s+(.+)$")


def _words(*patterns: str) -> re.Pattern[str]:
    return re.compile(r"\b(" + "|".join(patterns) + r")\b", re.IGNORECASE)


RESEARCH = _words(
    "research", "latest", "current", "recent", "news", "sources?", "cite", "citations?", "evidence", "studies",
    "literature", "market", "trends?", "look up", "find out", "survey", "state of the art",
)  # fmt: skip
DEEP = _words("deep research", "in-depth", "in depth", "comprehensive", "thorough", "exhaustive", "systematic review")
TABLE = _words(
    "table", "tabular", "tabulate", "matrix", "side[- ]by[- ]side", "versus", r"vs\.?", "statistics", "figures",
    "data points", "benchmarks?",
)  # fmt: skip
LIST = _words(r"list", r"top \d+", r"\d+ (ideas|ways|tips|examples|options|steps)", "checklist", "brainstorm")
IMAGE = _words("image", "illustration", "logo", "picture", "poster", "artwork", "hero image")
RIGOUR = _words(
    "rigou?r", "rigorous", "cite", "citations?", "sources", "fact[- ]check", "verify", "accura\\w*", "evidence",
    "peer[- ]review\\w*",
)  # fmt: skip


@dataclass(frozen=True)
class Signals:
    web_urls: tuple[str, ...]
    video_urls: tuple[str, ...]
    research: bool
    deep: bool
    table: bool
    list: bool
    image: bool
    rigour: bool
    deliverables: tuple[BlockType, ...]  # every one the prompt asks to be made, in the order it names them


def read_signals(prompt: str, agent_instructions: str | None = None) -> Signals:
    # A link that does not parse as a URL (``http://[bad``) is no page to read: it is left to the prompt's text.
    urls = [u for u in dict.fromkeys(u.rstrip(".,;:!?") for u in URL.findall(prompt)) if _host(u)]
    text = URL.sub(" ", prompt)
    return Signals(
        web_urls=tuple(u for u in urls if not YOUTUBE.match(u))[:MAX_WEB_PAGES],
        video_urls=tuple(u for u in urls if YOUTUBE.match(u))[:MAX_VIDEOS],
        research=bool(RESEARCH.search(text)),
        deep=bool(DEEP.search(text)),
        table=bool(TABLE.search(text)),
        list=bool(LIST.search(text)),
        image=bool(IMAGE.search(text)),
        rigour=bool(RIGOUR.search(agent_instructions or "")),
        deliverables=named_deliverables(text),
    )


def split_subtasks(prompt: str) -> list[str]:
    """The parts of a prompt: its list items, else its questions, else the prompt itself (at most six)."""
    lines = [line.strip() for line in prompt.splitlines() if line.strip()]
    parts = [m.group(1).strip() for line in lines if (m := ITEM.match(line))]
    if len(parts) < 2:
        sentences = re.split(r"(?<=[?])\s+", " ".join(lines))
        parts = [s.strip() for s in sentences if s.strip().endswith("?") and len(s.strip()) > 3]
    if len(parts) < 2:
        return [prompt.strip()]
    if len(parts) > MAX_SUBTASKS:
        parts = [*parts[: MAX_SUBTASKS - 1], "; ".join(parts[MAX_SUBTASKS - 1 :])]
    return parts


def rule_steps(
    prompt: str, agent_instructions: str | None, constraint: Constraint, uploads: Sequence[PlanStep] = ()
) -> list[PlanStep]:
    """The steps to plan after `uploads` (the blocks made for uploaded files) for a prompt within a constraint."""
    signals = read_signals(prompt, agent_instructions)
    subtasks = split_subtasks(prompt)
    want = _wanted(constraint, signals)
    if any(u.type == B.IMAGE.value for u in uploads) and constraint.explicit:
        want.discard(B.IMAGE)  # the uploaded images are the image-blocks asked for
    plan = _Builder([u.id for u in uploads])
    template = constraint.template

    # Gather
    shared = [plan.add(B.WEB, f"Read {_short_url(u)}", f"Read {u} for what bears on: {prompt}", url=u)
              for u in signals.web_urls if B.WEB in want]  # fmt: skip
    shared += [plan.add(B.YT, f"Watch {_short_url(u)}", f"Read the transcript of {u} for: {prompt}", url=u)
               for u in signals.video_urls if B.YT in want]  # fmt: skip
    if B.WEB in constraint.explicit and not signals.web_urls:
        shared.append(plan.add(B.WEB, "Read the web", f"{prompt}\n\nFind and read the page that best answers this."))
    if B.YT in constraint.explicit and not signals.video_urls:
        shared.append(plan.add(B.YT, "Watch a video", f"{prompt}\n\nFind and read a video transcript on this."))
    research: list[str] = []
    if B.DEEP_RESEARCH in want:
        shared.append(plan.add(B.DEEP_RESEARCH, f"Deep research: {_excerpt(prompt)}", prompt))
    elif B.WEB_RESEARCH in want:
        if len(subtasks) <= MAX_RESEARCH_STEPS:
            research = [plan.add(B.WEB_RESEARCH, f"Research: {_excerpt(s)}", s) for s in subtasks]
        else:
            shared.append(plan.add(B.WEB_RESEARCH, f"Research: {_excerpt(prompt)}", prompt))

    # Analyse
    analysis: list[str] = []
    if B.PROMPT in want:
        if template == Template.APP and not constraint.explicit:
            analysis.append(
                plan.add(
                    B.PROMPT,
                    "Requirements and design",
                    f"{prompt}\n\nWork out what the app must do: its features, screens, inputs, outputs, data "
                    "and behaviour, and the edge cases it must handle.",
                    persona="Engineer",
                    inputs=plan.uploads + shared,
                )
            )
        elif template == Template.LANDING_PAGE and not constraint.explicit:
            analysis.append(
                plan.add(
                    B.PROMPT,
                    "Messaging and page copy",
                    f"{prompt}\n\nWrite the landing page's messaging: the headline, the value proposition, three "
                    "to five sections with their copy, social proof and the call to action.",
                    persona="Writer",
                    inputs=plan.uploads + shared,
                )
            )
        else:
            many = len(subtasks) > 1
            for i, subtask in enumerate(subtasks):
                reads = plan.uploads + shared + ([research[i]] if i < len(research) else [])
                duty = f"{subtask}\n\n(This is one part of the request: {prompt})" if many else subtask
                title = f"Part {i + 1}: {_excerpt(subtask)}" if many else f"Analysis: {_excerpt(subtask)}"
                analysis.append(plan.add(B.PROMPT, title, duty, inputs=reads))
    gathered = plan.uploads + shared + research
    documents = [u.id for u in uploads if u.type == B.FILE.value] + shared + research
    extras: list[str] = []
    # A table is built from material; with none (no files, pages or research) it could only restate the request.
    if B.TABLE in want and (documents or B.TABLE in constraint.explicit):
        duty = (
            f"{prompt}\n\nBuild the table the spreadsheet will hold."
            if template == Template.EXCEL
            else f"{prompt}\n\nTabulate the key facts, figures and comparisons."
        )
        title = "Spreadsheet data" if template == Template.EXCEL else "Key facts table"
        extras.append(plan.add(B.TABLE, title, duty, inputs=(gathered + analysis) or []))
    if B.LIST in want:
        extras.append(plan.add(B.LIST, "List", f"{prompt}\n\nList the items the request asks for.", inputs=gathered))
    # A type asked for by name that no rule here places (a new one) works on the request over the material.
    extras += [
        plan.add(b, b.value.removesuffix("-block").replace("-", " ").capitalize(), prompt, inputs=gathered)
        for b in constraint.explicit
        if b in want and b not in PLACED_BY_RULES and b not in DELIVERABLE_TITLES
    ]
    findings = analysis + extras
    if (template == Template.DEEP_RESEARCH or signals.rigour) and B.PROMPT in want and analysis:
        findings.append(
            plan.add(
                B.PROMPT,
                "Review the findings",
                f"{prompt}\n\nReview the team's findings: flag unsupported claims, gaps, contradictions and "
                "missing citations, and say what the final answer must fix.",
                persona="Reviewer",
                inputs=findings,
            )
        )

    # Write
    answer: list[str] = []
    if B.TEXT in want:
        reads = findings or gathered
        answer.append(plan.add(B.TEXT, ANSWER_TITLE, WRITER_TASK, inputs=reads))

    # Deliver: each deliverable reads the material itself (the uploads' tables and images, the pages, the
    # tables built) besides the answer, so the numbers reach the file as data, not as prose about them.
    upstream = answer or findings or gathered
    uploaded_images = [u.id for u in uploads if u.type == B.IMAGE.value]
    visuals: list[str] = []
    if B.IMAGE in want and not (template == Template.LANDING_PAGE and uploaded_images):
        subject = "the landing page's hero image" if template == Template.LANDING_PAGE else "the image"
        visuals.append(
            plan.add(B.IMAGE, "Hero image" if template == Template.LANDING_PAGE else "Image",
                     f"{prompt}\n\nCreate {subject}.", inputs=documents + extras + (analysis[:1] or upstream))
        )  # fmt: skip
    outline = read_request(prompt, subtasks)
    for deliverable in _deliverables(constraint, signals, want):
        reads = plan.uploads + extras + shared + research + upstream + visuals
        skeleton = outline_text(outline.items, outline.count if deliverable == B.PRESENTATION else None)
        duty = f"{prompt}\n\n{DELIVERABLE_DUTIES[deliverable]}." + (f"\n\n{skeleton}" if skeleton else "")
        plan.add(
            deliverable,
            "Research memo" if template == Template.DEEP_RESEARCH else DELIVERABLE_TITLES[deliverable],
            duty,
            inputs=list(dict.fromkeys(reads)),
        )
    return plan.steps


def _wanted(constraint: Constraint, signals: Signals) -> set[BlockType]:
    """The block kinds this plan uses: the explicit list, or the template's and the prompt's, within the allowed."""
    if constraint.explicit:
        return set(constraint.explicit)
    template = constraint.template
    want = {B.PROMPT, B.TEXT, B.WEB, B.YT}
    want |= {
        Template.DEEP_RESEARCH: {B.WEB_RESEARCH, B.MEMO},
        Template.REPORT: {B.DOCUMENT},
        Template.SLIDES: {B.PRESENTATION},
        Template.MEMO: {B.MEMO},
        Template.EXCEL: {B.TABLE, B.EXCEL},
        Template.APP: {B.APP},
        Template.LANDING_PAGE: {B.IMAGE, B.LANDING_PAGE},
    }.get(template, set())
    if signals.table:
        want.add(B.TABLE)
    if template == Template.AUTO:
        want |= set(signals.deliverables)
        if signals.research:
            want.add(B.WEB_RESEARCH)
        if signals.deep:
            want.add(B.DEEP_RESEARCH)
        if signals.list:
            want.add(B.LIST)
        if signals.image:
            want.add(B.IMAGE)
    return want & constraint.allowed


def _deliverables(constraint: Constraint, signals: Signals, want: set[BlockType]) -> list[BlockType]:
    if constraint.explicit:
        return [b for b in constraint.explicit if b in want and b in DELIVERABLE_TITLES]
    if constraint.deliverable is not None:
        return [constraint.deliverable]
    return [b for b in signals.deliverables if b in want]


class _Builder:
    def __init__(self, uploads: list[str]):
        self.steps: list[PlanStep] = []
        self.uploads = uploads

    def add(
        self,
        block_type: BlockType,
        title: str,
        instructions: str,
        *,
        inputs: list[str] | None = None,
        persona: str | None = None,
        url: str | None = None,
    ) -> str:
        step_id = f"s{len(self.steps) + 1}"
        self.steps.append(
            PlanStep(
                id=step_id,
                type=block_type.value,
                title=title,
                persona=persona,
                instructions=instructions,
                inputs=list(dict.fromkeys(inputs or [])),
                url=url,
            )
        )
        return step_id


def _excerpt(text: str, limit: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3].rstrip() + "..."


def _host(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        return None
    return parts.hostname


def _short_url(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return _excerpt(url, 50)
    return _excerpt(parts.netloc + parts.path.rstrip("/"), 50)
