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

/// Elements of an activity vector (seed 004 sec. 3.1), in [`ActivityVector::get`] order.
pub const AVEC_ELEMS: [&str; NR_AVEC_ELEMS] = ["instr", "l2", "bus", "mmx", "sse", "x87", "branch", "int"];
/// Number of activity-vector elements.
pub const NR_AVEC_ELEMS: usize = 8;

/// A task's activity vector (seed 004 sec. 3.1, eq. 3.6): the rates per 10,000 cycles of instructions,
/// L2-busy and bus-busy cycles, MMX, SSE, x87, branch and integer instructions (non-memory minus x87,
/// MMX, SSE and branch), as a running average over the task's slices: after each slice the rates
/// counted in it (only the events the counter rotation was counting) move the average by 1/8, the
/// first sample setting it. Shared by the AVEC scheduler and the engine's AVEC frequency governor, so
/// both read the same vector.
#[derive(Clone, Copy, Debug, Default)]
pub struct ActivityVector {
    vec: [u64; NR_AVEC_ELEMS],
    has: bool,
    seen: Pmc,
}

impl ActivityVector {
    /// Folds the counts since the last update (`pmc` is the task's cumulative counters) into the
    /// average.
    pub fn update(&mut self, pmc: &Pmc) {
        let old = std::mem::replace(&mut self.seen, *pmc);
        let rate = |e: PmcEvent| {
            let dc = pmc.cycles_counted[e.idx()] - old.cycles_counted[e.idx()];
            (dc > 0).then(|| (pmc.count[e.idx()] - old.count[e.idx()]) * 10_000 / dc)
        };
        let samples = [
            rate(PmcEvent::Instructions),
            rate(PmcEvent::L2Busy),
            rate(PmcEvent::BusBusy),
            rate(PmcEvent::Mmx),
            rate(PmcEvent::Sse),
            rate(PmcEvent::X87),
            rate(PmcEvent::Branch),
            None, // integer: derived below
        ];
        let first = !self.has;
        let v = &mut self.vec;
        let mut any = false;
        for (i, s) in samples.iter().enumerate() {
            if let Some(s) = *s {
                v[i] = if first { s } else { (v[i] * 7 + s) / 8 };
                any = true;
            }
        }
        if let Some(nomem) = rate(PmcEvent::NonMemory) {
            // int = non-memory - x87 - MMX - SSE - branch (eq. 3.6), from the current estimates.
            let int = nomem.saturating_sub(v[3] + v[4] + v[5] + v[6]);
            v[7] = if first { int } else { (v[7] * 7 + int) / 8 };
            any = true;
        }
        self.has |= any;
    }

    /// The vector, once a slice has counted something.
    pub fn get(&self) -> Option<[u64; NR_AVEC_ELEMS]> {
        self.has.then_some(self.vec)
    }

    /// Sets the vector (tests of policies that read it).
    pub fn set(&mut self, v: [u64; NR_AVEC_ELEMS]) {
        self.vec = v;
        self.has = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first slice's rates set the vector; each later slice moves an element 1/8 of the way to
    /// the slice's rate, and only for events counted in that slice; integer = non-memory minus x87,
    /// MMX, SSE and branch from the current estimates.
    #[test]
    fn an_activity_vector_is_a_running_average_of_slice_rates() {
        let mut pmc = Pmc::default();
        let mut av = ActivityVector::default();
        assert_eq!(av.get(), None);
        let count = |pmc: &mut Pmc, e: PmcEvent, n: u64, cycles: u64| {
            pmc.count[e.idx()] += n;
            pmc.cycles_counted[e.idx()] += cycles;
        };
        // Slice 1: 8,000 instructions and 2,000 x87 per 10,000 cycles; 9,000 non-memory.
        count(&mut pmc, PmcEvent::Instructions, 8_000, 10_000);
        count(&mut pmc, PmcEvent::X87, 2_000, 10_000);
        count(&mut pmc, PmcEvent::NonMemory, 9_000, 10_000);
        av.update(&pmc);
        assert_eq!(av.get(), Some([8_000, 0, 0, 0, 0, 2_000, 0, 7_000]));
        // Slice 2 (20,000 cycles): no instructions retired, x87 not counted (another rotation).
        count(&mut pmc, PmcEvent::Instructions, 0, 20_000);
        av.update(&pmc);
        assert_eq!(av.get(), Some([7_000, 0, 0, 0, 0, 2_000, 0, 7_000]));
    }

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
