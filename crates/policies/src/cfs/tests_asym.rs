//! Capacity asymmetry (big.LITTLE) in the EEVDF model, against Debian's 6.12.117 kernel/sched:
//! topology.c `asym_cpu_capacity_classify`; fair.c `update_misfit_status`, the misfit group and
//! migration of the balancer, `select_idle_capacity`. The machine: four CPUs in one cache, two of
//! capacity 1024 (CPUs 0, 1) and two of 512 (CPUs 2, 3); the expectations follow the source by
//! hand, and each test has the symmetric machine as its control.

use super::{Cfs, CfsParams, EevdfParams};
use crate::domains::{SD_ASYM_CPUCAPACITY, SD_ASYM_CPUCAPACITY_FULL};
use crate::testworld::TestWorld;
use schedlab_core::{CpuId, CpuSet, SchedPolicy, SwitchReason};

const MS: u64 = 1_000_000;

fn world(asym: bool) -> (TestWorld, Cfs) {
    let mut w = TestWorld::new(4);
    if asym {
        w.capacity = vec![1024, 1024, 512, 512];
    }
    let mut c = Cfs::new_eevdf(EevdfParams(CfsParams::default())).expect("valid parameters");
    c.init(&w.ctx());
    (w, c)
}

/// Starts a task on `cpu` only (then lets it go anywhere) and runs it there.
fn run_on(w: &mut TestWorld, c: &mut Cfs, cpu: CpuId) -> schedlab_core::TaskId {
    let t = w.add_task(0);
    w.tasks[t.idx()].allowed = CpuSet::single(cpu);
    assert_eq!(w.start(c, t), cpu);
    w.tasks[t.idx()].allowed = w.topo.all();
    w.tasks[t.idx()].cpu = cpu;
    assert_eq!(w.pick(c, cpu), Some(t));
    t
}

/// `asym_cpu_capacity_classify`: the domain over all four CPUs spans both capacities, so it is
/// SD_ASYM_CPUCAPACITY and SD_ASYM_CPUCAPACITY_FULL; equal CPUs give neither.
#[test]
fn a_domain_over_both_capacities_is_fully_asymmetric() {
    for asym in [true, false] {
        let (_, c) = world(asym);
        for cpu in 0..4 {
            let d = c.cpus[cpu].domains.last().expect("a domain");
            let want = if asym { SD_ASYM_CPUCAPACITY | SD_ASYM_CPUCAPACITY_FULL } else { 0 };
            assert_eq!(d.p.flags & (SD_ASYM_CPUCAPACITY | SD_ASYM_CPUCAPACITY_FULL), want);
        }
        assert_eq!(c.asym, asym);
    }
}

/// A CPU-bound task on little CPU 2: at the ticks `update_misfit_status` finds that it does not fit
/// 512 (its utilisation passes 512 x 1024 / 1280 = 409.6) and may go to a 1024 CPU, so CPU 2 holds
/// a misfit load. Idle big CPU 0's periodic balance sees CPU 2's group as `group_misfit_task`
/// (`update_sd_pick_busiest`: the destination's core is idle, 1024 > 512 x 1078 / 1024, the local
/// group has spare capacity), forces the balance with `migrate_misfit`, cannot detach the running
/// task and so asks the stopper: the task moves to CPU 0. On equal CPUs there is no misfit, and a
/// single task per CPU is balanced (`find_busiest_group`: one task in the busiest group).
#[test]
fn a_misfit_task_on_a_little_cpu_is_pulled_by_an_idle_big_cpu() {
    for asym in [true, false] {
        let (mut w, mut c) = world(asym);
        let t = run_on(&mut w, &mut c, CpuId(2));
        w.advance(&mut c, 200 * MS);
        let util = c.pelt_task_util(t, w.now);
        assert!(util > 410, "a CPU-bound task's utilisation: {util}");
        assert_eq!(c.cpus[2].misfit_task_load > 0, asym);
        let mut out = Vec::new();
        c.rebalance_domains_66(&w.ctx(), CpuId(0), super::balance::IdleType::Idle, &mut out);
        if asym {
            assert_eq!(out.len(), 1, "{out:?}");
            assert_eq!((out[0].task, out[0].from, out[0].to), (t, CpuId(2), CpuId(0)));
        } else {
            assert!(out.is_empty(), "{out:?}");
        }
    }
}

/// PELT's capacity invariance: on a CPU of capacity 512 the PELT clock runs at half speed while a
/// task runs, so a task that runs 2 ms of every 8 ms grows to about half the utilisation it has on
/// a 1024 CPU, and it fits the little CPU (no misfit); without invariance it would not.
#[test]
fn utilisation_is_capacity_invariant() {
    let mut utils = Vec::new();
    for cpu in [CpuId(0), CpuId(2)] {
        let (mut w, mut c) = world(true);
        let t = run_on(&mut w, &mut c, cpu);
        for _ in 0..100 {
            w.advance(&mut c, 2 * MS);
            w.stop(&mut c, cpu, SwitchReason::Blocked);
            w.advance(&mut c, 6 * MS);
            w.wake(&mut c, t, cpu);
            assert_eq!(w.pick(&mut c, cpu), Some(t));
        }
        utils.push(c.pelt_task_util(t, w.now));
        if cpu == CpuId(2) {
            assert_eq!(c.cpus[2].misfit_task_load, 0, "a small task fits the little CPU");
        }
    }
    let (big, little) = (utils[0], utils[1]);
    assert!(big > 200 && big < 330, "about a quarter of 1024 on the big CPU: {big}");
    assert!(
        little * 2 >= big - 20 && little * 2 <= big + 20,
        "half of it on the little CPU: {little} vs {big}"
    );
}

/// `select_idle_sibling` on an asymmetric machine: an idle target (CPU 2) that the waking task does
/// not fit is passed over, and `select_idle_capacity` over `sd_asym_cpucapacity` takes the first
/// idle CPU from the target on (2, 3, 0, 1) that it fits: CPU 0. On equal CPUs the idle target wins.
#[test]
fn a_big_task_waking_on_a_little_cpu_is_placed_on_an_idle_big_one() {
    for asym in [true, false] {
        let (mut w, mut c) = world(asym);
        let t = run_on(&mut w, &mut c, CpuId(2));
        w.advance(&mut c, 200 * MS);
        w.stop(&mut c, CpuId(2), SwitchReason::Blocked);
        w.advance(&mut c, MS);
        let cpu = c.select_idle_sibling_66(&w.ctx(), t, CpuId(2), CpuId(2));
        assert_eq!(cpu, if asym { CpuId(0) } else { CpuId(2) });
    }
}
