//! The task-program interpreter and the blocking objects (mutexes, condition variables, pipes,
//! barriers, devices).
//!
//! Operations that take no time (lock when free, unlock, send into room, signal, fork...) run back to
//! back at one instant; the interpreter stops at the first op that needs CPU time (compute, spin), that
//! blocks, yields or exits. Pipe and barrier hand-offs are direct: a waiter that is granted bytes from
//! a pipe or a barrier release has its op completed at wake time, so it never re-checks or re-blocks.
//! A mutex is not handed off: as glibc's, a woken waiter tries again and may block again
//! ([`SyncMutex`]).

use crate::sim::{RunError, Sim, Step};
use schedlab_core::{CpuId, Ns, TaskId, TaskState, WaitKind};
use schedlab_workload::{Op, PipeKind, PipeSpec};
use std::collections::VecDeque;

/// Most ops one task may execute at a single instant before the run is declared stuck (a loop with
/// no op that takes time).
const MAX_OPS_PER_INSTANT: u32 = 1_000_000;

/// A mutex as glibc's (`nptl/lowlevellock.c`, the futex word 0 free / 1 held / 2 held with
/// possible waiters): a free lock is taken at once, by whoever tries first (no hand-off: a woken
/// waiter retries and may find it taken again, as the unlocker or another task can barge in); a
/// held one marks the word contended and waits in FIFO order; an unlock of a contended word wakes
/// one waiter, an unlock of an uncontended one wakes nobody. A woken waiter and a condition waiter
/// taking its mutex again take it marked contended (`__lll_lock_wait`, `lll_cond_lock`).
#[derive(Clone, Debug, Default)]
pub(crate) struct SyncMutex {
    pub owner: Option<TaskId>,
    /// The futex word is 2: held, and someone waited since it was taken.
    pub contended: bool,
    pub waiters: VecDeque<TaskId>,
}

/// A condition variable as glibc's nptl keeps it since 2.25 (nptl/pthread_cond_wait.c,
/// pthread_cond_common.c): waiters join the second group, G2; a signal goes to a not yet signalled
/// waiter of the first group, G1, and when G1 has none left and G2 has waiters, the signaller
/// switches the groups (`__condvar_quiesce_and_switch_g1`). Before glibc 2.41 the switch first
/// waits until every signalled waiter of the old G1 has left its futex wait, that is has run
/// (`__g_refs`): a signaller can block until waiters it woke earlier get a CPU
/// (`CostModel::cond_quiesce`). Without that, the groups give FIFO order.
#[derive(Clone, Debug, Default)]
pub(crate) struct SyncCond {
    /// G1's waiters not yet signalled, oldest first, with their mutexes.
    pub g1: VecDeque<(TaskId, u32)>,
    /// Waiters that arrived since the last switch (G2).
    pub g2: VecDeque<(TaskId, u32)>,
    /// G1's waiters signalled out of their futex wait that have not run since (each holds a
    /// group reference).
    pub refs: u32,
    /// Signallers blocked until `refs` is 0.
    pub quiescers: Vec<TaskId>,
}

impl SyncCond {
    /// A signal or broadcast must wait for the old G1 to empty before switching groups: no
    /// unsignalled waiter in G1, some in G2, and signalled G1 waiters yet to run.
    pub fn must_quiesce(&self, quiesce: bool) -> bool {
        quiesce && self.g1.is_empty() && !self.g2.is_empty() && self.refs > 0
    }

    /// Waiters a signal or broadcast finds: any waiter not yet signalled.
    pub fn has_waiters(&self) -> bool {
        !(self.g1.is_empty() && self.g2.is_empty())
    }
}

/// A pipe or an AF_UNIX stream socket: bytes in flight and FIFO queues of blocked readers and
/// writers. A pipe counts bytes against its capacity, and a writer waits for room for its whole
/// write behind the writers already waiting. A socket charges each message its kernel buffer's
/// `truesize` against its send buffer ([`PipeKind::UnixStream`]): a writer sends while the charge
/// is below the capacity (waiting writers do not hold it back, as the kernel's do not), and the
/// writers that wait are woken only when the reader has brought the charge down to a quarter of
/// the capacity, then each sends if the charge is still below it.
#[derive(Clone, Debug)]
pub(crate) struct Pipe {
    pub kind: PipeKind,
    /// Bytes written and not yet read.
    pub used: u32,
    /// Capacity: a pipe's bytes, a socket's send buffer.
    pub capacity: u32,
    /// A socket's charge against its send buffer: the truesizes of its unread buffers.
    pub charged: u32,
    /// A socket's unread buffers, oldest first: (bytes left, truesize).
    skbs: VecDeque<(u32, u32)>,
    pub readers: VecDeque<(TaskId, u32)>,
    pub writers: VecDeque<(TaskId, u32)>,
    pub nr_sends: u64,
    pub bytes_sent: u64,
}

impl Pipe {
    pub fn new(spec: &PipeSpec) -> Pipe {
        Pipe {
            kind: spec.kind,
            used: 0,
            capacity: spec.capacity,
            charged: 0,
            skbs: VecDeque::new(),
            readers: VecDeque::new(),
            writers: VecDeque::new(),
            nr_sends: 0,
            bytes_sent: 0,
        }
    }

    /// Whether a writer of `bytes` arriving now sends without waiting.
    pub fn can_send(&self, bytes: u32) -> bool {
        match self.kind {
            PipeKind::Pipe => self.writers.is_empty() && self.used + bytes <= self.capacity,
            PipeKind::UnixStream(_) => self.charged < self.capacity,
        }
    }

    /// Whether a reader of `bytes` arriving now reads without waiting.
    pub fn can_recv(&self, bytes: u32) -> bool {
        self.readers.is_empty() && self.used >= bytes
    }

    /// Queues `bytes` of a writer (a socket: one buffer of them).
    fn put(&mut self, bytes: u32) {
        self.used += bytes;
        if let PipeKind::UnixStream(acc) = self.kind {
            let truesize = acc.truesize(bytes);
            self.charged += truesize;
            self.skbs.push_back((bytes, truesize));
        }
    }

    /// Takes `bytes` for a reader (a socket frees each buffer it empties).
    fn take(&mut self, bytes: u32) {
        self.used -= bytes;
        if matches!(self.kind, PipeKind::UnixStream(_)) {
            let mut left = bytes;
            while left > 0 {
                let Some(front) = self.skbs.front_mut() else { break };
                let k = left.min(front.0);
                front.0 -= k;
                left -= k;
                if front.0 == 0 {
                    self.charged -= front.1;
                    self.skbs.pop_front();
                }
            }
        }
    }

    /// The charge a read of `bytes` now frees: the truesizes of the buffers it empties.
    fn freed_by(&self, bytes: u32) -> u32 {
        let mut left = bytes;
        let mut freed = 0;
        for &(b, truesize) in &self.skbs {
            if left < b {
                break;
            }
            left -= b;
            freed += truesize;
        }
        freed
    }

    /// Whether the writers waiting may go now: a pipe's first when its write fits, a socket's
    /// when the charge is at most a quarter of the send buffer (`unix_writable`).
    fn writers_woken(&self) -> bool {
        match (self.kind, self.writers.front()) {
            (_, None) => false,
            (PipeKind::Pipe, Some(&(_, b))) => self.used + b <= self.capacity,
            (PipeKind::UnixStream(_), Some(_)) => self.charged * 4 <= self.capacity,
        }
    }

    /// Whether a read of `bytes` now wakes a waiting writer.
    pub fn recv_wakes_writer(&self, bytes: u32) -> bool {
        match self.kind {
            PipeKind::Pipe => !self.writers.is_empty(),
            PipeKind::UnixStream(_) => {
                !self.writers.is_empty() && (self.charged - self.freed_by(bytes)) * 4 <= self.capacity
            }
        }
    }
}

/// A cyclic barrier.
#[derive(Clone, Debug)]
pub(crate) struct Barrier {
    pub parties: u32,
    /// Arrived tasks that sleep until the release.
    pub arrived: Vec<TaskId>,
    /// Arrived tasks still busy-waiting (spin-then-sleep barriers).
    pub spinning: Vec<TaskId>,
    pub nr_releases: u64,
}

impl Barrier {
    pub fn new(parties: u32) -> Barrier {
        Barrier { parties, arrived: Vec::new(), spinning: Vec::new(), nr_releases: 0 }
    }
}

/// A counting semaphore with FIFO waiters.
#[derive(Clone, Debug, Default)]
pub(crate) struct Semaphore {
    pub count: u32,
    pub waiters: VecDeque<TaskId>,
}

/// A device serving one request at a time in FIFO order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Device {
    pub current: Option<TaskId>,
    pub queue: VecDeque<(TaskId, Ns)>,
    pub nr_requests: u64,
}

impl<'a> Sim<'a> {
    /// The kernel time `t` pays before doing `op` now (`CostModel`'s per-kind costs): by what the op
    /// will do in the current state (block, wake others, neither). Ops that always enter the kernel
    /// fall back to `syscall_ns`, ops that enter it only when contended or awaited to nothing.
    /// The kernel time of `t`'s exit: `CostModel::exit_process_ns` if it runs as a process of its
    /// own, else nothing.
    fn exit_cost(&self, t: TaskId) -> Ns {
        if self.w.tasks[self.tasks[t.idx()].template as usize].own_process() {
            self.machine.costs.exit_process_ns.unwrap_or(0)
        } else {
            0
        }
    }

    fn kernel_cost(&self, t: TaskId, op: &Op) -> Ns {
        let c = &self.machine.costs;
        let call = c.syscall_ns;
        let contended = |k: Option<Ns>| k.unwrap_or(0);
        match *op {
            Op::Sleep { .. } | Op::Timer { .. } => c.sleep_ns.unwrap_or(call),
            Op::Yield => c.yield_ns.unwrap_or(call),
            Op::Exit => self.exit_cost(t),
            Op::Fork(child) if self.w.tasks[child as usize].own_process() => {
                c.fork_process_ns.or(c.fork_ns).unwrap_or(call)
            }
            Op::Fork(_) => c.fork_ns.unwrap_or(call),
            Op::Io { .. }
            | Op::Exec(_)
            | Op::WaitChildren
            | Op::WaitChild
            | Op::SetCpus(_)
            | Op::Nice(_)
            | Op::SetClass { .. } => call,
            Op::Send { pipe, bytes } => {
                let p = &self.pipes[pipe as usize];
                if !p.can_send(bytes) {
                    c.pipe_wait_ns.unwrap_or(call)
                } else if !p.readers.is_empty() {
                    c.pipe_wake_ns.unwrap_or(call)
                } else {
                    call
                }
            }
            Op::Recv { pipe, bytes } => {
                let p = &self.pipes[pipe as usize];
                if !p.can_recv(bytes) {
                    c.pipe_wait_ns.unwrap_or(call)
                } else if p.recv_wakes_writer(bytes) {
                    c.pipe_wake_ns.unwrap_or(call)
                } else {
                    call
                }
            }
            Op::Lock(m) => match self.mutexes[m as usize].owner {
                Some(o) if o != t => contended(c.mutex_wait_ns),
                _ => 0,
            },
            // Charged after the mutex is free (the op itself): glibc frees the word, then wakes.
            Op::Unlock(_) => 0,
            // Charged in the op, after the mutex is released (`__pthread_cond_wait_common`).
            Op::CondWait { .. } => 0,
            Op::Suspend(_) => c.cond_wait_ns.unwrap_or(call),
            Op::Signal(cv) | Op::Broadcast(cv) if self.conds[cv as usize].must_quiesce(c.cond_quiesce) => {
                // Wakes what is left of G1 (a broadcast), then waits for the old G1 to empty.
                let left = if matches!(op, Op::Broadcast(_)) { self.conds[cv as usize].g1.len() } else { 0 };
                left as Ns * contended(c.cond_wake_ns) + contended(c.futex_wait_ns)
            }
            Op::Signal(cv) if self.conds[cv as usize].has_waiters() => contended(c.cond_wake_ns),
            Op::Broadcast(cv) => {
                let cond = &self.conds[cv as usize];
                (cond.g1.len() + cond.g2.len()) as Ns * contended(c.cond_wake_ns)
            }
            Op::Resume(e) => self.suspended[e as usize].len() as Ns * contended(c.cond_wake_ns),
            Op::SemWait(x) if self.semaphores[x as usize].count == 0 => contended(c.futex_wait_ns),
            Op::SemPost(x) if !self.semaphores[x as usize].waiters.is_empty() => contended(c.futex_wake_ns),
            Op::Barrier(b) | Op::BarrierSpin { barrier: b, .. } => {
                let bar = &self.barriers[b as usize];
                let others = (bar.arrived.len() + bar.spinning.len()) as u32;
                if others + 1 >= bar.parties {
                    // The last arrival releases the sleepers.
                    bar.arrived.len() as Ns * contended(c.cond_wake_ns)
                } else if matches!(op, Op::Barrier(_)) {
                    contended(c.cond_wait_ns)
                } else {
                    // A spinning arrival enters the kernel only if its spin runs out (not charged).
                    0
                }
            }
            _ => 0,
        }
    }

    /// What `t`, which has just blocked, waits for: the kind of the op it blocked in (every blocking
    /// op but a contended `Lock`, which is tried again, has advanced the program counter past
    /// itself).
    pub(crate) fn wait_kind(&self, t: TaskId) -> WaitKind {
        let tk = &self.tasks[t.idx()];
        if tk.lock_retry || tk.relock.is_some() || tk.quiesce {
            return WaitKind::Futex;
        }
        let ops = &self.w.tasks[tk.program as usize].program.ops;
        match tk.pc.checked_sub(1).and_then(|i| ops.get(i as usize)) {
            Some(Op::Sleep { .. } | Op::Timer { .. }) => WaitKind::Sleep,
            Some(Op::Send { .. } | Op::Recv { .. }) => WaitKind::Pipe,
            Some(Op::WaitChildren | Op::WaitChild) => WaitKind::Children,
            Some(Op::Io { .. }) => WaitKind::Disk,
            Some(
                Op::Lock(_)
                | Op::CondWait { .. }
                | Op::SemWait(_)
                | Op::Suspend(_)
                | Op::Barrier(_)
                | Op::BarrierSpin { .. },
            ) => WaitKind::Futex,
            _ => WaitKind::Unknown,
        }
    }

    fn fail_workload(&mut self, t: TaskId, msg: String) -> Step {
        if self.error.is_none() {
            self.error = Some(RunError::Workload {
                task: self.tasks[t.idx()].name.clone(),
                op: self.tasks[t.idx()].pc,
                now: self.now,
                msg,
            });
        }
        Step::Failed
    }

    /// Interprets `t`'s program (it runs on `cpu`) until an op needs time, blocks, yields or exits.
    pub(crate) fn advance(&mut self, t: TaskId, cpu: CpuId) -> Step {
        let w: &'a schedlab_workload::Workload = self.w;
        let mut ops = &w.tasks[self.tasks[t.idx()].program as usize].program.ops;
        {
            let tk = &mut self.tasks[t.idx()];
            if tk.syscall_left > 0 {
                return Step::Run;
            }
            if tk.in_op {
                if tk.op_left > 0 {
                    return Step::Run;
                }
                tk.in_op = false;
                if let Op::BarrierSpin { barrier, .. } = ops[tk.pc as usize] {
                    if !std::mem::take(&mut tk.barrier_released) {
                        // Spun for the whole budget without a release: go to sleep at the barrier.
                        let bar = &mut self.barriers[barrier as usize];
                        let i = bar.spinning.iter().position(|&x| x == t).expect("spinner is listed");
                        bar.spinning.swap_remove(i);
                        bar.arrived.push(t);
                        tk.pc += 1;
                        return Step::Block;
                    }
                }
                tk.pc += 1;
            }
        }
        // A wakeup that asks this CPU to reschedule takes effect when the call that made it returns
        // (the kernel checks TIF_NEED_RESCHED on the way back to user space), not at the task's next
        // op that needs time: the ops after it wait until the task runs again.
        let resched_at_entry = self.cpus[cpu.idx()].need_resched;
        let mut budget = MAX_OPS_PER_INSTANT;
        loop {
            if !resched_at_entry && self.cpus[cpu.idx()].need_resched {
                return Step::Run;
            }
            budget -= 1;
            if budget == 0 {
                return self.fail_workload(
                    t,
                    format!("ran {MAX_OPS_PER_INSTANT} ops without using time (a loop with no compute, sleep or blocking op?)"),
                );
            }
            if std::mem::take(&mut self.tasks[t.idx()].cond_sleep) && self.tasks[t.idx()].relock.is_none() {
                // Back from a condition wait's kernel entry, not signalled meanwhile: sleep.
                return Step::Block;
            }
            if let Some(cv) = self.tasks[t.idx()].cond_ref.take() {
                // A signalled waiter, back from its futex wait, drops its group reference
                // (`__condvar_dec_grefs`); the last one wakes the signallers waiting for the
                // group to empty, with a futex_wake.
                let cond = &mut self.conds[cv as usize];
                cond.refs -= 1;
                if cond.refs == 0 && !cond.quiescers.is_empty() {
                    for q in std::mem::take(&mut self.conds[cv as usize].quiescers) {
                        self.wake(q, cpu, Some(t), false);
                    }
                    let cost = self.machine.costs.futex_wake_ns.unwrap_or(0);
                    if cost > 0 {
                        self.tasks[t.idx()].syscall_left = cost;
                        return Step::Run;
                    }
                }
            }
            if let Some(m) = self.tasks[t.idx()].relock.take() {
                // A signalled condition waiter takes its mutex again before going on
                // (`lll_cond_lock`); if it is held, it waits for it. A failed try's kernel time is
                // not charged (the condition wait's cost covered one wait).
                if !self.retry_lock(t, m) {
                    self.tasks[t.idx()].relock = Some(m);
                    return Step::Block;
                }
            }
            let pc = self.tasks[t.idx()].pc;
            let Some(&op) = ops.get(pc as usize) else {
                // The end of the program: a process's exit runs its teardown first.
                let cost = self.exit_cost(t);
                let tk = &mut self.tasks[t.idx()];
                if cost > 0 && !std::mem::take(&mut tk.syscall_paid) {
                    tk.syscall_paid = true;
                    tk.syscall_left = cost;
                    return Step::Run;
                }
                return Step::Exit;
            };
            let now = self.now;
            if self.tasks[t.idx()].syscall_paid {
                // Back from the call's kernel time: do the op (in whatever state it finds).
                self.tasks[t.idx()].syscall_paid = false;
            } else {
                let cost = self.kernel_cost(t, &op);
                if cost > 0 {
                    // Run the call's kernel time first, then come back to do the op.
                    let tk = &mut self.tasks[t.idx()];
                    tk.syscall_paid = true;
                    tk.syscall_left = cost;
                    return Step::Run;
                }
            }
            match op {
                Op::Compute { work: d } | Op::Spin { time: d } => {
                    let n = self.rng.draw(d);
                    if n == 0 {
                        self.tasks[t.idx()].pc += 1;
                        continue;
                    }
                    let tk = &mut self.tasks[t.idx()];
                    tk.in_op = true;
                    tk.op_left = n;
                    return Step::Run;
                }
                Op::Sleep { time } => {
                    self.tasks[t.idx()].pc += 1;
                    let ns = self.rng.draw(time);
                    if ns == 0 {
                        continue;
                    }
                    return self.block_until_timer(t, now + ns);
                }
                Op::Timer { timer, period_ns, absolute } => {
                    self.tasks[t.idx()].pc += 1;
                    // The timer's last expiry: the run's shared copy, or this task's own.
                    let shared = w.timers[timer as usize].shared;
                    let last = if shared {
                        self.shared_timers[timer as usize]
                    } else {
                        self.tasks[t.idx()].timers.iter().find(|x| x.0 == timer).map(|x| x.1)
                    };
                    // The grid starts at the task's start (rt-app's t_first), not at its first use.
                    let anchor = self.tasks[t.idx()].started_at.unwrap_or(now);
                    let expiry = last.unwrap_or(anchor) + period_ns;
                    // Overrun: continue at once; relative mode restarts the grid from now.
                    let next = if expiry <= now && !absolute { now } else { expiry };
                    if shared {
                        self.shared_timers[timer as usize] = Some(next);
                    } else {
                        let own = &mut self.tasks[t.idx()].timers;
                        match own.iter_mut().find(|x| x.0 == timer) {
                            Some(x) => x.1 = next,
                            None => own.push((timer, next)),
                        }
                    }
                    if expiry <= now {
                        continue;
                    }
                    return self.block_until_timer(t, expiry);
                }
                Op::Yield => {
                    self.tasks[t.idx()].pc += 1;
                    self.tasks[t.idx()].nr_yields += 1;
                    return Step::Yield;
                }
                Op::SetClass { class, rt_priority } => {
                    self.tasks[t.idx()].pc += 1;
                    let v = &self.views[t.idx()];
                    // A change to what the task has already does nothing, as in Linux.
                    if (v.class, v.rt_priority) != (class, rt_priority) {
                        return Step::SetClass(class, rt_priority);
                    }
                }
                Op::Nice(nice) => {
                    self.tasks[t.idx()].pc += 1;
                    if let Some(c) = self.renice(t, nice) {
                        // resched_curr: on this CPU at once, on another through an IPI.
                        if self.cpu_views[c.idx()].curr.is_some() {
                            self.cpus[c.idx()].need_resched = true;
                        }
                        self.kick(c, cpu);
                    }
                }
                Op::Lock(m) => {
                    if self.mutexes[m as usize].owner == Some(t) {
                        return self.fail_workload(
                            t,
                            format!("locks mutex `{}` it already holds", self.w.mutexes[m as usize]),
                        );
                    }
                    // The first try is the fast path (0 -> 1); a woken waiter's retry marks it 2.
                    let retry = std::mem::take(&mut self.tasks[t.idx()].lock_retry);
                    let mx = &mut self.mutexes[m as usize];
                    if mx.owner.is_none() {
                        mx.owner = Some(t);
                        mx.contended |= retry;
                        self.tasks[t.idx()].pc += 1;
                    } else {
                        // Wait, and try the same op again when woken.
                        mx.contended = true;
                        mx.waiters.push_back(t);
                        self.tasks[t.idx()].lock_retry = true;
                        return Step::Block;
                    }
                }
                Op::Unlock(m) => {
                    if self.mutexes[m as usize].owner != Some(t) {
                        return self.fail_workload(
                            t,
                            format!("unlocks mutex `{}` it does not hold", self.w.mutexes[m as usize]),
                        );
                    }
                    // `lll_unlock`: the word is freed first, then a contended one's futex_wake
                    // runs, so the mutex is free while the unlocker pays for the wake.
                    let cost = self.unlock_cost(m);
                    self.tasks[t.idx()].pc += 1;
                    self.release_mutex(m, t, cpu);
                    if cost > 0 {
                        self.tasks[t.idx()].syscall_left = cost;
                        return Step::Run;
                    }
                }
                Op::CondWait { cond, mutex } => {
                    if self.mutexes[mutex as usize].owner != Some(t) {
                        return self.fail_workload(
                            t,
                            format!(
                                "waits on cond `{}` without holding mutex `{}`",
                                self.w.conds[cond as usize], self.w.mutexes[mutex as usize]
                            ),
                        );
                    }
                    // glibc (2.25+) registers the waiter on the condition, releases the mutex
                    // (`__pthread_mutex_unlock_usercnt`, waking a waiter of a contended one), and
                    // only then enters the kernel in `futex_wait`: the mutex is free while the
                    // waiter pays for its unlock's wake and its wait. A signal meanwhile finds it
                    // registered; the futex then does not sleep (`cond_sleep` is taken back).
                    let cost = self.unlock_cost(mutex)
                        + self.machine.costs.cond_wait_ns.unwrap_or(self.machine.costs.syscall_ns);
                    self.tasks[t.idx()].pc += 1;
                    self.conds[cond as usize].g2.push_back((t, mutex));
                    self.release_mutex(mutex, t, cpu);
                    if cost == 0 {
                        return Step::Block;
                    }
                    let tk = &mut self.tasks[t.idx()];
                    tk.cond_sleep = true;
                    tk.syscall_left = cost;
                    return Step::Run;
                }
                Op::Signal(c) | Op::Broadcast(c) => {
                    // A signaller woken from a quiescence wait does the whole call again.
                    self.tasks[t.idx()].quiesce = false;
                    let all = matches!(op, Op::Broadcast(_));
                    if all {
                        // Step 1 of `__pthread_cond_broadcast`: signal what is left of G1.
                        while let Some((w, m)) = self.conds[c as usize].g1.pop_front() {
                            self.reacquire(w, m, c, t, cpu);
                        }
                    }
                    let quiesce = self.machine.costs.cond_quiesce;
                    let cond = &mut self.conds[c as usize];
                    if cond.must_quiesce(quiesce) {
                        cond.quiescers.push(t);
                        self.tasks[t.idx()].quiesce = true;
                        return Step::Block;
                    }
                    if cond.g1.is_empty() {
                        // Switch: the old G2 becomes G1 (a new G2 starts empty).
                        std::mem::swap(&mut cond.g1, &mut cond.g2);
                    }
                    self.tasks[t.idx()].pc += 1;
                    let n = if all { self.conds[c as usize].g1.len() } else { 1 };
                    for _ in 0..n {
                        let Some((w, m)) = self.conds[c as usize].g1.pop_front() else { break };
                        self.reacquire(w, m, c, t, cpu);
                    }
                }
                Op::SemWait(x) => {
                    self.tasks[t.idx()].pc += 1;
                    let sem = &mut self.semaphores[x as usize];
                    if sem.count > 0 {
                        sem.count -= 1;
                    } else {
                        sem.waiters.push_back(t);
                        return Step::Block;
                    }
                }
                Op::SemPost(x) => {
                    self.tasks[t.idx()].pc += 1;
                    let sem = &mut self.semaphores[x as usize];
                    match sem.waiters.pop_front() {
                        Some(w) => self.wake(w, cpu, Some(t), false),
                        None => sem.count = sem.count.saturating_add(1),
                    }
                }
                Op::Suspend(e) => {
                    self.tasks[t.idx()].pc += 1;
                    self.suspended[e as usize].push(t);
                    return Step::Block;
                }
                Op::Resume(e) => {
                    self.tasks[t.idx()].pc += 1;
                    let mut list = std::mem::take(&mut self.scratch);
                    list.append(&mut self.suspended[e as usize]);
                    for &w in &list {
                        self.wake(w, cpu, Some(t), false);
                    }
                    list.clear();
                    self.scratch = list;
                }
                Op::SetCpus(l) => {
                    self.tasks[t.idx()].pc += 1;
                    let list = &w.cpu_lists[l as usize];
                    let mask = if list.is_empty() {
                        self.machine.topology.all()
                    } else {
                        list.iter().map(|&c| CpuId(c)).collect()
                    };
                    self.views[t.idx()].allowed = mask;
                    if !mask.contains(cpu) {
                        return Step::Migrate(mask.first().expect("validated non-empty"));
                    }
                }
                Op::Send { pipe, bytes } => {
                    self.tasks[t.idx()].pc += 1;
                    let p = &mut self.pipes[pipe as usize];
                    p.nr_sends += 1;
                    p.bytes_sent += bytes as u64;
                    if p.can_send(bytes) {
                        p.put(bytes);
                        self.pump_pipe(pipe, t, cpu);
                    } else {
                        p.writers.push_back((t, bytes));
                        return Step::Block;
                    }
                }
                Op::Recv { pipe, bytes } => {
                    self.tasks[t.idx()].pc += 1;
                    let p = &mut self.pipes[pipe as usize];
                    if p.can_recv(bytes) {
                        p.take(bytes);
                        self.pump_pipe(pipe, t, cpu);
                    } else {
                        p.readers.push_back((t, bytes));
                        return Step::Block;
                    }
                }
                Op::Barrier(b) => {
                    self.tasks[t.idx()].pc += 1;
                    let bar = &mut self.barriers[b as usize];
                    if (bar.arrived.len() + bar.spinning.len()) as u32 + 1 < bar.parties {
                        bar.arrived.push(t);
                        return Step::Block;
                    }
                    self.release_barrier(b, t, cpu);
                }
                Op::BarrierSpin { barrier: b, spin_ns } => {
                    let bar = &mut self.barriers[b as usize];
                    if (bar.arrived.len() + bar.spinning.len()) as u32 + 1 < bar.parties {
                        // Busy-wait at the barrier (pc stays here until the spin ends).
                        bar.spinning.push(t);
                        let tk = &mut self.tasks[t.idx()];
                        tk.in_op = true;
                        tk.op_left = spin_ns.max(1);
                        tk.barrier_released = false;
                        return Step::Run;
                    }
                    self.tasks[t.idx()].pc += 1;
                    self.release_barrier(b, t, cpu);
                }
                Op::Count(c) => {
                    self.tasks[t.idx()].pc += 1;
                    self.user_counters[c as usize] += 1;
                }
                Op::Fork(template) => {
                    self.tasks[t.idx()].pc += 1;
                    if self.tasks.len() >= self.cfg.max_tasks {
                        return self.fail_workload(
                            t,
                            format!(
                                "fork would exceed the limit of {} tasks (`max_tasks`, --max-tasks)",
                                self.cfg.max_tasks
                            ),
                        );
                    }
                    let spec = &self.w.tasks[template as usize];
                    let tgid = spec.threads.then_some(self.views[t.idx()].tgid);
                    let name = format!("{}-{}", spec.name, self.tasks.len());
                    let child = self.create_task(template, name, Some(t), tgid);
                    let cpu = self.views[t.idx()].cpu;
                    // The child's memory image (copy-on-write pages, or the shared address
                    // space of a thread) is where the parent just ran: it starts warm there only.
                    let stamp = self.cpus[cpu.idx()].task_run_total;
                    let ck = &mut self.tasks[child.idx()];
                    ck.last_cpu_ran = Some(cpu);
                    ck.evict_stamp = stamp;
                    self.record(cpu, crate::trace::TraceKind::Fork { parent: t, child });
                    self.tasks[t.idx()].children_alive += 1;
                    self.start_task(child);
                }
                Op::Exec(program) => {
                    let tk = &mut self.tasks[t.idx()];
                    (tk.program, tk.pc) = (program, 0);
                    tk.loops.clear();
                    ops = &w.tasks[program as usize].program.ops;
                    let spec = &w.tasks[program as usize];
                    self.demand[t.idx()] =
                        spec.activity.as_ref().map(crate::contention::Demand::of).unwrap_or_default();
                    match self.exec_placement(cpu, t) {
                        Ok(Some(dest)) => return Step::Migrate(dest),
                        Ok(None) => {}
                        Err(()) => return Step::Failed,
                    }
                }
                Op::WaitChildren => {
                    let tk = &mut self.tasks[t.idx()];
                    tk.pc += 1;
                    // Every child exited by the time it returns: all are reaped.
                    tk.children_unreaped = 0;
                    if tk.children_alive > 0 {
                        tk.waiting_children = true;
                        return Step::Block;
                    }
                }
                Op::WaitChild => {
                    let tk = &mut self.tasks[t.idx()];
                    tk.pc += 1;
                    if tk.children_unreaped > 0 {
                        tk.children_unreaped -= 1;
                    } else if tk.children_alive > 0 {
                        tk.waiting_child = true;
                        return Step::Block;
                    }
                }
                Op::Io { device, service } => {
                    self.tasks[t.idx()].pc += 1;
                    let service_ns = self.rng.draw(service);
                    let d = &mut self.devices[device as usize];
                    d.nr_requests += 1;
                    if d.current.is_none() {
                        d.current = Some(t);
                        self.q.push(now + service_ns, crate::event::Ev::IoDone(device));
                    } else {
                        d.queue.push_back((t, service_ns));
                    }
                    return Step::Block;
                }
                Op::Loop { count, end } => {
                    let tk = &mut self.tasks[t.idx()];
                    if count == 0 && end == pc + 1 {
                        return self.fail_workload(t, "an empty loop that repeats forever".into());
                    }
                    tk.loops.push((pc, if count == 0 { u32::MAX } else { count }));
                    tk.pc += 1;
                }
                Op::EndLoop { start } => {
                    let tk = &mut self.tasks[t.idx()];
                    let frame = tk.loops.last_mut().expect("validated loop nesting");
                    debug_assert_eq!(frame.0, start);
                    if frame.1 == u32::MAX || frame.1 > 1 {
                        if frame.1 != u32::MAX {
                            frame.1 -= 1;
                        }
                        tk.pc = start + 1;
                    } else {
                        tk.loops.pop();
                        tk.pc += 1;
                    }
                }
                Op::Exit => return Step::Exit,
            }
        }
    }

    /// The last party arrived at barrier `b`: wake the sleepers and end the spinners' busy-wait.
    fn release_barrier(&mut self, b: u32, t: TaskId, cpu: CpuId) {
        self.barriers[b as usize].nr_releases += 1;
        let mut list = std::mem::take(&mut self.scratch);
        list.append(&mut self.barriers[b as usize].arrived);
        for &w in &list {
            self.wake(w, cpu, Some(t), false);
        }
        list.clear();
        list.append(&mut self.barriers[b as usize].spinning);
        for &s in &list {
            // A spinner sees the release at once: its spin ends now (if it is running, its segment is
            // cut here; if it was preempted mid-spin, it moves on when it next runs).
            let running_on =
                (self.views[s.idx()].state == TaskState::Running).then_some(self.views[s.idx()].cpu);
            if let Some(c) = running_on {
                self.settle(c);
            }
            let tk = &mut self.tasks[s.idx()];
            tk.op_left = 0;
            tk.barrier_released = true;
            if let Some(c) = running_on {
                self.program_segment(c);
            }
        }
        list.clear();
        self.scratch = list;
    }

    fn block_until(&mut self, t: TaskId, at: Ns) -> Step {
        let tk = &mut self.tasks[t.idx()];
        tk.wait_gen = tk.wait_gen.wrapping_add(1);
        tk.timer_exit_done = false;
        self.q.arm_wake(t, at, tk.wait_gen);
        Step::Block
    }

    /// Blocks `t` on a sleep or timer expiring at `at`: non-real-time tasks wake their timer slack
    /// later (`CostModel::timer_slack_ns`), with the latency counted from `at`.
    fn block_until_timer(&mut self, t: TaskId, at: Ns) -> Step {
        let slack = if self.views[t.idx()].class.is_rt() { 0 } else { self.machine.costs.timer_slack_ns };
        if slack == 0 {
            return self.block_until(t, at);
        }
        self.tasks[t.idx()].due_at = Some(at);
        self.block_until(t, at + slack)
    }

    /// Unlocks mutex `m` held by `t`: free, and if its word was contended, its first waiter woken
    /// to retry (`lll_unlock`: a `futex_wake` of one).
    fn release_mutex(&mut self, m: u32, t: TaskId, cpu: CpuId) {
        let mx = &mut self.mutexes[m as usize];
        mx.owner = None;
        if std::mem::take(&mut mx.contended) {
            if let Some(w) = mx.waiters.pop_front() {
                self.wake(w, cpu, Some(t), false);
            }
        }
    }

    /// The kernel time of unlocking mutex `m`: a `futex_wake` if its word is contended (the
    /// calibrated wake if it wakes a waiter, a bare system call if none waits), else none. Without
    /// the per-kind costs (`mutex_wake_ns` unset) mutex calls cost nothing.
    fn unlock_cost(&self, m: u32) -> Ns {
        let mx = &self.mutexes[m as usize];
        let c = &self.machine.costs;
        match (mx.contended, mx.waiters.is_empty(), c.mutex_wake_ns) {
            (true, false, Some(wake)) => wake,
            (true, true, Some(_)) => c.syscall_ns,
            _ => 0,
        }
    }

    /// `t` tries to take mutex `m` after waiting (woken from its queue, or signalled on a condition):
    /// it takes it if free, marked contended; else it marks it contended and waits again (`false`).
    fn retry_lock(&mut self, t: TaskId, m: u32) -> bool {
        let mx = &mut self.mutexes[m as usize];
        mx.contended = true;
        if mx.owner.is_none() {
            mx.owner = Some(t);
            true
        } else {
            mx.waiters.push_back(t);
            false
        }
    }

    /// A waiter `w` of condition `cv` was signalled: it wakes and takes mutex `m` again when it
    /// runs (waiting for it if held then).
    fn reacquire(&mut self, w: TaskId, m: u32, cv: u32, waker: TaskId, cpu: CpuId) {
        self.tasks[w.idx()].relock = Some(m);
        if self.is_blocked(w) {
            // Out of its futex wait, it holds a reference to its group until it runs.
            self.tasks[w.idx()].cond_ref = Some(cv);
            self.conds[cv as usize].refs += 1;
            self.wake(w, cpu, Some(waker), false);
        }
        // Else it is still entering its wait (`cond_sleep`): it finds the signal and goes on.
    }

    /// Serves blocked readers and writers of a pipe in FIFO order while bytes or room allow (a
    /// socket's writers once the reader made it writable: each then sends while the charge is
    /// below the send buffer).
    fn pump_pipe(&mut self, pipe: u32, waker: TaskId, cpu: CpuId) {
        let mut writers_awake = false;
        loop {
            let p = &mut self.pipes[pipe as usize];
            let mut woke = None;
            if let Some(&(r, want)) = p.readers.front() {
                if p.used >= want {
                    p.take(want);
                    p.readers.pop_front();
                    woke = Some(r);
                }
            }
            if woke.is_none() {
                writers_awake |= p.writers_woken();
                if let Some(&(wr, b)) = p.writers.front() {
                    let goes = match p.kind {
                        PipeKind::Pipe => p.used + b <= p.capacity,
                        PipeKind::UnixStream(_) => writers_awake && p.charged < p.capacity,
                    };
                    if goes {
                        p.put(b);
                        p.writers.pop_front();
                        woke = Some(wr);
                    }
                }
            }
            match woke {
                Some(x) => self.wake(x, cpu, Some(waker), true),
                None => break,
            }
        }
    }

    /// A device finished its request: wake the requester, start the next request.
    pub(crate) fn on_io_done(&mut self, device: u32) {
        let d = &mut self.devices[device as usize];
        let Some(t) = d.current.take() else { return };
        if let Some((n, service)) = d.queue.pop_front() {
            d.current = Some(n);
            self.q.push(self.now + service, crate::event::Ev::IoDone(device));
        }
        if self.is_blocked(t) {
            let cpu = self.views[t.idx()].cpu;
            self.wake(t, cpu, None, false);
        }
    }
}
