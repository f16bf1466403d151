"""A block type is in four places (docs/block-types.md, "Adding a block type"), and what is made from them:
1. its entry in the block catalogue: its member of BlockType and its BlockSpec in BLOCK_CATALOG
   (canvas_core/models/catalog.py), which the planner's catalogue, personas and estimates read;
2. its module in canvas_core/blocks;
3. its folder in functions/blocks, whose handler runs that type;
4. its template entry: its line in the BlockFunctions mapping and its name in Fn::ForEach::BlockFunctions, which
   declare its function, named as Plan Canvas names it, with its log group and alarms.
Made from them: its row in docs/block-types.md (scripts/generate_block_table.py). Nothing else names a type: its
data rights are the session role's, the same for every type (docs/isolation.md). These tests fail naming the place
a type is missing from, a place that names no type, and any per-type place the state machine would need again."""

from __future__ import annotations

import fnmatch
import importlib.util
from pathlib import Path
from typing import Any

import pytest

from canvas_core.agents.personas import PERSONAS
from canvas_core.models.catalog import BLOCK_CATALOG, BlockType
from canvas_core.orchestration import block_function_name
from canvas_local.template import expand_for_each, load_yaml

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = load_yaml(ROOT / "template.yaml")
MAPPING: dict[str, dict[str, str]] = DOCUMENT["Mappings"]["BlockFunctions"]
LOOP = "Fn::ForEach::BlockFunctions"
DOCS = (ROOT / "docs" / "block-types.md").read_text(encoding="utf-8")
STATE_MACHINE = DOCUMENT["Resources"]["RunCanvasStateMachine"]["Properties"]
STACK = "canvas-run-service"


def name_of(block_type: str) -> str:
    """`web-research-block` -> `WebResearch`: the key of its mapping line; its function is <Name>BlockFunction."""
    return "".join(part.capitalize() for part in block_type.removesuffix("-block").split("-"))


def folder_of(block_type: str) -> str:
    """`web-research-block` -> `functions/blocks/web_research_block`."""
    return "functions/blocks/" + block_type.replace("-", "_")


def module_of(block_type: str) -> str:
    """`web-research-block` -> layers/shared/canvas_core/blocks/web_research.py."""
    return "layers/shared/canvas_core/blocks/" + block_type.removesuffix("-block").replace("-", "_") + ".py"


def for_each_collection() -> list[Any]:
    _, collection, _ = DOCUMENT["Resources"][LOOP]
    return collection


def missing_places(block_type: str) -> list[str]:
    """The places of a block type that lack it, each named as a newcomer would look for it."""
    name, folder = name_of(block_type), folder_of(block_type)
    missing = []
    spec = BLOCK_CATALOG.get(BlockType(block_type))
    if spec is None:
        missing.append("its entry in BLOCK_CATALOG (canvas_core/models/catalog.py)")
    elif spec.persona not in PERSONAS:
        missing.append(f"a persona there is for its catalogue entry, not {spec.persona!r} (agents/personas.py)")
    elif (spec.title is None) != (spec.duty is None):
        missing.append("both a title and a duty in its catalogue entry (a deliverable has both, others neither)")
    if not (ROOT / module_of(block_type)).is_file():
        missing.append(f"its module {module_of(block_type)} with run(ctx)")
    app = ROOT / folder / "app.py"
    if not app.is_file():
        missing.append(f"its folder {folder}/ with app.py")
    elif f'make_block_handler("{block_type}")' not in app.read_text(encoding="utf-8"):
        missing.append(f'{folder}/app.py running it: handler = make_block_handler("{block_type}")')
    if MAPPING.get(name) != {"CodeUri": folder + "/"}:
        missing.append(f"its line in template.yaml's BlockFunctions mapping: {name}: {{CodeUri: {folder}/}}")
    if name not in for_each_collection():
        missing.append(f"its name {name} in template.yaml's {LOOP} list")
    if f"| `{block_type}` |" not in DOCS:
        missing.append("its row in docs/block-types.md's table: run scripts/generate_block_table.py")
    return missing


@pytest.mark.parametrize("block_type", [t.value for t in BlockType])
def test_a_block_type_is_in_each_of_its_places(block_type: str) -> None:
    # Then no place of the type lacks it
    assert missing_places(block_type) == [], f"{block_type} needs " + "; ".join(missing_places(block_type))


def test_the_places_name_no_type_there_is_not() -> None:
    # Given the names of the block types
    names = {name_of(t.value) for t in BlockType}
    folders = {p for p in (ROOT / "functions/blocks").iterdir() if p.is_dir() and p.name != "__pycache__"}

    # Then the mapping, the loop, the folders and the catalogue name only those, once each
    assert sorted(set(MAPPING) - names) == [], "template.yaml's BlockFunctions mapping has lines of no BlockType"
    assert sorted(set(for_each_collection()) - names) == [], f"template.yaml's {LOOP} names no BlockType"
    assert len(for_each_collection()) == len(set(for_each_collection())), f"a name appears twice in {LOOP}"
    assert sorted(str(p.relative_to(ROOT)) for p in folders) == sorted(folder_of(t.value) for t in BlockType)
    assert set(BLOCK_CATALOG) == set(BlockType)


def test_the_docs_table_of_block_types_is_the_catalogues() -> None:
    spec = importlib.util.spec_from_file_location("generate_block_table", ROOT / "scripts/generate_block_table.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.rendered(DOCS) == DOCS, "docs/block-types.md is out of date: run scripts/generate_block_table.py"


def test_plan_canvas_names_the_function_the_template_declares_for_each_type() -> None:
    # Given the block functions as the loop declares them, and the prefix the state machine hands Plan Canvas
    resources = expand_for_each(DOCUMENT)["Resources"]
    prefix = STATE_MACHINE["DefinitionSubstitutions"]["BlockFunctionNamePrefix"]["Fn::Sub"]

    for block_type in BlockType:
        function = resources[f"{name_of(block_type.value)}BlockFunction"]["Properties"]
        # Then the name Plan Canvas gives a block's function is the one its FunctionName says
        named = function["FunctionName"]["Fn::Sub"].replace("${AWS::StackName}", STACK)
        assert block_function_name(block_type.value, prefix.replace("${AWS::StackName}", STACK)) == named


def test_the_state_machine_needs_nothing_per_block_type() -> None:
    # Given the state machine's substitutions and policies, and every resource that names its role
    substitutions = STATE_MACHINE["DefinitionSubstitutions"]
    statements = [s for p in STATE_MACHINE["Policies"] if isinstance(p, dict) for s in p.get("Statement", [])]
    (run_blocks,) = [s for s in statements if s.get("Sid") == "RunBlocks"]
    role_policies = [
        lid
        for lid, r in expand_for_each(DOCUMENT)["Resources"].items()
        if (r.get("Properties") or {}).get("RoleName") == {"Ref": "RunCanvasStateMachineRole"}
    ]

    # Then no substitution and no policy of its role names a block type's function
    assert not [key for key, value in substitutions.items() if "BlockFunction" in str(value)]
    assert role_policies == []
    # And its one right to run blocks covers each block function's name, and no other function of the stack
    arn = "arn:aws:lambda:us-east-1:123456789012:function:"
    pattern = run_blocks["Resource"]["Fn::Sub"].replace("${AWS::StackName}", STACK)
    pattern = pattern.replace("arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:", arn)
    assert run_blocks["Action"] == "lambda:InvokeFunction"
    for block_type in BlockType:
        assert fnmatch.fnmatchcase(arn + block_function_name(block_type.value, f"{STACK}_"), pattern)
    # CloudFormation names the others <stack>-<logical id>-<suffix>; another stack's names begin with its own name
    assert not fnmatch.fnmatchcase(f"{arn}{STACK}-PlanCanvasFunction-1A2B3C", pattern)
    assert not fnmatch.fnmatchcase(f"{arn}{STACK}-dev_PromptBlockFunction", pattern)
    assert not fnmatch.fnmatchcase(f"{arn}{STACK}_PromptBlockFunction:live", pattern)


def test_a_type_the_deployment_does_not_know_has_no_function() -> None:
    from canvas_core.orchestration import RunStateError

    with pytest.raises(RunStateError, match="no function for the no-such-block block type"):
        block_function_name("no-such-block", f"{STACK}_")
