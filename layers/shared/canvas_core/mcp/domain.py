"""The MCP tools' operations in-process: the domain functions the REST handlers call, for one authenticated account,
with the requests checked by the same models (a refused one creates nothing), answering what the REST API answers."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler.openapi.params import UploadFile
from pydantic import BaseModel, ValidationError

from canvas_core.canvas import get_canvas_dag, get_task_tree
from canvas_core.errors import BadRequestError
from canvas_core.mcp.backend import ArtifactFile, CreateRunIn
from canvas_core.models.base import refusal
from canvas_core.reruns import rerun_block
from canvas_core.reviews import ApproveRunForm, approve_run, cancel_run
from canvas_core.runs import create_run, get_run_status, list_runs, read_artifact
from canvas_core.validation import CreateRunForm, RerunBlockForm

MAX_PAGE = 100


class DomainBackend:
    def __init__(self, account_id: str):
        self.account_id = account_id

    def create_run(self, request: CreateRunIn) -> dict[str, Any]:
        form: dict[str, Any] = {
            "prompt": request.prompt,
            "template": request.template,
            "agent_instructions": request.instructions,
            "review": request.review,
            "files": [UploadFile(content=f.data, filename=f.name) for f in request.files],
        }
        if request.blocks is not None:
            # The form takes blocks as the JSON text a client posts; an empty list is refused as it is there.
            form["blocks"] = json.dumps(request.blocks)
        return _data(create_run(_checked(CreateRunForm, form), self.account_id))

    def get_run(self, run_id: str) -> dict[str, Any]:
        return _data(get_run_status(run_id, self.account_id))

    def list_runs(self, limit: int, cursor: str | None) -> dict[str, Any]:
        if not 1 <= limit <= MAX_PAGE:
            raise BadRequestError(f"Invalid limit: {limit} (from 1 to {MAX_PAGE})")
        return list_runs(self.account_id, limit, cursor).model_dump(mode="json")

    def get_dag(self, canvas_id: str) -> dict[str, Any]:
        return _data(get_canvas_dag(canvas_id, self.account_id))

    def get_tasks(self, canvas_id: str) -> dict[str, Any]:
        return _data(get_task_tree(canvas_id, self.account_id))

    def rerun_block(self, canvas_id: str, block_id: str, instructions: str | None) -> dict[str, Any]:
        request = _checked(RerunBlockForm, {"instructions": instructions})
        return _data(rerun_block(canvas_id, block_id, request, self.account_id))

    def approve_run(self, run_id: str, instructions: dict[str, str]) -> dict[str, Any]:
        request = _checked(ApproveRunForm, {"instructions": instructions})
        return _data(approve_run(run_id, self.account_id, request))

    def cancel_run(self, run_id: str) -> dict[str, Any]:
        return _data(cancel_run(run_id, self.account_id))

    def read_artifact(self, run_id: str, artifact_id: str) -> ArtifactFile:
        artifact, data = read_artifact(run_id, artifact_id, self.account_id)
        return ArtifactFile(name=artifact.name, type=artifact.type, data=data)


def _checked[FormT: BaseModel](form: type[FormT], values: dict[str, Any]) -> FormT:
    """The request as the REST route's model reads it, or the refusal its validators raise."""
    try:
        return form.model_validate(values)
    except ValidationError as invalid:
        refused = refusal(invalid.errors())
        if refused is not None:
            raise refused from None
        listed = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in invalid.errors())
        raise BadRequestError(f"Invalid request: {listed}") from None


def _data(model: BaseModel) -> dict[str, Any]:
    """The `data` of the REST answer: unset fields left out, as `canvas_core.api.ok` leaves them out."""
    return model.model_dump(mode="json", exclude_none=True)
