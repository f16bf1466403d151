"""A block type is declared in one line of each of its places (docs/block-types.md, "Adding a block type"): its
member of BlockType and its entry in BLOCK_CATALOG (canvas_core/models/catalog.py, which the planner's catalogue,
personas and estimates read), its module in canvas_core/blocks, its folder in functions/blocks, its line in the
template's BlockFunctions mapping, its name in Fn::ForEach::BlockFunctions, its entry in the state machine's block
type -> function map, and its row in docs/block-types.md. These tests fail, naming the place, when one of them is
missing or disagrees."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest

from canvas_core.agents.personas import PERSONAS
from canvas_core.models.catalog import BLOCK_CATALOG, BlockType
from canvas_local.template import load_yaml

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = load_yaml(ROOT / "template.yaml")
MAPPING: dict[str, dict[str, str]] = DOCUMENT["Mappings"]["BlockFunctions"]
DOCS = (ROOT / "docs" / "block-types.md").read_text(encoding="utf-8")


def name_of(block_type: str) -> str:
    """`web-research-block` -> `WebResearch`: the key of its mapping line; its function is <Name>BlockFunction."""
    return "".join(part.capitalize() for part in block_type.removesuffix("-block").split("-"))


def folder_of(block_type: str) -> str:
    """`web-research-block` -> `functions/blocks/web_research_block`."""
    return "functions/blocks/" + block_type.replace("-", "_")


def module_of(block_type: str) -> Path:
    """`web-research-block` -> layers/shared/canvas_core/blocks/web_research.py."""
    return ROOT / "layers/shared/canvas_core/blocks" / (block_type.removesuffix("-block").replace("-", "_") + ".py")


def for_each_collection() -> list[Any]:
    _, collection, _ = DOCUMENT["Resources"]["Fn::ForEach::BlockFunctions"]
    return collection


def block_function_map() -> dict[str, str]:
    """The state machine's map, block type -> logical id of the function it names."""
    separator, entries = DOCUMENT["Resources"]["RunCanvasStateMachine"]["Properties"]["DefinitionSubstitutions"][
        "BlockFunctions"
    ]["Fn::Join"]
    assert separator == ","
    found = {}
    for entry in entries:
        match = re.fullmatch(r"([a-z-]+)=\$\{(\w+)\.Arn\}", entry["Fn::Sub"])
        assert match, f"unexpected entry {entry!r} in the BlockFunctions substitution"
        assert match.group(1) not in found, f"{match.group(1)} appears twice in the BlockFunctions substitution"
        found[match.group(1)] = match.group(2)
    return found


def test_the_mapping_has_one_line_per_block_type() -> None:
    # Then each BlockType has its line, and each line a BlockType
    assert sorted(MAPPING) == sorted(name_of(t) for t in BlockType)


def test_the_loop_declares_a_function_for_each_line_of_the_mapping() -> None:
    # Given the names Fn::ForEach::BlockFunctions iterates over
    names = for_each_collection()

    # Then they are the mapping's keys, once each
    assert isinstance(names, list), "Fn::ForEach::BlockFunctions iterates over a literal list"
    assert len(names) == len(set(names)), "a name appears twice in Fn::ForEach::BlockFunctions"
    assert sorted(names) == sorted(MAPPING)


@pytest.mark.parametrize("block_type", [t.value for t in BlockType])
def test_a_block_type_has_its_line_its_folder_and_its_module(block_type: str) -> None:
    # Given a block type
    name = name_of(block_type)

    # Then its mapping line deploys its folder, which holds the handler of that type, and its module is there
    assert MAPPING[name] == {"CodeUri": folder_of(block_type) + "/"}
    app = ROOT / folder_of(block_type) / "app.py"
    assert app.is_file(), f"{app.relative_to(ROOT)} is missing"
    assert f'make_block_handler("{block_type}")' in app.read_text(encoding="utf-8"), f"{app} runs another type"
    assert module_of(block_type).is_file(), f"{module_of(block_type).relative_to(ROOT)} is missing"
    # And its entry in the block catalogue, which the planner's catalogue, personas and estimates read
    spec = BLOCK_CATALOG.get(BlockType(block_type))
    assert spec is not None, f"{block_type} has no entry in BLOCK_CATALOG (canvas_core/models/catalog.py)"
    assert spec.persona in PERSONAS, f"{block_type}: its catalogue entry names no persona there is ({spec.persona})"
    assert (spec.title is None) == (spec.duty is None), f"{block_type}: a deliverable has a title and a duty"
    # And its row in docs/block-types.md's table of types, made from the catalogue
    assert f"| `{block_type}` |" in DOCS, f"docs/block-types.md's table has no row for {block_type}"


def test_the_docs_table_of_block_types_is_the_catalogues() -> None:
    spec = importlib.util.spec_from_file_location("generate_block_table", ROOT / "scripts/generate_block_table.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.rendered(DOCS) == DOCS, "docs/block-types.md is out of date: run scripts/generate_block_table.py"


def test_every_block_folder_belongs_to_a_block_type() -> None:
    # Given the folders under functions/blocks
    folders = {str(p.relative_to(ROOT)) for p in (ROOT / "functions/blocks").iterdir() if p.is_dir()}
    folders.discard("functions/blocks/__pycache__")

    # Then each is a block type's, named <type>_block
    assert sorted(folders) == sorted(folder_of(t.value) for t in BlockType)


def test_the_state_machine_maps_each_block_type_to_its_function() -> None:
    # Then Plan Canvas gets, for each BlockType, the function the loop declares for it
    assert block_function_map() == {t.value: f"{name_of(t.value)}BlockFunction" for t in BlockType}
