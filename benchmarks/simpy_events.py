"""Events per second of SimPy's bare event loop, for docs/performance.md's comparison with other
simulators (SimSo, a scheduling simulator, is built on SimPy).

Two models, each run for a fixed stretch of simulated time; an event is one timeout that fires:
  ticks: 64 processes that each wake every simulated millisecond and do nothing else (the
         skeleton of 64 CPUs' scheduler ticks, with no scheduler behind them);
  delays: 1,000 processes that each sleep a uniformly random 0..2,000 s and loop (JaamSim's
          event-list benchmark: about 1,000 pending events in random order).

Usage: python3 benchmarks/simpy_events.py   (needs `pip install simpy`)
"""

import random
import sys
import time

import simpy


def ticker(env, count):
    while True:
        yield env.timeout(0.001)
        count[0] += 1


def delayer(env, rng, count):
    while True:
        yield env.timeout(rng.uniform(0, 2000))
        count[0] += 1


def measure(processes, until):
    """Runs `processes(env, count)` to `until`; returns (timeouts fired, wall seconds)."""
    env = simpy.Environment()
    count = [0]
    processes(env, count)
    start = time.perf_counter()
    env.run(until=until)
    return count[0], time.perf_counter() - start


def main():
    rng = random.Random(1)
    models = [
        ("ticks-64", lambda env, c: [env.process(ticker(env, c)) for _ in range(64)], 10.0),
        ("delays-1000", lambda env, c: [env.process(delayer(env, rng, c)) for _ in range(1000)], 1_000_000.0),
    ]
    best = {}
    for _ in range(3):
        for name, processes, until in models:
            events, wall = measure(processes, until)
            best[name] = max(best.get(name, 0.0), events / wall)
    print(f"SimPy {simpy.__version__}, Python {sys.version.split()[0]}")
    for name, rate in best.items():
        print(f"{name:<12} {rate:>12,.0f} events/s (best of 3)")


if __name__ == "__main__":
    main()
