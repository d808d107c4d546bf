//! 4BSD's documented behaviour, each expectation computed by hand from sched_4bsd.c's formulas.

use super::*;
use crate::testworld::TestWorld;

fn world(cpus: u32) -> (TestWorld, Bsd4) {
    let w = TestWorld::new(cpus);
    let mut p = Bsd4::new(Bsd4Params::default());
    p.init(&w.ctx());
    (w, p)
}

#[test]
fn the_constants_follow_the_smp_kernel() {
    // INVERSE_ESTCPU_WEIGHT = 8 x smp_cpus; ESTCPULIM = W x (40 - 4) + W - 1 = 37 W - 1.
    assert_eq!(inverse_estcpu_weight(1), 8);
    assert_eq!(inverse_estcpu_weight(4), 32);
    assert_eq!(estcpu_lim(10_000, 8), 295);
    assert_eq!(estcpu_lim(100, 8), 100);
    // PUSER + estcpu / W + (nice - PRIO_MIN): 120 + 80/8 + 20 = 150; nice 19 caps near the top.
    assert_eq!(user_pri(80, 0, 8), 150);
    assert_eq!(user_pri(0, -20, 8), 120);
    assert_eq!(user_pri(295, 19, 8), 120 + 36 + 39);
    assert_eq!(user_pri(10_000, 19, 8), PRI_MAX_TIMESHARE);
}

#[test]
fn estcpu_decays_by_the_load_average_formula() {
    // decay_cpu(2 ld, e) = 2 ld e / (2 ld + FSCALE). Load 1.0 (2048): b = 2, factor 2/3: 300 -> 200.
    assert_eq!(decay_cpu(2 * FSCALE, 300), 200);
    // Load 3.0: factor 6/7: 700 -> 600. Load 0: everything is forgotten at once.
    assert_eq!(decay_cpu(6 * FSCALE, 700), 600);
    assert_eq!(decay_cpu(0, 700), 0);
    // The loop FreeBSD's comment describes: at load 1, 90 % is forgotten in about 5.68 passes, so
    // 255 falls below 10 % (25.5) after 6 passes and not after 5.
    let after = |n: usize| (0..n).fold(255, |e, _| decay_cpu(2 * FSCALE, e));
    assert!(after(5) > 25 && after(6) <= 25, "{} {}", after(5), after(6));
}

#[test]
fn the_load_average_moves_by_exp_minus_5_over_60_per_sample() {
    // ld' = (1884 ld + nrun x 2048 x (2048 - 1884)) >> 11, from 0 with two runnable threads:
    // 2 x 164 = 328, then (1884 x 328 + 671744) >> 11 = 1289696 >> 11 = 629.
    assert_eq!(loadav_step(0, 2), 328);
    assert_eq!(loadav_step(328, 2), 629);
    // Converges on nrun: after 10 minutes (120 samples) within 1 % of 2.0.
    let ld = (0..120).fold(0, |l, _| loadav_step(l, 2));
    assert!((2 * FSCALE - ld) * 100 < 2 * FSCALE, "{ld}");
}

#[test]
fn a_running_thread_is_charged_per_stathz_tick_and_its_priority_follows() {
    let (mut w, mut p) = world(1);
    let t = w.add_task(0);
    w.start(&mut p, t);
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(t));
    assert_eq!(p.priority(t), 140, "estcpu 0, nice 0: 120 + 0 + 20");
    // 500 ms at HZ 1000: the stathz ticks at k x 1e9/127 ns for k = 1..63 (63 x 7.874 ms = 496 ms).
    w.advance(&mut p, 500_000_000);
    assert_eq!(p.estcpu(t), 63);
    // Recomputed at estcpu 56 (a multiple of W = 8): 120 + 7 + 20.
    assert_eq!(p.priority(t), 147);
}

#[test]
fn the_slice_is_twelve_stathz_ticks_and_a_wakeup_refills_it() {
    let (mut w, mut p) = world(1);
    let t = w.add_task(0);
    w.start(&mut p, t);
    w.pick(&mut p, CpuId(0));
    // A new thread without a parent starts as forked: a slice of 1 tick, so the first stathz tick
    // (at 7.874 ms) ends it.
    assert!(w.advance(&mut p, 7_000_000).is_empty());
    assert_eq!(w.advance(&mut p, 1_000_000), vec![CpuId(0)]);
    // Then 12 ticks: the 13th stathz tick is at 13 x 7.874 = 102.4 ms.
    assert!(w.advance(&mut p, 94_000_000).is_empty(), "12th tick at 94.5 ms not yet");
    assert_eq!(w.advance(&mut p, 1_000_000), vec![CpuId(0)]);
    // Blocks, wakes: a full slice again.
    w.stop(&mut p, CpuId(0), SwitchReason::Blocked);
    w.wake(&mut p, t, CpuId(0));
    w.pick(&mut p, CpuId(0));
    assert_eq!(p.tds[t.idx()].slice, 12);
}

#[test]
fn equal_threads_round_robin_and_a_better_priority_is_chosen_first() {
    let (mut w, mut p) = world(1);
    let (a, b, c) = (w.add_task(0), w.add_task(0), w.add_task(5));
    for t in [a, b, c] {
        w.start(&mut p, t);
    }
    // a (140), b (140), c (145, list 36): a first, then b behind it at the tail of list 35.
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(a));
    w.stop(&mut p, CpuId(0), SwitchReason::SliceExpired);
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(b));
    w.stop(&mut p, CpuId(0), SwitchReason::SliceExpired);
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(a));
    // A woken thread of strictly better priority reschedules the waking CPU; an equal one does not.
    let d = w.add_task(-1);
    w.start(&mut p, d);
    assert!(p.check_preempt(&w.ctx(), CpuId(0), a, d, WakeKind::Wakeup));
    assert!(!p.check_preempt(&w.ctx(), CpuId(0), a, b, WakeKind::Wakeup));
}

#[test]
fn schedcpu_decays_awake_threads_and_wakeup_catches_up_a_long_sleep() {
    let (mut w, mut p) = world(2);
    let (s, h) = (w.add_task(0), w.add_task(0));
    w.start(&mut p, s);
    w.start(&mut p, h);
    w.pick(&mut p, CpuId(0));
    w.pick(&mut p, CpuId(1));
    // s sleeps now with estcpu 600; the load average is held at 1.0 (loadfac 4096, factor 2/3).
    w.stop(&mut p, CpuId(0), SwitchReason::Blocked);
    p.set_estcpu(s, 600);
    p.set_ldavg(FSCALE);
    // Pass 1 (1 s): s ran in that second (TDF_DIDRUN), so it is awake: 600 -> 400, slptime 0.
    // Pass 2 (2 s): asleep, slptime 1, still decayed: 400 -> 266. Passes 3 and 4: slptime 2, 3.
    p.next_loadav_ns = u64::MAX; // keep the load at 1.0
    w.advance(&mut p, 4_000_000_000);
    assert_eq!(p.estcpu(s), 266);
    assert_eq!(p.tds[s.idx()].slptime, 3);
    // Waking: updatepri decays once per second slept beyond the counted ones: slptime 3 -> 2 -> 1
    // gives one more decay, 266 -> 177; the user priority follows: 120 + 177 / 16 + 20 = 151. The
    // thread slept in nanosleep, so it runs at PWAIT until it returns to user mode.
    w.wake(&mut p, s, CpuId(1));
    assert_eq!(p.estcpu(s), 177);
    assert_eq!(p.priority(s), PWAIT);
    assert_eq!(p.class_pri(&w.ctx(), s), 151);
}

/// Wakes `t` after a wait of kind `wait`, from a timer or device.
fn wake_after(w: &mut TestWorld, p: &mut Bsd4, t: TaskId, wait: WaitKind) {
    let info = WakeInfo { waker_cpu: CpuId(0), waker: None, sync: false, wait };
    w.tasks[t.idx()].state = TaskState::Runnable;
    let cpu = p.select_cpu(&w.ctx(), t, &info);
    w.cpus[cpu.idx()].nr_running += 1;
    p.enqueue(&w.ctx(), cpu, t, EnqueueReason::Wakeup);
}

/// `sched_sleep` and `sched_userret` (sched_4bsd.c, 10.4): a timeshare thread sleeps at its wait
/// channel's priority (nanosleep and wait4: PWAIT 108; pipes and disk buffers: PRIBIO 92; umtx
/// mutexes: none) and keeps it while queued, so `maybe_resched` compares that priority with the
/// running thread's; on its way back to user mode it takes its user priority again. A hog at user
/// priority 140 (estcpu 0) runs; the sleeper's user priority is 120 + 160 / 8 + 20 = 160.
#[test]
fn a_woken_thread_runs_at_its_sleep_priority_until_it_returns_to_user_mode() {
    let (mut w, mut p) = world(1);
    let (hog, s) = (w.add_task(0), w.add_task(0));
    w.start(&mut p, hog);
    w.start(&mut p, s);
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(hog));
    p.remove(s);
    w.tasks[s.idx()].state = TaskState::Blocked;
    w.cpus[0].nr_running -= 1;
    p.nr_running -= 1;
    p.set_estcpu(s, 160);
    for (wait, pri, preempts) in [
        (WaitKind::Sleep, PWAIT, true),
        (WaitKind::Pipe, PRIBIO, true),
        (WaitKind::Disk, PRIBIO, true),
        (WaitKind::Children, PWAIT, true),
        (WaitKind::Futex, 160, false),
    ] {
        p.tds[s.idx()].pri = 160;
        wake_after(&mut w, &mut p, s, wait);
        assert_eq!(p.priority(s), pri, "{wait:?}");
        // schedcpu's resetpriority_thread leaves a sleep priority alone.
        p.resetpriority(&w.ctx(), s);
        assert_eq!(p.priority(s), pri, "{wait:?} after resetpriority");
        assert_eq!(p.check_preempt(&w.ctx(), CpuId(0), hog, s, WakeKind::Wakeup), preempts, "{wait:?}");
        // Picked: back in user mode at 160 (the hog is not running in this bookkeeping).
        w.stop(&mut p, CpuId(0), SwitchReason::Preempted);
        assert_eq!(w.pick(&mut p, CpuId(0)), Some(if preempts { s } else { hog }), "{wait:?}");
        if preempts {
            assert_eq!(p.priority(s), 160);
            w.stop(&mut p, CpuId(0), SwitchReason::Blocked);
            assert_eq!(w.pick(&mut p, CpuId(0)), Some(hog));
        } else {
            p.remove(s);
            w.cpus[0].nr_running -= 1;
            p.nr_running -= 1;
        }
        w.tasks[s.idx()].state = TaskState::Blocked;
    }
}

#[test]
fn a_forked_child_inherits_estcpu_and_its_exit_charges_the_parent() {
    let (mut w, mut p) = world(1);
    let parent = w.add_task(0);
    w.start(&mut p, parent);
    w.pick(&mut p, CpuId(0));
    p.set_estcpu(parent, 40);
    let child = w.add_task(0);
    w.tasks[child.idx()].parent = Some(parent);
    w.start(&mut p, child);
    assert_eq!(p.estcpu(child), 40);
    assert_eq!(p.tds[child.idx()].slice, 1);
    p.set_estcpu(child, 100);
    p.task_exit(&w.ctx(), child);
    assert_eq!(p.estcpu(parent), 140);
}

#[test]
fn a_wakeup_from_a_busy_cpu_goes_to_an_idle_one_and_pinned_threads_use_their_cpus_queue() {
    let (mut w, mut p) = world(3);
    let (busy, sleeper, pinned) = (w.add_task(0), w.add_task(0), w.add_task(0));
    // Started from idle CPU 0: no forwarding, CPU 0 takes it.
    assert_eq!(w.start(&mut p, busy), CpuId(0));
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(busy));
    assert_eq!(p.nr_forwarded, 0);
    // From busy CPU 0 with CPUs 1 and 2 idle: forwarded to the lowest idle one.
    assert_eq!(w.start(&mut p, sleeper), CpuId(1));
    assert_eq!(p.nr_forwarded, 1);
    // A thread allowed on CPUs 1 and 2 only goes to a per-CPU queue: its last CPU (0) is not allowed,
    // so the first allowed CPU, replaced only by a strictly shorter queue: CPU 1.
    w.tasks[pinned.idx()].allowed.remove(CpuId(0));
    assert_eq!(w.start(&mut p, pinned), CpuId(1));
    assert_eq!(p.tds[pinned.idx()].queue, Queue::Cpu(CpuId(1)));
    // CPU 1's own head (140) is not strictly better than the global head (140): the global one runs.
    assert_eq!(w.pick(&mut p, CpuId(1)), Some(sleeper));
    // CPU 2 may not take a thread on CPU 1's queue, though its affinity allows CPU 2.
    assert_eq!(w.pick(&mut p, CpuId(2)), None);
}
