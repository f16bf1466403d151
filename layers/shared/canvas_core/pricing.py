"""What a run costs, in credits (1 currency unit = 1,000 credits; a new account holds 5,000).

| what | credits |
|---|---|
| 1,000 input / output tokens of a model | `MODEL_PRICES` below (longest matching prefix of the model id) |
| a model not in the table | `DEFAULT_MODEL_PRICE` (priced like a large model, so nothing runs free by mistake) |
| the offline provider (`offline/...`) | 0 |
| a web search | `PER_SEARCH` |
| a web page (or transcript) fetched | `PER_PAGE_FETCHED` |
| an artifact (a file a block produced) | `PER_ARTIFACT` |

A block's credits are the sum over what it used (its model calls, searches, pages, artifacts, plus any charge
of its own in `BlockOutput.credits`, e.g. an image model priced per image), rounded up to a whole credit.
Planning is priced the same way from the planner's model calls. A block that fails costs nothing.
The token prices follow the providers' list prices per million tokens (1 credit = 0.001 currency units).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

D = Decimal

# (input, output) credits per 1,000 tokens, by model id prefix (cross-region prefixes such as `us.` are ignored).
MODEL_PRICES: dict[str, tuple[Decimal, Decimal]] = {
    "offline/": (D(0), D(0)),
    "amazon.nova-micro": (D("0.035"), D("0.14")),
    "amazon.nova-lite": (D("0.06"), D("0.24")),
    "amazon.nova-pro": (D("0.8"), D("3.2")),
    "amazon.nova-premier": (D("2.5"), D("12.5")),
    "anthropic.claude-3-haiku": (D("0.25"), D("1.25")),
    "anthropic.claude-3-5-haiku": (D("0.8"), D("4")),
    "anthropic.claude-haiku-4": (D("1"), D("5")),
    "anthropic.claude-3-5-sonnet": (D("3"), D("15")),
    "anthropic.claude-3-7-sonnet": (D("3"), D("15")),
    "anthropic.claude-sonnet-4": (D("3"), D("15")),
    "anthropic.claude-opus-4": (D("15"), D("75")),
    "meta.llama3": (D("0.72"), D("0.72")),
    "mistral.": (D("2"), D("6")),
    "gpt-4o-mini": (D("0.15"), D("0.6")),
    "gpt-4o": (D("2.5"), D("10")),
    "gpt-4.1-nano": (D("0.1"), D("0.4")),
    "gpt-4.1-mini": (D("0.4"), D("1.6")),
    "gpt-4.1": (D("2"), D("8")),
    "o4-mini": (D("1.1"), D("4.4")),
}
DEFAULT_MODEL_PRICE: tuple[Decimal, Decimal] = (D("3"), D("15"))
PER_SEARCH = D(5)
PER_PAGE_FETCHED = D(1)
PER_ARTIFACT = D(10)

_ARN_PREFIX = re.compile(r"^arn:[^/]+/")
_REGION_PREFIX = re.compile(r"^(?:us|eu|apac|us-gov|ca|jp|au|global)\.")


def model_price(model_id: str) -> tuple[Decimal, Decimal]:
    name = _REGION_PREFIX.sub("", _ARN_PREFIX.sub("", model_id.strip().lower()))
    matches = [prefix for prefix in MODEL_PRICES if name.startswith(prefix)]
    return MODEL_PRICES[max(matches, key=len)] if matches else DEFAULT_MODEL_PRICE


def model_cost(model_id: str, input_tokens: int, output_tokens: int) -> Decimal:
    price_in, price_out = model_price(model_id)
    return (price_in * input_tokens + price_out * output_tokens) / 1000


def usage_credits(
    calls: list[tuple[str, int, int]], searches: int = 0, pages_fetched: int = 0, artifacts: int = 0, extra: int = 0
) -> int:
    """Whole credits for model calls `(model id, input tokens, output tokens)` and the other things used."""
    total = sum((model_cost(*call) for call in calls), D(0))
    total += PER_SEARCH * searches + PER_PAGE_FETCHED * pages_fetched + PER_ARTIFACT * artifacts + extra
    return math.ceil(total)


def block_credits(usage: Any, output: Any) -> int:
    """A block's credits from its context's `Usage` and its `BlockOutput`."""
    return usage_credits(
        usage.calls, usage.searches, usage.pages_fetched, len(output.artifacts), max(0, int(output.credits or 0))
    )


def balance_refusal(account: Mapping[str, Any] | None) -> str | None:
    """Why a block may not start for lack of credits, or None when the account still holds some."""
    balance = int(account.get("credits_balance", 0)) if account else 0
    if balance > 0:
        return None
    return f"Skipped: the account has run out of credits (balance {balance}); add credits and run again"
