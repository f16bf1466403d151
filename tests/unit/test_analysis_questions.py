"""The analyst question suite (bench/questions.py): the scorer tells a right answer from a wrong one and from a
refusal, the truths are what a few hand-made rows add up to, and the real analysis answers the suite's questions
(none silently wrong, at least 85 % right, every unanswerable one refused) and answers a question over a badly
formed table with a line rather than an error."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from bench.questions import (
    CANNOT,
    CORRECT,
    SAID_UNANSWERABLE,
    SILENTLY_WRONG,
    Expected,
    Question,
    Score,
    answer,
    bad_inputs,
    change,
    figures,
    judge,
    median,
    month,
    order_questions,
    percentile,
    quarter,
    questions,
    ranked,
    score,
    support_questions,
    tables,
    weather_questions,
)
from canvas_core.analysis.engine import load_file

pytestmark = pytest.mark.unit


def written(value: float) -> str:
    """A number as the answers write it: thousands separated, two decimals unless whole."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def truthful(question: Question) -> str:
    """A fake answer that states the truth the way the engine writes it, then a second line."""
    expected = question.expected
    if expected.cannot:
        return "The data cannot answer this: no such column or period.\nColumns: a, b."
    parts = [*expected.labels, *map(written, expected.numbers), *(f"{p:+.1f} %" for p in expected.percents)]
    return f"{', '.join(parts)}.\nMore detail follows."


def off_by_a_tenth(question: Question) -> str:
    """A fake answer with the right labels and every number 10 % too high; a number where it should refuse."""
    expected = question.expected
    if expected.cannot:
        return "It was 42."
    wrong = Expected(
        tuple(n * 1.1 + 1 for n in expected.numbers),
        tuple(p * 1.1 + 1 for p in expected.percents),
        expected.labels,
    )
    return truthful(Question(question.kind, question.table, question.text, wrong))


def refusing(question: Question) -> str:
    return "I cannot answer that from these columns."


def by_text(suite: list[Question], text: str) -> Expected:
    [found] = [q.expected for q in suite if q.text == text]
    return found


def close(values: tuple[float, ...], wanted: list[float]) -> bool:
    return values == pytest.approx(tuple(wanted), abs=1e-6)


# ---- the suite's shape -------------------------------------------------------------------------------------------


def test_the_suite_asks_at_least_60_questions_of_12_kinds_over_three_tables():
    # When
    suite = questions()
    kinds = Counter(q.kind for q in suite)
    # Then
    assert len(suite) >= 60
    assert len(kinds) >= 12
    assert {q.table for q in suite} == {"orders.csv", "support.xlsx", "weather.csv"}
    assert kinds["cannot"] >= 5
    assert all(q.expected.cannot or q.expected.numbers or q.expected.percents for q in suite)
    assert len({q.text for q in suite}) == len(suite)


def test_the_tables_make_the_largest_differ_from_the_fastest_growing_and_the_longest_on_average():
    # Given
    suite = questions()
    # Then: the region with the most revenue is not the one that grew fastest, and the category with the most
    # minutes in total is not the one whose tickets take longest
    assert (
        by_text(suite, "Which region had the largest revenue?").labels
        != by_text(suite, "Which region grew fastest from 2024 to 2025?").labels
    )
    assert (
        by_text(suite, "Which category took the most minutes in total?").labels
        != by_text(suite, "Which category has the highest average minutes to resolve per ticket?").labels
    )


def test_the_suite_files_load_with_every_generated_row_and_one_table_per_sheet():
    # When
    loaded = {name: load_file(t.name, t.extension, t.data) for name, t in tables().items()}
    # Then
    assert [(d.name, d.rows) for d in loaded["orders.csv"]] == [("orders.csv", 5_000)]
    assert [(d.name, d.rows) for d in loaded["support.xlsx"]] == [
        ("support.xlsx, sheet Tickets", 1_200),
        ("support.xlsx, sheet Agents", 10),
    ]
    assert [(d.name, d.rows) for d in loaded["weather.csv"]] == [("weather.csv", 6 * 365)]


# ---- the scorer --------------------------------------------------------------------------------------------------


def test_an_answerer_that_states_the_truth_is_correct_on_every_question():
    # When
    result = score(questions(), truthful)
    # Then
    assert result.correct == result.total, result.report()
    assert (result.silently_wrong, result.said_unanswerable, result.correct_share) == (0, 0, 1.0)


def test_an_answerer_with_wrong_numbers_is_silently_wrong_on_every_question():
    # When
    result = score(questions(), off_by_a_tenth)
    # Then
    assert result.silently_wrong == result.total
    assert result.correct == 0


def test_an_answerer_that_refuses_is_correct_only_where_the_data_cannot_answer():
    # Given
    suite = questions()
    # When
    result = score(suite, refusing)
    # Then
    unanswerable = sum(q.expected.cannot for q in suite)
    assert result.correct == unanswerable
    assert result.said_unanswerable == result.total - unanswerable
    assert result.silently_wrong == 0
    assert all(o.verdict == CORRECT for o in result.outcomes if o.question.expected.cannot)


def test_figures_are_read_with_their_sign_separators_decimals_and_percent():
    # When
    found = figures("Iberia grew +13.9 % to 1,234.56 USD, France -2.0 %; Q3 2025 had 12,000 orders (3.5%).")
    # Then
    assert [(f.value, f.decimals, f.percent) for f in found] == [
        (13.9, 1, True),
        (1234.56, 2, False),
        (-2.0, 1, True),
        (2025, 0, False),
        (12000, 0, False),
        (3.5, 1, True),
    ]


@pytest.mark.parametrize(
    ("opening", "verdict"),
    [
        ("Revenue was 1,234.56.", CORRECT),
        ("Revenue was 1,234.6.", CORRECT),  # the truth rounded to the decimals shown
        ("Revenue was 1,235.", CORRECT),
        ("Revenue was 1,235.50.", CORRECT),  # within 0.1 %
        ("Revenue was 1,240.", SILENTLY_WRONG),
        ("Revenue was 1,234.56 %.", SILENTLY_WRONG),  # a percentage is not the amount
        ("Revenue: cannot be computed.", SAID_UNANSWERABLE),
        ("", SILENTLY_WRONG),
        ("Revenue by region:\nRevenue was 1,234.56.", SILENTLY_WRONG),  # only the first line counts
    ],
)
def test_a_number_matches_to_the_decimals_shown_or_within_a_tenth_of_a_percent(opening, verdict):
    # Given
    question = Question("total", "t.csv", "Total revenue?", answer([1234.56]))
    # When
    outcome = judge(question, opening)
    # Then
    assert outcome.verdict == verdict


@pytest.mark.parametrize(
    ("opening", "verdict"),
    [
        ("Iberia grew fastest, +41.1 %.", CORRECT),
        ("Iberia grew fastest (+41.1 %), ahead of Nordics (+27.0 %).", CORRECT),
        ("Nordics (+27.0 %) and Iberia (+41.1 %) grew.", SILENTLY_WRONG),  # another group named first
        ("Iberia grew fastest, -41.1 %.", SILENTLY_WRONG),  # the sign is part of a change
        ("Iberia grew fastest, 41.1.", SILENTLY_WRONG),  # a change is a percentage
        ("Iberian stores grew +41.1 %.", SILENTLY_WRONG),  # a label is a whole word
        ("IBERIA: +41.1 %", CORRECT),
    ],
)
def test_a_group_answer_names_the_group_first_and_its_signed_change(opening, verdict):
    # Given
    expected = answer(percents=[41.08], labels=["Iberia"], rivals=["Iberia", "Nordics", "DACH"])
    question = Question("group_growth", "t.csv", "Which region grew fastest?", expected)
    # When
    outcome = judge(question, opening)
    # Then
    assert outcome.verdict == verdict


def test_a_question_the_data_cannot_answer_is_correct_only_when_the_answer_says_cannot():
    # Given
    question = Question("cannot", "t.csv", "What was the profit margin?", CANNOT)
    # Then
    assert judge(question, "The table cannot give a profit margin: it has no cost column.").verdict == CORRECT
    assert judge(question, "Profit margin was 12.5 %.").verdict == SILENTLY_WRONG


def test_the_report_lists_each_question_not_answered_correctly_with_its_opening():
    # Given
    suite = [
        Question("total", "t.csv", "Total revenue?", answer([10])),
        Question("count", "t.csv", "How many orders?", answer([3])),
    ]
    # When
    result = score(suite, lambda q: "10 in total." if q.kind == "total" else "There are 4 orders.")
    # Then
    assert [o.question.text for o in result.wrong()] == ["How many orders?"]
    assert "How many orders?" in result.report()
    assert "There are 4 orders." in result.report()
    assert "Total revenue?" not in result.report()


# ---- the truths --------------------------------------------------------------------------------------------------


def order(day: str, region: str, product: str, channel: str, units: int, price: float) -> dict[str, Any]:
    return {
        "order_id": f"O-{day}",
        "order_date": dt.date.fromisoformat(day),
        "region": region,
        "product": product,
        "channel": channel,
        "units": units,
        "unit_price": price,
        "revenue": round(units * price, 2),
    }


TINY_ORDERS = [
    order("2024-02-10", "Nordics", "Desk Lamp", "Online", 2, 40.00),  # 80
    order("2024-07-15", "DACH", "Office Chair", "Retail", 1, 250.00),  # 250
    order("2024-11-03", "Iberia", "Keyboard", "Partner", 12, 60.00),  # 720
    order("2025-03-20", "Nordics", "Office Chair", "Online", 2, 240.00),  # 480
    order("2025-03-05", "DACH", "Desk Lamp", "Online", 3, 35.00),  # 105
    order("2025-08-01", "Iberia", "Keyboard", "Retail", 5, 55.00),  # 275
    order("2025-12-31", "Nordics", "Desk Lamp", "Partner", 11, 38.00),  # 418
]


@pytest.mark.parametrize(
    ("text", "numbers", "percents", "labels"),
    [
        ("What was the total revenue?", [2328], [], []),
        ("How many units were sold in total?", [36], [], []),
        ("What was the revenue in the Nordics?", [978], [], []),
        ("What was the total revenue in 2024?", [1050], [], []),
        ("Revenue in Q3 2025", [275], [], []),
        ("How much did we sell in March 2025?", [585], [], []),
        ("Total revenue between 2024-06-01 and 2024-08-31", [250], [], []),
        ("Units sold in the first quarter of 2024", [2], [], []),
        ("Which region has the highest average revenue per order?", [497.5], [], ["Iberia"]),
        ("Which product has the lowest average unit price?", [113 / 3], [], ["Desk Lamp"]),
        ("Which channel has the highest median revenue per order?", [569], [], ["Partner"]),
        ("What is the 90th percentile of revenue per order?", [576], [], []),
        ("How many orders were placed in 2025?", [4], [], []),
        ("How many different products are there?", [3], [], []),
        ("What share of revenue came from online?", [], [665 / 2328 * 100], []),
        ("How much did revenue grow from 2024 to 2025?", [], [228 / 1050 * 100], []),
        ("Which region grew fastest from 2024 to 2025?", [], [1022.5], ["Nordics"]),
        ("Which product had the slowest revenue growth between 2024 and 2025?", [], [-445 / 720 * 100], ["Keyboard"]),
        ("Which channel's units grew the most from 2024 to 2025?", [], [400], ["Retail"]),
        ("Which product sold the most units?", [17], [], ["Keyboard"]),
        ("Top 3 regions by revenue", [995, 978, 355], [], ["Iberia", "Nordics", "DACH"]),
        (
            "Top product per region by revenue",
            [498, 250, 995],
            [],
            ["Nordics", "DACH", "Iberia", "Desk Lamp", "Office Chair", "Keyboard"],
        ),
        ("How many orders had more than 10 units?", [2], [], []),
        ("What was the revenue from orders with more than 10 units?", [1138], [], []),
    ],
)
def test_the_order_truths_are_what_seven_orders_add_up_to_by_hand(text, numbers, percents, labels):
    # Given seven orders whose sums are worked out by hand in the comments
    # When the suite's questions are built over them
    expected = by_text(order_questions(TINY_ORDERS), text)
    # Then
    assert close(expected.numbers, numbers)
    assert close(expected.percents, percents)
    assert sorted(expected.labels) == sorted(labels)


def ticket(opened: str, category: str, priority: str, agent: str, minutes: int) -> dict[str, Any]:
    start = dt.datetime.fromisoformat(opened)
    return {
        "ticket_id": f"T-{opened}",
        "category": category,
        "priority": priority,
        "agent": agent,
        "opened": start,
        "closed": start + dt.timedelta(minutes=minutes),
        "minutes_to_resolve": minutes,
    }


TINY_TICKETS = [
    ticket("2025-04-02 09:00", "Billing", "High", "K. Nowak", 40),
    ticket("2025-05-10 10:00", "Billing", "Low", "A. Berg", 50),
    ticket("2025-01-15 08:00", "Billing", "Urgent", "K. Nowak", 60),
    ticket("2025-06-20 14:00", "Technical", "High", "A. Berg", 120),
    ticket("2025-05-31 23:30", "Login", "Medium", "K. Nowak", 10),
]
TINY_AGENTS = [
    {"agent": "K. Nowak", "team": "Frontline", "hired": dt.date(2023, 3, 1), "csat_score": 4.5},
    {"agent": "A. Berg", "team": "Frontline", "hired": dt.date(2021, 6, 1), "csat_score": 4.1},
    {"agent": "J. Smith", "team": "Specialists", "hired": dt.date(2023, 9, 15), "csat_score": 3.9},
]


@pytest.mark.parametrize(
    ("text", "numbers", "percents", "labels"),
    [
        ("How many minutes did we spend resolving tickets in total?", [280], [], []),
        ("How many minutes went into tickets opened in Q2 2025?", [220], [], []),
        ("Which category took the most minutes in total?", [150], [], ["Billing"]),
        ("Which category has the highest average minutes to resolve per ticket?", [120], [], ["Technical"]),
        ("For which priority is the median minutes to resolve lowest?", [10], [], ["Medium"]),
        ("What is the 90th percentile of minutes to resolve?", [96], [], []),
        ("Number of tickets opened in May 2025", [2], [], []),
        ("What percentage of tickets are Billing tickets?", [], [60], []),
        ("What share of the minutes to resolve went to Technical tickets?", [], [120 / 280 * 100], []),
        ("How many tickets were resolved in under 30 minutes?", [1], [], []),
        (
            "Which agent handled the most tickets in each category?",
            [2, 1, 1],
            [],
            ["Billing", "Technical", "Login", "K. Nowak", "A. Berg"],
        ),
        ("What is the average csat score by team?", [4.3, 3.9], [], ["Frontline", "Specialists"]),
        ("How many agents were hired in 2023?", [2], [], []),
    ],
)
def test_the_support_truths_are_what_five_tickets_and_three_agents_add_up_to_by_hand(text, numbers, percents, labels):
    # When
    expected = by_text(support_questions(TINY_TICKETS, TINY_AGENTS), text)
    # Then
    assert close(expected.numbers, numbers)
    assert close(expected.percents, percents)
    assert sorted(expected.labels) == sorted(labels)


def reading(station: str, city: str, day: str, temperature: float, rainfall: float) -> dict[str, Any]:
    return {
        "station": station,
        "city": city,
        "date": dt.date.fromisoformat(day),
        "temperature_c": temperature,
        "rainfall_mm": rainfall,
    }


TINY_READINGS = [
    reading("Bergen Florida", "Bergen", "2025-01-01", 2.0, 10.0),
    reading("Bergen Florida", "Bergen", "2025-10-01", 8.0, 12.5),
    reading("Oslo Blindern", "Oslo", "2025-01-01", -5.0, 0.0),
    reading("Oslo Blindern", "Oslo", "2025-07-01", 20.0, 3.0),
    reading("Helsinki Vantaa", "Helsinki", "2025-02-01", -9.5, 1.0),
]


@pytest.mark.parametrize(
    ("text", "numbers", "percents", "labels"),
    [
        ("What was the total rainfall?", [26.5], [], []),
        ("How much rain fell in October 2025 across all stations?", [12.5], [], []),
        ("What was the average temperature in Oslo?", [7.5], [], []),
        ("Which city had the highest average temperature?", [7.5], [], ["Oslo"]),
        ("Which station was coldest on average in January 2025?", [-5], [], ["Oslo Blindern"]),
        ("Which city has the highest median daily rainfall?", [11.25], [], ["Bergen"]),
        ("What share of the rainfall fell in Bergen?", [], [22.5 / 26.5 * 100], []),
        ("How many readings had more than 10 mm of rainfall?", [1], [], []),
        ("Total rainfall on days with a temperature below 0", [1.0], [], []),
    ],
)
def test_the_weather_truths_average_temperatures_and_add_up_rainfall(text, numbers, percents, labels):
    # When
    expected = by_text(weather_questions(TINY_READINGS), text)
    # Then
    assert close(expected.numbers, numbers)
    assert close(expected.percents, percents)
    assert sorted(expected.labels) == sorted(labels)


def test_the_helpers_interpolate_percentiles_bound_periods_and_refuse_ties():
    # Then
    assert median([3, 1, 2, 10]) == 2.5
    assert percentile([10, 20, 30, 40, 50], 90) == pytest.approx(46)
    assert percentile([7], 90) == 7
    assert change(200, 150) == -25
    rows = [{"d": dt.date(2024, m, 28 if m == 2 else 30)} for m in range(1, 13)] + [{"d": dt.date(2024, 2, 29)}]
    assert len(month(rows, "d", 2024, 2)) == 2
    assert len(month(rows, "d", 2024, 12)) == 1
    assert [r["d"].month for r in quarter(rows, "d", 2024, 4)] == [10, 11, 12]
    with pytest.raises(ValueError, match="tie"):
        ranked({"a": 3, "b": 3, "c": 1})
    assert ranked({"a": 1, "b": 1, "c": 3}) == [("c", 3), ("a", 1), ("b", 1)]  # a tie below the answer is fine


# ---- the real analysis -------------------------------------------------------------------------------------------


def answer_questions_or_skip() -> Callable[..., Any]:
    """The analysis's answer_questions; the test is skipped only while that function does not exist yet."""
    try:
        from canvas_core.analysis.analyse import answer_questions
    except ImportError as exc:
        if exc.name == "canvas_core.analysis.analyse" and "answer_questions" in str(exc):
            pytest.skip("canvas_core.analysis.analyse has no answer_questions yet")
        raise
    return answer_questions  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def suite_score() -> Score:
    answer_questions_or_skip()
    from bench.analysis_questions import run_suite

    return run_suite()


def test_the_analysis_answers_the_suite_without_a_silently_wrong_answer(suite_score):
    # Given the suite asked of the real analysis (bench/analysis_questions.py)
    # Then no answer is wrong without saying so, and the failures are listed with the openings they got
    assert suite_score.silently_wrong == 0, suite_score.report()


def test_the_analysis_answers_at_least_85_percent_of_the_suite_correctly(suite_score):
    # Then
    assert suite_score.correct_share >= 0.85, f"{suite_score.correct}/{suite_score.total}\n{suite_score.report()}"


def test_the_analysis_says_cannot_to_every_question_the_data_cannot_answer(suite_score):
    # Then
    answered = [
        f"{o.question.text} got: {o.opening}"
        for o in suite_score.outcomes
        if o.question.expected.cannot and o.verdict != CORRECT
    ]
    assert answered == []


# ---- bad input ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", bad_inputs(), ids=lambda b: f"{b.table.name}: {b.question}")
def test_a_badly_formed_table_loads(bad):
    # When
    datasets = load_file(bad.table.name, bad.table.extension, bad.table.data)
    # Then
    assert len(datasets) == 1
    assert [c.name for c in datasets[0].columns] == bad.table.data.decode().splitlines()[0].split(",")


@pytest.mark.parametrize("bad", bad_inputs(), ids=lambda b: f"{b.table.name}: {b.question}")
def test_a_question_over_a_badly_formed_table_gets_an_answer_line(bad):
    # Given
    answer_questions = answer_questions_or_skip()
    datasets = load_file(bad.table.name, bad.table.extension, bad.table.data)
    # When
    answers = answer_questions(datasets, bad.question)
    # Then the first line gives a number or says it cannot
    opening = answers.text.strip().splitlines()[0]
    assert figures(opening) or "cannot" in opening.lower(), opening
    assert len(answers.items) == 1
