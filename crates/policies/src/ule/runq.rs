//! FreeBSD's `struct runq` (sys/kern/kern_switch.c): 64 FIFO queues with a status bitmap. The realtime
//! and idle queues index by `priority / 4`; the timeshare queue is used as a calendar, indexed by slot.
//! `runq_steal` and `runq_steal_from` follow sys/kern/sched_ule.c.

use schedlab_core::TaskId;
use std::collections::VecDeque;

/// `RQ_NQS`: queues per run queue.
pub const RQ_NQS: usize = 64;
/// `RQ_PPQ`: priorities per queue.
pub const RQ_PPQ: usize = 4;

/// One run queue.
#[derive(Clone, Debug)]
pub struct RunQ {
    queues: Vec<VecDeque<TaskId>>,
    bits: u64,
}

impl Default for RunQ {
    fn default() -> Self {
        RunQ { queues: vec![VecDeque::new(); RQ_NQS], bits: 0 }
    }
}

impl RunQ {
    /// `runq_add_pri`: queue `t` in queue `idx`, at the head for a preempted thread (`SRQ_PREEMPTED`).
    pub fn add(&mut self, idx: usize, t: TaskId, head: bool) {
        if head {
            self.queues[idx].push_front(t);
        } else {
            self.queues[idx].push_back(t);
        }
        self.bits |= 1 << idx;
    }

    /// Removes `t` from queue `idx`; returns whether that queue became empty.
    pub fn remove(&mut self, idx: usize, t: TaskId) -> bool {
        let q = &mut self.queues[idx];
        let i = q.iter().position(|&x| x == t).expect("thread in its run queue");
        q.remove(i);
        if q.is_empty() {
            self.bits &= !(1 << idx);
            return true;
        }
        false
    }

    /// `runq_findbit`: the first non-empty queue.
    pub fn first(&self) -> Option<usize> {
        (self.bits != 0).then(|| self.bits.trailing_zeros() as usize)
    }

    /// `runq_findbit_from`: the first non-empty queue at or after `start`, wrapping around.
    pub fn first_from(&self, start: usize) -> Option<usize> {
        let high = self.bits & (!0u64 << start);
        if high != 0 {
            return Some(high.trailing_zeros() as usize);
        }
        self.first()
    }

    /// The head of queue `idx`.
    pub fn head(&self, idx: usize) -> Option<TaskId> {
        self.queues[idx].front().copied()
    }

    /// Whether queue `idx` is empty.
    pub fn is_empty_at(&self, idx: usize) -> bool {
        self.bits & (1 << idx) == 0
    }

    /// `runq_steal`: the first thread, in priority then FIFO order, that `can_run` accepts.
    pub fn steal(&self, mut can_run: impl FnMut(TaskId) -> bool) -> Option<TaskId> {
        let mut bits = self.bits;
        while bits != 0 {
            let idx = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if let Some(&t) = self.queues[idx].iter().find(|&&t| can_run(t)) {
                return Some(t);
            }
        }
        None
    }

    /// `runq_steal_from` (FreeBSD 10.4 text, one status word of 64 queues): looks at the first
    /// non-empty queue at or after `start`, then (if `start` is not 0) the first non-empty queue from 0,
    /// and takes the first acceptable thread that is not the first one seen, so the thread the CPU would
    /// run next stays; failing that, the last thread seen if acceptable.
    pub fn steal_from(&self, start: usize, mut can_run: impl FnMut(TaskId) -> bool) -> Option<TaskId> {
        let mut first: Option<TaskId> = None;
        let second = if start != 0 { self.first() } else { None };
        for idx in [self.first_from_no_wrap(start), second].into_iter().flatten() {
            for &t in &self.queues[idx] {
                if first.is_some() && can_run(t) {
                    return Some(t);
                }
                first = Some(t);
            }
        }
        first.filter(|&t| can_run(t))
    }

    fn first_from_no_wrap(&self, start: usize) -> Option<usize> {
        let high = self.bits & (!0u64 << start);
        (high != 0).then(|| high.trailing_zeros() as usize)
    }

    /// Threads queued.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.queues.iter().map(VecDeque::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_per_queue_and_wrapping_search() {
        let mut q = RunQ::default();
        q.add(40, TaskId(1), false);
        q.add(40, TaskId(2), false);
        q.add(40, TaskId(3), true);
        q.add(5, TaskId(4), false);
        assert_eq!(q.first(), Some(5));
        assert_eq!(q.first_from(6), Some(40));
        assert_eq!(q.first_from(41), Some(5), "wraps to the start");
        assert_eq!(q.head(40), Some(TaskId(3)), "a preempted thread goes to the head");
        assert!(!q.remove(40, TaskId(3)));
        assert_eq!(q.head(40), Some(TaskId(1)));
        assert!(q.remove(5, TaskId(4)));
        assert!(q.is_empty_at(5));
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn steal_from_leaves_the_next_thread_to_run() {
        let mut q = RunQ::default();
        for t in 1..=3 {
            q.add(10, TaskId(t), false);
        }
        // From slot 10: skip thread 1 (the next to run), take 2.
        assert_eq!(q.steal_from(10, |_| true), Some(TaskId(2)));
        // Only thread 1 acceptable: passes over 10 twice (start != 0) and finds 1 the second time.
        assert_eq!(q.steal_from(10, |t| t == TaskId(1)), Some(TaskId(1)));
        // A single thread is taken.
        let mut one = RunQ::default();
        one.add(0, TaskId(9), false);
        assert_eq!(one.steal_from(0, |_| true), Some(TaskId(9)));
        assert_eq!(one.steal_from(0, |_| false), None);
        // Plain steal: priority then FIFO order.
        assert_eq!(q.steal(|t| t != TaskId(1)), Some(TaskId(2)));
    }
}
