//! [`Shadow`]: a small core scheduler that turns a sched_ext kernel's task messages into the
//! policy's hook calls and the policy's decisions into dispatch orders. The mapping and what it
//! approximates are in the [crate docs](crate).

use crate::host::Host;
use crate::message::rt_priority_of;
use crate::weight::{nice_of_weight, scx_weight_of_nice};
use schedlab_core::{
    BalanceKind, CpuId, CpuInfo, CpuSet, Ctx, DequeueReason, EnqueueReason, GroupId, GroupInfo, Migration,
    Ns, SchedClass, SchedPolicy, SwitchReason, TaskId, TaskInfo, TaskState, Topology, WakeInfo, WakeKind,
    NSEC_PER_SEC,
};
use std::collections::HashMap;

/// The shortest kernel slice handed out (a policy slice below it is rounded up), and the slice of
/// a task meant to run to the CPU's next tick: the kernel ends a used-up slice only at a tick, so
/// this one ends at the first tick at least this long after the task starts.
pub const MIN_KERNEL_SLICE_NS: Ns = 50_000;

/// How late after its timer the kernel's tick may run and still count as on the grid
/// ([`Shadow::kernel_tick`]).
pub const TICK_JITTER_NS: Ns = 1_000_000;

/// Kernel ticks in a row off the grid by more than [`TICK_JITTER_NS`] that move it.
pub const TICK_DISAGREEMENTS: u32 = 16;

/// How long the scheduler sleeps after a round that left tasks queued in the policy.
///
/// `scx_rustland_core` runs the user-space scheduler ahead of everything else on a CPU that needs
/// work whenever it reports pending tasks, so a scheduler that reported its queued tasks and only
/// yielded would run again at once on its own CPU, ahead of the task it just dispatched there. It
/// reports them and sleeps instead (with its timer slack set to 1 ns): its CPU runs the dispatched
/// task, and once awake it runs again as soon as any CPU runs out of work. Messages wait while it
/// sleeps, so the sleep is short; it doubles with each round that found nothing to do (an idle
/// CPU the policy leaves idle while tasks wait for other CPUs would otherwise run the scheduler
/// 20,000 times a second), up to [`MAX_SLEEP_NS`].
pub const OVERLOAD_SLEEP_NS: Ns = 50_000;

/// The longest sleep between rounds while tasks are queued.
pub const MAX_SLEEP_NS: Ns = 1_000_000;

/// How often blocked tasks are checked for having exited.
pub const EXIT_SWEEP_NS: Ns = NSEC_PER_SEC;

/// One message from the kernel: a task became runnable (`scx_rustland_core`'s `QueuedTask`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelTask {
    /// Thread id.
    pub pid: i32,
    /// The CPU it last ran on (`scx_bpf_task_cpu`).
    pub cpu: i32,
    /// `SCX_ENQ_WAKEUP` was set: it had blocked and woke up.
    pub wakeup: bool,
    /// When it last started running (kernel clock, ns).
    pub start_ts: u64,
    /// When it last stopped running (kernel clock, ns).
    pub stop_ts: u64,
    /// sched_ext weight (100 for nice 0).
    pub weight: u64,
    /// How many CPUs it may run on (a change means its affinity changed).
    pub nr_cpus_allowed: u64,
    /// The kernel's enqueue counter for it: a dispatch must carry the latest.
    pub enq_cnt: u64,
    /// How many times it has started running (`ops.running` calls; schedlab's variant of the BPF
    /// program sends the count in the message's `vtime` field). It tells how often the task
    /// started since its last message: a task preempted with kernel slice left (by a kernel thread,
    /// a higher class) goes back to the head of its CPU's queue and starts again without a
    /// message, and a message carries only the last start's `start_ts`.
    pub nr_starts: u64,
    /// When it last started running on the clock of the shadow's `now` (`CLOCK_MONOTONIC`:
    /// `bpf_ktime_get_ns` in `ops.running`, which schedlab's variant of the BPF program sends in
    /// the message's `exec_runtime` field), or 0 if not sent. With the time of the order that
    /// dispatched it, it splits a round trip into its request and dispatch halves.
    pub start_mono_ns: Ns,
    /// Its scheduling class, if the message carries it (schedlab's BPF variant packs `p->policy`
    /// into `nr_cpus_allowed`'s upper bits: [`crate::message`]).
    pub class: Option<SchedClass>,
    /// Its real-time priority (1-99 in a real-time class, else 0).
    pub rt_priority: u8,
    /// The message says the task left sched_ext alive (`ops.disable`,
    /// [`crate::message::LEFT_EXT_FLAG`]): a change to a real-time class; `class` is the new one.
    pub left_ext: bool,
}

/// A dispatch order for the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Order {
    /// Thread id.
    pub pid: i32,
    /// The CPU it is to run on.
    pub cpu: CpuId,
    /// The kernel slice, ns.
    pub slice_ns: Ns,
    /// Preempt the task running there now (`SCX_ENQ_PREEMPT`).
    pub preempt: bool,
    /// The enqueue counter of the message this answers.
    pub enq_cnt: u64,
}

/// A policy decision the shadow scheduler cannot carry out.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ShadowError {
    /// A hook returned something the hook contract forbids (the simulator would stop the run too).
    #[error("policy {policy}: {hook}: {msg}")]
    Policy {
        /// The policy's name.
        policy: String,
        /// The hook.
        hook: &'static str,
        /// What was wrong.
        msg: String,
    },
}

/// Counters of what the shadow scheduler did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShadowStats {
    /// Kernel messages handled.
    pub nr_messages: u64,
    /// Tasks seen for the first time (`task_new`).
    pub nr_new: u64,
    /// Wakeups (`select_cpu` + `enqueue(Wakeup)`).
    pub nr_wakeups: u64,
    /// Dispatch orders given.
    pub nr_dispatches: u64,
    /// Of those, re-dispatches of the running task after a tick that asked for no reschedule.
    pub nr_continues: u64,
    /// Dispatches that preempt the CPU's running task (wakeup preemption, active balancing).
    pub nr_preempt_dispatches: u64,
    /// Policy `tick` calls.
    pub nr_ticks: u64,
    /// Reschedules asked by `tick` or a policy slice.
    pub nr_tick_resched: u64,
    /// Returns of a running task heard before its CPU's next tick was due, not asked by the
    /// policy: the kernel rescheduled the CPU between ticks while the task's slice was used up (a
    /// higher class taking it, or the kernel's tick landing off the shadow's grid).
    pub nr_returns_before_tick: u64,
    /// Tasks found blocked when their CPU was found with no work (not at their wakeup).
    pub nr_blocked_found_idle: u64,
    /// Tasks found blocked at their wakeup message.
    pub nr_blocked_found_wakeup: u64,
    /// Tasks that exited.
    pub nr_exits: u64,
    /// Migrations asked by balancing and carried out.
    pub nr_migrations: u64,
    /// CPUs offered as free that the policy left idle.
    pub nr_idle_picks: u64,
    /// A CPU returned by `task_new` or `select_cpu` that the task may not use, replaced by its
    /// first allowed CPU (the kernel's affinity can change under the policy).
    pub nr_cpu_fixups: u64,
    /// Affinity changes seen (`sched_setaffinity` on a known task).
    pub nr_affinity_changes: u64,
    /// Nice level changes seen (`setpriority` on a known task; passed to `SchedPolicy::set_nice`).
    pub nr_nice_changes: u64,
    /// Task groups (cgroups) met and made in the policy (`SchedPolicy::group_new`).
    pub nr_groups: u64,
    /// Known tasks seen in another group than before (a thread written to `cgroup.threads`).
    pub nr_group_moves: u64,
    /// Scheduling-class changes seen (`sched_setscheduler` on a known task; passed to
    /// `SchedPolicy::set_class`), leaving and returning to sched_ext included.
    pub nr_class_changes: u64,
    /// Of those, tasks that left sched_ext for the kernel's real-time class (`ops.disable`).
    pub nr_left_ext: u64,
    /// Round trips measured after a continue: a task whose kernel slice ended was sent back to
    /// its CPU, and its next message said when it started again.
    pub nr_continue_gaps: u64,
    /// Their total, kernel clock ns: from the task's stop to its next start, the time its CPU
    /// waited for the user-space scheduler's answer (nothing else was dispatched there meanwhile).
    pub continue_gap_ns: u64,
    /// Round trips measured after a switch: a task came back from its CPU, the policy picked
    /// another for it, and the picked task's next message said when it started.
    pub nr_switch_gaps: u64,
    /// Their total, kernel clock ns: from the previous task's stop to the picked task's start.
    pub switch_gap_ns: u64,
    /// The sum of the squares of the continue round trips, ns² (for their spread).
    pub continue_gap_sq: u128,
    /// The sum of the squares of the switch round trips, ns².
    pub switch_gap_sq: u128,
    /// Round trips measured after a block: a task blocked, its CPU was found with no work, and
    /// the task the policy picked for it, already queued when the first one stopped, started.
    pub nr_block_gaps: u64,
    /// Their total, kernel clock ns: from the blocked task's stop to the picked task's start.
    pub block_gap_ns: u64,
    /// The sum of the squares of the block round trips, ns².
    pub block_gap_sq: u128,
    /// Of the round trips measured, those whose dispatch half is known too (the started task's
    /// message carried its start on the shadow's clock, `KernelTask::start_mono_ns`): continues,
    /// switches and after blocks.
    pub nr_continue_dispatches: u64,
    /// See `nr_continue_dispatches`.
    pub nr_switch_dispatches: u64,
    /// See `nr_continue_dispatches`.
    pub nr_block_dispatches: u64,
    /// Their dispatch halves' total, ns: from the order that sent the task to its CPU (the shadow's
    /// `now` when the decision was made) to the task's start. The rest of each round trip, from the
    /// stop to the decision, is its request half: the message's way to the scheduler, the wait for
    /// its round, the round itself.
    pub continue_dispatch_ns: u64,
    /// See `continue_dispatch_ns`.
    pub switch_dispatch_ns: u64,
    /// See `continue_dispatch_ns`.
    pub block_dispatch_ns: u64,
    /// The round trips (of those with a dispatch half) in total, ns, to set the halves against.
    pub continue_dispatched_gap_ns: u64,
    /// See `continue_dispatched_gap_ns`.
    pub switch_dispatched_gap_ns: u64,
    /// See `continue_dispatched_gap_ns`.
    pub block_dispatched_gap_ns: u64,
    /// Round trips not counted because the dispatched task started more than once before its next
    /// message (`nr_starts`), so the message's `start_ts` is not the start that answered the
    /// dispatch: counted, the task's runs before its last start were taken for waiting
    /// (docs/real-kernel.md, "Measuring the round trip").
    pub nr_gaps_unverified: u64,
}

impl ShadowStats {
    /// The mean round trip of a continue, ns (0 before any was measured).
    pub fn mean_continue_gap_ns(&self) -> u64 {
        self.continue_gap_ns.checked_div(self.nr_continue_gaps).unwrap_or(0)
    }

    /// The mean round trip of a switch, ns (0 before any was measured).
    pub fn mean_switch_gap_ns(&self) -> u64 {
        self.switch_gap_ns.checked_div(self.nr_switch_gaps).unwrap_or(0)
    }

    /// The standard deviation of the continue round trips, ns (0 before two were measured).
    pub fn sd_continue_gap_ns(&self) -> u64 {
        sd(self.nr_continue_gaps, self.continue_gap_ns, self.continue_gap_sq)
    }

    /// The standard deviation of the switch round trips, ns (0 before two were measured).
    pub fn sd_switch_gap_ns(&self) -> u64 {
        sd(self.nr_switch_gaps, self.switch_gap_ns, self.switch_gap_sq)
    }

    /// The mean round trip after a block, ns (0 before any was measured).
    pub fn mean_block_gap_ns(&self) -> u64 {
        self.block_gap_ns.checked_div(self.nr_block_gaps).unwrap_or(0)
    }

    /// The standard deviation of the round trips after a block, ns (0 before two were measured).
    pub fn sd_block_gap_ns(&self) -> u64 {
        sd(self.nr_block_gaps, self.block_gap_ns, self.block_gap_sq)
    }

    /// The mean dispatch half of a continue's round trip, ns (0 before any was measured).
    pub fn mean_continue_dispatch_ns(&self) -> u64 {
        self.continue_dispatch_ns.checked_div(self.nr_continue_dispatches).unwrap_or(0)
    }

    /// The mean dispatch half of a switch's round trip, ns (0 before any was measured).
    pub fn mean_switch_dispatch_ns(&self) -> u64 {
        self.switch_dispatch_ns.checked_div(self.nr_switch_dispatches).unwrap_or(0)
    }

    /// The mean dispatch half of a round trip after a block, ns (0 before any was measured).
    pub fn mean_block_dispatch_ns(&self) -> u64 {
        self.block_dispatch_ns.checked_div(self.nr_block_dispatches).unwrap_or(0)
    }

    /// The dispatch halves' share of the round trips they belong to, of all three kinds, in
    /// thousandths (`None` before any was measured).
    pub fn dispatch_share_permille(&self) -> Option<u64> {
        let gaps =
            self.continue_dispatched_gap_ns + self.switch_dispatched_gap_ns + self.block_dispatched_gap_ns;
        let halves = self.continue_dispatch_ns + self.switch_dispatch_ns + self.block_dispatch_ns;
        (gaps > 0).then(|| halves * 1000 / gaps)
    }
}

/// The population standard deviation of `n` values of sum `sum` and sum of squares `sq`.
fn sd(n: u64, sum: u64, sq: u128) -> u64 {
    if n < 2 {
        return 0;
    }
    let (n, sum) = (n as u128, sum as u128);
    // n² var = n sq - sum², never negative in exact arithmetic.
    let n2_var = (n * sq).saturating_sub(sum * sum);
    ((n2_var as f64).sqrt() / n as f64).round() as u64
}

/// How often a task's cgroup is read again, at most (ns): a thread moved to another group is seen
/// at its first message after this (a new thread at its second message).
pub const GROUP_RECHECK_NS: Ns = 50_000_000;

/// Per-task state the policy does not see.
#[derive(Clone, Copy, Debug)]
struct Extra {
    pid: i32,
    enq_cnt: u64,
    /// When the task's cgroup was last read.
    group_checked: Ns,
    /// End of the slice the policy's `Dispatch` gave, if any.
    slice_end: Option<Ns>,
    /// What freed the CPU the task was dispatched to: its next message's `start_ts` (if it started
    /// once) measures the round trip from then.
    gap_from: Option<GapFrom>,
    /// `nr_starts` of its last message.
    nr_starts: u64,
    /// When its last message arrived (shadow clock): it was queued in the kernel by then.
    queued_at: Ns,
    /// Counts the times it was found blocked on an idle CPU (tells a stale `GapFrom::Block`).
    block_gen: u32,
    /// It was found blocked and has sent no message since: its next one says when it stopped.
    awaiting_block_stop: bool,
    /// The stop at which it blocked, from its first message after it was found blocked.
    block_stop: Option<u64>,
    /// The start (kernel clock), queueing time (shadow clock) and dispatch half (if known) of the
    /// task picked for the CPU it blocked on, waiting for `block_stop`.
    block_waiter: Option<(u64, Ns, Option<Ns>)>,
    /// When the shadow last ordered it to a CPU (shadow clock).
    ordered_at: Option<Ns>,
    /// It left sched_ext (a real-time class runs it): the shadow holds it as blocked and the policy
    /// does not run it until it comes back.
    away: bool,
    /// It was taken out of its CPU's queue for a class change (`dequeue(Save)`) and awaits its
    /// `enqueue(Restore)`, which its return to sched_ext brings.
    saved: bool,
    /// The CPU it was running on when it left sched_ext (held by it: `Slot::rt_held`).
    away_from: Option<CpuId>,
}

/// What freed a CPU before the task dispatched there started (`Extra::gap_from`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GapFrom {
    /// A task came back at this stop (kernel clock): the same one sent back (a continue, `true`)
    /// or another (a switch, `false`).
    Return(u64, bool),
    /// A task blocked at this stop (kernel clock).
    BlockedAt(u64),
    /// This task blocked, at a stop its next message will tell (its `block_gen` then).
    Blocked(TaskId, u32),
}

/// The first tick strictly after `now` on a fixed grid of period `tick_ns` through `phase_ns`, as
/// the kernel's periodic tick keeps a fixed grid whatever ran when: multiples of `tick_ns` on the
/// shadow's clock until [`Shadow::kernel_tick`] tells the kernel's own phase.
fn tick_after(now: Ns, tick_ns: Ns, phase_ns: Ns) -> Ns {
    let phase = phase_ns % tick_ns;
    if now < phase {
        return phase;
    }
    phase + ((now - phase) / tick_ns + 1) * tick_ns
}

/// The kernel's record of a CPU's last stop ([`Shadow::cpu_stopped`]).
#[derive(Clone, Copy, Debug)]
struct LastStop {
    pid: i32,
    stop_ts: u64,
    runnable: bool,
}

/// Per-CPU state the policy does not see.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    /// When the next tick of this CPU is due.
    next_tick: Ns,
    /// Where this CPU's ticks fall within a tick period (the kernel's, once known).
    tick_phase_ns: Ns,
    /// Whether `tick_phase_ns` is the kernel's ([`Shadow::kernel_tick`]).
    tick_phase_known: bool,
    /// Kernel ticks in a row that fell more than [`TICK_JITTER_NS`] from the grid.
    tick_disagreements: u32,
    /// Something was enqueued here while it ran nothing: pick for it.
    needs_pick: bool,
    /// A wakeup or a balancer asked to preempt the running task.
    resched: bool,
    /// Its task blocked and nothing has been picked for it since (the round trip after a block
    /// runs from that task's stop to the start of the next).
    freed: Option<GapFrom>,
    /// Its running task left sched_ext for the kernel's real-time class, which runs it here now:
    /// nothing is picked for it until the kernel reports it free or that task comes back.
    rt_held: bool,
    /// The last task to stop on this CPU, when (kernel clock) and whether it stayed runnable, as
    /// the kernel recorded it ([`Shadow::cpu_stopped`]).
    last_stop: Option<LastStop>,
}

/// The shadow core scheduler.
pub struct Shadow {
    policy: Box<dyn SchedPolicy>,
    policy_name: String,
    topo: Topology,
    tick_ns: Ns,
    seed: u64,
    numa: bool,
    now: Ns,
    tasks: Vec<TaskInfo>,
    extra: Vec<Extra>,
    by_pid: HashMap<i32, TaskId>,
    cpus: Vec<CpuInfo>,
    slots: Vec<Slot>,
    groups: Vec<GroupInfo>,
    /// The cgroup path of each group (`""` for the root), for finding a task's group.
    group_paths: Vec<String>,
    migr: Vec<Migration>,
    orders: Vec<Order>,
    error: Option<ShadowError>,
    stats: ShadowStats,
    last_sweep: Ns,
    last_nohz: Ns,
    nr_queued: usize,
    /// Rounds in a row with no message and no order.
    quiet_rounds: u32,
    messages_since_round: bool,
    /// CLOCK_MONOTONIC minus the kernel side's clock (`scx_bpf_now`, the runqueue clock of the
    /// messages' `start_ts` and `stop_ts`): the least gap seen between a message's arrival and the
    /// stop time it reports for a task whose kernel slice ended (it stopped just before it was sent).
    /// `None` until such a message came.
    bpf_clock_offset: Option<i64>,
    /// Diagnostic notes of the decisions made without a message (kept only when tracing).
    notes: Option<Vec<String>>,
}

macro_rules! ctx {
    ($s:ident) => {
        &Ctx {
            now: $s.now,
            topo: &$s.topo,
            tasks: &$s.tasks,
            cpus: &$s.cpus,
            groups: &$s.groups,
            tick_ns: $s.tick_ns,
            // The shadow runs on the real kernel's clock; jiffies are `now / tick_ns` there.
            tick_phase_ns: 0,
            numa: $s.numa,
            seed: $s.seed,
            // The real kernel's own balancing is not timed by the policy here.
            decision_cost: schedlab_core::DecisionCost::default(),
            cpu_capacity: &[],
        }
    };
}

impl Shadow {
    /// A shadow scheduler running `policy` on a machine of topology `topo` with `hz` ticks per
    /// second, starting at time `now` (ns, the clock later calls use).
    pub fn new(policy: Box<dyn SchedPolicy>, topo: Topology, hz: u32, now: Ns) -> Shadow {
        let n = topo.nr_cpus();
        let tick_ns = NSEC_PER_SEC / u64::from(hz.max(1));
        let numa = {
            let first = topo.place(CpuId(0)).node;
            topo.cpus().any(|c| topo.place(c).node != first)
        };
        let mut s = Shadow {
            policy_name: policy.name().to_string(),
            policy,
            topo,
            tick_ns,
            seed: 0,
            numa,
            now,
            tasks: Vec::new(),
            extra: Vec::new(),
            by_pid: HashMap::new(),
            cpus: vec![CpuInfo { curr: None, nr_running: 0, idle_since_ns: now }; n],
            slots: vec![Slot { next_tick: tick_after(now, tick_ns, 0), ..Slot::default() }; n],
            groups: vec![GroupInfo { parent: None, shares: 1024 }],
            group_paths: vec![String::new()],
            migr: Vec::new(),
            orders: Vec::new(),
            error: None,
            stats: ShadowStats::default(),
            last_sweep: now,
            last_nohz: 0,
            nr_queued: 0,
            quiet_rounds: 0,
            messages_since_round: false,
            bpf_clock_offset: None,
            notes: None,
        };
        s.policy.init(ctx!(s));
        s
    }

    /// Keeps notes of the decisions made without a kernel message (a task found blocked or gone on
    /// a CPU with no work, a task found exited by the sweep), for [`Shadow::take_notes`].
    pub fn keep_notes(&mut self) {
        self.notes = Some(Vec::new());
    }

    /// The notes kept since the last call.
    pub fn take_notes(&mut self) -> Vec<String> {
        self.notes.as_mut().map(std::mem::take).unwrap_or_default()
    }

    fn note(&mut self, f: impl FnOnce() -> String) {
        if let Some(n) = self.notes.as_mut() {
            n.push(f());
        }
    }

    /// The policy's name.
    pub fn policy_name(&self) -> &str {
        &self.policy_name
    }

    /// The policy itself (for its counters).
    pub fn policy(&self) -> &dyn SchedPolicy {
        self.policy.as_ref()
    }

    /// What the shadow scheduler has done so far.
    pub fn stats(&self) -> ShadowStats {
        self.stats
    }

    /// The task the policy believes runs on `cpu`, as a thread id.
    pub fn running_pid(&self, cpu: CpuId) -> Option<i32> {
        self.cpus.get(cpu.idx())?.curr.map(|t| self.extra[t.idx()].pid)
    }

    /// Tasks runnable in the policy and not dispatched: what the kernel side is told is pending.
    pub fn nr_queued(&self) -> usize {
        self.nr_queued
    }

    /// Sets a task's state, keeping the count of queued tasks.
    fn set_state(&mut self, t: TaskId, st: TaskState) {
        let old = std::mem::replace(&mut self.tasks[t.idx()].state, st);
        if old == TaskState::Runnable {
            self.nr_queued -= 1;
        }
        if st == TaskState::Runnable {
            self.nr_queued += 1;
        }
    }

    /// Threads known to the shadow scheduler (alive or not yet found exited).
    pub fn nr_tasks(&self) -> usize {
        self.by_pid.len()
    }

    /// Handles one kernel message at time `now`.
    pub fn queued(&mut self, host: &mut dyn Host, now: Ns, kt: &KernelTask) -> Result<(), ShadowError> {
        self.now = self.now.max(now);
        self.stats.nr_messages += 1;
        self.messages_since_round = true;
        let Some(&t) = self.by_pid.get(&kt.pid) else {
            // A task never met that leaves: nothing to tell the policy.
            if kt.left_ext {
                return Ok(());
            }
            return self.new_task(host, kt);
        };
        self.extra[t.idx()].enq_cnt = kt.enq_cnt;
        if kt.left_ext {
            self.left_ext(host, t, kt);
            return self.take_error();
        }
        if let Some(class) = kt.class {
            self.reclass(t, class, rt_priority_of(class, kt.rt_priority), kt.cpu);
        }
        self.refresh_facts(host, t, kt);
        if !kt.wakeup && kt.stop_ts > 0 {
            let gap = self.now as i64 - kt.stop_ts as i64;
            self.bpf_clock_offset = Some(self.bpf_clock_offset.map_or(gap, |o| o.min(gap)));
        }
        self.round_trip_of(t, kt);
        self.extra[t.idx()].queued_at = self.now;
        if kt.stop_ts > kt.start_ts {
            let tk = &mut self.tasks[t.idx()];
            tk.sum_exec_ns += kt.stop_ts - kt.start_ts;
            tk.last_ran_ns = self.now;
        }
        match self.tasks[t.idx()].state {
            TaskState::Running => {
                let cpu = self.tasks[t.idx()].cpu;
                if kt.wakeup {
                    // It blocked while running and has woken up since.
                    self.stats.nr_blocked_found_wakeup += 1;
                    self.ticks_before_block(cpu, t, kt.stop_ts);
                    self.put_prev(cpu, t, SwitchReason::Blocked);
                    self.slots[cpu.idx()].freed = Some(GapFrom::BlockedAt(kt.stop_ts));
                    self.wakeup(t);
                } else {
                    self.returned(cpu, t, kt.stop_ts);
                }
            }
            // Queued in the policy already: the kernel preempted it after the policy did (wakeup
            // preemption, active balancing), or it slept and woke before that preemption landed.
            TaskState::Runnable => {}
            TaskState::New | TaskState::Blocked | TaskState::Exited => self.wakeup(t),
        }
        self.recheck_group(host, t);
        self.take_error()
    }

    /// Measures the round trip that ended when `t` started after its dispatch, if its message `kt`
    /// can tell (docs/real-kernel.md, "Measuring the round trip"), and completes one waiting for
    /// the stop of `t`'s block.
    fn round_trip_of(&mut self, t: TaskId, kt: &KernelTask) {
        let e = &mut self.extra[t.idx()];
        let started_once = kt.nr_starts == e.nr_starts + 1;
        e.nr_starts = kt.nr_starts;
        if std::mem::take(&mut e.awaiting_block_stop) {
            // Its first message since it was found blocked: it has not run since, so its last
            // stop is the block.
            match e.block_waiter.take() {
                Some((start, queued_at, dispatch)) => self.block_gap(kt.stop_ts, start, queued_at, dispatch),
                None => self.extra[t.idx()].block_stop = Some(kt.stop_ts),
            }
        }
        let Some(from) = self.extra[t.idx()].gap_from.take() else { return };
        if !started_once {
            self.stats.nr_gaps_unverified += 1;
            return;
        }
        let start = kt.start_ts;
        let queued_at = self.extra[t.idx()].queued_at;
        // The dispatch half: from the order that sent it to the start it answered (one clock).
        let dispatch = match self.extra[t.idx()].ordered_at {
            Some(at) if kt.start_mono_ns >= at && kt.start_mono_ns - at < NSEC_PER_SEC => {
                Some(kt.start_mono_ns - at)
            }
            _ => None,
        };
        match from {
            GapFrom::Return(stop, continued) => {
                if start > stop && start - stop < NSEC_PER_SEC {
                    let gap = start - stop;
                    let sq = u128::from(gap) * u128::from(gap);
                    let st = &mut self.stats;
                    let d = dispatch.filter(|&d| d <= gap);
                    if continued {
                        st.nr_continue_gaps += 1;
                        st.continue_gap_ns += gap;
                        st.continue_gap_sq += sq;
                        if let Some(d) = d {
                            st.nr_continue_dispatches += 1;
                            st.continue_dispatch_ns += d;
                            st.continue_dispatched_gap_ns += gap;
                        }
                    } else {
                        st.nr_switch_gaps += 1;
                        st.switch_gap_ns += gap;
                        st.switch_gap_sq += sq;
                        if let Some(d) = d {
                            st.nr_switch_dispatches += 1;
                            st.switch_dispatch_ns += d;
                            st.switch_dispatched_gap_ns += gap;
                        }
                    }
                }
            }
            GapFrom::BlockedAt(stop) => self.block_gap(stop, start, queued_at, dispatch),
            GapFrom::Blocked(prev, gen) => {
                let p = &mut self.extra[prev.idx()];
                if p.block_gen != gen {
                    return; // it has blocked again since: that stop is not this one's
                }
                match p.block_stop {
                    Some(stop) => self.block_gap(stop, start, queued_at, dispatch),
                    None if p.awaiting_block_stop => p.block_waiter = Some((start, queued_at, dispatch)),
                    None => {}
                }
            }
        }
    }

    /// A round trip after a block: from `stop`, when a task blocked, to `start`, when the task
    /// picked for its CPU started (kernel clock). Counted only if that task was queued in the
    /// kernel by `stop` (its message arrived at `queued_at`, shadow clock, which less the least
    /// message delay seen is no earlier than its enqueue): otherwise the CPU was idle, not waiting.
    fn block_gap(&mut self, stop: u64, start: u64, queued_at: Ns, dispatch: Option<Ns>) {
        let Some(offset) = self.bpf_clock_offset else { return };
        let enqueued_by = queued_at as i64 - offset;
        if enqueued_by > stop as i64 || start <= stop || start - stop >= NSEC_PER_SEC {
            return;
        }
        let gap = start - stop;
        let st = &mut self.stats;
        st.nr_block_gaps += 1;
        st.block_gap_ns += gap;
        st.block_gap_sq += u128::from(gap) * u128::from(gap);
        if let Some(d) = dispatch.filter(|&d| d <= gap) {
            st.nr_block_dispatches += 1;
            st.block_dispatch_ns += d;
            st.block_dispatched_gap_ns += gap;
        }
    }

    /// The group of the cgroup at `path`, made (with its parents) the first time it is met: its
    /// shares from the cgroup's weight, then the policy's `group_new`, as Linux makes a group's
    /// runqueues when the cgroup is created.
    fn group_of_path(&mut self, host: &mut dyn Host, path: &str) -> GroupId {
        let path = path.trim_end_matches('/');
        if let Some(i) = self.group_paths.iter().position(|p| p == path) {
            return GroupId(i as u32);
        }
        let parent_path = path.rsplit_once('/').map_or("", |(parent, _)| parent);
        let parent = self.group_of_path(host, parent_path);
        let g = GroupId(self.groups.len() as u32);
        self.groups.push(GroupInfo { parent: Some(parent), shares: host.group_shares(path) });
        self.group_paths.push(path.to_string());
        self.stats.nr_groups += 1;
        self.policy.group_new(ctx!(self), g);
        g
    }

    /// Reads task `t`'s cgroup again if [`GROUP_RECHECK_NS`] has passed, and moves it if it
    /// changed, as Linux's `sched_move_task` does: a queued task leaves its old group's runqueue
    /// and joins the new group's on the same CPU (`dequeue(Migrate)` and `enqueue(Migrated)`: its
    /// vruntime made relative to the old runqueue and placed against the new one); a blocked one
    /// just belongs to the new group when it wakes. A running task is left for its next message.
    fn recheck_group(&mut self, host: &mut dyn Host, t: TaskId) {
        let state = self.tasks[t.idx()].state;
        let e = self.extra[t.idx()];
        if self.now < e.group_checked + GROUP_RECHECK_NS
            || !matches!(state, TaskState::Runnable | TaskState::Blocked)
        {
            return;
        }
        self.extra[t.idx()].group_checked = self.now;
        let Some(path) = host.task_group(e.pid) else { return };
        let g = self.group_of_path(host, &path);
        if g == self.tasks[t.idx()].group {
            return;
        }
        self.stats.nr_group_moves += 1;
        if state == TaskState::Runnable {
            let cpu = self.tasks[t.idx()].cpu;
            self.policy.dequeue(ctx!(self), cpu, t, DequeueReason::Migrate);
            self.tasks[t.idx()].group = g;
            self.policy.enqueue(ctx!(self), cpu, t, EnqueueReason::Migrated);
        } else {
            self.tasks[t.idx()].group = g;
        }
    }

    /// The kernel's record of the last task to stop on `cpu`: `pid`, at `stop_ts` on the kernel's
    /// clock, still `runnable` or not (schedlab's BPF program keeps one per CPU), read for a CPU
    /// the kernel reports free before [`Shadow::schedule`]. When it is the task the policy holds
    /// there, it tells whether that task blocked (without it, the host is asked: a /proc read per
    /// such CPU), and a task that blocked is charged the ticks that fell while it ran, up to that
    /// stop, as the kernel's tick charged them; without the record those ticks waited for the
    /// task's next message, which comes after the CPU has moved on (a pipe pair's wakeup arrives
    /// while its partner runs), and were lost.
    pub fn cpu_stopped(&mut self, cpu: CpuId, pid: i32, stop_ts: u64, runnable: bool) {
        if let Some(slot) = self.slots.get_mut(cpu.idx()) {
            slot.last_stop = Some(LastStop { pid, stop_ts, runnable });
        }
    }

    /// The kernel's last tick on `cpu`, at `at` on the shadow's clock (schedlab's BPF program
    /// records it in `ops.tick`; user space reads it every round). The CPU's ticks move onto the
    /// kernel's grid, the pending one to the nearest point of it: a task running across the
    /// kernel's tick is charged that tick, as the kernel charges it, wherever the shadow's own
    /// grid of multiples of the period would have put it.
    ///
    /// `ops.tick` runs an interrupt's latency after the tick's timer expired (0.05-0.6 ms under
    /// software emulation, now and then several ms), so the grid's phase is the earliest seen
    /// within [`TICK_JITTER_NS`]: a later tick moves nothing, and one that disagrees by more (a
    /// tick held up for milliseconds, which would otherwise read as an earlier phase) moves the
    /// grid only when [`TICK_DISAGREEMENTS`] ticks in a row disagree with it.
    pub fn kernel_tick(&mut self, cpu: CpuId, at: Ns) {
        let tick = self.tick_ns;
        let Some(slot) = self.slots.get_mut(cpu.idx()) else { return };
        let phase = at % tick;
        if slot.tick_phase_known {
            // How much later than the grid's phase this tick ran, in [0, tick).
            let late = (phase + tick - slot.tick_phase_ns) % tick;
            let earlier = tick - late;
            if late <= TICK_JITTER_NS {
                slot.tick_disagreements = 0;
                return;
            }
            if earlier > TICK_JITTER_NS {
                slot.tick_disagreements += 1;
                if slot.tick_disagreements < TICK_DISAGREEMENTS {
                    return;
                }
            }
        }
        slot.tick_phase_known = true;
        slot.tick_disagreements = 0;
        slot.tick_phase_ns = phase;
        slot.next_tick = tick_after(slot.next_tick.saturating_sub(tick / 2), tick, phase);
    }

    /// Ends a scheduling round at time `now`: `free` lists CPUs known to have no work (the CPU the
    /// scheduler runs on, idle CPUs the kernel handed out); every CPU that needs a task gets the
    /// policy's pick. The orders to send are appended to `out`.
    pub fn schedule(
        &mut self,
        host: &mut dyn Host,
        now: Ns,
        free: &[CpuId],
        out: &mut Vec<Order>,
    ) -> Result<(), ShadowError> {
        self.now = self.now.max(now);
        for &c in free {
            if c.idx() >= self.cpus.len() {
                continue;
            }
            if let Some(t) = self.cpus[c.idx()].curr {
                // The kernel says this CPU has no work, yet the policy's task for it sent no
                // message: it blocked or exited, unless it is still waiting to start. A task sent
                // to it in this very round (a re-dispatch after its tick) has not started yet.
                let pid = self.extra[t.idx()].pid;
                if self.orders.iter().any(|o| o.pid == pid) {
                    continue;
                }
                let record = self.slots[c.idx()].last_stop.filter(|s| s.pid == pid);
                let runnable = match record {
                    Some(s) => Some(s.runnable),
                    None => host.is_runnable(pid),
                };
                self.note(|| {
                    format!("cpu {c} free, held pid {pid}: runnable {runnable:?} (recorded {record:?})")
                });
                match runnable {
                    Some(true) => continue,
                    Some(false) => {
                        self.stats.nr_blocked_found_idle += 1;
                        if let Some(s) = record {
                            self.ticks_before_block(c, t, s.stop_ts);
                        }
                        self.put_prev(c, t, SwitchReason::Blocked);
                        let e = &mut self.extra[t.idx()];
                        e.block_gen = e.block_gen.wrapping_add(1);
                        e.awaiting_block_stop = true;
                        e.block_stop = None;
                        e.block_waiter = None;
                        self.slots[c.idx()].freed = Some(GapFrom::Blocked(t, e.block_gen));
                    }
                    None => self.exit(c, t),
                }
            }
            self.slots[c.idx()].rt_held = false;
            self.slots[c.idx()].needs_pick = true;
            self.slots[c.idx()].last_stop = None;
        }
        for i in 0..self.cpus.len() {
            let c = CpuId(i as u32);
            let slot = self.slots[i];
            match self.cpus[i].curr {
                Some(t) if slot.resched => {
                    self.put_prev(c, t, SwitchReason::Preempted);
                    self.pick(c, true);
                }
                None if (slot.needs_pick || slot.resched) && !slot.rt_held => self.pick(c, false),
                _ => {}
            }
            self.slots[i].needs_pick = false;
            self.slots[i].resched = false;
            if self.error.is_some() {
                break;
            }
        }
        if self.now >= self.last_sweep + EXIT_SWEEP_NS {
            self.last_sweep = self.now;
            self.sweep_exits(host);
        }
        if self.orders.is_empty() && !self.messages_since_round {
            self.quiet_rounds = self.quiet_rounds.saturating_add(1);
        } else {
            self.quiet_rounds = 0;
        }
        self.messages_since_round = false;
        out.append(&mut self.orders);
        self.take_error()
    }

    /// How long the scheduler should sleep after this round: `None` when no task is queued (it
    /// then only yields, and runs again at the next message); see [`OVERLOAD_SLEEP_NS`].
    pub fn sleep_ns(&self) -> Option<Ns> {
        (self.nr_queued > 0).then(|| (OVERLOAD_SLEEP_NS << self.quiet_rounds.min(8)).min(MAX_SLEEP_NS))
    }

    fn take_error(&mut self) -> Result<(), ShadowError> {
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn fail(&mut self, hook: &'static str, msg: String) {
        if self.error.is_none() {
            self.error = Some(ShadowError::Policy { policy: self.policy_name.clone(), hook, msg });
        }
    }

    fn new_task(&mut self, host: &mut dyn Host, kt: &KernelTask) -> Result<(), ShadowError> {
        let Some(facts) = host.task_facts(kt.pid) else {
            // Gone before we saw it: the kernel drops its queued entry.
            return Ok(());
        };
        let n = self.cpus.len();
        let mut allowed = facts.allowed.and(&self.topo.all());
        if allowed.is_empty() {
            allowed = self.topo.all();
        }
        let last = usize::try_from(kt.cpu).ok().filter(|&c| c < n).map(|c| CpuId(c as u32));
        let cpu = last.filter(|c| allowed.contains(*c)).or(allowed.first()).unwrap_or(CpuId(0));
        let group = match host.task_group(kt.pid) {
            Some(path) => self.group_of_path(host, &path),
            None => GroupId::ROOT,
        };
        let t = TaskId(self.tasks.len() as u32);
        self.tasks.push(TaskInfo {
            id: t,
            tgid: facts.tgid,
            parent: None,
            // The message's class is the one the kernel enqueued it with (a fair one: real-time
            // tasks are not sched_ext's); `sched_getscheduler`'s may be later.
            class: Some(kt.class.unwrap_or(facts.class)).filter(|c| !c.is_rt()).unwrap_or_default(),
            nice: facts.nice.unwrap_or_else(|| nice_of_weight(kt.weight)),
            rt_priority: 0,
            group,
            allowed,
            cpu,
            state: TaskState::Blocked,
            sum_exec_ns: 0,
            last_ran_ns: 0,
            pmc: Default::default(),
            slice_ns: None,
        });
        // Read again at its next message: a new thread is often moved into its group at once.
        let group_checked = self.now.saturating_sub(GROUP_RECHECK_NS);
        self.extra.push(Extra {
            pid: kt.pid,
            enq_cnt: kt.enq_cnt,
            group_checked,
            slice_end: None,
            gap_from: None,
            nr_starts: kt.nr_starts,
            queued_at: self.now,
            block_gen: 0,
            awaiting_block_stop: false,
            block_stop: None,
            block_waiter: None,
            ordered_at: None,
            away: false,
            saved: false,
            away_from: None,
        });
        self.by_pid.insert(kt.pid, t);
        self.stats.nr_new += 1;
        let chosen = self.policy.task_new(ctx!(self), t);
        let cpu = self.allowed_or_fixed(t, chosen);
        self.tasks[t.idx()].cpu = cpu;
        self.set_state(t, TaskState::Runnable);
        self.cpus[cpu.idx()].nr_running += 1;
        self.policy.enqueue(ctx!(self), cpu, t, EnqueueReason::New);
        self.after_enqueue(cpu, t, WakeKind::Fork);
        self.take_error()
    }

    /// The kernel re-enqueues a task whose affinity or nice level changes; its message shows the
    /// new CPU count and weight. An affinity that no longer holds the task's CPU moves it, as
    /// `sched_setaffinity` does (`move_queued_task`). A new nice level reaches the policy through
    /// [`SchedPolicy::set_nice`] (Linux's `set_user_nice`, FreeBSD's `sched_nice`), so the task
    /// keeps its history in the policy (vruntime, lag, sleep average, interactivity score); a CPU
    /// the policy names is rescheduled.
    fn refresh_facts(&mut self, host: &mut dyn Host, t: TaskId, kt: &KernelTask) {
        let info = &self.tasks[t.idx()];
        let affinity_changed = kt.nr_cpus_allowed != 0 && kt.nr_cpus_allowed != info.allowed.count() as u64;
        let nice_changed = kt.weight != 0 && kt.weight != scx_weight_of_nice(info.nice);
        if !(affinity_changed || nice_changed) {
            return;
        }
        let Some(facts) = host.task_facts(kt.pid) else { return };
        let nice = facts.nice.unwrap_or_else(|| nice_of_weight(kt.weight));
        let old_nice = self.tasks[t.idx()].nice;
        if nice != old_nice {
            self.stats.nr_nice_changes += 1;
            self.tasks[t.idx()].nice = nice;
            if let Some(c) = self.policy.set_nice(ctx!(self), t, old_nice) {
                if c.idx() < self.cpus.len() {
                    match self.cpus[c.idx()].curr {
                        Some(_) => self.slots[c.idx()].resched = true,
                        None => self.slots[c.idx()].needs_pick = true,
                    }
                }
            }
        }
        if affinity_changed {
            let mut allowed = facts.allowed.and(&self.topo.all());
            if allowed.is_empty() {
                allowed = self.topo.all();
            }
            if allowed != self.tasks[t.idx()].allowed {
                self.stats.nr_affinity_changes += 1;
                self.tasks[t.idx()].allowed = allowed;
                let from = self.tasks[t.idx()].cpu;
                if !allowed.contains(from) {
                    let dest = allowed.first().unwrap_or(CpuId(0));
                    if self.tasks[t.idx()].state == TaskState::Running {
                        self.put_prev(from, t, SwitchReason::Preempted);
                        self.slots[from.idx()].needs_pick = true;
                    }
                    if self.tasks[t.idx()].state == TaskState::Runnable {
                        self.move_queued(t, from, dest);
                    } else {
                        self.tasks[t.idx()].cpu = dest;
                    }
                }
            }
        }
    }

    /// `t` left sched_ext alive (`kt` is `ops.disable`'s message). Linux 7.2 calls `ops.disable`
    /// before it writes the new policy, so the message carries the old one; the class it left for
    /// is then read from the host. A fair class there means the task is back already (its return
    /// message follows) or sched_ext itself is being disabled: nothing to do.
    fn left_ext(&mut self, host: &mut dyn Host, t: TaskId, kt: &KernelTask) {
        let reported = kt.class.filter(|c| c.is_rt()).map(|c| (c, kt.rt_priority));
        let now_in = || host.task_facts(kt.pid).filter(|f| f.class.is_rt()).map(|f| (f.class, f.rt_priority));
        if let Some((class, rt_priority)) = reported.or_else(now_in) {
            self.reclass(t, class, rt_priority_of(class, rt_priority), kt.cpu);
        }
    }

    /// The kernel reports `t` in `class` (real-time priority `rt_priority`), last on CPU `kcpu`.
    /// A change takes the engine's `change_class` path as far as sched_ext lets it: the task leaves
    /// its CPU (`put_prev(Preempted)`) if it ran and its queue (`dequeue(Save)`) if it was queued,
    /// the policy learns the new class (`set_class`), and the task is queued again
    /// (`enqueue(Restore)`). A task that went real-time is not given back: it left sched_ext (the
    /// kernel's real-time class runs it), so it waits, out of every queue and held as blocked, for
    /// its return, whose message brings its `Restore` (on the CPU it comes back on) or, if it was
    /// not queued when it left, its wakeup.
    fn reclass(&mut self, t: TaskId, class: SchedClass, rt_priority: u8, kcpu: i32) {
        let (old_class, old_rt_priority) = (self.tasks[t.idx()].class, self.tasks[t.idx()].rt_priority);
        if class == old_class && rt_priority == old_rt_priority {
            return;
        }
        self.stats.nr_class_changes += 1;
        let away = self.extra[t.idx()].away;
        let cpu = self.tasks[t.idx()].cpu;
        if !away {
            if self.tasks[t.idx()].state == TaskState::Running {
                self.put_prev(cpu, t, SwitchReason::Preempted);
                if class.is_rt() {
                    // The real-time class runs it on this CPU now.
                    self.slots[cpu.idx()].rt_held = true;
                    self.extra[t.idx()].away_from = Some(cpu);
                } else {
                    self.slots[cpu.idx()].needs_pick = true;
                }
            }
            if self.tasks[t.idx()].state == TaskState::Runnable {
                self.policy.dequeue(ctx!(self), cpu, t, DequeueReason::Save);
                self.extra[t.idx()].saved = true;
            }
        }
        let tk = &mut self.tasks[t.idx()];
        tk.class = class;
        tk.rt_priority = rt_priority;
        self.policy.set_class(ctx!(self), t, old_class, old_rt_priority);
        if class.is_rt() {
            if !away {
                self.stats.nr_left_ext += 1;
                self.extra[t.idx()].away = true;
                let pid = self.extra[t.idx()].pid;
                self.orders.retain(|o| o.pid != pid);
                if self.tasks[t.idx()].state == TaskState::Runnable {
                    self.set_state(t, TaskState::Blocked);
                    self.cpus[cpu.idx()].nr_running -= 1;
                }
            }
            return;
        }
        self.extra[t.idx()].away = false;
        if let Some(held) = self.extra[t.idx()].away_from.take() {
            if self.slots[held.idx()].rt_held {
                self.slots[held.idx()].rt_held = false;
                if self.cpus[held.idx()].curr.is_none() {
                    self.slots[held.idx()].needs_pick = true;
                }
            }
        }
        if !self.extra[t.idx()].saved {
            return; // not queued: it is blocked, or comes back through its wakeup
        }
        self.extra[t.idx()].saved = false;
        let mut cpu = cpu;
        if away {
            // Back from the real-time class: queued where the kernel has it.
            let back = usize::try_from(kcpu).ok().filter(|&c| c < self.cpus.len()).map(|c| CpuId(c as u32));
            cpu = back.filter(|&c| self.tasks[t.idx()].allowed.contains(c)).unwrap_or(cpu);
            self.tasks[t.idx()].cpu = cpu;
            self.set_state(t, TaskState::Runnable);
            self.cpus[cpu.idx()].nr_running += 1;
        }
        self.policy.enqueue(ctx!(self), cpu, t, EnqueueReason::Restore);
        if self.cpus[cpu.idx()].curr.is_none() && !self.slots[cpu.idx()].rt_held {
            self.slots[cpu.idx()].needs_pick = true;
        }
    }

    fn allowed_or_fixed(&mut self, t: TaskId, chosen: CpuId) -> CpuId {
        let allowed = self.tasks[t.idx()].allowed;
        if chosen.idx() < self.cpus.len() && allowed.contains(chosen) {
            chosen
        } else {
            self.stats.nr_cpu_fixups += 1;
            allowed.first().unwrap_or(CpuId(0))
        }
    }

    fn wakeup(&mut self, t: TaskId) {
        self.stats.nr_wakeups += 1;
        let last = self.tasks[t.idx()].cpu;
        // sched_ext's enqueue does not say what the task slept on.
        let wake =
            WakeInfo { waker_cpu: last, waker: None, sync: false, wait: schedlab_core::WaitKind::Unknown };
        let chosen = self.policy.select_cpu(ctx!(self), t, &wake);
        let cpu = self.allowed_or_fixed(t, chosen);
        self.tasks[t.idx()].cpu = cpu;
        self.set_state(t, TaskState::Runnable);
        self.cpus[cpu.idx()].nr_running += 1;
        self.policy.enqueue(ctx!(self), cpu, t, EnqueueReason::Wakeup);
        self.after_enqueue(cpu, t, WakeKind::Wakeup);
    }

    /// After `t` was enqueued on `cpu`: ask whether it preempts the running task, or mark an idle CPU
    /// for a pick.
    fn after_enqueue(&mut self, cpu: CpuId, t: TaskId, kind: WakeKind) {
        match self.cpus[cpu.idx()].curr {
            Some(curr) => {
                if self.policy.check_preempt(ctx!(self), cpu, curr, t, kind) {
                    self.slots[cpu.idx()].resched = true;
                }
            }
            // A CPU the real-time class holds keeps the task queued until it is free.
            None => self.slots[cpu.idx()].needs_pick = !self.slots[cpu.idx()].rt_held,
        }
    }

    /// The ticks that fell on `cpu` while `t` ran there before it blocked at `stop_ts` (kernel
    /// clock): the kernel's tick charges the task running at each tick, also one that blocks before
    /// its kernel slice ends and so never comes back without `SCX_ENQ_WAKEUP`. Without this, the
    /// tick a short runner (a pipe ping-pong) was running at was dropped at the CPU's next pick, and
    /// tick-driven accounting (4BSD's `estcpu`, slices counted in ticks) never saw such tasks.
    fn ticks_before_block(&mut self, cpu: CpuId, t: TaskId, stop_ts: u64) {
        let Some(offset) = self.bpf_clock_offset else { return };
        let stop = ((stop_ts as i64).saturating_add(offset).max(0) as Ns).min(self.now);
        let mut ticks = 0;
        while self.slots[cpu.idx()].next_tick <= stop && ticks < 8 {
            self.stats.nr_ticks += 1;
            // Its reschedule request is moot: it has blocked.
            let _ = self.policy.tick(ctx!(self), cpu, t);
            self.slots[cpu.idx()].next_tick += self.tick_ns;
            ticks += 1;
        }
        if ticks > 0 {
            self.balance(cpu, BalanceKind::Periodic);
            self.nohz_balance(cpu);
        }
    }

    /// The running task `t` came back from `cpu` without having blocked: its kernel slice ended (at a
    /// tick boundary or its policy slice) or the kernel preempted it, at `stop_ts` (kernel clock).
    fn returned(&mut self, cpu: CpuId, t: TaskId, stop_ts: u64) {
        let mut resched = false;
        let mut ticks = 0;
        while self.slots[cpu.idx()].next_tick <= self.now {
            self.stats.nr_ticks += 1;
            resched |= self.policy.tick(ctx!(self), cpu, t);
            self.slots[cpu.idx()].next_tick += self.tick_ns;
            ticks += 1;
            if ticks == 8 {
                // A long gap (the scheduler itself was not run): do not replay every tick.
                self.slots[cpu.idx()].next_tick =
                    tick_after(self.now, self.tick_ns, self.slots[cpu.idx()].tick_phase_ns);
            }
        }
        if ticks == 0 {
            self.stats.nr_returns_before_tick += 1;
            let (now, next, phase) =
                (self.now, self.slots[cpu.idx()].next_tick, self.slots[cpu.idx()].tick_phase_ns);
            let stop = self.bpf_clock_offset.map(|o| (stop_ts as i64).saturating_add(o));
            let pid = self.extra[t.idx()].pid;
            self.note(|| {
                format!(
                    "return before tick: pid {pid} at {now}, stop ~{stop:?}, next tick {next}, phase {phase}"
                )
            });
        }
        let mut why = SwitchReason::Preempted;
        if self.extra[t.idx()].slice_end.is_some_and(|end| end <= self.now) {
            why = SwitchReason::SliceExpired;
            resched = true;
        }
        if ticks > 0 {
            self.balance(cpu, BalanceKind::Periodic);
            self.nohz_balance(cpu);
        }
        if resched {
            self.stats.nr_tick_resched += 1;
        }
        if self.cpus[cpu.idx()].curr != Some(t) {
            return; // balancing moved it
        }
        if resched || self.slots[cpu.idx()].resched {
            self.slots[cpu.idx()].resched = false;
            self.put_prev(cpu, t, why);
            self.pick(cpu, false);
            if let Some(next) = self.cpus[cpu.idx()].curr {
                self.extra[next.idx()].gap_from = Some(GapFrom::Return(stop_ts, next == t));
            }
        } else {
            self.stats.nr_continues += 1;
            self.order(cpu, t, false);
            self.extra[t.idx()].gap_from = Some(GapFrom::Return(stop_ts, true));
        }
    }

    /// Sends the running task `t` of `cpu` to the kernel with a slice that ends at its policy slice
    /// or the CPU's next tick, whichever is first.
    ///
    /// The kernel counts the slice from the task's start, a dispatch after this order, and ends a
    /// used-up slice only at a tick (`task_tick_scx`). A slice meant to end at the next tick is
    /// therefore sent as [`MIN_KERNEL_SLICE_NS`], used up by that tick if the task starts before
    /// it: sent as the time left to the tick, it was still a dispatch short of used up there and
    /// ran on to the tick after (measured in the VM: 352 of BFS's 390 returns on
    /// `vm/one-cpu.toml` came 3-4 ms after the tick they were meant for), so the policy saw
    /// each reschedule a tick late and user space half the ticks it asked for.
    fn order(&mut self, cpu: CpuId, t: TaskId, preempt: bool) {
        let e = self.extra[t.idx()];
        let slice_ns = match e.slice_end {
            Some(end) if end < self.slots[cpu.idx()].next_tick => end.saturating_sub(self.now),
            _ => MIN_KERNEL_SLICE_NS,
        }
        .max(MIN_KERNEL_SLICE_NS);
        self.stats.nr_dispatches += 1;
        if preempt {
            self.stats.nr_preempt_dispatches += 1;
        }
        self.orders.push(Order { pid: e.pid, cpu, slice_ns, preempt, enq_cnt: e.enq_cnt });
        self.extra[t.idx()].ordered_at = Some(self.now);
    }

    fn put_prev(&mut self, cpu: CpuId, t: TaskId, why: SwitchReason) {
        // An order for it from earlier in this round (a re-dispatch after its tick) no longer holds.
        let pid = self.extra[t.idx()].pid;
        self.orders.retain(|o| o.pid != pid);
        // A round trip is measured only from the start that answered the dispatch: one put back
        // before it started, or taken off its CPU by the policy, may start later for another
        // reason. A task that blocked did start; its next message (its wakeup) tells when.
        if why != SwitchReason::Blocked {
            self.extra[t.idx()].gap_from = None;
        }
        self.policy.put_prev(ctx!(self), cpu, t, why);
        self.cpus[cpu.idx()].curr = None;
        self.cpus[cpu.idx()].idle_since_ns = self.now;
        self.tasks[t.idx()].last_ran_ns = self.now;
        if why.still_runnable() {
            self.set_state(t, TaskState::Runnable);
        } else {
            let st = if why == SwitchReason::Exited { TaskState::Exited } else { TaskState::Blocked };
            self.set_state(t, st);
            self.cpus[cpu.idx()].nr_running -= 1;
        }
        self.extra[t.idx()].slice_end = None;
    }

    fn exit(&mut self, cpu: CpuId, t: TaskId) {
        self.put_prev(cpu, t, SwitchReason::Exited);
        self.policy.task_exit(ctx!(self), t);
        self.by_pid.remove(&self.extra[t.idx()].pid);
        self.stats.nr_exits += 1;
    }

    /// Blocked tasks whose thread is gone leave the policy.
    fn sweep_exits(&mut self, host: &mut dyn Host) {
        for i in 0..self.tasks.len() {
            if self.tasks[i].state == TaskState::Blocked && !host.is_alive(self.extra[i].pid) {
                let t = TaskId(i as u32);
                let pid = self.extra[i].pid;
                self.note(|| format!("sweep: pid {pid} exited"));
                self.set_state(t, TaskState::Exited);
                self.policy.task_exit(ctx!(self), t);
                self.by_pid.remove(&self.extra[i].pid);
                self.stats.nr_exits += 1;
            }
        }
    }

    /// Asks the policy what `cpu` runs next (balancing if it has nothing), and dispatches it.
    fn pick(&mut self, cpu: CpuId, preempt: bool) {
        // A round trip after a block ends at this pick's start; a CPU left idle now waits for a
        // wakeup, not for this scheduler.
        let freed = self.slots[cpu.idx()].freed.take();
        let mut next = self.policy.pick_next(ctx!(self), cpu);
        if next.is_none() {
            self.balance(cpu, BalanceKind::NewlyIdle);
            if self.cpus[cpu.idx()].curr.is_some() || self.error.is_some() {
                return;
            }
            next = self.policy.pick_next(ctx!(self), cpu);
        }
        let _ = self.policy.take_examined();
        let Some(d) = next else {
            self.stats.nr_idle_picks += 1;
            return;
        };
        let t = d.task;
        let ok = t.idx() < self.tasks.len()
            && self.tasks[t.idx()].state == TaskState::Runnable
            && self.tasks[t.idx()].allowed.contains(cpu);
        if !ok {
            let state = self.tasks.get(t.idx()).map(|v| v.state);
            self.fail(
                "pick_next",
                format!("picked task {t} on CPU {cpu}, but it is not runnable there ({state:?})"),
            );
            return;
        }
        let old = self.tasks[t.idx()].cpu;
        if old != cpu {
            self.cpus[old.idx()].nr_running -= 1;
            self.cpus[cpu.idx()].nr_running += 1;
            self.tasks[t.idx()].cpu = cpu;
        }
        self.set_state(t, TaskState::Running);
        self.cpus[cpu.idx()].curr = Some(t);
        self.extra[t.idx()].gap_from = freed;
        if self.slots[cpu.idx()].next_tick <= self.now {
            // The ticks that fell while the CPU ran nothing charged nobody; the grid stays the
            // kernel's (restarting it here, a tick after each such dispatch, made the ticks of a
            // task running a fixed fraction of each period fall in its sleeps again and again).
            self.slots[cpu.idx()].next_tick =
                tick_after(self.now, self.tick_ns, self.slots[cpu.idx()].tick_phase_ns);
        }
        self.extra[t.idx()].slice_end = d.slice_ns.map(|s| self.now + s);
        self.order(cpu, t, preempt);
    }

    fn balance(&mut self, cpu: CpuId, kind: BalanceKind) {
        let mut list = std::mem::take(&mut self.migr);
        list.clear();
        self.policy.balance(ctx!(self), cpu, kind, &mut list);
        let _ = self.policy.take_examined();
        for m in list.drain(..) {
            if self.error.is_some() {
                break;
            }
            self.migrate(m);
        }
        self.migr = list;
    }

    /// On the first tick of each period, a busy CPU with two or more tasks balances on behalf of the
    /// CPUs running nothing (Linux's nohz idle balancer, as the simulator does it).
    fn nohz_balance(&mut self, cpu: CpuId) {
        if self.cpus[cpu.idx()].nr_running < 2 || self.now < self.last_nohz + self.tick_ns {
            return;
        }
        self.last_nohz = self.now;
        for i in 0..self.cpus.len() {
            if self.cpus[i].curr.is_none() && self.error.is_none() {
                self.balance(CpuId(i as u32), BalanceKind::NohzIdle);
            }
        }
    }

    fn migrate(&mut self, m: Migration) {
        let t = m.task;
        let bad = match self.tasks.get(t.idx()) {
            None => Some("no such task".to_string()),
            Some(v) if !matches!(v.state, TaskState::Runnable | TaskState::Running) => {
                Some(format!("task is {:?}", v.state))
            }
            Some(v) if v.cpu != m.from => Some(format!("task is on CPU {}, not {}", v.cpu, m.from)),
            Some(v) if m.to.idx() >= self.cpus.len() || !v.allowed.contains(m.to) => {
                Some(format!("CPU {} is not allowed for it", m.to))
            }
            Some(_) if m.from == m.to => Some("source and destination are the same".into()),
            Some(_) => None,
        };
        if let Some(why) = bad {
            self.fail("balance", format!("migration of task {t} from {} to {}: {why}", m.from, m.to));
            return;
        }
        self.stats.nr_migrations += 1;
        if self.tasks[t.idx()].state == TaskState::Running {
            // Active balancing: preempt it where it runs (the next pick there is sent with
            // SCX_ENQ_PREEMPT), then it moves like a queued task.
            self.put_prev(m.from, t, SwitchReason::Preempted);
            self.slots[m.from.idx()].resched = true;
        }
        self.move_queued(t, m.from, m.to);
    }

    /// Moves a runnable, not running task: `dequeue(Migrate)`, `enqueue(Migrated)`, preemption check.
    fn move_queued(&mut self, t: TaskId, from: CpuId, to: CpuId) {
        self.policy.dequeue(ctx!(self), from, t, DequeueReason::Migrate);
        self.cpus[from.idx()].nr_running -= 1;
        self.tasks[t.idx()].cpu = to;
        self.cpus[to.idx()].nr_running += 1;
        self.policy.enqueue(ctx!(self), to, t, EnqueueReason::Migrated);
        self.after_enqueue(to, t, WakeKind::Migration);
    }

    /// What the shadow scheduler knows of thread `pid` (`unknown`, or its state, CPU and class, and
    /// the policy's own values for it, [`SchedPolicy::trace_values`]: ULE's score and priority, ...).
    pub fn describe_pid(&self, pid: i32) -> String {
        match self.by_pid.get(&pid) {
            Some(t) => {
                let tk = &self.tasks[t.idx()];
                let mut values = Vec::new();
                self.policy.trace_values(*t, &mut values);
                let mut s = format!("{:?} cpu {} class {:?}", tk.state, tk.cpu, tk.class);
                for (name, v) in values {
                    s.push_str(&format!(" {name}={v}"));
                }
                s
            }
            None => "unknown".into(),
        }
    }

    /// One line per task the policy holds as running or queued (`pid state cpu`), for diagnostics.
    pub fn describe_active(&self) -> Vec<String> {
        (0..self.tasks.len())
            .filter(|&i| matches!(self.tasks[i].state, TaskState::Running | TaskState::Runnable))
            .map(|i| format!("{} {:?} cpu {}", self.extra[i].pid, self.tasks[i].state, self.tasks[i].cpu))
            .collect()
    }

    /// The CPUs the policy believes are running nothing.
    pub fn idle_cpus(&self) -> CpuSet {
        let mut s = CpuSet::empty();
        for (i, c) in self.cpus.iter().enumerate() {
            if c.curr.is_none() {
                s.insert(CpuId(i as u32));
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spread_of_the_round_trips_is_their_population_standard_deviation() {
        // 1 ms and 3 ms: mean 2 ms, each 1 ms from it.
        let st = ShadowStats {
            nr_continue_gaps: 2,
            continue_gap_ns: 4_000_000,
            continue_gap_sq: 1_000_000_000_000 + 9_000_000_000_000,
            ..ShadowStats::default()
        };
        assert_eq!((st.mean_continue_gap_ns(), st.sd_continue_gap_ns()), (2_000_000, 1_000_000));
        // One value has no spread; none has no mean.
        assert_eq!(sd(1, 5, 25), 0);
        assert_eq!((st.mean_switch_gap_ns(), st.sd_switch_gap_ns()), (0, 0));
    }

    #[test]
    fn the_tick_grid_takes_the_kernels_earliest_phase() {
        let policy = schedlab_policies::create("cfs").unwrap();
        let mut s = Shadow::new(policy, Topology::flat(2), 250, 1_000_000);
        let cpu = CpuId(1);
        let slot = |s: &Shadow| (s.slots[1].tick_phase_ns, s.slots[1].next_tick);
        // Multiples of 4 ms until the kernel tells.
        assert_eq!(slot(&s), (0, 4_000_000));
        // The first report sets the phase; the pending tick moves to the nearest point of the grid.
        s.kernel_tick(cpu, 4_300_000);
        assert_eq!(slot(&s), (300_000, 4_300_000));
        // A tick that ran later (interrupt latency) moves nothing; an earlier one moves the grid.
        s.kernel_tick(cpu, 8_650_000);
        assert_eq!(slot(&s), (300_000, 4_300_000));
        s.kernel_tick(cpu, 12_200_000);
        assert_eq!(slot(&s), (200_000, 4_200_000));
        // Earlier across the period's end: 3.9 ms is 300 us before 4.2 ms.
        s.kernel_tick(cpu, 15_900_000);
        assert_eq!(slot(&s), (3_900_000, 3_900_000));
        // A tick held up 2.5 ms reads as 1.5 ms early: one such tick moves nothing.
        s.kernel_tick(cpu, 22_400_000);
        assert_eq!(slot(&s), (3_900_000, 3_900_000));
        // One on the grid (50 us late) clears the count of disagreeing ones.
        s.kernel_tick(cpu, 23_950_000);
        // A grid that many ticks in a row disagree with by more than the jitter moves.
        for k in 0..TICK_DISAGREEMENTS as u64 {
            assert_eq!(slot(&s).0, 3_900_000, "after {k} disagreeing ticks");
            s.kernel_tick(cpu, 24_000_000 + 2_000_000 + k * 4_000_000);
        }
        assert_eq!(slot(&s).0, 2_000_000);
        // The other CPU keeps its own grid.
        assert_eq!((s.slots[0].tick_phase_ns, s.slots[0].next_tick), (0, 4_000_000));
    }
}
