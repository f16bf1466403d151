"""Where a sentence ends, for every piece of code that quotes, cuts or bullets text by sentences (the offline
provider's points, a title's first sentence, a slide's bullets): after a full stop, a question mark or an
exclamation mark (and any closing quote, bracket or citation mark after it) followed by white space, unless the
full stop ends an initial ("K. Nowak"), an abbreviation ("e.g.", "i.e.", "Dr.", "Inc.", "vs.", "U.S.", "No. 5")
or the next word is in lower case ("approx. three"). A decimal ("3.5") has no space to end at.
Standard library only."""

from __future__ import annotations

import re

# Abbreviations that do not end a sentence, written without their last full stop and in lower case.
_ABBREVIATIONS_TEXT = (
    "mr mrs ms mx dr prof sr jr st mt ft rev hon gen col lt sgt capt cmdr gov pres sen rep messrs mme mlle "
    "inc ltd llc co corp plc bros dept univ assn intl est approx ca cf vs viz al e.g i.e "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
)
ABBREVIATIONS = frozenset(_ABBREVIATIONS_TEXT.split())
# Abbreviations that do not end a sentence when a number follows ("No. 5", "p. 12", "Fig. 3").
_NUMBERED_TEXT = "no nos p pp fig figs vol vols ch sec art ex eq"
NUMBERED = frozenset(_NUMBERED_TEXT.split())
# Punctuation that ends a sentence, then what may close it: quotes, brackets, citation marks ("rose. [2]").
_END = re.compile(
    r"[.!?]+(?:[\"'\u201d\u2019)\]]+|\s?\[\d{1,3}(?:\s*[,\u2013-]\s*\d{1,3})*\])*(?=\s+\S)",
)
# The word before a full stop: "K", "Dr", "e.g", "U.S", "(i.e".
_WORD_BEFORE = re.compile(r"[\w.]+$")
# Initials and dotted abbreviations: "K", "J.R.R", "U.S", "Ph.D", "e.g".
_INITIALS = re.compile(r"^(?:[A-Z]|(?:[A-Za-z]{1,2}\.)+[A-Za-z]{1,2})$")


def sentences(text: str) -> list[str]:
    """The sentences of `text`, in order, each stripped; a text without an end is one sentence."""
    found: list[str] = []
    start = 0
    for end in _END.finditer(text or ""):
        if ends_sentence(text, end.start(), end.end()):
            found.append(text[start : end.end()].strip())
            start = end.end()
    found.append((text or "")[start:].strip())
    return [s for s in found if s]


def first_sentence(text: str) -> str:
    """The text's first sentence (the whole text when it has no end)."""
    found = sentences(text)
    return found[0] if found else ""


def ends_sentence(text: str, mark: int, after: int) -> bool:
    """Whether the punctuation at `text[mark]` (its closing marks running to `after`) ends a sentence."""
    following = text[after:].lstrip()
    if re.match(r"[a-z]+\b", following):
        return False  # a sentence does not begin in lower case: "approx. three", "incl. tax"
    if text[mark] != "." or text[mark - 1 : mark] == ".":
        return True  # "?", "!" and an ellipsis end a sentence
    word = _WORD_BEFORE.search(text[:mark])
    if word is None:
        return True
    token = word.group(0).lstrip(".")
    if _INITIALS.match(token):
        return False
    if token.lower() in ABBREVIATIONS:
        return False
    return not (token.lower() in NUMBERED and following[:1].isdigit())
