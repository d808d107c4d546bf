//! Shared-resource contention (seed 004): tasks running at the same time slow each other where they
//! share hardware. SMT siblings share functional units, cores share the last-level cache of their
//! domain, and all CPUs of a package share the memory bus.
//!
//! A task's *demand* on a resource is the share of its cycles that use it, from its activity profile
//! (the workload's `activity`: counts per `cycles` cycles, as seed 004 table 4.1 gives them; a share is
//! capped at 1). A task running on CPU `c` is slowed by
//!
//! ```text
//! slowdown = 1 + sum over functional units u  of  k_fu  x d(u)   x (sum of d'(u)   of tasks on c's SMT siblings)
//!              +                                  k_llc x d(llc) x (sum of d'(llc) of tasks on CPUs sharing c's LLC)
//!              +                                  k_bus x d(bus) x (sum of d'(bus) of tasks on CPUs of c's package)
//! ```
//!
//! and makes progress at `speed / slowdown`. The product of demands is the chance that both want the
//! resource in the same cycle (independent use); the factor `k` is how much a cycle of collision costs.
//! Tasks without an activity profile neither suffer nor cause contention.

use crate::sim::Sim;
use schedlab_core::{CpuId, Level};
use schedlab_workload::Activity;
use serde::{Deserialize, Serialize};

/// Contention factors of a machine, permille (1000: two tasks that both use a resource every cycle
/// each run at half speed). Set per machine in TOML (`[contention]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContentionModel {
    /// Whether co-running tasks slow each other at all. Default true.
    pub enabled: bool,
    /// Functional units shared by SMT siblings, per unit (integer, x87, SIMD, branch). Default 500.
    pub smt_fu_permille: u32,
    /// The last-level cache shared by the cores of its domain. Default 300.
    pub llc_permille: u32,
    /// The memory bus shared by the CPUs of a package (the front-side bus). Default 1000.
    pub bus_permille: u32,
}

impl Default for ContentionModel {
    fn default() -> Self {
        ContentionModel { enabled: true, smt_fu_permille: 500, llc_permille: 300, bus_permille: 1000 }
    }
}

/// Resources a task's demand is measured on.
const FU: [usize; 4] = [0, 1, 2, 3];
const LLC: usize = 4;
const BUS: usize = 5;

/// A task's demand on each resource, permille of its cycles: integer, x87, SIMD (MMX + SSE), branch
/// units, LLC busy, bus busy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Demand(pub [u32; 6]);

impl Demand {
    /// From an activity profile (counts per `cycles` cycles), each share capped at 1000 permille.
    pub fn of(a: &Activity) -> Demand {
        let per = |x: u32| ((x as u64 * 1000) / (a.cycles.max(1) as u64)).min(1000) as u32;
        Demand([
            per(a.int),
            per(a.x87),
            per(a.mmx.saturating_add(a.sse)),
            per(a.branch),
            per(a.l2),
            per(a.bus),
        ])
    }

    /// Whether it uses no shared resource.
    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|&x| x == 0)
    }
}

impl ContentionModel {
    /// The slowdown, permille (1000 = none), of a task with demand `own` whose co-runners are `others`,
    /// each with the nearest topology level it shares with the task's CPU.
    pub fn slowdown_permille(&self, own: &Demand, others: impl Iterator<Item = (Level, Demand)>) -> u64 {
        if !self.enabled || own.is_zero() {
            return 1000;
        }
        let mut extra: u64 = 0; // in permille^3
        for (level, d) in others {
            if level == Level::Smt {
                for u in FU {
                    extra += self.smt_fu_permille as u64 * own.0[u] as u64 * d.0[u] as u64;
                }
            }
            if level <= Level::Llc {
                extra += self.llc_permille as u64 * own.0[LLC] as u64 * d.0[LLC] as u64;
            }
            if level <= Level::Socket {
                extra += self.bus_permille as u64 * own.0[BUS] as u64 * d.0[BUS] as u64;
            }
        }
        1000 + extra / 1_000_000
    }
}

impl Sim<'_> {
    /// The speed, permille of nominal, of the task running on `cpu` given its CPU's frequency (see
    /// [`crate::dvfs`]) and what runs around it.
    pub(crate) fn contended_speed(&self, cpu: CpuId) -> u32 {
        let mut base = self.machine.speed_permille[cpu.idx()];
        let Some(t) = self.cpu_views[cpu.idx()].curr else { return base };
        let own = self.demand[t.idx()];
        let (f, fmax) = (self.cpu_mhz_now(cpu), self.max_mhz());
        if f != fmax {
            let p = crate::dvfs::DvfsModel::progress_permille(f, fmax, own.0[BUS]);
            base = ((base as u64 * p) / 1000).max(1) as u32;
        }
        if own.is_zero() {
            return base;
        }
        let topo = &self.machine.topology;
        let others = self.share_span[cpu.idx()].iter().filter(|&c| c != cpu).filter_map(|c| {
            let o = self.cpu_views[c.idx()].curr?;
            Some((topo.level(cpu, c), self.demand[o.idx()]))
        });
        let slow = self.machine.contention.slowdown_permille(&own, others);
        ((base as u64 * 1000) / slow).max(1) as u32
    }

    /// The tasks running on CPUs sharing a resource with `cpu` have new co-runners: account their time
    /// so far at their old speed, then reprogram them at the new one.
    #[inline(always)]
    pub(crate) fn respeed_around(&mut self, cpu: CpuId) {
        // Checked where it is called: most machines and workloads model no contention.
        if self.contention_active {
            self.respeed_contended(cpu);
        }
    }

    /// [`Self::respeed_around`] when contention is modelled.
    fn respeed_contended(&mut self, cpu: CpuId) {
        let span = self.share_span[cpu.idx()];
        for c in span.iter() {
            if c == cpu || self.cpu_views[c.idx()].curr.is_none() {
                continue;
            }
            let speed = self.contended_speed(c);
            if speed != self.cpus[c.idx()].speed {
                self.settle(c);
                self.cpus[c.idx()].speed = speed;
                self.program_segment(c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn burn(l2: u32, bus: u32, x87: u32) -> Demand {
        Demand::of(&Activity { instr: 0, cycles: 10000, l2, bus, mmx: 0, sse: 0, x87, branch: 0, int: 0 })
    }

    #[test]
    fn demands_are_shares_of_cycles_capped_at_one() {
        // burnBX of seed 004 table 4.1: L2 10386 and bus 11187 busy cycles per 9999 cycles.
        let bx = Demand::of(&Activity {
            instr: 2,
            cycles: 9999,
            l2: 10386,
            bus: 11187,
            mmx: 0,
            sse: 0,
            x87: 0,
            branch: 0,
            int: 1,
        });
        assert_eq!(bx.0, [0, 0, 0, 0, 1000, 1000]);
        assert_eq!(burn(0, 178, 3208).0, [0, 320, 0, 0, 0, 17]);
    }

    #[test]
    fn slowdown_is_one_plus_k_times_the_demand_products_per_shared_level() {
        let m = ContentionModel::default();
        let bx = burn(10000, 10000, 0);
        let p5 = burn(0, 178, 3208);
        // Two bus-and-cache-bound tasks on cores sharing the LLC and the bus: 1 + 0.3 + 1.0.
        assert_eq!(m.slowdown_permille(&bx, [(Level::Llc, bx)].into_iter()), 2300);
        // On different packages they share nothing.
        assert_eq!(m.slowdown_permille(&bx, [(Level::Machine, bx)].into_iter()), 1000);
        // Same package, different LLC: the bus only.
        assert_eq!(m.slowdown_permille(&bx, [(Level::Node, bx)].into_iter()), 2000);
        // Against the FPU burner: 1 + 1.0 x 1 x 0.017.
        assert_eq!(m.slowdown_permille(&bx, [(Level::Llc, p5)].into_iter()), 1017);
        // SMT siblings also share the x87 unit: 1 + 0.5 x 0.32 x 0.32 + bus 1.0 x 0.017 x 0.017.
        assert_eq!(
            m.slowdown_permille(&p5, [(Level::Smt, p5)].into_iter()),
            1051,
            "x87 0.5 x 0.32 x 0.32, bus 1.0 x 0.017 x 0.017 rounds away"
        );
        let off = ContentionModel { enabled: false, ..m };
        assert_eq!(off.slowdown_permille(&bx, [(Level::Llc, bx)].into_iter()), 1000);
    }
}
