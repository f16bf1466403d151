"""Block outputs by reference: a block's content lives on its node in DynamoDB, unless it is too large for an
item (400 KB, with the node's other fields), in which case it goes to S3 and the node keeps a preview and the
object's key. Readers (the next blocks, the DAG endpoint, the final answer) get the full text back."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from canvas_core.adapters.artifacts import ArtifactStore
from canvas_core.models.items import NodeItem

INLINE_MAX_BYTES = 100_000
MAX_CONTENT_BYTES = 5_000_000
PREVIEW_CHARS = 2_000


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


def with_full_content(nodes: list[NodeItem], files: ArtifactStore | None = None) -> list[NodeItem]:
    """The nodes, each with its whole content (read from S3 for those that spilled)."""
    spilled = [(n, n.content_key) for n in nodes if n.content_key]
    if not spilled:
        return nodes
    files = files or ArtifactStore()
    for node, key in spilled:
        node.content = files.get(key).decode("utf-8")
    return nodes
