//! # RSDL: the Rotating Staircase Deadline scheduler
//!
//! Source: Con Kolivas, *RSDL completely fair starvation free interactive cpu scheduler*, LKML
//! 2007-03-04, and the design document it added to Documentation/sched-design.txt in the 2.6.20
//! patch ("[RSDL 6/6] sched: document rsdl cpu scheduler"). RSDL is the successor of Kolivas's
//! staircase scheduler and the predecessor of SD and BFS; seed 002 sec. 7 names it among the
//! schedulers CFS was compared with. It is a patch to the O(1) scheduler: it keeps O(1)'s per-CPU
//! active and expired priority arrays, bitmap search and SMP balancing
//! ([`crate::o1::runqueue`]) and replaces the interactivity estimator with fixed accounting.
//!
//! * **Quota.** The one tunable is `RR_INTERVAL`, `6 x HZ / 1001 + 1` ticks (6 ms at HZ 1000, 8 ms
//!   at 250, 10 ms at 100). Each task's quota is `RR_INTERVAL` for nice 0 to 19 and progressively
//!   larger below nice 0.
//! * **The staircase.** A task may run at its static priority (120 + nice) and at every priority
//!   below it, one quota per level per major rotation: nice -20 has 40 levels, nice 0 has 20,
//!   nice 19 one. This, with the quota, is how nice divides the CPU.
//! * **Entitlement** (`recalc_task_prio`). When a task is queued and has not run in this runqueue's
//!   current major rotation, it is queued at its static priority with a full quota in `time_slice`;
//!   the bit of that level is set in its own bitmap and its quota added to the runqueue's
//!   `prio_quota` of that level. A task that already ran in this rotation goes back to its level if it
//!   has slice left and the level still has quota; otherwise it takes the next level of its staircase
//!   it has not been given quota at, with a fresh quota (added to that level's `prio_quota`); with no
//!   level left it goes to the expired array at its static priority.
//! * **Running.** The best non-empty level of the active array runs, head first. Each tick charges the
//!   running task's `time_slice` and its level's `prio_quota`; when its slice runs out it is requeued
//!   as above.
//! * **Minor rotation (the deadline).** When a level's `prio_quota` runs out, the level has had its
//!   time: every task still queued there moves down to the next level (at its tail), and the running
//!   task is rescheduled. So no task waits longer than the quotas of the levels above it: latency is
//!   bounded and predictable, and nothing starves.
//! * **Major rotation.** When the active array is empty (everything has used its staircase), the
//!   arrays swap, the rotation count advances and every task in the new active array is entitled
//!   afresh at its static priority.
//! * A woken task preempts the running one when its level is better. Real-time tasks sit at 0-99 in
//!   the active array as in O(1) (SCHED_RR with a slice of `RR_INTERVAL`) and never rotate.
//!
//! Simplifications (also in docs/policies/rsdl.md):
//! * The README says only that quotas grow "progressively" below nice 0. We could not consult the
//!   patch's code here; the growth used is `RR_INTERVAL x 3 / 2` for nice -1 to -6 and
//!   `RR_INTERVAL x nice^2 / 40` below (10 x at nice -20), as we recall the patch's `rr_quota`; treat
//!   the shares of negative nice levels as approximate.
//! * Tasks moved down by a minor rotation keep their remaining slice, take the next level's bit and
//!   add that slice to the next level's quota, so the level deadline keeps counting what was handed
//!   out (the README does not say how merged tasks are charged).
//! * The balancer is O(1)'s (2.6.22 code, as `o1` uses it); a task's load weight is its nice level's
//!   CPU entitlement (levels x quota) scaled to 128 for nice 0, in place of mainline's time-slice
//!   weight, since RSDL has no time slice per nice level. A migrated task starts a fresh staircase on
//!   its new CPU (rotations are per runqueue).
//! * A forked task starts a fresh staircase (no slice split with its parent); `sched_yield` sends a
//!   task to the expired array (as O(1) does); SCHED_BATCH tasks do not preempt on wakeup;
//!   SCHED_IDLE and SCHED_ISO tasks are normal tasks of their nice level.
//! * Time is charged per tick (as the 2.6.20 patch did), not per nanosecond.

use crate::o1::runqueue::{Runqueues, TaskView, MAX_PRIO};
use crate::params::{parse_u64, ParamInfo, Params};
use schedlab_core::{
    BalanceKind, CpuId, Ctx, DequeueReason, Dispatch, EnqueueReason, Migration, Ns, PolicyStat, SchedClass,
    SchedPolicy, SwitchReason, TaskId, WakeInfo, WakeKind, WorkConservation,
};

/// `MAX_RT_PRIO`: the first user priority.
pub const MAX_RT_PRIO: usize = 100;
/// User priority levels (nice -20..19).
pub const PRIO_RANGE: usize = MAX_PRIO - MAX_RT_PRIO;
/// `SCHED_LOAD_SCALE` of the balancer: the load weight of a nice-0 task.
const LOAD_SCALE: u64 = 128;

/// `RR_INTERVAL` in ticks: `6 x HZ / 1001 + 1`.
pub fn rr_interval_ticks(hz: u64) -> u64 {
    6 * hz / 1001 + 1
}

/// A task's quota per level, in units of `rr` (see the module docs on negative nice levels).
pub fn rr_quota(nice: i8, rr: Ns) -> Ns {
    let nice = nice.clamp(-20, 19) as i64;
    if nice < -6 {
        rr * (nice * nice) as Ns / 40
    } else if nice < 0 {
        rr / 2 * 3
    } else {
        rr
    }
}

/// Levels of the staircase a nice level may run at: its static priority and every one below.
pub fn levels(nice: i8) -> usize {
    (20 - nice.clamp(-20, 19) as i32) as usize
}

/// RSDL's parameters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RsdlParams {
    /// `RR_INTERVAL`, ns; 0 for the patch's `6 x HZ / 1001 + 1` ticks.
    pub rr_interval_ns: Ns,
}

impl Params for RsdlParams {
    fn info() -> &'static [ParamInfo] {
        &[ParamInfo {
            key: "rr_interval_ns",
            default: "0",
            help: "RR_INTERVAL, ns (100 us to 1 s); 0 = 6 x HZ / 1001 + 1 ticks (6 ms at HZ 1000, 10 ms at HZ 100)",
        }]
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "rr_interval_ns" => {
                let v = parse_u64(value, 0..=1_000_000_000)?;
                if v != 0 && v < 100_000 {
                    return Err(format!("{v} is outside 100000..=1000000000 (or 0 for the default)"));
                }
                self.rr_interval_ns = v;
            }
            _ => unreachable!("checked by apply"),
        }
        Ok(())
    }
}

/// What RSDL keeps per CPU beyond O(1)'s arrays.
#[derive(Clone, Copy, Debug)]
struct RsdlRq {
    /// `prio_rotation`: major rotations so far.
    rotation: u64,
    /// `prio_quota[]`: quota left at each user level in this rotation, ns.
    quota: [i64; PRIO_RANGE],
}

/// Per-task state.
#[derive(Clone, Copy, Debug, Default)]
struct Td {
    static_prio: usize,
    /// The level it is queued (or runs) at.
    prio: usize,
    /// Slice left at its level, ns.
    time_slice: i64,
    /// Levels (bit `prio - 100`) given quota in its current rotation.
    bitmap: u64,
    /// The runqueue and rotation its bitmap belongs to.
    rotation: Option<(u32, u64)>,
    expired: bool,
    queued: bool,
}

/// The RSDL scheduler.
pub struct Rsdl {
    p: RsdlParams,
    q: Runqueues<RsdlRq>,
    tds: Vec<Td>,
    rr: Ns,
    tick_ns: Ns,
    nr_running: usize,
    nr_examined: u64,
    nr_minor: u64,
    nr_major: u64,
}

impl Rsdl {
    /// A new instance.
    pub fn new(p: RsdlParams) -> Rsdl {
        Rsdl {
            p,
            q: Runqueues::empty(),
            tds: Vec::new(),
            rr: 6_000_000,
            tick_ns: 1_000_000,
            nr_running: 0,
            nr_examined: 0,
            nr_minor: 0,
            nr_major: 0,
        }
    }

    /// `RR_INTERVAL` in ns on this machine.
    pub fn rr_interval_ns(&self) -> Ns {
        self.rr
    }

    /// The level a task is queued or runs at (tests).
    pub fn prio_of(&self, t: TaskId) -> usize {
        self.tds[t.idx()].prio
    }

    /// Whether a task is in (or, running, belongs to) the expired array (tests).
    pub fn in_expired(&self, t: TaskId) -> bool {
        self.tds[t.idx()].expired
    }

    /// A task's slice left at its level, ns (tests).
    pub fn time_slice(&self, t: TaskId) -> i64 {
        self.tds[t.idx()].time_slice
    }

    /// The quota left at a user level of a CPU, ns (tests).
    pub fn level_quota(&self, cpu: CpuId, prio: usize) -> i64 {
        self.q.rqs[cpu.idx()].x.quota[prio - MAX_RT_PRIO]
    }

    /// Major rotations of a CPU (tests).
    pub fn rotation(&self, cpu: CpuId) -> u64 {
        self.q.rqs[cpu.idx()].x.rotation
    }

    fn quota(&self, ctx: &Ctx, t: TaskId) -> Ns {
        rr_quota(ctx.task(t).nice, self.rr)
    }

    /// The balancer's weight: the CPU entitlement of the task's nice level, 128 for nice 0.
    fn load_weight(ctx: &Ctx, t: TaskId, rr: Ns) -> u64 {
        Self::weight_at(ctx, t, ctx.task(t).nice, rr)
    }

    /// [`Rsdl::load_weight`] of `t` at nice level `nice`.
    fn weight_at(ctx: &Ctx, t: TaskId, nice: i8, rr: Ns) -> u64 {
        let nice = if ctx.task(t).class.is_rt() { -20 } else { nice };
        LOAD_SCALE * levels(nice) as u64 * rr_quota(nice, rr) / (20 * rr)
    }

    /// Gives `t` a full quota at user level `prio`.
    fn entitle(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, prio: usize) {
        let quota = self.quota(ctx, t);
        let td = &mut self.tds[t.idx()];
        td.prio = prio;
        td.bitmap |= 1 << (prio - MAX_RT_PRIO);
        td.time_slice = quota as i64;
        self.q.rqs[cpu.idx()].x.quota[prio - MAX_RT_PRIO] += quota as i64;
    }

    /// `recalc_task_prio` + queueing: where `t` goes on `cpu` now, and it goes there (at the tail).
    fn requeue(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId) {
        let info = ctx.task(t);
        if info.class.is_rt() {
            let td = &mut self.tds[t.idx()];
            td.prio = MAX_RT_PRIO - 1 - info.rt_priority.clamp(1, 99) as usize;
            td.expired = false;
            if td.time_slice <= 0 {
                td.time_slice = self.rr as i64;
            }
            return self.push(cpu, t, false);
        }
        let rot = (cpu.0, self.q.rqs[cpu.idx()].x.rotation);
        let td = self.tds[t.idx()];
        if td.rotation == Some(rot) {
            if td.expired {
                return self.push(cpu, t, true);
            }
            if td.time_slice > 0 && self.q.rqs[cpu.idx()].x.quota[td.prio - MAX_RT_PRIO] > 0 {
                return self.push(cpu, t, false);
            }
        } else {
            let td = &mut self.tds[t.idx()];
            td.rotation = Some(rot);
            td.bitmap = 0;
            td.expired = false;
        }
        // next_entitled_slot: the first level from its static priority it has not had quota at.
        let td = self.tds[t.idx()];
        let free = (td.static_prio..MAX_PRIO).find(|&p| td.bitmap & (1 << (p - MAX_RT_PRIO)) == 0);
        self.nr_examined += 1;
        match free {
            Some(p) => {
                self.entitle(ctx, cpu, t, p);
                self.push(cpu, t, false);
            }
            None => {
                let quota = self.quota(ctx, t);
                let td = &mut self.tds[t.idx()];
                td.expired = true;
                td.prio = td.static_prio;
                td.time_slice = quota as i64;
                self.push(cpu, t, true);
            }
        }
    }

    fn push(&mut self, cpu: CpuId, t: TaskId, expired: bool) {
        let td = &mut self.tds[t.idx()];
        td.expired = expired;
        td.queued = true;
        let rq = &mut self.q.rqs[cpu.idx()];
        let a = if expired { 1 - rq.active } else { rq.active };
        rq.arrays[a].push(td.prio, t, false);
    }

    fn unqueue(&mut self, cpu: CpuId, t: TaskId) {
        let td = &mut self.tds[t.idx()];
        if !td.queued {
            return;
        }
        td.queued = false;
        let rq = &mut self.q.rqs[cpu.idx()];
        let a = if td.expired { 1 - rq.active } else { rq.active };
        rq.arrays[a].remove(td.prio, t);
    }

    /// Minor rotation: level `prio`'s quota is spent; its queued tasks move down one level.
    fn minor_rotation(&mut self, ctx: &Ctx, cpu: CpuId, prio: usize) {
        self.nr_minor += 1;
        let rq = &mut self.q.rqs[cpu.idx()];
        let active = rq.active;
        let moved: Vec<TaskId> = rq.arrays[active].queues[prio].iter().copied().collect();
        self.nr_examined += moved.len() as u64 + 1;
        if prio + 1 < MAX_PRIO {
            rq.arrays[active].merge_down(prio, prio + 1);
            for t in moved {
                let td = &mut self.tds[t.idx()];
                td.prio = prio + 1;
                td.bitmap |= 1 << (prio + 1 - MAX_RT_PRIO);
                let left = td.time_slice.max(0);
                self.q.rqs[cpu.idx()].x.quota[prio + 1 - MAX_RT_PRIO] += left;
            }
        } else {
            // The last level: whatever is left there has used its staircase.
            for t in moved {
                self.unqueue(cpu, t);
                let quota = self.quota(ctx, t) as i64;
                let td = &mut self.tds[t.idx()];
                td.prio = td.static_prio;
                td.time_slice = quota;
                self.push(cpu, t, true);
            }
        }
    }

    /// Major rotation: the arrays swap and every task now active is entitled at its static priority.
    fn major_rotation(&mut self, ctx: &Ctx, cpu: CpuId) {
        self.nr_major += 1;
        let rq = &mut self.q.rqs[cpu.idx()];
        rq.active = 1 - rq.active;
        rq.x.rotation += 1;
        rq.x.quota = [0; PRIO_RANGE];
        let rot = (cpu.0, rq.x.rotation);
        let active = rq.active;
        let tasks: Vec<TaskId> = rq.arrays[active].queues.iter().flatten().copied().collect();
        self.nr_examined += tasks.len() as u64;
        for t in tasks {
            let td = &mut self.tds[t.idx()];
            td.expired = false;
            td.rotation = Some(rot);
            td.bitmap = 0;
            let prio = td.prio;
            self.entitle(ctx, cpu, t, prio);
        }
    }
}

impl SchedPolicy for Rsdl {
    fn name(&self) -> &str {
        "rsdl"
    }

    fn init(&mut self, ctx: &Ctx) {
        self.tick_ns = ctx.tick_ns;
        self.rr = match self.p.rr_interval_ns {
            0 => rr_interval_ticks(ctx.hz()) * ctx.tick_ns,
            ns => ns,
        };
        self.q = Runqueues::build(ctx, RsdlRq { rotation: 0, quota: [0; PRIO_RANGE] });
    }

    fn task_new(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        if self.tds.len() <= t.idx() {
            self.tds.resize(t.idx() + 1, Td::default());
        }
        let static_prio = (120 + ctx.task(t).nice.clamp(-20, 19) as i64) as usize;
        self.tds[t.idx()] = Td { static_prio, prio: static_prio, ..Td::default() };
        // sched_fork / try_to_wake_up as in the O(1) scheduler RSDL patched (crate::o1::runqueue).
        let home = ctx.task(t).parent.filter(|&p| ctx.task(p).state != schedlab_core::TaskState::Exited);
        let home = home.map_or(ctx.task(t).cpu, |p| ctx.task(p).cpu);
        self.q.fork_cpu(ctx, t, home)
    }

    fn select_cpu(&mut self, ctx: &Ctx, t: TaskId, wake: &WakeInfo) -> CpuId {
        let rr = self.rr;
        let weight = Self::load_weight(ctx, t, rr);
        let waker_weight = wake.waker.filter(|_| wake.sync).map(|w| Self::load_weight(ctx, w, rr));
        self.q.wake_cpu(ctx, t, wake.waker_cpu, weight, waker_weight)
    }

    fn enqueue(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: EnqueueReason) {
        if !why.was_runnable() {
            self.nr_running += 1;
        }
        // A nice change takes effect here (the static priority is read at every queueing).
        self.tds[t.idx()].static_prio = (120 + ctx.task(t).nice.clamp(-20, 19) as i64) as usize;
        let w = Self::load_weight(ctx, t, self.rr);
        let rq = &mut self.q.rqs[cpu.idx()];
        rq.nr_running += 1;
        rq.load += w;
        self.requeue(ctx, cpu, t);
    }

    fn dequeue(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, _why: DequeueReason) {
        self.unqueue(cpu, t);
        let w = Self::load_weight(ctx, t, self.rr);
        let rq = &mut self.q.rqs[cpu.idx()];
        rq.nr_running -= 1;
        rq.load -= w;
    }

    /// `set_user_nice`: the static priority and the load weight of the new level; a queued or
    /// running task's weight moves in its CPU's raw weighted load at once. Simplification: the
    /// task keeps its place, quota and level in the staircase until its next queueing, where the
    /// new static priority decides its levels (RSDL's design document: the static priority is
    /// read at every queueing); no reschedule is asked for.
    /// A class change: the task is off its queue (`dequeue(.., Save)`); the next queueing reads the
    /// class (an RT task at `99 - rt_priority`). A task leaving the RT class starts a fresh
    /// entitlement at its static priority, as a task new to the rotation (its RT level is no
    /// staircase level). Simplification: quota it was given at a level stays counted there.
    fn set_class(&mut self, ctx: &Ctx, t: TaskId, old_class: SchedClass, _old_rt_priority: u8) {
        if old_class.is_rt() && !ctx.task(t).class.is_rt() {
            let td = &mut self.tds[t.idx()];
            td.rotation = None;
            td.expired = false;
        }
    }

    fn set_nice(&mut self, ctx: &Ctx, t: TaskId, old_nice: i8) -> Option<CpuId> {
        let info = ctx.task(t);
        self.tds[t.idx()].static_prio = (120 + info.nice.clamp(-20, 19) as i64) as usize;
        if matches!(info.state, schedlab_core::TaskState::Runnable | schedlab_core::TaskState::Running) {
            let (old, new) = (Self::weight_at(ctx, t, old_nice, self.rr), Self::load_weight(ctx, t, self.rr));
            let rq = &mut self.q.rqs[info.cpu.idx()];
            rq.load = rq.load - old + new;
        }
        None
    }

    fn pick_next(&mut self, ctx: &Ctx, cpu: CpuId) -> Option<Dispatch> {
        let rq = &self.q.rqs[cpu.idx()];
        if rq.arrays[rq.active].nr_active == 0 {
            if rq.arrays[1 - rq.active].nr_active == 0 {
                return None;
            }
            self.major_rotation(ctx, cpu);
        }
        self.nr_examined += 1;
        let rq = &self.q.rqs[cpu.idx()];
        let prio = rq.arrays[rq.active].first()?;
        let t = *rq.arrays[rq.active].queues[prio].front()?;
        self.unqueue(cpu, t);
        Some(Dispatch::task(t))
    }

    fn put_prev(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: SwitchReason) {
        if !why.still_runnable() {
            let w = Self::load_weight(ctx, t, self.rr);
            let rq = &mut self.q.rqs[cpu.idx()];
            rq.nr_running -= 1;
            rq.load -= w;
            self.nr_running -= 1;
            return;
        }
        if why == SwitchReason::Yielded && !ctx.task(t).class.is_rt() {
            let quota = self.quota(ctx, t) as i64;
            let td = &mut self.tds[t.idx()];
            td.prio = td.static_prio;
            td.time_slice = quota;
            return self.push(cpu, t, true);
        }
        self.requeue(ctx, cpu, t);
    }

    fn tick(&mut self, ctx: &Ctx, cpu: CpuId, curr: TaskId) -> bool {
        self.q.update_cpu_load(cpu, ctx.now);
        let tick = self.tick_ns as i64;
        let info = ctx.task(curr);
        if info.class.is_rt() {
            if info.class != SchedClass::Rr {
                return false;
            }
            let td = &mut self.tds[curr.idx()];
            td.time_slice -= tick;
            return td.time_slice <= 0;
        }
        let td = &mut self.tds[curr.idx()];
        td.time_slice -= tick;
        let (prio, slice_out) = (td.prio, td.time_slice <= 0);
        if self.tds[curr.idx()].expired {
            return slice_out; // only reachable for a task that yielded into the expired array
        }
        let quota = &mut self.q.rqs[cpu.idx()].x.quota[prio - MAX_RT_PRIO];
        *quota -= tick;
        if *quota <= 0 {
            self.minor_rotation(ctx, cpu, prio);
            return true;
        }
        slice_out
    }

    fn check_preempt(
        &mut self,
        ctx: &Ctx,
        _cpu: CpuId,
        curr: TaskId,
        woken: TaskId,
        _kind: WakeKind,
    ) -> bool {
        if ctx.task(woken).class == SchedClass::Batch && !ctx.task(curr).class.is_rt() {
            return false;
        }
        self.tds[woken.idx()].prio < self.tds[curr.idx()].prio && !self.tds[woken.idx()].expired
    }

    fn balance(&mut self, ctx: &Ctx, cpu: CpuId, kind: BalanceKind, out: &mut Vec<Migration>) {
        if ctx.nr_cpus() < 2 {
            return;
        }
        let (idle, newly) = match kind {
            BalanceKind::Periodic => (false, false),
            BalanceKind::NohzIdle => (true, false),
            BalanceKind::NewlyIdle => (true, true),
        };
        let rr = self.rr;
        let tds = &self.tds;
        // RSDL keeps no best_expired_prio: rq_best_prio is the running task's priority alone.
        let view = TaskView {
            weight: &|t| Self::load_weight(ctx, t, rr),
            prio: &|t| tds[t.idx()].prio,
            best_expired_prio: &|_| MAX_PRIO,
            // RTPRIO_TO_LOAD_WEIGHT(100) outweighs every task, so an active balance moves one task.
            active_load_move: u64::MAX >> 2,
        };
        self.q.rebalance(ctx, cpu, idle, newly, &view, out);
    }

    fn take_examined(&mut self) -> u64 {
        std::mem::take(&mut self.nr_examined) + std::mem::take(&mut self.q.nr_examined)
    }

    fn stats(&self) -> Vec<PolicyStat> {
        vec![
            PolicyStat {
                name: "nr_minor_rotations",
                value: self.nr_minor,
                help: "levels whose quota ran out, their tasks moved down a level",
            },
            PolicyStat {
                name: "nr_major_rotations",
                value: self.nr_major,
                help: "array swaps after every task used its staircase",
            },
            PolicyStat {
                name: "nr_lb_moved",
                value: self.q.nr_lb_moved,
                help: "tasks moved by the balancer",
            },
        ]
    }

    fn exec_cpu(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId) -> Option<CpuId> {
        // The sched_exec of the O(1) kernel RSDL patched (sched_balance_self, SD_BALANCE_EXEC).
        Some(self.q.exec_cpu(ctx, t, cpu))
    }

    fn work_conservation(&self) -> WorkConservation {
        WorkConservation::None
    }

    fn nr_runnable(&self) -> Option<usize> {
        Some(self.nr_running)
    }

    fn trace_values(&self, t: TaskId, out: &mut Vec<(&'static str, i64)>) {
        if let Some(td) = self.tds.get(t.idx()) {
            out.push(("rsdl level", td.prio as i64));
            out.push(("rsdl slice us", td.time_slice / 1000));
        }
    }
}

#[cfg(test)]
mod tests;
