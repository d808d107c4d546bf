//! `SchedPolicy::set_nice`: each policy applies a live task's new nice level the way its source's
//! `set_user_nice` / `sched_nice` does, keeping the task's history. Expected values are derived by
//! hand from the source named in each test.

use crate::bfs::{Bfs, BfsParams};
use crate::bsd4::{Bsd4, Bsd4Params};
use crate::cfs::{Cfs, CfsParams, EevdfKernel, EevdfParams};
use crate::o1::{timeslice_ns, NoParams, O1};
use crate::testworld::TestWorld;
use crate::ule::{Ule, UleParams};
use schedlab_core::{CpuId, SchedPolicy, SwitchReason, NSEC_PER_MSEC};

const CPU0: CpuId = CpuId(0);
const MS: u64 = NSEC_PER_MSEC;

/// Two nice-0 tasks on one CPU: `a` running (picked first), `b` queued.
fn two_tasks(w: &mut TestWorld, p: &mut dyn SchedPolicy) -> (schedlab_core::TaskId, schedlab_core::TaskId) {
    p.init(&w.ctx());
    let (a, b) = (w.add_task(0), w.add_task(0));
    w.start(p, a);
    w.start(p, b);
    let first = w.pick(p, CPU0).expect("a task");
    let other = if first == a { b } else { a };
    (first, other)
}

/// 2.6.38 `set_user_nice`: a queued task is dequeued (vruntime made relative to min_vruntime) and
/// enqueued again (made absolute with the same min_vruntime), so its vruntime is unchanged and only
/// its weight moves (nice 5: 335); the CPU is rescheduled when the priority rose, or fell for the
/// running task.
#[test]
fn cfs_2638_keeps_the_vruntime_and_takes_the_new_weight() {
    let mut w = TestWorld::new(1);
    let mut c = Cfs::new(CfsParams::default());
    let (a, b) = two_tasks(&mut w, &mut c);
    w.advance(&mut c, 3 * MS);
    let vb = c.vruntime_of(b);
    assert_eq!(w.renice(&mut c, b, 5), None, "a queued task's priority fell: no reschedule");
    assert_eq!((c.vruntime_of(b), c.weight_of(b)), (vb, 335));
    assert_eq!(w.renice(&mut c, b, -5), Some(CPU0), "a queued task's priority rose");
    assert_eq!(c.weight_of(b), 3121);
    assert_eq!(w.renice(&mut c, a, 3), Some(CPU0), "the running task's priority fell");
    assert_eq!(c.weight_of(a), 526);
}

/// 6.6 `set_user_nice` -> `reweight_task` -> `reweight_entity` on an entity off its runqueue: the
/// saved lag is `V - v`, the lag in service `w x (V - v)`, so it scales by old / new weight.
#[test]
fn eevdf_scales_a_sleeping_tasks_lag_by_old_over_new_weight() {
    let mut w = TestWorld::new(1);
    let p = CfsParams { eevdf_kernel: EevdfKernel::V6_6, ..CfsParams::default() };
    let mut c = Cfs::new_eevdf(EevdfParams(p)).expect("6.6 parameters");
    let (a, _b) = two_tasks(&mut w, &mut c);
    w.advance(&mut c, 2 * MS);
    w.stop(&mut c, CPU0, SwitchReason::Blocked);
    let lag = c.lag_of(a);
    assert!(lag < 0, "it ran ahead of the other task: negative lag, got {lag}");
    assert_eq!(w.renice(&mut c, a, 5), None);
    assert_eq!(c.lag_of(a), (lag as i128 * 1024 / 335) as i64);
    assert_eq!(c.weight_of(a), 335);
}

/// 2.6.22 `set_user_nice`: the new static priority moves the dynamic one by as many levels (the
/// bonus from `sleep_avg` is kept), the slice in progress is kept and the next one is the new
/// level's (nice 10: 50 ms at HZ 1000); the running task's CPU is rescheduled when it fell.
#[test]
fn o1_moves_the_priority_keeps_the_slice_and_the_next_slice_follows_the_new_level() {
    let mut w = TestWorld::new(1);
    let mut o = O1::new(NoParams);
    let (a, _b) = two_tasks(&mut w, &mut o);
    w.advance(&mut o, 10 * MS);
    let (prio, sleep_avg, left) = (o.prio_of(a), o.sleep_avg_of(a), o.slice_left(a));
    assert_eq!(w.renice(&mut o, a, 10), Some(CPU0));
    assert_eq!((o.prio_of(a), o.sleep_avg_of(a), o.slice_left(a)), (prio + 10, sleep_avg, left));
    w.advance(&mut o, left);
    assert_eq!(o.slice_left(a), timeslice_ns(130, MS));
    assert_eq!(timeslice_ns(130, MS), 50 * MS);
}

/// FreeBSD 10.4 `sched_nice` -> `sched_priority`: for a thread that is not interactive the user
/// priority is its run-tick part plus `SCHED_PRI_NICE(nice)`, so two renices move it by the
/// difference of the levels; the interactivity history is the thread's own and is kept.
#[test]
fn ule_moves_the_priority_by_the_nice_difference_and_keeps_the_history() {
    let mut w = TestWorld::new(1);
    let mut u = Ule::new(UleParams::default());
    let (a, _b) = two_tasks(&mut w, &mut u);
    w.advance(&mut u, 2000 * MS);
    w.stop(&mut u, CPU0, SwitchReason::Preempted);
    let (score, hist) = (u.score_of(a), u.history_of(a));
    assert!(score > 40, "a CPU hog is not interactive even at nice -10: score {score}");
    w.renice(&mut u, a, -10);
    let p10 = u.priority_of(a);
    w.renice(&mut u, a, -5);
    assert_eq!(u.priority_of(a), p10 + 5);
    assert_eq!((u.score_of(a), u.history_of(a)), (score, hist));
}

/// `sched_nice` in sched_4bsd.c: `resetpriority` = PUSER + estcpu / INVERSE_ESTCPU_WEIGHT +
/// NICE_WEIGHT x (nice - PRIO_MIN), so nice 0 -> 5 adds 5; `estcpu` is kept.
#[test]
fn bsd4_recomputes_the_user_priority_and_keeps_estcpu() {
    let mut w = TestWorld::new(1);
    let mut p = Bsd4::new(Bsd4Params::default());
    let (a, _b) = two_tasks(&mut w, &mut p);
    w.advance(&mut p, 500 * MS);
    w.stop(&mut p, CPU0, SwitchReason::Preempted);
    let (pri, estcpu) = (p.priority(a), p.estcpu(a));
    assert!(estcpu > 0);
    w.renice(&mut p, a, 5);
    assert_eq!((p.priority(a), p.estcpu(a)), (pri + 5, estcpu));
}

/// BFS `set_user_nice` -> `adjust_deadline`: the deadline moves by the difference of the two levels'
/// `prio_deadline_diff`, queued or running; a queued task whose nice fell tries to preempt
/// (`can_preempt`: an earlier deadline than the running task's), the running task's CPU is
/// rescheduled when its nice rose.
#[test]
fn bfs_moves_the_deadline_by_the_difference_of_the_offsets() {
    let mut w = TestWorld::new(1);
    let mut b = Bfs::new(BfsParams::default());
    let (a, q) = two_tasks(&mut w, &mut b);
    let (da, dq) = (b.deadline_of(a), b.deadline_of(q));
    assert!(da <= dq, "the first task runs first: no later deadline");
    assert_eq!(w.renice(&mut b, q, 5), None);
    assert_eq!(b.deadline_of(q), dq + b.deadline_diff(5) - b.deadline_diff(0));
    // Down to nice 3: its deadline is still later than the running task's, so no preemption.
    assert_eq!(w.renice(&mut b, q, 3), None);
    assert_eq!(b.deadline_of(q), dq + b.deadline_diff(3) - b.deadline_diff(0));
    assert_eq!(w.renice(&mut b, a, 3), Some(CPU0));
    assert_eq!(b.deadline_of(a), da + b.deadline_diff(3) - b.deadline_diff(0));
}
