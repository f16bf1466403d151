"""Analysis by code: the tables a run was given or gathered, loaded into an in-process analytical engine
(DuckDB), and the analysis the prompt asks for computed there, so every number a deliverable or the answer
states comes from the engine and none from a model.

- `plan.py`: the analysis as data (`AnalysisPlan`: measures, the dimensions to break them down by, a period
  to sum them over, how many to rank) and its check against a table's schema.
- `engine.py`: the DuckDB adapter: a table loaded from CSV, XLSX, Parquet or rows (`Dataset`), and a plan run
  over it into result tables (totals, breakdowns with shares, series per period with growth, top and bottom N).
- `rules.py`: the plan chosen offline, from the prompt's words and the table's columns.
- `model.py`: the plan chosen by a model from the schema and a few sample rows (never every row), checked;
  an invalid plan falls back to the rules, with the reason.
- `findings.py`: what the results say, in sentences with their numbers, and the answer to the question.
"""
