"""Structural check of the state machines in statemachine/*.asl.json against template.yaml.

For every definition: it is valid JSON; each States scope (the top level, Map ItemProcessor/Iterator,
Parallel Branches) has a StartAt naming one of its states; every Next, Default, Choice Next and Catch
Next names a state of the same scope; every state is reachable from StartAt; every state that is not
Choice, Succeed or Fail has exactly one of Next and End; every ${Placeholder} has an entry in the state
machine's DefinitionSubstitutions in template.yaml, every substitution is used and points at a resource
of the template, and each function it names is one the state machine may invoke; no literal Lambda ARN
appears. Prints one line per problem and exits 1 on any.

Usage: python scripts/check_asl.py [--template template.yaml] [definition.asl.json ...]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import deque
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent

PLACEHOLDER = re.compile(r"\$\{([^}]+)\}")
LAMBDA_ARN = re.compile(r"arn:aws[a-z-]*:lambda:")
STATE_TYPES = {"Task", "Pass", "Choice", "Wait", "Succeed", "Fail", "Parallel", "Map"}
NO_NEXT_OR_END = {"Choice", "Succeed", "Fail"}
SAM_STATE_MACHINE = "AWS::Serverless::StateMachine"
LAMBDA_FUNCTIONS = {"AWS::Serverless::Function", "AWS::Lambda::Function"}


def load_template(path: Path) -> dict[str, Any]:
    """Reads a CloudFormation/SAM template, short tags included, its Fn::ForEach loops expanded."""
    from canvas_local.template import expand_for_each, load_yaml

    return expand_for_each(load_yaml(path))


def state_machines(template: dict[str, Any], template_dir: Path) -> dict[Path, tuple[str, dict[str, Any]]]:
    """Maps each local DefinitionUri file to (logical id, DefinitionSubstitutions) of its state machine."""
    machines: dict[Path, tuple[str, dict[str, Any]]] = {}
    for logical_id, resource in (template.get("Resources") or {}).items():
        if resource.get("Type") != SAM_STATE_MACHINE:
            continue
        properties = resource.get("Properties") or {}
        uri = properties.get("DefinitionUri")
        if isinstance(uri, str) and not uri.startswith("s3://"):
            path = (template_dir / uri).resolve()
            machines[path] = (logical_id, properties.get("DefinitionSubstitutions") or {})
    return machines


def _transitions(state: dict[str, Any]) -> list[tuple[str, Any]]:
    """(where, target) for every transition out of a state."""
    found: list[tuple[str, Any]] = []
    if "Next" in state:
        found.append(("Next", state["Next"]))
    if state.get("Type") == "Choice":
        for index, rule in enumerate(state.get("Choices") or []):
            found.append((f"Choices[{index}].Next", rule.get("Next")))
        if "Default" in state:
            found.append(("Default", state["Default"]))
    for index, catcher in enumerate(state.get("Catch") or []):
        found.append((f"Catch[{index}].Next", catcher.get("Next")))
    return found


def _child_scopes(name: str, state: dict[str, Any]) -> list[tuple[str, Any]]:
    if state.get("Type") == "Map":
        processor = state.get("ItemProcessor", state.get("Iterator"))
        return [(f"{name}/ItemProcessor", processor)]
    if state.get("Type") == "Parallel":
        return [(f"{name}/Branches[{i}]", branch) for i, branch in enumerate(state.get("Branches") or [])]
    return []


def check_scope(scope: Any, where: str) -> list[str]:
    """Problems of one States scope (StartAt + States) and, recursively, of the scopes nested in it."""
    if not isinstance(scope, dict):
        return [f"{where}: missing or not an object (needs StartAt and States)"]
    states = scope.get("States")
    if not isinstance(states, dict) or not states:
        return [f"{where}: States is missing or empty"]
    problems: list[str] = []
    start = scope.get("StartAt")
    if start not in states:
        problems.append(f"{where}: StartAt {start!r} is not a state of this scope")

    for name, state in states.items():
        here = f"{where}/{name}"
        if not isinstance(state, dict):
            problems.append(f"{here}: not an object")
            continue
        kind = state.get("Type")
        if kind not in STATE_TYPES:
            problems.append(f"{here}: unknown Type {kind!r}")
        for label, target in _transitions(state):
            if target not in states:
                problems.append(f"{here}: {label} {target!r} is not a state of this scope")
        if kind in NO_NEXT_OR_END:
            if kind == "Choice" and not state.get("Choices"):
                problems.append(f"{here}: Choice state without Choices")
            if kind != "Choice" and ("Next" in state or "End" in state):
                problems.append(f"{here}: a {kind} state takes neither Next nor End")
        elif ("Next" in state) == (state.get("End") is True):
            problems.append(f"{here}: needs exactly one of Next and End: true")
        for child_where, child in _child_scopes(here, state):
            problems.extend(check_scope(child, child_where))

    if start in states:
        reached = {start}
        queue = deque([start])
        while queue:
            state = states[queue.popleft()]
            for _, target in _transitions(state if isinstance(state, dict) else {}):
                if target in states and target not in reached:
                    reached.add(target)
                    queue.append(target)
        for name in states:
            if name not in reached:
                problems.append(f"{where}/{name}: not reachable from StartAt {start!r}")
    return problems


def check_definition(definition: Any, substitutions: dict[str, Any] | None, where: str = "") -> list[str]:
    """Problems of one state machine definition; substitutions None means the template names none."""
    if not isinstance(definition, dict):
        return [f"{where}: the definition is not a JSON object"]
    problems = check_scope(definition, where)
    text = json.dumps(definition)
    used = set(PLACEHOLDER.findall(text))
    known = set(substitutions or {})
    for name in sorted(used - known):
        problems.append(f"{where}: placeholder ${{{name}}} has no entry in DefinitionSubstitutions")
    for name in sorted(known - used):
        problems.append(f"{where}: DefinitionSubstitutions entry {name} is not used by the definition")
    for match in sorted(set(LAMBDA_ARN.findall(text))):
        problems.append(f"{where}: literal Lambda ARN ({match}...); use a ${{Placeholder}} instead")
    return problems


def _referenced_resources(value: Any) -> list[str]:
    """Resources a substitution's value names: `!Ref`, `!GetAtt`, and `${X.Attr}` in `!Sub`, at any depth (a map
    of block types to functions is a `!Join` of `!Sub`s)."""
    found: list[str] = []
    if isinstance(value, list):
        for item in value:
            found.extend(_referenced_resources(item))
    elif isinstance(value, dict):
        for key, argument in value.items():
            if key == "Ref" and isinstance(argument, str) and not argument.startswith("AWS::"):
                found.append(argument)
            elif key == "Fn::GetAtt":
                parts = argument.split(".", 1) if isinstance(argument, str) else argument
                if parts and isinstance(parts[0], str):
                    found.append(parts[0])
            elif key == "Fn::Sub":
                text = argument if isinstance(argument, str) else argument[0]
                found.extend(name.split(".", 1)[0] for name in PLACEHOLDER.findall(text) if "." in name)
                if not isinstance(argument, str):
                    found.extend(_referenced_resources(argument[1:]))
            else:
                found.extend(_referenced_resources(argument))
    return found


def invokable_functions(machine: str, resources: dict[str, Any]) -> set[str]:
    """The functions a state machine may invoke: its `LambdaInvokePolicy` entries, and the policies of its own
    that attach to its generated role (`<Machine>Role`) and allow `lambda:InvokeFunction` on a function's ARN."""
    found: set[str] = set()
    for policy in (resources[machine].get("Properties") or {}).get("Policies") or []:
        if isinstance(policy, dict) and "LambdaInvokePolicy" in policy:
            found.update(_referenced_resources(policy["LambdaInvokePolicy"].get("FunctionName")))
    role = {"Ref": f"{machine}Role"}
    for resource in resources.values():
        properties = resource.get("Properties") or {}
        attached = (resource.get("Type") == "AWS::IAM::RolePolicy" and properties.get("RoleName") == role) or (
            resource.get("Type") == "AWS::IAM::Policy" and role in (properties.get("Roles") or [])
        )
        if not attached:
            continue
        statements = (properties.get("PolicyDocument") or {}).get("Statement") or []
        for statement in statements if isinstance(statements, list) else [statements]:
            actions = statement.get("Action")
            if statement.get("Effect") == "Allow" and "lambda:InvokeFunction" in (
                actions if isinstance(actions, list) else [actions]
            ):
                resources_granted = statement.get("Resource")
                for resource in resources_granted if isinstance(resources_granted, list) else [resources_granted]:
                    found.update(_function_arn(resource))
    return found


def _function_arn(resource: Any) -> list[str]:
    """The function a policy resource is the (unqualified) ARN of: `!GetAtt F.Arn`, `!Sub "${F.Arn}"`, or
    `!Sub "${F.Arn}*"`; a qualified ARN (`${F.Arn}:*`, a version or an alias) does not let the plan's ARN run."""
    if isinstance(resource, dict) and isinstance(resource.get("Fn::GetAtt"), list | str):
        parts = resource["Fn::GetAtt"]
        parts = parts.split(".", 1) if isinstance(parts, str) else parts
        return [parts[0]] if len(parts) == 2 and parts[1] == "Arn" else []
    if isinstance(resource, dict) and isinstance(resource.get("Fn::Sub"), str):
        match = re.fullmatch(r"\$\{(\w+)\.Arn\}\*?", resource["Fn::Sub"])
        return [match.group(1)] if match else []
    return []


def check_repository(template_path: Path, definitions: list[Path]) -> list[str]:
    """Problems of the given definitions against the template's state machines."""
    try:
        template = load_template(template_path)
    except (OSError, yaml.YAMLError) as error:
        return [f"{template_path}: cannot read the template: {error}"]
    resources = template.get("Resources") or {}
    machines = state_machines(template, template_path.parent)
    problems: list[str] = []
    if not definitions:
        problems.append("no state machine definitions (statemachine/*.asl.json) to check")

    for path in definitions:
        where = _display(path)
        try:
            definition = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as error:
            problems.append(f"{where}: not valid JSON: {error}")
            continue
        machine = machines.get(path.resolve())
        if machine is None:
            problems.append(f"{where}: no {SAM_STATE_MACHINE} in the template has it as DefinitionUri")
            problems.extend(check_definition(definition, None, where))
            continue
        logical_id, substitutions = machine
        problems.extend(check_definition(definition, substitutions, where))
        parameters = template.get("Parameters") or {}
        invokable = invokable_functions(logical_id, resources)
        for name, value in substitutions.items():
            for target in _referenced_resources(value):
                if target not in resources and target not in parameters:
                    problems.append(f"{logical_id}: substitution {name} refers to unknown resource {target}")
                elif resources.get(target, {}).get("Type") in LAMBDA_FUNCTIONS and target not in invokable:
                    problems.append(f"{logical_id}: substitution {name} names {target}, which it may not invoke")

    for path, (logical_id, _) in machines.items():
        if not path.is_file():
            problems.append(f"{logical_id}: DefinitionUri {_display(path)} does not exist")
    return problems


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--template", type=Path, default=ROOT / "template.yaml")
    parser.add_argument("definitions", type=Path, nargs="*", help="default: statemachine/*.asl.json")
    args = parser.parse_args(argv)
    definitions = args.definitions or sorted((ROOT / "statemachine").glob("*.asl.json"))

    problems = check_repository(args.template, definitions)
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_asl: {len(problems)} problem(s)")
        return 1
    print(f"check_asl: {len(definitions)} state machine definition(s) OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
