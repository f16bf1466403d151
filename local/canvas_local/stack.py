"""The embedded stack's lifecycle: moto's server for DynamoDB, S3 and Step Functions, the resources of
template.yaml created in it, Lambda tasks and API routes dispatched to the handlers in this process, and
accounts seeded with API keys. `canvas serve` runs one; e2e and state machine tests use it directly."""

from __future__ import annotations

import importlib
import logging
import os
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import boto3
from moto.server import ThreadedMotoServer

from canvas_local import moto_patch
from canvas_local.events import ExecutionWatcher
from canvas_local.frontdoor import FrontDoor
from canvas_local.lambda_runtime import REGION, LocalFunction
from canvas_local.template import FunctionSpec, Template, TemplateError

LOG = logging.getLogger(__name__)

DEFAULT_TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"
PROVIDERS = ("offline", "bedrock", "openai")


def seed_account(api_key: str) -> str:
    """Create an account holding `api_key`; returns the account id."""
    from canvas_core.auth import create_account_with_key  # the tables must exist first

    account_id, _ = create_account_with_key(api_key=api_key)
    return account_id


def seed_generated_account() -> tuple[str, str]:
    """Create an account with a key canvas_core generates; returns (account_id, api_key)."""
    from canvas_core.auth import create_account_with_key

    return create_account_with_key()


OPERATOR_PREFIXES = ("OPENAI_", "SEARCH_", "WEB_", "YOUTUBE_", "DEEP_RESEARCH_", "ZIP_", "IMAGE_")
OPERATOR_NAMES = frozenset(
    {"MODEL_RETRY_BACKOFF_SECONDS", "BLOCK_TIMEOUT_SECONDS", "DOWNLOAD_URL_TTL_SECONDS", "MAX_PROMPT_CHARS"}
)


def is_operator_setting(name: str) -> bool:
    return name.startswith(OPERATOR_PREFIXES) or name.endswith("_MODEL_ID") or name in OPERATOR_NAMES


class LocalStack:
    """`with LocalStack(api_keys=["sk_canvas_test"]) as stack:` serves the API on `stack.base_url`.

    One at a time per process: moto's backends, its config and the environment are process-wide.
    """

    def __init__(
        self,
        template: Path | str = DEFAULT_TEMPLATE,
        *,
        api_keys: list[str] | tuple[str, ...] = (),
        generate_key: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
        provider: str = "offline",
        parameter_overrides: dict[str, str] | None = None,
    ):
        if provider not in PROVIDERS:
            raise ValueError(f"provider must be one of {', '.join(PROVIDERS)}")
        self.template = Template(template, parameter_overrides)
        self.host = host
        self.port = port
        self.provider = provider
        self.requested_keys = list(api_keys)
        self.generate_key = generate_key

        self.accounts: dict[str, str] = {}  # api key -> account id
        self.generated_key: str | None = None
        self.functions: dict[str, LocalFunction] = {}
        self.table_names: dict[str, str] = {}  # logical id -> table name
        self.bucket_names: list[str] = []
        self.state_machine_arns: dict[str, str] = {}  # logical id -> ARN
        self.environment: dict[str, str] = {}

        self._moto: ThreadedMotoServer | None = None
        self._front_door: FrontDoor | None = None
        self._watcher: ExecutionWatcher | None = None
        self._saved_environ: dict[str, str | None] = {}

    # -------------------------------------------------- what clients and tests need

    @property
    def endpoint_url(self) -> str:
        """moto's server: DynamoDB, S3 (presigned URLs point here) and Step Functions."""
        if self._moto is None:
            raise RuntimeError("the stack is not started")
        host, port = self._moto.get_host_and_port()
        return f"http://{host}:{port}"

    s3_url = endpoint_url

    @property
    def base_url(self) -> str:
        """The API, as API Gateway would serve it (without the stage prefix)."""
        if self._front_door is None:
            raise RuntimeError("the stack is not started")
        return self._front_door.url

    @property
    def api_keys(self) -> list[str]:
        return list(self.accounts)

    def client(self, service: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=self.endpoint_url,
            region_name=REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def wait_for_execution(self, execution_arn: str, timeout: float = 60) -> dict[str, Any]:
        """DescribeExecution once the execution has left RUNNING; TimeoutError if it has not in time."""
        sfn = self.client("stepfunctions")
        deadline = time.monotonic() + timeout
        while True:
            described = sfn.describe_execution(executionArn=execution_arn)
            if described["status"] != "RUNNING":
                return described
            if time.monotonic() > deadline:
                raise TimeoutError(f"{execution_arn} still RUNNING after {timeout}s")
            time.sleep(0.05)

    # -------------------------------------------------- lifecycle

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> Self:
        # Read the whole template before starting anything: a template error should cost nothing.
        specs = self.template.functions()
        state_machines = self.template.state_machines()
        try:
            self._start_moto()
            self._apply_environment(specs)
            self._provision(state_machines)
            self.functions = {spec.logical_id: spec.local_function() for spec in specs}
            moto_patch.install(self._resolve_function)
            moto_patch.install_item_level_transactions()
            self._seed_accounts()
            self._start_front_door()
            self._start_watcher()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        if self._front_door is not None:
            self._front_door.stop()
            self._front_door = None
        if self._moto is not None:
            self._stop_running_executions()
        moto_patch.uninstall(self._resolve_function)
        moto_patch.uninstall_item_level_transactions()
        if self._moto is not None:
            moto_patch.disable_state_machine_execution(self.endpoint_url)
            moto_patch.reset_backends(self.endpoint_url)
            self._moto.stop()
            self._moto = None
        self._restore_environment()

    def _start_watcher(self) -> None:
        """EventBridge's part: each execution that ends reaches the rules of template.yaml that match it."""
        self._watcher = ExecutionWatcher(
            self.client("stepfunctions"),
            list(self.state_machine_arns.values()),
            self.template.event_rules(),
            lambda function, event: self.functions[function].invoke(event),
        )
        self._watcher.start()

    def _resolve_function(self, name: str) -> LocalFunction | None:
        return self.functions.get(name)

    def _start_moto(self) -> None:
        # Port 0: the OS picks a free port, so a busy 5000 (moto's default) does not matter.
        self._moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._moto.start()
        # moto's backends are process-wide: start from nothing whatever ran before in this process.
        moto_patch.reset_backends(self.endpoint_url)
        moto_patch.enable_state_machine_execution(self.endpoint_url)

    def _apply_environment(self, specs: list[FunctionSpec]) -> None:
        """One process runs every function, so their variables merge into one environment."""
        merged: dict[str, str] = {}
        for spec in specs:
            for name, value in spec.environment.items():
                if merged.setdefault(name, value) != value:
                    LOG.warning(
                        "%s: %s=%r differs from another function's %r; keeping the first",
                        spec.logical_id,
                        name,
                        value,
                        merged[name],
                    )
        merged.setdefault("POWERTOOLS_METRICS_NAMESPACE", "CanvasRunService")
        # Settings an operator gives in the environment (a model endpoint, model ids, a search provider) win
        # over the template's defaults; names of tables, the bucket and AWS endpoints stay the stack's own.
        merged.update({name: value for name, value in os.environ.items() if is_operator_setting(name)})
        merged.update(
            {
                "MODEL_PROVIDER": self.provider,
                "POWERTOOLS_TRACE_DISABLED": "true",
                "AWS_ENDPOINT_URL": self.endpoint_url,
                "AWS_DEFAULT_REGION": REGION,
                "AWS_REGION": REGION,
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                # moto's interpreter calls other services' integrations (e.g. dynamodb:putItem) on this port.
                "MOTO_PORT": str(self._moto.get_host_and_port()[1]) if self._moto else "5000",
            }
        )
        if self.provider == "bedrock":
            # Bedrock is the one service that is real: its own endpoint, and the caller's credentials (moto
            # accepts any, so they stay in the environment for every client).
            merged["AWS_ENDPOINT_URL_BEDROCK_RUNTIME"] = f"https://bedrock-runtime.{REGION}.amazonaws.com"
            for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
                if os.environ.get(name):
                    merged[name] = os.environ[name]
        for name, value in merged.items():
            self._saved_environ.setdefault(name, os.environ.get(name))
            os.environ[name] = value
        if self.provider != "bedrock":
            # A real session token would be sent along with the dummy keys.
            self._saved_environ.setdefault("AWS_SESSION_TOKEN", os.environ.pop("AWS_SESSION_TOKEN", None))
        self.environment = merged
        _forget_cached_clients()

    def _restore_environment(self) -> None:
        for name, value in self._saved_environ.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved_environ = {}
        _forget_cached_clients()

    def _provision(self, state_machines: list) -> None:
        dynamodb, s3, sfn = self.client("dynamodb"), self.client("s3"), self.client("stepfunctions")
        for table in self.template.tables():
            dynamodb.create_table(**table.create_table)
            if table.ttl_attribute:
                dynamodb.update_time_to_live(
                    TableName=table.name,
                    TimeToLiveSpecification={"Enabled": True, "AttributeName": table.ttl_attribute},
                )
            self.table_names[table.logical_id] = table.name
        for bucket in self.template.buckets():
            s3.create_bucket(Bucket=bucket)
            self.bucket_names.append(bucket)
        for machine in state_machines:
            arn = sfn.create_state_machine(
                name=machine.name,
                definition=machine.definition,
                roleArn=f"arn:aws:iam::123456789012:role/{machine.name}Role",
                type=machine.type,
            )["stateMachineArn"]
            if arn != machine.arn:
                raise TemplateError(f"moto named {machine.logical_id} {arn}, the environment says {machine.arn}")
            self.state_machine_arns[machine.logical_id] = arn

    def _seed_accounts(self) -> None:
        for key in self.requested_keys:
            self.accounts[key] = seed_account(key)
        if self.generate_key and not self.requested_keys:
            account_id, key = seed_generated_account()
            self.accounts[key] = account_id
            self.generated_key = key

    def _start_front_door(self) -> None:
        self._front_door = FrontDoor(
            routes=self.template.routes(),
            functions=self.functions,
            binary_media_types=self.template.binary_media_types(),
            stage=self.template.stage_name(),
            host=self.host,
            port=self.port,
        )
        self._front_door.start()

    def _stop_running_executions(self) -> None:
        """Executions run on moto's threads and would call handlers after the stack is gone."""
        sfn = self.client("stepfunctions")
        for arn in self.state_machine_arns.values():
            running = sfn.list_executions(stateMachineArn=arn, statusFilter="RUNNING")["executions"]
            for execution in running:
                sfn.stop_execution(executionArn=execution["executionArn"], cause="The embedded stack stopped")


def _forget_cached_clients() -> None:
    """canvas_core builds clients and settings once per container; a new stack is a new container."""
    try:
        aws = importlib.import_module("canvas_core.adapters.aws")
        config = importlib.import_module("canvas_core.config")
    except ImportError:
        return
    aws.reset_clients()
    config.get_settings.cache_clear()
