"""Sweeps from Python: on local processes, on a Dask LocalCluster and on a Dask scheduler and worker
started as separate processes on loopback, each giving the same results files as `schedlab sweep`
(byte for byte); failures stay in their cell; an interrupted sweep resumes with what is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import schedlab
from test_api import cli

GRID = """name = "t"
policies = ["cfs", "ule", "vtrr"]
workloads = ["hogs[n=3]", "hackbench[groups=1,fds=4,loops=5]"]
machines = ["core2duo"]
seeds = 2
duration = "50ms"

[metrics]
p99_us = "summary.wakeup_latency.p99_ns / 1000"
"""


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    d = tmp_path_factory.mktemp("grid")
    g = d / "grid.toml"
    g.write_text(GRID)
    cli("sweep", "--quiet", str(g), "-o", str(d / "cli"))
    return g, d / "cli"


def same_results(out: Path, want: Path):
    for name in ("results.csv", "results.json"):
        assert (out / name).read_bytes() == (want / name).read_bytes(), name


def test_a_local_sweep_writes_the_commands_results(grid, tmp_path):
    g, want = grid
    table = schedlab.sweep(g, out=tmp_path / "py", jobs=2)
    same_results(tmp_path / "py", want)
    assert len(table) == 12 and table.attrs["ran_now"] == 12
    assert list(table.columns) == (want / "results.csv").read_text().splitlines()[0].split(",")
    assert set(table["status"]) == {"ok"}
    row = table[(table.policy == "ule") & (table.seed == 2) & (table.workload == "hogs[n=3]")].iloc[0]
    r = schedlab.run(workload="hogs[n=3]", policy="ule", machine="core2duo", duration="50ms", seed=2, sample_interval="0s")
    assert row["work_per_sec"] == pytest.approx(r.json["summary"]["work_per_sec"])


def test_an_interrupted_sweep_runs_only_what_is_missing(grid, tmp_path):
    g, want = grid
    out = tmp_path / "py"
    schedlab.sweep(g, out=out, jobs=1)
    journal = out / "rows.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(lines[:-3]) + lines[-3][: len(lines[-3]) // 2])  # killed while writing
    table = schedlab.sweep(g, out=out, jobs=2)
    assert table.attrs["ran_now"] == 3
    same_results(out, want)
    # Nothing missing: nothing runs; fresh: everything runs again.
    assert schedlab.sweep(g, out=out).attrs["ran_now"] == 0
    assert schedlab.sweep(g, out=out, fresh=True, jobs=2).attrs["ran_now"] == 12


def test_a_failing_cell_is_a_row_and_the_others_run(tmp_path):
    g = tmp_path / "g.toml"
    g.write_text('policies = ["cfs"]\nworkloads = ["pinned-spinners[threads=2,cpu=3,unpin_at=20ms]"]\n'
                 'machines = ["up", "core2duo", "pentium2-4way"]\nduration = "40ms"\n')
    table = schedlab.sweep(g, out=tmp_path / "py", jobs=2)
    assert list(table["status"]) == ["error", "error", "ok"]
    p = cli("sweep", "--quiet", str(g), "-o", str(tmp_path / "cli"), check=False)
    assert p.returncode == 1
    same_results(tmp_path / "py", tmp_path / "cli")
    assert table["error"][0] == "task `spinner` names CPU 3, but machine `up` has CPUs 0..=0"
    assert table["work_per_sec"].isna().tolist() == [True, True, False]


def test_a_bad_grid_names_file_line_and_key(tmp_path):
    g = tmp_path / "bad.toml"
    g.write_text('policies = ["cfs", "nosuch"]\nworkloads = ["demo"]\n')
    with pytest.raises(schedlab.SchedlabError) as e:
        schedlab.sweep(g, out=tmp_path / "o")
    p = cli("sweep", str(g), "-o", str(tmp_path / "c"), check=False)
    assert "error: " + str(e.value) == p.stderr.strip()
    assert str(g) in str(e.value) and "policies" in str(e.value)


def test_a_dask_local_cluster_gives_the_same_results(grid, tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    g, want = grid
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            table = schedlab.sweep(g, client=client, out=tmp_path / "dask")
    same_results(tmp_path / "dask", want)
    assert table.attrs["ran_now"] == 12


def test_a_scheduler_and_workers_as_separate_processes_on_loopback(grid, tmp_path):
    # The multi-host recipe of docs/sweep.md on one host: `dask scheduler`, then `dask worker` per host.
    distributed = pytest.importorskip("dask.distributed")
    g, want = grid
    dask_cmd = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    sched_file = tmp_path / "scheduler.json"
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    procs = [subprocess.Popen([*dask_cmd, "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                               "--scheduler-file", str(sched_file)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        for _ in range(600):
            if sched_file.exists() and sched_file.stat().st_size > 0:
                break
            time.sleep(0.05)
        for _ in range(2):
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file", str(sched_file),
                 "--nthreads", "1", "--no-dashboard"], env=env,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with distributed.Client(scheduler_file=str(sched_file), timeout=60) as client:
            client.wait_for_workers(2, timeout=60)
            addrs = list(client.scheduler_info()["workers"])
            assert len(addrs) == 2 and all(a.startswith("tcp://127.0.0.1:") for a in addrs)
            table = schedlab.sweep(g, client=client, out=tmp_path / "remote")
        same_results(tmp_path / "remote", want)
        assert table.attrs["ran_now"] == 12
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
