//! CFS behaviour, checked against values computed independently from the 2.6.38 rules.

use super::{Cfs, CfsParams};
use crate::testworld::TestWorld;
use schedlab_core::weights::nice_to_weight;
use schedlab_core::{CpuId, SchedPolicy, SwitchReason, TaskId, WakeKind};

const CPU0: CpuId = CpuId(0);

fn cfs_on(w: &TestWorld) -> Cfs {
    let mut c = Cfs::new(CfsParams::default());
    c.init(&w.ctx());
    c
}

/// period * w / W, the slice CFS gives a task of weight `w` among tasks of total weight `total`.
fn expected_slice(n: u64, w: u64, total: u64) -> u64 {
    let (latency, min_gran, nr_latency) = (6_000_000u64, 750_000u64, 8u64);
    let period = if n > nr_latency { n * min_gran } else { latency };
    period * w / total
}

#[test]
fn tunables_scale_with_log_of_cpus() {
    for (ncpus, factor) in [(1, 1), (2, 2), (4, 3), (8, 4), (16, 4)] {
        let w = TestWorld::new(ncpus);
        let c = cfs_on(&w);
        assert_eq!(c.latency_ns(), 6_000_000 * factor, "{ncpus} CPUs");
        assert_eq!(c.min_granularity_ns(), 750_000 * factor);
        assert_eq!(c.wakeup_granularity_ns(), 1_000_000 * factor);
    }
}

#[test]
fn tunables_2_6_32_are_5_ms_and_1_ms_scaled_like_2_6_38_and_explicit_values_win_in_any_order() {
    // 2.6.32 sched_fair.c: latency 5 ms, minimum and wakeup granularity 1 ms, so nr_latency 5; on
    // the two CPUs of seed 003's Core 2 (factor 1 + ilog2(2) = 2): 10 ms, 2 ms and 2 ms.
    let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter().map(|(k, x)| (k.to_string(), x.to_string())).collect()
    };
    let w = TestWorld::new(2);
    let p: CfsParams = crate::params::apply("cfs", &pairs(&[("tunables", "2.6.32")])).unwrap();
    let mut c = Cfs::new(p);
    c.init(&w.ctx());
    assert_eq!(
        (c.latency_ns(), c.min_granularity_ns(), c.wakeup_granularity_ns()),
        (10_000_000, 2_000_000, 2_000_000)
    );
    // An explicit tunable overrides the version's default whether it comes before or after it.
    for order in [
        [("sched_latency_ns", "8000000"), ("tunables", "2.6.32")],
        [("tunables", "2.6.32"), ("sched_latency_ns", "8000000")],
    ] {
        let p: CfsParams = crate::params::apply("cfs", &pairs(&order)).unwrap();
        assert_eq!((p.sched_latency_ns, p.sched_min_granularity_ns), (8_000_000, 1_000_000), "{order:?}");
    }
    assert!(crate::params::apply::<CfsParams>("cfs", &pairs(&[("tunables", "2.6.33")])).is_err());
}

#[test]
fn slices_follow_sched_slice_for_2_8_and_20_tasks() {
    for n in [2u64, 8, 20] {
        let mut w = TestWorld::new(1);
        let mut c = cfs_on(&w);
        let tasks: Vec<TaskId> = (0..n).map(|_| w.add_task(0)).collect();
        for &t in &tasks {
            w.start(&mut c, t);
        }
        let want = expected_slice(n, 1024, 1024 * n);
        for &t in &tasks {
            let got = c.slice_of(t);
            // The kernel divides by multiplying with 1 + (2^32 - W/2) / (W + 1), a hair below 2^32 / W,
            // so its slices are up to W/(W+1) short of the exact share: allow 0.1 %.
            assert!(got <= want && want - got <= want / 1000, "{n} tasks: slice {got}, expected {want}");
        }
    }
    // Bit-exact anchor for 2 tasks: inv = 1 + (2^32 - 1024) / 2049 = 2096129;
    // SRR(SRR(6e6 * 1024, 16) * 2096129, 16) = 2998537 ns.
    let mut w = TestWorld::new(1);
    let mut c = cfs_on(&w);
    let (a, b) = (w.add_task(0), w.add_task(0));
    w.start(&mut c, a);
    w.start(&mut c, b);
    assert_eq!(c.slice_of(a), 2_998_537);
    // Unequal weights: nice 0 and nice 5 share a 6 ms period 1024:335.
    let mut w = TestWorld::new(1);
    let mut c = cfs_on(&w);
    let (a, b) = (w.add_task(0), w.add_task(5));
    w.start(&mut c, a);
    w.start(&mut c, b);
    let total = 1024 + 335;
    for (t, weight) in [(a, 1024), (b, 335)] {
        let want = expected_slice(2, weight, total);
        assert!(c.slice_of(t).abs_diff(want) <= want / 1000, "weight {weight}: {} vs {want}", c.slice_of(t));
    }
}

/// Runs `cpu` for `ns`, rescheduling whenever a tick asks (put_prev Preempted + pick).
fn run_for(w: &mut TestWorld, c: &mut Cfs, cpu: CpuId, ns: u64) {
    let step = w.tick_ns;
    let mut left = ns;
    while left > 0 {
        let d = step.min(left);
        let resched = w.advance(c, d);
        if resched.contains(&cpu) {
            w.stop(c, cpu, SwitchReason::Preempted);
            w.pick(c, cpu);
        }
        left -= d;
    }
}

#[test]
fn a_long_sleeper_is_placed_half_a_latency_behind_min_vruntime() {
    let mut w = TestWorld::new(1);
    let mut c = cfs_on(&w);
    let (a, b) = (w.add_task(0), w.add_task(0));
    w.start(&mut c, a);
    w.start(&mut c, b);
    w.pick(&mut c, CPU0);
    run_for(&mut w, &mut c, CPU0, 50_000_000);
    // Let B block the next time it runs.
    while w.cpus[0].curr != Some(b) {
        run_for(&mut w, &mut c, CPU0, 1_000_000);
    }
    w.stop(&mut c, CPU0, SwitchReason::Blocked);
    w.pick(&mut c, CPU0);
    // A runs alone for 200 ms: B's vruntime falls far behind.
    run_for(&mut w, &mut c, CPU0, 200_000_000);
    w.wake(&mut c, b, CPU0);
    let placed = c.vruntime_of(b);
    let min_v = c.min_vruntime(CPU0);
    assert_eq!(placed, min_v.wrapping_sub(3_000_000), "sleeper credit is sched_latency/2 = 3 ms");
}

#[test]
fn a_short_sleeper_keeps_its_own_vruntime() {
    let mut w = TestWorld::new(1);
    let mut c = cfs_on(&w);
    let (a, b) = (w.add_task(0), w.add_task(0));
    w.start(&mut c, a);
    w.start(&mut c, b);
    w.pick(&mut c, CPU0);
    while w.cpus[0].curr != Some(b) {
        run_for(&mut w, &mut c, CPU0, 1_000_000);
    }
    run_for(&mut w, &mut c, CPU0, 1_000_000);
    if w.cpus[0].curr != Some(b) {
        while w.cpus[0].curr != Some(b) {
            run_for(&mut w, &mut c, CPU0, 1_000_000);
        }
    }
    w.stop(&mut c, CPU0, SwitchReason::Blocked);
    let v_before = c.vruntime_of(b);
    w.pick(&mut c, CPU0);
    run_for(&mut w, &mut c, CPU0, 1_000_000);
    w.wake(&mut c, b, CPU0);
    // place_entity: max(own vruntime, min_vruntime - latency/2). B slept 1 ms right after being
    // picked, so its own vruntime is the larger and is kept (the relative/absolute round trip on the
    // same runqueue is exact).
    let floor = c.min_vruntime(CPU0).wrapping_sub(3_000_000);
    assert!((v_before.wrapping_sub(floor) as i64) > 0, "test setup: B must be ahead of the floor");
    assert_eq!(c.vruntime_of(b), v_before);
}

#[test]
fn wakeup_preemption_only_beyond_the_wakeup_granularity() {
    // Vary how long A runs alone after B blocks; B then wakes. Preemption must happen exactly when
    // A's vruntime exceeds B's by more than the wakeup granularity (1 ms for a nice-0 wakee on 1 CPU).
    let mut saw = (false, false);
    for run_alone_us in (100..=2_900).step_by(200) {
        let mut w = TestWorld::new(1);
        w.tick_ns = 100_000;
        let mut c = cfs_on(&w);
        let (a, b) = (w.add_task(0), w.add_task(0));
        w.start(&mut c, a);
        w.start(&mut c, b);
        w.pick(&mut c, CPU0);
        run_for(&mut w, &mut c, CPU0, 30_000_000);
        // B blocks at the first tick where it runs ahead of A: its own vruntime then beats the
        // sleeper placement, and the gap grows with A's lone run.
        loop {
            let resched = w.advance(&mut c, w.tick_ns);
            let b_ahead = (c.vruntime_of(b).wrapping_sub(c.vruntime_of(a)) as i64) > 0;
            if w.cpus[0].curr == Some(b) && b_ahead {
                break;
            }
            if resched.contains(&CPU0) {
                w.stop(&mut c, CPU0, SwitchReason::Preempted);
                w.pick(&mut c, CPU0);
            }
        }
        w.stop(&mut c, CPU0, SwitchReason::Blocked);
        assert_eq!(w.pick(&mut c, CPU0), Some(a));
        w.advance(&mut c, run_alone_us * 1000);
        w.wake(&mut c, b, CPU0);
        let gap = c.vruntime_of(a) as i64 - c.vruntime_of(b) as i64;
        let preempt = c.check_preempt(&w.ctx(), CPU0, a, b, WakeKind::Wakeup);
        assert_eq!(preempt, gap > 1_000_000, "ran alone {run_alone_us} us: gap {gap} ns");
        if preempt {
            saw.1 = true;
        } else {
            saw.0 = true;
        }
    }
    assert!(saw.0 && saw.1, "both outcomes must occur in the sweep");
}

#[test]
fn heavier_wakee_gets_a_smaller_granularity() {
    // wakeup_gran scales the 1 ms granularity into the wakee's virtual time: 1 ms * 1024 / weight.
    let mut w = TestWorld::new(1);
    let c = cfs_on(&w);
    let _ = w.add_task(0);
    for nice in [-5i8, 0, 5] {
        let want = 1_000_000u64 * 1024 / nice_to_weight(nice);
        let got = super::math::calc_delta_fair(
            c.wakeup_granularity_ns(),
            nice_to_weight(nice),
            schedlab_core::weights::nice_to_wmult(nice),
        );
        assert!(got.abs_diff(want) <= 1, "nice {nice}: {got} vs {want}");
    }
}

#[test]
fn fork_places_children_on_idle_cpus() {
    // find_idlest_group/cpu: on 4 idle CPUs, 4 children forked from CPU 0 land on 4 different CPUs.
    let mut w = TestWorld::new(4);
    let mut c = cfs_on(&w);
    let mut used = Vec::new();
    for _ in 0..4 {
        let t = w.add_task(0);
        used.push(w.start(&mut c, t));
    }
    used.sort();
    used.dedup();
    assert_eq!(used.len(), 4, "{used:?}");
}

// ------------------------------------------------------------------------------------------------
// EEVDF (Linux 6.6)
// ------------------------------------------------------------------------------------------------

fn eevdf_on(w: &TestWorld, tweak: impl FnOnce(&mut CfsParams)) -> Cfs {
    // These tests were derived from 6.6's fair.c.
    let mut p = CfsParams { eevdf_kernel: super::EevdfKernel::V6_6, ..CfsParams::default() };
    tweak(&mut p);
    let mut c = Cfs::new_eevdf(super::EevdfParams(p)).expect("6.6 parameters");
    c.init(&w.ctx());
    c
}

#[test]
fn eevdf_base_slice_scales_and_deadlines_follow_weight() {
    for (ncpus, factor) in [(1u32, 1u64), (8, 4)] {
        let w = TestWorld::new(ncpus);
        assert_eq!(eevdf_on(&w, |_| {}).base_slice_ns(), 750_000 * factor);
    }
    // A renewed request: deadline = vruntime + slice x 1024 / weight.
    let mut w = TestWorld::new(1);
    let mut c = eevdf_on(&w, |_| {});
    let (a, b) = (w.add_task(0), w.add_task(5));
    w.start(&mut c, a);
    w.start(&mut c, b);
    w.pick(&mut c, CPU0);
    run_for(&mut w, &mut c, CPU0, 20_000_000);
    for (t, weight) in [(a, 1024u64), (b, 335)] {
        let gap = c.deadline_of(t).wrapping_sub(c.vruntime_of(t)) as i64;
        let vslice = (750_000u64 * 1024 / weight) as i64;
        assert!(gap > 0 && gap <= vslice + 2, "weight {weight}: deadline {gap} ahead, request {vslice}");
    }
}

#[test]
fn eevdf_preserves_lag_across_a_sleep() {
    let mut w = TestWorld::new(1);
    w.tick_ns = 100_000;
    let mut c = eevdf_on(&w, |_| {});
    let tasks: Vec<TaskId> = (0..3).map(|_| w.add_task(0)).collect();
    for &t in &tasks {
        w.start(&mut c, t);
    }
    w.pick(&mut c, CPU0);
    run_for(&mut w, &mut c, CPU0, 7_300_000);
    let sleeper = w.cpus[0].curr.unwrap();
    w.stop(&mut c, CPU0, SwitchReason::Blocked);
    let lag = c.lag_of(sleeper);
    assert_ne!(lag, 0, "the sleeper should leave with a lag to preserve");
    w.pick(&mut c, CPU0);
    run_for(&mut w, &mut c, CPU0, 13_700_000);
    w.wake(&mut c, sleeper, CPU0);
    // PLACE_LAG places it so that, after it joins and moves the average, V - v equals the saved lag.
    let after = c.avg_vruntime_of_task_rq(sleeper).wrapping_sub(c.vruntime_of(sleeper)) as i64;
    assert!((after - lag).abs() <= 2, "lag {lag} before the sleep, {after} after the wakeup");
}

#[test]
fn eevdf_wakeup_preempts_by_pick_and_run_to_parity_protects_the_request() {
    for parity in [false, true] {
        let mut w = TestWorld::new(1);
        w.tick_ns = 100_000;
        let mut c = eevdf_on(&w, |p| p.run_to_parity = parity);
        let a = w.add_task(0);
        w.start(&mut c, a);
        assert_eq!(w.pick(&mut c, CPU0), Some(a));
        // 0.2 ms into A's 0.75 ms request, B (nice -5, weight 3121) joins with no lag at V = v_A:
        // both eligible; B's deadline is v_A + 0.75 ms x 1024 / 3121 (a whole request: 6.6's
        // wake_up_new_task passes no ENQUEUE_INITIAL), A's is v_A + 0.55 ms.
        w.advance(&mut c, 200_000);
        let b = w.add_task(-5);
        w.start(&mut c, b);
        assert!(c.is_eligible(a) && c.is_eligible(b));
        assert!((c.deadline_of(b).wrapping_sub(c.deadline_of(a)) as i64) < 0);
        let preempt = c.check_preempt(&w.ctx(), CPU0, a, b, WakeKind::Fork);
        assert_eq!(preempt, !parity, "RUN_TO_PARITY={parity}");
    }
}

#[test]
fn eevdf_yield_moves_the_deadline_one_request_later() {
    let mut w = TestWorld::new(1);
    let mut c = eevdf_on(&w, |_| {});
    let (a, b) = (w.add_task(0), w.add_task(0));
    w.start(&mut c, a);
    w.start(&mut c, b);
    w.cpus[0].nr_running = 2;
    let t = w.pick(&mut c, CPU0).unwrap();
    let before = c.deadline_of(t);
    c.yield_task(&w.ctx(), CPU0, t);
    assert_eq!(c.deadline_of(t).wrapping_sub(before), 750_000);
}

#[test]
fn eevdf_balances_pelt_load_that_decays_after_sleep_and_moves_with_the_task() {
    // One PELT period is 1024 * 1024 ns; the load halves every 32 periods.
    const HALF_LIFE_NS: u64 = 32 * 1024 * 1024;
    let mut w = TestWorld::new(2);
    let mut c = eevdf_on(&w, |_| {});
    let a = w.add_task(0);
    let home = w.start(&mut c, a);
    let other = CpuId(1 - home.0);
    // init_entity_runnable_average: a new task counts with its full weight at once.
    assert_eq!(c.pelt_cpu_load(home, w.now), 1024);
    w.pick(&mut c, home);
    run_for(&mut w, &mut c, home, 300_000_000);
    let busy = c.pelt_cpu_load(home, w.now);
    assert!((1014..=1024).contains(&busy), "always-runnable load {busy}");
    w.stop(&mut c, home, SwitchReason::Blocked);
    // Blocked load stays on the CPU and decays: half after one half-life, where 2.6.38's
    // weighted_cpuload drops to zero at once.
    assert_eq!(c.rqs[home.idx()].load, 0);
    w.advance(&mut c, HALF_LIFE_NS);
    let blocked = c.pelt_cpu_load(home, w.now);
    assert!(blocked.abs_diff(busy / 2) <= busy / 100, "blocked load {blocked}, busy {busy}");
    // A wakeup on the other CPU takes the task's (equally decayed) load with it.
    w.tasks[a.idx()].state = schedlab_core::TaskState::Runnable;
    w.tasks[a.idx()].cpu = other;
    w.cpus[other.idx()].nr_running += 1;
    c.enqueue(&w.ctx(), other, a, schedlab_core::EnqueueReason::Wakeup);
    let left = c.pelt_cpu_load(home, w.now);
    let moved = c.pelt_cpu_load(other, w.now);
    assert!(left <= busy / 100, "load left behind {left}");
    assert!(moved.abs_diff(blocked) <= busy / 100, "load moved {moved} vs {blocked}");
}

/// Seed 004 sec. 1.4: AVEC "considers the previously running task on the same core" as well as the
/// co-runners. One CPU, no co-runner: after FPU burner `a` ran, the next pick's average AVEC is `a`'s
/// vector, so the bus-bound task (the most distant) runs before the FPU burner `b`, although plain
/// CFS would take `b` (now the leftmost).
#[test]
fn avec_keeps_similar_tasks_apart_in_time_on_one_cpu() {
    let mut w = TestWorld::new(1);
    let mut c = Cfs::new_avec(super::avec::AvecPolicyParams::default());
    c.init(&w.ctx());
    let fpu = [6822, 0, 178, 0, 0, 3208, 201, 202];
    let bus = [2, 10000, 10000, 0, 0, 0, 0, 1];
    let (a, b, bus_task) = (w.add_task(0), w.add_task(0), w.add_task(0));
    // Started last, placed first: START_DEBIT's vslice shrinks as the queue grows, so `a` is leftmost.
    for (t, v) in [(bus_task, bus), (b, fpu), (a, fpu)] {
        w.start(&mut c, t);
        c.avec.as_mut().unwrap().set_vector(t, v);
    }
    assert_eq!(w.pick(&mut c, CpuId(0)), Some(a), "no previous task, no co-runner: CFS's leftmost");
    w.advance(&mut c, 1_000_000);
    w.stop(&mut c, CpuId(0), SwitchReason::Preempted);
    assert_eq!(w.pick(&mut c, CpuId(0)), Some(bus_task), "a (FPU) ran last: the bus task is most distant");
}
