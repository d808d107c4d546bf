//! The logic of `schedlab-scx`: a schedlab [`SchedPolicy`](schedlab_core::SchedPolicy) driven by the
//! task events of a real sched_ext kernel, through the model of `scx_rustland_core` (sched-ext/scx).
//!
//! `scx_rustland_core`'s BPF part hands user space one message per task that becomes runnable (a
//! `QueuedTask`: pid, previous CPU, enqueue flags, start/stop timestamps, weight) and takes back
//! dispatch orders (pid, CPU, slice). It reports nothing else: no "task blocked", no "task exited",
//! no ticks. [`Shadow`] is a small core scheduler that rebuilds what the simulator's engine knows
//! from those messages and calls the policy's hooks in the order documented in
//! `schedlab_core::policy`, so the same policy code runs unchanged:
//!
//! | kernel event | hooks |
//! | --- | --- |
//! | first message of a pid | `task_new` (its CPU), `enqueue(New)`, `check_preempt(Fork)` |
//! | a task we dispatched comes back without `SCX_ENQ_WAKEUP` (its kernel slice ran out or it was preempted) | `tick` for each tick period that passed; it keeps its CPU (re-dispatched) unless the tick, its policy slice or a wakeup asked for a reschedule, then `put_prev(Preempted or SliceExpired)` and `pick_next` |
//! | a message with `SCX_ENQ_WAKEUP` | if we had it running: `put_prev(Blocked)` (it blocked while running), then `select_cpu`, `enqueue(Wakeup)`, `check_preempt(Wakeup)` |
//! | a CPU with no work (the CPU the scheduler runs on, or an idle CPU the kernel's idle tracking hands out) | `put_prev(Blocked or Exited)` for the task we had there, `pick_next`, `balance(NewlyIdle)` and `pick_next` again; the pick is dispatched to that CPU |
//! | after ticks | `balance(Periodic)` on the ticking CPU, `balance(NohzIdle)` for CPUs with nothing to run |
//!
//! **Faithful**: every decision (which CPU a new or waking task goes to, which task a CPU runs next
//! and for how long, when a task is preempted at a tick or by a wakeup, which queued tasks balancing
//! moves) is the policy's own, made on the same facts the simulator gives it (nice level from the
//! kernel's weight, allowed CPUs from `sched_getaffinity`, thread group, the machine's topology from
//! sysfs).
//!
//! **Approximated**, because the kernel side reports only enqueues:
//!
//! * *Ticks* are time-driven: a task the policy did not give a slice runs for at most one tick
//!   period (the kernel slice given is the policy's slice, capped at one tick), and when it comes
//!   back the policy's `tick` runs once for each period that passed. Ticks therefore happen at the
//!   kernel slice's expiry, plus the scheduler's own wake-up latency, instead of exactly every 1/HZ.
//! * *Blocking* is learned late: a task that sleeps while running is noticed when it wakes (its
//!   message carries `SCX_ENQ_WAKEUP`) or when its CPU is found with no work, whichever comes first;
//!   until then the policy still sees it running there.
//! * *Wakeup preemption* is a dispatch with `SCX_ENQ_PREEMPT` to the CPU: the kernel preempts the
//!   running task at once, and it comes back to us as a runnable message.
//! * *Migrations* that balancing asks for move the task in the policy's queues; nothing is in the
//!   kernel's queues until we dispatch, so a queued task's move is exact. Moving a running task
//!   (active balancing) preempts it.
//! * *Exits* are found when a task's CPU is found with no work or by a sweep of blocked tasks every
//!   second (`kill(pid, 0)`), then `put_prev(Exited)` or `task_exit` runs.
//! * *Wakee facts*: the kernel does not say who woke a task, nor whether the wakeup was synchronous,
//!   so `WakeInfo` names the CPU the task last ran on, no waker, and `sync = false`.
//! * *Classes*: real-time tasks never reach sched_ext (the kernel's RT class runs them). A task's
//!   class is `sched_getscheduler`'s when it is first met; later each message says it (schedlab's
//!   BPF variant packs `p->policy` into it, [`message`]), and a change reaches the policy as the
//!   engine's `change_class` does: `put_prev(Preempted)` if it ran, `dequeue(Save)` if it was
//!   queued, `set_class`, `enqueue(Restore)`. A task that goes real-time leaves sched_ext (a
//!   message from `ops.disable`): the policy is told its new class (`set_class`) but not given
//!   it back (`Restore`) until it returns with a message of a fair class, as it is not the
//!   policy's to run meanwhile. One that returns running (it changed its own class) is seen at
//!   its next message, up to one kernel slice later.
//! * *Task groups* are the cgroups of the `cpu` controller, read from `/proc/PID/cgroup` (the v1
//!   `cpu` hierarchy, else the unified one) with their `cpu.weight` (or v1 `cpu.shares`): each
//!   cgroup is made a group, parents first, when the first of its threads is met
//!   (`SchedPolicy::group_new`), and a thread's cgroup is read again at its first message at least
//!   50 ms after the last reading: a thread written into another cgroup moves there (a queued task
//!   leaves and rejoins its CPU's queue, as `sched_move_task` does) at its next message, not at the
//!   instant of the write. A group's weight is read once; later changes are not seen.
//!
//! **Measured**: the user-space round trip, in the kernel's timestamps ([`ShadowStats`]): from the
//! stop that freed a CPU (a task's return to user space, or its block) to the start of the task the
//! policy dispatched there. A message carries only the task's last start, so a round trip is
//! counted only when the task's start count (`nr_starts`, which schedlab's variant of the BPF
//! program sends) shows it started once since its last message; a task preempted with slice left
//! (by a kernel thread) starts again without a message. A block's stop is known only from the
//! blocked task's next message, and counts only if the picked task was queued by then (otherwise
//! the CPU waited for a wakeup, not for user space).

#![warn(missing_docs)]

pub mod host;
pub mod message;
pub mod shadow;
pub mod weight;

pub use host::{Host, LinuxHost, TaskFacts};
pub use shadow::{KernelTask, Order, Shadow, ShadowError, ShadowStats, MAX_SLEEP_NS, OVERLOAD_SLEEP_NS};
