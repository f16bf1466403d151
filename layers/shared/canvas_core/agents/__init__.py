"""The agents of a run, in three layers (docs/agents.md):

- the Planner (`planner.py` with `rules.py`, `prompts.py`, `schema.py`, `checks.py` here) splits the prompt into
  subtasks, chooses a block type for each within the run's constraint and wires them into a DAG;
- persona agents (`personas.py`: Researcher, Analyst, Writer, Reviewer, ...) own the blocks, one persona-task each;
- tool calls (model calls, searches, page fetches) are the tool-call-tasks under them.

`material.py` numbers the sources a block's inputs carry; `writer.py` says what the Writer is asked for and
builds the run's final answer. The text they share with the models is in `canvas_core/prompt_format.py`.
"""
