//! Group shares of Linux 2.6.38 (kernel/sched_fair.c, CONFIG_FAIR_GROUP_SCHED on SMP): each group
//! runqueue keeps a load average over a sliding 10 ms window (`update_cfs_load`), folds it into the
//! group's `load_weight` when it moved by more than an eighth (`update_cfs_rq_load_contribution`), and
//! the group's entity on a CPU weighs `shares x this CPU's load / the group's load` where the group's
//! load is the other CPUs' averaged contributions plus this CPU's instantaneous load
//! (`calc_cfs_shares`, seed 000 eq. 5). Also here: the leaf runqueue list those updates walk
//! (`list_add_leaf_cfs_rq`), `update_shares` of the balancer, `effective_load` of `wake_affine`, and
//! the EEVDF variant's instantaneous shares (its 6.6 PELT shares are not modelled yet).

use super::fair::{RqId, SeId};
use super::Cfs;
use schedlab_core::{CpuId, Ns};

/// `sysctl_sched_shares_window`: the load-average window, ns.
pub const SHARES_WINDOW_NS: u64 = 10_000_000;
/// `MIN_SHARES`.
pub const MIN_SHARES: u64 = 2;

impl Cfs {
    /// `update_cfs_rq_load_contribution`: folds the runqueue's windowed average into the group's
    /// `load_weight` when it moved by more than an eighth of what it contributes (always, if global).
    fn update_cfs_rq_load_contribution(&mut self, rq: RqId, global_update: bool) {
        let r = &mut self.rqs[rq as usize];
        let avg = (r.load_avg / (r.load_period + 1)) as i64;
        let delta = avg - r.load_contribution as i64;
        if global_update || delta.unsigned_abs() > r.load_contribution / 8 {
            self.tg_load_weight[r.group as usize] += delta;
            r.load_contribution = (r.load_contribution as i64 + delta) as u64;
        }
    }

    /// `update_cfs_load(cfs_rq, global_update)`: accumulates load x time since the last stamp into the
    /// window, truncating the history after four idle windows, halving the window while it is longer
    /// than 10 ms, and taking the runqueue off the leaf list once it is empty with no history.
    pub(crate) fn update_cfs_load(&mut self, rq: RqId, global_update: bool, now: Ns) {
        if self.eevdf || self.rqs[rq as usize].group == 0 {
            return;
        }
        let period = SHARES_WINDOW_NS;
        let r = &mut self.rqs[rq as usize];
        let delta = now.wrapping_sub(r.load_stamp);
        if r.load_stamp > r.load_last && now.wrapping_sub(r.load_last) > 4 * period {
            r.load_period = 0;
            r.load_avg = 0;
        }
        r.load_stamp = now;
        r.load_unacc_exec_time = 0;
        r.load_period = r.load_period.wrapping_add(delta);
        if r.load != 0 {
            r.load_last = now;
            r.load_avg = r.load_avg.wrapping_add(delta.wrapping_mul(r.load));
        }
        if global_update || r.load_period > period || r.load_period == 0 {
            self.update_cfs_rq_load_contribution(rq, global_update);
        }
        let r = &mut self.rqs[rq as usize];
        while r.load_period > period {
            r.load_period /= 2;
            r.load_avg /= 2;
        }
        if r.curr.is_none() && r.nr_running == 0 && r.load_avg == 0 {
            self.list_del_leaf_cfs_rq(rq);
        }
    }

    /// `calc_cfs_shares(cfs_rq, tg, weight_delta)`: the weight of the group's entity on this CPU.
    fn calc_cfs_shares(&self, rq: RqId, weight_delta: u64) -> u64 {
        let r = &self.rqs[rq as usize];
        let g = r.group as usize;
        let load = (r.load + weight_delta) as i64;
        let load_weight = self.tg_load_weight[g] - r.load_contribution as i64 + load;
        let tg_shares = self.group_shares[g] as i64;
        let mut shares = tg_shares * load;
        if load_weight != 0 {
            shares /= load_weight;
        }
        shares.max(MIN_SHARES as i64).min(tg_shares).max(0) as u64
    }

    /// `update_cfs_shares(cfs_rq, weight_delta)`: reweights the group entity that owns `rq`. In the
    /// EEVDF variant the group's load is the instantaneous sum of its runqueues' loads.
    #[inline]
    pub(crate) fn update_cfs_shares(&mut self, rq: RqId, weight_delta: u64, now: Ns) {
        // The root group has no entity to reweight (every tick of a task at the top level).
        let r = &self.rqs[rq as usize];
        if r.group == 0 {
            return;
        }
        let g = r.group as usize;
        let se = self.group_se[g * self.ncpus + r.cpu.idx()];
        let shares = if self.eevdf {
            let tg_shares = self.group_shares[g];
            let shares = tg_shares * r.load;
            shares.checked_div(self.group_load[g]).unwrap_or(shares).max(MIN_SHARES).min(tg_shares)
        } else {
            self.calc_cfs_shares(rq, weight_delta)
        };
        self.reweight_entity(se, shares, now);
    }

    /// `update_entity_shares_tick`: at a tick, shares follow only once the runqueue has run a whole
    /// window without a load update.
    #[inline]
    pub(crate) fn update_entity_shares_tick(&mut self, rq: RqId, now: Ns) {
        // Both updates return at once for the root runqueue (no group entity owns it).
        let r = &self.rqs[rq as usize];
        if r.group != 0 && r.load_unacc_exec_time > SHARES_WINDOW_NS {
            self.update_cfs_load(rq, false, now);
            self.update_cfs_shares(rq, 0, now);
        }
    }

    /// `list_add_leaf_cfs_rq`: a runqueue that gets its first entity joins its CPU's leaf list, before
    /// its parent if the parent is listed already, at the end otherwise (children precede parents).
    pub(crate) fn list_add_leaf_cfs_rq(&mut self, rq: RqId) {
        let r = &self.rqs[rq as usize];
        if r.on_list {
            return;
        }
        let (g, cpu) = (r.group as usize, r.cpu);
        let parent_listed = g != 0 && {
            let p = self.group_parent[g].unwrap_or(0);
            self.rqs[self.rq_id(p, cpu) as usize].on_list
        };
        let list = &mut self.leaf[cpu.idx()];
        if parent_listed {
            list.insert(0, rq);
        } else {
            list.push(rq);
        }
        self.rqs[rq as usize].on_list = true;
    }

    /// `list_del_leaf_cfs_rq`.
    fn list_del_leaf_cfs_rq(&mut self, rq: RqId) {
        let r = &mut self.rqs[rq as usize];
        if !r.on_list {
            return;
        }
        r.on_list = false;
        let list = &mut self.leaf[r.cpu.idx()];
        if let Some(i) = list.iter().position(|&x| x == rq) {
            list.remove(i);
        }
    }

    /// `update_shares(cpu)`: before balancing, every group runqueue on the CPU's leaf list folds its
    /// load into its group (`update_cfs_load(cfs_rq, 1)`) and reweights its entity.
    pub(crate) fn update_shares(&mut self, cpu: CpuId, now: Ns) {
        if self.eevdf || self.ngroups < 2 {
            return;
        }
        let mut i = 0;
        while i < self.leaf[cpu.idx()].len() {
            let rq = self.leaf[cpu.idx()][i];
            if self.rqs[rq as usize].group != 0 {
                self.update_cfs_load(rq, true, now);
                self.update_cfs_shares(rq, 0, now);
            }
            // update_cfs_load may have taken `rq` off the list.
            if self.leaf[cpu.idx()].get(i) == Some(&rq) {
                i += 1;
            }
        }
    }

    /// `effective_load(tg, cpu, wl, wg)`: how the root-level load of `cpu` changes when `wl` is added to
    /// group `group`'s runqueue there and `wg` to the group's weight, through every level's shares.
    pub(crate) fn effective_load(&self, group: u32, cpu: CpuId, mut wl: i64, mut wg: i64) -> i64 {
        if group == 0 || self.eevdf {
            return wl;
        }
        let mut se: Option<SeId> = Some(self.group_se[group as usize * self.ncpus + cpu.idx()]);
        while let Some(s) = se {
            let e = &self.ses[s as usize];
            let my_q = &self.rqs[e.my_q.expect("group entity") as usize];
            let g = my_q.group as usize;
            let w = my_q.load as i64;
            let lw = self.tg_load_weight[g] - my_q.load_contribution as i64 + w + wg;
            wl += w;
            let tg_shares = self.group_shares[g] as i64;
            wl = if lw > 0 && wl < lw { wl * tg_shares / lw } else { tg_shares };
            wl = wl.max(MIN_SHARES as i64);
            wl -= e.weight as i64;
            wg = 0;
            se = e.parent;
        }
        wl
    }
}
