"""Text by reference: whatever can grow past a few KB lives in S3 when it is large, its item keeping a preview and
the object's key, so that no item nears DynamoDB's 400 KB whatever a run holds. A block's content lives on its node
unless it passes INLINE_MAX_BYTES; a run's final output and its errors list stay on the run item only while small
(RUN_TEXT_INLINE_MAX_BYTES). Readers (the next blocks, the DAG endpoint, the run's status) get the full text back."""

from __future__ import annotations

import json
from typing import Any, NotRequired, TypedDict

from canvas_core.adapters.artifacts import ArtifactStore
from canvas_core.errors import StorageError
from canvas_core.models.items import NodeItem, RunError, RunItem
from canvas_core.observability import logger

INLINE_MAX_BYTES = 100_000
MAX_CONTENT_BYTES = 5_000_000
PREVIEW_CHARS = 2_000
# A run's final output and its errors stay on the run item up to this size; past it they go to S3.
RUN_TEXT_INLINE_MAX_BYTES = 16_000
# The longest final output a run keeps: GET /v1/run answers it whole, inside Lambda's 6 MB response even for text
# that JSON escapes to 6 bytes a character (CJK). Each block's whole output stays readable on the DAG.
FINAL_OUTPUT_MAX_CHARS = 500_000
FINAL_OUTPUT_CUT = "\n\n[cut: the whole output of each block is on GET /v1/canvas/{canvas_id}/dag]"
# Errors kept on the run item beside the key of the whole list, each cut to ERROR_PREVIEW_CHARS.
ERRORS_PREVIEW_COUNT = 10
ERROR_PREVIEW_CHARS = 500


class ContentFields(TypedDict):
    """The node fields that hold a block's content: the text itself, or its preview and the key of the whole."""

    content: str
    content_key: NotRequired[str]


def content_fields(content: str, account_id: str, run_id: str, block_id: str, files: ArtifactStore) -> ContentFields:
    """The node fields that hold `content`: inline, or a preview and the S3 key of the whole text."""
    data = content.encode("utf-8")
    if len(data) > MAX_CONTENT_BYTES:
        data = data[:MAX_CONTENT_BYTES].decode("utf-8", errors="ignore").encode("utf-8") + b"\n\n[truncated]"
    if len(data) <= INLINE_MAX_BYTES:
        return {"content": data.decode("utf-8")}
    key = f"content/{account_id}/{run_id}/{block_id}.txt"
    files.put(key, data, "text/plain; charset=utf-8")
    return {"content": content[:PREVIEW_CHARS], "content_key": key}


def belongs_to(key: str, account_id: str) -> bool:
    """Whether an S3 key a node names is one of the account's objects (`<folder>/<account>/...`). A block writes its
    own node, and a taken-over one could name another account's object there: trusted code that reads or signs a
    key a node gave (a spilled output, a block's file) reads only the run's account's (docs/isolation.md)."""
    folder, _, rest = key.partition("/")
    return folder in ("uploads", "content", "artifacts") and rest.startswith(f"{account_id}/")


def with_full_content(nodes: list[NodeItem], account_id: str, files: ArtifactStore | None = None) -> list[NodeItem]:
    """The nodes of one of `account_id`'s canvases, each with its whole content (read from S3 for those that
    spilled); a key outside the account's objects is not read, and the node keeps its preview."""
    spilled = [(n, n.content_key) for n in nodes if n.content_key]
    if not spilled:
        return nodes
    files = files or ArtifactStore()
    for node, key in spilled:
        if not belongs_to(key, account_id):
            logger.warning("A node names an object outside its account; its preview stands", extra={"key": key})
            continue
        node.content = files.get(key).decode("utf-8")
    return nodes


def run_text_fields(
    final_output: str | None, errors: list[RunError], account_id: str, run_id: str, files: ArtifactStore | None = None
) -> dict[str, Any]:
    """The run item's fields for its final output and errors: inline while small, else a preview on the item and
    the whole in S3 (`final_output_key`, `errors_key`). Storing never fails the run's end: should S3 refuse, the
    item keeps the previews and the errors say that the rest was lost."""
    fields: dict[str, Any] = {"errors": errors}
    if final_output is not None:
        if len(final_output) > FINAL_OUTPUT_MAX_CHARS:
            final_output = final_output[:FINAL_OUTPUT_MAX_CHARS] + FINAL_OUTPUT_CUT
        fields["final_output"] = final_output
    text = (final_output or "").encode("utf-8")
    whole_errors = json.dumps([e.model_dump(mode="json", exclude_none=True) for e in errors]).encode("utf-8")
    if len(text) <= RUN_TEXT_INLINE_MAX_BYTES and len(whole_errors) <= RUN_TEXT_INLINE_MAX_BYTES:
        return fields
    files = files or ArtifactStore()
    lost = []
    if len(text) > RUN_TEXT_INLINE_MAX_BYTES:
        fields["final_output"] = (final_output or "")[:PREVIEW_CHARS]
        key = f"content/{account_id}/{run_id}/final_output.txt"
        try:
            files.put(key, text, "text/plain; charset=utf-8")
            fields["final_output_key"] = key
        except StorageError:
            lost.append(RunError(error="The final output could not be stored whole; this is its beginning"))
    if len(whole_errors) > RUN_TEXT_INLINE_MAX_BYTES:
        key = f"content/{account_id}/{run_id}/errors.json"
        try:
            files.put(key, whole_errors, "application/json")
            fields["errors_key"] = key
        except StorageError:
            lost.append(RunError(error=f"Only the first {ERRORS_PREVIEW_COUNT} errors could be stored"))
        fields["errors"] = [
            e.model_copy(update={"error": e.error[:ERROR_PREVIEW_CHARS]}) for e in errors[:ERRORS_PREVIEW_COUNT]
        ]
    fields["errors"] = [*fields["errors"], *lost]
    return fields


def with_full_run_text(run: RunItem, files: ArtifactStore | None = None) -> RunItem:
    """The run with its whole final output and errors (read from S3 where they were stored by reference)."""
    if not run.final_output_key and not run.errors_key:
        return run
    files = files or ArtifactStore()
    update: dict[str, Any] = {}
    if run.final_output_key:
        update["final_output"] = files.get(run.final_output_key).decode("utf-8")
    if run.errors_key:
        update["errors"] = [RunError.model_validate(e) for e in json.loads(files.get(run.errors_key))]
    return run.model_copy(update=update)
