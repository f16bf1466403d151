"""Which model each agent role calls, from the environment (template.yaml's PlannerModelId, WriterModelId and
ResearcherModelId parameters set these variables):

1. `<ROLE>_MODEL_ID` for that role when set: `PLANNER_MODEL_ID`, `WRITER_MODEL_ID`, `RESEARCHER_MODEL_ID`,
   or any other role's (e.g. `REVIEWER_MODEL_ID`, or `VISION_MODEL_ID` for `vision`, the multimodal model that
   describes uploaded images);
2. for the roles that read and analyse (analyst, librarian, reviewer), `RESEARCHER_MODEL_ID`;
3. otherwise `WRITER_MODEL_ID`;
4. the provider's default.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

RESEARCH_ROLES = frozenset({"researcher", "analyst", "librarian", "reviewer"})


def model_for_role(role: str, default: str, environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    role = (role or "writer").lower()
    specific = env.get(re.sub(r"[^A-Z0-9]+", "_", role.upper()) + "_MODEL_ID")
    if specific:
        return specific
    if role in RESEARCH_ROLES and env.get("RESEARCHER_MODEL_ID"):
        return env["RESEARCHER_MODEL_ID"]
    return env.get("WRITER_MODEL_ID") or default
