"""The skeleton of a deliverable, read from the request: its parts (the prompt's subtasks, else the items it
names: "on running costs, installation and emissions", "for venue, catering, music and flowers"), how many
slides or sections it asks for ("five slides"), what it compares ("heat pumps and gas boilers"), whom a memo
is for ("to the harbour team"), and a title that is not the prompt cut short.

The Planner writes the outline into the deliverable's instructions (`outline_text` in prompt_format.py); the
deliverable block reads it back (`outline_in`), asks its writer for one section, slide or row group per item,
and fills in any the writer left out. The offline provider writes one `## ` section per item from the material
(providers/offline.py), so without a model a deliverable is still the scaffold the request asked for.
Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from canvas_core.prompt_format import GENERIC_PARTS

MAX_ITEMS = 12
MAX_COUNT = 40

_NUMBERS = {
    w: n
    for n, w in enumerate(
        re.findall(
            r"\w+",
            "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
            "seventeen eighteen nineteen twenty",
        )
    )
}
_COUNT = re.compile(
    r"\b(\d{1,2}|" + "|".join(_NUMBERS) + r")[- ](?:\w+[- ])?(slides?|sections?|parts?|pages?)\b", re.IGNORECASE
)
_DECK_COUNT = re.compile(r"\b(\d{1,2}|" + "|".join(_NUMBERS) + r")[- ]slide\b", re.IGNORECASE)
# An item: up to six words, none of them a verb of making (so "a report on X and write a memo" names no items).
_WORD = r"[\w'\u2019&/.$€£%+-]+"
_ITEM = rf"{_WORD}(?:\s+{_WORD}){{0,5}}?"
_LEADS = re.compile(
    r"\b(?:on|for|of|covering|about|across|including|includes?|by|between|with|into|per|covers?|categories|compar\w+|"
    r"items|sections|topics|criteria|like|such as)[:\s]+",
    re.IGNORECASE,
)
_LIST = re.compile(
    rf"(?P<items>{_ITEM}(?:\s*,\s*{_ITEM})*\s*,?\s+(?:and|or|&)\s+{_ITEM})"
    rf"(?=\s*(?:[.;:!?()\n]|$|\s(?:for|in|to|at|from|with|so|that|which|using|on|by)\b))",
    re.IGNORECASE,
)
_COMPARE = re.compile(
    rf"\b(?:compar\w*|contrast\w*)\s+(?P<a>{_ITEM})\s+(?:and|with|to|versus|vs\.?)\s+(?P<b>{_ITEM})"
    rf"(?=\s*(?:[.;:!?,\n]|$|\s(?:on|for|in|by|across|regarding|over|at)\b))",
    re.IGNORECASE,
)
_VERSUS = re.compile(rf"\b(?P<a>{_WORD}(?:\s+{_WORD}){{0,3}})\s+(?:vs\.?|versus)\s+(?P<b>{_ITEM})\b", re.IGNORECASE)
_NOT_AN_ITEM = re.compile(
    r"\b(write|create|make|draft|produce|prepare|build|generate|design|compile|turn|give|put|send|it|them|this|"
    r"that|me|us|please|slides?|deck|report|memo|spreadsheet|workbook|page|app|vs|versus|on|for|about|covering|"
    r"across|including|between)\b",
    re.IGNORECASE,
)
_TO = re.compile(
    r"\b(?:memo|memorandum|note|briefing|email|letter)\s+(?:to|for)\s+(?P<to>[^,.;:\n]{3,60}?)\s+"
    r"(?:about|on|regarding|re|explaining|summari[sz]ing|outlining|that|with)\b",
    re.IGNORECASE,
)
_LEAD = re.compile(
    r"^(?:please\s+)?(?:(?:can|could|would) you\s+)?(?:write|create|make|draft|produce|prepare|build|generate|design|"
    r"compile|put together|give me|turn|do|need|i need|we need|tell me about|tell me|summari[sz]e|explain|describe|"
    r"analy[sz]e|research|review|outline|show me|show|plan|list)\b\s*",
    re.IGNORECASE,
)
# A second request in the same sentence ("a report on X and write a memo on it") is not part of the title.
_SECOND_REQUEST = re.compile(
    r"\s*(?:,|\band\b|\bthen\b)\s+(?:also\s+)?(?:write|create|make|draft|produce|prepare|build|generate|design|"
    r"compile|turn|give|put|send)\b.*$",
    re.IGNORECASE,
)
_KIND = re.compile(
    r"^(?:(?:a|an|the|me a|us a|me an|some|short|brief|one-page|simple|quick|new|single-file|\d+|"
    + "|".join(_NUMBERS)
    + r")[\s-]+)*(?:(?:\w+[\s-])?(?:report|white ?paper|memo(?:randum)?|briefing note|slides?|slide deck|deck|"
    r"presentation|spreadsheet|workbook|excel(?: file| sheet)?|sheet|web app|app|dashboard|tracker|landing[- ]page|"
    r"homepage|page|prototype|document|write-?up|summary|overview|chart(?: image)?|image|table))\b(?:\s+of\s+\S+\s+"
    r"slides?)?\s*(?:(?:on|about|of|for|covering|that|which)\b\s*)?",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Outline:
    items: tuple[str, ...] = ()
    count: int | None = None  # slides (or parts) asked for, when the request says how many
    subjects: tuple[str, ...] = ()  # what is compared
    audience: str | None = None  # whom a memo is for

    def __bool__(self) -> bool:
        return bool(self.items or self.count)


def read_request(prompt: str, subtasks: list[str] | None = None) -> Outline:
    """The outline a request asks for: its subtasks (when it has several), else the items it names."""
    text = " ".join((prompt or "").split())
    subjects = _subjects(text)
    items = [_heading(s) for s in subtasks] if subtasks and len(subtasks) > 1 else _named_items(text, subjects)
    if not items and len(subjects) >= 2:
        items = [_label(s) for s in subjects]
    count = _count(text)
    audience = _TO.search(text)
    return Outline(
        items=tuple(dict.fromkeys(i for i in items if i))[:MAX_ITEMS],
        count=count,
        subjects=tuple(_label(s) for s in subjects),
        audience=_label(audience.group("to")) if audience else None,
    )


def _named_items(text: str, subjects: list[str]) -> list[str]:
    found: list[list[str]] = []
    for lead in _LEADS.finditer(text):
        match = _LIST.match(text, lead.end())
        if match is None:
            continue
        parts = [p.strip() for p in re.split(r"\s*,\s*(?:and\s+|or\s+|&\s+)?|\s+(?:and|or|&)\s+", match["items"])]
        parts = [_trim(p) for p in parts if p.strip()]
        named = len(parts) >= 2 and all(parts) and not any(_NOT_AN_ITEM.search(p) for p in parts)
        if named and {p.lower() for p in parts} != {s.lower() for s in subjects}:
            found.append(parts)
    # The longest list named, e.g. the criteria rather than the two things compared.
    best = max(found, key=len, default=[])
    return [_label(p) for p in best]


def _subjects(text: str) -> list[str]:
    match = _COMPARE.search(text) or _VERSUS.search(text)
    if not match:
        return []
    a, b = _trim(match["a"]), _trim(match["b"])
    return [a, b] if a and b and not (_NOT_AN_ITEM.search(a) or _NOT_AN_ITEM.search(b)) else []


def _trim(phrase: str) -> str:
    words = phrase.strip(" .,;:").split()
    while words and words[0].lower() in ("the", "a", "an", "and", "or"):
        words = words[1:]
    return " ".join(words)


def _count(text: str) -> int | None:
    match = _DECK_COUNT.search(text) or _COUNT.search(text)
    if not match:
        return None
    word = match.group(1).lower()
    number = int(word) if word.isdigit() else _NUMBERS[word]
    return number if 1 <= number <= MAX_COUNT else None


def _label(text: str) -> str:
    text = text.strip(" .,;:!?")
    # "iPhone" and "eBay" keep their case
    return text if text[1:2].isupper() else text[:1].upper() + text[1:]


def _heading(subtask: str, limit: int = 70) -> str:
    """A subtask as a section heading: without its list marker, cut at a clause when long."""
    text = _label(" ".join(subtask.split()))
    if len(text) <= limit:
        return text
    return shorten(text, limit)


def shorten(text: str, limit: int) -> str:
    """Text within `limit` characters, cut where a clause ends (a comma, 'on', 'for', ...) rather than
    mid-phrase; past any clause, at the last whole word."""
    if len(text) <= limit:
        return text
    for boundary in (r";|:| - ", r" (?:on|for|with|about|in|to|by|that|which|from|at) ", r",| and "):
        good = [m.start() for m in re.finditer(boundary, text) if 20 <= m.start() <= limit]
        if good:
            return text[: good[-1]].rstrip(" ,;:-")
    return text[:limit].rsplit(" ", 1)[0].rstrip(" ,;:-")


def title_for(prompt: str, limit: int = 80) -> str:
    """A title from the request: "Make slides on our quarterly sales" -> "Our quarterly sales"; "Write a report
    comparing heat pumps and gas boilers on running costs, installation and emissions" -> "Heat pumps versus gas
    boilers: running costs, installation and emissions". The first sentence without the request's verb and the
    kind of deliverable, cut where a clause ends when it is long; never the prompt cut mid-phrase."""
    lines = [line.strip() for line in (prompt or "").strip().splitlines() if line.strip()]
    first = re.split(r"(?<=[.!?;])\s+|;\s*", lines[0])[0] if lines else ""
    first = re.sub(r"^[#>*\-\s]+", "", first).strip().rstrip(".:;!")
    subjects = _subjects(first)
    if len(subjects) == 2:
        title = _label(f"{subjects[0]} versus {subjects[1]}")
        items = _named_items(first, subjects)
        if len(items) > 1:
            listed = ", ".join(items[:-1]) + f" and {items[-1]}"
            listed = " ".join(w if w[1:2].isupper() else w.lower() for w in listed.split(" "))
            if len(title) + len(listed) + 2 <= limit:
                title = f"{title}: {listed}"
        return title
    rest = _KIND.sub("", _SECOND_REQUEST.sub("", _LEAD.sub("", first, count=1)), count=1)
    # "a memo to the harbour team about spring tides": the subject, not the addressee
    rest = re.sub(r"^(?:to|for)\s+[^,.;:]{3,60}?\s+(?:about|on|regarding|re)\s+", "", rest, flags=re.IGNORECASE)
    rest = re.sub(r"^(?:to|for|on|about|of|a|an|the)\s+", "", rest, flags=re.IGNORECASE).strip()
    title = shorten(rest if len(rest.rstrip("?")) >= 3 else first, limit)
    return (title[:1].upper() + title[1:]) or "Untitled"


def generic_parts(count: int) -> list[str]:
    """Titles for `count` parts when the request names none: an overview first and next steps last."""
    if count <= 0:
        return []
    if count == 1:
        return ["Overview"]
    middle = [p for p in GENERIC_PARTS if p not in ("Summary", "Overview", "Next steps")]
    body = (middle * (count // len(middle) + 1))[: count - 2]
    numbered = [f"{p} ({n})" if body.count(p) > 1 else p for n, p in enumerate(body, start=1)]
    return ["Overview", *numbered, "Next steps"]
