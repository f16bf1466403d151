"""The state machine definitions are structurally sound and match template.yaml (scripts/check_asl.py).

The checker runs on the real files, and on small broken definitions so it cannot silently pass.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
CHECKER = ROOT / "scripts" / "check_asl.py"


def load_checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_asl", CHECKER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_asl = load_checker()


def task(function: str, **transition: Any) -> dict[str, Any]:
    return {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke",
        "Parameters": {"FunctionName": f"${{{function}Arn}}", "Payload.$": "$"},
        **transition,
    }


def valid_definition() -> dict[str, Any]:
    """A small definition using every construct the checker follows: Choice, Catch, Map, Fail."""
    return {
        "StartAt": "Plan",
        "States": {
            "Plan": task("Plan", Next="Run", Catch=[{"ErrorEquals": ["States.ALL"], "Next": "Failed"}]),
            "Run": {
                "Type": "Map",
                "ItemProcessor": {
                    "StartAt": "Choose",
                    "States": {
                        "Choose": {
                            "Type": "Choice",
                            "Choices": [{"Variable": "$.t", "StringEquals": "a", "Next": "Run A"}],
                            "Default": "Skip",
                        },
                        "Run A": task("Block", End=True),
                        "Skip": {"Type": "Pass", "End": True},
                    },
                },
                "Next": "Done",
            },
            "Done": {"Type": "Succeed"},
            "Failed": {"Type": "Fail", "Error": "RunFailed"},
        },
    }


SUBSTITUTIONS = {"PlanArn": {"Fn::GetAtt": ["Plan", "Arn"]}, "BlockArn": {"Fn::GetAtt": ["Block", "Arn"]}}


def test_the_repository_state_machines_pass() -> None:
    # Given the real template and statemachine/*.asl.json
    definitions = sorted((ROOT / "statemachine").glob("*.asl.json"))

    # When they are checked
    problems = check_asl.check_repository(ROOT / "template.yaml", definitions)

    # Then there is at least one definition and nothing is wrong with any
    assert definitions
    assert problems == []


def test_the_command_line_exits_zero_on_the_repository() -> None:
    # When the script runs as `make infra-check` runs it
    result = subprocess.run([sys.executable, str(CHECKER)], cwd=ROOT, capture_output=True, text=True, check=False)

    # Then it succeeds and says so
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK" in result.stdout


def test_a_valid_small_definition_has_no_problems() -> None:
    assert check_asl.check_definition(valid_definition(), SUBSTITUTIONS, "small") == []


def test_a_missing_next_target_is_reported() -> None:
    # Given a Next naming a state that does not exist
    definition = valid_definition()
    definition["States"]["Plan"]["Next"] = "Runn"

    # When checked
    problems = check_asl.check_definition(definition, SUBSTITUTIONS, "small")

    # Then the broken transition is named
    assert any("Plan" in p and "'Runn'" in p and "not a state" in p for p in problems), problems


@pytest.mark.parametrize(
    ("path", "field"),
    [
        (("States", "Plan", "Catch", 0), "Next"),
        (("States", "Run", "ItemProcessor", "States", "Choose", "Choices", 0), "Next"),
        (("States", "Run", "ItemProcessor", "States", "Choose"), "Default"),
    ],
)
def test_missing_catch_choice_and_default_targets_are_reported(path: tuple[Any, ...], field: str) -> None:
    # Given a Catch, Choice rule or Default (inside the Map) that names no state of its scope
    definition = valid_definition()
    node: Any = definition
    for key in path:
        node = node[key]
    node[field] = "Nowhere"

    # When checked
    problems = check_asl.check_definition(definition, SUBSTITUTIONS, "small")

    # Then it is reported
    assert any("'Nowhere'" in p for p in problems), problems


def test_a_state_of_an_outer_scope_is_not_a_valid_target_inside_a_map() -> None:
    # Given a state inside the Map jumping to a top-level state
    definition = valid_definition()
    definition["States"]["Run"]["ItemProcessor"]["States"]["Skip"] = {"Type": "Pass", "Next": "Done"}

    problems = check_asl.check_definition(definition, SUBSTITUTIONS, "small")

    assert any("Skip" in p and "'Done'" in p for p in problems), problems


def test_an_unknown_placeholder_is_reported() -> None:
    # Given a placeholder with no DefinitionSubstitutions entry
    definition = valid_definition()
    definition["States"]["Plan"]["Parameters"]["FunctionName"] = "${PlanCanvasFunctionArn}"

    problems = check_asl.check_definition(definition, SUBSTITUTIONS, "small")

    # Then the placeholder is reported, and so is the substitution that is now unused
    assert any("${PlanCanvasFunctionArn}" in p for p in problems), problems
    assert any("PlanArn" in p and "not used" in p for p in problems), problems


def test_placeholders_without_any_substitutions_are_reported() -> None:
    problems = check_asl.check_definition(valid_definition(), None, "small")

    assert any("${PlanArn}" in p for p in problems), problems
    assert any("${BlockArn}" in p for p in problems), problems


def test_an_unreachable_state_is_reported() -> None:
    # Given a state nothing leads to
    definition = valid_definition()
    definition["States"]["Orphan"] = {"Type": "Pass", "End": True}

    problems = check_asl.check_definition(definition, SUBSTITUTIONS, "small")

    assert any("Orphan" in p and "not reachable" in p for p in problems), problems


def test_a_state_without_next_or_end_is_reported() -> None:
    definition = valid_definition()
    del definition["States"]["Run"]["ItemProcessor"]["States"]["Run A"]["End"]

    problems = check_asl.check_definition(definition, SUBSTITUTIONS, "small")

    assert any("Run A" in p and "Next and End" in p for p in problems), problems


def test_a_missing_start_at_is_reported() -> None:
    definition = valid_definition()
    definition["StartAt"] = "Begin"

    problems = check_asl.check_definition(definition, SUBSTITUTIONS, "small")

    assert any("StartAt 'Begin'" in p for p in problems), problems


def test_a_literal_lambda_arn_is_reported() -> None:
    definition = valid_definition()
    definition["States"]["Plan"]["Parameters"]["FunctionName"] = "arn:aws:lambda:us-east-1:123456789012:function:plan"
    substitutions = {"BlockArn": SUBSTITUTIONS["BlockArn"]}

    problems = check_asl.check_definition(definition, substitutions, "small")

    assert any("literal Lambda ARN" in p for p in problems), problems


def test_the_command_line_fails_on_a_broken_definition(tmp_path: Path) -> None:
    # Given a template whose state machine uses a definition with an unknown placeholder
    definition = valid_definition()
    definition["States"]["Plan"]["Parameters"]["FunctionName"] = "${UnknownArn}"
    (tmp_path / "machine.asl.json").write_text(json.dumps(definition), encoding="utf-8")
    (tmp_path / "template.yaml").write_text(
        "Transform: AWS::Serverless-2016-10-31\n"
        "Resources:\n"
        "  Plan:\n    Type: AWS::Serverless::Function\n"
        "  Block:\n    Type: AWS::Serverless::Function\n"
        "  Machine:\n"
        "    Type: AWS::Serverless::StateMachine\n"
        "    Properties:\n"
        "      DefinitionUri: machine.asl.json\n"
        "      DefinitionSubstitutions:\n"
        "        PlanArn: !GetAtt Plan.Arn\n"
        "        BlockArn: !GetAtt Block.Arn\n",
        encoding="utf-8",
    )

    # When the script checks it
    result = subprocess.run(
        [
            sys.executable,
            str(CHECKER),
            "--template",
            str(tmp_path / "template.yaml"),
            str(tmp_path / "machine.asl.json"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )

    # Then it exits non-zero and names the placeholder
    assert result.returncode == 1
    assert "${UnknownArn}" in result.stdout


def test_invalid_json_is_reported(tmp_path: Path) -> None:
    # Given a definition file that is not JSON
    broken = tmp_path / "broken.asl.json"
    broken.write_text("{ not json", encoding="utf-8")

    problems = check_asl.check_repository(ROOT / "template.yaml", [broken])

    assert any("not valid JSON" in p for p in problems), problems


def test_a_definition_no_state_machine_uses_is_reported(tmp_path: Path) -> None:
    # Given a valid definition that the template does not deploy
    stray = tmp_path / "stray.asl.json"
    stray.write_text(json.dumps(valid_definition()), encoding="utf-8")

    problems = check_asl.check_repository(ROOT / "template.yaml", [stray])

    assert any("has it as DefinitionUri" in p for p in problems), problems


def test_a_substitution_pointing_at_an_unknown_resource_is_reported(tmp_path: Path) -> None:
    (tmp_path / "machine.asl.json").write_text(json.dumps(valid_definition()), encoding="utf-8")
    (tmp_path / "template.yaml").write_text(
        "Resources:\n"
        "  Plan:\n    Type: AWS::Serverless::Function\n"
        "  Machine:\n"
        "    Type: AWS::Serverless::StateMachine\n"
        "    Properties:\n"
        "      DefinitionUri: machine.asl.json\n"
        "      DefinitionSubstitutions:\n"
        "        PlanArn: !GetAtt Plan.Arn\n"
        "        BlockArn: !GetAtt Blok.Arn\n"
        "      Policies:\n        - LambdaInvokePolicy:\n            FunctionName: !Ref Plan\n",
        encoding="utf-8",
    )

    problems = check_asl.check_repository(tmp_path / "template.yaml", [tmp_path / "machine.asl.json"])

    assert problems == ["Machine: substitution BlockArn refers to unknown resource Blok"]


def test_the_template_loader_reads_cloudformation_tags(tmp_path: Path) -> None:
    # Given YAML with the short tags the template uses
    path = tmp_path / "t.yaml"
    path.write_text(
        "A: !Ref X\nB: !GetAtt Y.Arn\nC: !Sub 'a-${X}'\nD: !If [Cond, !Ref X, !Ref AWS::NoValue]\n"
        "E: !Not [!Equals [!Ref P, '']]\n",
        encoding="utf-8",
    )

    template = check_asl.load_template(path)

    assert template == {
        "A": {"Ref": "X"},
        "B": {"Fn::GetAtt": ["Y", "Arn"]},
        "C": {"Fn::Sub": "a-${X}"},
        "D": {"Fn::If": ["Cond", {"Ref": "X"}, {"Ref": "AWS::NoValue"}]},
        "E": {"Fn::Not": [{"Fn::Equals": [{"Ref": "P"}, ""]}]},
    }


# ---------------------------------------------------------------- the shape of run_canvas.asl.json


def run_canvas() -> dict[str, Any]:
    return json.loads((ROOT / "statemachine" / "run_canvas.asl.json").read_text(encoding="utf-8"))


def block_maps(definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    branches = definition["States"]["Run Blocks"]["Branches"]
    return {name: state for branch in branches for name, state in branch["States"].items() if state["Type"] == "Map"}


def success_path(processor: dict[str, Any]) -> list[str]:
    names, name = [], processor["StartAt"]
    while name is not None:
        names.append(name)
        name = processor["States"][name].get("Next")
    return names


def test_a_block_is_scoped_by_trusted_code_then_run_and_one_with_inputs_waits_first():
    # Given the two Maps of the real definition
    maps = block_maps(run_canvas())

    # Then each block gets its credentials from Scope Block, then runs (and releases its dependents itself); blocks
    # with inputs wait first
    assert {name: success_path(m["ItemProcessor"]) for name, m in maps.items()} == {
        "Run Ready Blocks": ["Scope Block", "Run Block"],
        "Run Waiting Blocks": ["Wait For Inputs", "Scope Waiting Block", "Run Waiting Block"],
    }
    releases = {"Run Ready Blocks": "Release Dependents", "Run Waiting Blocks": "Release Waiting Block Dependents"}
    scopes = {
        "Run Ready Blocks": ("Scope Block", "Run Block"),
        "Run Waiting Blocks": ("Scope Waiting Block", "Run Waiting Block"),
    }
    for map_name, m in maps.items():
        states = m["ItemProcessor"]["States"]
        release = releases[map_name]
        scope, run = scopes[map_name]
        assert states[release]["End"] is True
        # And the block runs with the credentials its scope vended, and a block its reservation could not pay for
        # goes back to its scope, which tops the reservation up (or skips it) before it runs again
        assert states[scope]["Parameters"]["FunctionName"] == "${BlockScopeFunctionArn}"
        assert states[run]["Parameters"]["Payload"]["credentials.$"] == "$.scope.credentials"
        assert states[run]["Catch"][0] == {
            "ErrorEquals": ["ReservationShortError"],
            "ResultPath": "$.short",
            "Next": scope,
        }
        assert m["ItemSelector"]["short"] is None
        # And every other Catch goes straight to the release, which records the failure (no extra state on failure)
        # and is reached by nothing else
        for name, state in states.items():
            catches = [c for c in state.get("Catch", []) if c["ErrorEquals"] != ["ReservationShortError"]]
            assert all(c["Next"] == release for c in catches), name
            assert state.get("Next") != release, name
        # And both Maps admit every block of a canvas together (40 at most), so none waits on one not started
        assert m["MaxConcurrency"] == 40


def test_one_task_runs_every_block_type_with_the_function_the_plan_names():
    processors = [m["ItemProcessor"]["States"] for m in block_maps(run_canvas()).values()]
    for run_block in (processors[0]["Run Block"], processors[1]["Run Waiting Block"]):
        assert run_block["Resource"] == "arn:aws:states:::lambda:invoke"
        assert run_block["Parameters"]["FunctionName.$"] == "$.function"
        assert run_block["TimeoutSecondsPath"] == "$.timeout_seconds"
    # And the Map hands each iteration the function the plan gave its block
    for m in block_maps(run_canvas()).values():
        assert m["ItemSelector"]["function.$"] == "$$.Map.Item.Value.function"


def test_lambda_throttling_is_retried_six_times_or_more_with_a_bounded_delay():
    def tasks(scope: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        found = []
        for name, state in scope["States"].items():
            if state["Type"] == "Task":
                found.append((name, state))
            for child in [state.get("ItemProcessor"), *state.get("Branches", [])]:
                if child:
                    found.extend(tasks(child))
        return found

    for name, state in tasks(run_canvas()):
        throttling = [r for r in state["Retry"] if "Lambda.TooManyRequestsException" in r["ErrorEquals"]]
        assert len(throttling) == 1, name
        assert throttling[0]["MaxAttempts"] >= 6 and throttling[0]["MaxDelaySeconds"] <= 60, name


def test_plan_canvas_names_a_function_of_the_embedded_stack_for_every_block_type():
    from canvas_core.models.catalog import BlockType
    from canvas_core.orchestration import block_function_name
    from canvas_local.template import Template

    # Given the state machine as the embedded stack deploys it (substitutions filled), and its functions' names
    template = Template(ROOT / "template.yaml")
    (machine,) = [m for m in template.state_machines() if m.logical_id == "RunCanvasStateMachine"]
    states = json.loads(machine.definition)["States"]
    names = {template.function_name(f.logical_id) for f in template.functions()}

    # Then Plan Canvas and Await Approval are handed the prefix that names a function the stack has for each type
    prefixes = {states[s]["Parameters"]["Payload"]["block_function_prefix"] for s in ("Plan Canvas", "Await Approval")}
    (prefix,) = prefixes
    assert {block_function_name(t.value, prefix) for t in BlockType} <= names


def test_a_function_named_inside_a_joined_map_must_exist(tmp_path: Path) -> None:
    # Given a substitution that joins `!Sub`s, one naming a function the template lacks
    (tmp_path / "machine.asl.json").write_text(json.dumps(valid_definition()), encoding="utf-8")
    (tmp_path / "template.yaml").write_text(
        "Resources:\n"
        "  Plan:\n    Type: AWS::Serverless::Function\n"
        "  Block:\n    Type: AWS::Serverless::Function\n"
        "  Machine:\n"
        "    Type: AWS::Serverless::StateMachine\n"
        "    Properties:\n"
        "      DefinitionUri: machine.asl.json\n"
        "      DefinitionSubstitutions:\n"
        "        PlanArn: !GetAtt Plan.Arn\n"
        "        BlockArn: !Join [',', [!Sub 'a=${Block.Arn}', !Sub 'b=${Blok.Arn}']]\n"
        "      Policies:\n        - LambdaInvokePolicy:\n            FunctionName: !Ref Plan\n" + INVOKE_BLOCK_POLICY,
        encoding="utf-8",
    )

    problems = check_asl.check_repository(tmp_path / "template.yaml", [tmp_path / "machine.asl.json"])

    assert problems == ["Machine: substitution BlockArn refers to unknown resource Blok"]


# A policy of its own on the state machine's generated role.
INVOKE_BLOCK_POLICY = (
    "  BlockInvokePolicy:\n"
    "    Type: AWS::IAM::RolePolicy\n"
    "    Properties:\n"
    "      RoleName: !Ref MachineRole\n"
    "      PolicyName: invoke-block\n"
    "      PolicyDocument:\n"
    "        Statement:\n"
    "          - {Effect: Allow, Action: lambda:InvokeFunction, Resource: !Sub '${Block.Arn}'}\n"
)


@pytest.mark.parametrize(
    ("policies", "expected"),
    [
        # Each function named is invokable: Plan through a LambdaInvokePolicy, Block through a policy on the role
        (
            "      Policies:\n        - LambdaInvokePolicy:\n            FunctionName: !Ref Plan\n"
            + INVOKE_BLOCK_POLICY,
            [],
        ),
        # Block's policy is missing
        (
            "      Policies:\n        - LambdaInvokePolicy:\n            FunctionName: !Ref Plan\n",
            ["Machine: substitution BlockArn names Block, which it may not invoke"],
        ),
        # Block's policy grants another action
        (
            "      Policies:\n        - LambdaInvokePolicy:\n            FunctionName: !Ref Plan\n"
            + INVOKE_BLOCK_POLICY.replace("lambda:InvokeFunction", "lambda:GetFunction"),
            ["Machine: substitution BlockArn names Block, which it may not invoke"],
        ),
        # Block's policy grants only its versions and aliases, not the ARN the plan names
        (
            "      Policies:\n        - LambdaInvokePolicy:\n            FunctionName: !Ref Plan\n"
            + INVOKE_BLOCK_POLICY.replace("${Block.Arn}", "${Block.Arn}:*"),
            ["Machine: substitution BlockArn names Block, which it may not invoke"],
        ),
    ],
)
def test_each_function_named_must_be_one_the_state_machine_may_invoke(
    tmp_path: Path, policies: str, expected: list[str]
) -> None:
    # Given a state machine naming two functions, with the policies of the case
    (tmp_path / "machine.asl.json").write_text(json.dumps(valid_definition()), encoding="utf-8")
    (tmp_path / "template.yaml").write_text(
        "Resources:\n"
        "  Plan:\n    Type: AWS::Serverless::Function\n"
        "  Block:\n    Type: AWS::Serverless::Function\n"
        "  Machine:\n"
        "    Type: AWS::Serverless::StateMachine\n"
        "    Properties:\n"
        "      DefinitionUri: machine.asl.json\n"
        "      DefinitionSubstitutions:\n"
        "        PlanArn: !GetAtt Plan.Arn\n"
        "        BlockArn: !Join [',', [!Sub 'a=${Block.Arn}']]\n" + policies,
        encoding="utf-8",
    )

    # When the script checks it
    problems = check_asl.check_repository(tmp_path / "template.yaml", [tmp_path / "machine.asl.json"])

    # Then a function it may not invoke is reported
    assert problems == expected
