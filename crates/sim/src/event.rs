//! The event queue: a binary heap ordered by `(time, sequence)`.
//!
//! Ordering contract: events fire in increasing time; events at the same time fire in the order they
//! were scheduled (the sequence number is a global counter). Nothing else breaks ties, so a run is a
//! pure function of its inputs and seed. Events are small `Copy` values; cancelled events are not
//! removed but carry a generation number that the handler compares (stale ones are dropped), which
//! keeps scheduling and cancelling O(log n) with no allocation after the heap has grown.

use schedlab_core::{CpuId, Ns, TaskId};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// What happens at an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ev {
    /// The periodic tick on a CPU.
    Tick(CpuId),
    /// The running task's current segment ends (operation done or slice over); `gen` must match the
    /// CPU's current segment generation.
    Segment {
        /// The CPU.
        cpu: CpuId,
        /// Segment generation.
        gen: u32,
    },
    /// A timed sleep or timer expiry ends; `gen` must match the task's wait generation.
    Wake {
        /// The sleeping task.
        task: TaskId,
        /// Its wait generation.
        gen: u32,
    },
    /// A reschedule request reaches a CPU (IPI, or local at the same instant).
    Resched(CpuId),
    /// An initial task starts.
    Start(TaskId),
    /// A device finishes its current request.
    IoDone(u32),
    /// A scheduled affinity change (index into the workload's list).
    Affinity(u32),
    /// A requested frequency change takes effect on a frequency domain; `gen` must match its latest
    /// request.
    Freq {
        /// The domain.
        domain: u32,
        /// Request generation.
        gen: u32,
    },
    /// Take a time-series sample.
    Sample,
    /// End of the run.
    Stop,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    time: Ns,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.time == o.time && self.seq == o.seq
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    // Reversed: BinaryHeap is a max-heap and we want the earliest (time, seq) first.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.time, o.seq).cmp(&(self.time, self.seq))
    }
}

/// The queue.
#[derive(Default)]
pub struct EventQueue {
    heap: BinaryHeap<Entry>,
    seq: u64,
}

impl EventQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedules `ev` at `time`.
    #[inline]
    pub fn push(&mut self, time: Ns, ev: Ev) {
        self.seq += 1;
        self.heap.push(Entry { time, seq: self.seq, ev });
    }

    /// Removes and returns the earliest event.
    #[inline]
    pub fn pop(&mut self) -> Option<(Ns, Ev)> {
        self.heap.pop().map(|e| (e.time, e.ev))
    }

    /// Events pending (stale ones included).
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_then_insertion_order() {
        let mut q = EventQueue::new();
        q.push(5, Ev::Resched(CpuId(0)));
        q.push(3, Ev::Resched(CpuId(1)));
        q.push(5, Ev::Resched(CpuId(2)));
        q.push(3, Ev::Resched(CpuId(3)));
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            vec![
                (3, Ev::Resched(CpuId(1))),
                (3, Ev::Resched(CpuId(3))),
                (5, Ev::Resched(CpuId(0))),
                (5, Ev::Resched(CpuId(2)))
            ]
        );
    }
}
