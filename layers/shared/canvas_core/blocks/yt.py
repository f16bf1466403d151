"""yt-block: a YouTube video's transcript with timestamps; each passage links to its moment (`&t=`).

The video is the node's `url`, else the first YouTube URL in its instructions or the run's prompt. The
transcript is fetched over HTTP through the guarded fetcher (canvas_core/gather/youtube.py). Sources are the
transcript's passages of about a minute, each with its timestamp and a link to that moment.
"""

from __future__ import annotations

from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.errors import BlockFatalError, BlockRetryableError
from canvas_core.gather.fetch import Fetcher
from canvas_core.gather.pages import urls_in
from canvas_core.gather.youtube import Segment, TranscriptError, fetch_transcript, moment_url, timestamp, video_id
from canvas_core.models.items import Source
from canvas_core.settings import gather_settings

PASSAGE_SECONDS = 60
MAX_SOURCES = 120


def run(ctx: BlockContext) -> BlockOutput:
    video = _video(ctx)
    settings = gather_settings()
    try:
        transcript = fetch_transcript(video, Fetcher(settings), settings.youtube_base_url, settings.youtube_languages)
    except TranscriptError as exc:
        raise (BlockRetryableError if exc.transient else BlockFatalError)(str(exc)) from exc
    ctx.usage.pages_fetched += 1
    passages = _passages(transcript.segments)
    kind = "auto-generated" if transcript.generated else "published"
    lines = [
        f"# {transcript.title}",
        "",
        f"Transcript ({kind}, {transcript.language or 'unknown language'}) of {moment_url(video, 0)}",
        "",
    ]
    # Each passage cites its own source as [n] (the block's n-th source), as every block's content does.
    lines += [
        f"[{timestamp(start)}]({moment_url(video, start)}) {text}" + (f" [{n}]" if n <= MAX_SOURCES else "")
        for n, (start, text) in enumerate(passages, start=1)
    ]
    sources = [
        Source(
            title=f"{transcript.title} at {timestamp(start)}",
            url=moment_url(video, start),
            snippet=text[:300],
            timestamp=timestamp(start),
        )
        for start, text in passages[:MAX_SOURCES]
    ]
    return BlockOutput(content="\n".join(lines), sources=sources, url=moment_url(video, 0).removesuffix("&t=0s"))


def _video(ctx: BlockContext) -> str:
    for text in (ctx.node.url, ctx.node.instructions, ctx.run.prompt):
        for url in urls_in(text):
            found = video_id(url)
            if found:
                return found
    raise BlockFatalError(
        f"Block '{ctx.node.name}' has no YouTube video URL (none in its node, instructions or prompt)"
    )


def _passages(segments: list[Segment]) -> list[tuple[float, str]]:
    """Segments joined into passages of about PASSAGE_SECONDS, each starting where its first segment does."""
    passages: list[tuple[float, list[str]]] = []
    for segment in segments:
        if not passages or segment.start - passages[-1][0] >= PASSAGE_SECONDS:
            passages.append((segment.start, []))
        passages[-1][1].append(segment.text)
    return [(start, " ".join(texts)) for start, texts in passages]
