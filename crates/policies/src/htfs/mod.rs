//! # HTFS, the High Throughput Fair Scheduler
//!
//! Source: seed 000 (Pargmann, *A Fair O(1) High Throughput CPU-Scheduler for Linux*, 2011), sec. 4
//! (design) and 5.3.1 (balancing methods); it replaced CFS as Linux 2.6.38.6's fair class, so
//! SCHED_FIFO/RR tasks run in the Linux RT class above it (`LinuxClasses`).
//!
//! Each CPU has a *dual runqueue* (and each task group one per CPU): an interactive and a normal
//! runqueue, each of 50 FIFO priority queues, one per *boosted weight* (bweight) level (the 40 nice
//! weights and 5 more at each end).
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
//!   the interactive runqueue 16 times its weight, corrected for the slice lengths. New tasks enter
//!   the interactive runqueue, woken ones too unless already more than 1 ms ahead of `vtime` (sec.
//!   4.1.1, 4.4; `wake_runqueue`), and they leave it after a run that puts them 1 ms ahead.
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
//!   periods: once interactive entities have used part of a period the interactive runqueue goes first
//!   until the period is used up, and a normal entity gets what is left.
//! * **Preemption** (sec. 4.8): a task entering the interactive runqueue preempts the running one
//!   unless that one is interactive, has less than an interactive slice left, or a reschedule is
//!   already pending. Preempted tasks are not punished.
//! * **Average load** (sec. 4.10): per entity, `avg = (7 avg + weight x used/slice + 4) / 8` after each
//!   run (punishment counts as unused time), halved per 4 slices slept; per CPU, the same average of
//!   the entities' averages. The balancing method (`balance` parameter, sec. 5.3.1) picks the loads
//!   the 2.6.38 domain balancer works with.
//! * **Lock acquire retry** (sec. 4.11): a `sched_yield` continues the same task (at most 20 times)
//!   unless its run time since the last call is under 2^8 ns or within 2^5 ns of the previous one,
//!   when a new task is scheduled.
//!
//! Choices where the thesis is silent or garbled, and simplifications, are listed in
//! docs/policies/htfs.md; the main ones: slices are enforced exactly (HRTICK-like) rather than at
//! ticks; the five extra bweight levels continue the nice table's 1.25 ratio; bweights change only
//! after runs from a normal runqueue.
//!
//! * **Task groups** (sec. 4.7): every task group has a dual runqueue per CPU and an entity in its
//!   parent's, weighted by CFS's `update_cfs_shares` (shares x the group's load on this CPU / its
//!   total, at least 2). The pick descends from the CPU's root dual runqueue and, once an interactive
//!   entity was chosen, prefers interactive entities below. A task joining a group queues the group
//!   entities above that were not queued and pulls queued ones to the interactive runqueue while
//!   everything below is interactive and their vruntime allows; a task leaving removes emptied group
//!   entities and moves those whose interactive runqueue emptied to the normal one. The task runs with
//!   an interactive slice if any entity of its path is interactive.

mod balance;
pub mod runqueue;
pub mod slice;
#[cfg(test)]
mod tests;

use crate::cfs::balance::IdleType;
use crate::cfs::lb2638::Balance2638;
use crate::cfs::select::Select2638;
use crate::cfs::CPU_LOAD_IDX_MAX;
use crate::domains::{self, Domain, Style};
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
/// Lock acquire retry (sec. 4.11): a new task is scheduled when the run time since the last call
/// differs from the one before by less than 2^5 ns ...
pub const RETRY_RUNDIFF_NS: Ns = 1 << 5;
/// ... or is below 2^8 ns; otherwise the calling task continues ...
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
    /// Where a waking entity goes. Default [`WakeRunqueue::Ahead`].
    pub wake_runqueue: WakeRunqueue,
    /// What eq. 19 adds to vtime after a normal entity left early. Default [`VtimeEarly::Granted`].
    pub vtime_early: VtimeEarly,
    /// What an idle CPU's moving-average load reads under `stdavg` and `avg`. Default
    /// [`IdleLoad::Zero`].
    pub idle_load: IdleLoad,
}

/// The load an idle CPU reports under the moving-average methods (`stdavg`, `avg`): the thesis
/// updates a runqueue's average "everytime after a task ran on the CPU" and sets the CPU load to it
/// (sec. 4.10), and says nothing of an idle CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdleLoad {
    /// 0, as CFS's instantaneous load of an empty runqueue (the model's reading).
    Zero,
    /// The average as last updated, after the last run there (sec. 4.10 read literally: nothing
    /// updates it while no task runs).
    Last,
}

/// Where a waking entity is enqueued: the two readings of sec. 4.4 (see `place_waking`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WakeRunqueue {
    /// The interactive runqueue unless its vruntime is more than 1 ms ahead of vtime (sec. 4.1.1:
    /// every enqueue checks the vruntime; the results of sec. 5.2.2 and 5.2.4 need it).
    Ahead,
    /// Always the interactive runqueue ("newly woken tasks are always enqueued on the interactive
    /// runqueue", sec. 4.4, read literally); the 1 ms limit applies only after a run.
    Interactive,
}

/// The `time` of eq. 19 after a normal entity left the CPU early without being preempted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VtimeEarly {
    /// Its whole granted slice, as eq. 19 states ("else time is equal to the granted timeslice").
    Granted,
    /// What its own vruntime was charged: the run time plus the punishment. Not the thesis: a
    /// counterfactual that keeps vtime from outrunning the tasks when they block early (the
    /// "massive boosting" sec. 4.5.2 warns of), for experiments.
    Charged,
}

impl Default for HtfsParams {
    fn default() -> Self {
        HtfsParams {
            balance: Method::Avg,
            wakeupthr: 10,
            boostthr: 2,
            wake_runqueue: WakeRunqueue::Ahead,
            vtime_early: VtimeEarly::Granted,
            idle_load: IdleLoad::Zero,
        }
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
            ParamInfo {
                key: "wake_runqueue",
                default: "ahead",
                help: "where a woken task goes: ahead (interactive unless 1 ms ahead of vtime) or interactive (always)",
            },
            ParamInfo {
                key: "vtime_early",
                default: "granted",
                help: "eq. 19's time after a normal task left early: granted (its slice, the thesis) or charged (run time + punishment, a counterfactual)",
            },
            ParamInfo {
                key: "idle_load",
                default: "zero",
                help: "an idle CPU's load under stdavg and avg: zero, or last (its average as after the last run, sec. 4.10 read literally)",
            },
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
            "wake_runqueue" => {
                self.wake_runqueue = match value.trim() {
                    "ahead" => WakeRunqueue::Ahead,
                    "interactive" => WakeRunqueue::Interactive,
                    other => return Err(format!("expected ahead or interactive, got `{other}`")),
                }
            }
            "vtime_early" => {
                self.vtime_early = match value.trim() {
                    "granted" => VtimeEarly::Granted,
                    "charged" => VtimeEarly::Charged,
                    other => return Err(format!("expected granted or charged, got `{other}`")),
                }
            }
            "idle_load" => {
                self.idle_load = match value.trim() {
                    "zero" => IdleLoad::Zero,
                    "last" => IdleLoad::Last,
                    other => return Err(format!("expected zero or last, got `{other}`")),
                }
            }
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

/// A schedulable entity: a task, or a task group's entity on one CPU (named by the index of the
/// group's dual runqueue on that CPU).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Se {
    /// A task.
    Task(TaskId),
    /// The entity of dual runqueue `d` (group `d / nr_cpus` on CPU `d % nr_cpus`).
    Group(u32),
}

/// The scheduling state of an entity.
#[derive(Clone, Copy, Debug)]
struct Ent {
    weight: u64,
    invweight: u64,
    level: usize,
    vruntime: u64,
    last_vdiff: i64,
    kind: Kind,
    /// Queued (or running) in dual runqueue `dual`.
    queued: bool,
    dual: usize,
    granted: Ns,
    started: Ns,
    enq_at: Ns,
    /// Its current wait on an interactive runqueue already counted as "latency too high".
    late_noted: bool,
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
            dual: 0,
            granted: INTER_SLICE,
            started: 0,
            enq_at: 0,
            late_noted: false,
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

    fn set_weight(&mut self, weight: u64) {
        self.weight = weight.max(1);
        self.invweight = (1u64 << 32) / self.weight;
    }
}

/// A dual runqueue: the root one of a CPU, or a task group's on that CPU (sec. 4.7).
#[derive(Clone, Debug, Default)]
struct Dual {
    inter: Runqueue<Se>,
    normal: Runqueue<Se>,
    balancect: i64,
    vtime: u64,
    /// Sum of the real weights of the entities queued here (the group's load on this CPU).
    weight: u64,
}

impl Dual {
    fn is_empty(&self) -> bool {
        self.inter.is_empty() && self.normal.is_empty()
    }
}

/// Per-CPU state: slices, the running task, loads and sched domains (the runqueues are in `duals`).
#[derive(Clone, Debug)]
struct Cpu {
    slice: AdaptiveSlice,
    /// Time interactive entities used of the current normal-slice period.
    period_used: Ns,
    curr: Option<TaskId>,
    /// Whether the running task got an interactive slice (some entity of its path was interactive).
    curr_inter: bool,
    resched: bool,
    /// The running task was preempted for an interactive one: the next pick is interactive.
    preempt_inter: bool,
    /// A task continued by the lock acquire retry, with the time of its `sched_yield`: valid for the
    /// pick at that instant only (a class above may run first).
    cont: Option<(TaskId, Ns)>,
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
    /// `cpu_power`.
    power: u64,
    /// `avg_idle`, ns.
    avg_idle: u64,
    /// `idle_stamp` (0 = not idle-balancing).
    idle_stamp: Ns,
}

/// The HTFS scheduler (the fair class; wrap it in `LinuxClasses` for RT tasks).
pub struct Htfs {
    p: HtfsParams,
    /// Task entities.
    ents: Vec<Ent>,
    /// Group entities, by dual runqueue index (the root's are unused).
    gents: Vec<Ent>,
    /// Dual runqueues, `group x nr_cpus + cpu`; group 0 is the root.
    duals: Vec<Dual>,
    ncpus: usize,
    group_parent: Vec<usize>,
    group_shares: Vec<u64>,
    /// Sum over CPUs of each group's dual runqueue weight.
    group_weight: Vec<u64>,
    cpus: Vec<Cpu>,
    tick_ns: Ns,
    /// Where the ticks fall ([`Ctx::tick_phase_ns`]).
    tick_phase_ns: Ns,
    nr_examined: u64,
    nr_bweight_changes: u64,
    nr_punished: u64,
    nr_retries: u64,
    nr_lb_moved: u64,
    nr_to_normal: u64,
    /// Wakeups placed on the normal runqueue (already more than 1 ms ahead of vtime).
    nr_wake_normal: u64,
    /// Picks of a normal runqueue while its interactive runqueue held entities (`balancect` < 0).
    nr_normal_over_inter: u64,
    /// Normal-slice periods the interactive entities used up (`period_used` reaching the slice).
    nr_periods_used_up: u64,
    nr_wake_affine: u64,
    nr_active_balance: u64,
    /// Tasks `pull_task` moved already in HTFS's runqueues (the engine's dequeue and enqueue of the
    /// move are then no-ops).
    premoved: Vec<bool>,
    /// Active balances kicked by the current pass: (busiest, target, domain level).
    pending_active: Vec<(CpuId, CpuId, usize)>,
}

/// `MIN_SHARES`: the smallest weight of a group entity.
const MIN_SHARES: u64 = 2;

impl Htfs {
    /// HTFS with the given parameters.
    pub fn new(p: HtfsParams) -> Htfs {
        Htfs {
            p,
            ents: Vec::new(),
            gents: Vec::new(),
            duals: Vec::new(),
            ncpus: 0,
            group_parent: Vec::new(),
            group_shares: Vec::new(),
            group_weight: Vec::new(),
            cpus: Vec::new(),
            tick_ns: 1_000_000,
            tick_phase_ns: 0,
            nr_examined: 0,
            nr_bweight_changes: 0,
            nr_punished: 0,
            nr_retries: 0,
            nr_lb_moved: 0,
            nr_to_normal: 0,
            nr_wake_normal: 0,
            nr_normal_over_inter: 0,
            nr_periods_used_up: 0,
            nr_wake_affine: 0,
            nr_active_balance: 0,
            premoved: Vec::new(),
            pending_active: Vec::new(),
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

    /// The virtual time of the root dual runqueue of `cpu`.
    pub fn vtime_of(&self, cpu: CpuId) -> u64 {
        self.duals[cpu.idx()].vtime
    }

    /// `cpu`'s normal slice, ns.
    pub fn normal_slice_of(&self, cpu: CpuId) -> Ns {
        self.cpus[cpu.idx()].slice.slice_ns()
    }

    /// The entity of `group` on `cpu`: its runqueue and weight (`None` for the root or while not
    /// queued).
    pub fn group_entity(&self, group: usize, cpu: CpuId) -> Option<(Kind, u64)> {
        let e = &self.gents[group * self.ncpus + cpu.idx()];
        (group != 0 && e.queued).then_some((e.kind, e.weight))
    }

    /// The distance of `group`'s entity on `cpu` from its runqueue's vtime.
    pub fn group_vdiff(&self, group: usize, cpu: CpuId) -> i64 {
        self.vdiff(Se::Group((group * self.ncpus + cpu.idx()) as u32))
    }

    fn ent(&self, se: Se) -> &Ent {
        match se {
            Se::Task(t) => &self.ents[t.idx()],
            Se::Group(d) => &self.gents[d as usize],
        }
    }

    fn ent_mut(&mut self, se: Se) -> &mut Ent {
        match se {
            Se::Task(t) => &mut self.ents[t.idx()],
            Se::Group(d) => &mut self.gents[d as usize],
        }
    }

    fn group_of_dual(&self, d: usize) -> usize {
        d / self.ncpus
    }

    /// Sec. 4.9.1's check, "frequently" (at every tick): each entity waiting on one of `cpu`'s
    /// interactive runqueues for more than 10 ms raises `sliceshrink` once per wait. Each priority
    /// queue is FIFO by queueing time, so its walk stops at the first entity not late yet.
    fn note_late_waiters(&mut self, cpu: CpuId, now: Ns) {
        // The running task and its group entities stay queued while they run (the Linux
        // convention): they are not waiting.
        let mut running = Vec::new();
        let mut se = self.cpus[cpu.idx()].curr.map(Se::Task);
        while let Some(x) = se {
            running.push(x);
            let d = self.ent(x).dual;
            se = (d >= self.ncpus).then_some(Se::Group(d as u32));
        }
        let mut late = Vec::new();
        for d in (cpu.idx()..self.duals.len()).step_by(self.ncpus) {
            let inter = &self.duals[d].inter;
            for &level in inter.sorted_levels() {
                for &se in inter.queue(level) {
                    self.nr_examined += 1;
                    let e = self.ent(se);
                    if now.saturating_sub(e.enq_at) <= slice::LATE_NS {
                        break;
                    }
                    if !e.late_noted && !running.contains(&se) {
                        late.push(se);
                    }
                }
            }
        }
        for se in late {
            self.ent_mut(se).late_noted = true;
            self.cpus[cpu.idx()].slice.latency_too_high(now);
        }
    }

    /// The dual runqueue the entity of dual `d` is queued in.
    fn parent_dual(&self, d: usize) -> usize {
        self.group_parent[self.group_of_dual(d)] * self.ncpus + d % self.ncpus
    }

    fn weight_of(ctx: &Ctx, t: TaskId) -> u64 {
        match ctx.task(t).class {
            SchedClass::Idle => WEIGHT_IDLEPRIO,
            _ => nice_to_weight(ctx.task(t).nice),
        }
    }

    /// The signed distance of an entity's vruntime from its dual runqueue's vtime (overflow-safe).
    fn vdiff(&self, se: Se) -> i64 {
        let e = self.ent(se);
        e.vruntime.wrapping_sub(self.duals[e.dual].vtime) as i64
    }

    /// Queues `se` in dual `d` in its runqueue and level.
    fn enqueue_se(&mut self, d: usize, se: Se, now: Ns) {
        let e = self.ent_mut(se);
        e.queued = true;
        e.dual = d;
        e.enq_at = now;
        e.late_noted = false;
        let (kind, level, w) = (e.kind, e.level, e.weight);
        let ncpus = self.ncpus;
        let dual = &mut self.duals[d];
        if dual.is_empty() {
            dual.balancect = if kind == Kind::Inter { 1 } else { -1 };
        }
        match kind {
            Kind::Inter => dual.inter.enqueue(level, se, BWEIGHTS[level]),
            Kind::Normal => dual.normal.enqueue(level, se, BWEIGHTS[level]),
        }
        dual.weight += w;
        let g = d / ncpus;
        if g != 0 {
            self.group_weight[g] += w;
        }
    }

    /// Takes `se` off its dual runqueue, where it sits in runqueue `kind` at `level`.
    fn dequeue_se(&mut self, se: Se, kind: Kind, level: usize) {
        let e = self.ent_mut(se);
        e.queued = false;
        let (d, w) = (e.dual, e.weight);
        let dual = &mut self.duals[d];
        match kind {
            Kind::Inter => dual.inter.dequeue(level, se, BWEIGHTS[level]),
            Kind::Normal => dual.normal.dequeue(level, se, BWEIGHTS[level]),
        }
        dual.weight -= w;
        let g = d / self.ncpus;
        if g != 0 {
            self.group_weight[g] -= w;
        }
    }

    /// Moves a queued entity to runqueue `kind` of its dual runqueue.
    fn move_se(&mut self, se: Se, kind: Kind, now: Ns) {
        let e = *self.ent(se);
        if e.kind == kind {
            return;
        }
        self.dequeue_se(se, e.kind, e.level);
        self.ent_mut(se).kind = kind;
        self.enqueue_se(e.dual, se, now);
        self.steer_if_empty(e.dual);
    }

    /// "Whenever a runqueue gets empty, the balancect has to be set to -1 or 1": checked once an entity
    /// has really left or changed runqueue (a requeue after a run passes through an empty runqueue
    /// without emptying it).
    fn steer_if_empty(&mut self, d: usize) {
        let dual = &mut self.duals[d];
        if dual.inter.is_empty() && !dual.normal.is_empty() {
            dual.balancect = -1;
        } else if dual.normal.is_empty() && !dual.inter.is_empty() {
            dual.balancect = 1;
        }
    }

    /// CFS's `update_cfs_shares` for the entity of group dual `d`: the group's shares in proportion to
    /// its load on this CPU, at least `MIN_SHARES`.
    fn update_shares(&mut self, d: usize) {
        let g = self.group_of_dual(d);
        if g == 0 {
            return;
        }
        let (load, total, shares) = (self.duals[d].weight, self.group_weight[g], self.group_shares[g]);
        let w = (shares * load).checked_div(total).unwrap_or(shares).clamp(MIN_SHARES, shares);
        let e = &self.gents[d];
        if e.weight == w {
            return;
        }
        if e.queued {
            // The parent's sums follow the new weight.
            let old = e.weight;
            let pd = e.dual;
            self.duals[pd].weight = self.duals[pd].weight - old + w;
            let pg = self.group_of_dual(pd);
            if pg != 0 {
                self.group_weight[pg] = self.group_weight[pg] - old + w;
            }
        }
        self.gents[d].set_weight(w);
    }

    /// Places a waking entity (a task, or a group entity whose runqueue gets its first entity) in
    /// dual `d`: keep its vruntime within vthreshold of vtime (eq. 18) and put it on the interactive
    /// runqueue unless it is already more than 1 ms ahead of vtime.
    ///
    /// Sec. 4.4 says "newly woken tasks are always enqueued on the interactive runqueue" and, in the
    /// same paragraph, that a task may be 1 ms ahead "before switching to the normal runqueue", decided
    /// by comparing vruntime and vtime; sec. 4.1.1 checks the vruntime at every enqueue. The results
    /// decide between the readings: hackbench's processes, which block on nearly every read, switch
    /// to the normal runqueue "after a short time" and stay there, their switches "dropping to a
    /// level, which is desired by the task through leaving the CPU" (sec. 5.2.2, 5.2.4), which they
    /// could not do if every wakeup put them back on the interactive runqueue. A task that slept long
    /// enough to fall behind vtime (an interactive one) still always enters it.
    fn place_waking(&mut self, se: Se, d: usize) {
        let always_inter = self.p.wake_runqueue == WakeRunqueue::Interactive;
        let vtime = self.duals[d].vtime;
        let shift = 32u32.saturating_sub(self.p.wakeupthr + VTIME_ACCURACY);
        let e = self.ent_mut(se);
        let vthr = ((e.invweight as u128 * STATIC_TIMESLICE as u128) >> shift) as i64;
        let vdiff = e.vruntime.wrapping_sub(vtime) as i64;
        if vdiff < -vthr {
            e.vruntime = vtime.wrapping_sub(vthr as u64);
        } else if vdiff > vthr {
            e.vruntime = vtime.wrapping_add(vthr as u64);
        }
        let vdiff = e.vruntime.wrapping_sub(vtime) as i64;
        let ahead = e.vtime_of(AHEAD_LIMIT_NS) as i64;
        e.kind = if vdiff > ahead && !always_inter { Kind::Normal } else { Kind::Inter };
        if e.kind == Kind::Normal {
            self.nr_wake_normal += 1;
        }
    }

    /// After a task joined group dual `d`: bring the group entities above up to date, queueing those
    /// that were not, and pulling already queued ones to the interactive runqueue while everything
    /// below is interactive and their vruntime allows it (sec. 4.7).
    fn enqueue_up(&mut self, mut d: usize, now: Ns) {
        let mut child_inter = !self.duals[d].inter.is_empty();
        let mut pulling = true;
        while self.group_of_dual(d) != 0 {
            let gse = Se::Group(d as u32);
            let pd = self.parent_dual(d);
            self.update_shares(d);
            if !self.gents[d].queued {
                if self.gents[d].slept_at.take().is_none() {
                    self.gents[d].vruntime = self.duals[pd].vtime;
                }
                // Its weight follows the group's load on this CPU, so its bweight is initialised
                // afresh from it each time it is queued (a choice, see htfs.md).
                let g = &mut self.gents[d];
                g.level = initial_level(g.weight);
                self.place_waking(gse, pd);
                self.enqueue_se(pd, gse, now);
                self.steer_if_empty(pd);
            } else if pulling && child_inter && self.gents[d].kind == Kind::Normal {
                let ahead = self.gents[d].vtime_of(AHEAD_LIMIT_NS) as i64;
                if self.vdiff(gse) <= ahead {
                    self.move_se(gse, Kind::Inter, now);
                } else {
                    pulling = false;
                }
            }
            child_inter = self.gents[d].kind == Kind::Inter;
            d = pd;
        }
    }

    /// After an entity left group dual `d`: remove group entities whose runqueue emptied, and move
    /// those whose interactive runqueue emptied to the normal runqueue (sec. 4.7).
    fn dequeue_up(&mut self, mut d: usize, now: Ns) {
        while self.group_of_dual(d) != 0 {
            let gse = Se::Group(d as u32);
            let pd = self.parent_dual(d);
            self.update_shares(d);
            let g = self.gents[d];
            if g.queued && self.duals[d].is_empty() {
                self.dequeue_se(gse, g.kind, g.level);
                self.steer_if_empty(pd);
                self.gents[d].slept_at = Some(now);
            } else if g.queued && g.kind == Kind::Inter && self.duals[d].inter.is_empty() {
                self.move_se(gse, Kind::Normal, now);
            }
            d = pd;
        }
    }

    /// The dual runqueue's choice (sec. 4.4); `prefer_inter` after a preemption or, below the root,
    /// once an interactive entity was chosen above (sec. 4.7).
    fn choose_kind(&mut self, d: usize, prefer_inter: bool) -> Option<Kind> {
        let shift = self.cpus[d % self.ncpus].slice.shift - INTER_SLICE_SHIFT + INTER_WEIGHT_SHIFT;
        let dual = &mut self.duals[d];
        let kind = match (dual.inter.is_empty(), dual.normal.is_empty()) {
            (true, true) => return None,
            (false, true) => Kind::Inter,
            (true, false) => Kind::Normal,
            (false, false) if prefer_inter || dual.balancect >= 0 => Kind::Inter,
            (false, false) => {
                self.nr_normal_over_inter += 1;
                Kind::Normal
            }
        };
        if !dual.inter.is_empty() && !dual.normal.is_empty() {
            match kind {
                Kind::Inter => dual.balancect -= dual.normal.bweight as i64,
                Kind::Normal => dual.balancect += (dual.inter.bweight << shift) as i64,
            }
        }
        Some(kind)
    }

    /// After a run from the normal runqueue: move the bweight one level if the entity keeps drifting
    /// from vtime (sec. 4.6). Returns true when a top-level entity still falls behind (it should go
    /// interactive).
    fn adjust_bweight(&mut self, se: Se) -> bool {
        let vdiff = self.vdiff(se);
        let boostthr = self.p.boostthr;
        let e = self.ent_mut(se);
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

    /// After an entity that stays queued ran: adjust its bweight and runqueue, and requeue it at the
    /// tail of its priority queue (or in its new one).
    fn requeue_after_run(&mut self, se: Se, now: Ns) {
        let old = *self.ent(se);
        // vtime only moves with the normal runqueue, so only runs from it say whether the entity keeps
        // up (a choice, see htfs.md).
        let to_inter = old.kind == Kind::Normal && self.adjust_bweight(se);
        let vdiff = self.vdiff(se);
        let e = *self.ent(se);
        let ahead = e.vtime_of(AHEAD_LIMIT_NS) as i64;
        let kind = match old.kind {
            Kind::Inter if vdiff > ahead => {
                self.nr_to_normal += 1;
                Kind::Normal
            }
            Kind::Normal if to_inter => Kind::Inter,
            k => k,
        };
        if (kind, e.level) == (old.kind, old.level) {
            let e = self.ent_mut(se);
            e.enq_at = now;
            e.late_noted = false;
            let dual = &mut self.duals[old.dual];
            match kind {
                Kind::Inter => dual.inter.requeue_tail(old.level, se),
                Kind::Normal => dual.normal.requeue_tail(old.level, se),
            }
            return;
        }
        self.dequeue_se(se, old.kind, old.level);
        self.ent_mut(se).kind = kind;
        self.enqueue_se(old.dual, se, now);
        self.steer_if_empty(old.dual);
    }

    /// Per-CPU task counts and load sums as `t` joins or leaves `cpu`.
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

    /// The entities from task `t` up to the root, each with the dual runqueue it is queued in.
    fn path(&self, t: TaskId) -> Vec<Se> {
        let mut out = vec![Se::Task(t)];
        let mut d = self.ents[t.idx()].dual;
        while self.group_of_dual(d) != 0 {
            out.push(Se::Group(d as u32));
            d = self.parent_dual(d);
        }
        out
    }
}

impl SchedPolicy for Htfs {
    fn name(&self) -> &str {
        "htfs"
    }

    fn init(&mut self, ctx: &Ctx) {
        self.tick_ns = ctx.tick_ns;
        self.tick_phase_ns = ctx.tick_phase_ns;
        self.ncpus = ctx.nr_cpus();
        let ngroups = ctx.groups.len().max(1);
        self.group_parent = (0..ngroups)
            .map(|g| ctx.groups.get(g).and_then(|i| i.parent).map_or(0, |p| p.0 as usize))
            .collect();
        self.group_shares = (0..ngroups).map(|g| ctx.groups.get(g).map_or(1024, |i| i.shares)).collect();
        self.group_weight = vec![0; ngroups];
        self.duals = vec![Dual::default(); ngroups * self.ncpus];
        self.gents =
            (0..ngroups * self.ncpus).map(|d| Ent::new(self.group_shares[d / self.ncpus].max(1))).collect();
        self.cpus = domains::build_all(ctx.topo, ctx.numa, Style::Linux2638)
            .into_iter()
            .zip(ctx.topo.cpus())
            .map(|(domains, cpu)| Cpu {
                slice: AdaptiveSlice::new(ctx.now),
                period_used: 0,
                curr: None,
                curr_inter: false,
                resched: false,
                preempt_inter: false,
                cont: None,
                nr_running: 0,
                load: 0,
                sum_avgload: 0,
                avg: 0,
                cpu_load: [0; CPU_LOAD_IDX_MAX],
                last_load_tick: 0,
                domains,
                power: domains::cpu_power(ctx.topo, cpu),
                avg_idle: 2 * balance::MIGRATION_COST_NS,
                idle_stamp: 0,
            })
            .collect();
    }

    fn task_new(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        if self.ents.len() <= t.idx() {
            self.ents.resize(t.idx() + 1, Ent::new(1024));
        }
        if self.premoved.len() <= t.idx() {
            self.premoved.resize(t.idx() + 1, false);
        }
        self.ents[t.idx()] = Ent::new(Self::weight_of(ctx, t));
        // CFS 2.6.38's select_task_rq_fair (SD_BALANCE_FORK) from the parent's CPU.
        self.select_fork_cpu(ctx, t, ctx.task(t).cpu)
    }

    fn select_cpu(&mut self, ctx: &Ctx, t: TaskId, wake: &WakeInfo) -> CpuId {
        // CFS 2.6.38's select_task_rq_fair for a wakeup (wake_affine, select_idle_sibling).
        self.select_wake_cpu(ctx, t, wake.waker_cpu, wake.waker, wake.sync)
    }

    fn enqueue(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: EnqueueReason) {
        if why == EnqueueReason::Migrated && std::mem::take(&mut self.premoved[t.idx()]) {
            return; // pull_task moved it already
        }
        if why == EnqueueReason::Wakeup {
            self.note_idle_end(cpu, ctx.now);
        }
        let d = (ctx.task(t).group.0 as usize).min(self.group_parent.len() - 1) * self.ncpus + cpu.idx();
        let vtime = self.duals[d].vtime;
        let se = Se::Task(t);
        match why {
            EnqueueReason::New => {
                let e = &mut self.ents[t.idx()];
                e.vruntime = vtime;
                e.kind = Kind::Inter;
            }
            EnqueueReason::Wakeup => {
                // Average load decays over the sleep: halved every 4 slices (eq. 28).
                let slice = self.cpus[cpu.idx()].slice.slice_ns().max(1);
                let e = &mut self.ents[t.idx()];
                if let Some(at) = e.slept_at.take() {
                    let turns = ctx.now.saturating_sub(at) / slice;
                    e.avgload >>= (turns / 4).min(63);
                }
                self.place_waking(se, d);
            }
            // A migration or a class change: the vruntime was made relative at the dequeue.
            EnqueueReason::Migrated | EnqueueReason::Restore => {
                let e = &mut self.ents[t.idx()];
                e.vruntime = e.vruntime.wrapping_add(vtime);
            }
        }
        self.account(cpu, t, true);
        self.enqueue_se(d, se, ctx.now);
        self.steer_if_empty(d);
        self.enqueue_up(d, ctx.now);
    }

    /// A new nice level. The thesis does not describe one, so the task's entity is reweighted the
    /// way its group entities are (`update_shares`, after CFS's `reweight_entity`): the sums it is
    /// counted in (its dual runqueue's weight, its group's, its CPU's load) follow the new weight,
    /// and its boosted-weight level moves by as many levels as its weight's own level did (the
    /// boost it earned is kept, as are its vruntime, kind and average load); a queued entity goes
    /// to the priority queue of its new level. No reschedule.
    fn group_new(&mut self, ctx: &Ctx, g: schedlab_core::GroupId) {
        // The taskgroup's dual runqueue and entity on every CPU, as `init` makes them.
        if g.0 as usize != self.group_parent.len() {
            return;
        }
        let info = ctx.groups[g.0 as usize];
        self.group_parent.push(info.parent.map_or(0, |p| p.0 as usize));
        self.group_shares.push(info.shares);
        self.group_weight.push(0);
        self.duals.extend((0..self.ncpus).map(|_| Dual::default()));
        self.gents.extend((0..self.ncpus).map(|_| Ent::new(info.shares.max(1))));
    }

    /// A change between SCHED_OTHER, BATCH and IDLE (RT tasks run in `LinuxClasses` above): the
    /// task is off its runqueue (`dequeue(.., Save)`), so only its weight follows the class
    /// (`WEIGHT_IDLEPRIO` for SCHED_IDLE), its boosted-weight level moving as in `set_nice`; the
    /// enqueue that follows counts it at the new weight.
    fn set_class(&mut self, ctx: &Ctx, t: TaskId, _old_class: SchedClass, _old_rt_priority: u8) {
        let w = Self::weight_of(ctx, t);
        let e = self.ents[t.idx()];
        if e.weight == w || e.queued {
            return;
        }
        let shift = initial_level(w) as i64 - initial_level(e.weight) as i64;
        let ent = &mut self.ents[t.idx()];
        ent.set_weight(w);
        ent.level = (e.level as i64 + shift).clamp(0, BWEIGHTS.len() as i64 - 1) as usize;
    }

    fn set_nice(&mut self, ctx: &Ctx, t: TaskId, _old_nice: i8) -> Option<CpuId> {
        let w = Self::weight_of(ctx, t);
        let e = self.ents[t.idx()];
        if e.weight == w {
            return None;
        }
        let se = Se::Task(t);
        let balancect = self.duals[e.dual].balancect;
        if e.queued {
            self.dequeue_se(se, e.kind, e.level);
        }
        let info = ctx.task(t);
        if matches!(info.state, schedlab_core::TaskState::Runnable | schedlab_core::TaskState::Running)
            && !self.premoved[t.idx()]
        {
            let c = &mut self.cpus[info.cpu.idx()];
            c.load = c.load - e.weight + w;
        }
        let shift = initial_level(w) as i64 - initial_level(e.weight) as i64;
        let ent = &mut self.ents[t.idx()];
        ent.set_weight(w);
        ent.level = (e.level as i64 + shift).clamp(0, BWEIGHTS.len() as i64 - 1) as usize;
        if e.queued {
            self.enqueue_se(e.dual, se, e.enq_at);
            self.duals[e.dual].balancect = balancect;
            self.update_shares(e.dual);
        }
        None
    }

    fn dequeue(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, _why: DequeueReason) {
        if self.premoved[t.idx()] {
            return; // pull_task moved it already; `enqueue(.., Migrated)` follows
        }
        if self.cpus[cpu.idx()].cont.is_some_and(|c| c.0 == t) {
            self.cpus[cpu.idx()].cont = None;
        }
        let e = self.ents[t.idx()];
        self.dequeue_se(Se::Task(t), e.kind, e.level);
        self.steer_if_empty(e.dual);
        self.dequeue_up(e.dual, ctx.now);
        self.account(cpu, t, false);
        let vtime = self.duals[e.dual].vtime;
        let e = &mut self.ents[t.idx()];
        e.vruntime = e.vruntime.wrapping_sub(vtime);
    }

    fn pick_next(&mut self, ctx: &Ctx, cpu: CpuId) -> Option<Dispatch> {
        let now = ctx.now;
        if let Some((t, at)) = self.cpus[cpu.idx()].cont.take() {
            if at == now {
                // Lock acquire retry: the same task goes on with what is left of its slice.
                let e = &self.ents[t.idx()];
                let left = (e.started + e.granted).saturating_sub(now).max(1);
                self.cpus[cpu.idx()].curr = Some(t);
                return Some(Dispatch { task: t, slice_ns: Some(left) });
            }
            // A real-time task ran first: the continued task was left where it ran; requeue it as
            // put_prev would have (its run is accounted at its next put_prev).
            self.requeue_after_run(Se::Task(t), now);
        }
        let c = &mut self.cpus[cpu.idx()];
        c.resched = false;
        // After a preemption, and once interactive entities have used part of the current normal-slice
        // period ("as soon as there is less time remaining than a normal timeslice the scheduler tries
        // to only run interactive tasks", sec. 4.9), the interactive runqueue goes first.
        let mut prefer_inter = std::mem::take(&mut c.preempt_inter) || c.period_used > 0;
        // Descend from the root, choosing a runqueue and a priority queue at each level (sec. 4.7).
        let mut d = cpu.idx();
        let mut path_inter = false;
        let mut chosen = Vec::new();
        let t = loop {
            let kind = self.choose_kind(d, prefer_inter)?;
            let dual = &mut self.duals[d];
            let (se, checked) = match kind {
                Kind::Inter => dual.inter.pick(),
                Kind::Normal => dual.normal.pick(),
            }?;
            self.nr_examined += checked as u64;
            path_inter |= kind == Kind::Inter;
            prefer_inter = path_inter;
            chosen.push(se);
            match se {
                Se::Task(t) => break t,
                Se::Group(g) => d = g as usize,
            }
        };
        let c = &mut self.cpus[cpu.idx()];
        let normal = c.slice.slice_ns();
        let granted = match (path_inter, c.period_used > 0) {
            (true, _) => INTER_SLICE,
            (false, true) => normal.saturating_sub(c.period_used).max(INTER_SLICE),
            (false, false) => normal,
        };
        c.curr = Some(t);
        c.curr_inter = path_inter;
        let e = &self.ents[t.idx()];
        if e.kind == Kind::Inter && !e.late_noted && now.saturating_sub(e.enq_at) > slice::LATE_NS {
            c.slice.latency_too_high(now);
        }
        for se in chosen {
            let e = self.ent_mut(se);
            e.granted = granted;
            e.started = now;
        }
        Some(Dispatch { task: t, slice_ns: Some(granted) })
    }

    fn put_prev(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: SwitchReason) {
        let now = ctx.now;
        self.cpus[cpu.idx()].curr = None;
        if why == SwitchReason::Yielded && self.cpus[cpu.idx()].cont.is_some_and(|c| c.0 == t) {
            return; // continued: it stays as it is and pick_next returns it
        }
        // A continuation is for the pick right after its sched_yield only; a yield the engine did not
        // act on (nothing else to run) leaves none behind for a later pick, when the task may be
        // elsewhere.
        if self.cpus[cpu.idx()].cont.is_some_and(|c| c.0 == t) {
            self.cpus[cpu.idx()].cont = None;
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
        // Every entity of the path ran: its vruntime grows, and the vtime of its dual runqueue moves
        // if it ran from the normal runqueue (eq. 19), taking that runqueue as one entity.
        let path = self.path(t);
        let time = match self.p.vtime_early {
            _ if preempted => ran,
            VtimeEarly::Granted => e.granted,
            VtimeEarly::Charged => ran + punish,
        };
        for &se in &path {
            let s = *self.ent(se);
            let dual = &mut self.duals[s.dual];
            if s.kind == Kind::Normal && dual.normal.bweight > 0 {
                let inv = (1u128 << 32) / dual.normal.bweight as u128;
                dual.vtime = dual.vtime.wrapping_add(((time as u128 * inv) >> (32 - VTIME_ACCURACY)) as u64);
            }
            let s = self.ent_mut(se);
            s.vruntime = s.vruntime.wrapping_add(s.vtime_of(ran + punish));
        }
        let c = &mut self.cpus[cpu.idx()];
        if c.curr_inter {
            c.period_used += ran;
            if c.period_used >= c.slice.slice_ns() {
                c.period_used = 0;
                self.nr_periods_used_up += 1;
            }
        } else {
            c.period_used = 0;
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
        self.ents[t.idx()].avgload = new_avg;
        let se = Se::Task(t);
        if why.still_runnable() {
            self.requeue_after_run(se, now);
        } else {
            if why == SwitchReason::Blocked {
                if e.kind == Kind::Normal {
                    self.adjust_bweight(se);
                }
                self.ents[t.idx()].slept_at = Some(now);
            }
            self.dequeue_se(se, e.kind, e.level);
            self.steer_if_empty(e.dual);
            self.account(cpu, t, false);
        }
        // The group entities above: requeued after their run while still queued, removed or moved to
        // the normal runqueue as their runqueues emptied.
        for &gse in &path[1..] {
            if self.ent(gse).queued {
                self.requeue_after_run(gse, now);
            }
        }
        self.dequeue_up(e.dual, now);
    }

    fn tick(&mut self, ctx: &Ctx, cpu: CpuId, _curr: TaskId) -> bool {
        self.update_cpu_load(cpu, ctx.now);
        self.note_late_waiters(cpu, ctx.now);
        let c = &mut self.cpus[cpu.idx()];
        c.slice.tick(ctx.now);
        std::mem::take(&mut c.resched)
    }

    fn check_preempt(&mut self, ctx: &Ctx, cpu: CpuId, curr: TaskId, woken: TaskId, _kind: WakeKind) -> bool {
        let c = &self.cpus[cpu.idx()];
        if c.resched || c.curr_inter || self.ents[woken.idx()].kind != Kind::Inter {
            return false;
        }
        let e = &self.ents[curr.idx()];
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
        // Sec. 4.11: "If rundiff is less than 2^5 a new task is scheduled", and "if the runtime is less
        // than 2^8, there is also a new scheduling"; otherwise the task continues (at most 20 times in
        // a row, and not when its slice is nearly used up).
        let new_task = rundiff < RETRY_RUNDIFF_NS || runtime < RETRY_RUNTIME_NS;
        if !new_task && e.conts < RETRY_MAX && left > PUNISH_TOLERANCE {
            e.conts += 1;
            self.nr_retries += 1;
            self.cpus[cpu.idx()].cont = Some((t, now));
        } else {
            e.conts = 0;
        }
    }

    fn balance(&mut self, ctx: &Ctx, cpu: CpuId, kind: BalanceKind, out: &mut Vec<Migration>) {
        if ctx.nr_cpus() < 2 {
            return;
        }
        // CFS 2.6.38's balancing (sec. 4.10); rebalance_domains tests each domain's interval.
        match kind {
            BalanceKind::Periodic => self.rebalance_domains(ctx, cpu, IdleType::NotIdle, out),
            BalanceKind::NohzIdle => self.rebalance_domains(ctx, cpu, IdleType::Idle, out),
            BalanceKind::NewlyIdle => self.idle_balance(ctx, cpu, out),
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
                name: "nr_late_inter",
                value: self.cpus.iter().map(|c| c.slice.nr_late).sum(),
                help: "interactive entities seen waiting over 10 ms (sec. 4.9.1: latency too high)",
            },
            PolicyStat {
                name: "nr_slice_halved",
                value: self.cpus.iter().map(|c| c.slice.nr_halved).sum(),
                help: "normal-slice halvings after late interactive entities",
            },
            PolicyStat {
                name: "nr_slice_doubled",
                value: self.cpus.iter().map(|c| c.slice.nr_doubled).sum(),
                help: "normal-slice doublings after 100 ms without a late one",
            },
            PolicyStat {
                name: "min_slice_shift",
                value: self.cpus.iter().map(|c| c.slice.min_shift as u64).min().unwrap_or(0),
                help: "shortest normal slice any CPU reached, as its power of two in ns",
            },
            PolicyStat {
                name: "nr_to_normal",
                value: self.nr_to_normal,
                help: "moves from the interactive to the normal runqueue",
            },
            PolicyStat {
                name: "nr_wake_normal",
                value: self.nr_wake_normal,
                help: "wakeups placed on the normal runqueue, more than 1 ms ahead of vtime",
            },
            PolicyStat {
                name: "nr_normal_over_inter",
                value: self.nr_normal_over_inter,
                help: "normal runqueue picked while interactive entities waited (balancect < 0)",
            },
            PolicyStat {
                name: "nr_periods_used_up",
                value: self.nr_periods_used_up,
                help: "normal-slice periods used up by interactive entities (the period rule lapses)",
            },
            PolicyStat { name: "nr_lb_moved", value: self.nr_lb_moved, help: "tasks moved by the balancer" },
            PolicyStat {
                name: "nr_active_balance",
                value: self.nr_active_balance,
                help: "running tasks' CPUs pushed a task by the stopper (active balancing)",
            },
            PolicyStat {
                name: "nr_wake_affine",
                value: self.nr_wake_affine,
                help: "wakeups placed by wake_affine on the waker's side",
            },
        ]
    }

    fn work_conservation(&self) -> WorkConservation {
        WorkConservation::PerCpu
    }

    fn counts_fork_placement(&self) -> bool {
        // Built on 2.6.38, whose wake_up_new_task counts the move (set_task_cpu).
        true
    }

    fn exec_cpu(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId) -> Option<CpuId> {
        // 2.6.38's sched_exec: select_task_rq_fair (SD_BALANCE_EXEC), CFS's code as for forks.
        Some(self.select_exec_cpu(ctx, t, cpu))
    }

    fn nr_runnable(&self) -> Option<usize> {
        Some(self.cpus.iter().map(|c| c.nr_running as usize).sum())
    }

    fn trace_values(&self, t: TaskId, out: &mut Vec<(&'static str, i64)>) {
        if let Some(e) = self.ents.get(t.idx()) {
            out.push(("htfs bweight level", e.level as i64));
            out.push(("htfs interactive", (e.kind == Kind::Inter) as i64));
            out.push(("htfs vdiff", self.vdiff(Se::Task(t))));
            let cpu = e.dual % self.ncpus;
            out.push(("htfs normal slice shift", self.cpus[cpu].slice.shift as i64));
            let dual = &self.duals[e.dual];
            out.push(("htfs balancect", dual.balancect));
            out.push(("htfs inter bweight", dual.inter.bweight as i64));
            out.push(("htfs normal bweight", dual.normal.bweight as i64));
            out.push(("htfs period used", self.cpus[cpu].period_used as i64));
        }
    }
}
