"""Questions read into queries, without a model: the prompt split into the questions it asks, and each read
against the tables' columns and values into an `AnalysisQuery` (query.py), or into the reason it cannot be
answered from them.

How a question is read (the words and the tables decide; nothing is tuned to one data set):
- **The table**: the one whose columns, values and name the question mentions most (a workbook's sheets are
  tables of their own), else the first.
- **The measure**: "how many different X" counts X's distinct values; "how many <rows>" (the table's own noun:
  orders, tickets, or rows, records) counts rows; else the number column the question names (its words, their
  stems, a few synonyms: sales for revenue, time for minutes); else, when the question names a measure the table
  has no column for ("profit margin"), it cannot be answered; else money, then quantities, else rows counted.
- **The aggregate**: median, a percentile ("90th percentile", "p90"), average ("average", "mean", "per ticket",
  durations asked about as long or quick), maximum or minimum ("max", "largest single"), a share ("share of",
  "what percentage"), else a sum for what adds up and an average for the rest (prices, scores, durations).
- **Dimensions**: the text columns the question names ("by region", "which product", "for each channel"); a time
  grain from "by quarter", "monthly", "which month".
- **Filters**: a column's values the question names ("in the Nordics"; "excluding Online"); numbers compared
  ("more than 10 units"); a period: a year, a quarter ("Q3 2025"), a month ("March 2025"), two dates ("between
  2025-01-01 and 2025-03-31"), "last quarter", "this year" (relative to the data's last date). A period outside
  the data cannot be answered.
- **Comparisons**: growth words (grew, growth, change, rise, fall, "year over year", "vs") compare two periods:
  the two named, or the one named against the one before it, or the data's last year (quarter, month) against
  the one before; per group when the question has a dimension, ranked by percent change for "fastest", "most".
- **Rankings**: "top 5", "bottom 3", "the 3 best"; superlatives (highest, most, least, longest, fastest) pick the
  top or the bottom; "top X per Y" ranks X within each Y.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

from canvas_core.analysis.engine import Dataset, quote
from canvas_core.analysis.plan import Column
from canvas_core.analysis.query import (
    MAX_RANKED,
    Aggregate,
    AnalysisQuery,
    Comparison,
    Filter,
    Grain,
    Measure,
    Period,
    Ranking,
    date_bounds,
)
from canvas_core.analysis.rules import OPTIONAL_WORDS, words
from canvas_core.render.structure import adds_up, is_identifier

MAX_QUESTIONS = 8
MAX_VALUES_READ = 500  # a text column with more values than this is not searched for the values a question names
MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
MONTH = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
    r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
YEAR = r"((?:19|20)\d{2})"
ORDINAL_QUARTERS = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4}
ROW_NOUNS = frozenset({"row", "record", "entry", "entrie", "line", "transaction", "case", "item", "observation"})
SYNONYMS = {
    "sale": ("revenue", "sale", "turnover", "amount"),
    "revenue": ("revenue", "sale", "turnover"),
    "turnover": ("revenue", "sale", "turnover"),
    "income": ("revenue", "income", "earning"),
    "earning": ("revenue", "income", "earning"),
    "spend": ("cost", "spend", "amount", "expense"),
    "spending": ("cost", "spend", "amount", "expense"),
    "expense": ("cost", "expense", "spend"),
    "quantity": ("unit", "quantity", "qty", "volume"),
    "volume": ("unit", "quantity", "qty", "volume"),
    "satisfaction": ("csat", "satisfaction", "score", "rating", "nps"),
    "rating": ("rating", "score", "csat"),
    "warm": ("temperature", "temp"),
    "warmest": ("temperature", "temp"),
    "hot": ("temperature", "temp"),
    "hottest": ("temperature", "temp"),
    "cold": ("temperature", "temp"),
    "coldest": ("temperature", "temp"),
    "wet": ("rainfall", "rain", "precipitation"),
    "wettest": ("rainfall", "rain", "precipitation"),
    "rainy": ("rainfall", "rain", "precipitation"),
    "rain": ("rainfall", "rain", "precipitation"),
    "customer": ("customer", "client", "cover", "guest", "visitor"),
    "guest": ("customer", "client", "cover", "guest", "visitor"),
    "visitor": ("customer", "guest", "cover", "visitor"),
    "price": ("price",),
    "expensive": ("price",),
    "cheapest": ("price",),
    "resolution": ("resolve", "resolution"),
    "resolved": ("resolve", "resolution"),
    "staff": ("agent", "employee", "staff"),
    "pay": ("salary", "wage", "pay", "compensation"),
    "paid": ("salary", "wage", "pay", "compensation"),
    "payroll": ("salary", "wage", "pay", "compensation"),
    "earn": ("salary", "wage", "revenue", "income", "earning"),
    "earns": ("salary", "wage", "revenue", "income", "earning"),
    "headcount": ("employee", "staff", "headcount"),
    "employee": ("agent", "employee", "staff"),
}
DURATION_COLUMN = re.compile(r"\b(minute|min|hour|hr|day|second|sec|duration|time|resolve|resolution|wait|lead|age)\b")
DURATION_ASK = re.compile(
    r"\b(long|longest|longer|slow|slowest|slower|quick|quickest|quicker|fast|fastest|faster|shortest|shorter|time|"
    r"times|take|takes|took|duration)\b"
)
# Words a question is made of that name no column: asking, comparing, ranking, linking.
VOCABULARY = (
    frozenset(
        re.findall(
            r"[a-z]+",
            """a an the of in on at to for from by per each every all any and or but with without within across over
        under
        between than into about as is are was were be been being do does did done has have had having it its this that
        these those there their our we us you your my i me what which who whom whose when where why how much many
        most least more less fewest fewer top bottom best worst highest lowest largest smallest biggest greatest
        high low big small large leading lead longest shortest slowest fastest quickest longer shorter slower faster
        quicker long short slow fast quick take takes took taken total totals sum overall average avg mean median
        typical percentile percent percentage share proportion portion fraction ratio count number numbers figure
        figures value values amount maximum minimum max min single grow grew grown growth growing increase increased
        increasing rise rose risen rising fall fell fallen falling decline declined declining drop dropped change
        changed changes up down compare compared comparison versus vs against relative year years yearly annual
        annually quarter quarters quarterly month months monthly week weeks weekly day days daily date dates period
        periods time last previous prior past this current next first second third fourth final latest recent ytd
        so far only just excluding except exclude other apart not no did show give list tell find rank ranked
        ranking order ordered sort sorted break breakdown split broken down compute calculate report summarize
        summarise summary analyze analyse analysis insight insights trend trends pattern come came make made bring
        brought generate generated earn earned sell sold selling perform performed performing performance result
        results get got see look looking want need please also both whether then should would could can will
        different distinct unique separate individual kind kinds type types group groups category categories via
        out well respectively term terms basis level side rest everything anything something more than above below
        greater less least fewer at under beyond exceeding exceeded exceeds contribute contributed contribution
        account accounted accounts responsible generated made one two three four five six seven eight nine ten
        same such like among busiest quietest hottest coldest warmest wettest driest cheapest dearest priciest
        """,
        )
    )
    | frozenset(MONTHS)
    | frozenset(m[:3] for m in MONTHS)
    | frozenset({"q1", "q2", "q3", "q4", "h1", "h2"})
)
COMMON_VALUES = frozenset(
    {
        "high",
        "low",
        "medium",
        "normal",
        "other",
        "new",
        "old",
        "open",
        "closed",
        "yes",
        "no",
        "true",
        "false",
        "all",
        "none",
        "total",
        "average",
        "top",
        "best",
        "n/a",
        "na",
        "unknown",
        "more",
        "less",
        "last",
        "first",
        "next",
        "may",
    }
)

MEDIAN = re.compile(r"\bmedian\b")
PERCENTILE = re.compile(
    r"\b(\d{1,2})(?:st|nd|rd|th)?[\s-]*(?:percentile|pct)\b|\bp(\d{2})\b|\bpercentile\s+(\d{1,2})\b"
)
AVERAGE = re.compile(r"\b(average|averages|avg|mean|typical|typically|on average)\b")
MAXIMUM = re.compile(r"\b(maximum|max|largest single|biggest single|highest single|longest single|peak)\b")
MINIMUM = re.compile(r"\b(minimum|min|smallest single|lowest single|shortest single)\b")
SHARE = re.compile(
    r"\b(share|proportion|percentage|portion|fraction)\b|\bwhat percent\b|\bhow much of\b|\b(?:per ?cent|%) of\b"
)
TOTAL = re.compile(r"\b(total|totals|sum|overall|in all|altogether|combined)\b")
DISTINCT = re.compile(
    r"\b(?:how many|number of|count of)\s+(?:different|distinct|unique|separate|individual)\s+(\w+(?:\s+\w+)?)"
)
HOW_MANY = re.compile(r"\b(?:how many|number of|count of|count the)\s+(\w+)")
GROWTH = re.compile(
    r"\b(grow|grew|grown|growth|growing|increase[sd]?|increasing|decline[sd]?|declining|change[sd]?|changing|"
    r"year over year|yoy|quarter over quarter|qoq|month over month|mom)\b"
)
# "Rose", "fell", "dropped" are changes only beside a comparison ("did revenue fall", "fell the most", "from ... to");
# "how much rain fell in October" is an amount.
WEAK_GROWTH = re.compile(r"\b(rise|rose|risen|rising|fall|fell|fallen|falling|drop|dropped|dropping)\b")
WEAK_GROWTH_CONTEXT = re.compile(
    r"\b(did|has|have|had|from .+ to|since|compared|versus|vs|the most|most|least|fastest|slowest|by how much)\b"
)
# Compare words make a comparison of periods only when two periods are named ("2025 against 2024"); "compare the
# Nordics and Benelux" compares groups, side by side.
VERSUS = re.compile(r"\b(versus|vs|compared|compare|comparing|against|relative to)\b")
DOWNWARD = re.compile(r"\b(fall|fell|fallen|falling|decline[sd]?|declining|drop|dropped|dropping|shrank|shrunk)\b")
TOP_WORDS = re.compile(
    r"\b(most|highest|largest|biggest|greatest|best|top|leading|longest|slowest|max|maximum|strongest|busiest|"
    r"more|hottest|warmest|wettest|most expensive)\b"
)
BOTTOM_WORDS = re.compile(
    r"\b(least|lowest|smallest|fewest|worst|bottom|shortest|quickest|weakest|min|minimum|less|coldest|driest|"
    r"cheapest|poorest)\b"
)
COUNT_N = re.compile(
    r"\b(?:top|bottom|best|worst|largest|smallest|highest|lowest|biggest|leading|first|last)\s+(\d{1,2}|three|five|"
    r"ten|two|four)\b|\b(\d{1,2}|three|five|ten|two|four)\s+(?:best|worst|largest|smallest|highest|lowest|biggest|"
    r"top|bottom|leading|most|least)\b"
)
NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "ten": 10}
GRAIN_OF: dict[str, Grain] = {"day": "day", "week": "week", "month": "month", "quarter": "quarter", "year": "year"}
WHICH_N = re.compile(r"\b(?:which|what|the|name the|list the)\s+(\d{1,2}|two|three|four|five|ten)\s+[a-z]")
GRAIN_WORDS: list[tuple[Grain, re.Pattern[str]]] = [
    ("day", re.compile(r"\b(daily|per day|by day|each day|every day|which day|what day|which date|busiest day)\b")),
    ("week", re.compile(r"\b(weekly|per week|by week|each week|every week|which week|what week)\b")),
    ("month", re.compile(r"\b(monthly|per month|by month|each month|every month|which month|what month|months)\b")),
    (
        "quarter",
        re.compile(
            r"\b(quarterly|per quarter|by quarter|each quarter|every quarter|which quarter|"
            r"what quarter|quarters)\b"
        ),
    ),
    (
        "year",
        re.compile(
            r"\b(yearly|annual|annually|per year|by year|each year|every year|which year|what year|"
            r"years)\b"
        ),
    ),
]
COMPARE_NUMBER = re.compile(
    r"\b(more than|greater than|longer than|higher than|larger than|over|above|exceeding|at least|less than|fewer than|"
    r"shorter than|lower than|smaller than|under|below|at most|no more than|up to|within)\s+"
    r"[$€£]?(-?\d[\d,]*(?:\.\d+)?)\s*[$€£]?\s*(?:(\w+)(?:\s+(\w+))?)?"
)
COMPARE_OPERATOR = {
    "more than": "gt",
    "greater than": "gt",
    "over": "gt",
    "above": "gt",
    "exceeding": "gt",
    "at least": "ge",
    "less than": "lt",
    "fewer than": "lt",
    "under": "lt",
    "below": "lt",
    "at most": "le",
    "no more than": "le",
    "up to": "le",
    "longer than": "gt",
    "higher than": "gt",
    "larger than": "gt",
    "shorter than": "lt",
    "lower than": "lt",
    "smaller than": "lt",
    "within": "le",
}
NEGATION = re.compile(r"\b(excluding|exclude|except|other than|apart from|without|not|besides|outside)\s+(?:the\s+)?$")
EACH = re.compile(r"\b(?:per|each|every|within|for each|in each|for every|in every|across|by)\s+(\w+)")


@dataclass
class Asked:
    """A question as read: its query over one table, or why it cannot be answered from the tables."""

    question: str
    dataset: Dataset | None = None
    query: AnalysisQuery | None = None
    cannot: str = ""  # the data lacks what the question needs: what is missing
    unmapped: str = ""  # the rules could not read it into a query: why
    extreme: str = ""  # top or bottom: which end of a ranked answer the question asks for
    notes: list[str] = field(default_factory=list)


# ---- splitting a prompt into questions ------------------------------------------------------------------------------

CUE = re.compile(
    r"\b(how many|how much|which|what|who|where|when|top|bottom|best|worst|most|least|highest|lowest|largest|total|"
    r"average|mean|median|percentile|share|percentage|proportion|growth|grew|grow|rank|compare|by|per|each|trend|"
    r"fastest|slowest|longest|shortest|count|number of|breakdown|split|maximum|minimum)\b"
)
CLAUSE_BREAK = re.compile(
    r",?\s+(?:with|and also|plus|as well as|along with|and)\s+(?=(?:the\s+)?(?:top|bottom|best|"
    r"worst|highest|lowest|median|average|total|share|growth|number of|count|which|how many|"
    r"fastest|slowest|most|least)\b)"
)


def split_questions(prompt: str) -> list[str]:
    """The questions a prompt asks: its sentences and list items, a sentence cut where a second ask begins
    ("..., with the top product per region")."""
    text = re.sub(r"(?m)^\s*(?:[-*•]|\d{1,2}[.)]|[a-z][.)])\s+", "\n", prompt)
    parts = re.split(r"(?<=[?!;])\s+|\n+|(?<=[a-z0-9%)]{2})\.\s+(?=[A-Z])", text)
    found = []
    for part in parts:
        for clause in CLAUSE_BREAK.split(part):
            clause = clause.strip(" .;,:")
            if len(clause.split()) >= 2:
                found.append(clause)
    return found[:MAX_QUESTIONS]


# ---- reading one question ------------------------------------------------------------------------------------------


@dataclass
class QuestionWords:
    """A question's words, singular, with their stems, and its text lowered for phrase patterns."""

    text: str
    list: list[str]

    @classmethod
    def of(cls, text: str) -> QuestionWords:
        lowered = " ".join(text.lower().replace("\u2019", "'").split())
        return cls(text=lowered, list=words(lowered))

    def has(self, word: str) -> bool:
        return any(_same(word, w) for w in self.list)

    def at(self, word: str) -> int | None:
        return next((n for n, w in enumerate(self.list) if _same(word, w)), None)


def _same(a: str, b: str) -> bool:
    """Whether two words are one word written otherwise: a plural, a tense, a longer form (`hire`, `hiring`)."""
    if a == b:
        return True
    short, long_ = sorted((a, b), key=len)
    if (len(short) >= 4 and long_.startswith(short)) or (len(short) >= 5 and a[:5] == b[:5]):
        return True
    stem_a, stem_b = _stem(a), _stem(b)
    return len(stem_a) >= 3 and stem_a == stem_b


def _stem(word: str) -> str:
    for suffix in ("ations", "ation", "ings", "ing", "ers", "ed", "er", "es", "e", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _column_words(column: Column) -> list[str]:
    found = [w for w in words(column.name) if len(w) >= 2 and not w.isdigit()]
    return [w for w in found if w not in OPTIONAL_WORDS and w not in VOCABULARY] or found


def _mention(question: QuestionWords, column: Column) -> tuple[float, int]:
    """How strongly the question names a column (0: not at all; 1: all its words) and where."""
    wanted = _column_words(column)
    if not wanted:
        return 0.0, 0
    places = []
    weight = 0.0
    for word in wanted:
        place = question.at(word)
        if place is not None:
            weight += 1.0
        else:
            for said in question.list:
                if any(_same(word, s) for s in SYNONYMS.get(said, ())):
                    place = question.list.index(said)
                    weight += 0.9  # a synonym ("sold" for revenue) names a column less surely than its own word
                    break
        if place is not None:
            places.append(place)
    if not places:
        return 0.0, 0
    return weight / len(wanted), min(places)


def row_nouns(dataset: Dataset) -> set[str]:
    name = re.sub(r"\.(csv|tsv|xlsx|parquet)\b", " ", dataset.name.lower())
    return {w for w in words(name) if len(w) >= 3 and w not in ("sheet", "data", "file", "table")} | ROW_NOUNS


def _values(dataset: Dataset) -> dict[str, list[str]]:
    """The distinct values of each text column with at most MAX_VALUES_READ of them (read once per table)."""
    if dataset.values_read is not None:
        return dataset.values_read
    found: dict[str, list[str]] = {}

    for column in dataset.columns:
        if column.kind == "text" and column.distinct <= MAX_VALUES_READ:
            rows = dataset.connection.execute(
                f"SELECT DISTINCT CAST({quote(column.name)} AS VARCHAR) FROM data "
                f"WHERE {quote(column.name)} IS NOT NULL"
            ).fetchall()
            found[column.name] = [str(r[0]) for r in rows if str(r[0]).strip()]
    dataset.values_read = found
    return found


@dataclass
class _ValueMention:
    column: str
    value: str
    start: int
    end: int
    negated: bool


def value_mentions(question: QuestionWords, dataset: Dataset) -> list[_ValueMention]:
    """The table's values the question names, longest first, none inside another."""
    found: list[_ValueMention] = []
    taken: list[tuple[int, int]] = []
    candidates = [(v, c) for c, values in _values(dataset).items() for v in values if len(v.strip()) >= 2]
    for value, column in sorted(candidates, key=lambda vc: -len(vc[0])):
        pattern = r"(?<![\w])" + re.escape(value.lower()) + r"(?:s|es|'s)?(?![\w])"
        for match in re.finditer(pattern, question.text):
            if any(match.start() < end and start < match.end() for start, end in taken):
                continue
            if value.lower() in COMMON_VALUES or value.lower() in VOCABULARY:
                # "high", "online": a value only when its column is named beside it ("high priority").
                near = question.text[max(0, match.start() - 30) : match.end() + 30]
                if not any(w in words(near) for w in _column_words(Column(column, "text", 0))):
                    continue
            negated = bool(NEGATION.search(question.text[: match.start()]))
            found.append(_ValueMention(column, value, match.start(), match.end(), negated))
            taken.append((match.start(), match.end()))
    return sorted(found, key=lambda m: m.start)


def choose_dataset(question: str, datasets: list[Dataset]) -> Dataset | None:
    """The table the question is about: the most of its columns and values named, then its own name."""
    said = QuestionWords.of(question)
    best, best_score = None, -1.0
    for dataset in datasets:
        score = sum(_mention(said, c)[0] for c in dataset.columns)
        score += 0.9 * len(value_mentions(said, dataset))
        score += 0.5 * sum(1 for w in row_nouns(dataset) - ROW_NOUNS if said.has(w))
        if score > best_score:
            best, best_score = dataset, score
    return best


def read_question(question: str, datasets: list[Dataset]) -> Asked:
    """The query a question asks of the tables, or why it cannot be answered from them."""
    dataset = choose_dataset(question, datasets)
    asked = Asked(question=question, dataset=dataset)
    if dataset is None:
        asked.cannot = "no table was given"
        return asked
    said = QuestionWords.of(question)
    columns = dataset.columns
    values = value_mentions(said, dataset)
    value_spans = [(v.start, v.end) for v in values]
    if not (CUE.search(said.text) or values or PERIOD_WORDS.search(said.text) or COMPARE_NUMBER.search(said.text)):
        asked.dataset = None  # a title or a request ("Spreadsheet of tidal ranges"), not a question of the data
        return asked
    if not _about(said, dataset, values):
        # Names nothing the table holds: a question about something else, unless it asks for a figure by a name
        # the table has no column for.
        missing = _unknown_measure(said, dataset, value_spans)
        if not FIGURE_ASK.search(said.text) and not any(w in MEASURE_NOUNS for w in missing.split()):
            missing = ""
        if missing:
            numbers = ", ".join(c.name for c in columns if c.kind == "number") or "none"
            asked.cannot = f"the data has no column for {missing} (its number columns: {numbers})"
        else:
            asked.dataset = None
        return asked

    filters: list[Filter] = []
    numeric = _numeric_filters(said, dataset)
    filters += numeric
    numeric_columns = {f.column for f in numeric}

    measure, why = _measure(said, dataset, numeric_columns, value_spans)
    if measure is None:
        asked.cannot = why
        return asked

    date_columns = [c for c in columns if c.kind in ("date", "period") and c.distinct >= 1]
    date_column = _named_first(said, date_columns) or (date_columns[0] if date_columns else None)

    # Dimensions: named text columns, not the one counted, not one only filtered to a single value.
    by_column: dict[str, list[_ValueMention]] = {}
    for mention in values:
        by_column.setdefault(mention.column, []).append(mention)
    named = sorted(
        (place, c.name)
        for c in columns
        if c.kind == "text"
        or (
            c.kind == "number"
            and c.distinct <= 24
            and is_identifier(c.name) is False
            and not adds_up(c.name)
            and c.name != measure.column
        )
        for score, place in [_mention(said, c)]
        if score >= 0.5
        and c.name != measure.column
        and c.name not in numeric_columns
        and _groups(c, dataset)
        and not re.search(r"\b(all|every|any)\s+(?:the\s+)?$", " ".join(said.list[max(0, place - 2) : place]) + " ")
    )
    counting = measure.aggregate in ("count", "count_distinct", "share") and measure.column is None
    ranking = bool(TOP_WORDS.search(said.text) or BOTTOM_WORDS.search(said.text)) and not counting
    dimensions = [
        name for _, name in named if name not in by_column and (ranking or not _only_rows(said, name, dataset))
    ]
    for column, mentions in by_column.items():
        positive_values = {m.value for m in mentions if not m.negated}
        named_itself = _mention(said, Column(column, "text", 0))[0] >= 0.5
        only = re.search(r"\b(only|just|solely)\b", said.text)
        side_by_side = len(positive_values) >= 2 and not (only and not named_itself)
        if column not in dimensions and (side_by_side or (named_itself and not positive_values)):
            # "Nordics and Benelux": side by side; "countries, excluding Brazil": the others, each
            dimensions.append(column)

    share_of = None
    if measure.aggregate == "share":
        positive = [m for m in values if not m.negated]
        if positive:
            # The part is what the share is "of", "from" or "for": the first value named after the share's word.
            cue = SHARE.search(said.text)
            after = [m for m in positive if cue is None or m.start >= cue.end()]
            part = (after or positive)[0]
            share_of = Filter(column=part.column, values=[part.value])
            values = [m for m in values if m is not part]
            dimensions = [d for d in dimensions if d != part.column]
    for column in by_column:
        kept = [m for m in values if m.column == column]
        kept_values: list[str | float] = sorted({m.value for m in kept if not m.negated})
        left_out: list[str | float] = sorted({m.value for m in kept if m.negated})
        if kept_values:
            filters.append(Filter(column=column, operator="in", values=kept_values))
        if left_out:
            filters.append(Filter(column=column, operator="not_in", values=left_out))

    grain = _grain(said, columns)
    per: Grain | None = None
    if (
        grain
        and date_column is None
        and measure.column
        and any(_same(w, g) for w in words(measure.column) for g in (grain, GRAIN_ADJECTIVES[grain]))
    ):
        grain = None  # "spend each month" of a "Monthly Cost" column: the column is already per month
    if (
        grain
        and measure.aggregate in ("mean", "median", "percentile", "min", "max")
        and not re.search(r"\b(by|which|what|each|every)\s+(?:the\s+)?(day|week|month|quarter|year)\b", said.text)
        and not re.search(r"\b(busiest|quietest|best|worst)\s+(day|week|month|quarter|year)\b", said.text)
    ):
        adjective = re.search(r"\b(daily|weekly|monthly|quarterly|yearly|annual)\s+[a-z]", said.text)
        if adjective and grain == _native_grain(dataset, date_column):
            grain = None  # "the median daily rainfall" of daily readings: each row's reading
        else:
            per, grain = grain, None  # "the average monthly revenue", "median covers per day": over period totals
    asked.extreme = _extreme(QuestionWords.of(COMPARE_NUMBER.sub(" ", said.text)), measure)
    periods, period_problem = periods_in(said, dataset, date_column)
    if period_problem:
        asked.cannot = period_problem
        return asked
    step = re.search(r"\b(quarter|month|week|day) over \1\b|\b(qoq|mom|wow)\b", said.text)
    if step and date_column is not None:
        # "quarter over quarter": the series of periods, each with its change on the one before
        grain = GRAIN_OF[step.group(1) or {"qoq": "quarter", "mom": "month", "wow": "week"}[step.group(2)]]
    growth = (
        not step
        and date_column is not None
        and (
            bool(GROWTH.search(said.text))
            or (bool(VERSUS.search(said.text)) and len(periods) >= 2)
            or (bool(WEAK_GROWTH.search(said.text)) and bool(WEAK_GROWTH_CONTEXT.search(said.text)))
        )
    )
    compare = None
    period = None
    if growth:
        compare = _comparison(periods, dataset, date_column, grain)
        if compare is None:
            asked.cannot = "it asks for a change over time, and the data holds only one period"
            return asked
        grain = None
        if measure.aggregate == "share":
            measure = measure.model_copy(update={"aggregate": "sum"})
        if DOWNWARD.search(said.text) and not BOTTOM_WORDS.search(said.text):
            asked.extreme = "bottom" if asked.extreme == "top" or re.search(r"\bmost\b", said.text) else asked.extreme
    elif periods:
        period = periods[0] if len(periods) == 1 else _span(periods)
    if (grain or period or compare) and date_column is None:
        asked.cannot = "it asks about a period, and the table has no date column"
        return asked

    if len(dimensions) > 2:
        dimensions = dimensions[:2]
    if not dimensions and grain is None and compare is None and asked.extreme:
        label = _row_label(said, dataset)
        if label is not None:
            dimensions = [label.name]  # "who earns the most", "which employee scored lowest": rows by their names
    if (
        not dimensions
        and grain is None
        and compare is None
        and asked.extreme
        and measure.column
        and measure.aggregate in ("sum", "mean")
        and not TOTAL.search(said.text)
        and not AVERAGE.search(said.text)
    ):
        # "the lowest unit price", "the highest temperature recorded": one value of the column, not a group's.
        measure = measure.model_copy(update={"aggregate": "max" if asked.extreme == "top" else "min"})
    rank = _ranking(said, dimensions, asked.extreme, compare is not None)
    if measure.aggregate == "count_distinct":
        if measure.column in dimensions:
            dimensions.remove(measure.column)
        if not re.search(r"\b(by|per|each|every|which|what|in each|for each)\b", said.text):
            dimensions = []
    if measure.aggregate == "share" and share_of is None and not dimensions and grain is None:
        asked.unmapped = "it asks for a share without naming the part or the groups it is a share of"
        return asked
    query = AnalysisQuery(
        table=dataset.name,
        measure=measure,
        dimensions=dimensions,
        date_column=date_column.name if date_column else None,
        grain=grain,
        per=per,
        change=bool(step) and grain is not None,
        filters=filters,
        period=period,
        compare=compare,
        rank=rank,
        share_of=share_of,
    )
    asked.query = query
    return asked


FIGURE_ASK = re.compile(r"\b(how many|how much|total|average|mean|median|percentile|share of|maximum|minimum)\b")
# What analysts measure: a question asking for one of these of a table without such a column cannot be answered.
MEASURE_NOUNS = frozenset(
    words(
        "profit profits margin margins cost costs expense expenses salary salaries wage wages price prices rate rates "
        "ratio return returns roi churn conversion retention score scores rating ratings budget tax taxes discount "
        "discounts fee "
        "fees income earnings revenue sales spend spending headcount inventory stock age weight height temperature "
        "distance duration latency response satisfaction nps csat"
    )
)


PERIOD_WORDS = re.compile(
    rf"{YEAR}|\bq[1-4]\b|\b{MONTH}\b|\b(last|this|previous|current|past)\s+(year|quarter|month|week)\b|\b(19|20)\d\d-\d\d\b"
)


def _about(said: QuestionWords, dataset: Dataset, values: list[_ValueMention]) -> bool:
    """Whether a question names the table's columns, values or rows."""
    if values or any(_mention(said, c)[0] >= 0.5 for c in dataset.columns):
        return True
    if any(c.kind in ("date", "period") for c in dataset.columns) and re.search(
        r"\b(yoy|year over year|quarter over quarter|qoq|month over month|growth|trend|(?:best|worst|busiest|quietest|"
        r"strongest|weakest) (?:day|week|month|quarter|year)|which (?:day|week|month|quarter|year))\b",
        said.text,
    ):
        return True  # "What's the YoY growth?", "Which was our worst quarter?": of the table's measure over time
    return any(said.has(w) for w in row_nouns(dataset) - ROW_NOUNS) or bool(
        re.search(r"\b(rows|records|entries|the data|the table|this data|the dataset)\b", said.text)
    )


def _row_label(said: QuestionWords, dataset: Dataset) -> Column | None:
    """The column naming each row (a person's, an item's name) when the question asks who or which one."""
    labels = [c for c in dataset.columns if c.kind == "text" and not _groups(c, dataset) and not is_identifier(c.name)]
    named = _named_first(said, labels)
    if named is not None:
        return named
    if re.search(r"\b(who|whom|whose)\b", said.text):
        names = [
            c
            for c in labels
            if re.search(r"\b(name|person|employee|customer|agent|client|user|member)\b", " ".join(words(c.name)))
        ]
        return next(iter(names or labels), None)
    return None


GRAIN_ADJECTIVES: dict[str, str] = {
    "day": "daily",
    "week": "weekly",
    "month": "monthly",
    "quarter": "quarterly",
    "year": "yearly",
}


def _native_grain(dataset: Dataset, column: Column | None) -> str | None:
    """The period one row of the table stands for: a day for daily dates, a month for `2025-03` periods."""
    if column is None:
        return None
    if column.kind == "period":
        sample = (_values(dataset).get(column.name) or [""])[0]
        return "month" if re.match(r"^\d{4}-\d{2}$", sample.strip()) else None
    return "day" if column.distinct > 31 else None


def _only_rows(said: QuestionWords, name: str, dataset: Dataset) -> bool:
    """Whether a column is named only as the table's rows ("how many agents" of an Agents sheet), not as groups."""
    column_words = _column_words(Column(name, "text", 0))
    if not all(w in row_nouns(dataset) for w in column_words):
        return False
    return not any(
        re.search(rf"\b(by|per|each|every|which|what|for each|in each)\s+{re.escape(w)}", " ".join(said.list))
        for w in column_words
    )


def _groups(column: Column, dataset: Dataset) -> bool:
    """Whether a column can group rows: not an id, and not (nearly) one value per row."""
    if is_identifier(column.name):
        return False
    return dataset.rows < 20 or column.distinct <= 0.9 * dataset.rows


def _named_first(said: QuestionWords, columns: list[Column]) -> Column | None:
    named = sorted((p, n, c) for n, c in enumerate(columns) for s, p in [_mention(said, c)] if s >= 0.5)
    return named[0][2] if named else None


def _numeric_filters(said: QuestionWords, dataset: Dataset) -> list[Filter]:
    columns = dataset.columns
    numbers = [c for c in columns if c.kind == "number"]
    found = []
    for match in COMPARE_NUMBER.finditer(said.text):
        operator, value = COMPARE_OPERATOR[match.group(1)], float(match.group(2).replace(",", ""))
        after = " ".join(w for w in match.groups()[2:] if w)
        before = said.text[max(0, match.start() - 40) : match.start()]
        target = None
        for near in (after, before):
            near_words = QuestionWords.of(near)
            scored = sorted(((s, -p), c) for c in numbers for s, p in [_mention(near_words, c)] if s > 0)
            if scored:
                target = scored[-1][1]
                break
        if target is None and any(w in row_nouns(dataset) for w in QuestionWords.of(before).list[-3:]):
            target = _money_column(numbers)  # "orders over 1,000": the orders' value
        if target is not None and not (1900 <= value <= 2100 and target.kind != "number"):
            found.append(Filter(column=target.name, operator=operator, values=[value]))  # type: ignore[arg-type]
    return found


def _measure(
    said: QuestionWords, dataset: Dataset, numeric_filters: set[str], value_spans: list[tuple[int, int]]
) -> tuple[Measure | None, str]:
    """The measure and its aggregate, or None and what the table lacks."""
    columns = dataset.columns
    text = said.text
    rows = row_nouns(dataset)
    distinct = DISTINCT.search(text)
    if distinct:
        counted_words = QuestionWords.of(distinct.group(1))
        target = _named_first(counted_words, [c for c in columns if not is_identifier(c.name)]) or _named_first(
            counted_words, columns
        )
        if target is not None:
            return Measure(aggregate="count_distinct", column=target.name), ""
        return None, f"it counts the different {distinct.group(1)}, and the table has no column for them"
    numbers = [c for c in columns if c.kind == "number" and not is_identifier(c.name)]
    named = sorted(
        (-score, place, c.name)
        for c in numbers
        for score, place in [_mention(said, c)]
        if score > 0 and c.name not in numeric_filters
    )
    counted = Measure(aggregate="share" if SHARE.search(text) else "count")
    how_many = HOW_MANY.search(text)
    if how_many is not None:
        noun = words(how_many.group(1))[0] if words(how_many.group(1)) else ""
        if noun in rows:
            return counted, ""
        # "How many stations": the different values of the column the noun names; a number column is summed.
        texts = [
            c
            for c in columns
            if (c.kind == "text" and _groups(c, dataset)) or (c.kind == "text" and not is_identifier(c.name))
        ]
        target = _named_first(QuestionWords.of(how_many.group(1)), texts)
        if target is not None and not any(_same(noun, w) for n in numbers for w in _column_words(n)):
            return Measure(aggregate="count_distinct", column=target.name), ""
        if not named:
            return counted, ""
        summed = next(c for c in numbers if c.name == named[0][2])
        if any(_same(noun, w) for w in _column_words(summed)):
            # "How many minutes went into ...": added up, unless a typical or average figure is asked for.
            counted_as: Aggregate = _aggregate(said, summed, rows)
            return Measure(
                aggregate="sum" if counted_as == "mean" and not AVERAGE.search(text) else counted_as, column=summed.name
            ), ""
    most_rows = re.search(r"\b(most|fewest|least|more|fewer)\s+(\w+)", text)
    if not named and most_rows and words(most_rows.group(2))[0] in rows:
        return counted, ""
    if not named and re.search(r"\b(of|are|were)\s+(?:the\s+|our\s+|all\s+)?(\w+)", text) and SHARE.search(text):
        share_noun = next((w for w in said.list if w in rows), None)
        if share_noun is not None:
            return counted, ""  # "what percentage of tickets are Billing tickets"
    column: Column | None = None
    if named:
        column = next(c for c in numbers if c.name == named[0][2])
        derived = [w for w in DERIVED if re.search(rf"\b{w}\b", text) and w not in words(column.name)]
        if derived:
            return None, (
                f"it asks for a {derived[0]} of {column.name}, which needs figures the table does not hold "
                f"(a {derived[0]} is not one of its columns: {', '.join(c.name for c in numbers)})"
            )
    else:
        missing = _unknown_measure(said, dataset, value_spans)
        if missing:
            have = ", ".join(c.name for c in numbers) or "none"
            return None, f"the data has no column for {missing} (its number columns: {have})"
        if DURATION_ASK.search(text):
            column = next((c for c in numbers if DURATION_COLUMN.search(" ".join(words(c.name)))), None)
        if column is None:
            column = _money_column(numbers)
        if column is None:
            return Measure(aggregate="count"), ""
    aggregate: Aggregate = _aggregate(said, column, rows)
    return Measure(aggregate=aggregate, column=column.name, percentile=_percentile(said)), ""


# Figures derived from others: asked of a column that is not itself one, they need what the table lacks.
DERIVED = ("rate", "ratio", "margin", "net", "gross", "profit", "yield", "per capita", "roi")
SLOT_OPENERS = frozenset(
    [
        "total",
        "average",
        "mean",
        "median",
        "sum",
        "highest",
        "lowest",
        "maximum",
        "minimum",
        "most",
        "least",
        "best",
        "worst",
        "biggest",
        "largest",
        "smallest",
        "share",
        "percentile",
        "much",
        "is",
        "was",
        "are",
        "were",
    ]
)
SLOT_ENDS = frozenset(
    [
        "per",
        "by",
        "in",
        "for",
        "of",
        "across",
        "from",
        "to",
        "with",
        "at",
        "on",
        "during",
        "between",
        "over",
        "under",
        "than",
        "and",
        "or",
    ]
)


def _money_column(numbers: list[Column]) -> Column | None:
    """The column a question naming no measure is most likely about: money, else a quantity."""
    money = [c for c in numbers if MONEY_WORDS.search(" ".join(words(c.name))) and not is_identifier(c.name)]
    quantity = [c for c in numbers if QUANTITY_WORDS.search(" ".join(words(c.name))) and not is_identifier(c.name)]
    return next(iter(money or quantity), None)


MONEY_WORDS = re.compile(
    r"\b(revenue|sale|amount|turnover|income|value|total|spend|cost|taking|receipt|earning|gmv|"
    r"booking|mrr|arr)\b"
)
QUANTITY_WORDS = re.compile(r"\b(unit|quantity|qty|volume|count|visit|cover)\b")


def _unknown_measure(said: QuestionWords, dataset: Dataset, value_spans: list[tuple[int, int]]) -> str:
    """Words in the question's measure slot ("the profit margin", "average first response time", "most
    profitable") that name no column, no value and nothing the question vocabulary knows: the measure the table
    lacks ("" when the slot names the table's own columns or rows, or holds no such word)."""
    known = [w for c in dataset.columns for w in _column_words(c)] + list(row_nouns(dataset))
    value_words = {w for s, e in value_spans for w in words(said.text[s:e])}
    tokens = re.findall(r"[a-z]+", said.text)
    for at, token in enumerate(tokens):
        if token not in SLOT_OPENERS:
            continue
        unknown = []
        for word in tokens[at + 1 : at + 5]:
            if word in SLOT_ENDS:
                break
            single = words(word)[0] if words(word) else word
            if single in value_words:
                break
            if any(_same(single, k) for k in known) or any(
                _same(s, k) for s in SYNONYMS.get(single, ()) for k in known
            ):
                return ""  # the slot names the table's own column or rows
            if single in VOCABULARY or word in VOCABULARY or len(single) < 3:
                continue
            unknown.append(word)
        if unknown:
            return " ".join(unknown)
    return ""


# Nouns that name one row of most tables: "revenue per order" is each order's revenue on average.
PER_ITEM = frozenset({"ticket", "order", "sale", "visit", "customer", "case", "booking", "transaction", "purchase",
                      "invoice", "shipment", "call", "session", "patient", "student", "employee", "trip"})  # fmt: skip


def _aggregate(said: QuestionWords, column: Column, rows: frozenset[str] | set[str] = frozenset()) -> Aggregate:
    text = said.text
    if MEDIAN.search(text):
        return "median"
    if PERCENTILE.search(text):
        return "percentile"
    if SHARE.search(text):
        return "share"
    if AVERAGE.search(text):
        return "mean"
    if MAXIMUM.search(text):
        return "max"
    if MINIMUM.search(text):
        return "min"
    if TOTAL.search(text):
        return "sum"
    per_row = re.search(r"\bper\s+(\w+)", text)
    if per_row and words(per_row.group(1))[0] in ROW_NOUNS | rows | PER_ITEM:
        return "mean"
    duration = DURATION_COLUMN.search(" ".join(words(column.name)))
    if duration and DURATION_ASK.search(text):
        return "mean"
    return "sum" if adds_up(column.name) and not duration else "mean"


def _percentile(said: QuestionWords) -> float | None:
    match = PERCENTILE.search(said.text)
    if not match:
        return None
    value = float(next(g for g in match.groups() if g))
    return value if 0 < value < 100 else None


def _grain(said: QuestionWords, columns: list[Column]) -> Grain | None:
    """The time grain the question groups by; a word of a column's own name ("Annual Salary") is not one."""
    named = {w for c in columns for w in words(c.name)}
    for grain, pattern in GRAIN_WORDS:
        for match in pattern.finditer(said.text):
            if not set(words(match.group(0))) <= named:
                return grain
    ranked = re.search(
        r"\b(?:best|worst|busiest|quietest|strongest|weakest|highest|lowest|biggest|smallest|peak)\s+"
        r"(day|week|month|quarter|year)\b",
        said.text,
    )
    if ranked:
        return GRAIN_OF[ranked.group(1)]  # "our worst quarter": the quarters, ranked
    listed = re.search(
        r"\b(?:by|per)\s+[\w ,&]*?(?:and|,)\s+(?:the\s+|by\s+)?(day|week|month|quarter|year)\b", said.text
    )
    return GRAIN_OF[listed.group(1)] if listed else None


def _extreme(said: QuestionWords, measure: Measure) -> str:
    text = said.text
    duration = measure.column is not None and DURATION_COLUMN.search(" ".join(words(measure.column)))
    if (
        duration
        and re.search(r"\b(fastest|quickest|quicker|faster|shortest|soonest)\b", text)
        and not GROWTH.search(text)
    ):
        return "bottom"
    top, bottom = TOP_WORDS.search(text), BOTTOM_WORDS.search(text)
    if re.search(r"\b(fastest|quickest)\b", text) and GROWTH.search(text):
        top = top or re.search(r"\b(fastest|quickest)\b", text)
    if re.search(r"\bslowest\b", text) and GROWTH.search(text):
        return "bottom"
    if top and bottom:
        return "top" if top.start() < bottom.start() else "bottom"
    return "top" if top else "bottom" if bottom else ""


def _ranking(said: QuestionWords, dimensions: list[str], extreme: str, compared: bool) -> Ranking | None:
    match = COUNT_N.search(said.text)
    count = None
    if match:
        token = match.group(1) or match.group(2)
        count = NUMBER_WORDS.get(token) or int(token)
    elif (which := WHICH_N.search(said.text)) and extreme:
        count = NUMBER_WORDS.get(which.group(1)) or int(which.group(1))
    order = "bottom" if extreme == "bottom" else "top"
    if len(dimensions) == 2 and extreme:
        # "the top product per region": ranked within the dimension that follows per, each or every.
        eaches = [m.group(1) for m in EACH.finditer(said.text)]
        for within in dimensions:
            other = next(d for d in dimensions if d != within)
            if any(_mention(QuestionWords.of(e), Column(within, "text", 0))[0] > 0 for e in eaches) and (
                _mention(said, Column(other, "text", 0))[1] <= _mention(said, Column(within, "text", 0))[1]
                or not any(_mention(QuestionWords.of(e), Column(other, "text", 0))[0] > 0 for e in eaches)
            ):
                return Ranking(order=order, count=count or 1, within=within, by_change=compared)  # type: ignore[arg-type]
    if count is not None and dimensions:
        return Ranking(order=order, count=count, by_change=compared)  # type: ignore[arg-type]
    if compared and dimensions:
        return Ranking(order=order, count=MAX_RANKED, by_change=True)  # type: ignore[arg-type]
    return None


# ---- periods --------------------------------------------------------------------------------------------------------


def _month_of(text: str) -> int:
    return next(n for n, m in enumerate(MONTHS, start=1) if m.startswith(text[:3]))


def _next_month(year: int, month: int, months: int = 1) -> dt.date:
    total = year * 12 + month - 1 + months
    return dt.date(total // 12, total % 12 + 1, 1)


def _quarter(year: int, quarter: int) -> Period:
    start = dt.date(year, quarter * 3 - 2, 1)
    return Period(start=start, end=_next_month(year, quarter * 3 - 2, 3), label=f"Q{quarter} {year}")


def _year(year: int) -> Period:
    return Period(start=dt.date(year, 1, 1), end=dt.date(year + 1, 1, 1), label=str(year))


def _month(year: int, month: int) -> Period:
    return Period(
        start=dt.date(year, month, 1), end=_next_month(year, month), label=f"{MONTHS[month - 1].title()} {year}"
    )


def periods_in(said: QuestionWords, dataset: Dataset, date_column: Column | None) -> tuple[list[Period], str]:
    """The periods a question names, in time order, and what is wrong when one lies outside the data."""
    text = said.text
    found: list[tuple[int, Period]] = []
    spans: list[tuple[int, int]] = []

    def add(at: int, end: int, period: Period) -> None:
        if not any(s <= at < e for s, e in spans):
            found.append((at, period))
            spans.append((at, end))

    between = re.search(
        r"\b(?:between|from)\s+(\d{4}-\d{2}-\d{2})\s+(?:and|to|until|till|through)\s+(\d{4}-\d{2}-\d{2})\b", text
    )
    if between:
        start, end = dt.date.fromisoformat(between.group(1)), dt.date.fromisoformat(between.group(2))
        if end >= start:
            add(
                between.start(),
                between.end(),
                Period(start=start, end=end + dt.timedelta(days=1), label=f"{start.isoformat()} to {end.isoformat()}"),
            )
    month_range = re.search(
        rf"\b(?:between|from)\s+{MONTH}\s+(?:{YEAR}\s+)?(?:and|to|until|through|-)\s+{MONTH}\s+{YEAR}", text
    )
    if month_range:
        year_end = int(month_range.group(4))
        year_start = int(month_range.group(2)) if month_range.group(2) else year_end
        first, last = _month_of(month_range.group(1)), _month_of(month_range.group(3))
        start, end = dt.date(year_start, first, 1), _next_month(year_end, last)
        label = f"{MONTHS[first - 1].title()} to {MONTHS[last - 1].title()} {year_end}"
        add(month_range.start(), month_range.end(), Period(start=start, end=end, label=label))
    for m in re.finditer(rf"\bq([1-4])\s*(?:and|&|vs\.?|versus|to|through|-|or)\s*q([1-4])\s*(?:of\s+)?{YEAR}\b", text):
        year = int(m.group(3))
        add(m.start(), m.start() + 2, _quarter(year, int(m.group(1))))  # "Q1 and Q2 2025": both of 2025
    for m in re.finditer(rf"\bq([1-4])\s*(?:of\s+)?{YEAR}\b|\b{YEAR}[\s-]*q([1-4])\b", text):
        year = int(m.group(2) or m.group(3))
        add(m.start(), m.end(), _quarter(year, int(m.group(1) or m.group(4))))
    for m in re.finditer(rf"\b(first|second|third|fourth|1st|2nd|3rd|4th)\s+quarter\s+(?:of\s+)?{YEAR}\b", text):
        add(m.start(), m.end(), _quarter(int(m.group(2)), ORDINAL_QUARTERS[m.group(1)]))
    for m in re.finditer(rf"\b{MONTH}\.?\s+(?:of\s+)?{YEAR}\b", text):
        add(m.start(), m.end(), _month(int(m.group(2)), _month_of(m.group(1))))
    for m in re.finditer(r"\b(\d{4})-(0[1-9]|1[0-2])\b(?!-\d)", text):
        add(m.start(), m.end(), _month(int(m.group(1)), int(m.group(2))))
    for m in re.finditer(rf"\b(?:h([12])\s+{YEAR}|{YEAR}\s+h([12])|(first|second)\s+half\s+(?:of\s+)?{YEAR})\b", text):
        half = int(m.group(1) or m.group(3) or (1 if m.group(5) == "first" else 2))
        year = int(m.group(2) or m.group(4) or m.group(6))
        start = dt.date(year, 1 if half == 1 else 7, 1)
        add(m.start(), m.end(), Period(start=start, end=_next_month(year, start.month, 6), label=f"H{half} {year}"))
    for m in re.finditer(rf"(?<![\d-]){YEAR}(?![\d-])", text):
        if any(s <= m.start() < e for s, e in spans):
            continue
        add(m.start(), m.end(), _year(int(m.group(1))))
    bounds = date_bounds(dataset, date_column.name) if date_column is not None else None
    relative = re.search(
        r"\b(last|previous|past|prior|this|current|latest|most recent)\s+(year|quarter|month|week)\b", text
    )
    if relative and bounds is not None:
        add(relative.start(), relative.end(), _relative(relative.group(1), relative.group(2), bounds[1]))
    found = [(at, _open_ended(text[:at], period)) for at, period in found]
    periods = [p for _, p in sorted(found, key=lambda f: f[1].start)]
    if periods and bounds is None:
        return periods, ""
    if bounds is not None:
        earliest, latest = bounds
        for period in periods:
            if period.end <= earliest or period.start > latest:
                return periods, (
                    f"{period.label} is outside the data, which covers {earliest.isoformat()} to {latest.isoformat()}"
                )
    return periods, ""


OPEN_START = dt.date(1900, 1, 1)
OPEN_END = dt.date(2200, 1, 1)
BOUND = re.compile(r"\b(after|since|before|until|till|prior to|up to|through|as of)\s+(?:the\s+(?:end|start) of\s+)?$")


def _open_ended(before: str, period: Period) -> Period:
    """ "after 2020", "since Q3 2024", "before March 2025": the period a bound word before it opens."""
    match = BOUND.search(before)
    if not match:
        return period
    word = match.group(1)
    if word == "after":
        return Period(start=period.end, end=OPEN_END, label=f"after {period.label}")
    if word in ("since", "as of"):
        return Period(start=period.start, end=OPEN_END, label=f"since {period.label}")
    if word in ("before", "prior to"):
        return Period(start=OPEN_START, end=period.start, label=f"before {period.label}")
    return Period(start=OPEN_START, end=period.end, label=f"up to {period.label}")


def _relative(which: str, unit: str, last: dt.date) -> Period:
    """ "last quarter": the data's last whole period of that kind ("this quarter": the one its last date is in)."""
    current = which in ("this", "current")
    if unit == "year":
        period = _year(last.year)
        whole = last >= dt.date(last.year, 12, 1)
        return period if current or whole else _year(last.year - 1)
    if unit == "quarter":
        q = (last.month - 1) // 3 + 1
        period = _quarter(last.year, q)
        if current or (last.month == q * 3 and last.day >= 28):
            return period
        return _quarter(last.year - (q == 1), 4 if q == 1 else q - 1)
    if unit == "month":
        return _month(last.year, last.month)  # the data's latest month
    start = last - dt.timedelta(days=last.weekday())
    return Period(start=start, end=start + dt.timedelta(days=7), label=f"the week of {start.isoformat()}")


def _months_so_far(month: int, year: int) -> str:
    """`January to October 2025`: a year's months up to one."""
    return f"{MONTHS[month - 1].title()} {year}" if month == 1 else f"January to {MONTHS[month - 1].title()} {year}"


def _span(periods: list[Period]) -> Period:
    start, end = min(p.start for p in periods), max(p.end for p in periods)
    return Period(start=start, end=end, label=f"{periods[0].label} to {periods[-1].label}")


def _before(period: Period) -> Period:
    """The period of the same length just before one (a year, a quarter, a month, or as many days)."""
    months = (period.end.year - period.start.year) * 12 + period.end.month - period.start.month
    if period.start.day == 1 and period.end.day == 1 and months in (1, 3, 6, 12):
        start = _next_month(period.start.year, period.start.month, -months)
        if months == 12:
            return _year(start.year)
        if months == 3:
            return _quarter(start.year, (start.month - 1) // 3 + 1)
        if months == 1:
            return _month(start.year, start.month)
        return Period(start=start, end=period.start, label=f"the six months before {period.label}")
    days = period.end - period.start
    return Period(start=period.start - days, end=period.start, label=f"the {days.days} days before {period.label}")


def _comparison(
    periods: list[Period], dataset: Dataset, date_column: Column | None, grain: str | None
) -> Comparison | None:
    if len(periods) >= 2:
        return Comparison(previous=periods[0], current=periods[-1])
    if date_column is None:
        return None
    bounds = date_bounds(dataset, date_column.name)
    if bounds is None:
        return None
    first, last = bounds
    if len(periods) == 1:
        current = periods[0]
    elif grain == "quarter":
        current = _relative("last", "quarter", last)
    elif grain == "month":
        current = _relative("last", "month", last)
    elif last.year > first.year:
        current = _relative("last", "year", last)
        if current.end <= first.replace(year=first.year + 1, month=1, day=1) or last < dt.date(last.year, 12, 1):
            # The last year is not whole: its months so far against the same months a year before.
            end = last + dt.timedelta(days=1)
            current = Period(start=dt.date(last.year, 1, 1), end=end, label=_months_so_far(last.month, last.year))
            earlier = dt.date(last.year - 1, last.month, min(last.day, 28))
            return Comparison(
                previous=Period(
                    start=dt.date(last.year - 1, 1, 1),
                    end=earlier + dt.timedelta(days=1),
                    label=_months_so_far(last.month, last.year - 1),
                ),
                current=current,
            )
    elif (last.month - 1) // 3 > (first.month - 1) // 3:
        current = _relative("last", "quarter", last)
    else:
        current = _relative("last", "month", last)
    previous = _before(current)
    if previous.end <= first:
        return None
    return Comparison(previous=previous, current=current)
