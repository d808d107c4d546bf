//! The newly idle balance of the EEVDF variant: `newidle_balance` of 6.6 and
//! `sched_balance_newidle` of 6.12/6.18 (kernel/sched/fair.c; Debian's 6.12.117 read), with the
//! cost bookkeeping `update_newidle_cost` / `update_newidle_stats` (whose decay `rebalance_domains`
//! runs, cfs/lb66.rs).
//!
//! A CPU about to go idle looks for a task to pull, domain by domain from the smallest, unless no
//! CPU has a task waiting (`rd->overload`) or the CPU's recent idle periods (`avg_idle`) are shorter
//! than what balancing costs: each domain remembers its longest newly idle balance lately
//! (`max_newidle_lb_cost`, decaying by 1 % a second), and a domain is not tried when the time spent
//! so far plus its cost would exceed `avg_idle`. The kernel measures that cost with `sched_clock`;
//! here it is what the engine charges for the pass, the machine's decision cost for the tasks and
//! CPUs examined ([`schedlab_core::DecisionCost`]), and the engine charges it before the pulled
//! task runs.
//!
//! NI_RANDOM (upstream 33cf66d88306 "sched/fair: Proportional newidle balance", in 6.18 and, by the
//! stable backport, in Debian's 6.12.117): each domain counts the balances considered and their
//! successes; a balance runs only if a 1024-sided die (`sched_rng()`) shows at most `1 +
//! newidle_ratio`, and a success then counts `1024 / (1 + ratio)` times (rounded) so the ratio
//! stays an unbiased success rate. The ratio starts at 50 % and is refreshed, and the counts
//! halved, every time 1024 balances have been considered. A domain whose balances never find a
//! task falls to a chance of 2 in 1024.

use super::balance::IdleType;
use super::Cfs;
use crate::domains::Domain;
use crate::domains::{SD_BALANCE_NEWIDLE, SD_LOAD_BALANCE};
use schedlab_core::{CpuId, Ctx, Migration};

/// `update_newidle_stats`: one more balance considered, `success` weighted successes.
pub(crate) fn update_newidle_stats(d: &mut Domain, success: u32) {
    d.newidle_call += 1;
    d.newidle_success += success;
    if d.newidle_call >= 1024 {
        d.newidle_ratio = d.newidle_success;
        d.newidle_call /= 2;
        d.newidle_success /= 2;
    }
}

/// `update_newidle_cost(sd, cost, success)` at jiffy `now_j` (`hz` jiffies a second): a balance
/// that cost something counts in the statistics; a new maximum is kept, else the maximum decays by
/// 253/256 once a second. Returns whether it decayed.
pub(crate) fn update_newidle_cost(d: &mut Domain, cost_ns: u64, success: u32, now_j: u64, hz: u64) -> bool {
    if cost_ns != 0 {
        update_newidle_stats(d, success);
    }
    if cost_ns > d.max_newidle_lb_cost {
        d.max_newidle_lb_cost = cost_ns;
        d.last_decay_max_lb_cost = now_j;
        false
    } else if now_j > d.last_decay_max_lb_cost + hz {
        d.max_newidle_lb_cost = d.max_newidle_lb_cost * 253 / 256;
        d.last_decay_max_lb_cost = now_j;
        true
    } else {
        false
    }
}

impl Cfs {
    /// `newidle_balance` / `sched_balance_newidle`: see the module essay.
    pub(crate) fn newidle_balance_66(&mut self, ctx: &Ctx, cpu: CpuId, out: &mut Vec<Migration>) {
        self.update_misfit_status(ctx, cpu, None);
        self.cpus[cpu.idx()].idle_stamp = ctx.now.max(1);
        let Some(first) = self.cpus[cpu.idx()].domains.first() else { return };
        if !self.v66.rd_overload || self.cpus[cpu.idx()].avg_idle < first.max_newidle_lb_cost {
            self.update_next_balance(cpu, ctx.hz());
            return;
        }
        self.update_shares(cpu, ctx.now);
        let (now_j, hz) = (ctx.jiffies(), ctx.hz());
        let mut curr_cost = 0;
        let mut pulled = false;
        for level in 0..self.cpus[cpu.idx()].domains.len() {
            let d = &self.cpus[cpu.idx()].domains[level];
            if d.p.flags & SD_LOAD_BALANCE == 0 {
                continue;
            }
            if self.cpus[cpu.idx()].avg_idle < curr_cost + d.max_newidle_lb_cost {
                break;
            }
            if d.p.flags & SD_BALANCE_NEWIDLE != 0 {
                let mut weight = 1;
                if self.f612.ni_random {
                    let d1k = self.v66.rng[cpu.idx()].next_u32() % 1024;
                    let d = &mut self.cpus[cpu.idx()].domains[level];
                    weight = 1 + d.newidle_ratio;
                    if d1k > weight {
                        update_newidle_stats(d, 0);
                        continue;
                    }
                    weight = (1024 + weight / 2) / weight;
                }
                let examined_before = self.nr_examined;
                pulled = self.load_balance_66(ctx, cpu, level, IdleType::NewlyIdle, out).0;
                let domain_cost = ctx.decision_cost.ns(self.nr_examined - examined_before);
                curr_cost += domain_cost;
                let d = &mut self.cpus[cpu.idx()].domains[level];
                update_newidle_cost(d, domain_cost, weight * u32::from(pulled), now_j, hz);
            }
            if pulled || self.cpu_nr_tasks(cpu) > 0 {
                break;
            }
        }
        let st = &mut self.cpus[cpu.idx()];
        st.max_idle_balance_cost = st.max_idle_balance_cost.max(curr_cost);
        if pulled || self.cpu_nr_tasks(cpu) > 0 {
            self.cpus[cpu.idx()].idle_stamp = 0;
        }
        self.run_active_balances(ctx, out);
        self.update_next_balance(cpu, ctx.hz());
    }
}
