//! Frequency scaling and energy (seed 004 sec. 3.5; docs/hardware-model.md).
//!
//! A machine may have frequency levels (with a voltage each), set per package or per core by a
//! governor: `performance` (highest), `powersave` (lowest), `ondemand` (Linux's load-driven governor,
//! sampling the busiest CPU of the domain every `sampling_ns` at its ticks) or `avec` (seed 004 eq.
//! 3.2-3.3: at every context switch, the highest frequency any running task's activity vector asks
//! for). A change takes effect `transition_ns` after it is requested.
//!
//! A task's progress scales with frequency except for its memory-bound part: with `m` its bus demand
//! (the share of its cycles the bus is busy), it progresses at `1 / ((1 - m) x fmax / f + m)` of its
//! speed at the highest frequency. Power per CPU is `static_mw` plus, while busy, `dynamic_mw x (f /
//! fmax) x (V / Vmax)^2`; energy is its integral over the run.

use crate::sim::Sim;
use schedlab_core::{CpuId, Ns};
use serde::{Deserialize, Serialize};

/// A frequency governor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Governor {
    /// Always the highest level.
    Performance,
    /// Always the lowest level.
    Powersave,
    /// Load-driven, sampled every `sampling_ns`.
    Ondemand,
    /// From the running tasks' activity vectors at every context switch (seed 004 sec. 3.5).
    Avec,
}

impl std::str::FromStr for Governor {
    type Err = String;
    fn from_str(s: &str) -> Result<Governor, String> {
        Ok(match s {
            "performance" => Governor::Performance,
            "powersave" => Governor::Powersave,
            "ondemand" => Governor::Ondemand,
            "avec" => Governor::Avec,
            other => {
                return Err(format!("unknown governor `{other}` (performance, powersave, ondemand, avec)"))
            }
        })
    }
}

/// Frequency levels, governor and power model of a machine (`[dvfs]` in TOML).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DvfsModel {
    /// Frequency levels, MHz, ascending. Empty: the CPUs run at `cpu_mhz` only.
    pub levels_mhz: Vec<u32>,
    /// The voltage of each level, mV.
    pub levels_mv: Vec<u32>,
    /// Scale each core on its own (true) or each package as one (false, default).
    pub per_core: bool,
    /// Time from a change request to the new frequency, ns. Default 10 us.
    pub transition_ns: Ns,
    /// The governor. Default performance.
    pub governor: Governor,
    /// Ondemand: sampling period, ns. Default 10 ms.
    pub sampling_ns: Ns,
    /// Ondemand: load (percent) above which it goes to the highest level. Default 80.
    pub up_threshold_pct: u32,
    /// Static (leakage) power per CPU, mW, always drawn. Default 5000.
    pub static_mw: u32,
    /// Dynamic power of a busy CPU at the highest level, mW. Default 25000.
    pub dynamic_mw: u32,
}

impl Default for DvfsModel {
    fn default() -> Self {
        DvfsModel {
            levels_mhz: Vec::new(),
            levels_mv: Vec::new(),
            per_core: false,
            transition_ns: 10_000,
            governor: Governor::Performance,
            sampling_ns: 10_000_000,
            up_threshold_pct: 80,
            static_mw: 5000,
            dynamic_mw: 25_000,
        }
    }
}

impl DvfsModel {
    /// Checks the levels; the error names the key.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.levels_mhz.len() != self.levels_mv.len() {
            return Err((
                "levels_mv",
                format!("{} voltages for {} levels", self.levels_mv.len(), self.levels_mhz.len()),
            ));
        }
        if self.levels_mhz.windows(2).any(|w| w[0] >= w[1]) || self.levels_mhz.contains(&0) {
            return Err(("levels_mhz", "levels must be positive and ascending".into()));
        }
        if !(1..=100).contains(&self.up_threshold_pct) {
            return Err(("up_threshold_pct", format!("{} is not in 1..=100", self.up_threshold_pct)));
        }
        if self.sampling_ns == 0 {
            return Err(("sampling_ns", "must be above 0".into()));
        }
        Ok(())
    }

    /// The progress of a task with memory-bound share `m_permille` at `f` MHz, permille of its progress
    /// at `fmax`.
    pub fn progress_permille(f: u32, fmax: u32, m_permille: u32) -> u64 {
        let m = m_permille.min(1000) as u64;
        let t = (1000 - m) * fmax as u64 / f.max(1) as u64 + m;
        (1_000_000 / t.max(1)).min(1000)
    }

    /// Dynamic power of a busy CPU at level `l`, mW.
    pub fn dynamic_mw_at(&self, l: usize) -> u64 {
        let (Some(&f), Some(&fmax)) = (self.levels_mhz.get(l), self.levels_mhz.last()) else {
            return self.dynamic_mw as u64;
        };
        let (v, vmax) = (self.levels_mv[l] as u64, *self.levels_mv.last().expect("same length") as u64);
        self.dynamic_mw as u64 * f as u64 * v * v / (fmax as u64 * vmax * vmax)
    }

    /// The lowest level at or above `mhz` (the highest if none).
    pub fn level_for(&self, mhz: u64) -> usize {
        self.levels_mhz
            .iter()
            .position(|&f| f as u64 >= mhz)
            .unwrap_or(self.levels_mhz.len().saturating_sub(1))
    }
}

/// A frequency domain's state.
#[derive(Clone, Debug, Default)]
pub(crate) struct Domain {
    pub cpus: Vec<CpuId>,
    pub level: usize,
    pub target: usize,
    pub gen: u32,
    pub last_sample: Ns,
    pub busy_at_sample: Vec<Ns>,
    pub residency: Vec<Ns>,
    pub since: Ns,
}

impl Sim<'_> {
    /// The current frequency of `cpu`, MHz.
    pub(crate) fn cpu_mhz_now(&self, cpu: CpuId) -> u32 {
        self.cpus[cpu.idx()].mhz_now
    }

    /// Caches `cpu`'s frequency and busy dynamic power at its domain's current level (at the start
    /// and whenever the level changes).
    pub(crate) fn refresh_freq(&mut self, cpu: CpuId) {
        let level = self.domains[self.domain_of[cpu.idx()]].level;
        let mhz = self.machine.dvfs.levels_mhz.get(level).copied().unwrap_or(self.machine.cpu_mhz);
        let mw = match self.dynamic_mw_by_level.get(level) {
            Some(&mw) => mw,
            None => self.machine.dvfs.dynamic_mw_at(level),
        };
        let c = &mut self.cpus[cpu.idx()];
        c.mhz_now = mhz;
        c.dynamic_mw = mw;
    }

    /// The highest frequency, MHz.
    pub(crate) fn max_mhz(&self) -> u32 {
        self.machine.dvfs.levels_mhz.last().copied().unwrap_or(self.machine.cpu_mhz)
    }

    /// Asks for level `l` on domain `d`: it takes effect after the transition latency.
    fn request_level(&mut self, d: usize, l: usize) {
        let dom = &mut self.domains[d];
        if dom.target == l {
            return;
        }
        dom.target = l;
        dom.gen = dom.gen.wrapping_add(1);
        let at = self.now + self.machine.dvfs.transition_ns;
        self.q.push(at, crate::event::Ev::Freq { domain: d as u32, gen: self.domains[d].gen });
    }

    /// A requested frequency change arrives: account the domain's running tasks at the old frequency,
    /// switch, and reprogram them at the new one.
    pub(crate) fn on_freq(&mut self, d: usize, gen: u32) {
        if self.domains[d].gen != gen {
            return;
        }
        for i in 0..self.domains[d].cpus.len() {
            self.settle(self.domains[d].cpus[i]);
        }
        let now = self.now;
        let dom = &mut self.domains[d];
        dom.residency[dom.level] += now - dom.since;
        dom.since = now;
        dom.level = dom.target;
        for i in 0..self.domains[d].cpus.len() {
            let c = self.domains[d].cpus[i];
            self.refresh_freq(c);
            if self.cpu_views[c.idx()].curr.is_some() {
                self.cpus[c.idx()].speed = self.contended_speed(c);
                self.program_segment(c);
            }
        }
    }

    /// Ondemand's sample at a tick of `cpu`.
    pub(crate) fn governor_tick(&mut self, cpu: CpuId) {
        if self.machine.dvfs.governor != Governor::Ondemand || self.machine.dvfs.levels_mhz.is_empty() {
            return;
        }
        let d = self.domain_of[cpu.idx()];
        let now = self.now;
        let period = now - self.domains[d].last_sample;
        if period < self.machine.dvfs.sampling_ns {
            return;
        }
        let mut max_load = 0;
        for i in 0..self.domains[d].cpus.len() {
            let c = self.domains[d].cpus[i];
            self.settle(c);
            let busy = self.cpus[c.idx()].busy_ns + self.cpus[c.idx()].overhead_ns;
            let load = (busy - self.domains[d].busy_at_sample[i]) * 100 / period;
            max_load = max_load.max(load);
            self.domains[d].busy_at_sample[i] = busy;
        }
        self.domains[d].last_sample = now;
        let m = &self.machine.dvfs;
        let fmax = self.max_mhz() as u64;
        let level = if max_load >= m.up_threshold_pct as u64 {
            m.levels_mhz.len() - 1
        } else {
            m.level_for(fmax * max_load / m.up_threshold_pct as u64)
        };
        self.request_level(d, level);
    }

    /// The AVEC governor at a context switch on `cpu` (eq. 3.2-3.3): each frequency-sensitive element
    /// of a running task's activity vector asks for `avec[i] x fmax / avec_max` (avec_max: one event
    /// per cycle); the highest request over the domain's running tasks wins. A task not yet measured
    /// asks for the highest frequency.
    pub(crate) fn governor_switch(&mut self, cpu: CpuId) {
        if self.machine.dvfs.governor != Governor::Avec || self.machine.dvfs.levels_mhz.is_empty() {
            return;
        }
        let d = self.domain_of[cpu.idx()];
        let fmax = self.max_mhz() as u64;
        let mut want = 0u64;
        for &c in &self.domains[d].cpus {
            let Some(t) = self.cpu_views[c.idx()].curr else { continue };
            // The running task's activity vector (the scheduler's running average of its slices):
            // instructions, MMX, SSE, x87 and branch rates, the frequency-sensitive elements.
            let asks = match self.tasks[t.idx()].avec.get() {
                Some(v) => [v[0], v[3], v[4], v[5], v[6]].into_iter().max().unwrap_or(0) * fmax / 10_000,
                None => fmax,
            };
            want = want.max(asks);
        }
        let level = self.machine.dvfs.level_for(want);
        self.request_level(d, level);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_scales_with_frequency_except_the_memory_bound_part() {
        assert_eq!(DvfsModel::progress_permille(2400, 2400, 0), 1000);
        assert_eq!(DvfsModel::progress_permille(1200, 2400, 0), 500);
        assert_eq!(DvfsModel::progress_permille(1200, 2400, 1000), 1000);
        // Half memory-bound at half frequency: 1 / (0.5 x 2 + 0.5) = 2/3.
        assert_eq!(DvfsModel::progress_permille(1200, 2400, 500), 666);
    }

    #[test]
    fn dynamic_power_goes_with_f_v_squared_and_levels_round_up() {
        let m =
            DvfsModel { levels_mhz: vec![1600, 2400], levels_mv: vec![1000, 1250], ..DvfsModel::default() };
        assert_eq!(m.dynamic_mw_at(1), 25_000);
        // 25 W x (1600 / 2400) x (1000 / 1250)^2 = 10.67 W.
        assert_eq!(m.dynamic_mw_at(0), 10_666);
        assert_eq!((m.level_for(0), m.level_for(1601), m.level_for(5000)), (0, 1, 1));
        assert!(m.validate().is_ok());
        let bad = DvfsModel { levels_mv: vec![1000], ..m };
        assert_eq!(bad.validate().unwrap_err().0, "levels_mv");
    }
}
