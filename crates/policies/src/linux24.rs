//! # Linux 2.4: the goodness() scheduler
//!
//! Source: Linux 2.4.27 kernel/sched.c (`goodness`, `schedule`, `reschedule_idle`, `sys_sched_yield`),
//! kernel/timer.c (`update_process_times`), kernel/fork.c and kernel/exit.c (counter hand-over); seed 001
//! sec. 3 (Molloy & Honeyman) describes the same design.
//!
//! One run list for the whole machine, holding every runnable task, the running ones included. Each
//! task has a `counter`: the ticks left in its time slice. At every decision the scheduler walks the
//! whole list and computes `goodness()` for each task that may run on this CPU and is not running
//! elsewhere:
//!
//! * a SCHED_OTHER task with `counter == 0` has goodness 0 (runnable, but its slice is used up);
//!   otherwise `counter + 20 - nice`, plus 15 (`PROC_CHANGE_PENALTY`) on `p->processor` (the CPU it
//!   last ran on; a child that has not run yet has its parent's) and 1 if it shares the previous
//!   task's address space (`mm`);
//! * an RT task has `1000 + rt_priority`; a task that just yielded has -1.
//!
//! The greatest goodness wins, the first in list order on ties (strict `>`). When the best is 0 — every
//! candidate has used its slice — the counters of *all* tasks, sleepers included, are recalculated as
//! `counter / 2 + NICE_TO_TICKS(nice)` and the walk starts again: sleepers thus accumulate up to about
//! twice their slice, which is 2.4's interactivity bonus. The tick decrements the running task's
//! counter and asks for a reschedule at zero (never for SCHED_FIFO).
//!
//! A woken task goes to its last CPU if that CPU is idle, else to the allowed CPU that has been idle
//! longest, else to the CPU whose running task it beats by the most goodness (`reschedule_idle`);
//! on a uniprocessor it preempts when its goodness exceeds the current task's. There is no load
//! balancer: the single list is the balance.
//!
//! The decision walks the whole list, so the tasks it examines grow with the number of runnable tasks;
//! the cost model charges that (seed 001's point).
//!
//! `kernel=2.3.99` ([`Kernel::V2_3_99`]) is seed 001's own baseline, 2.3.99-pre4: `p->priority` (set
//! from nice by `sys_setpriority`, 20 ticks at HZ 100 for nice 0) is the slice and the static part of
//! `goodness()`; `schedule()` looks at the previous task first and scores it 0 if it yielded
//! (`prev_goodness`), so a yield with no other candidate recalculates every counter; new and woken
//! tasks join the head of the list; `reschedule_idle` prefers the highest-numbered idle CPU and lets a
//! task with a short average slice (`avg_slice < cacheflush_time`) preempt any CPU.

use schedlab_core::{
    CpuId, CpuSet, Ctx, DequeueReason, Dispatch, EnqueueReason, Ns, PolicyStat, SchedClass, SchedPolicy,
    SwitchReason, TaskId, WakeInfo, WakeKind, WorkConservation,
};

use crate::params::{ParamInfo, Params};

/// `PROC_CHANGE_PENALTY` on i386: the goodness bonus for the CPU a task last ran on.
pub const PROC_CHANGE_PENALTY: i32 = 15;

/// `TICK_SCALE(x)`: slices are expressed for HZ=100 and scaled to the real HZ.
pub fn tick_scale(x: i32, hz: u64) -> i32 {
    match hz {
        0..200 => x >> 2,
        200..400 => x >> 1,
        400..800 => x,
        800..1600 => x << 1,
        _ => x << 2,
    }
}

/// `NICE_TO_TICKS(nice)`: the slice of a task, in ticks (HZ=100: nice -20 -> 11, 0 -> 6, 19 -> 1).
pub fn nice_to_ticks(nice: i8, hz: u64) -> i32 {
    tick_scale(20 - nice as i32, hz) + 1
}

/// `MAX_COUNTER`: the cap on a counter returned by an exiting child.
pub fn max_counter(hz: u64) -> i32 {
    (20 * hz / 100) as i32
}

/// The kernel generation a 2.4-family policy follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kernel {
    /// Linux 2.4.27: slices from `NICE_TO_TICKS(nice)`, `20 - nice` in `goodness()`, a yielded task
    /// scores -1, new and woken tasks join the tail of the run list.
    #[default]
    V2_4_27,
    /// Linux 2.3.99-pre4, seed 001's baseline ("all kernel modifications ... are against a
    /// 2.3.99-pre4 Linux kernel"): `p->priority` (1..40 ticks at HZ 100, `DEF_PRIORITY` = 20 for
    /// nice 0, set from nice by `sys_setpriority`) is both the slice and the static part of
    /// `goodness()`; `schedule()` looks at the previous task first, scoring it 0 if it yielded
    /// (`prev_goodness`), so a yield with no other candidate triggers a recalculation; new and woken
    /// tasks join the head of the run list; `reschedule_idle` is 2.3's.
    V2_3_99,
}

impl Kernel {
    /// Parses `2.4.27` or `2.3.99`.
    pub fn parse(value: &str) -> Result<Kernel, String> {
        match value.trim() {
            "2.4.27" | "2.4" => Ok(Kernel::V2_4_27),
            "2.3.99" | "2.3.99-pre4" => Ok(Kernel::V2_3_99),
            other => Err(format!("expected 2.4.27 or 2.3.99, got `{other}`")),
        }
    }
}

/// `DEF_PRIORITY` of 2.2/2.3 include/linux/sched.h: `20 * HZ / 100` ticks, "200 ms time slices".
pub fn def_priority(hz: u64) -> i32 {
    (20 * hz / 100) as i32
}

/// `p->priority` as 2.3.99's `sys_setpriority` sets it from a nice value: `|nice|` (at most 20) scaled
/// to `DEF_PRIORITY` with rounding, above `DEF_PRIORITY` for negative nice, below it (at least 1)
/// otherwise. HZ 100: nice -20 -> 40, -5 -> 25, 0 -> 20, 5 -> 15, 19 -> 1.
pub fn priority_2399(nice: i8, hz: u64) -> i32 {
    let def = def_priority(hz);
    let n = (nice as i32).abs().min(20);
    let p = (n * def + 10) / 20 + def;
    if nice >= 0 {
        (2 * def - p).max(1)
    } else {
        p
    }
}

/// The static part of `goodness()` for a SCHED_OTHER task: `20 - nice` (2.4.27) or `p->priority`.
pub fn static_goodness(kernel: Kernel, nice: i8, hz: u64) -> i32 {
    match kernel {
        Kernel::V2_4_27 => 20 - nice as i32,
        Kernel::V2_3_99 => priority_2399(nice, hz),
    }
}

/// A full slice in ticks: `NICE_TO_TICKS(nice)` (2.4.27) or `p->priority` (2.3.99); what the
/// recalculation adds and an RR task is refilled with.
pub fn slice_ticks(kernel: Kernel, nice: i8, hz: u64) -> i32 {
    match kernel {
        Kernel::V2_4_27 => nice_to_ticks(nice, hz),
        Kernel::V2_3_99 => priority_2399(nice, hz),
    }
}

/// Parameters of `linux24`: the kernel generation (default 2.4.27).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Linux24Params {
    /// The kernel generation.
    pub kernel: Kernel,
    /// 2.3.99's `cacheflush_time` (`smp_tune_scheduling`), ns: a woken task whose average slice is
    /// shorter may preempt any CPU, not only its last one.
    pub cacheflush_time_ns: u64,
}

/// `smp_tune_scheduling` (arch/i386/kernel/smpboot.c): `(cpu_khz >> 10) * (cachesize_kb << 10) / 350`
/// cycles at 350 MB/s, for seed 001's 4-way Pentium II Xeon taken as 400 MHz with 512 KB of L2 (the
/// seed names the machine, an IBM Netfinity 7000, not its clock or cache): 584,192 cycles = 1.46 ms.
pub const CACHEFLUSH_TIME_NS: u64 = 1_460_480;

impl Default for Linux24Params {
    fn default() -> Self {
        Linux24Params { kernel: Kernel::V2_4_27, cacheflush_time_ns: CACHEFLUSH_TIME_NS }
    }
}

/// The parameter table of the 2.4 family (`kernel`, `cacheflush_time_ns`).
pub(crate) fn params_info(default_kernel: &'static str) -> &'static [ParamInfo] {
    if default_kernel == "2.3.99" {
        &[
            ParamInfo {
                key: "kernel",
                default: "2.3.99",
                help: "kernel generation: 2.3.99 (seed 001's baseline: p->priority slices, prev_goodness, head of the run list) or 2.4.27",
            },
            ParamInfo {
                key: "cacheflush_time_ns",
                default: "1460480",
                help: "2.3.99 reschedule_idle: a woken task with a shorter average slice may preempt any CPU",
            },
        ]
    } else {
        &[
            ParamInfo {
                key: "kernel",
                default: "2.4.27",
                help: "kernel generation: 2.4.27 or 2.3.99 (seed 001's baseline: p->priority slices, prev_goodness, head of the run list)",
            },
            ParamInfo {
                key: "cacheflush_time_ns",
                default: "1460480",
                help: "2.3.99 reschedule_idle: a woken task with a shorter average slice may preempt any CPU",
            },
        ]
    }
}

/// Sets one 2.4-family parameter.
pub(crate) fn set_param(
    kernel: &mut Kernel,
    cacheflush: &mut u64,
    key: &str,
    value: &str,
) -> Result<(), String> {
    match key {
        "kernel" => *kernel = Kernel::parse(value)?,
        "cacheflush_time_ns" => *cacheflush = crate::params::parse_u64(value, 0..=1_000_000_000)?,
        _ => unreachable!("checked by apply"),
    }
    Ok(())
}

impl Params for Linux24Params {
    fn info() -> &'static [ParamInfo] {
        params_info("2.4.27")
    }
    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        set_param(&mut self.kernel, &mut self.cacheflush_time_ns, key, value)
    }
}

/// Per-task scheduling state shared by the 2.4-family policies.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TaskState24 {
    /// The kernel generation whose rules apply.
    pub kernel: Kernel,
    /// 2.3.99's `p->avg_slice`: the fading average of its runs, ns (`(this + avg) / 2` per switch).
    pub avg_slice: Ns,
    /// Ticks left in the slice.
    pub counter: i32,
    /// SCHED_YIELD bit.
    pub yielded: bool,
    /// Known to the policy and not exited.
    pub alive: bool,
    /// `p->processor`: the CPU it last ran on, or for a task that has not run yet its parent's
    /// (`do_fork` copies it); where the goodness bonus applies.
    pub processor: CpuId,
    /// Woken by a synchronous wakeup the waker's CPU may run: `try_to_wake_up` only queued it (no
    /// `reschedule_idle`, so no preemption and no idle CPU kicked).
    pub quiet_wakeup: bool,
}

impl Default for TaskState24 {
    fn default() -> Self {
        TaskState24 {
            kernel: Kernel::V2_4_27,
            avg_slice: 0,
            counter: 0,
            yielded: false,
            alive: false,
            processor: CpuId(0),
            quiet_wakeup: false,
        }
    }
}

impl TaskState24 {
    /// A new task's state: `counter` ticks, and the forking CPU as its `processor`.
    pub(crate) fn forked(ctx: &Ctx, t: TaskId, counter: i32, kernel: Kernel) -> TaskState24 {
        TaskState24 {
            kernel,
            avg_slice: 0,
            counter,
            yielded: false,
            alive: true,
            processor: ctx.task(t).cpu,
            quiet_wakeup: false,
        }
    }
}

/// `try_to_wake_up(p, synchronous)` (2.4): a synchronous wakeup (`wake_up_interruptible_sync`, as
/// pipes use) of a task allowed on the waker's CPU skips `reschedule_idle`: the task is only queued,
/// and the waker's CPU, about to schedule, finds it. Returns that CPU when the wakeup is such.
pub(crate) fn sync_wakeup_cpu(
    ctx: &Ctx,
    t: TaskId,
    wake: &WakeInfo,
    states: &mut [TaskState24],
) -> Option<CpuId> {
    let quiet = wake.sync && ctx.task(t).allowed.contains(wake.waker_cpu);
    states[t.idx()].quiet_wakeup = quiet;
    quiet.then_some(wake.waker_cpu)
}

/// `goodness(p, this_cpu, this_mm)`.
pub(crate) fn goodness(ctx: &Ctx, t: TaskId, st: &TaskState24, this_cpu: CpuId, this_mm: Option<u32>) -> i32 {
    // 2.4.27 scores a yielded task -1 here; 2.3.99 tests SCHED_YIELD only for the previous task, in
    // `prev_goodness`.
    if st.yielded && st.kernel == Kernel::V2_4_27 {
        return -1;
    }
    let info = ctx.task(t);
    if info.class.is_rt() {
        return 1000 + info.rt_priority as i32;
    }
    if st.counter == 0 {
        return 0;
    }
    let mut w = st.counter;
    // CONFIG_SMP: `p->processor == this_cpu`, also for a child that has not run yet.
    if ctx.nr_cpus() > 1 && st.processor == this_cpu {
        w += PROC_CHANGE_PENALTY;
    }
    if this_mm == Some(info.tgid) {
        w += 1;
    }
    w + static_goodness(st.kernel, info.nice, ctx.hz())
}

/// Whether `t` may be chosen by `cpu` (`can_schedule`): allowed there and not running elsewhere.
pub(crate) fn can_schedule(ctx: &Ctx, t: TaskId, cpu: CpuId) -> bool {
    let info = ctx.task(t);
    info.allowed.contains(cpu) && info.state != schedlab_core::TaskState::Running
}

/// The 2.4-family wakeup placement (`reschedule_idle`): the last CPU if idle; else the allowed CPU idle
/// longest; else the CPU whose current task the woken one beats by the most goodness; else the last CPU.
pub(crate) fn reschedule_idle(ctx: &Ctx, t: TaskId, states: &[TaskState24], examined: &mut u64) -> CpuId {
    reschedule_idle_in(ctx, t, ctx.task(t).allowed, states, examined)
}

/// [`reschedule_idle`] over the CPUs of `allowed` only (a non-empty subset of the task's affinity).
pub(crate) fn reschedule_idle_in(
    ctx: &Ctx,
    t: TaskId,
    allowed: CpuSet,
    states: &[TaskState24],
    examined: &mut u64,
) -> CpuId {
    let last = states[t.idx()].processor; // p->processor
    if allowed.contains(last) && ctx.is_idle(last) {
        return last;
    }
    let mut oldest: Option<(u64, CpuId)> = None;
    let mut best_prio: Option<(i32, CpuId)> = None;
    for c in allowed.iter() {
        *examined += 1;
        if ctx.is_idle(c) {
            let since = ctx.cpu(c).idle_since_ns;
            if oldest.is_none_or(|(s, _)| since < s) {
                oldest = Some((since, c));
            }
        } else if oldest.is_none() {
            if let Some(curr) = ctx.cpu(c).curr {
                let mm = Some(ctx.task(curr).tgid);
                let prio = goodness(ctx, t, &states[t.idx()], c, mm)
                    - goodness(ctx, curr, &states[curr.idx()], c, mm);
                if prio > best_prio.map_or(0, |b| b.0) {
                    best_prio = Some((prio, c));
                }
            }
        }
    }
    oldest.map(|o| o.1).or(best_prio.map(|b| b.1)).unwrap_or(if allowed.contains(last) {
        last
    } else {
        allowed.first().expect("non-empty affinity")
    })
}

/// `do_fork`'s counter: the child gets half the parent's remaining counter (rounded up), the parent
/// keeps the other half, and a running parent left with nothing is rescheduled (`resched` of its
/// CPU). A task with no parent starts with a full slice.
pub(crate) fn fork_counter(
    ctx: &Ctx,
    t: TaskId,
    states: &mut [TaskState24],
    resched: &mut [bool],
    kernel: Kernel,
) -> i32 {
    match ctx.task(t).parent {
        Some(p) => {
            let ps = &mut states[p.idx()];
            let child = (ps.counter + 1) >> 1;
            ps.counter >>= 1;
            if ps.counter == 0 && ctx.task(p).state == schedlab_core::TaskState::Running {
                resched[ctx.task(p).cpu.idx()] = true;
            }
            child
        }
        None => slice_ticks(kernel, ctx.task(t).nice, ctx.hz()),
    }
}

/// `update_process_times`: one tick off the running task's counter; a reschedule at zero (never for
/// SCHED_FIFO) or when one was pending for the CPU.
pub(crate) fn tick_counter(ctx: &Ctx, curr: TaskId, st: &mut TaskState24, pending: &mut bool) -> bool {
    st.counter -= 1;
    let mut resched = std::mem::take(pending);
    if st.counter <= 0 {
        st.counter = 0;
        resched |= ctx.task(curr).class != SchedClass::Fifo;
    }
    resched
}

/// `preemption_goodness(curr, woken) > 0`, or a reschedule pending for the CPU.
pub(crate) fn preempts(
    ctx: &Ctx,
    cpu: CpuId,
    curr: TaskId,
    woken: TaskId,
    states: &mut [TaskState24],
    pending: &mut bool,
) -> bool {
    if std::mem::take(pending) {
        return true;
    }
    if std::mem::take(&mut states[woken.idx()].quiet_wakeup) {
        return false;
    }
    let mm = Some(ctx.task(curr).tgid);
    goodness(ctx, woken, &states[woken.idx()], cpu, mm) > goodness(ctx, curr, &states[curr.idx()], cpu, mm)
}

/// `release_task`: the parent gets the exiting child's remaining counter back, capped.
pub(crate) fn exit_counter(ctx: &Ctx, t: TaskId, states: &mut [TaskState24], hz: u64) {
    let c = states[t.idx()].counter;
    states[t.idx()].alive = false;
    if let Some(p) = ctx.task(t).parent {
        if states[p.idx()].alive {
            let ps = &mut states[p.idx()];
            ps.counter = (ps.counter + c).min(max_counter(hz));
        }
    }
}

/// `reschedule_idle` of the task's kernel generation.
pub(crate) fn wake_cpu(
    ctx: &Ctx,
    t: TaskId,
    states: &[TaskState24],
    p: &Linux24Params,
    examined: &mut u64,
) -> CpuId {
    match p.kernel {
        Kernel::V2_4_27 => reschedule_idle(ctx, t, states, examined),
        Kernel::V2_3_99 => reschedule_idle_2399(ctx, t, states, p.cacheflush_time_ns, examined),
    }
}

/// 2.3.99's `reschedule_idle` (SMP): the task's last CPU if idle; else the idle CPU found first
/// scanning from the highest-numbered; else its last CPU if the task beats the task running there
/// (`preemption_goodness > 0`); else, for a task whose average slice is under `cacheflush_time` or an
/// RT task, the first CPU from the highest-numbered whose running task it beats. Otherwise it waits
/// in the run list for a CPU to call `schedule()` (returned: its last CPU, where it does not preempt).
/// CPUs outside the task's affinity are skipped (2.3.99 had no affinity masks).
pub(crate) fn reschedule_idle_2399(
    ctx: &Ctx,
    t: TaskId,
    states: &[TaskState24],
    cacheflush_time_ns: Ns,
    examined: &mut u64,
) -> CpuId {
    let allowed = ctx.task(t).allowed;
    let last = states[t.idx()].processor;
    let best = if allowed.contains(last) { last } else { allowed.first().expect("non-empty affinity") };
    if ctx.nr_cpus() == 1 || ctx.is_idle(best) {
        return best;
    }
    let beats = |c: CpuId| {
        ctx.cpu(c).curr.is_some_and(|curr| {
            let mm = Some(ctx.task(curr).tgid);
            goodness(ctx, t, &states[t.idx()], c, mm) - goodness(ctx, curr, &states[curr.idx()], c, mm) > 0
        })
    };
    let others = || (0..ctx.nr_cpus() as u32).rev().map(CpuId).filter(|&c| c != best && allowed.contains(c));
    for c in others() {
        *examined += 1;
        if ctx.is_idle(c) {
            return c;
        }
    }
    if beats(best) {
        return best;
    }
    let st = &states[t.idx()];
    if st.avg_slice < cacheflush_time_ns || ctx.task(t).class.is_rt() {
        for c in others() {
            *examined += 1;
            if beats(c) {
                return c;
            }
        }
    }
    best
}

/// 2.3.99's `avg_slice` bookkeeping in `schedule()`: at every switch, `this_slice` is the time since
/// the CPU's last switch (`last_schedule`), and the task switched away from (not the idle task)
/// averages it in: `avg_slice = (this_slice + avg_slice) / 2`.
#[derive(Clone, Debug, Default)]
pub(crate) struct SliceClock {
    last_schedule: Vec<Ns>,
    idle: Vec<bool>,
}

impl SliceClock {
    /// Every CPU idle since now.
    pub(crate) fn new(ctx: &Ctx) -> SliceClock {
        SliceClock { last_schedule: vec![ctx.now; ctx.nr_cpus()], idle: vec![true; ctx.nr_cpus()] }
    }

    /// The task `cpu` switches away from, given the one that ran last there: none if it was idle.
    pub(crate) fn from(&self, cpu: CpuId, last: Option<TaskId>) -> Option<TaskId> {
        if self.idle[cpu.idx()] {
            None
        } else {
            last
        }
    }

    /// `cpu` runs `next` (`None`: idle) after `from`: on a switch, `from` averages in its slice.
    pub(crate) fn switch(
        &mut self,
        cpu: CpuId,
        from: Option<TaskId>,
        next: Option<TaskId>,
        now: Ns,
        states: &mut [TaskState24],
    ) {
        self.idle[cpu.idx()] = next.is_none();
        if next == from {
            return;
        }
        let ran = now.saturating_sub(self.last_schedule[cpu.idx()]);
        self.last_schedule[cpu.idx()] = now;
        if let Some(p) = from {
            let st = &mut states[p.idx()];
            st.avg_slice = (ran + st.avg_slice) / 2;
        }
    }
}

/// Parameters (none: 2.4 has no tunables beyond HZ, which the machine sets).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NoParams;

impl Params for NoParams {
    fn info() -> &'static [ParamInfo] {
        &[]
    }
    fn set(&mut self, _key: &str, _value: &str) -> Result<(), String> {
        unreachable!("no parameters to set")
    }
}

/// The Linux 2.4 scheduler (or, with `kernel=2.3.99`, seed 001's 2.3.99-pre4 one).
pub struct Goodness {
    p: Linux24Params,
    /// Whether the task that ran last on each CPU is still runnable (`prev->state == TASK_RUNNING`
    /// when `schedule()` runs).
    prev_runnable: Vec<bool>,
    /// 2.3.99's `avg_slice` bookkeeping.
    clock: SliceClock,
    /// The run list, in list order (new and woken tasks at the tail).
    runqueue: Vec<TaskId>,
    states: Vec<TaskState24>,
    hz: u64,
    /// A reschedule requested outside a tick (fork halving the parent's counter to zero), per CPU.
    resched: Vec<bool>,
    /// The task that ran last on each CPU (its SCHED_YIELD bit is cleared after the next pick).
    prev: Vec<Option<TaskId>>,
    nr_examined: u64,
    nr_recalcs: u64,
    nr_picks: u64,
    nr_running: usize,
}

impl Goodness {
    /// A new instance.
    pub fn new(p: Linux24Params) -> Goodness {
        Goodness {
            p,
            prev_runnable: Vec::new(),
            clock: SliceClock::default(),
            runqueue: Vec::new(),
            states: Vec::new(),
            hz: 100,
            resched: Vec::new(),
            prev: Vec::new(),
            nr_examined: 0,
            nr_recalcs: 0,
            nr_picks: 0,
            nr_running: 0,
        }
    }

    /// A task's counter (tests).
    pub fn counter(&self, t: TaskId) -> i32 {
        self.states[t.idx()].counter
    }

    /// Recalculations so far.
    pub fn recalcs(&self) -> u64 {
        self.nr_recalcs
    }

    #[cfg(test)]
    pub(crate) fn states_for_test(&mut self, t: TaskId) -> &mut TaskState24 {
        &mut self.states[t.idx()]
    }

    fn remove(&mut self, t: TaskId) {
        if let Some(i) = self.runqueue.iter().position(|&x| x == t) {
            self.runqueue.remove(i);
        }
    }

    /// `reschedule_idle` of the kernel generation.
    fn wake_cpu(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        wake_cpu(ctx, t, &self.states, &self.p, &mut self.nr_examined)
    }

    /// 2.3.99-pre4's `schedule()`: the previous task first if still runnable, with `prev_goodness`
    /// (0 if it yielded, the bit cleared; else its goodness); then the run list in order, each task
    /// not running on a CPU (on SMP `has_cpu` excludes the previous task too; a uniprocessor looks
    /// at it again, now without its yield bit) replacing the choice only with a greater goodness.
    /// A best of exactly 0 recalculates every counter and starts again.
    fn schedule_2399(&mut self, ctx: &Ctx, cpu: CpuId) -> Option<Dispatch> {
        let c_ = cpu.idx();
        let prev = self.prev[c_].filter(|_| self.prev_runnable[c_]);
        let from = self.clock.from(cpu, self.prev[c_]);
        let smp = ctx.nr_cpus() > 1;
        let this_mm = self.prev[c_].map(|p| ctx.task(p).tgid);
        let mut recalculated = false;
        let next = loop {
            let (mut c, mut next) = (i32::MIN, None);
            if let Some(p) = prev.filter(|&p| ctx.task(p).allowed.contains(cpu)) {
                // prev_goodness: a yielded task scores 0 and loses its SCHED_YIELD bit.
                c = if std::mem::take(&mut self.states[p.idx()].yielded) {
                    0
                } else {
                    goodness(ctx, p, &self.states[p.idx()], cpu, this_mm)
                };
                next = Some(p);
            }
            for &t in &self.runqueue {
                self.nr_examined += 1;
                let is_prev = Some(t) == prev;
                if (smp && is_prev) || (!is_prev && !can_schedule(ctx, t, cpu)) {
                    continue;
                }
                let g = goodness(ctx, t, &self.states[t.idx()], cpu, this_mm);
                if g > c {
                    (c, next) = (g, Some(t));
                }
            }
            if c == 0 && !recalculated {
                self.nr_recalcs += 1;
                self.nr_examined += recalculate(ctx, &mut self.states, self.hz);
                recalculated = true;
                continue;
            }
            break next;
        };
        self.prev_runnable[c_] = false;
        self.clock.switch(cpu, from, next, ctx.now, &mut self.states);
        let t = next?;
        self.states[t.idx()].processor = cpu;
        Some(Dispatch::task(t))
    }
}

/// The recalculation loop: every live task, sleepers included.
pub(crate) fn recalculate(ctx: &Ctx, states: &mut [TaskState24], hz: u64) -> u64 {
    let mut n = 0;
    for (i, st) in states.iter_mut().enumerate() {
        if st.alive {
            st.counter = (st.counter >> 1) + slice_ticks(st.kernel, ctx.tasks[i].nice, hz);
            n += 1;
        }
    }
    n
}

impl SchedPolicy for Goodness {
    fn name(&self) -> &str {
        "linux24"
    }

    fn init(&mut self, ctx: &Ctx) {
        self.hz = ctx.hz();
        self.resched = vec![false; ctx.nr_cpus()];
        self.prev = vec![None; ctx.nr_cpus()];
        self.prev_runnable = vec![false; ctx.nr_cpus()];
        self.clock = SliceClock::new(ctx);
    }

    fn task_new(&mut self, ctx: &Ctx, t: TaskId) -> CpuId {
        if self.states.len() <= t.idx() {
            self.states.resize(t.idx() + 1, TaskState24::default());
        }
        let counter = fork_counter(ctx, t, &mut self.states, &mut self.resched, self.p.kernel);
        self.states[t.idx()] = TaskState24::forked(ctx, t, counter, self.p.kernel);
        self.wake_cpu(ctx, t)
    }

    fn select_cpu(&mut self, ctx: &Ctx, t: TaskId, wake: &WakeInfo) -> CpuId {
        match sync_wakeup_cpu(ctx, t, wake, &mut self.states) {
            Some(cpu) => cpu,
            None => self.wake_cpu(ctx, t),
        }
    }

    fn enqueue(&mut self, _ctx: &Ctx, _cpu: CpuId, t: TaskId, why: EnqueueReason) {
        if !why.was_runnable() {
            self.nr_running += 1;
        }
        match self.p.kernel {
            // setscheduler: `move_first_runqueue`, the head of the runqueue, in both kernels.
            _ if why == EnqueueReason::Restore => self.runqueue.insert(0, t),
            // add_to_runqueue: the head (2.3.99's list_add), the tail (2.4.27's list_add_tail).
            Kernel::V2_3_99 if why != EnqueueReason::Migrated => self.runqueue.insert(0, t),
            _ => self.runqueue.push(t),
        }
    }

    fn dequeue(&mut self, _ctx: &Ctx, _cpu: CpuId, t: TaskId, _why: DequeueReason) {
        self.remove(t);
    }

    fn pick_next(&mut self, ctx: &Ctx, cpu: CpuId) -> Option<Dispatch> {
        self.nr_picks += 1;
        if self.p.kernel == Kernel::V2_3_99 {
            return self.schedule_2399(ctx, cpu);
        }
        let prev = self.prev[cpu.idx()];
        let this_mm = prev.map(|p| ctx.task(p).tgid);
        let mut recalculated = false;
        let choice = loop {
            let mut best: Option<(i32, TaskId)> = None;
            for &t in &self.runqueue {
                self.nr_examined += 1;
                if !can_schedule(ctx, t, cpu) {
                    continue;
                }
                let g = goodness(ctx, t, &self.states[t.idx()], cpu, this_mm);
                if best.is_none_or(|(bg, _)| g > bg) {
                    best = Some((g, t));
                }
            }
            match best {
                Some((0, _)) if !recalculated => {
                    self.nr_recalcs += 1;
                    self.nr_examined += recalculate(ctx, &mut self.states, self.hz);
                    recalculated = true;
                }
                other => break other.map(|b| b.1),
            }
        };
        // The SCHED_YIELD bit of the previous task is cleared once a decision is made.
        if let Some(p) = prev {
            self.states[p.idx()].yielded = false;
        }
        let t = choice?;
        self.states[t.idx()].processor = cpu; // schedule(): next->processor = this_cpu
        Some(Dispatch::task(t))
    }

    fn put_prev(&mut self, ctx: &Ctx, cpu: CpuId, t: TaskId, why: SwitchReason) {
        self.prev[cpu.idx()] = Some(t);
        self.prev_runnable[cpu.idx()] = why.still_runnable();
        if !why.still_runnable() {
            self.remove(t);
            self.nr_running -= 1;
            return;
        }
        // schedule(): an exhausted SCHED_RR task is refilled and moved to the end.
        if ctx.task(t).class == SchedClass::Rr && self.states[t.idx()].counter == 0 {
            self.states[t.idx()].counter = slice_ticks(self.p.kernel, ctx.task(t).nice, self.hz);
            self.remove(t);
            self.runqueue.push(t);
        }
    }

    fn tick(&mut self, ctx: &Ctx, cpu: CpuId, curr: TaskId) -> bool {
        tick_counter(ctx, curr, &mut self.states[curr.idx()], &mut self.resched[cpu.idx()])
    }

    fn check_preempt(&mut self, ctx: &Ctx, cpu: CpuId, curr: TaskId, woken: TaskId, _kind: WakeKind) -> bool {
        preempts(ctx, cpu, curr, woken, &mut self.states, &mut self.resched[cpu.idx()])
    }

    fn yield_task(&mut self, ctx: &Ctx, _cpu: CpuId, t: TaskId) {
        if self.p.kernel == Kernel::V2_3_99 {
            // 2.3.99 sys_sched_yield: always, SCHED_YIELD for SCHED_OTHER, to the end of the list.
            if !ctx.task(t).class.is_rt() {
                self.states[t.idx()].yielded = true;
            }
            self.remove(t);
            self.runqueue.push(t);
            return;
        }
        // sys_sched_yield: only when other tasks wait (runnable ones not running on a CPU).
        let pending = self
            .runqueue
            .iter()
            .filter(|&&x| x != t && ctx.task(x).state != schedlab_core::TaskState::Running)
            .count();
        if pending > 0 {
            if ctx.task(t).class.is_normal() || ctx.task(t).class == SchedClass::Batch {
                self.states[t.idx()].yielded = true;
            }
            self.remove(t);
            self.runqueue.push(t); // move_last_runqueue
        }
    }

    fn task_exit(&mut self, ctx: &Ctx, t: TaskId) {
        exit_counter(ctx, t, &mut self.states, self.hz);
    }

    fn take_examined(&mut self) -> u64 {
        std::mem::take(&mut self.nr_examined)
    }

    fn stats(&self) -> Vec<PolicyStat> {
        vec![
            PolicyStat {
                name: "nr_recalcs",
                value: self.nr_recalcs,
                help: "counter recalculations of all tasks",
            },
            PolicyStat { name: "nr_picks", value: self.nr_picks, help: "scheduling decisions" },
        ]
    }

    fn work_conservation(&self) -> WorkConservation {
        WorkConservation::Global
    }

    fn nr_runnable(&self) -> Option<usize> {
        Some(self.nr_running)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testworld::TestWorld;

    #[test]
    fn slices_per_nice_level_at_hz_100() {
        // TICK_SCALE(20 - nice) + 1 with HZ=100 (>> 2): nice -20 -> 11, 0 -> 6, 19 -> 1.
        assert_eq!((nice_to_ticks(-20, 100), nice_to_ticks(0, 100), nice_to_ticks(19, 100)), (11, 6, 1));
        assert_eq!(nice_to_ticks(0, 1000), 41);
    }

    fn world(cpus: u32) -> (TestWorld, Goodness) {
        let mut w = TestWorld::new(cpus);
        w.tick_ns = 10_000_000; // HZ=100
        let mut g = Goodness::new(Linux24Params::default());
        g.init(&w.ctx());
        (w, g)
    }

    /// A 2.3.99-pre4 scheduler on `cpus` CPUs at HZ 100.
    fn world_2399(cpus: u32) -> (TestWorld, Goodness) {
        let mut w = TestWorld::new(cpus);
        w.tick_ns = 10_000_000; // HZ=100
        let mut g = Goodness::new(Linux24Params { kernel: Kernel::V2_3_99, ..Linux24Params::default() });
        g.init(&w.ctx());
        (w, g)
    }

    #[test]
    fn priorities_2399_follow_sys_setpriority() {
        // |nice| x DEF_PRIORITY (20 at HZ 100) / 20 rounded, + 20; for nice >= 0, 40 minus that.
        let p: Vec<i32> = [-20, -5, 0, 5, 19].iter().map(|&n| priority_2399(n, 100)).collect();
        assert_eq!(p, vec![40, 25, 20, 15, 1]);
        assert_eq!(priority_2399(0, 1000), 200, "DEF_PRIORITY = 20 x HZ / 100");
        assert_eq!(priority_2399(19, 1000), 10, "400 - ((19 x 200 + 10) / 20 + 200)");
        // goodness = counter + priority (+1 same mm, +15 last CPU on SMP); a task without a parent
        // starts with counter = priority.
        let (mut w, mut g) = world_2399(1);
        let a = w.add_task(5);
        w.start(&mut g, a);
        assert_eq!(g.counter(a), 15);
        assert_eq!(goodness(&w.ctx(), a, &g.states[a.idx()], CpuId(0), None), 30);
    }

    #[test]
    fn a_2399_yield_with_no_other_candidate_recalculates_on_smp_only() {
        // Seed 001 sec. 5: "if a task enters the scheduler because it is yielding the processor and no
        // other tasks can be scheduled, then the scheduler enters a loop to recalculate". On SMP the
        // previous task is skipped in the list walk (has_cpu), so prev_goodness's 0 is the best:
        // recalculation (counter 20 -> 20 / 2 + 20 = 30), then the walk again, now without the yield
        // bit, picks it. On a uniprocessor the walk sees the yielder again at full goodness.
        for (cpus, recalcs, counter) in [(2, 1, 30), (1, 0, 20)] {
            let (mut w, mut g) = world_2399(cpus);
            let a = w.add_task(0);
            w.start(&mut g, a);
            assert_eq!(w.pick(&mut g, CpuId(0)), Some(a));
            g.yield_task(&w.ctx(), CpuId(0), a);
            w.stop(&mut g, CpuId(0), SwitchReason::Yielded);
            assert_eq!(w.pick(&mut g, CpuId(0)), Some(a), "{cpus} CPUs");
            assert_eq!((g.recalcs(), g.counter(a)), (recalcs, counter), "{cpus} CPUs");
        }
        // 2.4.27 does not set the yield bit when nothing else waits: no recalculation.
        let (mut w, mut g) = world(2);
        let a = w.add_task(0);
        w.start(&mut g, a);
        w.pick(&mut g, CpuId(0));
        g.yield_task(&w.ctx(), CpuId(0), a);
        w.stop(&mut g, CpuId(0), SwitchReason::Yielded);
        assert_eq!((w.pick(&mut g, CpuId(0)), g.recalcs()), (Some(a), 0));
    }

    #[test]
    fn new_tasks_join_the_head_of_the_2399_run_list_and_the_tail_of_the_2427_one() {
        // Three equal tasks, none run yet: equal goodness, strict `>`, so the first in list order wins:
        // the last started in 2.3.99 (list_add), the first in 2.4.27 (list_add_tail).
        for (kernel, want) in [(Kernel::V2_3_99, 2), (Kernel::V2_4_27, 0)] {
            let mut w = TestWorld::new(1);
            w.tick_ns = 10_000_000;
            let mut g = Goodness::new(Linux24Params { kernel, ..Linux24Params::default() });
            g.init(&w.ctx());
            let tasks: Vec<TaskId> = (0..3).map(|_| w.add_task(0)).collect();
            for &t in &tasks {
                w.start(&mut g, t);
            }
            assert_eq!(w.pick(&mut g, CpuId(0)), Some(tasks[want]), "{kernel:?}");
        }
    }

    #[test]
    fn reschedule_idle_2399_takes_the_highest_numbered_idle_cpu() {
        // The wakee last ran on CPU 0, which is busy; CPUs 1 and 2 are idle (1 idle longer), CPU 3
        // busy. 2.3.99 scans from the highest CPU and takes the first idle one, CPU 2; 2.4.27 takes the
        // CPU idle longest, CPU 1.
        for (kernel, want) in [(Kernel::V2_3_99, 2), (Kernel::V2_4_27, 1)] {
            let mut w = TestWorld::new(4);
            w.tick_ns = 10_000_000;
            let mut g = Goodness::new(Linux24Params { kernel, ..Linux24Params::default() });
            g.init(&w.ctx());
            let busy: Vec<TaskId> = (0..2).map(|_| w.add_task(0)).collect();
            for (&t, cpu) in busy.iter().zip([0, 3]) {
                w.tasks[t.idx()].allowed = CpuSet::single(CpuId(cpu));
                w.start(&mut g, t);
                w.pick(&mut g, CpuId(cpu));
            }
            (w.cpus[1].idle_since_ns, w.cpus[2].idle_since_ns) = (0, 5_000_000);
            w.now = 10_000_000;
            let t = w.add_task(0);
            let mut info = WakeInfo {
                waker_cpu: CpuId(0),
                waker: None,
                sync: false,
                wait: schedlab_core::WaitKind::Sleep,
            };
            g.states.resize(t.idx() + 1, TaskState24::default());
            g.states[t.idx()] = TaskState24::forked(&w.ctx(), t, 6, kernel);
            w.tasks[t.idx()].state = schedlab_core::TaskState::Blocked;
            info.waker_cpu = CpuId(3);
            assert_eq!(g.select_cpu(&w.ctx(), t, &info), CpuId(want), "{kernel:?}");
        }
    }

    #[test]
    fn goodness_is_counter_plus_priority_with_bonuses() {
        let (mut w, mut g) = world(2);
        let a = w.add_task(0);
        let b = w.add_task(-5);
        w.start(&mut g, a);
        w.start(&mut g, b);
        let st = |g: &Goodness, t: TaskId| g.states[t.idx()];
        // b: counter 7 (nice -5 -> 25 >> 2 = 6, + 1), + 20 - (-5) = 32; a: 6 + 20 = 26.
        assert_eq!(goodness(&w.ctx(), b, &st(&g, b), CpuId(1), None), 32);
        assert_eq!(goodness(&w.ctx(), a, &st(&g, a), CpuId(1), None), 26);
        // Same mm: +1. On `p->processor`: +15, also for a child that has not run yet (do_fork copies
        // the parent's processor, CPU 0 here), wherever reschedule_idle sent the wakeup.
        let mm = Some(w.tasks[a.idx()].tgid);
        assert_eq!(goodness(&w.ctx(), a, &st(&g, a), CpuId(1), mm), 27);
        assert_eq!(goodness(&w.ctx(), a, &st(&g, a), CpuId(0), None), 26 + 15);
        g.states[a.idx()].processor = CpuId(1);
        assert_eq!(goodness(&w.ctx(), a, &st(&g, a), CpuId(1), None), 26 + 15);
        assert_eq!(w.pick(&mut g, CpuId(1)), Some(a), "the affinity bonus beats nice -5");
        // schedule() sets the chosen task's processor; b, never run, keeps its parent's CPU 0.
        assert_eq!((g.states[a.idx()].processor, g.states[b.idx()].processor), (CpuId(1), CpuId(0)));
    }

    /// `try_to_wake_up(p, synchronous)`: a sync wakeup (a pipe write) of a task allowed on the
    /// waker's CPU only queues it: no `reschedule_idle` (CPU 1 idles on) and no preemption of the
    /// waker, although the woken task's goodness is higher; without WF_SYNC `reschedule_idle` sends it
    /// to idle CPU 1, its `processor`.
    #[test]
    fn a_sync_wakeup_only_queues_the_task() {
        let (mut w, mut g) = world(2);
        let (waker, t) = (w.add_task(0), w.add_task(-20));
        w.start(&mut g, waker);
        w.start(&mut g, t);
        // Both run on CPU 0 (TestWorld counts them where reschedule_idle sent them).
        (w.cpus[0].nr_running, w.cpus[1].nr_running) = (2, 0);
        assert_eq!(w.pick(&mut g, CpuId(0)), Some(t));
        g.states[t.idx()].processor = CpuId(1);
        w.stop(&mut g, CpuId(0), SwitchReason::Blocked);
        assert_eq!(w.pick(&mut g, CpuId(0)), Some(waker));
        for (sync, cpu, preempts) in [(true, CpuId(0), false), (false, CpuId(1), false)] {
            let info = WakeInfo {
                waker_cpu: CpuId(0),
                waker: Some(waker),
                sync,
                wait: schedlab_core::WaitKind::Pipe,
            };
            w.tasks[t.idx()].state = schedlab_core::TaskState::Runnable;
            assert_eq!(g.select_cpu(&w.ctx(), t, &info), cpu, "sync {sync}");
            g.enqueue(&w.ctx(), cpu, t, EnqueueReason::Wakeup);
            if cpu == CpuId(0) {
                assert_eq!(g.check_preempt(&w.ctx(), cpu, waker, t, WakeKind::Wakeup), preempts);
            }
            // Without the sync rule the waker would be preempted: t's goodness is higher.
            let mm = Some(w.tasks[waker.idx()].tgid);
            assert!(
                goodness(&w.ctx(), t, &g.states[t.idx()], CpuId(0), mm)
                    > goodness(&w.ctx(), waker, &g.states[waker.idx()], CpuId(0), mm)
            );
            g.remove(t);
            g.nr_running -= 1;
            w.tasks[t.idx()].state = schedlab_core::TaskState::Blocked;
        }
    }

    #[test]
    fn counters_recalculate_for_sleepers_too_when_all_runnable_are_spent() {
        let (mut w, mut g) = world(1);
        let (s, a) = (w.add_task(0), w.add_task(0));
        w.start(&mut g, s);
        w.start(&mut g, a);
        assert_eq!(w.pick(&mut g, CpuId(0)), Some(s), "equal goodness: the first in list order");
        w.stop(&mut g, CpuId(0), SwitchReason::Blocked); // s sleeps with its full counter of 6
        assert_eq!(w.pick(&mut g, CpuId(0)), Some(a));
        let resched = w.advance(&mut g, 6 * 10_000_000);
        assert_eq!((g.counter(a), resched), (0, vec![CpuId(0)]));
        w.stop(&mut g, CpuId(0), SwitchReason::Preempted);
        assert_eq!(w.pick(&mut g, CpuId(0)), Some(a));
        // The only runnable task has goodness 0: recalculate everyone, a = 0/2 + 6, the sleeper
        // s = 6/2 + 6 = 9 (2.4's bonus for sleeping).
        assert_eq!(g.recalcs(), 1);
        assert_eq!((g.counter(a), g.counter(s)), (6, 9));
    }
}
