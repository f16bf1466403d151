"""YouTube transcripts over HTTP, as YouTube serves them to its own clients: the watch page gives the
Innertube API key, the player endpoint (`POST /youtubei/v1/player`) lists the caption tracks, and a track's
`baseUrl` serves the timed text (XML `<text start dur>`, or `<p t d>` in milliseconds). When the watch page
carries `ytInitialPlayerResponse` and no key, the tracks are read from it. Every request goes through the
guarded fetcher; the base URL is YOUTUBE_BASE_URL (tests point it at a local fake).
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

from canvas_core.gather.fetch import Fetcher, FetchError, FetchTransientError, Page

PUBLIC_WATCH_URL = "https://www.youtube.com/watch?v="
VIDEO_ID = re.compile(r"^[A-Za-z0-9_-]{11}$")
INNERTUBE_CLIENT = {"clientName": "ANDROID", "clientVersion": "20.10.38"}


class TranscriptError(Exception):
    """No transcript: the video or its captions are not available (`transient` when trying again may help)."""

    def __init__(self, message: str, transient: bool = False):
        super().__init__(message)
        self.transient = transient


@dataclass
class Segment:
    start: float  # seconds
    duration: float
    text: str


@dataclass
class Transcript:
    video_id: str
    title: str
    language: str
    generated: bool
    segments: list[Segment]


def video_id(url: str) -> str | None:
    """The video id of a YouTube URL (watch, youtu.be, shorts, embed, live), or None."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    host = (parts.hostname or "").lower().removeprefix("www.").removeprefix("m.").removeprefix("music.")
    candidate = None
    if host == "youtu.be":
        candidate = parts.path.strip("/").split("/")[0]
    elif host in ("youtube.com", "youtube-nocookie.com"):
        if parts.path == "/watch":
            candidate = (parse_qs(parts.query).get("v") or [""])[0]
        else:
            match = re.match(r"^/(shorts|embed|live|v)/([^/?#]+)", parts.path)
            candidate = match.group(2) if match else None
    return candidate if candidate and VIDEO_ID.match(candidate) else None


def moment_url(video: str, seconds: float) -> str:
    """The public link to a moment of the video (what citations point at)."""
    return f"{PUBLIC_WATCH_URL}{video}&t={int(seconds)}s"


def timestamp(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def fetch_transcript(video: str, fetcher: Fetcher, base_url: str, languages: tuple[str, ...] = ("en",)) -> Transcript:
    base = base_url.rstrip("/")
    watch = _get(fetcher, f"{base}/watch?v={video}", {"Accept-Language": "en-US,en;q=0.8"}).text()
    if 'action="https://consent.youtube.com/s"' in watch:
        value = re.search(r'name="v" value="(.*?)"', watch)
        cookie = {"Cookie": f"CONSENT=YES+{value.group(1) if value else 'cb'}"}
        watch = _get(fetcher, f"{base}/watch?v={video}", {"Accept-Language": "en-US,en;q=0.8", **cookie}).text()
    key = re.search(r'"INNERTUBE_API_KEY":\s*"([A-Za-z0-9_-]+)"', watch)
    if key:
        body = json.dumps({"context": {"client": INNERTUBE_CLIENT}, "videoId": video}).encode()
        player_page = _get(
            fetcher,
            f"{base}/youtubei/v1/player?key={key.group(1)}",
            {"Content-Type": "application/json"},
            method="POST",
            body=body,
        )
        player = _json(player_page.text(), "the player response")
    else:
        player = _initial_player_response(watch)
    status = (player.get("playabilityStatus") or {}).get("status", "OK")
    if status != "OK":
        reason = (player.get("playabilityStatus") or {}).get("reason") or status
        raise TranscriptError(f"The video {video} is not available: {reason}")
    title = (player.get("videoDetails") or {}).get("title") or video
    tracks = ((player.get("captions") or {}).get("playerCaptionsTracklistRenderer") or {}).get("captionTracks") or []
    if not tracks:
        raise TranscriptError(f"The video {video} has no transcript (captions are off or not published)")
    track = _choose(tracks, languages)
    track_url = urljoin(base + "/", track["baseUrl"].replace("&fmt=srv3", ""))
    segments = parse_timed_text(_get(fetcher, track_url, {}).body)
    if not segments:
        raise TranscriptError(f"The transcript of {video} is empty")
    return Transcript(
        video_id=video,
        title=title,
        language=track.get("languageCode", ""),
        generated=track.get("kind") == "asr",
        segments=segments,
    )


def parse_timed_text(data: bytes) -> list[Segment]:
    """Segments of YouTube timed text: `<transcript><text start dur>` (seconds) or `<p t d>` (milliseconds)."""
    import xml.etree.ElementTree as ET

    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import fromstring

    try:
        root = fromstring(data, forbid_dtd=True)
    except (ET.ParseError, DefusedXmlException) as exc:
        raise TranscriptError("The transcript could not be read (malformed timed text)") from exc
    segments = []
    for element in root.iter():
        if element.tag == "text" and element.get("start") is not None:
            start, duration = float(element.get("start", 0)), float(element.get("dur", 0) or 0)
        elif element.tag == "p" and element.get("t") is not None:
            start, duration = int(element.get("t", 0)) / 1000, int(element.get("d", 0) or 0) / 1000
        else:
            continue
        text = html.unescape(re.sub(r"<[^>]+>", "", "".join(element.itertext())))
        text = " ".join(text.split())
        if text:
            segments.append(Segment(start=start, duration=duration, text=text))
    return segments


def _choose(tracks: list[dict[str, Any]], languages: tuple[str, ...]) -> dict[str, Any]:
    for language in languages:
        for generated in (False, True):
            for track in tracks:
                if track.get("languageCode") == language and (track.get("kind") == "asr") == generated:
                    return track
    return tracks[0]


def _get(fetcher: Fetcher, url: str, headers: dict[str, str], method: str = "GET", body: bytes | None = None) -> Page:
    try:
        return fetcher.fetch(url, headers=headers, method=method, body=body)
    except FetchTransientError as exc:
        raise TranscriptError(f"YouTube did not answer: {exc}", transient=True) from exc
    except FetchError as exc:
        raise TranscriptError(f"YouTube refused the request: {exc}") from exc


def _json(text: str, what: str) -> dict[str, Any]:
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TranscriptError(f"YouTube answered {what} with something other than JSON") from exc
    return parsed if isinstance(parsed, dict) else {}


def _initial_player_response(watch: str) -> dict[str, Any]:
    marker = re.search(r"ytInitialPlayerResponse\s*=\s*", watch)
    if not marker:
        raise TranscriptError("The video page could not be read (no player data)")
    try:
        parsed, _ = json.JSONDecoder().raw_decode(watch, marker.end())
    except json.JSONDecodeError as exc:
        raise TranscriptError("The video page could not be read (malformed player data)") from exc
    return parsed if isinstance(parsed, dict) else {}
