"""A scripted stand-in for the service's /v1 API over HTTP (on tests.fakes.servers.FakeWeb), for the `canvas`
client commands: a run that answers each poll with the next of its scripted states, its canvas, its files.

    with FakeCanvasApi() as api:
        run = api.script_run([api.running(1, 4), api.failed("no output")])
        main(["wait", run.run_id, "--base-url", api.url(), "--api-key", api.key])
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Self

from tests.fakes.servers import FakeWeb, Request, Response

KEY = "sk_canvas_fake_api_key"


@dataclass
class ScriptedRun:
    run_id: str
    canvas_id: str
    states: list[dict[str, Any]]
    polls: int = 0
    files: dict[str, bytes] = field(default_factory=dict)


def json_response(value: object, status: int = 200, headers: dict[str, str | None] | None = None) -> Response:
    return Response(status, json.dumps(value).encode(), {"Content-Type": "application/json", **(headers or {})})


class FakeCanvasApi(FakeWeb):
    key = KEY

    def __enter__(self) -> Self:
        super().__enter__()
        return self

    def script_run(self, states: list[dict[str, Any]], files: dict[str, bytes] | None = None) -> ScriptedRun:
        """A run whose polls answer `states` in turn (the last one for good), created by POST /v1/run."""
        run = ScriptedRun(str(uuid.uuid4()), str(uuid.uuid4()), states, files=files or {})

        def create(request: Request) -> Response:
            if request.headers.get("x-api-key") != KEY:
                return json_response({"success": False, "error": "Invalid or revoked API key"}, 401)
            data = {
                "run_id": run.run_id,
                "status": "running",
                "poll_url": f"/v1/run/{run.run_id}",
                "estimated_duration_ms": 60_000,
                "canvas_id": run.canvas_id,
            }
            return json_response({"success": True, "data": data})

        def poll(_: Request) -> Response:
            state = run.states[min(run.polls, len(run.states) - 1)]
            run.polls += 1
            data = {"run_id": run.run_id, "canvas_id": run.canvas_id, "prompt": "p", "template": "auto", **state}
            return json_response({"success": True, "data": data})

        self.route("/v1/run", create)
        self.route(f"/v1/run/{run.run_id}", poll)
        dag = {"canvas_id": run.canvas_id, "canvas_name": "p", "nodes": [], "edges": []}
        self.route(f"/v1/canvas/{run.canvas_id}/dag", json_response({"success": True, "data": dag}))
        for name, data in run.files.items():
            self.route(f"/files/{name}", Response(200, data, {"Content-Type": "application/octet-stream"}))
        return run

    def artifact(self, name: str, size_bytes: int) -> dict[str, Any]:
        return {
            "id": str(uuid.uuid4()),
            "type": name.rsplit(".", 1)[-1],
            "name": name,
            "download_url": self.url(f"/files/{name}"),
            "size_bytes": size_bytes,
        }

    @staticmethod
    def running(done: int, total: int) -> dict[str, Any]:
        return {"status": "running", "progress": {"tasks_completed": done, "tasks_total": total, "elapsed_ms": 1000}}

    @staticmethod
    def ended(status: str, output: str = "", artifacts: list | None = None, errors: list | None = None) -> dict:
        state: dict[str, Any] = {
            "status": status,
            "duration_ms": 2000,
            "metadata": {"template_used": "auto", "models_used": [], "credits_consumed": 3},
            "errors": errors or [],
        }
        if status != "failed":
            state["result"] = {"final_output": output, "artifacts": artifacts or []}
        return state
