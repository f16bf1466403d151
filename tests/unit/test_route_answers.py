"""What a route answers is its declared model, checked on the way out: every /v1 route and every portal JSON route
returns `SuccessBody[Model]` (canvas_core.api), and an answer that is anything else is a 500 in the contract's error
shape with the mismatch logged, never a body the contract does not have."""

from __future__ import annotations

import ast
import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, get_args, get_origin

import pytest
from aws_lambda_powertools.event_handler import Response
from pydantic import BaseModel

from canvas_core.api import SuccessBody, create_app, ok
from canvas_core.models.base import Model
from tests.support import ROOT, body_of, load_event

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]

RUN_ID = "0a7f7c1e-1111-4c55-9a0e-2f4b8d1c7e90"
PORTAL_ROUTES = ROOT / "layers" / "shared" / "canvas_core" / "portal" / "routes.py"


class Answer(Model):
    run_id: str
    note: str | None = None


class OtherAnswer(Model):
    task_id: str


@pytest.fixture(autouse=True)
def api_environment(environment_of):
    """A resolver reads its function's settings when it is built."""
    environment_of("GetRunFunction")


def answering(result: Any) -> Any:
    """A resolver whose one route declares `SuccessBody[Answer]` and returns `result()`."""
    app = create_app()

    @app.get("/v1/run/<run_id>")
    def get_run(run_id: str) -> SuccessBody[Answer]:
        return result(run_id)

    return app


def get_run(app: Any) -> dict[str, Any]:
    event = load_event("get_run", path_parameters={"run_id": RUN_ID})
    response: dict[str, Any] = app.resolve(event, SimpleNamespace(aws_request_id="req-1"))
    return response


@pytest.mark.parametrize(
    ("result", "data"),
    [
        (lambda run_id: ok(Answer(run_id=run_id)), {"run_id": RUN_ID}),
        (lambda run_id: ok(Answer(run_id=run_id), exclude_none=False), {"run_id": RUN_ID, "note": None}),
    ],
    ids=["unset-fields-left-out", "nulls-kept-where-promised"],
)
def test_a_route_returning_its_model_answers_it_in_the_success_shape(result, data):
    # Given a route that returns the model it declares
    app = answering(result)
    # When it is called
    response = get_run(app)
    # Then the client gets the model's fields in the success envelope
    assert response["statusCode"] == 200
    assert body_of(response) == {"success": True, "data": data}


@pytest.mark.parametrize(
    "result",
    [
        lambda run_id: ok(OtherAnswer(task_id=run_id)),
        lambda run_id: {"success": True, "data": {"run_id": run_id}},
        lambda run_id: Answer(run_id=run_id),
        lambda run_id: None,
    ],
    ids=["another-model", "a-dict-shaped-like-it", "the-model-without-its-envelope", "nothing"],
)
def test_a_route_returning_anything_but_its_model_answers_500_and_logs_the_mismatch(result, log_lines):
    # Given a route that declares SuccessBody[Answer] and returns something else
    app = answering(result)
    # When it is called
    response = get_run(app)
    # Then the client gets the contract's internal error, not the wrong body
    assert response["statusCode"] == 500
    assert body_of(response) == {"success": False, "error": "Internal server error"}
    # And the mismatch is logged as an error, naming the request and what did not match
    [line] = [line for line in log_lines() if line["message"] == "Answer does not match the route's model"]
    assert line["level"] == "ERROR"
    assert line["request"] == f"GET /v1/run/{RUN_ID}"
    assert line["mismatch"] and all(problem["loc"][0] == "response" for problem in line["mismatch"])


# ---- every route declares its model


def routes(path: Path) -> Iterator[tuple[str, str, ast.FunctionDef]]:
    """(method, path, function) of each `@app.<method>("<path>", ...)` route defined in a file."""
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            if (
                isinstance(decorator, ast.Call)
                and isinstance(decorator.func, ast.Attribute)
                and isinstance(decorator.func.value, ast.Name)
                and decorator.func.value.id == "app"
                and decorator.func.attr in {"get", "post", "put", "patch", "delete"}
            ):
                rule = decorator.args[0]
                assert isinstance(rule, ast.Constant), f"{path}: {node.name}'s path is not a literal"
                yield decorator.func.attr.upper(), rule.value, node


def imports_of(path: Path) -> dict[str, Any]:
    """The names a function file imports, to read its routes' annotations without building its resolver."""
    tree = ast.parse(path.read_text())
    imports = ast.Module([n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)], type_ignores=[])
    namespace: dict[str, Any] = {}
    exec(compile(imports, str(path), "exec"), namespace)
    return namespace


def declared(function: ast.FunctionDef, namespace: dict[str, Any]) -> Any:
    assert function.returns is not None, f"{function.name} has no return annotation"
    annotation = eval(ast.unparse(function.returns), namespace)
    return get_args(annotation)[0] if get_origin(annotation) is Response else annotation


def assert_a_body_of_a_model(name: str, annotation: Any) -> None:
    assert isinstance(annotation, type) and issubclass(annotation, SuccessBody), (
        f"{name} returns {annotation!r}, not SuccessBody[a model]"
    )
    data = annotation.model_fields["data"].annotation
    assert isinstance(data, type) and issubclass(data, BaseModel), f"{name}'s data is {data!r}, not a model"


def test_every_v1_route_returns_the_model_it_documents():
    document = json.loads((ROOT / "docs" / "openapi.json").read_text())
    documented = {(method.upper(), path) for path, item in document["paths"].items() for method in item}
    found = set()
    for app in sorted((ROOT / "functions" / "api").glob("*/app.py")):
        namespace = imports_of(app)
        for method, rule, function in routes(app):
            found.add((method, rule.replace("<", "{").replace(">", "}")))
            annotation = declared(function, namespace)
            assert_a_body_of_a_model(f"{method} {rule}", annotation)
            # The model the OpenAPI document gives its 200 is the one its answer is checked against
            [responses] = [k.value for d in function.decorator_list for k in d.keywords if k.arg == "responses"]
            assert isinstance(responses, ast.Call) and isinstance(responses.args[0], ast.Name)
            assert annotation is SuccessBody[namespace[responses.args[0].id]], f"{method} {rule}"
    assert found == documented
    assert len(found) == 19


def test_every_portal_json_route_returns_a_model_and_its_pages_are_responses():
    namespace = vars(importlib.import_module("canvas_core.portal.routes"))
    found = list(routes(PORTAL_ROUTES))
    json_routes = [(method, rule, f) for method, rule, f in found if rule.startswith("/portal/api/")]
    for method, rule, function in json_routes:
        assert_a_body_of_a_model(f"{method} {rule}", declared(function, namespace))
    # What is not JSON is a page or a file, answered as a Response of its text
    pages = {(method, rule): ast.unparse(f.returns) for method, rule, f in found if not rule.startswith("/portal/api/")}
    assert pages == {
        ("GET", "/portal"): "Response[str]",
        ("GET", "/portal/assets/<name>"): "Response[str]",
        ("GET", "/runs/<run_id>"): "Response[str]",
    }
    assert len(json_routes) == 18
