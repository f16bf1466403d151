"""An `auto` run with the offline provider, planned, run block by block by the handlers under moto and finalized:
every file the request asks for is made, each titled with the request's subject."""

from __future__ import annotations

import json
from urllib.parse import unquote, urlencode, urlsplit

import pytest

from canvas_core.render.docx import check_docx
from canvas_core.render.pptx import check_pptx
from tests.support import body_of, load_event

pytestmark = pytest.mark.component


def drive(function, context, ids: dict) -> None:
    """Plan, run every block in order (recording failures as the state machine's Catch does), finalize."""
    for block in function("orchestration/plan_canvas")(ids, context)["blocks"]:
        event = {**ids, **block}
        folder = "blocks/" + block["block_type"].removesuffix("-block").replace("-", "_") + "_block"
        try:
            function(folder)(event, context)
        except Exception as exc:  # the Catch hands the error to Release Dependents
            error = {"Error": type(exc).__name__, "Cause": json.dumps({"errorMessage": str(exc)})}
            function("orchestration/release_dependents")({**event, "dependents": [], "error": error}, context)
    function("orchestration/finalize_run")(ids, context)


def download(aws, url: str) -> bytes:
    parts = urlsplit(url)
    bucket, key = (parts.netloc.split(".")[0], unquote(parts.path.lstrip("/")))
    if bucket == "s3":  # path-style URL: /bucket/key
        bucket, key = key.split("/", 1)
    return aws.s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def test_a_request_for_a_report_a_deck_a_spreadsheet_and_a_web_app_gets_four_files_titled_by_subject(
    aws, account, function, context
):
    # Given an auto run asking for four deliverables
    prompt = "Write a report, a slide deck, a spreadsheet and a web app on the quarterly business review"
    event = load_event("create_run", api_key=account.api_key, body=urlencode({"prompt": prompt, "template": "auto"}))
    created = body_of(function("api/create_run")(event, context))["data"]
    ids = {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account.account_id}
    # When
    drive(function, context, ids)
    # Then the run made the four files
    event = load_event("get_run", api_key=account.api_key, path_parameters={"run_id": created["run_id"]})
    data = body_of(function("api/get_run")(event, context))["data"]
    assert data["status"] == "completed", data.get("errors")
    artifacts = data["result"]["artifacts"]
    assert sorted(a["type"] for a in artifacts) == ["docx", "html", "pptx", "xlsx"]
    # And the report and the deck are titled with the subject, not the list of things asked for
    files = {a["type"]: download(aws, a["download_url"]) for a in artifacts}
    assert check_docx(files["docx"]).title == "Quarterly business review"
    assert check_pptx(files["pptx"])[0].title == "Quarterly business review"
