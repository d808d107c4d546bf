//! The Rust builder API for workloads.

use crate::model::*;
use schedlab_core::Ns;

/// Builds a [`Program`] op by op. Loops are written as closures:
/// `ProgramBuilder::new().repeat(10, |p| p.compute(1_000_000).sleep(500_000)).build()`.
#[derive(Clone, Debug, Default)]
pub struct ProgramBuilder {
    ops: Vec<Op>,
}

impl ProgramBuilder {
    /// An empty program.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends any op (loop markers are better written with [`ProgramBuilder::repeat`]).
    pub fn op(mut self, op: Op) -> Self {
        self.ops.push(op);
        self
    }

    /// Calibrated work, in nanoseconds at nominal speed (a fixed value or a [`Dist`]).
    pub fn compute(self, work: impl Into<Dist>) -> Self {
        self.op(Op::Compute { work: work.into() })
    }
    /// Busy-wait for wall-clock nanoseconds.
    pub fn spin(self, time: impl Into<Dist>) -> Self {
        self.op(Op::Spin { time: time.into() })
    }
    /// Sleep.
    pub fn sleep(self, time: impl Into<Dist>) -> Self {
        self.op(Op::Sleep { time: time.into() })
    }
    /// Wait for the next period of this task's periodic timer (relative mode: an overrun restarts
    /// the grid from now).
    pub fn timer(self, period_ns: Ns) -> Self {
        self.op(Op::Timer { timer: 0, period_ns, absolute: false })
    }
    /// A timer wait on a named timer (see [`WorkloadBuilder::timer`]).
    pub fn timer_on(self, timer: TimerId, period_ns: Ns, absolute: bool) -> Self {
        self.op(Op::Timer { timer, period_ns, absolute })
    }
    /// Like [`ProgramBuilder::timer`] in absolute mode: expiries stay on the original grid.
    pub fn timer_absolute(self, period_ns: Ns) -> Self {
        self.op(Op::Timer { timer: 0, period_ns, absolute: true })
    }
    /// `sched_yield()`.
    pub fn yield_now(self) -> Self {
        self.op(Op::Yield)
    }
    /// Lock a mutex.
    pub fn lock(self, m: MutexId) -> Self {
        self.op(Op::Lock(m))
    }
    /// Unlock a mutex.
    pub fn unlock(self, m: MutexId) -> Self {
        self.op(Op::Unlock(m))
    }
    /// Wait on a condition variable with its mutex held.
    pub fn cond_wait(self, cond: CondId, mutex: MutexId) -> Self {
        self.op(Op::CondWait { cond, mutex })
    }
    /// Signal one waiter.
    pub fn signal(self, cond: CondId) -> Self {
        self.op(Op::Signal(cond))
    }
    /// Wake all waiters.
    pub fn broadcast(self, cond: CondId) -> Self {
        self.op(Op::Broadcast(cond))
    }
    /// Write bytes to a pipe.
    pub fn send(self, pipe: PipeId, bytes: u32) -> Self {
        self.op(Op::Send { pipe, bytes })
    }
    /// Read bytes from a pipe.
    pub fn recv(self, pipe: PipeId, bytes: u32) -> Self {
        self.op(Op::Recv { pipe, bytes })
    }
    /// Wait at a barrier.
    pub fn barrier(self, b: BarrierId) -> Self {
        self.op(Op::Barrier(b))
    }
    /// Wait at a barrier, spinning up to `spin_ns` before sleeping.
    pub fn barrier_spin(self, barrier: BarrierId, spin_ns: Ns) -> Self {
        self.op(Op::BarrierSpin { barrier, spin_ns })
    }
    /// Count one event on a counter.
    pub fn count(self, c: CounterId) -> Self {
        self.op(Op::Count(c))
    }
    /// Fork a child from a template.
    pub fn fork(self, template: TemplateId) -> Self {
        self.op(Op::Fork(template))
    }

    /// `execve()` into a template's program ([`Op::Exec`]).
    pub fn exec(self, template: TemplateId) -> Self {
        self.op(Op::Exec(template))
    }
    /// Wait for all children.
    pub fn wait_children(self) -> Self {
        self.op(Op::WaitChildren)
    }

    /// Wait for one child to exit (`wait()`).
    pub fn wait_child(self) -> Self {
        self.op(Op::WaitChild)
    }
    /// Blocking I/O on a device.
    pub fn io(self, device: DeviceId, service: impl Into<Dist>) -> Self {
        self.op(Op::Io { device, service: service.into() })
    }
    /// Wait on a semaphore.
    pub fn sem_wait(self, s: SemId) -> Self {
        self.op(Op::SemWait(s))
    }
    /// Post a semaphore.
    pub fn sem_post(self, s: SemId) -> Self {
        self.op(Op::SemPost(s))
    }
    /// Suspend until resumed.
    pub fn suspend(self, e: EventId) -> Self {
        self.op(Op::Suspend(e))
    }
    /// Resume the tasks suspended on an event.
    pub fn resume(self, e: EventId) -> Self {
        self.op(Op::Resume(e))
    }
    /// Change the task's own allowed CPUs.
    pub fn set_cpus(self, list: CpuListId) -> Self {
        self.op(Op::SetCpus(list))
    }
    /// Change the task's own nice level (-20..=19).
    pub fn nice(self, nice: i8) -> Self {
        self.op(Op::Nice(nice))
    }
    /// Change the task's own scheduling policy and RT priority (1..=99 for FIFO and RR, else 0).
    pub fn set_class(self, class: schedlab_core::SchedClass, rt_priority: u8) -> Self {
        self.op(Op::SetClass { class, rt_priority })
    }
    /// Exit.
    pub fn exit(self) -> Self {
        self.op(Op::Exit)
    }

    /// Repeats the ops written by `body` `count` times (0 = forever).
    pub fn repeat(mut self, count: u32, body: impl FnOnce(ProgramBuilder) -> ProgramBuilder) -> Self {
        let start = self.ops.len() as u32;
        self.ops.push(Op::Loop { count, end: 0 });
        let inner = body(ProgramBuilder::new()).ops;
        let base = self.ops.len() as u32;
        // Re-base the inner loop markers onto their new positions.
        self.ops.extend(inner.into_iter().map(|op| match op {
            Op::Loop { count, end } => Op::Loop { count, end: end + base },
            Op::EndLoop { start } => Op::EndLoop { start: start + base },
            other => other,
        }));
        let end = self.ops.len() as u32;
        self.ops.push(Op::EndLoop { start });
        self.ops[start as usize] = Op::Loop { count, end };
        self
    }

    /// Repeats forever.
    pub fn forever(self, body: impl FnOnce(ProgramBuilder) -> ProgramBuilder) -> Self {
        self.repeat(0, body)
    }

    /// The finished program.
    pub fn build(self) -> Program {
        Program { ops: self.ops }
    }
}

/// Builds a [`Workload`].
#[derive(Clone, Debug)]
pub struct WorkloadBuilder {
    w: Workload,
}

impl WorkloadBuilder {
    /// A new, empty workload with just the root group.
    pub fn new(name: impl Into<String>) -> Self {
        WorkloadBuilder {
            w: Workload {
                name: name.into(),
                groups: vec![GroupSpec { name: "root".into(), parent: 0, shares: 1024 }],
                timers: vec![default_timer()],
                ..Workload::default()
            },
        }
    }

    /// Adds a mutex.
    pub fn mutex(&mut self, name: impl Into<String>) -> MutexId {
        self.w.mutexes.push(name.into());
        self.w.mutexes.len() as u32 - 1
    }
    /// Adds a condition variable.
    pub fn cond(&mut self, name: impl Into<String>) -> CondId {
        self.w.conds.push(name.into());
        self.w.conds.len() as u32 - 1
    }
    /// Adds a pipe with a capacity in bytes.
    pub fn pipe(&mut self, name: impl Into<String>, capacity: u32) -> PipeId {
        self.w.pipes.push(PipeSpec::pipe(name, capacity));
        self.w.pipes.len() as u32 - 1
    }
    /// Adds an AF_UNIX stream socket with the send buffer `sndbuf` (bytes) and the kernel's
    /// accounting of its messages ([`crate::model::PipeKind::UnixStream`]).
    pub fn unix_stream(&mut self, name: impl Into<String>, sndbuf: u32, acc: SkbAccounting) -> PipeId {
        self.w.pipes.push(PipeSpec { name: name.into(), capacity: sndbuf, kind: PipeKind::UnixStream(acc) });
        self.w.pipes.len() as u32 - 1
    }
    /// Adds a barrier for `parties` tasks.
    pub fn barrier(&mut self, name: impl Into<String>, parties: u32) -> BarrierId {
        self.w.barriers.push(BarrierSpec { name: name.into(), parties });
        self.w.barriers.len() as u32 - 1
    }
    /// Adds a counting semaphore.
    pub fn semaphore(&mut self, name: impl Into<String>, initial: u32) -> SemId {
        self.w.semaphores.push(SemSpec { name: name.into(), initial });
        self.w.semaphores.len() as u32 - 1
    }
    /// Adds a suspend/resume event.
    pub fn event(&mut self, name: impl Into<String>) -> EventId {
        self.w.events.push(name.into());
        self.w.events.len() as u32 - 1
    }
    /// Adds a CPU list for [`Op::SetCpus`] (an identical list is shared).
    pub fn cpu_list(&mut self, cpus: Vec<u32>) -> CpuListId {
        if let Some(i) = self.w.cpu_lists.iter().position(|l| *l == cpus) {
            return i as u32;
        }
        self.w.cpu_lists.push(cpus);
        self.w.cpu_lists.len() as u32 - 1
    }
    /// Adds a timer, per task or shared by all its users.
    pub fn timer(&mut self, name: impl Into<String>, shared: bool) -> TimerId {
        self.w.timers.push(TimerSpec { name: name.into(), shared });
        self.w.timers.len() as u32 - 1
    }
    /// Adds a named counter.
    pub fn counter(&mut self, name: impl Into<String>) -> CounterId {
        self.w.counters.push(name.into());
        self.w.counters.len() as u32 - 1
    }
    /// Adds a device.
    pub fn device(&mut self, name: impl Into<String>) -> DeviceId {
        self.w.devices.push(name.into());
        self.w.devices.len() as u32 - 1
    }
    /// Adds a task group under `parent` (0 = root) with `shares`.
    pub fn group(&mut self, name: impl Into<String>, parent: GroupIdx, shares: u64) -> GroupIdx {
        self.w.groups.push(GroupSpec { name: name.into(), parent, shares });
        self.w.groups.len() as u32 - 1
    }
    /// Adds a task template (one instance, default properties) and returns it for editing.
    pub fn task(&mut self, name: impl Into<String>, program: Program) -> &mut TaskSpec {
        self.w.tasks.push(TaskSpec::new(name, program));
        self.w.tasks.last_mut().expect("just pushed")
    }
    /// The id the next [`WorkloadBuilder::task`] call will get (to fork templates defined later).
    pub fn next_template(&self) -> TemplateId {
        self.w.tasks.len() as u32
    }
    /// Changes a template's allowed CPUs at `at_ns`.
    pub fn affinity_change(&mut self, template: TemplateId, at_ns: Ns, cpus: Option<Vec<u32>>) {
        self.w.affinity_changes.push(AffinityChange { template, at_ns, cpus });
    }
    /// Sets the stop condition.
    pub fn stop(&mut self, when: StopWhen) -> &mut Self {
        self.w.stop = when;
        self
    }
    /// Sets the workload's own duration limit.
    pub fn duration(&mut self, ns: Ns) -> &mut Self {
        self.w.duration_ns = Some(ns);
        self
    }
    /// Validates and returns the workload.
    pub fn build(self) -> Result<Workload, String> {
        self.w.validate()?;
        Ok(self.w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_loops_are_linked() {
        let p =
            ProgramBuilder::new().compute(1).repeat(3, |p| p.sleep(2).repeat(2, |q| q.yield_now())).build();
        assert_eq!(
            p.ops,
            vec![
                Op::Compute { work: Dist::Fixed(1) },
                Op::Loop { count: 3, end: 6 },
                Op::Sleep { time: Dist::Fixed(2) },
                Op::Loop { count: 2, end: 5 },
                Op::Yield,
                Op::EndLoop { start: 3 },
                Op::EndLoop { start: 1 },
            ]
        );
        let mut w = WorkloadBuilder::new("t");
        w.task("a", p);
        assert!(w.build().is_ok());
    }

    #[test]
    fn validation_catches_bad_references() {
        let mut w = WorkloadBuilder::new("t");
        w.task("a", ProgramBuilder::new().lock(3).build());
        assert!(w.build().unwrap_err().contains("unknown mutex"));
        let mut w = WorkloadBuilder::new("t");
        let p = w.pipe("p", 10);
        w.task("a", ProgramBuilder::new().send(p, 11).build());
        assert!(w.build().unwrap_err().contains("must be 1..=10"));
    }
}
