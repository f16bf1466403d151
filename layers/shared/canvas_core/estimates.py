"""The heuristic behind `estimated_duration_ms`, from what a create request says (template, blocks, files):

    estimate = PLAN_MS + longest path through the typical canvas + PER_FILE_MS x files + FINALIZE_MS

The typical canvas is the one the rule-based planner makes for the template (or the explicit `blocks`) and a
one-part prompt; blocks run as soon as their inputs end, so its longest chain of `BLOCK_MS` (each block plus
PER_BLOCK_OVERHEAD_MS for its Lambda and state transitions) is what the run waits for. The times are those
of a deployed stack calling a model (the offline provider is much faster); prompts with several parts, links
or research words get more blocks than the estimate counts. See docs/agents.md.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from canvas_core.models.catalog import BLOCK_CATALOG, BlockType

if TYPE_CHECKING:
    from canvas_core.agents.schema import PlanStep

B = BlockType
PLAN_MS = 30_000
FINALIZE_MS = 5_000
PER_FILE_MS = 20_000
PER_BLOCK_OVERHEAD_MS = 5_000
# Each block type's typical time, from the block catalogue (models/catalog.py).
BLOCK_MS: dict[BlockType, int] = {kind: spec.typical_ms for kind, spec in BLOCK_CATALOG.items()}


@lru_cache(maxsize=256)
def _typical_steps(template: str, blocks: tuple[str, ...] | None) -> tuple[PlanStep, ...]:
    """The typical canvas's steps: the rule-based plan for the template (or `blocks`) and a one-part prompt, made
    once per container for each (both estimates of a create read it)."""
    from canvas_core.agents.checks import constraint_for
    from canvas_core.agents.rules import rule_steps

    return tuple(rule_steps("", None, constraint_for(template, list(blocks) if blocks is not None else None)))


# What a block of the typical canvas is expected to cost, in credits: a few thousand tokens of a mid-priced model.
CREDITS_PER_BLOCK = 20


def estimate_credits(template: str, blocks: list[str] | None, file_count: int) -> int:
    """What a run is expected to spend: planning and each block of the typical canvas (and one per upload), at
    CREDITS_PER_BLOCK. It sizes the run's reservation, not what it is charged."""
    steps = _typical_steps(template, tuple(blocks) if blocks is not None else None)
    return CREDITS_PER_BLOCK * (1 + len(steps) + file_count)


# What a block of each type typically uses: (input tokens, output tokens, searches, pages fetched, artifacts). The
# output is about what its role's default cap allows (providers/roles.py); research reads pages and searches, as far
# as the gathering settings let it (`_gathered`); every block that writes a file writes one (an image-block that
# describes an upload writes none: `estimate_block_credits(uploaded=True)`).
TYPICAL_BLOCK_USAGE: dict[BlockType, tuple[int, int, int, int, int]] = {
    kind: spec.usage for kind, spec in BLOCK_CATALOG.items()
}


def estimate_block_credits(block_type: str, persona: str | None, uploaded: bool = False) -> int:
    """What a planned block is expected to spend: its type's typical use (TYPICAL_BLOCK_USAGE) priced as the runner
    prices what a block used (canvas_core/pricing.py): its model calls at the model its persona's role calls (the
    offline provider's models cost nothing), the searches and pages the gathering settings let it make, its file
    (none for an image-block describing an upload, `uploaded`). Shown on the DAG and summed for a run that waits for
    review; what a block is charged is what it used."""
    from canvas_core.agents.personas import role_of
    from canvas_core.pricing import usage_credits
    from canvas_core.providers.roles import model_for_role
    from canvas_core.settings import provider_settings

    known = {t.value: t for t in BlockType}
    kind = known.get(block_type)
    usage = TYPICAL_BLOCK_USAGE.get(kind) if kind is not None else None
    input_tokens, output_tokens, searches, pages, artifacts = usage or max(TYPICAL_BLOCK_USAGE.values())
    searches, pages = _gathered(kind, searches, pages)
    if uploaded:
        artifacts = 0
    # The offline provider answers every role itself, whatever model ids are configured.
    offline = provider_settings().model_provider == "offline"
    model = "offline/" if offline else model_for_role(role_of(persona), default="")
    return usage_credits([(model, input_tokens, output_tokens)], searches, pages, artifacts)


def _gathered(kind: BlockType | None, searches: int, pages: int) -> tuple[int, int]:
    """The searches and pages a research block can be charged for: none without a search provider (web research
    then fails, uncharged; deep research reads only its files), else at most what its budget settings allow."""
    if kind not in (B.WEB_RESEARCH, B.DEEP_RESEARCH):
        return searches, pages
    from canvas_core.settings import gather_settings

    settings = gather_settings()
    if settings.search_provider == "none":
        return 0, 0
    if kind == B.WEB_RESEARCH:
        return min(searches, settings.web_research_queries), min(pages, settings.web_research_max_pages)
    return min(searches, settings.deep_research_max_searches), min(pages, settings.deep_research_max_pages)


# With the offline provider no model is called: a block takes milliseconds, and the run's time is the state machine's
# own (a Lambda and a few transitions per block on the embedded stack). Measured on `canvas serve` (2 cores shared with
# other work), from create to end: every template in 0.1-0.9 s (estimates 1.3-2.2 s), with --state-dir too; with the
# e2e tier's injected faults (transaction_conflict=0.3, throttle=0.05, lambda_error=0.02), whose retries back off a
# second and more, 0.6-4.3 s. The estimate is for a run without retries: `canvas run` says when a run is past it.
OFFLINE_PLAN_MS = 500
OFFLINE_BLOCK_MS = 300
OFFLINE_PER_FILE_MS = 200
OFFLINE_FINALIZE_MS = 200


def estimate_duration_ms(template: str, blocks: list[str] | None, file_count: int, offline: bool = False) -> int:
    steps = _typical_steps(template, tuple(blocks) if blocks is not None else None)
    finish: dict[str, int] = {}
    for step in steps:  # in run order: each step after its inputs
        start = max((finish[i] for i in step.inputs if i in finish), default=0)
        took = OFFLINE_BLOCK_MS if offline else BLOCK_MS[BlockType(step.type)] + PER_BLOCK_OVERHEAD_MS
        finish[step.id] = start + took
    longest = max(finish.values(), default=0)
    if offline:
        return OFFLINE_PLAN_MS + longest + OFFLINE_PER_FILE_MS * file_count + OFFLINE_FINALIZE_MS
    return PLAN_MS + longest + PER_FILE_MS * file_count + FINALIZE_MS


def estimate_rerun(steps: list[tuple[str, str, list[str]]], offline: bool = False) -> tuple[int, int]:
    """A re-run's expected duration (ms) and credits, from the blocks it runs again: `(block id, block type, ids of
    its inputs)` in run order. No planning (the canvas is copied); reused inputs have ended already."""
    finish: dict[str, int] = {}
    for block_id, block_type, inputs in steps:
        start = max((finish[i] for i in inputs if i in finish), default=0)
        typical = next((ms for t, ms in BLOCK_MS.items() if t.value == block_type), max(BLOCK_MS.values()))
        took = OFFLINE_BLOCK_MS if offline else typical + PER_BLOCK_OVERHEAD_MS
        finish[block_id] = start + took
    longest = max(finish.values(), default=0)
    duration = longest + (OFFLINE_FINALIZE_MS if offline else FINALIZE_MS)
    return duration, CREDITS_PER_BLOCK * len(steps)
