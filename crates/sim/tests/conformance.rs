//! The conformance suite (schedlab_sim::conformance) on every registered policy. A policy joins by
//! being registered and listed in `every_policy!` (tests/common); a test fails if one is missing.

#[macro_use]
mod common;

use schedlab_core::{CpuId, Ctx, Dispatch, SchedPolicy, SwitchReason, TaskId};
use schedlab_sim::conformance::{check, finite_mix};
use schedlab_sim::{Machine, RunConfig, RunError, Sim};

fn check_policy(spec: &str) {
    check(&|| schedlab_policies::create(spec).unwrap(), spec).unwrap_or_else(|e| panic!("{e}"));
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
