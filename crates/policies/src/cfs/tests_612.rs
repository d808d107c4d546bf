//! EEVDF as in Linux 6.12 (Debian 6.12.117 kernel/sched/fair.c): the mechanisms 6.12 adds over 6.6,
//! checked against values derived by hand from the source.

use super::{Cfs, CfsParams, EevdfKernel, EevdfParams};
use crate::testworld::TestWorld;
use schedlab_core::{CpuId, DequeueReason, EnqueueReason, SchedPolicy, SwitchReason};

const CPU0: CpuId = CpuId(0);
const CPU1: CpuId = CpuId(1);

fn eevdf612(w: &TestWorld, tweak: impl FnOnce(&mut CfsParams)) -> Cfs {
    let mut p = CfsParams { eevdf_kernel: EevdfKernel::V6_12, ..CfsParams::default() };
    tweak(&mut p);
    let mut c = Cfs::new_eevdf(EevdfParams(p)).expect("valid parameters");
    c.init(&w.ctx());
    c
}

/// DELAY_DEQUEUE (`dequeue_entity`): two nice-0 tasks placed at V with half a request each
/// (ENQUEUE_INITIAL). X runs 0.3 ms: v_X = v0 + 0.3 ms, V = v0 + 0.15 ms, so X is ineligible when it
/// blocks and stays queued. Y then runs 0.4 ms: V = v0 + 0.35 ms, X is eligible again and Y is not,
/// so Y blocks delayed too. The next pick (`pick_next_entity`) finds X, dequeues it, then Y (alone:
/// `pick_eevdf` returns it without an eligibility test), dequeues it, and the CPU goes idle.
#[test]
fn an_ineligible_sleeper_stays_queued_until_picked() {
    for delay in [true, false] {
        let mut w = TestWorld::new(1);
        w.tick_ns = 10_000_000; // no tick inside the test
        let mut c = eevdf612(&w, |p| p.f612.delay_dequeue = Some(delay));
        let (a, b) = (w.add_task(0), w.add_task(0));
        w.start(&mut c, a);
        w.start(&mut c, b);
        let x = w.pick(&mut c, CPU0).unwrap();
        let y = if x == a { b } else { a };
        w.advance(&mut c, 300_000);
        w.stop(&mut c, CPU0, SwitchReason::Blocked);
        assert_eq!(c.is_delayed(x), delay, "DELAY_DEQUEUE={delay}");
        if delay {
            assert!(!c.is_eligible(x));
        }
        assert_eq!(c.nr_runnable(), Some(1), "a delayed task is not runnable");
        assert_eq!(w.pick(&mut c, CPU0), Some(y));
        w.advance(&mut c, 400_000);
        w.stop(&mut c, CPU0, SwitchReason::Blocked);
        assert_eq!(c.is_delayed(y), delay);
        if delay {
            assert!(c.is_eligible(x) && !c.is_eligible(y));
        }
        assert_eq!(w.pick(&mut c, CPU0), None);
        assert!(!c.is_delayed(x) && !c.is_delayed(y), "both dequeued by the pick");
        assert_eq!(c.nr_runnable(), Some(0));
    }
}

/// `ttwu_runnable`: a delayed task wakes on the CPU it is still queued on, even with the waker's
/// CPU idle (where 6.6's `wake_affine_idle` sends a non-delayed wakee: the idle waking CPU shares
/// the cache with a busy previous CPU). Its negative lag stays (DELAY_ZERO drops positive lag only),
/// so the wakeup does not move its vruntime.
#[test]
fn a_delayed_task_wakes_where_it_is_queued_without_placement() {
    for delay in [true, false] {
        let mut w = TestWorld::new(2);
        w.tick_ns = 10_000_000;
        let mut c = eevdf612(&w, |p| p.f612.delay_dequeue = Some(delay));
        let (a, b) = (w.add_task(0), w.add_task(0));
        w.start(&mut c, a);
        w.start(&mut c, b);
        // Both on one CPU: fork placement spreads them, so B moves to A's CPU.
        let cpu = w.tasks[a.idx()].cpu;
        let cb = w.tasks[b.idx()].cpu;
        if cb != cpu {
            c.dequeue(&w.ctx(), cb, b, DequeueReason::Migrate);
            w.cpus[cb.idx()].nr_running -= 1;
            w.tasks[b.idx()].cpu = cpu;
            w.cpus[cpu.idx()].nr_running += 1;
            c.enqueue(&w.ctx(), cpu, b, EnqueueReason::Migrated);
        }
        let x = w.pick(&mut c, cpu).unwrap();
        w.advance(&mut c, 300_000);
        w.stop(&mut c, cpu, SwitchReason::Blocked);
        let v_before = c.vruntime_of(x);
        w.pick(&mut c, cpu);
        let other = if cpu == CPU0 { CPU1 } else { CPU0 };
        let woke_on = w.wake(&mut c, x, other);
        if delay {
            assert_eq!(woke_on, cpu, "a delayed task wakes where it is queued");
            assert_eq!(c.vruntime_of(x), v_before, "no placement for a negative lag");
        } else {
            assert_eq!(woke_on, other, "6.6 placement: the idle waking CPU");
        }
    }
}

/// PLACE_REL_DEADLINE: a migrating task keeps `deadline - vruntime` (`dequeue_entity` without
/// DEQUEUE_SLEEP, `place_entity` with `rel_deadline`); without it the enqueue gives a whole request
/// (1.4 ms x 1024 / 1024 on two CPUs: 6.12's base slice 0.7 ms x (1 + ilog2(2)) = 1.4 ms).
#[test]
fn a_migrated_task_keeps_its_relative_deadline() {
    for rel in [true, false] {
        let mut w = TestWorld::new(2);
        w.tick_ns = 10_000_000;
        let mut c = eevdf612(&w, |p| p.f612.place_rel_deadline = Some(rel));
        let t = w.add_task(0);
        let cpu = w.start(&mut c, t);
        // A new task: half a request (ENQUEUE_INITIAL), 0.7 ms of the 1.4 ms base slice.
        let gap = c.deadline_of(t).wrapping_sub(c.vruntime_of(t));
        assert_eq!(gap, 700_000);
        let to = if cpu == CPU0 { CPU1 } else { CPU0 };
        c.dequeue(&w.ctx(), cpu, t, DequeueReason::Migrate);
        w.tasks[t.idx()].cpu = to;
        c.enqueue(&w.ctx(), to, t, EnqueueReason::Migrated);
        let after = c.deadline_of(t).wrapping_sub(c.vruntime_of(t));
        assert_eq!(after, if rel { 700_000 } else { 1_400_000 }, "PLACE_REL_DEADLINE={rel}");
    }
}

/// 6.6 has none of 6.12's features: asking for one is an error naming it.
#[test]
fn a_612_feature_on_66_is_an_error() {
    let p = CfsParams { eevdf_kernel: EevdfKernel::V6_6, ..CfsParams::default() };
    let mut q = p.clone();
    q.f612.delay_dequeue = Some(true);
    let err = Cfs::new_eevdf(EevdfParams(q)).err().expect("an error");
    assert!(err.contains("delay_dequeue"), "{err}");
    assert!(Cfs::new_eevdf(EevdfParams(p)).is_ok());
}

/// Per-task slices (`__setparam_fair`, `place_entity`, `update_deadline`): a nice-0 task asking for
/// `sched_runtime` = 0.3 ms is placed with half of that request (ENQUEUE_INITIAL: deadline =
/// vruntime + 0.15 ms) and, once it used it up, gets a new request of 0.3 ms, not the base slice
/// (0.7 ms on one CPU in 6.12). Asks outside 0.1-100 ms are clamped; Linux 6.6 ignores the ask (its
/// base slice is 0.75 ms).
#[test]
fn a_task_with_its_own_slice_gets_requests_of_that_size() {
    let cases: [(EevdfKernel, Option<u64>, u64); 5] = [
        (EevdfKernel::V6_12, Some(300_000), 300_000),
        (EevdfKernel::V6_12, Some(20_000), 100_000),
        (EevdfKernel::V6_12, Some(500_000_000), 100_000_000),
        (EevdfKernel::V6_12, None, 700_000),
        (EevdfKernel::V6_6, Some(300_000), 750_000),
    ];
    for (kernel, ask, slice) in cases {
        let mut w = TestWorld::new(1);
        w.tick_ns = 1_000_000_000; // no tick inside the test
        let mut c = eevdf612(&w, |p| p.eevdf_kernel = kernel);
        let t = w.add_task(0);
        w.tasks[t.idx()].slice_ns = ask;
        w.start(&mut c, t);
        let placed = c.deadline_of(t).wrapping_sub(c.vruntime_of(t));
        let half = if kernel == EevdfKernel::V6_12 { slice / 2 } else { slice };
        assert_eq!(placed, half, "{kernel:?} {ask:?}: the first request (6.12 halves it for a new task)");
        assert_eq!(w.pick(&mut c, CPU0), Some(t));
        // Run past the first deadline: the next request is one slice from the vruntime reached.
        w.advance(&mut c, half + 1_000);
        c.tick(&w.ctx(), CPU0, t);
        let next = c.deadline_of(t).wrapping_sub(c.vruntime_of(t));
        assert!(
            next <= slice && next + 1_000 >= slice,
            "{kernel:?} {ask:?}: next request {next}, slice {slice}"
        );
    }
}

/// PREEMPT_SHORT with a per-task slice (`check_preempt_wakeup_fair`, `do_preempt_short`): a hog
/// (new: placed at v0 with half its 0.7 ms request, deadline v0 + 0.35 ms) is picked, so its slice
/// is protected, and runs 0.2 ms. A new task arrives, placed at V = v0 + 0.2 ms with half its
/// request. With a 0.1 ms slice its deadline is v0 + 0.25 ms: shorter slice and eligible, so the
/// hog's protection is cancelled and the earlier deadline wins the pick: preemption. Without
/// PREEMPT_SHORT the protected hog keeps the CPU; with the base slice the newcomer's deadline
/// (v0 + 0.55 ms) is later than the hog's and it waits either way.
#[test]
fn a_shorter_slice_cancels_the_running_tasks_protection() {
    let cases = [(Some(100_000), true, true), (Some(100_000), false, false), (None, true, false)];
    for (slice, preempt_short, preempts) in cases {
        let mut w = TestWorld::new(1);
        w.tick_ns = 1_000_000_000; // no tick inside the test
        let mut c = eevdf612(&w, |p| p.f612.preempt_short = Some(preempt_short));
        let hog = w.add_task(0);
        w.start(&mut c, hog);
        assert_eq!(w.pick(&mut c, CPU0), Some(hog));
        w.advance(&mut c, 200_000);
        let short = w.add_task(0);
        w.tasks[short.idx()].slice_ns = slice;
        w.start(&mut c, short);
        assert!(c.is_eligible(short));
        let got = c.check_preempt(&w.ctx(), CPU0, hog, short, schedlab_core::WakeKind::Fork);
        assert_eq!(got, preempts, "slice {slice:?}, PREEMPT_SHORT={preempt_short}");
    }
}

/// `should_we_balance` of 6.12 (Debian's 6.12.117, the 6.7 fix): with an idle SMT sibling on a busy
/// core (`idle_smt`) and no idle core in the group, only that sibling balances the MC level; 6.6.0
/// also let the group's first CPU balance (tests_66.rs `should_we_balance_66_0_falls_back_...`).
#[test]
fn should_we_balance_612_leaves_it_to_the_idle_smt_sibling() {
    use super::balance::IdleType;
    use super::lb66::LbEnv;
    let mut w = TestWorld::new(4);
    w.topo = schedlab_core::Topology::symmetric(1, 1, 1, 2, 2).unwrap();
    let p = CfsParams { eevdf_kernel: EevdfKernel::V6_12, ..CfsParams::default() };
    let mut c = Cfs::new_eevdf(EevdfParams(p)).expect("valid parameters");
    c.init(&w.ctx());
    let a = w.add_task(0);
    w.tasks[a.idx()].allowed = schedlab_core::CpuSet::single(CpuId(2));
    w.start(&mut c, a);
    w.pick(&mut c, CpuId(2));
    let ctx = w.ctx();
    let env = |cpu: u32| {
        let grp = c.cpus[cpu as usize].domains[1].groups[0].cpus;
        LbEnv::new(1, CpuId(cpu), grp, ctx.topo.all(), IdleType::NotIdle)
    };
    // Group {2, 3}: CPU 2 runs a task, CPU 3 is idle on that busy core: only CPU 3 balances.
    assert!(!c.should_we_balance(&ctx, &env(2)));
    assert!(c.should_we_balance(&ctx, &env(3)));
    // Group {0, 1}: an idle core: its first CPU balances.
    assert!(c.should_we_balance(&ctx, &env(0)));
    assert!(!c.should_we_balance(&ctx, &env(1)));
}
