"""The offline provider: deterministic, no network. It writes extractively from the material a run has
gathered (the sentences that bear most on the task, in their order, with the numbers of their sources) and
says plainly, in its model id and in its text, that no language model was called. It does not plan: the
planner plans by rules when the provider is offline."""

from __future__ import annotations

import re

from canvas_core.agents.material import CITATION, LEGEND_MARK, MATERIAL_MARK
from canvas_core.providers.base import Completion

MODEL_ID = "offline/extractive-v1"
NOTICE = "Offline answer: no language model was called (this deployment uses the deterministic offline provider)."
NO_MATERIAL = "No material was provided beyond the prompt itself."
KEY_POINTS = "Key points from the material:"
MAX_POINTS = {"writer": 10}
DEFAULT_MAX_POINTS = 8
# Lines of earlier offline answers that are scaffolding, not material.
SCAFFOLDING = re.compile(
    r"^(offline answer:|task:|question:|key points from the material:|no material was provided|sources$)",
    re.IGNORECASE,
)
TABLE_ASKED = re.compile(r"\bmarkdown table\b", re.IGNORECASE)
LIST_ASKED = re.compile(r"\bmarkdown list\b", re.IGNORECASE)
# Words too common to say what a sentence is about.
STOPWORDS = frozenset(
    re.findall(
        r"[a-z]+",
        "about above after again against also among and any are because been before being below between both but "
        "can could did does doing down during each few for from further had has have having her here hers him his "
        "how into its itself just more most not now off once only other our out over own same she should some "
        "such than that the their them then there these they this those through too under until very was were "
        "what when where which while who whom why will with would you your write answer short please give make "
        "tell explain describe",
    )
)


class OfflineProvider:
    name = "offline"

    def complete(self, *, system: str, prompt: str, role: str) -> Completion:
        task, _, material = prompt.partition(MATERIAL_MARK)
        material = material.split(LEGEND_MARK)[0]
        lead = _first_paragraph(task)
        label = "" if re.match(r"^(question|task):", lead, re.IGNORECASE) else "Task: "
        lines = [NOTICE, "", f"{label}{lead}"]
        points = _key_points(task, material, MAX_POINTS.get(role, DEFAULT_MAX_POINTS))
        wants_table, wants_list = bool(TABLE_ASKED.search(task)), bool(LIST_ASKED.search(task))
        if not points and (wants_table or wants_list):
            # A block that needs a table or a list gets the request's own parts, said to be just that.
            lines += ["", f"{NO_MATERIAL} The items below restate the request."]
            points = _request_parts(task)
        elif not points:
            lines += ["", NO_MATERIAL]
        if points and wants_table:
            lines += ["", "| # | Point |", "|---|---|"]
            lines += [f"| {i} | {p.replace('|', '/')} |" for i, p in enumerate(points, start=1)]
        elif points:
            lines += ["", KEY_POINTS, *(f"- {p}" for p in points)]
        text = "\n".join(lines)
        return Completion(
            text=text, model_id=MODEL_ID, input_tokens=_tokens(system + prompt), output_tokens=_tokens(text)
        )


def _request_parts(task: str) -> list[str]:
    lead = re.sub(r"^(question|task):\s*", "", _first_paragraph(task), flags=re.IGNORECASE)
    parts = [p.strip() for p in re.split(r"(?<=[.!?])\s+", lead) if len(p.strip()) > 3]
    return parts or [lead]


def _first_paragraph(text: str) -> str:
    return " ".join(text.strip().split("\n\n")[0].split())


def _key_points(task: str, material: str, limit: int) -> list[str]:
    """The sentences of the material that share most words with the task, in the material's order."""
    found = _sentences(material)
    keywords = _stems(task)
    scored = sorted(
        range(len(found)), key=lambda i: (-len(keywords & _stems(found[i])), i)
    )  # best first; ties keep their order
    chosen = sorted(scored[:limit])
    return [found[i] for i in chosen]


def _sentences(material: str) -> list[str]:
    """Sentences of each section, in order. A section that cites nothing itself and has one source (a file, a
    page) gives each of its sentences that source's number; a section that cites keeps its own citations."""
    found: list[str] = []
    seen: set[str] = set()
    for heading, body in _sections(material):
        refs = CITATION.findall(heading)
        mark = f" [{refs[0]}]" if len(refs) == 1 and not CITATION.search(body) else ""
        for line in body.splitlines():
            if line.lstrip().startswith("#"):
                continue  # a title, not a statement
            line = line.strip(" \t-*>")
            if not line or SCAFFOLDING.match(line) or re.match(r"^\[\d+\]\s", line):
                continue
            for raw in re.split(r"(?<=[.!?])\s+(?!\[\d)", line):
                sentence = raw.strip()
                key = re.sub(r"\s+([.!?,;:])", r"\1", CITATION.sub("", sentence)).strip().lower()
                if len(key) < 20 or key in seen:
                    continue
                seen.add(key)
                if len(sentence) > 300:
                    sentence = sentence[:297].rstrip() + "..."
                found.append(_cite(sentence, mark))
    return found


def _sections(material: str) -> list[tuple[str, str]]:
    """(heading, body) of each `## ` section; text before the first heading is a section without one."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    for line in material.splitlines():
        if line.startswith("## "):
            sections.append((line, []))
        else:
            sections[-1][1].append(line)
    return [(heading, "\n".join(lines)) for heading, lines in sections]


def _cite(sentence: str, mark: str) -> str:
    if not mark or CITATION.search(sentence):
        return sentence
    match = re.search(r"[.!?]+$", sentence)
    return sentence[: match.start()] + mark + match.group(0) if match else sentence + mark


def _stems(text: str) -> set[str]:
    return {w[:5] for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) >= 3 and w not in STOPWORDS}


def _tokens(text: str) -> int:
    # About four characters a token, the usual rule of thumb for English.
    return max(1, len(text) // 4)
