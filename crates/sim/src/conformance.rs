//! The conformance suite: the checks every policy must pass, on four machines (1 to 32 CPUs) and
//! two workloads, public so a policy written outside this project can run it (docs/guide/your-policy.md).
//!
//! Checked for each machine and workload: the run completes with invariant checking on (no task on
//! two CPUs, the policy's runnable count equals the engine's after every event, affinity respected at
//! every placement and pick, no CPU idle while work waits where the policy promises work
//! conservation, CPU time conserved); the finite workload finishes (no task lost) with its pinned task
//! on its CPU; two runs give byte-identical JSON.

use crate::{Machine, RunConfig, RunError, RunReport, Sim};
use schedlab_core::{SchedPolicy, NSEC_PER_MSEC};
use schedlab_workload::{ProgramBuilder as P, StopWhen, Workload, WorkloadBuilder};

const MS: u64 = NSEC_PER_MSEC;

/// The finite mix: everything blocking at once, all tasks finishing: pipes, a mutex, a barrier, fork/wait, I/O, yield,
/// timers, nice levels, a pinned task, real-time tasks and a task changing its class.
pub fn finite_mix() -> Workload {
    let mut w = WorkloadBuilder::new("finite-mix");
    let p = w.pipe("p", 1000);
    let m = w.mutex("m");
    let c = w.cond("c");
    let b = w.barrier("b", 4);
    let d = w.device("disk");
    let child = w.next_template() + 6;
    w.task("producer", P::new().repeat(50, |x| x.compute(200_000).send(p, 100)).build());
    w.task("consumer", P::new().repeat(50, |x| x.recv(p, 100).compute(100_000)).build());
    w.task("locker", P::new().repeat(20, |x| x.lock(m).compute(300_000).unlock(m).yield_now()).build())
        .instances = 3;
    w.task("phased", P::new().repeat(5, |x| x.compute(500_000).barrier(b)).build()).instances = 4;
    w.task("io", P::new().repeat(10, |x| x.io(d, 400_000).compute(50_000)).build()).instances = 2;
    let t = w.task(
        "parent",
        P::new().fork(child).fork(child).wait_children().lock(m).broadcast(c).unlock(m).build(),
    );
    t.nice = -5;
    let t = w.task("child", P::new().repeat(3, |x| x.timer(2 * MS).compute(700_000)).build());
    t.instances = 0;
    t.nice = 10;
    let t = w.task("pinned", P::new().repeat(40, |x| x.compute(250_000).sleep(100_000)).build());
    t.cpus = Some(vec![0]);
    let t = w.task("rt", P::new().repeat(20, |x| x.timer(MS).compute(100_000)).build());
    t.class = schedlab_core::SchedClass::Fifo;
    t.rt_priority = 50;
    let t = w.task("rr", P::new().repeat(4, |x| x.compute(3 * MS).yield_now()).build());
    t.class = schedlab_core::SchedClass::Rr;
    t.rt_priority = 5;
    // sched_setscheduler on itself through every kind of change: into and out of real time, between
    // the fair classes, and to what it has already (nothing happens).
    use schedlab_core::SchedClass as C;
    w.task(
        "reclass",
        P::new()
            .repeat(3, |x| {
                x.compute(500_000)
                    .set_class(C::Fifo, 30)
                    .compute(2 * MS)
                    .set_class(C::Fifo, 30)
                    .set_class(C::Batch, 0)
                    .compute(300_000)
                    .set_class(C::Rr, 7)
                    .yield_now()
                    .compute(MS)
                    .set_class(C::Idle, 0)
                    .sleep(200_000)
                    .compute(200_000)
                    .set_class(C::Normal, 0)
            })
            .build(),
    );
    w.stop(StopWhen::AllDone);
    w.build().expect("a valid workload")
}

/// Endless mixed load with affinity changes half way.
fn endless_mix() -> Workload {
    let mut w =
        schedlab_workload::generators::builtin("demo").expect("demo parses").expect("demo is built in");
    let spin = schedlab_workload::TaskSpec {
        instances: 5,
        cpus: Some(vec![0]),
        ..schedlab_workload::TaskSpec::new("spinner", P::new().forever(|x| x.spin(3 * MS)).build())
    };
    w.tasks.push(spin);
    let idx = w.tasks.len() as u32 - 1;
    w.affinity_changes.push(schedlab_workload::AffinityChange { template: idx, at_ns: 100 * MS, cpus: None });
    w.affinity_changes.push(schedlab_workload::AffinityChange {
        template: idx,
        at_ns: 200 * MS,
        cpus: Some(vec![0]),
    });
    w.validate().expect("a valid workload");
    w
}

fn machines() -> Vec<Machine> {
    ["up", "core2duo", "xeon-e5520-2s", "opteron6172-32"]
        .iter()
        .map(|n| Machine::preset(n).expect("a preset"))
        .collect()
}

fn run_json(
    make: &dyn Fn() -> Box<dyn SchedPolicy>,
    name: &str,
    m: &Machine,
    w: &Workload,
    duration_ns: u64,
) -> Result<(String, RunReport), RunError> {
    let mut p = make();
    let cfg = RunConfig { duration_ns, check_invariants: true, ..RunConfig::default() };
    let r = Sim::new(m, w, p.as_mut(), name, cfg)?.run()?;
    Ok((r.to_json(), r))
}

/// Runs the conformance suite on the policy `make` builds (a fresh instance per run; `name` labels
/// the runs and the messages). Returns the first failure as a sentence naming the machine.
pub fn check(make: &dyn Fn() -> Box<dyn SchedPolicy>, name: &str) -> Result<(), String> {
    for m in machines() {
        let w = finite_mix();
        let on = |what: &str| format!("{name} on {}{what}", m.name);
        let (a, r) = run_json(make, name, &m, &w, 60_000 * MS).map_err(|e| format!("{}: {e}", on("")))?;
        if r.stop_reason != "all_done" || r.summary.nr_exited != r.summary.nr_tasks {
            return Err(format!("{}: a task never finished (lost?): stop reason {}", on(""), r.stop_reason));
        }
        let pinned = r.tasks.iter().find(|t| t.name == "pinned").expect("the mix has a pinned task");
        if pinned.cpu != 0 {
            return Err(format!("{}: the task pinned to CPU 0 ended on CPU {}", on(""), pinned.cpu));
        }
        let (b, _) = run_json(make, name, &m, &w, 60_000 * MS).map_err(|e| format!("{}: {e}", on("")))?;
        if a != b {
            return Err(format!("{}: two identical runs differ", on("")));
        }
        let w = endless_mix();
        let (a, _) =
            run_json(make, name, &m, &w, 300 * MS).map_err(|e| format!("{}: {e}", on(" (endless)")))?;
        let (b, _) =
            run_json(make, name, &m, &w, 300 * MS).map_err(|e| format!("{}: {e}", on(" (endless)")))?;
        if a != b {
            return Err(format!("{}: two identical runs differ", on(" (endless)")));
        }
    }
    Ok(())
}
