"""A deliverable's title, when its writer gives none (agents/outline.py `title_for`): the subject of the request,
never a fragment of its grammar (a leading conjunction, "a slide deck for", the list of things asked for)."""

from __future__ import annotations

import pytest

from canvas_core.agents.outline import title_for

pytestmark = pytest.mark.unit

KINDS_OF_DELIVERABLE = ("report", "deck", "slides", "spreadsheet", "workbook", "app", "memo", "dashboard")


@pytest.mark.parametrize(
    ("prompt", "title"),
    [
        ("Write a report and a slide deck for the quarterly business review", "Quarterly business review"),
        ("And a slide deck for the quarterly business review", "Quarterly business review"),
        ("Make a report, a slide deck, a spreadsheet and a web app from the attached sales data", "Sales data"),
        ("Build a dashboard and a memo on churn by region", "Churn by region"),
        ("I need slides, a workbook and a write-up about the 2025 hiring plan", "2025 hiring plan"),
        ("Also, create a presentation plus an Excel file on regional margins", "Regional margins"),
        ("Write a report on remote work and a slide deck for the board", "Remote work"),
        ("Put together a deck, a report and an app about solar panels for homeowners", "Solar panels for homeowners"),
        ("Prepare a memo and a one-pager based on the survey results", "Survey results"),
    ],
)
def test_a_title_is_the_subject_never_the_list_of_deliverables(prompt, title):
    # When
    made = title_for(prompt)
    # Then
    assert made == title
    assert not made.lower().startswith(("and ", "or ", "also ", "a ", "make ", "write "))
    assert not any(f"{kind} for" in made.lower() for kind in KINDS_OF_DELIVERABLE)


@pytest.mark.parametrize(
    ("prompt", "title"),
    [
        ("Prepare the quarterly business review", "Quarterly business review"),
        ("Prepare the business review", "Business review"),
        ("Put together the QBR", "QBR"),
    ],
)
def test_a_deliverable_that_is_its_own_subject_is_the_title(prompt, title):
    assert title_for(prompt) == title


@pytest.mark.parametrize(
    ("prompt", "title"),
    [
        ("Write a report on K. Nowak's sales in the north. Then add a chart.", "K. Nowak's sales in the north"),
        ("Make slides on Dr. Smith's findings, e.g. the tide data", "Dr. Smith's findings, e.g. the tide data"),
        ("Write a memo on Acme Inc. and its 3.5% growth", "Acme Inc. and its 3.5% growth"),
    ],
)
def test_a_title_keeps_names_initials_and_abbreviations_whole(prompt, title):
    assert title_for(prompt) == title
