//! # FreeBSD ULE
//!
//! Source: FreeBSD sys/kern/sched_ule.c (the text consulted is stable/10, FreeBSD 10.4; the ULE paper,
//! seed 002, ported FreeBSD 11.1, whose ULE is the same algorithm), sys/kern/kern_switch.c (run
//! queues), sys/sys/priority.h; seed 002 sec. 2.2 and 3; ../shared/design/POLICIES.md sec. 7.
//!
//! Each CPU has a `tdq` with three run queues of 64 FIFO lists: *realtime* (real-time, kernel and
//! *interactive* timeshare threads, by priority / 4), *timeshare* (batch threads, used as a calendar)
//! and *idle*. The running thread leaves its run queue but keeps counting in `tdq_load`.
//!
//! * **Interactivity.** Each thread keeps its voluntary run and sleep time (hz ticks << 10, at most
//!   5 s, decayed by 4/5 or halved when over). The score is 0..100 (`r / (s / 50)` for sleepers,
//!   `100 - s / (r / 50)` for runners; 50 at once when the threshold is at most 50 and `r >= s`). A
//!   score plus nice under 30 makes the thread interactive with priority `120 + score`; otherwise it is
//!   batch with priority `172 + recent CPU usage (0..31) + nice`. Interactive threads sit in the
//!   realtime queue and always run before batch threads, so batch threads can starve while interactive
//!   ones keep a CPU busy (seed 002 sec. 5.1): nothing here schedules that, it follows from the queues.
//! * **Calendar queue.** A batch thread is inserted `64 x (pri - 152) / 72` slots after `tdq_idx`;
//!   the CPU runs from `tdq_ridx`, and each stathz tick moves `idx` on once `ridx` has caught up, so
//!   every batch thread eventually runs and better priorities run sooner.
//! * **Fork and exit.** A child process (`fork`, `sched_fork`) inherits its parent's history and CPU
//!   usage, scaled down to 0.5 s of history, and starts with a short first slice; the parent is
//!   charged one tick. A new thread of the parent's process (`pthread_create`: `thread_create` calls
//!   `sched_fork_thread` alone) takes the parent's history as it is, and the parent pays nothing
//!   (`new_thread=fork` forks it as a process instead: what the ULE paper's port into Linux 4.9 ran,
//!   since Linux's `sched_fork` calls a class's `task_fork(p)` without the clone flags, early in
//!   `copy_process`, on a copy of the parent whose pid, thread group and memory are set only later,
//!   so the port could not tell a thread from a process). An exiting thread's
//!   run time is added to its parent's (so a shell that starts CPU hogs starts its next children as
//!   batch). Workload tasks without a parent start as if forked from an idle shell (0.5 s of sleep).
//! * **Slices.** Counted in stathz ticks (127 Hz): `slice = stathz / 10` (12 ticks, 94.5 ms) when at
//!   most two threads are on the CPU, `slice / (load - 1)` with more, never below `slice / 6`.
//! * **Preemption.** Only a thread at or above `preempt_thresh` (80, kernel priorities) preempts, or
//!   one woken on an idle CPU; a woken user thread waits for the end of the running slice. A thread
//!   woken onto *another* CPU also preempts there when it is interactive and the running one is not.
//!   A preempted thread goes back to the head of its queue; one whose slice ended, to the tail.
//! * **Placement (`sched_pickcpu`).** The last CPU if it is idle and the thread ran within 2 ticks
//!   (cache affinity); else the least loaded idle CPU of the widest cache group the thread is still
//!   affine to; else the least loaded CPU running something of worse priority; else the least loaded
//!   CPU; and the waking CPU instead when it runs something worse and is not busier by more than one.
//! * **Balancing.** A CPU going idle steals one thread from the most loaded CPU (at least 2 threads)
//!   in its smallest group, then wider groups (`tdq_idled`). Every 0.5-1.5 s (random) CPU 0 pairs the
//!   most loaded CPU with the least loaded and moves one thread, each CPU giving or receiving at most
//!   once per pass (`sched_balance`). Loads are thread counts.
//!
//! Port details (seed 002 sec. 3): the paper kept Linux's convention that the running thread stays
//! in the run queue and changed ULE's balancer not to take it; here the running thread leaves the run
//! queue as in FreeBSD (the trait allows it) and still counts in the load, so no change is needed. The
//! paper scaled ULE's priorities into Linux's 100..139 because Linux shares one priority field among
//! its classes; a schedlab policy owns its priorities, so FreeBSD's are kept ([`linux_prio`] maps them
//! for display). The paper fixed FreeBSD 11's bug that kept the periodic balancer from ever running;
//! the balancer here runs (`balance=false` reproduces the bug's effect).
//!
//! Simplifications: the stathz clock is read at the engine's ticks (a stathz tick is taken at the
//! first engine tick after it, so with HZ 1000 up to 1 ms late), and an idle CPU has no stathz ticks
//! (the balancer counts CPU 0's missed ticks when it next ticks, so a pass due while CPU 0 idles waits); `TDF_NEEDRESCHED` from a local wakeup of a better
//! priority (acted on at the waker's next return to user mode in FreeBSD) is not modelled, as in the
//! paper's port, where a woken thread waits for the slice; interrupt-thread placement and priority
//! lending are absent (no interrupt threads or kernel locks). Idle stealing runs when a CPU goes idle
//! and when the engine's idle kick reaches an idle CPU (the Linux port's idle balancing); FreeBSD's idle
//! loop retries it when its switch count changes.

mod groups;
pub(crate) mod interact;
pub(crate) mod runq;

pub use interact::{
    interact_fork, interact_score, interact_update, linux_prio, slp_run_fork, slp_run_max, tdq_slice,
    user_priority, History, PctCpu, INTERACT_THRESH, PRI_MAX_IDLE, PRI_MAX_INTERACT, PRI_MIN_BATCH,
    PRI_MIN_IDLE, PRI_MIN_INTERACT, PRI_MIN_KERN, PRI_MIN_REALTIME,
};

use crate::params::{parse_bool, parse_u64, ParamInfo, Params};
use crate::prandom::splitmix;
use groups::{Groups, Loads, LowQuery};
use interact::{PRI_MAX_TIMESHARE, SLICE_MIN_DIVISOR, TICK_SHIFT};
use runq::{RunQ, RQ_NQS, RQ_PPQ};
use schedlab_core::time::mul_div;
use schedlab_core::{
    BalanceKind, CpuId, CpuSet, Ctx, DequeueReason, Dispatch, EnqueueReason, Migration, Ns, PolicyStat,
    SchedClass, SchedPolicy, SwitchReason, TaskId, TaskState, WakeInfo, WakeKind, WorkConservation,
    NSEC_PER_SEC,
};

/// The FreeBSD priority of a thread of Linux RT priority `rt` (1..99): rtprio 31..0, i.e. priorities
/// 79..48 (sys/sys/rtprio.h: `PRI_MIN_REALTIME + rtprio`, the best rtprio being 0).
pub(crate) fn realtime_pri(rt: u8) -> u8 {
    let rt = rt.clamp(1, 99) as u32;
    PRI_MIN_REALTIME + (31 - (rt - 1) * 31 / 98) as u8
}

/// ULE's tunables (the `kern.sched` sysctls and the clock rates).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UleParams {
    /// `hz`: the tick rate of ULE's history and affinity clock, Hz. Default 1000.
    pub hz: u64,
    /// `stathz`: the statistics clock that charges run time and counts slices, Hz. Default 127.
    pub stathz: u64,
    /// `kern.sched.slice`: the slice in stathz ticks; `None` means `stathz / 10` (12).
    pub slice: Option<u64>,
    /// `kern.sched.interact`: the interactivity threshold. Default 30.
    pub interact: u64,
    /// `kern.sched.preempt_thresh`: the worst priority that preempts. Default 80 (`PRI_MIN_KERN`).
    pub preempt_thresh: u64,
    /// `kern.sched.static_boost`: the priority a sleeping timeshare thread is raised to (0: off).
    /// Default 152 (`PRI_MIN_BATCH`).
    pub static_boost: u64,
    /// `kern.sched.steal_idle`: idle CPUs steal threads. Default true.
    pub steal_idle: bool,
    /// `kern.sched.steal_thresh`: the load a CPU needs before an idle CPU steals from it. Default 2.
    pub steal_thresh: u64,
    /// `kern.sched.balance`: the periodic balancer runs. Default true.
    pub balance: bool,
    /// `kern.sched.balance_interval`: mean balancer period in stathz ticks; `None` means `stathz`.
    pub balance_interval: Option<u64>,
    /// `kern.sched.affinity`: hz ticks of cache affinity per cache level. Default 1 (`hz / 1000`).
    pub affinity: u64,
    /// How a woken thread's CPU is chosen: `sched_pickcpu` (the source), or the seed's own
    /// counterfactual (seed 002 sec. 6.3: "we replaced the ULE wakeup function by a simple one that
    /// returns the CPU on which the thread was previously running").
    pub wakeup: WakeupCpu,
    /// How a new thread of its creator's process starts (`NewThread`).
    pub new_thread: NewThread,
}

/// How a new thread of its creator's process takes its history (`UleParams::new_thread`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NewThread {
    /// FreeBSD's `thr_new` -> `thread_create` -> `sched_fork_thread` alone: the parent's history as
    /// it is, and the parent pays nothing (FreeBSD 10.4 kern_thr.c).
    Thread,
    /// As a process: `sched_fork`'s scaling to `SCHED_SLP_RUN_FORK` and a tick charged to the
    /// parent, what a port into Linux runs for every clone when its `task_fork(p)` hook, which
    /// Linux calls without the clone flags, calls FreeBSD's `sched_fork`.
    Fork,
}

/// The CPU a woken ULE thread is queued on (`UleParams::wakeup`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WakeupCpu {
    /// `sched_pickcpu`: the last CPU if idle and cache-affine, else the least loaded CPU of the
    /// widest cache group it is still affine to, else of the machine.
    Pickcpu,
    /// The CPU it last ran on (if its affinity mask still allows it), with no search: the
    /// replacement seed 002 measured to show ULE's wakeup scan as sysbench's cost (sec. 6.3). New
    /// threads are still placed by `sched_pickcpu`.
    Last,
}

impl Default for UleParams {
    fn default() -> Self {
        UleParams {
            hz: 1000,
            stathz: 127,
            slice: None,
            interact: INTERACT_THRESH as u64,
            preempt_thresh: PRI_MIN_KERN as u64,
            static_boost: PRI_MIN_BATCH as u64,
            steal_idle: true,
            steal_thresh: 2,
            balance: true,
            balance_interval: None,
            affinity: 1,
            wakeup: WakeupCpu::Pickcpu,
            new_thread: NewThread::Thread,
        }
    }
}

impl Params for UleParams {
    fn info() -> &'static [ParamInfo] {
        &[
            ParamInfo { key: "hz", default: "1000", help: "ULE's hz clock (history, affinity), Hz" },
            ParamInfo { key: "stathz", default: "127", help: "the statistics clock (run time, slices), Hz" },
            ParamInfo {
                key: "slice",
                default: "stathz / 10",
                help: "slice in stathz ticks (kern.sched.slice)",
            },
            ParamInfo {
                key: "interact",
                default: "30",
                help: "interactivity threshold (kern.sched.interact)",
            },
            ParamInfo {
                key: "preempt_thresh",
                default: "80",
                help: "worst priority that preempts a running thread (kern.sched.preempt_thresh)",
            },
            ParamInfo {
                key: "static_boost",
                default: "152",
                help: "priority a sleeping timeshare thread is raised to until it runs; 0 disables",
            },
            ParamInfo {
                key: "steal_idle",
                default: "true",
                help: "idle CPUs steal a thread (kern.sched.steal_idle)",
            },
            ParamInfo {
                key: "steal_thresh",
                default: "2",
                help: "load a CPU needs before idle CPUs steal from it",
            },
            ParamInfo {
                key: "balance",
                default: "true",
                help: "run the periodic balancer on CPU 0 (kern.sched.balance)",
            },
            ParamInfo {
                key: "balance_interval",
                default: "stathz",
                help: "mean balancer period, stathz ticks (each period is random in 0.5-1.5 x this)",
            },
            ParamInfo { key: "affinity", default: "1", help: "hz ticks of cache affinity per cache level" },
            ParamInfo {
                key: "wakeup",
                default: "pickcpu",
                help: "a woken thread's CPU: pickcpu (sched_pickcpu) or last (its previous CPU, no search: seed 002 sec. 6.3's replacement)",
            },
            ParamInfo {
                key: "new_thread",
                default: "thread",
                help: "a new thread of its creator's process: thread (sched_fork_thread, FreeBSD's pthread_create) or fork (sched_fork, as for a process)",
            },
        ]
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "hz" => self.hz = parse_u64(value, 100..=10_000)?,
            "stathz" => self.stathz = parse_u64(value, 10..=10_000)?,
            "slice" => self.slice = Some(parse_u64(value, 1..=10_000)?),
            "interact" => self.interact = parse_u64(value, 1..=100)?,
            "preempt_thresh" => self.preempt_thresh = parse_u64(value, 0..=255)?,
            "static_boost" => self.static_boost = parse_u64(value, 0..=255)?,
            "steal_idle" => self.steal_idle = parse_bool(value)?,
            "steal_thresh" => self.steal_thresh = parse_u64(value, 1..=100_000)?,
            "balance" => self.balance = parse_bool(value)?,
            "balance_interval" => self.balance_interval = Some(parse_u64(value, 1..=1_000_000)?),
            "affinity" => self.affinity = parse_u64(value, 0..=10_000)?,
            "wakeup" => {
                self.wakeup = match value {
                    "pickcpu" => WakeupCpu::Pickcpu,
                    "last" => WakeupCpu::Last,
                    _ => return Err(format!("`{value}`: expected pickcpu or last")),
                }
            }
            "new_thread" => {
                self.new_thread = match value {
                    "thread" => NewThread::Thread,
                    "fork" => NewThread::Fork,
                    _ => return Err(format!("`{value}`: expected thread or fork")),
                }
            }
            _ => unreachable!("checked by apply"),
        }
        Ok(())
    }
}

/// A thread's scheduling class as ULE sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// `PRI_REALTIME` (`PRI_FIFO` when `fifo`): fixed priority 48..79.
    Realtime { fifo: bool },
    /// `PRI_TIMESHARE`: priority from interactivity or CPU usage.
    Timeshare,
    /// `PRI_IDLE`: the idle queue.
    Idle,
}

/// Which run queue a thread is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Which {
    Realtime,
    Timeshare,
    Idle,
}

/// Per-thread state (`struct td_sched` and the priorities of `struct thread`).
#[derive(Clone, Copy, Debug)]
struct Thread {
    class: Class,
    hist: History,
    pct: PctCpu,
    /// `ts_rltick`: the hz tick it last stopped running.
    rltick: i64,
    /// `ts_slice`: stathz ticks used of the current slice.
    slice: u64,
    /// `td_slptick`: when it went to sleep.
    slptick: Option<i64>,
    /// `td_priority`: the priority it is queued and compared by.
    pri: u8,
    /// `td_user_pri`: the priority it returns to user mode with.
    user_pri: u8,
    /// Its place in a run queue.
    loc: Option<(Which, usize)>,
    /// `TDF_SLICEEND`.
    sliceend: bool,
    /// The CPU that queued it (the waker's or forker's), to tell local from remote wakeups.
    queued_from: CpuId,
}

impl Thread {
    fn new(class: Class) -> Thread {
        Thread {
            class,
            hist: History::default(),
            pct: PctCpu::default(),
            rltick: i64::MIN / 4,
            slice: 0,
            slptick: None,
            pri: PRI_MAX_TIMESHARE,
            user_pri: PRI_MAX_TIMESHARE,
            loc: None,
            sliceend: false,
            queued_from: CpuId(0),
        }
    }
}

/// Per-CPU run queues (`struct tdq`; its load, transferable count and lowpri live in [`Ule`]'s arrays).
#[derive(Clone, Debug, Default)]
struct Tdq {
    realtime: RunQ,
    timeshare: RunQ,
    idle: RunQ,
    /// `tdq_idx`: the calendar insertion index.
    idx: usize,
    /// `tdq_ridx`: the calendar removal index.
    ridx: usize,
    /// The last stathz tick handled on this CPU.
    last_stat: u64,
}

impl Tdq {
    fn rq(&mut self, w: Which) -> &mut RunQ {
        match w {
            Which::Realtime => &mut self.realtime,
            Which::Timeshare => &mut self.timeshare,
            Which::Idle => &mut self.idle,
        }
    }

    /// `tdq_choose`: realtime first, then the calendar from `ridx`, then idle.
    fn choose(&self) -> Option<TaskId> {
        if let Some(i) = self.realtime.first() {
            return self.realtime.head(i);
        }
        if let Some(i) = self.timeshare.first_from(self.ridx) {
            return self.timeshare.head(i);
        }
        self.idle.first().and_then(|i| self.idle.head(i))
    }
}

/// `sched_shouldpreempt(pri, cpri, remote)`.
fn should_preempt(pri: u8, cpri: u8, remote: bool, preempt_thresh: u8) -> bool {
    if pri >= cpri {
        return false;
    }
    if cpri >= PRI_MIN_IDLE {
        return true;
    }
    if preempt_thresh == 0 {
        return false;
    }
    if pri <= preempt_thresh {
        return true;
    }
    remote && pri <= PRI_MAX_INTERACT && cpri > PRI_MAX_INTERACT
}

/// The FreeBSD ULE scheduler.
pub struct Ule {
    p: UleParams,
    slice: u64,
    slice_min: u64,
    balance_interval: u64,
    tickincr: u64,
    slp_run_max: u64,
    slp_run_fork: u64,
    threads: Vec<Thread>,
    tdqs: Vec<Tdq>,
    /// `tdq_load` per CPU.
    load: Vec<i64>,
    /// `tdq_transferable` per CPU.
    xfer: Vec<i64>,
    /// `tdq_lowpri` per CPU.
    lowpri: Vec<u8>,
    groups: Groups,
    /// Per-CPU `randomval` for the load searches.
    randomval: Vec<u32>,
    /// State of the kernel's `random()` (Park-Miller), for the balancer period.
    randseed: u64,
    /// `balance_ticks`: stathz ticks of CPU 0 until the next balancer pass.
    balance_ticks: u64,
    balance_due: bool,
    /// Stathz ticks one engine tick may cover.
    stat_per_tick: u64,
    /// Moves planned in the current balancing call, undone before the engine applies them.
    planned: Vec<(CpuId, CpuId)>,
    nr_examined: u64,
    nr_balance_runs: u64,
    nr_balance_moved: u64,
    nr_idle_steals: u64,
    nr_slice_ends: u64,
}

impl Ule {
    /// A ULE scheduler with the given tunables.
    pub fn new(p: UleParams) -> Ule {
        let slice = p.slice.unwrap_or((p.stathz / 10).max(1));
        Ule {
            slice,
            slice_min: slice / SLICE_MIN_DIVISOR as u64,
            balance_interval: p.balance_interval.unwrap_or(p.stathz),
            tickincr: ((p.hz << TICK_SHIFT) / p.stathz).max(1),
            slp_run_max: slp_run_max(p.hz),
            slp_run_fork: slp_run_fork(p.hz),
            p,
            threads: Vec::new(),
            tdqs: Vec::new(),
            load: Vec::new(),
            xfer: Vec::new(),
            lowpri: Vec::new(),
            groups: Groups::build(&schedlab_core::Topology::flat(1)),
            randomval: Vec::new(),
            randseed: 1,
            balance_ticks: 0,
            balance_due: false,
            stat_per_tick: 1,
            planned: Vec::new(),
            nr_examined: 0,
            nr_balance_runs: 0,
            nr_balance_moved: 0,
            nr_idle_steals: 0,
            nr_slice_ends: 0,
        }
    }

    /// `t`'s interactivity score now.
    pub fn score_of(&self, t: TaskId) -> u32 {
        interact_score(self.threads[t.idx()].hist, self.p.interact as u32)
    }

    /// `t`'s run/sleep history.
    pub fn history_of(&self, t: TaskId) -> History {
        self.threads[t.idx()].hist
    }

    /// `t`'s current priority (`td_priority`, FreeBSD scale).
    pub fn priority_of(&self, t: TaskId) -> u8 {
        self.threads[t.idx()].pri
    }

    /// `tdq_load` of `cpu`.
    pub fn load_of(&self, cpu: CpuId) -> i64 {
        self.load[cpu.idx()]
    }

    /// The slice of a CPU with `nr` threads, in stathz ticks.
    pub fn slice_for_load(&self, nr: u32) -> u64 {
        tdq_slice(nr, self.slice as u32) as u64
    }

    /// The hz tick count at `now` (FreeBSD's `ticks`).
    fn ticks(&self, now: Ns) -> i64 {
        mul_div(now, self.p.hz, NSEC_PER_SEC) as i64
    }

    /// Kernel `random()`: the Park-Miller generator of sys/libkern/random.c.
    fn random(&mut self) -> u64 {
        let x = (self.randseed % 0x7fff_fffe) + 1;
        self.randseed = (16807 * x) % 0x7fff_ffff;
        self.randseed
    }

    /// `sched_balance`'s re-arm: `interval / 2 + random() % interval` stathz ticks.
    fn next_balance_ticks(&mut self) -> u64 {
        let i = self.balance_interval;
        (i / 2).max(1) + self.random() % i
    }

    fn loads(&self) -> Loads<'_> {
        Loads { load: &self.load, xfer: &self.xfer, lowpri: &self.lowpri }
    }

    fn class_of(ctx: &Ctx, t: TaskId) -> Class {
        match ctx.task(t).class {
            SchedClass::Fifo => Class::Realtime { fifo: true },
            SchedClass::Rr => Class::Realtime { fifo: false },
            SchedClass::Idle => Class::Idle,
            SchedClass::Normal | SchedClass::Batch | SchedClass::Iso => Class::Timeshare,
        }
    }

    /// The fixed priority of a non-timeshare thread: Linux RT priority 1..99 maps onto FreeBSD rtprio
    /// 31..0, i.e. priorities 79..48; the idle class is 224.
    fn fixed_pri(ctx: &Ctx, t: TaskId, class: Class) -> u8 {
        match class {
            Class::Realtime { .. } => realtime_pri(ctx.task(t).rt_priority),
            Class::Idle => PRI_MIN_IDLE,
            Class::Timeshare => unreachable!("timeshare priorities are computed"),
        }
    }

    /// `sched_priority`: recompute the user priority of a timeshare thread.
    fn sched_priority(&mut self, ctx: &Ctx, t: TaskId) {
        let th = &mut self.threads[t.idx()];
        if th.class == Class::Timeshare {
            th.user_pri = user_priority(
                th.hist,
                &th.pct,
                ctx.task(t).nice as i32,
                self.p.interact as u32,
                self.p.hz as i64,
            );
        }
    }

    /// `sched_userret`: back in user mode the thread runs at its user priority.
    fn userret(&mut self, t: TaskId) {
        let th = &mut self.threads[t.idx()];
        if th.class == Class::Timeshare {
            th.pri = th.user_pri;
        }
    }

    /// `tdq_setlowpri`: the better of the running thread's priority and the next queued one.
    fn set_lowpri(&mut self, cpu: CpuId, curr: Option<TaskId>) {
        let cpri = curr.map_or(PRI_MAX_IDLE, |c| self.threads[c.idx()].pri);
        self.lowpri[cpu.idx()] = match self.tdqs[cpu.idx()].choose() {
            Some(t) if self.threads[t.idx()].pri <= cpri => self.threads[t.idx()].pri,
            _ => cpri,
        };
    }

    /// `tdq_runq_add`.
    fn runq_add(&mut self, cpu: CpuId, t: TaskId, preempted: bool) {
        let pri = self.threads[t.idx()].pri;
        self.xfer[cpu.idx()] += 1;
        let tdq = &mut self.tdqs[cpu.idx()];
        let (which, idx) = if pri < PRI_MIN_BATCH {
            (Which::Realtime, pri as usize / RQ_PPQ)
        } else if pri <= PRI_MAX_TIMESHARE {
            let slot = if preempted {
                tdq.ridx
            } else {
                let off = RQ_NQS * (pri - PRI_MIN_BATCH) as usize / interact::PRI_BATCH_RANGE as usize;
                let mut s = (off + tdq.idx) % RQ_NQS;
                // Keep one slot between idx and ridx while the current slot drains.
                if tdq.ridx != tdq.idx && s == tdq.ridx {
                    s = (s + RQ_NQS - 1) % RQ_NQS;
                }
                s
            };
            (Which::Timeshare, slot)
        } else {
            (Which::Idle, pri as usize / RQ_PPQ)
        };
        tdq.rq(which).add(idx, t, preempted);
        self.threads[t.idx()].loc = Some((which, idx));
    }

    /// `tdq_runq_rem`.
    fn runq_rem(&mut self, cpu: CpuId, t: TaskId) {
        let (which, idx) = self.threads[t.idx()].loc.take().expect("thread in a run queue");
        self.xfer[cpu.idx()] -= 1;
        let tdq = &mut self.tdqs[cpu.idx()];
        let track = which == Which::Timeshare && tdq.idx != tdq.ridx;
        if tdq.rq(which).remove(idx, t) && track && tdq.ridx == idx {
            tdq.ridx = (idx + 1) % RQ_NQS;
        }
    }

    /// `tdq_add`.
    fn tdq_add(&mut self, cpu: CpuId, t: TaskId) {
        let pri = self.threads[t.idx()].pri;
        if pri < self.lowpri[cpu.idx()] {
            self.lowpri[cpu.idx()] = pri;
        }
        self.runq_add(cpu, t, false);
        self.load[cpu.idx()] += 1;
    }

    /// `SCHED_AFFINITY(ts, level)`: it ran within `level x affinity` hz ticks.
    fn affine(&self, t: TaskId, level: i64, now_ticks: i64) -> bool {
        self.threads[t.idx()].rltick > now_ticks - level * self.p.affinity as i64
    }

    /// `sched_pickcpu`, with `self_cpu` the CPU doing the wakeup or fork.
    fn pickcpu(&mut self, ctx: &Ctx, t: TaskId, self_cpu: CpuId) -> CpuId {
        let info = ctx.task(t);
        let mask = info.allowed;
        let ts_cpu =
            if mask.contains(info.cpu) { info.cpu } else { mask.first().expect("non-empty affinity") };
        let pri = self.threads[t.idx()].pri;
        let now = self.ticks(ctx.now);
        // The last CPU, if idle and the thread is still cache-affine to it (with SMT: the whole core idle).
        if mask.contains(info.cpu) && self.lowpri[ts_cpu.idx()] >= PRI_MIN_IDLE && self.affine(t, 2, now) {
            let leaf = &self.groups.groups[self.groups.leaf[ts_cpu.idx()]];
            if !leaf.thread || leaf.mask.iter().all(|c| self.lowpri[c.idx()] >= PRI_MIN_IDLE) {
                return ts_cpu;
            }
        }
        // The widest non-SMT group whose cache the thread is still affine to.
        let mut ccg = None;
        for g in self.groups.ancestors(ts_cpu) {
            let group = &self.groups.groups[g];
            if !group.thread && self.affine(t, group.level, now) {
                ccg = Some(g);
            }
        }
        let mut rnd = self.randomval[self_cpu.idx()];
        let all = ctx.topo.all();
        let q = LowQuery { mask, pri: -1, max_load: i64::MAX, prefer: ts_cpu };
        // Up to three `sched_lowest` searches, each reading every CPU of its group (`cpu_search`):
        // the affine cache group for a CPU that can run it now, the machine for one that can, the
        // machine for the least loaded (seed 002 sec. 6.3: "at worst, may scan all cores three
        // times"); the CPUs read are the decision's examined count.
        let mut cpu = None;
        let mut scanned = 0;
        if let Some(g) = ccg.filter(|&g| g != 0 && self.groups.groups[g].mask != all) {
            let idle_only = LowQuery { pri: pri.max(PRI_MAX_TIMESHARE) as i32, ..q };
            scanned += self.groups.groups[g].mask.count();
            cpu = self.groups.lowest(g, self.loads(), &idle_only, &mut rnd);
        }
        if cpu.is_none() {
            scanned += all.count();
            cpu = self.groups.lowest(0, self.loads(), &LowQuery { pri: pri as i32, ..q }, &mut rnd);
        }
        if cpu.is_none() {
            scanned += all.count();
            cpu = self.groups.lowest(0, self.loads(), &q, &mut rnd);
        }
        let mut cpu = cpu.unwrap_or(ts_cpu);
        self.randomval[self_cpu.idx()] = rnd;
        self.nr_examined += scanned as u64;
        let (s, c) = (self_cpu.idx(), cpu.idx());
        if mask.contains(self_cpu)
            && self.lowpri[s] > pri
            && self.lowpri[c] < PRI_MIN_IDLE
            && self.load[s] <= self.load[c] + 1
        {
            cpu = self_cpu;
        }
        cpu
    }

    /// `tdq_steal` + `tdq_move`, planned: picks a queued thread of `from` allowed on `to` and counts the
    /// move in the loads, to be applied by the engine.
    fn plan_move(&mut self, ctx: &Ctx, from: CpuId, to: CpuId, out: &mut Vec<Migration>) -> bool {
        let tdq = &self.tdqs[from.idx()];
        let ok = |t: TaskId| ctx.task(t).allowed.contains(to);
        let Some(t) = tdq
            .realtime
            .steal(ok)
            .or_else(|| tdq.timeshare.steal_from(tdq.ridx, ok))
            .or_else(|| tdq.idle.steal(ok))
        else {
            return false;
        };
        out.push(Migration { task: t, from, to });
        self.planned.push((from, to));
        self.load[from.idx()] -= 1;
        self.xfer[from.idx()] -= 1;
        self.load[to.idx()] += 1;
        true
    }

    /// Undoes the load changes of planned moves (the engine's dequeue/enqueue make them for real).
    fn unplan(&mut self) {
        for (from, to) in std::mem::take(&mut self.planned) {
            self.load[from.idx()] += 1;
            self.xfer[from.idx()] += 1;
            self.load[to.idx()] -= 1;
        }
    }

    /// `sched_balance_group(cpu_top)`, run by CPU 0.
    fn balance_group(&mut self, ctx: &Ctx, out: &mut Vec<Migration>) {
        let mut rnd = self.randomval[0];
        let mut hmask: CpuSet = ctx.topo.all();
        'high: while let Some(high) = self.groups.highest(0, self.loads(), hmask, 1, &mut rnd) {
            hmask.remove(high);
            let mut lmask = hmask;
            if lmask.is_empty() {
                break;
            }
            let mut anylow = true;
            loop {
                let q = LowQuery { mask: lmask, pri: -1, max_load: self.load[high.idx()] - 1, prefer: high };
                let Some(low) = self.groups.lowest(0, self.loads(), &q, &mut rnd) else {
                    if anylow {
                        break 'high;
                    }
                    continue 'high;
                };
                // sched_balance_pair.
                let (h, l) = (high.idx(), low.idx());
                if self.xfer[h] != 0 && self.load[h] > self.load[l] && self.plan_move(ctx, high, low, out) {
                    self.nr_balance_moved += 1;
                    hmask.remove(low);
                    continue 'high;
                }
                lmask.remove(low);
                anylow = false;
            }
        }
        self.nr_examined += 2 * ctx.nr_cpus() as u64;
        self.randomval[0] = rnd;
    }

    /// `tdq_idled`: an idle CPU steals one thread, looking in ever wider groups.
    fn idled(&mut self, ctx: &Ctx, cpu: CpuId, out: &mut Vec<Migration>) {
        if !self.p.steal_idle {
            return;
        }
        let mut mask = ctx.topo.all();
        mask.remove(cpu);
        let mut rnd = self.randomval[cpu.idx()];
        let chain: Vec<usize> = self.groups.ancestors(cpu).collect();
        'groups: for g in chain {
            let thresh = if self.groups.groups[g].thread { 1 } else { self.p.steal_thresh as i64 };
            while let Some(c) = self.groups.highest(g, self.loads(), mask, thresh, &mut rnd) {
                self.nr_examined += self.groups.groups[g].mask.count() as u64;
                mask.remove(c);
                if self.load[c.idx()] < thresh || self.xfer[c.idx()] == 0 {
                    continue;
                }
                // Something arrived meanwhile: nothing to steal. Else take one thread, or try the
                // next CPU if none of this one's may run here.
                if self.load[cpu.idx()] != 0 {
                    break 'groups;
                }
                if self.plan_move(ctx, c, cpu, out) {
                    self.nr_idle_steals += 1;
                    break 'groups;
                }
            }
        }
        self.randomval[cpu.idx()] = rnd;
    }

    /// `sched_clock`: one stathz tick on `cpu` while `curr` runs.
    fn sched_clock(&mut self, ctx: &Ctx, cpu: CpuId, curr: TaskId) {
        let tdq = &mut self.tdqs[cpu.idx()];
        if tdq.idx == tdq.ridx {
            tdq.idx = (tdq.idx + 1) % RQ_NQS;
            if tdq.timeshare.is_empty_at(tdq.ridx) {
                tdq.ridx = tdq.idx;
            }
        }
        let now = self.ticks(ctx.now);
        let hz = self.p.hz as i64;
        let th = &mut self.threads[curr.idx()];
        th.pct.update(now, true, hz);
        if th.class == (Class::Realtime { fifo: true }) {
            return;
        }
        if th.class == Class::Timeshare {
            th.hist.runtime += self.tickincr;
            interact_update(&mut th.hist, self.slp_run_max);
            self.sched_priority(ctx, curr);
            self.userret(curr);
            self.set_lowpri(cpu, Some(curr));
        }
        let slice = self.slice_for_load(self.load[cpu.idx()].max(0) as u32);
        let th = &mut self.threads[curr.idx()];
        th.slice += 1;
        if th.slice >= slice {
            th.slice = 0;
            th.sliceend = true;
            self.nr_slice_ends += 1;
        }
    }
}

impl SchedPolicy for Ule {
    fn name(&self) -> &str {
        "ule"
    }

    fn init(&mut self, ctx: &Ctx) {
        let n = ctx.nr_cpus();
        self.tdqs = vec![Tdq::default(); n];
        self.load = vec![0; n];
        self.xfer = vec![0; n];
        self.lowpri = vec![PRI_MAX_IDLE; n];
        self.groups = Groups::build(ctx.topo);
        self.randomval = (0..n as u64).map(|c| splitmix(ctx.seed ^ (c << 32)) as u32).collect();
        self.randseed = splitmix(ctx.seed.wrapping_add(0x51ed)) % 0x7fff_ffff;
        self.stat_per_tick =
            (ctx.tick_ns as u128 * self.p.stathz as u128).div_ceil(NSEC_PER_SEC as u128) as u64;
        // sched_setup_smp calls sched_balance() once, which arms the first period.
        self.balance_ticks = self.next_balance_ticks();
    }

    fn task_new(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        if self.threads.len() <= t.idx() {
            self.threads.resize(t.idx() + 1, Thread::new(Class::Timeshare));
        }
        let info = ctx.task(t);
        let class = Self::class_of(ctx, t);
        let now = self.ticks(ctx.now);
        let hz = self.p.hz as i64;
        let forker = info.cpu;
        let mut th = Thread::new(class);
        let parent = info.parent.filter(|p| ctx.task(*p).state != TaskState::Exited);
        match parent {
            Some(p) if ctx.task(p).tgid == info.tgid && self.p.new_thread == NewThread::Thread => {
                // A thread of the parent's process (thr_new -> thread_create): sched_fork_thread
                // alone. The child takes the parent's CPU estimate and its whole history as it is,
                // and the parent pays nothing; sched_fork's scaling and penalty are fork(2)'s.
                self.threads[p.idx()].pct.update(now, true, hz);
                let ps = self.threads[p.idx()];
                th.pct = ps.pct;
                th.hist = ps.hist;
                th.pri = ps.pri;
            }
            Some(p) => {
                // sched_fork: the child takes the parent's CPU estimate and history, scaled down.
                self.threads[p.idx()].pct.update(now, true, hz);
                let ps = self.threads[p.idx()];
                th.pct = ps.pct;
                th.hist = ps.hist;
                interact_fork(&mut th.hist, self.slp_run_fork);
                th.pri = ps.pri;
                // The parent pays a tick for forking.
                let pm = &mut self.threads[p.idx()];
                pm.hist.runtime += self.tickincr;
                interact_update(&mut pm.hist, self.slp_run_max);
                self.sched_priority(ctx, p);
            }
            None => {
                // Started by an idle shell: its sleep-only history, scaled to SLP_RUN_FORK.
                th.pct = PctCpu::starting(now);
                th.hist = History { runtime: 0, slptime: self.slp_run_fork };
            }
        }
        // "Attempt to quickly learn interactivity": the first slice is short.
        th.slice = self.slice_for_load(self.load[forker.idx()].max(0) as u32).saturating_sub(self.slice_min);
        th.queued_from = forker;
        self.threads[t.idx()] = th;
        self.sched_priority(ctx, t);
        let inherits = parent.is_some_and(|p| self.threads[p.idx()].class == Class::Timeshare);
        match class {
            // A forked timeshare child starts at its parent's priority (`td_base_pri`) until it first
            // returns to user mode; a task with no timeshare parent at its own user priority.
            Class::Timeshare if inherits => {}
            Class::Timeshare => self.userret(t),
            _ => self.threads[t.idx()].pri = Self::fixed_pri(ctx, t, class),
        }
        self.pickcpu(ctx, t, forker)
    }

    fn select_cpu(&mut self, ctx: &Ctx, t: TaskId, wake: &WakeInfo) -> CpuId {
        // sched_wakeup: credit the voluntary sleep, then sched_add recomputes the user priority.
        let now = self.ticks(ctx.now);
        let hz = self.p.hz as i64;
        let th = &mut self.threads[t.idx()];
        if let Some(s) = th.slptick.take() {
            if s != now {
                th.hist.slptime += ((now - s) as u64) << TICK_SHIFT;
                interact_update(&mut th.hist, self.slp_run_max);
                th.pct.update(now, false, hz);
            }
        }
        th.slice = 0;
        th.queued_from = wake.waker_cpu;
        self.sched_priority(ctx, t);
        let info = ctx.task(t);
        if self.p.wakeup == WakeupCpu::Last && info.allowed.contains(info.cpu) {
            return info.cpu;
        }
        self.pickcpu(ctx, t, wake.waker_cpu)
    }

    fn enqueue(&mut self, _ctx: &Ctx, cpu: CpuId, t: TaskId, _why: EnqueueReason) {
        self.tdq_add(cpu, t);
    }

    fn dequeue(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, _why: DequeueReason) {
        // sched_rem.
        self.runq_rem(cpu, t);
        self.load[cpu.idx()] -= 1;
        if self.threads[t.idx()].pri == self.lowpri[cpu.idx()] {
            self.set_lowpri(cpu, ctx.cpu(cpu).curr);
        }
    }

    fn pick_next(&mut self, ctx: &Ctx, cpu: CpuId) -> Option<Dispatch> {
        self.nr_examined += 1;
        let Some(t) = self.tdqs[cpu.idx()].choose() else {
            self.lowpri[cpu.idx()] = PRI_MAX_IDLE;
            return None;
        };
        self.runq_rem(cpu, t);
        let now = self.ticks(ctx.now);
        self.threads[t.idx()].pct.update(now, false, self.p.hz as i64);
        self.userret(t);
        self.set_lowpri(cpu, Some(t));
        Some(Dispatch::task(t))
    }

    fn put_prev(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: SwitchReason) {
        // sched_switch.
        let now = self.ticks(ctx.now);
        let th = &mut self.threads[t.idx()];
        th.pct.update(now, true, self.p.hz as i64);
        th.rltick = now;
        let preempted = !th.sliceend && why == SwitchReason::Preempted;
        th.sliceend = false;
        if why.still_runnable() {
            self.runq_add(cpu, t, preempted);
            return;
        }
        if why == SwitchReason::Blocked {
            // sched_sleep: remember when, and raise a sleeping timeshare thread to static_boost.
            th.slptick = Some(now);
            let boost = self.p.static_boost as u8;
            if th.class == Class::Timeshare && boost > 0 && th.pri > boost {
                th.pri = boost;
            }
        }
        self.load[cpu.idx()] -= 1;
    }

    fn tick(&mut self, ctx: &Ctx, cpu: CpuId, curr: TaskId) -> bool {
        let k = mul_div(ctx.now, self.p.stathz, NSEC_PER_SEC);
        let tdq = &mut self.tdqs[cpu.idx()];
        let n = k.saturating_sub(tdq.last_stat);
        tdq.last_stat = k;
        if cpu == CpuId(0) {
            for _ in 0..n {
                if self.balance_ticks > 0 {
                    self.balance_ticks -= 1;
                    if self.balance_ticks == 0 {
                        self.balance_due = true;
                        self.balance_ticks = self.next_balance_ticks();
                    }
                }
            }
        }
        for _ in 0..n.min(self.stat_per_tick) {
            self.sched_clock(ctx, cpu, curr);
        }
        self.threads[curr.idx()].sliceend
    }

    fn check_preempt(&mut self, _ctx: &Ctx, cpu: CpuId, curr: TaskId, woken: TaskId, kind: WakeKind) -> bool {
        let pri = self.threads[woken.idx()].pri;
        let cpri = self.threads[curr.idx()].pri;
        match kind {
            // IPI_PREEMPT after a balancer move: sched_preempt switches if something better is queued.
            WakeKind::Migration => self.lowpri[cpu.idx()] < cpri,
            // sched_setpreempt (local) or tdq_notify (remote).
            WakeKind::Fork | WakeKind::Wakeup => {
                let remote = self.threads[woken.idx()].queued_from != cpu;
                should_preempt(pri, cpri, remote, self.p.preempt_thresh as u8)
            }
        }
    }

    fn balance(&mut self, ctx: &Ctx, cpu: CpuId, kind: BalanceKind, out: &mut Vec<Migration>) {
        if ctx.nr_cpus() < 2 {
            return;
        }
        match kind {
            BalanceKind::Periodic => {
                if cpu == CpuId(0) && std::mem::take(&mut self.balance_due) && self.p.balance {
                    self.nr_balance_runs += 1;
                    self.balance_group(ctx, out);
                }
            }
            BalanceKind::NewlyIdle | BalanceKind::NohzIdle => {
                if self.load[cpu.idx()] == 0 {
                    self.idled(ctx, cpu, out);
                }
            }
        }
        self.unplan();
    }

    /// `sched_nice` (FreeBSD 10.4): `sched_priority` recomputes the user priority with the new
    /// nice (the interactivity score and the run-tick part are the thread's own history, kept),
    /// then `sched_prio` -> `sched_thread_priority` applies it: a queued thread whose priority
    /// improves is taken off its run queue and added again (`sched_rem`, `sched_add`) and may
    /// preempt; a queued thread whose priority worsens keeps its slot (the kernel only changes
    /// `td_priority`); the running thread's new priority only updates its CPU's `tdq_lowpri`; a
    /// sleeping thread loses any `static_boost`. Simplification: the re-add stays on the thread's
    /// CPU, where the kernel's `sched_add` would run `sched_pickcpu` again.
    /// `rtp_to_pri` (FreeBSD 10.4): `sched_class` stores the new class, `sched_user_prio` the
    /// class's user priority, and `sched_prio` applies it to the thread itself: a real-time or idle
    /// thread takes its fixed priority, a timeshare one the user priority `sched_priority` computes
    /// from its kept history (interactivity score, `%CPU`, nice). The thread is off its run queue
    /// here (`sched_rem`); `enqueue(.., Restore)` adds it again by that priority.
    fn set_class(&mut self, ctx: &Ctx, t: TaskId, _old_class: SchedClass, _old_rt_priority: u8) {
        let class = Self::class_of(ctx, t);
        self.threads[t.idx()].class = class;
        match class {
            Class::Timeshare => {
                self.sched_priority(ctx, t);
                self.userret(t);
            }
            _ => {
                let pri = Self::fixed_pri(ctx, t, class);
                let th = &mut self.threads[t.idx()];
                th.pri = pri;
                th.user_pri = pri;
            }
        }
    }

    fn set_nice(&mut self, ctx: &Ctx, t: TaskId, _old_nice: i8) -> Option<CpuId> {
        if self.threads[t.idx()].class != Class::Timeshare {
            return None;
        }
        self.sched_priority(ctx, t);
        let prio = self.threads[t.idx()].user_pri;
        let old = self.threads[t.idx()].pri;
        if prio == old {
            return None;
        }
        let cpu = ctx.task(t).cpu;
        match ctx.task(t).state {
            TaskState::Runnable if prio < old && self.threads[t.idx()].loc.is_some() => {
                self.dequeue(ctx, cpu, t, DequeueReason::Migrate);
                self.threads[t.idx()].pri = prio;
                self.tdq_add(cpu, t);
                let curr = ctx.cpu(cpu).curr?;
                let cpri = self.threads[curr.idx()].pri;
                should_preempt(prio, cpri, true, self.p.preempt_thresh as u8).then_some(cpu)
            }
            TaskState::Running => {
                self.threads[t.idx()].pri = prio;
                if prio < self.lowpri[cpu.idx()] {
                    self.lowpri[cpu.idx()] = prio;
                } else if self.lowpri[cpu.idx()] == old {
                    self.set_lowpri(cpu, Some(t));
                }
                None
            }
            _ => {
                self.threads[t.idx()].pri = prio;
                None
            }
        }
    }

    fn task_exit(&mut self, ctx: &Ctx, t: TaskId) {
        // sched_exit_thread: the parent is charged the child's run time (not its sleep).
        let Some(p) = ctx.task(t).parent else { return };
        if ctx.task(p).state == TaskState::Exited {
            return;
        }
        let run = self.threads[t.idx()].hist.runtime;
        let ps = &mut self.threads[p.idx()];
        ps.hist.runtime += run;
        interact_update(&mut ps.hist, self.slp_run_max);
        self.sched_priority(ctx, p);
    }

    fn take_examined(&mut self) -> u64 {
        std::mem::take(&mut self.nr_examined)
    }

    fn stats(&self) -> Vec<PolicyStat> {
        vec![
            PolicyStat {
                name: "nr_balance_runs",
                value: self.nr_balance_runs,
                help: "passes of the periodic balancer on CPU 0 (sched_balance)",
            },
            PolicyStat {
                name: "nr_balance_moved",
                value: self.nr_balance_moved,
                help: "threads moved by the periodic balancer",
            },
            PolicyStat {
                name: "nr_idle_steals",
                value: self.nr_idle_steals,
                help: "threads stolen by idle CPUs",
            },
            PolicyStat { name: "nr_slice_ends", value: self.nr_slice_ends, help: "slices that ran out" },
        ]
    }

    fn work_conservation(&self) -> WorkConservation {
        WorkConservation::PerCpu
    }

    fn nr_runnable(&self) -> Option<usize> {
        Some(self.load.iter().sum::<i64>() as usize)
    }

    fn trace_values(&self, t: TaskId, out: &mut Vec<(&'static str, i64)>) {
        if t.idx() < self.threads.len() {
            out.push(("ule interactivity score", self.score_of(t) as i64));
            out.push(("ule priority", self.threads[t.idx()].pri as i64));
        }
    }
}

#[cfg(test)]
mod tests;
