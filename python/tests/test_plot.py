"""schedlab.plot: the report page's figures from Python, the same specifications, rendered to SVG and
PNG by vl-convert without a browser."""

from __future__ import annotations

import json

import pytest

import schedlab
from schedlab import plot

RUNS = dict(workload="hackbench[groups=1,loops=50]", machine="core2duo", duration="200ms")


@pytest.fixture(scope="module")
def runs():
    return [schedlab.run(policy=p, sample_tasks=True, **RUNS) for p in ("cfs", "ule")]


def test_the_figures_are_the_report_pages_own(runs, tmp_path):
    figs = plot.figures(runs)
    assert list(figs) == list(plot.NAMES), "every figure, in page order"
    page = (tmp_path / "r.html")
    schedlab.report(runs, page)
    html = page.read_text()
    for name, fig in figs.items():
        # The page carries the same specification under the figure's id.
        marker = f'data-target="report-{name}"'
        assert marker in html, name
        inline = html.split(marker, 1)[1].split(">", 1)[1].split("</script>", 1)[0]
        assert json.loads(inline.replace("<\\/", "</")) == fig.spec, name


def test_the_timeline_names_who_ran_where(runs):
    fig = plot.timeline(runs)
    d = fig.data
    assert set(d["run"]) == {"cfs (seed 1)", "ule (seed 1)"}
    assert set(d["cpu"]) == {0, 1}, "both CPUs of the core2duo"
    assert set(d["by"]) == {"a", "t"}, "both colourings: by application and by task"
    apps = d[d["by"] == "a"]
    assert set(apps["who"]) == {"g-sender", "g-receiver"}
    assert set(d[d["by"] == "t"]["who"]) <= set(runs[0].tasks["name"])
    assert (d["to_s"] > d["from_s"]).all() and (d["held"] <= d["busy"] + 1e-9).all() and (d["busy"] <= 1.0 + 1e-9).all()
    # The timeline's busy time, per run, is the run's busy time and at most its overhead more (a
    # task holds its CPU from its switch-in, the switch's overhead included), to within the
    # rectangles' shares, written to three decimals.
    for r in runs:
        mine = apps[apps["run"] == f"{r.policy} (seed 1)"]
        drawn = ((mine["to_s"] - mine["from_s"]) * mine["busy"]).sum()
        busy = r.cpus["busy_ns"].sum() / 1e9
        overhead = r.cpus["overhead_ns"].sum() / 1e9
        assert busy <= drawn * (1 + 1e-3) and drawn <= (busy + overhead) * (1 + 1e-3), (drawn, busy, overhead)


def test_a_figure_renders_and_saves_in_each_format(runs, tmp_path):
    pytest.importorskip("vl_convert")
    fig = plot.latency_cdf(runs)
    svg = fig.save(tmp_path / "l.svg")
    assert open(svg).read().lstrip().startswith("<svg")
    png = fig.save(tmp_path / "l.png")
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert json.load(open(fig.save(tmp_path / "l.json"))) == fig.spec
    assert "image/png" in fig._repr_mimebundle_()
    with pytest.raises(ValueError, match="unknown figure format"):
        fig.save(tmp_path / "l.gif")


def test_a_missing_figure_says_what_the_runs_lack(runs):
    bare = schedlab.run(policy="cfs", sample_interval="0s", **RUNS)
    with pytest.raises(ValueError, match="no gantt figure: the runs have no timeline"):
        plot.timeline([bare])
    with pytest.raises(ValueError, match="no runs given"):
        plot.figures([])
