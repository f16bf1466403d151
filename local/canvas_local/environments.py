"""What a Lambda execution environment has to itself, given to each one here though they share one process.

On Lambda an execution environment is a process: `os.environ` holds its function's variables, and what Powertools
keeps once per process (the Logger's keys, the metrics not yet flushed, the event a resolver is resolving) is that
one invocation's. Here many environments run at once on threads of one process, so each invocation runs inside its
environment's `scope()`, in which these read and write as that environment's own:

- `os.environ`: the function's variables (`function_environment`); outside every scope, the process's;
- the Logger's keys: Powertools keeps them on the formatter of the service's one `logging.Logger`;
- the metrics not yet flushed: Powertools' `Metrics` keeps one set per process;
- the event and Lambda context being resolved: Powertools' resolvers keep them on the `BaseRouter` class.

Production code is unchanged by it: it reads `os.environ` and uses one Logger, Metrics and resolver, as on Lambda.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from contextvars import ContextVar
from typing import Any

# What Powertools keeps once per process, made per environment by _install_powertools.
_LOGGER_KEYS = ("log_format",)  # LambdaPowertoolsFormatter: append_keys, clear_state, correlation id
_METRIC_SETS = ("metric_set", "dimension_set", "dimension_sets", "metadata_set", "timestamp")
_ROUTER_REQUEST = ("current_event", "lambda_context")  # set as BaseRouter's class attributes by resolve()

_current: ContextVar[Environment | None] = ContextVar("canvas_local_environment", default=None)
_installed: set[str] = set()
_installing = threading.Lock()


class Environment:
    """One execution environment's own: its variables (None: the process's) and its value of every attribute
    made per environment."""

    def __init__(self, variables: Mapping[str, str] | None = None):
        self.variables = None if variables is None else dict(variables)
        self.values: dict[_PerEnvironment, Any] = {}

    @contextlib.contextmanager
    def scope(self) -> Iterator[Environment]:
        """Run what this environment runs (its init, an invocation) as its own, in this thread and what it starts
        with its context."""
        _install_environ()
        token = _current.set(self)
        try:
            _install_powertools()  # imported, if first, with this environment's variables, as its init would
            yield self
        finally:
            _current.reset(token)


def function_environment(own: Mapping[str, str], others: Iterable[str]) -> dict[str, str]:
    """What Lambda gives a function: its own variables, over the host's (PATH, HOME, a proxy: what a runtime
    needs), without the variables only other functions are given."""
    process = _process_environ()
    hidden = set(others) - set(own)
    return {**{name: value for name, value in process.items() if name not in hidden}, **own}


def _process_environ() -> MutableMapping[str, str]:
    environ = os.environ
    return environ.process if isinstance(environ, _Environ) else environ


class _Environ(MutableMapping[str, str]):
    """`os.environ` as the environment in charge of this thread sees it: its variables; outside any, the
    process's (`process`, whose writes reach child processes as os.environ's do)."""

    def __init__(self, process: MutableMapping[str, str]):
        self.process = process

    def _mapping(self) -> MutableMapping[str, str]:
        environment = _current.get()
        if environment is None or environment.variables is None:
            return self.process
        return environment.variables

    def __getitem__(self, name: str) -> str:
        return self._mapping()[name]

    def __setitem__(self, name: str, value: str) -> None:
        self._mapping()[name] = value

    def __delitem__(self, name: str) -> None:
        del self._mapping()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._mapping()))

    def __len__(self) -> int:
        return len(self._mapping())

    def __contains__(self, name: object) -> bool:
        return name in self._mapping()

    def get(self, name: str, default: Any = None) -> Any:
        return self._mapping().get(name, default)

    def items(self) -> Any:
        return self._mapping().items()

    def copy(self) -> dict[str, str]:
        return dict(self._mapping())

    def __repr__(self) -> str:
        return f"environ({dict(self._mapping())!r})"


def _install_environ() -> None:
    with _installing:
        if not isinstance(os.environ, _Environ):
            os.environ = _Environ(os.environ)  # type: ignore[assignment]  # noqa: B003  # os.getenv reads it too


def _install_powertools() -> None:
    """Powertools' per-process state made per environment, once per process (before a handler first uses it)."""
    if {"logger", "metrics", "router"} <= _installed:
        return
    with _installing:
        try:
            from canvas_core import observability
        except ImportError:  # a function that does not use canvas_core
            pass
        else:
            if "logger" not in _installed:
                formatter = observability.logger.registered_formatter
                keys = copy.copy(getattr(formatter, "log_format", {}))
                # The service as the environment names it, as a process's Logger reads it when it starts.
                per_environment(
                    formatter,
                    _LOGGER_KEYS,
                    log_format=lambda: {**keys, "service": os.getenv("POWERTOOLS_SERVICE_NAME") or keys.get("service")},
                )
                _installed.add("logger")
            if "metrics" not in _installed:
                # Namespace and service as the environment gives them, as a process reads them when it starts.
                per_environment(
                    observability.metrics.provider,
                    (*_METRIC_SETS, "namespace", "service"),
                    namespace=lambda: os.getenv("POWERTOOLS_METRICS_NAMESPACE"),
                    service=lambda: os.getenv("POWERTOOLS_SERVICE_NAME"),
                )
                _installed.add("metrics")
        if "router" not in _installed:
            from aws_lambda_powertools.event_handler.api_gateway import BaseRouter

            _per_environment_class_attributes(BaseRouter, _ROUTER_REQUEST)
            _installed.add("router")


class _PerEnvironment:
    """An attribute whose value is the environment in charge's, the process's outside every environment. An
    environment's value starts as `fresh()` makes it."""

    def __init__(self, process_value: Any, fresh: Callable[[], Any]):
        self.process_value = process_value
        self.fresh = fresh

    def __get__(self, _instance: object, _owner: type | None = None) -> Any:
        environment = _current.get()
        if environment is None:
            return self.process_value
        try:
            return environment.values[self]
        except KeyError:
            return environment.values.setdefault(self, self.fresh())

    def __set__(self, _instance: object, value: Any) -> None:
        environment = _current.get()
        if environment is None:
            self.process_value = value
        else:
            environment.values[self] = value


def per_environment(target: object, names: Iterable[str], **fresh: Callable[[], Any]) -> None:
    """Make `target`'s attributes `names` per environment (its class becomes a subclass holding them). An
    environment starts with a copy of the value the attribute holds now, or what `fresh[name]()` makes."""
    cls = type(target)
    attributes = vars(target)
    slots = {}
    for name in names:
        value = attributes.pop(name)
        slots[name] = _PerEnvironment(value, fresh.get(name, functools.partial(copy.copy, copy.copy(value))))
    metaclass: type = type(cls)  # ABCMeta for a metrics provider
    target.__class__ = metaclass(cls.__name__, (cls,), {"__module__": cls.__module__, **slots})


def _per_environment_class_attributes(cls: type, names: Iterable[str]) -> None:
    """Make class attributes `names` of `cls` per environment, whether set on the class (`cls.name = ...`, through
    its metaclass) or read through an instance or subclass (through the class). Each environment starts with None."""
    slots = {name: _PerEnvironment(vars(cls).get(name), lambda: None) for name in names}
    for name, slot in slots.items():
        setattr(cls, name, slot)
    metaclass: type = type(cls)
    cls.__class__ = type(f"PerEnvironment{metaclass.__name__}", (metaclass,), dict(slots))
