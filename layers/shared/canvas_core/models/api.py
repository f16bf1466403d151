"""Bodies of the /v1 endpoints, field for field as the contract gives them, and the envelope every answer comes in."""

from __future__ import annotations

from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model, field_validator, model_serializer

from canvas_core.models.base import Model, Uuid
from canvas_core.models.catalog import NodeStatus, RunStatus, TaskStatus, TaskType, Template


class SuccessBody[DataT: BaseModel](Model):
    """`{success: true, data}`, the body of every 200, with `data` the route's model: what a route returns
    (`-> SuccessBody[RunStatusResponse]`, built by `ok()`), checked against that annotation on the way out, and named
    after its model (`RunStatusResponseBody`) in the OpenAPI document."""

    success: Literal[True]
    data: DataT
    # The contract leaves unset (None) fields out, except in the bodies that promise them as null; never sent.
    keep_nulls: bool = Field(default=False, exclude=True)

    def __class_getitem__(cls, params: Any) -> Any:
        parametrized = super().__class_getitem__(params)
        if cls is SuccessBody and isinstance(params, type) and issubclass(params, BaseModel):
            return _named_body(parametrized, params)
        return parametrized

    @field_validator("data", mode="before")
    @classmethod
    def _data_is_a_model(cls, data: object) -> object:
        # A dict would be coerced into the model: a route answers its model, not something shaped like it.
        if not isinstance(data, BaseModel):
            raise ValueError(f"data is the route's model, not a {type(data).__name__}")
        return data

    # Unannotated on purpose: pydantic would document the annotation (a dict) instead of the fields.
    @model_serializer(mode="plain")
    def _body(self):  # type: ignore[no-untyped-def]
        return {"success": True, "data": self.data.model_dump(mode="json", exclude_none=not self.keep_nulls)}


@cache
def _named_body(parametrized: type[SuccessBody[Any]], data: type[BaseModel]) -> type[SuccessBody[Any]]:
    """`SuccessBody[RunStatusResponse]` as a class of its own, `RunStatusResponseBody`: the OpenAPI document names a
    parametrized generic after its parameters (`SuccessBody_RunStatusResponse_`), a class after itself."""
    return create_model(f"{data.__name__}Body", __base__=parametrized, __module__=__name__)


class ErrorBody(Model):
    """`{success: false, error}`: the body of every error, `error` the message a client can act on."""

    success: Literal[False]
    error: str


class UploadedFile(Model):
    name: str
    extension: str
    content_type: str
    data: bytes


class CreateRunRequest(Model):
    """A validated create request; files are checked and held as bytes until stored."""

    prompt: str
    template: Template
    blocks: list[str] | None = None
    agent_instructions: str | None = None
    webhook_url: str | None = None
    files: list[UploadedFile] = Field(default_factory=list)
    review: bool = False


class CreateRunResponse(Model):
    run_id: Uuid
    status: RunStatus
    poll_url: str
    estimated_duration_ms: int
    canvas_id: Uuid


class RerunBlockRequest(Model):
    """The body of POST /v1/canvas/{canvas_id}/blocks/{block_id}/rerun (an extension of the contract)."""

    instructions: str | None = None


class Progress(Model):
    tasks_completed: int
    tasks_total: int
    elapsed_ms: int


class ArtifactView(Model):
    id: Uuid
    type: str
    name: str
    download_url: str
    size_bytes: int


class RunResult(Model):
    final_output: str
    artifacts: list[ArtifactView] = Field(default_factory=list)


class RerunOfView(Model):
    """What a re-run started from (an extension of the contract, docs/api.md)."""

    run_id: Uuid
    canvas_id: Uuid
    block_id: Uuid


class RunMetadata(Model):
    template_used: Template
    models_used: list[str]
    credits_consumed: int
    rerun_of: RerunOfView | None = Field(
        default=None,
        description="Extension: on a re-run, the run, canvas and block it re-ran; absent otherwise",
    )


class RunErrorView(Model):
    error: str
    block_id: Uuid | None = None
    block_type: str | None = None
    recoverable: bool | None = None


class RunStatusResponse(Model):
    run_id: Uuid
    status: RunStatus
    canvas_id: Uuid
    prompt: str
    template: Template
    blocks: list[str] | None = None
    agent_instructions: str | None = None
    awaiting_approval: bool | None = Field(
        default=None,
        description="Extension: true while a run created with `review=true` waits for POST /v1/run/{run_id}/approve "
        "(its status stays `running`); absent otherwise",
    )
    estimated_credits: int | None = Field(
        default=None,
        description="Extension: what the run's planned blocks are expected to spend, the sum of their "
        "`estimated_credits` in the DAG (planning's own credits are spent already); absent until it is planned",
    )
    progress: Progress | None = None
    duration_ms: int | None = None
    result: RunResult | None = None
    metadata: RunMetadata | None = None
    errors: list[RunErrorView] = Field(default_factory=list)


class RunSummary(Model):
    """One run of GET /v1/runs (an extension of the contract)."""

    run_id: Uuid
    status: RunStatus
    created_at: str = Field(json_schema_extra={"format": "date-time"}, description="UTC, ISO 8601")
    canvas_id: Uuid
    template_used: Template
    prompt: str = Field(description="The first 200 characters of the prompt")
    rerun_of: RerunOfView | None = Field(
        default=None, description="On a re-run, the run, canvas and block it re-ran; null otherwise"
    )


class ListRunsResponse(Model):
    runs: list[RunSummary]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page")


class NodeView(Model):
    id: Uuid
    name: str
    type: str
    status: NodeStatus
    content: str = Field(default="", description="The block's output; empty when it produced none (failed, skipped)")
    url: str | None = None
    sources: list[dict[str, Any]] = Field(default_factory=list)
    estimated_credits: int | None = Field(
        default=None, description="Extension: what the block is expected to spend, set when it is planned"
    )
    reused: bool | None = Field(
        default=None,
        description="Extension: true on a re-run's block carried over from the run it re-ran (not run again)",
    )
    content_truncated: bool | None = Field(
        default=None,
        description="Extension: true when `content` is a part of the block's output; the rest is read with "
        "`?node=<id>&offset=<characters read so far>`",
    )
    content_length: int | None = Field(
        default=None, description="Extension: the whole output's length in characters, set when `content` is a part"
    )


class ApproveRunRequest(Model):
    """The body of POST /v1/run/{run_id}/approve (an extension of the contract): new instructions for planned blocks,
    by block id."""

    instructions: dict[str, str] = Field(default_factory=dict)


class EdgeView(Model):
    source_id: Uuid
    target_id: Uuid


class CanvasDagResponse(Model):
    canvas_id: Uuid
    canvas_name: str
    nodes: list[NodeView]
    edges: list[EdgeView]


class TaskView(Model):
    task_id: Uuid
    name: str
    task_type: TaskType
    status: TaskStatus
    children: list[TaskView] = Field(default_factory=list)


class TaskTreeResponse(Model):
    canvas_id: Uuid
    completed: list[TaskView]
    not_completed: list[TaskView]
