"""`canvas create-key` and `canvas revoke-key`, against the tables a deployed stack has (moto here)."""

import io

import pytest

from canvas_core.auth import authenticate
from canvas_core.errors import InvalidApiKeyError
from canvas_local.cli import main

pytestmark = pytest.mark.component


def test_created_key_authenticates_until_revoked(aws, capsys, monkeypatch):
    # When
    assert main(["create-key", "--credits", "1200"]) == 0
    out = capsys.readouterr().out
    account_id = out.split("account_id: ")[1].split()[0]
    api_key = out.split("api_key: ")[1].split()[0]
    # Then
    assert api_key.startswith("sk_canvas_") and len(api_key) >= len("sk_canvas_") + 43
    assert authenticate({"X-API-KEY": api_key}) == account_id
    # When revoked
    monkeypatch.setattr("sys.stdin", io.StringIO(api_key + "\n"))
    assert main(["revoke-key"]) == 0
    with pytest.raises(InvalidApiKeyError):
        authenticate({"X-API-KEY": api_key})


def test_revoking_an_unknown_key_says_so(aws, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("sk_canvas_unknown\n"))
    assert main(["revoke-key"]) == 1
    assert "no such key" in capsys.readouterr().err
