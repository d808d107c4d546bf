//! The per-CPU load averages of Linux 2.6.38 kernel/sched.c the balancer reads: `cpu_load[]`
//! folded at every tick (`update_cpu_load`, with `decay_load_missed` for ticks an idle CPU did not
//! take), `source_load` / `target_load` and `cpu_avg_load_per_task`. The EEVDF variant reads its PELT
//! average instead (6.6 has no `cpu_load[]`).

use super::Cfs;
use schedlab_core::{CpuId, Ns};

/// `CPU_LOAD_IDX_MAX`.
pub const CPU_LOAD_IDX_MAX: usize = 5;
/// `degrade_zero_ticks`: after this many idle ticks `cpu_load[i]` has decayed to zero.
const DEGRADE_ZERO_TICKS: [u64; CPU_LOAD_IDX_MAX] = [0, 8, 32, 64, 128];

/// `update_cpu_load` for `pending` ticks (0: nothing to do) ending with `this_load`: the ticks
/// missed before the last one decay the averages as idle (`decay_load_missed`), and each index `i`
/// then moves `1/2^i` of the way to `this_load`, rounding up when rising. Shared with O(1).
#[allow(clippy::needless_range_loop)] // i is the averaging index, as in the kernel
pub(crate) fn fold_cpu_load(cpu_load: &mut [u64; CPU_LOAD_IDX_MAX], this_load: u64, pending: u64) {
    if pending == 0 {
        return;
    }
    cpu_load[0] = this_load;
    for i in 1..CPU_LOAD_IDX_MAX {
        let scale = 1u64 << i;
        let mut old = cpu_load[i];
        let missed = pending - 1;
        if missed >= DEGRADE_ZERO_TICKS[i] {
            old = 0;
        } else {
            for _ in 0..missed {
                old = (old * (scale - 1)) >> i;
            }
        }
        let mut new = this_load;
        if new > old {
            new += scale - 1;
        }
        cpu_load[i] = (old * (scale - 1) + new) >> i;
    }
}

impl Cfs {
    /// `update_cpu_load`: folds the ticks since the last update into `cpu_load[]` (the missed ones
    /// decayed as idle, `decay_load_missed`).
    #[inline]
    pub(crate) fn update_cpu_load(&mut self, cpu: CpuId, now: Ns) {
        if self.eevdf {
            // 6.6 has no cpu_load[]: every reader uses the PELT average.
            return;
        }
        let tick = schedlab_core::jiffies_at(now, self.tick_ns, self.tick_phase_ns);
        let this_load = self.weighted_cpuload(cpu, now);
        let st = &mut self.cpus[cpu.idx()];
        let pending = tick.saturating_sub(st.last_load_update_tick);
        st.last_load_update_tick = tick;
        fold_cpu_load(&mut st.cpu_load, this_load, pending);
    }

    fn load_at(&mut self, cpu: CpuId, idx: usize, now: Ns) -> u64 {
        if self.eevdf {
            return self.weighted_cpuload(cpu, now);
        }
        self.update_cpu_load_idle(cpu, now);
        self.cpus[cpu.idx()].cpu_load[idx - 1]
    }

    /// Catches up `cpu_load[]` of a tickless idle CPU before it is read.
    fn update_cpu_load_idle(&mut self, cpu: CpuId, now: Ns) {
        if self.rqs[cpu.idx()].nr_running == 0 {
            self.update_cpu_load(cpu, now);
        }
    }

    /// `source_load(cpu, type)`: a low guess of the load, to migrate from.
    pub(crate) fn source_load(&mut self, cpu: CpuId, idx: usize, now: Ns) -> u64 {
        let total = self.weighted_cpuload(cpu, now);
        if idx == 0 {
            total
        } else {
            self.load_at(cpu, idx, now).min(total)
        }
    }

    /// `target_load(cpu, type)`: a high guess of the load, to migrate to.
    pub(crate) fn target_load(&mut self, cpu: CpuId, idx: usize, now: Ns) -> u64 {
        let total = self.weighted_cpuload(cpu, now);
        if idx == 0 {
            total
        } else {
            self.load_at(cpu, idx, now).max(total)
        }
    }

    /// `cpu_avg_load_per_task`.
    pub(crate) fn cpu_avg_load_per_task(&self, cpu: CpuId, now: Ns) -> u64 {
        // rq->nr_running counts tasks; the root cfs_rq counts top-level entities, so use the
        // per-CPU task count kept by the engine view where groups exist.
        self.weighted_cpuload(cpu, now).checked_div(self.cpu_nr_tasks(cpu)).unwrap_or(0)
    }

    /// Tasks on `cpu` (`rq->nr_running`): queued plus running task entities at every level.
    pub(crate) fn cpu_nr_tasks(&self, cpu: CpuId) -> u64 {
        self.cpu_tasks[cpu.idx()]
    }
}
