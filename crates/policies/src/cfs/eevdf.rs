//! EEVDF, the Earliest Eligible Virtual Deadline First scheduler of Linux 6.18 (the default), 6.12
//! (`kernel=6.12`; Debian's linux-source-6.12 6.12.117) and 6.6 (`kernel=6.6`) (kernel/sched/fair.c,
//! kernel/sched/features.h), on the same entities, runqueues and groups as CFS.
//!
//! 6.12 adds, each switchable as its features.h entry (all on by default):
//!
//! * DELAY_DEQUEUE / DELAY_ZERO: a task that sleeps while ineligible stays queued, competing until
//!   a pick finds it (then it is dequeued) or it wakes (then it is requeued where it is, with no
//!   placement, a positive lag dropped); `ttwu_runnable` does no CPU selection for it.
//! * PLACE_REL_DEADLINE: a dequeue that is not a sleep keeps the deadline relative to the vruntime.
//! * PREEMPT_SHORT: `update_curr` reschedules a running entity that is no longer eligible once its
//!   slice protection is gone (`did_preempt_short`); a wakee with a shorter slice cancels the
//!   protection (`do_preempt_short`).
//! * PICK_BUDDY: an eligible `next` buddy is picked first; a new task gets half a request
//!   (`wake_up_new_task` passes ENQUEUE_INITIAL).
//!
//! 6.18 is 6.12 with the slice protection of 6.17 (Vincent Guittot's "Manage lag and run to parity
//! with different slices", tip commits 74eec63661d4, 9de74a9850b9, 052c3d87c82e, 3a0baa8e6c57,
//! 0b9ca2dcabc3): at pick the running entity is protected up to `vprot` = min(deadline, vruntime +
//! the shortest slice queued); `update_curr` reschedules once it is past `vprot`, eligible or not; a
//! wakee with a shorter slice is tested without the protection, which is cancelled only if the
//! wakee wins, and otherwise cut to the shortest slice from now (`update_protect_slice`).
//!
//! In every version the re-pick of the task that was running does not renew its slice protection
//! (`pick_next_task_fair` calls no `set_next_entity` when `prev == p`).
//!
//! * Every runqueue keeps the weighted average vruntime V (`avg_vruntime`): the sums
//!   `sum (v_i - min_vruntime) w_i` and `sum w_i` over the timeline, plus the running entity. An entity
//!   is *eligible* when `v_i <= V` (it has received no more than its share).
//! * Each entity asks for a request of `base_slice` (0.7 ms in 6.12, 0.75 ms in 6.6, x the CPU-count
//!   factor; a task's own `sched_runtime` slice instead in 6.12) and gets the
//!   virtual deadline `vd_i = v_i + slice x 1024 / w_i`. The pick is the eligible entity with the earliest
//!   virtual deadline; with RUN_TO_PARITY the running entity keeps the CPU while it stays eligible and has
//!   not finished its request.
//! * When the running entity's vruntime passes its deadline it gets a new request and, if others wait,
//!   the CPU is rescheduled (`update_deadline`): that is the tick preemption.
//! * Lag `V - v_i` is saved at dequeue, clamped to two slices (or a tick), and restored at enqueue
//!   (PLACE_LAG) with the compensation `lag x (W + w_i) / W` that keeps it intact after the new entity
//!   moves V; a new task starts with a whole request at V (6.6's `wake_up_new_task` passes no
//!   ENQUEUE_INITIAL, so the enqueue re-places it over `task_fork_fair`'s half-request placement).
//! * Reweighting scales a sleeping entity's lag and a queued entity's relative deadline by old/new
//!   weight (`reweight_entity` of 6.6.0, fair.rs).
//! * A wakeup preempts when the pick would now choose the woken entity; yield pushes the deadline one
//!   request later.
//!
//! Simplifications (see docs/policies/eevdf.md): the pick walks a treap augmented with each subtree's
//! earliest deadline ([`super::deadline_tree`]) where the kernel walks an rbtree augmented with
//! `min_deadline` (the same O(log n) descent; among equal deadlines the leftmost entity wins, where the
//! kernel's choice depends on its tree's shape). The balancer and wakeup placement are 6.6's own
//! ([`super::lb66`], [`super::select66`]) on PELT load, runnable and utilisation averages
//! ([`super::pelt`]); what they leave out is listed there and in docs/policies/eevdf.md.

use super::deadline_tree::NIL;
use super::fair::{RqId, Se, SeId};
use super::math::calc_delta_fair;
use super::timeline;
use super::Cfs;
use schedlab_core::{CpuId, Ctx, Ns, SchedClass, TaskId, NSEC_PER_SEC};

impl Cfs {
    /// `entity_key`: vruntime relative to `min_vruntime`.
    fn entity_key(&self, rq: RqId, se: SeId) -> i64 {
        self.ses[se as usize].vruntime.wrapping_sub(self.rqs[rq as usize].min_vruntime) as i64
    }

    /// The weighted sums with the running entity included: (sum of keys x weights, sum of weights).
    fn avg_with_curr(&self, rq: RqId) -> (i64, i64) {
        let r = &self.rqs[rq as usize];
        let (mut avg, mut load) = (r.avg_vruntime, r.avg_load as i64);
        if let Some(c) = r.curr.filter(|&c| self.ses[c as usize].on_rq) {
            let w = self.ses[c as usize].weight as i64;
            avg = avg.wrapping_add(self.entity_key(rq, c).wrapping_mul(w));
            load += w;
        }
        (avg, load)
    }

    /// `avg_vruntime`: V, the weighted average vruntime of the runqueue (floor division).
    pub(crate) fn avg_vruntime(&self, rq: RqId) -> u64 {
        let (mut avg, load) = self.avg_with_curr(rq);
        if load != 0 {
            if avg < 0 {
                avg -= load - 1; // the sign flips the effective floor to a ceiling
            }
            avg /= load;
        }
        self.rqs[rq as usize].min_vruntime.wrapping_add(avg as u64)
    }

    /// `entity_eligible`: `v_i <= V`, computed without division.
    pub(crate) fn entity_eligible(&self, rq: RqId, se: SeId) -> bool {
        let (avg, load) = self.avg_with_curr(rq);
        avg as i128 >= self.entity_key(rq, se) as i128 * load as i128
    }

    /// `update_entity_lag`: `vlag = clamp(V - v, -limit, limit)`, limit = max(2 slices, a tick) in the
    /// entity's virtual time.
    fn update_entity_lag(&mut self, rq: RqId, se: SeId) {
        let v = self.avg_vruntime(rq);
        let s = &self.ses[se as usize];
        let lag = v.wrapping_sub(s.vruntime) as i64;
        let limit = calc_delta_fair((2 * s.slice).max(self.tick_ns), s.weight, s.inv()) as i64;
        self.ses[se as usize].vlag = lag.clamp(-limit, limit) as u64;
    }

    /// `update_deadline`: a new request once the current one is used up, rescheduling if others wait.
    pub(crate) fn update_deadline(&mut self, rq: RqId, se: SeId) {
        let s = &self.ses[se as usize];
        if (s.vruntime.wrapping_sub(s.deadline) as i64) < 0 {
            return;
        }
        // `if (!se->custom_slice) se->slice = sysctl_sched_base_slice` (6.12).
        let slice = s.custom_slice.unwrap_or(self.base_slice_ns);
        let vslice = calc_delta_fair(slice, s.weight, s.inv());
        let s = &mut self.ses[se as usize];
        s.slice = slice;
        s.deadline = s.vruntime.wrapping_add(vslice);
        if self.rqs[rq as usize].nr_running > 1 {
            let cpu = self.rqs[rq as usize].cpu;
            self.resched[cpu.idx()] = true;
            self.clear_buddies(rq, se);
        }
    }

    /// `place_entity` (6.6): at V minus the saved lag, compensated for the entity's own effect on V.
    fn place_entity_eevdf(&mut self, rq: RqId, se: SeId, initial: bool) {
        let v = self.avg_vruntime(rq);
        let slice = self.ses[se as usize].custom_slice.unwrap_or(self.base_slice_ns);
        let (weight, inv) = (self.ses[se as usize].weight, self.ses[se as usize].inv());
        let mut vslice = calc_delta_fair(slice, weight, inv);
        let mut lag = 0i64;
        if self.p.place_lag && self.rqs[rq as usize].nr_running > 0 {
            let (_, mut load) = self.avg_with_curr(rq);
            lag = self.ses[se as usize].vlag as i64;
            let scaled = lag as i128 * (load + weight as i64) as i128;
            if load == 0 {
                load = 1;
            }
            lag = (scaled / load as i128) as i64;
        }
        if self.p.place_deadline_initial && initial {
            vslice /= 2;
        }
        let rel = self.f612.place_rel_deadline;
        let s = &mut self.ses[se as usize];
        s.slice = slice;
        s.vruntime = v.wrapping_sub(lag as u64);
        if rel && s.rel_deadline {
            // 6.12 PLACE_REL_DEADLINE: the deadline kept relative by a non-sleep dequeue.
            s.deadline = s.deadline.wrapping_add(s.vruntime);
            s.rel_deadline = false;
            return;
        }
        s.deadline = s.vruntime.wrapping_add(vslice);
    }

    /// `update_cfs_group(se)` (6.6): a group entity takes the weight its own runqueue (`my_q`)
    /// earns now, in its parent's runqueue; a task's entity has no runqueue and keeps its weight.
    /// (Not the group that owns the runqueue `se` is entering: at the enqueue of a group's first
    /// task that runqueue is still empty, and the group would be placed at the minimum weight.)
    pub(crate) fn update_cfs_group(&mut self, se: SeId, now: Ns) {
        if let Some(q) = self.ses[se as usize].my_q {
            self.update_cfs_shares(q, 0, now);
        }
    }

    /// The second `for_each_sched_entity` loop of 6.6's `enqueue_task_fair` and
    /// `dequeue_task_fair`: `update_cfs_group` for `cur`, an entity that stayed queued, and every
    /// entity above it.
    pub(crate) fn update_cfs_groups_upward(&mut self, mut cur: Option<SeId>, now: Ns) {
        while let Some(se) = cur {
            self.update_cfs_group(se, now);
            cur = self.ses[se as usize].parent;
        }
    }

    /// `enqueue_entity` (6.6): placed on every enqueue, so no relative vruntime across CPUs.
    pub(crate) fn enqueue_entity_eevdf(&mut self, rq: RqId, se: SeId, initial: bool, now: Ns) {
        let is_curr = self.rqs[rq as usize].curr == Some(se);
        if is_curr {
            self.place_entity_eevdf(rq, se, initial);
        }
        self.update_curr(rq, now);
        self.update_cfs_group(se, now);
        if !is_curr {
            self.place_entity_eevdf(rq, se, initial);
        }
        self.account_enqueue(rq, se);
        if !is_curr {
            self.tree_insert(rq, se);
        }
        self.ses[se as usize].on_rq = true;
    }

    /// `dequeue_entity` (6.6, 6.12): the lag is saved before the entity leaves the average; in 6.12
    /// a dequeue that is not a sleep (a migration) keeps the deadline relative to the vruntime
    /// (PLACE_REL_DEADLINE). The delayed dequeue of a sleeping task is decided before this, in
    /// [`Cfs::put_prev`](schedlab_core::SchedPolicy::put_prev).
    pub(crate) fn dequeue_entity_eevdf(&mut self, rq: RqId, se: SeId, sleep: bool, now: Ns) {
        self.update_curr(rq, now);
        self.clear_buddies(rq, se);
        self.update_entity_lag(rq, se);
        if self.f612.place_rel_deadline && !sleep {
            let s = &mut self.ses[se as usize];
            s.deadline = s.deadline.wrapping_sub(s.vruntime);
            s.rel_deadline = true;
        }
        if self.rqs[rq as usize].curr != Some(se) {
            self.tree_remove(rq, se);
        }
        self.ses[se as usize].on_rq = false;
        self.account_dequeue(rq, se);
        self.update_cfs_group(se, now);
        self.update_min_vruntime(rq);
    }

    /// `pick_eevdf`: the eligible entity with the earliest virtual deadline (with RUN_TO_PARITY the
    /// running entity is kept while its slice is protected). The
    /// timeline's deadline tree is walked in O(log n) ([`super::deadline_tree`]); the entities
    /// visited are the ones counted as examined.
    pub(crate) fn pick_eevdf(&mut self, rq: RqId) -> SeId {
        self.pick_eevdf_protecting(rq, true)
    }

    /// `__pick_eevdf(cfs_rq, protect)` (6.17+): with `protect` false the running entity's slice
    /// protection is ignored (a wakeup with a shorter slice asks whether it would win without it).
    /// Before 6.17 `protect` is always true and the protection is RUN_TO_PARITY's.
    fn pick_eevdf_protecting(&mut self, rq: RqId, protect: bool) -> SeId {
        let r = &self.rqs[rq as usize];
        let curr = r.curr.filter(|&c| self.ses[c as usize].on_rq && self.entity_eligible(rq, c));
        self.nr_examined += 1;
        if let Some(c) = curr {
            // 6.17+ always protects (without RUN_TO_PARITY for a shorter quantum, set at pick).
            let guarded = if self.has_vprot() { protect } else { self.p.run_to_parity };
            if guarded && self.protect_slice(c) {
                return c;
            }
        }
        // entity_eligible for every node, with the average computed once.
        let (avg, load) = self.avg_with_curr(rq);
        let min_vruntime = r.min_vruntime;
        let eligible =
            |s: &Se| avg as i128 >= (s.vruntime.wrapping_sub(min_vruntime) as i64) as i128 * load as i128;
        let (found, visited) = self.dl_tree.pick(&self.ses, r.dl_root, eligible);
        self.nr_examined += visited;
        let found = (found != NIL).then_some(found);
        // The running entity only with a strictly earlier deadline (6.6 `deadline_gt(best, curr)`,
        // 6.12 `entity_before(curr, best)`): on a tie the entity found in the tree wins.
        let best = match (curr, found) {
            (Some(c), Some(f)) => {
                let (cd, fd) = (self.ses[c as usize].deadline, self.ses[f as usize].deadline);
                Some(if (cd.wrapping_sub(fd) as i64) < 0 { c } else { f })
            }
            (c, f) => c.or(f),
        };
        // No eligible entity cannot happen with a consistent average; the kernel falls back to the
        // leftmost, and so does this.
        best.or_else(|| timeline::first(&self.rqs[rq as usize].timeline))
            .or(self.rqs[rq as usize].curr)
            .expect("non-empty runqueue")
    }

    /// `check_preempt_wakeup` (6.6): preempt when the pick would now choose the woken entity.
    pub(crate) fn check_preempt_eevdf(&mut self, ctx: &Ctx, curr: TaskId, p: TaskId, fork: bool) -> bool {
        let cpu = ctx.task(curr).cpu;
        if std::mem::take(&mut self.resched[cpu.idx()]) {
            return true; // the running entity's request ran out in an update_curr since the last tick
        }
        let se = self.task_se[curr.idx()];
        let pse = self.task_se[p.idx()];
        if se == pse {
            return false;
        }
        if self.p.next_buddy && !fork {
            self.set_buddy(ctx, pse, false);
        }
        let (cc, pc) = (ctx.task(curr).class, ctx.task(p).class);
        if cc == SchedClass::Idle && pc != SchedClass::Idle {
            // 6.12: the preempted idle entity gets no slice protection.
            self.cancel_protect_slice(se);
            return true;
        }
        if !pc.is_normal() || !self.p.wakeup_preempt {
            return false;
        }
        let (se, pse) = self.find_matching_se(se, pse);
        let rq = self.ses[se as usize].cfs_rq;
        self.update_curr(rq, ctx.now);
        if std::mem::take(&mut self.resched[cpu.idx()]) {
            // 6.12: update_curr's did_preempt_short (or the request's end) asked for it; 6.18: the
            // running entity's protected period is over (or its request ended).
            return true;
        }
        if self.has_vprot() {
            // 6.18 `check_preempt_wakeup_fair`: a wakee with a shorter slice is tested without the
            // running entity's protection, which is cancelled only if the wakee wins; otherwise
            // the protection is cut to the shortest queued slice (`update_protect_slice`).
            let short = self.f612.preempt_short && self.ses[pse as usize].slice < self.ses[se as usize].slice;
            if self.pick_eevdf_protecting(rq, !short) == pse {
                if short {
                    self.cancel_protect_slice(se);
                }
                self.nr_wakeup_preempt += 1;
                return true;
            }
            if self.p.run_to_parity && short {
                self.update_protect_slice(rq, se);
            }
            return false;
        }
        if self.do_preempt_short(rq, pse, se) {
            self.cancel_protect_slice(se);
        }
        let preempt = self.pick_eevdf(rq) == pse;
        if preempt {
            self.nr_wakeup_preempt += 1;
        }
        preempt
    }

    /// `yield_task_fair` (6.6): the deadline moves one request later.
    pub(crate) fn yield_eevdf(&mut self, ctx: &Ctx, t: TaskId) {
        let se = self.task_se[t.idx()];
        let rq = self.ses[se as usize].cfs_rq;
        if ctx.cpu(ctx.task(t).cpu).nr_running <= 1 {
            return;
        }
        self.clear_buddies(rq, se);
        self.update_curr(rq, ctx.now);
        let s = &self.ses[se as usize];
        let vslice = calc_delta_fair(s.slice, s.weight, s.inv());
        self.ses[se as usize].deadline = self.ses[se as usize].deadline.wrapping_add(vslice);
    }

    /// `protect_slice`: 6.6 and 6.12, the deadline stashed in `vlag` at pick time is still the
    /// deadline; 6.18, the entity has not reached the vruntime `vprot` set at pick time (kept in
    /// `vlag`, which the kernel's `vprot` shares a union with).
    fn protect_slice(&self, se: SeId) -> bool {
        let s = &self.ses[se as usize];
        if self.has_vprot() {
            (s.vlag.wrapping_sub(s.vruntime) as i64) > 0
        } else {
            s.vlag == s.deadline
        }
    }

    /// `cancel_protect_slice` (6.12, 6.18).
    fn cancel_protect_slice(&mut self, se: SeId) {
        if self.protect_slice(se) {
            let vprot = self.has_vprot();
            let s = &mut self.ses[se as usize];
            s.vlag = if vprot { s.vruntime } else { s.deadline.wrapping_add(1) };
        }
    }

    /// `set_protect_slice`, at `set_next_entity`. 6.6 and 6.12 stash the deadline. 6.18 protects
    /// the entity up to its deadline but for no longer than the shortest slice queued
    /// (`cfs_rq_min_slice`; without RUN_TO_PARITY, the unscaled base slice): `vprot = min(deadline,
    /// vruntime + that slice in virtual time)` when it is shorter than the entity's own slice.
    pub(crate) fn set_protect_slice(&mut self, rq: RqId, se: SeId) {
        if !self.has_vprot() {
            let s = &mut self.ses[se as usize];
            s.vlag = s.deadline;
            return;
        }
        let quantum = if self.p.run_to_parity {
            self.cfs_rq_min_slice(rq)
        } else {
            self.p.sched_base_slice_ns.unwrap_or(self.p.eevdf_kernel.base_slice_ns())
        };
        let s = &self.ses[se as usize];
        let slice = quantum.min(s.slice);
        let mut vprot = s.deadline;
        if slice != s.slice {
            let until = s.vruntime.wrapping_add(calc_delta_fair(slice, s.weight, s.inv()));
            if (until.wrapping_sub(vprot) as i64) < 0 {
                vprot = until;
            }
        }
        self.ses[se as usize].vlag = vprot;
    }

    /// `update_protect_slice` (6.18): a queued shorter slice cuts the running entity's protection
    /// to that slice from now.
    fn update_protect_slice(&mut self, rq: RqId, se: SeId) {
        let slice = self.cfs_rq_min_slice(rq);
        let s = &self.ses[se as usize];
        let until = s.vruntime.wrapping_add(calc_delta_fair(slice, s.weight, s.inv()));
        if (until.wrapping_sub(s.vlag) as i64) < 0 {
            self.ses[se as usize].vlag = until;
        }
    }

    /// `cfs_rq_min_slice`: the shortest slice of the running entity (when queued) and the queued
    /// ones; `u64::MAX` on an empty runqueue. With no task of its own slice every entity asks for
    /// the base slice; otherwise a group entity asks for the shortest slice below it (fair.rs
    /// `set_group_slices_upward`).
    pub(crate) fn cfs_rq_min_slice(&self, rq: RqId) -> u64 {
        let r = &self.rqs[rq as usize];
        let curr = r.curr.filter(|&c| self.ses[c as usize].on_rq);
        if curr.is_none() && r.timeline.is_empty() {
            return u64::MAX;
        }
        if !self.any_custom_slice {
            return self.base_slice_ns;
        }
        curr.into_iter()
            .chain(r.timeline.iter().copied())
            .map(|e| self.ses[e as usize].slice)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// The tail of 6.18's `update_curr`: with others queued, the running entity is rescheduled once
    /// its protected period is over, eligible or not ("Always trigger resched at the end of a
    /// protected period", 6.17).
    pub(crate) fn resched_unprotected(&mut self, rq: RqId, curr: SeId) {
        if self.rqs[rq as usize].nr_running <= 1 || self.protect_slice(curr) {
            return;
        }
        let cpu = self.rqs[rq as usize].cpu;
        self.resched[cpu.idx()] = true;
        self.clear_buddies(rq, curr);
    }

    /// The tail of 6.12's `update_curr`: with others queued, a running entity whose protection has
    /// ended (or was cancelled) is rescheduled as soon as it is no longer eligible
    /// (`did_preempt_short`).
    pub(crate) fn did_preempt_short(&mut self, rq: RqId, curr: SeId) {
        if !self.f612.preempt_short || self.rqs[rq as usize].nr_running <= 1 {
            return;
        }
        if self.protect_slice(curr) || self.entity_eligible(rq, curr) {
            return;
        }
        let cpu = self.rqs[rq as usize].cpu;
        self.resched[cpu.idx()] = true;
        self.clear_buddies(rq, curr);
    }

    /// `do_preempt_short` (6.12): the wakee asks for a shorter slice and should run first.
    fn do_preempt_short(&self, rq: RqId, pse: SeId, se: SeId) -> bool {
        if !self.f612.preempt_short {
            return false;
        }
        let (p, s) = (&self.ses[pse as usize], &self.ses[se as usize]);
        if p.slice >= s.slice || !self.entity_eligible(rq, pse) {
            return false;
        }
        (p.deadline.wrapping_sub(s.deadline) as i64) < 0 || !self.entity_eligible(rq, se)
    }

    /// 6.12 DELAY_DEQUEUE, at `dequeue_entity(DEQUEUE_SLEEP)` of a task: an ineligible task stays
    /// queued (`set_delayed`) and the dequeue stops there. Returns whether it was delayed.
    pub(crate) fn try_delay_dequeue(&mut self, t: TaskId, now: Ns) -> bool {
        if !self.f612.delay_dequeue {
            return false;
        }
        let se = self.task_se[t.idx()];
        let rq = self.ses[se as usize].cfs_rq;
        self.update_curr(rq, now);
        self.clear_buddies(rq, se);
        if self.entity_eligible(rq, se) {
            return false;
        }
        self.ses[se as usize].sched_delayed = true;
        self.nr_running_total -= 1;
        self.nr_delayed += 1;
        true
    }

    /// The dequeue a delayed task finishes when it is picked, or before it moves
    /// (`dequeue_entities(DEQUEUE_SLEEP | DEQUEUE_DELAYED)` and `finish_delayed_dequeue_entity`).
    pub(crate) fn finish_delayed_dequeue(&mut self, cpu: CpuId, t: TaskId, now: Ns) {
        self.pelt_before_dequeue(cpu, t, now);
        // dequeue_task counts the task out of nr_running_total, which the delay already did.
        self.nr_running_total += 1;
        self.dequeue_task(t, true, now);
        self.count_out(cpu, t);
        let se = self.task_se[t.idx()];
        let s = &mut self.ses[se as usize];
        s.sched_delayed = false;
        self.nr_delayed -= 1;
        if self.f612.delay_zero && (s.vlag as i64) > 0 {
            s.vlag = 0;
        }
    }

    /// `requeue_delayed_entity` (6.12), when a delayed task wakes on the CPU it is still queued on
    /// (`ttwu_runnable`): with DELAY_ZERO a positive lag is dropped and the task placed again.
    pub(crate) fn requeue_delayed(&mut self, t: TaskId, now: Ns) {
        let se = self.task_se[t.idx()];
        let rq = self.ses[se as usize].cfs_rq;
        self.update_curr(rq, now);
        if self.f612.delay_zero {
            self.update_entity_lag(rq, se);
            if (self.ses[se as usize].vlag as i64) > 0 {
                // Out of the tree and its sums while placed (`cfs_rq->nr_running--` around it).
                let in_tree = self.rqs[rq as usize].curr != Some(se);
                if in_tree {
                    self.tree_remove(rq, se);
                }
                self.rqs[rq as usize].nr_running -= 1;
                self.ses[se as usize].vlag = 0;
                self.place_entity_eevdf(rq, se, false);
                self.rqs[rq as usize].nr_running += 1;
                if in_tree {
                    self.tree_insert(rq, se);
                }
            }
        }
        let cpu = self.rqs[rq as usize].cpu;
        self.pelt_before_dequeue(cpu, t, now); // update_load_avg(cfs_rq, se, 0)
        self.ses[se as usize].sched_delayed = false;
        self.nr_delayed -= 1;
        self.nr_running_total += 1;
    }

    /// Whether task `t` is queued with a delayed dequeue (tests and reports).
    pub fn is_delayed(&self, t: TaskId) -> bool {
        self.task_se.get(t.idx()).is_some_and(|&se| self.ses[se as usize].sched_delayed)
    }

    /// Lag of task `t` as last saved (tests and reports).
    pub fn lag_of(&self, t: TaskId) -> i64 {
        self.ses[self.task_se[t.idx()] as usize].vlag as i64
    }

    /// Virtual deadline of task `t`.
    pub fn deadline_of(&self, t: TaskId) -> u64 {
        self.ses[self.task_se[t.idx()] as usize].deadline
    }

    /// V of the root runqueue of `t`'s CPU (tests).
    pub fn avg_vruntime_of_task_rq(&self, t: TaskId) -> u64 {
        self.avg_vruntime(self.ses[self.task_se[t.idx()] as usize].cfs_rq)
    }

    /// Whether `t` is eligible on its runqueue (tests).
    pub fn is_eligible(&self, t: TaskId) -> bool {
        let se = self.task_se[t.idx()];
        self.entity_eligible(self.ses[se as usize].cfs_rq, se)
    }
}

/// One second in ns (for parameter ranges).
pub(crate) const MAX_SLICE_NS: Ns = NSEC_PER_SEC;

/// The shortest custom slice 6.12 accepts (`NSEC_PER_MSEC/10`, "HZ=1000 * 10"; `__setparam_fair`).
pub(crate) const MIN_CUSTOM_SLICE_NS: Ns = 100_000;

/// The longest custom slice 6.12 accepts (`NSEC_PER_MSEC*100`, "HZ=100 / 10").
pub(crate) const MAX_CUSTOM_SLICE_NS: Ns = 100_000_000;
