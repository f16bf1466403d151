"""Which model each agent role calls, from the model ids in the environment (template.yaml's PlannerModelId,
WriterModelId and ResearcherModelId parameters set these variables; `ProviderSettings.model_ids`):

1. `<ROLE>_MODEL_ID` for that role when set: `PLANNER_MODEL_ID`, `WRITER_MODEL_ID`, `RESEARCHER_MODEL_ID`,
   or any other role's (e.g. `REVIEWER_MODEL_ID`, or `VISION_MODEL_ID` for `vision`, the multimodal model that
   describes uploaded images);
2. for the roles that read and analyse (analyst, librarian, reviewer), `RESEARCHER_MODEL_ID`;
3. otherwise `WRITER_MODEL_ID`;
4. the provider's default.

Every call also sends an output cap (`max_output_tokens`), so a model stops where the role's answer should:
`<ROLE>_MAX_OUTPUT_TOKENS` for that role (e.g. `WRITER_MAX_OUTPUT_TOKENS`), else `MODEL_MAX_OUTPUT_TOKENS`, else
the role's default in ROLE_OUTPUT_TOKENS. The cap also bounds how long a call may take (`call_timeout_seconds`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from canvas_core.settings import provider_settings

RESEARCH_ROLES = frozenset({"researcher", "analyst", "librarian", "reviewer"})
# The output cap of each role when no variable sets one: a plan, a review or an image description is short; a
# written deliverable is the longest answer a block asks for.
ROLE_OUTPUT_TOKENS = {
    "planner": 2048,
    "writer": 4096,
    "researcher": 2048,
    "analyst": 2048,
    "librarian": 1024,
    "reviewer": 1024,
    "vision": 1024,
}
DEFAULT_OUTPUT_TOKENS = 2048
# What a call may take before its first output token (queueing, reading the input), beside the generation time.
START_SECONDS = 30.0


def model_for_role(role: str, default: str, model_ids: Mapping[str, str] | None = None) -> str:
    """`model_ids` maps variable names to model ids (the settings' by default)."""
    ids = provider_settings().model_ids if model_ids is None else model_ids
    role = (role or "writer").lower()
    specific = ids.get(_variable(role, "_MODEL_ID"))
    if specific:
        return specific
    if role in RESEARCH_ROLES and ids.get("RESEARCHER_MODEL_ID"):
        return ids["RESEARCHER_MODEL_ID"]
    return ids.get("WRITER_MODEL_ID") or default


def _variable(role: str, suffix: str) -> str:
    return re.sub(r"[^A-Z0-9]+", "_", role.upper()) + suffix


def max_output_tokens(role: str) -> int:
    """The output cap a call for `role` sends."""
    settings = provider_settings()
    role = (role or "writer").lower()
    specific = settings.max_output_tokens.get(_variable(role, "_MAX_OUTPUT_TOKENS"))
    if specific:
        return specific
    return settings.model_max_output_tokens or ROLE_OUTPUT_TOKENS.get(role, DEFAULT_OUTPUT_TOKENS)


def call_timeout_seconds(output_tokens: int) -> float:
    """How long a call capped at `output_tokens` may take: the cap at MODEL_MIN_TOKENS_PER_SECOND plus a start-up
    allowance, never more than MODEL_TIMEOUT_SECONDS."""
    settings = provider_settings()
    generating = output_tokens / settings.model_min_tokens_per_second
    return min(settings.model_timeout_seconds, START_SECONDS + generating)
