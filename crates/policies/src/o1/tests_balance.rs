//! The 2.6.22 balancer and placement of crate::o1::runqueue, each expectation derived by hand from
//! kernel/sched.c of 2.6.22 (`find_busiest_group`, `move_tasks`, `load_balance`,
//! `active_load_balance`, `try_to_wake_up`, `sched_balance_self`). Nice-0 tasks weigh 128
//! (`SCHED_LOAD_SCALE`), every group below NUMA has power 128 and capacity one task.

use super::*;
use crate::testworld::TestWorld;
use schedlab_core::Topology;

/// A nice-0 task started on `cpu` (no parent: it starts where the engine put it).
fn put(w: &mut TestWorld, o: &mut O1, cpu: u32) -> TaskId {
    let t = w.add_task(0);
    w.tasks[t.idx()].cpu = CpuId(cpu);
    assert_eq!(w.start(o, t), CpuId(cpu));
    t
}

/// Moves a queued task of `cpu` to its expired array (as a slice expiry would have).
fn expire(o: &mut O1, cpu: u32, t: TaskId) {
    o.dequeue_array(CpuId(cpu), t);
    o.enqueue_array(CpuId(cpu), t, true, false);
    let rq = &mut o.q.rqs[cpu as usize];
    rq.x.best_expired_prio = rq.x.best_expired_prio.min(o.tasks[t.idx()].static_prio);
}

/// Runs the tick's `cpu_load[]` update on every CPU for 20 ms so the averages equal the loads.
fn settle_loads(w: &mut TestWorld, o: &mut O1) {
    for _ in 0..20 {
        w.now += w.tick_ns;
        for c in 0..w.cpus.len() {
            o.q.update_cpu_load(CpuId(c as u32), w.now);
        }
    }
}

fn balance(w: &TestWorld, o: &mut O1, cpu: u32, kind: BalanceKind) -> Vec<(TaskId, u32, u32)> {
    let mut out = Vec::new();
    o.balance(&w.ctx(), CpuId(cpu), kind, &mut out);
    out.into_iter().map(|m| (m.task, m.from.0, m.to.0)).collect()
}

/// A CPU going idle next to one running A with B, C queued active and E, F expired (load 640):
/// avg_load 320, busiest_load_per_task 128, imbalance min(640 - 320, 640 - 128) = 320, so up to
/// four tasks and 320 of load may move. The expired array goes first, its list from the tail: F
/// (320 -> 192), E (-> 64); then C and B weigh 128 > 64 and are no better than what CPU 0 now runs
/// (priority 119), so they stay.
#[test]
fn an_idle_cpu_pulls_from_the_tail_of_the_expired_array_first() {
    let mut w = TestWorld::new(2);
    let mut o = O1::new(NoParams);
    o.init(&w.ctx());
    let a = put(&mut w, &mut o, 1);
    let (_b, _c) = (put(&mut w, &mut o, 1), put(&mut w, &mut o, 1));
    let (e, f) = (put(&mut w, &mut o, 1), put(&mut w, &mut o, 1));
    assert_eq!(w.pick(&mut o, CpuId(1)), Some(a));
    expire(&mut o, 1, e);
    expire(&mut o, 1, f);
    settle_loads(&mut w, &mut o);
    assert_eq!(balance(&w, &mut o, 0, BalanceKind::NewlyIdle), vec![(f, 1, 0), (e, 1, 0)]);
}

/// Two tasks against one: this_load 128, max_load 256, avg 192, imbalance min(64, 64) = 64 <
/// busiest_load_per_task 128, so `small_imbalance` decides: imbn 2 and 256 - 128 < 256; pwr_now =
/// (128 x 128 + 128 x 128) / 128 = 256 and pwr_move = (128 x 128 + 128 x min(128, 256)) / 128 = 256:
/// no throughput gain, nothing moves. Three against one: avg 256, imbalance min(128, 256) = 128 =
/// one task, the tail of the queue moves.
#[test]
fn two_tasks_against_one_stay_put_three_give_one() {
    let mut w = TestWorld::new(2);
    let mut o = O1::new(NoParams);
    o.init(&w.ctx());
    let x = put(&mut w, &mut o, 0);
    let a = put(&mut w, &mut o, 1);
    let _b = put(&mut w, &mut o, 1);
    assert_eq!(w.pick(&mut o, CpuId(0)), Some(x));
    assert_eq!(w.pick(&mut o, CpuId(1)), Some(a));
    settle_loads(&mut w, &mut o);
    assert_eq!(balance(&w, &mut o, 0, BalanceKind::Periodic), vec![]);
    let c = put(&mut w, &mut o, 1);
    settle_loads(&mut w, &mut o);
    w.now += 1000 * w.tick_ns; // past every backed-off interval x busy_factor
    assert_eq!(balance(&w, &mut o, 0, BalanceKind::Periodic), vec![(c, 1, 0)]);
}

/// Two LLCs of two cores, one task on each core of the first. The idle CPU 2 balances its CPU-level
/// domain: each LLC group has power 128 (its child level shares the package), so the first LLC is
/// over its capacity of one task; the busiest queue holds a single task whose load (128) is not
/// above the imbalance (128), so nothing can be pulled: the balance fails. After cache_nice_tries +
/// 3 = 4 failures the migration thread of CPU 0 pushes its preempted task to CPU 2.
#[test]
fn a_package_with_two_tasks_gives_one_to_an_idle_package_by_active_balance() {
    let mut w = TestWorld::new(4);
    w.topo = Topology::symmetric(1, 1, 2, 2, 1).unwrap();
    let mut o = O1::new(NoParams);
    o.init(&w.ctx());
    let (a, b) = (put(&mut w, &mut o, 0), put(&mut w, &mut o, 1));
    assert_eq!(w.pick(&mut o, CpuId(0)), Some(a));
    assert_eq!(w.pick(&mut o, CpuId(1)), Some(b));
    settle_loads(&mut w, &mut o);
    for attempt in 1..=3 {
        w.now += w.tick_ns;
        assert_eq!(balance(&w, &mut o, 2, BalanceKind::NohzIdle), vec![], "attempt {attempt}");
    }
    w.now += w.tick_ns;
    assert_eq!(balance(&w, &mut o, 2, BalanceKind::NohzIdle), vec![(a, 0, 2)]);
    // CPU 3 is not the first idle CPU of its LLC: CPU 2 balances the CPU level for both.
    w.now += 100 * w.tick_ns;
    assert_eq!(balance(&w, &mut o, 3, BalanceKind::NohzIdle), vec![]);
}

/// `try_to_wake_up` on two cores sharing a cache (wake_idx 1: raw loads), t last ran on CPU 1 next to
/// X, the waker W runs on CPU 0. A sync wakeup subtracts W: tl = 0 <= load 128 and 0 + 128 <=
/// tl_per_task 128, so t wakes on CPU 0. Without sync, tl = 128: 128 + 128 > 128 and 100 x (128 +
/// 128) > 112 x 128, and the MC level does no passive balancing: t stays on CPU 1.
#[test]
fn a_sync_wakeup_is_affine_a_plain_one_stays_on_the_previous_cpu() {
    let mut w = TestWorld::new(2);
    let mut o = O1::new(NoParams);
    o.init(&w.ctx());
    let waker = put(&mut w, &mut o, 0);
    let t = put(&mut w, &mut o, 1);
    let x = put(&mut w, &mut o, 1);
    assert_eq!(w.pick(&mut o, CpuId(0)), Some(waker));
    assert_eq!(w.pick(&mut o, CpuId(1)), Some(t));
    w.stop(&mut o, CpuId(1), SwitchReason::Blocked);
    assert_eq!(w.pick(&mut o, CpuId(1)), Some(x));
    settle_loads(&mut w, &mut o);
    for (sync, want) in [(true, 0), (false, 1)] {
        let info =
            WakeInfo { waker_cpu: CpuId(0), waker: Some(waker), sync, wait: schedlab_core::WaitKind::Futex };
        assert_eq!(o.select_cpu(&w.ctx(), t, &info), CpuId(want), "sync {sync}");
    }
}

/// `sched_balance_self(SD_BALANCE_FORK)`: without NUMA no 2.6.22 domain balances at fork, so a child
/// starts on its parent's CPU even with the other CPUs idle.
#[test]
fn a_child_starts_on_its_parents_cpu_without_numa() {
    let mut w = TestWorld::new(4);
    let mut o = O1::new(NoParams);
    o.init(&w.ctx());
    let p = put(&mut w, &mut o, 2);
    assert_eq!(w.pick(&mut o, CpuId(2)), Some(p));
    let c = w.add_task(0);
    w.tasks[c.idx()].parent = Some(p);
    assert_eq!(w.start(&mut o, c), CpuId(2));
}

/// `sched_exec` (2.6.22): `sched_balance_self(SD_BALANCE_EXEC)`, which the CPU level sets where
/// SD_BALANCE_FORK is not set, moves a task exec'ing alone on CPU 2 to the first idle group of
/// its domain's circular list from its own (2, 3, 0, 1): its own load (128, with the loads
/// settled) is not within `imbalance_pct` 125's half of the idle groups' 0. With CPU 3 busy too,
/// CPU 0. A task pinned to CPU 2 stays.
#[test]
fn an_exec_moves_to_the_idlest_cpu_where_a_fork_would_not() {
    let mut w = TestWorld::new(4);
    let mut o = O1::new(NoParams);
    o.init(&w.ctx());
    let p = put(&mut w, &mut o, 2);
    assert_eq!(w.pick(&mut o, CpuId(2)), Some(p));
    settle_loads(&mut w, &mut o);
    assert_eq!(o.exec_cpu(&w.ctx(), CpuId(2), p), Some(CpuId(3)));
    let q = put(&mut w, &mut o, 3);
    assert_eq!(w.pick(&mut o, CpuId(3)), Some(q));
    settle_loads(&mut w, &mut o);
    assert_eq!(o.exec_cpu(&w.ctx(), CpuId(2), p), Some(CpuId(0)));
    w.tasks[p.idx()].allowed = [CpuId(2)].into_iter().collect();
    assert_eq!(o.exec_cpu(&w.ctx(), CpuId(2), p), Some(CpuId(2)));
}
