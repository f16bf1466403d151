"""Lists in requests are read however they are written (after a colon, "covering", "including", bullets, numbered
lines, "and", "&", "as well as"): each item is a part. Titles are whole phrases of at most about 80 characters,
never ending on a function word; a memo's addressees come from the request when it names them."""

from __future__ import annotations

import pytest

from canvas_core.agents.outline import FUNCTION_WORDS, read_request, title_for

pytestmark = pytest.mark.unit

LISTS = [
    (
        "Build a spreadsheet budget for a 3-day team offsite: travel, lodging, meals, activities.",
        ["Travel", "Lodging", "Meals", "Activities"],
    ),
    ("Plan a wedding budget: venue, catering, music, flowers", ["Venue", "Catering", "Music", "Flowers"]),
    (
        "Build a spreadsheet budget for our team offsite covering travel, lodging, meals and activities",
        ["Travel", "Lodging", "Meals", "Activities"],
    ),
    ("Create a household budget: rent; groceries; utilities; savings", ["Rent", "Groceries", "Utilities", "Savings"]),
    ("Make a budget for the school fair including stalls, prizes & advertising", ["Stalls", "Prizes", "Advertising"]),
    (
        "Draft a budget for a product launch covering design, printing as well as shipping",
        ["Design", "Printing", "Shipping"],
    ),
    (
        "Write a report on the warehouse audit:\n- stock levels\n- safety incidents\n- staffing gaps",
        ["Stock levels", "Safety incidents", "Staffing gaps"],
    ),
    (
        "Write a report on our cloud migration.\n1. Current costs\n2. Risks\n3. Timeline\n4. Recommendations",
        ["Current costs", "Risks", "Timeline", "Recommendations"],
    ),
    (
        "Write a report about river pollution covering sources, health effects and clean-up options",
        ["Sources", "Health effects", "Clean-up options"],
    ),
    (
        "Prepare a report on city cycling: safety, infrastructure, commuting habits",
        ["Safety", "Infrastructure", "Commuting habits"],
    ),
    (
        "Write a report on the bakery's first year including sales, staffing as well as customer feedback",
        ["Sales", "Staffing", "Customer feedback"],
    ),
    (
        "Make a slide deck on renewable energy including solar, wind, hydro as well as geothermal",
        ["Solar", "Wind", "Hydro", "Geothermal"],
    ),
    (
        "Create a presentation for new hires: benefits, tools, team rituals, first-week checklist",
        ["Benefits", "Tools", "Team rituals", "First-week checklist"],
    ),
    (
        "Make slides about our product launch covering pricing & marketing & distribution",
        ["Pricing", "Marketing", "Distribution"],
    ),
    ("Build a deck on the quarterly review:\n* revenue\n* churn\n* hiring plan", ["Revenue", "Churn", "Hiring plan"]),
    ("Write a memo to the board about the office move covering costs, timing and risks", ["Costs", "Timing", "Risks"]),
    (
        "Draft a memo for the staff on the new policy: remote days, core hours, equipment",
        ["Remote days", "Core hours", "Equipment"],
    ),
    (
        "Write a memo from the CFO on the budget cuts including travel, training & software licences",
        ["Travel", "Training", "Software licences"],
    ),
    ("Write a memo about the event.\n(1) venue\n(2) catering\n(3) security", ["Venue", "Catering", "Security"]),
    (
        "Plan a conference budget covering speakers, venue hire, catering, audio-visual and marketing",
        ["Speakers", "Venue hire", "Catering", "Audio-visual", "Marketing"],
    ),
    ("Plan a birthday party budget - cake, decorations, games and a clown", ["Cake", "Decorations", "Games", "Clown"]),
    (
        "Create a landing page for a yoga studio offering beginner classes, private sessions and weekend retreats",
        ["Beginner classes", "Private sessions", "Weekend retreats"],
    ),
    (
        "Slides for the board meeting: Q2 results; hiring plan; product roadmap; risks",
        ["Q2 results", "Hiring plan", "Product roadmap", "Risks"],
    ),
]


@pytest.mark.parametrize(("prompt", "items"), LISTS)
def test_each_listed_item_is_a_part_and_the_title_is_a_whole_phrase(prompt, items):
    assert list(read_request(prompt).items) == items
    title = title_for(prompt)
    assert 3 <= len(title) <= 80
    assert title.split()[-1].lower().strip(".,;:") not in FUNCTION_WORDS


@pytest.mark.parametrize(
    ("prompt", "title"),
    [
        (
            "Write a report on our sales performance covering January to April, with a focus on the West region "
            "and the new product lines launched this year",
            "Our sales performance covering January to April",
        ),
        (
            "Create a landing page for a cooking class that costs EUR 240, aimed at beginners who want to learn "
            "Italian cuisine over a single weekend in Bologna",
            "Cooking class that costs EUR 240",
        ),
        ("Write a memo for the board from the CFO about the Q3 results", "Q3 results"),
        (
            "Write a memo to the board asking them to approve the West region office, based on the cost analysis "
            "the finance team prepared over the last three months for every region",
            "Approve the West region office",
        ),
        (
            "I need a budget for a kitchen renovation including cabinets, countertops, appliances, flooring and "
            "labour costs for the whole ground floor",
            "Budget for a kitchen renovation",
        ),
        (
            "Draft a memo to all staff announcing the new hybrid work policy that takes effect in March",
            "New hybrid work policy that takes effect in March",
        ),
        (
            "Write a memo to the finance committee recommending that we approve the new vendor contract for "
            "cleaning services before the end of the month",
            "Approve the new vendor contract",
        ),
        ("Write a report on:\n- market trends\n- competitor analysis", "Market trends and competitor analysis"),
        ("Create a deck with 10 slides on onboarding", "Onboarding"),
        (
            "Write a report analysing customer churn for the first quarter of 2025, broken down by region and by "
            "product, with recommendations for the sales team",
            "Analysing customer churn for the first quarter of 2025",
        ),
        ("?", "Untitled"),
        (
            "Produce a detailed report examining the long-term effects of microplastics found in coastal waters "
            "around northern Europe on fish populations and on the fishing communities that depend on them",
            "Examining the long-term effects of microplastics found",
        ),
    ],
)
def test_a_long_request_gives_a_whole_phrase_not_a_clause_cut_short(prompt, title):
    assert title_for(prompt) == title


@pytest.mark.parametrize(
    ("prompt", "audience", "sender"),
    [
        ("Write a memo for the board from the CFO about the Q3 results", "The board", "The CFO"),
        ("Draft a memo to the board asking them to approve the new office", "The board", None),
        (
            "Write a memo from the head of sales to all regional managers on targets",
            "All regional managers",
            "The head of sales",
        ),
        ("Write a memo about the Q3 results", None, None),
        (
            "Write a memo to the team, the managers and the directors about the office move",
            "The team, the managers and the directors",
            None,
        ),
    ],
)
def test_a_memo_is_addressed_as_the_request_says(prompt, audience, sender):
    outline = read_request(prompt)
    assert (outline.audience, outline.sender) == (audience, sender)


def test_a_long_request_of_many_parties_is_read_without_backtracking_through_them():
    # Given a memo request naming a thousand parties and ending in words no party pattern takes
    prompt = "Write a memo to " + ", ".join(["the x y z w"] * 1000) + " qqq zzz"
    # When / Then it is read at once (a pattern that tried every way to split it would not finish)
    assert read_request(prompt).audience.startswith("The x y z w")
    assert len(title_for(prompt)) <= 80
