"""template.yaml keeps the contract of docs/architecture.md: functions, folders, routes, tables, policies, logs."""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]

BLOCK_TYPES = [
    "prompt", "table", "web", "web_research", "file", "yt", "memo", "text", "document", "presentation",
    "excel", "app", "image", "landing_page", "list", "deep_research", "prototype",
]  # fmt: skip

API_FUNCTIONS = {
    "CreateRunFunction": ("functions/api/create_run", "POST", "/v1/run"),
    "GetRunFunction": ("functions/api/get_run", "GET", "/v1/run/{run_id}"),
    # An extension of the contract (docs/api.md).
    "ListRunsFunction": ("functions/api/list_runs", "GET", "/v1/runs"),
    "GetCanvasDagFunction": ("functions/api/get_canvas_dag", "GET", "/v1/canvas/{canvas_id}/dag"),
    "GetCanvasTasksFunction": ("functions/api/get_canvas_tasks", "GET", "/v1/canvas/{canvas_id}/tasks"),
    "GetCanvasTaskFunction": (
        "functions/api/get_canvas_task",
        "GET",
        "/v1/canvas/{canvas_id}/tasks/{task_id}",
    ),
}
ORCHESTRATION_FUNCTIONS = {
    "PlanCanvasFunction": "functions/orchestration/plan_canvas",
    "FinalizeRunFunction": "functions/orchestration/finalize_run",
    "FailBlockFunction": "functions/orchestration/fail_block",
    "WaitForInputsFunction": "functions/orchestration/wait_for_inputs",
    "ReleaseDependentsFunction": "functions/orchestration/release_dependents",
    "FailRunFunction": "functions/orchestration/fail_run",
}
BLOCK_FUNCTIONS = {
    "".join(part.capitalize() for part in block.split("_")) + "BlockFunction": f"functions/blocks/{block}_block"
    for block in BLOCK_TYPES
}
EXPECTED_CODE = {name: code for name, (code, _, _) in API_FUNCTIONS.items()} | ORCHESTRATION_FUNCTIONS | BLOCK_FUNCTIONS

TABLES = {
    "AccountsTable": ("ACCOUNTS_TABLE_NAME", [("account_id", "HASH")]),
    "ApiKeysTable": ("API_KEYS_TABLE_NAME", [("key_hash", "HASH")]),
    "RunsTable": ("RUNS_TABLE_NAME", [("run_id", "HASH")]),
    "CanvasesTable": ("CANVASES_TABLE_NAME", [("canvas_id", "HASH"), ("item_id", "RANGE")]),
    "TasksTable": ("TASKS_TABLE_NAME", [("canvas_id", "HASH"), ("task_id", "RANGE")]),
}


def load_template() -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location("check_asl", ROOT / "scripts" / "check_asl.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load_template(ROOT / "template.yaml")


TEMPLATE = load_template()
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]
FUNCTIONS = {name: r for name, r in RESOURCES.items() if r["Type"] == "AWS::Serverless::Function"}
GLOBAL_FUNCTION = TEMPLATE["Globals"]["Function"]


def code_folder(function: dict[str, Any]) -> str:
    return function["Properties"]["CodeUri"].rstrip("/")


def defines_handler(app: Path) -> bool:
    """True when the module defines `handler` at top level (a def, or an assignment such as a factory)."""
    for node in ast.parse(app.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "handler":
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == "handler" for t in targets):
            return True
    return False


def test_the_functions_are_exactly_those_of_the_architecture() -> None:
    # Then each logical id of docs/architecture.md is there, with its folder, and nothing else
    assert {name: code_folder(f) for name, f in FUNCTIONS.items()} == EXPECTED_CODE


def test_there_are_17_block_functions() -> None:
    blocks = [name for name, f in FUNCTIONS.items() if code_folder(f).startswith("functions/blocks/")]

    assert len(blocks) == 17
    assert set(blocks) == set(BLOCK_FUNCTIONS)


@pytest.mark.parametrize("name", sorted(EXPECTED_CODE))
def test_each_function_folder_has_an_app_py_defining_handler(name: str) -> None:
    # Given the folder the template deploys for this function
    app = ROOT / code_folder(FUNCTIONS[name]) / "app.py"

    # Then it holds app.py with the handler that `Handler: app.handler` names
    assert app.is_file(), f"{name}: {app.relative_to(ROOT)} is missing"
    assert defines_handler(app), f"{name}: {app.relative_to(ROOT)} defines no `handler`"


def test_every_function_folder_is_declared_in_the_template() -> None:
    # Given every folder under functions/<group>/
    folders = {
        str(path.relative_to(ROOT))
        for path in ROOT.glob("functions/*/*")
        if path.is_dir() and not path.name.startswith((".", "__"))
    }

    # Then each is the code of a function of the template
    assert folders - {code_folder(f) for f in FUNCTIONS.values()} == set()


def test_every_function_uses_app_handler_and_the_shared_layer() -> None:
    assert GLOBAL_FUNCTION["Handler"] == "app.handler"
    assert GLOBAL_FUNCTION["Runtime"] == "python3.13"
    assert GLOBAL_FUNCTION["Layers"] == [{"Ref": "SharedLayer"}]
    for name, function in FUNCTIONS.items():
        properties = function["Properties"]
        assert properties.get("Handler", "app.handler") == "app.handler", name
        assert "Layers" not in properties, f"{name} overrides the shared layer"


def test_the_api_routes_are_the_five_of_the_spec_and_the_runs_listing() -> None:
    # Given every Api event of every function
    routes = {}
    for name, function in FUNCTIONS.items():
        for event in (function["Properties"].get("Events") or {}).values():
            if event["Type"] == "Api":
                assert event["Properties"]["RestApiId"] == {"Ref": "CanvasApi"}, name
                key = (event["Properties"]["Method"].upper(), event["Properties"]["Path"])
                assert key not in routes, f"{key} is routed twice"
                routes[key] = name

    # Then they are the five routes and GET /v1/runs, each to its own function
    assert routes == {(method, path): name for name, (_, method, path) in API_FUNCTIONS.items()}


def test_no_policy_grants_full_access() -> None:
    assert "FullAccess" not in json.dumps(TEMPLATE)


def test_every_function_logs_to_its_own_log_group_with_retention() -> None:
    log_groups = []
    for name, function in FUNCTIONS.items():
        # Given the log group the function writes to
        reference = function["Properties"].get("LoggingConfig", {}).get("LogGroup")
        assert isinstance(reference, dict) and "Ref" in reference, f"{name} has no LoggingConfig.LogGroup"
        log_group = RESOURCES[reference["Ref"]]

        # Then it is a log group of this template that expires its events
        assert log_group["Type"] == "AWS::Logs::LogGroup", name
        assert log_group["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}, name
        log_groups.append(reference["Ref"])
    assert len(set(log_groups)) == len(FUNCTIONS)


@pytest.mark.parametrize("table", sorted(TABLES))
def test_tables_have_the_documented_keys_and_environment_variable(table: str) -> None:
    env_var, keys = TABLES[table]
    properties = RESOURCES[table]["Properties"]

    assert RESOURCES[table]["Type"] == "AWS::DynamoDB::Table"
    assert [(k["AttributeName"], k["KeyType"]) for k in properties["KeySchema"]] == keys
    assert properties["BillingMode"] == "PAY_PER_REQUEST"
    assert properties["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert RESOURCES[table]["DeletionPolicy"] == "Retain"
    assert GLOBAL_FUNCTION["Environment"]["Variables"][env_var] == {"Ref": table}


def test_runs_can_be_listed_by_account_on_an_attribute_every_run_carries() -> None:
    from canvas_core.adapters.store import RUNS_BY_ACCOUNT_INDEX
    from canvas_core.models.items import RunItem, RunSummaryItem

    properties = RESOURCES["RunsTable"]["Properties"]
    [index] = properties["GlobalSecondaryIndexes"]
    types = {a["AttributeName"]: a["AttributeType"] for a in properties["AttributeDefinitions"]}

    # Then the index the store queries is keyed by account and creation time, both required fields of a run
    assert index["IndexName"] == RUNS_BY_ACCOUNT_INDEX
    keys = [(k["AttributeName"], k["KeyType"]) for k in index["KeySchema"]]
    assert keys == [("account_id", "HASH"), ("created_at_ms", "RANGE")]
    assert (types["account_id"], types["created_at_ms"]) == ("S", "N")
    assert {"account_id", "created_at_ms"} <= {n for n, f in RunItem.model_fields.items() if f.is_required()}
    # And it projects every field a listed run is read with
    projected = {"run_id", "account_id", "created_at_ms", *index["Projection"]["NonKeyAttributes"]}
    assert index["Projection"]["ProjectionType"] == "INCLUDE"
    assert set(RunSummaryItem.model_fields) == projected


def test_the_documented_settings_reach_every_function() -> None:
    variables = GLOBAL_FUNCTION["Environment"]["Variables"]

    for name in [
        "ARTIFACTS_BUCKET_NAME",
        "MODEL_PROVIDER",
        "DOWNLOAD_URL_TTL_SECONDS",
        "MAX_PROMPT_CHARS",
        "POWERTOOLS_SERVICE_NAME",
        "POWERTOOLS_LOG_LEVEL",
    ]:
        assert name in variables, name
    assert variables["ARTIFACTS_BUCKET_NAME"] == {"Ref": "ArtifactsBucket"}
    create_run_variables = FUNCTIONS["CreateRunFunction"]["Properties"]["Environment"]["Variables"]
    assert create_run_variables["STATE_MACHINE_ARN"] == {"Ref": "RunCanvasStateMachine"}


def test_the_concurrent_run_limit_reaches_only_the_function_that_admits_runs() -> None:
    # Given the parameter and the functions whose environment names it
    parameter = TEMPLATE["Parameters"]["MaxConcurrentRunsPerAccount"]
    readers = [
        name
        for name, function in FUNCTIONS.items()
        if "MAX_CONCURRENT_RUNS" in ((function["Properties"].get("Environment") or {}).get("Variables") or {})
    ]

    # Then it defaults to 10, at least 1, and only CreateRunFunction reads it
    assert (parameter["Type"], parameter["Default"], parameter["MinValue"]) == ("Number", 10, 1)
    assert "MAX_CONCURRENT_RUNS" not in GLOBAL_FUNCTION["Environment"]["Variables"]
    assert readers == ["CreateRunFunction"]
    variables = FUNCTIONS["CreateRunFunction"]["Properties"]["Environment"]["Variables"]
    assert variables["MAX_CONCURRENT_RUNS"] == {"Ref": "MaxConcurrentRunsPerAccount"}


def test_the_state_machine_may_invoke_exactly_the_functions_it_names() -> None:
    # Given the state machine's substitutions and its invoke policies
    properties = RESOURCES["RunCanvasStateMachine"]["Properties"]
    substituted = {value["Fn::GetAtt"][0] for value in properties["DefinitionSubstitutions"].values()}
    invokable = {
        policy["LambdaInvokePolicy"]["FunctionName"]["Ref"]
        for policy in properties["Policies"]
        if isinstance(policy, dict) and "LambdaInvokePolicy" in policy
    }

    # Then each function of the definition can be invoked, and no other
    assert substituted == invokable == set(ORCHESTRATION_FUNCTIONS) | set(BLOCK_FUNCTIONS)


def test_the_artifacts_bucket_is_private_encrypted_and_tls_only() -> None:
    properties = RESOURCES["ArtifactsBucket"]["Properties"]
    statements = RESOURCES["ArtifactsBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"]

    assert all(properties["PublicAccessBlockConfiguration"].values())
    assert len(properties["PublicAccessBlockConfiguration"]) == 4
    assert properties["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in statements
    )
