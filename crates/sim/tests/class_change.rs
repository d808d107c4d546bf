//! A task changing its own scheduling class (`sched_setscheduler`, the workload's `policy` op): the
//! engine's hook sequence, and every policy with real-time classes running the task as real time
//! from the change on and as time-shared again after it.

#[macro_use]
mod common;

use schedlab_core::{
    CpuId, Ctx, DequeueReason, Dispatch, EnqueueReason, SchedClass, SchedPolicy, SwitchReason, TaskId,
    NSEC_PER_MSEC,
};
use schedlab_sim::{Machine, RunConfig, RunReport, Sim};
use schedlab_workload::{ProgramBuilder as P, StopWhen, Workload, WorkloadBuilder};

const MS: u64 = NSEC_PER_MSEC;

/// Two time-shared hogs of 600 ms each and `changer`, all started at once on one CPU.
fn with_hogs(changer: P) -> Workload {
    let mut w = WorkloadBuilder::new("class-change");
    w.task("hog", P::new().compute(600 * MS).build()).instances = 2;
    w.task("changer", changer.build());
    w.stop(StopWhen::AllDone);
    w.build().expect("a valid workload")
}

fn run(spec: &str, w: &Workload) -> RunReport {
    let mut p = schedlab_policies::create(spec).unwrap();
    let cfg = RunConfig { duration_ns: 10_000 * MS, check_invariants: true, ..RunConfig::default() };
    let m = Machine::preset("up").unwrap();
    Sim::new(&m, w, p.as_mut(), spec, cfg).unwrap().run().unwrap()
}

fn changer(r: &RunReport) -> &schedlab_sim::report::TaskReport {
    r.tasks.iter().find(|t| t.name == "changer").expect("the changer task")
}

/// Every policy with real-time classes: once SCHED_FIFO, the task computes 300 ms beside two hogs
/// without being preempted once; back at SCHED_OTHER, it shares the CPU with them again and is
/// preempted while it computes another 300 ms. (`fifo` and `rr`, the baselines without classes,
/// run every task alike.)
fn check_policy(spec: &str) {
    if matches!(spec, "fifo" | "rr") {
        return;
    }
    let w = with_hogs(P::new().set_class(SchedClass::Fifo, 50).compute(300 * MS));
    let r = run(spec, &w);
    let c = changer(&r);
    assert_eq!(c.nivcsw, 0, "{spec}: a SCHED_FIFO task was preempted by time-shared hogs");
    assert_eq!(c.class, SchedClass::Fifo, "{spec}");
    let w = with_hogs(
        P::new()
            .set_class(SchedClass::Fifo, 50)
            .compute(100 * MS)
            .set_class(SchedClass::Normal, 0)
            .compute(300 * MS),
    );
    let r = run(spec, &w);
    let c = changer(&r);
    assert!(c.nivcsw >= 1, "{spec}: back at SCHED_OTHER, the task was never preempted by the hogs");
    assert_eq!(c.class, SchedClass::Normal, "{spec}");
    assert!(r.summary.nr_exited == 3, "{spec}: a task was lost");
}

every_policy!(check_policy);

/// One hook call, as a policy sees it.
#[derive(Debug, PartialEq, Eq)]
enum Call {
    PutPrev(SwitchReason),
    Dequeue(DequeueReason),
    SetClass { old: (SchedClass, u8), new: (SchedClass, u8) },
    Enqueue(EnqueueReason),
    Picked,
}

/// CFS, recording every hook that concerns task `watch`.
struct Recorder {
    inner: Box<dyn SchedPolicy>,
    watch: TaskId,
    calls: Vec<Call>,
}

impl SchedPolicy for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    fn init(&mut self, ctx: &Ctx) {
        self.inner.init(ctx)
    }
    fn task_new(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        self.inner.task_new(ctx, t)
    }
    fn select_cpu(&mut self, ctx: &Ctx, t: TaskId, w: &schedlab_core::WakeInfo) -> CpuId {
        self.inner.select_cpu(ctx, t, w)
    }
    fn enqueue(&mut self, ctx: &Ctx, c: CpuId, t: TaskId, why: EnqueueReason) {
        if t == self.watch {
            self.calls.push(Call::Enqueue(why));
        }
        self.inner.enqueue(ctx, c, t, why)
    }
    fn dequeue(&mut self, ctx: &Ctx, c: CpuId, t: TaskId, why: DequeueReason) {
        if t == self.watch {
            self.calls.push(Call::Dequeue(why));
        }
        self.inner.dequeue(ctx, c, t, why)
    }
    fn pick_next(&mut self, ctx: &Ctx, c: CpuId) -> Option<Dispatch> {
        let d = self.inner.pick_next(ctx, c);
        if d.is_some_and(|d| d.task == self.watch) {
            self.calls.push(Call::Picked);
        }
        d
    }
    fn put_prev(&mut self, ctx: &Ctx, c: CpuId, t: TaskId, why: SwitchReason) {
        if t == self.watch {
            self.calls.push(Call::PutPrev(why));
        }
        self.inner.put_prev(ctx, c, t, why)
    }
    fn tick(&mut self, ctx: &Ctx, c: CpuId, t: TaskId) -> bool {
        self.inner.tick(ctx, c, t)
    }
    fn check_preempt(
        &mut self,
        ctx: &Ctx,
        c: CpuId,
        curr: TaskId,
        woken: TaskId,
        kind: schedlab_core::WakeKind,
    ) -> bool {
        self.inner.check_preempt(ctx, c, curr, woken, kind)
    }
    fn set_class(&mut self, ctx: &Ctx, t: TaskId, old_class: SchedClass, old_rt_priority: u8) {
        if t == self.watch {
            let new = (ctx.task(t).class, ctx.task(t).rt_priority);
            self.calls.push(Call::SetClass { old: (old_class, old_rt_priority), new });
        }
        self.inner.set_class(ctx, t, old_class, old_rt_priority)
    }
    fn nr_runnable(&self) -> Option<usize> {
        self.inner.nr_runnable()
    }
}

#[test]
fn a_class_change_is_put_prev_dequeue_save_set_class_enqueue_restore_and_a_pick() {
    // The changer alone: its own change to what it has already calls nothing.
    let mut w = WorkloadBuilder::new("hooks");
    w.task(
        "changer",
        P::new()
            .compute(MS)
            .set_class(SchedClass::Rr, 20)
            .set_class(SchedClass::Rr, 20)
            .compute(MS)
            .set_class(SchedClass::Normal, 0)
            .build(),
    );
    w.stop(StopWhen::AllDone);
    let w = w.build().unwrap();
    let mut p =
        Recorder { inner: schedlab_policies::create("cfs").unwrap(), watch: TaskId(0), calls: Vec::new() };
    let cfg = RunConfig { duration_ns: 1_000 * MS, check_invariants: true, ..RunConfig::default() };
    let m = Machine::preset("up").unwrap();
    let r = Sim::new(&m, &w, &mut p, "recorder", cfg).unwrap().run().unwrap();
    assert_eq!(r.summary.nr_exited, 1);
    let change = |old, new| {
        [
            Call::PutPrev(SwitchReason::Preempted),
            Call::Dequeue(DequeueReason::Save),
            Call::SetClass { old, new },
            Call::Enqueue(EnqueueReason::Restore),
            Call::Picked,
        ]
    };
    let mut want = vec![Call::Enqueue(EnqueueReason::New), Call::Picked];
    want.extend(change((SchedClass::Normal, 0), (SchedClass::Rr, 20)));
    want.extend(change((SchedClass::Rr, 20), (SchedClass::Normal, 0)));
    want.push(Call::PutPrev(SwitchReason::Exited));
    assert_eq!(p.calls, want);
    // Neither change switched the CPU to another task, so neither is a context switch.
    assert_eq!(r.tasks[0].nivcsw, 0);
}
