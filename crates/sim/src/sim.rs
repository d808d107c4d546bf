//! The engine: CPUs, tasks, the event loop and the scheduling mechanics around the policy hooks.
//!
//! ## CPU time
//!
//! A CPU is idle or runs one task. When a task is switched in at time `t`, the CPU first spends an
//! *overhead* period (the scheduling decision, `sched_base_ns + sched_per_task_ns x tasks examined`,
//! plus `context_switch_ns` if the task changed) and the task makes progress only from
//! `useful_start = t + overhead`. Time is accounted lazily by [`Sim::settle`], which splits the
//! elapsed time of the running segment into overhead and task time and applies the task's progress.
//! So for every CPU, busy + idle + overhead equals the run's length exactly (checked in tests).
//!
//! ## Cache warmth
//!
//! When a task is switched in on a CPU other than the one it last ran on, it runs at
//! `cold_speed_pct` for `refill_*_ns` (chosen by the topology level crossed); when it comes back to the
//! same CPU after other tasks ran there for `evict_after_ns`, it runs cold for `refill_evicted_ns`.
//! A forked task (process or thread) starts with its parent's memory image, which is in the caches
//! of the CPU its parent forked it on: it counts as having last run there, so a child placed on
//! another CPU refills, and one that starts on the parent's CPU after others ran there long enough
//! counts as evicted. Only `Compute` work slows down; `Spin` is wall-clock time.

use crate::event::{Ev, EventQueue};
use crate::exec::{Barrier, Device, Pipe, SyncMutex};
use crate::machine::Machine;
use crate::report::{self, RunReport, Series};
use crate::Histogram;
use schedlab_core::{
    BalanceKind, CpuId, CpuInfo, CpuSet, Ctx, DequeueReason, Dispatch, EnqueueReason, GroupId, GroupInfo,
    Level, Migration, Ns, SchedClass, SchedPolicy, SwitchReason, TaskId, TaskInfo, TaskState, WaitKind,
    WakeInfo, WakeKind, WorkConservation,
};
use schedlab_workload::{Op, StopWhen, Workload};
use std::collections::VecDeque;

/// How to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunConfig {
    /// The run ends at this time at the latest.
    pub duration_ns: Ns,
    /// The run's seed (reported; passed to the policy through `Ctx::seed`).
    pub seed: u64,
    /// Time-series sampling interval (0 = no series).
    pub sample_interval_ns: Ns,
    /// Also sample each task's cumulative run time (large for many tasks).
    pub sample_tasks: bool,
    /// Keep the per-CPU timeline of who ran where (`RunReport::timeline`, bounded in size; see
    /// [`crate::timeline`]).
    pub timeline: bool,
    /// Check engine/policy invariants after every event (slow; on in tests).
    pub check_invariants: bool,
    /// With `check_invariants`, check after every this many events (1 = every event; long soak runs
    /// use more, since a check walks every task).
    pub invariant_every: u64,
    /// Most tasks a run may create (initial plus forked).
    pub max_tasks: usize,
    /// Record every context switch and wakeup for a trace ([`Sim::run_traced`]).
    pub trace: bool,
    /// Most events a run may handle before it stops with [`RunError::Limit`] (a runaway guard:
    /// the default, 10 billion, is over an hour of wall time).
    pub max_events: u64,
    /// Longest simulated duration a run may ask for ([`RunError::Setup`] beyond it).
    pub max_duration_ns: Ns,
    /// Most trace events a traced run may record ([`RunError::Limit`] beyond it; each takes
    /// about 40 bytes of memory and 20 of the Perfetto file).
    pub max_trace_events: usize,
    /// Where the periodic ticks fall relative to the run's start: at `tick_phase_ns + k * tick_ns`
    /// (below one tick; [`RunError::Setup`] otherwise). 0, the default, puts a tick at the start.
    /// A real run starts at an arbitrary point between two ticks, and a workload whose timers keep
    /// one phase against the tick can behave differently at each phase (docs/validation.md).
    pub tick_phase_ns: Ns,
}

/// Defaults of the run limits (`RunConfig::max_*`).
pub mod limits {
    use schedlab_core::{Ns, NSEC_PER_SEC};
    /// [`super::RunConfig::max_tasks`].
    pub const MAX_TASKS: usize = 200_000;
    /// [`super::RunConfig::max_events`].
    pub const MAX_EVENTS: u64 = 10_000_000_000;
    /// [`super::RunConfig::max_duration_ns`]: 30 simulated days.
    pub const MAX_DURATION_NS: Ns = 30 * 86_400 * NSEC_PER_SEC;
    /// [`super::RunConfig::max_trace_events`].
    pub const MAX_TRACE_EVENTS: usize = 50_000_000;
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            duration_ns: 10 * schedlab_core::NSEC_PER_SEC,
            seed: 1,
            sample_interval_ns: 10 * schedlab_core::NSEC_PER_MSEC,
            sample_tasks: false,
            timeline: false,
            check_invariants: cfg!(debug_assertions),
            invariant_every: 1,
            max_tasks: limits::MAX_TASKS,
            trace: false,
            max_events: limits::MAX_EVENTS,
            max_duration_ns: limits::MAX_DURATION_NS,
            max_trace_events: limits::MAX_TRACE_EVENTS,
            tick_phase_ns: 0,
        }
    }
}

/// Why a run stopped without a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The policy returned something the engine cannot accept (a bug in the policy).
    #[error("policy `{policy}` violated the interface in `{hook}` at {now} ns: {msg}")]
    PolicyViolation {
        /// Policy name.
        policy: String,
        /// Hook.
        hook: &'static str,
        /// Simulated time.
        now: Ns,
        /// What went wrong.
        msg: String,
    },
    /// The workload did something impossible at run time (unlocking a mutex it does not own...).
    #[error("task `{task}` at op {op}, time {now} ns: {msg}")]
    Workload {
        /// Task name.
        task: String,
        /// Op index in its program.
        op: u32,
        /// Simulated time.
        now: Ns,
        /// What went wrong.
        msg: String,
    },
    /// An engine invariant failed (time not conserved, a task on two CPUs...).
    #[error("invariant violated at {now} ns: {msg}")]
    Invariant {
        /// Simulated time.
        now: Ns,
        /// Which invariant.
        msg: String,
    },
    /// The machine and workload do not fit (a task's CPU list names CPUs the machine lacks...).
    #[error("{0}")]
    Setup(String),
    /// The run reached one of its limits ([`RunConfig`]'s `max_*`) and stopped without a result.
    #[error("run stopped at {now} ns: {msg}")]
    Limit {
        /// Simulated time.
        now: Ns,
        /// Which limit, and how to raise it.
        msg: String,
    },
}

/// Seeds the round-trip stream apart from the run's own (`seed ^ SCX_STREAM`).
const SCX_STREAM: u64 = 0x5CE0_5CE0_5CE0_5CE0;

/// Per-CPU engine state.
#[derive(Clone, Debug, Default)]
pub(crate) struct Cpu {
    /// Start of the current accounting segment of the running task.
    pub seg_start: Ns,
    /// When the running task starts (or started) making progress after the switch overhead.
    pub useful_start: Ns,
    /// Generation of the pending `Segment` event.
    pub gen: u32,
    /// End of the slice given by the policy's `Dispatch`, if any.
    pub slice_end: Option<Ns>,
    /// A reschedule is wanted at the next opportunity.
    pub need_resched: bool,
    /// A `Resched` event is in flight.
    pub resched_pending: bool,
    /// The periodic tick is running (tickless idle stops it).
    pub tick_armed: bool,
    /// Accumulated task time.
    pub busy_ns: Ns,
    /// Accumulated idle time.
    pub idle_ns: Ns,
    /// Accumulated overhead (decisions, context switches).
    pub overhead_ns: Ns,
    /// When the CPU last became idle.
    pub idle_since: Ns,
    /// Context switches (task to task, task to idle, idle to task).
    pub nr_switches: u64,
    /// The task leaving this CPU while the next one is being picked (the trace's current task).
    pub leaving: Option<TaskId>,
    /// Cumulative time tasks ran here (for the eviction model).
    pub task_run_total: Ns,
    /// `task_run_total` when the running task was switched in: its run so far on this CPU is the
    /// difference (the run-length distributions, `Task::run_len`).
    pub stint_mark: Ns,
    /// Speed of the running task, permille of nominal, after contention (see [`crate::contention`]).
    pub speed: u32,
    /// Scheduling passes since the performance counters last rotated.
    pub pmc_passes: u32,
    /// The counters' current rotation (index into `schedlab_core::pmc::ROTATIONS`).
    pub pmc_rotation: u8,
    /// Dynamic energy drawn while busy, pJ (mW x ns; 128 bits, as 64 would overflow after a few
    /// simulated days at tens of watts).
    pub dynamic_pj: u128,
    /// The CPU's frequency now, MHz, and its dynamic power when busy, mW: its frequency domain's
    /// current level, kept here for the accounting of every segment (see `Sim::refresh_freq`).
    pub mhz_now: u32,
    /// See `mhz_now`.
    pub dynamic_mw: u64,
    /// The CPU left idle at this instant to run a timer's wakeup (`CostModel::timer_exit_ns`): a
    /// wakeup it runs now pays no idle exit. `None` before the first such timer.
    pub timer_awake_at: Option<Ns>,
    /// The reschedule in flight to this CPU carried the user-space scheduler's decision
    /// (`CostModel::scx_round_trip_ns`): the switch it leads to pays no round trip of its own.
    pub scx_decided: bool,
    /// Why the running task is to be switched out when that reschedule arrives (its slice
    /// expired), if not preempted.
    pub scx_reason: Option<SwitchReason>,
    /// The dispatch half of the user-space decision in flight to this CPU
    /// (`CostModel::scx_switch_dispatch_permille`, `scx_block_dispatch_permille`): the task the
    /// decision picks starts this much after it.
    pub scx_dispatch_ns: Option<Ns>,
    /// The running task blocked, and the user-space scheduler has not heard yet (the request half
    /// of a round trip after a block): the policy still sees it running here, the CPU makes no
    /// progress, and at the end (or at the task's wakeup, if sooner) the policy is told.
    pub scx_blocked: Option<TaskId>,
    /// Generation of the pending `ScxBlockSeen` event.
    pub scx_block_gen: u32,
    /// The process (tgid) whose address space this CPU holds: that of the last task that ran here,
    /// kept across idle as Linux's lazy TLB keeps it (`CostModel::thread_switch_ns`).
    pub mm: Option<u32>,
}

/// Per-task engine state and accounting.
#[derive(Clone, Debug, Default)]
pub(crate) struct Task {
    pub name: String,
    /// The template the task was created from (its identity for stop conditions, affinity changes
    /// and the report).
    pub template: u32,
    /// The template whose program it runs: its own, or the last one it exec'ed (`Op::Exec`).
    pub program: u32,
    pub pc: u32,
    /// Loop frames: (index of the `Loop` op, iterations left; `u32::MAX` = forever).
    pub loops: Vec<(u32, u32)>,
    /// The timed op at `pc` is in progress with `op_left` work (Compute) or ns (Spin) to go.
    pub in_op: bool,
    pub op_left: Ns,
    /// System-call time still to run before the op at `pc` (`CostModel::syscall_ns`).
    pub syscall_left: Ns,
    /// The op at `pc` has had its system-call time charged.
    pub syscall_paid: bool,
    pub cold_ns: Ns,
    /// When the task last blocked, until its next switch-in (`CostModel::resume_ns`).
    pub blocked_at: Option<Ns>,
    pub last_cpu_ran: Option<CpuId>,
    pub evict_stamp: Ns,
    /// Last expiry of each per-task timer this task used: (timer, time).
    pub timers: Vec<(u32, Ns)>,
    pub wait_gen: u32,
    /// When the current runnable or blocked stretch began.
    pub since: Ns,
    pub woke_at: Option<Ns>,
    /// The expiry a slackened sleep or timer wakeup was due at (its latency counts from there).
    pub due_at: Option<Ns>,
    /// The timed wakeup armed now is the deferred one, after its CPU's `timer_exit_ns`.
    pub timer_exit_done: bool,
    pub children_alive: u32,
    pub waiting_children: bool,
    /// Children that exited since this task last waited for one (`WaitChild`), not yet reaped.
    pub children_unreaped: u32,
    /// Blocked in `WaitChild`: the next child to exit wakes it.
    pub waiting_child: bool,
    /// A spin-then-sleep barrier released this task while it spun.
    pub barrier_released: bool,
    /// Woken from a mutex's wait queue, it retries the lock (glibc's `__lll_lock_wait`), and takes it
    /// marked contended: the `Lock` op at `pc` again (`true`), or, for a signalled condition waiter,
    /// the mutex here before its next op.
    pub lock_retry: bool,
    /// The mutex a signalled condition waiter must take again before its next op.
    pub relock: Option<u32>,
    /// In a condition wait's kernel entry, registered on the condition with its mutex released:
    /// it sleeps when the entry's time is paid unless signalled meanwhile (`relock` set).
    pub cond_sleep: bool,
    /// Signalled out of a condition's futex wait, it holds a reference to that condition's group
    /// until it runs (glibc's `__g_refs`).
    pub cond_ref: Option<u32>,
    /// Blocked in a signal or broadcast until the condition's old group empties; the op runs again
    /// when woken.
    pub quiesce: bool,
    /// What the task waits for while blocked (the op it blocked in).
    pub wait: WaitKind,
    pub nr_yields: u64,
    pub last_wakeup: Option<Ns>,
    /// Its activity vector (seed 004), kept for the `avec` frequency governor.
    pub avec: schedlab_core::ActivityVector,
    // Accounting.
    pub run_ns: Ns,
    pub wait_ns: Ns,
    pub sleep_ns: Ns,
    pub max_wait_ns: Ns,
    pub nvcsw: u64,
    pub nivcsw: u64,
    pub nr_migrations: u64,
    pub nr_wakeups: u64,
    pub work_ns: Ns,
    pub spin_ns: Ns,
    pub wake_lat: Histogram,
    /// Each of its runs on a CPU, from its switch-in to its switch-out.
    pub run_len: Histogram,
    pub started_at: Option<Ns>,
    pub exited_at: Option<Ns>,
    /// Woken, and the user-space scheduler has not heard yet (`Sim::wake` under sched_ext with
    /// the halves of a round trip set): runnable in the kernel, blocked to the policy.
    pub scx_waking: Option<ScxWaking>,
}

/// A wakeup on its way to the user-space scheduler (`Task::scx_waking`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScxWaking {
    /// The CPU the wakeup happened on (where a reschedule it asks comes from).
    pub waker_cpu: CpuId,
    /// The wakeup's round trip, ns, drawn at the wakeup.
    pub round_trip_ns: Ns,
    /// Its dispatch half, ns: what is left of it once the policy has decided.
    pub dispatch_ns: Ns,
}

/// Run-wide counters.
#[derive(Clone, Debug, Default)]
pub(crate) struct Counters {
    pub nr_switches: u64,
    pub nr_migrations: u64,
    pub nr_decisions: u64,
    pub nr_examined: u64,
    pub nr_balance_calls: u64,
    pub nr_balance_migrations: u64,
    pub nr_wakeups: u64,
    pub nr_events: u64,
    /// Round trips under sched_ext, by decision.
    pub scx: crate::report::ScxRoundTrips,
    /// (times, ns) charged of each machine cost, indexed by [`Charged`] (`report::CHARGED_COSTS`).
    pub machine_costs: [(u64, Ns); 13],
}

/// A machine cost the engine charges, indexing [`Counters::machine_costs`] in the order of
/// `report::CHARGED_COSTS`.
#[derive(Clone, Copy)]
pub(crate) enum Charged {
    SchedBase,
    SchedPerTask,
    ContextSwitch,
    ThreadSwitch,
    WakeupIpi,
    IdleExit,
    Refill(Level),
    RefillEvicted,
    TickIrq,
}

impl Counters {
    /// Counts `count` charges of `cost` adding `ns` in all.
    #[inline]
    pub(crate) fn charge(&mut self, cost: Charged, count: u64, ns: Ns) {
        let i = match cost {
            Charged::SchedBase => 0,
            Charged::SchedPerTask => 1,
            Charged::ContextSwitch => 2,
            Charged::ThreadSwitch => 3,
            Charged::WakeupIpi => 4,
            Charged::IdleExit => 5,
            Charged::Refill(Level::Same) => return,
            Charged::Refill(Level::Smt) => 6,
            Charged::Refill(Level::Llc) => 7,
            Charged::Refill(Level::Node) => 8,
            Charged::Refill(Level::Socket) => 9,
            Charged::Refill(Level::Machine) => 10,
            Charged::RefillEvicted => 11,
            Charged::TickIrq => 12,
        };
        let e = &mut self.machine_costs[i];
        e.0 += count;
        e.1 += ns;
    }
}

/// What a task's program does next (from [`Sim::advance`]).
pub(crate) enum Step {
    /// A timed op is in progress: keep running.
    Run,
    /// The task blocked.
    Block,
    /// The task yields.
    Yield,
    /// The task exits.
    Exit,
    /// The running task must move to this CPU: its own affinity change excludes its CPU, or the
    /// policy balanced it at exec (`sched_exec`).
    Migrate(CpuId),
    /// The task changes its own scheduling class and RT priority (`sched_setscheduler`).
    SetClass(SchedClass, u8),
    /// A run error was recorded.
    Failed,
}

/// The kinds of user-space round trip (`CostModel::scx_round_trip_ns` and the kinds' own), as
/// schedlab-scx measures them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ScxTrip {
    /// A decision on a task's return (its slice or tick ran out) or on a wakeup's message.
    Switch,
    /// A tick after which the running task goes on while another waits.
    Continue,
    /// A pick for a CPU whose task blocked or exited.
    Block,
}

/// One simulation run. Build it with [`Sim::new`] and consume it with [`Sim::run`].
pub struct Sim<'a> {
    pub(crate) machine: &'a Machine,
    pub(crate) w: &'a Workload,
    pub(crate) cfg: RunConfig,
    pub(crate) policy: &'a mut dyn SchedPolicy,
    pub(crate) policy_spec: String,
    pub(crate) now: Ns,
    pub(crate) q: EventQueue,
    pub(crate) tick_ns: Ns,
    pub(crate) cpus: Vec<Cpu>,
    pub(crate) cpu_views: Vec<CpuInfo>,
    pub(crate) idle: CpuSet,
    /// CPUs in `idle` (a busy tick asks whether any is idle; counting spares a scan of the set).
    pub(crate) nr_idle: usize,
    pub(crate) tasks: Vec<Task>,
    pub(crate) views: Vec<TaskInfo>,
    pub(crate) groups: Vec<GroupInfo>,
    pub(crate) mutexes: Vec<SyncMutex>,
    pub(crate) conds: Vec<crate::exec::SyncCond>,
    pub(crate) pipes: Vec<Pipe>,
    pub(crate) barriers: Vec<Barrier>,
    pub(crate) devices: Vec<Device>,
    pub(crate) semaphores: Vec<crate::exec::Semaphore>,
    pub(crate) suspended: Vec<Vec<TaskId>>,
    pub(crate) rng: crate::random::RunRng,
    /// Draws of the user-space round trip (`CostModel::scx_round_trip_ns`).
    scx_rng: crate::random::RunRng,
    /// Under sched_ext, when the user-space scheduler hears of the latest block or wakeup sent to
    /// it: it reads them in the order they happened (one ring buffer, one scheduler), so none is
    /// heard before one that happened earlier ([`Sim::scx_hear_at`]).
    scx_heard_at: Ns,
    pub(crate) user_counters: Vec<u64>,
    processes: std::collections::HashMap<String, u32>,
    pub(crate) scratch: Vec<TaskId>,
    migr: Vec<Migration>,
    pub(crate) next_tgid: u32,
    pub(crate) alive: usize,
    /// Live tasks that are not `background`: what `all_done` waits for.
    pub(crate) foreground_alive: usize,
    pub(crate) template_alive: Vec<u64>,
    pub(crate) nr_runnable: usize,
    pub(crate) counters: Counters,
    pub(crate) shared_timers: Vec<Option<Ns>>,
    pub(crate) series: Series,
    /// The largest eq. 4 unfairness at a sample instant so far, and when (`Fairness::max_unfairness_ns`).
    pub(crate) max_unfairness: (Ns, Ns),
    /// How long each task ran from being switched in until it was switched out (another task or
    /// idle took the CPU): the run lengths the policy's slices and preemptions made.
    /// Who ran where (with `RunConfig::timeline`).
    pub(crate) timeline: Option<crate::timeline::Timeline>,
    pub(crate) error: Option<RunError>,
    stop: Option<&'static str>,
    last_nohz_jiffy: Option<u64>,
    progress: Option<Box<dyn FnMut(Ns, Ns) + 'a>>,
    /// Each task's demand on shared resources (from its template's activity profile).
    pub(crate) demand: Vec<crate::contention::Demand>,
    /// Per CPU, the CPUs it shares any resource with (its package).
    pub(crate) share_span: Vec<CpuSet>,
    /// Contention is modelled and some task has an activity profile.
    pub(crate) contention_active: bool,
    /// A running task's speed can differ from its CPU's nominal speed: contention is modelled or the
    /// machine has frequency levels. When false, [`Sim::contended_speed`] is the nominal speed.
    speed_varies: bool,
    /// Each CPU's capacity for the policy ([`Ctx::cpu_capacity`]): its nominal speed over the
    /// fastest CPU's, times 1024.
    cpu_capacity: Vec<u64>,
    /// Frequency domains (packages, or cores with per-core scaling).
    pub(crate) domains: Vec<crate::dvfs::Domain>,
    /// Each CPU's frequency domain.
    pub(crate) domain_of: Vec<usize>,
    /// Dynamic power at each frequency level, mW ([`crate::DvfsModel::dynamic_mw_at`], computed once:
    /// it divides, and every settle needs it).
    pub(crate) dynamic_mw_by_level: Vec<u64>,
    /// Recorded switches and wakeups, when tracing.
    pub(crate) trace: Option<Vec<crate::trace::TraceEvent>>,
}

/// Builds the read-only context from the engine's fields (a macro so that the borrow of the policy
/// and of the views stay disjoint).
macro_rules! ctx {
    ($s:ident) => {
        &Ctx {
            now: $s.now,
            topo: &$s.machine.topology,
            tasks: &$s.views,
            cpus: &$s.cpu_views,
            groups: &$s.groups,
            tick_ns: $s.tick_ns,
            tick_phase_ns: $s.cfg.tick_phase_ns,
            numa: $s.machine.numa,
            seed: $s.cfg.seed,
            decision_cost: schedlab_core::DecisionCost {
                base_ns: $s.machine.costs.sched_base_ns,
                per_task_ns: $s.machine.costs.sched_per_task_ns,
            },
            cpu_capacity: &$s.cpu_capacity,
        }
    };
}

impl<'a> Sim<'a> {
    /// Prepares a run. `policy_spec` is how the policy was named (for reports).
    pub fn new(
        machine: &'a Machine,
        workload: &'a Workload,
        policy: &'a mut dyn SchedPolicy,
        policy_spec: impl Into<String>,
        cfg: RunConfig,
    ) -> Result<Sim<'a>, RunError> {
        workload.validate().map_err(|m| RunError::Setup(format!("workload `{}`: {m}", workload.name)))?;
        let ncpus = machine.topology.nr_cpus();
        let check_cpus = |cpus: &Option<Vec<u32>>, what: &str| -> Result<(), RunError> {
            if let Some(list) = cpus {
                if let Some(bad) = list.iter().find(|&&c| c as usize >= ncpus) {
                    return Err(RunError::Setup(format!(
                        "{what} names CPU {bad}, but machine `{}` has CPUs 0..={}",
                        machine.name,
                        ncpus - 1
                    )));
                }
            }
            Ok(())
        };
        for t in &workload.tasks {
            check_cpus(&t.cpus, &format!("task `{}`", t.name))?;
        }
        for a in &workload.affinity_changes {
            check_cpus(&a.cpus, "an affinity change")?;
        }
        for l in &workload.cpu_lists {
            check_cpus(&Some(l.clone()), "a `cpus` op")?;
        }
        if cfg.duration_ns > cfg.max_duration_ns {
            return Err(RunError::Setup(format!(
                "a run of {} is longer than the limit of {} (`max_duration_ns`, --max-duration)",
                schedlab_core::fmt_ns(cfg.duration_ns),
                schedlab_core::fmt_ns(cfg.max_duration_ns)
            )));
        }
        if cfg.tick_phase_ns >= machine.tick_ns() {
            return Err(RunError::Setup(format!(
                "a tick phase of {} is not below the tick of {} (`tick_phase_ns`, --tick-phase)",
                schedlab_core::fmt_ns(cfg.tick_phase_ns),
                schedlab_core::fmt_ns(machine.tick_ns())
            )));
        }
        if workload.initial_tasks() as usize > cfg.max_tasks {
            return Err(RunError::Setup(format!(
                "workload `{}` starts {} tasks; the limit is {} (`max_tasks`, --max-tasks)",
                workload.name,
                workload.initial_tasks(),
                cfg.max_tasks
            )));
        }
        let groups = workload
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| GroupInfo {
                parent: if i == 0 { None } else { Some(GroupId(g.parent)) },
                shares: g.shares,
            })
            .collect();
        let share_span =
            machine.topology.cpus().map(|c| machine.topology.span(schedlab_core::Level::Socket, c)).collect();
        let contention_active = machine.contention.enabled
            && workload
                .tasks
                .iter()
                .any(|t| t.activity.as_ref().is_some_and(|a| !crate::contention::Demand::of(a).is_zero()));
        let topo = &machine.topology;
        let key = |c: CpuId| if machine.dvfs.per_core { topo.place(c).core } else { topo.place(c).socket };
        let mut keys: Vec<u32> = topo.cpus().map(key).collect();
        keys.sort_unstable();
        keys.dedup();
        let domain_of: Vec<usize> =
            topo.cpus().map(|c| keys.binary_search(&key(c)).expect("every key listed")).collect();
        let nlevels = machine.dvfs.levels_mhz.len().max(1);
        let start_level = match machine.dvfs.governor {
            crate::dvfs::Governor::Powersave | crate::dvfs::Governor::Ondemand => 0,
            _ => nlevels - 1,
        };
        let domains = keys
            .iter()
            .enumerate()
            .map(|(d, _)| {
                let cpus: Vec<CpuId> = topo.cpus().filter(|c| domain_of[c.idx()] == d).collect();
                crate::dvfs::Domain {
                    busy_at_sample: vec![0; cpus.len()],
                    cpus,
                    level: start_level,
                    target: start_level,
                    residency: vec![0; nlevels],
                    ..Default::default()
                }
            })
            .collect();
        let mut sim = Sim {
            machine,
            w: workload,
            policy,
            policy_spec: policy_spec.into(),
            now: 0,
            q: EventQueue::new(ncpus),
            tick_ns: machine.tick_ns(),
            cpus: vec![Cpu::default(); ncpus],
            cpu_views: vec![CpuInfo::default(); ncpus],
            idle: CpuSet::first_n(ncpus),
            nr_idle: ncpus,
            tasks: Vec::new(),
            views: Vec::new(),
            groups,
            mutexes: workload.mutexes.iter().map(|_| SyncMutex::default()).collect(),
            conds: workload.conds.iter().map(|_| Default::default()).collect(),
            pipes: workload.pipes.iter().map(Pipe::new).collect(),
            barriers: workload.barriers.iter().map(|b| Barrier::new(b.parties)).collect(),
            devices: workload.devices.iter().map(|_| Device::default()).collect(),
            semaphores: workload
                .semaphores
                .iter()
                .map(|s| crate::exec::Semaphore { count: s.initial, waiters: VecDeque::new() })
                .collect(),
            suspended: workload.events.iter().map(|_| Vec::new()).collect(),
            rng: crate::random::RunRng::new(cfg.seed),
            // A stream of its own, so that the workload's draws are the same with and without it.
            scx_rng: crate::random::RunRng::new(cfg.seed ^ SCX_STREAM),
            scx_heard_at: 0,
            user_counters: vec![0; workload.counters.len()],
            processes: std::collections::HashMap::new(),
            scratch: Vec::new(),
            migr: Vec::new(),
            next_tgid: 1,
            alive: 0,
            foreground_alive: 0,
            template_alive: vec![0; workload.tasks.len()],
            nr_runnable: 0,
            counters: Counters::default(),
            shared_timers: vec![None; workload.timers.len()],
            series: Series::new(cfg.sample_interval_ns, ncpus),
            max_unfairness: (0, 0),
            timeline: cfg.timeline.then(|| crate::timeline::Timeline::new(ncpus)),
            error: None,
            stop: None,
            last_nohz_jiffy: None,
            progress: None,
            demand: Vec::new(),
            share_span,
            contention_active,
            speed_varies: contention_active || !machine.dvfs.levels_mhz.is_empty(),
            cpu_capacity: {
                let max = machine.speed_permille.iter().copied().max().unwrap_or(1000).max(1) as u64;
                machine
                    .speed_permille
                    .iter()
                    .map(|&s| s as u64 * schedlab_core::CAPACITY_SCALE / max)
                    .collect()
            },
            domains,
            domain_of,
            dynamic_mw_by_level: (0..machine.dvfs.levels_mhz.len().max(1))
                .map(|l| machine.dvfs.dynamic_mw_at(l))
                .collect(),
            trace: cfg.trace.then(Vec::new),
            cfg,
        };
        for c in 0..ncpus {
            sim.refresh_freq(CpuId(c as u32));
        }
        // Initial tasks get ids in template order, instance order.
        for (ti, spec) in workload.tasks.iter().enumerate() {
            let shared_tgid = if spec.threads { Some(sim.alloc_tgid()) } else { None };
            for i in 0..spec.instances {
                let name = if spec.instances == 1 { spec.name.clone() } else { format!("{}-{i}", spec.name) };
                let t = sim.create_task(ti as u32, name, None, shared_tgid);
                sim.q.push(spec.start_ns, Ev::Start(t));
            }
        }
        for (i, a) in workload.affinity_changes.iter().enumerate() {
            sim.q.push(a.at_ns, Ev::Affinity(i as u32));
        }
        Ok(sim)
    }

    /// Calls `f(now, end)` every 65,536 events, for progress display on long runs.
    pub fn on_progress(&mut self, f: impl FnMut(Ns, Ns) + 'a) {
        self.progress = Some(Box::new(f));
    }

    fn alloc_tgid(&mut self) -> u32 {
        self.next_tgid += 1;
        self.next_tgid - 1
    }

    /// Allocates a task in state `New` (not yet known to the policy).
    pub(crate) fn create_task(
        &mut self,
        template: u32,
        name: String,
        parent: Option<TaskId>,
        tgid: Option<u32>,
    ) -> TaskId {
        let spec = &self.w.tasks[template as usize];
        let id = TaskId(self.tasks.len() as u32);
        let allowed = match &spec.cpus {
            Some(list) => list.iter().map(|&c| CpuId(c)).collect(),
            None => self.machine.topology.all(),
        };
        let tgid = match &spec.process {
            Some(name) => match self.processes.get(name) {
                Some(&g) => g,
                None => {
                    let g = self.alloc_tgid();
                    self.processes.insert(name.clone(), g);
                    g
                }
            },
            None => tgid.unwrap_or_else(|| self.alloc_tgid()),
        };
        let cpu = parent.map_or(CpuId(0), |p| self.views[p.idx()].cpu);
        self.views.push(TaskInfo {
            id,
            tgid,
            parent,
            class: spec.class,
            nice: spec.nice,
            rt_priority: spec.rt_priority,
            group: GroupId(spec.group),
            allowed,
            cpu,
            state: TaskState::New,
            sum_exec_ns: 0,
            last_ran_ns: 0,
            pmc: Default::default(),
            slice_ns: spec.slice_ns,
        });
        self.tasks.push(Task { name, template, program: template, ..Task::default() });
        let demand = self.w.tasks[template as usize].activity.as_ref().map(crate::contention::Demand::of);
        self.demand.push(demand.unwrap_or_default());
        self.alive += 1;
        if !self.w.tasks[template as usize].background {
            self.foreground_alive += 1;
        }
        self.template_alive[template as usize] += 1;
        id
    }

    /// Runs to the end and returns the report.
    pub fn run(self) -> Result<RunReport, RunError> {
        self.run_traced().map(|(r, _)| r)
    }

    /// Runs the simulation and also returns the recorded schedule when [`RunConfig::trace`] is on.
    pub fn run_traced(mut self) -> Result<(RunReport, Option<crate::trace::Trace>), RunError> {
        self.policy.init(ctx!(self));
        self.q.push(self.cfg.duration_ns, Ev::Stop);
        if self.cfg.sample_interval_ns > 0 {
            self.q.push(0, Ev::Sample);
        }
        while let Some((time, ev)) = self.q.pop() {
            debug_assert!(time >= self.now, "time went backwards");
            self.now = time;
            self.counters.nr_events += 1;
            if self.counters.nr_events & 0xffff == 0 {
                if let Some(p) = self.progress.as_mut() {
                    p(time, self.cfg.duration_ns);
                }
            }
            if self.counters.nr_events > self.cfg.max_events {
                return Err(RunError::Limit {
                    now: time,
                    msg: format!(
                        "more than {} events, the limit (`max_events`, --max-events); shorten the run or raise it",
                        self.cfg.max_events
                    ),
                });
            }
            self.dispatch(ev);
            if let Some(e) = self.error.take() {
                return Err(e);
            }
            if self.cfg.check_invariants
                && self.counters.nr_events.is_multiple_of(self.cfg.invariant_every.max(1))
            {
                self.check_invariants()?;
            }
            if self.stop.is_some() {
                break;
            }
        }
        self.finish()
    }

    #[inline(always)]
    fn dispatch(&mut self, ev: Ev) {
        match ev {
            Ev::Tick(cpu) => self.on_tick(cpu),
            Ev::Segment { cpu, gen } => {
                if self.cpus[cpu.idx()].gen == gen && self.cpu_views[cpu.idx()].curr.is_some() {
                    self.on_segment(cpu);
                }
            }
            Ev::Wake { task, gen } => {
                let tk = &self.tasks[task.idx()];
                if tk.wait_gen == gen && self.is_blocked(task) {
                    self.on_timer_expiry(task, gen);
                }
            }
            Ev::Resched(cpu) => self.on_resched(cpu),
            Ev::ScxBlockSeen { cpu, gen } => {
                if self.cpus[cpu.idx()].scx_block_gen == gen && self.cpus[cpu.idx()].scx_blocked.is_some() {
                    self.finish_scx_block(cpu);
                }
            }
            Ev::ScxWakeSeen(t) => self.finish_scx_wake(t),
            Ev::Start(t) => self.start_task(t),
            Ev::IoDone(d) => self.on_io_done(d),
            Ev::Affinity(i) => self.on_affinity(i),
            Ev::Freq { domain, gen } => self.on_freq(domain as usize, gen),
            Ev::Sample => {
                self.take_sample();
                // The series' own interval: it doubles when the series thins itself.
                let next = self.now + self.series.interval_ns;
                if next < self.cfg.duration_ns {
                    self.q.push(next, Ev::Sample);
                }
            }
            Ev::Stop => self.stop = Some("duration"),
        }
    }

    pub(crate) fn fail_policy(&mut self, hook: &'static str, msg: String) {
        if self.error.is_none() {
            self.error = Some(RunError::PolicyViolation {
                policy: self.policy.name().to_string(),
                hook,
                now: self.now,
                msg,
            });
        }
    }

    // ------------------------------------------------------------------------------------------
    // Accounting
    // ------------------------------------------------------------------------------------------

    /// Accounts the running segment of `cpu` up to now and applies the task's progress.
    pub(crate) fn settle(&mut self, cpu: CpuId) {
        let Some(t) = self.cpu_views[cpu.idx()].curr else { return };
        let now = self.now;
        let c = &mut self.cpus[cpu.idx()];
        let from = c.seg_start;
        if now <= from {
            return;
        }
        if c.scx_blocked.is_some() {
            // Its task blocked, user space not told yet: the CPU waits, the task sleeps.
            c.overhead_ns += now - from;
            c.dynamic_pj += (now - from) as u128 * c.dynamic_mw as u128;
            c.seg_start = now;
            return;
        }
        let ov_end = c.useful_start.clamp(from, now);
        c.overhead_ns += ov_end - from;
        c.dynamic_pj += (now - from) as u128 * c.dynamic_mw as u128;
        let useful = now - ov_end;
        c.busy_ns += useful;
        c.task_run_total += useful;
        c.seg_start = now;
        // The task's switch-in overhead counts as waiting: it is runnable but not yet executing.
        self.tasks[t.idx()].wait_ns += ov_end - from;
        if useful == 0 {
            return;
        }
        let speed = self.cpus[cpu.idx()].speed as u64;
        let cold_pct = self.machine.costs.cold_speed_pct as u64;
        let cold = useful.min(self.tasks[t.idx()].cold_ns);
        let progress = cold * speed * cold_pct / 100_000 + (useful - cold) * speed / 1000;
        self.count_events(t, cpu, useful, progress);
        let tk = &mut self.tasks[t.idx()];
        tk.run_ns += useful;
        self.views[t.idx()].sum_exec_ns += useful;
        if tk.syscall_left > 0 {
            // Kernel time before the op: run time, but neither work nor spin.
            tk.syscall_left -= useful.min(tk.syscall_left);
        } else if tk.in_op {
            match self.w.tasks[tk.program as usize].program.ops[tk.pc as usize] {
                Op::Compute { .. } => {
                    let done = progress.min(tk.op_left);
                    tk.op_left -= done;
                    tk.work_ns += done;
                }
                Op::Spin { .. } | Op::BarrierSpin { .. } => {
                    let done = useful.min(tk.op_left);
                    tk.op_left -= done;
                    tk.spin_ns += done;
                }
                _ => {}
            }
        }
        tk.cold_ns -= cold;
    }

    /// Whether `t` is in a wall-clock spin (`Spin`, a barrier's spin), whose clock runs on through
    /// an interrupt: a tick's time does not lengthen it.
    fn spinning(&self, t: TaskId) -> bool {
        let tk = &self.tasks[t.idx()];
        tk.in_op
            && tk.syscall_left == 0
            && matches!(
                self.w.tasks[tk.program as usize].program.ops[tk.pc as usize],
                Op::Spin { .. } | Op::BarrierSpin { .. }
            )
    }

    /// Wall time the running task `t` on `cpu` needs to finish its timed op.
    fn time_to_finish(&self, cpu: CpuId, t: TaskId) -> Ns {
        let tk = &self.tasks[t.idx()];
        if tk.syscall_left > 0 {
            return tk.syscall_left;
        }
        if !tk.in_op {
            return 0;
        }
        match self.w.tasks[tk.program as usize].program.ops[tk.pc as usize] {
            Op::Compute { .. } => {
                let s = self.cpus[cpu.idx()].speed as u64;
                let p = self.machine.costs.cold_speed_pct as u64;
                // In 64 bits when nothing can overflow (the usual case: 128-bit division is a
                // library call of tens of instructions), else in 128: work and cold time may each
                // be up to 100 days' worth.
                if tk.cold_ns < 1 << 40 && tk.op_left < 1 << 46 && s < 1 << 12 && p <= 100 {
                    let cold_work = tk.cold_ns * s * p / 100_000;
                    let w = tk.op_left;
                    let ns = if w <= cold_work {
                        (w * 100_000).div_ceil(s * p)
                    } else {
                        tk.cold_ns + ((w - cold_work) * 1000).div_ceil(s)
                    };
                    return ns.min(u64::MAX / 4);
                }
                // In 128 bits: work and cold time may each be up to 100 days' worth.
                let s = self.cpus[cpu.idx()].speed as u128;
                let p = self.machine.costs.cold_speed_pct as u128;
                let w = tk.op_left as u128;
                let cold_work = tk.cold_ns as u128 * s * p / 100_000;
                let ns = if w <= cold_work {
                    (w * 100_000).div_ceil(s * p)
                } else {
                    tk.cold_ns as u128 + ((w - cold_work) * 1000).div_ceil(s)
                };
                ns.min(u64::MAX as u128 / 4) as Ns
            }
            Op::Spin { .. } | Op::BarrierSpin { .. } => tk.op_left,
            _ => 0,
        }
    }

    /// (Re)programs the end of the running segment on `cpu`.
    pub(crate) fn program_segment(&mut self, cpu: CpuId) {
        let Some(t) = self.cpu_views[cpu.idx()].curr else { return };
        if self.cpus[cpu.idx()].scx_blocked.is_some() {
            return; // its task blocked: nothing runs until the policy hears (`ScxBlockSeen`)
        }
        let start = self.cpus[cpu.idx()].useful_start.max(self.now);
        let mut end = start + self.time_to_finish(cpu, t);
        if let Some(se) = self.cpus[cpu.idx()].slice_end {
            end = end.min(se.max(self.now));
        }
        let c = &mut self.cpus[cpu.idx()];
        c.gen = c.gen.wrapping_add(1);
        if end > self.cfg.duration_ns {
            // It would fire after the Stop event (at the duration): no timer at all, which spares
            // the queue for CPU hogs with no slice end.
            self.q.cancel_segment(cpu);
        } else {
            self.q.arm_segment(cpu, end, c.gen);
        }
    }

    /// Moves `t`'s CPU to `cpu`, counting a migration when it changes.
    pub(crate) fn set_task_cpu(&mut self, t: TaskId, cpu: CpuId) {
        let v = &mut self.views[t.idx()];
        if v.cpu != cpu {
            let from = v.cpu;
            v.cpu = cpu;
            self.tasks[t.idx()].nr_migrations += 1;
            self.counters.nr_migrations += 1;
            // Linux records the event on the CPU doing the move; the destination stands for it here.
            self.record(cpu, crate::trace::TraceKind::Migrate { task: t, from, to: cpu });
        }
    }

    // ------------------------------------------------------------------------------------------
    // Events
    // ------------------------------------------------------------------------------------------

    fn on_segment(&mut self, cpu: CpuId) {
        self.settle(cpu);
        let c = &self.cpus[cpu.idx()];
        if let Some(se) = c.slice_end {
            if self.now >= se {
                self.resched_own(cpu, SwitchReason::SliceExpired);
                return;
            }
        }
        let t = self.cpu_views[cpu.idx()].curr.expect("segment on a busy CPU");
        let tk = &self.tasks[t.idx()];
        if self.now < c.useful_start || tk.syscall_left > 0 || (tk.in_op && tk.op_left > 0) {
            self.program_segment(cpu);
            return;
        }
        self.run_task(cpu, t);
    }

    /// Runs the program of `t` (running on `cpu`) from its current op until it needs time or stops.
    pub(crate) fn run_task(&mut self, cpu: CpuId, t: TaskId) {
        match self.advance(t, cpu) {
            Step::Run => {
                if self.cpus[cpu.idx()].need_resched {
                    self.resched_own(cpu, SwitchReason::Preempted);
                } else {
                    self.program_segment(cpu);
                }
            }
            Step::Block => {
                self.tasks[t.idx()].since = self.now;
                self.tasks[t.idx()].blocked_at = Some(self.now);
                self.tasks[t.idx()].wait = self.wait_kind(t);
                match self.scx_block_halves() {
                    Some((request, dispatch)) => self.defer_scx_block(cpu, t, request, dispatch),
                    None => {
                        self.views[t.idx()].state = TaskState::Blocked;
                        self.schedule(cpu, SwitchReason::Blocked);
                    }
                }
            }
            Step::Yield => {
                self.policy.yield_task(ctx!(self), cpu, t);
                self.schedule(cpu, SwitchReason::Yielded);
            }
            Step::Exit => self.exit_task(cpu, t),
            Step::Migrate(dest) => self.move_running(cpu, t, dest),
            Step::SetClass(class, rt_priority) => self.change_class(cpu, t, class, rt_priority),
            Step::Failed => {}
        }
    }

    /// Whether `t` is blocked: asleep as the policy knows it, or blocked while the user-space
    /// scheduler has not heard yet (`Cpu::scx_blocked`).
    /// A task woken whose wakeup user space has not heard yet (`Task::scx_waking`) is not.
    pub(crate) fn is_blocked(&self, t: TaskId) -> bool {
        self.tasks[t.idx()].scx_waking.is_none()
            && (self.views[t.idx()].state == TaskState::Blocked || self.scx_blocked_on(t).is_some())
    }

    /// The CPU on which `t` blocked while the user-space scheduler has not heard yet, if any.
    fn scx_blocked_on(&self, t: TaskId) -> Option<CpuId> {
        let c = self.views[t.idx()].cpu;
        (self.cpus[c.idx()].scx_blocked == Some(t)).then_some(c)
    }

    /// Under sched_ext with the halves of a round trip after a block set
    /// (`CostModel::scx_block_dispatch_permille`): one such round trip drawn and split into its
    /// request half (before the user-space scheduler hears of the block) and its dispatch half.
    fn scx_block_halves(&mut self) -> Option<(Ns, Ns)> {
        let permille = self.machine.costs.scx_block_dispatch_permille?;
        let rt = self.scx_round_trip(ScxTrip::Block)?;
        self.counters.scx.nr_blocks += 1;
        self.counters.scx.block_ns += rt;
        let dispatch = rt * permille as u64 / 1000;
        Some((rt - dispatch, dispatch))
    }

    /// The running task `t` of `cpu` blocked; user space hears of it `request_ns` later. Until then
    /// the policy still sees `t` running there (as the adapter holds it until the kernel finds the
    /// CPU idle), the CPU makes no progress and its ticks reach no policy; the task picked then
    /// starts `dispatch_ns` after the pick. A wakeup of `t` before that tells the policy at once.
    fn defer_scx_block(&mut self, cpu: CpuId, t: TaskId, request_ns: Ns, dispatch_ns: Ns) {
        self.settle(cpu);
        let now = self.now;
        let c = &mut self.cpus[cpu.idx()];
        c.gen = c.gen.wrapping_add(1); // cancels the pending segment event
        c.slice_end = None;
        c.need_resched = false;
        c.useful_start = Ns::MAX;
        c.scx_blocked = Some(t);
        c.scx_dispatch_ns = Some(dispatch_ns);
        c.scx_block_gen = c.scx_block_gen.wrapping_add(1);
        let gen = c.scx_block_gen;
        let heard = self.scx_hear_at(now + request_ns);
        self.q.push(heard, Ev::ScxBlockSeen { cpu, gen });
    }

    /// When user space hears of a block or wakeup whose request half ends at `due`: then, or when
    /// it hears the one before, if later (`Sim::scx_heard_at`). The wakeup of a task that its
    /// waker's block follows is so heard first, as the adapter reads the wakeup's message before
    /// it finds the waker's CPU free; drawn apart, the block could be heard first and its CPU pick
    /// without the woken task.
    fn scx_hear_at(&mut self, due: Ns) -> Ns {
        self.scx_heard_at = self.scx_heard_at.max(due);
        self.scx_heard_at
    }

    /// Ends the wait of `cpu` for user space to hear of its task's block: the policy is told
    /// (`put_prev(.., Blocked)`), and returns the task, the CPU now without one (the caller picks).
    fn end_scx_block(&mut self, cpu: CpuId) -> Option<TaskId> {
        self.settle(cpu); // the CPU's own accounting only, while the task is blocked
        let t = self.cpus[cpu.idx()].scx_blocked.take()?;
        self.cpus[cpu.idx()].useful_start = self.now;
        self.views[t.idx()].state = TaskState::Blocked;
        self.deschedule(cpu, SwitchReason::Blocked)
    }

    /// User space heard of the block on `cpu`: the policy is told and picks for the CPU.
    fn finish_scx_block(&mut self, cpu: CpuId) {
        let prev = self.end_scx_block(cpu);
        self.pick_and_switch(cpu, prev, SwitchReason::Blocked);
    }

    /// `sched_setscheduler` of the running task `t` on `cpu` (Linux's `__sched_setscheduler`): it
    /// is put back (`put_prev`), taken out of its old class's queue (`dequeue(.., Save)`), given the
    /// new class and RT priority (`set_class`), queued by them (`enqueue(.., Restore)`), and the CPU
    /// picks again: the task itself unless the policy now prefers another.
    fn change_class(&mut self, cpu: CpuId, t: TaskId, class: SchedClass, rt_priority: u8) {
        let prev = self.deschedule(cpu, SwitchReason::Preempted);
        self.policy.dequeue(ctx!(self), cpu, t, DequeueReason::Save);
        let v = &mut self.views[t.idx()];
        let (old_class, old_rt_priority) = (v.class, v.rt_priority);
        v.class = class;
        v.rt_priority = rt_priority;
        self.policy.set_class(ctx!(self), t, old_class, old_rt_priority);
        self.policy.enqueue(ctx!(self), cpu, t, EnqueueReason::Restore);
        self.pick_and_switch(cpu, prev, SwitchReason::Preempted);
    }

    /// `jiffies` now: ticks fall at `tick_phase_ns + k * tick_ns`.
    fn jiffies(&self) -> u64 {
        schedlab_core::jiffies_at(self.now, self.tick_ns, self.cfg.tick_phase_ns)
    }

    /// The first tick strictly after `now`, on the grid `tick_phase_ns + k * tick_ns`.
    fn next_tick_after(&self, now: Ns) -> Ns {
        let phase = self.cfg.tick_phase_ns;
        if now < phase {
            return phase;
        }
        phase + ((now - phase) / self.tick_ns + 1) * self.tick_ns
    }

    fn on_tick(&mut self, cpu: CpuId) {
        let Some(curr) = self.cpu_views[cpu.idx()].curr else {
            self.cpus[cpu.idx()].tick_armed = false;
            return;
        };
        if self.cpus[cpu.idx()].scx_blocked.is_some() {
            // Its task blocked: the adapter ticks a task only up to its stop.
            self.q.push_tick(cpu, self.now + self.tick_ns);
            return;
        }
        // No settling here: nothing a tick does reads the running segment's accounting (the
        // ondemand governor's sample settles what it reads), and every event that changes the
        // segment's speed, counter rotation or task settles it first (docs/architecture.md).
        self.governor_tick(cpu);
        // The interrupt's own time (`CostModel::tick_irq_ns`): run time of the interrupted task in
        // which it makes no progress, kept as kernel time before its work goes on.
        let irq_ns = self.machine.costs.tick_irq_ns.unwrap_or(0);
        if irq_ns > 0 && !self.spinning(curr) {
            self.counters.charge(Charged::TickIrq, 1, irq_ns);
            self.settle(cpu);
            self.tasks[curr.idx()].syscall_left += irq_ns;
            self.program_segment(cpu);
        }
        if self.policy.tick(ctx!(self), cpu, curr) {
            self.cpus[cpu.idx()].need_resched = true;
        } else if self.machine.costs.scx_round_trip_ns.is_some() {
            self.scx_tick_round_trip(cpu);
        }
        self.q.push_tick(cpu, self.now + self.tick_ns);
        self.balance(cpu, BalanceKind::Periodic);
        // nohz idle balancing: a busy CPU with waiting work kicks a balance pass on behalf of every
        // tickless idle CPU, at most once per jiffy machine-wide.
        if self.nr_idle > 0
            && self.cpu_views[cpu.idx()].nr_running >= 2
            && self.last_nohz_jiffy != Some(self.jiffies())
        {
            let jiffy = self.jiffies();
            self.last_nohz_jiffy = Some(jiffy);
            let idle = self.idle;
            for c in idle.iter() {
                if self.error.is_some() || !self.idle.contains(c) {
                    continue;
                }
                self.balance(c, BalanceKind::NohzIdle);
            }
        }
        if self.error.is_none()
            && self.cpus[cpu.idx()].need_resched
            && self.cpu_views[cpu.idx()].curr.is_some()
        {
            if irq_ns > 0 && self.machine.costs.scx_round_trip_ns.is_none() {
                // schedule() runs on the interrupt's way out, once the handler is done.
                if !self.cpus[cpu.idx()].resched_pending {
                    self.cpus[cpu.idx()].resched_pending = true;
                    self.q.push(self.now + irq_ns, Ev::Resched(cpu));
                }
            } else {
                self.resched_own(cpu, SwitchReason::Preempted);
            }
        }
    }

    /// The running task's own slice or tick asks `cpu` to reschedule. In the kernel that happens at
    /// once. Under sched_ext (`CostModel::scx_round_trip_ns`) the task's kernel slice has ended and
    /// the decision is user space's: the task stops making progress (the policy's clock still
    /// charges it, as the adapter puts it back only when its message arrives), and one round trip
    /// later the CPU switches, the decision made.
    fn resched_own(&mut self, cpu: CpuId, why: SwitchReason) {
        if self.machine.costs.scx_round_trip_ns.is_none() {
            self.schedule(cpu, why);
            return;
        }
        if self.cpus[cpu.idx()].resched_pending {
            // A reschedule is on its way already (a wakeup preemption decided in user space): it
            // switches; the task runs on until then.
            self.cpus[cpu.idx()].need_resched = true;
            self.cpus[cpu.idx()].slice_end = None;
            self.program_segment(cpu);
            return;
        }
        let rt = self.scx_round_trip(ScxTrip::Switch).unwrap_or(0);
        self.counters.scx.nr_switches += 1;
        self.counters.scx.switch_ns += rt;
        let (request, dispatch) = self.scx_switch_halves(rt);
        self.settle(cpu);
        let now = self.now;
        let c = &mut self.cpus[cpu.idx()];
        c.need_resched = true;
        c.slice_end = None;
        c.useful_start = c.useful_start.max(now) + request;
        c.resched_pending = true;
        c.scx_decided = true;
        c.scx_dispatch_ns = Some(dispatch);
        c.scx_reason = Some(why);
        self.q.push(now + request, Ev::Resched(cpu));
        self.program_segment(cpu);
    }

    /// A switch's (or a wakeup decision's) round trip `rt` split into its request half, before the
    /// decision, and its dispatch half (`CostModel::scx_switch_dispatch_permille`; unset, none).
    fn scx_switch_halves(&self, rt: Ns) -> (Ns, Ns) {
        let permille = self.machine.costs.scx_switch_dispatch_permille.unwrap_or(0);
        let dispatch = rt * permille as u64 / 1000;
        (rt - dispatch, dispatch)
    }

    /// One user-space round trip of the kind `kind` (`CostModel::scx_round_trip_ns`, or the
    /// kind's own where the machine gives one, spread by its jitter), or `None` when the policy
    /// decides in the kernel.
    fn scx_round_trip(&mut self, kind: ScxTrip) -> Option<Ns> {
        let costs = &self.machine.costs;
        let base = (costs.scx_round_trip_ns?, costs.scx_round_trip_jitter_ns);
        let (rt, jitter) = match kind {
            ScxTrip::Switch => base,
            ScxTrip::Continue => costs
                .scx_continue_round_trip_ns
                .map_or(base, |rt| (rt, costs.scx_continue_round_trip_jitter_ns)),
            ScxTrip::Block => {
                costs.scx_block_round_trip_ns.map_or(base, |rt| (rt, costs.scx_block_round_trip_jitter_ns))
            }
        };
        Some(match jitter {
            Some(j) if j > 0 => self.scx_rng.around(rt, j),
            _ => rt,
        })
    }

    /// Under sched_ext (`CostModel::scx_round_trip_ns`), the running task's kernel slice ended at
    /// this tick: while another task waits for a CPU, user space decides whether it goes on, and
    /// the CPU waits a round trip for the answer.
    fn scx_tick_round_trip(&mut self, cpu: CpuId) {
        let busy = self.cpus.len() - self.nr_idle;
        if self.nr_runnable <= busy
            || self.cpus[cpu.idx()].need_resched
            || self.cpus[cpu.idx()].useful_start > self.now
            || self.cpus[cpu.idx()].slice_end.is_some_and(|se| se <= self.now)
        {
            // Nothing waits, a switch is on its way, the task is not running (its CPU waits for
            // user space already, or for its switch-in), or its policy slice ends at this tick
            // (the switch it asks carries the one round trip): its kernel slice is not ticking.
            return;
        }
        let rt = self.scx_round_trip(ScxTrip::Continue).unwrap_or(0);
        self.counters.scx.nr_continues += 1;
        self.counters.scx.continue_ns += rt;
        self.settle(cpu);
        let c = &mut self.cpus[cpu.idx()];
        c.useful_start = c.useful_start.max(self.now) + rt;
        self.program_segment(cpu);
    }

    fn on_resched(&mut self, cpu: CpuId) {
        let c = &mut self.cpus[cpu.idx()];
        c.resched_pending = false;
        let why = c.scx_reason.take().unwrap_or(SwitchReason::Preempted);
        if c.scx_blocked.is_some() {
            // A decision for a CPU whose task blocked meanwhile: the block is told with it.
            self.finish_scx_block(cpu);
            return;
        }
        // An idle CPU looks for work; a busy one reschedules if something asked it to.
        if self.cpu_views[cpu.idx()].curr.is_none() || c.need_resched {
            self.schedule(cpu, why);
        } else {
            c.scx_dispatch_ns = None;
        }
    }

    /// A sleep or timer of `task` expired (its wait generation `gen` still current). The timer
    /// fires on the task's CPU; if that CPU is idle and the machine has `timer_exit_ns`, the
    /// interrupt reaches it only that much later, and the wakeup (with its choice of CPU) happens
    /// then, the CPU already awake. The wakeup latency still counts from the expiry.
    fn on_timer_expiry(&mut self, task: TaskId, gen: u32) {
        let cpu = self.views[task.idx()].cpu;
        let exit_ns = self.machine.costs.timer_exit_ns.unwrap_or(0);
        let tk = &mut self.tasks[task.idx()];
        if std::mem::take(&mut tk.timer_exit_done) {
            self.cpus[cpu.idx()].timer_awake_at = Some(self.now);
        } else if exit_ns > 0 && self.cpu_views[cpu.idx()].curr.is_none() {
            tk.timer_exit_done = true;
            tk.due_at.get_or_insert(self.now);
            self.q.arm_wake(task, self.now + exit_ns, gen);
            return;
        }
        self.wake(task, cpu, None, false);
    }

    /// Asks `cpu` to reschedule: after the IPI latency if `from` is another CPU, plus the idle-exit
    /// latency if `cpu` is idle; at once for a busy CPU acting on itself.
    pub(crate) fn kick(&mut self, cpu: CpuId, from: CpuId) {
        self.kick_decided(cpu, from, None);
    }

    /// [`Sim::kick`], for a decision under sched_ext whose round trip was drawn at a wakeup and
    /// whose request half is over (`late`, [`Sim::wake`]): only its dispatch half is left.
    fn kick_decided(&mut self, cpu: CpuId, from: CpuId, late: Option<ScxWaking>) {
        if !self.cpus[cpu.idx()].resched_pending {
            // A decision on a message (the wakeup's), as a switch is on a return's.
            let round_trip = match late {
                Some(w) => Some(w.round_trip_ns),
                None => self.scx_round_trip(ScxTrip::Switch),
            };
            let c = &mut self.cpus[cpu.idx()];
            c.resched_pending = true;
            let costs = &self.machine.costs;
            let mut lat = if cpu == from { 0 } else { costs.wakeup_ipi_ns };
            if cpu != from {
                self.counters.charge(Charged::WakeupIpi, 1, costs.wakeup_ipi_ns);
            }
            // An idle CPU exits idle first, unless a timer woke it for this very instant.
            if self.cpu_views[cpu.idx()].curr.is_none() && c.timer_awake_at != Some(self.now) {
                lat += costs.idle_exit_ns;
                self.counters.charge(Charged::IdleExit, 1, costs.idle_exit_ns);
            }
            if let Some(rt) = round_trip {
                // Under sched_ext the decision comes from user space first. A CPU running a task
                // (a wakeup preemption) runs it on until the preempting dispatch lands, the whole
                // round trip; an idle one (or one whose task blocked unheard) picks at the decision
                // and the task it picks starts its dispatch half later (a block told with it keeps
                // the block's).
                let running = self.cpu_views[cpu.idx()].curr.is_some() && c.scx_blocked.is_none();
                let counted = &mut self.counters.scx;
                if running {
                    counted.nr_busy_kicks += 1;
                    counted.busy_kick_ns += rt;
                } else {
                    counted.nr_idle_kicks += 1;
                    counted.idle_kick_ns += rt;
                }
                // What is left of the round trip: all of it, or its dispatch half after a late
                // wakeup's request half.
                let (left, dispatch) = match late {
                    Some(w) => (w.dispatch_ns, w.dispatch_ns),
                    None => {
                        let permille = self.machine.costs.scx_switch_dispatch_permille.unwrap_or(0);
                        (rt, rt * permille as u64 / 1000)
                    }
                };
                let dispatch = if running { 0 } else { dispatch };
                lat += left - dispatch;
                c.scx_decided = true;
                if c.scx_blocked.is_none() {
                    c.scx_dispatch_ns = Some(dispatch);
                }
            }
            self.q.push(self.now + lat, Ev::Resched(cpu));
        }
    }

    /// After `t` was enqueued on `cpu`: wake the CPU if idle, or ask the policy about preemption.
    fn preempt_check(&mut self, cpu: CpuId, t: TaskId, kind: WakeKind, from: CpuId) {
        match self.cpu_views[cpu.idx()].curr {
            None => self.kick(cpu, from),
            Some(curr) => {
                if !self.cpus[cpu.idx()].need_resched
                    && self.policy.check_preempt(ctx!(self), cpu, curr, t, kind)
                {
                    self.cpus[cpu.idx()].need_resched = true;
                    self.kick(cpu, from);
                }
            }
        }
    }

    // ------------------------------------------------------------------------------------------
    // Task life cycle
    // ------------------------------------------------------------------------------------------

    /// Makes a `New` task runnable: `task_new`, `enqueue(New)`, preemption check.
    pub(crate) fn start_task(&mut self, t: TaskId) {
        let now = self.now;
        self.views[t.idx()].state = TaskState::Runnable;
        let tk = &mut self.tasks[t.idx()];
        tk.since = now;
        tk.started_at = Some(now);
        let from = self.views[t.idx()].cpu;
        let cpu = self.policy.task_new(ctx!(self), t);
        if !self.check_cpu_choice("task_new", t, cpu) {
            return;
        }
        self.record(from, crate::trace::TraceKind::WakeupNew { task: t, target: cpu });
        if self.views[t.idx()].parent.is_some() && self.policy.counts_fork_placement() {
            // A forked task starts on its parent's CPU; moving it off counts, as in 2.6.38.
            self.set_task_cpu(t, cpu);
        }
        self.views[t.idx()].cpu = cpu;
        self.cpu_views[cpu.idx()].nr_running += 1;
        self.nr_runnable += 1;
        self.policy.enqueue(ctx!(self), cpu, t, EnqueueReason::New);
        self.preempt_check(cpu, t, WakeKind::Fork, from);
    }

    fn check_cpu_choice(&mut self, hook: &'static str, t: TaskId, cpu: CpuId) -> bool {
        if cpu.idx() >= self.cpus.len() || !self.views[t.idx()].allowed.contains(cpu) {
            let allowed = self.views[t.idx()].allowed;
            self.fail_policy(
                hook,
                format!("placed task {t} on CPU {cpu}, outside its allowed CPUs {allowed:?}"),
            );
            return false;
        }
        true
    }

    /// Wakes a blocked task. `waker_cpu` is the CPU the wakeup happens on. Under sched_ext with the
    /// halves of a round trip set (`CostModel::scx_switch_dispatch_permille`), the wakeup's message
    /// reaches the user-space scheduler a request half later, and only then does the policy hear of
    /// it ([`Sim::finish_scx_wake`]), as the adapter does; otherwise it hears at once.
    pub(crate) fn wake(&mut self, t: TaskId, waker_cpu: CpuId, waker: Option<TaskId>, sync: bool) {
        debug_assert!(self.is_blocked(t));
        let now = self.now;
        let tk = &mut self.tasks[t.idx()];
        tk.sleep_ns += now - tk.since;
        tk.since = now;
        tk.woke_at = Some(tk.due_at.take().unwrap_or(now));
        tk.last_wakeup = Some(now);
        tk.nr_wakeups += 1;
        self.counters.nr_wakeups += 1;
        if let Some(permille) = self.machine.costs.scx_switch_dispatch_permille {
            if let Some(rt) = self.scx_round_trip(ScxTrip::Switch) {
                let dispatch = rt * permille as u64 / 1000;
                let waking = ScxWaking { waker_cpu, round_trip_ns: rt, dispatch_ns: dispatch };
                self.tasks[t.idx()].scx_waking = Some(waking);
                let heard = self.scx_hear_at(now + rt - dispatch);
                self.q.push(heard, Ev::ScxWakeSeen(t));
                return;
            }
        }
        self.tell_wakeup(t, waker_cpu, waker, sync, None);
    }

    /// The user-space scheduler hears of `t`'s wakeup (`Task::scx_waking`): the policy is told now,
    /// with what the CPUs run now.
    fn finish_scx_wake(&mut self, t: TaskId) {
        let Some(waking) = self.tasks[t.idx()].scx_waking.take() else { return };
        self.tell_wakeup(t, waking.waker_cpu, None, false, Some(waking));
    }

    /// Tells the policy of `t`'s wakeup: `select_cpu`, `enqueue(Wakeup)`, the preemption check.
    /// `late`: the wakeup's round trip under sched_ext, its request half over (see [`Sim::wake`]).
    fn tell_wakeup(
        &mut self,
        t: TaskId,
        waker_cpu: CpuId,
        waker: Option<TaskId>,
        sync: bool,
        late: Option<ScxWaking>,
    ) {
        // Woken before user space heard of its block: its message tells both (the adapter puts it
        // back as blocked, wakes it, then picks for the CPU it left, in one round).
        let told = self.scx_blocked_on(t).map(|c| (c, self.end_scx_block(c)));
        debug_assert_eq!(self.views[t.idx()].state, TaskState::Blocked);
        self.views[t.idx()].state = TaskState::Runnable;
        let wait = self.tasks[t.idx()].wait;
        let info = if self.machine.costs.scx_round_trip_ns.is_some() {
            // sched_ext's enqueue does not say who woke the task, where, or what it slept on: the
            // user-space scheduler sees it come back on the CPU it last ran on.
            WakeInfo { waker_cpu: self.views[t.idx()].cpu, waker: None, sync: false, wait: WaitKind::Unknown }
        } else {
            WakeInfo { waker_cpu, waker, sync, wait }
        };
        let cpu = self.policy.select_cpu(ctx!(self), t, &info);
        if !self.check_cpu_choice("select_cpu", t, cpu) {
            return;
        }
        self.record(waker_cpu, crate::trace::TraceKind::Waking { task: t, target: cpu });
        self.set_task_cpu(t, cpu);
        self.cpu_views[cpu.idx()].nr_running += 1;
        self.nr_runnable += 1;
        self.policy.enqueue(ctx!(self), cpu, t, EnqueueReason::Wakeup);
        match told {
            Some((freed, prev)) => {
                if cpu != freed {
                    self.wakeup_check(cpu, t, waker_cpu, late);
                }
                self.pick_and_switch(freed, prev, SwitchReason::Blocked);
            }
            None => self.wakeup_check(cpu, t, waker_cpu, late),
        }
    }

    /// The preemption check after a wakeup enqueued `t` on `cpu`; `late` as for
    /// [`Sim::tell_wakeup`]. A wakeup told late to a CPU whose task has blocked meanwhile, unheard
    /// (`Cpu::scx_blocked`), is checked against that task, as the adapter checks it against the task
    /// it still holds there, and the block is heard in the same round: the CPU picks, whatever the
    /// check said, and is not preempted (the adapter handles a round's messages before the CPUs the
    /// kernel reports free).
    fn wakeup_check(&mut self, cpu: CpuId, t: TaskId, waker_cpu: CpuId, late: Option<ScxWaking>) {
        let Some(late) = late else {
            self.preempt_check(cpu, t, WakeKind::Wakeup, waker_cpu);
            return;
        };
        match (self.cpu_views[cpu.idx()].curr, self.cpus[cpu.idx()].scx_blocked) {
            (Some(held), Some(_)) => {
                self.policy.check_preempt(ctx!(self), cpu, held, t, WakeKind::Wakeup);
                self.counters.scx.nr_blocked_kicks += 1;
                self.finish_scx_block(cpu);
            }
            (None, _) => self.kick_decided(cpu, waker_cpu, Some(late)),
            (Some(curr), None) => {
                if !self.cpus[cpu.idx()].need_resched
                    && self.policy.check_preempt(ctx!(self), cpu, curr, t, WakeKind::Wakeup)
                {
                    self.cpus[cpu.idx()].need_resched = true;
                    self.kick_decided(cpu, waker_cpu, Some(late));
                }
            }
        }
    }

    fn exit_task(&mut self, cpu: CpuId, t: TaskId) {
        let now = self.now;
        self.views[t.idx()].state = TaskState::Exited;
        let tk = &mut self.tasks[t.idx()];
        tk.exited_at = Some(now);
        let template = tk.template as usize;
        self.alive -= 1;
        if !self.w.tasks[template].background {
            self.foreground_alive -= 1;
        }
        self.template_alive[template] -= 1;
        if let Some(p) = self.views[t.idx()].parent {
            let pt = &mut self.tasks[p.idx()];
            pt.children_alive -= 1;
            if pt.waiting_child {
                // wait(): this exit is the one it reaps.
                pt.waiting_child = false;
                self.wake(p, cpu, Some(t), false);
            } else if pt.waiting_children {
                // Reaped by the wait for them all, which ends with the last.
                if pt.children_alive == 0 {
                    pt.waiting_children = false;
                    self.wake(p, cpu, Some(t), false);
                }
            } else {
                pt.children_unreaped += 1;
            }
        }
        self.schedule(cpu, SwitchReason::Exited);
        match self.w.stop {
            StopWhen::AllDone if self.foreground_alive == 0 => self.stop = Some("all_done"),
            StopWhen::TemplateDone(k) if k as usize == template && self.template_alive[template] == 0 => {
                self.stop = Some("task_done")
            }
            _ => {}
        }
    }

    // ------------------------------------------------------------------------------------------
    // Scheduling
    // ------------------------------------------------------------------------------------------

    /// The core `schedule()`: the running task (if any) stops for `why`, then the policy picks.
    pub(crate) fn schedule(&mut self, cpu: CpuId, why: SwitchReason) {
        let prev = self.deschedule(cpu, why);
        self.pick_and_switch(cpu, prev, why);
    }

    /// Takes the running task off `cpu` (`put_prev`), returning it.
    fn deschedule(&mut self, cpu: CpuId, why: SwitchReason) -> Option<TaskId> {
        self.settle(cpu);
        let now = self.now;
        let c = &mut self.cpus[cpu.idx()];
        c.need_resched = false;
        c.slice_end = None;
        c.scx_reason = None;
        c.gen = c.gen.wrapping_add(1); // cancels the pending segment event
        let Some(p) = self.cpu_views[cpu.idx()].curr else {
            c.idle_ns += now - c.idle_since;
            c.idle_since = now;
            return None;
        };
        let stamp = c.task_run_total;
        self.cpu_views[cpu.idx()].curr = None;
        self.respeed_around(cpu);
        let tk = &mut self.tasks[p.idx()];
        tk.last_cpu_ran = Some(cpu);
        tk.evict_stamp = stamp;
        if self.machine.dvfs.governor == crate::dvfs::Governor::Avec {
            tk.avec.update(&self.views[p.idx()].pmc); // the slice's counts, as the scheduler folds them
        }
        let v = &mut self.views[p.idx()];
        v.last_ran_ns = now;
        if why.still_runnable() {
            v.state = TaskState::Runnable;
            tk.since = now;
        } else {
            self.cpu_views[cpu.idx()].nr_running -= 1;
            self.nr_runnable -= 1;
        }
        self.policy.put_prev(ctx!(self), cpu, p, why);
        if why == SwitchReason::Exited {
            self.policy.task_exit(ctx!(self), p);
        }
        Some(p)
    }

    /// Asks the policy for the next task on `cpu` (balancing if it has none) and switches to it.
    fn pick_and_switch(&mut self, cpu: CpuId, prev: Option<TaskId>, why: SwitchReason) {
        // Until the switch, events on this CPU happen in the leaving task's context (as in Linux,
        // where balancing inside `schedule()` runs as the previous task).
        self.cpus[cpu.idx()].leaving = prev;
        self.pick_and_switch_inner(cpu, prev, why);
        self.cpus[cpu.idx()].leaving = None;
    }

    fn pick_and_switch_inner(&mut self, cpu: CpuId, prev: Option<TaskId>, why: SwitchReason) {
        let mut next = self.policy.pick_next(ctx!(self), cpu);
        // A newly idle balance runs inside the pick (in `schedule()`, before the switch): the task
        // it finds starts after it, so its examined work is charged with the pick's.
        let mut balance_examined = 0;
        if next.is_none() {
            balance_examined = self.balance(cpu, BalanceKind::NewlyIdle);
            if self.error.is_some() {
                return;
            }
            if self.cpu_views[cpu.idx()].curr.is_some() {
                // A migration applied during balancing already switched this CPU.
                return;
            }
            next = self.policy.pick_next(ctx!(self), cpu);
        }
        let pick_examined = self.policy.take_examined();
        self.counters.nr_decisions += 1;
        self.pmc_pass(cpu);
        self.counters.nr_examined += pick_examined;
        let examined = pick_examined + balance_examined;
        if let Some(d) = next {
            let ok = d.task.idx() < self.views.len()
                && self.views[d.task.idx()].state == TaskState::Runnable
                && self.views[d.task.idx()].allowed.contains(cpu);
            if !ok {
                let state = self.views.get(d.task.idx()).map(|v| v.state);
                self.fail_policy(
                    "pick_next",
                    format!(
                        "picked task {} on CPU {cpu}, but it is not runnable there (state {state:?})",
                        d.task
                    ),
                );
                return;
            }
        }
        if let Some(d) = next {
            let old = self.views[d.task.idx()].cpu;
            if old != cpu {
                // A global-queue policy handed over a task last queued elsewhere: it moves here
                // before the switch (and its trace event comes first, in the leaving task's context).
                self.cpu_views[old.idx()].nr_running -= 1;
                self.cpu_views[cpu.idx()].nr_running += 1;
                self.set_task_cpu(d.task, cpu);
            }
        }
        let switched = next.map(|d| d.task) != prev;
        if switched && self.trace.is_some() {
            let prev_state = match why {
                SwitchReason::Exited => crate::trace::STATE_DEAD,
                SwitchReason::Blocked => crate::trace::STATE_SLEEPING,
                _ => crate::trace::STATE_RUNNABLE,
            };
            let prev_state = if prev.is_some() { prev_state } else { crate::trace::STATE_RUNNABLE };
            let kind = crate::trace::TraceKind::Switch { prev, prev_state, next: next.map(|d| d.task) };
            if let Some(t) = self.trace.as_mut() {
                t.push(crate::trace::TraceEvent { ts: self.now, cpu, current: prev, kind });
            }
        }
        if switched {
            if let Some(tl) = self.timeline.as_mut() {
                if let Some(d) = next {
                    tl.name_task(d.task, &self.w.tasks[self.tasks[d.task.idx()].template as usize].name);
                }
                tl.switch(cpu.idx(), self.now, next.map(|d| d.task), why.still_runnable());
            }
            self.cpus[cpu.idx()].nr_switches += 1;
            self.counters.nr_switches += 1;
            if let Some(p) = prev {
                let c = &self.cpus[cpu.idx()];
                let ran = c.task_run_total - c.stint_mark;
                let tk = &mut self.tasks[p.idx()];
                tk.run_len.record(ran);
                if why.still_runnable() {
                    tk.nivcsw += 1;
                } else {
                    tk.nvcsw += 1;
                }
            }
        }
        match next {
            None => {
                let c = &mut self.cpus[cpu.idx()];
                c.scx_decided = false;
                c.scx_dispatch_ns = None;
                c.idle_since = self.now;
                self.cpu_views[cpu.idx()].idle_since_ns = self.now;
                if !self.idle.contains(cpu) {
                    self.idle.insert(cpu);
                    self.nr_idle += 1;
                }
                if self.cfg.check_invariants {
                    self.check_work_conservation(cpu);
                }
            }
            Some(d) => self.switch_in(cpu, d, switched, examined, why),
        }
    }

    fn switch_in(&mut self, cpu: CpuId, d: Dispatch, switched: bool, examined: u64, why: SwitchReason) {
        let t = d.task;
        let now = self.now;
        let costs = &self.machine.costs;
        let mut overhead = costs.sched_base_ns + costs.sched_per_task_ns * examined;
        self.counters.charge(Charged::SchedBase, 1, costs.sched_base_ns);
        if examined > 0 {
            self.counters.charge(Charged::SchedPerTask, examined, costs.sched_per_task_ns * examined);
        }
        if costs.scx_round_trip_ns.is_some() {
            // A CPU whose own task ended waits for user space's answer (a reschedule sent to it
            // carried one already). A task that goes on while no other waits keeps its CPU
            // without asking: its kernel slice is refilled.
            let decided = std::mem::take(&mut self.cpus[cpu.idx()].scx_decided);
            let nothing_waits = self.nr_runnable <= self.cpus.len() - self.nr_idle;
            if let Some(dispatch) = self.cpus[cpu.idx()].scx_dispatch_ns.take() {
                // The decision was made already: its dispatch half is left.
                overhead += dispatch;
            } else if !decided && (switched || !nothing_waits) {
                let kind = if why.still_runnable() { ScxTrip::Switch } else { ScxTrip::Block };
                let rt = self.scx_round_trip(kind).unwrap_or(0);
                let counted = &mut self.counters.scx;
                if kind == ScxTrip::Switch {
                    counted.nr_switches += 1;
                    counted.switch_ns += rt;
                } else {
                    counted.nr_blocks += 1;
                    counted.block_ns += rt;
                }
                overhead += rt;
            }
        }
        let costs = &self.machine.costs;
        if switched {
            let c = &mut self.cpus[cpu.idx()];
            c.stint_mark = c.task_run_total;
        }
        let tk = &mut self.tasks[t.idx()];
        if switched {
            let tgid = self.views[t.idx()].tgid;
            let same_mm = self.cpus[cpu.idx()].mm.replace(tgid) == Some(tgid);
            let (kind, switch_ns) = match costs.thread_switch_ns {
                Some(thread) if same_mm => (Charged::ThreadSwitch, thread),
                _ => (Charged::ContextSwitch, costs.context_switch_ns),
            };
            overhead += switch_ns;
            self.counters.charge(kind, 1, switch_ns);
            let refill = match tk.last_cpu_ran {
                Some(l) if l != cpu => {
                    let level = self.machine.topology.level(l, cpu);
                    Some((Charged::Refill(level), costs.refill_ns(level)))
                }
                Some(_) if self.cpus[cpu.idx()].task_run_total - tk.evict_stamp >= costs.evict_after_ns => {
                    Some((Charged::RefillEvicted, costs.refill_evicted_ns))
                }
                _ => None,
            };
            if let Some((kind, cold_ns)) = refill {
                self.counters.charge(kind, 1, cold_ns.saturating_sub(tk.cold_ns));
                tk.cold_ns = tk.cold_ns.max(cold_ns);
            }
        }
        if let Some(b) = tk.blocked_at.take() {
            // Back from a block: the kernel's return path after that long away (run time before
            // the next op, as Linux accounts it to the thread).
            tk.syscall_left += costs.resume_ns(now - b, self.idle.contains(cpu));
        }
        let waited = now - tk.since;
        tk.wait_ns += waited;
        tk.max_wait_ns = tk.max_wait_ns.max(waited);
        if let Some(w) = tk.woke_at.take() {
            // Wakeup latency: from the wakeup until the task executes (after the switch overhead).
            tk.wake_lat.record(now + overhead - w);
        }
        self.views[t.idx()].state = TaskState::Running;
        self.cpu_views[cpu.idx()].curr = Some(t);
        if self.idle.contains(cpu) {
            self.idle.remove(cpu);
            self.nr_idle -= 1;
        }
        if self.trace.is_some() {
            let mut values = Vec::new();
            self.policy.trace_values(t, &mut values);
            for (name, value) in values {
                self.record(cpu, crate::trace::TraceKind::Value { task: t, name, value });
            }
        }
        let speed = if self.speed_varies {
            self.contended_speed(cpu)
        } else {
            self.machine.speed_permille[cpu.idx()]
        };
        // A policy slice counts from the switch, overhead included, as the kernel's does. Under
        // sched_ext the kernel slice the adapter sends counts from the task's start, after the
        // user-space decision reached the CPU (a slice shorter than the round trip still runs),
        // and the kernel ends it only at a tick (`task_tick_scx` reschedules once the slice is
        // used up; nothing else does): at the first tick at or after it runs out.
        let slice_end = match d.slice_ns {
            Some(s) if costs.scx_round_trip_ns.is_some() => {
                Some(self.next_tick_after(now + overhead + s.max(1) - 1))
            }
            Some(s) => Some(now + s.max(1)),
            None => None,
        };
        let c = &mut self.cpus[cpu.idx()];
        c.speed = speed;
        c.seg_start = now;
        c.useful_start = now + overhead;
        c.slice_end = slice_end;
        if !c.tick_armed {
            c.tick_armed = true;
            self.q.push_tick(cpu, self.next_tick_after(now));
        }
        self.program_segment(cpu);
        self.respeed_around(cpu);
        self.governor_switch(cpu);
    }

    // ------------------------------------------------------------------------------------------
    // Balancing and migration
    // ------------------------------------------------------------------------------------------

    /// One balancing pass of the policy on `cpu`. The common case (nothing to move) stays on the
    /// caller's path; applying migrations is out of line.
    /// Returns the tasks the pass examined.
    #[inline(always)]
    fn balance(&mut self, cpu: CpuId, kind: BalanceKind) -> u64 {
        debug_assert!(self.migr.is_empty());
        self.policy.balance(ctx!(self), cpu, kind, &mut self.migr);
        self.counters.nr_balance_calls += 1;
        let examined = self.policy.take_examined();
        self.counters.nr_examined += examined;
        if !self.migr.is_empty() {
            self.apply_migrations(cpu);
        }
        examined
    }

    /// Applies the migrations a balancing pass on `cpu` asked for.
    #[inline(never)]
    fn apply_migrations(&mut self, cpu: CpuId) {
        // Applying a migration may balance again (and use the list): take it out meanwhile.
        let mut list = std::mem::take(&mut self.migr);
        for m in list.drain(..) {
            if self.error.is_some() {
                break;
            }
            self.apply_migration(m, cpu);
        }
        self.migr = list;
    }

    fn apply_migration(&mut self, m: Migration, initiator: CpuId) {
        let t = m.task;
        if let Some(c) = self.scx_blocked_on(t) {
            // The policy moves a task it thinks runs, which blocked meanwhile: user space hears
            // of the block with the move (the adapter's put-back finds it asleep), and it stays.
            self.finish_scx_block(c);
            return;
        }
        let bad = |s: &Self| {
            let Some(v) = s.views.get(t.idx()) else { return Some("no such task".to_string()) };
            if !matches!(v.state, TaskState::Runnable | TaskState::Running) {
                return Some(format!("task is {:?}", v.state));
            }
            if v.cpu != m.from {
                return Some(format!("task is on CPU {}, not {}", v.cpu, m.from));
            }
            if m.to.idx() >= s.cpus.len() || !v.allowed.contains(m.to) {
                return Some(format!("CPU {} is not allowed for it", m.to));
            }
            if m.from == m.to {
                return Some("source and destination are the same".into());
            }
            None
        };
        if let Some(why) = bad(self) {
            self.fail_policy("balance", format!("migration of task {t} from {} to {}: {why}", m.from, m.to));
            return;
        }
        self.counters.nr_balance_migrations += 1;
        if self.views[t.idx()].state == TaskState::Running {
            // Active balance: the stopper preempts the running task, then it moves.
            let prev = self.deschedule(m.from, SwitchReason::Preempted);
            self.move_queued(t, m.from, m.to, initiator);
            self.pick_and_switch(m.from, prev, SwitchReason::Preempted);
        } else {
            self.move_queued(t, m.from, m.to, initiator);
        }
    }

    /// Moves a runnable, not running task: `dequeue(Migrate)`, `enqueue(Migrated)`, preemption check.
    pub(crate) fn move_queued(&mut self, t: TaskId, from: CpuId, to: CpuId, initiator: CpuId) {
        self.policy.dequeue(ctx!(self), from, t, DequeueReason::Migrate);
        self.cpu_views[from.idx()].nr_running -= 1;
        self.set_task_cpu(t, to);
        self.cpu_views[to.idx()].nr_running += 1;
        self.policy.enqueue(ctx!(self), to, t, EnqueueReason::Migrated);
        self.preempt_check(to, t, WakeKind::Migration, initiator);
    }

    /// Sets the nice level of `t` (`set_user_nice`): a level it has already changes nothing, as in
    /// Linux; otherwise the policy hears of the change ([`SchedPolicy::set_nice`]). Returns the CPU
    /// the policy asks to reschedule.
    pub(crate) fn renice(&mut self, t: TaskId, nice: i8) -> Option<CpuId> {
        let old = self.views[t.idx()].nice;
        if old == nice {
            return None;
        }
        self.views[t.idx()].nice = nice;
        self.policy.set_nice(ctx!(self), t, old)
    }

    /// `sched_exec`: where the policy moves `t`, running on `cpu`, as it execs (`None`: it stays).
    /// `Err` when the policy chose a CPU the task may not use (a run error is recorded).
    pub(crate) fn exec_placement(&mut self, cpu: CpuId, t: TaskId) -> Result<Option<CpuId>, ()> {
        match self.policy.exec_cpu(ctx!(self), cpu, t) {
            Some(dest) if dest != cpu => {
                if !self.check_cpu_choice("exec_cpu", t, dest) {
                    return Err(());
                }
                Ok(Some(dest))
            }
            _ => Ok(None),
        }
    }

    /// Moves the running task `t` off `cpu` to `dest`, through the stopper as Linux does: to the
    /// first CPU it may use when it may no longer use `cpu` (`set_cpus_allowed_ptr`:
    /// `cpumask_any_and(active, new_mask)`), or where the policy placed it at exec (`sched_exec`).
    fn move_running(&mut self, cpu: CpuId, t: TaskId, dest: CpuId) {
        let prev = self.deschedule(cpu, SwitchReason::Preempted);
        self.move_queued(t, cpu, dest, cpu);
        self.pick_and_switch(cpu, prev, SwitchReason::Preempted);
    }

    fn on_affinity(&mut self, i: u32) {
        let change = &self.w.affinity_changes[i as usize];
        let mask: CpuSet = match &change.cpus {
            Some(l) => l.iter().map(|&c| CpuId(c)).collect(),
            None => self.machine.topology.all(),
        };
        let template = change.template;
        for ti in 0..self.tasks.len() {
            if self.tasks[ti].template != template {
                continue;
            }
            let t = TaskId(ti as u32);
            self.views[ti].allowed = mask;
            let v = &self.views[ti];
            if mask.contains(v.cpu) || self.scx_blocked_on(t).is_some() {
                // Allowed where it is, or blocked (user space not told yet): it stays.
                continue;
            }
            let dest = mask.first().expect("validated non-empty");
            let from = v.cpu;
            match v.state {
                TaskState::Running => self.move_running(from, t, dest),
                TaskState::Runnable => self.move_queued(t, from, dest, from),
                _ => {}
            }
        }
    }

    // ------------------------------------------------------------------------------------------
    // Samples, invariants, end of run
    // ------------------------------------------------------------------------------------------

    fn take_sample(&mut self) {
        let now = self.now;
        let running = |s: &Self, t: usize| {
            let mut r = s.tasks[t].run_ns;
            if s.views[t].state == TaskState::Running {
                let c = &s.cpus[s.views[t].cpu.idx()];
                let from = c.seg_start.max(c.useful_start);
                r += now.saturating_sub(from);
            }
            r
        };
        let per_task: Option<Vec<Ns>> =
            self.cfg.sample_tasks.then(|| (0..self.tasks.len()).map(|t| running(self, t)).collect());
        // Eq. 4 among the tasks alive now, as the report's end-of-run fairness counts them.
        let alive = (0..self.tasks.len()).filter(|&t| {
            let v = &self.views[t];
            !matches!(v.state, TaskState::New | TaskState::Exited)
                && !v.class.is_rt()
                && !self.w.tasks[self.tasks[t].template as usize].background
        });
        let unfairness = report::unfairness_of(alive.map(|t| {
            running(self, t) as u128 * 1024
                / schedlab_core::weights::nice_to_weight(self.views[t].nice) as u128
        }));
        if unfairness > self.max_unfairness.0 {
            self.max_unfairness = (unfairness, now);
        }
        // The policy's internals per task (ULE's interactivity score...), with the run times.
        let per_task_policy: Option<Vec<Vec<(&'static str, i64)>>> = self.cfg.sample_tasks.then(|| {
            (0..self.tasks.len())
                .map(|t| {
                    let mut values = Vec::new();
                    self.policy.trace_values(TaskId(t as u32), &mut values);
                    values
                })
                .collect()
        });
        let counts = (self.counters.nr_switches, self.counters.nr_migrations);
        self.series.record(
            now,
            self.cpu_views.iter().map(|c| c.nr_running),
            per_task,
            per_task_policy.as_deref(),
            counts,
        );
    }

    fn check_work_conservation(&mut self, cpu: CpuId) {
        let promise = self.policy.work_conservation();
        let waiting = self.views.iter().find(|v| {
            v.state == TaskState::Runnable
                && match promise {
                    WorkConservation::None => false,
                    WorkConservation::PerCpu => v.cpu == cpu,
                    WorkConservation::Global => v.allowed.contains(cpu),
                }
        });
        if let Some(v) = waiting {
            let msg = format!("CPU {cpu} went idle while task {} waits ({promise:?} promise)", v.id);
            self.fail_policy("pick_next", msg);
        }
    }

    fn check_invariants(&mut self) -> Result<(), RunError> {
        let fail = |msg: String, now| Err(RunError::Invariant { now, msg });
        let mut running = 0;
        for (i, c) in self.cpu_views.iter().enumerate() {
            if let Some(t) = c.curr {
                running += 1;
                let v = &self.views[t.idx()];
                if v.state != TaskState::Running || v.cpu.idx() != i {
                    return fail(
                        format!("CPU {i} runs task {t} which is {:?} on CPU {}", v.state, v.cpu),
                        self.now,
                    );
                }
            }
        }
        let engine_running = self.views.iter().filter(|v| v.state == TaskState::Running).count();
        if engine_running != running {
            return fail(format!("{engine_running} tasks are Running but {running} CPUs run one"), self.now);
        }
        if self.nr_idle != self.idle.count() {
            return fail(
                format!("{} CPUs counted idle, {} in the idle set", self.nr_idle, self.idle.count()),
                self.now,
            );
        }
        if let Some(n) = self.policy.nr_runnable() {
            if n != self.nr_runnable {
                return fail(
                    format!("policy holds {n} runnable tasks, the engine counts {}", self.nr_runnable),
                    self.now,
                );
            }
        }
        Ok(())
    }

    /// When the run ended by its duration with tasks left that nothing could ever wake (every one
    /// blocked on another task, none on a timer or a device, none yet to start): the time the last of
    /// them blocked, from which on the run was a deadlock of the workload's own making (or a lost
    /// `resume`).
    fn stalled_since(&self) -> Option<Ns> {
        if self.stop.is_some_and(|s| s != "duration") || self.alive == 0 {
            return None;
        }
        if self.devices.iter().any(|d| d.current.is_some()) {
            return None;
        }
        let mut since = 0;
        for (i, v) in self.views.iter().enumerate() {
            match v.state {
                TaskState::Exited => {}
                TaskState::Blocked
                    if !self.q.wake_pending(TaskId(i as u32)) && self.tasks[i].scx_waking.is_none() =>
                {
                    since = since.max(self.tasks[i].since);
                }
                _ => return None,
            }
        }
        Some(since)
    }

    fn finish(mut self) -> Result<(RunReport, Option<crate::trace::Trace>), RunError> {
        let end = self.now;
        for i in 0..self.cpus.len() {
            let cpu = CpuId(i as u32);
            if self.cpu_views[i].curr.is_some() {
                self.settle(cpu);
                if let Some(t) = self.cpus[i].scx_blocked {
                    // Blocked, user space not told yet: it sleeps, as the report says.
                    self.views[t.idx()].state = TaskState::Blocked;
                }
            } else {
                let c = &mut self.cpus[i];
                c.idle_ns += end - c.idle_since;
                c.idle_since = end;
            }
        }
        // Stretches still open at the end count toward waiting and sleeping time.
        for (tk, v) in self.tasks.iter_mut().zip(&self.views) {
            match v.state {
                TaskState::Runnable => {
                    tk.wait_ns += end - tk.since;
                    tk.max_wait_ns = tk.max_wait_ns.max(end - tk.since);
                }
                // Woken, its wakeup not yet heard by user space: it waits.
                TaskState::Blocked if tk.scx_waking.is_some() => {
                    tk.wait_ns += end - tk.since;
                    tk.max_wait_ns = tk.max_wait_ns.max(end - tk.since);
                }
                TaskState::Blocked => tk.sleep_ns += end - tk.since,
                _ => {}
            }
        }
        for (i, c) in self.cpus.iter().enumerate() {
            let total = c.busy_ns + c.idle_ns + c.overhead_ns;
            if total != end {
                return Err(RunError::Invariant {
                    now: end,
                    msg: format!(
                        "CPU {i}: busy {} + idle {} + overhead {} = {total} ns, not the run length {end} ns",
                        c.busy_ns, c.idle_ns, c.overhead_ns
                    ),
                });
            }
        }
        let stop = self.stop.unwrap_or("duration");
        let mut report = report::build(&self, end, stop);
        report.stalled_ns = self.stalled_since();
        let trace = self.trace.take().map(|events| crate::trace::Trace {
            nr_cpus: self.cpus.len(),
            tasks: self
                .tasks
                .iter()
                .zip(&self.views)
                .map(|(t, v)| crate::trace::TraceTask {
                    name: t.name.clone(),
                    tgid: v.tgid,
                    prio: crate::trace::kernel_prio(v.class, v.nice, v.rt_priority),
                })
                .collect(),
            events,
        });
        Ok((report, trace))
    }

    /// Records a trace event on `cpu` now, when tracing.
    pub(crate) fn record(&mut self, cpu: CpuId, kind: crate::trace::TraceKind) {
        if let Some(t) = self.trace.as_mut() {
            if t.len() >= self.cfg.max_trace_events {
                if self.error.is_none() {
                    self.error = Some(RunError::Limit {
                        now: self.now,
                        msg: format!(
                            "the trace reached {} events, the limit (`max_trace_events`, --max-trace-events); shorten the run or raise it",
                            self.cfg.max_trace_events
                        ),
                    });
                }
                return;
            }
            t.push(crate::trace::TraceEvent {
                ts: self.now,
                cpu,
                current: self.cpu_views[cpu.idx()].curr.or(self.cpus[cpu.idx()].leaving),
                kind,
            });
        }
    }
}
