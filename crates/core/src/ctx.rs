//! [`Ctx`]: the read-only view of the machine and its tasks that every policy hook receives.
//!
//! The engine owns these facts and keeps them current before each hook call; a policy reads them and
//! keeps everything else (its queues, virtual times, load averages) in its own private state.

use crate::{CpuId, CpuSet, GroupId, Ns, TaskId, Topology};
use serde::{Deserialize, Serialize};

/// A task's scheduling policy, as set with `sched_setscheduler(2)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SchedClass {
    /// SCHED_OTHER / SCHED_NORMAL: time-shared by nice level.
    #[default]
    Normal,
    /// SCHED_BATCH: like Normal, but never preempts on wakeup.
    Batch,
    /// SCHED_IDLE: runs only when nothing else wants the CPU (weight 3 in CFS).
    Idle,
    /// SCHED_ISO (BFS): soft real time for unprivileged tasks while their class uses less than a share
    /// of the CPU. Policies without it (mainline Linux) treat it as SCHED_NORMAL.
    Iso,
    /// SCHED_FIFO: real-time, runs until it blocks or a higher RT priority arrives.
    Fifo,
    /// SCHED_RR: real-time round robin among equal RT priorities.
    Rr,
}

impl SchedClass {
    /// Whether this is a real-time class (FIFO or RR).
    pub fn is_rt(self) -> bool {
        matches!(self, SchedClass::Fifo | SchedClass::Rr)
    }

    /// Whether mainline Linux runs it as SCHED_NORMAL (Normal, and Iso which mainline lacks).
    pub fn is_normal(self) -> bool {
        matches!(self, SchedClass::Normal | SchedClass::Iso)
    }
}

/// Where a task is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Created by the workload but not started yet (a start delay is pending).
    New,
    /// Wants a CPU and is known to the policy, but is not running.
    Runnable,
    /// On a CPU.
    Running,
    /// Sleeping or blocked; not known to the policy as runnable.
    Blocked,
    /// Finished.
    Exited,
}

/// What a policy may know about one task.
#[derive(Clone, Debug)]
pub struct TaskInfo {
    /// The task.
    pub id: TaskId,
    /// Thread-group (process) id: threads of one process share it and their address space (`mm`).
    pub tgid: u32,
    /// The task that forked it, if any.
    pub parent: Option<TaskId>,
    /// Scheduling class.
    pub class: SchedClass,
    /// Nice level, -20..=19 (meaningful for the non-RT classes).
    pub nice: i8,
    /// Real-time priority 1..=99 for FIFO/RR (higher runs first), 0 otherwise.
    pub rt_priority: u8,
    /// Task group (cgroup).
    pub group: GroupId,
    /// CPUs the task may run on.
    pub allowed: CpuSet,
    /// `task_cpu()`: the CPU the task runs or is queued on, or last ran on if it is blocked.
    pub cpu: CpuId,
    /// Current state.
    pub state: TaskState,
    /// CPU time consumed as of the engine's last accounting of the task: its last switch in or out,
    /// or a change of its speed (frequency, contention); ticks do not account it.
    pub sum_exec_ns: Ns,
    /// When the task last stopped running (0 if it never ran).
    pub last_ran_ns: Ns,
    /// Its performance counters, as counted up to the engine's last accounting of it (see
    /// `sum_exec_ns`).
    pub pmc: crate::Pmc,
    /// The task's own fair-class request size, `sched_attr.sched_runtime` (the workload's `slice`),
    /// if it asked for one; policies with per-task slices (EEVDF 6.12) use it, others ignore it.
    pub slice_ns: Option<Ns>,
}

/// What a policy may know about one CPU.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuInfo {
    /// The task running on it, or `None` when idle.
    pub curr: Option<TaskId>,
    /// Tasks the engine counts on this CPU: runnable tasks whose `cpu` is this one, plus the running
    /// task. (For global-queue policies this follows the CPU each task was last given.)
    pub nr_running: u32,
    /// Since when the CPU has been idle (meaningful when `curr` is `None`).
    pub idle_since_ns: Ns,
}

/// A task group (cgroup with the cpu controller).
#[derive(Clone, Copy, Debug)]
pub struct GroupInfo {
    /// The parent group (`None` for the root).
    pub parent: Option<GroupId>,
    /// `cpu.shares`; 1024 by default.
    pub shares: u64,
}

/// `SCHED_CAPACITY_SCALE`: the capacity of the fastest CPU.
pub const CAPACITY_SCALE: u64 = 1024;

/// The read-only view passed to every [`SchedPolicy`](crate::SchedPolicy) hook.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    /// The current simulated time.
    pub now: Ns,
    /// The machine topology.
    pub topo: &'a Topology,
    /// Every task ever created, indexed by [`TaskId`].
    pub tasks: &'a [TaskInfo],
    /// Every CPU, indexed by [`CpuId`].
    pub cpus: &'a [CpuInfo],
    /// Every task group, indexed by [`GroupId`]; group 0 is the root.
    pub groups: &'a [GroupInfo],
    /// The periodic tick length in nanoseconds (1/HZ).
    pub tick_ns: Ns,
    /// Where the ticks fall: at `tick_phase_ns + k * tick_ns` (`0 <= tick_phase_ns < tick_ns`). A
    /// real run starts at an arbitrary point between two ticks; see [`Ctx::jiffies`].
    pub tick_phase_ns: Ns,
    /// Whether CPUs in different nodes have separate memory (NUMA). On a UMA machine with several
    /// sockets (4 x Pentium II SMP) this is false and Linux builds no NUMA scheduling domains.
    pub numa: bool,
    /// The run's seed. A policy that needs randomness (ULE's balancer interval) seeds its own
    /// generator from it, so runs stay reproducible.
    pub seed: u64,
    /// What the machine charges for a scheduling decision or a balancing pass: a policy that, like
    /// Linux, times its own balancing (`sched_clock` around a newly idle balance) reads the cost
    /// of the work it did from this.
    pub decision_cost: DecisionCost,
    /// Each CPU's capacity at its highest speed, the fastest CPU's being 1024
    /// (`arch_scale_cpu_capacity`: a machine file's `speed_permille` scaled to its largest). Empty:
    /// every CPU has 1024. See [`Ctx::capacity_of`].
    pub cpu_capacity: &'a [u64],
}

/// The CPU time a scheduling decision or a balancing pass takes: a fixed part plus a part per task
/// (or CPU) examined. The engine charges it before the next task runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecisionCost {
    /// The fixed part, ns.
    pub base_ns: Ns,
    /// The part per task examined, ns.
    pub per_task_ns: Ns,
}

impl DecisionCost {
    /// The time of a pass that examined `examined` tasks, ns.
    pub fn ns(&self, examined: u64) -> Ns {
        self.base_ns + self.per_task_ns * examined
    }
}

impl<'a> Ctx<'a> {
    /// The facts about task `t`.
    #[inline]
    pub fn task(&self, t: TaskId) -> &'a TaskInfo {
        &self.tasks[t.idx()]
    }

    /// The capacity of CPU `c` (1024 for the fastest CPUs; [`Ctx::cpu_capacity`]).
    #[inline]
    pub fn capacity_of(&self, c: CpuId) -> u64 {
        self.cpu_capacity.get(c.idx()).copied().unwrap_or(CAPACITY_SCALE)
    }

    /// The facts about CPU `c`.
    #[inline]
    pub fn cpu(&self, c: CpuId) -> &'a CpuInfo {
        &self.cpus[c.idx()]
    }

    /// Number of logical CPUs.
    #[inline]
    pub fn nr_cpus(&self) -> usize {
        self.cpus.len()
    }

    /// Whether CPU `c` runs nothing and has nothing queued (a task just woken onto an idle CPU makes
    /// it busy at once, before the CPU has switched to it; Linux's `idle_cpu()` also checks
    /// `nr_running` since 3.x, and without that check simultaneous wakeups pile onto one CPU).
    #[inline]
    pub fn is_idle(&self, c: CpuId) -> bool {
        let cpu = &self.cpus[c.idx()];
        cpu.curr.is_none() && cpu.nr_running == 0
    }

    /// The ticks per second (HZ).
    pub fn hz(&self) -> u64 {
        crate::NSEC_PER_SEC / self.tick_ns.max(1)
    }

    /// `jiffies` now: the ticks taken since the run began ([`jiffies_at`]).
    #[inline]
    pub fn jiffies(&self) -> u64 {
        jiffies_at(self.now, self.tick_ns, self.tick_phase_ns)
    }
}

/// `jiffies` at time `now_ns` when the ticks fall at `tick_phase_ns + k * tick_ns`
/// (`tick_phase_ns < tick_ns`): the number of tick instants in `(0, now_ns]`, the ticks taken since
/// the run began (Linux increments jiffies in the tick, so a time between two ticks reads the earlier
/// one's count). With a phase of 0 it is `now_ns / tick_ns`.
#[inline]
pub fn jiffies_at(now_ns: Ns, tick_ns: Ns, tick_phase_ns: Ns) -> u64 {
    let tick = tick_ns.max(1);
    (now_ns + (tick - tick_phase_ns % tick) % tick) / tick
}

#[cfg(test)]
mod jiffies_tests {
    use super::jiffies_at;

    /// Ticks every 4 ms at phase 1 ms fall at 1, 5, 9 ms: jiffies is 0 before 1 ms, 1 from 1 ms to
    /// just before 5 ms, 2 from 5 ms. With phase 0 the ticks fall at 4, 8 ms and jiffies is now / 4 ms.
    #[test]
    fn jiffies_count_the_ticks_taken_since_the_start() {
        let ms = 1_000_000;
        let at = |now, phase| jiffies_at(now, 4 * ms, phase);
        assert_eq!(
            [at(0, ms), at(ms - 1, ms), at(ms, ms), at(5 * ms - 1, ms), at(5 * ms, ms)],
            [0, 0, 1, 1, 2]
        );
        assert_eq!([at(0, 0), at(4 * ms - 1, 0), at(4 * ms, 0), at(8 * ms, 0)], [0, 0, 1, 2]);
        assert_eq!([at(4 * ms, 3 * ms), at(7 * ms, 3 * ms)], [1, 2], "ticks at 3 and 7 ms");
    }
}
