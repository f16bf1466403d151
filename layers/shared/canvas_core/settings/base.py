"""How a settings model is read: each field from one environment variable (`env`, `required`), validated by
pydantic, once per execution environment (`load`); the settings every function shares (`ServiceSettings`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
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

    # Built when first read: a function pays only for the models it loads, not for every family's.
    model_config = ConfigDict(
        frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True, defer_build=True
    )

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Self:
        """The model from `environ` (by default the process's environment: on Lambda, the function's): each field
        from its variable, stripped of spaces, or its default where the variable is unset or empty. SettingsError
        names every bad value and every required variable unset."""
        return cls.from_values(cls.values_in(os.environ if environ is None else environ))

    @classmethod
    def values_in(cls, environ: Mapping[str, str]) -> dict[str, str | dict[str, str]]:
        """What `environ` holds for each field, by variable: the fields left out are unset or empty."""
        values: dict[str, str | dict[str, str]] = {}
        for field in cls.model_fields.values():
            variable = cast(str, field.alias)
            if variable.startswith("*"):
                suffix = variable[1:]
                values[variable] = {k: v.strip() for k, v in environ.items() if k.endswith(suffix) and v.strip()}
            elif value := environ.get(variable, "").strip():
                values[variable] = value
        return values

    @classmethod
    def from_values(cls, values: Mapping[str, str | dict[str, str]]) -> Self:
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


_loaded: dict[tuple[type[EnvSettings], tuple[tuple[str, Any], ...]], EnvSettings] = {}


def load[S: EnvSettings](model: type[S]) -> S:
    """`model` from the environment, validated the first time its variables hold these values: on Lambda, once per
    container (a test that changes a variable gets the model of the new value)."""
    values = model.values_in(os.environ)
    key = (model, tuple((name, _hashable(value)) for name, value in values.items()))
    found = _loaded.get(key)
    if found is None:
        found = _loaded.setdefault(key, model.from_values(values))
    return cast(S, found)


def _hashable(value: str | dict[str, str]) -> str | tuple[tuple[str, str], ...]:
    return value if isinstance(value, str) else tuple(sorted(value.items()))


def reset() -> None:
    """Forget every model read so far."""
    _loaded.clear()
