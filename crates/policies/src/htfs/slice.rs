//! HTFS adaptive timeslices (seed 000 sec. 4.9.1): the CPU's normal timeslice is halved when
//! interactive entities wait too long and doubled again after a quiet spell, between the interactive
//! slice (2^17 ns) and 2^30 ns.
//!
//! Each time an entity waits on an interactive runqueue for more than 10 ms (seen at the first tick past
//! 10 ms, or when it is picked if that comes first; once per wait), the indicator `sliceshrink` goes up; when it would exceed 1 the slice is halved and the indicator
//! cleared. Every 10 ms the indicator is cleared. When 100 ms have passed without a late interactive
//! entity (the indicator staying 0), the slice doubles. Table 2 of the thesis is the test.

use schedlab_core::Ns;

/// `2^17` ns: the interactive slice and the shortest normal slice.
pub const INTER_SLICE_SHIFT: u32 = 17;
/// `2^30` ns: the longest normal slice, and the initial one.
pub const MAX_SLICE_SHIFT: u32 = 30;
/// The wait of an interactive entity that counts as "latency too high".
pub const LATE_NS: Ns = 10_000_000;
/// How often the indicator is cleared.
pub const CLEAR_NS: Ns = 10_000_000;
/// How long the indicator must stay clear before the slice doubles.
pub const GROW_NS: Ns = 100_000_000;

/// The per-CPU state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdaptiveSlice {
    /// The normal slice is `2^shift` ns.
    pub shift: u32,
    /// `sliceshrink`.
    pub sliceshrink: u32,
    /// When the indicator was last cleared by the 10 ms clock.
    last_clear: Ns,
    /// When the last late interactive entity (or the last doubling) was seen.
    quiet_since: Ns,
    /// How many late interactive entities were reported (`latency_too_high` calls).
    pub nr_late: u64,
    /// How many times the slice was halved.
    pub nr_halved: u64,
    /// How many times the slice was doubled.
    pub nr_doubled: u64,
    /// The shortest slice's shift reached so far.
    pub min_shift: u32,
}

impl AdaptiveSlice {
    /// Starts at the longest slice.
    pub fn new(now: Ns) -> AdaptiveSlice {
        AdaptiveSlice {
            shift: MAX_SLICE_SHIFT,
            sliceshrink: 0,
            last_clear: now,
            quiet_since: now,
            nr_late: 0,
            nr_halved: 0,
            nr_doubled: 0,
            min_shift: MAX_SLICE_SHIFT,
        }
    }

    /// The normal slice, ns.
    pub fn slice_ns(&self) -> Ns {
        1 << self.shift
    }

    /// An interactive entity waited more than 10 ms.
    pub fn latency_too_high(&mut self, now: Ns) {
        self.quiet_since = now;
        self.nr_late += 1;
        self.sliceshrink += 1;
        if self.sliceshrink > 1 {
            if self.shift > INTER_SLICE_SHIFT {
                self.shift -= 1;
                self.nr_halved += 1;
                self.min_shift = self.min_shift.min(self.shift);
            }
            self.sliceshrink = 0;
        }
    }

    /// The periodic check (every tick): clear the indicator every 10 ms, double after 100 ms quiet.
    pub fn tick(&mut self, now: Ns) {
        if now >= self.last_clear + CLEAR_NS {
            self.last_clear = now - (now - self.last_clear) % CLEAR_NS;
            self.sliceshrink = 0;
        }
        if self.sliceshrink == 0 && now >= self.quiet_since + GROW_NS {
            if self.shift < MAX_SLICE_SHIFT {
                self.shift += 1;
                self.nr_doubled += 1;
            }
            self.quiet_since = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Ns = 1_000_000;

    #[test]
    fn follows_the_event_sequence_of_table_2() {
        // Events 1 ms apart unless stated; (sliceshrink, shift) after each, as in the table.
        let mut a = AdaptiveSlice::new(0);
        assert_eq!((a.sliceshrink, a.shift), (0, 30), "init");
        a.latency_too_high(MS);
        assert_eq!((a.sliceshrink, a.shift), (1, 30), "latency too high");
        a.latency_too_high(2 * MS);
        assert_eq!((a.sliceshrink, a.shift), (0, 29), "latency too high: halved");
        a.latency_too_high(3 * MS);
        assert_eq!((a.sliceshrink, a.shift), (1, 29), "latency too high");
        a.tick(10 * MS);
        assert_eq!((a.sliceshrink, a.shift), (0, 29), "10 ms");
        a.latency_too_high(11 * MS);
        assert_eq!((a.sliceshrink, a.shift), (1, 29), "latency too high");
        a.tick(20 * MS);
        assert_eq!((a.sliceshrink, a.shift), (0, 29), "10 ms");
        a.tick(110 * MS);
        assert_eq!((a.sliceshrink, a.shift), (0, 29), "only 99 ms quiet");
        a.tick(111 * MS);
        assert_eq!((a.sliceshrink, a.shift), (0, 30), "100 ms quiet: doubled");
        // Four late entities, one halving, one doubling; the shortest slice was 2^29 ns.
        assert_eq!((a.nr_late, a.nr_halved, a.nr_doubled, a.min_shift), (4, 1, 1, 29));
    }

    #[test]
    fn stays_within_two_to_the_17_and_30() {
        let mut a = AdaptiveSlice::new(0);
        for i in 0..100 {
            a.latency_too_high(i * MS);
        }
        assert_eq!(a.shift, INTER_SLICE_SHIFT);
        // 50 halvings asked, 13 possible: the counters count what happened.
        assert_eq!((a.nr_late, a.nr_halved, a.min_shift), (100, 13, INTER_SLICE_SHIFT));
        for i in 1..100 {
            a.tick(i * 100 * MS + 10 * MS);
        }
        assert_eq!(a.shift, MAX_SLICE_SHIFT);
        assert_eq!(a.nr_doubled, 13);
    }
}
