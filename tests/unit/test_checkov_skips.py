"""checkov's and cfn-lint's skips name the resources they apply to: each sits in its resource's Metadata with its
reason (`checkov: skip` entries with a comment, `cfn-lint: config: ignore_checks` under a YAML comment), so a new
resource, of any kind, is checked in full; neither `.checkov.yaml` nor the Makefile skips a check globally."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from canvas_local.template import expand_for_each, load_yaml, resolve_conditions

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PITR_CHECK = "CKV_AWS_28"


# Settings of .checkov.yaml that would leave findings unreported for every resource.
GLOBAL_SKIP_SETTINGS = ("skip-check", "check", "soft-fail", "soft-fail-on", "skip-framework")
# Options of the Makefile's cfn-lint and checkov commands that would do the same.
GLOBAL_SKIP_OPTIONS = re.compile(r"--ignore-checks|\s-i\s|--skip-check|--check\b|\s-c\s|--soft-fail")


def expanded_template() -> dict[str, Any]:
    """template.yaml as checkov reads it in `make infra-check`: Fn::ForEach expanded, Fn::If resolved."""
    return copy.deepcopy(resolve_conditions(expand_for_each(load_yaml(ROOT / "template.yaml"))))


def checkov_config() -> dict[str, Any]:
    return yaml.safe_load((ROOT / ".checkov.yaml").read_text(encoding="utf-8")) or {}


def infra_check_commands(makefile: str) -> list[str]:
    """The cfn-lint and checkov command lines of the Makefile's infra-check target, continuations joined."""
    recipe = re.split(r"^infra-check:", makefile, maxsplit=1, flags=re.MULTILINE)[1].split("\n\n", 1)[0]
    recipe = recipe.replace("\\\n", " ")
    return [line.strip() for line in recipe.splitlines() if "cfn-lint" in line or "checkov" in line]


def unexplained_cfn_lint_ignores(template_text: str) -> list[str]:
    """Each `ignore_checks:` line of template.yaml without a YAML comment right above it that says why, or whose
    comment does not name each check when it ignores several."""
    lines = template_text.splitlines()
    unexplained = []
    for number, line in enumerate(lines):
        if "ignore_checks:" not in line:
            continue
        match = re.match(r"(\s*)ignore_checks:\s*\[(.*)\]", line)
        if not match:  # a block list: its checks are not on this line to compare with the comment
            unexplained.append(f"line {number + 1}: {line.strip()} (write the checks as [A, B])")
            continue
        indent, checks = match.group(1), [c.strip() for c in match.group(2).split(",") if c.strip()]
        comment = []
        above = number - 1
        while above >= 0 and lines[above].startswith(indent + "#"):
            comment.insert(0, lines[above].strip().lstrip("#").strip())
            above -= 1
        reason = " ".join(comment)
        if not checks or len(reason) < 20 or (len(checks) > 1 and any(c not in reason for c in checks)):
            unexplained.append(f"line {number + 1}: {line.strip()}")
    return unexplained


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


def test_checkov_skips_no_check_globally():
    # Given .checkov.yaml, which make infra-check passes to checkov
    config = checkov_config()

    # Then it reads the template's framework and skips nothing: a global skip would let every new resource through
    assert config.get("framework") == ["cloudformation"]
    assert [setting for setting in GLOBAL_SKIP_SETTINGS if setting in config] == []


def test_a_global_skip_in_the_checkov_config_is_caught():
    # Given a config that skips a check for every resource
    config = {"framework": ["cloudformation"], "skip-check": ["CKV_AWS_158"]}

    # Then it is named
    assert [setting for setting in GLOBAL_SKIP_SETTINGS if setting in config] == ["skip-check"]


def test_the_makefile_runs_cfn_lint_and_checkov_without_skipping_checks():
    # Given the Makefile's infra-check commands
    commands = infra_check_commands((ROOT / "Makefile").read_text(encoding="utf-8"))

    # Then cfn-lint and checkov both run, and neither is told to ignore a check
    assert any("cfn-lint template.yaml" in command for command in commands)
    assert any("checkov" in command and "--config-file .checkov.yaml" in command for command in commands)
    assert [command for command in commands if GLOBAL_SKIP_OPTIONS.search(command)] == []
    # And no cfn-lint config file adds global ignores either
    assert [name for name in (".cfnlintrc", ".cfnlintrc.yaml", ".cfnlintrc.yml") if (ROOT / name).exists()] == []


def test_a_global_ignore_in_the_makefile_is_caught():
    # Given an infra-check target that passes --ignore-checks to cfn-lint
    makefile = (
        "infra-check: setup\n"
        "\t$(BIN)/cfn-lint template.yaml --append-rules cfn_lint_serverless.rules --ignore-checks WS1004\n"
        "\t$(CHECKOV_VENV)/bin/checkov --quiet --config-file .checkov.yaml \\\n\t\t--file x.json\n"
    )

    # Then that command is named, the checkov one is not
    flagged = [command for command in infra_check_commands(makefile) if GLOBAL_SKIP_OPTIONS.search(command)]
    assert len(flagged) == 1 and "--ignore-checks WS1004" in flagged[0]


def test_every_cfn_lint_ignore_on_a_resource_says_why():
    # Given template.yaml's per-resource cfn-lint ignores
    text = (ROOT / "template.yaml").read_text(encoding="utf-8")

    # Then there are some, and each has a comment right above it giving the reason (naming each check it ignores
    # when there are several)
    assert "ignore_checks:" in text
    assert unexplained_cfn_lint_ignores(text) == []


def test_a_cfn_lint_ignore_without_its_reason_is_caught():
    # Given one ignore with no comment, and one of two checks whose comment names only one
    text = (
        "    Metadata:\n      cfn-lint:\n        config:\n          ignore_checks: [WS1004]\n"
        "    Metadata:\n      cfn-lint:\n        config:\n"
        "          # W2533: Globals give Handler, Runtime and Tracing to every function.\n"
        "          ignore_checks: [W2533, WS1000]\n"
    )

    # Then both are named
    assert unexplained_cfn_lint_ignores(text) == [
        "line 4: ignore_checks: [WS1004]",
        "line 9: ignore_checks: [W2533, WS1000]",
    ]


def test_every_checkov_skip_on_a_resource_gives_its_reason():
    # Given the checkov skips on template.yaml's resources, loops expanded
    document = expanded_template()
    on_resources = {
        (logical_id, check): comment
        for logical_id, resource in document["Resources"].items()
        for check, comment in resource_skips(resource).items()
    }

    # Then there are some, each names a check and says why
    assert on_resources
    assert [key for key, comment in on_resources.items() if not key[1] or len(comment) < 20] == []


def test_every_table_that_skips_customer_keys_is_encrypted_as_its_reason_says():
    # Given the tables that skip CKV_AWS_119 (customer keys), each for its SSE with the AWS managed key
    document = expanded_template()
    tables = {lid: r for lid, r in document["Resources"].items() if r.get("Type") == "AWS::DynamoDB::Table"}
    skipping = {lid: r for lid, r in tables.items() if "CKV_AWS_119" in resource_skips(r)}

    # Then every table is among them, and each has SSE enabled
    assert tables and set(skipping) == set(tables)
    assert [lid for lid, r in skipping.items() if r["Properties"].get("SSESpecification") != {"SSEEnabled": True}] == []


def test_the_expansion_checkov_reads_keeps_the_skips_inside_loops():
    # Given the block functions, declared once in Fn::ForEach::BlockFunctions with their skips
    document = expanded_template()

    # Then each generated function carries the loop body's checkov skips
    skips = resource_skips(document["Resources"]["PromptBlockFunction"])
    assert {"CKV_AWS_115", "CKV_AWS_116", "CKV_AWS_117", "CKV_AWS_173"} <= set(skips)
    assert resource_skips(document["Resources"]["PrototypeBlockFunction"]) == skips
