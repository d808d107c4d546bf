"""Results as pandas DataFrames: one run (:class:`Run`) and a comparison (:class:`Comparison`).

Every frame is built from the run's ``schedlab.run/1`` JSON report (docs/metrics.md defines each
field), which stays available unchanged as :attr:`Run.json`.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Union

import pandas as pd


def _flatten(prefix: str, value: Any, out: Dict[str, Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else k, v, out)
    elif not isinstance(value, list):
        out[prefix] = value


def _table(items: List[Dict[str, Any]]) -> pd.DataFrame:
    """One row per item (task or CPU), nested values flattened, indexed by ``id``."""
    rows = []
    for item in items:
        flat: Dict[str, Any] = {}
        _flatten("", item, flat)
        rows.append(flat)
    return pd.DataFrame(rows).set_index("id", drop=False)


class Run:
    """One simulated (or real, or traced) run: the report and its tables."""

    def __init__(self, report: Dict[str, Any]):
        #: The whole report, as ``schedlab run --json`` writes it.
        self.json: Dict[str, Any] = report

    def __repr__(self) -> str:
        return (
            f"<schedlab.Run policy={self.policy!r} workload={self.workload!r} machine={self.machine!r} "
            f"seed={self.json.get('seed')}>"
        )

    @property
    def policy(self) -> str:
        """The policy spec of the run."""
        return self.json["policy"]

    @property
    def workload(self) -> str:
        """The workload name."""
        return self.json["workload"]

    @property
    def machine(self) -> str:
        """The machine name."""
        m = self.json["machine"]
        return m["name"] if isinstance(m, dict) else m

    @property
    def summary(self) -> pd.Series:
        """The run's summary metrics, nested keys joined with dots (``wakeup_latency.p99_ns``)."""
        flat: Dict[str, Any] = {}
        _flatten("", self.json["summary"], flat)
        return pd.Series(flat, name=self.policy)

    @property
    def tasks(self) -> pd.DataFrame:
        """One row per task: ``id``, ``name``, ``nice``, ``run_ns``, ``wait_ns``, ``sleep_ns``, ...;
        nested values (wakeup latency, counters, policy values) flattened with dots."""
        return _table(self.json["tasks"])

    @property
    def cpus(self) -> pd.DataFrame:
        """One row per CPU: ``id``, ``node``, ``busy_ns``, ``idle_ns``, ``overhead_ns``, ..."""
        return _table(self.json["cpus"])

    @property
    def policy_stats(self) -> pd.Series:
        """The policy's own counters."""
        return pd.Series({s["name"]: s["value"] for s in self.json["policy_stats"]}, dtype="int64")

    def distribution(self, name: str = "wakeup_latency") -> pd.DataFrame:
        """A whole distribution of the run, ``wakeup_latency`` or ``run_length`` (docs/metrics.md,
        "Distributions"): one row per histogram bucket holding values, with ``low_ns``, ``high_ns``
        (values lay in ``[low_ns, high_ns)``), ``count`` and ``cdf``, the fraction of all values
        below ``high_ns``."""
        buckets = (self.json.get("distributions") or {}).get(name)
        if buckets is None:
            raise KeyError(f"no distribution {name!r}: wakeup_latency or run_length")
        frame = pd.DataFrame(buckets, columns=["low_ns", "high_ns", "count"])
        total = frame["count"].sum()
        frame["cdf"] = frame["count"].cumsum() / total if total else frame["count"].astype(float)
        return frame

    @property
    def series(self) -> pd.DataFrame:
        """The sampled time series, indexed by ``time_ns``: ``nr_running.cpuN`` per CPU, cumulative
        ``switches`` and ``migrations``, and ``run_ns.<task>`` per task for runs made with
        ``sample_tasks=True``."""
        s = self.json.get("series") or {}
        times = s.get("time_ns", [])
        data: Dict[str, List[Any]] = {}
        for cpu, values in enumerate(s.get("nr_running", [])):
            data[f"nr_running.cpu{cpu}"] = values
        for key in ("switches", "migrations"):
            if key in s:
                data[key] = s[key]
        # A task created after the first sample has a shorter row, ending at the last sample.
        for t, values in zip(self.json["tasks"], s.get("task_run_ns") or []):
            data[f"run_ns.{t['name']}"] = [None] * (len(times) - len(values)) + list(values)
        return pd.DataFrame(data, index=pd.Index(times, name="time_ns"))

    @property
    def policy_values(self) -> pd.DataFrame:
        """The policy's values of each task over time (``series.task_policy``, with
        ``sample_tasks=True``): one row per task, value and sample, columns ``time_ns``, ``task``,
        ``value`` (its name, such as ULE's ``ule interactivity score``) and ``v``; samples where the
        task had no such value are left out. Empty without per-task samples."""
        s = self.json.get("series") or {}
        times = s.get("time_ns", [])
        rows: List[Any] = []
        for name, per_task in (s.get("task_policy") or {}).items():
            for t, values in zip(self.json["tasks"], per_task):
                # A row covers the newest samples (aligned to the end).
                for at, v in zip(times[len(times) - len(values):], values):
                    if v is not None:
                        rows.append((at, t["name"], name, v))
        return pd.DataFrame(rows, columns=["time_ns", "task", "value", "v"])

    # Plotting helpers (matplotlib, imported on use).

    def plot_runnable(self, ax: Optional[Any] = None) -> Any:
        """Runnable tasks per CPU over time (the report's heat map, as lines)."""
        ax = _axes(ax)
        frame = self.series.filter(like="nr_running.")
        for col in frame.columns:
            ax.step(frame.index / 1e9, frame[col], where="post", label=col.split(".", 1)[1])
        ax.set(xlabel="simulated time [s]", ylabel="runnable tasks", title=f"{self.policy}: runnable per CPU")
        return ax

    def plot_cumulative_runtime(self, ax: Optional[Any] = None) -> Any:
        """Cumulative run time of each task (needs ``sample_tasks=True``), the seed 002 figure style."""
        ax = _axes(ax)
        frame = self.series.filter(like="run_ns.")
        if frame.empty:
            raise ValueError("this run has no per-task samples: run it with sample_tasks=True")
        for col in frame.columns:
            ax.plot(frame.index / 1e9, frame[col] / 1e9, label=col.split(".", 1)[1])
        ax.set(xlabel="simulated time [s]", ylabel="run time [s]", title=f"{self.policy}: cumulative run time")
        return ax

    def plot_elapsed(self, ax: Optional[Any] = None) -> Any:
        """Run, wait and sleep time per task, stacked."""
        ax = _axes(ax)
        t = self.tasks
        bottom = None
        for col in ("run_ns", "wait_ns", "sleep_ns"):
            ax.bar(t["name"], t[col] / 1e9, bottom=bottom, label=col[:-3])
            bottom = t[col] / 1e9 if bottom is None else bottom + t[col] / 1e9
        ax.set(ylabel="time [s]", title=f"{self.policy}: time per task")
        ax.legend()
        return ax


class Comparison:
    """Several policies on the same machine, workload and seeds (``schedlab compare --json``)."""

    def __init__(self, result: Dict[str, Any], runs: Dict[str, List[Run]]):
        #: The comparison as ``schedlab compare --json`` writes it (schema ``schedlab.compare/1``).
        self.json: Dict[str, Any] = result
        #: Each policy's runs, one per seed.
        self.runs: Dict[str, List[Run]] = runs

    def __repr__(self) -> str:
        return f"<schedlab.Comparison policies={list(self.runs)} baseline={self.baseline!r}>"

    @property
    def baseline(self) -> str:
        """The policy the others are compared with."""
        return self.json["baseline"]

    def _frame(self, cell_value) -> pd.DataFrame:
        rows = {}
        for row in self.json["rows"]:
            rows[row["metric"]] = {c["policy"]: cell_value(c) for c in row["cells"]}
        frame = pd.DataFrame.from_dict(rows, orient="index")
        frame.index.name = "metric"
        return frame

    @property
    def table(self) -> pd.DataFrame:
        """Metric means: one row per metric, one column per policy."""
        return self._frame(lambda c: c["stat"]["mean"])

    @property
    def ci95(self) -> pd.DataFrame:
        """Half-widths of the 95 % confidence intervals of :attr:`table` (0 for one seed)."""
        return self._frame(lambda c: c["stat"]["ci95"])

    @property
    def diff_pct(self) -> pd.DataFrame:
        """Differences against the baseline in percent (NaN for the baseline itself)."""
        return self._frame(lambda c: c["diff_pct"]).astype(float)

    @property
    def per_run(self) -> pd.DataFrame:
        """One row per run (policy and seed) with its summary metrics."""
        rows = []
        for policy, runs in self.runs.items():
            for r in runs:
                s = r.summary
                rows.append({"policy": policy, "seed": r.json.get("seed"), **s.to_dict()})
        return pd.DataFrame(rows)

    def plot(self, metric: str, ax: Optional[Any] = None) -> Any:
        """One metric per policy as bars with 95 % confidence intervals."""
        ax = _axes(ax)
        mean, ci = self.table.loc[metric], self.ci95.loc[metric]
        ax.bar(mean.index, mean.values, yerr=ci.values, capsize=3)
        ax.set(ylabel=metric, title=metric)
        return ax


def _axes(ax: Optional[Any]) -> Any:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots()
    return ax


#: A run as the functions taking runs accept it: a :class:`Run`, a report dict, or a JSON file.
RunLike = Union[Run, dict, str, "os.PathLike[str]"]


def report_json(r: RunLike) -> str:
    """The ``schedlab.run/1`` JSON text of a run given as a :class:`Run`, a dict or a file."""
    if isinstance(r, Run):
        return json.dumps(r.json)
    if isinstance(r, dict):
        return json.dumps(r)
    with open(os.fspath(r), encoding="utf-8") as f:
        return f.read()
