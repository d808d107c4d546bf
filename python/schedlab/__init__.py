"""schedlab: a laboratory for CPU schedulers, from Python.

The simulations run in schedlab's Rust engine (the same code as the ``schedlab`` command), with the
interpreter released while they run. Inputs are named exactly as on the command line::

    import schedlab
    r = schedlab.run(workload="hackbench[groups=2]", policy="ule", machine="core2duo", duration="1s")
    r.tasks[["name", "run_ns", "wait_ns"]]        # a pandas DataFrame, one row per task
    c = schedlab.compare(["eevdf", "cfs", "ule"], workload="sysbench-oltp[threads=16]", repeat=3)
    c.table                                        # metrics x policies, as `schedlab compare` prints
    t = schedlab.sweep("grid.toml", client=dask_client)  # a grid of runs on a Dask cluster, one table

Bad input raises :class:`SchedlabError` with the message ``schedlab`` prints.
"""

from __future__ import annotations

import json
import os
from typing import Iterable, List, Optional, Sequence, Union

import pandas as pd

from . import _native, plot
from ._native import SchedlabError
from .results import Comparison, Run, RunLike, report_json
from .sweep import sweep

__all__ = [
    "SchedlabError",
    "Run",
    "Comparison",
    "policies",
    "machines",
    "workloads",
    "workload_toml",
    "run",
    "compare",
    "report",
    "plot",
    "sweep",
    "DEFAULT_COMPARE_POLICIES",
]

__version__ = "0.1.0"

#: What :func:`compare` runs without ``policies``: the same set as ``schedlab compare``.
DEFAULT_COMPARE_POLICIES: List[str] = [
    "eevdf", "cfs", "o1", "rsdl", "linux24", "bfs", "ule", "4bsd", "htfs", "vtrr",
]


def _params_frame(rows: list) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    return frame.set_index("name", drop=False)


def policies() -> pd.DataFrame:
    """Every registered policy: ``name``, ``summary`` and ``params`` (a list of dicts with ``key``,
    ``default`` and ``help``), as ``schedlab list policies`` prints them."""
    return _params_frame(json.loads(_native.policies()))


def machines() -> pd.DataFrame:
    """The machine presets: ``name``, ``cpus``, ``hz``, ``description``."""
    return _params_frame(json.loads(_native.machines()))


def workloads() -> pd.DataFrame:
    """The built-in workload generators: ``name``, ``summary``, ``score``, ``params`` (a list of dicts
    with ``key``, ``default``, ``help`` and ``source``: where a time or cost default comes from,
    ``"source: ..."`` or ``"no source: ..."``, else ``None``)."""
    return _params_frame(json.loads(_native.workloads()))


def workload_toml(spec: str) -> str:
    """A workload (built-in spec or file) as editable TOML, as ``schedlab workload show``."""
    return _native.workload_toml(spec)


def run(
    workload: str = "demo",
    policy: str = "cfs",
    machine: str = "xeon-e5520-2s",
    duration: Optional[str] = None,
    seed: int = 1,
    hz: Optional[int] = None,
    governor: Optional[str] = None,
    sample_interval: str = "10ms",
    sample_tasks: bool = False,
    check: bool = False,
) -> Run:
    """Simulate ``workload`` under ``policy`` on ``machine`` (the options of ``schedlab run``).

    ``workload``: a built-in spec (``hogs[n=400]``), a workload TOML file or an rt-app JSON file;
    ``policy``: ``name`` or ``name[key=value,...]`` or a policy TOML file; ``machine``: a preset or a
    machine TOML file; ``duration``: simulated time with a unit (``"2s"``; default: the workload's own,
    else 10 s); ``sample_interval``: time-series interval (``"0s"`` for none); ``sample_tasks``: also
    sample each task's cumulative run time; ``check``: check invariants after every event.
    """
    text = _native.run(
        os.fspath(machine), os.fspath(policy), os.fspath(workload), duration, seed, hz, governor,
        sample_interval, sample_tasks, check,
    )
    return Run(json.loads(text))


def compare(
    policies: Optional[Sequence[str]] = None,
    workload: str = "demo",
    machine: str = "xeon-e5520-2s",
    duration: Optional[str] = None,
    seed: int = 1,
    repeat: int = 1,
    baseline: Optional[str] = None,
    governor: Optional[str] = None,
) -> Comparison:
    """Run several policies on the identical machine, workload and seeds (``schedlab compare``).

    Each policy runs with seeds ``seed`` .. ``seed + repeat - 1``; the result's :attr:`Comparison.table`
    holds each metric's mean per policy and :attr:`Comparison.diff_pct` the difference against the
    baseline (``eevdf`` if listed, else the first policy).
    """
    specs = list(policies) if policies is not None else list(DEFAULT_COMPARE_POLICIES)
    cmp_text, runs_text = _native.compare(
        specs, os.fspath(workload), os.fspath(machine), duration, seed, repeat, baseline, governor
    )
    runs = json.loads(runs_text)
    return Comparison(json.loads(cmp_text), {p: [Run(r) for r in rs] for p, rs in zip(specs, runs)})



def report(runs: Iterable[RunLike], output: Union[str, "os.PathLike[str]"] = "report.html") -> str:
    """Write the HTML report of ``schedlab report`` for ``runs`` (Run objects, report dicts or JSON
    files; the first is the baseline) to ``output``; returns the path written."""
    texts = [report_json(r) for r in runs]
    page = _native.report_html(texts)
    path = os.fspath(output)
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path
