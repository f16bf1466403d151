"""checkov's skips name the resources they apply to: a skip for particular resources sits in each resource's
`Metadata: checkov: skip` with its reason, so a new resource of the same kind is checked; `.checkov.yaml` keeps
only the skips that hold for every resource of a kind."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from canvas_local.template import expand_for_each, load_yaml

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PITR_CHECK = "CKV_AWS_28"


def expanded_template() -> dict[str, Any]:
    """template.yaml as checkov reads it in `make infra-check`: Fn::ForEach expanded."""
    return copy.deepcopy(expand_for_each(load_yaml(ROOT / "template.yaml")))


def global_skips() -> list[str]:
    return yaml.safe_load((ROOT / ".checkov.yaml").read_text(encoding="utf-8")).get("skip-check") or []


def resource_skips(resource: dict[str, Any]) -> dict[str, str]:
    """check id -> comment of the resource's checkov skips."""
    skips = ((resource.get("Metadata") or {}).get("checkov") or {}).get("skip") or []
    return {skip.get("id"): str(skip.get("comment") or "").strip() for skip in skips}


def tables_without_recovery(document: dict[str, Any]) -> list[str]:
    """The tables with neither point-in-time recovery nor a justified skip of the check that asks for it."""
    unjustified = []
    for logical_id, resource in (document.get("Resources") or {}).items():
        if resource.get("Type") != "AWS::DynamoDB::Table":
            continue
        recovery = (resource.get("Properties") or {}).get("PointInTimeRecoverySpecification") or {}
        if recovery.get("PointInTimeRecoveryEnabled") is True:
            continue
        if resource_skips(resource).get(PITR_CHECK):
            continue
        unjustified.append(logical_id)
    return unjustified


def test_every_table_has_point_in_time_recovery_or_says_why_not():
    # Given the template as checkov reads it
    document = expanded_template()

    # Then every table without point-in-time recovery carries a skip of CKV_AWS_28 with its reason
    assert tables_without_recovery(document) == []


def test_a_new_table_without_point_in_time_recovery_is_caught():
    # Given the template with a new table that has no point-in-time recovery and no skip
    document = expanded_template()
    document["Resources"]["LedgerTable"] = copy.deepcopy(document["Resources"]["AccountsTable"])
    del document["Resources"]["LedgerTable"]["Properties"]["PointInTimeRecoverySpecification"]

    # When the tables are checked
    unjustified = tables_without_recovery(document)

    # Then the new table is named
    assert unjustified == ["LedgerTable"]


def test_a_skip_without_a_reason_does_not_count():
    # Given the new table with a skip of CKV_AWS_28 that gives no reason
    document = expanded_template()
    table = copy.deepcopy(document["Resources"]["AccountsTable"])
    del table["Properties"]["PointInTimeRecoverySpecification"]
    table["Metadata"] = {"checkov": {"skip": [{"id": PITR_CHECK}]}}
    document["Resources"]["LedgerTable"] = table

    # When the tables are checked
    # Then the skip does not excuse it
    assert tables_without_recovery(document) == ["LedgerTable"]


def test_point_in_time_recovery_is_not_skipped_for_every_table():
    # Given the global skips of .checkov.yaml
    # Then CKV_AWS_28 is not among them: a global skip would let every new table through
    assert PITR_CHECK not in global_skips()


def test_every_skip_on_a_resource_gives_its_reason_and_is_not_also_global():
    # Given the checkov skips on template.yaml's resources, loops expanded
    document = expanded_template()
    on_resources = {
        (logical_id, check): comment
        for logical_id, resource in document["Resources"].items()
        for check, comment in resource_skips(resource).items()
    }

    # Then there are some, each names a check and says why
    assert on_resources
    assert [key for key, comment in on_resources.items() if not key[1] or not comment] == []
    # And none is skipped globally as well, which would make the per-resource skip meaningless
    assert {check for _, check in on_resources} & set(global_skips()) == set()


def test_every_table_is_encrypted_as_the_global_skip_of_customer_keys_says():
    # Given the global skip of CKV_AWS_119 (customer keys), justified by every table's SSE
    assert "CKV_AWS_119" in global_skips()
    document = expanded_template()

    # Then every table has SSE enabled
    tables = {lid: r for lid, r in document["Resources"].items() if r.get("Type") == "AWS::DynamoDB::Table"}
    assert tables
    assert [lid for lid, r in tables.items() if r["Properties"].get("SSESpecification") != {"SSEEnabled": True}] == []


def test_the_expansion_checkov_reads_keeps_the_skips_inside_loops():
    # Given the block functions, declared once in Fn::ForEach::BlockFunctions with their skips
    document = expanded_template()

    # Then each generated function carries the loop body's checkov skips
    skips = resource_skips(document["Resources"]["PromptBlockFunction"])
    assert {"CKV_AWS_115", "CKV_AWS_116"} <= set(skips)
    assert resource_skips(document["Resources"]["PrototypeBlockFunction"]) == skips
