"""Speed of schedlab.sweep on Dask: a 200-cell grid on a LocalCluster of 1 and of 2 worker processes,
and the per-cell overhead of the Dask path against running the same cells one after another in this
process. Usage (after `pip install '.[test]'`):

    python3 benchmarks/dask_sweep.py [--cells-ms 20]

Prints one line per configuration; docs/python.md quotes the numbers.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import schedlab
from schedlab import _native


def grid_text(duration_ms: int) -> str:
    # 5 policies x 4 workloads x 10 seeds = 200 cells on the dual core.
    return f"""name = "bench"
policies = ["cfs", "eevdf", "ule", "o1", "htfs"]
workloads = ["hogs[n=4]", "hackbench[groups=1,fds=4,loops=20]", "sysbench-threads[threads=8]", "demo"]
machines = ["core2duo"]
seeds = 10
duration = "{duration_ms}ms"
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells-ms", type=int, default=200, help="simulated time per cell, ms")
    args = ap.parse_args()
    from dask.distributed import Client, LocalCluster

    with tempfile.TemporaryDirectory() as d:
        grid = Path(d) / "grid.toml"
        grid.write_text(grid_text(args.cells_ms))
        n = len(json.loads(_native.sweep_plan(str(grid)))["cells"])
        # The cells alone, in this process, one after another.
        start = time.perf_counter()
        for i in range(n):
            _native.sweep_cell(str(grid), i, None)
        serial = time.perf_counter() - start
        print(f"in-process, serial: {n} cells in {serial:.2f} s ({serial / n * 1e3:.1f} ms per cell)")
        results = {}
        for workers in (1, 2):
            with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                              dashboard_address=None) as cluster, Client(cluster) as client:
                client.run(lambda: __import__("schedlab"))  # import once per worker, outside the timing
                start = time.perf_counter()
                schedlab.sweep(grid, client=client, out=Path(d) / f"out{workers}")
                took = time.perf_counter() - start
            results[workers] = took
            overhead = (took * workers - serial) / n
            print(f"dask, {workers} worker(s): {took:.2f} s; overhead {overhead * 1e3:.1f} ms per cell")
        print(f"speed-up 1 -> 2 workers: {results[1] / results[2]:.2f}x")


if __name__ == "__main__":
    main()
