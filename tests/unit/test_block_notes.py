"""Blocks that fall back when a model's answer is unusable say why (`BlockContext.note`), for the run's errors: the
app and the prototype when the answer is no working page, the analysis when the model's plan does not fit the
table. Offline, where the extractive answers are meant as they are, nothing is noted."""

from __future__ import annotations

import importlib

import pytest

from canvas_core.blocks import app, prototype
from canvas_core.blocks.analysis import run_analyses
from canvas_core.blocks.context import BlockContext
from canvas_core.models.items import NodeItem, RunItem
from canvas_core.providers.base import Completion
from canvas_core.providers.offline import OfflineProvider

SALES = (
    "| month | region | revenue |\n|---|---|---|\n| 2026-01 | North | 120 |\n| 2026-01 | South | 80 |\n"
    "| 2026-02 | North | 150 |\n| 2026-02 | South | 95 |\n| 2026-03 | North | 170 |\n| 2026-03 | South | 90 |"
)


class _Model:
    """A model provider that answers every call with one text."""

    name = "fake-model"

    def __init__(self, answer: str) -> None:
        self.answer = answer

    def complete(self, *, system: str, prompt: str, role: str) -> Completion:
        return Completion(text=self.answer, model_id="small-model", input_tokens=10, output_tokens=5)


class _Files:
    def __init__(self) -> None:
        self.stored: dict[str, bytes] = {}

    def put(self, key: str, data: bytes, content_type: str) -> None:
        self.stored[key] = data


def _ctx(block_type: str, provider: object, inputs: list[NodeItem] | None = None) -> BlockContext:
    run = RunItem(
        run_id="r1",
        account_id="a",
        canvas_id="c",
        prompt="Revenue by region",
        template="auto",
        created_at_ms=0,
        estimated_duration_ms=0,
    )
    node = NodeItem(canvas_id="c", block_id="b9", name="Deliverable", type=block_type)
    return BlockContext(run=run, node=node, inputs=inputs or [], files=_Files(), provider=provider)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("Sure, here is what the app would do: list the tides.", "The model's answer held no HTML document"),
        (
            "<!DOCTYPE html><html><head><title>T</title></head><body><p>Tides</p></body></html>",
            "The model's page failed its check",
        ),
    ],
)
@pytest.mark.parametrize(("module", "label"), [(app, "app"), (prototype, "prototype")])
def test_a_page_the_model_did_not_write_usably_is_the_built_in_one_and_the_block_says_why(
    module, label, answer, reason
):
    # Given a model whose answer is not a working page
    ctx = _ctx(f"{label}-block", _Model(answer))
    # When
    output = module.run(ctx)
    # Then the built-in page is shipped, and the note says why
    assert [a.type for a in output.artifacts] == ["html"]
    assert f"Built-in {label}" in output.content
    assert len(ctx.notes) == 1
    assert ctx.notes[0].startswith(reason) and ctx.notes[0].endswith(f"; the built-in {label} was used")


def test_offline_the_built_in_app_is_no_fallback_to_report():
    ctx = _ctx("app-block", OfflineProvider())
    output = app.run(ctx)
    assert "Built-in app" in output.content
    assert ctx.notes == []


def test_an_analysis_plan_off_the_tables_schema_is_the_rules_and_the_block_says_why():
    # Given a table and a model whose plan names a column the table does not have
    table = NodeItem(canvas_id="c", block_id="b1", name="Sales", type="table-block", content=SALES)
    plan = '{"measures": [{"column": "profit", "aggregate": "sum"}], "dimensions": ["region"]}'
    ctx = _ctx("text-block", _Model(plan), inputs=[table])
    # When
    analyses = run_analyses(ctx, "Summarise the sales")
    # Then the rules chose the analysis, and the note names the table and the model's problem
    assert [a.plan.chosen_by for a in analyses] == ["rules"]
    assert len(ctx.notes) == 1
    assert ctx.notes[0].startswith("Sales: The model's analysis plan was refused (")
    assert "profit" in ctx.notes[0] and ctx.notes[0].endswith("rules chose it.")


def test_an_analysis_plan_that_is_no_json_is_noted_and_a_valid_one_is_not():
    table = NodeItem(canvas_id="c", block_id="b1", name="Sales", type="table-block", content=SALES)
    refused = _ctx("text-block", _Model("I would sum the revenue by region."), inputs=[table])
    run_analyses(refused, "Summarise the sales")
    assert len(refused.notes) == 1 and "holds no valid JSON" in refused.notes[0]
    valid = '{"measures": [{"column": "revenue", "aggregate": "sum"}], "dimensions": ["region"]}'
    used = _ctx("text-block", _Model(valid), inputs=[table])
    assert [a.plan.chosen_by for a in run_analyses(used, "Summarise the sales")] == ["model"]
    assert used.notes == []


@pytest.mark.parametrize("block_type", ["document", "memo", "presentation", "excel", "landing_page"])
def test_a_deliverable_whose_model_answered_nothing_is_made_all_the_same_and_the_block_says_why(block_type):
    module = importlib.import_module(f"canvas_core.blocks.{block_type}")
    # Given a model whose answer is empty
    ctx = _ctx(f"{block_type.replace('_', '-')}-block", _Model("  "))
    # When
    output = module.run(ctx)
    # Then the file is made, and the note says the model's text is missing from it
    assert output.artifacts
    assert ctx.notes == ["The model's answer was empty; the file was made without its text"]


def test_a_written_answer_the_model_left_empty_is_an_extract_of_the_inputs_and_the_block_says_why():
    from canvas_core.blocks import text

    findings = NodeItem(
        canvas_id="c",
        block_id="b1",
        name="Field notes",
        type="text-block",
        status="completed",
        content="Tide gauges in the harbour rose 4 cm over the decade. Dredging moved the channel east in 2019.",
    )
    # Given a model whose answer is only white space
    ctx = _ctx("text-block", _Model(" \n "), inputs=[findings])
    # When
    output = text.run(ctx)
    # Then the answer is drawn from the inputs, not empty, and the note says it was made without the model
    assert "Tide gauges" in output.content or "Dredging" in output.content
    assert "no language model was called" not in output.content
    assert ctx.notes == [text.EMPTY_ANSWER]
    # And an answer the model wrote is kept, with no note
    written = _ctx("text-block", _Model("The harbour's water rose 4 cm [1]."), inputs=[findings])
    assert text.run(written).content.startswith("The harbour's water rose 4 cm") and written.notes == []


def test_a_deliverable_the_model_wrote_has_no_note():
    from canvas_core.blocks import document

    ctx = _ctx("document-block", _Model("## Findings\n\nRevenue grew in the North."))
    assert document.run(ctx).artifacts and ctx.notes == []


def test_a_reason_is_noted_once():
    ctx = _ctx("app-block", _Model(""))
    ctx.note("The model's answer held no HTML document; the built-in app was used")
    ctx.note("The model's answer held no HTML document; the built-in app was used")
    assert len(ctx.notes) == 1
