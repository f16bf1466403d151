"""The settings models: their defaults, what a bad value says, what each function family reads, and that a
function checks its family's settings when it starts."""

from __future__ import annotations

import importlib.util

import pytest

from canvas_core import settings
from canvas_core.settings import (
    ApiSettings,
    BlockSettings,
    EnvSettings,
    GatherSettings,
    OrchestrationSettings,
    ProviderSettings,
    ServiceSettings,
    SettingsError,
    TracingSettings,
    WebhookSettings,
)
from canvas_local.template import Template
from tests.support import ROOT

pytestmark = pytest.mark.unit

MIB = 1024 * 1024
FAMILIES: dict[str, type[EnvSettings]] = {
    "api": ApiSettings,
    "portal": ApiSettings,
    "orchestration": OrchestrationSettings,
    "blocks": BlockSettings,
    "webhooks": WebhookSettings,
}


def family_of(code_dir) -> type[EnvSettings]:
    return FAMILIES[code_dir.relative_to(ROOT / "functions").parts[0]]


# ---- defaults


def test_an_empty_environment_gives_the_defaults():
    # Given no variable set, or set to nothing
    unset: dict[str, str] = {}
    empty = {"MAX_FILES": "", "MODEL_PROVIDER": "  ", "RUNS_TABLE_NAME": ""}
    # When
    api, blocks = ApiSettings.from_environ(unset), BlockSettings.from_environ(empty)
    # Then every field has its default, the same as a model built in code
    assert api == ApiSettings() and blocks == BlockSettings()
    assert (api.runs_table, api.artifacts_bucket, api.state_machine_arn) == ("RunsTable", "artifacts", "")
    assert (api.max_files, api.max_file_bytes, api.max_upload_bytes) == (10, 4 * MIB, 4 * MIB)
    assert (api.max_prompt_chars, api.max_concurrent_runs, api.portal_session_seconds) == (20000, 10, 12 * 3600)
    assert (api.download_url_ttl_seconds, api.data_retention_days, api.event_bus_name) == (3600, 90, "default")
    assert (blocks.model_provider, blocks.model_ids, blocks.model_retry_backoff_seconds) == ("offline", {}, 1.0)
    assert (blocks.web_max_bytes, blocks.youtube_languages, blocks.search_provider) == (5 * MIB, ("en",), "none")
    assert OrchestrationSettings.from_environ(unset).block_timeout_seconds == 900
    webhooks = WebhookSettings.from_environ(unset)
    assert (webhooks.queue_url, webhooks.retry_time_scale, webhooks.livemode) == ("WebhookQueue", 1.0, True)
    assert TracingSettings.from_environ(unset).trace_disabled is False


def test_values_are_read_as_their_types():
    environ = {
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
    assert "sk-secret" not in repr(ProviderSettings.from_environ(environ))


# ---- families


def test_a_family_reads_only_its_own_settings():
    # Given a value that only the API reads, and that is bad
    environ = {"MAX_FILES": "abc"}
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
    # And all share the tables
    assert all("runs_table" in model.model_fields for model in set(FAMILIES.values()))


def test_every_function_of_the_template_reads_valid_settings_and_every_variable_is_read():
    template = Template(ROOT / "template.yaml")
    read = {field.alias for model in (*FAMILIES.values(), TracingSettings) for field in model.model_fields.values()}
    for spec in template.functions():
        environment = template.function_environment(spec.logical_id)
        # Its family's model takes the values template.yaml gives it
        family_of(spec.code_dir).from_environ(environment)
        # And every variable it is given is a setting, Powertools' own, or the deployment's name (for tags)
        unread = {
            name
            for name in environment
            if name not in read and not name.endswith("_MODEL_ID") and not name.startswith("POWERTOOLS_")
        }
        assert unread <= {"ENVIRONMENT"}, (spec.logical_id, unread)


# ---- read once, checked at the start


def test_a_model_is_read_once_until_reset(monkeypatch):
    # Given the settings read once
    monkeypatch.setenv("MAX_CONCURRENT_RUNS", "3")
    first = settings.api_settings()
    # When the environment changes
    monkeypatch.setenv("MAX_CONCURRENT_RUNS", "4")
    # Then the process keeps what it read, until it is told to read again
    assert settings.api_settings() is first and first.max_concurrent_runs == 3
    settings.reset()
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
def test_a_function_with_a_bad_setting_fails_when_it_starts(folder, variable, value, monkeypatch):
    # Given a bad value of a setting the function's family reads
    monkeypatch.setenv(variable, value)
    path = ROOT / "functions" / folder / "app.py"
    spec = importlib.util.spec_from_file_location(f"settings_check_{folder.replace('/', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    # When Lambda loads its handler (the cold start), Then it fails there, naming the variable
    with pytest.raises(SettingsError, match=f"{variable}='{value}'"):
        spec.loader.exec_module(module)
