"""Sweeps of a grid (the grid file of ``schedlab sweep``, docs/sweep.md) on local processes or a Dask
cluster.

Each cell (one machine x workload x policy x seed) is one simulation, run by the native engine in a
worker process. As each result arrives it is appended to the output directory's journal
(``rows.jsonl``, the same journal as ``schedlab sweep``), so an interrupted sweep, from Python or
from the command line, resumes with the runs still missing. When all cells are done the results are
written by the same code as the command (``results.csv``, ``results.json``) and returned as one
DataFrame. A cell whose run fails is a row with ``status == "error"`` and its message; the other
cells still run.
"""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Iterator, List, Optional, Tuple, Union

import pandas as pd

from . import _native

PathLike = Union[str, "os.PathLike[str]"]


def run_cell(grid: str, index: int, reports: Optional[str] = None) -> str:
    """Run cell ``index`` of ``grid`` and return its journal row (JSON text). This is the task a
    worker process runs; ``schedlab`` must be importable there."""
    return _native.sweep_cell(grid, index, reports)


def _key(row: dict) -> Tuple[Any, ...]:
    return (row["machine"], row["workload"], row["policy"], row["seed"], row["duration_ns"])


def _error_row(cell: dict, message: str) -> str:
    """A journal row for a cell whose worker failed (crashed, lost, or could not import schedlab)."""
    row = {k: cell[k] for k in ("machine", "workload", "policy", "seed", "duration_ns")}
    row.update(status="error", error=message, summary=None, metrics={})
    return json.dumps(row)


def _local(grid: str, cells: List[dict], jobs: Optional[int], reports: Optional[str]) -> Iterator[str]:
    with ProcessPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        futures = {pool.submit(run_cell, grid, c["index"], reports): c for c in cells}
        for f in as_completed(futures):
            try:
                yield f.result()
            except Exception as e:  # a worker died: this cell fails, the others go on
                yield _error_row(futures[f], f"worker failed: {e!r}")


def _dask(grid: str, cells: List[dict], client: Any, reports: Optional[str]) -> Iterator[str]:
    from dask.distributed import as_completed as dask_completed

    n = len(cells)
    futures = client.map(run_cell, [grid] * n, [c["index"] for c in cells], [reports] * n, pure=False)
    cell_of = {f.key: c for f, c in zip(futures, cells)}
    for f in dask_completed(futures):
        try:
            yield f.result()
        except Exception as e:
            yield _error_row(cell_of[f.key], f"worker failed: {e!r}")
        finally:
            f.release()


def sweep(
    grid: PathLike,
    client: Any = None,
    out: Optional[PathLike] = None,
    jobs: Optional[int] = None,
    reports: bool = False,
    fresh: bool = False,
    progress: bool = False,
) -> pd.DataFrame:
    """Run every cell of ``grid`` and return the results table (``results.csv`` as a DataFrame).

    ``client``: a ``dask.distributed.Client`` to run the cells on its cluster (one task per cell);
    ``None`` runs them on ``jobs`` local processes (default: one per CPU). ``out``: the output
    directory (default ``<grid name>-sweep``); an earlier sweep's journal there is resumed unless
    ``fresh``. ``reports``: also keep each run's full report in ``out/runs/NNNN.json`` (workers must
    see ``out``). ``progress``: print ``done/total`` on standard error as results arrive.

    Relative file names in the grid are found beside the grid file; with a cluster, workers must
    see the grid and the files it names at the same paths (a shared file system), or use built-ins.
    """
    grid_path = os.path.abspath(os.fspath(grid))
    plan = json.loads(_native.sweep_plan(grid_path))
    out_dir = Path(out if out is not None else f"{plan['name']}-sweep").absolute()
    out_dir.mkdir(parents=True, exist_ok=True)
    journal = out_dir / "rows.jsonl"
    if fresh and journal.exists():
        journal.unlink()
    done = {_key(r) for r in json.loads(_native.sweep_journal(str(out_dir))) if r["status"] == "ok"}
    pending = [c for c in plan["cells"] if _key(c) not in done]
    runs_dir = None
    if reports:
        runs_dir = out_dir / "runs"
        runs_dir.mkdir(exist_ok=True)
        runs_dir = str(runs_dir)
    if pending:
        results = _local(grid_path, pending, jobs, runs_dir) if client is None else _dask(
            grid_path, pending, client, runs_dir
        )
        with open(journal, "a", encoding="utf-8") as j:
            for k, line in enumerate(results, 1):
                j.write(line + "\n")
                j.flush()
                if progress:
                    print(f"\rsweep {plan['name']}: {k}/{len(pending)}", end="", file=sys.stderr, flush=True)
        if progress:
            print(file=sys.stderr)
    csv_path, _ = _native.sweep_finish(grid_path, str(out_dir))
    table = pd.read_csv(csv_path, keep_default_na=False, na_values=[""])
    table.attrs["out"] = str(out_dir)
    table.attrs["ran_now"] = len(pending)
    return table
