"""The embedded stack's download links (canvas_local.downloads) and moto's caller check (canvas_local.moto_server),
without a stack: what a link starts with, what its signature covers, and which requests moto's port serves."""

from __future__ import annotations

import io
from urllib.parse import unquote, urlsplit

import pytest

from canvas_local.credentials import StackCredentials, credentials_file, publish, published, withdraw
from canvas_local.downloads import DownloadLinks, signing_key
from canvas_local.frontdoor import Request
from canvas_local.moto_server import CallerCheck, access_key_of

pytestmark = pytest.mark.unit

NOW = 1_800_000_000


class FakeS3:
    def get_object(self, Bucket: str, Key: str) -> dict:
        return {"Body": io.BytesIO(b"bytes of " + Key.encode()), "ContentType": "text/plain"}


def links(public_url: str | None = None, now: float = NOW) -> DownloadLinks:
    return DownloadLinks(
        b"k" * 32, ["bucket"], door_url=lambda: "http://127.0.0.1:3000", s3=FakeS3, public_url=public_url,
        clock=lambda: now,
    )  # fmt: skip


def get(url: str, method: str = "GET") -> Request:
    parts = urlsplit(url)
    # The door hands on the path decoded, as waitress gives it (PATH_INFO)
    return Request(
        method=method, path=unquote(parts.path), query=parts.query, headers=[], body=b"", client_ip="127.0.0.1"
    )


def test_a_link_starts_with_the_public_url_else_the_host_reached_else_the_door():
    assert links().link("bucket", "a/b.txt", None, 60).startswith("http://127.0.0.1:3000/downloads/bucket/a/b.txt?")
    with links().reached_at("10.0.0.5:3000"):
        assert links().link("bucket", "a", None, 60).startswith("http://10.0.0.5:3000/downloads/")
    with links(public_url="https://canvas.example.com/").reached_at("10.0.0.5:3000"):
        url = links(public_url="https://canvas.example.com/").link("bucket", "a", None, 60)
        assert url.startswith("https://canvas.example.com/downloads/")
    # A Host header that is not a host (a path, a second URL) is not put into links
    with links().reached_at("evil.example/x?y="):
        assert links().link("bucket", "a", None, 60).startswith("http://127.0.0.1:3000/")


def test_a_link_serves_its_object_until_it_expires_and_nothing_else():
    url = links().link("bucket", "runs/r 1/report.txt", 'attachment; filename="report.txt"', 60)
    served = links().serve(get(url))
    assert served.status == 200 and served.body == b"bytes of runs/r 1/report.txt"
    assert ("Content-Disposition", 'attachment; filename="report.txt"') in served.headers
    assert links(now=NOW + 60).serve(get(url)).status == 200
    assert links(now=NOW + 61).serve(get(url)).status == 403
    # Another key, another bucket, another key to sign with: refused
    assert links().serve(get(url.replace("report.txt?", "other.txt?"))).status == 403
    assert links().serve(get(url.replace("/bucket/", "/other-bucket/"))).status == 403
    stranger = DownloadLinks(b"x" * 32, ["bucket"], lambda: "http://127.0.0.1:3000", FakeS3, clock=lambda: NOW)
    assert stranger.serve(get(url)).status == 403
    assert links().serve(get(url, "PUT")).status == 405


def test_the_signing_key_is_kept_in_the_state_dir_readable_by_its_owner_only(tmp_path):
    first = signing_key(tmp_path)
    assert signing_key(tmp_path) == first and len(first) == 32
    assert (tmp_path / "download-signing.key").stat().st_mode & 0o077 == 0
    assert signing_key(None) != signing_key(None)


@pytest.mark.parametrize(
    ("environ", "key"),
    [
        ({"HTTP_AUTHORIZATION": "AWS4-HMAC-SHA256 Credential=own/20260101/us-east-1/s3/aws4_request, ..."}, "own"),
        ({"QUERY_STRING": "X-Amz-Credential=own%2F20260101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=x"}, "own"),
        ({"HTTP_AUTHORIZATION": "AWS own:signature"}, None),  # SigV2: not accepted
        ({}, None),
    ],
)
def test_the_access_key_id_of_a_request_is_read_from_its_sigv4_signature(environ, key):
    assert access_key_of(environ) == key


def test_motos_port_serves_only_the_stacks_own_key_id():
    check = CallerCheck(lambda environ, start_response: [b"served"], ["own"])
    statuses: list[str] = []

    def start_response(status: str, headers: list) -> None:
        statuses.append(status)

    own = {"HTTP_AUTHORIZATION": "AWS4-HMAC-SHA256 Credential=own/20260101/us-east-1/dynamodb/aws4_request"}
    assert check(own, start_response) == [b"served"]
    foreign = {"HTTP_AUTHORIZATION": own["HTTP_AUTHORIZATION"].replace("=own/", "=AKIAFOREIGN/")}
    assert b"UnrecognizedClientException" in b"".join(check({**foreign, "HTTP_X_AMZ_TARGET": "x"}, start_response))
    assert b"AccessDenied" in b"".join(check({}, start_response))
    assert statuses == ["403 Forbidden", "403 Forbidden"]


def test_the_stacks_credentials_are_published_for_its_user_and_withdrawn(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    credentials = StackCredentials.generate()
    path = publish("http://127.0.0.1:4567", credentials)
    assert path is not None and path.stat().st_mode & 0o077 == 0
    # The admin commands find them by the endpoint, whichever loopback name they are given
    assert published("http://localhost:4567") == credentials
    assert published("http://127.0.0.1:4568") is None
    assert credentials_file("http://10.0.0.5:4567") is None
    withdraw(path)
    assert published("http://127.0.0.1:4567") is None
