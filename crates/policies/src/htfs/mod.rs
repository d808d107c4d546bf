//! # HTFS, the High Throughput Fair Scheduler
//!
//! Source: seed 000 (Pargmann, *A Fair O(1) High Throughput CPU-Scheduler for Linux*, 2011), sec. 4
//! (design) and 5.3.1 (balancing methods); it replaced CFS as Linux 2.6.38.6's fair class, so
//! SCHED_FIFO/RR tasks run in the Linux RT class above it (`LinuxClasses`).
//!
//! Each CPU has a *dual runqueue*: an interactive and a normal runqueue, each of 50 FIFO priority
//! queues, one per *boosted weight* (bweight) level (the 40 nice weights and 5 more at each end).
//!
//! ```text
//!                         dual runqueue (per CPU), balancect
//!              >= 0: interactive, pays bweight(normal)   < 0: normal, gains bweight(inter) x 2^(shift-17+4)
//!            +-----------------------------+    +-----------------------------+
//!            | interactive runqueue        |    | normal runqueue             |
//!            | slice 2^17 ns               |    | slice 2^shift (17..30)      |
//!            | PQs sorted by realbweight:  |    | PQs sorted by realbweight:  |
//!            |  [bw 25: a b] [bw 24: c]    |    |  [bw 24: d e f] [bw 20: g]  |
//!            |  balancect/runcost per PQ   |    |  balancect/runcost per PQ   |
//!            +-----------------------------+    +-----------------------------+
//!   woken/new tasks enter here  --- 1 ms ahead of vtime --->  CPU-bound tasks settle here
//! ```
//!
//! * **Picking** (sec. 4.3, [`runqueue`]): inside a runqueue the priority queue whose `balancect`
//!   reached `runcost` (the largest `realbweight`) runs its head entity, so queues run in proportion to
//!   their `realbweight`; between the two runqueues one signed `balancect` (sec. 4.4, eq. 12-13) gives
//!   the interactive runqueue 16 times its weight, corrected for the slice lengths.
//! * **Virtual runtime and time** (sec. 4.5): `vruntime += runtime x invweight / 2^18`
//!   (`vtimeaccuracy` 14); the CPU's `vtime` advances, whenever a normal-runqueue entity ran, by its
//!   time over the normal runqueue's weight (eq. 19: the run time if preempted, else the granted
//!   slice). A task leaving early (more than 2^14 ns before its slice ends, not preempted) is charged an
//!   extra eighth of the slice. A waking task's `vruntime` is pulled to within `vthreshold` of `vtime`.
//! * **Boosted weight** (sec. 4.6): starts one level above the task's weight; after each run, if
//!   `badness` (eq. 22: |vdiff| in units of 2^boostthr slices) is non-zero and |vdiff| grew since last
//!   time, the level moves one step towards closing the gap, so it settles toggling between two levels.
//!   A task at the top level still falling behind goes to the interactive runqueue. The level is kept
//!   across sleep.
//! * **Timeslices** (sec. 4.9): interactive slice 2^17 ns; the normal slice adapts per CPU (halved after
//!   late interactive entities, doubled after 100 ms quiet, [`slice`]). Time is divided into normal-slice
//!   periods: once an interactive entity has used part of a period the remainder goes to interactive
//!   entities, and a normal one gets what is left.
//! * **Preemption** (sec. 4.8): a task entering the interactive runqueue preempts the running one
//!   unless that one is interactive, has less than an interactive slice left, or a reschedule is
//!   already pending. Preempted tasks are not punished.
//! * **Average load** (sec. 4.10): per entity, `avg = (7 avg + weight x used/slice + 4) / 8` after each
//!   run (punishment counts as unused time), halved per 4 slices slept; per CPU, the same average of
//!   the entities' averages. The balancing method (`balance` parameter, sec. 5.3.1) picks the loads
//!   the 2.6.38 domain balancer works with.
//! * **Lock acquire retry** (sec. 4.11): a `sched_yield` whose run time since the last call is under
//!   2^8 ns, or within 2^5 ns of the previous one, continues the same task (at most 20 times).
//!
//! Choices where the thesis is silent or garbled, and simplifications, are listed in
//! docs/policies/htfs.md; the main ones: task groups are not yet modelled (every task is an entity of
//! the CPU's dual runqueue); slices are enforced exactly (HRTICK-like) rather than at ticks; the five
//! extra bweight levels continue the nice table's 1.25 ratio.

mod balance;
pub mod runqueue;
pub mod slice;
#[cfg(test)]
mod tests;

use crate::cfs::domains::{self, Domain, Style};
use crate::cfs::CPU_LOAD_IDX_MAX;
use crate::params::{parse_u64, ParamInfo, Params};
use runqueue::{Runqueue, NR_LEVELS};
use schedlab_core::weights::{nice_to_weight, PRIO_TO_WEIGHT, WEIGHT_IDLEPRIO};
use schedlab_core::{
    BalanceKind, CpuId, Ctx, DequeueReason, Dispatch, EnqueueReason, Migration, Ns, PolicyStat, SchedClass,
    SchedPolicy, SwitchReason, TaskId, WakeInfo, WakeKind, WorkConservation,
};
use slice::{AdaptiveSlice, INTER_SLICE_SHIFT};

/// `vtimeaccuracy`: virtual runtimes keep 14 bits below the ns of a nice-0 task.
pub const VTIME_ACCURACY: u32 = 14;
/// `statictimeslice`: 2^17 ns.
pub const STATIC_TIMESLICE: Ns = 1 << 17;
/// The interactive slice: 2^17 ns.
pub const INTER_SLICE: Ns = 1 << INTER_SLICE_SHIFT;
/// Early-leave tolerance: no punishment within 2^14 ns of the slice end.
pub const PUNISH_TOLERANCE: Ns = 1 << 14;
/// How far ahead of `vtime` (as run time) an entity may be before leaving the interactive runqueue.
pub const AHEAD_LIMIT_NS: Ns = 1_000_000;
/// The interactive runqueue's weight factor, as a shift (16x).
pub const INTER_WEIGHT_SHIFT: u32 = 4;
/// Lock acquire retry: continue when the run time since the last call differs by less than 2^5 ns ...
pub const RETRY_RUNDIFF_NS: Ns = 1 << 5;
/// ... or is below 2^8 ns ...
pub const RETRY_RUNTIME_NS: Ns = 1 << 8;
/// ... at most this many times in a row.
pub const RETRY_MAX: u32 = 20;

/// The 50 bweight levels, ascending: 5 below nice 19's 15, the 40 nice weights, 5 above nice -20's
/// 88761. The extra levels continue the table's 1.25 ratio (the thesis does not list them).
pub const BWEIGHTS: [u64; NR_LEVELS] = {
    let mut w = [0u64; NR_LEVELS];
    let mut i = 0;
    while i < 40 {
        w[5 + i] = PRIO_TO_WEIGHT[39 - i];
        i += 1;
    }
    let mut j = 5;
    while j > 0 {
        w[j - 1] = w[j] * 4 / 5;
        w[NR_LEVELS - j] = w[NR_LEVELS - j - 1] * 5 / 4;
        j -= 1;
    }
    w
};

/// The level of nice 0 (1024).
pub const NICE0_LEVEL: usize = 24;

/// `bweight` initialisation: binary search for the level closest to `weight` (the first probe is the
/// middle of the nice range, nice 0), then one level up: the small boost of a new entity.
pub fn initial_level(weight: u64) -> usize {
    let (mut lo, mut hi) = (0usize, NR_LEVELS - 1);
    let mut mid = NICE0_LEVEL;
    while lo < hi {
        if BWEIGHTS[mid] < weight {
            lo = mid + 1;
        } else {
            hi = mid;
        }
        mid = (lo + hi) / 2;
    }
    // `lo` is the first level >= weight; take the nearer of it and the one below.
    let best = if lo > 0 && weight - BWEIGHTS[lo - 1].min(weight) < BWEIGHTS[lo].saturating_sub(weight) {
        lo - 1
    } else {
        lo
    };
    (best + 1).min(NR_LEVELS - 1)
}

/// The load the balancer works with (sec. 5.3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// CFS-like: task load = weight, CPU load = sum of weights, averaged per tick like `cpu_load[]`.
    Std,
    /// As `Std`, but the CPU load is a simple moving average updated after every run.
    StdAvg,
    /// Average loads: task load = its moving average, CPU load = the runqueue's average.
    Avg,
}

/// HTFS tunables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HtfsParams {
    /// The balancing method. Default `avg`.
    pub balance: Method,
    /// `wakeupthr`: a waking task's vruntime may differ from vtime by 2^wakeupthr static slices of
    /// its weight. Default 10 (eq. 18).
    pub wakeupthr: u32,
    /// `boostthr`: badness counts |vdiff| in units of 2^boostthr slices. Default 2.
    pub boostthr: u32,
}

impl Default for HtfsParams {
    fn default() -> Self {
        HtfsParams { balance: Method::Avg, wakeupthr: 10, boostthr: 2 }
    }
}

impl Params for HtfsParams {
    fn info() -> &'static [ParamInfo] {
        &[
            ParamInfo {
                key: "balance",
                default: "avg",
                help: "balancing loads: std (weights, tick averages), stdavg (weights, moving average), avg (average loads)",
            },
            ParamInfo {
                key: "wakeupthr",
                default: "10",
                help: "waking vruntime kept within 2^wakeupthr static slices (2^17 ns) of vtime",
            },
            ParamInfo { key: "boostthr", default: "2", help: "bweight changes once |vdiff| exceeds 2^boostthr slices" },
        ]
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "balance" => {
                self.balance = match value.trim() {
                    "std" => Method::Std,
                    "stdavg" => Method::StdAvg,
                    "avg" => Method::Avg,
                    other => return Err(format!("expected std, stdavg or avg, got `{other}`")),
                }
            }
            "wakeupthr" => self.wakeupthr = parse_u64(value, 0..=20)? as u32,
            "boostthr" => self.boostthr = parse_u64(value, 0..=10)? as u32,
            _ => unreachable!("checked by apply"),
        }
        Ok(())
    }
}

/// Which runqueue of the dual runqueue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The interactive runqueue.
    Inter,
    /// The normal runqueue.
    Normal,
}

/// A schedulable entity (a task).
#[derive(Clone, Copy, Debug)]
struct Ent {
    weight: u64,
    invweight: u64,
    level: usize,
    vruntime: u64,
    last_vdiff: i64,
    kind: Kind,
    /// Queued (or running) on its CPU's dual runqueue.
    queued: bool,
    granted: Ns,
    started: Ns,
    enq_at: Ns,
    avgload: u64,
    slept_at: Option<Ns>,
    last_runtime: Ns,
    last_call: Ns,
    conts: u32,
}

impl Ent {
    fn new(weight: u64) -> Ent {
        Ent {
            weight,
            invweight: (1u64 << 32) / weight.max(1),
            level: initial_level(weight),
            vruntime: 0,
            last_vdiff: 0,
            kind: Kind::Inter,
            queued: false,
            granted: INTER_SLICE,
            started: 0,
            enq_at: 0,
            avgload: weight / 2,
            slept_at: None,
            last_runtime: 0,
            last_call: 0,
            conts: 0,
        }
    }

    /// Run time `ns` as virtual runtime of this entity (eq. 15).
    fn vtime_of(&self, ns: Ns) -> u64 {
        ((ns as u128 * self.invweight as u128) >> (32 - VTIME_ACCURACY)) as u64
    }
}

/// Per-CPU state: the dual runqueue, vtime, slices, loads and sched domains.
#[derive(Clone, Debug)]
struct Cpu {
    inter: Runqueue,
    normal: Runqueue,
    balancect: i64,
    slice: AdaptiveSlice,
    vtime: u64,
    /// Time interactive entities used of the current normal-slice period.
    period_used: Ns,
    curr: Option<TaskId>,
    resched: bool,
    /// The running task was preempted for an interactive one: the next pick is interactive.
    preempt_inter: bool,
    /// A task continued by the lock acquire retry.
    cont: Option<TaskId>,
    nr_running: u64,
    /// Sum of the weights of its tasks.
    load: u64,
    /// Sum of its tasks' average loads.
    sum_avgload: u64,
    /// Moving average of `load` (stdavg) or of `sum_avgload` (avg), updated after every run.
    avg: u64,
    cpu_load: [u64; CPU_LOAD_IDX_MAX],
    last_load_tick: u64,
    domains: Vec<Domain>,
}

/// The HTFS scheduler (the fair class; wrap it in `LinuxClasses` for RT tasks).
pub struct Htfs {
    p: HtfsParams,
    ents: Vec<Ent>,
    cpus: Vec<Cpu>,
    tick_ns: Ns,
    nr_examined: u64,
    nr_bweight_changes: u64,
    nr_punished: u64,
    nr_retries: u64,
    nr_lb_moved: u64,
    nr_to_normal: u64,
}

impl Htfs {
    /// HTFS with the given parameters.
    pub fn new(p: HtfsParams) -> Htfs {
        Htfs {
            p,
            ents: Vec::new(),
            cpus: Vec::new(),
            tick_ns: 1_000_000,
            nr_examined: 0,
            nr_bweight_changes: 0,
            nr_punished: 0,
            nr_retries: 0,
            nr_lb_moved: 0,
            nr_to_normal: 0,
        }
    }

    /// `t`'s bweight level (0..50).
    pub fn level_of(&self, t: TaskId) -> usize {
        self.ents[t.idx()].level
    }

    /// `t`'s runqueue.
    pub fn kind_of(&self, t: TaskId) -> Kind {
        self.ents[t.idx()].kind
    }

    /// `t`'s virtual runtime.
    pub fn vruntime_of(&self, t: TaskId) -> u64 {
        self.ents[t.idx()].vruntime
    }

    /// `t`'s average load.
    pub fn avgload_of(&self, t: TaskId) -> u64 {
        self.ents[t.idx()].avgload
    }

    /// `cpu`'s virtual time.
    pub fn vtime_of(&self, cpu: CpuId) -> u64 {
        self.cpus[cpu.idx()].vtime
    }

    /// `cpu`'s normal slice, ns.
    pub fn normal_slice_of(&self, cpu: CpuId) -> Ns {
        self.cpus[cpu.idx()].slice.slice_ns()
    }

    fn weight_of(ctx: &Ctx, t: TaskId) -> u64 {
        match ctx.task(t).class {
            SchedClass::Idle => WEIGHT_IDLEPRIO,
            _ => nice_to_weight(ctx.task(t).nice),
        }
    }

    /// The signed distance of `t`'s vruntime from its CPU's vtime (overflow-safe).
    fn vdiff(&self, cpu: CpuId, t: TaskId) -> i64 {
        self.ents[t.idx()].vruntime.wrapping_sub(self.cpus[cpu.idx()].vtime) as i64
    }

    /// Queues `t` on `cpu`'s dual runqueue in its runqueue and level.
    fn dual_enqueue(&mut self, cpu: CpuId, t: TaskId, now: Ns) {
        let e = &mut self.ents[t.idx()];
        e.queued = true;
        e.enq_at = now;
        let (kind, level) = (e.kind, e.level);
        let c = &mut self.cpus[cpu.idx()];
        let first_inter = kind == Kind::Inter && c.inter.is_empty();
        if c.inter.is_empty() && c.normal.is_empty() {
            c.balancect = if kind == Kind::Inter { 1 } else { -1 };
        }
        match kind {
            Kind::Inter => c.inter.enqueue(level, t, BWEIGHTS[level]),
            Kind::Normal => c.normal.enqueue(level, t, BWEIGHTS[level]),
        }
        if first_inter && !c.normal.is_empty() {
            // The "correct value" when the interactive runqueue gets its first entity: the normal
            // runqueue ran uncharged while it was empty, so the interactive one starts with the credit
            // of one normal pick (eq. 13) - a choice, see htfs.md.
            let shift = c.slice.shift - INTER_SLICE_SHIFT + INTER_WEIGHT_SHIFT;
            c.balancect = (c.inter.bweight << shift) as i64;
        }
    }

    /// Takes `t` off `cpu`'s dual runqueue.
    fn dual_dequeue(&mut self, cpu: CpuId, t: TaskId) {
        let e = &self.ents[t.idx()];
        self.dual_remove(cpu, t, e.kind, e.level);
    }

    /// Takes `t` off `cpu`'s dual runqueue, where it sits in runqueue `kind` at `level`.
    fn dual_remove(&mut self, cpu: CpuId, t: TaskId, kind: Kind, level: usize) {
        self.ents[t.idx()].queued = false;
        let c = &mut self.cpus[cpu.idx()];
        match kind {
            Kind::Inter => c.inter.dequeue(level, t, BWEIGHTS[level]),
            Kind::Normal => c.normal.dequeue(level, t, BWEIGHTS[level]),
        }
    }

    /// "Whenever a runqueue gets empty, the balancect has to be set to -1 or 1": checked once an entity
    /// has really left or changed runqueue (a requeue after a run passes through an empty runqueue
    /// without emptying it).
    fn steer_if_empty(&mut self, cpu: CpuId) {
        let c = &mut self.cpus[cpu.idx()];
        if c.inter.is_empty() && !c.normal.is_empty() {
            c.balancect = -1;
        } else if c.normal.is_empty() && !c.inter.is_empty() {
            c.balancect = 1;
        }
    }

    /// The dual runqueue's choice (sec. 4.4) with the remaining-time rule of sec. 4.9.
    fn choose_kind(&mut self, cpu: CpuId) -> Option<Kind> {
        let c = &mut self.cpus[cpu.idx()];
        let preempted_for_inter = std::mem::take(&mut c.preempt_inter);
        let kind = match (c.inter.is_empty(), c.normal.is_empty()) {
            (true, true) => return None,
            (false, true) => Kind::Inter,
            (true, false) => Kind::Normal,
            // After a preemption the interactive runqueue runs. (The thesis also keeps the rest of a
            // part-used period for interactive entities; that serves task groups, see htfs.md.)
            (false, false) if preempted_for_inter => Kind::Inter,
            (false, false) if c.balancect >= 0 => Kind::Inter,
            (false, false) => Kind::Normal,
        };
        if !c.inter.is_empty() && !c.normal.is_empty() {
            match kind {
                Kind::Inter => c.balancect -= c.normal.bweight as i64,
                Kind::Normal => {
                    let shift = c.slice.shift - INTER_SLICE_SHIFT + INTER_WEIGHT_SHIFT;
                    c.balancect += (c.inter.bweight << shift) as i64;
                }
            }
        }
        Some(kind)
    }

    /// After a run: move the bweight one level if the entity keeps drifting from vtime (sec. 4.6).
    /// Returns true when a top-level entity still falls behind (it should go interactive).
    fn adjust_bweight(&mut self, cpu: CpuId, t: TaskId) -> bool {
        let vdiff = self.vdiff(cpu, t);
        let boostthr = self.p.boostthr;
        let e = &mut self.ents[t.idx()];
        let denom = (e.granted.max(1) as u128) << (VTIME_ACCURACY + boostthr);
        let badness = (vdiff.unsigned_abs() as u128 * e.weight as u128) / denom;
        let growing = (vdiff < 0 && vdiff < e.last_vdiff) || (vdiff > 0 && vdiff > e.last_vdiff);
        e.last_vdiff = vdiff;
        if badness == 0 || !growing {
            return false;
        }
        if vdiff < 0 {
            if e.level + 1 < NR_LEVELS {
                e.level += 1;
                self.nr_bweight_changes += 1;
                return false;
            }
            return true;
        }
        if e.level > 0 {
            e.level -= 1;
            self.nr_bweight_changes += 1;
        }
        false
    }

    /// Sum of the average loads moves with `t` (it joins or leaves `cpu`).
    fn account(&mut self, cpu: CpuId, t: TaskId, join: bool) {
        let (w, a) = (self.ents[t.idx()].weight, self.ents[t.idx()].avgload);
        let c = &mut self.cpus[cpu.idx()];
        if join {
            c.nr_running += 1;
            c.load += w;
            c.sum_avgload += a;
        } else {
            c.nr_running -= 1;
            c.load -= w;
            c.sum_avgload -= a;
        }
    }
}

impl SchedPolicy for Htfs {
    fn name(&self) -> &str {
        "htfs"
    }

    fn init(&mut self, ctx: &Ctx) {
        self.tick_ns = ctx.tick_ns;
        self.cpus = ctx
            .topo
            .cpus()
            .map(|c| Cpu {
                inter: Runqueue::default(),
                normal: Runqueue::default(),
                balancect: 0,
                slice: AdaptiveSlice::new(ctx.now),
                vtime: 0,
                period_used: 0,
                curr: None,
                resched: false,
                preempt_inter: false,
                cont: None,
                nr_running: 0,
                load: 0,
                sum_avgload: 0,
                avg: 0,
                cpu_load: [0; CPU_LOAD_IDX_MAX],
                last_load_tick: 0,
                domains: domains::build(ctx.topo, ctx.numa, c, Style::Linux2638),
            })
            .collect();
    }

    fn task_new(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        if self.ents.len() <= t.idx() {
            self.ents.resize(t.idx() + 1, Ent::new(1024));
        }
        self.ents[t.idx()] = Ent::new(Self::weight_of(ctx, t));
        self.nr_examined += ctx.task(t).allowed.count() as u64;
        crate::placement::least_loaded(ctx, t, ctx.task(t).cpu, |c| self.cpu_load_now(c))
    }

    fn select_cpu(&mut self, ctx: &Ctx, t: TaskId, wake: &WakeInfo) -> CpuId {
        // CFS's select_task_rq_fair does this in 2.6.38; reduced here (see crate::placement).
        crate::placement::wake_target(ctx, t, wake.waker_cpu, |c| self.cpu_load_now(c))
    }

    fn enqueue(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: EnqueueReason) {
        let vtime = self.cpus[cpu.idx()].vtime;
        let e = &mut self.ents[t.idx()];
        match why {
            EnqueueReason::New => {
                e.vruntime = vtime;
                e.kind = Kind::Inter;
            }
            EnqueueReason::Wakeup => {
                // Average load decays over the sleep: halved every 4 slices (eq. 28).
                if let Some(at) = e.slept_at.take() {
                    let turns = ctx.now.saturating_sub(at) / self.cpus[cpu.idx()].slice.slice_ns().max(1);
                    e.avgload >>= (turns / 4).min(63);
                }
                // Keep the vruntime within vthreshold of vtime (eq. 18).
                let shift = 32u32.saturating_sub(self.p.wakeupthr + VTIME_ACCURACY);
                let vthr = ((e.invweight as u128 * STATIC_TIMESLICE as u128) >> shift) as i64;
                let vdiff = e.vruntime.wrapping_sub(vtime) as i64;
                if vdiff < -vthr {
                    e.vruntime = vtime.wrapping_sub(vthr as u64);
                } else if vdiff > vthr {
                    e.vruntime = vtime.wrapping_add(vthr as u64);
                }
                // Woken tasks enter the interactive runqueue, unless already past the 1 ms ahead
                // limit that ends a stay there (a choice, see htfs.md: otherwise a task that wakes
                // constantly, like a pipe ping-pong, keeps the 16x weight for good).
                let ahead = e.vtime_of(AHEAD_LIMIT_NS) as i64;
                let vdiff = e.vruntime.wrapping_sub(vtime) as i64;
                e.kind = if vdiff > ahead { Kind::Normal } else { Kind::Inter };
            }
            EnqueueReason::Migrated => e.vruntime = e.vruntime.wrapping_add(vtime),
        }
        self.account(cpu, t, true);
        self.dual_enqueue(cpu, t, ctx.now);
    }

    fn dequeue(&mut self, _ctx: &Ctx, cpu: CpuId, t: TaskId, _why: DequeueReason) {
        self.dual_dequeue(cpu, t);
        self.steer_if_empty(cpu);
        self.account(cpu, t, false);
        let vtime = self.cpus[cpu.idx()].vtime;
        let e = &mut self.ents[t.idx()];
        e.vruntime = e.vruntime.wrapping_sub(vtime);
    }

    fn pick_next(&mut self, ctx: &Ctx, cpu: CpuId) -> Option<Dispatch> {
        let now = ctx.now;
        if let Some(t) = self.cpus[cpu.idx()].cont.take() {
            // Lock acquire retry: the same task goes on with what is left of its slice.
            let e = &self.ents[t.idx()];
            let left = (e.started + e.granted).saturating_sub(now).max(1);
            self.cpus[cpu.idx()].curr = Some(t);
            return Some(Dispatch { task: t, slice_ns: Some(left) });
        }
        self.cpus[cpu.idx()].resched = false;
        let kind = self.choose_kind(cpu)?;
        let c = &mut self.cpus[cpu.idx()];
        let (t, checked) = match kind {
            Kind::Inter => c.inter.pick(),
            Kind::Normal => c.normal.pick(),
        }?;
        self.nr_examined += checked as u64;
        let normal = c.slice.slice_ns();
        let granted = match kind {
            Kind::Inter => INTER_SLICE,
            Kind::Normal if c.period_used > 0 => normal.saturating_sub(c.period_used).max(INTER_SLICE),
            Kind::Normal => normal,
        };
        let e = &mut self.ents[t.idx()];
        if kind == Kind::Inter && now.saturating_sub(e.enq_at) > slice::LATE_NS {
            c.slice.latency_too_high(now);
        }
        e.granted = granted;
        e.started = now;
        c.curr = Some(t);
        Some(Dispatch { task: t, slice_ns: Some(granted) })
    }

    fn put_prev(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: SwitchReason) {
        let now = ctx.now;
        self.cpus[cpu.idx()].curr = None;
        if why == SwitchReason::Yielded && self.cpus[cpu.idx()].cont == Some(t) {
            return; // continued: it stays as it is and pick_next returns it
        }
        if why != SwitchReason::Yielded {
            self.ents[t.idx()].conts = 0;
        }
        let e = self.ents[t.idx()];
        let ran = now.saturating_sub(e.started);
        let preempted = why == SwitchReason::Preempted;
        let early = !preempted && why != SwitchReason::SliceExpired && ran + PUNISH_TOLERANCE < e.granted;
        let punish = if early { e.granted / 8 } else { 0 };
        if early {
            self.nr_punished += 1;
        }
        // vtime moves with the normal runqueue as one entity (eq. 19), before t leaves it.
        let c = &mut self.cpus[cpu.idx()];
        if e.kind == Kind::Normal && c.normal.bweight > 0 {
            let time = if preempted { ran } else { e.granted };
            let inv = (1u128 << 32) / c.normal.bweight as u128;
            c.vtime = c.vtime.wrapping_add(((time as u128 * inv) >> (32 - VTIME_ACCURACY)) as u64);
        }
        match e.kind {
            Kind::Inter => {
                c.period_used += ran;
                if c.period_used >= c.slice.slice_ns() {
                    c.period_used = 0;
                }
            }
            Kind::Normal => c.period_used = 0,
        }
        // Average loads (sec. 4.10): the punishment counts as unused time.
        let used = if early { ran } else { e.granted };
        let sample = e.weight * used.min(e.granted) / e.granted.max(1);
        let new_avg = (e.avgload * 7 + sample + 4) >> 3;
        c.sum_avgload = c.sum_avgload - e.avgload + new_avg;
        c.avg = match self.p.balance {
            Method::StdAvg => (c.avg * 7 + c.load + 4) >> 3,
            _ => (c.avg * 7 + c.sum_avgload + 4) >> 3,
        };
        let em = &mut self.ents[t.idx()];
        em.avgload = new_avg;
        em.vruntime = em.vruntime.wrapping_add(em.vtime_of(ran + punish));
        if why == SwitchReason::Exited {
            self.dual_dequeue(cpu, t);
            self.steer_if_empty(cpu);
            self.account(cpu, t, false);
            return;
        }
        let (old_kind, old_level) = (e.kind, e.level);
        // vtime only moves with the normal runqueue, so only runs from it say whether the entity keeps
        // up (a choice, see htfs.md).
        let to_inter = e.kind == Kind::Normal && self.adjust_bweight(cpu, t);
        if !why.still_runnable() {
            self.dual_remove(cpu, t, old_kind, old_level);
            self.steer_if_empty(cpu);
            self.ents[t.idx()].slept_at = Some(now);
            self.account(cpu, t, false);
            return;
        }
        let vdiff = self.vdiff(cpu, t);
        let e = &mut self.ents[t.idx()];
        let ahead = e.vtime_of(AHEAD_LIMIT_NS) as i64;
        if e.kind == Kind::Inter && vdiff > ahead {
            e.kind = Kind::Normal;
            self.nr_to_normal += 1;
        } else if e.kind == Kind::Normal && to_inter {
            e.kind = Kind::Inter;
        }
        if (e.kind, e.level) == (old_kind, old_level) {
            // Round robin: back to the tail of its priority queue.
            e.enq_at = now;
            let c = &mut self.cpus[cpu.idx()];
            match old_kind {
                Kind::Inter => c.inter.requeue_tail(old_level, t),
                Kind::Normal => c.normal.requeue_tail(old_level, t),
            }
            return;
        }
        self.dual_remove(cpu, t, old_kind, old_level);
        self.dual_enqueue(cpu, t, now);
        self.steer_if_empty(cpu);
    }

    fn tick(&mut self, ctx: &Ctx, cpu: CpuId, _curr: TaskId) -> bool {
        self.update_cpu_load(cpu, ctx.now);
        let c = &mut self.cpus[cpu.idx()];
        c.slice.tick(ctx.now);
        std::mem::take(&mut c.resched)
    }

    fn check_preempt(&mut self, ctx: &Ctx, cpu: CpuId, curr: TaskId, woken: TaskId, _kind: WakeKind) -> bool {
        let c = &self.cpus[cpu.idx()];
        if c.resched || self.ents[woken.idx()].kind != Kind::Inter {
            return false;
        }
        let e = &self.ents[curr.idx()];
        if e.kind == Kind::Inter {
            return false;
        }
        let left = (e.started + e.granted).saturating_sub(ctx.now);
        let preempt = left >= INTER_SLICE;
        // "A preemption only results in running one or more interactive tasks" (sec. 4.8).
        self.cpus[cpu.idx()].preempt_inter |= preempt;
        preempt
    }

    fn yield_task(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId) {
        // Lock acquire retry (sec. 4.11).
        let now = ctx.now;
        let e = &mut self.ents[t.idx()];
        let runtime = now.saturating_sub(e.last_call.max(e.started));
        let rundiff = runtime.abs_diff(e.last_runtime);
        let left = (e.started + e.granted).saturating_sub(now);
        e.last_runtime = runtime;
        e.last_call = now;
        if (rundiff < RETRY_RUNDIFF_NS || runtime < RETRY_RUNTIME_NS)
            && e.conts < RETRY_MAX
            && left > PUNISH_TOLERANCE
        {
            e.conts += 1;
            self.nr_retries += 1;
            self.cpus[cpu.idx()].cont = Some(t);
        } else {
            e.conts = 0;
        }
    }

    fn balance(&mut self, ctx: &Ctx, cpu: CpuId, kind: BalanceKind, out: &mut Vec<Migration>) {
        if ctx.nr_cpus() < 2 {
            return;
        }
        match kind {
            BalanceKind::Periodic => self.rebalance(ctx, cpu, false, false, out),
            BalanceKind::NohzIdle => self.rebalance(ctx, cpu, true, false, out),
            BalanceKind::NewlyIdle => self.rebalance(ctx, cpu, true, true, out),
        }
    }

    fn take_examined(&mut self) -> u64 {
        std::mem::take(&mut self.nr_examined)
    }

    fn stats(&self) -> Vec<PolicyStat> {
        vec![
            PolicyStat {
                name: "nr_bweight_changes",
                value: self.nr_bweight_changes,
                help: "boosted-weight level changes",
            },
            PolicyStat {
                name: "nr_punished",
                value: self.nr_punished,
                help: "early leaves charged an eighth of the slice",
            },
            PolicyStat {
                name: "nr_retries",
                value: self.nr_retries,
                help: "sched_yield calls continued by the lock acquire retry",
            },
            PolicyStat {
                name: "nr_to_normal",
                value: self.nr_to_normal,
                help: "moves from the interactive to the normal runqueue",
            },
            PolicyStat { name: "nr_lb_moved", value: self.nr_lb_moved, help: "tasks moved by the balancer" },
        ]
    }

    fn work_conservation(&self) -> WorkConservation {
        WorkConservation::PerCpu
    }

    fn nr_runnable(&self) -> Option<usize> {
        Some(self.cpus.iter().map(|c| c.nr_running as usize).sum())
    }
}
