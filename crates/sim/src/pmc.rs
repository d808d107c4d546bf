//! Performance-counter accounting (seed 004 sec. 3.2, 3.6): the events a running task generates, from
//! its activity profile and the cycles it ran, counted into its [`Pmc`] as the CPU's counter rotation
//! allows (see [`schedlab_core::pmc`]).

use crate::sim::Sim;
use schedlab_core::pmc::{PmcEvent, NR_PMC_EVENTS, ROTATE_EVERY, ROTATIONS};
use schedlab_core::time::mul_div;
use schedlab_core::{CpuId, Ns, TaskId};
use schedlab_workload::Activity;

/// The events of `work_cycles` cycles of progress over `cycles` elapsed cycles (more when contention
/// stalls the task). Event rates follow the activity profile per unit of progress; busy-cycle events
/// cannot exceed the elapsed cycles. A task without a profile retires one instruction per cycle.
#[inline]
pub(crate) fn events(a: Option<&Activity>, cycles: u64, work_cycles: u64) -> [u64; NR_PMC_EVENTS] {
    let mut ev = [0u64; NR_PMC_EVENTS];
    ev[PmcEvent::Cycles.idx()] = cycles;
    let Some(a) = a else {
        ev[PmcEvent::Instructions.idx()] = work_cycles;
        ev[PmcEvent::NonMemory.idx()] = work_cycles;
        return ev;
    };
    let per = |x: u32| mul_div(work_cycles, x as u64, a.cycles.max(1) as u64);
    ev[PmcEvent::Instructions.idx()] = per(a.instr);
    ev[PmcEvent::X87.idx()] = per(a.x87);
    ev[PmcEvent::Mmx.idx()] = per(a.mmx);
    ev[PmcEvent::Sse.idx()] = per(a.sse);
    ev[PmcEvent::Branch.idx()] = per(a.branch);
    let nomem =
        a.int.saturating_add(a.x87).saturating_add(a.mmx).saturating_add(a.sse).saturating_add(a.branch);
    ev[PmcEvent::NonMemory.idx()] = per(nomem);
    ev[PmcEvent::L2Busy.idx()] = per(a.l2).min(cycles);
    ev[PmcEvent::BusBusy.idx()] = per(a.bus).min(cycles);
    ev
}

impl Sim<'_> {
    /// Counts the events of `useful` ns that task `t` ran on `cpu` at its current frequency, making
    /// `progress` ns of progress at full speed (less when slowed by frequency, contention or a cold
    /// cache).
    pub(crate) fn count_events(&mut self, t: TaskId, cpu: CpuId, useful: Ns, progress: Ns) {
        let cycles = mul_div(useful, self.cpu_mhz_now(cpu) as u64, 1000);
        let work_cycles = mul_div(progress, self.max_mhz() as u64, 1000).min(cycles);
        let template = self.tasks[t.idx()].program as usize;
        let ev = events(self.w.tasks[template].activity.as_ref(), cycles, work_cycles);
        let pmc = &mut self.views[t.idx()].pmc;
        for e in [PmcEvent::Instructions, PmcEvent::Cycles] {
            pmc.count[e.idx()] += ev[e.idx()];
            pmc.cycles_counted[e.idx()] += cycles;
        }
        for &e in ROTATIONS[self.cpus[cpu.idx()].pmc_rotation as usize] {
            pmc.count[e.idx()] += ev[e.idx()];
            pmc.cycles_counted[e.idx()] += cycles;
        }
    }

    /// A scheduling pass on `cpu`: every [`ROTATE_EVERY`] passes its counters move to the next
    /// rotation.
    pub(crate) fn pmc_pass(&mut self, cpu: CpuId) {
        let c = &mut self.cpus[cpu.idx()];
        c.pmc_passes += 1;
        if c.pmc_passes >= ROTATE_EVERY {
            c.pmc_passes = 0;
            c.pmc_rotation = (c.pmc_rotation + 1) % ROTATIONS.len() as u8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_follow_the_profile_per_unit_of_progress() {
        // burnP5 of seed 004 table 4.1, 10,000 cycles at full speed.
        let p5 = Activity {
            instr: 6822,
            cycles: 10000,
            l2: 0,
            bus: 178,
            mmx: 0,
            sse: 0,
            x87: 3208,
            branch: 201,
            int: 202,
        };
        let ev = events(Some(&p5), 10_000, 10_000);
        assert_eq!(ev[PmcEvent::Instructions.idx()], 6822);
        assert_eq!(ev[PmcEvent::X87.idx()], 3208);
        assert_eq!(ev[PmcEvent::NonMemory.idx()], 202 + 3208 + 201);
        assert_eq!(ev[PmcEvent::BusBusy.idx()], 178);
        // Stalled to half speed: the same 10,000 cycles retire half the instructions.
        let ev = events(Some(&p5), 10_000, 5_000);
        assert_eq!((ev[PmcEvent::Cycles.idx()], ev[PmcEvent::Instructions.idx()]), (10_000, 3411));
        // Busy cycles are capped by the elapsed cycles (burnBX reports 11187 bus cycles per 9999).
        let bx = Activity {
            instr: 2,
            cycles: 9999,
            l2: 10386,
            bus: 11187,
            mmx: 0,
            sse: 0,
            x87: 0,
            branch: 0,
            int: 1,
        };
        assert_eq!(events(Some(&bx), 9999, 9999)[PmcEvent::BusBusy.idx()], 9999);
        // No profile: one instruction per cycle of progress.
        assert_eq!(events(None, 100, 80)[PmcEvent::Instructions.idx()], 80);
    }
}
