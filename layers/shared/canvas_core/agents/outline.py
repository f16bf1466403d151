"""The skeleton of a deliverable, read from the request: its parts (its bulleted or numbered lines, else the
prompt's subtasks, else the items it names however it lists them: "on running costs, installation and
emissions", "budget: venue, catering, music, flowers", "including solar, wind as well as hydro"), how many
slides or sections it asks for ("five slides"), what it compares ("heat pumps and gas boilers"), whom a memo
is for and from ("to the harbour team", "from the CFO"), and a title that is a whole phrase of the request,
never the prompt cut short (`title_for`, `shorten`).

The Planner writes the outline into the deliverable's instructions (`outline_text` in prompt_format.py); the
deliverable block reads it back (`outline_in`), asks its writer for one section, slide or row group per item,
and fills in any the writer left out. The offline provider writes one `## ` section per item from the material
(providers/offline.py), so without a model a deliverable is still the scaffold the request asked for.
The words for each kind of deliverable come from agents/deliverables.py; otherwise standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from canvas_core.agents.deliverables import DELIVERABLE_NOUNS, ENDS_PHRASE
from canvas_core.prompt_format import GENERIC_PARTS
from canvas_core.sentences import first_sentence

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
    r"items|sections|topics|criteria|like|such as|offering|featuring|containing|listing|namely)[:\s]+|:\s*|"
    r"\s[-\u2013\u2014]\s+",
    re.IGNORECASE,
)
# The words that join a list's last item: "and", "or", "&", "as well as", "plus".
_JOIN = r"(?:and|or|&|as\s+well\s+as|plus)"
_LIST = re.compile(
    rf"(?P<items>{_ITEM}(?:\s*,\s*{_ITEM})*\s*,?\s+{_JOIN}\s+{_ITEM})"
    rf"(?=\s*(?:[.;:!?()\n]|$|\s(?:for|in|to|at|from|with|so|that|which|using|on|by)\b))",
    re.IGNORECASE,
)
# A list with commas alone ("travel, lodging, meals, activities"), read where a lead or a colon opens it and the
# sentence ends with it.
_COMMA_LIST = re.compile(rf"(?P<items>{_ITEM}(?:\s*[,;]\s*{_ITEM})+)(?=\s*(?:[.;!?\n]|$))", re.IGNORECASE)
_SPLIT_ITEMS = re.compile(rf"\s*[,;]\s*(?:{_JOIN}\s+)?|\s+{_JOIN}\s+", re.IGNORECASE)
# A line of a bulleted or numbered list.
_LIST_LINE = re.compile(r"^\s*(?:[-*+\u2022\u2013]|\(?\d{1,2}[.)]|[a-z][.)])\s+(?P<item>\S.*?)\s*$", re.IGNORECASE)
# Words a title never ends on: prepositions, articles, conjunctions, determiners, and the participles that open a
# modifying clause ("based on", "aimed at").
_FUNCTION_WORDS_TEXT = (
    "a an the and or but nor so yet as if than that which who whom whose while where when whether because about "
    "above across after against along among around at before behind below beneath beside between beyond by "
    "concerning covering despite during except for from in including inside into like near of off on onto over "
    "past per plus regarding since through throughout till to toward towards under until upon via with within "
    "without versus vs our your their my its his her this these those some any each every based aimed focused "
    "targeted designed intended using such also then"
)
FUNCTION_WORDS = frozenset(_FUNCTION_WORDS_TEXT.split())
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
# What a request asks to be made, which a title leaves out: one or several kinds of deliverable ("a report, a
# slide deck and a web app"), each with what describes it ("a short", "the quarterly business"), then the word
# that leads to the subject ("on", "for", "from").
_KIND_NOUNS = (
    "|".join(DELIVERABLE_NOUNS.values()) + r"|summary|overview|chart(?: image)?|images?|tables?|tracker|sheet|page"
)
_ONE_KIND = (
    r"(?:(?:a|an|the|me a|us a|me an|some|short|brief|one-page|simple|quick|new|single-file|\d+|"
    + "|".join(_NUMBERS)
    + rf")[\s-]+)*(?:\w+[\s-])?(?:{_KIND_NOUNS})\b(?:\s+of\s+\S+\s+slides?)?{ENDS_PHRASE}"
)
_KIND_JOIN = r"(?:\s*,\s*(?:(?:and|or)\s+)?|\s+(?:and|or|&|plus|as well as)\s+)(?:also\s+)?"
_KIND = re.compile(
    rf"^{_ONE_KIND}(?:{_KIND_JOIN}{_ONE_KIND})*\s*(?:(?:on|about|of|for|covering|that|which|from|based on)\b\s*)?",
    re.IGNORECASE,
)
# Another deliverable named after the subject ("remote work and a slide deck for the board"): not the subject.
_MORE_KINDS = re.compile(
    rf"(?:\s*,)?\s+(?:and|or|&|plus|as well as|along with)\s+(?:also\s+)?(?:a|an|one|two|three|some|another)\s+"
    rf"(?:[\w'-]+\s+){{0,2}}?(?:{_KIND_NOUNS})\b{ENDS_PHRASE}.*$",
    re.IGNORECASE,
)
# Words that join the request to what came before it ("And a deck for ...", "Also, write ...").
_JOINING = re.compile(r"^(?:and|or|but|also|then|plus|so|as well as)\b[\s,]*", re.IGNORECASE)
# The upload a request is made from is not its subject: "from the attached sales data" is on "sales data".
_ATTACHED = re.compile(
    r"^(?:(?:the|this|these|those)\s+)?(?:attached|uploaded|enclosed|provided)\s+(?=\w)", re.IGNORECASE
)
_DETERMINERS = re.compile(r"^(?:(?:a|an|the|me|us|some)\s+)+", re.IGNORECASE)


@dataclass(frozen=True)
class Outline:
    items: tuple[str, ...] = ()
    count: int | None = None  # slides (or parts) asked for, when the request says how many
    subjects: tuple[str, ...] = ()  # what is compared
    audience: str | None = None  # whom a memo is for
    sender: str | None = None  # whom a memo is from

    def __bool__(self) -> bool:
        return bool(self.items or self.count)


def read_request(prompt: str, subtasks: list[str] | None = None) -> Outline:
    """The outline a request asks for: its subtasks (when it has several), else the items it names."""
    text = " ".join((prompt or "").split())
    subjects = _subjects(text)
    lines = _listed_lines(prompt or "")
    if len(lines) >= 2:
        items = lines
    elif subtasks and len(subtasks) > 1:
        items = [_heading(s) for s in subtasks]
    else:
        items = _named_items(text, subjects)
    if not items and len(subjects) >= 2:
        items = [_label(s) for s in subjects]
    count = _count(text)
    audience, sender = _addressees(text)
    return Outline(
        items=tuple(dict.fromkeys(i for i in items if i))[:MAX_ITEMS],
        count=count,
        subjects=tuple(_label(s) for s in subjects),
        audience=audience,
        sender=sender,
    )


def _listed_lines(prompt: str) -> list[str]:
    """The items of a bulleted or numbered list in the prompt, each as a heading."""
    return [_heading(m["item"].rstrip(" .;,")) for line in prompt.splitlines() if (m := _LIST_LINE.match(line))]


_MEMO = r"\b(?:memo(?:randum)?|note|briefing|email|e-mail|letter)\b"
# A party: up to six words ("the head of sales"); each word one way only, so a failed match cannot backtrack
# through the ways of splitting a long text into parties.
_PARTY = r"[\w&'.-]+(?:\s+[\w&'.-]+){0,5}?"
# Several parties: "the team, the managers and the directors" (at most eight).
_PARTIES = rf"{_PARTY}(?:\s*,\s*{_PARTY}){{0,7}}(?:\s*,?\s+(?:and|&)\s+{_PARTY})?"
# The participles that open what a memo does for its audience ("to all staff announcing the new policy").
_MEMO_VERBS = (
    r"(?:explaining|summari[sz]ing|outlining|asking|requesting|recommending|proposing|urging|announcing|informing|"
    r"notifying|introducing|describing|detailing|updating|confirming|reminding|inviting|welcoming|thanking|"
    r"presenting|sharing|covering|including|regarding|concerning|setting out|seeking)"
)
_PARTY_END = (
    rf"(?=\s+(?:about|on|regarding|re|that|with|{_MEMO_VERBS}|to\s+(?!the\b)\w+|from|to|for)\b|\s*[,.;:!?]|\s*$)"
)
_MEMO_TO = re.compile(rf"{_MEMO}[^.;:\n]{{0,40}}?\b(?:to|for)\s+(?P<to>{_PARTIES}){_PARTY_END}", re.IGNORECASE)
_MEMO_FROM = re.compile(
    rf"{_MEMO}(?:\s+(?:to|for)\s+{_PARTIES})?\s+from\s+(?P<sender>{_PARTY}){_PARTY_END}", re.IGNORECASE
)


def _addressees(text: str) -> tuple[str | None, str | None]:
    """Whom a memo is for and whom it is from, when the request names them ("a memo to the board from the CFO")."""
    to = _MEMO_TO.search(text) or _TO.search(text)
    sender = _MEMO_FROM.search(text)
    audience = _label(to["to"]) if to and not _NOT_A_PARTY.match(to["to"]) else None
    return audience, _label(sender["sender"]) if sender and not _NOT_A_PARTY.match(sender["sender"]) else None


# What follows "for" or "to" after "memo" without being a party: "a memo for approving", "a memo to explain".
_NOT_A_PARTY = re.compile(
    r"^(?:the\s+)?(?:approv\w*|explain\w*|decid\w*|summari\w*|outlin\w*|propos\w*|recommend\w*|request\w*|"
    r"ask\w*|inform\w*|announc\w*|confirm\w*|update|review\w*)\b",
    re.IGNORECASE,
)


def _lists(text: str) -> list[tuple[int, int, list[str]]]:
    """The lists the text names: (where its lead starts, where it ends, its items)."""
    found = []
    for lead in _LEADS.finditer(text):
        match = _LIST.match(text, lead.end()) or _COMMA_LIST.match(text, lead.end())
        if match is None:
            continue
        parts = [_trim(p) for p in _SPLIT_ITEMS.split(match["items"]) if p.strip()]
        if len(parts) >= 2 and all(parts) and not any(_not_an_item(p) for p in parts):
            found.append((lead.start(), match.end(), parts))
    return found


def _named_items(text: str, subjects: list[str]) -> list[str]:
    found: list[list[str]] = []
    for _, _, parts in _lists(text):
        if {p.lower() for p in parts} != {s.lower() for s in subjects}:
            found.append(parts)
    # The longest list named, e.g. the criteria rather than the two things compared; of two as long, the one with
    # the shorter items ("offering classes, sessions and retreats" rather than "for a studio offering classes, ...").
    best = max(found, key=lambda parts: (len(parts), -sum(len(p) for p in parts)), default=[])
    return [_label(p) for p in best]


def _not_an_item(part: str) -> bool:
    """Whether a part is a request or a pronoun rather than an item; a lone "design" or "build" is an item."""
    if part.lower() in ("design", "build", "draft", "design work"):
        return False
    return bool(_NOT_AN_ITEM.search(part))


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
    """Text within `limit` characters as a whole phrase: cut where a clause ends (a semicolon, a colon, a dash, a
    comma outside a list) rather than mid-phrase; else before a word that opens a modifier ("that", "with",
    "for", ...), never inside a range ("January to April"); past any of those, at the last whole word. Never
    ending on a preposition, an article or a conjunction."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return whole_phrase(text)
    # A list is kept whole or left out: a cut inside it would drop items, so the cut goes before its lead instead.
    listed = [(lead, end) for lead, end, _ in _lists(text)]
    clauses = [
        m.start()
        for m in re.finditer(r"\s*(?:[;:(\u2013\u2014]|\s-\s|,)", text)
        if 12 <= m.start() <= limit and not any(a < m.start() < b for a, b in listed)
    ]
    clauses += [a for a, b in listed if 12 <= a <= limit < b and not any(c < a < d for c, d in listed)]
    clauses.sort()
    if clauses:
        return whole_phrase(text[: clauses[-1]])
    modifiers = [
        m.start()
        for m in re.finditer(
            r"\s(?:that|which|who|where|with|without|for|about|on|in|by|from|at|based|aimed|using|so|because|while)\s",
            text,
        )
        if 20 <= m.start() <= limit
    ]
    if modifiers:
        return whole_phrase(text[: modifiers[-1]])
    words = text[: limit + 1].rsplit(" ", 1)[0] if " " in text[: limit + 1] else text[:limit]
    return whole_phrase(words)


def whole_phrase(text: str) -> str:
    """The text without trailing punctuation or trailing function words ("...covering", "...and the")."""
    words = text.strip(" ,;:-\u2013\u2014(").split()
    while len(words) > 1 and words[-1].lower().strip(".,;:") in FUNCTION_WORDS:
        words.pop()
    return " ".join(words).rstrip(" ,;:-(")


def title_for(prompt: str, limit: int = 80) -> str:
    """A title from the request: "Make slides on our quarterly sales" -> "Our quarterly sales"; "Write a report
    comparing heat pumps and gas boilers on running costs, installation and emissions" -> "Heat pumps versus gas
    boilers: running costs, installation and emissions". The first sentence without the request's verb, the kind
    of deliverable and a memo's addressees, cut where a clause ends when it is long (`shorten`): a whole phrase of
    at most `limit` characters, never ending on a function word."""
    lines = [line.strip() for line in (prompt or "").strip().splitlines() if line.strip()]
    line = lines[0] if lines else ""
    first = first_sentence(line)
    if ":" not in first.split(";")[0]:
        first = first.split(";")[0]  # "a; b" is two requests, unless a colon opened a list ("Slides: a; b; c")
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
        return shorten(title, limit)
    request = _SECOND_REQUEST.sub("", _LEAD.sub("", _JOINING.sub("", first, count=1), count=1))
    kind = _KIND.match(request)
    rest = _MORE_KINDS.sub("", request[kind.end() :] if kind else request)
    if kind and re.search(r"\b(?:for|to)\s*$", kind.group(0), re.IGNORECASE):
        # "a presentation for investors about our fundraising": the subject, not the audience
        rest = re.sub(rf"^{_PARTY}\s+(?:about|on|regarding|re)\s+", "", rest, count=1, flags=re.IGNORECASE)
    # "a memo to the harbour team about spring tides", "...for the board from the CFO about the results",
    # "...to the board asking them to approve the office": the subject, not the addressees
    rest = (
        re.sub(
            rf"^(?:(?:to|for)\s+)?{_PARTIES}(?:\s+from\s+{_PARTY})?\s+(?:about|on|regarding|re)\s+",
            "",
            rest,
            flags=re.IGNORECASE,
        )
        if re.search(_MEMO, first, re.IGNORECASE)
        else rest
    )
    rest = re.sub(
        rf"^(?:to|for)\s+[^,.;:]{{3,60}}?\s+(?:{_MEMO_VERBS}|suggesting)\s+(?:(?:them|him|her|us|it)\s+)?(?:to\s+)?"
        r"(?:that\s+(?:we|they|you|i|he|she|it)\s+(?:should\s+|must\s+)?)?",
        "",
        rest,
        flags=re.IGNORECASE,
    )
    rest = re.sub(r"^(?:to|for)\s+[^,.;:]{3,60}?\s+(?:about|on|regarding|re)\s+", "", rest, flags=re.IGNORECASE)
    rest = re.sub(r"^(?:to|for|on|about|of|a|an|the)\s+", "", _JOINING.sub("", rest), flags=re.IGNORECASE).strip()
    rest = _ATTACHED.sub("", rest)
    # "a deck with 10 slides on onboarding", "a spreadsheet with columns for ...": what it is on, or holds
    rest = re.sub(rf"^with\s+(?:(?:\d{{1,2}}|{'|'.join(_NUMBERS)})\s+\w+\s+(?:on|about|of|for|covering)\s+)?", "", rest)
    if len(rest.rstrip("?")) < 3:
        # "Write a report on:" and then its list: the items are the subject
        items = _listed_lines(prompt or "")
        items = [*items[:1], *(i if i[1:2].isupper() else i[:1].lower() + i[1:] for i in items[1:])]
        listed = ", ".join(items[:-1]) + f" and {items[-1]}" if len(items) > 1 else ""
        # "Prepare the quarterly business review": the deliverable named is the subject
        named = _DETERMINERS.sub("", kind.group(0)).strip() if kind else ""
        alone = bool(named) and re.fullmatch(_ONE_KIND, named, re.IGNORECASE) is not None
        rest = listed if 3 <= len(listed) <= limit else named if alone and len(named) >= 3 else first
    title = shorten(rest, limit)
    return title[:1].upper() + title[1:] if re.search(r"\w", title) else "Untitled"


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
