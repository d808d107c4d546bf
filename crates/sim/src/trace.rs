//! The simulated schedule as a Perfetto trace (ui.perfetto.dev opens it).
//!
//! With [`RunConfig::trace`](crate::RunConfig) on, the engine records every context switch and
//! wakeup. [`perfetto`] writes them in Perfetto's protobuf trace format the way a Linux kernel trace
//! looks: one `ProcessTree` packet naming every task (thread id = task id + 1, process id = its thread
//! group + 1; 0 is the idle task, `swapper/N`), then `FtraceEventBundle` packets per CPU carrying
//! `sched_switch` (previous and next task with their kernel priorities, the previous task's state:
//! `R` preempted, `S` blocked, `X` exited), `sched_waking` (on the waker's CPU, with the woken task and
//! its target CPU), `sched_process_fork` (on the parent's CPU), `sched_migrate_task` (every change of
//! a task's CPU, as the engine counts migrations) and `sched_wakeup_new` (a new task made runnable). Perfetto builds per-CPU scheduling tracks and per-thread state
//! (running, runnable, sleeping) from exactly these events. Policy internals the policy exposes
//! (`SchedPolicy::trace_values`: CFS's vruntime, ULE's interactivity score, HTFS's bweight level...)
//! are sampled when a task is switched in and written as counter tracks (`TrackDescriptor` with a
//! counter, `TrackEvent` of type counter).
//!
//! The protobuf encoding is written by hand (a few field types); the field numbers are those of
//! perfetto's protos/perfetto/trace (TracePacket, FtraceEventBundle, FtraceEvent,
//! SchedSwitchFtraceEvent, SchedWakingFtraceEvent, SchedWakeupNewFtraceEvent, SchedProcessForkFtraceEvent,
//! SchedMigrateTaskFtraceEvent, ProcessTree). A test reads
//! the output back with the `perfetto` Python package's generated protos (scripts/perfetto_check.py).

use schedlab_core::{CpuId, Ns, TaskId};

/// First uuid of the counter tracks.
const TRACK_UUID_BASE: u64 = 1 << 20;

/// `prev_state` of a preempted task (`TASK_RUNNING`, shown as `R`).
pub const STATE_RUNNABLE: u64 = 0;
/// `prev_state` of a task that blocked (`TASK_INTERRUPTIBLE`, `S`).
pub const STATE_SLEEPING: u64 = 1;
/// `prev_state` of a task that exited (`EXIT_DEAD`, `X`: 0x10 in every kernel's encoding).
pub const STATE_DEAD: u64 = 0x10;

/// The kernel's `prio` of a task as trace events show it: `120 + nice` for time-shared classes,
/// `99 - rt_priority` for SCHED_FIFO and SCHED_RR.
pub fn kernel_prio(class: schedlab_core::SchedClass, nice: i8, rt_priority: u8) -> i32 {
    use schedlab_core::SchedClass::{Fifo, Rr};
    match class {
        Fifo | Rr => 99 - rt_priority as i32,
        _ => 120 + nice as i32,
    }
}

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceKind {
    /// A context switch on the CPU (`None`: the idle task).
    Switch {
        /// The task that stopped.
        prev: Option<TaskId>,
        /// Its state (`STATE_*`).
        prev_state: u64,
        /// The task that starts.
        next: Option<TaskId>,
    },
    /// A task was woken (recorded on the waker's CPU).
    Waking {
        /// The woken task.
        task: TaskId,
        /// The CPU it will run on.
        target: CpuId,
    },
    /// A policy-internal value of the task switched in (`SchedPolicy::trace_values`).
    Value {
        /// The task.
        task: TaskId,
        /// What the value is.
        name: &'static str,
        /// The value.
        value: i64,
    },
    /// A task created another (`sched_process_fork`, recorded on the parent's CPU).
    Fork {
        /// The creating task.
        parent: TaskId,
        /// The new task.
        child: TaskId,
    },
    /// A task moved to another CPU (`sched_migrate_task`).
    Migrate {
        /// The task.
        task: TaskId,
        /// Its CPU before.
        from: CpuId,
        /// Its CPU after.
        to: CpuId,
    },
    /// A task was created and made runnable.
    WakeupNew {
        /// The new task.
        task: TaskId,
        /// The CPU it will run on.
        target: CpuId,
    },
}

/// One recorded event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    /// When.
    pub ts: Ns,
    /// On which CPU.
    pub cpu: CpuId,
    /// The task running on that CPU when it happened (the waker of a wakeup), `None` if idle.
    pub current: Option<TaskId>,
    /// What.
    pub kind: TraceKind,
}

/// A task as the trace names it.
#[derive(Clone, Debug)]
pub struct TraceTask {
    /// Name (`comm`).
    pub name: String,
    /// Thread group.
    pub tgid: u32,
    /// Kernel priority ([`kernel_prio`]).
    pub prio: i32,
}

/// A recorded schedule.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// Number of CPUs.
    pub nr_cpus: usize,
    /// Tasks by id.
    pub tasks: Vec<TraceTask>,
    /// Events in time order.
    pub events: Vec<TraceEvent>,
}

/// A protobuf message under construction.
#[derive(Default)]
struct Msg(Vec<u8>);

impl Msg {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn uint(&mut self, field: u32, v: u64) {
        self.varint((field as u64) << 3);
        self.varint(v);
    }
    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.varint(((field as u64) << 3) | 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn msg(&mut self, field: u32, m: Msg) {
        self.bytes(field, &m.0);
    }
}

fn pid(t: Option<TaskId>) -> u64 {
    t.map_or(0, |t| t.0 as u64 + 1)
}

impl Trace {
    fn prio(&self, t: Option<TaskId>) -> u64 {
        t.map_or(120, |t| self.tasks[t.idx()].prio as i64 as u64)
    }

    fn comm(&self, t: Option<TaskId>, cpu: CpuId) -> String {
        match t {
            Some(t) => self.tasks[t.idx()].name.clone(),
            None => format!("swapper/{}", cpu.0),
        }
    }

    /// The trace in Perfetto's protobuf format (a `Trace` message: a sequence of `TracePacket`s).
    pub fn perfetto(&self) -> Vec<u8> {
        let mut out = Msg::default();
        // The process tree: every task as a thread of its thread group.
        let mut tree = Msg::default();
        let mut seen = std::collections::BTreeSet::new();
        for t in &self.tasks {
            if seen.insert(t.tgid) {
                let mut p = Msg::default();
                p.uint(1, t.tgid as u64 + 1);
                p.bytes(3, t.name.as_bytes());
                tree.msg(1, p);
            }
        }
        for (i, t) in self.tasks.iter().enumerate() {
            let mut th = Msg::default();
            th.uint(1, i as u64 + 1);
            th.bytes(2, t.name.as_bytes());
            th.uint(3, t.tgid as u64 + 1);
            tree.msg(2, th);
        }
        let mut packet = Msg::default();
        packet.msg(2, tree);
        packet.uint(10, 1);
        out.msg(1, packet);
        // Counter tracks for policy values, one per (value, task), declared up front on sequence 2.
        let mut tracks: Vec<(&'static str, TaskId)> = Vec::new();
        for e in &self.events {
            if let TraceKind::Value { task, name, .. } = e.kind {
                if !tracks.contains(&(name, task)) {
                    tracks.push((name, task));
                }
            }
        }
        for (k, &(name, task)) in tracks.iter().enumerate() {
            let mut d = Msg::default();
            d.uint(1, TRACK_UUID_BASE + k as u64);
            d.bytes(2, format!("{name} ({})", self.tasks[task.idx()].name).as_bytes());
            d.msg(8, Msg::default());
            let mut packet = Msg::default();
            packet.msg(60, d);
            packet.uint(10, 2);
            if k == 0 {
                packet.uint(13, 1); // SEQ_INCREMENTAL_STATE_CLEARED
            }
            out.msg(1, packet);
        }
        // Scheduling events, one bundle per run of events on the same CPU; values as counter events.
        let mut i = 0;
        while i < self.events.len() {
            if let TraceKind::Value { task, name, value } = self.events[i].kind {
                let uuid = TRACK_UUID_BASE
                    + tracks.iter().position(|&k| k == (name, task)).expect("declared") as u64;
                let mut te = Msg::default();
                te.uint(9, 4); // TYPE_COUNTER
                te.uint(11, uuid);
                te.uint(30, value as u64);
                let mut packet = Msg::default();
                packet.uint(8, self.events[i].ts);
                packet.msg(11, te);
                packet.uint(10, 2);
                out.msg(1, packet);
                i += 1;
                continue;
            }
            let cpu = self.events[i].cpu;
            let mut bundle = Msg::default();
            bundle.uint(1, cpu.0 as u64);
            while i < self.events.len()
                && self.events[i].cpu == cpu
                && !matches!(self.events[i].kind, TraceKind::Value { .. })
            {
                bundle.msg(2, self.event(&self.events[i]));
                i += 1;
            }
            let mut packet = Msg::default();
            packet.msg(1, bundle);
            packet.uint(10, 1);
            out.msg(1, packet);
        }
        out.0
    }

    fn event(&self, e: &TraceEvent) -> Msg {
        let mut ev = Msg::default();
        ev.uint(1, e.ts);
        ev.uint(2, pid(e.current));
        match e.kind {
            TraceKind::Switch { prev, prev_state, next } => {
                let mut s = Msg::default();
                s.bytes(1, self.comm(prev, e.cpu).as_bytes());
                s.uint(2, pid(prev));
                s.uint(3, self.prio(prev));
                s.uint(4, prev_state);
                s.bytes(5, self.comm(next, e.cpu).as_bytes());
                s.uint(6, pid(next));
                s.uint(7, self.prio(next));
                ev.msg(4, s);
            }
            TraceKind::Value { .. } => unreachable!("values are written as counter events"),
            TraceKind::Migrate { task, from, to } => {
                let mut m = Msg::default();
                m.bytes(1, self.tasks[task.idx()].name.as_bytes());
                m.uint(2, pid(Some(task)));
                m.uint(3, self.prio(Some(task)));
                m.uint(4, from.0 as u64);
                m.uint(5, to.0 as u64);
                ev.msg(491, m);
            }
            TraceKind::Fork { parent, child } => {
                let mut f = Msg::default();
                f.bytes(1, self.tasks[parent.idx()].name.as_bytes());
                f.uint(2, pid(Some(parent)));
                f.bytes(3, self.tasks[child.idx()].name.as_bytes());
                f.uint(4, pid(Some(child)));
                ev.msg(239, f);
            }
            TraceKind::Waking { task, target } | TraceKind::WakeupNew { task, target } => {
                let mut w = Msg::default();
                w.bytes(1, self.tasks[task.idx()].name.as_bytes());
                w.uint(2, pid(Some(task)));
                w.uint(3, self.prio(Some(task)));
                w.uint(4, 1);
                w.uint(5, target.0 as u64);
                let field = if matches!(e.kind, TraceKind::Waking { .. }) { 20 } else { 114 };
                ev.msg(field, w);
            }
        }
        ev
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_nested_messages_follow_the_protobuf_encoding() {
        let mut m = Msg::default();
        m.uint(1, 300);
        assert_eq!(m.0, vec![0x08, 0xAC, 0x02]);
        let mut outer = Msg::default();
        let mut inner = Msg::default();
        inner.bytes(2, b"hi");
        outer.msg(4, inner);
        assert_eq!(outer.0, vec![0x22, 0x04, 0x12, 0x02, b'h', b'i']);
    }
}
