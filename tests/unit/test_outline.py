"""canvas_core/agents/outline.py (and the outline's text in prompt_format.py): the skeleton a request asks for
(its parts, how many slides, what it compares, whom a memo is for) and a title that is not the prompt cut
short."""

from __future__ import annotations

import pytest

from canvas_core.agents.outline import generic_parts, read_request, title_for
from canvas_core.prompt_format import outline_in, outline_text, without_outline

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("prompt", "items", "count", "subjects"),
    [
        (
            "Write a report comparing heat pumps and gas boilers on running costs, installation and emissions",
            ("Running costs", "Installation", "Emissions"),
            None,
            ("Heat pumps", "Gas boilers"),
        ),
        (
            "Build a wedding budget for venue, catering, music and flowers",
            ("Venue", "Catering", "Music", "Flowers"),
            None,
            (),
        ),
        ("Make a deck of five slides introducing our new onboarding process", (), 5, ()),
        ("A 10-slide deck on solar power", (), 10, ()),
        (
            "Compare iPhone vs Pixel on battery life, price and weight",
            ("Battery life", "Price", "Weight"),
            None,
            ("iPhone", "Pixel"),
        ),
        # a second request is not a list of items; nor is a single subject
        ("Write a report on remote work and write a memo on it for the board", (), None, ()),
        ("Summarize the arguments for and against a four-day work week", (), None, ()),
        ("Make slides on our quarterly sales", (), None, ()),
    ],
)
def test_a_request_names_its_parts_count_and_subjects(prompt, items, count, subjects):
    outline = read_request(prompt)
    assert (outline.items, outline.count, outline.subjects) == (items, count, subjects)


def test_subtasks_are_the_parts_and_a_memo_knows_its_audience():
    outline = read_request("Plan the move", ["Pick a date for the move", "Book the van"])
    assert outline.items == ("Pick a date for the move", "Book the van")
    memo = read_request("Write a memo to the harbour team about spring tides and the new mooring rules")
    assert memo.audience == "The harbour team" and memo.items == ("Spring tides", "New mooring rules")


@pytest.mark.parametrize(
    ("prompt", "title"),
    [
        ("Make slides on our quarterly sales", "Our quarterly sales"),
        (
            "Write a report comparing heat pumps and gas boilers on running costs, installation and emissions",
            "Heat pumps versus gas boilers: running costs, installation and emissions",
        ),
        (
            "Build a wedding budget for venue, catering, music and flowers",
            "Wedding budget for venue, catering, music and flowers",
        ),
        ("Write a memo to the harbour team about spring tides", "Spring tides"),
        ("Make a deck of five slides introducing our new onboarding process", "Introducing our new onboarding process"),
        ("Write a report on remote work and write a memo on it for the board", "Remote work"),
        ("How do tides work?", "How do tides work?"),
        ("Make a landing page for our bakery; use the uploaded logo", "Our bakery"),
        (
            "Write a report on why tides differ between coasts, based on the latest research from the national "
            "oceanography centre and the university",
            "Why tides differ between coasts",
        ),
    ],
)
def test_a_title_is_the_subject_of_the_request_never_the_prompt_cut_short(prompt, title):
    assert title_for(prompt) == title
    assert "…" not in title_for(prompt)


def test_the_outline_travels_in_instructions_and_comes_back_out():
    written = f"Make slides on tides\n\nTurn the answer into a deck.\n\n{outline_text(['Causes', 'Ranges'], 4)}"
    assert outline_in(written) == (["Causes", "Ranges"], 4)
    assert without_outline(written) == "Make slides on tides\n\nTurn the answer into a deck."
    assert outline_in("Make slides on tides") == ([], None)


def test_generic_parts_open_with_an_overview_and_close_with_next_steps():
    assert generic_parts(1) == ["Overview"]
    assert generic_parts(4) == ["Overview", "Background", "Key points", "Next steps"]
    assert len(generic_parts(9)) == 9 and len(set(generic_parts(9))) == 9
