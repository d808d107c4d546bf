//! Runs and comparisons as the `schedlab run` and `schedlab compare` commands make them, for every
//! front end: the command line builds these requests from its arguments, the Python package
//! (crates/py) from its keyword arguments, so both accept the same inputs, give the same reports and
//! fail with the same messages.

use crate::resolve::{load_machine, load_policy, load_workload, run_duration};
use anyhow::{bail, Context, Result};
use schedlab_core::SchedPolicy;
use schedlab_sim::{Machine, RunConfig, RunReport, Sim};
use schedlab_workload::{parse_duration, Workload};
use serde_json::Value;

/// One simulation, named as on the command line.
#[derive(Clone, Debug)]
pub struct RunRequest {
    /// Machine preset or machine TOML file.
    pub machine: String,
    /// Policy spec or policy TOML file.
    pub policy: String,
    /// Built-in workload spec, workload TOML file or rt-app JSON file.
    pub workload: String,
    /// Simulated duration with a unit; `None`: the workload's own, else 10 s.
    pub duration: Option<String>,
    /// Seed of the run's random number generator.
    pub seed: u64,
    /// Timer frequency override (100, 250, 300 or 1000).
    pub hz: Option<u32>,
    /// Frequency governor name.
    pub governor: Option<String>,
    /// Time-series sampling interval with a unit; `0s` turns sampling off, and with it the per-CPU
    /// timeline (`RunReport::timeline`) that sampling brings.
    pub sample_interval: String,
    /// Also sample each task's cumulative run time.
    pub sample_tasks: bool,
    /// Check invariants after every event.
    pub check: bool,
    /// Where the ticks fall after the start, with a unit (below one tick); `None`: a tick at the
    /// start.
    pub tick_phase: Option<String>,
}

impl Default for RunRequest {
    /// The defaults of `schedlab run`.
    fn default() -> Self {
        RunRequest {
            machine: "xeon-e5520-2s".into(),
            policy: "cfs".into(),
            workload: "demo".into(),
            duration: None,
            seed: 1,
            hz: None,
            governor: None,
            sample_interval: "10ms".into(),
            sample_tasks: false,
            check: false,
            tick_phase: None,
        }
    }
}

/// A run ready to simulate: the resolved machine, workload, policy and configuration.
pub struct Prepared {
    /// The machine.
    pub machine: Machine,
    /// The workload.
    pub workload: Workload,
    /// The policy.
    pub policy: Box<dyn SchedPolicy>,
    /// The run configuration (default limits; the command line may tighten them).
    pub cfg: RunConfig,
}

impl RunRequest {
    /// Resolves every input, or fails with the message the command line prints.
    pub fn prepare(&self) -> Result<Prepared> {
        let machine = load_machine(&self.machine, self.hz, self.governor.as_deref())?;
        let workload = load_workload(&self.workload)?;
        let policy = load_policy(&self.policy)?;
        let duration_ns = run_duration(self.duration.as_deref(), &workload)?;
        let sample_interval_ns =
            parse_duration(&self.sample_interval).map_err(|e| anyhow::anyhow!("--sample-interval: {e}"))?;
        let tick_phase_ns = match &self.tick_phase {
            Some(p) => parse_duration(p).map_err(|e| anyhow::anyhow!("--tick-phase: {e}"))?,
            None => 0,
        };
        let cfg = RunConfig {
            duration_ns,
            seed: self.seed,
            sample_interval_ns,
            sample_tasks: self.sample_tasks,
            timeline: sample_interval_ns > 0,
            check_invariants: self.check,
            tick_phase_ns,
            ..RunConfig::default()
        };
        Ok(Prepared { machine, workload, policy, cfg })
    }

    /// Simulates the run and returns its report.
    pub fn simulate(&self) -> Result<RunReport> {
        let mut p = self.prepare()?;
        let report =
            Sim::new(&p.machine, &p.workload, p.policy.as_mut(), self.policy.clone(), p.cfg)?.run()?;
        Ok(report)
    }
}

/// Several policies on the identical machine, workload and seeds, as `schedlab compare` runs them.
#[derive(Clone, Debug)]
pub struct CompareRequest {
    /// Machine preset or file.
    pub machine: String,
    /// Frequency governor name.
    pub governor: Option<String>,
    /// Workload spec or file.
    pub workload: String,
    /// Policy specs.
    pub policies: Vec<String>,
    /// The policy the others are compared with (default: eevdf if listed, else the first).
    pub baseline: Option<String>,
    /// Simulated duration with a unit.
    pub duration: Option<String>,
    /// First seed.
    pub seed: u64,
    /// Seeds per policy (`seed`, `seed + 1`, ...).
    pub repeat: u32,
}

/// The runs of a comparison: each policy's reports (as `schedlab.run/1` JSON), one per seed.
pub struct Simulated {
    /// Policy specs, in column order.
    pub policies: Vec<String>,
    /// Index of the baseline in `policies`.
    pub baseline: usize,
    /// Per policy, one report per seed.
    pub reports: Vec<Vec<Value>>,
    /// The seeds.
    pub seeds: Vec<u64>,
}

impl CompareRequest {
    /// Checks the request and runs every policy with every seed; `on_run(policy index, seed index,
    /// spec, seed)` is called before each run (for progress).
    pub fn simulate(&self, on_run: &mut dyn FnMut(usize, usize, &str, u64)) -> Result<Simulated> {
        let machine = load_machine(&self.machine, None, self.governor.as_deref())?;
        let workload = load_workload(&self.workload)?;
        if self.policies.is_empty() {
            bail!("--policies: no policy given");
        }
        for p in &self.policies {
            load_policy(p).with_context(|| format!("--policies: `{p}`"))?;
        }
        let baseline = match &self.baseline {
            Some(b) => self
                .policies
                .iter()
                .position(|p| p == b)
                .ok_or_else(|| anyhow::anyhow!("--baseline `{b}` is not one of --policies"))?,
            None => self.policies.iter().position(|p| p == "eevdf").unwrap_or(0),
        };
        if self.repeat == 0 {
            bail!("--repeat must be at least 1");
        }
        let duration_ns = run_duration(self.duration.as_deref(), &workload)?;
        let seeds: Vec<u64> = (0..self.repeat as u64).map(|i| self.seed + i).collect();
        let mut reports = Vec::new();
        for (i, spec) in self.policies.iter().enumerate() {
            let mut runs = Vec::new();
            for (j, &seed) in seeds.iter().enumerate() {
                on_run(i, j, spec, seed);
                let mut policy = load_policy(spec)?;
                let cfg = RunConfig { duration_ns, seed, sample_interval_ns: 0, ..RunConfig::default() };
                runs.push(crate::compare::to_json(
                    &Sim::new(&machine, &workload, policy.as_mut(), spec.clone(), cfg)?.run()?,
                ));
            }
            reports.push(runs);
        }
        Ok(Simulated { policies: self.policies.clone(), baseline, reports, seeds })
    }
}
