"""Which files a request asks to be made: every deliverable it names as the object of a verb of making ("Make a
report, a slide deck, a spreadsheet and a web app from the sales data", "Prepare the quarterly business review",
"turn these notes into a deck and a memo"), in the order it names them. A deliverable named otherwise is not
asked for: "summarize the report I sent", "an email about the app", "how do I build a dashboard?", "prepare
for the review". The words for each kind (`DELIVERABLE_NOUNS`) also tell a title what to leave out
(`outline.title_for`)."""

from __future__ import annotations

import re

from canvas_core.models.catalog import BlockType
from canvas_core.sentences import sentences

B = BlockType

# The words a request names each deliverable by, plurals included; of two kinds that start alike, the first
# listed is tried first ("briefing note" is a memo, "briefing document" a report).
DELIVERABLE_NOUNS: dict[BlockType, str] = {
    B.LANDING_PAGE: r"landing[- ]pages?|home ?pages?|marketing pages?",
    B.PRESENTATION: r"(?:slide|pitch) ?decks?|slides?|decks?|presentations?|power ?points?|pptx",
    B.EXCEL: r"spreadsheets?|workbooks?|excel(?: files?| sheets?| workbooks?)?|xlsx",
    B.MEMO: r"memos?|memorand(?:um|a|ums)|briefing notes?",
    B.DOCUMENT: (
        r"reports?|write-?ups?|(?:word |summary |briefing )?documents?|docs?|docx|(?:white ?)?papers?|reviews?|"
        r"briefs?|qbrs?|one-pagers?|proposals?|case stud(?:y|ies)"
    ),
    B.PROTOTYPE: r"prototypes?|mock-?ups?|wireframes?|click-?throughs?",
    B.APP: r"(?:web |html |single-page |interactive )?apps?|web applications?|calculators?|dashboards?|games?",
}
# A verb of making, or of asking for something made ("I need", "we'd like").
_MAKE = re.compile(
    r"\b(?:write|create|make|draft|produce|prepare|build|generate|design|compile|turn|give (?:me|us)|put together|"
    r"(?:i|we) (?:need|want|would like)|(?:i|we)'d like)\b",
    re.IGNORECASE,
)
# A noun ends its phrase: the end, punctuation, or a word that starts what follows it ("a report on", "a deck
# and", "slides introducing", "the review I"), so "a report card" or "an app store" names no deliverable.
ENDS_PHRASE = (
    r"(?=\s*$|\s*[.,;:!?()\[\]\"'\u2013\u2014/-]|\s+&|\s+(?:and|or|plus|as|also|too|then|on|for|about|of|to|that|"
    r"which|who|where|with|without|from|based|in|at|by|into|over|per|using|covering|comparing|summari[sz]ing|"
    r"explaining|showing|including|introducing|outlining|describing|detailing|listing|presenting|highlighting|"
    r"analy[sz]ing|tracking|reviewing|proposing|recommending|evaluating|assessing|exploring|examining|"
    r"i|we|you|they|it|please|so|now|today|this|next|ready|like|first|later)\b)"
)
# What a deliverable may be made as without ceasing to be one: "a spreadsheet budget", "a report template".
_AS = (
    r"(?:\s+(?:budgets?|trackers?|models?|templates?|files?|planners?|schedules?|versions?|forecasts?|calendars?|"
    r"checklists?))?"
)
_NOUN = re.compile(
    r"\b(?:"
    + "|".join(f"(?P<{b.name}>{words})" for b, words in DELIVERABLE_NOUNS.items())
    + rf")(?!'s\b){_AS}"
    + ENDS_PHRASE,
    re.IGNORECASE,
)
# Between the verb and what it makes, only what describes the thing ("a short", "the quarterly business") or
# other things made ("a report, a deck and"): a preposition or a question word means the noun is not the object
# ("an email about the report", "prepare for the review", "a list of apps").
_NOT_THE_OBJECT = re.compile(
    r"\b(?:for|to|about|on|of|off|from|with|without|in|at|by|based|using|that|which|who|whose|whom|what|how|why|"
    r"when|where|whether|if|than|because|while|after|before|during|regarding|covering|comparing|not|no|instead|"
    r"like)\b|[?]",
    re.IGNORECASE,
)
# Another thing made, after what describes the first ("a report on remote work and a slide deck"); without an
# article only a format no topic is named by ("... and slides").
_AND = r"(?:,|;|&|\b(?:and|or|plus|as well as|along with|together with)\b)\s+(?:also\s+)?"
_AND_ANOTHER = re.compile(_AND + r"(?:a|an|one|two|three|four|five|some|another)\s+(?:[\w'-]+\s+){0,3}$", re.IGNORECASE)
_AND_BARE = re.compile(_AND + "$", re.IGNORECASE)
_BARE = re.compile(r"slides|pptx|xlsx|docx", re.IGNORECASE)
# A question asks for an answer, not a file ("How do I build a dashboard?"), unless it is a polite request.
_POLITE = re.compile(r"^\W*(?:(?:can|could|would|will)\s+(?:you|u)|please)\b", re.IGNORECASE)
# A verb of making inside a question or a condition is not a request ("tell me how to build an app").
_ASKED_ABOUT = re.compile(r"\b(?:how|why|whether|if|what|which|when|where|who|whom)\b", re.IGNORECASE)


def named_deliverables(text: str) -> tuple[BlockType, ...]:
    """The deliverables the request asks to be made, each kind once, in the order named."""
    found: list[BlockType] = []
    for line in (text or "").splitlines():
        for sentence in sentences(line):
            if sentence.endswith("?") and not _POLITE.match(sentence):
                continue
            found += _made_in(sentence)
    return tuple(dict.fromkeys(found))


def _made_in(sentence: str) -> list[BlockType]:
    made: list[BlockType] = []
    verbs = [v for v in _MAKE.finditer(sentence) if not _ASKED_ABOUT.search(_clause_before(sentence, v.start()))]
    last_end = None  # where the last deliverable made by the current verb ends
    for noun in _NOUN.finditer(sentence):
        verb = next((v for v in reversed(verbs) if v.end() <= noun.start()), None)
        if verb is None:
            continue
        if last_end is None or last_end < verb.end():
            last_end = None  # a new verb: its own objects
        gap = sentence[verb.end() : noun.start()]
        if not _NOT_THE_OBJECT.search(gap) or (
            last_end is not None and _another(sentence[last_end : noun.start()], noun.group(0))
        ):
            made.append(BlockType[noun.lastgroup or ""])
            last_end = noun.end()
    return made


def _another(between: str, noun: str) -> bool:
    """Whether `noun` is one more thing made, named after the last (`between` is what lies between them)."""
    return bool(_AND_ANOTHER.search(between) or (_AND_BARE.search(between) and _BARE.fullmatch(noun)))


def _clause_before(sentence: str, position: int) -> str:
    """The words of the clause before `position`: from the last comma, semicolon or colon."""
    return re.split(r"[,;:]", sentence[:position])[-1]
