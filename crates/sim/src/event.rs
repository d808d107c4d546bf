//! The event queue: events ordered by `(time, sequence)`, with one re-armable timer per CPU tick,
//! per CPU running segment and per task sleep.
//!
//! Ordering contract: events fire in increasing time; events at the same time fire in the order they
//! were scheduled (the sequence number is a global counter). Nothing else breaks ties, so a run is a
//! pure function of its inputs and seed.
//!
//! Two stores share the sequence counter. One-shot events (reschedule IPIs, task starts, I/O
//! completions, samples, ...) go to a binary heap. The three kinds that are re-armed all the time —
//! a CPU's tick ([`Ev::Tick`]), the end of its running segment ([`Ev::Segment`], reprogrammed at every
//! wakeup preemption check, frequency change and contention change) and a task's timed wakeup
//! ([`Ev::Wake`]). Ticks are armed in firing order and sit in a FIFO. Segment ends and timed wakeups
//! each have one *timer slot* (per CPU, per task) in an indexed binary heap, one heap per kind:
//! arming a slot that is already armed moves it (`O(log n)`) instead of leaving a dead entry behind.
//! Segment ends are re-armed several times per event and there is at most one per CPU, while
//! thousands of sleeping threads may hold wakeup timers; apart, a segment re-arm sifts through a heap
//! of at most as many entries as CPUs (on 64 CPUs with 2,000 sleepers: 6 levels instead of 11). (A
//! tournament tree over the CPUs, a fixed `log2(CPUs)` matches per re-arm, counted more instructions
//! than this heap, whose re-arms mostly move a timer a level or two.)
//! Each kind has at most one live instance per owner (a newer segment or wait makes the older one
//! stale by its generation number), so replacing gives exactly the events the plain heap would have
//! handled, in the same order, minus the stale ones it would have popped and dropped. The plain heap
//! held up to one dead entry per reprogramming and spent a quarter of the engine's time popping them
//! (docs/performance.md).

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
    /// Under sched_ext, the user-space scheduler hears that the task of a CPU blocked (the request
    /// half of a round trip after a block ends); `gen` must match the CPU's block generation.
    ScxBlockSeen {
        /// The CPU.
        cpu: CpuId,
        /// Its block generation.
        gen: u32,
    },
    /// Under sched_ext with the halves of a round trip set, the user-space scheduler hears of a
    /// task's wakeup (the request half of the wakeup's round trip ends): the policy is told then.
    ScxWakeSeen(TaskId),
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

/// A one-shot event or a tick, keyed like the timers (`time << 64 | seq`).
#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u128,
    ev: Ev,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
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
        o.key.cmp(&self.key)
    }
}

/// No position: the timer is not armed.
const UNARMED: u32 = u32::MAX;

/// One armed timer in the indexed heap: its key, its slot (CPU or task index) and the generation
/// the event carries (the heap's kind gives the rest of the event).
#[derive(Clone, Copy, Debug)]
struct Timer {
    /// `time << 64 | seq`: one integer comparison orders timers.
    key: u128,
    slot: u32,
    gen: u32,
}

#[inline]
fn key_of(time: Ns, seq: u64) -> u128 {
    (time as u128) << 64 | seq as u128
}

#[inline]
fn time_of(key: u128) -> Ns {
    (key >> 64) as Ns
}

/// A binary min-heap of timers by `(time, seq)` that knows where each slot's timer sits, so a slot
/// can be re-armed in place.
///
/// Popping is lazy: the earliest timer stays at the root, marked `fired`, until the next operation.
/// The handler of a segment end usually re-arms the same slot at once (the CPU's next segment); that
/// re-arm then overwrites the root and sifts it down once, instead of a removal plus an insertion.
#[derive(Default)]
struct TimerHeap {
    heap: Vec<Timer>,
    /// Heap index of each slot's timer, or [`UNARMED`].
    pos: Vec<u32>,
    /// The root has been popped but not removed yet.
    fired: bool,
}

impl TimerHeap {
    /// Completes a lazy pop.
    #[inline]
    fn settle(&mut self) {
        if !self.fired {
            return;
        }
        self.fired = false;
        let top = self.heap[0].slot as usize;
        self.pos[top] = UNARMED;
        let last = self.heap.pop().expect("a fired timer is in the heap");
        if !self.heap.is_empty() {
            self.heap[0] = last;
            self.sift_down(0);
        }
    }

    fn arm(&mut self, slot: usize, time: Ns, seq: u64, gen: u32) {
        let t = Timer { key: key_of(time, seq), slot: slot as u32, gen };
        if self.fired && self.heap[0].slot as usize == slot {
            // Re-armed by its own handler: reuse the root.
            self.fired = false;
            self.heap[0] = t;
            self.sink(0);
            return;
        }
        self.settle();
        if slot >= self.pos.len() {
            self.pos.resize(slot + 1, UNARMED);
        }
        match self.pos[slot] {
            UNARMED => {
                self.heap.push(t);
                self.sift_up(self.heap.len() - 1);
            }
            i => {
                let i = i as usize;
                // A re-armed timer always has a newer sequence number; it moves up only if earlier.
                let later = t.key > self.heap[i].key;
                self.heap[i] = t;
                if later {
                    self.sink(i);
                } else {
                    self.sift_up(i);
                }
            }
        }
    }

    /// Whether `slot` holds a timer that has not fired.
    fn is_armed(&self, slot: usize) -> bool {
        let fired_here = self.fired && self.heap[0].slot as usize == slot;
        self.pos.get(slot).is_some_and(|&i| i != UNARMED) && !fired_here
    }

    /// Disarms `slot` if it is armed.
    fn cancel(&mut self, slot: usize) {
        if self.fired && self.heap[0].slot as usize == slot {
            self.settle();
            return;
        }
        self.settle();
        let Some(&i) = self.pos.get(slot) else { return };
        if i == UNARMED {
            return;
        }
        let i = i as usize;
        self.pos[slot] = UNARMED;
        let last = self.heap.pop().expect("an armed timer is in the heap");
        if i < self.heap.len() {
            // The last timer fills the hole and moves whichever way its key says.
            let up = i > 0 && last.key < self.heap[(i - 1) / 2].key;
            self.heap[i] = last;
            if up {
                self.sift_up(i);
            } else {
                self.sift_down(i);
            }
        }
    }

    /// The key of the earliest timer.
    #[inline]
    fn peek_key(&mut self) -> Option<u128> {
        self.settle();
        self.heap.first().map(|t| t.key)
    }

    /// Pops the earliest timer (lazily: see the type's comment).
    #[inline]
    fn pop(&mut self) -> Option<Timer> {
        self.settle();
        let top = *self.heap.first()?;
        self.fired = true;
        Some(top)
    }

    fn len(&self) -> usize {
        self.heap.len() - self.fired as usize
    }

    #[inline]
    fn place(&mut self, i: usize, t: Timer) {
        self.heap[i] = t;
        self.pos[t.slot as usize] = i as u32;
    }

    fn sift_up(&mut self, mut i: usize) {
        let t = self.heap[i];
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.heap[parent].key <= t.key {
                break;
            }
            self.place(i, self.heap[parent]);
            i = parent;
        }
        self.place(i, t);
    }

    /// Moves the timer at `i` down while a child is earlier, stopping at its place: for a re-armed
    /// timer, whose new time may fall anywhere among the others.
    fn sink(&mut self, mut i: usize) {
        let n = self.heap.len();
        let t = self.heap[i];
        loop {
            let left = 2 * i + 1;
            if left >= n {
                break;
            }
            let right = left + 1;
            let child = if right < n && self.heap[right].key < self.heap[left].key { right } else { left };
            if self.heap[child].key >= t.key {
                break;
            }
            self.place(i, self.heap[child]);
            i = child;
        }
        self.place(i, t);
    }

    /// Moves the timer at `i` down to its place: the hole goes to the bottom along the earlier
    /// children (one comparison per level), then the timer rises from there (a later timer, the usual
    /// case here, rises little).
    fn sift_down(&mut self, mut i: usize) {
        let t = self.heap[i];
        let n = self.heap.len();
        loop {
            let left = 2 * i + 1;
            if left >= n {
                break;
            }
            let right = left + 1;
            let child = if right < n && self.heap[right].key < self.heap[left].key { right } else { left };
            self.place(i, self.heap[child]);
            i = child;
        }
        self.heap[i] = t;
        self.sift_up(i);
    }
}

/// A FIFO of entries in key order, of a fixed power-of-two capacity.
struct TickRing {
    buf: Vec<Entry>,
    head: usize,
    len: usize,
}

impl TickRing {
    fn new(min_capacity: usize) -> Self {
        let cap = min_capacity.max(1).next_power_of_two();
        Self { buf: vec![Entry { key: 0, ev: Ev::Stop }; cap], head: 0, len: 0 }
    }

    /// Appends `e`; false (and nothing done) if it would break the order or the ring is full.
    #[inline(always)]
    fn push(&mut self, e: Entry) -> bool {
        let mask = self.buf.len() - 1;
        if self.len == self.buf.len()
            || (self.len > 0 && time_of(self.buf[(self.head + self.len - 1) & mask].key) > time_of(e.key))
        {
            return false;
        }
        self.buf[(self.head + self.len) & mask] = e;
        self.len += 1;
        true
    }

    #[inline]
    fn front_key(&self) -> Option<u128> {
        (self.len > 0).then(|| self.buf[self.head].key)
    }

    #[inline]
    fn pop(&mut self) -> Option<Entry> {
        if self.len == 0 {
            return None;
        }
        let e = self.buf[self.head];
        self.head = (self.head + 1) & (self.buf.len() - 1);
        self.len -= 1;
        Some(e)
    }
}

/// The queue.
pub struct EventQueue {
    heap: BinaryHeap<Entry>,
    /// Segment ends, one slot per CPU.
    segments: TimerHeap,
    /// Timed wakeups, one slot per task.
    wakes: TimerHeap,
    /// Ticks in `(time, seq)` order: every CPU's tick is armed for the next multiple of the tick
    /// period after "now", which never decreases, so ticks are armed in firing order and a FIFO holds
    /// them in `O(1)`. A tick that would break the order, or overflow the FIFO (neither happens: the
    /// engine arms at most one tick per CPU), goes to `heap`.
    ticks: TickRing,
    seq: u64,
}

impl EventQueue {
    /// An empty queue for a machine of `nr_cpus` CPUs.
    pub fn new(nr_cpus: usize) -> Self {
        let segments = TimerHeap { pos: vec![UNARMED; nr_cpus], ..Default::default() };
        Self {
            heap: BinaryHeap::new(),
            segments,
            wakes: TimerHeap::default(),
            ticks: TickRing::new(nr_cpus),
            seq: 0,
        }
    }

    /// Schedules `ev` at `time`. A segment end or timed wakeup replaces the pending one of the same
    /// CPU or task, if any (the engine arms at most one tick per CPU itself).
    pub fn push(&mut self, time: Ns, ev: Ev) {
        match ev {
            Ev::Segment { cpu, gen } => self.arm_segment(cpu, time, gen),
            Ev::Wake { task, gen } => self.arm_wake(task, time, gen),
            Ev::Tick(cpu) => self.push_tick(cpu, time),
            _ => {
                self.seq += 1;
                self.heap.push(Entry { key: key_of(time, self.seq), ev })
            }
        }
    }

    /// Schedules the tick of `cpu` at `time`.
    #[inline(always)]
    pub fn push_tick(&mut self, cpu: CpuId, time: Ns) {
        self.seq += 1;
        let e = Entry { key: key_of(time, self.seq), ev: Ev::Tick(cpu) };
        if !self.ticks.push(e) {
            self.heap.push(e);
        }
    }

    /// Arms the segment end of `cpu` at `time` (replacing the pending one).
    #[inline]
    pub fn arm_segment(&mut self, cpu: CpuId, time: Ns, gen: u32) {
        self.seq += 1;
        self.segments.arm(cpu.idx(), time, self.seq, gen);
    }

    /// Arms the timed wakeup of `task` at `time` (replacing the pending one).
    #[inline]
    pub fn arm_wake(&mut self, task: TaskId, time: Ns, gen: u32) {
        self.seq += 1;
        self.wakes.arm(task.idx(), time, self.seq, gen);
    }

    /// Disarms the pending segment end of `cpu`, if any (it could not fire before the run ends).
    #[inline]
    pub fn cancel_segment(&mut self, cpu: CpuId) {
        self.segments.cancel(cpu.idx());
    }

    /// Whether a timed wakeup of `task` is pending.
    pub fn wake_pending(&self, task: TaskId) -> bool {
        self.wakes.is_armed(task.idx())
    }

    /// Removes and returns the earliest event.
    #[inline]
    pub fn pop(&mut self) -> Option<(Ns, Ev)> {
        const NONE: u128 = u128::MAX;
        let tick = self.ticks.front_key().unwrap_or(NONE);
        let heap = self.heap.peek().map_or(NONE, |e| e.key);
        let seg = self.segments.peek_key().unwrap_or(NONE);
        let wake = self.wakes.peek_key().unwrap_or(NONE);
        if tick < heap && tick < seg && tick < wake {
            return self.ticks.pop().map(|e| (time_of(e.key), e.ev));
        }
        if seg < heap && seg < wake {
            let t = self.segments.pop()?;
            return Some((time_of(t.key), Ev::Segment { cpu: CpuId(t.slot), gen: t.gen }));
        }
        if wake < heap {
            let t = self.wakes.pop()?;
            return Some((time_of(t.key), Ev::Wake { task: TaskId(t.slot), gen: t.gen }));
        }
        self.heap.pop().map(|e| (time_of(e.key), e.ev))
    }

    /// Events pending.
    pub fn len(&self) -> usize {
        self.heap.len() + self.segments.len() + self.wakes.len() + self.ticks.len
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_then_insertion_order() {
        let mut q = EventQueue::new(4);
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

    /// Ticks beyond the ring's capacity, or armed out of order, still come out in `(time, seq)`
    /// order (through the one-shot heap).
    #[test]
    fn ticks_that_do_not_fit_the_ring_keep_their_order() {
        let mut q = EventQueue::new(2);
        q.push_tick(CpuId(0), 20);
        q.push_tick(CpuId(1), 20);
        q.push_tick(CpuId(2), 30); // the ring (2 entries) is full
        q.push_tick(CpuId(3), 10); // earlier than the ring's last
        q.push(20, Ev::Resched(CpuId(0)));
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            vec![
                (10, Ev::Tick(CpuId(3))),
                (20, Ev::Tick(CpuId(0))),
                (20, Ev::Tick(CpuId(1))),
                (20, Ev::Resched(CpuId(0))),
                (30, Ev::Tick(CpuId(2))),
            ]
        );
        assert!(q.is_empty());
    }

    /// The queue must give exactly what a plain `(time, seq)` heap with generation checks would have
    /// handled: a reference model pushes every event into a sorted list and drops superseded
    /// segment ends and wakeups when they come up; both are driven by the same pseudo-random script.
    #[test]
    fn matches_a_plain_heap_that_drops_stale_entries() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let (cpus, tasks) = (5u32, 7u32);
        let mut q = EventQueue::new(cpus as usize);
        // Reference: every push, with its sequence number; the live generation per segment/wake owner.
        let mut reference: Vec<(Ns, u64, Ev)> = Vec::new();
        let (mut seg_gen, mut wake_gen) = (vec![0u32; cpus as usize], vec![0u32; tasks as usize]);
        let mut tick_armed = vec![false; cpus as usize];
        let (mut now, mut seq) = (0u64, 0u64);
        let mut got = Vec::new();
        let mut want = Vec::new();
        for step in 0..20_000 {
            // Push a few events, then pop one from each side.
            for _ in 0..next(3) {
                let ev = match next(6) {
                    0 => {
                        let c = next(cpus as u64) as u32;
                        if tick_armed[c as usize] {
                            continue;
                        }
                        tick_armed[c as usize] = true;
                        Ev::Tick(CpuId(c))
                    }
                    1 | 2 => {
                        let c = next(cpus as u64) as usize;
                        seg_gen[c] += 1;
                        Ev::Segment { cpu: CpuId(c as u32), gen: seg_gen[c] }
                    }
                    3 => {
                        let t = next(tasks as u64) as usize;
                        wake_gen[t] += 1;
                        Ev::Wake { task: TaskId(t as u32), gen: wake_gen[t] }
                    }
                    4 => Ev::Resched(CpuId(next(cpus as u64) as u32)),
                    _ => Ev::IoDone(step),
                };
                let time = match ev {
                    Ev::Tick(_) => (now / 1000 + 1) * 1000,
                    _ => now + next(5000),
                };
                seq += 1;
                q.push(time, ev);
                reference.push((time, seq, ev));
            }
            if step % 97 == 0 {
                let c = next(cpus as u64) as usize;
                seg_gen[c] += 1;
                q.cancel_segment(CpuId(c as u32));
            }
            if let Some((t, ev)) = q.pop() {
                got.push((t, ev));
            }
            // The reference pops entries in (time, seq) order until a live one.
            reference.sort_by_key(|&(t, s, _)| std::cmp::Reverse((t, s)));
            while let Some((t, _, ev)) = reference.pop() {
                let live = match ev {
                    Ev::Segment { cpu, gen } => seg_gen[cpu.idx()] == gen,
                    Ev::Wake { task, gen } => wake_gen[task.idx()] == gen,
                    _ => true,
                };
                if live {
                    if let Ev::Tick(c) = ev {
                        tick_armed[c.idx()] = false;
                    }
                    now = t;
                    want.push((t, ev));
                    break;
                }
            }
        }
        assert!(want.len() > 10_000);
        assert_eq!(got, want);
    }
}
