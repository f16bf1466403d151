"""A plan is checked before it runs, and repaired where it can be: block types within the run's constraint,
inputs that exist, no cycles, at most `max_blocks` blocks (planner.MAX_BLOCKS), one Writer that reads every
loose end, and a deliverable template's canvas ending in its deliverable block. Each repair is reported as a
problem; a plan with no usable step is not repaired (the planner asks again, or plans by rules). The
deliverable reads every upload itself, whoever planned it."""

from __future__ import annotations

from dataclasses import dataclass, field

from canvas_core.agents.catalog import DELIVERABLE_DUTIES, DELIVERABLE_TITLES, TEMPLATE_DELIVERABLE
from canvas_core.agents.schema import PlanStep
from canvas_core.models.catalog import TEMPLATE_BLOCKS, BlockType, Template

ANSWER_TITLE = "Answer"
WRITER_TASK = "Write the answer to the question from the team's findings."


@dataclass(frozen=True)
class Constraint:
    """The block types a run may use: its explicit `blocks`, else its template's (the contract's precedence)."""

    template: Template
    allowed: frozenset[BlockType]
    explicit: tuple[BlockType, ...] = ()
    prompt: str = ""

    @property
    def deliverable(self) -> BlockType | None:
        """The block the canvas must end in: the template's deliverable, unless explicit blocks replace it."""
        return None if self.explicit else TEMPLATE_DELIVERABLE.get(self.template)

    @property
    def ordered(self) -> list[BlockType]:
        return [b for b in BlockType if b in self.allowed]


def constraint_for(template: str, blocks: list[str] | None, prompt: str = "") -> Constraint:
    if blocks:
        explicit = tuple(dict.fromkeys(BlockType(b) for b in blocks))
        return Constraint(Template(template), frozenset(explicit), explicit, prompt)
    return Constraint(Template(template), TEMPLATE_BLOCKS[Template(template)], (), prompt)


@dataclass
class Checked:
    steps: list[PlanStep]  # uploads and planned steps, in run order
    problems: list[str] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        return any(s.upload_id is None for s in self.steps)


def check_plan(steps: list[PlanStep], uploads: list[PlanStep], constraint: Constraint, max_blocks: int) -> Checked:
    """The plan made valid: `uploads` (fixed blocks) first, then `steps` repaired as needed."""
    problems: list[str] = []
    fixed = [u.model_copy(deep=True) for u in uploads]
    taken = {u.id for u in fixed}
    kept: list[PlanStep] = []
    dropped: dict[str, list[str]] = {}

    for original in steps:
        step = original.model_copy(deep=True)
        step.upload_id = None  # only the planner's upload blocks read uploads
        if step.id in taken:
            new_id = _unique(step.id, taken)
            problems.append(f"step id '{step.id}' is used twice; renamed to '{new_id}'")
            step.id = new_id
        taken.add(step.id)
        block_type = step.block_type
        reason = None
        if block_type is None:
            reason = f"'{step.type}' is not a block type"
        elif block_type == BlockType.FILE:
            reason = "file-blocks are created for uploads only"
        elif block_type not in constraint.allowed:
            allowed = ", ".join(b.value for b in constraint.ordered)
            reason = f"{block_type.value} is not allowed here (allowed: {allowed})"
        if reason:
            problems.append(f"step '{step.id}' dropped: {reason}")
            dropped[step.id] = step.inputs
            continue
        kept.append(step)

    known = {s.id for s in fixed} | {s.id for s in kept}
    for step in kept:
        step.inputs = _resolve(step, dropped, known, problems)

    if not kept:
        return Checked(fixed, [*problems, "the plan has no usable step"])

    deliverable = _ensure_deliverable(kept, constraint, taken, problems)
    answer = _ensure_writer(kept, fixed, constraint, deliverable, taken, problems)
    _limit_size(kept, fixed, deliverable, answer, max_blocks, problems)
    ordered = _order(fixed + kept, deliverable, problems)
    _wire_loose_ends(ordered, deliverable, answer)
    if deliverable is not None:
        # The uploads reach the file as data (tables, images), not only as what the answer says of them.
        deliverable.inputs += [u.id for u in fixed if u.id not in deliverable.inputs]
    return Checked(_order(ordered, deliverable, problems), problems)


def _unique(base: str, taken: set[str]) -> str:
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


def _resolve(step: PlanStep, dropped: dict[str, list[str]], known: set[str], problems: list[str]) -> list[str]:
    """Inputs that exist: a dropped step's inputs stand in for it; unknown ids and self-references go."""
    resolved: list[str] = []
    pending, seen = list(step.inputs), set()
    while pending:
        ref = pending.pop(0)
        if ref in seen:
            continue
        seen.add(ref)
        if ref in dropped:
            pending = dropped[ref] + pending
        elif ref == step.id:
            problems.append(f"step '{step.id}' read its own output; that input was removed")
        elif ref not in known:
            problems.append(f"step '{step.id}' read an unknown step '{ref}'; that input was removed")
        elif ref not in resolved:
            resolved.append(ref)
    return resolved


def _ensure_deliverable(
    kept: list[PlanStep], constraint: Constraint, taken: set[str], problems: list[str]
) -> PlanStep | None:
    wanted = constraint.deliverable
    if wanted is None:
        return None
    found = [s for s in kept if s.block_type == wanted]
    if not found:
        problems.append(f"the {constraint.template.value} template ends in a {wanted.value}; one was added")
        step = PlanStep(
            id=_unique("deliverable", taken),
            type=wanted.value,
            title=DELIVERABLE_TITLES[wanted],
            instructions=f"{constraint.prompt}\n\n{DELIVERABLE_DUTIES[wanted]}.".strip(),
        )
        taken.add(step.id)
        kept.append(step)
        return step
    deliverable = found[-1]
    for extra in found[:-1]:
        problems.append(f"step '{extra.id}' dropped: the canvas ends in one {wanted.value}")
        _remove(kept, extra)
    for step in kept:
        if deliverable.id in step.inputs:
            problems.append(f"step '{step.id}' read the deliverable; nothing may follow it")
            step.inputs = _replace(step.inputs, deliverable.id, deliverable.inputs)
    return deliverable


def _ensure_writer(
    kept: list[PlanStep],
    fixed: list[PlanStep],
    constraint: Constraint,
    deliverable: PlanStep | None,
    taken: set[str],
    problems: list[str],
) -> PlanStep | None:
    if BlockType.TEXT not in constraint.allowed:
        return None
    writers = [s for s in kept if s.block_type == BlockType.TEXT]
    if writers:
        return writers[-1]
    problems.append("the plan had no Writer (text-block) to write the answer; one was added")
    answer = PlanStep(
        id=_unique("answer", taken),
        type=BlockType.TEXT.value,
        title=ANSWER_TITLE,
        persona="Writer",
        instructions=WRITER_TASK,
    )
    taken.add(answer.id)
    kept.insert(kept.index(deliverable) if deliverable in kept else len(kept), answer)
    return answer


def _limit_size(
    kept: list[PlanStep],
    fixed: list[PlanStep],
    deliverable: PlanStep | None,
    answer: PlanStep | None,
    max_blocks: int,
    problems: list[str],
) -> None:
    excess = len(fixed) + len(kept) - max_blocks
    if excess <= 0:
        return
    problems.append(f"the plan had {len(fixed) + len(kept)} blocks (at most {max_blocks}); {excess} were dropped")
    droppable = [s for s in kept if s is not deliverable and s is not answer]
    # The files the request asks for are dropped last: the steps that feed them go first, from the end.
    droppable = [s for s in droppable if s.block_type in DELIVERABLE_TITLES] + [
        s for s in droppable if s.block_type not in DELIVERABLE_TITLES
    ]
    for step in reversed(droppable[-excess:]):
        _remove(kept, step)


def _remove(kept: list[PlanStep], step: PlanStep) -> None:
    kept.remove(step)
    for other in kept:
        if step.id in other.inputs:
            other.inputs = _replace(other.inputs, step.id, step.inputs)


def _replace(inputs: list[str], old: str, new: list[str]) -> list[str]:
    out: list[str] = []
    for ref in inputs:
        for r in new if ref == old else [ref]:
            if r not in out:
                out.append(r)
    return out


def _order(steps: list[PlanStep], deliverable: PlanStep | None, problems: list[str]) -> list[PlanStep]:
    """Run order: each step after its inputs, otherwise as listed, the deliverable last; a cycle is broken at
    its earliest-listed step by dropping the inputs that close it."""
    rank = {s.id: i for i, s in enumerate(steps)}
    if deliverable is not None:
        rank[deliverable.id] = len(steps)
    by_id = {s.id: s for s in steps}
    done: set[str] = set()
    ordered: list[PlanStep] = []
    remaining = sorted(steps, key=lambda s: rank[s.id])
    while remaining:
        ready = next((s for s in remaining if all(i in done for i in s.inputs)), None)
        if ready is None:
            ready = remaining[0]
            closing = [i for i in ready.inputs if i not in done]
            problems.append(f"step '{ready.id}' was in a cycle; its inputs {closing} were removed")
            ready.inputs = [i for i in ready.inputs if i in done]
        ordered.append(by_id[ready.id])
        done.add(ready.id)
        remaining.remove(ready)
    return ordered


def _wire_loose_ends(ordered: list[PlanStep], deliverable: PlanStep | None, answer: PlanStep | None) -> None:
    """Outputs nothing reads go to the Writer (or the deliverable), so every block's work reaches the answer."""
    read = {i for s in ordered for i in s.inputs}
    upstream_of_answer = _ancestors(answer, ordered) if answer else set()
    for step in ordered:
        if step is deliverable or step is answer or step.id in read:
            continue
        if answer is not None and answer.id not in _ancestors(step, ordered):
            answer.inputs.append(step.id)
        elif deliverable is not None:
            deliverable.inputs.append(step.id)
    if (
        answer is not None
        and deliverable is not None
        and answer.id not in deliverable.inputs
        and deliverable.id not in upstream_of_answer
    ):
        deliverable.inputs.append(answer.id)


def _ancestors(step: PlanStep, steps: list[PlanStep]) -> set[str]:
    by_id = {s.id: s for s in steps}
    found: set[str] = set()
    pending = list(step.inputs)
    while pending:
        ref = pending.pop()
        if ref not in found and ref in by_id:
            found.add(ref)
            pending += by_id[ref].inputs
    return found
