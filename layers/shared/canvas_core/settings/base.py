"""How a settings model is read: each field from one environment variable (`env`, `required`), validated by
pydantic, once per execution environment (`load`); the settings every function shares (`ServiceSettings`)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Annotated, Any, Self, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError

MIB = 1024 * 1024

# The name of an AWS resource (a table, the bucket, a queue's URL, an ARN): template.yaml gives it to each function
# that uses it, so it has no default (a local name would hide a function the template forgot).
ResourceName = Annotated[str, Field(min_length=1)]


def env(variable: str, default: Any, **constraints: Any) -> Any:
    """A field read from `variable`, `default` when it is unset or empty; `constraints` are pydantic's (`gt`, ...)."""
    return Field(default, alias=variable, **constraints)


def required(variable: str) -> Any:
    """A field read from `variable`, which must be set: a model without it is refused, naming the variable."""
    return Field(alias=variable)


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
        """The model from `environ` (by default the environment in charge: `environment_scope`'s, or the
        process's): each field from its variable, stripped of spaces, or its default where the variable is unset or
        empty. SettingsError names every bad value and every required variable unset."""
        environ = current_environ() if environ is None else environ
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
        if error["type"] == "missing":
            problems.append(f"{variable} is not set")
            continue
        shown = "" if variable in hidden else f"={error['input']!r}"
        problems.append(f"{variable}{shown}: {error['msg']}")
    return "; ".join(problems)


class ServiceSettings(EnvSettings):
    """What every function reads: the tables, the artifacts bucket and its download links, the bus that run
    status changes go to, and how long data is kept."""

    accounts_table: ResourceName = required("ACCOUNTS_TABLE_NAME")
    api_keys_table: ResourceName = required("API_KEYS_TABLE_NAME")
    portal_sessions_table: ResourceName = required("PORTAL_SESSIONS_TABLE_NAME")
    runs_table: ResourceName = required("RUNS_TABLE_NAME")
    canvases_table: ResourceName = required("CANVASES_TABLE_NAME")
    tasks_table: ResourceName = required("TASKS_TABLE_NAME")
    idempotency_table: ResourceName = required("IDEMPOTENCY_TABLE_NAME")
    artifacts_bucket: ResourceName = required("ARTIFACTS_BUCKET_NAME")
    download_url_ttl_seconds: int = env("DOWNLOAD_URL_TTL_SECONDS", 3600, gt=0)
    event_bus_name: ResourceName = required("EVENT_BUS_NAME")
    # Runs, canvases and tasks expire (DynamoDB TTL on expires_at) this many days after they were written.
    data_retention_days: int = env("DATA_RETENTION_DAYS", 90, gt=0)


class TracingSettings(EnvSettings):
    """Powertools' own switch, read here too: where tracing is off canvas_core.observability does not import the
    Tracer (and the X-Ray SDK with it) at all."""

    trace_disabled: bool = env("POWERTOOLS_TRACE_DISABLED", False)


class Environment:
    """One execution environment's variables, and the models read from them (each once, from its cold start on)."""

    def __init__(self, variables: Mapping[str, str]):
        self.variables = dict(variables)
        self.loaded: dict[type[EnvSettings], EnvSettings] = {}


_loaded: dict[type[EnvSettings], EnvSettings] = {}
_environment: ContextVar[Environment | None] = ContextVar("canvas_settings_environment", default=None)


@contextmanager
def environment_scope(environment: Environment) -> Iterator[Environment]:
    """Read settings from `environment` in this thread (and what it starts with its context) until exit.

    On Lambda a process is one execution environment and its environment is the function's. A runtime that hosts
    several in one process (the embedded stack, the component tests) runs each one's import and invocations in
    its scope, so a function reads only the variables its template entry gives it, never the process's."""
    token = _environment.set(environment)
    try:
        yield environment
    finally:
        _environment.reset(token)


def current_environ() -> Mapping[str, str]:
    """The variables settings are read from here: the scope's, or the process's environment outside any."""
    environment = _environment.get()
    return os.environ if environment is None else environment.variables


def load[S: EnvSettings](model: type[S]) -> S:
    """`model` as the environment in charge gave it when first asked for there: on Lambda, once per container."""
    environment = _environment.get()
    loaded = _loaded if environment is None else environment.loaded
    found = loaded.get(model)
    if found is None:
        found = loaded.setdefault(model, model.from_environ())
    return cast(S, found)


def reset() -> None:
    """Forget every model the process loaded outside any environment's scope: the next `load` reads the
    process's environment as it is now (after a test, or the embedded stack, changed it)."""
    _loaded.clear()
