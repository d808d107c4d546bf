//! MQS's and PMQS's documented behaviour: the local scan against the remote `max_na_goodness`, the
//! cache rules, pools limiting the search, 2.4's recalculation, and the pool balancer. Goodness
//! values are worked out by hand from 2.4's formula (HZ 1000: a nice-0 slice is 41 ticks).

use super::*;
use crate::testworld::TestWorld;
use schedlab_core::Topology;

fn world(cpus: u32, pool_size: u32) -> (TestWorld, Pmqs) {
    let w = TestWorld::new(cpus);
    let mut p = Pmqs::new(PmqsParams { pool_size, ..PmqsParams::default() });
    p.init(&w.ctx());
    (w, p)
}

/// Starts `t` with its last CPU set to `cpu` (so placement looks at `cpu`'s pool).
fn start_on(w: &mut TestWorld, p: &mut Pmqs, t: TaskId, cpu: CpuId) -> CpuId {
    w.tasks[t.idx()].cpu = cpu;
    w.start(p, t)
}

fn stat(p: &Pmqs, name: &str) -> u64 {
    p.stats().iter().find(|s| s.name == name).unwrap().value
}

#[test]
fn pools_are_consecutive_cpus_or_numa_nodes() {
    let (_, p) = world(8, 4);
    let pools: Vec<u32> = (0..8).map(|c| p.pool_of(CpuId(c))).collect();
    assert_eq!(pools, [0, 0, 0, 0, 1, 1, 1, 1]);
    let (_, p) = world(8, 0);
    assert!((0..8).all(|c| p.pool_of(CpuId(c)) == 0), "no nodes: one pool, MQS");
    let mut w = TestWorld::new(8);
    w.topo = Topology::symmetric(2, 1, 1, 4, 1).unwrap(); // two sockets, one node each
    let mut p = Pmqs::new(PmqsParams::default());
    p.init(&w.ctx());
    assert_eq!((p.pool_of(CpuId(3)), p.pool_of(CpuId(4))), (0, 1));
    assert_eq!(stat(&p, "nr_pools"), 2);
}

#[test]
fn a_remote_task_is_taken_only_when_its_non_affinity_goodness_beats_the_local_best() {
    let (mut w, mut p) = world(2, 0);
    // CPU 1 runs X and has C (nice -10) waiting; CPU 0 has A (nice 0) waiting.
    let (x, c, a) = (w.add_task(0), w.add_task(-10), w.add_task(0));
    start_on(&mut w, &mut p, x, CpuId(1));
    assert_eq!(w.pick(&mut p, CpuId(1)), Some(x));
    w.tasks[c.idx()].cpu = CpuId(1);
    w.cpus[1].nr_running += 1;
    w.tasks[c.idx()].state = TaskState::Runnable;
    p.task_new(&w.ctx(), c);
    p.enqueue(&w.ctx(), CpuId(1), c, EnqueueReason::New);
    w.tasks[a.idx()].cpu = CpuId(0);
    w.cpus[0].nr_running += 1;
    w.tasks[a.idx()].state = TaskState::Runnable;
    p.task_new(&w.ctx(), a);
    p.enqueue(&w.ctx(), CpuId(0), a, EnqueueReason::New);
    // C: counter 2 x 30 + 1 = 61, na 61 + 30 = 91; A: 41 + 20 = 61 (it never ran: no CPU bonus).
    assert_eq!(p.max_na_goodness(CpuId(1)), 91);
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(c), "91 > 61: C moves to CPU 0");
    assert_eq!(p.queue(CpuId(0)), &[a, c]);
    assert_eq!(stat(&p, "nr_steals"), 1);
    // The other way round: A waiting on CPU 1 (na 61) does not beat CPU 0's own C after it ran
    // there (goodness 61 - ticks used + 15 + 30).
    w.stop(&mut p, CpuId(0), SwitchReason::Preempted);
    p.move_to(&w.ctx(), a, CpuId(1));
    w.tasks[a.idx()].cpu = CpuId(1);
    w.tasks[c.idx()].last_ran_ns = 1;
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(c));
    assert_eq!(stat(&p, "nr_steals"), 1);
}

#[test]
fn pools_keep_the_search_at_home() {
    // Four CPUs in pools of two: CPU 0 is idle and its pool has nothing waiting; CPU 2 (the other
    // pool) has two tasks waiting. PMQS leaves CPU 0 idle; MQS (one pool) takes one.
    for (pool_size, expect_steal) in [(2, false), (4, true)] {
        let (mut w, mut p) = world(4, pool_size);
        let ts: Vec<TaskId> = (0..3).map(|_| w.add_task(0)).collect();
        for &t in &ts {
            w.tasks[t.idx()].cpu = CpuId(2);
            w.tasks[t.idx()].allowed = CpuSet::single(CpuId(2));
            w.start(&mut p, t);
            w.tasks[t.idx()].allowed = w.topo.all();
        }
        assert_eq!(w.pick(&mut p, CpuId(2)), Some(ts[0]));
        let got = w.pick(&mut p, CpuId(0));
        assert_eq!(got.is_some(), expect_steal, "pool size {pool_size}");
    }
}

#[test]
fn the_cache_is_raised_on_add_cleared_when_its_holder_leaves_and_corrected_when_stale() {
    let (mut w, mut p) = world(2, 0);
    let (a, b) = (w.add_task(0), w.add_task(-6));
    for t in [a, b] {
        start_on(&mut w, &mut p, t, CpuId(1));
    }
    // a waits on CPU 1's queue (its `processor`: +15 there, 41 + 15 + 20 = 76), b on idle CPU 0's;
    // b's non-affinity goodness 53 + 26 = 79 is higher, so CPU 1 takes b from CPU 0's queue.
    assert_eq!((p.on[a.idx()], p.on[b.idx()]), (Some(CpuId(1)), Some(CpuId(0))));
    assert_eq!(w.pick(&mut p, CpuId(1)), Some(b), "79 > 76");
    // b runs; the cache is the best other waiting task, a: 61.
    assert_eq!(p.max_na_goodness(CpuId(1)), 61);
    // a leaves (a migration away): it held the value, so the cache is cleared.
    p.dequeue(&w.ctx(), CpuId(1), a, DequeueReason::Migrate);
    assert_eq!(p.max_na_goodness(CpuId(1)), CLEARED);
    p.enqueue(&w.ctx(), CpuId(1), a, EnqueueReason::Migrated);
    assert_eq!(p.max_na_goodness(CpuId(1)), 61);
    // A stale cache (a value above anything waiting) is found out when CPU 0 validates it.
    p.max_na[1] = 500;
    let c = w.add_task(0);
    start_on(&mut w, &mut p, c, CpuId(0)); // queued on CPU 0: 41 + 15 + 20 = 76 > a's 61
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(c));
    assert_eq!(stat(&p, "nr_stale_max_na"), 1);
    assert_eq!(p.max_na_goodness(CpuId(1)), 61, "corrected");
}

#[test]
fn when_every_candidate_is_spent_all_counters_are_recalculated() {
    let (mut w, mut p) = world(1, 0);
    let (s, a) = (w.add_task(0), w.add_task(0));
    w.start(&mut p, s);
    w.start(&mut p, a);
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(s));
    w.stop(&mut p, CpuId(0), SwitchReason::Blocked); // s sleeps with its full 41 ticks
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(a));
    let resched = w.advance(&mut p, 41 * 1_000_000);
    assert_eq!((p.counter(a), resched), (0, vec![CpuId(0)]));
    w.stop(&mut p, CpuId(0), SwitchReason::Preempted);
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(a));
    // 2.4's recalculation: a = 0 / 2 + 41, the sleeper s = 41 / 2 + 41 = 61.
    assert_eq!(stat(&p, "nr_recalcs"), 1);
    assert_eq!((p.counter(a), p.counter(s)), (41, 61));
}

#[test]
fn wakeups_stay_in_the_pool_of_the_last_cpu() {
    // CPUs 0 and 1 (pool 0) busy, 2 and 3 (pool 1) idle; a task that last ran on CPU 0 wakes.
    for (pool_size, pool0) in [(2, true), (4, false)] {
        let (mut w, mut p) = world(4, pool_size);
        let (x, y, t) = (w.add_task(0), w.add_task(0), w.add_task(0));
        start_on(&mut w, &mut p, x, CpuId(0));
        assert_eq!(w.pick(&mut p, CpuId(0)), Some(x));
        w.tasks[y.idx()].allowed = CpuSet::single(CpuId(1));
        start_on(&mut w, &mut p, y, CpuId(1));
        assert_eq!(w.pick(&mut p, CpuId(1)), Some(y));
        w.tasks[t.idx()].cpu = CpuId(0);
        let cpu = w.start(&mut p, t);
        assert_eq!(cpu.0 < 2, pool0, "pool size {pool_size}: placed on {cpu}");
    }
}

#[test]
fn the_balancer_evens_out_pools_to_within_one_task_per_cpu() {
    // Two pools of two CPUs; six tasks start in pool 0 (two running, four waiting). Loads 6 : 0
    // per pool, 3 : 0 per CPU; moving three waiting tasks gives 3 : 3, and a fourth would not help.
    let (mut w, mut p) = world(4, 2);
    let ts: Vec<TaskId> = (0..6).map(|_| w.add_task(0)).collect();
    for &t in &ts {
        start_on(&mut w, &mut p, t, CpuId(0));
    }
    w.pick(&mut p, CpuId(0));
    w.pick(&mut p, CpuId(1));
    let mut out = Vec::new();
    p.balance(&w.ctx(), CpuId(0), BalanceKind::Periodic, &mut out);
    assert!(out.is_empty(), "not before the first interval (100 ms)");
    w.advance(&mut p, 100_000_000);
    p.balance(&w.ctx(), CpuId(0), BalanceKind::Periodic, &mut out);
    assert_eq!(out.len(), 3, "{out:?}");
    assert!(out
        .iter()
        .all(|m| m.from.0 < 2 && m.to.0 >= 2 && w.tasks[m.task.idx()].state == TaskState::Runnable));
    let to2 = out.iter().filter(|m| m.to == CpuId(2)).count();
    assert!(to2 == 1 || to2 == 2, "spread over the idle pool's CPUs");
}
