"""Component tier: each Lambda handler in-process, fed events/*.json, against moto's in-memory AWS with the
tables, bucket and state machine that template.yaml declares. A handler reads its settings from its own function's
environment only, as on Lambda; the test's own calls read the process's, which holds every function's variables."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from moto import mock_aws

from canvas_core import settings
from canvas_core.adapters.aws import reset_clients
from canvas_core.auth import create_account_with_key
from canvas_local import moto_patch
from canvas_local.environments import Environment
from canvas_local.template import Template
from tests.support import ROOT

pytestmark = pytest.mark.component


@pytest.fixture(scope="session")
def template() -> Template:
    return Template(ROOT / "template.yaml")


@pytest.fixture
def moto_locks() -> Iterator[None]:
    """moto serving one request at a time per service, as in the embedded stack: its backends are plain dicts,
    so handlers called from several threads at once would otherwise race inside moto itself."""
    with moto_patch.backend_locks():
        yield


@pytest.fixture
def aws(template: Template, monkeypatch: pytest.MonkeyPatch, moto_locks: None) -> Iterator[SimpleNamespace]:
    """moto with the template's resources, and the functions' environment as template.yaml sets it."""
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    for name, value in {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)
    for spec in template.functions():
        for name, value in template.function_environment(spec.logical_id).items():
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("MODEL_PROVIDER", "offline")
    reset_clients()
    with mock_aws():
        ddb, s3, sfn = (boto3.client(s, region_name="us-east-1") for s in ("dynamodb", "s3", "stepfunctions"))
        for table in template.tables():
            ddb.create_table(**table.create_table)
        for bucket in template.buckets():
            s3.create_bucket(Bucket=bucket)
        machine = template.state_machines()[0]
        arn = sfn.create_state_machine(
            name=machine.name, definition=machine.definition, roleArn="arn:aws:iam::123456789012:role/sfn"
        )["stateMachineArn"]
        monkeypatch.setenv("STATE_MACHINE_ARN", arn)
        settings.reset()
        yield SimpleNamespace(ddb=ddb, s3=s3, sfn=sfn, state_machine_arn=arn, settings=settings.api_settings())
    reset_clients()


@pytest.fixture
def account(aws: SimpleNamespace) -> SimpleNamespace:
    account_id, api_key = create_account_with_key()
    return SimpleNamespace(account_id=account_id, api_key=api_key)


@pytest.fixture(scope="session")
def function(template: Template) -> Callable[[str], Callable[[dict, Any], dict]]:
    """The handler of a function folder, e.g. function("api/get_run"), loaded as Lambda would load it. Its import and
        each call read settings from the process's environment without the variables template.yaml gives other
        functions and not this one (a test's own values of its variables reach it; another function's never do), as an
    execution environment of its own (canvas_local.environments): its Logger keys, metrics and request its own."""
    functions = ROOT / "functions"
    variables = {
        spec.code_dir.relative_to(functions).as_posix(): set(spec.environment) for spec in template.functions()
    }
    any_functions = set().union(*variables.values())
    loaded: dict[str, Callable] = {}

    def environment(folder: str) -> Environment:
        others = any_functions - variables[folder]
        return Environment({name: value for name, value in os.environ.items() if name not in others})

    def load(folder: str) -> Callable[[dict, Any], dict]:
        if folder not in loaded:
            path = Path(functions, folder, "app.py")
            spec = importlib.util.spec_from_file_location(f"fn_{folder.replace('/', '_')}", path)
            module = importlib.util.module_from_spec(spec)
            with environment(folder).scope():
                spec.loader.exec_module(module)

            def handler(event: dict, context: Any, run: Callable = module.handler) -> dict:
                with environment(folder).scope():
                    return run(event, context)

            loaded[folder] = handler
        return loaded[folder]

    return load


@pytest.fixture
def context() -> SimpleNamespace:
    return SimpleNamespace(
        function_name="test",
        function_version="$LATEST",
        invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:test",
        memory_limit_in_mb=512,
        aws_request_id="req-1",
        log_group_name="/aws/lambda/test",
        log_stream_name="stream",
        get_remaining_time_in_millis=lambda: 30_000,
    )
