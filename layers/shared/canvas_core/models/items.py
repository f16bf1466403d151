"""What the service stores: one model per DynamoDB item kind (see docs/architecture.md for the tables)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from canvas_core.models.base import Model
from canvas_core.models.catalog import NodeStatus, RunStatus, TaskStatus, TaskType, Template


class Upload(Model):
    """A file posted with a run, kept in S3 until the run's blocks read it."""

    file_id: str
    name: str
    extension: str
    content_type: str
    size_bytes: int
    s3_key: str


class RunError(Model):
    error: str
    block_id: str | None = None
    block_type: str | None = None
    recoverable: bool | None = None


class Artifact(Model):
    id: str
    type: str
    name: str
    s3_key: str
    size_bytes: int


class RerunOf(Model):
    """The run, canvas and block a re-run started from (POST /v1/canvas/{canvas_id}/blocks/{block_id}/rerun)."""

    run_id: str
    canvas_id: str
    block_id: str


class RunItem(Model):
    run_id: str
    account_id: str
    canvas_id: str
    status: RunStatus = RunStatus.RUNNING
    prompt: str
    template: Template
    blocks: list[str] | None = None
    agent_instructions: str | None = None
    uploads: list[Upload] = Field(default_factory=list)
    created_at_ms: int
    finished_at_ms: int | None = None
    estimated_duration_ms: int
    final_output: str | None = None
    artifacts: list[Artifact] = Field(default_factory=list)
    models_used: list[str] = Field(default_factory=list)
    credits_consumed: int = 0
    errors: list[RunError] = Field(default_factory=list)
    # Set when the final output or the errors were too large for the item (canvas_core.content): the S3 key of the
    # whole text, the item keeping a preview.
    final_output_key: str | None = None
    errors_key: str | None = None
    # What the Planner used (set once by Plan Canvas); metadata adds it to the blocks' models and credits.
    planning_models_used: list[str] = Field(default_factory=list)
    planning_credits: int = 0
    # What the run's errors say of planning: why the Planner's model was not used, when it was not.
    planning_notes: list[str] = Field(default_factory=list)
    # The credits set aside for the run and not spent yet: taken from the account when it is admitted (and topped up
    # if it spends more), spent by its planning and blocks, the rest given back when it ends. None: a run admitted
    # before runs held reservations, which spends from the account directly.
    reserved_credits: int | None = None
    # Every credit moved from the account into the reservation (admission, top-ups), written only by trusted code:
    # a run's end returns at most this much, whatever a block wrote into `reserved_credits` (docs/isolation.md).
    credits_set_aside: int | None = None

    @field_validator("reserved_credits", mode="before")
    @classmethod
    def _reservation_as_a_number(cls, value: Any) -> Any:
        """A block may write its run's reservation (docs/isolation.md): one that is not a whole number reads as none
        left, so the run can still be read and ended."""
        if value is None or isinstance(value, int):
            return value
        try:
            return int(value)
        except (TypeError, ValueError):
            return 0

    # Review (docs/api.md): the run waits after planning until approved or cancelled. While it waits its item holds
    # the parked task's token and the plan the state machine resumes with; `estimated_credits` is what its planned
    # blocks are expected to spend.
    review: bool = False
    review_token: str | None = None
    review_plan: str | None = None  # JSON: the plan Await Approval resumes with
    approved_at_ms: int | None = None
    # When the approval had handed the run on: a cancel whose request came later ends the executing run.
    approval_settled_at_ms: int | None = None
    estimated_credits: int | None = None
    # Set by the cancel that won (docs/api.md, "Review and cancel"): whichever write ends the run, it ends cancelled.
    cancelled_at_ms: int | None = None
    # Ended by a cancel while its execution still ran: the run keeps its slot among the account's running runs until
    # the execution has ended (Store.release_held_slot), so that cancelling cannot get round the limit.
    slot_held: bool | None = None
    # Set on a re-run: its canvas is a copy of that run's, planned already, where only that block and those
    # downstream of it run again.
    rerun_of: RerunOf | None = None


class RunSummaryItem(Model):
    """A run as the runs table's account index projects it: what a listing shows, without results."""

    run_id: str
    account_id: str
    canvas_id: str
    status: RunStatus
    prompt: str
    template: Template
    blocks: list[str] | None = None
    created_at_ms: int
    rerun_of: RerunOf | None = None  # not projected by the index: read from the run's item


class CanvasItem(Model):
    canvas_id: str
    account_id: str
    run_id: str
    canvas_name: str


class Source(Model):
    """A reference a block used: a web page, a file and its page, or a moment of a video (docs/block-types.md)."""

    title: str | None = None
    url: str | None = None
    snippet: str | None = None
    file_name: str | None = None
    page: int | None = None
    timestamp: str | None = None  # a video's moment, "m:ss" or "h:mm:ss"; `url` then links to it


class NodeItem(Model):
    canvas_id: str
    block_id: str
    name: str
    type: str
    status: NodeStatus = NodeStatus.IDLE
    content: str | None = None
    # Set when the content was too large for the item: the S3 key of the whole text (canvas_core/content.py).
    content_key: str | None = None
    url: str | None = None
    sources: list[Source] = Field(default_factory=list)
    inputs: list[str] = Field(default_factory=list)
    # Dataflow bookkeeping (canvas_core/dataflow.py): who reads this block, and how many inputs are still running.
    dependents: list[str] = Field(default_factory=list)
    pending_inputs: int = 0
    upload_id: str | None = None
    instructions: str | None = None
    # Instructions the requester gave after planning (an approval's for this block, a re-run's for the block re-run
    # and those downstream of it): they revise the analysis of this block and of the blocks reading it.
    revision: str | None = None
    persona: str | None = None
    error: str | None = None
    # Why a completed block fell back (a model answer it could not use), written with its completion; the run's
    # errors list them at its end without failing the block (orchestration.finalize_run).
    notes: list[str] = Field(default_factory=list)
    models_used: list[str] = Field(default_factory=list)
    credits: int = 0
    artifacts: list[Artifact] = Field(default_factory=list)
    position: int = 0
    # What the block is expected to spend, set when it is planned (canvas_core/estimates.py).
    estimated_credits: int | None = None
    # A re-run's block carried over from the run it re-runs, as it ended there: not run, not charged again.
    reused: bool = False


class EdgeItem(Model):
    source_id: str
    target_id: str


class TaskItem(Model):
    canvas_id: str
    task_id: str
    parent_id: str | None = None
    name: str
    task_type: TaskType
    status: TaskStatus = TaskStatus.RUNNING
    block_id: str | None = None
    position: int = 0
