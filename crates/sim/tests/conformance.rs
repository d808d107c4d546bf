//! The conformance suite: every registered policy runs the same checks on several machines and
//! workloads. A policy joins by being registered and listed in `conformance!` below; the test
//! `every_registered_policy_is_covered` fails if one is missing.
//!
//! Checked for each (machine, workload): the run completes with invariant checking on (no task on two
//! CPUs, the policy's runnable count equals the engine's after every event, affinity respected at every
//! placement and pick, no CPU idle while work waits where the policy promises work conservation, CPU
//! time conserved); finite workloads finish (no task lost); two runs give byte-identical JSON.

#[macro_use]
mod common;

use schedlab_core::{CpuId, Ctx, Dispatch, SchedPolicy, SwitchReason, TaskId, NSEC_PER_MSEC};
use schedlab_sim::{Machine, RunConfig, RunError, Sim};
use schedlab_workload::{ProgramBuilder as P, StopWhen, Workload, WorkloadBuilder};

const MS: u64 = NSEC_PER_MSEC;

/// Everything blocking at once, all tasks finishing: pipes, a mutex, a barrier, fork/wait, I/O, yield,
/// timers, nice levels, a pinned task.
fn finite_mix() -> Workload {
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
    w.stop(StopWhen::AllDone);
    w.build().unwrap()
}

/// Endless mixed load with affinity changes half way.
fn endless_mix() -> Workload {
    let mut w = schedlab_workload::generators::builtin("demo").unwrap().unwrap();
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
    w.validate().unwrap();
    w
}

fn machines() -> Vec<Machine> {
    ["up", "core2duo", "xeon-e5520-2s", "opteron6172-32"]
        .iter()
        .map(|n| Machine::preset(n).unwrap())
        .collect()
}

fn run_json(
    spec: &str,
    m: &Machine,
    w: &Workload,
    duration_ns: u64,
) -> Result<(String, schedlab_sim::RunReport), RunError> {
    let mut p = schedlab_policies::create(spec).unwrap();
    let cfg = RunConfig { duration_ns, check_invariants: true, ..RunConfig::default() };
    let r = Sim::new(m, w, p.as_mut(), spec, cfg)?.run()?;
    Ok((r.to_json(), r))
}

pub fn check_policy(spec: &str) {
    for m in machines() {
        let w = finite_mix();
        let (a, r) =
            run_json(spec, &m, &w, 60_000 * MS).unwrap_or_else(|e| panic!("{spec} on {}: {e}", m.name));
        assert_eq!(r.stop_reason, "all_done", "{spec} on {}: a task never finished (lost?)", m.name);
        assert_eq!(r.summary.nr_exited, r.summary.nr_tasks);
        let pinned = r.tasks.iter().find(|t| t.name == "pinned").unwrap();
        assert_eq!(pinned.cpu, 0, "{spec} on {}: pinned task ended on CPU {}", m.name, pinned.cpu);
        let (b, _) = run_json(spec, &m, &w, 60_000 * MS).unwrap();
        assert!(a == b, "{spec} on {}: two identical runs differ", m.name);

        let w = endless_mix();
        let (a, _) = run_json(spec, &m, &w, 300 * MS)
            .unwrap_or_else(|e| panic!("{spec} on {} (endless): {e}", m.name));
        let (b, _) = run_json(spec, &m, &w, 300 * MS).unwrap();
        assert!(a == b, "{spec} on {} (endless): two identical runs differ", m.name);
    }
}

every_policy!(check_policy);

/// A policy that breaks the rules, to prove the checks catch it: it places every task on the last CPU
/// even when the task is pinned elsewhere.
struct Rogue(Box<dyn SchedPolicy>);

impl SchedPolicy for Rogue {
    fn name(&self) -> &str {
        "rogue"
    }
    fn task_new(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        self.0.task_new(ctx, t);
        CpuId(ctx.nr_cpus() as u32 - 1)
    }
    fn select_cpu(&mut self, ctx: &Ctx, t: TaskId, w: &schedlab_core::WakeInfo) -> CpuId {
        self.0.select_cpu(ctx, t, w)
    }
    fn enqueue(&mut self, ctx: &Ctx, c: CpuId, t: TaskId, why: schedlab_core::EnqueueReason) {
        self.0.enqueue(ctx, c, t, why)
    }
    fn dequeue(&mut self, ctx: &Ctx, c: CpuId, t: TaskId, why: schedlab_core::DequeueReason) {
        self.0.dequeue(ctx, c, t, why)
    }
    fn pick_next(&mut self, ctx: &Ctx, c: CpuId) -> Option<Dispatch> {
        self.0.pick_next(ctx, c)
    }
    fn put_prev(&mut self, ctx: &Ctx, c: CpuId, t: TaskId, why: SwitchReason) {
        self.0.put_prev(ctx, c, t, why)
    }
    fn tick(&mut self, ctx: &Ctx, c: CpuId, t: TaskId) -> bool {
        self.0.tick(ctx, c, t)
    }
    fn check_preempt(
        &mut self,
        ctx: &Ctx,
        c: CpuId,
        a: TaskId,
        b: TaskId,
        k: schedlab_core::WakeKind,
    ) -> bool {
        self.0.check_preempt(ctx, c, a, b, k)
    }
}

#[test]
fn a_policy_that_ignores_affinity_is_caught() {
    let mut p = Rogue(schedlab_policies::create("fifo").unwrap());
    let m = Machine::flat(2);
    let w = finite_mix();
    let err = Sim::new(&m, &w, &mut p, "rogue", RunConfig::default()).unwrap().run().unwrap_err();
    assert!(matches!(err, RunError::PolicyViolation { hook: "task_new", .. }), "{err}");
}
