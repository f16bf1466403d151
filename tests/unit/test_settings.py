"""The settings models: their defaults, the resource names they require, what a bad value says, what each
function reads, that a function checks its settings when it starts, and that it reads them from its own environment
where several share one process."""

from __future__ import annotations

import contextlib
import importlib.util
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from canvas_core import settings
from canvas_core.settings import (
    ApiSettings,
    BlockSettings,
    DeliverySettings,
    EnvSettings,
    GatherSettings,
    OrchestrationSettings,
    ProviderSettings,
    ServiceSettings,
    SettingsError,
    StateMachineSettings,
    TracingSettings,
    WebhookQueueSettings,
    WebhookSettings,
)
from canvas_local.environments import Environment
from tests.support import ROOT, function_environment, template

pytestmark = pytest.mark.unit

MIB = 1024 * 1024
FAMILIES: dict[str, type[EnvSettings]] = {
    "api": ApiSettings,
    "portal": ApiSettings,
    "orchestration": OrchestrationSettings,
    "blocks": BlockSettings,
    "webhooks": DeliverySettings,
}
# What every function is given (template.yaml's Globals): the tables, the bucket and the bus, by local name.
SHARED = function_environment("GetRunFunction")
RESOURCES = {name: value for name, value in SHARED.items() if name.endswith("_NAME") and "SERVICE" not in name}


def family_of(code_dir: Path) -> type[EnvSettings]:
    return FAMILIES[code_dir.relative_to(ROOT / "functions").parts[0]]


def start(folder: str) -> None:
    """Lambda's load of a function folder's handler: its cold start, which reads its settings."""
    path = ROOT / "functions" / folder / "app.py"
    spec = importlib.util.spec_from_file_location(f"settings_check_{folder.replace('/', '_')}", path)
    assert spec is not None and spec.loader is not None
    spec.loader.exec_module(importlib.util.module_from_spec(spec))


# ---- defaults, and the names with none


def test_an_environment_with_only_the_resource_names_gives_the_defaults():
    # Given the names of the resources, and other variables unset or set to nothing
    empty = {"MAX_FILES": "", "SEARCH_PROVIDER": "  "}
    # When (the model provider has no default: it is named like a resource)
    api = ApiSettings.from_environ(RESOURCES)
    blocks = BlockSettings.from_environ(RESOURCES | empty | {"MODEL_PROVIDER": "offline"})
    # Then every other field has its default, the same as a model built in code with the names
    assert api == ApiSettings.model_validate(RESOURCES)
    assert (api.runs_table, api.artifacts_bucket, api.event_bus_name) == ("RunsTable", "artifacts-bucket", "default")
    assert (api.max_files, api.max_file_bytes, api.max_upload_bytes) == (10, 4 * MIB, 4 * MIB)
    assert (api.max_prompt_chars, api.max_concurrent_runs, api.portal_session_seconds) == (20000, 10, 12 * 3600)
    assert (api.download_url_ttl_seconds, api.data_retention_days) == (3600, 90)
    assert (blocks.model_provider, blocks.model_ids, blocks.model_retry_backoff_seconds) == ("offline", {}, 1.0)
    assert (blocks.web_max_bytes, blocks.youtube_languages, blocks.search_provider) == (5 * MIB, ("en",), "none")
    assert OrchestrationSettings.from_environ(RESOURCES | {"MODEL_PROVIDER": "offline"}).block_timeout_seconds == 900
    webhooks = WebhookSettings.from_environ(RESOURCES)
    assert (webhooks.retry_time_scale, webhooks.livemode, webhooks.timeout_seconds) == (1.0, True, 10.0)
    assert TracingSettings.from_environ({}).trace_disabled is False


@pytest.mark.parametrize(
    "model, variables",
    [
        (ServiceSettings, ["ACCOUNTS_TABLE_NAME", "RUNS_TABLE_NAME", "ARTIFACTS_BUCKET_NAME", "EVENT_BUS_NAME"]),
        (WebhookSettings, ["WEBHOOK_ENDPOINTS_TABLE_NAME", "WEBHOOK_DELIVERIES_TABLE_NAME"]),
        (StateMachineSettings, ["STATE_MACHINE_ARN"]),
        (WebhookQueueSettings, ["WEBHOOK_QUEUE_URL"]),
        (DeliverySettings, ["WEBHOOK_QUEUE_URL", "WEBHOOK_DEAD_LETTER_QUEUE_URL"]),
        (ProviderSettings, ["MODEL_PROVIDER"]),
    ],
)
def test_a_resource_name_has_no_default_and_its_absence_is_named(model, variables):
    # Given an environment without the name of a resource the model reads (unset, or set to nothing)
    environ = {name: value for name, value in RESOURCES.items() if name not in variables} | {variables[0]: " "}
    # When the model is read, Then it is refused, naming each variable that is not set
    with pytest.raises(SettingsError) as raised:
        model.from_environ(environ)
    assert all(f"{variable} is not set" in str(raised.value) for variable in variables)
    # And a name built in code may not be empty either
    with pytest.raises(ValueError, match="at least 1 character"):
        StateMachineSettings(state_machine_arn="")


def test_values_are_read_as_their_types():
    environ = RESOURCES | {
        "MAX_FILES": " 3 ",
        "MODEL_PROVIDER": "Bedrock",
        "WRITER_MODEL_ID": "w",
        "REVIEWER_MODEL_ID": "rv",
        "RESEARCHER_MODEL_ID": "",
        "WEB_ALLOW_PRIVATE_ADDRESSES": "true",
        "YOUTUBE_TRANSCRIPT_LANGUAGES": "de, en,",
        "YOUTUBE_BASE_URL": "http://127.0.0.1:9/",
        "WEBHOOK_LIVEMODE": "false",
        "POWERTOOLS_TRACE_DISABLED": "1",
    }
    assert ApiSettings.from_environ(environ).max_files == 3
    blocks = BlockSettings.from_environ(environ)
    assert blocks.model_provider == "bedrock"
    # Every role's model id, by variable; an empty one is unset
    assert blocks.model_ids == {"WRITER_MODEL_ID": "w", "REVIEWER_MODEL_ID": "rv"}
    assert blocks.web_allow_private_addresses is True
    assert (blocks.youtube_languages, blocks.youtube_base_url) == (("de", "en"), "http://127.0.0.1:9")
    assert WebhookSettings.from_environ(environ).livemode is False
    assert TracingSettings.from_environ(environ).trace_disabled is True


# ---- a bad value


@pytest.mark.parametrize(
    "model, variable, value, why",
    [
        (ApiSettings, "MAX_FILES", "abc", "valid integer"),
        (ApiSettings, "MAX_CONCURRENT_RUNS", "-1", "greater than or equal to 0"),
        (ProviderSettings, "MODEL_PROVIDER", "gemini", "'offline', 'bedrock' or 'openai'"),
        (ProviderSettings, "MODEL_RETRY_BACKOFF_SECONDS", "soon", "valid number"),
        (OrchestrationSettings, "BLOCK_TIMEOUT_SECONDS", "0", "greater than 0"),
        (GatherSettings, "WEB_ALLOW_PRIVATE_ADDRESSES", "maybe", "valid boolean"),
        (WebhookSettings, "WEBHOOK_RETRY_TIME_SCALE", "2", "less than or equal to 1"),
        (ServiceSettings, "DATA_RETENTION_DAYS", "90d", "valid integer"),
    ],
)
def test_a_bad_value_is_refused_naming_its_variable(model, variable, value, why):
    with pytest.raises(SettingsError) as raised:
        model.from_environ({variable: value})
    assert f"{variable}='{value}': " in str(raised.value) and why in str(raised.value)


def test_every_bad_value_is_named_at_once_and_a_key_is_never_repeated():
    # Given two bad values, and a key beside them
    environ = {"MAX_FILES": "many", "MAX_FILE_BYTES": "big", "OPENAI_API_KEY": "sk-secret"}
    # When
    with pytest.raises(SettingsError) as raised:
        BlockSettings.from_environ(environ | {"MODEL_PROVIDER": "gemini"})
    # Then
    assert "MODEL_PROVIDER='gemini'" in str(raised.value) and "sk-secret" not in str(raised.value)
    with pytest.raises(SettingsError) as raised:
        ApiSettings.from_environ(environ)
    assert "MAX_FILES='many'" in str(raised.value) and "MAX_FILE_BYTES='big'" in str(raised.value)
    assert "sk-secret" not in repr(ProviderSettings.from_environ(environ | {"MODEL_PROVIDER": "offline"}))


# ---- families


def test_a_family_reads_only_its_own_settings():
    # Given a value that only the API reads, and that is bad
    environ = RESOURCES | {"MAX_FILES": "abc", "MODEL_PROVIDER": "offline"}
    # When the other families read the environment, they do not see it
    for model in (BlockSettings, OrchestrationSettings, WebhookSettings):
        assert "max_files" not in model.model_fields
        model.from_environ(environ)
    with pytest.raises(SettingsError, match="MAX_FILES"):
        ApiSettings.from_environ(environ)
    # And each family has the fields of its own code only
    assert "model_provider" not in ApiSettings.model_fields and "model_provider" not in WebhookSettings.model_fields
    assert "block_timeout_seconds" not in BlockSettings.model_fields
    assert "search_provider" not in OrchestrationSettings.model_fields
    assert "queue_url" not in BlockSettings.model_fields and "queue_url" not in OrchestrationSettings.model_fields
    # And the queues and the state machine are read only by the functions given them
    assert "queue_url" not in ApiSettings.model_fields and "state_machine_arn" not in ApiSettings.model_fields
    # And all share the tables
    assert all("runs_table" in model.model_fields for model in set(FAMILIES.values()))


def read_at_start(logical_id: str) -> set[str]:
    """The variables a function's cold start reads, in the environment template.yaml gives it alone: the fields of
    every settings model it loads (its family's, and the resources it alone is given)."""
    spec = next(s for s in template().functions() if s.logical_id == logical_id)
    with Environment(function_environment(logical_id)).scope(), models_read() as loaded:
        start(spec.code_dir.relative_to(ROOT / "functions").as_posix())
    assert family_of(spec.code_dir) in loaded, logical_id
    return {str(field.alias) for model in loaded for field in model.model_fields.values()}


@contextlib.contextmanager
def models_read() -> Iterator[set[type[EnvSettings]]]:
    """The settings models validated meanwhile (none is kept from before)."""
    read: set[type[EnvSettings]] = set()
    validate = EnvSettings.from_values.__func__  # type: ignore[attr-defined]

    def recorded(model: type[EnvSettings], values: dict) -> EnvSettings:
        read.add(model)
        return validate(model, values)

    settings.reset()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(EnvSettings, "from_values", classmethod(recorded))
        yield read


def is_read(variable: str, read: set[str]) -> bool:
    """Read by one of the models (a `*_SUFFIX` field reads every variable ending so), or by Powertools itself."""
    suffixes = {alias[1:] for alias in read if alias.startswith("*")}
    return variable in read or variable.endswith(tuple(suffixes)) or variable.startswith("POWERTOOLS_")


@pytest.mark.parametrize("logical_id", [spec.logical_id for spec in template().functions()])
def test_every_function_of_the_template_starts_and_is_given_only_what_it_reads(logical_id):
    # Given what its cold start reads, in the environment template.yaml gives it alone (which it starts with)
    read = read_at_start(logical_id)
    # Then every variable it is given, by Globals or its own entry, is one of them
    unread = sorted(name for name in function_environment(logical_id) if not is_read(name, read))
    assert unread == [], f"template.yaml gives {logical_id} variables it does not read: {unread}"


def test_globals_give_only_what_every_function_reads():
    # Given the variables Globals give every function, and what each function's cold start reads
    shared = template().globals["Function"]["Environment"]["Variables"]
    reads = {spec.logical_id: read_at_start(spec.logical_id) for spec in template().functions()}
    # Then every function reads each (a variable only some read belongs in their entries)
    unread = {name: sorted(f for f, read in reads.items() if not is_read(name, read)) for name in shared}
    assert {name: functions for name, functions in unread.items() if functions} == {}


@pytest.mark.parametrize(
    "logical_id, folder, variable",
    [
        ("CreateRunFunction", "api/create_run", "STATE_MACHINE_ARN"),
        ("WebhookEndpointsFunction", "api/webhook_endpoints", "WEBHOOK_QUEUE_URL"),
        ("PortalFunction", "portal", "WEBHOOK_QUEUE_URL"),
        ("DeliverWebhooksFunction", "webhooks/deliver_webhooks", "WEBHOOK_DEAD_LETTER_QUEUE_URL"),
        ("GetRunFunction", "api/get_run", "RUNS_TABLE_NAME"),
        ("PlanCanvasFunction", "orchestration/plan_canvas", "CANVASES_TABLE_NAME"),
        ("TextBlockFunction", "blocks/text_block", "ARTIFACTS_BUCKET_NAME"),
    ],
)
def test_a_function_whose_template_entry_lacks_a_resource_it_reads_fails_when_it_starts(
    logical_id, folder, variable, monkeypatch
):
    # Given the function's environment without one variable it needs, which the process's environment holds
    environment = function_environment(logical_id)
    del environment[variable]
    monkeypatch.setenv(variable, "in-the-process-but-not-the-function")
    # When Lambda loads its handler (the cold start) in that environment
    with Environment(environment).scope(), pytest.raises(SettingsError) as raised:
        start(folder)
    # Then it fails there, naming the variable
    assert f"{variable} is not set" in str(raised.value)


# ---- read once per environment, checked at the start


def test_each_environment_reads_its_own_variables_and_never_the_processs(monkeypatch):
    # Given the process's environment naming one state machine, and two environments on threads of their own
    monkeypatch.setenv("STATE_MACHINE_ARN", "arn:process")
    own, bare = Environment({"STATE_MACHINE_ARN": "arn:own"}), Environment({})
    read: dict[str, str | Exception] = {}

    def read_in(name: str, environment: Environment) -> None:
        with environment.scope():
            try:
                read[name] = settings.state_machine_settings().state_machine_arn
            except SettingsError as exc:
                read[name] = exc

    # When each reads the state machine's settings
    threads = [threading.Thread(target=read_in, args=args) for args in (("own", own), ("bare", bare))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then each read its own variables, and the process keeps its own
    assert read["own"] == "arn:own" and isinstance(read["bare"], SettingsError)
    assert settings.state_machine_settings().state_machine_arn == "arn:process"


def test_a_model_is_validated_once_for_the_values_it_reads(monkeypatch, environment_of):
    # Given the settings read once
    environment_of("CreateRunFunction")
    monkeypatch.setenv("MAX_CONCURRENT_RUNS", "3")
    first = settings.api_settings()
    # When they are read again, the variables unchanged, Then the model read first is answered
    assert settings.api_settings() is first and first.max_concurrent_runs == 3
    # And when a variable changes, the model of its new value
    monkeypatch.setenv("MAX_CONCURRENT_RUNS", "4")
    assert settings.api_settings().max_concurrent_runs == 4


@pytest.mark.parametrize(
    "folder, variable, value",
    [
        ("blocks/text_block", "MODEL_PROVIDER", "gemini"),
        ("orchestration/plan_canvas", "BLOCK_TIMEOUT_SECONDS", "soon"),
        ("orchestration/release_dependents", "MODEL_PROVIDER", "gemini"),
        ("webhooks/deliver_webhooks", "WEBHOOK_TIMEOUT_SECONDS", "-1"),
        ("api/get_run", "MAX_FILES", "abc"),
        ("portal", "PORTAL_SESSION_SECONDS", "never"),
    ],
)
def test_a_function_with_a_bad_setting_fails_when_it_starts(folder, variable, value):
    # Given a bad value of a setting the function's family reads, in the environment template.yaml gives it
    logical_id = next(s.logical_id for s in template().functions() if s.code_dir == ROOT / "functions" / folder)
    environment = Environment(function_environment(logical_id) | {variable: value})
    # When Lambda loads its handler (the cold start), Then it fails there, naming the variable
    with environment.scope(), pytest.raises(SettingsError, match=f"{variable}='{value}'"):
        start(folder)
