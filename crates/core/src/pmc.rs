//! Performance-monitoring counters as a policy sees them (seed 004 sec. 3.2 and 3.6).
//!
//! The engine counts hardware events for the running task. Like a Core2, each CPU counts
//! instructions and cycles all the time (fixed counters) but only two further events at once
//! (programmable counters); the other events are counted in turn, the CPU moving to the next
//! *rotation* every [`ROTATE_EVERY`] scheduling passes. So a policy gets, per event, the count and the
//! cycles during which that event was being counted: `count / cycles_counted` estimates the event's
//! rate per cycle, with an error that grows when a task changes behaviour faster than the rotation.

/// Events, in the order of [`Pmc::count`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PmcEvent {
    /// `instr_retired_any` (fixed counter).
    Instructions,
    /// `cpu_clk_unhalted` (fixed counter).
    Cycles,
    /// `x87_ops_retired_any`.
    X87,
    /// `simd_instr_retired` (MMX).
    Mmx,
    /// `simd_inst_retired_any` (SSE).
    Sse,
    /// `br_inst_retired_any`.
    Branch,
    /// `instr_retired_other`: non-memory instructions (integer = this - x87 - MMX - SSE - branch).
    NonMemory,
    /// Cycles the L2 cache is busy (`cycles - l2_no_req`).
    L2Busy,
    /// Cycles the bus is busy (`cycles - busq_empty`).
    BusBusy,
}

/// Number of events.
pub const NR_PMC_EVENTS: usize = 9;

impl PmcEvent {
    /// All events, in counter order.
    pub const ALL: [PmcEvent; NR_PMC_EVENTS] = [
        PmcEvent::Instructions,
        PmcEvent::Cycles,
        PmcEvent::X87,
        PmcEvent::Mmx,
        PmcEvent::Sse,
        PmcEvent::Branch,
        PmcEvent::NonMemory,
        PmcEvent::L2Busy,
        PmcEvent::BusBusy,
    ];

    /// Index into [`Pmc::count`].
    pub fn idx(self) -> usize {
        self as usize
    }
}

/// The programmable events counted together, one group per rotation (two counters on a Core2).
pub const ROTATIONS: [&[PmcEvent]; 4] = [
    &[PmcEvent::X87, PmcEvent::Mmx],
    &[PmcEvent::Sse, PmcEvent::Branch],
    &[PmcEvent::NonMemory, PmcEvent::L2Busy],
    &[PmcEvent::BusBusy],
];

/// Scheduling passes on a CPU between rotations ("only each 100th scheduling pass").
pub const ROTATE_EVERY: u32 = 100;

/// One task's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pmc {
    /// Events counted, by [`PmcEvent::idx`].
    pub count: [u64; NR_PMC_EVENTS],
    /// Cycles during which each event was being counted.
    pub cycles_counted: [u64; NR_PMC_EVENTS],
}

impl Pmc {
    /// The event's estimated rate per 10,000 cycles (the unit of seed 004 table 4.1), or `None` if it
    /// was never counted.
    pub fn per_10k_cycles(&self, e: PmcEvent) -> Option<u64> {
        let c = self.cycles_counted[e.idx()];
        (c > 0).then(|| (self.count[e.idx()] as u128 * 10_000 / c as u128) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotations_cover_every_programmable_event_once() {
        let mut seen: Vec<PmcEvent> = ROTATIONS.iter().flat_map(|r| r.iter().copied()).collect();
        assert!(ROTATIONS.iter().all(|r| r.len() <= 2), "two programmable counters");
        seen.sort_by_key(|e| e.idx());
        assert_eq!(seen, PmcEvent::ALL[2..].to_vec());
        let mut p = Pmc::default();
        assert_eq!(p.per_10k_cycles(PmcEvent::X87), None);
        p.count[PmcEvent::X87.idx()] = 321;
        p.cycles_counted[PmcEvent::X87.idx()] = 1000;
        assert_eq!(p.per_10k_cycles(PmcEvent::X87), Some(3210));
    }
}
