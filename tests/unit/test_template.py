"""template.yaml keeps the contract of docs/architecture.md: functions, folders, routes, tables, policies, logs."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

from canvas_core.errors import ServiceBusyError
from canvas_core.models.catalog import BlockType
from canvas_local.template import expand_for_each, load_yaml, resolve_conditions

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]

# One block function per BlockType (tests/unit/test_template_blocks.py checks each type's places).
BLOCK_TYPES = [t.value.removesuffix("-block").replace("-", "_") for t in BlockType]

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
    # Extensions of the contract (docs/api.md).
    "GetAccountFunction": ("functions/api/account", "GET", "/v1/account"),
    "ApproveRunFunction": ("functions/api/approve_run", "POST", "/v1/run/{run_id}/approve"),
    "CancelRunFunction": ("functions/api/cancel_run", "POST", "/v1/run/{run_id}/cancel"),
    "RerunFunction": (
        "functions/api/rerun",
        "POST",
        "/v1/canvas/{canvas_id}/blocks/{block_id}/rerun",
    ),
}
# Functions that answer several routes: their folder, and each (method, path).
ROUTED_FUNCTIONS = {
    "ApiKeysFunction": (
        "functions/api/api_keys",
        [("GET", "/v1/api_keys"), ("POST", "/v1/api_keys"), ("DELETE", "/v1/api_keys/{key_id}")],
    ),
    # The developer portal and the canvas viewer (docs/portal.md).
    "PortalFunction": (
        "functions/portal",
        [("GET", "/portal"), ("ANY", "/portal/{proxy+}"), ("GET", "/runs/{run_id}")],
    ),
    # The remote MCP endpoint (docs/mcp.md): POST carries the JSON-RPC messages; GET and DELETE answer 405.
    "McpFunction": ("functions/api/mcp", [("POST", "/mcp"), ("GET", "/mcp"), ("DELETE", "/mcp")]),
    # Webhook endpoints (docs/webhooks.md).
    "WebhookEndpointsFunction": (
        "functions/api/webhook_endpoints",
        [
            ("POST", "/v1/webhook_endpoints"),
            ("GET", "/v1/webhook_endpoints"),
            ("DELETE", "/v1/webhook_endpoints/{endpoint_id}"),
            ("POST", "/v1/webhook_endpoints/{endpoint_id}/rotate_secret"),
            ("POST", "/v1/webhook_endpoints/{endpoint_id}/ping"),
            ("GET", "/v1/webhook_endpoints/{endpoint_id}/deliveries"),
        ],
    ),
}
# Functions no route reaches, with their trigger's kind.
QUEUE_FUNCTIONS = {"DeliverWebhooksFunction": "functions/webhooks/deliver_webhooks"}
ORCHESTRATION_FUNCTIONS = {
    "PlanCanvasFunction": "functions/orchestration/plan_canvas",
    "FinalizeRunFunction": "functions/orchestration/finalize_run",
    "WaitForInputsFunction": "functions/orchestration/wait_for_inputs",
    "ReleaseDependentsFunction": "functions/orchestration/release_dependents",
    "FailRunFunction": "functions/orchestration/fail_run",
    "BlockScopeFunction": "functions/orchestration/block_scope",
}
BLOCK_FUNCTIONS = {
    "".join(part.capitalize() for part in block.split("_")) + "BlockFunction": f"functions/blocks/{block}_block"
    for block in BLOCK_TYPES
}
EXPECTED_CODE = (
    {name: code for name, (code, _, _) in API_FUNCTIONS.items()}
    | {name: code for name, (code, _) in ROUTED_FUNCTIONS.items()}
    | ORCHESTRATION_FUNCTIONS
    | BLOCK_FUNCTIONS
    | QUEUE_FUNCTIONS
)

TABLES = {
    "AccountsTable": ("ACCOUNTS_TABLE_NAME", [("account_id", "HASH")]),
    "ApiKeysTable": ("API_KEYS_TABLE_NAME", [("key_hash", "HASH")]),
    "RunsTable": ("RUNS_TABLE_NAME", [("run_id", "HASH")]),
    "CanvasesTable": ("CANVASES_TABLE_NAME", [("canvas_id", "HASH"), ("item_id", "RANGE")]),
    "TasksTable": ("TASKS_TABLE_NAME", [("canvas_id", "HASH"), ("task_id", "RANGE")]),
    "WebhookEndpointsTable": ("WEBHOOK_ENDPOINTS_TABLE_NAME", [("endpoint_id", "HASH")]),
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


def given(function: str) -> dict[str, Any]:
    """The variables a function is given: Globals', then its own."""
    own = (FUNCTIONS[function]["Properties"].get("Environment") or {}).get("Variables") or {}
    return {**GLOBAL_FUNCTION["Environment"]["Variables"], **own}


def code_folder(function: dict[str, Any]) -> str:
    code_uri = function["Properties"]["CodeUri"]
    if isinstance(code_uri, dict):  # a block function's folder, from the BlockFunctions mapping
        mapping, key, attribute = code_uri["Fn::FindInMap"]
        code_uri = TEMPLATE["Mappings"][mapping][key][attribute]
    return code_uri.rstrip("/")


def referenced(value: Any) -> str | None:
    """The logical id a `Ref` (or, in an Fn::ForEach body, a `!Sub "${Name}"`) names."""
    if isinstance(value, dict) and "Ref" in value:
        return value["Ref"]
    if isinstance(value, dict) and isinstance(value.get("Fn::Sub"), str):
        match = re.fullmatch(r"\$\{([A-Za-z0-9]+)\}", value["Fn::Sub"])
        return match.group(1) if match else None
    return None


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


def test_there_is_a_block_function_per_block_type() -> None:
    blocks = [name for name, f in FUNCTIONS.items() if code_folder(f).startswith("functions/blocks/")]

    assert len(blocks) == len(BlockType)
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
        # SAM appends a function's own layers to Globals': only the block functions add one, DuckDB's
        expected = [{"Ref": "DuckDbLayer"}] if name.endswith("BlockFunction") else None
        assert properties.get("Layers") == expected, name


def test_duckdb_ships_once_in_its_layer_not_in_a_function_package() -> None:
    # Given every function's requirements
    functions = sorted((ROOT / "functions").glob("*/*/requirements.txt"))
    # Then none asks for DuckDB: the block functions get it from DuckDbLayer
    assert functions and not [p for p in functions if "duckdb" in p.read_text(encoding="utf-8").lower()]
    assert "duckdb" in (ROOT / "layers" / "duckdb" / "requirements.txt").read_text(encoding="utf-8")


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

    # Then they are the five routes and the extensions, each to its own function
    expected = {(method, path): name for name, (_, method, path) in API_FUNCTIONS.items()}
    expected |= {route: name for name, (_, routes) in ROUTED_FUNCTIONS.items() for route in routes}
    assert routes == expected


def test_a_path_no_route_answers_is_the_contracts_404_not_api_gateways_403() -> None:
    # Given API Gateway's answer when no route matches a path (/v1/runs/x/y) or its method
    responses = RESOURCES["CanvasApi"]["Properties"]["GatewayResponses"]
    missing_route = responses["MISSING_AUTHENTICATION_TOKEN"]

    # Then it is a 404 in the contract's error shape, as JSON, instead of 403 "Missing Authentication Token"
    assert missing_route["StatusCode"] == "404"
    assert missing_route["ResponseParameters"]["Headers"]["Content-Type"] == "'application/json'"
    body = missing_route["ResponseTemplates"]["application/json"]
    filled = json.loads(body.replace("$context.httpMethod", "GET").replace("$context.path", "/api/v1/runs/x/y"))
    assert filled == {"success": False, "error": "Not found: GET /api/v1/runs/x/y"}
    # And no route relies on API Gateway's own authorization, which the same response would answer
    template = json.dumps(TEMPLATE)
    assert '"Authorizer"' not in template and '"ApiKeyRequired": true' not in template


def test_a_function_lambda_throttles_answers_the_contracts_busy_503_not_a_500() -> None:
    # Given API Gateway's answer when it cannot invoke a function (past its reserved concurrency Lambda throttles it)
    failure = RESOURCES["CanvasApi"]["Properties"]["GatewayResponses"]["INTEGRATION_FAILURE"]
    # Then it is the service's own busy answer: 503, Retry-After, the contract's error shape
    assert failure["StatusCode"] == "503"
    assert failure["ResponseParameters"]["Headers"]["Retry-After"] == "'1'"
    body = json.loads(failure["ResponseTemplates"]["application/json"])
    assert body == {"success": False, "error": ServiceBusyError().message}


def test_no_policy_grants_full_access() -> None:
    assert "FullAccess" not in json.dumps(TEMPLATE)


def test_every_function_logs_to_its_own_log_group_with_retention() -> None:
    log_groups = []
    for name, function in FUNCTIONS.items():
        # Given the log group the function writes to
        reference = referenced(function["Properties"].get("LoggingConfig", {}).get("LogGroup"))
        assert reference in RESOURCES, f"{name} has no LoggingConfig.LogGroup"
        log_group = RESOURCES[reference]

        # Then it is a log group of this template that expires its events
        assert log_group["Type"] == "AWS::Logs::LogGroup", name
        assert log_group["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}, name
        log_groups.append(reference)
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
    assert given("DeliverWebhooksFunction")[env_var] == {"Ref": table}


def test_portal_sessions_expire_by_ttl_and_keys_can_be_listed_by_account() -> None:
    from canvas_core.adapters.accounts import KEYS_BY_ACCOUNT_INDEX

    # Given the sessions table (disposable, as the idempotency records) and the keys table's indexes
    sessions = RESOURCES["PortalSessionsTable"]["Properties"]
    key_indexes = {i["IndexName"]: i for i in RESOURCES["ApiKeysTable"]["Properties"]["GlobalSecondaryIndexes"]}

    # Then sessions are found by their token's hash and deleted after `expires_at`, and keys by account
    assert [(k["AttributeName"], k["KeyType"]) for k in sessions["KeySchema"]] == [("session_hash", "HASH")]
    assert sessions["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert GLOBAL_FUNCTION["Environment"]["Variables"]["PORTAL_SESSIONS_TABLE_NAME"] == {"Ref": "PortalSessionsTable"}
    assert key_indexes[KEYS_BY_ACCOUNT_INDEX]["KeySchema"] == [{"AttributeName": "account_id", "KeyType": "HASH"}]


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
    # And it projects every field a listed run is read with but rerun_of, which the store reads from the page's run
    # items (a deployed index's projection cannot change in place: CloudFormation would have to replace it)
    projected = {"run_id", "account_id", "created_at_ms", *index["Projection"]["NonKeyAttributes"]}
    assert index["Projection"]["ProjectionType"] == "INCLUDE"
    assert set(RunSummaryItem.model_fields) == projected | {"rerun_of"}


def test_the_documented_settings_reach_the_functions_that_read_them() -> None:
    variables = GLOBAL_FUNCTION["Environment"]["Variables"]

    for name in (
        "ARTIFACTS_BUCKET_NAME",
        "DOWNLOAD_URL_TTL_SECONDS",
        "POWERTOOLS_SERVICE_NAME",
        "POWERTOOLS_LOG_LEVEL",
    ):
        assert name in variables, name
    assert variables["ARTIFACTS_BUCKET_NAME"] == {"Ref": "ArtifactsBucket"}
    for function in ("PlanCanvasFunction", "PromptBlockFunction"):
        assert given(function)["MODEL_PROVIDER"] == {"Ref": "ModelProvider"}, function
    assert given("CreateRunFunction")["MAX_PROMPT_CHARS"] == {"Ref": "MaxPromptChars"}
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

    # Then it defaults to 10, at least 1, and only the functions that admit runs read it (CreateRunFunction,
    # RerunFunction for re-runs, McpFunction for both as tools), besides the two that show an account its limits
    # (GET /v1/account and the portal)
    assert (parameter["Type"], parameter["Default"], parameter["MinValue"]) == ("Number", 10, 1)
    assert "MAX_CONCURRENT_RUNS" not in GLOBAL_FUNCTION["Environment"]["Variables"]
    assert sorted(readers) == [
        "CreateRunFunction",
        "GetAccountFunction",
        "McpFunction",
        "PortalFunction",
        "RerunFunction",
    ]
    variables = FUNCTIONS["CreateRunFunction"]["Properties"]["Environment"]["Variables"]
    assert variables["MAX_CONCURRENT_RUNS"] == {"Ref": "MaxConcurrentRunsPerAccount"}


def test_the_state_machine_may_invoke_exactly_the_functions_it_names() -> None:
    # Given the state machine's substitutions, its invoke policies and the policies attached to its role
    properties = RESOURCES["RunCanvasStateMachine"]["Properties"]
    named = re.findall(r"'Fn::GetAtt': \['(\w+)'|\$\{(\w+)\.Arn\}", str(properties["DefinitionSubstitutions"]))
    substituted = {get_att or sub for get_att, sub in named}
    invoke_policies = {
        policy["LambdaInvokePolicy"]["FunctionName"]["Ref"]
        for policy in properties["Policies"]
        if isinstance(policy, dict) and "LambdaInvokePolicy" in policy
    }
    role_policies = [
        name
        for name, r in RESOURCES.items()
        if r["Type"] in ("AWS::IAM::RolePolicy", "AWS::IAM::Policy")
        and {"Ref": "RunCanvasStateMachineRole"} in [r["Properties"].get("RoleName"), *r["Properties"].get("Roles", [])]
    ]

    # Then each orchestration function the definition names can be invoked, and no other, through the state
    # machine's own policies; the block functions, which the plan names, by their names (test_template_blocks.py)
    assert substituted == invoke_policies == set(ORCHESTRATION_FUNCTIONS)
    assert role_policies == []


def test_the_artifacts_bucket_is_private_encrypted_and_tls_only() -> None:
    properties = RESOURCES["ArtifactsBucket"]["Properties"]
    statements = RESOURCES["ArtifactsBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"]

    assert all(properties["PublicAccessBlockConfiguration"].values())
    assert len(properties["PublicAccessBlockConfiguration"]) == 4
    assert properties["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in statements
    )


def test_webhook_deliveries_run_off_a_queue_with_partial_batch_failures_and_an_alarmed_dead_letter_queue() -> None:
    # Given the delivery function's queue event, the queue, its dead-letter queue and the rule that fills it
    (event,) = FUNCTIONS["DeliverWebhooksFunction"]["Properties"]["Events"].values()
    queue = RESOURCES["WebhookQueue"]["Properties"]
    rule = RESOURCES["RunStatusChangedRule"]["Properties"]
    alarm = RESOURCES["WebhookDeadLetterQueueDepthAlarm"]["Properties"]

    # Then failed messages are reported one by one, both queues are encrypted, and the DLQ's depth is alarmed
    assert event["Type"] == "SQS"
    assert event["Properties"]["Queue"] == {"Fn::GetAtt": ["WebhookQueue", "Arn"]}
    assert event["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["WebhookDeadLetterQueue", "Arn"]}
    assert queue["SqsManagedSseEnabled"] and RESOURCES["WebhookDeadLetterQueue"]["Properties"]["SqsManagedSseEnabled"]
    # Lambda's SQS event source asks for a visibility timeout of at least six times the function's
    assert queue["VisibilityTimeout"] >= 6 * FUNCTIONS["DeliverWebhooksFunction"]["Properties"]["Timeout"]
    assert rule["EventPattern"] == {"source": ["canvas-run-service"], "detail-type": ["Run Status Changed"]}
    assert rule["Targets"][0]["Arn"] == {"Fn::GetAtt": ["WebhookQueue", "Arn"]}
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
    dlq_name = {"Fn::GetAtt": ["WebhookDeadLetterQueue", "QueueName"]}
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": dlq_name}]
    # And private addresses stay refused unless the operator opts in
    assert TEMPLATE["Parameters"]["WebhookAllowPrivateAddresses"]["Default"] == "false"
    variables = given("DeliverWebhooksFunction")
    assert variables["WEBHOOK_ALLOW_PRIVATE_ADDRESSES"] == {"Ref": "WebhookAllowPrivateAddresses"}


def test_every_parameter_is_documented_in_the_readme() -> None:
    # Given the README's configuration section
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    configuration = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]

    # Then each parameter of the template is named there
    missing = [name for name in TEMPLATE["Parameters"] if f"`{name}`" not in configuration]
    assert missing == []


def test_every_api_function_takes_the_reserved_concurrency_parameter() -> None:
    # Given the functions API Gateway invokes
    api_functions = [
        name
        for name, function in FUNCTIONS.items()
        if any(e["Type"] == "Api" for e in (function["Properties"].get("Events") or {}).values())
    ]

    # Then each reserves ApiReservedConcurrency executions when it is set (0: none)
    assert api_functions
    for name in api_functions:
        assert FUNCTIONS[name]["Properties"].get("ReservedConcurrentExecutions") == {
            "Fn::If": ["HasApiReservedConcurrency", {"Ref": "ApiReservedConcurrency"}, {"Ref": "AWS::NoValue"}]
        }, name


def test_api_functions_reserve_concurrency_by_default_within_the_documented_quota() -> None:
    # Given the functions API Gateway invokes, and the template as checkov reads it (Fn::If resolved)
    api_functions = [
        name
        for name, function in FUNCTIONS.items()
        if any(e["Type"] == "Api" for e in (function["Properties"].get("Events") or {}).values())
    ]
    resolved = resolve_conditions(expand_for_each(load_yaml(ROOT / "template.yaml")))["Resources"]
    default = int(TEMPLATE["Parameters"]["ApiReservedConcurrency"]["Default"])

    # Then a default deployment reserves executions for each of them
    assert default > 0
    assert [n for n in api_functions if "ReservedConcurrentExecutions" not in resolved[n]["Properties"]] == []
    # And the parameter and the docs give the count and the quota it needs (100 stay unreserved)
    stated = f"each of the {len(api_functions)} API functions"
    quota = f"at least {len(api_functions) * default + 100}"
    description = " ".join(TEMPLATE["Parameters"]["ApiReservedConcurrency"]["Description"].split())
    for where, text in (
        ("template.yaml", description),
        ("README.md", (ROOT / "README.md").read_text(encoding="utf-8")),
        ("docs/deploy.md", " ".join((ROOT / "docs" / "deploy.md").read_text(encoding="utf-8").split())),
    ):
        assert stated in text and quota in text, where


def test_runs_canvases_tasks_and_their_files_expire_after_the_retention() -> None:
    # Then the tables the store writes `expires_at` on expire by it
    for table in ("RunsTable", "CanvasesTable", "TasksTable"):
        ttl = RESOURCES[table]["Properties"]["TimeToLiveSpecification"]
        assert ttl == {"AttributeName": "expires_at", "Enabled": True}, table
    # And the bucket's uploads, artifacts and spilled outputs expire after the same DataRetentionDays
    rules = RESOURCES["ArtifactsBucket"]["Properties"]["LifecycleConfiguration"]["Rules"]
    expiring = {rule["Prefix"]: rule["ExpirationInDays"] for rule in rules if "Prefix" in rule}
    for prefix in ("uploads/", "artifacts/", "content/"):
        assert expiring[prefix] == {"Ref": "DataRetentionDays"}, prefix
    assert TEMPLATE["Parameters"]["DataRetentionDays"]["Default"] == 90
    assert GLOBAL_FUNCTION["Environment"]["Variables"]["DATA_RETENTION_DAYS"] == {"Ref": "DataRetentionDays"}


def test_fail_run_keeps_the_execution_endings_it_could_not_record() -> None:
    properties = FUNCTIONS["FailRunFunction"]["Properties"]
    event = properties["Events"]["ExecutionEnded"]["Properties"]

    # Then both EventBridge's undelivered events and the function's failed invocations reach the queue
    queue = {"Fn::GetAtt": ["FailRunDeadLetterQueue", "Arn"]}
    assert event["DeadLetterConfig"] == {"Arn": queue}
    assert event["RetryPolicy"]["MaximumRetryAttempts"] >= 1
    assert properties["EventInvokeConfig"]["DestinationConfig"]["OnFailure"] == {"Type": "SQS", "Destination": queue}
    # And an alarm watches the queue and the rule's failed invocations
    assert (
        RESOURCES["FailRunDeadLetterQueueDepthAlarm"]["Properties"]["MetricName"]
        == "ApproximateNumberOfMessagesVisible"
    )
    assert RESOURCES["FailRunRuleFailedInvocationsAlarm"]["Properties"]["MetricName"] == "FailedInvocations"
