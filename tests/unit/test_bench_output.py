"""bench/output.py: `python -m bench` shows its figures alone on standard output; what the code under test logs
goes to the log file."""

from __future__ import annotations

import logging

import pytest
from aws_lambda_powertools import Logger

from bench.output import figures_only

pytestmark = pytest.mark.unit


def test_figures_reach_stdout_and_logs_reach_the_log_file(tmp_path, capsys):
    # Given
    log_path = tmp_path / "out" / "bench.log"
    # When a benchmark builds a Powertools Logger (as importing a handler does), moto logs an error and the
    # benchmark prints its figures
    with figures_only(log_path):
        Logger(service="bench-test").info("block finished", extra={"block_id": "b1"})
        logging.getLogger("moto.stepfunctions.parser").error("NoSuchJsonPathError: $.missing")
        print("makespan_ratio_p50 1.042")
        print("dags", 32)
    # Then standard output holds the figures alone, the log file the rest
    out = capsys.readouterr()
    assert out.out == "makespan_ratio_p50 1.042\ndags 32\n"
    assert out.err == ""
    log = log_path.read_text()
    assert '"message":"block finished"' in log and '"service":"bench-test"' in log
    assert "ERROR moto.stepfunctions.parser: NoSuchJsonPathError: $.missing" in log
    assert "makespan_ratio" not in log


def test_print_and_logging_are_as_before_once_the_benchmarks_end(tmp_path, capsys):
    # Given
    with figures_only(tmp_path / "bench.log"):
        pass
    # When
    print("after")
    logging.getLogger("moto").error("after the run")
    # Then
    out = capsys.readouterr()
    assert out.out == "after\n"
    assert "after the run" not in (tmp_path / "bench.log").read_text()
