"""Read template.yaml as SAM would deploy it, for the embedded stack: tables, bucket, state machines with
their `DefinitionSubstitutions` filled, functions (code, handler, environment) and their API routes.

Physical names are local and predictable: a table is named after its logical id, a bucket after its
logical id in kebab case, a function after its logical id with a fake ARN, a state machine after its
logical id with the ARN moto gives it, a queue after its logical id.

Resource `Condition`s are evaluated over the parameters (defaults and overrides): a resource whose condition
is false is left out, as CloudFormation leaves it out. What the embedded stack does not stand in for, a `Ref`
or `Fn::GetAtt` of a resource it does not create or an intrinsic function it does not know, is refused with
`UnsupportedTemplateError` naming the resource and the construct, never guessed at.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from canvas_local.events import EventRule
from canvas_local.lambda_runtime import (
    ACCOUNT_ID,
    DEFAULT_CONCURRENCY,
    REGION,
    Handler,
    LocalFunction,
    function_arn,
    function_name_of,
)

STACK_NAME = "canvas-local"
_MODULE_SERIALS = itertools.count(1)
_NO_VALUE = object()
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_.:]+)\}")


class TemplateError(ValueError):
    """template.yaml holds something the embedded stack cannot stand in for."""


class UnsupportedTemplateError(TemplateError):
    """template.yaml uses a construct the embedded stack does not handle: a Ref or Fn::GetAtt of a resource it
    does not create, or an intrinsic function it does not evaluate."""


# ---------------------------------------------------------------- YAML with CloudFormation tags


class CfnLoader(yaml.SafeLoader):
    """A SafeLoader that reads `!Ref X` as `{"Ref": "X"}`, `!GetAtt A.B` as `{"Fn::GetAtt": ["A", "B"]}`,
    and every other `!Tag` as `{"Fn::Tag": ...}`, the long form CloudFormation itself uses."""


def _construct_cfn_tag(loader: CfnLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix in ("Ref", "Condition"):
        return {suffix: value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


CfnLoader.add_multi_constructor("!", _construct_cfn_tag)


def load_yaml(path: Path) -> dict[str, Any]:
    with open(path, encoding="utf-8") as handle:
        # CfnLoader is a SafeLoader: no arbitrary objects
        template: dict[str, Any] = yaml.load(handle, Loader=CfnLoader)
    return template


# ---------------------------------------------------------------- AWS::LanguageExtensions: Fn::ForEach

FOR_EACH_PREFIX = "Fn::ForEach::"
_FOR_EACH_MAX_DEPTH = 5  # CloudFormation's limit on nested loops
_FOR_EACH_SECTIONS = ("Conditions", "Resources", "Outputs")


def expand_for_each(document: dict[str, Any], parameters: dict[str, str] | None = None) -> dict[str, Any]:
    """The template with its `Fn::ForEach::<Loop>` entries expanded as the AWS::LanguageExtensions transform does.

    A loop is `[Identifier, Collection, {OutputKey: OutputValue, ...}]` at the top of Conditions, Resources or
    Outputs, in a resource's Properties, or in another loop's body (five levels at most). For each item of the
    collection (a list, or a `Ref` to a CommaDelimitedList parameter) the body is copied with `${Identifier}`
    replaced by the item and `&{Identifier}` by the item without its non-alphanumeric characters, in every key
    and string, and `{"Ref": Identifier}` replaced by the item. A generated key that already exists is an
    error, as is an identifier or loop name that is also a parameter's name. A template without loops comes
    back unchanged (the same object)."""
    if not _has_for_each(document):
        return document
    declared = document.get("Parameters") or {}
    values = {name: str(spec.get("Default", "")) for name, spec in declared.items() if isinstance(spec, dict)}
    values.update(parameters or {})
    expanded = dict(document)
    for section in _FOR_EACH_SECTIONS:
        if isinstance(document.get(section), dict):
            expanded[section] = _expand_section(document[section], values, set(declared), [], section)
    for logical_id, resource in (expanded.get("Resources") or {}).items():
        if isinstance(resource, dict) and isinstance(resource.get("Properties"), dict):
            properties = resource["Properties"]
            if any(key.startswith(FOR_EACH_PREFIX) for key in properties):
                where = f"Resources/{logical_id}/Properties"
                expanded["Resources"][logical_id] = {
                    **resource,
                    "Properties": _expand_section(properties, values, set(declared), [], where),
                }
    return expanded


def _has_for_each(value: Any) -> bool:
    if isinstance(value, dict):
        return any(isinstance(k, str) and k.startswith(FOR_EACH_PREFIX) for k in value) or any(
            _has_for_each(v) for v in value.values()
        )
    if isinstance(value, list):
        return any(_has_for_each(v) for v in value)
    return False


def _expand_section(
    section: dict[str, Any], values: dict[str, str], parameter_names: set[str], outer: list[str], where: str
) -> dict[str, Any]:
    """A mapping with each of its loops replaced by what the loop generates (inner loops first)."""
    result: dict[str, Any] = {}
    for key, value in section.items():
        generated = _expand_loop(key, value, values, parameter_names, outer, where) if _is_loop(key) else {key: value}
        for name, entry in generated.items():
            if name in result:
                raise TemplateError(f"{where}: Fn::ForEach generates {name}, which is already defined")
            result[name] = entry
    return result


def _is_loop(key: Any) -> bool:
    return isinstance(key, str) and key.startswith(FOR_EACH_PREFIX)


def _expand_loop(
    key: str, value: Any, values: dict[str, str], parameter_names: set[str], outer: list[str], where: str
) -> dict[str, Any]:
    name = key[len(FOR_EACH_PREFIX) :]
    if not isinstance(value, list) or len(value) != 3 or not isinstance(value[2], dict):
        raise TemplateError(f"{where}/{key}: layout is incorrect (needs [Identifier, Collection, {{body}}])")
    identifier, collection, body = value
    if not isinstance(identifier, str) or not identifier:
        raise TemplateError(f"{where}/{key}: the identifier must be a non-empty string")
    if len(outer) + 1 > _FOR_EACH_MAX_DEPTH:
        raise TemplateError(f"{where}/{key}: Fn::ForEach nests more than {_FOR_EACH_MAX_DEPTH} levels")
    for taken, what in ((identifier, "identifier"), (name, "loop name")):
        if taken in parameter_names:
            raise TemplateError(f"{where}/{key}: the {what} {taken} is also a parameter's name")
    if identifier in outer:
        raise TemplateError(f"{where}/{key}: the identifier {identifier} is also an enclosing loop's")
    items = _collection(collection, values, f"{where}/{key}")
    generated: dict[str, Any] = {}
    for item in items:
        copy = _substitute_identifier(body, identifier, item)
        for entry, definition in _expand_section(copy, values, parameter_names, [*outer, identifier], where).items():
            if entry in generated:
                raise TemplateError(f"{where}/{key}: Fn::ForEach generates {entry} twice")
            generated[entry] = definition
    return generated


def _collection(collection: Any, values: dict[str, str], where: str) -> list[str]:
    if isinstance(collection, dict) and set(collection) == {"Ref"} and collection["Ref"] in values:
        text = values[collection["Ref"]]
        return [item.strip() for item in text.split(",")] if text else []
    if not isinstance(collection, list):
        raise TemplateError(f"{where}: the collection must be a list or a Ref to a CommaDelimitedList parameter")
    items = []
    for item in collection:
        if isinstance(item, bool):
            items.append("true" if item else "false")
        elif isinstance(item, str | int | float):
            items.append(str(item))
        else:
            raise TemplateError(f"{where}: collection items must be strings, not {item!r}")
    return items


def _substitute_identifier(value: Any, identifier: str, item: str) -> Any:
    if isinstance(value, str):
        return value.replace("${" + identifier + "}", item).replace(
            "&{" + identifier + "}", re.sub(r"[^A-Za-z0-9]", "", item)
        )
    if isinstance(value, dict):
        if value == {"Ref": identifier}:
            return item
        return {
            _substitute_identifier(k, identifier, item): _substitute_identifier(v, identifier, item)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_substitute_identifier(v, identifier, item) for v in value]
    return value


# ---------------------------------------------------------------- Fn::If, for checks of the template

_CONDITION_SECTIONS_SKIPPED = ("Parameters", "Conditions")


def resolve_conditions(document: dict[str, Any], parameters: dict[str, str] | None = None) -> dict[str, Any]:
    """The template with each `Fn::If` replaced by the branch its condition takes for the parameters (defaults
    and overrides), and `AWS::NoValue` dropped: the properties a stack deployed with those parameters gets, for
    checkov, which cannot evaluate `Fn::If` and passes a property that is only sometimes there. Resources keep
    their `Condition` (checked whether or not they are created) and every other intrinsic is kept. A condition
    that reads something other than parameters and literals is refused."""
    values = {
        name: str(spec.get("Default", ""))
        for name, spec in (document.get("Parameters") or {}).items()
        if isinstance(spec, dict)
    }
    values.update(parameters or {})
    conditions = document.get("Conditions") or {}

    def operand(value: Any) -> str:
        if isinstance(value, dict) and set(value) == {"Ref"} and value["Ref"] in values:
            return values[value["Ref"]]
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str | int | float):
            return str(value)
        raise UnsupportedTemplateError(f"a condition reads {value!r}: only parameters and literals are evaluated")

    def truth(expression: Any) -> bool:
        if isinstance(expression, dict) and len(expression) == 1:
            ((name, arg),) = expression.items()
            if name == "Condition":
                return condition(arg)
            if name == "Fn::Equals":
                return operand(arg[0]) == operand(arg[1])
            if name == "Fn::Not":
                return not truth(arg[0])
            if name == "Fn::And":
                return all(truth(item) for item in arg)
            if name == "Fn::Or":
                return any(truth(item) for item in arg)
        raise UnsupportedTemplateError(f"condition {expression!r} is not evaluated")

    def condition(name: str) -> bool:
        if name not in conditions:
            raise TemplateError(f"unknown condition {name}")
        return truth(conditions[name])

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            if set(value) == {"Fn::If"}:
                name, when_true, when_false = value["Fn::If"]
                return walk(when_true if condition(name) else when_false)
            if value == {"Ref": "AWS::NoValue"}:
                return _NO_VALUE
            resolved = {key: walk(item) for key, item in value.items()}
            return {key: item for key, item in resolved.items() if item is not _NO_VALUE}
        if isinstance(value, list):
            return [item for item in (walk(v) for v in value) if item is not _NO_VALUE]
        return value

    return {
        section: content if section in _CONDITION_SECTIONS_SKIPPED else walk(content)
        for section, content in document.items()
    }


# ---------------------------------------------------------------- what the stack creates


@dataclass(frozen=True)
class TableSpec:
    logical_id: str
    create_table: dict[str, Any]  # keyword arguments of DynamoDB CreateTable
    ttl_attribute: str | None = None

    @property
    def name(self) -> str:
        name: str = self.create_table["TableName"]
        return name


@dataclass(frozen=True)
class StateMachineSpec:
    logical_id: str
    definition: str  # the ASL text with DefinitionSubstitutions applied
    type: str = "STANDARD"

    @property
    def name(self) -> str:
        return self.logical_id

    @property
    def arn(self) -> str:
        return state_machine_arn(self.logical_id)

    def caught_by_name(self) -> dict[str, frozenset[str]]:
        """For each function a Task invokes, the errors a Catch of that Task names by their own name (not
        `States.*`): outcomes the workflow branches on by design (ReviewRequested parks a run for review)."""
        caught: dict[str, set[str]] = {}

        def walk(states: dict[str, Any]) -> None:
            for state in states.values():
                function = (state.get("Parameters") or {}).get("FunctionName")
                if isinstance(function, str):
                    names = {
                        error
                        for catcher in state.get("Catch") or ()
                        for error in catcher.get("ErrorEquals") or ()
                        if not error.startswith("States.")
                    }
                    if names:
                        caught.setdefault(function_name_of(function), set()).update(names)
                for nested in (state.get("ItemProcessor"), state.get("Iterator"), *(state.get("Branches") or ())):
                    if isinstance(nested, dict):
                        walk(nested.get("States") or {})

        walk(json.loads(self.definition).get("States") or {})
        return {function: frozenset(names) for function, names in caught.items()}


@dataclass(frozen=True)
class ApiRoute:
    method: str  # upper case; "ANY" matches every method
    path: str  # the resource path, e.g. /v1/run/{run_id}
    function: str  # logical id


@dataclass(frozen=True)
class FunctionSpec:
    logical_id: str
    code_dir: Path
    handler: str  # module.attribute, e.g. app.handler
    timeout_seconds: int
    memory_mb: int
    environment: dict[str, str] = field(default_factory=dict)
    routes: tuple[ApiRoute, ...] = ()
    # The name its template entry gives it (FunctionName), which it is invoked by besides its logical id.
    function_name: str | None = None

    def load_handler(self) -> Handler:
        """Import the handler's file as a module of its own: every handler file is called app.py, and each
        execution environment imports it afresh (its own resolver and globals, as on Lambda)."""
        module_path, attribute = self.handler.rsplit(".", 1)
        source = self.code_dir / (module_path.replace(".", "/") + ".py")
        module_name = f"canvas_fn_{self.logical_id}_{next(_MODULE_SERIALS)}"
        spec = importlib.util.spec_from_file_location(module_name, source)
        if spec is None or spec.loader is None or not source.is_file():
            raise TemplateError(f"{self.logical_id}: no handler file {source}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
        handler: Callable[[Any, Any], Any] = getattr(module, attribute)
        return handler

    def local_function(
        self, concurrency: int = DEFAULT_CONCURRENCY, environment: dict[str, str] | None = None
    ) -> LocalFunction:
        """The function, its settings read from `environment` (by default the one its template entry gives it)."""
        return LocalFunction(
            self.logical_id,
            self.load_handler,
            timeout_seconds=self.timeout_seconds,
            memory_mb=self.memory_mb,
            concurrency=concurrency,
            environment=self.environment if environment is None else environment,
        )


def state_machine_arn(name: str) -> str:
    return f"arn:aws:states:{REGION}:{ACCOUNT_ID}:stateMachine:{name}"


def bucket_name(logical_id: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", logical_id).lower()


def _named_after_logical_id(logical_id: str) -> str:
    return logical_id


# What `Ref` gives for each resource type the stack creates (canvas_core takes a queue's name for its URL); a
# function's is its name (Template.function_name).
_REF_VALUES: dict[str, Callable[[str], str]] = {
    "AWS::DynamoDB::Table": _named_after_logical_id,
    "AWS::Serverless::SimpleTable": _named_after_logical_id,
    "AWS::S3::Bucket": bucket_name,
    "AWS::Serverless::StateMachine": state_machine_arn,
    "AWS::StepFunctions::StateMachine": state_machine_arn,
    "AWS::SQS::Queue": _named_after_logical_id,
}

# What `Fn::GetAtt` gives for each (resource type, attribute) the stack creates; a function's Arn is its name's.
_ATTRIBUTE_VALUES: dict[tuple[str, str], Callable[[str], str]] = {
    ("AWS::DynamoDB::Table", "Arn"): lambda lid: f"arn:aws:dynamodb:{REGION}:{ACCOUNT_ID}:table/{lid}",
    ("AWS::Serverless::SimpleTable", "Arn"): lambda lid: f"arn:aws:dynamodb:{REGION}:{ACCOUNT_ID}:table/{lid}",
    ("AWS::S3::Bucket", "Arn"): lambda lid: f"arn:aws:s3:::{bucket_name(lid)}",
    ("AWS::Serverless::StateMachine", "Arn"): state_machine_arn,
    ("AWS::Serverless::StateMachine", "Name"): _named_after_logical_id,
    ("AWS::StepFunctions::StateMachine", "Arn"): state_machine_arn,
    ("AWS::StepFunctions::StateMachine", "Name"): _named_after_logical_id,
    ("AWS::SQS::Queue", "Arn"): lambda lid: f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{lid}",
    ("AWS::SQS::Queue", "QueueName"): _named_after_logical_id,
    # A role whose credentials the stack vends with a session policy (canvas_local/scopes.py); the role itself is
    # not made: its session policies are what the stack enforces.
    ("AWS::IAM::Role", "Arn"): lambda lid: f"arn:aws:iam::{ACCOUNT_ID}:role/{lid}",
}


# ---------------------------------------------------------------- what the embedded stack stands in for

# Each resource type the stack builds: the properties it reads, then those it leaves to AWS because they change
# nothing a run on one machine can see (permissions, encryption, logs, tracing, names, retention of versions).
_SERVERLESS_FUNCTION = (
    {"CodeUri", "Handler", "Timeout", "MemorySize", "Environment", "Events", "FunctionName"},
    {
        "Runtime",
        "Architectures",
        "Description",
        "Layers",
        "Policies",
        "LoggingConfig",
        "Tracing",
        "Tags",
        "PropagateTags",
        "ReservedConcurrentExecutions",
        "EventInvokeConfig",
    },
)
BUILT: dict[str, tuple[set[str], set[str]]] = {
    "AWS::Serverless::Function": _SERVERLESS_FUNCTION,
    "AWS::DynamoDB::Table": (
        {
            "KeySchema",
            "AttributeDefinitions",
            "GlobalSecondaryIndexes",
            "LocalSecondaryIndexes",
            "TimeToLiveSpecification",
        },
        {"BillingMode", "PointInTimeRecoverySpecification", "SSESpecification", "TableName", "Tags"},
    ),
    "AWS::Serverless::SimpleTable": ({"PrimaryKey"}, {"SSESpecification", "TableName", "Tags"}),
    "AWS::S3::Bucket": (
        {"LifecycleConfiguration"},
        {"BucketEncryption", "OwnershipControls", "PublicAccessBlockConfiguration", "VersioningConfiguration", "Tags"},
    ),
    "AWS::SQS::Queue": (
        {
            "VisibilityTimeout",
            "MessageRetentionPeriod",
            "DelaySeconds",
            "ReceiveMessageWaitTimeSeconds",
            "RedrivePolicy",
        },
        {"SqsManagedSseEnabled", "KmsMasterKeyId", "Tags"},
    ),
    "AWS::Events::Rule": ({"EventPattern", "Targets", "EventBusName"}, {"Description", "State", "Name"}),
    "AWS::Serverless::StateMachine": (
        {"DefinitionUri", "Definition", "DefinitionSubstitutions", "Type"},
        {"Logging", "Policies", "Role", "Tags", "Tracing", "Name"},
    ),
    "AWS::StepFunctions::StateMachine": (
        {"DefinitionString", "Definition", "DefinitionSubstitutions", "StateMachineType"},
        {"LoggingConfiguration", "RoleArn", "Tags", "TracingConfiguration", "StateMachineName"},
    ),
    "AWS::Serverless::Api": (
        {"BinaryMediaTypes", "StageName"},
        {
            "AccessLogSetting",
            "Description",
            "EndpointConfiguration",
            "GatewayResponses",
            "MethodSettings",
            "Name",
            "OpenApiVersion",
            "TracingEnabled",
            "Tags",
        },
    ),
    # The functions run on the project's own environment, which holds what every layer ships.
    "AWS::Serverless::LayerVersion": (
        set(),
        {
            "ContentUri",
            "CompatibleArchitectures",
            "CompatibleRuntimes",
            "Description",
            "LayerName",
            "RetentionPolicy",
            "LicenseInfo",
        },
    ),
}
# Resource types the stack has no use for on one machine, each for its reason.
LEFT_TO_AWS = {
    "AWS::CloudWatch::Alarm": "alarms watch metrics, which the stack does not publish",
    "AWS::SNS::Topic": "the alarms' topic",
    "AWS::SNS::Subscription": "the alarms' subscriptions",
    "AWS::Logs::LogGroup": "functions log to the console or --log-file",
    "AWS::IAM::ManagedPolicy": "permissions: every function may call every local service",
    "AWS::IAM::Policy": "permissions",
    "AWS::IAM::RolePolicy": "permissions",
    "AWS::IAM::Role": "permissions (a role's session policies are enforced: canvas_local/scopes.py)",
    "AWS::S3::BucketPolicy": "permissions",
    "AWS::SQS::QueuePolicy": "permissions",
    "AWS::ApiGateway::Account": "API Gateway's logging role",
    "AWS::SecretsManager::Secret": "secrets: the local providers read keys from the environment",
    "AWS::CloudFormation::WaitConditionHandle": "a placeholder for CloudFormation",
}
# Each event type of a function the stack delivers: the properties it reads, then those it leaves to AWS.
EVENTS: dict[str, tuple[set[str], set[str]]] = {
    "Api": ({"Method", "Path"}, {"RestApiId"}),
    "EventBridgeRule": ({"Pattern"}, {"DeadLetterConfig", "RetryPolicy", "EventBusName", "RuleName", "Target"}),
    "SQS": ({"Queue", "BatchSize", "FunctionResponseTypes"}, {"Enabled", "MaximumBatchingWindowInSeconds"}),
}


def check_supported(resources: dict[str, dict[str, Any]], globals_: dict[str, Any]) -> None:
    """UnsupportedTemplateError naming the first resource type, property or event the stack neither builds nor
    knowingly leaves to AWS: a template that grows one must say here what the stack does with it."""
    for key in globals_.get("Function") or {}:
        _check_property("Globals Function", "AWS::Serverless::Function", key)
    for logical_id, resource in resources.items():
        kind = resource.get("Type")
        if kind in LEFT_TO_AWS:
            continue
        if kind not in BUILT:
            raise UnsupportedTemplateError(
                f"resource '{logical_id}': type {kind} is not supported by the embedded stack (canvas_local/"
                "template.py: BUILT says what it builds of a type, LEFT_TO_AWS what it has no use for)"
            )
        properties = resource.get("Properties") or {}
        for key in properties:
            _check_property(f"resource '{logical_id}'", kind, key)
        if kind == "AWS::Serverless::Function":
            for name, event in (properties.get("Events") or {}).items():
                _check_event(logical_id, name, event)


def _check_property(where: str, kind: str, key: str) -> None:
    reads, left = BUILT[kind]
    if key not in reads and key not in left:
        raise UnsupportedTemplateError(
            f"{where}: property {key} of {kind} is not supported by the embedded stack (canvas_local/template.py: "
            "BUILT lists the properties it reads and those it leaves to AWS)"
        )


def _check_event(logical_id: str, name: str, event: dict[str, Any]) -> None:
    kind = event.get("Type")
    if kind not in EVENTS:
        raise UnsupportedTemplateError(
            f"resource '{logical_id}': event '{name}' of type {kind} is not supported by the embedded stack "
            "(canvas_local/template.py: EVENTS)"
        )
    reads, left = EVENTS[kind]
    for key in event.get("Properties") or {}:
        if key not in reads and key not in left:
            raise UnsupportedTemplateError(
                f"resource '{logical_id}': property {key} of its {kind} event '{name}' is not supported by the "
                "embedded stack (canvas_local/template.py: EVENTS)"
            )


# ---------------------------------------------------------------- the template


class Template:
    def __init__(self, path: Path | str, parameter_overrides: dict[str, str] | None = None):
        self.path = Path(path).resolve()
        self.base_dir = self.path.parent
        document = load_yaml(self.path)
        self.parameters = {
            name: str(spec.get("Default", "")) for name, spec in (document.get("Parameters") or {}).items()
        }
        self.parameters.update(parameter_overrides or {})
        self.document = expand_for_each(document, self.parameters)
        self.globals: dict[str, Any] = self.document.get("Globals") or {}
        # Conditions read parameters only: no resource is known while they are evaluated.
        self.resources: dict[str, dict[str, Any]] = {}
        self.left_out: dict[str, str] = {}  # logical id -> the condition that is false
        for logical_id, resource in (self.document.get("Resources") or {}).items():
            condition = resource.get("Condition")
            if condition is None:
                self.resources[logical_id] = resource
            elif not isinstance(condition, str):
                raise TemplateError(f"resource '{logical_id}': Condition must be a condition's name")
            elif self._resource_condition(logical_id, condition):
                self.resources[logical_id] = resource
            else:
                self.left_out[logical_id] = condition
        check_supported(self.resources, self.globals)

    def of_type(self, *types: str) -> dict[str, dict[str, Any]]:
        return {lid: res for lid, res in self.resources.items() if res.get("Type") in types}

    def properties(self, logical_id: str) -> dict[str, Any]:
        return self.resources[logical_id].get("Properties") or {}

    # -------------------------------------------------- resources

    def tables(self) -> list[TableSpec]:
        specs = [
            _dynamodb_table(lid, self.resolve(self.properties(lid))) for lid in self.of_type("AWS::DynamoDB::Table")
        ]
        specs += [
            _simple_table(lid, self.resolve(self.properties(lid)))
            for lid in self.of_type("AWS::Serverless::SimpleTable")
        ]
        return specs

    def buckets(self) -> list[str]:
        return [bucket_name(lid) for lid in self.of_type("AWS::S3::Bucket")]

    def state_machines(self) -> list[StateMachineSpec]:
        return [
            self._state_machine(lid)
            for lid in self.of_type("AWS::Serverless::StateMachine", "AWS::StepFunctions::StateMachine")
        ]

    def _state_machine(self, logical_id: str) -> StateMachineSpec:
        props = self.properties(logical_id)
        substitutions = self.resolve(props.get("DefinitionSubstitutions") or {})
        if "DefinitionUri" in props:
            uri = props["DefinitionUri"]
            if not isinstance(uri, str):
                raise TemplateError(f"{logical_id}: DefinitionUri must be a local path")
            text = (self.base_dir / uri).read_text(encoding="utf-8")
        elif "Definition" in props:
            text = json.dumps(self.resolve(props["Definition"]))
        elif "DefinitionString" in props:
            text = self.resolve(props["DefinitionString"])
        else:
            raise TemplateError(f"{logical_id}: no Definition, DefinitionUri or DefinitionString")
        return StateMachineSpec(
            logical_id, substitute(text, substitutions, logical_id), str(props.get("Type", "STANDARD"))
        )

    def functions(self) -> list[FunctionSpec]:
        return [self._function(lid) for lid in self.of_type("AWS::Serverless::Function")]

    def _function(self, logical_id: str) -> FunctionSpec:
        props = {**(self.globals.get("Function") or {}), **self.properties(logical_id)}
        # A mapping may give the folder (Fn::FindInMap), as for functions declared in an Fn::ForEach.
        code_uri = self.resolve(props.get("CodeUri"))
        if not isinstance(code_uri, str):
            raise TemplateError(f"{logical_id}: CodeUri must be a local folder")
        return FunctionSpec(
            logical_id=logical_id,
            code_dir=(self.base_dir / code_uri).resolve(),
            handler=str(props.get("Handler", "app.handler")),
            timeout_seconds=int(self.resolve(props.get("Timeout", 3))),
            memory_mb=int(self.resolve(props.get("MemorySize", 128))),
            environment=self.function_environment(logical_id),
            routes=tuple(self._routes(logical_id)),
            function_name=self.function_name(logical_id) if "FunctionName" in props else None,
        )

    def role_policies(self) -> dict[str, list[dict[str, Any]]]:
        """The policy documents of each role of the template, by the role's ARN, resolved."""
        return {
            self.get_att(lid, "Arn"): [
                self.resolve(p["PolicyDocument"]) for p in resource.get("Properties", {}).get("Policies", [])
            ]
            for lid, resource in self.of_type("AWS::IAM::Role").items()
        }

    def function_name(self, logical_id: str) -> str:
        """What Lambda names a function: the FunctionName its template entry gives it, else its logical id (the
        stack's stand-in for the name CloudFormation would make up)."""
        name = self.properties(logical_id).get("FunctionName")
        return logical_id if name is None else str(self.resolve(name))

    def function_environment(self, logical_id: str) -> dict[str, str]:
        variables = {
            **((self.globals.get("Function") or {}).get("Environment") or {}).get("Variables", {}),
            **(self.properties(logical_id).get("Environment") or {}).get("Variables", {}),
        }
        return {name: _env_value(value) for name, value in self.resolve(variables).items()}

    def _routes(self, logical_id: str) -> list[ApiRoute]:
        events = self.properties(logical_id).get("Events") or {}
        return [
            ApiRoute(str(event["Properties"]["Method"]).upper(), str(event["Properties"]["Path"]), logical_id)
            for event in events.values()
            if event.get("Type") == "Api"
        ]

    def event_rules(self) -> list[EventRule]:
        """The functions' EventBridge rules (SAM `EventBridgeRule` events), patterns resolved."""
        return [
            EventRule(lid, self.resolve(event["Properties"]["Pattern"]))
            for lid in self.of_type("AWS::Serverless::Function")
            for event in (self.properties(lid).get("Events") or {}).values()
            if event.get("Type") == "EventBridgeRule"
        ]

    def routes(self) -> list[ApiRoute]:
        return [route for lid in self.of_type("AWS::Serverless::Function") for route in self._routes(lid)]

    def binary_media_types(self) -> list[str]:
        """API Gateway escapes "/" as "~1" in BinaryMediaTypes."""
        apis = [self.properties(lid) for lid in self.of_type("AWS::Serverless::Api")]
        apis.append(self.globals.get("Api") or {})
        types = [self.resolve(t) for api in apis for t in api.get("BinaryMediaTypes") or []]
        return sorted({str(t).replace("~1", "/") for t in types})

    def stage_name(self) -> str:
        for lid in self.of_type("AWS::Serverless::Api"):
            if "StageName" in self.properties(lid):
                return str(self.resolve(self.properties(lid)["StageName"]))
        return str(self.resolve((self.globals.get("Api") or {}).get("StageName", "Prod")))

    # -------------------------------------------------- intrinsic functions

    def resolve(self, value: Any) -> Any:
        """Evaluate intrinsic functions with local physical names; `AWS::NoValue` drops the key or item."""
        if isinstance(value, dict):
            if len(value) == 1:
                ((key, arg),) = value.items()
                if key == "Ref" or key.startswith("Fn::") or key == "Condition":
                    return self._intrinsic(key, arg)
            resolved = {k: self.resolve(v) for k, v in value.items()}
            return {k: v for k, v in resolved.items() if v is not _NO_VALUE}
        if isinstance(value, list):
            return [item for item in (self.resolve(v) for v in value) if item is not _NO_VALUE]
        return value

    def _intrinsic(self, name: str, arg: Any) -> Any:
        functions: dict[str, Callable[[Any], Any]] = {
            "Ref": lambda a: self.ref(self.resolve(a)),
            "Fn::GetAtt": lambda a: self.get_att(*self.resolve(a)),
            "Fn::Sub": self._sub,
            "Fn::Join": lambda a: str(self.resolve(a[0])).join(str(v) for v in self.resolve(a[1])),
            "Fn::Select": lambda a: self.resolve(a[1])[int(self.resolve(a[0]))],
            "Fn::Split": lambda a: str(self.resolve(a[1])).split(self.resolve(a[0])),
            "Fn::If": lambda a: self.resolve(a[1] if self.condition(a[0]) else a[2]),
            "Fn::Equals": lambda a: str(self.resolve(a[0])) == str(self.resolve(a[1])),
            "Fn::Not": lambda a: not self._truth(a[0]),
            "Fn::And": lambda a: all(self._truth(c) for c in a),
            "Fn::Or": lambda a: any(self._truth(c) for c in a),
            "Condition": self.condition,
            "Fn::FindInMap": self._find_in_map,
            # AWS::LanguageExtensions
            "Fn::ToJsonString": lambda a: json.dumps(self.resolve(a), separators=(",", ":")),
            "Fn::Length": lambda a: len(self.resolve(a)),
        }
        if name not in functions:
            raise UnsupportedTemplateError(f"intrinsic function {name} is not supported by the embedded stack")
        return functions[name](arg)

    def _find_in_map(self, arg: list[Any]) -> Any:
        """Fn::FindInMap, with the DefaultValue AWS::LanguageExtensions allows as a fourth argument."""
        keys = [self.resolve(key) for key in arg[:3]]
        try:
            return self.document["Mappings"][keys[0]][keys[1]][keys[2]]
        except (KeyError, TypeError):
            if len(arg) == 4 and isinstance(arg[3], dict) and "DefaultValue" in arg[3]:
                return self.resolve(arg[3]["DefaultValue"])
            raise TemplateError(f"Fn::FindInMap finds nothing at {keys}") from None

    def _truth(self, value: Any) -> bool:
        return bool(self.resolve(value))

    def condition(self, name: str) -> bool:
        conditions = self.document.get("Conditions") or {}
        if name not in conditions:
            raise TemplateError(f"unknown condition {name}")
        return self._truth(conditions[name])

    def _resource_condition(self, logical_id: str, name: str) -> bool:
        try:
            return self.condition(name)
        except TemplateError as exc:
            raise type(exc)(f"Condition '{name}' on resource '{logical_id}': {exc}") from exc

    def ref(self, name: str) -> Any:
        pseudo = {
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT_ID,
            "AWS::StackName": STACK_NAME,
            "AWS::StackId": f"arn:aws:cloudformation:{REGION}:{ACCOUNT_ID}:stack/{STACK_NAME}/local",
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::NoValue": _NO_VALUE,
        }
        if name in pseudo:
            return pseudo[name]
        if name in self.parameters:
            return self.parameters[name]
        if name.startswith("AWS::"):
            raise UnsupportedTemplateError(f"Ref to pseudo parameter {name} is not supported by the embedded stack")
        kind = self._resource_type(name, f"Ref to '{name}'")
        if kind == "AWS::Serverless::Function":
            return self.function_name(name)
        if kind not in _REF_VALUES:
            raise UnsupportedTemplateError(
                f"Ref to {kind} resource '{name}' is not supported by the embedded stack (it does not create one)"
            )
        return _REF_VALUES[kind](name)

    def get_att(self, logical_id: str, attribute: str) -> Any:
        kind = self._resource_type(logical_id, f"Fn::GetAtt {logical_id}.{attribute}")
        if (kind, attribute) == ("AWS::Serverless::Function", "Arn"):
            return function_arn(self.function_name(logical_id))
        if (kind, attribute) not in _ATTRIBUTE_VALUES:
            raise UnsupportedTemplateError(
                f"Fn::GetAtt {logical_id}.{attribute} of {kind} resource '{logical_id}' is not supported by the "
                "embedded stack"
            )
        return _ATTRIBUTE_VALUES[(kind, attribute)](logical_id)

    def _resource_type(self, logical_id: str, construct: str) -> str:
        if logical_id in self.left_out:
            raise TemplateError(
                f"{construct}: resource '{logical_id}' is left out (its Condition '{self.left_out[logical_id]}' "
                "is false)"
            )
        kind = self.resources.get(logical_id, {}).get("Type")
        if not isinstance(kind, str):
            raise TemplateError(f"{construct}: no resource or parameter '{logical_id}'")
        return kind

    def _sub(self, arg: Any) -> str:
        text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], self.resolve(arg[1]))

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in variables:
                return str(variables[name])
            if "." in name and not name.startswith("AWS::"):
                return str(self.get_att(*name.split(".", 1)))
            return str(self.ref(name))

        # "${!Literal}" is CloudFormation's escape for a literal "${Literal}".
        return _PLACEHOLDER.sub(replace, text).replace("${!", "${")


def substitute(text: str, substitutions: dict[str, Any], owner: str) -> str:
    """Fill `${Name}` as DefinitionSubstitutions do; a placeholder left unfilled would fail at run time."""
    for key, value in substitutions.items():
        text = text.replace("${" + key + "}", json.dumps(str(value))[1:-1])
    missing = sorted(set(_PLACEHOLDER.findall(text)))
    if missing:
        raise TemplateError(f"{owner}: no DefinitionSubstitutions for {', '.join(missing)}")
    return text


def _env_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _dynamodb_table(logical_id: str, props: dict[str, Any]) -> TableSpec:
    kwargs: dict[str, Any] = {
        "TableName": logical_id,
        "KeySchema": props["KeySchema"],
        "AttributeDefinitions": props["AttributeDefinitions"],
        "BillingMode": "PAY_PER_REQUEST",
    }
    for kind in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
        if props.get(kind):
            kwargs[kind] = [_index(index) for index in props[kind]]
    ttl = props.get("TimeToLiveSpecification") or {}
    enabled = ttl.get("Enabled") in (True, "true", "True")
    return TableSpec(logical_id, kwargs, ttl.get("AttributeName") if enabled else None)


def _index(index: dict[str, Any]) -> dict[str, Any]:
    # On demand: an index's ProvisionedThroughput would be rejected.
    return {key: index[key] for key in ("IndexName", "KeySchema", "Projection") if key in index}


def _simple_table(logical_id: str, props: dict[str, Any]) -> TableSpec:
    key = props.get("PrimaryKey") or {"Name": "id", "Type": "String"}
    kind = {"String": "S", "Number": "N", "Binary": "B"}[key.get("Type", "String")]
    return TableSpec(
        logical_id,
        {
            "TableName": logical_id,
            "KeySchema": [{"AttributeName": key["Name"], "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": key["Name"], "AttributeType": kind}],
            "BillingMode": "PAY_PER_REQUEST",
        },
    )


def main(argv: list[str] | None = None) -> None:
    """`python -m canvas_local.template [TEMPLATE]`: the template with its Fn::ForEach loops expanded and each
    Fn::If resolved for the parameters' defaults, as JSON (what checkov scans in `make infra-check`, since it does
    neither itself)."""
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0] if args else "template.yaml")
    json.dump(resolve_conditions(expand_for_each(load_yaml(path))), sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
