//! Tests of the Linux 6.6 parts of the EEVDF model (issue 28, EEVDF list): the balancer's group
//! classes and imbalance rules, `should_we_balance`, SIS_UTIL's scan depth, wakeup and fork
//! placement, the new task's deadline and reweighting. Each expected value is derived by hand from
//! the kernel function named in the test's comment (kernel/sched/fair.c of 6.6 unless said).

use super::balance::IdleType;
use super::lb66::{
    adjust_numa_imbalance, group_classify, sibling_imbalance, GroupType, LbEnv, MigrationType, SdStats,
    SgStats,
};
use super::select66::Current;
use super::{Cfs, CfsParams, EevdfParams};
use crate::domains::{self, DomainKind, SD_BALANCE_FORK, SD_NUMA, SD_PREFER_SIBLING, SD_SERIALIZE};
use crate::testworld::TestWorld;
use schedlab_core::{CpuId, CpuSet, SchedPolicy, SwitchReason, Topology};

fn eevdf(w: &TestWorld) -> Cfs {
    // The balancer and placement tests hold for both kernels; the 6.6 runqueue they were derived on.
    let p = CfsParams { eevdf_kernel: super::EevdfKernel::V6_6, ..CfsParams::default() };
    let mut c = Cfs::new_eevdf(EevdfParams(p)).expect("6.6 parameters");
    c.init(&w.ctx());
    c
}

/// A `struct lb_env` for balancing domain `level` of `cpu` over `cpus`, its local group `grpmask`.
fn lb_env(level: usize, cpu: u32, grpmask: CpuSet, cpus: CpuSet, idle: IdleType) -> LbEnv {
    LbEnv::new(level, CpuId(cpu), grpmask, cpus, idle)
}

fn stats(nr: u64, weight: u64, util: u64, runnable: u64) -> SgStats {
    SgStats {
        sum_nr_running: nr,
        sum_h_nr_running: nr,
        group_weight: weight,
        group_capacity: 1024 * weight,
        group_util: util,
        group_runnable: runnable,
        ..SgStats::default()
    }
}

/// `group_classify` with `group_is_overloaded` and `group_has_capacity`, imbalance_pct 117, a group
/// of two CPUs (capacity 2048).
#[test]
fn group_classes_follow_util_runnable_and_task_count() {
    // 3 tasks > 2 CPUs and capacity x 100 = 204,800 < util x 117 = 239,616: overloaded.
    assert_eq!(group_classify(117, false, &stats(3, 2, 2048, 2048)), GroupType::Overloaded);
    // 3 tasks, util 1500 (175,500 < 204,800), runnable 2100 (239,616 < 210,000 is false): not
    // overloaded; has_capacity: nr >= weight, runnable test passes, 204,800 > 175,500: has spare.
    assert_eq!(group_classify(117, false, &stats(3, 2, 1500, 2100)), GroupType::HasSpare);
    // ... but with runnable 2100 x 100 = 210,000 and util 2000 (234,000 >= 204,800): fully busy.
    assert_eq!(group_classify(117, false, &stats(2, 2, 2000, 2100)), GroupType::FullyBusy);
    // 3 tasks, runnable 2500: 2048 x 117 = 239,616 < 250,000: overloaded by runnable alone.
    assert_eq!(group_classify(117, false, &stats(3, 2, 1000, 2500)), GroupType::Overloaded);
    // Fewer tasks than CPUs always has spare capacity; the affinity flag outranks SMT balance.
    assert_eq!(group_classify(117, false, &stats(1, 2, 2048, 4000)), GroupType::HasSpare);
    assert_eq!(group_classify(117, true, &stats(1, 2, 0, 0)), GroupType::Imbalanced);
    let mut smt = stats(2, 2, 100, 100);
    smt.smt_balance = true;
    assert_eq!(group_classify(117, false, &smt), GroupType::SmtBalance);
    // group_classify tests sg_imbalanced before group_smt_balance: both set gives imbalanced.
    assert_eq!(group_classify(117, true, &smt), GroupType::Imbalanced);
    assert!(GroupType::HasSpare < GroupType::FullyBusy && GroupType::SmtBalance < GroupType::Imbalanced);
}

/// `sibling_imbalance` (6.6.0) and `adjust_numa_imbalance`.
#[test]
fn sibling_and_numa_imbalances() {
    let (local, busiest) = (stats(1, 4, 0, 0), stats(5, 4, 0, 0));
    // Equal core counts: the difference in tasks (the caller halves it).
    assert_eq!(sibling_imbalance(IdleType::Idle, 2, 2, &local, &busiest), 4);
    // A busy CPU never moves tasks for a sibling imbalance.
    assert_eq!(sibling_imbalance(IdleType::NotIdle, 2, 2, &local, &busiest), 0);
    // 2 local cores, 4 busiest ones, 6 tasks vs 0: (2 x 6 - 4 x 0) = 12, (2 x 12 + 6) / 6 = 5.
    let (l0, b6) = (stats(0, 4, 0, 0), stats(6, 8, 0, 0));
    assert_eq!(sibling_imbalance(IdleType::NewlyIdle, 2, 4, &l0, &b6), 5);
    // 1 local core with 1 task, 3 busiest cores with 2: (1 x 2 - 3 x 1) < 0 -> 0, (0 + 4) / 4 = 1.
    assert_eq!(sibling_imbalance(IdleType::Idle, 1, 3, &stats(1, 2, 0, 0), &stats(2, 6, 0, 0)), 1);
    // NUMA_IMBALANCE_MIN = 2: a lightly loaded destination keeps up to 2 tasks of imbalance.
    assert_eq!(adjust_numa_imbalance(2, 1, 2), 0);
    assert_eq!(adjust_numa_imbalance(3, 1, 2), 3);
    assert_eq!(adjust_numa_imbalance(1, 3, 2), 1);
    // `dst_running > imb_numa_nr` keeps the imbalance; at exactly imb_numa_nr it is still allowed.
    assert_eq!(adjust_numa_imbalance(2, 2, 2), 0);
}

/// `sd_init` of 6.6 on x86 (SMT, MC, NUMA) and `imb_numa_nr` of `build_sched_domains`.
#[test]
fn sd_init_66_flags_and_imb_numa_nr() {
    // 2 sockets x 4 cores x 2 threads, one node and LLC per socket (the Xeon E5520 pair).
    let t = Topology::symmetric(2, 1, 1, 4, 2).unwrap();
    let d = domains::build(&t, true, CpuId(3), domains::Style::Linux66);
    let kinds: Vec<DomainKind> = d.iter().map(|d| d.kind).collect();
    assert_eq!(kinds, [DomainKind::Sibling, DomainKind::Mc, DomainKind::Node]);
    // SMT: 110, cache_nice_tries 0; MC: 117, 1; both PREFER_SIBLING; NUMA: 117, 2, SERIALIZE, no
    // PREFER_SIBLING, FORK and WAKE_AFFINE kept (distance 20 <= RECLAIM_DISTANCE 30).
    let rows: Vec<(u64, u32, u64, u64, u64)> = d
        .iter()
        .map(|d| {
            (
                d.p.imbalance_pct,
                d.p.cache_nice_tries,
                d.p.min_interval_ms,
                d.p.max_interval_ms,
                d.p.busy_factor,
            )
        })
        .collect();
    assert_eq!(rows, [(110, 0, 2, 4, 16), (117, 1, 8, 16, 16), (117, 2, 16, 32, 16)]);
    assert!(d[0].p.flags & SD_PREFER_SIBLING != 0 && d[1].p.flags & SD_PREFER_SIBLING != 0);
    assert!(d[2].p.flags & SD_PREFER_SIBLING == 0);
    assert!(
        d[2].p.flags & (SD_NUMA | SD_SERIALIZE | SD_BALANCE_FORK) == SD_NUMA | SD_SERIALIZE | SD_BALANCE_FORK
    );
    // The NUMA level above an 8-CPU LLC spans 2 LLCs: imb_numa_nr 2; none below it.
    assert_eq!(d.iter().map(|d| d.imb_numa_nr).collect::<Vec<_>>(), [0, 0, 2]);
    // DIE (a package of several LLCs, no NUMA): cache_nice_tries 1, PREFER_SIBLING kept.
    let die = domains::linux_66(DomainKind::Cpu, 16, 10);
    assert_eq!((die.imbalance_pct, die.cache_nice_tries), (117, 1));
    assert!(die.flags & SD_PREFER_SIBLING != 0);
    // A NUMA level beyond RECLAIM_DISTANCE loses FORK, EXEC and WAKE_AFFINE.
    let far = domains::linux_66(DomainKind::Node, 64, 40);
    assert_eq!(far.flags & (SD_BALANCE_FORK | domains::SD_WAKE_AFFINE | domains::SD_BALANCE_EXEC), 0);
    // Opteron 6172 shape: 2 sockets x 2 nodes x 6 cores, an LLC per node. MC(6), NODE(12), NODE(24):
    // the first NUMA level spans 2 LLCs (imb 2), and the level above holds 24 / 24 = 1 span of the
    // first NUMA parent found from it (the 24-CPU one): 2 x 1.
    let t = Topology::symmetric(2, 2, 1, 6, 1).unwrap();
    let d = domains::build(&t, true, CpuId(0), domains::Style::Linux66);
    assert_eq!(d.iter().map(|d| d.span_weight()).collect::<Vec<_>>(), [6, 12, 24]);
    assert_eq!(d.iter().map(|d| d.imb_numa_nr).collect::<Vec<_>>(), [0, 2, 2]);
}

/// `update_idle_cpu_scan` (SIS_UTIL) on an 8-CPU LLC, imbalance_pct 117.
#[test]
fn sis_util_scan_depth_follows_llc_utilisation() {
    let mut w = TestWorld::new(8);
    w.topo = Topology::symmetric(1, 1, 1, 8, 1).unwrap();
    let mut c = eevdf(&w);
    let ctx = w.ctx();
    let env = lb_env(0, 0, CpuSet::single(CpuId(0)), ctx.topo.all(), IdleType::NotIdle);
    // x = 512 per CPU: 512^2 x 117^2 / (10^4 x 1024) = 350; (1024 - 350) x 8 / 1024 = 5.
    c.update_idle_cpu_scan(&ctx, &env, 8 * 512);
    assert_eq!(c.v66.nr_idle_scan[0], 5);
    // x = 700: 700^2 x 117^2 / (10^4 x 1024) = 655 (the pct^2 / 10^4 factor, not pct / 100, which
    // would give 559 and 3 CPUs); (1024 - 655) x 8 / 1024 = 2.
    c.update_idle_cpu_scan(&ctx, &env, 8 * 700);
    assert_eq!(c.v66.nr_idle_scan[0], 2);
    // Fully busy: 1024^2 x 117^2 / 10^4 / 1024 = 1401, capped at 1024: no scan at all.
    c.update_idle_cpu_scan(&ctx, &env, 8 * 1024);
    assert_eq!(c.v66.nr_idle_scan[0], 0);
    // Idle: the whole LLC.
    c.update_idle_cpu_scan(&ctx, &env, 0);
    assert_eq!(c.v66.nr_idle_scan[0], 8);
}

/// An SMT core running two tasks and an idle core: the idle CPU's periodic balance at MC level
/// classifies the busy core as `group_smt_balance` (`smt_balance`: CPU_IDLE, an SMT group, two
/// tasks), forces the balance (`sibling_imbalance` 2 > 1 under PREFER_SIBLING), asks for one task
/// (`calculate_imbalance`), but each CPU of the busy core has one task, so nothing can be detached
/// (`busiest->nr_running > 1` fails) and `nr_balance_failed` grows; past `cache_nice_tries + 2`
/// (MC: 1 + 2) failures `need_active_balance` (migrate_task) makes the stopper push the running
/// task over.
#[test]
fn an_idle_core_takes_a_task_from_a_busy_smt_core_by_active_balance() {
    let mut w = TestWorld::new(4);
    w.topo = Topology::symmetric(1, 1, 1, 2, 2).unwrap();
    let mut c = eevdf(&w);
    let (a, b) = (w.add_task(0), w.add_task(0));
    for (t, cpu) in [(a, 0), (b, 1)] {
        w.tasks[t.idx()].cpu = CpuId(cpu);
        w.tasks[t.idx()].allowed = CpuSet::single(CpuId(cpu));
        w.start(&mut c, t);
        w.tasks[t.idx()].allowed = w.topo.all();
        assert_eq!(w.pick(&mut c, CpuId(cpu)), Some(t));
    }
    w.advance(&mut c, 50_000_000);
    let mut out = Vec::new();
    for attempt in 1..=4 {
        let (moved, cont) = c.load_balance_66(&w.ctx(), CpuId(2), 1, IdleType::Idle, &mut out);
        assert!(!moved && cont, "attempt {attempt}");
        assert_eq!(c.cpus[2].domains[1].nr_balance_failed, attempt);
        assert_eq!(c.pending_active.len(), usize::from(attempt == 4), "attempt {attempt}");
    }
    c.run_active_balances(&w.ctx(), &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].task, out[0].from, out[0].to), (a, CpuId(0), CpuId(2)));
    // CPU 3 shares CPU 2's idle core: CPU 2 is the group's first idle CPU on an idle core, so CPU 3
    // does not balance and stops the walk (should_we_balance).
    let (moved, cont) = c.load_balance_66(&w.ctx(), CpuId(3), 1, IdleType::Idle, &mut Vec::new());
    assert!(!moved && !cont);
}

/// `should_we_balance` as 6.6.0 shipped it: a busy CPU whose SMT sibling is idle (an idle CPU on a
/// busy core, `idle_smt`) still balances the MC level when it is the group's first CPU (the 6.7 fix
/// made the idle sibling the only one to balance).
#[test]
fn should_we_balance_66_0_falls_back_to_the_first_cpu() {
    let mut w = TestWorld::new(4);
    w.topo = Topology::symmetric(1, 1, 1, 2, 2).unwrap();
    let mut c = eevdf(&w);
    let a = w.add_task(0);
    w.tasks[a.idx()].allowed = CpuSet::single(CpuId(2));
    w.start(&mut c, a);
    w.pick(&mut c, CpuId(2));
    let ctx = w.ctx();
    let env = |cpu: u32| {
        lb_env(1, cpu, c.cpus[cpu as usize].domains[1].groups[0].cpus, ctx.topo.all(), IdleType::NotIdle)
    };
    // Group {2, 3}: CPU 3 is idle but its core is busy (idle_smt = 3); no idle core: CPU 2 is the
    // group's first CPU, so it balances (6.6.0), and CPU 3 balances as idle_smt.
    assert!(c.should_we_balance(&ctx, &env(2)));
    assert!(c.should_we_balance(&ctx, &env(3)));
    // Group {0, 1}: both idle, core idle: CPU 0 balances, CPU 1 does not.
    assert!(c.should_we_balance(&ctx, &env(0)));
    assert!(!c.should_we_balance(&ctx, &env(1)));
}

/// Fork placement (`find_idlest_group` / `find_idlest_group_cpu`): forked without running on a
/// 4-CPU machine, the first child stays on the forking CPU (the local group has as many idle CPUs
/// as the idlest), each next one goes to the first idle CPU (local has fewer idle CPUs).
#[test]
fn forks_spread_over_idle_cpus() {
    let mut w = TestWorld::new(4);
    let mut c = eevdf(&w);
    let placed: Vec<u32> = (0..4)
        .map(|_| {
            let t = w.add_task(0);
            w.start(&mut c, t).0
        })
        .collect();
    assert_eq!(placed, [0, 1, 2, 3]);
}

/// `wake_affine_idle` and `wake_wide`.
#[test]
fn wake_affine_idle_and_wake_wide() {
    let mut w = TestWorld::new(4);
    let mut c = eevdf(&w);
    let t = w.add_task(0);
    w.start(&mut c, t);
    w.pick(&mut c, CpuId(0));
    let ctx = w.ctx();
    // Waker's CPU 2 idle and sharing the cache with prev CPU 0 (busy): CPU 2; prev 1 idle: CPU 1.
    assert_eq!(c.wake_affine_idle(&ctx, CpuId(2), CpuId(0), false), Some(CpuId(2)));
    assert_eq!(c.wake_affine_idle(&ctx, CpuId(2), CpuId(1), false), Some(CpuId(1)));
    // Waker's CPU busy, prev busy, not sync: no idle choice.
    assert_eq!(c.wake_affine_idle(&ctx, CpuId(0), CpuId(0), false), None);
    // wake_wide with llc_size 4: a waker with 8 flips, a wakee with 4: slave 4 is not below 4, but
    // master 8 < 4 x 4, so not wide; once the waker has 16 flips it is.
    let waker = w.add_task(0);
    let wakees: Vec<_> = (0..17).map(|_| w.add_task(0)).collect();
    for &p in &wakees[..8] {
        c.record_wakee(Current::Task(waker), p, 0, 1000);
    }
    for &p in &wakees[..4] {
        c.record_wakee(Current::Task(wakees[16]), p, 0, 1000);
    }
    assert!(!c.wake_wide(Current::Task(waker), wakees[16], 4));
    for &p in &wakees[8..16] {
        c.record_wakee(Current::Task(waker), p, 0, 1000);
    }
    assert!(c.wake_wide(Current::Task(waker), wakees[16], 4));
    // After more than a second the waker's flips halve (16 -> 8, plus the new wakee: 9).
    c.record_wakee(Current::Task(waker), wakees[0], 1001, 1000);
    assert!(!c.wake_wide(Current::Task(waker), wakees[16], 4));
}

/// The new task's request (6.6 `wake_up_new_task` passes no ENQUEUE_INITIAL, so `place_entity` at
/// enqueue gives a whole `base_slice`) and `reweight_entity` (6.6.0: a queued entity's relative
/// deadline, a sleeping entity's lag scale by old/new weight).
#[test]
fn new_task_gets_a_whole_request_and_reweight_rescales() {
    let mut w = TestWorld::new(1);
    let mut c = eevdf(&w);
    let (a, b) = (w.add_task(0), w.add_task(0));
    w.start(&mut c, a);
    w.start(&mut c, b);
    // One CPU: base slice 0.75 ms unscaled; nice 0: the virtual request is the slice itself.
    for t in [a, b] {
        assert_eq!(c.deadline_of(t).wrapping_sub(c.vruntime_of(t)), 750_000);
    }
    // b queued (not running): 1024 -> 2048 halves the relative deadline.
    w.pick(&mut c, CpuId(0));
    let queued = if w.cpus[0].curr == Some(a) { b } else { a };
    let se = c.task_se[queued.idx()];
    c.reweight_entity(se, 2048, w.now);
    assert_eq!(c.deadline_of(queued).wrapping_sub(c.vruntime_of(queued)), 375_000);
    // The running task sleeps with some lag; 1024 -> 512 doubles it.
    w.advance(&mut c, 300_000);
    let running = w.stop(&mut c, CpuId(0), SwitchReason::Blocked);
    let lag = c.lag_of(running);
    assert_ne!(lag, 0);
    let se = c.task_se[running.idx()];
    c.reweight_entity(se, 512, w.now);
    assert_eq!(c.lag_of(running), lag * 2);
}

/// `select_idle_cpu` (SIS_UTIL): `nr = nr_idle_scan + 1`, and `nr == 1` scans nothing; otherwise the
/// scan starts after the target and stops at the first idle CPU (no idle core: `has_idle_cores`
/// false).
#[test]
fn select_idle_cpu_scans_at_most_nr_idle_scan_cpus() {
    // Four CPUs without SMT (no idle core to look for), then two SMT cores with an idle core known:
    // the scan looks for a whole idle core (CPU 1's core is busy, CPU 2's is idle) regardless of the
    // depth, but the SIS_UTIL return (`nr == 1`) comes first: an LLC that looked fully used is not
    // scanned even for idle cores.
    for (topo, has_idle_core, found) in
        [(Topology::flat(4), false, CpuId(1)), (Topology::symmetric(1, 1, 1, 2, 2).unwrap(), true, CpuId(2))]
    {
        let mut w = TestWorld::new(4);
        w.topo = topo;
        let mut c = eevdf(&w);
        let (a, p) = (w.add_task(0), w.add_task(0));
        w.start(&mut c, a);
        w.pick(&mut c, CpuId(0));
        let ctx = w.ctx();
        let all = ctx.topo.all();
        c.v66.nr_idle_scan[0] = 0;
        assert_eq!(c.select_idle_cpu(&ctx, p, &all, has_idle_core, CpuId(0)), None);
        c.v66.nr_idle_scan[0] = 1;
        assert_eq!(c.select_idle_cpu(&ctx, p, &all, has_idle_core, CpuId(0)), Some(found));
    }
}

/// `can_migrate_task` (6.6): a queued task that ran within `sched_migration_cost` (500 us) is cache
/// hot (`task_hot`), and a hot task moves only once `nr_balance_failed > cache_nice_tries` (MC: 1).
#[test]
fn a_cache_hot_task_moves_only_past_cache_nice_tries() {
    let mut w = TestWorld::new(2);
    let mut c = eevdf(&w);
    let (a, b) = (w.add_task(0), w.add_task(0));
    for t in [a, b] {
        w.tasks[t.idx()].allowed = CpuSet::single(CpuId(0));
        w.start(&mut c, t);
        w.tasks[t.idx()].allowed = w.topo.all();
    }
    let curr = w.pick(&mut c, CpuId(0)).expect("a task runs");
    let queued = if curr == a { b } else { a };
    // 100 us after both were enqueued at time 0: the queued one is hot.
    w.advance(&mut c, 100_000);
    let ctx = w.ctx();
    let grp = c.cpus[1].domains[0].groups[0].cpus;
    assert_eq!(c.cpus[1].domains[0].p.cache_nice_tries, 1);
    let mut env = lb_env(0, 1, grp, ctx.topo.all(), IdleType::Idle);
    env.src_cpu = CpuId(0);
    for (failed, movable) in [(0, false), (1, false), (2, true)] {
        c.cpus[1].domains[0].nr_balance_failed = failed;
        assert_eq!(c.can_migrate_task_66(&ctx, queued, &mut env), movable, "nr_balance_failed {failed}");
    }
    // The running task never moves by load_balance.
    assert!(!c.can_migrate_task_66(&ctx, curr, &mut env));
}

/// `calculate_imbalance` (6.6), local group with spare capacity and a busiest group that is not
/// overloaded: under `prefer_sibling` (the child MC level has SD_PREFER_SIBLING) the imbalance is
/// `sibling_imbalance` halved, else the idle-CPU difference halved. DIE over two 2-CPU LLCs; local
/// {2, 3} with one task and one idle CPU, busiest {0, 1} with three tasks and none: equal core counts,
/// sibling_imbalance = 3 - 1 = 2, >> 1 = 1 task; idle CPUs 1 - 0 = 1, >> 1 = 0.
#[test]
fn calculate_imbalance_has_spare_prefers_siblings() {
    let mut w = TestWorld::new(4);
    w.topo = Topology::symmetric(1, 1, 2, 2, 1).unwrap();
    let c = eevdf(&w);
    let ctx = w.ctx();
    let groups: Vec<&crate::domains::Group> = c.cpus[3].domains[1].groups.iter().collect();
    let local = groups.iter().position(|g| g.cpus.contains(CpuId(3))).expect("local group");
    let mut local_stat = stats(1, 2, 300, 300);
    local_stat.idle_cpus = 1;
    let mut busiest_stat = stats(3, 2, 600, 600);
    busiest_stat.group_type = GroupType::HasSpare;
    for (prefer_sibling, tasks) in [(true, 1), (false, 0)] {
        let mut sds = SdStats {
            busiest: Some(1 - local),
            local,
            prefer_sibling,
            local_stat,
            busiest_stat,
            ..SdStats::default()
        };
        let mut env = lb_env(1, 3, groups[local].cpus, ctx.topo.all(), IdleType::Idle);
        c.calculate_imbalance_66(&ctx, &mut env, &mut sds, &groups);
        assert_eq!(
            (env.migration_type, env.imbalance),
            (MigrationType::Task, tasks),
            "prefer_sibling {prefer_sibling}"
        );
    }
}

/// Starts `n` tasks pinned to CPU 0 while they start (then free to run anywhere) and runs the first.
fn crowd_cpu0(w: &mut TestWorld, c: &mut Cfs, n: usize) -> Vec<schedlab_core::TaskId> {
    let tasks: Vec<_> = (0..n).map(|_| w.add_task(0)).collect();
    for &t in &tasks {
        w.tasks[t.idx()].allowed = CpuSet::single(CpuId(0));
        w.start(c, t);
        w.tasks[t.idx()].allowed = w.topo.all();
    }
    w.pick(c, CpuId(0));
    tasks
}

/// `newidle_balance` (6.6) with `add_nr_running`'s `rd->overload`: a CPU that gets a second task
/// sets the flag; a newly idle CPU balances only while it is set, and (CONFIG_PREEMPTION)
/// `detach_tasks` stops after one task when newly idle, although the imbalance asks for two: five
/// tasks on CPU 0 (never run, so cache cold 1 ms later: `exec_start` 0) against none,
/// `sibling_imbalance` 5 - 0 = 5, halved: 2.
#[test]
fn newidle_balance_needs_overload_and_pulls_one_task() {
    let mut w = TestWorld::new(2);
    let mut c = eevdf(&w);
    assert!(!c.v66.rd_overload);
    crowd_cpu0(&mut w, &mut c, 5);
    assert!(c.v66.rd_overload, "add_nr_running sets rd->overload at the second task");
    w.advance(&mut c, 1_000_000);
    let mut out = Vec::new();
    c.v66.rd_overload = false;
    c.newidle_balance_66(&w.ctx(), CpuId(1), &mut out);
    assert!(out.is_empty(), "no overload, no newly idle balance");
    c.v66.rd_overload = true;
    c.newidle_balance_66(&w.ctx(), CpuId(1), &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].from, out[0].to), (CpuId(0), CpuId(1)));
}

/// `should_we_balance` for a newly idle CPU: it balances unless something is already queued on it.
#[test]
fn newly_idle_cpu_with_a_queued_task_does_not_balance() {
    let mut w = TestWorld::new(2);
    let mut c = eevdf(&w);
    crowd_cpu0(&mut w, &mut c, 2);
    let ctx = w.ctx();
    let grp = c.cpus[1].domains[0].groups[0].cpus;
    let env = lb_env(0, 1, grp, ctx.topo.all(), IdleType::NewlyIdle);
    assert!(c.should_we_balance(&ctx, &env));
    let t = w.add_task(0);
    w.tasks[t.idx()].allowed = CpuSet::single(CpuId(1));
    w.start(&mut c, t);
    assert!(!c.should_we_balance(&w.ctx(), &env));
}

/// `select_idle_sibling` (6.6) in the source's order: an idle target; an idle `prev` sharing the
/// target's cache; the task's `recent_used_cpu` when idle (and `recent_used_cpu` becomes `prev`);
/// then the SIS_UTIL scan, here switched off (`nr_idle_scan` 0), so the busy target.
#[test]
fn select_idle_sibling_tries_prev_then_recent_used_cpu() {
    let mut w = TestWorld::new(4);
    let mut c = eevdf(&w);
    crowd_cpu0(&mut w, &mut c, 1);
    let p = w.add_task(0);
    let ctx = w.ctx();
    c.v66.reserve(p);
    c.v66.nr_idle_scan[0] = 0;
    assert_eq!(c.select_idle_sibling_66(&ctx, p, CpuId(1), CpuId(1)), CpuId(1));
    assert_eq!(c.select_idle_sibling_66(&ctx, p, CpuId(2), CpuId(0)), CpuId(2));
    assert_eq!(c.select_idle_sibling_66(&ctx, p, CpuId(0), CpuId(0)), CpuId(0));
    c.v66.recent_used_cpu[p.idx()] = Some(CpuId(3));
    assert_eq!(c.select_idle_sibling_66(&ctx, p, CpuId(0), CpuId(0)), CpuId(3));
    assert_eq!(c.v66.recent_used_cpu[p.idx()], Some(CpuId(0)));
}

/// `sched_idle_cpu` in `select_idle_sibling` (6.6): `prev` running only a SCHED_IDLE task counts
/// as idle (`available_idle_cpu(prev) || sched_idle_cpu(prev)`), so a wakee whose target is busy
/// with a normal task goes there; once a normal task joins it, it does not (SIS_UTIL's scan off:
/// the busy target). In `find_idlest_group_cpu` such a CPU is taken before any idle one.
#[test]
fn a_cpu_running_only_sched_idle_tasks_counts_as_idle_for_wakeups() {
    let mut w = TestWorld::new(4);
    let mut c = eevdf(&w);
    let on = |w: &mut TestWorld, c: &mut Cfs, cpu: u32, class: schedlab_core::SchedClass| {
        let t = w.add_task(0);
        w.tasks[t.idx()].class = class;
        w.tasks[t.idx()].allowed = CpuSet::single(CpuId(cpu));
        w.start(c, t);
        t
    };
    on(&mut w, &mut c, 0, schedlab_core::SchedClass::Idle);
    w.pick(&mut c, CpuId(0));
    on(&mut w, &mut c, 1, schedlab_core::SchedClass::Normal);
    w.pick(&mut c, CpuId(1));
    let p = w.add_task(0);
    c.v66.reserve(p);
    c.v66.nr_idle_scan[0] = 0;
    let ctx = w.ctx();
    assert!(c.sched_idle_cpu(&ctx, CpuId(0)) && !c.sched_idle_cpu(&ctx, CpuId(1)));
    assert!(!c.sched_idle_cpu(&ctx, CpuId(2)), "an idle CPU has no tasks");
    assert_eq!(c.select_idle_sibling_66(&ctx, p, CpuId(0), CpuId(1)), CpuId(0));
    // A group of CPU 0 and the idle CPU 2: the idle one only if CPU 0 did not count first.
    let members: Box<[CpuId]> = Box::new([CpuId(0), CpuId(2)]);
    let g = domains::Group {
        cpus: members.iter().fold(CpuSet::default(), |mut s, &c| {
            s.insert(c);
            s
        }),
        members,
        first: CpuId(0),
        power: 2048,
    };
    assert_eq!(c.find_idlest_group_cpu(&ctx, &g, p, CpuId(3)), CpuId(0));
    on(&mut w, &mut c, 0, schedlab_core::SchedClass::Normal);
    let ctx = w.ctx();
    assert!(!c.sched_idle_cpu(&ctx, CpuId(0)), "a normal task queued there too");
    c.v66.recent_used_cpu[p.idx()] = None;
    assert_eq!(c.select_idle_sibling_66(&ctx, p, CpuId(0), CpuId(1)), CpuId(1));
}
