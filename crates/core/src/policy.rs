//! The [`SchedPolicy`] trait: the hooks through which the engine drives a scheduler.
//!
//! The split mirrors Linux's `struct sched_class` (kernel/sched/sched.h) and sched_ext's
//! `sched_ext_ops`: the engine (the "core scheduler") owns the clock, the context switch, blocking and
//! all accounting; a policy (a "class") only answers hook calls and returns decisions.
//!
//! # The running task stays counted on its CPU (the Linux convention)
//!
//! A task is *runnable in the policy* from its `enqueue` until either `put_prev` with a blocking reason
//! ([`SwitchReason::Blocked`] or [`SwitchReason::Exited`]) or a `dequeue`. While it runs it is still
//! runnable in the policy and still counts on its CPU (as `rq->nr_running` counts `curr` in Linux); a
//! policy may take it out of its own search structure in `pick_next` (CFS keeps `curr` out of its tree)
//! and put it back in `put_prev`. Consequences:
//!
//! * The engine never calls `dequeue` on a running task. A task that blocks or exits while running
//!   leaves the policy through `put_prev(.., Blocked | Exited)`.
//! * `dequeue` exists only for moving a queued, not-running task (a migration), and is always
//!   followed by `enqueue(.., Migrated)` on the destination CPU.
//! * `pick_next(cpu)` returns a runnable, not running task allowed on `cpu`. Global-queue policies
//!   (Linux 2.4, BFS) may return a task last queued on another CPU; the engine then moves it.
//!
//! # Hook call order
//!
//! * **Creation** (start of a workload task or `fork`): `task_new(t, parent)` returns the CPU,
//!   then `enqueue(cpu, t, New)`, then, if that CPU runs a task, `check_preempt(cpu, curr, t, Fork)`;
//!   an idle CPU is simply rescheduled.
//! * **Wakeup**: `select_cpu(t, wake)` returns the CPU, then `enqueue(cpu, t, Wakeup)`, then
//!   `check_preempt(cpu, curr, t, Wakeup)` if the CPU is busy.
//! * **Schedule on a CPU**: `put_prev(cpu, prev, why)` if a task was running, then `pick_next(cpu)`. If
//!   it returns `None`, `balance(cpu, NewlyIdle)` may pull tasks, and `pick_next` is asked once more;
//!   `None` again makes the CPU idle. If `pick_next` returns the task that just ran, no context switch
//!   is charged or counted.
//! * **Exit**: `put_prev(cpu, t, Exited)`, then `task_exit(t)`.
//! * **Yield**: `yield_task(cpu, t)`, then the schedule above with `put_prev(cpu, t, Yielded)`.
//! * **Renice** (a task's own `nice` op, or a change seen by the sched_ext adapter): the engine
//!   stores the new level in `ctx.task(t).nice`, then calls `set_nice(t, old_nice)`; a CPU it
//!   returns is rescheduled.
//! * **Class change** (a task's own `policy` op, `sched_setscheduler(2)`; a change of class or RT
//!   priority only): a running task is put back first (`put_prev(cpu, t, Preempted)`); then, with
//!   `ctx.task(t)` still showing the old class, `dequeue(cpu, t, Save)`; the engine stores the new class
//!   and RT priority and calls `set_class(t, old_class, old_rt_priority)`; then `enqueue(cpu, t,
//!   Restore)` and, for a task that was running, the CPU picks again (the task itself if the policy
//!   says so, without a context switch). A queued task's CPU is asked `check_preempt`. This is
//!   Linux's `__sched_setscheduler` (dequeue with `DEQUEUE_SAVE`, `put_prev_task`, the new class,
//!   enqueue with `ENQUEUE_RESTORE`, `check_class_changed`).
//! * **Tick** (every 1/HZ on each busy CPU; idle CPUs are tickless): `tick(cpu, curr)`; `true` asks
//!   for a reschedule, done after balancing. Then `balance(cpu, Periodic)`. If the ticking CPU has at
//!   least two tasks and some CPUs are idle, `balance(idle_cpu, NohzIdle)` runs for each idle CPU in
//!   order, at most once per jiffy machine-wide (Linux's nohz idle balancer).
//! * **Migration** (from `balance`, or an affinity change): for a queued task `dequeue(from, t,
//!   Migrate)` then `enqueue(to, t, Migrated)`; a running task is first preempted with
//!   `put_prev(from, t, Preempted)`. Then `to` is rescheduled if idle or asked `check_preempt`.
//!
//! Every hook sees a [`Ctx`] that is current at the moment of the call: `ctx.task(t).cpu` is the CPU
//! the task is being enqueued on, `ctx.cpu(c).curr` the task running there.
//!
//! # What the engine checks
//!
//! A CPU returned by `task_new` or `select_cpu` must be in the task's allowed set; a task returned by
//! `pick_next` must be runnable, not running and allowed on that CPU; migrations must name a runnable
//! task on its `from` CPU. A violation stops the run with an error naming the hook and the task.

use crate::{CpuId, Ctx, Ns, TaskId};

/// A decision of `pick_next`: which task runs, and optionally for how long before the engine asks
/// again. Tick-driven policies (CFS, O(1), ULE) leave `slice_ns` as `None` and preempt from `tick`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dispatch {
    /// The task to run.
    pub task: TaskId,
    /// If set, the engine preempts the task (reason [`SwitchReason::SliceExpired`]) after this long.
    pub slice_ns: Option<Ns>,
}

impl Dispatch {
    /// Runs `task` until a hook asks for a reschedule.
    pub fn task(task: TaskId) -> Self {
        Dispatch { task, slice_ns: None }
    }
}

/// Why a task is created or woken onto a CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WakeKind {
    /// A newly forked (or newly started) task.
    Fork,
    /// A blocked task becoming runnable.
    Wakeup,
    /// A runnable task moved to another CPU.
    Migration,
}

/// The circumstances of a wakeup, for `select_cpu`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WakeInfo {
    /// The CPU the wakeup happens on (the waker's CPU; for timer and I/O wakeups, the CPU the sleeper
    /// last ran on, where its timer was armed). Linux's `smp_processor_id()` in `try_to_wake_up`.
    pub waker_cpu: CpuId,
    /// The waking task, if a task (not a timer or device) did the waking.
    pub waker: Option<TaskId>,
    /// `WF_SYNC`: the waker is about to block (pipe and socket handoffs), so the wakee may take its CPU.
    pub sync: bool,
    /// What the task waited for. Kernels treat kinds of sleep differently: Linux 2.6's O(1) limits
    /// the credit of an uninterruptible (disk) sleep, FreeBSD runs a woken thread at the sleep
    /// priority of its wait channel until it returns to user mode.
    pub wait: WaitKind,
}

impl WakeInfo {
    /// The task slept uninterruptibly (Linux's TASK_UNINTERRUPTIBLE, the `D` state).
    pub fn uninterruptible(&self) -> bool {
        self.wait == WaitKind::Disk
    }
}

/// What a blocked task waited for, as the kernel's sleep call sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WaitKind {
    /// Not known (a real kernel's sched_ext does not say): treated as an interruptible sleep with no
    /// kernel sleep priority.
    #[default]
    Unknown,
    /// A timed sleep (`nanosleep`, `clock_nanosleep` on a periodic timer): interruptible, woken by the
    /// timer interrupt; FreeBSD `tsleep(.., PWAIT)`.
    Sleep,
    /// A user-space lock, condition variable, semaphore or barrier (Linux futex, FreeBSD umtx):
    /// interruptible, woken by the task that releases it; FreeBSD sleeps with no sleep priority.
    Futex,
    /// A pipe read or write: interruptible, woken by the other end; FreeBSD `msleep(.., PRIBIO)`.
    Pipe,
    /// Waiting for children to exit (`wait4`): interruptible; FreeBSD `msleep(.., PWAIT)`.
    Children,
    /// A disk request: uninterruptible (Linux TASK_UNINTERRUPTIBLE), woken by the device's
    /// interrupt; FreeBSD `bwait(.., PRIBIO)`.
    Disk,
}

/// Why a task is being enqueued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EnqueueReason {
    /// A new task (after `task_new`).
    New,
    /// A blocked task woke up (after `select_cpu`).
    Wakeup,
    /// Moved here from another CPU (after `dequeue(.., Migrate)`).
    Migrated,
    /// Back on the same CPU after its scheduling class or RT priority changed (after
    /// `dequeue(.., Save)` and `set_class`; Linux's `ENQUEUE_RESTORE`): queue it by its new class,
    /// keeping its history (no wakeup or creation credit).
    Restore,
}

impl EnqueueReason {
    /// Whether the task was runnable just before (a migration or a class change), so it is not a
    /// new arrival in the policy's runnable count.
    pub fn was_runnable(self) -> bool {
        matches!(self, EnqueueReason::Migrated | EnqueueReason::Restore)
    }
}

/// Why a queued, not-running task is being dequeued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DequeueReason {
    /// It is moving to another CPU; `enqueue(.., Migrated)` follows.
    Migrate,
    /// Its scheduling class or RT priority is about to change (Linux's `DEQUEUE_SAVE`): take it out
    /// of the queue of its old class; `set_class` and `enqueue(.., Restore)` on the same CPU follow.
    /// Under sched_ext (the adapter of crates/scx-adapter) a task that goes real-time leaves the
    /// policy between the two: `set_class` is called for the real-time class, time passes while
    /// the kernel's real-time class runs it, and `set_class` back to a fair class and
    /// `enqueue(.., Restore)` (on the CPU it comes back on) follow at its return; if it exits
    /// meanwhile, `task_exit` follows instead.
    Save,
}

/// Why the running task stops running.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SwitchReason {
    /// Preempted (tick, wakeup preemption, migration): it stays runnable.
    Preempted,
    /// The slice given in its [`Dispatch`] ran out: it stays runnable.
    SliceExpired,
    /// It called `sched_yield`: it stays runnable.
    Yielded,
    /// It blocked (sleep, lock, I/O...): it leaves the policy's runnable set.
    Blocked,
    /// It exited: it leaves the policy for good; `task_exit` follows.
    Exited,
}

impl SwitchReason {
    /// Whether the task remains runnable after this switch.
    pub fn still_runnable(self) -> bool {
        matches!(self, SwitchReason::Preempted | SwitchReason::SliceExpired | SwitchReason::Yielded)
    }
}

/// Which balancing pass the engine is asking for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BalanceKind {
    /// From the periodic tick of a busy CPU (`rebalance_domains` from `SCHED_SOFTIRQ`).
    Periodic,
    /// The CPU is about to go idle (`idle_balance`, `newidle`).
    NewlyIdle,
    /// On behalf of a tickless idle CPU, kicked by a busy CPU's tick (nohz idle balance).
    NohzIdle,
}

/// A task move a balancer asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Migration {
    /// The task to move.
    pub task: TaskId,
    /// The CPU it is on now.
    pub from: CpuId,
    /// Where it goes.
    pub to: CpuId,
}

/// What a policy promises about idle CPUs, checked by the conformance suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkConservation {
    /// No promise (per-CPU queues balanced only periodically, e.g. CFS between balancing passes).
    None,
    /// A CPU never goes idle while a runnable task is queued on it.
    PerCpu,
    /// A CPU never goes idle while any runnable task anywhere is allowed to run on it.
    Global,
}

/// One counter a policy reports about itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicyStat {
    /// Name, `snake_case`, counters starting with `nr_`.
    pub name: &'static str,
    /// Value.
    pub value: u64,
    /// One line saying what it counts.
    pub help: &'static str,
}

/// A CPU scheduling policy. See the [module docs](self) for the hook order and conventions.
pub trait SchedPolicy {
    /// Short name, as used on the command line (`cfs`, `fifo`).
    fn name(&self) -> &str;

    /// Called once before the first task exists.
    fn init(&mut self, _ctx: &Ctx) {}

    /// A task is created (`fork`, or a workload task starting). Set up per-task state and return the
    /// CPU it starts on (`select_task_rq(SD_BALANCE_FORK)`). `ctx.task(t).cpu` holds the parent's CPU
    /// (or CPU 0 for a task with no parent).
    fn task_new(&mut self, ctx: &Ctx, t: TaskId) -> CpuId;

    /// A blocked task wakes up: return the CPU it should run on. `ctx.task(t).cpu` is where it last ran.
    fn select_cpu(&mut self, ctx: &Ctx, t: TaskId, wake: &WakeInfo) -> CpuId;

    /// `t` becomes runnable on `cpu`.
    fn enqueue(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: EnqueueReason);

    /// `t`, queued on `cpu` and not running, leaves it (to be enqueued elsewhere).
    fn dequeue(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: DequeueReason);

    /// Choose the next task to run on `cpu`, or `None` to leave it idle.
    fn pick_next(&mut self, ctx: &Ctx, cpu: CpuId) -> Option<Dispatch>;

    /// The running task `t` stops running on `cpu`.
    fn put_prev(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: SwitchReason);

    /// The periodic tick on `cpu` while `curr` runs. Return `true` to reschedule now.
    fn tick(&mut self, ctx: &Ctx, cpu: CpuId, curr: TaskId) -> bool;

    /// `woken` was just enqueued on `cpu` where `curr` runs: should `curr` be preempted?
    fn check_preempt(&mut self, ctx: &Ctx, cpu: CpuId, curr: TaskId, woken: TaskId, kind: WakeKind) -> bool;

    /// The running task `t` calls `sched_yield`. A reschedule with [`SwitchReason::Yielded`] follows.
    fn yield_task(&mut self, _ctx: &Ctx, _cpu: CpuId, _t: TaskId) {}

    /// Load balancing for `cpu`: push the migrations wanted onto `out` (the engine applies them in
    /// order and clears `out` between calls, so no allocation happens per call).
    fn balance(&mut self, _ctx: &Ctx, _cpu: CpuId, _kind: BalanceKind, _out: &mut Vec<Migration>) {}

    /// `t` has exited (after `put_prev(.., Exited)`).
    fn task_exit(&mut self, _ctx: &Ctx, _t: TaskId) {}

    /// The nice level of the live task `t` changed (`setpriority(2)`, `nice(2)`: Linux's
    /// `set_user_nice`, FreeBSD's `sched_nice`). `ctx.task(t).nice` is already the new level;
    /// `old_nice` was the level before. `t` may be running, queued or blocked (never new or exited).
    /// The policy updates whatever it derived from the old level (a weight, a static priority, a
    /// share) the way its source does, keeping the task's history (vruntime, lag, sleep average,
    /// interactivity score). Return the CPU to reschedule, if any: usually the one `t` runs or is
    /// queued on (Linux's `prio_changed` rescheduling its runqueue), but a global-queue policy may
    /// name another (BFS's `try_preempt`). The engine then puts that CPU's running task back and
    /// asks `pick_next` again (an idle CPU just picks). The default does nothing: right for
    /// policies that read the nice level whenever they need it (Linux 2.4's `sys_setpriority` only
    /// stores `p->nice`).
    fn set_nice(&mut self, _ctx: &Ctx, _t: TaskId, _old_nice: i8) -> Option<CpuId> {
        None
    }

    /// The scheduling class or RT priority of `t` changed (`sched_setscheduler(2)`: Linux's
    /// `__setscheduler_params` and `switched_from`/`switched_to`, FreeBSD's `rtp_to_pri` and
    /// `sched_class`). Called between `dequeue(.., Save)` and `enqueue(.., Restore)`: `t` is in none
    /// of the policy's queues, and `ctx.task(t)` shows the new class and RT priority; `old_class`
    /// and `old_rt_priority` were the ones before. The policy updates what it derived from the old
    /// class (a cached priority, a timeslice, a per-class count) the way its source does, keeping the
    /// task's history. The default does nothing: right for policies that read the class whenever they
    /// queue or pick a task.
    fn set_class(&mut self, _ctx: &Ctx, _t: TaskId, _old_class: crate::SchedClass, _old_rt_priority: u8) {}

    /// Task group `g` was created after `init`: `ctx.groups[g]` is new (its parent is older), and
    /// groups are only ever added, in order. Linux makes a group's per-CPU runqueues and entities
    /// when the cgroup is created (`sched_create_group`, `alloc_fair_sched_group`,
    /// `online_fair_sched_group`); a policy with group scheduling does the same here. The engine
    /// never calls it (a workload's groups exist before `init`); the sched_ext adapter does, as it
    /// meets the cgroups of the machine's threads. The default does nothing: right for policies
    /// without group scheduling.
    fn group_new(&mut self, _ctx: &Ctx, _g: crate::GroupId) {}

    /// Tasks examined since the last call (the engine charges decision cost from it), then reset.
    fn take_examined(&mut self) -> u64 {
        0
    }

    /// The policy's own counters, for reports.
    fn stats(&self) -> Vec<PolicyStat> {
        Vec::new()
    }

    /// Whether placing a forked task on a CPU other than its parent's counts as a migration. Linux
    /// 2.6.38's `wake_up_new_task` moves the child with `set_task_cpu`, which counts it
    /// (`se.nr_migrations`, perf's cpu-migrations, the `sched_migrate_task` event); today's kernels
    /// place it with `__set_task_cpu`, uncounted. Default: not counted.
    fn counts_fork_placement(&self) -> bool {
        false
    }

    /// `sched_exec`: `t`, running on `cpu`, has just called `execve()`; the CPU it should move to,
    /// or `None` to stay. Linux balances at exec (2.6.22 `sched_balance_self(SD_BALANCE_EXEC)`,
    /// 2.6.38 and later `select_task_rq(.., SD_BALANCE_EXEC)`), the moment a process's memory image
    /// is smallest; the engine then moves the running task through the stopper, as
    /// `migration_cpu_stop` does. Default: no exec balancing (Linux 2.4, BFS, FreeBSD).
    fn exec_cpu(&mut self, _ctx: &Ctx, _cpu: CpuId, _t: TaskId) -> Option<CpuId> {
        None
    }

    /// What this policy promises about idle CPUs.
    fn work_conservation(&self) -> WorkConservation {
        WorkConservation::None
    }

    /// How many tasks the policy holds as runnable (running ones included), if it can tell. The engine
    /// compares this with its own count when invariant checking is on.
    fn nr_runnable(&self) -> Option<usize> {
        None
    }

    /// Policy internals of task `t` worth watching in a trace (CFS's vruntime, ULE's interactivity
    /// score, HTFS's bweight level...), as `(name, value)` pairs pushed onto `out`. Called only when a
    /// trace is recorded, when `t` is switched in.
    fn trace_values(&self, _t: TaskId, _out: &mut Vec<(&'static str, i64)>) {}
}
