"""The embedded stack's lifecycle: moto's server for DynamoDB, S3 and Step Functions, the resources of
template.yaml created in it, Lambda tasks and API routes dispatched to the handlers in this process, and
accounts seeded with API keys. `canvas serve` runs one; e2e and state machine tests use it directly."""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import boto3
from moto.dynamodb.models import dynamodb_backends

from canvas_local import credentials, heap, iam_calls, moto_patch, priority
from canvas_local.credentials import StackCredentials
from canvas_local.defaults import DEFAULT_TEMPLATE, PROVIDERS
from canvas_local.downloads import DownloadLinks, signing_key
from canvas_local.environments import function_environment
from canvas_local.events import ExecutionWatcher
from canvas_local.faults import FaultInjector, Faults
from canvas_local.faults import from_environment as faults_from_environment
from canvas_local.frontdoor import FrontDoor
from canvas_local.lambda_runtime import ACCOUNT_ID, DEFAULT_CONCURRENCY, REGION, LocalFunction
from canvas_local.moto_server import MotoServer
from canvas_local.queues import QueuePollers
from canvas_local.retention import RetentionSweeper, expiration_rules
from canvas_local.scopes import SessionPolicies, moto_partition_key
from canvas_local.state_dir import StateDir, runs_left_running
from canvas_local.template import FunctionSpec, StateMachineSpec, Template, TemplateError, bucket_name

LOG = logging.getLogger(__name__)


def seed_account(api_key: str) -> str:
    """The account holding `api_key`: the one restored from a state directory, or a new one."""
    from canvas_core.auth import authenticate, create_account_with_key  # the tables must exist first
    from canvas_core.errors import ServiceError

    try:
        return authenticate({"x-api-key": api_key})
    except ServiceError:
        account_id, _ = create_account_with_key(api_key=api_key)
        return account_id


def seed_generated_account() -> tuple[str, str]:
    """Create an account with a key canvas_core generates; returns (account_id, api_key)."""
    from canvas_core.auth import create_account_with_key

    return create_account_with_key()


OPERATOR_PREFIXES = ("OPENAI_", "SEARCH_", "WEB_", "YOUTUBE_", "DEEP_RESEARCH_", "ZIP_", "IMAGE_")
OPERATOR_NAMES = frozenset(
    {"MODEL_RETRY_BACKOFF_SECONDS", "BLOCK_TIMEOUT_SECONDS", "DOWNLOAD_URL_TTL_SECONDS", "MAX_PROMPT_CHARS"}
    | {"WEBHOOK_ALLOW_PRIVATE_ADDRESSES", "WEBHOOK_RETRY_TIME_SCALE", "WEBHOOK_TIMEOUT_SECONDS"}
)


def is_operator_setting(name: str) -> bool:
    return name.startswith(OPERATOR_PREFIXES) or name.endswith("_MODEL_ID") or name in OPERATOR_NAMES


# Ended executions moto keeps (with their whole interpreter state and history) beyond those whose ending has not
# been delivered yet; older ones are forgotten (a run's outcome is in DynamoDB).
RETAINED_EXECUTIONS = 20
# How long `stop` lets runs in flight end through the state machine before ending them itself.
STOP_GRACE_SECONDS = 6
STOPPED_RUN_REASON = "The embedded stack stopped while this run was in flight"
# How long `stop` lets the webhook deliveries that are due (the stopped runs' endings among them) go out.
WEBHOOK_DRAIN_SECONDS = 3


@dataclass(frozen=True)
class RunEnd:
    """A run whose execution ended: its status and credits as its item holds them, the execution's duration."""

    run_id: str
    status: str
    duration_seconds: float | None
    credits: int


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
        function_concurrency: int = DEFAULT_CONCURRENCY,
        state_dir: Path | str | None = None,
        faults: Faults | None = None,
        retention_days: int | None = None,
        on_run_end: Callable[[RunEnd], None] | None = None,
        public_url: str | None = None,
    ):
        if provider not in PROVIDERS:
            raise ValueError(f"provider must be one of {', '.join(PROVIDERS)}")
        if retention_days is not None:
            # What the functions write as `expires_at` and what the lifecycle rules say: the sweep removes both.
            parameter_overrides = {**(parameter_overrides or {}), "DataRetentionDays": str(retention_days)}
        self.template = Template(template, parameter_overrides)
        self.function_concurrency = function_concurrency
        self.state_dir = Path(state_dir) if state_dir is not None else None
        self.host = host
        self.port = port
        self.provider = provider
        self.requested_keys = list(api_keys)
        self.generate_key = generate_key
        # AWS's failures to inject: as given, else as CANVAS_INJECT_FAULTS says (how `make test` runs the e2e tier).
        self.faults = faults if faults is not None else faults_from_environment(os.environ)
        # What was injected, once the stack has started with faults (canvas_local.faults).
        self.fault_injector: FaultInjector | None = None
        # Told of each run whose execution ended, once the rules on its ending have run (`canvas serve`'s console).
        self.on_run_end = on_run_end
        # Where clients reach the API when not at the address they sent (a proxy): what download links start with.
        self.public_url = public_url
        # The only credentials moto's port accepts (canvas_local.credentials), new at each start.
        self.credentials = StackCredentials.generate()
        # The download links: S3's presigned GETs, minted and served by the stack (canvas_local.downloads).
        self.downloads: DownloadLinks | None = None
        self._published: Path | None = None

        self.accounts: dict[str, str] = {}  # api key -> account id
        self.generated_key: str | None = None
        self.functions: dict[str, LocalFunction] = {}
        self._function_ids: dict[str, str] = {}  # a FunctionName -> the function's logical id
        self.table_names: dict[str, str] = {}  # logical id -> table name
        self.bucket_names: list[str] = []
        self.state_machine_arns: dict[str, str] = {}  # logical id -> ARN
        self.queue_urls: dict[str, str] = {}  # logical id -> URL
        self.environment: dict[str, str] = {}

        self._moto: MotoServer | None = None
        self._front_door: FrontDoor | None = None
        self._watcher: ExecutionWatcher | None = None
        self._sfn: Any = None  # the watcher's Step Functions client, which wait_for_execution shares
        self._queues: QueuePollers | None = None
        self._saved_environ: dict[str, str | None] = {}
        self._applied_environ: dict[str, str] = {}
        self._state: StateDir | None = None
        # Where moto's S3 keeps object bodies while the stack runs (moto_patch.install_disk_bodies).
        self._bodies: Path | None = None
        self._restored_items = False
        self._calls: iam_calls.CallHook | None = None
        # What DynamoDB's TTL and S3's lifecycle rules remove on AWS, removed here (canvas_local.retention).
        self.retention: RetentionSweeper | None = None

    # -------------------------------------------------- what clients and tests need

    @property
    def endpoint_url(self) -> str:
        """moto's server: DynamoDB, S3 and Step Functions, for the stack's own credentials only (never handed out:
        download links point at the front door)."""
        if self._moto is None:
            raise RuntimeError("the stack is not started")
        host, port = self._moto.get_host_and_port()
        return f"http://{host}:{port}"

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
            aws_access_key_id=self.credentials.access_key_id,
            aws_secret_access_key=self.credentials.secret_access_key,
        )

    def logical_ids(self) -> dict[str, str]:
        """The logical id of each resource the stack provisioned, by the names its clients use: table and bucket
        names, queue names and URLs, state machine and role ARNs."""
        names = {name: lid for lid, name in self.table_names.items()}
        names |= {bucket_name(lid): lid for lid in self.template.of_type("AWS::S3::Bucket")}
        names |= {arn: lid for lid, arn in self.state_machine_arns.items()}
        names |= {url: lid for lid, url in self.queue_urls.items()} | {lid: lid for lid in self.queue_urls}
        names |= {f"arn:aws:iam::{ACCOUNT_ID}:role/{lid}": lid for lid in self.template.of_type("AWS::IAM::Role")}
        return names

    def wait_for_execution(self, execution_arn: str, timeout: float = 60) -> dict[str, Any]:
        """DescribeExecution once the execution has left RUNNING; TimeoutError if it has not in time."""
        # A client is built once: building one costs more CPU than a dozen calls, taken from the runs in flight.
        sfn = self._sfn if self._sfn is not None else self.client("stepfunctions")
        deadline = time.monotonic() + timeout
        # Woken by the interpreter's ending hook rather than asking moto 20 times a second, which would take the
        # Step Functions lock and the interpreter's time from the runs being measured.
        ended = threading.Event()

        def on_end(arn: str) -> None:
            if arn == execution_arn:
                ended.set()

        moto_patch.on_execution_end(on_end)
        try:
            while True:
                described: dict[str, Any] = sfn.describe_execution(executionArn=execution_arn)
                if described["status"] != "RUNNING":
                    return described
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{execution_arn} still RUNNING after {timeout}s")
                ended.wait(min(0.5, max(0.0, deadline - time.monotonic())))
        finally:
            moto_patch.remove_execution_listener(on_end)

    # -------------------------------------------------- lifecycle

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> Self:
        # Read the whole template and take the port before starting anything: either error should cost nothing.
        specs = self.template.functions()
        state_machines = self.template.state_machines()
        self._front_door = FrontDoor(
            routes=self.template.routes(),
            functions=self.functions,
            binary_media_types=self.template.binary_media_types(),
            stage=self.template.stage_name(),
            host=self.host,
            port=self.port,
        )
        self._front_door.bind()
        try:
            moto_patch.install_backend_locks()
            moto_patch.install_caches()
            moto_patch.install_untracked_models()
            moto_patch.install_packed_items()
            self._install_disk_bodies()
            self._start_moto()
            environments = self._apply_environment(specs)
            self._start_downloads()
            self.functions.update(
                {
                    spec.logical_id: spec.local_function(self.function_concurrency, environments[spec.logical_id])
                    for spec in specs
                }
            )
            _check_functions(self.functions.values())
            # A function is invoked by its logical id, or by the FunctionName its template entry gives it.
            self._function_ids = {spec.function_name: spec.logical_id for spec in specs if spec.function_name}
            for machine in state_machines:
                for name, errors in machine.caught_by_name().items():
                    if (function := self._resolve_function(name)) is not None:
                        function.caught_by_name |= errors
            self._provision(state_machines)
            self._start_queues()
            moto_patch.install(self._resolve_function)
            moto_patch.install_payload_limits()
            moto_patch.install_quiet_stops()
            moto_patch.install_item_level_transactions()
            self._start_watcher()
            self._restore_state()
            self._seed_accounts()
            self._start_retention()
            self._inject_faults()
            self._front_door.start()
            self._published = credentials.publish(self.endpoint_url, self.credentials)
            # What start-up built (modules, the template, moto's models) lives as long as the stack: left out of
            # the collector's full passes, each costs a fraction (a pass over it took 0.3 s, stalling every run).
            gc.freeze()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, grace_seconds: float = STOP_GRACE_SECONDS) -> None:
        """Stop taking requests, end the runs in flight (marked failed, finished work kept), then stop."""
        if self._front_door is not None:
            self._front_door.stop()
            self._front_door = None
        credentials.withdraw(self._published)
        self._published = None
        if self._moto is not None:
            self._end_runs_in_flight(grace_seconds)
        if self._watcher is not None:
            self._watcher.stop()
            moto_patch.remove_execution_listener(self._watcher.notify)
            self._watcher = self._sfn = None
        if self.retention is not None:
            self.retention.stop()
            self.retention = None
        if self._queues is not None:
            with contextlib.suppress(Exception):  # moto's server already gone: nothing can be delivered
                self._queues.drain(WEBHOOK_DRAIN_SECONDS)
            self._queues.stop()
            self._queues = None
        for function in self.functions.values():
            function.close()
        moto_patch.uninstall_write_journal()
        if self._state is not None:
            self._state.close()
            self._state = None
        moto_patch.uninstall(self._resolve_function)
        if self.downloads is not None:
            self.downloads.uninstall()
            self.downloads = None
        moto_patch.uninstall_payload_limits()
        moto_patch.uninstall_quiet_stops()
        if self._calls is not None:
            iam_calls.unwatch(boto3.DEFAULT_SESSION, self._calls)
            self._calls = None
        moto_patch.inject_lambda_faults(None)
        if self._moto is not None and self.fault_injector is not None:
            self._moto.inject_faults(None)
        moto_patch.uninstall_item_level_transactions()
        if self._moto is not None:
            moto_patch.disable_state_machine_execution(self.endpoint_url, self.credentials.botocore())
            moto_patch.reset_backends(self.endpoint_url, self.credentials.botocore())
            self._moto.stop()
            self._moto = None
        moto_patch.uninstall_untracked_models()
        moto_patch.uninstall_packed_items()
        moto_patch.uninstall_disk_bodies()
        if self._bodies is not None:
            shutil.rmtree(self._bodies, ignore_errors=True)
            self._bodies = None
        moto_patch.release_finished_threads()
        self._restore_environment()
        gc.unfreeze()

    def _start_watcher(self) -> None:
        """EventBridge's part: each execution that ends reaches the rules of template.yaml that match it."""
        self._sfn = self.client("stepfunctions")
        self._watcher = ExecutionWatcher(
            self._sfn,
            list(self.state_machine_arns.values()),
            self.template.event_rules(),
            lambda function, event: self.functions[function].invoke(event),
            after_each=self._tidy_ended_executions,
            on_ended=self._report_run_end if self.on_run_end is not None else None,
        )
        self._watcher.start()
        moto_patch.on_execution_end(self._watcher.notify)

    def _report_run_end(self, execution: dict[str, Any]) -> None:
        """The run an execution was named after, as its item says once FailRunFunction had its say."""
        assert self.on_run_end is not None
        run_id = execution["name"]
        answer = self.client("dynamodb").get_item(
            TableName=self.table_names["RunsTable"], Key={"run_id": {"S": run_id}}, ConsistentRead=True
        )
        item = answer.get("Item") or {}
        status = item.get("status", {}).get("S", execution["status"].lower())
        credits = int(item.get("credits_consumed", {}).get("N", "0"))
        started, stopped = execution.get("startDate"), execution.get("stopDate")
        duration = (stopped - started).total_seconds() if started and stopped else None
        self.on_run_end(RunEnd(run_id, status, duration, credits))

    def _start_queues(self) -> None:
        """SQS, EventBridge's queue targets and Lambda's SQS event sources (the webhook deliveries)."""
        self._queues = QueuePollers(self.template, self.client, self.functions)
        self._queues.provision()
        self.queue_urls = dict(self._queues.queue_urls)
        self._queues.start()

    def _start_retention(self) -> None:
        ttl_tables = {table.name: table.ttl_attribute for table in self.template.tables() if table.ttl_attribute}
        self.retention = RetentionSweeper(self.client, ttl_tables, expiration_rules(self.template))
        self.retention.start()

    def _install_disk_bodies(self) -> None:
        """S3 bodies in files: under the state directory when there is one (cleared at each start: what lasts is in
        the state's own files), else in a temporary folder removed at stop."""
        if self.state_dir is not None:
            self._bodies = self.state_dir / "objects-live"
            shutil.rmtree(self._bodies, ignore_errors=True)
        else:
            self._bodies = Path(tempfile.mkdtemp(prefix="canvas-objects-"))
        moto_patch.install_disk_bodies(self._bodies)

    def _tidy_ended_executions(self) -> None:
        moto_patch.release_finished_threads()
        # Endings still queued for the watcher are among the newest: they stay until delivered.
        undelivered = self._watcher.undelivered() if self._watcher is not None else 0
        moto_patch.forget_ended_executions(RETAINED_EXECUTIONS + undelivered, ACCOUNT_ID, REGION)
        heap.trim()  # what the run and the execution forgotten freed goes back to the system

    def _inject_faults(self) -> None:
        """From here on, AWS's failures at the rates asked for (nothing when none is asked for)."""
        if not self.faults or self._moto is None:
            return
        self.fault_injector = FaultInjector(self.faults, _table_key_schema)
        self._moto.inject_faults(self.fault_injector)
        moto_patch.inject_lambda_faults(self.fault_injector.lambda_fault)

    def _resolve_function(self, name: str) -> LocalFunction | None:
        return self.functions.get(self._function_ids.get(name, name))

    def _start_moto(self) -> None:
        # Port 0: the OS picks a free port, so a busy 5000 (moto's default) does not matter. Loopback only, and only
        # for the stack's credentials (with Bedrock, its clients sign with the operator's, which moto's port takes).
        callers = {self.credentials.access_key_id}
        if self.provider == "bedrock" and os.environ.get("AWS_ACCESS_KEY_ID"):
            callers.add(os.environ["AWS_ACCESS_KEY_ID"])
        self._moto = MotoServer(ip_address="127.0.0.1", port=0, access_key_ids=callers)
        self._moto.start()
        # moto's backends are process-wide: start from nothing whatever ran before in this process.
        moto_patch.reset_backends(self.endpoint_url, self.credentials.botocore())
        moto_patch.enable_state_machine_execution(self.endpoint_url, self.credentials.botocore())

    def _start_downloads(self) -> None:
        """S3's presigned GETs, done by the stack: the S3 clients built from now on mint links to the front door,
        which serves them."""
        assert self._front_door is not None
        door = self._front_door
        self.downloads = DownloadLinks(
            signing_key(self.state_dir),
            self.bucket_names,  # filled as the buckets are made
            door_url=lambda: door.url,
            s3=functools.cache(lambda: self.client("s3")),
            public_url=self.public_url,
        )
        self.downloads.install(boto3.DEFAULT_SESSION)
        door.downloads = self.downloads

    def _apply_environment(self, specs: list[FunctionSpec]) -> dict[str, dict[str, str]]:
        """Each function's environment, by logical id: what its template entry and Globals give it, then the
        stack's own settings, over the host's (canvas_local.environments.function_environment). Its handler sees only
        that, as on Lambda; the process's environment holds every function's merged (the first value of a name
        wins), for what the stack and tests call outside any function (accounts seeded, runs ended at stop, a
        test's own reads)."""
        # Settings an operator gives in the environment (a model endpoint, model ids, a search provider) win
        # over the template's defaults; names of tables, the bucket and AWS endpoints stay the stack's own.
        stack_own = {name: value for name, value in os.environ.items() if is_operator_setting(name)}
        stack_own.update(
            {
                "MODEL_PROVIDER": self.provider,
                "POWERTOOLS_TRACE_DISABLED": "true",
                "AWS_ENDPOINT_URL": self.endpoint_url,
                "AWS_DEFAULT_REGION": REGION,
                "AWS_REGION": REGION,
                "AWS_ACCESS_KEY_ID": self.credentials.access_key_id,
                "AWS_SECRET_ACCESS_KEY": self.credentials.secret_access_key,
                # moto's interpreter calls other services' integrations (e.g. dynamodb:putItem) on this port.
                "MOTO_PORT": str(self._moto.get_host_and_port()[1]) if self._moto else "5000",
                # Webhook events say they come from a development stack.
                "WEBHOOK_LIVEMODE": "false",
            }
        )
        if self.provider == "bedrock":
            # Bedrock is the one service that is real: its own endpoint, and the caller's credentials (moto
            # accepts any, so they stay in the environment for every client).
            stack_own["AWS_ENDPOINT_URL_BEDROCK_RUNTIME"] = f"https://bedrock-runtime.{REGION}.amazonaws.com"
            for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
                if os.environ.get(name):
                    stack_own[name] = os.environ[name]
        environments = {
            spec.logical_id: {"POWERTOOLS_METRICS_NAMESPACE": "CanvasRunService", **spec.environment, **stack_own}
            for spec in specs
        }
        merged: dict[str, str] = {}
        for environment in environments.values():
            for name, value in environment.items():
                merged.setdefault(name, value)
        merged.update(stack_own)
        for name, value in merged.items():
            self._saved_environ.setdefault(name, os.environ.get(name))
            os.environ[name] = value
        self._applied_environ = dict(merged)
        if self.provider != "bedrock":
            # A real session token would be sent along with the dummy keys.
            self._saved_environ.setdefault("AWS_SESSION_TOKEN", os.environ.pop("AWS_SESSION_TOKEN", None))
        self.environment = merged
        environments = {
            logical_id: function_environment(own, others=merged) for logical_id, own in environments.items()
        }
        _forget_cached_clients()
        priority.mark_api_calls()
        if self._moto is not None:
            # Every client built from now on in this process (handlers, stack, watcher) skips the socket.
            self._moto.serve_in_process(boto3.DEFAULT_SESSION)
            # A block's credentials reach only its own run, as IAM's session policies confine them on AWS.
            policies = SessionPolicies(
                moto_partition_key(ACCOUNT_ID, REGION), ACCOUNT_ID, REGION, self.template.role_policies()
            )
            self._moto.check_session_policies(policies)
            # The AWS calls each function makes, while the e2e tier records them (tests/iam_observed.yaml).
            self._calls = iam_calls.watch(boto3.DEFAULT_SESSION, self.template.path, self.logical_ids)
        return environments

    def _restore_environment(self) -> None:
        # Only what still holds the value the stack set: a variable someone changed or removed since (a test's
        # monkeypatch undone before the stack stops) keeps its new state instead of getting the stack's start back.
        for name, value in self._saved_environ.items():
            if name in self._applied_environ and os.environ.get(name) != self._applied_environ[name]:
                continue
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved_environ = {}
        self._applied_environ = {}
        _forget_cached_clients()

    def _provision(self, state_machines: list[StateMachineSpec]) -> None:
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

    def _restore_state(self) -> None:
        """With a state directory: what it holds comes back, every write from then on is journaled to it before
        it is acknowledged, and the runs it left running (their executions died with the process) end as failed."""
        if self.state_dir is None:
            return
        self._state = StateDir(self.state_dir)
        self._state.open()
        dynamodb, s3 = self.client("dynamodb"), self.client("s3")
        report = self._state.restore(dynamodb, s3, self.table_names.values(), self.bucket_names)
        LOG.info("Restored from %s: %s", self.state_dir, report)
        moto_patch.install_write_journal(self._state)
        runs_table = self.table_names.get("RunsTable")
        if runs_table is not None:
            self._fail_runs(runs_left_running(dynamodb, runs_table))
        self._restored_items = bool(report.items)

    def _seed_accounts(self) -> None:
        for key in self.requested_keys:
            self.accounts[key] = seed_account(key)
        if self.generate_key and not self.requested_keys and not self._restored_items:
            account_id, key = seed_generated_account()
            self.accounts[key] = account_id
            self.generated_key = key

    def running_executions(self) -> list[str]:
        sfn = self.client("stepfunctions")
        return [
            execution["executionArn"]
            for arn in self.state_machine_arns.values()
            for execution in sfn.list_executions(stateMachineArn=arn, statusFilter="RUNNING")["executions"]
        ]

    def _end_runs_in_flight(self, grace_seconds: float) -> None:
        """End every run still running with the reason the stack stopped (finished blocks are kept), then stop
        the executions, letting their endings reach the watcher (FailRunFunction finds the runs ended)."""
        try:
            running = self.running_executions()
        except Exception:  # moto's server already gone: nothing can run
            LOG.exception("Listing executions in flight failed")
            return
        runs_table = self.table_names.get("RunsTable")
        if running and runs_table is not None:
            self._fail_runs(runs_left_running(self.client("dynamodb"), runs_table))
        sfn = self.client("stepfunctions")
        for execution_arn in running:
            with contextlib.suppress(Exception):
                sfn.stop_execution(executionArn=execution_arn, error="States.Aborted", cause=STOPPED_RUN_REASON)
        deadline = time.monotonic() + grace_seconds
        while self.running_executions() and time.monotonic() < deadline:
            time.sleep(0.05)
        if self._watcher is not None:
            self._watcher.wait_until_idle(max(0.5, deadline - time.monotonic()))

    def _fail_runs(self, run_ids: list[str]) -> None:
        from canvas_core.orchestration import finalize_run

        for run_id in run_ids:
            try:
                finalize_run(run_id, failure=STOPPED_RUN_REASON)
            except Exception:
                LOG.exception("Ending run %s failed", run_id)


@functools.cache
def _table_key_schema(table_name: str) -> tuple[str, ...]:
    """The attribute names of a table's key, as moto holds the table."""
    table = dynamodb_backends[ACCOUNT_ID][REGION].get_table(table_name)
    return tuple(name for name in (table.hash_key_attr, table.range_key_attr) if name)


def _check_functions(functions: Iterable[LocalFunction]) -> None:
    """Every function started once in its own environment, as its first cold start would: on Lambda a setting its
    template entry lacks, or holds badly, fails that function; here the stack refuses to start, naming the function
    and the variable (canvas_core's SettingsError). Nothing is kept: environments still start on demand."""
    try:
        refusal: type[Exception] | None = importlib.import_module("canvas_core.settings").SettingsError
    except ImportError:
        refusal = None
    for function in functions:
        try:
            function.check_start()
        except Exception as exc:
            if refusal is not None and isinstance(exc, refusal):
                raise refusal(f"{function.name}: {exc}") from None
            raise


def _forget_cached_clients() -> None:
    """canvas_core builds clients and settings once per container; a new stack is a new container."""
    try:
        aws = importlib.import_module("canvas_core.adapters.aws")
        settings = importlib.import_module("canvas_core.settings")
    except ImportError:
        return
    aws.reset_clients()
    settings.reset()
