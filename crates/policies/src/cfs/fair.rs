//! Scheduling entities, CFS runqueues and the per-runqueue mechanics of Linux 2.6.38
//! kernel/sched_fair.c: `update_curr`, `place_entity`, `enqueue_entity`/`dequeue_entity`,
//! `pick_next_entity` with buddies, `put_prev_entity`, `check_preempt_tick`, `check_preempt_wakeup`,
//! `sched_slice`; group shares are in [`super::shares`].

use super::math::{calc_delta_fair, calc_delta_mine, inv_weight_of};
use super::timeline;
use super::Cfs;
use schedlab_core::weights::{nice_to_weight, nice_to_wmult, NICE_0_LOAD, WEIGHT_IDLEPRIO};
use schedlab_core::{CpuId, Ctx, Ns, SchedClass, TaskId};

/// Index of a scheduling entity.
pub type SeId = u32;
/// Index of a CFS runqueue: `group * ncpus + cpu`.
pub type RqId = u32;
/// "Not in a timeline".
pub const NO_POS: u32 = u32::MAX;
/// `WMULT_IDLEPRIO`: the inverse weight of SCHED_IDLE's weight 3.
const WMULT_IDLEPRIO: u64 = 1431655765;

/// `struct sched_entity`: a task, or a task group on one CPU.
#[derive(Clone, Debug)]
pub struct Se {
    /// `load.weight`.
    pub weight: u64,
    /// `load.inv_weight` (precomputed for tasks, on demand for groups).
    pub inv_weight: u64,
    /// Virtual run time (absolute while queued; relative to `min_vruntime` while migrating/waking).
    pub vruntime: u64,
    /// When the entity last started running or was last accounted (`exec_start`).
    pub exec_start: Ns,
    /// `sum_exec_runtime`.
    pub sum_exec: Ns,
    /// `prev_sum_exec_runtime`: `sum_exec` when it was last picked.
    pub prev_sum_exec: Ns,
    /// Queued on (or running from) `cfs_rq`.
    pub on_rq: bool,
    /// The runqueue it belongs to.
    pub cfs_rq: RqId,
    /// For a group entity: the runqueue it owns.
    pub my_q: Option<RqId>,
    /// The group entity above it (`parent_entity`), `None` at the root.
    pub parent: Option<SeId>,
    /// Depth in the group hierarchy (0 on a root runqueue).
    pub depth: u32,
    /// Position in its timeline, or [`NO_POS`].
    pub pos: u32,
    /// Tie-break for equal vruntimes: later insertions go right.
    pub tree_seq: u64,
    /// When it was last added to its runqueue's task list (the balancer walks newest first).
    pub list_seq: u64,
    /// The task, for task entities.
    pub task: Option<TaskId>,
    /// EEVDF: virtual deadline.
    pub deadline: u64,
    /// EEVDF: lag at the last dequeue (signed, stored as wrapping u64); while running, a copy of the
    /// deadline at pick time (6.6's RUN_TO_PARITY marker).
    pub vlag: u64,
    /// EEVDF: the request size, ns (`sysctl_sched_base_slice`).
    pub slice: u64,
    /// EEVDF 6.12: the task's own slice (`custom_slice`, from `sched_attr.sched_runtime`), used
    /// instead of the base slice; `None`: the base slice.
    pub custom_slice: Option<u64>,
    /// EEVDF 6.12: a task that slept while ineligible and is still queued (DELAY_DEQUEUE).
    pub sched_delayed: bool,
    /// EEVDF 6.12: `deadline` holds deadline - vruntime (PLACE_REL_DEADLINE, set by a non-sleep
    /// dequeue and used by the next placement).
    pub rel_deadline: bool,
}

impl Se {
    pub(crate) fn new(cfs_rq: RqId) -> Se {
        Se {
            weight: NICE_0_LOAD,
            inv_weight: 0,
            vruntime: 0,
            exec_start: 0,
            sum_exec: 0,
            prev_sum_exec: 0,
            on_rq: false,
            cfs_rq,
            my_q: None,
            parent: None,
            depth: 0,
            pos: NO_POS,
            tree_seq: 0,
            list_seq: 0,
            task: None,
            deadline: 0,
            vlag: 0,
            slice: 0,
            custom_slice: None,
            sched_delayed: false,
            rel_deadline: false,
        }
    }

    /// The inverse weight to use in `calc_delta_fair`.
    #[inline]
    pub fn inv(&self) -> u64 {
        if self.inv_weight != 0 {
            self.inv_weight
        } else {
            inv_weight_of(self.weight)
        }
    }
}

/// `struct cfs_rq`.
#[derive(Clone, Debug)]
pub struct CfsRq {
    /// `load.weight`: sum of the weights of its queued entities (the running one included).
    pub load: u64,
    /// `load.inv_weight`: `inv_weight_of(load)` once computed, 0 after `load` changed (as in the
    /// kernel, which recomputes it lazily): a division per change instead of per `sched_slice`.
    pub inv_load: std::cell::Cell<u64>,
    /// `nr_running`: entities queued (running one included).
    pub nr_running: u32,
    /// `min_vruntime`: monotonic floor of the entities' vruntimes.
    pub min_vruntime: u64,
    /// The timeline of queued entities, without `curr`.
    pub timeline: Vec<SeId>,
    /// The entity running from this runqueue.
    pub curr: Option<SeId>,
    /// Next buddy.
    pub next: Option<SeId>,
    /// Last buddy.
    pub last: Option<SeId>,
    /// The CPU.
    pub cpu: CpuId,
    /// The task group.
    pub group: u32,
    /// Sum of the weights of the *task* entities queued here (`task_weight`).
    pub task_weight: u64,
    /// `h_load`, refreshed by the balancer.
    pub h_load: u64,
    /// EEVDF: sum over the timeline's entities of (vruntime - min_vruntime) x weight.
    pub avg_vruntime: i64,
    /// EEVDF: sum of the timeline's entities' weights.
    pub avg_load: u64,
    /// EEVDF: the root of the timeline's deadline-augmented tree ([`super::deadline_tree`]).
    pub dl_root: u32,
    /// `load_avg`: load x ns accumulated over the current shares window ([`super::shares`]).
    pub load_avg: u64,
    /// `load_period`: ns covered by `load_avg`.
    pub load_period: u64,
    /// `load_stamp`: when `load_avg` was last updated.
    pub load_stamp: Ns,
    /// `load_last`: when it was last updated with load on the runqueue.
    pub load_last: Ns,
    /// `load_unacc_exec_time`: run time since the last update.
    pub load_unacc_exec_time: Ns,
    /// `load_contribution`: this runqueue's part of its group's `load_weight`.
    pub load_contribution: u64,
    /// `on_list`: on its CPU's leaf runqueue list.
    pub on_list: bool,
}

impl CfsRq {
    /// `inv_weight_of(load)`, computed at the first use after a change of `load`.
    #[inline]
    pub fn inv_weight(&self) -> u64 {
        match self.inv_load.get() {
            0 => {
                let inv = inv_weight_of(self.load);
                self.inv_load.set(inv);
                inv
            }
            inv => inv,
        }
    }

    /// An empty runqueue for `group` on `cpu`.
    pub fn new(group: u32, cpu: CpuId) -> CfsRq {
        CfsRq {
            load: 0,
            inv_load: std::cell::Cell::new(0),
            nr_running: 0,
            // The kernel starts min_vruntime at (u64)(-(1LL << 20)) so wrap-around is exercised early.
            min_vruntime: (-(1i64 << 20)) as u64,
            timeline: Vec::new(),
            dl_root: super::deadline_tree::NIL,
            curr: None,
            next: None,
            last: None,
            cpu,
            group,
            task_weight: 0,
            h_load: 0,
            avg_vruntime: 0,
            avg_load: 0,
            load_avg: 0,
            load_period: 0,
            load_stamp: 0,
            load_last: 0,
            load_unacc_exec_time: 0,
            load_contribution: 0,
            on_list: false,
        }
    }
}

#[inline]
fn max_vruntime(a: u64, b: u64) -> u64 {
    if (b.wrapping_sub(a) as i64) > 0 {
        b
    } else {
        a
    }
}

/// `div_s64`: a signed division truncating towards zero, as a wrapping `u64`.
fn div_s64(num: i128, den: u64) -> u64 {
    (num / den.max(1) as i128) as i64 as u64
}

#[inline]
fn min_vruntime(a: u64, b: u64) -> u64 {
    if (b.wrapping_sub(a) as i64) < 0 {
        b
    } else {
        a
    }
}

/// Weight and inverse weight of a task (`set_load_weight`).
pub fn task_load(class: SchedClass, nice: i8) -> (u64, u64) {
    if class == SchedClass::Idle {
        (WEIGHT_IDLEPRIO, WMULT_IDLEPRIO)
    } else {
        (nice_to_weight(nice), nice_to_wmult(nice))
    }
}

impl Cfs {
    /// The runqueue of `group` on `cpu`.
    #[inline]
    pub(crate) fn rq_id(&self, group: u32, cpu: CpuId) -> RqId {
        (group as usize * self.ncpus + cpu.idx()) as RqId
    }

    /// The root runqueue of `cpu` (`rq->cfs`).
    #[inline]
    pub(crate) fn root(&self, cpu: CpuId) -> RqId {
        cpu.idx() as RqId
    }

    /// `weighted_cpuload(cpu)`: the root runqueue's load (2.6.38), its `runnable_load_avg` with
    /// `load_tracking=4.9`, or its PELT average at `now` (`cpu_load` of 6.6) in the EEVDF variant.
    #[inline]
    pub(crate) fn weighted_cpuload(&self, cpu: CpuId, now: Ns) -> u64 {
        if self.eevdf {
            return self.pelt_cpu_load(cpu, now);
        }
        if self.load49() {
            return self.l49_cpu_load(cpu);
        }
        self.rqs[cpu.idx()].load
    }

    /// Creates the group entities and runqueues (called once from `init`).
    pub(crate) fn build_groups(&mut self, ctx: &Ctx) {
        self.ngroups = 0;
        self.group_parent.clear();
        self.group_shares.clear();
        self.group_load.clear();
        self.tg_load_weight.clear();
        self.group_se.clear();
        self.leaf = vec![Vec::new(); self.ncpus];
        for g in ctx.groups {
            self.add_group(g.parent.map(|p| p.0), g.shares);
        }
    }

    /// Adds the next group: its runqueue on every CPU (`init_cfs_rq`) and, below the root, its
    /// entity on every CPU in the parent's runqueue there (`init_tg_cfs_entry`), with the group's
    /// shares as weight. Runqueues are numbered group by group, so earlier ids stay valid.
    pub(crate) fn add_group(&mut self, parent: Option<u32>, shares: u64) {
        let g = self.ngroups as u32;
        self.ngroups += 1;
        self.group_parent.push(parent);
        self.group_shares.push(shares);
        self.group_load.push(0);
        self.tg_load_weight.push(0);
        for c in 0..self.ncpus {
            self.rqs.push(CfsRq::new(g, CpuId(c as u32)));
        }
        self.group_se.extend(std::iter::repeat_n(u32::MAX, self.ncpus));
        if g == 0 {
            return;
        }
        let parent = parent.unwrap_or(0);
        for c in 0..self.ncpus as u32 {
            let cpu = CpuId(c);
            let mut se = Se::new(self.rq_id(parent, cpu));
            se.my_q = Some(self.rq_id(g, cpu));
            se.weight = shares;
            se.parent = (parent != 0).then(|| self.group_se[(parent as usize) * self.ncpus + c as usize]);
            se.depth = se.parent.map_or(0, |p| self.ses[p as usize].depth + 1);
            let id = self.ses.len() as SeId;
            self.ses.push(se);
            self.group_se[g as usize * self.ncpus + c as usize] = id;
        }
    }

    /// Creates the entity of a new task.
    pub(crate) fn new_task_se(&mut self, ctx: &Ctx, t: TaskId) -> SeId {
        let info = ctx.task(t);
        let mut se = Se::new(0);
        (se.weight, se.inv_weight) = task_load(info.class, info.nice);
        se.task = Some(t);
        if self.eevdf && self.p.eevdf_kernel >= super::EevdfKernel::V6_12 {
            // `__setparam_fair` (6.12 kernel/sched/syscalls.c): a nonzero sched_runtime becomes the
            // task's slice, clamped to 0.1-100 ms. Linux 6.6 ignores it for fair tasks.
            se.custom_slice = info
                .slice_ns
                .map(|ns| ns.clamp(super::eevdf::MIN_CUSTOM_SLICE_NS, super::eevdf::MAX_CUSTOM_SLICE_NS));
            self.any_custom_slice |= se.custom_slice.is_some();
        }
        let id = self.ses.len() as SeId;
        self.ses.push(se);
        if self.task_se.len() <= t.idx() {
            self.task_se.resize(t.idx() + 1, u32::MAX);
            self.premoved.resize(t.idx() + 1, false);
        }
        self.task_se[t.idx()] = id;
        self.set_task_rq(t, info.cpu, info.group.0);
        id
    }

    /// `set_task_rq`: points the task's entity at its group's runqueue on `cpu`.
    pub(crate) fn set_task_rq(&mut self, t: TaskId, cpu: CpuId, group: u32) {
        let id = self.task_se[t.idx()];
        let rq = self.rq_id(group, cpu);
        let parent = (group != 0).then(|| self.group_se[group as usize * self.ncpus + cpu.idx()]);
        let depth = parent.map_or(0, |p| self.ses[p as usize].depth + 1);
        let se = &mut self.ses[id as usize];
        se.cfs_rq = rq;
        se.parent = parent;
        se.depth = depth;
    }

    // ------------------------------------------------------------------------------------------
    // Time
    // ------------------------------------------------------------------------------------------

    /// `update_curr`: charges the running entity of `rq` for the time since `exec_start`.
    pub(crate) fn update_curr(&mut self, rq: RqId, now: Ns) {
        let Some(curr) = self.rqs[rq as usize].curr else { return };
        let se = &mut self.ses[curr as usize];
        let delta_exec = now.saturating_sub(se.exec_start);
        if delta_exec == 0 {
            return;
        }
        se.sum_exec += delta_exec;
        se.vruntime = se.vruntime.wrapping_add(calc_delta_fair(delta_exec, se.weight, se.inv()));
        se.exec_start = now;
        self.rqs[rq as usize].load_unacc_exec_time += delta_exec;
        if self.eevdf {
            self.update_deadline(rq, curr);
            if self.has_vprot() {
                self.resched_unprotected(rq, curr);
            } else {
                self.did_preempt_short(rq, curr);
            }
        }
        self.update_min_vruntime(rq);
    }

    /// `update_min_vruntime`.
    pub(crate) fn update_min_vruntime(&mut self, rq: RqId) {
        let r = &self.rqs[rq as usize];
        let mut v = r.min_vruntime;
        // 6.6 ignores a `curr` that is no longer queued; 2.6.38 uses it regardless.
        let curr = r.curr.filter(|&c| !self.eevdf || self.ses[c as usize].on_rq);
        if let Some(c) = curr {
            v = self.ses[c as usize].vruntime;
        }
        if let Some(left) = timeline::first(&r.timeline) {
            let lv = self.ses[left as usize].vruntime;
            v = if curr.is_none() { lv } else { min_vruntime(v, lv) };
        }
        let r = &mut self.rqs[rq as usize];
        let new = max_vruntime(r.min_vruntime, v);
        // avg_vruntime is kept relative to min_vruntime (`avg_vruntime_update`).
        let delta = new.wrapping_sub(r.min_vruntime) as i64;
        r.avg_vruntime = r.avg_vruntime.wrapping_sub((r.avg_load as i64).wrapping_mul(delta));
        r.min_vruntime = new;
    }

    /// `__sched_period(nr_running)`.
    pub(crate) fn sched_period(&self, nr_running: u64) -> u64 {
        if nr_running > self.nr_latency {
            self.min_gran_ns * nr_running
        } else {
            self.latency_ns
        }
    }

    /// `sched_slice(cfs_rq, se)`: the entity's share of the period, through every level.
    pub(crate) fn sched_slice(&self, se: SeId) -> u64 {
        let s = &self.ses[se as usize];
        let rq = &self.rqs[s.cfs_rq as usize];
        let mut slice = self.sched_period(rq.nr_running as u64 + u64::from(!s.on_rq));
        let mut cur = Some(se);
        while let Some(id) = cur {
            let e = &self.ses[id as usize];
            let r = &self.rqs[e.cfs_rq as usize];
            let inv = if e.on_rq { r.inv_weight() } else { inv_weight_of(r.load + e.weight) };
            slice = calc_delta_mine(slice, e.weight, inv);
            cur = e.parent;
        }
        slice
    }

    /// `sched_vslice`: the slice in virtual time.
    pub(crate) fn sched_vslice(&self, se: SeId) -> u64 {
        let s = &self.ses[se as usize];
        calc_delta_fair(self.sched_slice(se), s.weight, s.inv())
    }

    /// `place_entity(cfs_rq, se, initial)`.
    pub(crate) fn place_entity(&mut self, rq: RqId, se: SeId, initial: bool) {
        let mut v = self.rqs[rq as usize].min_vruntime;
        if initial && self.p.start_debit {
            v = v.wrapping_add(self.sched_vslice(se));
        }
        if !initial {
            let mut thresh = self.latency_ns;
            if self.p.gentle_fair_sleepers {
                thresh >>= 1;
            }
            v = v.wrapping_sub(thresh);
        }
        let s = &mut self.ses[se as usize];
        s.vruntime = max_vruntime(s.vruntime, v);
    }

    // ------------------------------------------------------------------------------------------
    // Enqueue / dequeue
    // ------------------------------------------------------------------------------------------

    pub(crate) fn account_enqueue(&mut self, rq: RqId, se: SeId) {
        let (w, is_task) = (self.ses[se as usize].weight, self.ses[se as usize].task.is_some());
        let r = &mut self.rqs[rq as usize];
        r.load += w;
        r.inv_load.set(0);
        r.nr_running += 1;
        let group = r.group;
        if is_task {
            r.task_weight += w;
            self.seq += 1;
            self.ses[se as usize].list_seq = self.seq;
        }
        self.group_load[group as usize] += w;
    }

    pub(crate) fn account_dequeue(&mut self, rq: RqId, se: SeId) {
        let (w, is_task) = (self.ses[se as usize].weight, self.ses[se as usize].task.is_some());
        let r = &mut self.rqs[rq as usize];
        r.load -= w;
        r.inv_load.set(0);
        r.nr_running -= 1;
        if is_task {
            r.task_weight -= w;
        }
        let group = r.group;
        self.group_load[group as usize] -= w;
    }

    /// `__enqueue_entity` (with 6.6's `avg_vruntime_add`).
    pub(crate) fn tree_insert(&mut self, rq: RqId, se: SeId) {
        self.seq += 1;
        self.ses[se as usize].tree_seq = self.seq;
        self.avg_add(rq, se, 1);
        let heap = &mut self.rqs[rq as usize].timeline;
        timeline::insert(heap, &mut self.ses, se);
        if self.eevdf {
            let r = &mut self.rqs[rq as usize];
            r.dl_root = self.dl_tree.insert(&self.ses, r.dl_root, se);
        }
    }

    /// `__dequeue_entity` (with 6.6's `avg_vruntime_sub`).
    pub(crate) fn tree_remove(&mut self, rq: RqId, se: SeId) {
        self.avg_add(rq, se, -1);
        let heap = &mut self.rqs[rq as usize].timeline;
        timeline::remove(heap, &mut self.ses, se);
        if self.eevdf {
            let r = &mut self.rqs[rq as usize];
            r.dl_root = self.dl_tree.remove(&self.ses, r.dl_root, se);
        }
    }

    /// Adds (`sign` 1) or removes (-1) an entity's share of the weighted vruntime average.
    fn avg_add(&mut self, rq: RqId, se: SeId, sign: i64) {
        let s = &self.ses[se as usize];
        let r = &mut self.rqs[rq as usize];
        let key = s.vruntime.wrapping_sub(r.min_vruntime) as i64;
        r.avg_vruntime = r.avg_vruntime.wrapping_add(sign.wrapping_mul(key.wrapping_mul(s.weight as i64)));
        r.avg_load = r.avg_load.wrapping_add_signed(sign * s.weight as i64);
    }

    /// `enqueue_entity` (2.6.38). `wakeup` = ENQUEUE_WAKEUP, `waking` = ENQUEUE_WAKING (vruntime is
    /// relative).
    pub(crate) fn enqueue_entity(&mut self, rq: RqId, se: SeId, wakeup: bool, waking: bool, now: Ns) {
        if self.eevdf {
            return self.enqueue_entity_eevdf(rq, se, waking && !wakeup, now);
        }
        if !wakeup || waking {
            let mv = self.rqs[rq as usize].min_vruntime;
            let s = &mut self.ses[se as usize];
            s.vruntime = s.vruntime.wrapping_add(mv);
        }
        self.update_curr(rq, now);
        self.update_cfs_load(rq, false, now);
        let weight = self.ses[se as usize].weight;
        self.update_cfs_shares(rq, weight, now);
        self.account_enqueue(rq, se);
        if wakeup {
            self.place_entity(rq, se, false);
        }
        if self.rqs[rq as usize].curr != Some(se) {
            self.tree_insert(rq, se);
        }
        self.ses[se as usize].on_rq = true;
        if self.rqs[rq as usize].nr_running == 1 {
            self.list_add_leaf_cfs_rq(rq);
        }
    }

    /// `dequeue_entity` (2.6.38). `sleep` = DEQUEUE_SLEEP (otherwise vruntime becomes relative).
    pub(crate) fn dequeue_entity(&mut self, rq: RqId, se: SeId, sleep: bool, now: Ns) {
        if self.eevdf {
            return self.dequeue_entity_eevdf(rq, se, sleep, now);
        }
        self.update_curr(rq, now);
        self.clear_buddies(rq, se);
        if self.rqs[rq as usize].curr != Some(se) {
            self.tree_remove(rq, se);
        }
        self.ses[se as usize].on_rq = false;
        self.update_cfs_load(rq, false, now);
        self.account_dequeue(rq, se);
        self.update_min_vruntime(rq);
        self.update_cfs_shares(rq, 0, now);
        if !sleep {
            let mv = self.rqs[rq as usize].min_vruntime;
            let s = &mut self.ses[se as usize];
            s.vruntime = s.vruntime.wrapping_sub(mv);
        }
    }

    /// `enqueue_task_fair`: enqueues the task's entity and every group entity above it that is not
    /// queued yet (those with ENQUEUE_WAKEUP); then, from the first entity found queued, every level's
    /// load and shares are brought up to date (2.6.38's second loop).
    pub(crate) fn enqueue_task(&mut self, t: TaskId, wakeup: bool, waking: bool, now: Ns) {
        let mut cur = Some(self.task_se[t.idx()]);
        let (mut wakeup, mut waking) = (wakeup, waking);
        // 6.12: each group entity asks for the shortest slice queued below it.
        let group_slices = self.is_612() && self.any_custom_slice;
        let mut slice = None;
        while let Some(se) = cur {
            if self.ses[se as usize].on_rq {
                break;
            }
            if let Some(sl) = slice {
                self.ses[se as usize].custom_slice = Some(sl);
            }
            let rq = self.ses[se as usize].cfs_rq;
            self.enqueue_entity(rq, se, wakeup, waking, now);
            if group_slices {
                slice = Some(self.cfs_rq_min_slice(rq));
            }
            wakeup = true;
            waking = false;
            cur = self.ses[se as usize].parent;
        }
        if let Some(sl) = slice {
            self.set_group_slices_upward(cur, sl);
        }
        if self.eevdf {
            self.update_cfs_groups_upward(cur, now);
        } else {
            self.update_shares_upward(cur, now);
        }
        self.nr_running_total += 1;
    }

    /// The second loops of 6.12's `enqueue_task_fair` and `dequeue_entities`: from `cur`, a group
    /// entity that stayed queued, upward, each takes the shortest slice of the runqueue below it
    /// (`se->slice = slice; slice = cfs_rq_min_slice(cfs_rq)`).
    fn set_group_slices_upward(&mut self, mut cur: Option<SeId>, mut slice: u64) {
        while let Some(se) = cur {
            let s = &mut self.ses[se as usize];
            s.slice = slice;
            s.custom_slice = Some(slice);
            let rq = s.cfs_rq;
            slice = self.cfs_rq_min_slice(rq);
            cur = self.ses[se as usize].parent;
        }
    }

    /// `dequeue_task_fair`: dequeues the task's entity and every group entity left empty; then, from
    /// the last entity dequeued (whose runqueue kept load) upward, every level's load and shares are
    /// brought up to date (2.6.38's second loop).
    pub(crate) fn dequeue_task(&mut self, t: TaskId, sleep: bool, now: Ns) {
        let mut cur = Some(self.task_se[t.idx()]);
        let mut sleep = sleep;
        while let Some(se) = cur {
            let rq = self.ses[se as usize].cfs_rq;
            self.dequeue_entity(rq, se, sleep, now);
            if self.rqs[rq as usize].load != 0 {
                if self.is_612() && self.any_custom_slice {
                    let slice = self.cfs_rq_min_slice(rq);
                    self.set_group_slices_upward(self.ses[se as usize].parent, slice);
                }
                break;
            }
            sleep = true;
            cur = self.ses[se as usize].parent;
        }
        if self.eevdf {
            // 6.6 starts the second loop above the entity whose runqueue kept load.
            let above = cur.and_then(|se| self.ses[se as usize].parent);
            self.update_cfs_groups_upward(above, now);
        } else {
            self.update_shares_upward(cur, now);
        }
        self.nr_running_total -= 1;
    }

    /// The second `for_each_sched_entity` loop of `enqueue_task_fair` / `dequeue_task_fair`:
    /// `update_cfs_load` and `update_cfs_shares` on the runqueue of `se` and of each ancestor.
    fn update_shares_upward(&mut self, mut cur: Option<SeId>, now: Ns) {
        while let Some(se) = cur {
            let rq = self.ses[se as usize].cfs_rq;
            if self.rqs[rq as usize].group == 0 {
                break; // the root runqueue: both updates return at once
            }
            self.update_cfs_load(rq, false, now);
            self.update_cfs_shares(rq, 0, now);
            cur = self.ses[se as usize].parent;
        }
    }

    /// `reweight_entity`.
    pub(crate) fn reweight_entity(&mut self, se: SeId, weight: u64, now: Ns) {
        let s = &self.ses[se as usize];
        if s.weight == weight {
            return;
        }
        let (rq, on_rq, in_tree) = (s.cfs_rq, s.on_rq, s.pos != NO_POS);
        if on_rq {
            if self.rqs[rq as usize].curr == Some(se) {
                self.update_curr(rq, now);
            }
            self.account_dequeue(rq, se);
        }
        if in_tree {
            self.avg_add(rq, se, -1);
            if self.eevdf {
                let r = &mut self.rqs[rq as usize];
                r.dl_root = self.dl_tree.remove(&self.ses, r.dl_root, se);
            }
        }
        let old_weight = self.ses[se as usize].weight;
        let s = &mut self.ses[se as usize];
        s.weight = weight;
        s.inv_weight = 0;
        if self.eevdf {
            // reweight_entity (6.6.0): lag is kept as V - v, so a sleeping entity's is scaled by
            // old/new weight; a queued entity's relative virtual deadline likewise.
            if !on_rq {
                s.vlag = div_s64((s.vlag as i64) as i128 * old_weight as i128, weight);
                if s.rel_deadline {
                    // 6.12.y and 6.18: a deadline kept relative by PLACE_REL_DEADLINE scales too.
                    s.deadline = div_s64((s.deadline as i64) as i128 * old_weight as i128, weight);
                }
            } else {
                let rel = s.deadline.wrapping_sub(s.vruntime) as i64;
                let rel = div_s64(rel as i128 * old_weight as i128, weight);
                s.deadline = s.vruntime.wrapping_add(rel);
            }
        }
        if in_tree {
            self.avg_add(rq, se, 1);
            if self.eevdf {
                let r = &mut self.rqs[rq as usize];
                r.dl_root = self.dl_tree.insert(&self.ses, r.dl_root, se);
            }
        }
        if on_rq {
            self.account_enqueue(rq, se);
        }
    }

    // ------------------------------------------------------------------------------------------
    // Buddies
    // ------------------------------------------------------------------------------------------

    /// `clear_buddies(cfs_rq, se)`: clears `last`/`next` up the hierarchy where they point at `se`.
    pub(crate) fn clear_buddies(&mut self, rq: RqId, se: SeId) {
        for which in [0, 1] {
            let mut rq = rq;
            let mut cur = Some(se);
            while let Some(id) = cur {
                let r = &mut self.rqs[rq as usize];
                let slot = if which == 0 { &mut r.last } else { &mut r.next };
                if *slot != Some(id) {
                    break;
                }
                *slot = None;
                cur = self.ses[id as usize].parent;
                if let Some(p) = cur {
                    rq = self.ses[p as usize].cfs_rq;
                }
            }
        }
    }

    /// `set_last_buddy` / `set_next_buddy` (not for SCHED_IDLE tasks).
    pub(crate) fn set_buddy(&mut self, ctx: &Ctx, se: SeId, last: bool) {
        if let Some(t) = self.ses[se as usize].task {
            if ctx.task(t).class == SchedClass::Idle {
                return;
            }
        }
        let mut cur = Some(se);
        while let Some(id) = cur {
            let rq = self.ses[id as usize].cfs_rq;
            let r = &mut self.rqs[rq as usize];
            if last {
                r.last = Some(id);
            } else {
                r.next = Some(id);
            }
            cur = self.ses[id as usize].parent;
        }
    }

    // ------------------------------------------------------------------------------------------
    // Pick / put
    // ------------------------------------------------------------------------------------------

    /// `wakeup_gran(curr, se)`: the wakeup granularity in `se`'s virtual time.
    fn wakeup_gran(&self, se: SeId) -> u64 {
        let s = &self.ses[se as usize];
        calc_delta_fair(self.wakeup_gran_ns, s.weight, s.inv())
    }

    /// `wakeup_preempt_entity(curr, se)`: -1 if `se` is not behind `curr`, 1 if behind by more than
    /// the wakeup granularity, 0 otherwise.
    pub(crate) fn wakeup_preempt_entity(&self, curr: SeId, se: SeId) -> i32 {
        let vdiff = self.ses[curr as usize].vruntime.wrapping_sub(self.ses[se as usize].vruntime) as i64;
        if vdiff <= 0 {
            return -1;
        }
        if vdiff > self.wakeup_gran(se) as i64 {
            1
        } else {
            0
        }
    }

    /// `pick_next_entity`: leftmost, or the next buddy, or the last buddy if not too far ahead.
    fn pick_next_entity(&mut self, rq: RqId) -> SeId {
        if self.eevdf {
            // 6.12 PICK_BUDDY (6.6: NEXT_BUDDY): an eligible `next` buddy first.
            let buddy = if self.is_612() { self.f612.pick_buddy } else { self.p.next_buddy };
            if let Some(n) = self.rqs[rq as usize].next.filter(|_| buddy) {
                if self.entity_eligible(rq, n) {
                    return n;
                }
            }
            return self.pick_eevdf(rq);
        }
        if self.avec.is_some() {
            if let Some(se) = self.pick_avec(rq) {
                self.clear_buddies(rq, se);
                return se;
            }
        }
        let r = &self.rqs[rq as usize];
        let left = timeline::first(&r.timeline).expect("pick from a non-empty runqueue");
        let mut se = left;
        self.nr_examined += 1;
        if let Some(n) = r.next {
            self.nr_examined += 1;
            if self.wakeup_preempt_entity(n, left) < 1 {
                se = n;
            }
        }
        if let Some(l) = r.last {
            self.nr_examined += 1;
            if self.wakeup_preempt_entity(l, left) < 1 {
                se = l;
            }
        }
        self.clear_buddies(rq, se);
        se
    }

    /// AVEC's pick among the `range` leftmost entities when they are all tasks (seed 004 sec. 3.4);
    /// `None` leaves the pick to CFS.
    fn pick_avec(&mut self, rq: RqId) -> Option<SeId> {
        let range = self.avec.as_ref()?.p.range;
        let mut cands = std::mem::take(&mut self.avec_scratch);
        timeline::leftmost(&self.rqs[rq as usize].timeline, &self.ses, range, &mut cands);
        self.nr_examined += cands.len() as u64;
        let tasks: Option<Vec<(TaskId, u64)>> = cands
            .iter()
            .map(|&se| self.ses[se as usize].task.map(|t| (t, self.ses[se as usize].vruntime)))
            .collect();
        let chosen = match tasks {
            Some(t) if t.len() >= 2 => {
                let i = self.avec.as_mut().expect("checked").choose(&t);
                Some(cands[i])
            }
            _ => None,
        };
        self.avec_scratch = cands;
        chosen
    }

    /// `set_next_entity`. `renew` is false when the pick returned the task that was running
    /// (`pick_next_task_fair` skips `set_next_entity` then, 6.6 and 6.12), so its slice protection
    /// is not renewed; the engine put it back in the tree, so it still leaves the tree here.
    fn set_next_entity(&mut self, rq: RqId, se: SeId, now: Ns, renew: bool) {
        if self.ses[se as usize].on_rq {
            self.tree_remove(rq, se);
            if self.eevdf && renew {
                self.set_protect_slice(rq, se);
            }
        }
        let s = &mut self.ses[se as usize];
        s.exec_start = now;
        if renew {
            s.prev_sum_exec = s.sum_exec;
        }
        self.rqs[rq as usize].curr = Some(se);
    }

    /// `pick_next_task_fair`: descends from the root runqueue of `cpu`.
    pub(crate) fn pick_next_task(&mut self, cpu: CpuId, now: Ns) -> Option<TaskId> {
        let prev = if self.eevdf { self.prev_runnable[cpu.idx()].take() } else { None };
        let mut path = std::mem::take(&mut self.scratch);
        // pick_task_fair: descend picking; a delayed task picked is dequeued for good and the
        // descent starts again from the root (6.12's `goto again`).
        let picked = 'again: loop {
            path.clear();
            let mut rq = self.root(cpu);
            if self.rqs[rq as usize].nr_running == 0 {
                break None;
            }
            loop {
                let se = self.pick_next_entity(rq);
                if self.ses[se as usize].sched_delayed {
                    let t = self.ses[se as usize].task.expect("only task entities are delayed");
                    self.finish_delayed_dequeue(cpu, t, now);
                    continue 'again;
                }
                path.push(se);
                match self.ses[se as usize].my_q {
                    Some(q) => rq = q,
                    None => break 'again self.ses[se as usize].task,
                }
            }
        };
        // pick_next_task_fair: set_next_entity down the path, unless the pick is the task that was
        // running (then the kernel leaves it as it was).
        let renew = picked.is_none() || picked != prev;
        for &se in &path {
            let rq = self.ses[se as usize].cfs_rq;
            self.set_next_entity(rq, se, now, renew);
        }
        self.scratch = path;
        picked
    }

    /// `set_next_task_fair`: the queued task `t` becomes its CPU's current task again, every level
    /// of its hierarchy included (after `put_prev_task` and a requeue, as `set_user_nice` does).
    pub(crate) fn set_next_task(&mut self, t: TaskId, now: Ns) {
        let mut cur = Some(self.task_se[t.idx()]);
        while let Some(se) = cur {
            let rq = self.ses[se as usize].cfs_rq;
            self.set_next_entity(rq, se, now, true);
            cur = self.ses[se as usize].parent;
        }
    }

    /// `put_prev_entity` for every level (`put_prev_task_fair`).
    pub(crate) fn put_prev_task(&mut self, t: TaskId, now: Ns) {
        let mut cur = Some(self.task_se[t.idx()]);
        while let Some(se) = cur {
            let rq = self.ses[se as usize].cfs_rq;
            if self.ses[se as usize].on_rq {
                self.update_curr(rq, now);
                self.tree_insert(rq, se);
            }
            self.rqs[rq as usize].curr = None;
            cur = self.ses[se as usize].parent;
        }
    }

    // ------------------------------------------------------------------------------------------
    // Preemption
    // ------------------------------------------------------------------------------------------

    /// `entity_tick` for every level (`task_tick_fair`). Returns whether to reschedule.
    pub(crate) fn task_tick(&mut self, t: TaskId, now: Ns) -> bool {
        let mut resched = false;
        let mut cur = Some(self.task_se[t.idx()]);
        while let Some(se) = cur {
            let rq = self.ses[se as usize].cfs_rq;
            self.update_curr(rq, now);
            if self.eevdf {
                self.update_cfs_shares(rq, 0, now);
            } else {
                self.update_entity_shares_tick(rq, now);
            }
            // EEVDF has no check_preempt_tick: update_curr's update_deadline asks for the resched.
            if !self.eevdf && (self.rqs[rq as usize].nr_running > 1 || !self.p.wakeup_preempt) {
                resched |= self.check_preempt_tick(rq, se);
            }
            cur = self.ses[se as usize].parent;
        }
        resched
    }

    /// `check_preempt_tick` (2.6.38 kernel/sched_fair.c): a reschedule once the entity has run its
    /// slice since it was picked, or, after at least `min_granularity`, when it is more than a slice
    /// ahead of the leftmost; an entity behind the leftmost (`delta < 0`) keeps the CPU.
    fn check_preempt_tick(&mut self, rq: RqId, curr: SeId) -> bool {
        let ideal_runtime = self.sched_slice(curr);
        let c = &self.ses[curr as usize];
        let delta_exec = c.sum_exec - c.prev_sum_exec;
        if delta_exec > ideal_runtime {
            self.clear_buddies(rq, curr);
            return true;
        }
        if !self.p.wakeup_preempt || delta_exec < self.min_gran_ns {
            return false;
        }
        if self.rqs[rq as usize].nr_running > 1 {
            let left = timeline::first(&self.rqs[rq as usize].timeline).expect("nr_running > 1");
            let delta =
                self.ses[curr as usize].vruntime.wrapping_sub(self.ses[left as usize].vruntime) as i64;
            if delta < 0 {
                return false;
            }
            if delta as u64 > ideal_runtime {
                return true;
            }
        }
        false
    }

    /// `find_matching_se`: walks both entities up to a common runqueue.
    pub(crate) fn find_matching_se(&self, mut se: SeId, mut pse: SeId) -> (SeId, SeId) {
        let depth = |x: SeId| self.ses[x as usize].depth;
        let parent = |x: SeId| self.ses[x as usize].parent.expect("deeper entity has a parent");
        while depth(se) > depth(pse) {
            se = parent(se);
        }
        while depth(pse) > depth(se) {
            pse = parent(pse);
        }
        while self.ses[se as usize].cfs_rq != self.ses[pse as usize].cfs_rq {
            se = parent(se);
            pse = parent(pse);
        }
        (se, pse)
    }

    /// `check_preempt_wakeup` (2.6.38 kernel/sched_fair.c). `fork` = WF_FORK. The engine does not ask
    /// while a reschedule is already pending (the kernel's `test_tsk_need_resched` return).
    pub(crate) fn check_preempt_wakeup(&mut self, ctx: &Ctx, curr: TaskId, p: TaskId, fork: bool) -> bool {
        let se = self.task_se[curr.idx()];
        let pse = self.task_se[p.idx()];
        if se == pse {
            return false;
        }
        let rq = self.ses[se as usize].cfs_rq;
        let scale = self.rqs[rq as usize].nr_running as u64 >= self.nr_latency;
        if self.p.next_buddy && scale && !fork {
            self.set_buddy(ctx, pse, false);
        }
        let (cc, pc) = (ctx.task(curr).class, ctx.task(p).class);
        // Batch and idle wakees do not preempt (`p->policy != SCHED_NORMAL`), even an idle-class
        // current task; then an idle current task is preempted by any normal one.
        if !pc.is_normal() {
            return false;
        }
        let preempt = if cc == SchedClass::Idle {
            true
        } else if !self.p.wakeup_preempt {
            false
        } else {
            self.update_curr(rq, ctx.now);
            let (se, pse) = self.find_matching_se(se, pse);
            if self.wakeup_preempt_entity(se, pse) == 1 {
                if self.p.last_buddy
                    && scale
                    && self.ses[se as usize].task.is_some()
                    && self.ses[se as usize].on_rq
                {
                    self.set_buddy(ctx, se, true);
                }
                true
            } else {
                false
            }
        };
        if preempt {
            self.nr_wakeup_preempt += 1;
        }
        preempt
    }
}
