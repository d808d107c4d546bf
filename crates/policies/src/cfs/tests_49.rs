//! CFS with `load_tracking=4.9` (Linux 4.9's per-entity load tracking in the balancer's and the
//! placement's loads, [`super::load49`]): each test derives its expectation from 4.9's rules and
//! checks that 2.6.38's weights give another answer where the two differ.

use super::{Cfs, CfsParams};
use crate::testworld::TestWorld;
use schedlab_core::{CpuId, DequeueReason, EnqueueReason, SchedPolicy, SwitchReason, TaskId};

const CPU0: CpuId = CpuId(0);
const CPU1: CpuId = CpuId(1);
/// A PELT period: 1024 x 1024 ns.
const PERIOD_NS: u64 = 1024 * 1024;

fn cfs(w: &TestWorld, load49: bool) -> Cfs {
    let mut c = Cfs::new(CfsParams { load_tracking_49: load49, ..CfsParams::default() });
    c.init(&w.ctx());
    c
}

/// Starts a task pinned to `cpu` (placement follows the affinity), then lets it run anywhere.
fn start_on(w: &mut TestWorld, c: &mut Cfs, cpu: CpuId) -> TaskId {
    let t = w.add_task(0);
    w.tasks[t.idx()].allowed = schedlab_core::CpuSet::single(cpu);
    assert_eq!(w.start(c, t), cpu);
    w.tasks[t.idx()].allowed = w.topo.all();
    t
}

/// Two CPUs: A runs 200 ms on CPU 0 and sleeps 128 periods (four half-lives), B runs on CPU 1
/// throughout; A is woken on CPU 0 again. Returns A, B and A's load average when it went to sleep.
fn sleeper_and_spinner(w: &mut TestWorld, c: &mut Cfs) -> (TaskId, TaskId, u64) {
    let a = start_on(w, c, CPU0);
    let b = start_on(w, c, CPU1);
    assert_eq!(w.pick(c, CPU0), Some(a));
    assert_eq!(w.pick(c, CPU1), Some(b));
    w.advance(c, 200_000_000);
    w.stop(c, CPU0, SwitchReason::Blocked);
    let slept = c.l49_task_load(a);
    w.advance(c, 128 * PERIOD_NS);
    assert_eq!(w.wake(c, a, CPU0), CPU0);
    (a, b, slept)
}

#[test]
fn a_cpus_load_is_the_load_average_of_its_queued_tasks() {
    let mut w = TestWorld::new(2);
    let mut c = cfs(&w, true);
    let (a, b, slept) = sleeper_and_spinner(&mut w, &mut c);
    // After 200 ms always running, A's average is within 2 % of its weight (4.9 divides by
    // LOAD_AVG_MAX: 1002 to 1024 depending on where in a period it is read).
    assert!((1000..=1024).contains(&slept), "{slept}");
    // Four half-lives asleep at weight 0: a sixteenth is left (decay_load(x, 128) = x >> 4, then
    // y^0), and that is what A brings to CPU 0's runnable load when it wakes there.
    let cpu0 = c.weighted_cpuload(CPU0, w.now);
    assert!(cpu0.abs_diff(slept / 16) <= 2, "{cpu0} vs {}", slept / 16);
    assert_eq!(cpu0, c.l49_task_load(a));
    // B never slept: CPU 1's load is B's average, near its weight.
    let cpu1 = c.weighted_cpuload(CPU1, w.now);
    assert!((1000..=1024).contains(&cpu1), "{cpu1}");
    assert!(cpu1.abs_diff(c.l49_task_load(b)) <= 2, "{cpu1} vs {}", c.l49_task_load(b));
    // 2.6.38 reads the runqueues' weights: 1024 on both.
    let mut w = TestWorld::new(2);
    let mut c = cfs(&w, false);
    sleeper_and_spinner(&mut w, &mut c);
    assert_eq!((c.weighted_cpuload(CPU0, w.now), c.weighted_cpuload(CPU1, w.now)), (1024, 1024));
}

#[test]
fn a_fork_goes_to_the_cpu_whose_queued_tasks_slept_and_a_new_task_weighs_its_weight() {
    // B (on CPU 1) forks C. find_idlest_group (forkexec_idx 0: weighted_cpuload) with
    // imbalance_pct 125 keeps C home unless 100 x this_load >= 112 x the other's load.
    // 2.6.38: 1024 against 1024, C stays on CPU 1. 4.9: about 1002 against about 63, C goes to
    // CPU 0, whose load then rises by exactly C's weight (init_entity_runnable_average).
    for (load49, expect) in [(false, CPU1), (true, CPU0)] {
        let mut w = TestWorld::new(2);
        let mut c = cfs(&w, load49);
        sleeper_and_spinner(&mut w, &mut c);
        let before = c.weighted_cpuload(CPU0, w.now);
        let child = w.add_task(0);
        w.tasks[child.idx()].cpu = CPU1;
        assert_eq!(w.start(&mut c, child), expect, "load_tracking_49 = {load49}");
        if load49 {
            assert_eq!(c.weighted_cpuload(CPU0, w.now), before + 1024);
        }
    }
}

#[test]
fn a_moved_task_takes_its_load_along_and_leaves_its_blocked_part_nowhere() {
    let mut w = TestWorld::new(2);
    let mut c = cfs(&w, true);
    let (a, _, _) = sleeper_and_spinner(&mut w, &mut c);
    let load = c.l49_task_load(a);
    let (run0, whole0, whole1) =
        (c.weighted_cpuload(CPU0, w.now), c.l49_cpu_whole_load(CPU0), c.l49_cpu_whole_load(CPU1));
    assert!(load > 0 && whole0 >= load);
    // The engine's move of the queued A: dequeue(Migrate), then enqueue(Migrated) on CPU 1.
    c.dequeue(&w.ctx(), CPU0, a, DequeueReason::Migrate);
    w.cpus[0].nr_running -= 1;
    w.tasks[a.idx()].cpu = CPU1;
    w.cpus[1].nr_running += 1;
    c.enqueue(&w.ctx(), CPU1, a, EnqueueReason::Migrated);
    // remove_entity_load_avg takes A's sums out of CPU 0's whole signal (no time passed, so
    // nothing decayed in between), attach_entity_load_avg puts them in CPU 1's, and
    // enqueue_entity_load_avg in CPU 1's runnable ones.
    assert_eq!(c.weighted_cpuload(CPU0, w.now), run0 - load);
    assert_eq!(c.l49_cpu_whole_load(CPU0), whole0 - load);
    assert_eq!(c.l49_cpu_whole_load(CPU1), whole1 + load);
    assert_eq!(c.l49_task_load(a), load);
}

/// Four cores sharing one LLC: T sleeps after running on CPU 2, A runs on CPU 1, B on CPU 2; CPUs
/// 0 and 3 are idle. Returns T and B (the waker, on T's previous CPU).
fn sleeper_among_busy_cores(w: &mut TestWorld, c: &mut Cfs) -> (TaskId, TaskId) {
    let t = start_on(w, c, CpuId(2));
    assert_eq!(w.pick(c, CpuId(2)), Some(t));
    w.advance(c, 5_000_000);
    w.stop(c, CpuId(2), SwitchReason::Blocked);
    let b = start_on(w, c, CpuId(2));
    let a = start_on(w, c, CPU1);
    assert_eq!(w.pick(c, CpuId(2)), Some(b));
    assert_eq!(w.pick(c, CPU1), Some(a));
    w.advance(c, 5_000_000);
    (t, b)
}

/// Wakes `t` from CPU 2 with `waker` as the waking task.
fn wake_from(w: &mut TestWorld, c: &mut Cfs, t: TaskId, waker: TaskId) -> CpuId {
    let info = schedlab_core::WakeInfo {
        waker_cpu: CpuId(2),
        waker: Some(waker),
        sync: false,
        wait: schedlab_core::WaitKind::Sleep,
    };
    w.tasks[t.idx()].state = schedlab_core::TaskState::Runnable;
    c.select_cpu(&w.ctx(), t, &info)
}

#[test]
fn a_wakeup_scans_the_llc_from_its_target_where_2_6_38_takes_the_first_idle_cpu() {
    // The waker runs on T's previous CPU, so there is no affine choice: the target is CPU 2, busy.
    // 2.6.38's select_idle_sibling takes the first idle CPU of the LLC's span, CPU 0; 4.9's
    // select_idle_cpu scans from the target, wrapping (2 busy, 3 idle), and takes CPU 3. The scan
    // examined two CPUs at 800 ns each, which moves the LLC's avg_scan_cost from 0 an eighth of the
    // way to 1,600 ns: 200.
    for (placement49, expect) in [(false, CpuId(0)), (true, CpuId(3))] {
        let mut w = TestWorld::new(4);
        w.decision_cost.per_task_ns = 800;
        let mut c = Cfs::new(CfsParams { placement_49: placement49, ..CfsParams::default() });
        c.init(&w.ctx());
        let (t, b) = sleeper_among_busy_cores(&mut w, &mut c);
        assert_eq!(wake_from(&mut w, &mut c, t, b), expect, "placement_49 = {placement49}");
        if placement49 {
            assert_eq!(c.l49_scan_cost[0], 200);
        }
    }
}

#[test]
fn a_waker_cpu_that_idles_too_briefly_for_a_scan_keeps_the_wakee_on_its_busy_target() {
    // select_idle_cpu (4.9): `if ((avg_idle / 512) < avg_cost) return -1;`. With the waker's CPU
    // idling 100 us on average and a scan costing 300 ns, 195 < 300: no scan, T goes to its busy
    // target (CPU 2) though CPUs 0 and 3 are idle; at 200 us (390 >= 300) it scans and finds CPU 3.
    for (avg_idle, expect) in [(100_000, CpuId(2)), (200_000, CpuId(3))] {
        let mut w = TestWorld::new(4);
        let mut c = Cfs::new(CfsParams { placement_49: true, ..CfsParams::default() });
        c.init(&w.ctx());
        let (t, b) = sleeper_among_busy_cores(&mut w, &mut c);
        c.cpus[2].avg_idle = avg_idle;
        c.l49_scan_cost[0] = 300;
        assert_eq!(wake_from(&mut w, &mut c, t, b), expect, "avg_idle = {avg_idle}");
    }
}
