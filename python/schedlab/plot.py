"""The figures of ``schedlab report``, from Python.

The specifications are the report page's own (built by the same Rust code), so a figure in a
notebook is the figure on the page: the per-CPU timeline, runnable tasks per CPU, cumulative run time
per task, each task's policy values over time, context switches and migrations per second, the wakeup-latency and run-length CDFs, each
task's run lengths and the sorted elapsed times. Each is a :class:`Figure`, a Vega-Lite specification with its data inlined.
In Jupyter it shows as an image (PNG, rendered by ``vl-convert``, the Vega project's converter, with
no browser); :meth:`Figure.save` writes SVG, PNG, a self-contained HTML page or the JSON
specification::

    import schedlab
    from schedlab import plot
    runs = [schedlab.run(policy=p, workload="hackbench[groups=1]", machine="core2duo") for p in ("cfs", "ule")]
    plot.timeline(runs)                 # who ran where, one panel per run on a shared time axis
    plot.figures(runs)["latency"].save("latency.svg")

Rendering needs ``vl-convert-python`` (``pip install 'schedlab[plot]'``); the specifications alone do
not.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any, Dict, Iterable, Union

from . import _native
from .results import RunLike, report_json

__all__ = [
    "Figure",
    "figures",
    "timeline",
    "runnable",
    "cumulative",
    "policy_values",
    "rates",
    "latency_cdf",
    "run_length_cdf",
    "task_run_lengths",
    "elapsed",
    "NAMES",
]

#: The report's figures, in page order.
NAMES = ("gantt", "runnable", "cumulative", "policy", "rates", "latency", "runs", "task-runs", "elapsed")


def _vlc() -> Any:
    try:
        import vl_convert
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "rendering a figure needs vl-convert-python: pip install 'schedlab[plot]'"
        ) from e
    return vl_convert


class Figure:
    """One figure of the report: :attr:`name` and :attr:`spec`, its Vega-Lite specification."""

    def __init__(self, name: str, spec: Dict[str, Any]):
        self.name = name
        self.spec = spec

    def __repr__(self) -> str:
        title = self.spec.get("title", {})
        text = title.get("text", "") if isinstance(title, dict) else str(title)
        return f"<schedlab figure {self.name}: {text}>"

    @property
    def data(self) -> "Any":
        """The figure's data as a pandas DataFrame (one row per mark: a line point, a rectangle).
        The timeline's rows come as CSV text (``data.format``), read here the same way; its ``by``
        column is ``a`` for the rows coloured by application, ``t`` for those by task."""
        import io

        import pandas as pd

        values = self.spec["data"]["values"]
        if isinstance(values, str):
            return pd.read_csv(io.StringIO(values), keep_default_na=False)
        return pd.DataFrame(values)

    def svg(self) -> str:
        """The figure as SVG text."""
        return _vlc().vegalite_to_svg(self.spec)

    def png(self, scale: float = 1.0) -> bytes:
        """The figure as PNG bytes."""
        return _vlc().vegalite_to_png(self.spec, scale=scale)

    def save(self, path: Union[str, "os.PathLike[str]"], scale: float = 1.0) -> str:
        """Writes the figure by the file's suffix: ``.svg``, ``.png``, ``.html`` (self-contained,
        interactive) or ``.json`` (the specification); returns the path."""
        p = os.fspath(path)
        suffix = os.path.splitext(p)[1].lower()
        if suffix == ".json":
            data: Union[str, bytes] = json.dumps(self.spec, indent=1)
        elif suffix == ".svg":
            data = self.svg()
        elif suffix == ".png":
            data = self.png(scale)
        elif suffix == ".html":
            data = _vlc().vegalite_to_html(self.spec, bundle=True)
        else:
            raise ValueError(f"{p}: unknown figure format {suffix!r} (use .svg, .png, .html or .json)")
        mode = "wb" if isinstance(data, bytes) else "w"
        with open(p, mode) as f:
            f.write(data)
        return p

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> Dict[str, Any]:
        return {
            "image/png": base64.b64encode(self.png()).decode("ascii"),
            "text/plain": repr(self),
        }


def figures(runs: Iterable[RunLike]) -> Dict[str, Figure]:
    """Every figure the runs have data for, by name (:data:`NAMES`, in page order). Runs of one
    configuration with different seeds are drawn once (the first), as on the page."""
    texts = [report_json(r) for r in runs]
    if not texts:
        raise ValueError("no runs given")
    return {f["name"]: Figure(f["name"], f["spec"]) for f in json.loads(_native.report_figures(texts))}


def _one(name: str, runs: Iterable[RunLike], needs: str) -> Figure:
    found = figures(runs)
    if name not in found:
        raise ValueError(f"no {name} figure: the runs have no {needs}")
    return found[name]


def timeline(runs: Iterable[RunLike]) -> Figure:
    """Who ran where: the per-CPU timeline (Gantt chart) of each run, on a shared time axis."""
    return _one("gantt", runs, "timeline (simulate with sampling on: sample_interval > 0)")


def runnable(runs: Iterable[RunLike]) -> Figure:
    """Runnable tasks per CPU over time, a heat map per run on one colour scale."""
    return _one("runnable", runs, "series (sampling on)")


def cumulative(runs: Iterable[RunLike]) -> Figure:
    """Cumulative run time per task over time (needs ``sample_tasks=True``)."""
    return _one("cumulative", runs, "per-task series (sample_tasks=True)")


def policy_values(runs: Iterable[RunLike]) -> Figure:
    """Each task's policy values over time (ULE's interactivity score, CFS's vruntime lag...), one
    step line per task, a panel per run, a menu choosing the value (needs ``sample_tasks=True``)."""
    return _one("policy", runs, "per-task series of policy values (sample_tasks=True)")


def rates(runs: Iterable[RunLike]) -> Figure:
    """Context switches and migrations per second over time, one line per run."""
    return _one("rates", runs, "series (sampling on)")


def latency_cdf(runs: Iterable[RunLike]) -> Figure:
    """The wakeup-latency CDF of each run from its whole distribution, log axis."""
    return _one("latency", runs, "wakeups")


def run_length_cdf(runs: Iterable[RunLike]) -> Figure:
    """The CDF of run lengths (switch-in to switch-out) of each run, log axis."""
    return _one("runs", runs, "run lengths (real runs do not have them)")


def task_run_lengths(runs: Iterable[RunLike]) -> Figure:
    """Each task's run lengths: the median and the band up to the 99th percentile, tasks sorted."""
    return _one("task-runs", runs, "run lengths (real runs do not have them)")


def elapsed(runs: Iterable[RunLike]) -> Figure:
    """Each task's elapsed time (start to exit), sorted, one line per run."""
    return _one("elapsed", runs, "exited tasks")
