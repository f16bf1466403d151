"""Where a sentence ends (canvas_core/sentences.py), and what a reader sees of it: names with initials,
abbreviations and decimals stay whole in the offline provider's points and in a slide's bullets."""

from __future__ import annotations

import re

import pytest

from canvas_core.prompt_format import outline_text
from canvas_core.providers.offline import OfflineProvider
from canvas_core.render.pptx import fits_body, split_bullets
from canvas_core.sentences import sentences

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "K. Nowak had the highest revenue by rep: 61,240; S. Lee the lowest: 3.5. Sales rose.",
            ["K. Nowak had the highest revenue by rep: 61,240; S. Lee the lowest: 3.5.", "Sales rose."],
        ),
        (
            "Use hand tools, e.g. chisels. Dr. Smith of Acme Inc. agreed. Mr. J.R.R. Tolkien wrote it, i.e. him.",
            [
                "Use hand tools, e.g. chisels.",
                "Dr. Smith of Acme Inc. agreed.",
                "Mr. J.R.R. Tolkien wrote it, i.e. him.",
            ],
        ),
        (
            "Costs grew 3.5% vs. last year. See No. 5 on p. 12. Why? Because!",
            [
                "Costs grew 3.5% vs. last year.",
                "See No. 5 on p. 12.",
                "Why?",
                "Because!",
            ],
        ),
        (
            "Sales rose [1]. Costs fell. [2] The U.S. team grew.",
            ["Sales rose [1].", "Costs fell. [2]", "The U.S. team grew."],
        ),
        ('She said "we are done." Then she left.', ['She said "we are done."', "Then she left."]),
        ("No end here", ["No end here"]),
        ("", []),
    ],
)
def test_a_sentence_ends_at_its_end_not_at_an_initial_an_abbreviation_or_a_decimal(text, expected):
    assert sentences(text) == expected


def test_the_offline_answer_quotes_a_finding_about_a_named_person_whole():
    # Given an analysis whose finding names people by their initials
    prompt = (
        "Question: Who sold the most?\n\nMaterial:\n"
        "## Sales analysis (sources [1])\n"
        "K. Nowak had the highest revenue by rep: 61,240; S. Lee the lowest: 12,010 (4 rep values).\n"
        "Dr. A. Okafor approved the figures, e.g. the Q3 totals of 3.5 million.\n\n"
        "Sources:\n[1] sales.csv"
    )
    # When
    text = OfflineProvider().complete(system="", prompt=prompt, role="writer").text
    # Then each point is the whole sentence, cited once at its end
    assert "- K. Nowak had the highest revenue by rep: 61,240; S. Lee the lowest: 12,010 (4 rep values) [1]." in text
    assert "- Dr. A. Okafor approved the figures, e.g. the Q3 totals of 3.5 million [1]." in text
    assert not re.search(r"^- (Nowak|Lee|Okafor)\b", text, re.MULTILINE)


def test_the_offline_outline_sections_keep_names_whole():
    # Given a deliverable's outline and material naming people by their initials
    prompt = (
        f"Task: Write the report.\n\n{outline_text(['Revenue by rep', 'Next steps'])}\n\nMaterial:\n"
        "## Sales analysis (sources [1])\nK. Nowak had the highest revenue by rep: 61,240; S. Lee the lowest.\n"
    )
    # When
    text = OfflineProvider().complete(system="", prompt=prompt, role="writer").text
    # Then the part on revenue by rep holds the finding whole
    part = text.split("## Revenue by rep", 1)[1].split("## ", 1)[0]
    assert part.strip() == "- K. Nowak had the highest revenue by rep: 61,240; S. Lee the lowest [1]."


def test_a_point_too_long_for_one_slide_is_cut_between_sentences_never_at_an_initial():
    # Given a long point about people named by their initials
    point = " ".join(
        f"K. Nowak closed {n} deals with Acme Inc. in region No. {n}, e.g. Dr. S. Lee's accounts worth {n}.5 million."
        for n in range(1, 16)
    )
    # When it is split into bullets that fit slides
    groups = split_bullets([point])
    bullets = [b for group in groups for b in group]
    # Then every bullet is a whole sentence, and every slide fits
    assert len(groups) > 1 and all(fits_body(g) for g in groups)
    assert all(b.startswith("K. Nowak closed") and b.endswith("million.") for b in bullets)
    assert " ".join(bullets) == point
