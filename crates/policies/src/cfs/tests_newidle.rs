//! The newly idle balance of 6.12/6.18 (kernel/sched/fair.c of Debian's 6.12.117:
//! `sched_balance_newidle`, `update_newidle_cost`, `update_newidle_stats`; NI_RANDOM from upstream
//! 33cf66d88306): the cost gate and the balance run in proportion to its success rate. Expected
//! values are derived by hand from those functions.

use super::newidle66::{update_newidle_cost, update_newidle_stats};
use super::{Cfs, CfsParams, EevdfKernel, EevdfParams, Features612};
use crate::testworld::TestWorld;
use schedlab_core::{CpuId, CpuSet, DecisionCost, SchedPolicy};

fn eevdf(w: &TestWorld, ni_random: bool) -> Cfs {
    let p = CfsParams {
        eevdf_kernel: EevdfKernel::V6_12,
        f612: Features612 { ni_random: Some(ni_random), ..Default::default() },
        ..CfsParams::default()
    };
    let mut c = Cfs::new_eevdf(EevdfParams(p)).expect("valid parameters");
    c.init(&w.ctx());
    c
}

/// Two CPUs, one task running on CPU 0 (nothing CPU 1 could pull), `rd->overload` set, and a
/// decision cost so that every balance costs something, as `sched_clock` always measures.
fn world(ni_random: bool) -> (TestWorld, Cfs) {
    let mut w = TestWorld::new(2);
    w.decision_cost = DecisionCost { base_ns: 250, per_task_ns: 40 };
    let mut c = eevdf(&w, ni_random);
    let t = w.add_task(0);
    w.tasks[t.idx()].allowed = CpuSet::single(CpuId(0));
    w.start(&mut c, t);
    w.pick(&mut c, CpuId(0));
    (w, c)
}

/// `update_newidle_stats`: from sd_init's 512 calls and 256 successes (ratio 512), 512 balances
/// without success bring the calls to 1024: the ratio becomes the 256 successes, both counts halve.
/// `update_newidle_cost`: a longer balance is the new maximum; one second (HZ jiffies) later, a
/// visit decays it by 253/256 (5,000 -> 4,941).
#[test]
fn the_success_ratio_and_the_cost_maximum_follow_the_kernel_arithmetic() {
    let w = TestWorld::new(2);
    let c = eevdf(&w, true);
    let mut d = c.cpus[0].domains[0].clone();
    assert_eq!((d.newidle_call, d.newidle_success, d.newidle_ratio), (512, 256, 512));
    for _ in 0..511 {
        update_newidle_stats(&mut d, 0);
    }
    assert_eq!((d.newidle_call, d.newidle_success, d.newidle_ratio), (1023, 256, 512));
    update_newidle_stats(&mut d, 0);
    assert_eq!((d.newidle_call, d.newidle_success, d.newidle_ratio), (512, 128, 256));
    // A costed balance counts in the statistics; a visit with no cost (the decay) does not.
    assert!(!update_newidle_cost(&mut d, 5_000, 4, 10, 1000));
    assert_eq!((d.newidle_call, d.newidle_success, d.max_newidle_lb_cost), (513, 132, 5_000));
    assert!(!update_newidle_cost(&mut d, 0, 0, 1010, 1000), "not yet a second");
    assert!(update_newidle_cost(&mut d, 0, 0, 1011, 1000));
    assert_eq!((d.newidle_call, d.max_newidle_lb_cost, d.last_decay_max_lb_cost), (513, 4_941, 1011));
}

/// NI_RANDOM: balances that never find a task are run less and less. Without it all 6,144 newly
/// idle balances run. With it the ratio halves every 512 balances considered (512, 256, ..., 1,
/// 0) and a balance runs when the die (0..1023) shows at most 1 + ratio: the expected number run
/// is 512 x (514 + 258 + 130 + 66 + 34 + 18 + 10 + 6 + 4 + 3 + 2 + 2) / 1024 = 523.5 (sd ~ 16).
#[test]
fn unsuccessful_newly_idle_balances_run_in_proportion_to_their_success() {
    for (ni_random, lo, hi) in [(false, 6_144, 6_144), (true, 460, 590)] {
        let (w, mut c) = world(ni_random);
        let mut out = Vec::new();
        for _ in 0..6_144 {
            // A balance of the top domain sets `rd->overload` from what it saw (here: none).
            c.v66.rd_overload = true;
            c.newidle_balance_66(&w.ctx(), CpuId(1), &mut out);
        }
        assert!(out.is_empty());
        assert!((lo..=hi).contains(&c.nr_lb_calls), "ni_random {ni_random}: {} balances", c.nr_lb_calls);
        if ni_random {
            assert!(c.cpus[1].domains[0].newidle_ratio <= 1);
        }
    }
}

/// The cost gate: once a balance of the domain has cost `max_newidle_lb_cost`, a CPU whose
/// average idle time is shorter does not balance at all; a longer one does.
#[test]
fn a_cpu_that_idles_less_than_a_balance_costs_does_not_balance() {
    let (w, mut c) = world(false);
    c.v66.rd_overload = true;
    let mut out = Vec::new();
    c.newidle_balance_66(&w.ctx(), CpuId(1), &mut out);
    let cost = c.cpus[1].domains[0].max_newidle_lb_cost;
    assert!(cost >= 250, "a balance costs at least the base decision cost: {cost}");
    assert_eq!(c.nr_lb_calls, 1);
    c.cpus[1].avg_idle = cost - 1;
    c.v66.rd_overload = true;
    c.newidle_balance_66(&w.ctx(), CpuId(1), &mut out);
    assert_eq!(c.nr_lb_calls, 1, "avg_idle below the cost: no balance");
    c.cpus[1].avg_idle = cost;
    c.v66.rd_overload = true;
    c.newidle_balance_66(&w.ctx(), CpuId(1), &mut out);
    assert_eq!(c.nr_lb_calls, 2);
}
