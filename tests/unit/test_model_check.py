"""scripts/model_check.py's checks on a run (`make model-check`): the tokens a run reports are the server's, its
credits cover them, and every failure and fallback has its reason. The whole check needs a real model; here its
rules meet runs made up to pass and to fail them."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.unit


def load_script():
    spec = importlib.util.spec_from_file_location("model_check", ROOT / "scripts" / "model_check.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


model_check = load_script()
PLAN = '{"steps": [{"id": "s1", "type": "text-block", "title": "Answer", "inputs": []}]}'


def call(role: str, prompt: int, completion: int, text: str = "An answer.", finish: str = "stop"):
    return model_check.ServerCall(role, "smollm2", prompt, completion, finish, text)


def tree(*calls: tuple[int, int]) -> dict:
    tools = [{"name": f"Model call: smollm2 ({i} tokens in, {o} out)", "children": []} for i, o in calls]
    return {"completed": [], "not_completed": [{"name": "Plan", "children": [{"name": "Writer", "children": tools}]}]}


def run(credits: int, errors: list[dict] | None = None) -> dict:
    return {"status": "completed", "metadata": {"credits_consumed": credits}, "errors": errors or []}


def test_a_run_whose_counts_are_the_servers_and_whose_credits_cover_them_passes():
    # Given the server answered the Planner and a writer, and the tree lists the writer's call
    calls = [call("planner", 300, 40, PLAN), call("writer", 500, 120)]
    # When
    problems = model_check.check_usage(run(credits=10), tree((500, 120)), calls)
    # Then
    assert problems == []


def test_a_token_count_the_server_never_reported_fails():
    calls = [call("planner", 300, 40, PLAN), call("writer", 500, 120)]
    problems = model_check.check_usage(run(credits=10), tree((500, 121)), calls)
    assert problems == ["model calls in the task tree the server did not report: [(500, 121)]"]


def test_credits_below_what_the_calls_cost_fail():
    # 800 tokens in and 160 out at the price of a model not in the table (3 and 15 credits per 1,000) is 5 credits
    calls = [call("planner", 300, 40, PLAN), call("writer", 500, 120)]
    problems = model_check.check_usage(run(credits=4), tree((500, 120)), calls)
    assert problems == ["credits 4 below the 5 its model calls cost"]


def test_calls_without_credits_fail():
    problems = model_check.check_usage(run(credits=0), tree((500, 120)), [call("writer", 500, 120)])
    assert problems == ["the run made model calls and consumed no credits"]


def test_no_usable_plan_needs_the_planners_fallback_in_the_errors():
    # Given the Planner's answers were never a plan
    calls = [call("planner", 300, 40, "Sure! Here is a plan: first research."), call("writer", 500, 120)]
    # When the errors say nothing of it, then it fails; when they say it planned by rules, it passes
    silent = model_check.check_usage(run(credits=10), tree((500, 120)), calls)
    said = run(credits=10, errors=[{"error": "The Planner's model was not used (no usable plan); planned by rules"}])
    assert silent == ["no Planner answer parsed as a plan, and the errors do not say it planned by rules"]
    assert model_check.check_usage(said, tree((500, 120)), calls) == []


def test_a_failed_block_needs_its_reason_in_the_errors():
    dag = {"nodes": [{"id": "b1", "type": "memo-block", "status": "error"}, {"id": "b2", "type": "text-block"}]}
    dag["nodes"][1]["status"] = "completed"
    assert model_check.check_reasons(run(1), dag) == ["memo-block b1 failed with no entry in errors"]
    explained = run(1, errors=[{"block_id": "b1", "error": "smollm2's answer was cut off at the output cap"}])
    assert model_check.check_reasons(explained, dag) == []
    unexplained = run(1, errors=[{"block_id": "b1", "error": " "}])
    assert model_check.check_reasons(unexplained, dag) == [f"an error without a reason: {unexplained['errors'][0]}"]


def test_a_built_in_page_needs_its_reason_in_the_errors():
    # Given an app-block that completed on its built-in page, and one that shipped the model's
    content = "# Tides\n\nBuilt-in app (the model's answer held no HTML document). Controls wired to its script: q."
    dag = {
        "nodes": [
            {"id": "b1", "type": "app-block", "status": "completed", "content": content},
            {"id": "b2", "type": "app-block", "status": "completed", "content": "# T\n\nThe app as the model wrote it"},
        ]
    }
    # When the errors say nothing of it, then it fails; when they name the block with the reason, it passes
    assert model_check.check_reasons(run(1), dag) == ["app-block b1 shipped its built-in page with no entry in errors"]
    noted = "Tides: The model's answer held no HTML document; the built-in app was used"
    assert model_check.check_reasons(run(1, errors=[{"block_id": "b1", "error": noted}]), dag) == []
