//! The scheduling events every reader produces, whatever the file format.

use schedlab_core::Ns;
use std::fmt;

/// Where in the input an event came from, for error messages and warnings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Loc {
    /// A line of a text trace (1-based).
    Line(usize),
    /// A byte offset into a binary trace.
    Offset(usize),
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Loc::Line(n) => write!(f, "line {n}"),
            Loc::Offset(n) => write!(f, "byte offset {n}"),
        }
    }
}

/// A task as an event names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskRef {
    /// Thread id (`pid` in kernel terms); 0 is the idle task.
    pub pid: i32,
    /// Its name (`comm`) at the time of the event.
    pub comm: String,
    /// Its kernel priority (`prio`: 100..=139 is nice -20..=19, below 100 real-time), if given.
    pub prio: Option<i32>,
}

/// The state a task left the CPU in (`prev_state` of `sched_switch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrevState {
    /// Still runnable: preempted or yielded (`R`, `R+`).
    Runnable,
    /// Blocked: sleeping (`S`, `I`, ...) or in uninterruptible sleep (`D`).
    Blocked {
        /// `D`: uninterruptible (typically I/O).
        uninterruptible: bool,
    },
    /// Exited (`X`, `Z`, `x`).
    Dead,
}

impl PrevState {
    /// Reads the letters ftrace prints (`R`, `R+`, `S`, `D`, `S|D`, `X`, `Z`, `x`, `I`, `P`...).
    pub fn from_letters(s: &str) -> Option<PrevState> {
        let s = s.trim();
        if s.is_empty() {
            return None;
        }
        if s.starts_with('R') {
            return Some(PrevState::Runnable);
        }
        if s.contains(['X', 'Z', 'x']) {
            return Some(PrevState::Dead);
        }
        if s.chars().all(|c| "SDTtPIKWNn|+".contains(c)) {
            return Some(PrevState::Blocked { uninterruptible: s.contains('D') });
        }
        None
    }

    /// Reads the kernel's numeric `prev_state` (Perfetto stores the raw value): 0, or only the
    /// preemption bit `TASK_REPORT_MAX` (0x100), is runnable; `EXIT_DEAD` (0x10) and `EXIT_ZOMBIE`
    /// (0x20) are dead; anything else is blocked (`TASK_UNINTERRUPTIBLE` = 0x2).
    pub fn from_bits(v: i64) -> PrevState {
        let v = v & 0xff;
        if v == 0 {
            PrevState::Runnable
        } else if v & 0x30 != 0 {
            PrevState::Dead
        } else {
            PrevState::Blocked { uninterruptible: v & 0x2 != 0 }
        }
    }
}

/// What happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `sched_switch`: `prev` left the CPU in `prev_state`, `next` runs.
    Switch {
        /// The task leaving (pid 0: the idle task).
        prev: TaskRef,
        /// How it left.
        prev_state: PrevState,
        /// The task starting.
        next: TaskRef,
    },
    /// `sched_waking` (the start of a wakeup, in the waker's context), or `sched_wakeup` when
    /// `woken` (the wakeup done; ignored for a task already seen runnable).
    Wake {
        /// The task woken.
        task: TaskRef,
        /// The CPU it was placed on.
        target_cpu: u32,
        /// `sched_wakeup` (true) rather than `sched_waking`.
        woken: bool,
    },
    /// `sched_wakeup_new`: a new task first made runnable.
    WakeupNew {
        /// The new task.
        task: TaskRef,
        /// Its CPU.
        target_cpu: u32,
    },
    /// `sched_migrate_task`.
    Migrate {
        /// The task.
        task: TaskRef,
        /// CPU before.
        orig_cpu: u32,
        /// CPU after.
        dest_cpu: u32,
    },
    /// `sched_process_fork` (or Perfetto's `task_newtask`): `parent` created `child`.
    Fork {
        /// The creating task.
        parent: TaskRef,
        /// The new task.
        child: TaskRef,
    },
    /// `sched_process_exec`.
    Exec {
        /// The task.
        pid: i32,
        /// The program.
        filename: String,
    },
    /// `sched_process_exit`.
    Exit {
        /// The task.
        task: TaskRef,
    },
    /// `sched_stat_runtime`: the kernel charged `runtime_ns` of CPU time to the task (since its
    /// previous charge or since it was switched in). Used to place switches the tracer did not record.
    Runtime {
        /// The task.
        task: TaskRef,
        /// CPU time charged, ns.
        runtime_ns: u64,
    },
    /// The tracer lost events on this CPU just before this point.
    Lost {
        /// How many, when the format says.
        count: Option<u64>,
    },
}

/// One event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Timestamp, ns of the trace clock.
    pub ts: Ns,
    /// The CPU it was recorded on.
    pub cpu: u32,
    /// The task running on that CPU when it was recorded (the waker of a wakeup), when the format
    /// says; `Some(0)` is the idle task.
    pub current: Option<i32>,
    /// Recorded in interrupt context (hard or soft IRQ, NMI): a wakeup then has no task as its cause.
    /// `None` when the format does not say.
    pub irq: Option<bool>,
    /// What.
    pub kind: Kind,
    /// Where it is in the input.
    pub loc: Loc,
}

/// The most CPUs a trace may name (Linux's largest `NR_CPUS`, 8,192): CPU numbers beyond it are
/// damage, and would otherwise size per-CPU tables.
pub const MAX_CPUS: u32 = 8192;

impl RawTrace {
    /// Checks every CPU number the trace names (the recording CPU, wakeup targets, migration ends)
    /// against [`MAX_CPUS`]: `Err((where, what))` for the first out of range.
    pub fn check_cpus(&self) -> Result<(), (Loc, String)> {
        for e in &self.events {
            let named = match e.kind {
                Kind::Wake { target_cpu, .. } => target_cpu,
                Kind::Migrate { orig_cpu, dest_cpu, .. } => orig_cpu.max(dest_cpu),
                _ => 0,
            }
            .max(e.cpu);
            if named >= MAX_CPUS {
                return Err((
                    e.loc,
                    format!(
                        "CPU {named} is beyond the largest CPU number a trace may name ({})",
                        MAX_CPUS - 1
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// A trace as read: its events (in file order) and what the file says about its tasks.
#[derive(Clone, Debug, Default)]
pub struct RawTrace {
    /// The input format.
    pub format: &'static str,
    /// Events in the order the file holds them (per-CPU streams may interleave out of time order).
    pub events: Vec<Event>,
    /// Number of CPUs, when the file says (`#P:2`, `cpus=6`).
    pub nr_cpus: Option<u32>,
    /// Thread group of each thread, when the file says (Perfetto's process tree, ftrace's tgid column).
    pub tgids: Vec<(i32, i32)>,
    /// Lines or records skipped as not scheduling events (other tracepoints, `bprint`...).
    pub skipped: usize,
}
