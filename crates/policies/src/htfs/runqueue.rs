//! An HTFS runqueue (seed 000 sec. 4.2-4.3): 50 FIFO priority queues, one per boosted-weight level,
//! each with its `realbweight` (the sum of its entities' bweights) and a `balancect`; the non-empty
//! queues are kept in a list sorted by `realbweight`, largest first, and `runcost` is the largest.
//!
//! Picking walks the sorted list from the *current* queue: a queue whose `balancect` has reached
//! `runcost` runs its head entity and pays `runcost`; otherwise the walk moves on, and the queue it
//! moves to is credited its `realbweight` just before it is checked (the lazy form of "when no queue
//! can pay, credit every queue"). Over a long run every queue runs `realbweight / runcost` entities
//! per pass of the list, so queues get run counts proportional to their `realbweight` (eq. 7-11).
//!
//! Choices where the thesis is silent: an emptied queue's `balancect` is reset to 0 (it starts fresh
//! when refilled); the first queue of an empty runqueue becomes current and is credited at once; ties
//! in the sorted list keep their order (a queue moves only past strictly smaller ones).

use std::collections::VecDeque;

#[cfg(test)]
use schedlab_core::TaskId;

/// Boosted-weight levels.
pub const NR_LEVELS: usize = 50;

/// One runqueue of 50 priority queues of entities `T` (tasks or group entities).
#[derive(Clone, Debug)]
pub struct Runqueue<T> {
    queues: Vec<VecDeque<T>>,
    realbweight: [u64; NR_LEVELS],
    balancect: [i64; NR_LEVELS],
    /// Non-empty levels, largest `realbweight` first.
    sorted: Vec<usize>,
    /// The level the picker stands on.
    current: Option<usize>,
    /// Sum of all `realbweight`s: the runqueue's weight in the dual runqueue.
    pub bweight: u64,
    nr: usize,
}

impl<T: Copy + PartialEq> Default for Runqueue<T> {
    fn default() -> Self {
        Runqueue {
            queues: vec![VecDeque::new(); NR_LEVELS],
            realbweight: [0; NR_LEVELS],
            balancect: [0; NR_LEVELS],
            sorted: Vec::with_capacity(NR_LEVELS),
            current: None,
            bweight: 0,
            nr: 0,
        }
    }
}

impl<T: Copy + PartialEq> Runqueue<T> {
    /// Entities queued.
    pub fn len(&self) -> usize {
        self.nr
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.nr == 0
    }

    /// `runcost`: the largest `realbweight`.
    pub fn runcost(&self) -> u64 {
        self.sorted.first().map_or(0, |&l| self.realbweight[l])
    }

    /// The `realbweight` of `level`.
    pub fn realbweight(&self, level: usize) -> u64 {
        self.realbweight[level]
    }

    /// The entities of `level`, head first.
    pub fn queue(&self, level: usize) -> &VecDeque<T> {
        &self.queues[level]
    }

    /// Non-empty levels, largest `realbweight` first.
    pub fn sorted_levels(&self) -> &[usize] {
        &self.sorted
    }

    fn pos(&self, level: usize) -> usize {
        self.sorted.iter().position(|&l| l == level).expect("non-empty level is in the sorted list")
    }

    /// Moves `level` towards the front while it is heavier than its predecessor.
    fn sort_up(&mut self, mut i: usize) {
        while i > 0 && self.realbweight[self.sorted[i - 1]] < self.realbweight[self.sorted[i]] {
            self.sorted.swap(i - 1, i);
            i -= 1;
        }
    }

    /// Moves `level` towards the back while it is lighter than its successor.
    fn sort_down(&mut self, mut i: usize) {
        while i + 1 < self.sorted.len()
            && self.realbweight[self.sorted[i + 1]] > self.realbweight[self.sorted[i]]
        {
            self.sorted.swap(i, i + 1);
            i += 1;
        }
    }

    /// Queues `t` with boosted weight `bw` at the tail of `level`.
    pub fn enqueue(&mut self, level: usize, t: T, bw: u64) {
        let was_empty = self.queues[level].is_empty();
        self.queues[level].push_back(t);
        self.realbweight[level] += bw;
        self.bweight += bw;
        self.nr += 1;
        if was_empty {
            self.sorted.push(level);
        }
        let i = self.pos(level);
        self.sort_up(i);
        if self.current.is_none() {
            self.current = Some(level);
            self.balancect[level] += self.realbweight[level] as i64;
        }
    }

    /// Removes `t` (boosted weight `bw`) from `level`.
    pub fn dequeue(&mut self, level: usize, t: T, bw: u64) {
        let q = &mut self.queues[level];
        let i = q.iter().position(|&x| x == t).expect("entity in its priority queue");
        q.remove(i);
        self.realbweight[level] -= bw;
        self.bweight -= bw;
        self.nr -= 1;
        let p = self.pos(level);
        if !self.queues[level].is_empty() {
            self.sort_down(p);
            return;
        }
        self.sorted.remove(p);
        self.balancect[level] = 0;
        if self.current == Some(level) {
            // The next queue becomes current and is credited; at the end of the list, the previous.
            self.current = match (self.sorted.get(p), p.checked_sub(1).and_then(|q| self.sorted.get(q))) {
                (Some(&next), _) => {
                    self.balancect[next] += self.realbweight[next] as i64;
                    Some(next)
                }
                (None, Some(&prev)) => Some(prev),
                (None, None) => None,
            };
        }
    }

    /// Moves `t` to the tail of its `level` (round robin after it ran); weights and the picker's state
    /// are unchanged, since the queue never really empties.
    pub fn requeue_tail(&mut self, level: usize, t: T) {
        let q = &mut self.queues[level];
        let i = q.iter().position(|&x| x == t).expect("entity in its priority queue");
        q.remove(i);
        q.push_back(t);
    }

    /// Picks the next entity by balance and run cost (see the module docs); `None` when empty. The
    /// entity stays queued: the caller requeues it after it ran. Also returns the queues checked.
    pub fn pick(&mut self) -> Option<(T, usize)> {
        let cur = self.current?;
        let runcost = self.runcost() as i64;
        let mut p = self.pos(cur);
        let mut checked = 1;
        loop {
            let level = self.sorted[p];
            if self.balancect[level] >= runcost {
                self.balancect[level] -= runcost;
                self.current = Some(level);
                return self.queues[level].front().map(|&t| (t, checked));
            }
            p = (p + 1) % self.sorted.len();
            let next = self.sorted[p];
            self.balancect[next] += self.realbweight[next] as i64;
            checked += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sorted_list_follows_realbweight() {
        let mut rq = Runqueue::<TaskId>::default();
        rq.enqueue(24, TaskId(0), 1024);
        rq.enqueue(20, TaskId(1), 335);
        rq.enqueue(20, TaskId(2), 335);
        rq.enqueue(20, TaskId(3), 335);
        assert_eq!(rq.sorted_levels(), &[24, 20], "3 x 335 = 1005 < 1024");
        rq.enqueue(20, TaskId(4), 335);
        assert_eq!(rq.sorted_levels(), &[20, 24], "4 x 335 = 1340 > 1024");
        assert_eq!((rq.runcost(), rq.bweight, rq.len()), (1340, 2364, 5));
        rq.dequeue(20, TaskId(4), 335);
        rq.dequeue(20, TaskId(1), 335);
        assert_eq!(rq.sorted_levels(), &[24, 20]);
        assert_eq!(rq.queue(20).iter().copied().collect::<Vec<_>>(), vec![TaskId(2), TaskId(3)]);
    }

    #[test]
    fn queues_run_in_proportion_to_their_realbweight() {
        // Three levels with realbweights 3072, 1536 and 512 (3 x 1024, 1 x 1536, 1 x 512).
        let mut rq = Runqueue::<TaskId>::default();
        for t in 0..3 {
            rq.enqueue(24, TaskId(t), 1024);
        }
        rq.enqueue(26, TaskId(3), 1536);
        rq.enqueue(20, TaskId(4), 512);
        let mut runs = [0u64; NR_LEVELS];
        for _ in 0..5120 {
            let (t, _) = rq.pick().unwrap();
            let level = [24, 24, 24, 26, 20][t.idx()];
            runs[level] += 1;
            // Round robin inside the level: the entity goes back to the tail.
            rq.requeue_tail(level, t);
        }
        // 5120 picks split 3072 : 1536 : 512 = 3072, 1536, 512 exactly over whole passes.
        assert_eq!((runs[24], runs[26], runs[20]), (3072, 1536, 512));
    }

    #[test]
    fn an_emptied_current_queue_hands_over_to_the_next_then_the_previous() {
        let mut rq = Runqueue::<TaskId>::default();
        rq.enqueue(30, TaskId(0), 3000);
        rq.enqueue(20, TaskId(1), 300);
        rq.enqueue(10, TaskId(2), 30);
        assert_eq!(rq.pick().map(|p| p.0), Some(TaskId(0)));
        // Level 30 (current) empties: level 20, next in the list, becomes current and is credited.
        rq.dequeue(30, TaskId(0), 3000);
        assert_eq!(rq.current, Some(20));
        assert_eq!(rq.runcost(), 300);
        // Level 10 is the last; emptying it while current falls back to the previous one.
        rq.current = Some(10);
        rq.dequeue(10, TaskId(2), 30);
        assert_eq!(rq.current, Some(20));
        rq.dequeue(20, TaskId(1), 300);
        assert_eq!((rq.current, rq.is_empty(), rq.bweight), (None, true, 0));
        assert_eq!(rq.pick(), None);
    }
}
