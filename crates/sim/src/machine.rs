//! The simulated machine: topology, tick rate, CPU speed and the cost model, with presets for the
//! seed papers' machines and a TOML form for any other (up to 1,024 CPUs).

use schedlab_core::{Level, Ns, Topology, NSEC_PER_MSEC, NSEC_PER_SEC, NSEC_PER_USEC};
use serde::{Deserialize, Serialize};

/// Every cost the engine charges in simulated time. All fields have documented defaults
/// ([`CostModel::default`]) and can be set per machine in TOML (`[costs]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CostModel {
    /// Direct cost of a context switch (register and address-space switch), charged when the next
    /// task differs from the previous one. Default 2 us.
    pub context_switch_ns: Ns,
    /// A context switch to a thread of the process whose address space the CPU holds: Linux's
    /// `context_switch` leaves the page tables and TLB alone when the next task's `mm` is the one
    /// loaded (`switch_mm` compares them), and the idle task borrows the last one (lazy TLB), so a
    /// switch between two threads of one process, or back to one after idle, costs only the
    /// register switch. The CPU holds the address space of the last task that ran on it. Unset
    /// (the default): `context_switch_ns`, every switch alike.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_switch_ns: Option<Ns>,
    /// Fixed cost of one scheduling decision (`pick_next`). Default 250 ns.
    pub sched_base_ns: Ns,
    /// Cost per task the policy reports having examined (seed 001: the 2.4 scheduler's O(n) goodness
    /// scan is what makes it slow). Default 40 ns, about 100 cycles at 2.5 GHz.
    pub sched_per_task_ns: Ns,
    /// Latency of a reschedule IPI to another CPU (wakeup or preemption of a remote CPU), including an
    /// idle CPU's exit from its idle state. A CPU acting on itself pays nothing. Default 2 us.
    pub wakeup_ipi_ns: Ns,
    /// Time for an idle CPU to leave its idle state when work arrives (added to the IPI latency, or
    /// alone when the wakeup happens on the idle CPU itself, e.g. its own timer). Default 1 us.
    pub idle_exit_ns: Ns,
    /// Speed of a task with a cold cache, in percent of full speed. Default 50.
    pub cold_speed_pct: u32,
    /// How long a task runs at `cold_speed_pct` after moving between SMT siblings. Default 0.
    pub refill_smt_ns: Ns,
    /// ... between cores sharing an LLC (private L1/L2 refill). Default 10 us.
    pub refill_llc_ns: Ns,
    /// ... between LLCs of one node. Default 100 us.
    pub refill_node_ns: Ns,
    /// ... between nodes of one socket. Default 200 us.
    pub refill_socket_ns: Ns,
    /// ... between sockets. Default 250 us.
    pub refill_machine_ns: Ns,
    /// If other tasks ran at least this long on a CPU since a task last ran there, the task's working
    /// set counts as evicted. Default 2 ms.
    pub evict_after_ns: Ns,
    /// Cold time after such an eviction (same CPU). Default 50 us.
    pub refill_evicted_ns: Ns,
    /// Timer slack of non-real-time tasks: Linux lets their sleeps and timers expire up to this late
    /// (`prctl(PR_SET_TIMERSLACK)`, 50 us by default) to batch wakeups, and in practice they wake
    /// about that late. Sleep and timer wakeups of normal, batch and idle tasks happen this long after
    /// their expiry, and their wakeup latency counts from the expiry, as a thread timing itself sees
    /// it. Default 0 (the seed papers' kernels); `schedlab calibrate` measures it.
    pub timer_slack_ns: Ns,
    /// CPU time of one system call, charged to the calling task before each op that always enters
    /// the kernel (sleep, timer, yield, send, recv, condition wait, suspend, io, fork, wait_children, wait_child,
    /// cpus): entry, the call's own work and exit, which Linux counts as the thread's run time. Ops
    /// that enter the kernel only when contended (mutexes, semaphores, barriers, signal, resume) are
    /// not charged. A per-kind cost below, when set, replaces it for its kind of call. Default 0
    /// (the workload generators' own per-call costs stand for it); `schedlab calibrate` measures it
    /// as half a 4-byte pipe write + read.
    pub syscall_ns: Ns,
    /// Per-kind kernel path costs (issue 30), each the CPU time one call costs the task that makes
    /// it, as Linux accounts it (measured by `schedlab calibrate`, crates/exec/src/kernel_costs.rs).
    /// Each is charged as run time before the op, in place of `syscall_ns`. Unset (the default),
    /// a call that always enters the kernel costs `syscall_ns` and one that enters it only when
    /// contended costs nothing, as before these keys existed.
    ///
    /// A `sleep` or `timer` op that blocks (arming the high-resolution timer, the block and the
    /// wakeup's switch-in).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sleep_ns: Option<Ns>,
    /// A `yield` (`sched_yield`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub yield_ns: Option<Ns>,
    /// A `fork` (the parent's part of creating the task).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fork_ns: Option<Ns>,
    /// A `fork` of a template that runs as a process of its own (`TaskSpec::own_process`): the
    /// parent's `fork()`, which copies its page tables. Unset: `fork_ns`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fork_process_ns: Option<Ns>,
    /// The exit of a task that runs as a process of its own: the teardown of its address space,
    /// run time Linux charges to the exiting task, before it ends. Unset: nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_process_ns: Option<Ns>,
    /// A pipe `send` or `recv` that blocks (no room, no bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pipe_wait_ns: Option<Ns>,
    /// A pipe `send` or `recv` that wakes a blocked reader or writer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pipe_wake_ns: Option<Ns>,
    /// A `lock` of a mutex another task holds (the futex wait of a contended mutex).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mutex_wait_ns: Option<Ns>,
    /// An `unlock` with waiters (the futex wake of a contended mutex).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mutex_wake_ns: Option<Ns>,
    /// A condition wait (`cond_wait`), a `suspend`, and a sleeping `barrier` arrival (the
    /// executor's barriers and events are a mutex and a condition variable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cond_wait_ns: Option<Ns>,
    /// Per task woken by a `signal`, `broadcast`, `resume` or barrier release.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cond_wake_ns: Option<Ns>,
    /// Condition variables quiesce before switching groups, as glibc 2.25-2.40 do
    /// (`__condvar_quiesce_and_switch_g1` waits on `__g_refs`): a signal or broadcast that finds
    /// no unsignalled waiter in G1 but some in G2 first waits, in a futex wait
    /// (`futex_wait_ns`), until every waiter it or an earlier call signalled out of G1 has run
    /// (docs/validation.md). glibc 2.41 removed the wait. `schedlab calibrate` finds out which the
    /// machine's libc does. Default: false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cond_quiesce: bool,
    /// A semaphore wait that blocks (a futex wait).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub futex_wait_ns: Option<Ns>,
    /// A semaphore post that wakes a waiter (a futex wake).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub futex_wake_ns: Option<Ns>,
    /// Latency from a sleep's or timer's expiry on an idle CPU until that CPU runs the wakeup (the
    /// timer interrupt's delivery from idle, which may differ from `idle_exit_ns`, the exit of a
    /// CPU an IPI wakes: in a VM the timer goes through the host). The wakeup, and with it the
    /// choice of CPU, happens this much after the expiry; the timer's CPU then pays no
    /// `idle_exit_ns`. Unset: the wakeup happens at the expiry and an idle target pays
    /// `idle_exit_ns`, as before this key existed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timer_exit_ns: Option<Ns>,
    /// CPU time of the periodic timer interrupt on a busy CPU: the interrupt's entry and exit,
    /// `scheduler_tick` and the rest of `update_process_times` (timers, RCU, accounting), which
    /// Linux charges to the task it interrupts as run time (without `IRQ_TIME_ACCOUNTING`, the
    /// kernels of the seed papers). The task makes no progress meanwhile, and a reschedule the
    /// tick asks for happens at its end: `schedule()` reads the clock after the handler did, so
    /// a task picked at a tick has run that much less than whole ticks at each later tick (a CFS
    /// slice of exactly two ticks, rounded down by `calc_delta_mine`, then runs three). The
    /// policy's tick sees the clock at the interrupt. A wall-clock spin (`spin`, a barrier's spin)
    /// runs on through it, as a loop that watches the clock does. Unset: a tick takes no time and
    /// its reschedule happens at the tick's instant, as before this key existed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tick_irq_ns: Option<Ns>,
    /// Absences after which a blocked task's return costs extra kernel time (issue 30), ns,
    /// increasing: the points of `resume_idle_ns` and `resume_busy_ns`. A thread's CPU time per
    /// blocking call grows with how long it was away (on the machine `schedlab calibrate` measured,
    /// a sleep's path costs 5 us after 50 us away and 40 us after 30 ms: the kernel's data of the
    /// task went cold). The per-kind wait costs above are those of a short absence; a task that
    /// blocked and is switched in after `A` ns away (blocked and then runnable) is charged the
    /// curve's value at `A` as run time before its next op, linearly interpolated between points,
    /// 0 below the first, the last value beyond the last. Preempted (runnable) absences are not
    /// charged (measured at 1-5 us after 1-3 ms away, within the per-switch noise). Empty (the
    /// default): nothing is charged, as before these keys existed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resume_after_ns: Vec<Ns>,
    /// The extra kernel time at each of `resume_after_ns` when the task's CPU was idle until the
    /// task's return (the wakeup brought it out of idle).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resume_idle_ns: Vec<Ns>,
    /// The extra kernel time at each of `resume_after_ns` when the CPU was running another task.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resume_busy_ns: Vec<Ns>,
    /// The policy decides in user space, as it does when it runs as the kernel's scheduler through
    /// sched_ext (schedlab-scx; docs/real-kernel.md): every decision makes a round trip from the
    /// CPU that needs it to the user-space scheduler and back, this long, which schedlab-scx
    /// measures in the kernel's own timestamps (`switch_gap_us`; a continue and a pick after a
    /// block take their own where `scx_continue_round_trip_ns` and `scx_block_round_trip_ns` are
    /// set). Set, the engine models the real path:
    ///
    /// * a CPU that needs a task because its own ended (blocked, exited, yielded, its slice or a
    ///   tick ran out) waits this long before the task it picks runs (charged as switch overhead:
    ///   the picked task waits, the policy's clock runs on);
    /// * at a tick after which the running task goes on while some other task waits for a CPU,
    ///   the CPU waits this long too (the task's kernel slice ended at the tick; schedlab-scx
    ///   refills it without asking user space only while user space holds no task);
    /// * a reschedule sent to another CPU (a wakeup to an idle CPU, a wakeup preemption) arrives
    ///   this much later, the decision already made: that CPU's switch pays nothing more.
    ///
    /// Unset (the default): the policy decides in the kernel, at no such cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scx_round_trip_ns: Option<Ns>,
    /// The spread of the round trips: each is drawn uniformly from `scx_round_trip_ns` plus or
    /// minus this (at most `scx_round_trip_ns`), from a random stream of its own seeded by the run's
    /// seed, so the workload's own draws stay the same. A uniform spread of half-width `sqrt(3) *
    /// sd` has standard deviation `sd`, as schedlab-scx reports it (`continue_gap_sd_us`). A
    /// constant round trip locks into phase with the ticks: two round-robin hogs alternating
    /// 10 ms slices on a 4 ms tick meet 3 and 2 ticks per slice, always the same one 3. Unset: every
    /// round trip is `scx_round_trip_ns`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scx_round_trip_jitter_ns: Option<Ns>,
    /// The round trip of a *continue*, where it differs: at a tick after which the running task
    /// goes on while another waits (schedlab-scx's `continue_gap_us`). Needs `scx_round_trip_ns`;
    /// unset, a continue costs that.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scx_continue_round_trip_ns: Option<Ns>,
    /// The spread of the continues' round trips (as `scx_round_trip_jitter_ns`; unset: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scx_continue_round_trip_jitter_ns: Option<Ns>,
    /// The round trip *after a block*, where it differs: a CPU whose task blocked or exited waits
    /// this long before the task it picks runs (schedlab-scx's `block_gap_us`, which includes the
    /// kernel's finding the CPU idle). Needs `scx_round_trip_ns`; unset, it costs that.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scx_block_round_trip_ns: Option<Ns>,
    /// The spread of the round trips after a block (as `scx_round_trip_jitter_ns`; unset: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scx_block_round_trip_jitter_ns: Option<Ns>,
    /// The *dispatch half* of a switch's round trip (and of a wakeup's decision), in thousandths
    /// of it: the part from the user-space scheduler's decision to the picked task's start, which
    /// the policy's clock charges to the picked task, where the part before the decision (the
    /// message's way, the wait for the scheduler's round) is charged to the task that stopped, the
    /// adapter holding it as running until its message arrives. schedlab-scx measures it
    /// (`switch_dispatch_us` of `switch_halves_gap_us`). Set, a wakeup reaches the policy only
    /// when its request half is over (`select_cpu`, `enqueue` and the preemption check see the
    /// CPUs as they are then, as the adapter handles the wakeup's message), and a wakeup told to a
    /// CPU whose task blocked meanwhile, unheard, is served by that CPU's pick in the same round,
    /// not by a preemption. Needs `scx_round_trip_ns`; unset, 0: the whole round trip passes
    /// before the decision (the stopping task is charged all of it), and a wakeup is decided at
    /// once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scx_switch_dispatch_permille: Option<u32>,
    /// The dispatch half of a round trip after a block, in thousandths of it (`block_dispatch_us` of
    /// `block_halves_gap_us`): before it, the blocked task's CPU waits with the task still running
    /// for the policy (the adapter learns of the block only when the kernel finds the CPU idle), so
    /// the policy's clock charges that part to the blocked task, and the task picked then the rest.
    /// Needs `scx_round_trip_ns`; unset, 1000: the policy hears of the block at once and the picked
    /// task is charged the whole round trip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scx_block_dispatch_permille: Option<u32>,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            context_switch_ns: 2 * NSEC_PER_USEC,
            thread_switch_ns: None,
            sched_base_ns: 250,
            sched_per_task_ns: 40,
            wakeup_ipi_ns: 2 * NSEC_PER_USEC,
            idle_exit_ns: NSEC_PER_USEC,
            cold_speed_pct: 50,
            refill_smt_ns: 0,
            refill_llc_ns: 10 * NSEC_PER_USEC,
            refill_node_ns: 100 * NSEC_PER_USEC,
            refill_socket_ns: 200 * NSEC_PER_USEC,
            refill_machine_ns: 250 * NSEC_PER_USEC,
            evict_after_ns: 2 * NSEC_PER_MSEC,
            refill_evicted_ns: 50 * NSEC_PER_USEC,
            timer_slack_ns: 0,
            syscall_ns: 0,
            sleep_ns: None,
            yield_ns: None,
            fork_ns: None,
            fork_process_ns: None,
            exit_process_ns: None,
            pipe_wait_ns: None,
            pipe_wake_ns: None,
            mutex_wait_ns: None,
            mutex_wake_ns: None,
            cond_wait_ns: None,
            cond_wake_ns: None,
            cond_quiesce: false,
            futex_wait_ns: None,
            futex_wake_ns: None,
            timer_exit_ns: None,
            tick_irq_ns: None,
            resume_after_ns: Vec::new(),
            resume_idle_ns: Vec::new(),
            resume_busy_ns: Vec::new(),
            scx_round_trip_ns: None,
            scx_round_trip_jitter_ns: None,
            scx_continue_round_trip_ns: None,
            scx_continue_round_trip_jitter_ns: None,
            scx_block_round_trip_ns: None,
            scx_block_round_trip_jitter_ns: None,
            scx_switch_dispatch_permille: None,
            scx_block_dispatch_permille: None,
        }
    }
}

impl CostModel {
    /// Checks the user-space round trips: each from 1 ns to 1 s, a spread no wider than its
    /// round trip, a kind's round trip only beside `scx_round_trip_ns`. The error names the key.
    pub fn validate_scx(&self) -> Result<(), (&'static str, String)> {
        let kinds = [
            (
                "scx_round_trip_ns",
                "scx_round_trip_jitter_ns",
                self.scx_round_trip_ns,
                self.scx_round_trip_jitter_ns,
            ),
            (
                "scx_continue_round_trip_ns",
                "scx_continue_round_trip_jitter_ns",
                self.scx_continue_round_trip_ns,
                self.scx_continue_round_trip_jitter_ns,
            ),
            (
                "scx_block_round_trip_ns",
                "scx_block_round_trip_jitter_ns",
                self.scx_block_round_trip_ns,
                self.scx_block_round_trip_jitter_ns,
            ),
        ];
        for (i, (key, jitter_key, rt, jitter)) in kinds.into_iter().enumerate() {
            if rt.is_some_and(|rt| rt == 0 || rt > NSEC_PER_SEC) {
                return Err((key, "must be 1 ns to 1 s (leave it out for none)".into()));
            }
            if i > 0 && rt.is_some() && self.scx_round_trip_ns.is_none() {
                return Err((key, "needs scx_round_trip_ns (the round trip of every other decision)".into()));
            }
            match (rt, jitter) {
                (None, Some(_)) => return Err((jitter_key, format!("needs {key}"))),
                (Some(rt), Some(j)) if j > rt => {
                    return Err((
                        jitter_key,
                        format!("{j} is more than {key} ({rt}): a round trip cannot be negative"),
                    ))
                }
                _ => {}
            }
        }
        let halves = [
            ("scx_switch_dispatch_permille", self.scx_switch_dispatch_permille),
            ("scx_block_dispatch_permille", self.scx_block_dispatch_permille),
        ];
        for (key, permille) in halves {
            match permille {
                Some(p) if p > 1000 => return Err((key, format!("{p} is more than 1000 thousandths"))),
                Some(_) if self.scx_round_trip_ns.is_none() => {
                    return Err((key, "needs scx_round_trip_ns (the round trip it is a part of)".into()))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Cold-cache time after a move across `level`.
    pub fn refill_ns(&self, level: Level) -> Ns {
        match level {
            Level::Same => 0,
            Level::Smt => self.refill_smt_ns,
            Level::Llc => self.refill_llc_ns,
            Level::Node => self.refill_node_ns,
            Level::Socket => self.refill_socket_ns,
            Level::Machine => self.refill_machine_ns,
        }
    }

    /// The extra kernel time of a blocked task's return after `away_ns` away
    /// (`resume_after_ns` with `resume_idle_ns` if its CPU was idle, else `resume_busy_ns`).
    pub fn resume_ns(&self, away_ns: Ns, cpu_was_idle: bool) -> Ns {
        let after = &self.resume_after_ns;
        let cost = if cpu_was_idle { &self.resume_idle_ns } else { &self.resume_busy_ns };
        if after.is_empty() || cost.len() != after.len() || away_ns < after[0] {
            return 0;
        }
        let i = after.partition_point(|&a| a <= away_ns);
        if i == after.len() {
            return cost[i - 1];
        }
        // after[i - 1] <= away < after[i]: interpolate (in 128 bits: the products may be large).
        let (a0, a1, c0, c1) = (after[i - 1] as i128, after[i] as i128, cost[i - 1] as i128, cost[i] as i128);
        (c0 + (c1 - c0) * (away_ns as i128 - a0) / (a1 - a0)) as Ns
    }

    /// Checks the resume curve: `(key, what is wrong)` if it cannot be used.
    pub fn validate_resume(&self) -> Result<(), (&'static str, String)> {
        let n = self.resume_after_ns.len();
        for (key, v) in [("resume_idle_ns", &self.resume_idle_ns), ("resume_busy_ns", &self.resume_busy_ns)] {
            if v.len() != n {
                return Err((key, format!("{} values for the {n} points of resume_after_ns", v.len())));
            }
            if v.iter().any(|&x| x > 1_000_000_000) {
                return Err((key, "a value over 1 s".into()));
            }
        }
        if self.resume_after_ns.first() == Some(&0) {
            return Err(("resume_after_ns", "absences must be above 0 ns".into()));
        }
        if self.resume_after_ns.windows(2).any(|w| w[0] >= w[1]) {
            return Err(("resume_after_ns", "absences must be strictly increasing".into()));
        }
        Ok(())
    }
}

/// A machine to simulate.
#[derive(Clone, Debug)]
pub struct Machine {
    /// Name (preset name or the TOML file's `name`).
    pub name: String,
    /// One line describing it.
    pub description: String,
    /// Topology.
    pub topology: Topology,
    /// Whether nodes have separate memory (see [`schedlab_core::Ctx::numa`]).
    pub numa: bool,
    /// Timer interrupt rate (100, 250 or 1000 Hz).
    pub hz: u32,
    /// Per-CPU speed in permille of nominal (1000 = work runs at its nominal rate).
    pub speed_permille: Vec<u32>,
    /// Core clock at nominal speed, MHz: converts run time into cycles for the performance counters.
    pub cpu_mhz: u32,
    /// Costs.
    pub costs: CostModel,
    /// Shared-resource contention between co-running tasks (docs/hardware-model.md).
    pub contention: crate::contention::ContentionModel,
    /// Frequency levels, governor and power model (docs/hardware-model.md).
    pub dvfs: crate::dvfs::DvfsModel,
}

/// A machine description that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MachineError {
    /// Not a preset name and not a readable file.
    #[error("unknown machine `{0}`: not a preset ({presets}) and no such file", presets = preset_names().join(", "))]
    Unknown(String),
    /// The file could not be read.
    #[error("{file}: {err}")]
    Io {
        /// File.
        file: String,
        /// Cause.
        err: std::io::Error,
    },
    /// Bad content.
    #[error("{file}:{line}:{column}: {key}{msg}", key = if key.is_empty() { String::new() } else { format!("key `{key}`: ") })]
    Invalid {
        /// File.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// Key at fault.
        key: String,
        /// What is wrong.
        msg: String,
    },
}

/// A switch between threads of one process on the HTFS thesis's Athlon II, at most: its sysbench
/// threads run on one core (seed 000 sec. 5.2.1, fig. 3, table 6) made 1.1 million switches a
/// second for 74.53 s under HTFS, each thread locking, yielding and unlocking, so a switch there
/// cost no more than 74.53 s / 82 million = 0.91 us with everything else free. The largest value
/// that bound allows (the preset's 2 us for any switch cannot be right for threads there).
pub const ATHLON2_THREAD_SWITCH_NS: Ns = 900;

/// `(name, description, builder)` for each preset.
type Preset = (&'static str, &'static str, fn() -> Machine);

const PRESETS: &[Preset] = &[
    ("up", "uniprocessor: one CPU (seed 003 experiments, uniprocessor kernels of seed 001)", || {
        machine("up", Topology::flat(1), false, 1000)
    }),
    ("athlon2-x2", "AMD Athlon II M320: 2 cores, private L2 each, 2.1 GHz (HTFS thesis, seed 000 sec. 5.1.1)", || {
        let mut m = machine("athlon2-x2", Topology::symmetric(1, 1, 2, 1, 1).expect("preset"), false, 1000);
        // Seed 000 sec. 5.1.1: "AMD Athlon II M320 @ 2.10 GHz".
        m.cpu_mhz = 2100;
        m.costs.thread_switch_ns = Some(ATHLON2_THREAD_SWITCH_NS);
        m
    }),
    ("core2duo", "Intel Core2Duo: 2 cores sharing an L2 and the front-side bus, 1.6-2.4 GHz SpeedStep (AVEC thesis, seed 004)", || {
        let mut m = machine("core2duo", Topology::symmetric(1, 1, 1, 2, 1).expect("preset"), false, 1000);
        m.cpu_mhz = 2400;
        m.dvfs.levels_mhz = vec![1600, 1867, 2133, 2400];
        m.dvfs.levels_mv = vec![1100, 1150, 1212, 1275];
        m
    }),
    ("xeon-e5520-2s", "2 x Intel Xeon E5520: 2 sockets x 4 cores x 2 SMT = 16 CPUs, L3 per socket, NUMA, 2.26 GHz (seed 000 sec. 5.1.1)", || {
        let mut m = machine("xeon-e5520-2s", Topology::symmetric(2, 1, 1, 4, 2).expect("preset"), true, 1000);
        // Seed 000 sec. 5.1.1: "2 x Intel Xeon E5520 @ 2.26GHz".
        m.cpu_mhz = 2260;
        m
    }),
    ("pentium2-4way", "4 x Pentium II Xeon SMP: private L2 each, one shared memory, 400 MHz (seed 001 VolanoMark machine)", || {
        let mut m = machine("pentium2-4way", Topology::symmetric(4, 1, 1, 1, 1).expect("preset"), false, 100);
        // Seed 001 names no clock for its Netfinity 7000's Pentium II Xeons, which Intel sold at
        // 400 and 450 MHz: the lower, chosen (it only converts run time into counted cycles).
        m.cpu_mhz = 400;
        m
    }),
    ("opteron6172-32", "32-core AMD Opteron 6172 box: 2 sockets x 2 NUMA nodes x 8 cores, L3 per node, 2.1 GHz (seed 002)", || {
        let mut m = machine("opteron6172-32", Topology::symmetric(2, 2, 1, 8, 1).expect("preset"), true, 1000);
        // Seed 002 sec. 5.1 names the AMD Opteron 6172, whose clock is 2.1 GHz (AMD's specification).
        m.cpu_mhz = 2100;
        m
    }),
];

fn machine(name: &str, topology: Topology, numa: bool, hz: u32) -> Machine {
    let n = topology.nr_cpus();
    Machine {
        name: name.to_string(),
        description: String::new(),
        topology,
        numa,
        hz,
        speed_permille: vec![1000; n],
        cpu_mhz: 2500,
        costs: CostModel::default(),
        contention: crate::contention::ContentionModel::default(),
        dvfs: crate::dvfs::DvfsModel::default(),
    }
}

/// Names of the machine presets.
pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.0).collect()
}

/// `(name, description)` of every preset.
pub fn presets() -> Vec<(&'static str, &'static str)> {
    PRESETS.iter().map(|p| (p.0, p.1)).collect()
}

impl Machine {
    /// A preset by name.
    pub fn preset(name: &str) -> Option<Machine> {
        PRESETS.iter().find(|p| p.0 == name).map(|p| {
            let mut m = (p.2)();
            m.description = p.1.to_string();
            m
        })
    }

    /// A flat SMP machine of `n` CPUs sharing one LLC (for tests and quick experiments).
    pub fn flat(n: u32) -> Machine {
        machine(&format!("flat{n}"), Topology::flat(n), false, 1000)
    }

    /// A preset name or a TOML file path.
    pub fn load(spec: &str) -> Result<Machine, MachineError> {
        if let Some(m) = Machine::preset(spec) {
            return Ok(m);
        }
        let path = std::path::Path::new(spec);
        if !path.exists() {
            return Err(MachineError::Unknown(spec.to_string()));
        }
        let src =
            std::fs::read_to_string(path).map_err(|err| MachineError::Io { file: spec.to_string(), err })?;
        Machine::from_toml(spec, &src)
    }

    /// The tick length in nanoseconds.
    pub fn tick_ns(&self) -> Ns {
        1_000_000_000 / self.hz as Ns
    }

    /// Reads a machine from TOML:
    ///
    /// ```toml
    /// name = "my-box"
    /// sockets = 2            # defaults: 1 everywhere, hz 250, numa = (nodes > 1)
    /// nodes_per_socket = 1
    /// llcs_per_node = 1
    /// cores_per_llc = 8
    /// threads_per_core = 2
    /// hz = 1000
    /// speed_permille = 1000  # or one value per CPU: [1000, 1000, 800, ...]
    /// [costs]
    /// context_switch_ns = 3000
    /// [contention]
    /// bus_permille = 800
    /// ```
    pub fn from_toml(file: &str, src: &str) -> Result<Machine, MachineError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Doc {
            name: Option<String>,
            description: Option<String>,
            #[serde(default = "one")]
            sockets: u32,
            #[serde(default = "one")]
            nodes_per_socket: u32,
            #[serde(default = "one")]
            llcs_per_node: u32,
            #[serde(default = "one")]
            cores_per_llc: u32,
            #[serde(default = "one")]
            threads_per_core: u32,
            numa: Option<bool>,
            hz: Option<toml::Spanned<u32>>,
            speed_permille: Option<toml::Spanned<Speed>>,
            cpu_mhz: Option<toml::Spanned<u32>>,
            #[serde(default)]
            costs: CostModel,
            #[serde(default)]
            contention: crate::contention::ContentionModel,
            #[serde(default)]
            dvfs: crate::dvfs::DvfsModel,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Speed {
            All(u32),
            PerCpu(Vec<u32>),
        }
        fn one() -> u32 {
            1
        }
        let at = |span: std::ops::Range<usize>, key: &str, msg: String| {
            let upto = &src[..span.start.min(src.len())];
            MachineError::Invalid {
                file: file.to_string(),
                line: upto.matches('\n').count() + 1,
                column: upto.rfind('\n').map_or(upto.len(), |p| upto.len() - p - 1) + 1,
                key: key.to_string(),
                msg,
            }
        };
        let doc: Doc = toml::from_str(src)
            .map_err(|e| at(e.span().unwrap_or(0..0), "", e.message().trim().to_string()))?;
        if toml::from_str::<toml::Table>(src).is_ok_and(|t| t.is_empty()) {
            // An empty file would silently be a one-CPU machine with every default.
            return Err(at(
                0..0,
                "",
                "the machine file is empty: give at least its topology (e.g. `cores_per_llc = 4`), \
                 or name a preset (`schedlab list machines`)"
                    .into(),
            ));
        }
        let total =
            [doc.sockets, doc.nodes_per_socket, doc.llcs_per_node, doc.cores_per_llc, doc.threads_per_core]
                .iter()
                .try_fold(1u64, |acc, &x| acc.checked_mul(x as u64))
                .unwrap_or(u64::MAX);
        if total == 0 || total > 1024 {
            return Err(at(0..0, "", format!("the machine has {total} CPUs; schedlab models 1 to 1024")));
        }
        let topology = Topology::symmetric(
            doc.sockets,
            doc.nodes_per_socket,
            doc.llcs_per_node,
            doc.cores_per_llc,
            doc.threads_per_core,
        )
        .map_err(|e| at(0..0, "", e.to_string()))?;
        let n = topology.nr_cpus();
        let hz = match doc.hz {
            None => 250,
            Some(h) if [100, 250, 300, 1000].contains(h.get_ref()) => *h.get_ref(),
            Some(h) => {
                return Err(at(h.span(), "hz", format!("{} is not one of 100, 250, 300, 1000", h.get_ref())))
            }
        };
        let speed_permille = match doc.speed_permille {
            None => vec![1000; n],
            Some(s) => {
                let span = s.span();
                let v = match s.into_inner() {
                    Speed::All(x) => vec![x; n],
                    Speed::PerCpu(v) if v.len() == n => v,
                    Speed::PerCpu(v) => {
                        return Err(at(span, "speed_permille", format!("{} values for {n} CPUs", v.len())))
                    }
                };
                if v.iter().any(|&x| !(1..=100_000).contains(&x)) {
                    return Err(at(span, "speed_permille", "speeds must be in 1..=100000 permille".into()));
                }
                v
            }
        };
        if !(1..=100).contains(&doc.costs.cold_speed_pct) {
            return Err(at(
                0..0,
                "costs.cold_speed_pct",
                format!("{} is not in 1..=100", doc.costs.cold_speed_pct),
            ));
        }
        if let Err((key, msg)) = doc.costs.validate_scx() {
            // The costs table is read without spans: point at the key's line.
            let pos = src.find(key).unwrap_or(0);
            return Err(at(pos..pos, &format!("costs.{key}"), msg));
        }
        if let Err((key, msg)) = doc.costs.validate_resume() {
            // The costs table is read without spans: point at the key's line.
            let pos = src.find(key).unwrap_or(0);
            return Err(at(pos..pos, &format!("costs.{key}"), msg));
        }
        let cpu_mhz = match doc.cpu_mhz {
            None => 2500,
            Some(m) if (1..=100_000).contains(m.get_ref()) => *m.get_ref(),
            Some(m) => return Err(at(m.span(), "cpu_mhz", format!("{} is not in 1..=100000", m.get_ref()))),
        };
        let c = &doc.contention;
        for (key, v) in [
            ("smt_fu_permille", c.smt_fu_permille),
            ("llc_permille", c.llc_permille),
            ("bus_permille", c.bus_permille),
        ] {
            if v > 100_000 {
                return Err(at(0..0, &format!("contention.{key}"), format!("{v} is not in 0..=100000")));
            }
        }
        if let Err((key, msg)) = doc.dvfs.validate() {
            return Err(at(0..0, &format!("dvfs.{key}"), msg));
        }
        let nodes = doc.sockets * doc.nodes_per_socket;
        Ok(Machine {
            name: doc.name.unwrap_or_else(|| file.to_string()),
            description: doc.description.unwrap_or_default(),
            topology,
            numa: doc.numa.unwrap_or(nodes > 1),
            hz,
            speed_permille,
            cpu_mhz,
            costs: doc.costs,
            contention: doc.contention,
            dvfs: doc.dvfs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_have_the_papers_shapes() {
        let x = Machine::preset("xeon-e5520-2s").unwrap();
        assert_eq!(x.topology.nr_cpus(), 16);
        assert_eq!(x.topology.counts(), (8, 2, 2, 2));
        let o = Machine::preset("opteron6172-32").unwrap();
        assert_eq!(o.topology.nr_cpus(), 32);
        assert_eq!(o.topology.counts().2, 4);
        assert_eq!(Machine::preset("pentium2-4way").unwrap().hz, 100);
        // The clocks the seeds state (seed 000 sec. 5.1.1), and AMD's for seed 002's Opteron 6172.
        let mhz = |n: &str| Machine::preset(n).unwrap().cpu_mhz;
        assert_eq!((mhz("athlon2-x2"), mhz("xeon-e5520-2s"), mhz("opteron6172-32")), (2100, 2260, 2100));
        assert!(Machine::preset("nope").is_none());
        for name in preset_names() {
            assert!(!Machine::preset(name).unwrap().description.is_empty());
        }
    }

    #[test]
    fn toml_machine_and_errors() {
        let m = Machine::from_toml(
            "m.toml",
            "name='big'\nsockets=4\ncores_per_llc=64\nthreads_per_core=4\nhz=1000\n",
        )
        .unwrap();
        assert_eq!(m.topology.nr_cpus(), 1024);
        let e =
            Machine::from_toml("m.toml", "sockets=5\ncores_per_llc=64\nthreads_per_core=4\n").unwrap_err();
        assert!(e.to_string().contains("1280 CPUs"), "{e}");
        let e = Machine::from_toml("m.toml", "cores_per_llc=2\nhz=123\n").unwrap_err();
        assert!(e.to_string().starts_with("m.toml:2:4: key `hz`"), "{e}");
        for empty in ["", "\n# nothing here\n"] {
            let e = Machine::from_toml("m.toml", empty).unwrap_err().to_string();
            assert!(e.starts_with("m.toml:1:") && e.contains("the machine file is empty"), "{e}");
        }
        let e = Machine::from_toml("m.toml", "cores=2\n").unwrap_err();
        assert!(e.to_string().contains("unknown field `cores`"), "{e}");
        let e = Machine::from_toml("m.toml", "cores_per_llc=2\n[costs]\nctx_switch=3\n").unwrap_err();
        assert!(e.to_string().contains("m.toml:3:"), "{e}");
        assert!(matches!(Machine::load("no-such-machine"), Err(MachineError::Unknown(_))));
        let m = Machine::from_toml(
            "m.toml",
            "cores_per_llc=2\ncpu_mhz=2000\n[dvfs]\nlevels_mhz=[1000,2000]\nlevels_mv=[900,1100]\ngovernor='ondemand'\n[contention]\nbus_permille=800\n",
        )
        .unwrap();
        assert_eq!((m.cpu_mhz, m.dvfs.levels_mhz.len(), m.contention.bus_permille), (2000, 2, 800));
        assert_eq!(m.dvfs.governor, crate::dvfs::Governor::Ondemand);
        let e =
            Machine::from_toml("m.toml", "[dvfs]\nlevels_mhz=[1000,2000]\nlevels_mv=[900]\n").unwrap_err();
        assert!(e.to_string().contains("key `dvfs.levels_mv`"), "{e}");
        let e = Machine::from_toml("m.toml", "[dvfs]\ngovernor='turbo'\n").unwrap_err();
        assert!(e.to_string().contains("turbo"), "{e}");
        let e = Machine::from_toml("m.toml", "[contention]\nllc_permille=200000\n").unwrap_err();
        assert!(e.to_string().contains("key `contention.llc_permille`"), "{e}");
    }

    #[test]
    fn the_resume_curve_interpolates_between_its_points() {
        let m = Machine::from_toml(
            "m.toml",
            "cores_per_llc=2\n[costs]\nresume_after_ns=[1000,3000,13000]\nresume_idle_ns=[0,2000,12000]\nresume_busy_ns=[0,1000,1000]\n",
        )
        .unwrap();
        let c = &m.costs;
        // Below the first point nothing; on a point its value; between two, the straight line
        // (idle: 2,000 + 10,000 x 5,000 / 10,000 at 8,000 ns away); past the last, the last.
        assert_eq!(c.resume_ns(999, true), 0);
        assert_eq!(c.resume_ns(1000, true), 0);
        assert_eq!(c.resume_ns(2000, true), 1000);
        assert_eq!(c.resume_ns(3000, true), 2000);
        assert_eq!(c.resume_ns(8000, true), 7000);
        assert_eq!(c.resume_ns(8000, false), 1000);
        assert_eq!(c.resume_ns(10_000_000_000, true), 12000);
        // No curve: nothing.
        assert_eq!(CostModel::default().resume_ns(10_000_000, true), 0);
    }

    #[test]
    fn a_bad_resume_curve_names_its_key_and_line() {
        for (body, key, line) in [
            ("resume_after_ns=[1000,3000]\nresume_idle_ns=[0]\nresume_busy_ns=[0,1]\n", "resume_idle_ns", 4),
            (
                "resume_after_ns=[1000,1000]\nresume_idle_ns=[0,1]\nresume_busy_ns=[0,1]\n",
                "resume_after_ns",
                3,
            ),
            ("resume_after_ns=[0,1000]\nresume_idle_ns=[0,1]\nresume_busy_ns=[0,1]\n", "resume_after_ns", 3),
            ("resume_after_ns=[1000]\nresume_idle_ns=[0]\n", "resume_busy_ns", 1),
        ] {
            let e = Machine::from_toml("m.toml", &format!("cores_per_llc=2\n[costs]\n{body}"))
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with(&format!("m.toml:{line}:")) && e.contains(&format!("`costs.{key}`")),
                "{e}"
            );
        }
    }
}
