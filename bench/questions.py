"""The analyst question suite: three generated tables of different domains (orders, a support workbook of two
sheets, weather-station readings), questions of many kinds asked of them in several phrasings, each with the
answer computed here in plain Python from the generated rows (never by the engine), and the scorer that reads an
answer's opening line against it. A few bad-input tables (dates in three formats, amounts written as text, one
row, a header alone) come with a question each, for the checks that the analysis answers rather than fails.

Scoring: a question is correct when its opening (the first line of the answer) names every expected label and
shows every expected number (to the decimals it shows, or within 0.1 %), or, when the data cannot answer it,
says "cannot". Otherwise it is said unanswerable when the opening says "cannot", and silently wrong when not: the
three verdicts split the questions.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import itertools
import math
import random
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

Row = dict[str, Any]
CORRECT, SAID_UNANSWERABLE, SILENTLY_WRONG = "correct", "said_unanswerable", "silently_wrong"
CANNOT_WORD = re.compile(r"\bcannot\b", re.IGNORECASE)
# A figure as the answers write it: a sign, thousands separated by commas, decimals, then a percent sign or not.
FIGURE = re.compile(r"(?<![\w.])([-+\u2212]?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(\s?%)?")
RELATIVE_TOLERANCE = 0.001

# ---- the tables --------------------------------------------------------------------------------------------------

# Orders: each region's weight in the orders and the share of its orders in 2025 (its growth): DACH is the largest
# and shrinks, Iberia is small and grows fastest.
REGIONS = {
    "DACH": (0.27, 0.46),
    "Nordics": (0.16, 0.56),
    "Benelux": (0.15, 0.52),
    "Iberia": (0.12, 0.61),
    "UK & Ireland": (0.18, 0.50),
    "France": (0.12, 0.43),
}
PRODUCTS = {  # weight, list price
    "Desk Lamp": (0.20, 39.90),
    "Office Chair": (0.12, 249.00),
    "Standing Desk": (0.07, 499.00),
    "Monitor Arm": (0.15, 89.00),
    "Keyboard": (0.18, 59.00),
    "Headset": (0.16, 79.00),
    "Webcam": (0.12, 69.00),
}
CHANNELS = {"Online": (0.50, 0.04), "Retail": (0.30, -0.04), "Partner": (0.20, 0.0)}  # weight, tilt towards 2025
# Tickets: Billing has the most tickets and the most minutes in total, Technical the longest tickets.
CATEGORIES = {  # weight, median minutes to resolve
    "Billing": (0.38, 75),
    "Login": (0.22, 30),
    "Shipping": (0.18, 95),
    "Returns": (0.14, 110),
    "Technical": (0.08, 230),
}
PRIORITIES = {"Low": 0.30, "Medium": 0.40, "High": 0.20, "Urgent": 0.10}
AGENTS = {  # weight in the tickets, team
    "K. Nowak": (0.16, "Frontline"),
    "A. Berg": (0.13, "Frontline"),
    "M. Rossi": (0.12, "Frontline"),
    "J. Smith": (0.11, "Specialists"),
    "L. Dubois": (0.10, "Specialists"),
    "S. Jansen": (0.09, "Specialists"),
    "P. Silva": (0.08, "Night Shift"),
    "E. Lund": (0.08, "Night Shift"),
    "T. Meyer": (0.07, "Night Shift"),
    "R. Costa": (0.06, "Frontline"),
}
STATIONS = {  # city, mean temperature in January and in July, chance of rain on a day, mean rain on a wet day
    "Bergen Florida": ("Bergen", 2.0, 15.5, 0.62, 9.0),
    "Bergen Airport": ("Bergen", 1.5, 15.0, 0.60, 8.0),
    "Oslo Blindern": ("Oslo", -4.0, 17.5, 0.40, 5.0),
    "Stockholm Bromma": ("Stockholm", -2.5, 18.5, 0.38, 4.5),
    "Copenhagen Kastrup": ("Copenhagen", 1.0, 17.5, 0.45, 4.0),
    "Helsinki Vantaa": ("Helsinki", -6.0, 17.0, 0.42, 4.5),
}


def _weighted(rnd: random.Random, weights: dict[str, Any]) -> str:
    names = list(weights)
    return rnd.choices(names, [w[0] if isinstance(w, tuple) else w for w in weights.values()])[0]


def orders(count: int = 5_000, seed: int = 2024) -> list[Row]:
    rnd = random.Random(seed)
    found = []
    for n in range(count):
        region, channel, product = _weighted(rnd, REGIONS), _weighted(rnd, CHANNELS), _weighted(rnd, PRODUCTS)
        year = 2025 if rnd.random() < REGIONS[region][1] + CHANNELS[channel][1] else 2024
        day = dt.date(year, 1, 1) + dt.timedelta(days=rnd.randrange(366 if year == 2024 else 365))
        units = rnd.randint(1, 6) if rnd.random() < 0.85 else rnd.randint(7, 24)
        unit_price = round(PRODUCTS[product][1] * rnd.uniform(0.85, 1.10), 2)
        found.append(
            {
                "order_id": f"O-{n + 1:05d}",
                "order_date": day,
                "region": region,
                "product": product,
                "channel": channel,
                "units": units,
                "unit_price": unit_price,
                "revenue": round(units * unit_price, 2),
            }
        )
    return sorted(found, key=lambda r: (r["order_date"], r["order_id"]))


def tickets(count: int = 1_200, seed: int = 8) -> list[Row]:
    rnd = random.Random(seed)
    start = dt.datetime(2025, 1, 1, 7, 0)
    found = []
    for n in range(count):
        category = _weighted(rnd, CATEGORIES)
        minutes = max(5, round(rnd.lognormvariate(math.log(CATEGORIES[category][1]), 0.5)))
        opened = start + dt.timedelta(minutes=rnd.randrange(364 * 24 * 60))
        found.append(
            {
                "ticket_id": f"T-{10_001 + n}",
                "category": category,
                "priority": _weighted(rnd, PRIORITIES),
                "agent": _weighted(rnd, AGENTS),
                "opened": opened,
                "closed": opened + dt.timedelta(minutes=minutes),
                "minutes_to_resolve": minutes,
            }
        )
    return sorted(found, key=lambda r: r["opened"])


def agents(seed: int = 10) -> list[Row]:
    rnd = random.Random(seed)
    return [
        {
            "agent": name,
            "team": team,
            "hired": dt.date(2019, 1, 1) + dt.timedelta(days=rnd.randrange(6 * 365)),
            "csat_score": round(rnd.uniform(3.6, 4.9), 2),
        }
        for name, (_, team) in AGENTS.items()
    ]


def readings(seed: int = 365) -> list[Row]:
    """A reading a day at each station through 2025: mean temperature (to be averaged) and rainfall (to add up)."""
    rnd = random.Random(seed)
    found = []
    for station, (city, january, july, wet, rain) in STATIONS.items():
        for offset in range(365):
            day = dt.date(2025, 1, 1) + dt.timedelta(days=offset)
            season = (1 - math.cos(2 * math.pi * (offset - 15) / 365)) / 2  # 0 mid-January, 1 mid-July
            temperature = round(january + (july - january) * season + rnd.gauss(0, 2.5), 1)
            rainfall = round(rnd.expovariate(1 / rain), 1) if rnd.random() < wet else 0.0
            found.append(
                {"station": station, "city": city, "date": day, "temperature_c": temperature, "rainfall_mm": rainfall}
            )
    return found


def as_csv(rows: list[Row]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def as_xlsx(sheets: dict[str, list[Row]]) -> bytes:
    from openpyxl import Workbook

    book = Workbook()
    book.remove(book.active)
    for title, rows in sheets.items():
        sheet = book.create_sheet(title)
        sheet.append(list(rows[0]))
        for row in rows:
            sheet.append(list(row.values()))
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


@dataclass(frozen=True)
class Table:
    """A file as it is uploaded."""

    name: str
    extension: str
    data: bytes


def tables() -> dict[str, Table]:
    """The suite's three files, by name."""
    return {
        "orders.csv": Table("orders.csv", "csv", as_csv(orders())),
        "support.xlsx": Table("support.xlsx", "xlsx", as_xlsx({"Tickets": tickets(), "Agents": agents()})),
        "weather.csv": Table("weather.csv", "csv", as_csv(readings())),
    }


# ---- expected answers --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expected:
    """What a correct opening holds: every label, every number and every percentage (signed for a change). When
    `rivals` are given (the other groups of the dimension), the first label the opening names must be the first
    expected one, so that listing every group does not pass for naming the right one. `cannot`: the data cannot
    answer, and the opening must say so."""

    numbers: tuple[float, ...] = ()
    percents: tuple[float, ...] = ()
    labels: tuple[str, ...] = ()
    rivals: tuple[str, ...] = ()
    cannot: bool = False


CANNOT = Expected(cannot=True)


@dataclass(frozen=True)
class Question:
    kind: str
    table: str  # the file asked about (every sheet of it is given to the answer)
    text: str
    expected: Expected


def answer(
    numbers: Iterable[float] = (),
    percents: Iterable[float] = (),
    labels: Iterable[str] = (),
    rivals: Iterable[str] = (),
) -> Expected:
    labels = tuple(labels)
    return Expected(tuple(numbers), tuple(percents), labels, tuple(r for r in rivals if r not in labels))


# ---- truths in plain Python --------------------------------------------------------------------------------------


def total(rows: Iterable[Row], measure: str) -> float:
    return math.fsum(r[measure] for r in rows)


def mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile, interpolated between the two closest ranks (DuckDB's quantile_cont, numpy's default)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * p / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def change(before: float, after: float) -> float:
    """Percent change."""
    return (after - before) / before * 100


def groups(rows: Iterable[Row], key: str) -> dict[Any, list[Row]]:
    found: dict[Any, list[Row]] = defaultdict(list)
    for row in rows:
        found[row[key]].append(row)
    return dict(found)


def per_group(rows: Iterable[Row], key: str, figure: Callable[[list[Row]], float]) -> dict[Any, float]:
    return {name: figure(members) for name, members in groups(rows, key).items()}


def ranked(figures: dict[Any, float], descending: bool = True, decided: int = 1) -> list[tuple[Any, float]]:
    """The groups by their figure, the first `decided` of them each ahead of the next. A tie there would give
    "which is highest" or a top N two answers, so the tables are generated without (a seed that gave one is
    changed)."""
    order = sorted(figures.items(), key=lambda item: item[1], reverse=descending)
    for (first, value), (second, other) in itertools.pairwise(order[: decided + 1]):
        if math.isclose(value, other, rel_tol=1e-9):
            raise ValueError(f"{first} and {second} tie at {value}: the question would have two answers")
    return order


def day_of(value: dt.date | dt.datetime) -> dt.date:
    return value.date() if isinstance(value, dt.datetime) else value


def within(rows: Iterable[Row], column: str, first: dt.date, last: dt.date) -> list[Row]:
    return [r for r in rows if first <= day_of(r[column]) <= last]


def year(rows: Iterable[Row], column: str, number: int) -> list[Row]:
    return within(rows, column, dt.date(number, 1, 1), dt.date(number, 12, 31))


def month(rows: Iterable[Row], column: str, number: int, month_number: int) -> list[Row]:
    last = (dt.date(number + month_number // 12, month_number % 12 + 1, 1)) - dt.timedelta(days=1)
    return within(rows, column, dt.date(number, month_number, 1), last)


def quarter(rows: Iterable[Row], column: str, number: int, quarter_number: int) -> list[Row]:
    first = dt.date(number, 3 * quarter_number - 2, 1)
    last = dt.date(number + quarter_number // 4, (3 * quarter_number) % 12 + 1, 1) - dt.timedelta(days=1)
    return within(rows, column, first, last)


def where(rows: Iterable[Row], **equal: Any) -> list[Row]:
    return [r for r in rows if all(r[k] == v for k, v in equal.items())]


def growth_per_group(rows: list[Row], key: str, measure: str, column: str) -> dict[Any, float]:
    """Each group's percent change of the measure from 2024 to 2025 (groups absent in 2024 left out)."""
    before = per_group(year(rows, column, 2024), key, lambda g: total(g, measure))
    after = per_group(year(rows, column, 2025), key, lambda g: total(g, measure))
    return {name: change(before[name], after.get(name, 0.0)) for name in before if before[name]}


# ---- the questions -----------------------------------------------------------------------------------------------


def order_questions(rows: list[Row]) -> list[Question]:
    """Questions over orders.csv, each with its answer from `rows`."""
    regions, products, channels = (sorted({r[k] for r in rows}) for k in ("region", "product", "channel"))
    revenue = total(rows, "revenue")
    by_region = per_group(rows, "region", lambda g: total(g, "revenue"))
    units_by_product = per_group(rows, "product", lambda g: total(g, "units"))
    region_growth = ranked(growth_per_group(rows, "region", "revenue", "order_date"))
    product_growth = ranked(growth_per_group(rows, "product", "revenue", "order_date"), descending=False)
    channel_growth = ranked(growth_per_group(rows, "channel", "units", "order_date"))
    average_by_region = ranked(per_group(rows, "region", lambda g: mean([r["revenue"] for r in g])))
    price_by_product = ranked(per_group(rows, "product", lambda g: mean([r["unit_price"] for r in g])), False)
    median_by_channel = ranked(per_group(rows, "channel", lambda g: median([r["revenue"] for r in g])))
    top_regions = ranked(by_region, decided=3)[:3]
    bottom_products = ranked(units_by_product, descending=False, decided=2)[:2]
    top_product = {
        region: ranked(per_group(members, "product", lambda g: total(g, "revenue")))[0]
        for region, members in groups(rows, "region").items()
    }
    nordics, online = where(rows, region="Nordics"), where(rows, channel="Online")
    bulk = [r for r in rows if r["units"] > 10]
    by_year = {n: total(year(rows, "order_date", n), "revenue") for n in (2024, 2025)}
    units_by_year = {n: total(year(rows, "order_date", n), "units") for n in (2024, 2025)}
    largest = max(rows, key=lambda r: r["revenue"])

    def q(kind: str, text: str, expected: Expected) -> Question:
        return Question(kind, "orders.csv", text, expected)

    def top(pairs: list[tuple[Any, float]], rivals: list[str]) -> Expected:
        return answer(numbers=[pairs[0][1]], labels=[pairs[0][0]], rivals=rivals)

    return [
        q("total", "What was the total revenue?", answer([revenue])),
        q("total", "How much did we sell in total?", answer([revenue])),
        q("total", "Total sales across all orders", answer([revenue])),
        q("total", "How many units were sold in total?", answer([total(rows, "units")])),
        q("total_filtered", "What was the revenue in the Nordics?", answer([total(nordics, "revenue")])),
        q("total_filtered", "Total sales for Iberia", answer([by_region.get("Iberia", 0.0)])),
        q("total_filtered", "How many units did the Online channel sell?", answer([total(online, "units")])),
        q(
            "total_filtered",
            "Revenue of Standing Desk orders in the UK & Ireland",
            answer([total(where(rows, product="Standing Desk", region="UK & Ireland"), "revenue")]),
        ),
        q("total_period", "What was the total revenue in 2024?", answer([by_year[2024]])),
        q("total_period", "Revenue in Q3 2025", answer([total(quarter(rows, "order_date", 2025, 3), "revenue")])),
        q(
            "total_period",
            "How much did we sell in March 2025?",
            answer([total(month(rows, "order_date", 2025, 3), "revenue")]),
        ),
        q(
            "total_period",
            "Total revenue between 2024-06-01 and 2024-08-31",
            answer([total(within(rows, "order_date", dt.date(2024, 6, 1), dt.date(2024, 8, 31)), "revenue")]),
        ),
        q(
            "total_period",
            "Units sold in the first quarter of 2024",
            answer([total(quarter(rows, "order_date", 2024, 1), "units")]),
        ),
        q("group_average", "Which region has the highest average revenue per order?", top(average_by_region, regions)),
        q("group_average", "Which product has the lowest average unit price?", top(price_by_product, products)),
        q("group_average", "Which channel has the highest median revenue per order?", top(median_by_channel, channels)),
        q(
            "percentile",
            "What is the 90th percentile of revenue per order?",
            answer([percentile([r["revenue"] for r in rows], 90)]),
        ),
        q("min_max", "What was the largest single order by revenue?", answer([largest["revenue"]])),
        q("min_max", "What is the lowest unit price?", answer([min(r["unit_price"] for r in rows)])),
        q("min_max", "What was the maximum number of units in one order?", answer([max(r["units"] for r in rows)])),
        q("count", "How many orders are there?", answer([len(rows)])),
        q("count", "How many orders were placed in 2025?", answer([len(year(rows, "order_date", 2025))])),
        q("count_distinct", "How many different products are there?", answer([len(products)])),
        q("count_distinct", "How many distinct regions do we sell in?", answer([len(regions)])),
        q(
            "share",
            "What share of revenue came from online?",
            answer(percents=[total(online, "revenue") / revenue * 100]),
        ),
        q(
            "share",
            "What percentage of units went to the Nordics?",
            answer(percents=[total(nordics, "units") / total(rows, "units") * 100]),
        ),
        q(
            "growth",
            "How much did revenue grow from 2024 to 2025?",
            answer(percents=[change(by_year[2024], by_year[2025])]),
        ),
        q(
            "growth",
            "What was the change in units sold between 2024 and 2025?",
            answer(percents=[change(units_by_year[2024], units_by_year[2025])]),
        ),
        q(
            "group_growth",
            "Which region grew fastest from 2024 to 2025?",
            answer(percents=[region_growth[0][1]], labels=[region_growth[0][0]], rivals=regions),
        ),
        q(
            "group_growth",
            "Which product had the slowest revenue growth between 2024 and 2025?",
            answer(percents=[product_growth[0][1]], labels=[product_growth[0][0]], rivals=products),
        ),
        q(
            "group_growth",
            "Which channel's units grew the most from 2024 to 2025?",
            answer(percents=[channel_growth[0][1]], labels=[channel_growth[0][0]], rivals=channels),
        ),
        q("largest_group", "Which region had the largest revenue?", top(ranked(by_region), regions)),
        q("largest_group", "Which product sold the most units?", top(ranked(units_by_product), products)),
        q("top_n", "Top 3 regions by revenue", answer([v for _, v in top_regions], labels=[n for n, _ in top_regions])),
        q(
            "top_n",
            "Which 2 products sold the fewest units?",
            answer([v for _, v in bottom_products], labels=[n for n, _ in bottom_products]),
        ),
        q(
            "top_per_group",
            "Top product per region by revenue",
            answer(
                [v for _, v in top_product.values()],
                labels=[*top_product, *dict.fromkeys(p for p, _ in top_product.values())],
            ),
        ),
        q("numeric_filter", "How many orders had more than 10 units?", answer([len(bulk)])),
        q(
            "numeric_filter",
            "What was the revenue from orders with more than 10 units?",
            answer([total(bulk, "revenue")]),
        ),
        q(
            "numeric_filter",
            "How many orders were over 2,000 in revenue?",
            answer([len([r for r in rows if r["revenue"] > 2_000])]),
        ),
        q("cannot", "What was the profit margin?", CANNOT),
        q("cannot", "What was the revenue in March 2023?", CANNOT),
        q("cannot", "What is the average customer age per region?", CANNOT),
        q("cannot", "Total shipping cost by region", CANNOT),
    ]


def support_questions(ticket_rows: list[Row], agent_rows: list[Row]) -> list[Question]:
    """Questions over support.xlsx (its Tickets and Agents sheets), each with its answer from the rows."""
    categories, teams = sorted({r["category"] for r in ticket_rows}), sorted({r["team"] for r in agent_rows})
    agent_names = sorted({r["agent"] for r in ticket_rows})
    minutes = [r["minutes_to_resolve"] for r in ticket_rows]
    total_by_category = ranked(per_group(ticket_rows, "category", lambda g: total(g, "minutes_to_resolve")))
    mean_by_category = ranked(per_group(ticket_rows, "category", lambda g: mean([r["minutes_to_resolve"] for r in g])))
    median_by_category = ranked(
        per_group(ticket_rows, "category", lambda g: median([r["minutes_to_resolve"] for r in g]))
    )
    median_by_priority = ranked(
        per_group(ticket_rows, "priority", lambda g: median([r["minutes_to_resolve"] for r in g])), False
    )
    count_by_agent = per_group(ticket_rows, "agent", len)
    most_tickets, fewest_tickets = ranked(count_by_agent, decided=3)[:3], ranked(count_by_agent, False, 2)[1::-1]
    count_by_category = per_group(ticket_rows, "category", len)
    top_agent = {
        category: ranked(per_group(members, "agent", len))[0]
        for category, members in groups(ticket_rows, "category").items()
    }
    csat_by_team = per_group(agent_rows, "team", lambda g: mean([r["csat_score"] for r in g]))
    long_tickets = [r for r in ticket_rows if r["minutes_to_resolve"] > 240]

    def q(kind: str, text: str, expected: Expected) -> Question:
        return Question(kind, "support.xlsx", text, expected)

    return [
        q("total", "How many minutes did we spend resolving tickets in total?", answer([sum(minutes)])),
        q(
            "total_filtered",
            "Total minutes to resolve for Urgent tickets",
            answer([total(where(ticket_rows, priority="Urgent"), "minutes_to_resolve")]),
        ),
        q(
            "total_period",
            "How many minutes went into tickets opened in Q2 2025?",
            answer([total(quarter(ticket_rows, "opened", 2025, 2), "minutes_to_resolve")]),
        ),
        q(
            "largest_group",
            "Which category took the most minutes in total?",
            answer([total_by_category[0][1]], labels=[total_by_category[0][0]], rivals=categories),
        ),
        q(
            "group_average",
            "Which category has the highest average minutes to resolve per ticket?",
            answer([mean_by_category[0][1]], labels=[mean_by_category[0][0]], rivals=categories),
        ),
        q(
            "group_average",
            "Which category has the longest median resolution time?",
            answer([median_by_category[0][1]], labels=[median_by_category[0][0]], rivals=categories),
        ),
        q(
            "group_average",
            "For which priority is the median minutes to resolve lowest?",
            answer([median_by_priority[0][1]], labels=[median_by_priority[0][0]], rivals=PRIORITIES),
        ),
        q("group_average", "What is the average minutes to resolve per ticket?", answer([mean(minutes)])),
        q("percentile", "What is the 90th percentile of minutes to resolve?", answer([percentile(minutes, 90)])),
        q(
            "percentile",
            "75th percentile of minutes_to_resolve for Billing tickets",
            answer([percentile([r["minutes_to_resolve"] for r in where(ticket_rows, category="Billing")], 75)]),
        ),
        q("min_max", "What was the longest time to resolve a ticket, in minutes?", answer([max(minutes)])),
        q(
            "min_max",
            "Shortest minutes to resolve of any High priority ticket",
            answer([min(r["minutes_to_resolve"] for r in where(ticket_rows, priority="High"))]),
        ),
        q("count", "How many tickets are there?", answer([len(ticket_rows)])),
        q("count", "How many High priority tickets were opened?", answer([len(where(ticket_rows, priority="High"))])),
        q("count", "Number of tickets opened in May 2025", answer([len(month(ticket_rows, "opened", 2025, 5))])),
        q("count_distinct", "How many different agents handled tickets?", answer([len(agent_names)])),
        q("count_distinct", "How many distinct ticket categories are there?", answer([len(categories)])),
        q(
            "share",
            "What percentage of tickets are Billing tickets?",
            answer(percents=[count_by_category["Billing"] / len(ticket_rows) * 100]),
        ),
        q(
            "share",
            "What share of the minutes to resolve went to Technical tickets?",
            answer(percents=[dict(total_by_category)["Technical"] / sum(minutes) * 100]),
        ),
        q(
            "top_n",
            "Which 3 agents handled the most tickets?",
            answer([v for _, v in most_tickets], labels=[n for n, _ in most_tickets]),
        ),
        q(
            "top_n",
            "Bottom 2 agents by number of tickets",
            answer([v for _, v in fewest_tickets], labels=[n for n, _ in fewest_tickets]),
        ),
        q(
            "top_per_group",
            "Which agent handled the most tickets in each category?",
            answer(
                [v for _, v in top_agent.values()],
                labels=[*top_agent, *dict.fromkeys(a for a, _ in top_agent.values())],
            ),
        ),
        q("numeric_filter", "How many tickets took longer than 240 minutes?", answer([len(long_tickets)])),
        q(
            "numeric_filter",
            "How many tickets were resolved in under 30 minutes?",
            answer([len([m for m in minutes if m < 30])]),
        ),
        q(
            "second_sheet",
            "What is the average csat score by team?",
            answer(list(csat_by_team.values()), labels=list(csat_by_team)),
        ),
        q(
            "second_sheet",
            "Which team has the highest average CSAT score?",
            answer([ranked(csat_by_team)[0][1]], labels=[ranked(csat_by_team)[0][0]], rivals=teams),
        ),
        q("second_sheet", "How many agents were hired in 2023?", answer([len(year(agent_rows, "hired", 2023))])),
        q(
            "second_sheet",
            "What is the lowest csat score of any agent?",
            answer([min(r["csat_score"] for r in agent_rows)]),
        ),
        q("cannot", "How many tickets were opened in 2019?", CANNOT),
        q("cannot", "What is the average first response time per category?", CANNOT),
        q("cannot", "What is the total cost of the tickets by category?", CANNOT),
    ]


def weather_questions(rows: list[Row]) -> list[Question]:
    """Questions over weather.csv: a temperature to average, a rainfall to add up."""
    cities, stations = sorted({r["city"] for r in rows}), sorted({r["station"] for r in rows})
    temperatures = [r["temperature_c"] for r in rows]
    warmest_city = ranked(per_group(rows, "city", lambda g: mean([r["temperature_c"] for r in g])))
    january = month(rows, "date", 2025, 1)
    coldest_in_january = ranked(per_group(january, "station", lambda g: mean([r["temperature_c"] for r in g])), False)
    rain_by_city = per_group(rows, "city", lambda g: total(g, "rainfall_mm"))
    median_rain = ranked(per_group(rows, "city", lambda g: median([r["rainfall_mm"] for r in g])))
    wet = [r for r in rows if r["rainfall_mm"] > 10]

    def q(kind: str, text: str, expected: Expected) -> Question:
        return Question(kind, "weather.csv", text, expected)

    return [
        q("total", "What was the total rainfall?", answer([total(rows, "rainfall_mm")])),
        q("total_filtered", "Total rainfall in Bergen", answer([rain_by_city["Bergen"]])),
        q(
            "total_period",
            "How much rain fell in October 2025 across all stations?",
            answer([total(month(rows, "date", 2025, 10), "rainfall_mm")]),
        ),
        q(
            "group_average",
            "What was the average temperature in Oslo?",
            answer([mean([r["temperature_c"] for r in where(rows, city="Oslo")])]),
        ),
        q(
            "group_average",
            "Which city had the highest average temperature?",
            answer([warmest_city[0][1]], labels=[warmest_city[0][0]], rivals=cities),
        ),
        q(
            "group_average",
            "Which station was coldest on average in January 2025?",
            answer([coldest_in_january[0][1]], labels=[coldest_in_january[0][0]], rivals=stations),
        ),
        q(
            "group_average",
            "Which city has the highest median daily rainfall?",
            answer([median_rain[0][1]], labels=[median_rain[0][0]], rivals=cities),
        ),
        q("percentile", "What's the 90th percentile of temperature_c?", answer([percentile(temperatures, 90)])),
        q("min_max", "What was the highest temperature recorded?", answer([max(temperatures)])),
        q(
            "min_max",
            "Lowest temperature at Helsinki Vantaa",
            answer([min(r["temperature_c"] for r in where(rows, station="Helsinki Vantaa"))]),
        ),
        q(
            "count",
            "How many readings are there for Oslo Blindern?",
            answer([len(where(rows, station="Oslo Blindern"))]),
        ),
        q("count_distinct", "How many stations are there?", answer([len(stations)])),
        q("count_distinct", "How many different cities have stations?", answer([len(cities)])),
        q(
            "share",
            "What share of the rainfall fell in Bergen?",
            answer(percents=[rain_by_city["Bergen"] / total(rows, "rainfall_mm") * 100]),
        ),
        q(
            "largest_group",
            "Which city got the most rain?",
            answer([ranked(rain_by_city)[0][1]], labels=[ranked(rain_by_city)[0][0]], rivals=cities),
        ),
        q("numeric_filter", "How many readings had more than 10 mm of rainfall?", answer([len(wet)])),
        q(
            "numeric_filter",
            "Total rainfall on days with a temperature below 0",
            answer([total([r for r in rows if r["temperature_c"] < 0], "rainfall_mm")]),
        ),
        q("cannot", "What is the average wind speed per station?", CANNOT),
        q("cannot", "Total rainfall in March 2023", CANNOT),
    ]


def questions() -> list[Question]:
    """The suite: every question over the three tables."""
    return [
        *order_questions(orders()),
        *support_questions(tickets(), agents()),
        *weather_questions(readings()),
    ]


# ---- bad input ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BadInput:
    """A table that is awkward to read, and a question over it that must get an answer line, not an error."""

    table: Table
    question: str
    expected: Expected


def bad_inputs() -> list[BadInput]:
    dates = ["2025-01-15", "15/02/2025", "March 3, 2025", "2025-02-20", "14/03/2025", "January 28, 2025"]
    mixed = [{"date": d, "amount": 100 * (n + 1)} for n, d in enumerate(dates)]
    amounts = ["$1,200.50", "$310.00", "$12,000.25", "$99.99"]
    priced = [{"item": f"Item {n + 1}", "amount": a} for n, a in enumerate(amounts)]
    one = [{"region": "Nordics", "revenue": 1234.5}]
    return [
        BadInput(Table("mixed_dates.csv", "csv", as_csv(mixed)), "What was the total amount?", answer([2_100])),
        BadInput(
            Table("mixed_dates.csv", "csv", as_csv(mixed)), "What was the amount in February 2025?", answer([600])
        ),
        BadInput(Table("currency_text.csv", "csv", as_csv(priced)), "What is the total amount?", answer([13_610.74])),
        BadInput(Table("one_row.csv", "csv", as_csv(one)), "What is the total revenue?", answer([1_234.5])),
        BadInput(Table("empty.csv", "csv", b"region,revenue\n"), "What is the total revenue?", CANNOT),
    ]


# ---- scoring -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    value: float
    decimals: int
    percent: bool


def figures(text: str) -> list[Figure]:
    """Every number the text shows, its sign and thousands separators read."""
    found = []
    for sign, whole, decimals, percent in FIGURE.findall(text):
        value = float(whole.replace(",", "") + decimals)
        found.append(Figure(-value if sign in ("-", "\u2212") else value, max(len(decimals) - 1, 0), bool(percent)))
    return found


def shows(found: list[Figure], truth: float, percent: bool) -> bool:
    """Whether one of the figures is the truth: equal to it rounded to the decimals shown, or within 0.1 %."""
    return any(
        f.percent == percent
        and (
            math.isclose(f.value, round(truth, f.decimals), abs_tol=1e-9)
            or abs(f.value - truth) <= RELATIVE_TOLERANCE * abs(truth)
        )
        for f in found
    )


def names(text: str, label: str) -> int | None:
    """Where the text first names the label (as a whole word, any case), or None."""
    match = re.search(rf"(?<!\w){re.escape(label)}(?!\w)", text, re.IGNORECASE)
    return match.start() if match else None


def is_correct(expected: Expected, opening: str) -> bool:
    if expected.cannot:
        return bool(CANNOT_WORD.search(opening))
    found = figures(opening)
    if not all(names(opening, label) is not None for label in expected.labels):
        return False
    if not all(shows(found, n, percent=False) for n in expected.numbers):
        return False
    if not all(shows(found, p, percent=True) for p in expected.percents):
        return False
    if expected.rivals and expected.labels:
        named = [
            (at, label) for label in (expected.labels[0], *expected.rivals) if (at := names(opening, label)) is not None
        ]
        return min(named)[1] == expected.labels[0]
    return True


@dataclass(frozen=True)
class Outcome:
    question: Question
    opening: str
    verdict: str  # correct, said_unanswerable, silently_wrong


def judge(question: Question, text: str) -> Outcome:
    """The verdict on an answer's text for one question, from its first line."""
    opening = text.strip().splitlines()[0] if text.strip() else ""
    if is_correct(question.expected, opening):
        return Outcome(question, opening, CORRECT)
    return Outcome(question, opening, SAID_UNANSWERABLE if CANNOT_WORD.search(opening) else SILENTLY_WRONG)


@dataclass(repr=False)
class Score:
    outcomes: list[Outcome] = field(default_factory=list)

    def __repr__(self) -> str:  # a failing test shows the report, not every outcome
        return f"Score(correct {self.correct}/{self.total}, silently wrong {self.silently_wrong})"

    def count(self, verdict: str) -> int:
        return sum(o.verdict == verdict for o in self.outcomes)

    @property
    def total(self) -> int:
        return len(self.outcomes)

    @property
    def correct(self) -> int:
        return self.count(CORRECT)

    @property
    def said_unanswerable(self) -> int:
        return self.count(SAID_UNANSWERABLE)

    @property
    def silently_wrong(self) -> int:
        return self.count(SILENTLY_WRONG)

    @property
    def correct_share(self) -> float:
        return self.correct / self.total if self.total else 0.0

    def wrong(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.verdict != CORRECT]

    def report(self) -> str:
        """Each question not answered correctly, with what it expected and the opening it got."""
        return "\n".join(
            f"[{o.verdict}] {o.question.kind} ({o.question.table}): {o.question.text}\n"
            f"    expected {describe_expected(o.question.expected)}\n    got      {shortened(o.opening) or '(nothing)'}"
            for o in self.wrong()
        )


def shortened(opening: str, limit: int = 300) -> str:
    return opening if len(opening) <= limit else opening[: limit - 1] + "…"


def describe_expected(expected: Expected) -> str:
    if expected.cannot:
        return "cannot"
    parts = [*expected.labels, *(f"{n:,.2f}".removesuffix(".00") for n in expected.numbers)]
    return ", ".join([*parts, *(f"{p:.1f} %" for p in expected.percents)])


def score(suite: list[Question], ask: Callable[[Question], str]) -> Score:
    """Every question asked through `ask` (which returns the answer's text) and judged."""
    return Score([judge(q, ask(q)) for q in suite])
