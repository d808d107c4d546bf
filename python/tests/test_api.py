"""The Python API against the `schedlab` command: the same inputs give the same reports, tables hold
the report's values, bad input raises the command's message, and simulations release the
interpreter. Needs the command built: `cargo build --release -p schedlab-cli` (scripts/check does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import schedlab

REPO = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("SCHEDLAB_BIN", REPO / "target" / "release" / "schedlab"))


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    if not BIN.exists():
        pytest.fail(f"{BIN} is missing: run `cargo build --release -p schedlab-cli` first")
    p = subprocess.run([str(BIN), *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        pytest.fail(f"schedlab {' '.join(args)} failed: {p.stderr}")
    return p


RUN = dict(workload="hackbench[groups=2,fds=5,loops=10]", policy="ule", machine="athlon2-x2", duration="50ms", seed=3)


def cli_run_json(tmp_path: Path, **kw) -> dict:
    out = tmp_path / "cli.json"
    args = ["run", "--quiet", "--json", str(out)]
    for k, v in kw.items():
        if v is True:
            args.append("--" + k.replace("_", "-"))
        else:
            args += ["--" + k.replace("_", "-"), str(v)]
    cli(*args)
    return json.loads(out.read_text())


def test_lists_name_what_the_command_lists():
    listed = [line.split()[0] for line in cli("list", "policies").stdout.splitlines() if line and not line.startswith(" ")]
    assert list(schedlab.policies()["name"]) == listed
    assert {"cfs", "eevdf", "ule", "htfs", "vtrr", "rsdl", "pmqs", "4bsd"} <= set(listed)
    cfs_params = {p["key"] for p in schedlab.policies().loc["cfs", "params"]}
    assert "sched_latency_ns" in cfs_params
    m = schedlab.machines()
    assert (m.loc["core2duo", "cpus"], m.loc["xeon-e5520-2s", "cpus"]) == (2, 16)
    w = schedlab.workloads()
    assert "hackbench" in w.index and any(p["key"] == "groups" for p in w.loc["hackbench", "params"])
    sources = {p["key"]: p["source"] for p in w.loc["cyclictest", "params"]}
    assert sources["interval"].startswith("source: cyclictest's DEFAULT_INTERVAL") and sources["threads"] is None
    assert schedlab.workloads().loc["apache-ab", "params"][3]["source"].startswith("no source:")
    assert schedlab.workload_toml("hogs[n=2]") == cli("workload", "show", "hogs[n=2]").stdout


def test_a_run_gives_the_commands_report_and_its_tables_hold_its_values(tmp_path):
    r = schedlab.run(**RUN, sample_tasks=True)
    want = cli_run_json(tmp_path, **RUN, sample_tasks=True)
    assert r.json == want
    assert (r.policy, r.machine, r.workload) == ("ule", "athlon2-x2", want["workload"])
    tasks = r.tasks
    assert list(tasks["run_ns"]) == [t["run_ns"] for t in want["tasks"]]
    assert list(tasks["name"]) == [t["name"] for t in want["tasks"]]
    assert tasks.loc[0, "wakeup_latency.p99_ns"] == want["tasks"][0]["wakeup_latency"]["p99_ns"]
    assert list(r.cpus["busy_ns"]) == [c["busy_ns"] for c in want["cpus"]]
    assert r.summary["nr_switches"] == want["summary"]["nr_switches"]
    assert r.summary["wakeup_latency.p99_ns"] == want["summary"]["wakeup_latency"]["p99_ns"]
    assert dict(r.policy_stats) == {s["name"]: s["value"] for s in want["policy_stats"]}
    series = r.series
    assert list(series.index) == want["series"]["time_ns"]
    assert list(series["nr_running.cpu1"]) == want["series"]["nr_running"][1]
    assert list(series["switches"]) == want["series"]["switches"]
    last = want["series"]["task_run_ns"][0][-1]
    assert series[f"run_ns.{want['tasks'][0]['name']}"].iloc[-1] == last
    # ULE's score per task and sample, in long form, as the report's task_policy holds it.
    pv = r.policy_values
    scores = want["series"]["task_policy"]["ule interactivity score"]
    assert len(pv[pv["value"] == "ule interactivity score"]) == sum(v is not None for row in scores for v in row)
    first = want["tasks"][0]["name"]
    mine = pv[(pv["task"] == first) & (pv["value"] == "ule interactivity score")]
    row = scores[0]
    assert list(mine["v"]) == [v for v in row if v is not None]
    assert list(mine["time_ns"]) == [t for t, v in zip(want["series"]["time_ns"][-len(row):], row) if v is not None]
    lat = r.distribution("wakeup_latency")
    assert list(lat["count"]) == [b["count"] for b in want["distributions"]["wakeup_latency"]]
    assert lat["count"].sum() == want["summary"]["wakeup_latency"]["count"]
    assert lat["cdf"].iloc[-1] == 1.0 and lat["cdf"].is_monotonic_increasing
    assert lat["low_ns"].iloc[0] <= want["summary"]["wakeup_latency"]["min_ns"] < lat["high_ns"].iloc[0]
    assert r.distribution("run_length")["count"].sum() > 0
    with pytest.raises(KeyError):
        r.distribution("nope")


def test_runs_are_deterministic_and_seeds_matter():
    a, b = schedlab.run(**RUN), schedlab.run(**RUN)
    assert a.json == b.json
    c = schedlab.run(**{**RUN, "seed": 4})
    assert c.json["seed"] == 4


def test_a_comparison_gives_the_commands_json(tmp_path):
    out = tmp_path / "cmp.json"
    cli("compare", "--quiet", "--policies", "cfs,ule,vtrr", "--workload", "hogs[n=3]", "--machine", "core2duo",
        "--duration", "100ms", "--repeat", "2", "--json", str(out))
    c = schedlab.compare(["cfs", "ule", "vtrr"], workload="hogs[n=3]", machine="core2duo", duration="100ms", repeat=2)
    want = json.loads(out.read_text())
    assert c.json == want
    assert c.baseline == "cfs"
    assert list(c.table.columns) == ["cfs", "ule", "vtrr"]
    row = want["rows"][0]
    assert c.table.loc[row["metric"], "ule"] == row["cells"][1]["stat"]["mean"]
    assert c.diff_pct.loc[row["metric"], "ule"] == pytest.approx(row["cells"][1]["diff_pct"])
    assert len(c.runs["ule"]) == 2 and [r.json["seed"] for r in c.runs["ule"]] == [1, 2]
    assert len(c.per_run) == 6


def test_the_default_comparison_set_is_the_commands():
    text = cli("compare", "--help").stdout
    assert ",".join(schedlab.DEFAULT_COMPARE_POLICIES) in text


@pytest.mark.parametrize(
    "kw, args",
    [
        (dict(policy="nosuch"), ["--policy", "nosuch"]),
        (dict(policy="cfs[sched_latency_ns=abc]"), ["--policy", "cfs[sched_latency_ns=abc]"]),
        (dict(duration="abc"), ["--duration", "abc"]),
        (dict(workload="no-such-file.toml"), ["--workload", "no-such-file.toml"]),
        (dict(machine="zx81"), ["--machine", "zx81"]),
        (dict(hz=123), ["--hz", "123"]),
        (dict(governor="turbo", machine="core2duo"), ["--governor", "turbo", "--machine", "core2duo"]),
    ],
)
def test_bad_input_raises_the_commands_message(kw, args):
    p = cli("run", "--quiet", *args, check=False)
    assert p.returncode == 1
    with pytest.raises(schedlab.SchedlabError) as e:
        schedlab.run(**kw)
    assert "error: " + str(e.value) == p.stderr.strip()


def test_a_bad_workload_file_names_file_line_and_key(tmp_path):
    f = tmp_path / "w.toml"
    f.write_text('[[task]]\nname = "a"\nprogram = [{ compute = "1ms" }]\nnice = "high"\n')
    with pytest.raises(schedlab.SchedlabError) as e:
        schedlab.run(workload=str(f), duration="10ms")
    p = cli("run", "--quiet", "--workload", str(f), "--duration", "10ms", check=False)
    assert "error: " + str(e.value) == p.stderr.strip()
    assert str(f) in str(e.value)


def test_the_report_is_the_commands_page(tmp_path):
    a = schedlab.run(**RUN)
    b = schedlab.run(**{**RUN, "policy": "cfs"})
    path = schedlab.report([a, b], tmp_path / "py.html")
    (tmp_path / "a.json").write_text(json.dumps(a.json))
    (tmp_path / "b.json").write_text(json.dumps(b.json))
    cli("report", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "-o", str(tmp_path / "cli.html"))
    page = Path(path).read_text()
    assert page == (tmp_path / "cli.html").read_text()
    assert "<svg" in page
    # Report files work as inputs too.
    assert Path(schedlab.report([tmp_path / "a.json"], tmp_path / "one.html")).exists()
    with pytest.raises(schedlab.SchedlabError):
        schedlab.report([])


def test_the_interpreter_keeps_running_during_a_simulation():
    # With the interpreter held for the whole native call, the main thread could count only in the
    # moments before the call starts and after it ends; released, it counts throughout. The count is
    # compared with the loop's own rate times the call's duration (measured, so the test does not
    # depend on how fast the engine is).
    def spin(until):
        n = 0
        while not until():
            n += 1
        return n

    # The loop's rate with nothing else running: stopped by a timer thread after 50 ms.
    stop = threading.Event()
    threading.Timer(0.05, stop.set).start()
    start = time.perf_counter()
    rate = spin(stop.is_set) / (time.perf_counter() - start)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        done = threading.Event()
        elapsed = []

        def work():
            t0 = time.perf_counter()
            schedlab.run(workload="hogs[n=400]", policy="cfs", machine="xeon-e5520-2s", duration="100s",
                         sample_interval="0s")
            elapsed.append(time.perf_counter() - t0)
            done.set()

        t = threading.Thread(target=work)
        t.start()
        count = spin(done.is_set)
        t.join()
    finally:
        sys.setswitchinterval(old)
    # Released, the loop runs at a good part of its own rate (it shares the interpreter with the
    # worker's short holds); held, it would count almost nothing during the call.
    assert elapsed[0] > 0.02, elapsed
    assert count > 0.2 * rate * elapsed[0], (count, rate, elapsed)


def test_plots_draw_the_runs_data():
    import matplotlib

    matplotlib.use("Agg")
    r = schedlab.run(**RUN, sample_tasks=True)
    ax = r.plot_runnable()
    assert len(ax.get_lines()) == 2
    ax = r.plot_cumulative_runtime()
    assert len(ax.get_lines()) == len(r.json["tasks"])
    assert ax.get_lines()[0].get_ydata()[-1] == pytest.approx(r.series.filter(like="run_ns.").iloc[-1, 0] / 1e9)
    r.plot_elapsed()
    with pytest.raises(ValueError):
        schedlab.run(**RUN).plot_cumulative_runtime()
    c = schedlab.compare(["cfs", "ule"], workload="hogs[n=3]", machine="core2duo", duration="50ms")
    ax = c.plot("work done [CPUs]")
    assert len(ax.patches) == 2


def test_a_policy_from_outside_the_policy_crate_runs_from_python(tmp_path):
    # examples/lottery registers itself through the public registry in the command's main() and in
    # the Python module's initialisation (docs/guide/your-policy.md).
    assert "lottery" in schedlab.policies().index
    kw = dict(workload="hogs[n=3]", policy="lottery[quantum_ns=5000000]", machine="core2duo", duration="200ms")
    r = schedlab.run(**kw)
    assert r.json == cli_run_json(tmp_path, **kw)
    assert r.policy_stats["nr_draws"] > 0
