"""canvas_core/analysis: tables loaded into DuckDB, the plan chosen by rules from the prompt's words and the
columns (or by a model, checked, with the rules as the fallback), and results that equal what the rows add up
to, computed here from the generated rows."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import random
from collections import defaultdict

import pytest
from openpyxl import load_workbook

from canvas_core.analysis.analyse import analyse
from canvas_core.analysis.engine import AnalysisError, load_file, load_rows, run_plan
from canvas_core.analysis.findings import number, percent
from canvas_core.analysis.plan import AnalysisPlan, Measure, check_plan
from canvas_core.analysis.rules import plan_by_rules
from canvas_core.providers.structured import complete_structured
from canvas_core.render.xlsx import DataSheet, WorkbookSpec, check_xlsx, render_workbook
from tests.fakes.recording_provider import RecordingProvider

pytestmark = pytest.mark.unit

STORES = ["Harbour", "Station", "Mall", "Airport", "Old Town"]
CATEGORIES = ["Coffee", "Tea", "Pastry"]


def orders(count: int = 400, seed: int = 11) -> list[dict]:
    rnd = random.Random(seed)
    start = dt.date(2024, 1, 1)
    return [
        {
            "order_date": (start + dt.timedelta(days=rnd.randrange(365))).isoformat(),
            "store": rnd.choice(STORES),
            "category": rnd.choice(CATEGORIES),
            "quantity": rnd.randint(1, 9),
            "net_sales_usd": rnd.randint(100, 9_999),
            "unit_price": round(rnd.uniform(1, 6), 2),
        }
        for _ in range(count)
    ]


def as_csv(rows: list[dict]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def totals_by(rows: list[dict], key: str, measure: str) -> dict[str, float]:
    found: dict[str, float] = defaultdict(int)
    for row in rows:
        found[row[key]] += row[measure]
    return dict(found)


def test_the_rules_read_the_measure_dimension_and_grain_the_prompt_names():
    # Given
    [dataset] = load_file("orders.csv", "csv", as_csv(orders()))
    # When
    plan = plan_by_rules("Quarterly net sales by store, top 2 please", dataset.columns)
    # Then
    assert plan is not None
    assert plan.measures[0] == Measure(column="net_sales_usd", aggregate="sum")
    assert Measure(column="unit_price", aggregate="avg") not in plan.measures[:1]
    assert plan.dimensions == ["store"]
    assert (plan.period, plan.grain, plan.top_n) == ("order_date", "quarter", 2)


def test_prices_are_averaged_and_an_average_asked_for_is_averaged():
    [dataset] = load_file("orders.csv", "csv", as_csv(orders()))
    plan = plan_by_rules("average quantity per category", dataset.columns)
    assert plan is not None
    assert plan.measures[0] == Measure(column="quantity", aggregate="avg")
    assert plan.dimensions == ["category"]


def test_breakdowns_shares_and_series_equal_what_the_rows_add_up_to():
    # Given
    rows = orders()
    [dataset] = load_file("orders.csv", "csv", as_csv(rows))
    # When
    analysis = analyse(dataset, "monthly net sales by store and category")
    # Then the breakdown by store is each store's sum, largest first, with its share of the whole
    assert analysis is not None
    expected = totals_by(rows, "store", "net_sales_usd")
    whole = sum(expected.values())
    [by_store] = [r for r in analysis.results if r.kind == "breakdown" and r.headers[0] == "store"]
    assert [r[0] for r in by_store.rows] == sorted(expected, key=lambda k: -expected[k])
    assert {r[0]: r[1] for r in by_store.rows} == expected
    assert by_store.rows[0][-1] == pytest.approx(expected[by_store.rows[0][0]] / whole)
    # And the series is per month, in order, summing to the whole
    [series] = [r for r in analysis.results if r.kind == "series"]
    months = sorted({r["order_date"][:7] for r in rows})
    assert [r[0] for r in series.rows] == months
    assert sum(r[1] for r in series.rows) == whole
    # And the answer names the top store with its number and share
    top = max(expected, key=lambda k: expected[k])
    assert f"{top} had the highest net_sales_usd by store: {number(expected[top])}" in analysis.answer
    assert percent(expected[top] / whole) in analysis.answer


def test_a_ranking_has_the_top_and_bottom_n():
    rows = orders()
    [dataset] = load_file("orders.csv", "csv", as_csv(rows))
    analysis = analyse(dataset, "top 2 stores by net sales")
    assert analysis is not None
    [ranking] = [r for r in analysis.results if r.kind == "ranking"]
    expected = sorted(totals_by(rows, "store", "net_sales_usd").items(), key=lambda kv: -kv[1])
    assert [(r[2], r[3]) for r in ranking.rows if r[0] == "Top"] == expected[:2]
    assert [(r[2], r[3]) for r in ranking.rows if r[0] == "Bottom"] == expected[::-1][:2]


def test_a_table_of_one_row_per_item_has_nothing_to_group():
    dataset = load_rows("ranges", ["Place", "Range (m)"], [["Fundy", 16.3], ["Bristol", 15.0]])
    assert analyse(dataset, "which place has the largest range?") is None


def text_model(reply: str):
    """A structured ask answered by a model that only writes text: `reply`, read and checked against the schema."""

    def ask(prompt: str, schema):
        provider = RecordingProvider(answers=[reply])
        return complete_structured(provider, system="", prompt=prompt, role="analyst", schema=schema).value

    return ask


def test_a_models_plan_runs_when_it_fits_the_schema_and_only_sees_a_sample():
    # Given a model that answers with a plan naming real columns
    [dataset] = load_file("orders.csv", "csv", as_csv(orders()))
    asked: list[str] = []

    model = text_model(
        json.dumps({"measures": [{"column": "quantity", "aggregate": "sum"}], "dimensions": ["category"]})
    )

    def ask(prompt: str, schema):
        asked.append(prompt)
        return model(prompt, schema)

    # When
    analysis = analyse(dataset, "units per category", ask)
    # Then the model's plan ran, and the prompt held the schema and a few rows, not the table
    assert analysis is not None and analysis.plan.chosen_by == "model"
    assert analysis.plan.measures == [Measure(column="quantity", aggregate="sum")]
    assert "order_date" in asked[0] and asked[0].count("\n[") <= 5


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ('{"measures": [{"column": "profit"}], "dimensions": ["store"]}', "measure 'profit' is not a column"),
        ('{"measures": [{"column": "store"}]}', "measure 'store' holds text, not numbers"),
        ("I would sum the sales.", "the answer holds no valid JSON"),
        ('{"measures": []}', "measures"),
    ],
)
def test_an_invalid_model_plan_falls_back_to_the_rules_with_the_reason(answer, reason):
    [dataset] = load_file("orders.csv", "csv", as_csv(orders()))
    analysis = analyse(dataset, "net sales by store", text_model(answer))
    assert analysis is not None and analysis.plan.chosen_by == "rules"
    assert analysis.plan.measures[0].column == "net_sales_usd"
    assert reason in analysis.notes[0] and reason in analysis.findings[-1]


def test_check_plan_names_each_problem():
    [dataset] = load_file("orders.csv", "csv", as_csv(orders()))
    plan = AnalysisPlan(measures=[Measure(column="nope")], dimensions=["ghost"], period="store", grain="month")
    assert check_plan(plan, dataset.columns) == [
        "measure 'nope' is not a column",
        "dimension 'ghost' is not a column",
        "period 'store' holds text, which cannot be grouped by month",
    ]


def test_a_file_that_is_not_a_table_is_refused_with_the_reason():
    with pytest.raises(AnalysisError, match=r"notes\.csv could not be read as a table"):
        load_file("notes.csv", "csv", b"\xff\xfe\x00 not UTF-8")
    with pytest.raises(AnalysisError, match=r"\.pdf files hold no table"):
        load_file("report.pdf", "pdf", b"%PDF-1.4")


def test_a_data_sheet_holds_every_row_and_totals_readers_see_without_recalculating():
    # Given 5,000 rows and the engine's total of one column
    rows = orders(5_000)
    [dataset] = load_file("orders.csv", "csv", as_csv(rows))
    total = sum(r["net_sales_usd"] for r in rows)
    sheet = DataSheet(
        "orders.csv", [c.name for c in dataset.columns], dataset.iter_rows(), dataset.rows, totals={4: total}
    )
    # When
    data = render_workbook(WorkbookSpec("Orders", [], data=[sheet]))
    # Then every row is there, and the Total is a formula whose value a reader that does not recalculate sees
    check_xlsx(data)
    values = load_workbook(io.BytesIO(data), data_only=True)["orders.csv"]
    formulas = load_workbook(io.BytesIO(data))["orders.csv"]
    assert values.max_row == 5_002
    assert [c.value for c in values[5_002]][:1] == ["Total"] and values["E5002"].value == total
    assert formulas["E5002"].value == "=SUM(E2:E5001)"
    assert [values.cell(n + 2, 2).value for n in (0, 2_500, 4_999)] == [rows[n]["store"] for n in (0, 2_500, 4_999)]


def test_text_that_reads_as_a_formula_stays_text_in_a_data_sheet():
    dataset = load_rows("t", ["name", "v"], [['=HYPERLINK("x")', 1], ["+1", 2], ["@cmd", 3]])
    data = render_workbook(WorkbookSpec("T", [], data=[DataSheet("t", ["name", "v"], dataset.iter_rows(), 3)]))
    sheet = load_workbook(io.BytesIO(data))["t"]
    assert [sheet.cell(n, 1).value for n in (2, 3, 4)] == ['=HYPERLINK("x")', "+1", "@cmd"]
    assert all(sheet.cell(n, 1).data_type == "s" for n in (2, 3, 4))


def test_each_sheet_of_a_workbook_is_a_table_of_its_own():
    # Given a workbook of two sheets, one of them empty but for its header
    from tests.fakes import files

    rows = orders(60)
    book = files.xlsx(
        {
            "Orders": [list(rows[0]), *([r[k] for k in rows[0]] for r in rows)],
            "Notes": [["note"]],
        }
    )
    # When
    [dataset] = load_file("orders.xlsx", "xlsx", book)
    analysis = analyse(dataset, "net sales by category")
    # Then the sheet is named, typed and analysed like a CSV
    assert dataset.name == "orders.xlsx, sheet Orders" and dataset.rows == 60
    assert {c.name: c.kind for c in dataset.columns}["net_sales_usd"] == "number"
    assert analysis is not None
    [by_category] = [r for r in analysis.results if r.kind == "breakdown"]
    assert {r[0]: r[1] for r in by_category.rows} == totals_by(rows, "category", "net_sales_usd")


def test_amounts_written_as_text_are_numbers_in_their_currency_and_codes_stay_text():
    # Given amounts with a currency sign and thousands separators, and codes with leading zeros
    table = (
        b'store_code,Store Name,Sales Amount\n"0101",Harbour,"$1,200.50"\n"0102",Station,$800\n'
        b'"0101",Harbour,"$2,000"\n'
    )
    # When
    [dataset] = load_file("sales.csv", "csv", table)
    analysis = analyse(dataset, "sales amount by store")
    # Then the amounts add up, in dollars, and the codes are not a measure
    kinds = {c.name: (c.kind, c.unit) for c in dataset.columns}
    assert kinds["Sales Amount"] == ("number", "USD") and kinds["store_code"][0] == "text"
    assert analysis is not None
    assert analysis.answer == "Harbour had the highest Sales Amount by Store Name: 3,200.50 USD, 80 % of the total."


def test_month_names_are_a_period_in_calendar_order():
    rows = [["March", "N", 5], ["January", "N", 7], ["February", "S", 1], ["January", "S", 2], ["Dec", "S", 4]]
    dataset = load_rows("months", ["month", "region", "units"], rows)
    analysis = analyse(dataset, "units per month")
    assert analysis is not None and analysis.plan.period == "month"
    [series] = [r for r in analysis.results if r.kind == "series"]
    assert [(r[0], r[1]) for r in series.rows] == [("January", 9), ("February", 1), ("March", 5), ("Dec", 4)]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        (
            "Which store sold the least?",
            lambda by_store, by_month, whole: f"{min(by_store, key=by_store.get)} had the lowest",
        ),
        (
            "In which month were net sales lowest?",
            lambda by_store, by_month, whole: (
                f"{min(by_month, key=by_month.get)} had the lowest net_sales_usd by month"
            ),
        ),
        (
            "What were total net sales?",
            lambda by_store, by_month, whole: f"In all (400 rows of orders.csv): net_sales_usd {whole:,} USD",
        ),
        (
            "How did net sales change over time?",
            lambda by_store, by_month, whole: f"from {min(by_month)} to {max(by_month)}",
        ),
    ],
)
def test_the_answer_is_what_the_question_asks_for(question, expected):
    rows = orders()
    [dataset] = load_file("orders.csv", "csv", as_csv(rows))
    by_month: dict[str, float] = defaultdict(int)
    for row in rows:
        by_month[row["order_date"][:7]] += row["net_sales_usd"]
    analysis = analyse(dataset, question)
    assert analysis is not None
    whole = sum(r["net_sales_usd"] for r in rows)
    assert expected(totals_by(rows, "store", "net_sales_usd"), dict(by_month), whole) in analysis.answer


def test_a_table_with_nothing_to_add_up_counts_the_rows_of_each_group():
    # Given a log of tickets: no column of numbers
    rnd = random.Random(5)
    tickets = [[f"2024-0{rnd.randint(1, 3)}-1{rnd.randint(0, 9)}", rnd.choice(["Billing", "Login", "Shipping"])]
               for _ in range(50)]  # fmt: skip
    dataset = load_rows("tickets", ["opened", "category"], tickets)
    # When
    analysis = analyse(dataset, "Which category has the most tickets?")
    # Then each category's number of rows, with its share, answers it
    counts: dict[str, int] = defaultdict(int)
    for _, category in tickets:
        counts[category] += 1
    top = max(counts, key=lambda k: counts[k])
    assert analysis is not None and analysis.plan.measures == [Measure(column="rows", aggregate="count")]
    assert analysis.answer == (
        f"{top} had the highest number of rows by category: {counts[top]}, {percent(counts[top] / 50)} of the total."
    )


def test_a_query_the_engine_refuses_is_an_analysis_error_with_the_reason():
    [dataset] = load_file("orders.csv", "csv", as_csv(orders()))
    plan = plan_by_rules("net sales by store", dataset.columns)
    assert plan is not None
    dataset.connection.close()  # the engine refuses every query from here
    with pytest.raises(AnalysisError, match=r"^orders\.csv could not be analysed: "):
        run_plan(dataset, plan)


@pytest.mark.parametrize(
    ("request_text", "asked"),
    [
        ("Which store did best?", True),
        ("net sales by store", True),
        ("Summarise the orders", True),
        ("Write a friendly note to the team about the new coffee machine", False),
    ],
)
def test_whether_a_request_asks_about_the_table(request_text, asked):
    [dataset] = load_file("orders.csv", "csv", as_csv(orders()))
    analysis = analyse(dataset, request_text)
    assert analysis is not None and analysis.asked is asked
