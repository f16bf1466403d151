"""Which model each agent role calls, from the model ids in the environment (template.yaml's PlannerModelId,
WriterModelId and ResearcherModelId parameters set these variables; `ProviderSettings.model_ids`):

1. `<ROLE>_MODEL_ID` for that role when set: `PLANNER_MODEL_ID`, `WRITER_MODEL_ID`, `RESEARCHER_MODEL_ID`,
   or any other role's (e.g. `REVIEWER_MODEL_ID`, or `VISION_MODEL_ID` for `vision`, the multimodal model that
   describes uploaded images);
2. for the roles that read and analyse (analyst, librarian, reviewer), `RESEARCHER_MODEL_ID`;
3. otherwise `WRITER_MODEL_ID`;
4. the provider's default.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from canvas_core.settings import provider_settings

RESEARCH_ROLES = frozenset({"researcher", "analyst", "librarian", "reviewer"})


def model_for_role(role: str, default: str, model_ids: Mapping[str, str] | None = None) -> str:
    """`model_ids` maps variable names to model ids (the settings' by default)."""
    ids = provider_settings().model_ids if model_ids is None else model_ids
    role = (role or "writer").lower()
    specific = ids.get(re.sub(r"[^A-Z0-9]+", "_", role.upper()) + "_MODEL_ID")
    if specific:
        return specific
    if role in RESEARCH_ROLES and ids.get("RESEARCHER_MODEL_ID"):
        return ids["RESEARCHER_MODEL_ID"]
    return ids.get("WRITER_MODEL_ID") or default
