"""The price table: credits per 1,000 tokens by model, per search, page and artifact, rounded up per block."""

from __future__ import annotations

from decimal import Decimal

import pytest

from canvas_core.blocks.context import BlockOutput, Usage
from canvas_core.models.items import Artifact
from canvas_core.pricing import (
    DEFAULT_MODEL_PRICE,
    PER_ARTIFACT,
    PER_PAGE_FETCHED,
    PER_SEARCH,
    balance_refusal,
    block_credits,
    model_cost,
    model_price,
    usage_credits,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "model_id,price",
    [
        ("amazon.nova-pro-v1:0", ("0.8", "3.2")),
        ("us.amazon.nova-pro-v1:0", ("0.8", "3.2")),
        ("arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.amazon.nova-lite-v1:0", ("0.06", "0.24")),
        ("gpt-4o-mini-2024-07-18", ("0.15", "0.6")),
        ("gpt-4o", ("2.5", "10")),
        ("offline/extractive-v1", ("0", "0")),
    ],
)
def test_a_models_price_is_found_by_its_id(model_id, price):
    assert model_price(model_id) == (Decimal(price[0]), Decimal(price[1]))


def test_an_unknown_model_is_priced_like_a_large_one():
    assert model_price("llama3.1:8b") == DEFAULT_MODEL_PRICE


def test_a_call_costs_its_tokens_at_the_models_rates():
    # 2,000 input tokens at 0.8 and 500 output tokens at 3.2 per thousand
    assert model_cost("amazon.nova-pro-v1:0", 2000, 500) == Decimal("3.2")


def test_a_blocks_credits_add_up_everything_it_used_rounded_up():
    # Given a block that called a model, searched, fetched pages and wrote a file
    usage = Usage(calls=[("amazon.nova-pro-v1:0", 2000, 500)], searches=2, pages_fetched=3)
    artifact = Artifact(id="a", type="docx", name="r.docx", s3_key="k", size_bytes=1)
    output = BlockOutput(content="x", artifacts=[artifact], credits=4)
    # When / Then: 3.2 + 2 searches + 3 pages + 1 artifact + its own 4, rounded up
    expected = Decimal("3.2") + 2 * PER_SEARCH + 3 * PER_PAGE_FETCHED + PER_ARTIFACT + 4
    assert block_credits(usage, output) == int(expected) + 1


def test_offline_and_idle_blocks_cost_nothing_and_any_use_costs_at_least_one_credit():
    assert usage_credits([("offline/extractive-v1", 5000, 5000)]) == 0
    assert usage_credits([]) == 0
    assert usage_credits([("amazon.nova-micro-v1:0", 1, 1)]) == 1


def test_a_block_may_not_start_once_the_balance_is_spent():
    assert balance_refusal({"credits_balance": 1}) is None
    assert balance_refusal({"credits_balance": 0}).startswith("Skipped: the account has run out of credits (balance 0)")
    assert "balance -12" in balance_refusal({"credits_balance": -12})
    assert balance_refusal(None) is not None
