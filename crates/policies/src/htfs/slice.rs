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
}

impl AdaptiveSlice {
    /// Starts at the longest slice.
    pub fn new(now: Ns) -> AdaptiveSlice {
        AdaptiveSlice { shift: MAX_SLICE_SHIFT, sliceshrink: 0, last_clear: now, quiet_since: now }
    }

    /// The normal slice, ns.
    pub fn slice_ns(&self) -> Ns {
        1 << self.shift
    }

    /// An interactive entity waited more than 10 ms.
    pub fn latency_too_high(&mut self, now: Ns) {
        self.quiet_since = now;
        self.sliceshrink += 1;
        if self.sliceshrink > 1 {
            self.shift = (self.shift - 1).max(INTER_SLICE_SHIFT);
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
            self.shift = (self.shift + 1).min(MAX_SLICE_SHIFT);
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
    }

    #[test]
    fn stays_within_two_to_the_17_and_30() {
        let mut a = AdaptiveSlice::new(0);
        for i in 0..100 {
            a.latency_too_high(i * MS);
        }
        assert_eq!(a.shift, INTER_SLICE_SHIFT);
        for i in 1..100 {
            a.tick(i * 100 * MS + 10 * MS);
        }
        assert_eq!(a.shift, MAX_SLICE_SHIFT);
    }
}
