"""How a settings model is read: each field from one environment variable (`env`), validated by pydantic, once
per process (`load`); the settings every function shares (`ServiceSettings`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Self, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

MIB = 1024 * 1024


def env(variable: str, default: Any, **constraints: Any) -> Any:
    """A field read from `variable`, `default` when it is unset or empty; `constraints` are pydantic's (`gt`, ...)."""
    return Field(default, alias=variable, **constraints)


def env_ending(suffix: str) -> Any:
    """A field holding every variable whose name ends in `suffix`, by name (the `*_MODEL_ID` of each role)."""
    return Field(default_factory=dict, alias="*" + suffix)


class SettingsError(ValueError):
    """A variable holds a value its setting cannot take: the message names the variable and says why."""


class EnvSettings(BaseModel):
    """A settings model whose every field is declared with `env` or `env_ending`: read from the environment
    (`from_environ`), or built by field name (a test)."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Self:
        """The model from `environ` (the process's environment by default): each field from its variable, stripped
        of spaces, or its default where the variable is unset or empty. SettingsError names every bad value."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field in cls.model_fields.values():
            variable = cast(str, field.alias)
            if variable.startswith("*"):
                suffix = variable[1:]
                values[variable] = {k: v.strip() for k, v in environ.items() if k.endswith(suffix) and v.strip()}
            elif value := environ.get(variable, "").strip():
                values[variable] = value
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise SettingsError(f"Invalid settings in the environment: {_problems(cls, exc)}") from None


def _problems(model: type[EnvSettings], exc: ValidationError) -> str:
    """`VARIABLE='value': why` for each bad value (a key's value is not repeated)."""
    hidden = {field.alias for field in model.model_fields.values() if not field.repr}
    problems = []
    for error in exc.errors(include_url=False):
        variable = str(error["loc"][0]) if error["loc"] else model.__name__
        shown = "" if variable in hidden else f"={error['input']!r}"
        problems.append(f"{variable}{shown}: {error['msg']}")
    return "; ".join(problems)


class ServiceSettings(EnvSettings):
    """What every function reads: the tables, the artifacts bucket and its download links, the bus that run
    status changes go to, and how long data is kept."""

    accounts_table: str = env("ACCOUNTS_TABLE_NAME", "AccountsTable")
    api_keys_table: str = env("API_KEYS_TABLE_NAME", "ApiKeysTable")
    portal_sessions_table: str = env("PORTAL_SESSIONS_TABLE_NAME", "PortalSessionsTable")
    runs_table: str = env("RUNS_TABLE_NAME", "RunsTable")
    canvases_table: str = env("CANVASES_TABLE_NAME", "CanvasesTable")
    tasks_table: str = env("TASKS_TABLE_NAME", "TasksTable")
    idempotency_table: str = env("IDEMPOTENCY_TABLE_NAME", "IdempotencyTable")
    artifacts_bucket: str = env("ARTIFACTS_BUCKET_NAME", "artifacts")
    download_url_ttl_seconds: int = env("DOWNLOAD_URL_TTL_SECONDS", 3600, gt=0)
    event_bus_name: str = env("EVENT_BUS_NAME", "default")
    # Runs, canvases and tasks expire (DynamoDB TTL on expires_at) this many days after they were written.
    data_retention_days: int = env("DATA_RETENTION_DAYS", 90, gt=0)


class TracingSettings(EnvSettings):
    """Powertools' own switch, read here too: where tracing is off canvas_core.observability does not import the
    Tracer (and the X-Ray SDK with it) at all."""

    trace_disabled: bool = env("POWERTOOLS_TRACE_DISABLED", False)


_loaded: dict[type[EnvSettings], EnvSettings] = {}


def load[S: EnvSettings](model: type[S]) -> S:
    """`model` as the environment gave it when first asked for in this process: on Lambda, once per container.

    The embedded stack runs every function in one process over one environment (their variables merged,
    canvas_local.stack), so what a model holds there is what each of its functions reads; the stack calls
    `reset` whenever it changes that environment, as a test does after changing a variable."""
    loaded = _loaded.get(model)
    if loaded is None:
        loaded = _loaded.setdefault(model, model.from_environ())
    return cast(S, loaded)


def reset() -> None:
    """Forget every model loaded: the next `load` reads the environment as it is now."""
    _loaded.clear()
