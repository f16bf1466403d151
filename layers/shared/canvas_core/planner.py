"""The planner: turns a run into a canvas (blocks and the edges that carry outputs forward) and the task tree
(one parent-task, a persona-task per block; tool-call-tasks are added as blocks run, one per tool call).

Uploads become blocks first (images → image-block, documents → file-block, whatever the constraint: the
contract's file rule). The Planner agent then splits the prompt into subtasks and chooses their block types
within the constraint (explicit `blocks`, else the template's): with a model, it asks for a JSON plan, checks
and repairs it (`agents/checks.py`), and asks again at most MAX_PLAN_ATTEMPTS times; with the offline
provider, or when the model's plans stay unusable or the model fails, it plans by rules (`agents/rules.py`).
See docs/agents.md.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from canvas_core.models.catalog import IMAGE_EXTENSIONS, BlockType, TaskStatus, TaskType
from canvas_core.models.items import EdgeItem, NodeItem, RunItem, TaskItem
from canvas_core.observability import count, logger, tracer

if TYPE_CHECKING:
    from pydantic import BaseModel

    from canvas_core.agents.checks import Checked, Constraint
    from canvas_core.agents.schema import PlanStep
    from canvas_core.providers.base import Completion, ModelProvider

MAX_BLOCKS = 40
MAX_PLAN_ATTEMPTS = 3
# No new attempt after this long: Plan Canvas has 300 s, and the rules plan at once.
PLAN_BUDGET_SECONDS = 120
MAX_NAME_CHARS = 80


@dataclass
class Plan:
    nodes: list[NodeItem] = field(default_factory=list)
    edges: list[EdgeItem] = field(default_factory=list)
    tasks: list[TaskItem] = field(default_factory=list)
    # What planning used: the models the Planner called, their credits, how it planned, what it repaired.
    models_used: list[str] = field(default_factory=list)
    credits: int = 0
    method: str = "rules"
    problems: list[str] = field(default_factory=list)
    # Why the Planner's model was not used when it was called (its call failed, its answer was cut off or never a
    # usable plan): the run's errors say so (orchestration.finalize_run).
    fallback: str | None = None
    # What else the run's errors say of planning: a model plan repaired (a cycle, an unknown input, a file the request
    # asked for and the plan left out), or asked without its schema because the endpoint refused it.
    notes: list[str] = field(default_factory=list)


@tracer.capture_method
def plan_canvas(run: RunItem, provider: ModelProvider | None = None) -> Plan:
    from canvas_core.agents.checks import check_plan, constraint_for
    from canvas_core.agents.rules import rule_steps
    from canvas_core.providers import get_provider, provider_name

    tracer.put_annotation("run_id", run.run_id)
    constraint = constraint_for(run.template, run.blocks, run.prompt)
    uploads = _upload_steps(run)
    provider = provider or get_provider()
    calls: list[tuple[str, int, int]] = []
    checked, method, fallback = None, "rules", None
    notes: list[str] = []
    if provider_name(provider) != "offline":
        why: list[str] = []
        checked = _plan_with_model(run, constraint, uploads, provider, calls, why, notes)
        method = "model" if checked is not None else "rules (the model gave no usable plan)"
        if checked is None:
            fallback = f"The Planner's model was not used ({'; '.join(why) or 'no usable plan'}); planned by rules"
        elif checked.problems:
            notes.append(f"The Planner's plan was repaired: {'; '.join(checked.problems[:6])}")
    if checked is None:
        steps = rule_steps(run.prompt, run.agent_instructions, constraint, uploads)
        checked = check_plan(steps, uploads, constraint, MAX_BLOCKS)

    plan = _build(run, checked.steps)
    plan.method, plan.problems, plan.fallback, plan.notes = method, checked.problems, fallback, notes
    plan.models_used = list(dict.fromkeys(model for model, _, _ in calls))
    plan.credits = _credits(calls)
    count("ModelInputTokens", sum(tokens for _, tokens, _ in calls), step="plan")
    count("ModelOutputTokens", sum(tokens for _, _, tokens in calls), step="plan")
    logger.info(
        "Plan made",
        extra={"method": method, "blocks": len(plan.nodes), "problems": checked.problems, "credits": plan.credits},
    )
    return plan


def _plan_with_model(
    run: RunItem,
    constraint: Constraint,
    uploads: list[PlanStep],
    provider: ModelProvider,
    calls: list[tuple[str, int, int]],
    why: list[str],
    notes: list[str],
) -> Checked | None:
    """A model's plan, checked and repaired; None when it failed or gave nothing usable in MAX_PLAN_ATTEMPTS
    (`why` then holds the reason)."""
    from canvas_core.agents.checks import check_plan
    from canvas_core.agents.prompts import planner_request, planner_system_prompt, replan_request
    from canvas_core.agents.schema import PlanParseError, parse_plan, planned_steps
    from canvas_core.errors import BlockFatalError, BlockRetryableError
    from canvas_core.providers.structured import StructuredOutputError, complete_structured

    system = planner_system_prompt(constraint, run.agent_instructions, MAX_BLOCKS)
    request = planner_request(run.prompt, run.template, uploads)
    schema = _plan_schema(constraint, uploads)
    prompt = request
    started = time.monotonic()
    for attempt in range(1, MAX_PLAN_ATTEMPTS + 1):
        if attempt > 1 and time.monotonic() - started > PLAN_BUDGET_SECONDS:
            logger.warning("The Planner ran out of time for another attempt; planning by rules")
            why.append(f"no usable plan within {PLAN_BUDGET_SECONDS} s")
            return None
        try:
            answer = complete_structured(
                provider, system=system, prompt=prompt, role="planner", schema=schema, name="plan"
            )
            completion: Completion | None = answer.completion
            steps: list[PlanStep] | None = planned_steps(answer.value)
            if answer.unconstrained and answer.unconstrained not in notes:
                notes.append(f"The Planner's model was asked without the plan's schema ({answer.unconstrained})")
        except StructuredOutputError as exc:
            # Not of the schema: read as a plan of the free shape ({"steps": [{"id", "type", "inputs"}]}) if it is one.
            completion, steps = exc.completion, None
        except (BlockRetryableError, BlockFatalError) as exc:
            logger.warning("The Planner's model call failed; planning by rules", extra={"reason": str(exc)})
            why.append(str(exc))
            return None
        assert completion is not None
        calls.append((completion.model_id, completion.input_tokens, completion.output_tokens))
        try:
            steps = steps if steps is not None else parse_plan(completion.text).steps
            checked = check_plan(steps, uploads, constraint, MAX_BLOCKS)
        except PlanParseError as exc:
            reason = str(exc)
        else:
            if checked.usable:
                return _with_asked_deliverables(run, constraint, uploads, checked)
            reason = "; ".join(checked.problems[-3:])
        logger.warning("The Planner's answer was not a usable plan", extra={"attempt": attempt, "reason": reason})
        prompt = replan_request(request, completion.text, reason)
    why.append(f"no usable plan in {MAX_PLAN_ATTEMPTS} attempts: {reason}")
    return None


def _plan_schema(constraint: Constraint, uploads: list[PlanStep]) -> type[BaseModel]:
    """The schema a model's plan is constrained to: this request's block types, the personas, the uploads' ids."""
    from canvas_core.agents.personas import PERSONAS
    from canvas_core.agents.schema import MODEL_MAX_STEPS, planned_canvas_schema

    allowed = [b.value for b in BlockType if b in constraint.allowed and b != BlockType.FILE]
    personas = [p for p in PERSONAS if p != "Planner"]
    steps = max(1, min(MODEL_MAX_STEPS, MAX_BLOCKS - len(uploads)))
    return planned_canvas_schema(allowed, personas, [u.id for u in uploads], steps)


def _with_asked_deliverables(
    run: RunItem, constraint: Constraint, uploads: list[PlanStep], checked: Checked
) -> Checked:
    """The model's plan with a file of each kind the request names that it left out (a report and a deck asked for,
    a deck planned): added reading the answer and the uploads, saying so among the plan's repairs."""
    from canvas_core.agents.catalog import DELIVERABLE_DUTIES, DELIVERABLE_TITLES
    from canvas_core.agents.checks import ANSWER_TITLE, check_plan
    from canvas_core.agents.deliverables import named_deliverables
    from canvas_core.agents.personas import persona_for
    from canvas_core.agents.schema import PlanStep

    if constraint.explicit or constraint.deliverable is not None:
        return checked
    planned = {s.type for s in checked.steps}
    missing = [b for b in named_deliverables(run.prompt) if b in constraint.allowed and b.value not in planned]
    if not missing:
        return checked
    answer = next((s.id for s in checked.steps if s.type == BlockType.TEXT.value and s.title == ANSWER_TITLE), None)
    reads = [*([answer] if answer else []), *(u.id for u in uploads)]
    added = [
        PlanStep(
            id=f"asked-{kind.value}",
            type=kind.value,
            title=DELIVERABLE_TITLES[kind],
            persona=persona_for(kind),
            instructions=f"{run.prompt}\n\n{DELIVERABLE_DUTIES[kind]}.",
            inputs=reads,
        )
        for kind in missing
    ]
    planned_steps = [s for s in checked.steps if s.upload_id is None]
    repaired = check_plan([*planned_steps, *added], uploads, constraint, MAX_BLOCKS)
    names = ", ".join(k.value for k in missing)
    repaired.problems = [*checked.problems, f"the request asks for {names}, which the plan left out; added"]
    return repaired


def _upload_steps(run: RunItem) -> list[PlanStep]:
    from canvas_core.agents.schema import PlanStep

    return [
        PlanStep(
            id=f"upload{i}",
            type=(BlockType.IMAGE if upload.extension in IMAGE_EXTENSIONS else BlockType.FILE).value,
            title=upload.name,
            upload_id=upload.file_id,
        )
        for i, upload in enumerate(run.uploads, start=1)
    ]


def _build(run: RunItem, steps: list[PlanStep]) -> Plan:
    from canvas_core.agents.personas import find_persona, persona_for

    plan = Plan()
    block_ids: dict[str, str] = {}
    for position, step in enumerate(steps):
        block_id = _stable_id(run.canvas_id, f"node:{position}")
        block_ids[step.id] = block_id
        persona = find_persona(step.persona)
        node = NodeItem(
            canvas_id=run.canvas_id,
            block_id=block_id,
            name=_name(step.title or step.type.removesuffix("-block").replace("-", " ").title()),
            type=step.type,
            inputs=[block_ids[i] for i in step.inputs],
            persona=persona.name if persona and persona.name != "Planner" else persona_for(step.type),
            position=position,
            upload_id=step.upload_id,
            instructions=None if step.upload_id else (step.instructions or step.title or run.prompt),
            url=step.url,
        )
        plan.nodes.append(node)
        plan.edges += [EdgeItem(source_id=source, target_id=block_id) for source in node.inputs]
    plan.tasks = task_tree(run, plan.nodes)
    return plan


def _credits(calls: list[tuple[str, int, int]]) -> int:
    from canvas_core.pricing import usage_credits

    return usage_credits(calls)


def _name(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_NAME_CHARS else text[: MAX_NAME_CHARS - 3].rstrip() + "..."


def task_tree(run: RunItem, nodes: list[NodeItem]) -> list[TaskItem]:
    """The parent-task of a canvas and a persona-task for each block (tool-call-tasks come as blocks run)."""
    parent = TaskItem(
        canvas_id=run.canvas_id,
        task_id=parent_task_id(run.canvas_id),
        name=f"Plan and answer: {_excerpt(run.prompt)}",
        task_type=TaskType.PARENT,
    )
    personas = [
        TaskItem(
            canvas_id=run.canvas_id,
            task_id=persona_task_id(run.canvas_id, node.block_id),
            parent_id=parent.task_id,
            name=f"{node.persona}: {node.name}",
            task_type=TaskType.PERSONA,
            block_id=node.block_id,
            position=i + 1,
        )
        for i, node in enumerate(nodes)
    ]
    return [parent, *personas]


def tool_call_tasks(node: NodeItem, usage: Any) -> list[TaskItem]:
    """The tool-call-tasks of a block that ran: one per model call, web search and page fetched, as its context's
    `Usage` recorded them. The first takes the id of the task the runner opened for the block; a block that
    called no tool keeps that one task (its own work, e.g. reading a file)."""
    names = [
        f"Model call: {model} ({tokens_in} tokens in, {tokens_out} out)" for model, tokens_in, tokens_out in usage.calls
    ]
    names += [f"Web search {i} of {usage.searches}" for i in range(1, usage.searches + 1)]
    names += [f"Page fetch {i} of {usage.pages_fetched}" for i in range(1, usage.pages_fetched + 1)]
    return [
        TaskItem(
            canvas_id=node.canvas_id,
            task_id=tool_call_task_id(node.canvas_id, node.block_id, index),
            parent_id=persona_task_id(node.canvas_id, node.block_id),
            name=name,
            task_type=TaskType.TOOL_CALL,
            status=TaskStatus.COMPLETED,
            block_id=node.block_id,
            position=1000 + node.position * 1000 + index,
        )
        for index, name in enumerate(names)
    ]


def parent_task_id(canvas_id: str) -> str:
    return _stable_id(canvas_id, "task:parent")


def persona_task_id(canvas_id: str, block_id: str) -> str:
    return _stable_id(canvas_id, f"task:persona:{block_id}")


def tool_call_task_id(canvas_id: str, block_id: str, index: int = 0) -> str:
    suffix = f":{index}" if index else ""
    return _stable_id(canvas_id, f"task:tool:{block_id}{suffix}")


def _stable_id(canvas_id: str, name: str) -> str:
    # Derived ids make a retried step write the same items instead of new ones.
    return str(uuid.uuid5(uuid.UUID(canvas_id), name))


def _excerpt(prompt: str, limit: int = 60) -> str:
    line = prompt.strip().splitlines()[0]
    return line if len(line) <= limit else line[: limit - 3].rstrip() + "..."
