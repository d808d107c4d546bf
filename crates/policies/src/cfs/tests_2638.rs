//! CFS decisions pinned to Linux 2.6.38's code (kernel/sched_fair.c, kernel/sched.c): each test states
//! the function and condition it follows and derives its expected values by hand from them. Each one
//! fails on the behaviour schedlab had before it was made to follow that code (issue 28).

use super::balance::IdleType;
use super::lb2638::Balance2638;
use super::lb_stats::FindBusiest2638;
use super::select::Select2638;
use super::{Cfs, CfsParams};
use crate::testworld::TestWorld;
use schedlab_core::{
    CpuId, DequeueReason, EnqueueReason, GroupId, GroupInfo, Migration, SchedClass, SchedPolicy,
    SwitchReason, TaskId, Topology, WakeKind,
};

const CPU0: CpuId = CpuId(0);

fn cfs_on(w: &TestWorld) -> Cfs {
    let mut c = Cfs::new(CfsParams::default());
    c.init(&w.ctx());
    c
}

/// A world with `topo` instead of the flat default (and HZ 1000).
fn world(topo: Topology) -> TestWorld {
    let mut w = TestWorld::new(topo.nr_cpus() as u32);
    w.topo = topo;
    w
}

/// Starts a task pinned to `cpu` (placement follows the affinity), then lets it run anywhere.
fn start_on(w: &mut TestWorld, c: &mut Cfs, cpu: CpuId) -> TaskId {
    let t = w.add_task(0);
    w.tasks[t.idx()].allowed = schedlab_core::CpuSet::single(cpu);
    assert_eq!(w.start(c, t), cpu);
    w.tasks[t.idx()].allowed = w.topo.all();
    t
}

/// Applies the moves a balancing pass asked for, as the engine does: `dequeue(Migrate)` then
/// `enqueue(Migrated)` (no-ops in CFS for the tasks `pull_task` already moved).
fn apply(w: &mut TestWorld, c: &mut Cfs, out: &[Migration]) {
    for m in out {
        c.dequeue(&w.ctx(), m.from, m.task, DequeueReason::Migrate);
        w.cpus[m.from.idx()].nr_running -= 1;
        w.tasks[m.task.idx()].cpu = m.to;
        w.cpus[m.to.idx()].nr_running += 1;
        c.enqueue(&w.ctx(), m.to, m.task, EnqueueReason::Migrated);
    }
}

// ------------------------------------------------------------------------------------------------
// 1. check_preempt_tick: `if (delta < 0) return;`
// ------------------------------------------------------------------------------------------------

#[test]
fn a_task_behind_the_leftmost_keeps_the_cpu_until_its_slice_ends() {
    // One CPU, A then B forked. place_entity(initial) with START_DEBIT puts A one slice alone after
    // min_vruntime, calc_delta_mine(6 ms, 1024, load 1024) = SRR(SRR(6e6 x 1024, 16) x 4190212, 16) =
    // 5,994,146 ns (inv_weight 4190212 = 1 + (2^32 - 512) / 1025), and B one 2-task slice, 2,998,537 ns,
    // after it: B is picked first and runs behind A. check_preempt_tick: from delta_exec >= min_granularity (0.75 ms) the leftmost test
    // runs, but delta = vruntime(B) - vruntime(A) < 0 returns; B is rescheduled only once
    // delta_exec > ideal_runtime = 2,998,537 ns, i.e. at the 3 ms tick. (Without the early return, the
    // negative delta read as unsigned asked for a reschedule at the 1 ms tick.)
    let mut w = TestWorld::new(1);
    let mut c = cfs_on(&w);
    let (a, b) = (w.add_task(0), w.add_task(0));
    w.start(&mut c, a);
    w.start(&mut c, b);
    assert_eq!(w.pick(&mut c, CPU0), Some(b));
    assert_eq!(c.vruntime_of(a).wrapping_sub(c.vruntime_of(b)), 5_994_146 - 2_998_537);
    for ms in 1..=2 {
        assert!(w.advance(&mut c, 1_000_000).is_empty(), "tick at {ms} ms: B is behind A, no reschedule");
    }
    assert_eq!(w.advance(&mut c, 1_000_000), vec![CPU0], "3 ms > the 2,998,537 ns slice");
}

// ------------------------------------------------------------------------------------------------
// 2. find_busiest_group: 2.6.38's gates, the CPU_IDLE branch, the forced path's avg_load of 0
// ------------------------------------------------------------------------------------------------

/// Two LLCs of two cores (CPUs 0-1 and 2-3), no SMT: domains MC (level 0) and CPU (level 1).
fn two_llcs() -> TestWorld {
    world(Topology::symmetric(1, 1, 2, 2, 1).unwrap())
}

/// Puts `n[i]` tasks on CPU i and runs the first of each non-empty CPU.
fn populate(w: &mut TestWorld, c: &mut Cfs, n: &[usize]) {
    for (cpu, &k) in n.iter().enumerate() {
        for _ in 0..k {
            start_on(w, c, CpuId(cpu as u32));
        }
        if k > 0 {
            w.pick(c, CpuId(cpu as u32));
        }
    }
}

#[test]
fn group_imbalance_no_longer_forces_a_balance_past_the_load_gates() {
    // CPU level from CPU 0, newly idle (newidle_idx 0: loads are the runqueue weights). Local group
    // {0: 3 tasks, 1: 1 task}: group load 4096, power 2048, avg_load 2048. Remote {2: 3 tasks, 3: 0}:
    // load 3072, avg_load 1536; max - min = 3072 > 2 x 1024 (the average task) with 3 tasks on the
    // busiest CPU, so group_imb; 3 tasks > capacity 2, so it is the busiest group. The local group has
    // no spare capacity, so nothing is forced, and `this_load >= max_load` (2048 >= 1536) means
    // balanced: 2.6.38 does not look at group_imb here (later kernels force a balance on it).
    let mut w = two_llcs();
    let mut c = cfs_on(&w);
    populate(&mut w, &mut c, &[3, 1, 3, 0]);
    let (found, balance, _) = c.find_busiest_group(&w.ctx(), CPU0, 1, IdleType::NewlyIdle, false, None);
    assert!(balance);
    assert_eq!(found, None);
}

#[test]
fn a_forced_newly_idle_balance_computes_the_imbalance_with_avg_load_zero() {
    // CPU level from CPU 0, newly idle. Local {0: 0, 1: 1 task}: load 1024, avg_load 512, 1 task <
    // capacity 2. Remote {2: 3 tasks, 3: 0}: load 3072, avg_load 1536, group_imb (3072 > 2 x 1024, 3
    // tasks), 3 tasks > capacity 2 (no spare capacity). "SD_BALANCE_NEWIDLE trumps SMP nice": goto
    // force_balance before avg_load is computed, so calculate_imbalance sees avg_load = 0:
    // busiest_load_per_task = min(3072 / 3, 0) = 0 (group_imb); load_above_capacity = ~0;
    // max_pull = 1536 - 0; imbalance = min(1536 x 2048, (0 - 512) x 2048 mod 2^64) / 1024 = 3072,
    // not below busiest_load_per_task (0). (With avg_load = 1024 it would be 1024.)
    let mut w = two_llcs();
    let mut c = cfs_on(&w);
    populate(&mut w, &mut c, &[0, 1, 3, 0]);
    let (found, _, _) = c.find_busiest_group(&w.ctx(), CPU0, 1, IdleType::NewlyIdle, false, None);
    assert_eq!(found, Some((1, 3072)));
}

#[test]
fn an_idle_cpu_is_balanced_while_the_busiest_group_has_a_cpu_per_task() {
    // Two SMT cores (CPUs 0-1, 2-3): MC level (level 1) groups are cores of power 1178, capacity 1.
    // CPU 0 balances as CPU_IDLE (MC idle_idx 0). Local core {0 idle, 1: 1 task}; remote core
    // {2: 1 task, 3: 1 task}: 2 tasks > capacity 1, the busiest. By loads it is imbalanced
    // (100 x 1780 > 125 x 890), but this CPU is idle, so 2.6.38 takes the other branch:
    // this_idle_cpus (1) <= busiest_idle_cpus (0) + 1 and busiest_nr_running (2) <= group_weight (2):
    // balanced. With CPU 1 idle too (this_idle_cpus 2) it is not.
    let topo = Topology::symmetric(1, 1, 1, 2, 2).unwrap();
    for (n, want_busiest) in [([0usize, 1, 1, 1], false), ([0, 0, 1, 1], true)] {
        let mut w = world(topo.clone());
        let mut c = cfs_on(&w);
        populate(&mut w, &mut c, &n);
        let (found, balance, _) = c.find_busiest_group(&w.ctx(), CPU0, 1, IdleType::Idle, false, None);
        assert!(balance);
        assert_eq!(found.map(|(g, _)| g), want_busiest.then_some(1), "tasks per CPU {n:?}");
    }
}

// ------------------------------------------------------------------------------------------------
// 3. update_sg_lb_stats: group_imb when max - min > 2 x avg_load_per_task and max_nr_running > 1
// ------------------------------------------------------------------------------------------------

#[test]
fn a_group_is_imbalanced_only_beyond_two_average_tasks() {
    // Two LLCs of three cores (CPUs 0-2, 3-5): the CPU level (level 1) from CPU 0, newly idle (loads
    // are the runqueue weights). The local group runs 3 tasks on 3 CPUs (no spare capacity, so
    // SD_PREFER_SIBLING does not cap the remote group). Remote {3: 2 tasks, 4: 0, 5: 0}:
    // max - min = 2048, avg_load_per_task = 1024, and 2048 > 2 x 1024 is false: no group_imb, and 2
    // tasks do not exceed capacity 3, so there is no busiest group. (`>= avg_load_per_task`, a
    // one-task difference, made it imbalanced and the busiest.) With 3 tasks on CPU 3,
    // 3072 > 2048 with 3 tasks there: group_imb, the busiest though within capacity.
    for (n3, want) in [(2usize, None), (3, Some(1))] {
        let mut w = world(Topology::symmetric(1, 1, 2, 3, 1).unwrap());
        let mut c = cfs_on(&w);
        populate(&mut w, &mut c, &[1, 1, 1, n3, 0, 0]);
        let groups = c.cpus[0].domains[1].groups.clone();
        let all = w.topo.all();
        let walk = c.update_sd_lb_stats(&w.ctx(), CPU0, 1, &groups, IdleType::NewlyIdle, false, &all);
        assert_eq!(walk.sds.busiest, want, "{n3} tasks on CPU 3");
    }
}

// ------------------------------------------------------------------------------------------------
// 4. move_tasks: load_balance_fair again while something moved and the imbalance is not met
// ------------------------------------------------------------------------------------------------

#[test]
fn move_tasks_repeats_until_the_imbalance_is_met() {
    // Two CPUs, 10 nice-0 tasks on CPU 1 (one running), CPU 0 idle; sched_nr_migrate = 2, so one
    // balance_tasks pass examines at most 3 tasks. CPU_IDLE at the CPU level (idle_idx 1: cpu_load[0]
    // = 10240 after a tick): avg_load = 10240 x 1024 / 2048 = 5120; calculate_imbalance:
    // max_pull = min(10240 - 5120, (10 - 1) x 1024) = 5120, imbalance = 5120: five tasks. The first
    // pass moves 3 queued tasks (3072), move_tasks loops, the second moves 2 more (rem 2048 -> 0).
    let mut w = TestWorld::new(2);
    let mut c = Cfs::new(CfsParams { sched_nr_migrate: 2, ..CfsParams::default() });
    c.init(&w.ctx());
    populate(&mut w, &mut c, &[0, 10]);
    w.advance(&mut c, 1_000_000);
    w.now += 5_000_000; // every task cache-cold (not run within the 0.5 ms x 2 migration cost)
    let mut out = Vec::new();
    let (ld_moved, _) = c.load_balance(&w.ctx(), CPU0, 0, IdleType::Idle, &mut out);
    assert_eq!(ld_moved, 1);
    assert_eq!(out.len(), 5, "{out:?}");
    assert!(out.iter().all(|m| m.from == CpuId(1) && m.to == CPU0));
    apply(&mut w, &mut c, &out);
    assert_eq!((c.cpu_nr_tasks(CPU0), c.cpu_nr_tasks(CpuId(1))), (5, 5));
}

// ------------------------------------------------------------------------------------------------
// 6. select_idle_sibling: the inner `break` leaves the CPU loop only
// ------------------------------------------------------------------------------------------------

#[test]
fn a_wider_shared_cache_domain_replaces_the_idle_sibling_found_below() {
    // 4 cores x 2 threads sharing one LLC: domains SIBLING {2t, 2t+1} and MC {0..7}, both with
    // SD_SHARE_PKG_RESOURCES. Waker on CPU 6, target = the previous CPU 2 (busy). In the SIBLING
    // domain of CPU 2 the first idle CPU is 3; that domain does not span both CPU 6 and CPU 2, so
    // the walk goes on to MC, whose first idle CPU is 0, and stops there (it spans both): CPU 0.
    let mut w = world(Topology::symmetric(1, 1, 1, 4, 2).unwrap());
    let mut c = cfs_on(&w);
    let t = start_on(&mut w, &mut c, CpuId(2));
    w.pick(&mut c, CpuId(2));
    w.stop(&mut c, CpuId(2), SwitchReason::Blocked);
    for busy in [1u32, 2, 4, 5, 6, 7] {
        start_on(&mut w, &mut c, CpuId(busy));
        w.pick(&mut c, CpuId(busy));
    }
    assert!(w.ctx().is_idle(CPU0) && w.ctx().is_idle(CpuId(3)));
    assert_eq!(c.select_idle_sibling(&w.ctx(), t, CpuId(2), CpuId(6)), CPU0);
}

// ------------------------------------------------------------------------------------------------
// 7. check_preempt_wakeup: `p->policy != SCHED_NORMAL` returns before the SCHED_IDLE test
// ------------------------------------------------------------------------------------------------

#[test]
fn batch_and_idle_wakees_never_preempt_even_an_idle_class_task() {
    // check_preempt_wakeup (2.6.38): batch and idle wakees return at once; then a SCHED_IDLE current
    // task is preempted by any normal wakee, whatever the vruntimes.
    for (curr_class, wakee_class, want) in [
        (SchedClass::Idle, SchedClass::Batch, false),
        (SchedClass::Idle, SchedClass::Idle, false),
        (SchedClass::Idle, SchedClass::Normal, true),
        (SchedClass::Batch, SchedClass::Batch, false),
    ] {
        let mut w = TestWorld::new(1);
        let mut c = cfs_on(&w);
        let (a, b) = (w.add_task(0), w.add_task(0));
        w.tasks[a.idx()].class = curr_class;
        w.tasks[b.idx()].class = wakee_class;
        w.start(&mut c, a);
        w.pick(&mut c, CPU0);
        w.advance(&mut c, 500_000);
        w.start(&mut c, b);
        let got = c.check_preempt(&w.ctx(), CPU0, a, b, WakeKind::Wakeup);
        assert_eq!(got, want, "{curr_class:?} running, {wakee_class:?} wakes");
    }
}

// ------------------------------------------------------------------------------------------------
// 8. calc_cfs_shares over the windowed load averages; dequeue_task_fair's second loop
// ------------------------------------------------------------------------------------------------

/// A group under `parent` with `shares`.
fn add_group(w: &mut TestWorld, parent: u32, shares: u64) -> GroupId {
    w.groups.push(GroupInfo { parent: Some(GroupId(parent)), shares });
    GroupId(w.groups.len() as u32 - 1)
}

#[test]
fn a_group_entity_weighs_its_share_of_the_averaged_group_load() {
    // Group G (1024 shares) on 2 CPUs, HZ 1000. Task A of G runs on CPU 0 from t = 0.
    // * entity_tick -> update_entity_shares_tick: once 11 ms of run time are unaccounted (> the 10 ms
    //   window), update_cfs_load at 11 ms: load_period 11 ms, load_avg = 11 ms x 1024; the period
    //   exceeds the window, so the contribution becomes 11e6 x 1024 / (11e6 + 1) = 1023 and
    //   tg->load_weight = 1023; the window halves to 5.5 ms.
    // * At 22 ms the same: (5.632e9 + 11.264e9) / (16.5e6 + 1) = 1023, unchanged.
    // * A blocks at 25 ms (its load average still counts: 1023).
    // * B of G wakes on CPU 1 at 26 ms: its runqueue's first update_cfs_load leaves a contribution of
    //   0; calc_cfs_shares(cfs_rq, tg, weight_delta = 1024): load = 1024, load_weight =
    //   1023 - 0 + 1024 = 2047, shares = 1024 x 1024 / 2047 = 512. (The instantaneous group load,
    //   1024, gave 1024.)
    let mut w = TestWorld::new(2);
    let g = add_group(&mut w, 0, 1024);
    let mut c = cfs_on(&w);
    let a = w.add_task(0);
    let b = w.add_task(0);
    for t in [a, b] {
        w.tasks[t.idx()].group = g;
    }
    w.tasks[a.idx()].allowed = schedlab_core::CpuSet::single(CPU0);
    w.tasks[b.idx()].allowed = schedlab_core::CpuSet::single(CpuId(1));
    assert_eq!(w.start(&mut c, a), CPU0);
    w.pick(&mut c, CPU0);
    w.advance(&mut c, 25_000_000);
    let rq0 = c.rq_id(g.0, CPU0);
    assert_eq!(c.rqs[rq0 as usize].load_contribution, 1023);
    w.stop(&mut c, CPU0, SwitchReason::Blocked);
    w.now = 26_000_000;
    // B's first placement: as a new task, then its wakeup path is the same enqueue.
    assert_eq!(w.start(&mut c, b), CpuId(1));
    assert_eq!(c.tg_load_weight[g.0 as usize], 1023);
    let gse = c.group_se[g.0 as usize * 2 + 1];
    assert_eq!(c.ses[gse as usize].weight, 512);
}

#[test]
fn a_dequeue_updates_the_ancestors_shares_too() {
    // Root <- G1 <- G2, one CPU, tasks T1 and T2 in G2. When T1 blocks, dequeue_task_fair stops at
    // G2's runqueue (T2 keeps load there), and its second loop then runs update_cfs_load and
    // update_cfs_shares on G2's runqueue and on G1's (the runqueue of G2's entity): G1's runqueue is
    // stamped at the dequeue time. (Without the second loop it kept its older stamp.)
    let mut w = TestWorld::new(1);
    let g1 = add_group(&mut w, 0, 1024);
    let g2 = add_group(&mut w, g1.0, 1024);
    let mut c = cfs_on(&w);
    let (t1, t2) = (w.add_task(0), w.add_task(0));
    for t in [t1, t2] {
        w.tasks[t.idx()].group = g2;
        w.start(&mut c, t);
    }
    w.pick(&mut c, CPU0);
    w.advance(&mut c, 3_000_000);
    let g1_rq = c.rq_id(g1.0, CPU0) as usize;
    let stamp_before = c.rqs[g1_rq].load_stamp;
    assert!(stamp_before < w.now);
    w.stop(&mut c, CPU0, SwitchReason::Blocked);
    assert_eq!(c.rqs[g1_rq].load_stamp, w.now);
}

// ------------------------------------------------------------------------------------------------
// 9. rebalance_domains goes on to wider domains after a pull, balancing as a busy CPU
// ------------------------------------------------------------------------------------------------

#[test]
fn a_pull_in_one_domain_does_not_end_the_pass() {
    // Two LLCs of two cores; CPU 0 idle, CPU 1 with 3 tasks, CPUs 2 and 3 with 8 each. At 200 ms (past
    // every interval, busy or idle) rebalance_domains(CPU 0, CPU_IDLE) balances MC and pulls from
    // CPU 1; load_balance returned 1, so idle = CPU_NOT_IDLE, and the CPU domain (due: 64 ms busy
    // interval) is balanced next, in the same pass, from the other LLC.
    let mut w = two_llcs();
    let mut c = cfs_on(&w);
    populate(&mut w, &mut c, &[0, 3, 8, 8]);
    for _ in 0..200 {
        w.advance(&mut c, 1_000_000);
    }
    w.now += 5_000_000; // cache-cold
    let mut out = Vec::new();
    c.rebalance_domains(&w.ctx(), CPU0, IdleType::Idle, &mut out);
    assert!(out.iter().any(|m| m.from == CpuId(1)), "MC pulled: {out:?}");
    assert!(out.iter().any(|m| m.from.0 >= 2), "then the CPU domain pulled: {out:?}");
    apply(&mut w, &mut c, &out);
}

// ------------------------------------------------------------------------------------------------
// Active balancing: the stopper moves the only task of the busiest CPU
// ------------------------------------------------------------------------------------------------

#[test]
fn active_balance_pushes_a_lone_running_task_off_a_busy_core() {
    // Two SMT cores; tasks on CPUs 2 and 3 (one core), CPUs 0 and 1 idle. CPU 0 balancing as CPU_IDLE
    // at MC: the busy core is the busiest (2 tasks > capacity 1; this_idle_cpus 2 > 0 + 1);
    // imbalance = 1024 after fix_small_imbalance, and CPU 2's single task is not heavier than that,
    // so it is the busiest queue, but with one task nothing can be pulled. After more than
    // cache_nice_tries (1) + 2 failures the stopper runs on CPU 2: counting itself, CPU 2 has two
    // runnable tasks, so it moves CPU 2's task (no longer running) to CPU 0.
    let mut w = world(Topology::symmetric(1, 1, 1, 2, 2).unwrap());
    let mut c = cfs_on(&w);
    populate(&mut w, &mut c, &[0, 0, 1, 1]);
    let t2 = w.cpus[2].curr.unwrap();
    for attempt in 1..=4 {
        let mut out = Vec::new();
        c.load_balance(&w.ctx(), CPU0, 1, IdleType::Idle, &mut out);
        // Nothing moves in load_balance itself; the fourth failure kicks the stopper, which runs
        // at the end of the balancing pass.
        assert!(out.is_empty(), "attempt {attempt}: {out:?}");
        assert_eq!(c.pending_active.len(), usize::from(attempt == 4));
    }
    let mut out = Vec::new();
    c.run_active_balances(&w.ctx(), &mut out);
    assert_eq!(out, vec![Migration { task: t2, from: CpuId(2), to: CPU0 }]);
}

// ------------------------------------------------------------------------------------------------
// rebalance_domains: the interval cap is HZ x CONFIG_NR_CPUS / 10, not the online CPUs
// ------------------------------------------------------------------------------------------------

#[test]
fn a_busy_balance_interval_is_not_capped_by_the_online_cpu_count() {
    // Two flat CPUs at HZ 1000: one CPU domain (SD_CPU_INIT: busy_factor 64, max_interval 4 ms).
    // Backed off to max_interval on a busy CPU, rebalance_domains waits 4 x 64 = 256 ms = 256
    // jiffies: below HZ x NR_CPUS / 10 = 6400 (NR_CPUS 64). (A cap of HZ x 2 CPUs / 10 = 200
    // jiffies is 3.x's max_load_balance_interval.) An idle CPU waits 4 jiffies.
    let w = TestWorld::new(2);
    let mut c = cfs_on(&w);
    let d = &mut c.cpus[0].domains[0];
    d.balance_interval_ms = d.p.max_interval_ms;
    let d = c.cpus[0].domains[0].clone();
    assert_eq!(c.balance_interval_j(&d, false, 1000), 256);
    assert_eq!(c.balance_interval_j(&d, true, 1000), 4);
}
