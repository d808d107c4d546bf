//! # FreeBSD 4BSD: the decay-usage scheduler ULE replaced
//!
//! Source: FreeBSD sys/kern/sched_4bsd.c (stable/10, FreeBSD 10.4, the release of this project's ULE
//! text; the algorithm is unchanged in 11.1, which seed 002 names as ULE's compile-time alternative),
//! sys/kern/kern_synch.c (`loadav`), sys/kern/kern_switch.c (run queues), sys/sys/priority.h;
//! McKusick, Neville-Neil and Watson, *The Design and Implementation of the FreeBSD Operating System*,
//! 2nd ed., sec. 4.4 describes the same design.
//!
//! One **global run queue** of 64 FIFO lists indexed by `priority / 4` (the best non-empty list
//! first, its head taken), plus a run queue per CPU for threads that may not run everywhere
//! (`TSF_AFFINITY`): a CPU takes the head of its own queue only when it is strictly better than the
//! global head. The running thread leaves the queue and goes back to the tail when it stops.
//!
//! * **Estimated CPU.** Every stathz tick (127 Hz) charges the running thread one unit of `estcpu`,
//!   capped at `ESTCPULIM` (`37 x INVERSE_ESTCPU_WEIGHT - 1`, where `INVERSE_ESTCPU_WEIGHT` is
//!   `8 x` the number of CPUs). Once a second `schedcpu` decays the `estcpu` of every thread that was
//!   awake during that second by `2 ld / (2 ld + 1)`, `ld` being the one-minute load average, so 90 % of
//!   the usage is forgotten in about `5 x ld` seconds; a thread asleep for more than a second stops
//!   being decayed there, and when it wakes `updatepri` decays it once for every second it slept
//!   (to zero if it slept longer than `5 x loadfactor`, a fixed-point comparison that in practice only
//!   fires at a load average of 0).
//! * **Priority.** A timeshare thread's priority is `PUSER (120) + estcpu / INVERSE_ESTCPU_WEIGHT +
//!   (nice + 20)`, clamped to 120..223; it is recomputed whenever the tick makes `estcpu` a multiple of
//!   `INVERSE_ESTCPU_WEIGHT`, at each `schedcpu` pass, and at a wakeup after more than a second of
//!   sleep. Real-time threads (Linux RT priority 1..99 as rtprio 31..0) sit at 48..79, idle-class
//!   threads at 255; neither has an `estcpu` priority.
//! * **Load average.** Every 5 s, `ld = ld x e^(-5/60) + nrun x (1 - e^(-5/60))` in 11-bit fixed
//!   point (`cexp[0]` = 1884 / 2048), `nrun` being the runnable threads, running ones included.
//! * **Round robin.** The slice is `stathz / 10` stathz ticks (12, 94.5 ms); when it runs out the
//!   thread is rescheduled and goes to the tail of its list, behind equal priorities. A wakeup gives a
//!   fresh slice; a forked thread starts with a slice of 1 tick and its parent's `estcpu`, and an
//!   exiting thread's `estcpu` is added to its parent's.
//! * **Wakeups** (`sched_add`): a thread that may run anywhere goes to the global queue; if the waking
//!   CPU is busy and another CPU is idle, the wakeup is forwarded to the idle CPUs (`forward_wakeup`,
//!   an IPI; here the lowest-numbered idle CPU takes it); otherwise the waking CPU's running thread is
//!   rescheduled when the woken thread's priority is strictly better (`maybe_resched`). A thread with
//!   a restricted affinity goes to the per-CPU queue `sched_pickcpu` chooses (its last CPU unless an
//!   allowed CPU has a shorter queue) and that CPU is kicked: woken if idle, rescheduled if it runs a
//!   worse priority. User threads never preempt in the kernel (`maybe_preempt` needs an interrupt-thread
//!   priority without `FULL_PREEMPTION`), so every preemption here waits for the AST, i.e. is immediate
//!   at this model's resolution, and the preempted thread goes to the tail.
//! * **No balancer.** The global queue is the balance; per-CPU queues are never rebalanced.
//!
//! Simplifications: the stathz clock is read at the engine's ticks (a busy CPU's tick charges the
//! stathz ticks that fell within its tick period); `schedcpu` and `loadav` run at the first engine tick
//! at or after their time, and passes missed while every CPU idled are caught up then (as if the system
//! had been idle, which it was); `loadav` runs every 5 s exactly, where FreeBSD jitters it by up to
//! one second either way. A woken thread keeps its kernel sleep priority (`sched_sleep`: PWAIT for
//! nanosleep and wait4, PRIBIO for pipes and disk buffers, none for umtx locks; the engine says what
//! it slept on) until it is picked, when it returns to user mode (`sched_userret`); priority lending
//! is not modelled (the engine's locks are user-space ones). A thread put back on the
//! global queue by a switch while another CPU idles is picked up at the next engine tick (the engine's
//! idle kick, [`BalanceKind::NohzIdle`]) instead of through `forward_wakeup`'s IPI. A nice change takes
//! effect at the thread's next priority recomputation, and a per-CPU-queued thread whose priority
//! changes stays on its CPU's queue (FreeBSD re-runs `sched_pickcpu`).

use crate::params::{parse_bool, parse_u64, ParamInfo, Params};
use crate::ule::interact::{PRI_MAX_IDLE, PRI_MAX_TIMESHARE, PRI_MIN_TIMESHARE};
use crate::ule::realtime_pri;
use crate::ule::runq::{RunQ, RQ_PPQ};
use schedlab_core::time::mul_div;
use schedlab_core::{
    BalanceKind, CpuId, Ctx, DequeueReason, Dispatch, EnqueueReason, Migration, Ns, PolicyStat, SchedClass,
    SchedPolicy, SwitchReason, TaskId, TaskState, WaitKind, WakeInfo, WakeKind, WorkConservation,
    NSEC_PER_SEC,
};

/// `FSHIFT`: bits of fraction in the load average's fixed point.
pub const FSHIFT: u32 = 11;
/// `FSCALE`: 1.0 in that fixed point.
pub const FSCALE: u64 = 1 << FSHIFT;
/// `cexp[0]`: `exp(-5/60)` in fixed point, the one-minute average's decay per 5 s sample.
pub const CEXP_1MIN: u64 = 1884;
/// Seconds between load-average samples.
pub const LOADAV_INTERVAL_NS: Ns = 5 * NSEC_PER_SEC;
/// `PUSER`: the best user priority.
pub const PUSER: u8 = PRI_MIN_TIMESHARE;
/// `NICE_WEIGHT`: priorities per nice level.
pub const NICE_WEIGHT: i32 = 1;
/// `PRIO_MIN`, `PRIO_MAX`: the nice range.
pub const PRIO_MIN: i32 = -20;
/// The largest nice value.
pub const PRIO_MAX: i32 = 20;
/// Passes of `schedcpu` caught up at most after an idle period (10 minutes); longer idle periods
/// count as 10 minutes of sleep.
const MAX_CATCH_UP_PASSES: u64 = 600;

/// `INVERSE_ESTCPU_WEIGHT` on an SMP kernel: `8 x smp_cpus` (8 on one CPU).
pub fn inverse_estcpu_weight(nr_cpus: usize) -> u32 {
    8 * nr_cpus.max(1) as u32
}

/// `ESTCPULIM(e)`: the cap on `estcpu`, `W x (NICE_WEIGHT x 40 - RQ_PPQ) + W - 1`.
pub fn estcpu_lim(e: u32, weight: u32) -> u32 {
    e.min(weight * (NICE_WEIGHT * (PRIO_MAX - PRIO_MIN) - RQ_PPQ as i32) as u32 + weight - 1)
}

/// `decay_cpu(loadfac, cpu)`: `loadfac x cpu / (loadfac + FSCALE)`.
pub fn decay_cpu(loadfac: u64, cpu: u32) -> u32 {
    (loadfac * cpu as u64 / (loadfac + FSCALE)) as u32
}

/// One `loadav` step of the one-minute average with `nrun` runnable threads.
pub fn loadav_step(ldavg: u64, nrun: u64) -> u64 {
    (CEXP_1MIN * ldavg + nrun * FSCALE * (FSCALE - CEXP_1MIN)) >> FSHIFT
}

/// `PRIBIO`: the sleep priority of pipe and disk-buffer waits (sys/sys/priority.h).
pub const PRIBIO: u8 = 92;
/// `PWAIT`: the sleep priority of `nanosleep` and `wait4`.
pub const PWAIT: u8 = 108;

/// The priority a timeshare thread sleeps at for a kind of wait (`sched_sleep`'s `pri`), from the
/// FreeBSD 10.4 sleep calls: `kern_nanosleep` `tsleep_sbt(.., PWAIT | PCATCH, "nanslp")`, `kern_wait`
/// `msleep(.., PWAIT | PCATCH, "wait")`, `pipe_read`/`pipe_write` `msleep(.., PRIBIO | PCATCH)`,
/// `bufwait` `bwait(bp, PRIBIO)`; `umtxq_sleep` (mutexes, condition variables, semaphores, barriers)
/// passes `PCATCH` alone, priority 0: no boost.
pub fn sleep_pri(wait: WaitKind) -> Option<u8> {
    match wait {
        WaitKind::Sleep | WaitKind::Children => Some(PWAIT),
        WaitKind::Pipe | WaitKind::Disk => Some(PRIBIO),
        WaitKind::Futex | WaitKind::Unknown => None,
    }
}

/// `resetpriority`'s user priority of a timeshare thread.
pub fn user_pri(estcpu: u32, nice: i8, weight: u32) -> u8 {
    let p = PUSER as i64 + (estcpu / weight) as i64 + (NICE_WEIGHT * (nice as i32 - PRIO_MIN)) as i64;
    p.clamp(PRI_MIN_TIMESHARE as i64, PRI_MAX_TIMESHARE as i64) as u8
}

/// 4BSD's tunables (`kern.sched` sysctls and the clock rate).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bsd4Params {
    /// Statistics clock rate, Hz (`stathz`; 127 on x86).
    pub stathz: u64,
    /// `kern.sched.slice`: the time slice in stathz ticks (default `stathz / 10`).
    pub slice: u64,
    /// `kern.sched.ipiwakeup.enabled`: forward wakeups to idle CPUs.
    pub forward_wakeup: bool,
}

impl Default for Bsd4Params {
    fn default() -> Self {
        Bsd4Params { stathz: 127, slice: 12, forward_wakeup: true }
    }
}

impl Params for Bsd4Params {
    fn info() -> &'static [ParamInfo] {
        &[
            ParamInfo { key: "stathz", default: "127", help: "statistics clock, Hz (10 to 10000)" },
            ParamInfo {
                key: "slice",
                default: "12",
                help: "time slice in stathz ticks (kern.sched.slice; stathz / 10, about 100 ms)",
            },
            ParamInfo {
                key: "forward_wakeup",
                default: "true",
                help:
                    "send a wakeup to an idle CPU when the waking one is busy (kern.sched.ipiwakeup.enabled)",
            },
        ]
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "stathz" => self.stathz = parse_u64(value, 10..=10_000)?,
            "slice" => self.slice = parse_u64(value, 1..=10_000)?,
            "forward_wakeup" => self.forward_wakeup = parse_bool(value)?,
            _ => unreachable!("checked by apply"),
        }
        Ok(())
    }
}

/// Where a thread is queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Queue {
    /// Not on a run queue (running, sleeping or gone).
    Off,
    /// The global run queue.
    Global,
    /// A CPU's own run queue.
    Cpu(CpuId),
}

/// `struct td_sched` and the thread fields 4BSD uses.
#[derive(Clone, Copy, Debug)]
struct Td {
    estcpu: u32,
    /// Whole seconds not running (`ts_slptime`), counted by `schedcpu`.
    slptime: u32,
    /// Stathz ticks left in the slice (`ts_slice`).
    slice: i64,
    /// `td_priority`.
    pri: u8,
    queue: Queue,
    /// `TDF_DIDRUN`: chosen since the last `schedcpu` pass.
    didrun: bool,
    alive: bool,
    /// `td_priority` is the kernel sleep priority it slept at (`sched_sleep`), kept until it
    /// returns to user mode (`sched_userret`).
    boosted: bool,
}

impl Default for Td {
    fn default() -> Self {
        Td {
            estcpu: 0,
            slptime: 0,
            slice: 1,
            pri: PUSER,
            queue: Queue::Off,
            didrun: false,
            alive: false,
            boosted: false,
        }
    }
}

/// The 4BSD scheduler.
pub struct Bsd4 {
    p: Bsd4Params,
    tds: Vec<Td>,
    global: RunQ,
    pcpu: Vec<RunQ>,
    /// `runq_length`: threads on each CPU's own queue.
    runq_length: Vec<u32>,
    /// `INVERSE_ESTCPU_WEIGHT` for this machine.
    weight: u32,
    /// `averunnable.ldavg[0]`, fixed point.
    ldavg: u64,
    next_loadav_ns: Ns,
    next_schedcpu_ns: Ns,
    tick_ns: Ns,
    /// `sched_tdcnt`: runnable threads, running ones included.
    nr_running: usize,
    nr_examined: u64,
    nr_schedcpu: u64,
    nr_slice_ends: u64,
    nr_forwarded: u64,
    nr_resched: u64,
}

impl Bsd4 {
    /// A new instance.
    pub fn new(p: Bsd4Params) -> Bsd4 {
        Bsd4 {
            p,
            tds: Vec::new(),
            global: RunQ::default(),
            pcpu: Vec::new(),
            runq_length: Vec::new(),
            weight: 8,
            ldavg: 0,
            next_loadav_ns: LOADAV_INTERVAL_NS,
            next_schedcpu_ns: NSEC_PER_SEC,
            tick_ns: 1_000_000,
            nr_running: 0,
            nr_examined: 0,
            nr_schedcpu: 0,
            nr_slice_ends: 0,
            nr_forwarded: 0,
            nr_resched: 0,
        }
    }

    /// A thread's `estcpu` (tests, traces).
    pub fn estcpu(&self, t: TaskId) -> u32 {
        self.tds[t.idx()].estcpu
    }

    /// A thread's priority, `td_priority`.
    pub fn priority(&self, t: TaskId) -> u8 {
        self.tds[t.idx()].pri
    }

    /// The one-minute load average in fixed point (`FSCALE` = 1.0).
    pub fn ldavg(&self) -> u64 {
        self.ldavg
    }

    /// Sets a thread's `estcpu` (tests).
    pub fn set_estcpu(&mut self, t: TaskId, estcpu: u32) {
        self.tds[t.idx()].estcpu = estcpu;
    }

    /// Sets the load average (tests).
    pub fn set_ldavg(&mut self, ldavg: u64) {
        self.ldavg = ldavg;
    }

    fn is_timeshare(class: SchedClass) -> bool {
        matches!(class, SchedClass::Normal | SchedClass::Batch | SchedClass::Iso)
    }

    /// The priority `t` has in its class now: the user priority for timeshare threads.
    fn class_pri(&self, ctx: &Ctx, t: TaskId) -> u8 {
        let info = ctx.task(t);
        match info.class {
            SchedClass::Fifo | SchedClass::Rr => realtime_pri(info.rt_priority),
            SchedClass::Idle => PRI_MAX_IDLE,
            _ => user_pri(self.tds[t.idx()].estcpu, info.nice, self.weight),
        }
    }

    /// `resetpriority` + `resetpriority_thread`: a timeshare thread's priority from its `estcpu`,
    /// moving it to its new list (at the tail) if it is queued and the list changes.
    fn resetpriority(&mut self, ctx: &Ctx, t: TaskId) {
        // resetpriority_thread leaves a thread at a kernel (sleep) priority alone.
        if !Self::is_timeshare(ctx.task(t).class) || self.tds[t.idx()].boosted {
            return;
        }
        let new = user_pri(self.tds[t.idx()].estcpu, ctx.task(t).nice, self.weight);
        let td = self.tds[t.idx()];
        if td.pri == new {
            return;
        }
        let (old_idx, new_idx) = (td.pri as usize / RQ_PPQ, new as usize / RQ_PPQ);
        if old_idx != new_idx && td.queue != Queue::Off {
            self.rq_mut(td.queue).remove(old_idx, t);
            self.rq_mut(td.queue).add(new_idx, t, false);
        }
        self.tds[t.idx()].pri = new;
    }

    fn rq_mut(&mut self, q: Queue) -> &mut RunQ {
        match q {
            Queue::Cpu(c) => &mut self.pcpu[c.idx()],
            _ => &mut self.global,
        }
    }

    /// `updatepri`: decay for the seconds slept, as `schedcpu` would have.
    fn updatepri(&mut self, t: TaskId) {
        let loadfac = 2 * self.ldavg;
        let td = &mut self.tds[t.idx()];
        if td.slptime as u64 > 5 * loadfac {
            td.estcpu = 0;
        } else {
            let mut newcpu = td.estcpu;
            td.slptime -= 1; // it was incremented in schedcpu
            while newcpu != 0 && {
                td.slptime -= 1;
                td.slptime != 0
            } {
                newcpu = decay_cpu(loadfac, newcpu);
            }
            td.estcpu = newcpu;
        }
    }

    /// One `schedcpu` pass. `all_idle`: a pass caught up for a second in which every CPU idled, so no
    /// thread was queued or running (only `TDF_DIDRUN` from before can make one count as awake).
    fn schedcpu(&mut self, ctx: &Ctx, all_idle: bool) {
        self.nr_schedcpu += 1;
        let loadfac = 2 * self.ldavg;
        for i in 0..self.tds.len() {
            if !self.tds[i].alive {
                continue;
            }
            let t = TaskId(i as u32);
            let on_cpu = !all_idle && ctx.task(t).state == TaskState::Running;
            let on_runq = !all_idle && self.tds[i].queue != Queue::Off;
            let awake = on_runq || on_cpu || self.tds[i].didrun;
            if !on_cpu {
                self.tds[i].didrun = false;
            }
            if awake {
                if self.tds[i].slptime > 1 {
                    self.updatepri(t);
                }
                self.tds[i].slptime = 0;
            } else {
                self.tds[i].slptime += 1;
            }
            self.nr_examined += 1;
            if self.tds[i].slptime > 1 {
                continue;
            }
            self.tds[i].estcpu = decay_cpu(loadfac, self.tds[i].estcpu);
            self.resetpriority(ctx, t);
        }
    }

    /// The clocks that run off the engine's ticks: `loadav` every 5 s and `schedcpu` every second,
    /// with the passes missed while every CPU idled caught up first.
    fn periodic(&mut self, ctx: &Ctx) {
        while self.next_loadav_ns <= ctx.now {
            self.next_loadav_ns += LOADAV_INTERVAL_NS;
            // A sample due before the last tick period fell in a time when every CPU idled.
            let idle = self.next_loadav_ns <= ctx.now;
            self.ldavg = loadav_step(self.ldavg, if idle { 0 } else { self.nr_running as u64 });
        }
        if self.next_schedcpu_ns <= ctx.now {
            let due = (ctx.now - self.next_schedcpu_ns) / NSEC_PER_SEC + 1;
            let missed = (due - 1).min(MAX_CATCH_UP_PASSES);
            for _ in 0..missed {
                self.schedcpu(ctx, true);
            }
            self.schedcpu(ctx, false);
            self.next_schedcpu_ns += due * NSEC_PER_SEC;
        }
    }

    /// Stathz ticks whose time fell within the tick period ending at `now`.
    fn stathz_ticks(&self, now: Ns) -> u64 {
        let at = |t: Ns| mul_div(t, self.p.stathz, NSEC_PER_SEC);
        at(now) - at(now.saturating_sub(self.tick_ns))
    }

    /// `sched_add`'s queue choice: the global queue unless the thread may not run everywhere.
    fn queue_for(ctx: &Ctx, t: TaskId, cpu: CpuId) -> Queue {
        if ctx.task(t).allowed.count() < ctx.nr_cpus() {
            Queue::Cpu(cpu)
        } else {
            Queue::Global
        }
    }

    /// `sched_pickcpu`: the last CPU if allowed, replaced by any allowed CPU with a shorter queue.
    fn pickcpu(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        let info = ctx.task(t);
        let mut best = info.allowed.contains(info.cpu).then_some(info.cpu);
        for c in info.allowed.iter() {
            self.nr_examined += 1;
            match best {
                None => best = Some(c),
                Some(b) if self.runq_length[c.idx()] < self.runq_length[b.idx()] => best = Some(c),
                _ => {}
            }
        }
        best.expect("non-empty affinity")
    }

    /// `sched_add`'s CPU for a thread becoming runnable from `waker_cpu`.
    fn place(&mut self, ctx: &Ctx, t: TaskId, waker_cpu: CpuId) -> CpuId {
        if ctx.task(t).allowed.count() < ctx.nr_cpus() {
            return self.pickcpu(ctx, t);
        }
        // forward_wakeup: the waking CPU is busy and another CPU idles.
        if self.p.forward_wakeup && !ctx.is_idle(waker_cpu) {
            let idle = (0..ctx.nr_cpus() as u32).map(CpuId).find(|&c| c != waker_cpu && ctx.is_idle(c));
            if let Some(c) = idle {
                self.nr_forwarded += 1;
                return c;
            }
        }
        waker_cpu
    }

    /// Queues `t` (not queued) at the tail of its list in `q`; a class change since its priority was
    /// set puts it at its new class's priority first.
    fn add(&mut self, ctx: &Ctx, t: TaskId, q: Queue) {
        let pri = self.tds[t.idx()].pri;
        let boosted = self.tds[t.idx()].boosted;
        if !boosted
            && (!Self::is_timeshare(ctx.task(t).class)
                || !(PRI_MIN_TIMESHARE..=PRI_MAX_TIMESHARE).contains(&pri))
        {
            self.tds[t.idx()].pri = self.class_pri(ctx, t);
        }
        let idx = self.tds[t.idx()].pri as usize / RQ_PPQ;
        self.tds[t.idx()].queue = q;
        if let Queue::Cpu(c) = q {
            self.runq_length[c.idx()] += 1;
        }
        self.rq_mut(q).add(idx, t, false);
    }

    fn remove(&mut self, t: TaskId) {
        let td = self.tds[t.idx()];
        if td.queue != Queue::Off {
            self.rq_mut(td.queue).remove(td.pri as usize / RQ_PPQ, t);
            self.tds[t.idx()].queue = Queue::Off;
            if let Queue::Cpu(c) = td.queue {
                self.runq_length[c.idx()] -= 1;
            }
        }
    }

    /// The head of the best list of `rq` that may run on `cpu`.
    fn best_of(rq: &RunQ, ctx: &Ctx, cpu: CpuId, examined: &mut u64) -> Option<TaskId> {
        rq.steal(|t| {
            *examined += 1;
            ctx.task(t).allowed.contains(cpu)
        })
    }
}

impl SchedPolicy for Bsd4 {
    fn name(&self) -> &str {
        "4bsd"
    }

    fn init(&mut self, ctx: &Ctx) {
        self.weight = inverse_estcpu_weight(ctx.nr_cpus());
        self.pcpu = vec![RunQ::default(); ctx.nr_cpus()];
        self.runq_length = vec![0; ctx.nr_cpus()];
        self.tick_ns = ctx.tick_ns.max(1);
    }

    fn task_new(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        if self.tds.len() <= t.idx() {
            self.tds.resize(t.idx() + 1, Td::default());
        }
        // sched_fork_thread: the parent's estcpu and priority, a slice of one tick. A workload task
        // without a parent starts as if forked from an idle shell (estcpu 0).
        let estcpu = ctx.task(t).parent.map_or(0, |p| self.tds[p.idx()].estcpu);
        self.tds[t.idx()] = Td { estcpu, alive: true, ..Td::default() };
        let parent_pri = ctx.task(t).parent.map(|p| self.tds[p.idx()].pri);
        let pri = match parent_pri {
            Some(pp)
                if Self::is_timeshare(ctx.task(t).class)
                    && (PRI_MIN_TIMESHARE..=PRI_MAX_TIMESHARE).contains(&pp) =>
            {
                pp
            }
            _ => self.class_pri(ctx, t),
        };
        self.tds[t.idx()].pri = pri;
        let from = ctx.task(t).cpu;
        self.place(ctx, t, from)
    }

    fn select_cpu(&mut self, ctx: &Ctx, t: TaskId, wake: &WakeInfo) -> CpuId {
        // sched_wakeup: catch up on the seconds slept, then a fresh slice.
        if self.tds[t.idx()].slptime > 1 {
            self.updatepri(t);
            self.resetpriority(ctx, t);
        }
        // sched_sleep: a timeshare thread slept at its wait channel's priority and keeps it until it
        // returns to user mode, so it queues (and is compared in maybe_resched) at that priority.
        if let Some(pri) = sleep_pri(wake.wait).filter(|_| Self::is_timeshare(ctx.task(t).class)) {
            self.tds[t.idx()].pri = pri;
            self.tds[t.idx()].boosted = true;
        }
        let td = &mut self.tds[t.idx()];
        td.slptime = 0;
        td.slice = self.p.slice as i64;
        self.place(ctx, t, wake.waker_cpu)
    }

    fn enqueue(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: EnqueueReason) {
        if !why.was_runnable() {
            self.nr_running += 1;
        }
        let q = Self::queue_for(ctx, t, cpu);
        if why == EnqueueReason::Migrated && q == Queue::Global && self.tds[t.idx()].queue == Queue::Global {
            return; // moved by the idle kick: it keeps its place in the global queue
        }
        self.remove(t);
        self.add(ctx, t, q);
    }

    fn dequeue(&mut self, ctx: &Ctx, _cpu: CpuId, t: TaskId, why: DequeueReason) {
        // A global-queue thread taken by an idle CPU keeps its place; the matching enqueue follows.
        if why == DequeueReason::Save
            || self.tds[t.idx()].queue != Queue::Global
            || ctx.task(t).allowed.count() < ctx.nr_cpus()
        {
            self.remove(t);
        }
    }

    fn pick_next(&mut self, ctx: &Ctx, cpu: CpuId) -> Option<Dispatch> {
        // sched_choose: the global head unless this CPU's own head is strictly better.
        let mut examined = 0;
        let g = Self::best_of(&self.global, ctx, cpu, &mut examined);
        let own = Self::best_of(&self.pcpu[cpu.idx()], ctx, cpu, &mut examined);
        self.nr_examined += examined;
        let pick = match (g, own) {
            (Some(g), Some(o)) if self.tds[o.idx()].pri < self.tds[g.idx()].pri => o,
            (Some(g), _) => g,
            (None, o) => o?,
        };
        self.remove(pick);
        self.tds[pick.idx()].didrun = true;
        // sched_userret: the thread returns to user mode at once (at this model's resolution) and
        // drops its sleep priority for its user priority.
        if std::mem::take(&mut self.tds[pick.idx()].boosted) {
            self.tds[pick.idx()].pri = self.class_pri(ctx, pick);
        }
        Some(Dispatch::task(pick))
    }

    fn put_prev(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: SwitchReason) {
        if !why.still_runnable() {
            self.nr_running -= 1;
            self.tds[t.idx()].slptime = 0; // sched_sleep
            return;
        }
        // sched_switch: back to the tail of its list (no SW_PREEMPT for a user thread).
        let q = Self::queue_for(ctx, t, cpu);
        self.add(ctx, t, q);
    }

    fn tick(&mut self, ctx: &Ctx, _cpu: CpuId, curr: TaskId) -> bool {
        self.periodic(ctx);
        let mut resched = false;
        for _ in 0..self.stathz_ticks(ctx.now) {
            // sched_clock.
            let td = &mut self.tds[curr.idx()];
            td.estcpu = estcpu_lim(td.estcpu + 1, self.weight);
            if td.estcpu.is_multiple_of(self.weight) {
                self.resetpriority(ctx, curr);
            }
            let td = &mut self.tds[curr.idx()];
            td.slice -= 1;
            if td.slice <= 0 {
                td.slice = self.p.slice as i64;
                self.nr_slice_ends += 1;
                resched = true;
            }
        }
        resched
    }

    fn check_preempt(
        &mut self,
        _ctx: &Ctx,
        _cpu: CpuId,
        curr: TaskId,
        woken: TaskId,
        _kind: WakeKind,
    ) -> bool {
        // maybe_resched / kick_other_cpu: strictly better priority.
        let r = self.tds[woken.idx()].pri < self.tds[curr.idx()].pri;
        self.nr_resched += r as u64;
        r
    }

    fn balance(&mut self, ctx: &Ctx, cpu: CpuId, kind: BalanceKind, out: &mut Vec<Migration>) {
        // The idle kick stands in for forward_wakeup after a switch requeued a thread (and, with
        // forwarding off, for the idle CPU's next clock interrupt). A thread whose CPU idles is
        // already being taken.
        if kind != BalanceKind::NohzIdle || !ctx.is_idle(cpu) {
            return;
        }
        let mut examined = 0;
        let first = self.global.steal(|t| {
            examined += 1;
            ctx.task(t).allowed.contains(cpu) && !ctx.is_idle(ctx.task(t).cpu)
        });
        if let Some(t) = first {
            out.push(Migration { task: t, from: ctx.task(t).cpu, to: cpu });
        }
        self.nr_examined += examined;
    }

    /// `sched_nice`: `resetpriority` + `resetpriority_thread` with the new nice; the thread's
    /// `estcpu` is kept. A queued thread whose list changes goes to the tail of its new one; one
    /// that now beats the thread running on its CPU reschedules it (`maybe_resched` from the
    /// re-add). Simplification: the kernel's `maybe_resched` compares with the thread that called
    /// `setpriority`, which the model does not have; a running thread's own renice never
    /// reschedules (its priority equals the caller's).
    /// `rtp_to_pri` (FreeBSD 10.4): `sched_class`, then `sched_user_prio` and, for the thread
    /// itself, `sched_prio` at the new user priority: the thread takes its new class's priority
    /// (`realtime_pri`, `PRI_MAX_IDLE`, or the timeshare one from its `estcpu`, which is kept) and
    /// any sleep boost ends. It is off its queue here; `add` files it by that priority.
    fn set_class(&mut self, ctx: &Ctx, t: TaskId, _old_class: SchedClass, _old_rt_priority: u8) {
        let pri = self.class_pri(ctx, t);
        let td = &mut self.tds[t.idx()];
        td.pri = pri;
        td.boosted = false;
    }

    fn set_nice(&mut self, ctx: &Ctx, t: TaskId, _old_nice: i8) -> Option<CpuId> {
        self.resetpriority(ctx, t);
        if ctx.task(t).state != TaskState::Runnable {
            return None;
        }
        let cpu = ctx.task(t).cpu;
        let curr = ctx.cpu(cpu).curr?;
        (self.tds[t.idx()].pri < self.tds[curr.idx()].pri).then_some(cpu)
    }

    fn task_exit(&mut self, ctx: &Ctx, t: TaskId) {
        // sched_exit_thread: the parent is charged the child's estcpu.
        let c = self.tds[t.idx()].estcpu;
        self.tds[t.idx()].alive = false;
        if let Some(p) = ctx.task(t).parent {
            if self.tds[p.idx()].alive {
                self.tds[p.idx()].estcpu = estcpu_lim(self.tds[p.idx()].estcpu + c, self.weight);
            }
        }
    }

    fn take_examined(&mut self) -> u64 {
        std::mem::take(&mut self.nr_examined)
    }

    fn stats(&self) -> Vec<PolicyStat> {
        vec![
            PolicyStat {
                name: "nr_schedcpu",
                value: self.nr_schedcpu,
                help: "once-a-second estcpu decay passes",
            },
            PolicyStat { name: "nr_slice_ends", value: self.nr_slice_ends, help: "slices that ran out" },
            PolicyStat {
                name: "nr_forwarded_wakeups",
                value: self.nr_forwarded,
                help: "wakeups sent to an idle CPU because the waking CPU was busy",
            },
            PolicyStat {
                name: "nr_wakeup_resched",
                value: self.nr_resched,
                help: "wakeups of a better priority that rescheduled a busy CPU",
            },
            PolicyStat {
                name: "loadavg_milli",
                value: self.ldavg * 1000 / FSCALE,
                help: "one-minute load average x 1000 at the end",
            },
        ]
    }

    fn work_conservation(&self) -> WorkConservation {
        WorkConservation::PerCpu
    }

    fn nr_runnable(&self) -> Option<usize> {
        Some(self.nr_running)
    }

    fn trace_values(&self, t: TaskId, out: &mut Vec<(&'static str, i64)>) {
        if let Some(td) = self.tds.get(t.idx()) {
            out.push(("4bsd estcpu", td.estcpu as i64));
            out.push(("4bsd priority", td.pri as i64));
        }
    }
}

#[cfg(test)]
mod tests;
