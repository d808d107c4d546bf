//! # FIFO and round robin: the simplest policies
//!
//! One global queue shared by all CPUs (like Linux 2.4's single runqueue, without goodness). A CPU
//! that needs work takes the first queued task it is allowed to run; a woken or new task goes to the
//! tail and, if an allowed CPU is idle, to that CPU (its previous CPU first). `fifo` runs a task until
//! it blocks or yields; `rr` additionally preempts it after `slice_ns` and requeues it at the tail.
//! There is no priority, no nice level and no wakeup preemption.
//!
//! This policy exists as the smallest complete example of the [`SchedPolicy`] trait and as a
//! baseline: it is work conserving across the whole machine (no CPU idles while an allowed task
//! waits), which the conformance suite checks.

use crate::params::{parse_u64, ParamInfo, Params};
use schedlab_core::{
    CpuId, Ctx, DequeueReason, Dispatch, EnqueueReason, Ns, PolicyStat, SchedPolicy, SwitchReason, TaskId,
    WakeInfo, WakeKind, WorkConservation,
};
use std::collections::VecDeque;

/// Default `rr` slice: 10 ms.
pub const RR_DEFAULT_SLICE_NS: Ns = 10_000_000;

/// Parameters of `fifo` and `rr`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FifoParams {
    /// Slice before a task is preempted, ns; 0 = never (FIFO). Default 0 for `fifo`, 10 ms for `rr`.
    pub slice_ns: Ns,
}

impl Params for FifoParams {
    fn info() -> &'static [ParamInfo] {
        &[ParamInfo {
            key: "slice_ns",
            default: "0 (fifo) / 10000000 (rr)",
            help: "time slice in ns (10 us to 10 s); 0 = run until block",
        }]
    }
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "slice_ns" => {
                // A slice far below a context switch would make the run crawl through expiries
                // (found by fuzzing: 1 ns slices made 20 simulated ms take a minute).
                let v = parse_u64(value, 0..=10_000_000_000)?;
                if v != 0 && v < 10_000 {
                    return Err(format!("{v} is outside 10000..=10000000000 (or 0 for no slice)"));
                }
                self.slice_ns = v;
            }
            _ => unreachable!("checked by apply"),
        }
        Ok(())
    }
}

/// The global FIFO / round-robin policy.
pub struct Fifo {
    name: &'static str,
    params: FifoParams,
    queue: VecDeque<TaskId>,
    nr_running: usize,
    nr_examined: u64,
    nr_picks: u64,
}

impl Fifo {
    /// A new instance named `fifo` or `rr`.
    pub fn new(name: &'static str, params: FifoParams) -> Self {
        Fifo { name, params, queue: VecDeque::new(), nr_running: 0, nr_examined: 0, nr_picks: 0 }
    }
}

impl SchedPolicy for Fifo {
    fn name(&self) -> &str {
        self.name
    }

    fn task_new(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        crate::placement::idle_first(ctx, t)
    }

    fn select_cpu(&mut self, ctx: &Ctx, t: TaskId, _wake: &WakeInfo) -> CpuId {
        crate::placement::idle_first(ctx, t)
    }

    fn enqueue(&mut self, _ctx: &Ctx, _cpu: CpuId, t: TaskId, why: EnqueueReason) {
        if !why.was_runnable() {
            self.nr_running += 1;
        }
        self.queue.push_back(t);
    }

    fn dequeue(&mut self, _ctx: &Ctx, _cpu: CpuId, t: TaskId, _why: DequeueReason) {
        // Only migrations and class changes dequeue; the task is enqueued again at once, so it
        // stays counted.
        if let Some(i) = self.queue.iter().position(|&x| x == t) {
            self.queue.remove(i);
        }
    }

    fn pick_next(&mut self, ctx: &Ctx, cpu: CpuId) -> Option<Dispatch> {
        self.nr_picks += 1;
        let i = self.queue.iter().position(|&t| {
            self.nr_examined += 1;
            ctx.task(t).allowed.contains(cpu)
        })?;
        let t = self.queue.remove(i).expect("index from position");
        Some(Dispatch { task: t, slice_ns: (self.params.slice_ns > 0).then_some(self.params.slice_ns) })
    }

    fn put_prev(&mut self, _ctx: &Ctx, _cpu: CpuId, t: TaskId, why: SwitchReason) {
        if why.still_runnable() {
            self.queue.push_back(t);
        } else {
            self.nr_running -= 1;
        }
    }

    fn tick(&mut self, _ctx: &Ctx, _cpu: CpuId, _curr: TaskId) -> bool {
        false
    }

    fn check_preempt(&mut self, _: &Ctx, _: CpuId, _: TaskId, _: TaskId, _: WakeKind) -> bool {
        false
    }

    fn take_examined(&mut self) -> u64 {
        std::mem::take(&mut self.nr_examined)
    }

    fn stats(&self) -> Vec<PolicyStat> {
        vec![PolicyStat { name: "nr_picks", value: self.nr_picks, help: "pick_next calls" }]
    }

    fn work_conservation(&self) -> WorkConservation {
        WorkConservation::Global
    }

    fn nr_runnable(&self) -> Option<usize> {
        Some(self.nr_running)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn rr_slices_below_10us_are_refused_and_0_means_none() {
        let e = crate::create("rr[slice_ns=1]").err().expect("refused").to_string();
        assert!(e.contains("1 is outside 10000..=10000000000 (or 0 for no slice)"), "{e}");
        assert!(crate::create("rr[slice_ns=0]").is_ok());
        assert!(crate::create("rr[slice_ns=10000]").is_ok());
        assert!(crate::create("rr[slice_ns=9999]").is_err());
    }
}
