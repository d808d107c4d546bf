//! Simulate -> export the schedule as a Perfetto trace -> import it -> replay under the same policy:
//! every task's CPU time comes back exactly, and the trace's own statistics match the simulator's
//! accounting.

use schedlab_sim::{Machine, RunConfig, RunReport, Sim};
use schedlab_trace::import::{BurstOp, Filter, ImportOptions};
use schedlab_workload::{parse_toml, Workload};

/// A mix of what traces contain: pipe ping-pong (wakeups between tasks), a mutex, timers and sleeps
/// (wakeups by no task), nice levels, forks and exits, more runnable tasks than CPUs.
const MIX: &str = r#"
name = "mix"
stop = "all_done"
duration = "20s"

[[pipe]]
name = "ping"
capacity = 64
[[pipe]]
name = "pong"
capacity = 64
[[mutex]]
name = "m"

[[task]]
name = "client"
ops = [ { loop = 200, ops = [ { compute = "30us" }, { send = "ping", bytes = 8 }, { recv = "pong", bytes = 8 } ] } ]

[[task]]
name = "server"
ops = [ { loop = 200, ops = [ { recv = "ping", bytes = 8 }, { compute = "50us" }, { send = "pong", bytes = 8 } ] } ]

[[task]]
name = "hog"
instances = 4
nice = 5
ops = [ { loop = 30, ops = [ { compute = { uniform = ["1ms", "4ms"] } }, { lock = "m" }, { compute = "200us" }, { unlock = "m" } ] } ]

[[task]]
name = "ticker"
nice = -5
ops = [ { loop = 100, ops = [ { compute = "100us" }, { timer = "2ms" } ] } ]

[[task]]
name = "make"
ops = [ { fork = "cc" }, { fork = "cc" }, { fork = "cc" }, { wait_children = true }, { compute = "1ms" } ]

[[task]]
name = "cc"
instances = 0
ops = [ { compute = "5ms" }, { sleep = "1ms" }, { compute = "3ms" } ]
"#;

/// A flat machine whose scheduling costs are zero, so the trace's running intervals are exactly
/// the tasks' run time (with costs, a traced interval also holds the switch-in overhead, as on Linux).
fn costless(n: u32) -> Machine {
    let mut m = Machine::flat(n);
    m.costs.context_switch_ns = 0;
    m.costs.sched_base_ns = 0;
    m.costs.sched_per_task_ns = 0;
    m
}

fn run(
    machine: &Machine,
    w: &Workload,
    policy: &str,
    trace: bool,
) -> (RunReport, Option<schedlab_sim::Trace>) {
    let mut p = schedlab_policies::create(policy).unwrap();
    let cfg = RunConfig { duration_ns: w.duration_ns.unwrap(), seed: 7, trace, ..RunConfig::default() };
    Sim::new(machine, w, p.as_mut(), policy.to_string(), cfg).unwrap().run_traced().unwrap()
}

fn roundtrip(policy: &str, machine: &Machine, bursts: BurstOp) -> (RunReport, RunReport, RunReport) {
    let w = parse_toml("mix.toml", MIX).unwrap();
    let (original, trace) = run(machine, &w, policy, true);
    assert_eq!(original.stop_reason, "all_done");
    let bytes = trace.unwrap().perfetto();
    let raw = schedlab_trace::read_bytes("sim.pftrace", &bytes).unwrap();
    let rec = schedlab_trace::timeline::build(raw);
    assert!(rec.warnings.is_empty(), "{:?}", rec.warnings);
    let recorded = schedlab_trace::stats::report(&rec, &Filter::default(), "mix");
    let opts = ImportOptions { name: "mix (replayed)".into(), bursts, filter: Filter::default() };
    let imported = schedlab_trace::import(&rec, &opts).unwrap();
    // The TOML reads back to the same workload.
    let again = parse_toml("imported.toml", &imported.toml).unwrap();
    assert_eq!(again.tasks, imported.workload.tasks);
    let (replayed, _) = run(machine, &imported.workload, policy, false);
    assert_eq!(replayed.stop_reason, "all_done", "{policy}: the replay finished");
    (original, recorded, replayed)
}

/// The task of a report whose template is the imported name of original task `id`.
fn by_template<'a>(r: &'a RunReport, name: &str, id: u32) -> &'a schedlab_sim::report::TaskReport {
    let want = format!("{name}-{}", id + 1);
    r.tasks.iter().find(|t| t.template == want).unwrap_or_else(|| panic!("no task {want}"))
}

#[test]
fn replaying_under_the_same_policy_reproduces_every_tasks_cpu_time_exactly() {
    for policy in ["eevdf", "cfs", "ule", "o1", "bfs", "htfs"] {
        let machine = costless(2);
        let (original, recorded, replayed) = roundtrip(policy, &machine, BurstOp::Spin);
        assert_eq!(original.tasks.len(), 11);
        assert_eq!(replayed.tasks.len(), 11, "{policy}: 8 initial tasks and 3 forked");
        for t in &original.tasks {
            let rec = by_template(&recorded, &t.name, t.id);
            let rep = by_template(&replayed, &t.name, t.id);
            assert_eq!(rec.run_ns, t.run_ns, "{policy} {}: trace statistics vs simulator", t.name);
            assert_eq!(rep.run_ns, t.run_ns, "{policy} {}: replayed vs original", t.name);
            assert_eq!(rec.nvcsw, t.nvcsw, "{policy} {}", t.name);
            assert_eq!(rec.nivcsw, t.nivcsw, "{policy} {}", t.name);
            assert_eq!(rec.nr_migrations, t.nr_migrations, "{policy} {}", t.name);
            assert_eq!(rec.nice, t.nice, "{policy} {}: nice from the trace's prio", t.name);
            assert_eq!(rec.exited_ns, t.exited_ns, "{policy} {}", t.name);
        }
        // The ping-pong wakeups became semaphore edges; forks stayed forks.
        let client = by_template(&replayed, "client", 0);
        // Without the edges it would never block; a wakeup that preempts the waker where both
        // share a CPU lets some answers arrive before the client asks, so not every round blocks.
        assert!(client.nvcsw >= 100, "{policy}: the client still blocks on the server: {}", client.nvcsw);
    }
}

#[test]
fn trace_latencies_match_the_simulators_on_a_costless_machine() {
    let (original, recorded, _) = roundtrip("eevdf", &costless(2), BurstOp::Spin);
    for t in &original.tasks {
        let rec = by_template(&recorded, &t.name, t.id);
        assert_eq!(rec.wait_ns, t.wait_ns, "{}", t.name);
        assert_eq!(rec.nr_wakeups, t.nr_wakeups, "{}", t.name);
        assert_eq!(rec.wakeup_latency.count, t.wakeup_latency.count, "{}", t.name);
        assert_eq!(rec.wakeup_latency.max_ns, t.wakeup_latency.max_ns, "{}", t.name);
    }
}

#[test]
fn with_switch_costs_the_traced_run_time_holds_the_switch_in_overhead() {
    // The default costs: 2 us per context switch plus 250 ns per decision.
    let machine = Machine::flat(2);
    let (original, recorded, _) = roundtrip("cfs", &machine, BurstOp::Spin);
    for t in &original.tasks {
        let rec = by_template(&recorded, &t.name, t.id);
        let switches_in = t.nvcsw + t.nivcsw;
        assert!(rec.run_ns >= t.run_ns, "{}", t.name);
        let extra = rec.run_ns - t.run_ns;
        // At least the context switch of every switch-in; at most that plus its decision (250 ns and
        // 40 ns per task examined, at most the 11 tasks) and a decision per tick (4 ms at 250 Hz).
        assert!(extra >= switches_in * 2_000, "{}: {extra} ns over {switches_in} switches", t.name);
        let most = (switches_in + 1) * (2_000 + 250 + 11 * 40) + (t.run_ns / 4_000_000 + 1) * (250 + 11 * 40);
        assert!(extra <= most, "{}: {extra} ns over {switches_in} switches, at most {most}", t.name);
    }
}
