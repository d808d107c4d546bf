//! ULE behaviour through the hooks, with expectations computed from FreeBSD's constants: hz 1000,
//! stathz 127, tickincr = (1000 << 10) / 127 = 8062, SLP_RUN_FORK = 512000.

use super::*;
use crate::testworld::TestWorld;
use schedlab_core::{SwitchReason, Topology};

const TICKINCR: u64 = 8062;
const MS: Ns = 1_000_000;

fn ule() -> Ule {
    Ule::new(UleParams::default())
}

/// The stathz tick index at `now`.
fn stat_tick(now: Ns) -> u64 {
    now * 127 / NSEC_PER_SEC
}

/// Runs `cpu` until a tick asks for a reschedule; returns the time.
fn run_to_resched(w: &mut TestWorld, p: &mut Ule, cpu: CpuId) -> Ns {
    for _ in 0..10_000 {
        if w.advance(p, MS).contains(&cpu) {
            return w.now;
        }
    }
    panic!("no reschedule within 10 s");
}

#[test]
fn slices_last_12_12_2_2_stathz_ticks_for_1_2_6_20_threads() {
    for (n, want) in [(1u32, 12u64), (2, 12), (6, 2), (20, 2)] {
        let mut w = TestWorld::new(1);
        let mut p = ule();
        p.init(&w.ctx());
        for _ in 0..n {
            let t = w.add_task(0);
            w.start(&mut p, t);
        }
        let cpu = CpuId(0);
        w.pick(&mut p, cpu);
        // The first slice of a new thread is shortened (slice - slice_min used up front); measure two
        // slices after every thread has had its first.
        let mut ends = vec![];
        for _ in 0..n + 3 {
            ends.push(run_to_resched(&mut w, &mut p, cpu));
            w.stop(&mut p, cpu, SwitchReason::Preempted);
            w.pick(&mut p, cpu);
        }
        for pair in ends[n as usize + 1..].windows(2) {
            assert_eq!(stat_tick(pair[1]) - stat_tick(pair[0]), want, "{n} threads: slice in stathz ticks");
        }
        assert_eq!(p.slice_for_load(n), want);
    }
}

#[test]
fn the_score_follows_one_second_of_run_and_three_of_sleep() {
    let mut w = TestWorld::new(1);
    let mut p = ule();
    p.init(&w.ctx());
    let t = w.add_task(0);
    w.start(&mut p, t);
    // Started from an idle shell: 0.5 s of sleep, no run time; score 0, priority 120.
    assert_eq!(p.history_of(t), History { runtime: 0, slptime: 512_000 });
    assert_eq!(p.priority_of(t), 120);
    let cpu = CpuId(0);
    w.pick(&mut p, cpu);
    w.advance(&mut p, 1000 * MS);
    // 127 stathz ticks in the first second, each charging tickincr.
    let run = 127 * TICKINCR;
    assert_eq!(p.history_of(t).runtime, run);
    // It now runs more than it slept: 50 at the default threshold, a batch priority.
    assert_eq!(p.score_of(t), 50);
    assert!(p.priority_of(t) >= PRI_MIN_BATCH);
    w.stop(&mut p, cpu, SwitchReason::Blocked);
    w.advance(&mut p, 3000 * MS);
    w.wake(&mut p, t, cpu);
    let slp = 512_000 + (3000 << 10);
    assert_eq!(p.history_of(t), History { runtime: run, slptime: slp });
    let want = (run / (slp / 50)) as u32; // 1023874 / 71680 = 14
    assert_eq!(p.score_of(t), want);
    assert_eq!(want, 14);
    // Queued at the static boost (152) it slept with; in user mode at 120 + 14.
    assert_eq!(p.priority_of(t), 152);
    w.pick(&mut p, cpu);
    assert_eq!(p.priority_of(t), 134);
}

#[test]
fn a_child_inherits_scaled_history_and_returns_its_run_time_at_exit() {
    let mut w = TestWorld::new(1);
    let mut p = ule();
    p.init(&w.ctx());
    let parent = w.add_task(0);
    w.start(&mut p, parent);
    let cpu = CpuId(0);
    w.pick(&mut p, cpu);
    w.advance(&mut p, 1000 * MS);
    let before = p.history_of(parent);
    let child = w.add_task(0);
    w.tasks[child.idx()].parent = Some(parent);
    w.start(&mut p, child);
    // The child's history is the parent's divided by sum / SLP_RUN_FORK.
    let ratio = (before.runtime + before.slptime) / 512_000;
    assert_eq!(ratio, 2);
    assert_eq!(p.history_of(child), History { runtime: before.runtime / 2, slptime: before.slptime / 2 });
    // The parent pays one tick for the fork.
    assert_eq!(p.history_of(parent).runtime, before.runtime + TICKINCR);
    // The child inherits the parent's (batch) priority until it first runs.
    assert_eq!(p.priority_of(child), p.priority_of(parent));
    // At exit the child's run time goes to the parent; its sleep does not.
    let parent_before_exit = p.history_of(parent);
    w.tasks[child.idx()].state = TaskState::Exited;
    p.task_exit(&w.ctx(), child);
    let got = p.history_of(parent);
    assert_eq!(got.runtime, parent_before_exit.runtime + before.runtime / 2);
    assert_eq!(got.slptime, parent_before_exit.slptime);
}

#[test]
fn a_busy_master_forks_interactive_then_batch_children() {
    // The master (from an idle shell: 0 run, 512000 sleep) computes 10 ms between forks. Each cycle
    // adds ~10240 of run time (1.27 stathz ticks x 8062) plus 8062 for the fork. A child inherits the
    // master's history before the fork charge, divided by sum / SLP_RUN_FORK (1 until the sum reaches
    // 1024000), so its score is runtime / (512000 / 50) = runtime / 10240: 30 at fork 17.2 on average.
    let mut w = TestWorld::new(1);
    let mut p = ule();
    p.init(&w.ctx());
    let cpu = CpuId(0);
    let master = w.add_task(0);
    w.start(&mut p, master);
    w.pick(&mut p, cpu);
    let mut scores = vec![];
    for _ in 0..30 {
        w.advance(&mut p, 10 * MS);
        let c = w.add_task(0);
        w.tasks[c.idx()].parent = Some(master);
        w.tasks[c.idx()].allowed = CpuSet::single(cpu);
        let h = p.history_of(master);
        p.task_new(&w.ctx(), c);
        let ratio = (h.runtime + h.slptime) / 512_000;
        assert_eq!(p.history_of(c), History { runtime: h.runtime / ratio, slptime: h.slptime / ratio });
        scores.push(p.score_of(c));
    }
    assert!(scores.windows(2).all(|s| s[0] <= s[1]), "scores only grow: {scores:?}");
    let first_batch = scores.iter().position(|&s| s >= INTERACT_THRESH).unwrap() + 1;
    assert!((17..=19).contains(&first_batch), "first batch child is fork {first_batch}: {scores:?}");
}

/// A master that ran 1000 ms alone on one CPU creates a thread of its own process: the policy, the
/// master, its history just before, and the thread.
fn thread_of_a_master_with_a_second_of_history(params: UleParams) -> (Ule, TaskId, History, TaskId) {
    let mut w = TestWorld::new(1);
    let mut p = Ule::new(params);
    p.init(&w.ctx());
    let parent = w.add_task(0);
    w.start(&mut p, parent);
    w.pick(&mut p, CpuId(0));
    w.advance(&mut p, 1000 * MS);
    let before = p.history_of(parent);
    let child = w.add_task(0);
    w.tasks[child.idx()].parent = Some(parent);
    w.tasks[child.idx()].tgid = w.tasks[parent.idx()].tgid;
    w.start(&mut p, child);
    (p, parent, before, child)
}

#[test]
fn a_thread_of_the_parents_process_takes_its_whole_history_and_the_parent_pays_nothing() {
    // pthread_create is thr_new -> thread_create -> sched_fork_thread only (FreeBSD 10.4
    // kern_thr.c): no sched_interact_fork scaling, no tickincr for the parent. The same master
    // with 1000 ms of history as the fork test above: a thread child copies it as it is.
    let (p, parent, before, child) = thread_of_a_master_with_a_second_of_history(UleParams::default());
    assert!(before.runtime + before.slptime > 512_000, "more than SLP_RUN_FORK: a fork would scale it");
    assert_eq!(p.history_of(child), before);
    assert_eq!(p.history_of(parent), before, "no charge for creating a thread");
    assert_eq!(p.score_of(child), p.score_of(parent));
}

#[test]
fn with_new_thread_fork_a_thread_is_forked_as_a_process() {
    // The ULE paper's port into Linux: `task_fork(p)` gets no clone flags, so a new thread of the
    // parent's process goes through sched_fork as a process would: scaled to SLP_RUN_FORK, and the
    // parent pays a tick. The same master as the thread test above.
    let params = UleParams { new_thread: NewThread::Fork, ..UleParams::default() };
    let (p, parent, before, child) = thread_of_a_master_with_a_second_of_history(params);
    let ratio = (before.runtime + before.slptime) / 512_000;
    assert_eq!(ratio, 2);
    assert_eq!(p.history_of(child), History { runtime: before.runtime / 2, slptime: before.slptime / 2 });
    assert_eq!(p.history_of(parent).runtime, before.runtime + TICKINCR, "the parent pays a tick");
}

#[test]
fn user_threads_do_not_preempt_locally_but_interactive_ones_run_before_batch() {
    let mut w = TestWorld::new(1);
    let mut p = ule();
    p.init(&w.ctx());
    let cpu = CpuId(0);
    let (a, b) = (w.add_task(0), w.add_task(0));
    w.start(&mut p, a);
    w.start(&mut p, b);
    w.pick(&mut p, cpu);
    // Two hogs alternate for 2 s and become batch.
    while w.now < 2000 * MS {
        run_to_resched(&mut w, &mut p, cpu);
        w.stop(&mut p, cpu, SwitchReason::Preempted);
        w.pick(&mut p, cpu);
    }
    assert!(p.priority_of(a) >= PRI_MIN_BATCH && p.priority_of(b) >= PRI_MIN_BATCH);
    // A new thread from an idle shell is interactive (score 0, priority 120) and, being a user
    // thread, does not preempt the running hog.
    let s = w.add_task(0);
    w.start(&mut p, s);
    assert_eq!(p.priority_of(s), 120);
    let curr = w.cpus[0].curr.unwrap();
    assert!(!p.check_preempt(&w.ctx(), cpu, curr, s, WakeKind::Fork));
    let waiting = if curr == a { b } else { a };
    // At the end of the slice it runs before the batch thread that was already waiting.
    run_to_resched(&mut w, &mut p, cpu);
    w.stop(&mut p, cpu, SwitchReason::Preempted);
    assert_eq!(w.pick(&mut p, cpu), Some(s));
    // It sleeps 100 ms and wakes: again no local preemption, again first after the slice.
    w.advance(&mut p, 2 * MS);
    w.stop(&mut p, cpu, SwitchReason::Blocked);
    assert_eq!(w.pick(&mut p, cpu), Some(waiting));
    w.advance(&mut p, 100 * MS);
    w.wake(&mut p, s, cpu);
    assert!(p.score_of(s) < INTERACT_THRESH);
    let curr = w.cpus[0].curr.unwrap();
    assert!(!p.check_preempt(&w.ctx(), cpu, curr, s, WakeKind::Wakeup));
    run_to_resched(&mut w, &mut p, cpu);
    w.stop(&mut p, cpu, SwitchReason::Preempted);
    assert_eq!(w.pick(&mut p, cpu), Some(s));
}

#[test]
fn remote_interactive_wakeups_and_real_time_threads_preempt() {
    assert!(should_preempt(130, 180, true, 80), "interactive onto a remote batch thread");
    assert!(!should_preempt(130, 180, false, 80), "not locally");
    assert!(!should_preempt(130, 140, true, 80), "not over another interactive thread");
    assert!(should_preempt(60, 130, false, 80), "real time at or above preempt_thresh");
    assert!(should_preempt(200, PRI_MAX_IDLE, false, 80), "always onto an idle CPU");
    assert!(!should_preempt(60, 130, false, 0), "preempt_thresh 0 disables preemption");
}

#[test]
fn real_time_priorities_map_linux_1_99_onto_79_48() {
    let mut w = TestWorld::new(1);
    let mut p = ule();
    p.init(&w.ctx());
    for (rt, want) in [(1u8, 79u8), (50, 64), (99, 48)] {
        let t = w.add_task(0);
        w.tasks[t.idx()].class = SchedClass::Fifo;
        w.tasks[t.idx()].rt_priority = rt;
        w.start(&mut p, t);
        assert_eq!(p.priority_of(t), want, "rt_priority {rt}");
    }
}

#[test]
fn an_idle_cpu_steals_from_its_smt_sibling_before_a_busier_remote_cpu() {
    // Two sockets x 4 cores x 2 threads. CPU 0 (sibling of CPU 1) has 2 threads; CPU 8 on the other
    // socket has 5. CPU 1 goes idle: the SMT group (threshold 1) is searched first.
    let mut w = TestWorld::new(16);
    w.topo = Topology::symmetric(2, 1, 1, 4, 2).unwrap();
    let mut p = ule();
    p.init(&w.ctx());
    let on = |w: &mut TestWorld, p: &mut Ule, cpu: u32, n: usize| {
        for _ in 0..n {
            let t = w.add_task(0);
            w.tasks[t.idx()].allowed = CpuSet::single(CpuId(cpu));
            w.start(p, t);
            w.tasks[t.idx()].allowed = w.topo.all();
        }
        w.pick(p, CpuId(cpu));
    };
    on(&mut w, &mut p, 0, 2);
    on(&mut w, &mut p, 8, 5);
    let mut out = vec![];
    p.balance(&w.ctx(), CpuId(1), BalanceKind::NewlyIdle, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].from, out[0].to), (CpuId(0), CpuId(1)));
    // The loads are untouched until the engine applies the move.
    assert_eq!((p.load_of(CpuId(0)), p.load_of(CpuId(1))), (2, 0));
    // CPU 2 (another core of socket 0): its SMT sibling has nothing, so it looks wider; CPU 0 has only
    // one queued thread left after CPU 1's steal is applied, below steal_thresh 2... here it still has
    // 2, and socket 0's group is searched before the machine: CPU 0 again.
    let mut out = vec![];
    p.balance(&w.ctx(), CpuId(2), BalanceKind::NewlyIdle, &mut out);
    assert_eq!((out[0].from, out[0].to), (CpuId(0), CpuId(2)));
    // CPU 9, on socket 1, takes from CPU 8.
    let mut out = vec![];
    p.balance(&w.ctx(), CpuId(9), BalanceKind::NewlyIdle, &mut out);
    assert_eq!((out[0].from, out[0].to), (CpuId(8), CpuId(9)));
}

#[test]
fn the_balancer_runs_on_cpu0_every_half_to_one_and_a_half_seconds() {
    let mut w = TestWorld::new(2);
    let mut p = ule();
    p.init(&w.ctx());
    let t = w.add_task(0);
    w.tasks[t.idx()].allowed = CpuSet::single(CpuId(0));
    w.start(&mut p, t);
    w.pick(&mut p, CpuId(0));
    let mut runs = vec![];
    let mut out = vec![];
    for _ in 0..60_000 {
        w.advance(&mut p, MS);
        p.balance(&w.ctx(), CpuId(0), BalanceKind::Periodic, &mut out);
        if p.nr_balance_runs > runs.len() as u64 {
            runs.push(w.now);
        }
    }
    assert!(runs.len() >= 40 && runs.len() <= 120, "{} passes in 60 s", runs.len());
    for gap in runs.windows(2).map(|p| p[1] - p[0]) {
        // 63 + (0..126) stathz ticks: 496 ms to 1488 ms, plus the 1 ms tick granularity.
        assert!((490 * MS..=1500 * MS).contains(&gap), "gap {} ms", gap / MS);
    }
}

#[test]
fn a_wakeup_past_its_affinity_scans_the_machine_and_wakeup_last_stays_on_its_cpu() {
    // Two sockets x 2 nodes x 8 cores (the Opteron preset), an L3 per node. Thread t last ran on CPU
    // 3 and slept 10 ms, past its 3-tick affinity to the L3; CPU 3 runs a hog, CPU 20 alone is idle.
    let setup = |wakeup: WakeupCpu| {
        let mut w = TestWorld::new(32);
        w.topo = Topology::symmetric(2, 2, 1, 8, 1).unwrap();
        let mut p = Ule::new(UleParams { wakeup, ..UleParams::default() });
        p.init(&w.ctx());
        let t = w.add_task(0);
        w.tasks[t.idx()].allowed = CpuSet::single(CpuId(3));
        w.start(&mut p, t);
        w.tasks[t.idx()].allowed = w.topo.all();
        assert_eq!(w.pick(&mut p, CpuId(3)), Some(t));
        w.advance(&mut p, MS);
        w.stop(&mut p, CpuId(3), SwitchReason::Blocked);
        for cpu in (0..32).filter(|&c| c != 20) {
            let h = w.add_task(0);
            w.tasks[h.idx()].allowed = CpuSet::single(CpuId(cpu));
            w.start(&mut p, h);
            w.tasks[h.idx()].allowed = w.topo.all();
            w.pick(&mut p, CpuId(cpu));
        }
        w.advance(&mut p, 10 * MS);
        p.take_examined();
        (w, p, t)
    };
    // sched_pickcpu: no affine cache group, so the machine is searched for a CPU that can run it
    // now (one search of 32 CPUs finds the idle CPU 20, in the other socket).
    let (mut w, mut p, t) = setup(WakeupCpu::Pickcpu);
    assert_eq!(w.wake(&mut p, t, CpuId(3)), CpuId(20));
    assert_eq!(p.take_examined(), 32, "one sched_lowest over the whole machine");
    // With CPU 20 busy too, nothing can run it now: the machine is searched a second time for the
    // least loaded CPU.
    let (mut w, mut p, t) = setup(WakeupCpu::Pickcpu);
    let h = w.add_task(0);
    w.tasks[h.idx()].allowed = CpuSet::single(CpuId(20));
    w.start(&mut p, h);
    w.pick(&mut p, CpuId(20));
    p.take_examined();
    w.wake(&mut p, t, CpuId(3));
    assert_eq!(p.take_examined(), 64, "two searches of 32 CPUs");
    // Seed 002's replacement: back to CPU 3, busy as it is, without a search.
    let (mut w, mut p, t) = setup(WakeupCpu::Last);
    assert_eq!(w.wake(&mut p, t, CpuId(3)), CpuId(3));
    assert_eq!(p.take_examined(), 0);
    let mut params = UleParams::default();
    assert!(params.set("wakeup", "sideways").unwrap_err().contains("pickcpu or last"));
    params.set("wakeup", "last").unwrap();
    assert_eq!(params.wakeup, WakeupCpu::Last);
}
