"""Whether the data analysis answers the question asked (canvas_core/analysis/): every question of the analyst
suite (bench/questions.py: three generated tables, questions of many kinds with answers computed in plain Python)
asked of the loaded tables through `answer_questions`, its opening line scored against the truth.

Figures: `analysis_questions_correct` (the share answered correctly, 0..1), `analysis_questions_silently_wrong`
(answered with a wrong or missing figure and no "cannot"), `analysis_questions_said_unanswerable` (answerable,
but the answer said it cannot) and `analysis_questions_total`. `python -m bench analysis_questions` runs it;
`python -m bench.analysis_questions --show` also lists each question not answered correctly with the opening it
got, and the share correct per kind of question.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from typing import Any

from bench.questions import CORRECT, Question, Score, questions, score, tables


def run_suite(model: Any = None, limit: int | None = None, notes: list[str] | None = None) -> Score:
    """The suite asked of the real analysis, each file loaded once and all its sheets given with each question;
    with `model` (a structured ask: analysis/model_queries.py), a model reads each question into its query, and
    `notes` collects why a model's query was refused (the rules then read the question)."""
    from canvas_core.analysis.analyse import answer_questions
    from canvas_core.analysis.engine import load_file

    loaded = {name: load_file(t.name, t.extension, t.data) for name, t in tables().items()}

    def ask(question: Question) -> str:
        answers = answer_questions(loaded[question.table], question.text, ask=model)
        if notes is not None:
            notes.extend(answers.notes)
        text: str = answers.text
        return text

    asked = questions()
    return score(asked[:limit] if limit else asked, ask)


def by_kind(result: Score) -> dict[str, tuple[int, int]]:
    """Each kind of question: how many were answered correctly, of how many."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for outcome in result.outcomes:
        counts[outcome.question.kind][0] += outcome.verdict == CORRECT
        counts[outcome.question.kind][1] += 1
    return {kind: (right, asked) for kind, (right, asked) in sorted(counts.items())}


def main(show: bool = False) -> None:
    result = run_suite()
    print(f"analysis_questions_correct {result.correct_share:.3f}")
    print(f"analysis_questions_silently_wrong {result.silently_wrong}")
    print(f"analysis_questions_said_unanswerable {result.said_unanswerable}")
    print(f"analysis_questions_total {result.total}")
    if show:
        for kind, (right, asked) in by_kind(result).items():
            print(f"  {kind}: {right}/{asked}")
        print(result.report())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.analysis_questions", description=__doc__)
    parser.add_argument("--show", action="store_true", help="list the questions not answered correctly")
    main(show=parser.parse_args().show)
