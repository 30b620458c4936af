"""The gate's paired data in ``eval_results``: one row per golden item and version, by run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefect import task

from infra.task_retries import IO_RETRIES

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from tasks.release.gate.gate import GateResult


def write_eval_results(catalog: Catalog, result: GateResult) -> int:
    """Replace this run's rows in ``eval_results`` (a rerun of a run id never duplicates)."""
    from pyiceberg.expressions import EqualTo

    from infra.catalog import replace_where

    rows = result.eval_rows()
    replace_where(catalog, "eval_results", EqualTo("run_id", result.run_id), rows)
    return len(rows)


@task(**IO_RETRIES)
def write_eval_results_task(catalog: Catalog, result: GateResult) -> int:
    """Returns how many eval_results rows the gate run wrote."""
    return write_eval_results(catalog, result)
