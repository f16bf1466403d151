"""Download links and moto's port, from an attacker's side: a link downloads its one object until it expires, from
wherever the client reached the service; another tenant's object, a forged or expired signature, a listing, a PUT
and a DynamoDB call with a key id that is not the stack's own are refused (canvas_local.downloads, moto_server)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import parse_qs, quote, urlencode, urlsplit, urlunsplit

import boto3
import httpx
import pytest
from botocore.exceptions import ClientError

from tests.e2e.conftest import KEY_A, KEY_B, canvas_serve, poll_until_finished

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

FOREIGN = {"aws_access_key_id": "AKIAIOSFODNN7EXAMPLE", "aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEX"}


def finished_report(client: httpx.Client, prompt: str) -> dict:
    created = client.post("/v1/run", data={"prompt": prompt, "template": "report"})
    assert created.status_code == 200, created.text
    data = poll_until_finished(client, created.json()["data"]["run_id"])
    assert data["status"] == "completed", data
    return data["result"]["artifacts"][0]


@pytest.fixture(scope="module")
def artifacts(service) -> Iterator[tuple[dict, dict]]:
    """A finished report's artifact for account A, and one for account B."""
    with (
        httpx.Client(base_url=service.base_url, headers={"X-API-KEY": KEY_A}, timeout=30) as a,
        httpx.Client(base_url=service.base_url, headers={"X-API-KEY": KEY_B}, timeout=30) as b,
    ):
        yield finished_report(a, "A short report on tide pools"), finished_report(b, "A short report on sand dunes")


def with_path(url: str, path: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def with_query(url: str, **changes: str) -> str:
    parts = urlsplit(url)
    query = {name: values[0] for name, values in parse_qs(parts.query).items()} | changes
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query, quote_via=quote), ""))


def assert_refused(response: httpx.Response, status: int = 403) -> None:
    assert response.status_code == status, response.text
    assert response.json()["success"] is False


def test_a_link_downloads_its_object_without_a_key_until_it_expires(service, artifacts):
    # Given account A's artifact as the API reports it
    artifact, _ = artifacts
    url = artifact["download_url"]
    query = parse_qs(urlsplit(url).query)

    # Then its link is the service's own, signed, and expires as DOWNLOAD_URL_TTL_SECONDS says (one hour)
    assert url.startswith(f"{service.base_url}/downloads/")
    assert service.endpoint_url not in url
    assert abs(int(query["expires"][0]) - (time.time() + 3600)) < 120
    assert len(query["signature"][0]) == 64

    # When anyone follows it, with no key, Then it downloads the file whole, under its name, never run as a page
    response = httpx.get(url)
    assert response.status_code == 200
    assert len(response.content) == artifact["size_bytes"]
    assert response.headers["Content-Disposition"] == f'attachment; filename="{artifact["name"]}"'
    assert response.headers["Content-Security-Policy"] == "sandbox"
    assert httpx.head(url).status_code == 200


def test_another_tenants_object_cannot_be_reached_with_ones_own_link(artifacts):
    # Given account B's valid link, and account A's object path
    mine, theirs = artifacts
    their_path = urlsplit(theirs["download_url"]).path

    # When B points its signature at A's object, Then it is refused, as is A's path without any signature
    assert_refused(httpx.get(with_path(mine["download_url"], their_path)))
    assert_refused(httpx.get(with_path(mine["download_url"], their_path).split("?")[0]))


def test_a_forged_or_expired_signature_is_refused(service, artifacts):
    artifact, _ = artifacts
    url = artifact["download_url"]
    signature = parse_qs(urlsplit(url).query)["signature"][0]

    # A signature changed by one character, a later expiry, another file name: refused
    forged = signature[:-1] + ("0" if signature[-1] != "0" else "1")
    assert_refused(httpx.get(with_query(url, signature=forged)))
    assert_refused(httpx.get(with_query(url, expires=str(int(time.time()) + 10 * 86400))))
    assert_refused(httpx.get(with_query(url, **{"response-content-disposition": 'inline; filename="x.html"'})))

    # A link the stack signed, whose time has passed (minted as the API would have, an hour ago): refused
    key = urlsplit(url).path.split("/", 3)[3]
    expired = service.downloads.link(service.bucket_names[0], key, None, expires_in=-1)
    response = httpx.get(expired)
    assert_refused(response)
    assert "expired" in response.json()["error"]


def test_listings_and_writes_are_refused_through_the_door_and_on_motos_port(service, artifacts):
    artifact, _ = artifacts
    url = artifact["download_url"]
    bucket = service.bucket_names[0]
    key = urlsplit(url).path.split("/", 3)[3]

    # Through the door: a listing of the bucket, and a PUT (or DELETE) on a valid link
    assert_refused(httpx.get(f"{service.base_url}/downloads/{bucket}/"))
    assert_refused(httpx.get(f"{service.base_url}/downloads/{bucket}?list-type=2"))
    assert_refused(httpx.put(url, content=b"overwritten"), 405)
    assert_refused(httpx.delete(url), 405)

    # On moto's port: a listing, a read and a PUT, unsigned or signed with a key id that is not the stack's
    assert httpx.get(f"{service.endpoint_url}/{bucket}").status_code == 403
    assert httpx.get(f"{service.endpoint_url}/{bucket}/{key}").status_code == 403
    assert httpx.put(f"{service.endpoint_url}/{bucket}/{key}", content=b"overwritten").status_code == 403
    foreign_s3 = boto3.session.Session(region_name="us-east-1", **FOREIGN).client(
        "s3", endpoint_url=service.endpoint_url
    )
    for call in (
        lambda: foreign_s3.list_objects_v2(Bucket=bucket),
        lambda: foreign_s3.put_object(Bucket=bucket, Key=key, Body=b"overwritten"),
    ):
        with pytest.raises(ClientError) as refused:
            call()
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403

    # And the file is as it was
    assert len(httpx.get(url).content) == artifact["size_bytes"]


def test_a_dynamodb_call_with_a_foreign_key_id_is_refused_and_changes_nothing(service, http):
    # Given account A's balance
    account_id = service.accounts[KEY_A]
    before = http.get("/v1/account").json()["data"]["credits_balance"]

    # When another process of the machine, with its own key id, sets the balance through moto's port
    foreign = boto3.session.Session(region_name="us-east-1", **FOREIGN).client(
        "dynamodb", endpoint_url=service.endpoint_url
    )
    with pytest.raises(ClientError) as refused:
        foreign.update_item(
            TableName=service.table_names["AccountsTable"],
            Key={"account_id": {"S": account_id}},
            UpdateExpression="SET credits_balance = :n",
            ExpressionAttributeValues={":n": {"N": "999999"}},
        )

    # Then it is refused as AWS refuses an unknown key, and the balance is unchanged
    assert refused.value.response["Error"]["Code"] == "UnrecognizedClientException"
    assert http.get("/v1/account").json()["data"]["credits_balance"] == before
    # ... while the stack's own credentials (the admin commands') are served on the same port
    own = boto3.session.Session(
        region_name="us-east-1",
        aws_access_key_id=service.credentials.access_key_id,
        aws_secret_access_key=service.credentials.secret_access_key,
    ).client("dynamodb", endpoint_url=service.endpoint_url)
    assert service.table_names["AccountsTable"] in own.list_tables()["TableNames"]


def test_a_client_that_reached_the_service_at_another_address_downloads_from_there(tmp_path):
    # Given `canvas serve` on another loopback address than 127.0.0.1 (as a client on the network would reach it)
    with canvas_serve("--host", "127.0.0.2") as server:
        api_key = server.lines[1].removeprefix("API key: ")
        assert server.base_url.startswith("http://127.0.0.2:")
        with httpx.Client(base_url=server.base_url, headers={"X-API-KEY": api_key}, timeout=30) as client:
            # When it finishes a report
            artifact = finished_report(client, "A short report on rock pools")

        # Then the link starts where the client reached the service, and downloads the file from there
        assert artifact["download_url"].startswith(f"{server.base_url}/downloads/")
        response = httpx.get(artifact["download_url"], timeout=30)
        assert response.status_code == 200
        assert len(response.content) == artifact["size_bytes"]
