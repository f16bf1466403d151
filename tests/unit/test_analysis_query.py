"""The typed analysis query (analysis/query.py), questions read into it (analysis/questions.py), the answer's
sentences (analysis/answers.py) and instructions that revise it (analysis/instructions.py), over small tables
whose answers are computed here by hand or in plain Python."""

from __future__ import annotations

import datetime as dt
import json
import statistics

import pytest

from canvas_core.analysis.answers import answer_questions
from canvas_core.analysis.engine import AnalysisError, load_file, load_rows
from canvas_core.analysis.query import AnalysisQuery, Comparison, Filter, Measure, Period, Ranking, run_query
from canvas_core.analysis.questions import read_question, split_questions
from canvas_core.providers.structured import complete_structured
from tests.fakes.recording_provider import RecordingProvider

pytestmark = pytest.mark.unit

ROWS = [
    # shop, city, day, visits, takings
    ["O'Brien's", "Cork", dt.date(2024, 3, 1), 10, 100.0],
    ["O'Brien's", "Cork", dt.date(2025, 3, 1), 30, 160.0],
    ["Harbour Street", "Dublin", dt.date(2024, 6, 1), 20, 400.0],
    ["Harbour Street", "Dublin", dt.date(2025, 6, 1), 25, 472.0],
    ["Mill Lane", "Dublin", dt.date(2024, 9, 1), 5, 50.0],
    ["Mill Lane", "Dublin", dt.date(2025, 9, 1), 4, 45.0],
    ["Mill Lane", "Dublin", dt.date(2025, 10, 1), 6, 70.0],
]


def shops():
    return load_rows("shops.csv", ["shop", "city", "day", "visits", "takings"], [list(r) for r in ROWS])


def first_line(dataset, question: str, instructions: str = "") -> str:
    return answer_questions([dataset], question, instructions).text.split("\n")[0]


def test_each_aggregate_equals_what_the_rows_give():
    # Given the table and each aggregate computed here
    dataset = shops()
    takings = [r[4] for r in ROWS]
    expected = {
        "sum": sum(takings),
        "mean": statistics.mean(takings),
        "median": statistics.median(takings),
        "min": min(takings),
        "max": max(takings),
    }
    for aggregate, value in expected.items():
        # When the query runs
        query = AnalysisQuery(table="shops.csv", measure=Measure(aggregate=aggregate, column="takings"))
        result = run_query(dataset, query)
        # Then its one figure is that value
        assert result.rows == [[pytest.approx(value)]], aggregate
    distinct = run_query(dataset, AnalysisQuery(table="s", measure=Measure(aggregate="count_distinct", column="city")))
    assert distinct.rows == [[2]]


def test_values_are_bound_so_a_quote_in_a_filter_is_a_value_not_sql():
    # Given a shop whose name holds a quote, and a value written as an injection
    dataset = shops()
    kept = AnalysisQuery(
        table="s", measure=Measure(column="takings"), filters=[Filter(column="shop", values=["O'Brien's"])]
    )
    hostile = AnalysisQuery(
        table="s", measure=Measure(column="takings"), filters=[Filter(column="shop", values=["x') OR 1=1 --"])]
    )
    # Then the first keeps that shop's rows and the second none
    assert run_query(dataset, kept).rows == [[260]]
    assert run_query(dataset, hostile).rows == [[None]]


def test_a_comparison_per_group_gives_both_periods_the_change_and_the_percent():
    # Given 2025 against 2024 per shop, ranked by the change
    year = lambda y: Period(start=dt.date(y, 1, 1), end=dt.date(y + 1, 1, 1), label=str(y))  # noqa: E731
    query = AnalysisQuery(
        table="s",
        measure=Measure(column="takings"),
        dimensions=["shop"],
        date_column="day",
        compare=Comparison(previous=year(2024), current=year(2025)),
        rank=Ranking(count=50, by_change=True),
    )
    rows = run_query(shops(), query).rows
    # Then the fastest grower is first, with its figures, and the largest change in money is not what ranks them
    assert rows[0] == ["Mill Lane", 50, 115, 65, pytest.approx(1.3)]
    assert rows[1] == ["O'Brien's", 100, 160, 60, pytest.approx(0.6)]
    assert rows[2] == ["Harbour Street", 400, 472, 72, pytest.approx(0.18)]


def test_a_query_naming_what_the_table_lacks_is_refused_with_the_reason():
    query = AnalysisQuery(table="s", measure=Measure(column="profit"), dimensions=["region"])
    with pytest.raises(AnalysisError, match=r"'profit' is not a column.*'region' is not a column"):
        run_query(shops(), query)


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Which shop grew most from 2024 to 2025?", "Mill Lane grew the most from 2024 to 2025: total takings +130 %"),
        ("Which shop's visits grew fastest in 2025?", "O'Brien's grew the most from 2024 to 2025: total visits +200 %"),
        ("What were total takings in Dublin?", "The total takings in Dublin is 1,037"),
        ("What is the median takings in 2025?", "The median takings in 2025 is 115.00"),
        ("How many different shops are there?", "The number of different shop values is 3"),
        ("Which city had the fewest visits?", "Cork has the lowest total visits: 40"),
        ("What share of takings came from Cork?", "Cork accounts for 20 % of takings"),
        ("Takings excluding Cork", "The total takings excluding Cork is 1,037"),
        ("How many rows had more than 10 visits?", "is 3"),
        ("Takings between 2025-01-01 and 2025-06-30", "The total takings in 2025-01-01 to 2025-06-30 is 632"),
        ("Takings in the third quarter of 2025", "The total takings in Q3 2025 is 45"),
        ("What were takings last month?", "The total takings in October 2025 is 70"),
        ("Which shop had the lowest takings after 2024?", "Mill Lane has the lowest total takings after 2024: 115"),
        ("What is the average monthly takings?", "The average takings per month is 185.29"),
        (
            "Takings by shop, excluding Mill Lane",
            "by shop excluding Mill Lane: Harbour Street (872.00); O'Brien's (260",
        ),
        ("Which was the worst quarter for takings?", "2025-Q3 has the lowest total takings: 45"),
        ("Compare Q1 and Q2 2025 takings", "rose from Q1 2025 to Q2 2025 by 195 %: 160.00 to 472.00"),
        (
            "What's the YoY growth?",
            "rose from January to October 2024 to January to October 2025 by 35.8 %: 550.00 to 747.00",
        ),
        (
            "Takings per city for Harbour Street and Mill Lane only",
            "by city in Harbour Street or Mill Lane: Dublin (1,037",
        ),
        (
            "How did takings change quarter over quarter in 2025?",
            "2025-Q1: 160.00; 2025-Q2: 472.00 (+195 %); 2025-Q3: 45.00 (-90.5 %); 2025-Q4: 70.00 (+55.6 %)",
        ),
    ],
)
def test_questions_are_answered_first_with_their_number(question, expected):
    line = first_line(shops(), question)
    assert expected in line, line


@pytest.mark.parametrize(
    ("question", "missing"),
    [
        ("What is the profit margin by city?", "no column for profit margin"),
        ("Total takings in March 2023", "March 2023 is outside the data, which covers 2024-03-01 to 2025-10-01"),
        ("What is the average basket size per shop?", "no column for basket size"),
        ("What is the takings margin by city?", "asks for a margin of takings"),
    ],
)
def test_a_question_the_data_cannot_answer_says_so_and_names_what_is_missing(question, missing):
    line = first_line(shops(), question)
    assert "cannot be answered" in line and missing in line, line


def test_a_prompt_of_several_questions_gets_a_line_each_in_order_and_other_requests_none():
    # Given a prompt of two questions and a request that is not a question of the table
    prompt = "Takings by city, with the top shop per city. Also write it up nicely for the team."
    # When answered
    answers = answer_questions([shops()], prompt)
    # Then each question has its line; the top shop within each city is named with its figure
    assert [a.status for a in answers.items] == ["answered", "answered"]
    assert answers.items[0].sentence.startswith("The total takings by city: Dublin (1,037.00); Cork (260.00)")
    assert "Cork: O'Brien's (260.00)" in answers.items[1].sentence
    assert "Dublin: Harbour Street (872.00)" in answers.items[1].sentence
    assert split_questions("Spreadsheet of tidal ranges") == ["Spreadsheet of tidal ranges"]
    assert answer_questions([shops()], "Spreadsheet of shops").items == []


def test_instructions_revise_the_filter_and_the_aggregate():
    # Given a question by shop
    question = "What are the total takings by shop?"
    # When revised to one city only, then to medians
    only = first_line(shops(), question, "Focus on Cork only")
    medians = first_line(shops(), question, "Use the median instead")
    # Then the figures are that city's, then the medians
    assert only.startswith("The total takings by shop in Cork: O'Brien's (260.00)"), only
    assert "Harbour Street" not in only
    assert medians.startswith("The median takings by shop: Harbour Street (436.00)"), medians


def test_the_table_a_question_is_about_is_the_one_it_names():
    # Given a workbook-like pair of tables
    staff = load_rows("book.xlsx, sheet Staff", ["name", "team", "hired"], [["A", "North", 2021], ["B", "South", 2022]])
    # When a question names the shops' columns, another the staff's
    shop_question = read_question("Total visits by city", [staff, shops()])
    staff_question = read_question("How many staff per team?", [staff, shops()])
    # Then each is read over its own table
    assert shop_question.dataset is not None and shop_question.dataset.name == "shops.csv"
    assert staff_question.dataset is not None and staff_question.dataset.name == "book.xlsx, sheet Staff"


def test_awkward_tables_get_an_answer_never_an_error():
    # Dates in three formats, amounts as text with a currency symbol
    mixed = b'when,amount\n2025-01-05,"$1,200.50"\n06/02/2025,$30.00\n7 Mar 2025,$5\n'
    [dataset] = load_file("mixed.csv", "csv", mixed)
    assert first_line(dataset, "Total amount in February 2025") == (
        "The total amount in February 2025 is 30.00 USD (computed over 1 rows of mixed.csv)."
    )
    # One row, and no rows
    one = load_rows("one.csv", ["item", "price"], [["tea", 2.5]])
    assert "2.50" in first_line(one, "What is the average price?")
    empty = load_rows("empty.csv", ["item", "price"], [])
    assert "cannot" in first_line(empty, "What is the average price?")


def asking(reply: str, shown: list[str]):
    """A structured ask answered by a text-only model with `reply`, recording the prompts it was shown."""

    def ask(prompt: str, schema):
        shown.append(prompt)
        model = RecordingProvider(answers=[reply])
        return complete_structured(model, system="", prompt=prompt, role="analyst", schema=schema).value

    return ask


def test_a_models_query_is_used_when_it_fits_its_table_and_never_sees_the_rows():
    # Given a model that reads the question into a median by city, and records what it was shown
    shown: list[str] = []

    query = {"table": "shops.csv", "measure": {"aggregate": "median", "column": "takings"}, "dimensions": ["city"]}
    reply = json.dumps({"query": query})

    # When a question is answered with it
    answers = answer_questions([shops()], "What do shops typically take in each city?", ask=asking(reply, shown))
    # Then its query computed the answer, and it saw the columns and a few values, not the rows
    assert answers.items[0].sentence.startswith("The median takings by city: Cork (130.00); Dublin (70.00)")
    assert answers.notes == []
    assert "takings: number" in shown[0] and "472" not in shown[0]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I think the answer is 42", "the answer holds no valid JSON"),
        ('{"query": {"table": "shops.csv", "measure": {"column": "profit"}}}', "'profit' is not a column"),
        ('{"query": {"table": "other.csv", "measure": {"aggregate": "sum"}}}', "names the table 'other.csv'"),
        ('{"query": {"table": "shops.csv", "measure": {"aggregate": "mode"}}}', "query.measure.aggregate"),
        ('{"query": null, "cannot": "no idea"}', "the model said the data cannot answer it (no idea)"),
    ],
)
def test_a_models_query_that_does_not_fit_is_refused_and_the_rules_answer_saying_why(reply, reason):
    answers = answer_questions([shops()], "What were total takings in Dublin?", ask=asking(reply, []))
    assert answers.items[0].sentence.startswith("The total takings in Dublin is 1,037"), answers.items[0].sentence
    assert len(answers.notes) == 1 and reason in answers.notes[0] and "rules read the question" in answers.notes[0]
