//! `schedlab validate`: the same workload run for real (`schedlab exec`) and simulated on a model of
//! this machine under EEVDF, compared metric by metric.
//!
//! Only metrics both sides define the same way are compared: completion time, work done, the
//! workload's counters per second, and per kind of task (template name without digits) the mean run
//! time, runnable wait, voluntary and involuntary switches, and for kinds that block only in sleeps
//! and timers the wakeup latency (the real side measures it as the thread's lateness; the simulator
//! from the expiry to running: timer slack, idle exit, switch). Machine-wide switch counts are not
//! compared: the simulator counts switches to and from idle, the kernel's per-thread counters do not.
//!
//! A real run starts at an arbitrary point between two ticks, and a task whose timers keep one phase
//! against the tick (a periodic task) meets the tick at that phase for the whole run: whether its
//! wakeups find the running task's slice used up, and so preempt at once, can depend on it. The
//! simulated side is therefore pooled over several tick phases spread evenly over one tick
//! ([`simulate_phases`]), as the real side is the mean of runs at phases nobody chose.

use anyhow::Result;
use schedlab_sim::report::TaskReport;
use schedlab_sim::{Machine, RunConfig, RunReport, Sim};
use schedlab_workload::Workload;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// One compared metric.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// What, with its unit.
    pub metric: String,
    /// Simulated value.
    pub sim: f64,
    /// Real value.
    pub real: f64,
    /// (sim - real) / real, percent (`None` when the real value is 0).
    pub error_pct: Option<f64>,
}

/// The comparison (schema `schedlab.validate/1`).
#[derive(Clone, Debug, Serialize)]
pub struct Validation {
    /// Always `schedlab.validate/1`.
    pub schema: &'static str,
    /// Workload.
    pub workload: String,
    /// The simulated machine.
    pub machine: String,
    /// The real kernel.
    pub kernel: String,
    /// The simulated policy.
    pub policy: String,
    /// Rows.
    pub rows: Vec<Row>,
    /// Rows whose error is within 25 %.
    pub within_25pct: usize,
    /// Rows with an error.
    pub compared: usize,
    /// Median absolute error, percent.
    pub median_abs_error_pct: f64,
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = v.collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Kinds of task (template names without digits) whose only blocking ops are sleeps and timers:
/// their wakeup latency means the same on both sides (the real side measures only sleeps and timers,
/// the simulator every wakeup).
pub fn timer_only_kinds(w: &schedlab_workload::Workload) -> Vec<String> {
    use schedlab_workload::Op;
    w.tasks
        .iter()
        .filter(|t| {
            let ops = &t.program.ops;
            ops.iter().any(|o| matches!(o, Op::Sleep { .. } | Op::Timer { .. }))
                && !ops.iter().any(|o| {
                    matches!(
                        o,
                        Op::Lock(_)
                            | Op::CondWait { .. }
                            | Op::SemWait(_)
                            | Op::Suspend(_)
                            | Op::Recv { .. }
                            | Op::Send { .. }
                            | Op::Barrier(_)
                            | Op::BarrierSpin { .. }
                            | Op::WaitChildren
                            | Op::Io { .. }
                    )
                })
        })
        .map(|t| t.name.chars().filter(|c| !c.is_ascii_digit()).collect())
        .collect()
}

/// What [`compare_sides`] reads of one side of a comparison (a run report's compared figures): saved
/// as JSON for each real run of `validate --random`, so a later series can compare another model
/// with the same real runs (`--real-from`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Side {
    /// Workload name.
    pub workload: String,
    /// The policy (for a real run, the kernel).
    pub policy: String,
    /// The machine's name.
    pub machine: String,
    /// Completion time, if the run completed.
    pub makespan_ns: Option<u64>,
    /// Work done.
    pub work_ns: u64,
    /// Counters: name and rate per second.
    pub counters: Vec<(String, f64)>,
    /// Tasks that started.
    pub tasks: Vec<SideTask>,
}

/// One task of a [`Side`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SideTask {
    /// Template name.
    pub template: String,
    /// Run time.
    pub run_ns: u64,
    /// Runnable wait.
    pub wait_ns: u64,
    /// Voluntary switches.
    pub nvcsw: u64,
    /// Involuntary switches.
    pub nivcsw: u64,
    /// Wakeups with a latency measured.
    pub latency_count: u64,
    /// Wakeup latency p50.
    pub latency_p50_ns: u64,
    /// Wakeup latency p99.
    pub latency_p99_ns: u64,
}

impl Side {
    /// The compared figures of a run report (tasks that never started are left out).
    pub fn of(r: &RunReport) -> Side {
        let task = |t: &TaskReport| SideTask {
            template: t.template.clone(),
            run_ns: t.run_ns,
            wait_ns: t.wait_ns,
            nvcsw: t.nvcsw,
            nivcsw: t.nivcsw,
            latency_count: t.wakeup_latency.count,
            latency_p50_ns: t.wakeup_latency.p50_ns,
            latency_p99_ns: t.wakeup_latency.p99_ns,
        };
        Side {
            workload: r.workload.clone(),
            policy: r.policy.clone(),
            machine: r.machine.name.clone(),
            makespan_ns: r.summary.makespan_ns,
            work_ns: r.summary.work_ns,
            counters: r.counters.iter().map(|c| (c.name.clone(), c.per_sec)).collect(),
            tasks: r.tasks.iter().filter(|t| t.started_ns.is_some()).map(task).collect(),
        }
    }
}

impl Side {
    /// Several runs of one workload as one side: their tasks together (so a kind's per-task mean is
    /// over every run's tasks of that kind), the mean work done and counter rates, and the mean
    /// completion time when every run completed.
    pub fn pooled(runs: &[Side]) -> Side {
        let n = runs.len().max(1) as f64;
        let first = runs.first().cloned().unwrap_or(Side {
            workload: String::new(),
            policy: String::new(),
            machine: String::new(),
            makespan_ns: None,
            work_ns: 0,
            counters: Vec::new(),
            tasks: Vec::new(),
        });
        let makespans: Option<Vec<u64>> = runs.iter().map(|r| r.makespan_ns).collect();
        let counters = first
            .counters
            .iter()
            .map(|(name, _)| {
                let sum: f64 =
                    runs.iter().filter_map(|r| r.counters.iter().find(|c| c.0 == *name)).map(|c| c.1).sum();
                (name.clone(), sum / n)
            })
            .collect();
        Side {
            makespan_ns: makespans.map(|m| (m.iter().map(|&x| x as f64).sum::<f64>() / n).round() as u64),
            work_ns: (runs.iter().map(|r| r.work_ns as f64).sum::<f64>() / n).round() as u64,
            counters,
            tasks: runs.iter().flat_map(|r| r.tasks.iter().cloned()).collect(),
            ..first
        }
    }
}

/// Simulates `workload` under policy `spec` at `phases` tick phases spread evenly over one tick
/// (`k x tick / phases`, k = 0..phases; `cfg`'s own phase is replaced) and pools the runs
/// ([`Side::pooled`]). One phase is the single run with a tick at the start.
pub fn simulate_phases(
    machine: &Machine,
    workload: &Workload,
    spec: &str,
    cfg: &RunConfig,
    phases: u32,
) -> Result<Side> {
    if phases == 0 {
        anyhow::bail!("--phases: at least 1 (one simulated run with a tick at the start)");
    }
    let tick_ns = machine.tick_ns();
    let mut runs = Vec::with_capacity(phases as usize);
    for k in 0..u64::from(phases) {
        let mut policy = crate::load_policy(spec)?;
        let cfg = RunConfig { tick_phase_ns: k * tick_ns / u64::from(phases), ..cfg.clone() };
        runs.push(Side::of(&Sim::new(machine, workload, policy.as_mut(), spec.to_string(), cfg)?.run()?));
    }
    Ok(Side::pooled(&runs))
}

/// Compares a simulated side with a real one of the same workload (the figures of [`Side::of`] a
/// run report, or of several [`Side::pooled`]); wakeup latencies only for the kinds in `timer_only`
/// (see [`timer_only_kinds`]).
pub fn compare_sides(sim: &Side, real: &Side, timer_only: &[String]) -> Validation {
    let policy = sim.policy.clone();
    let mut rows = Vec::new();
    let mut push = |metric: String, s: Option<f64>, r: Option<f64>| {
        if let (Some(s), Some(r)) = (s, r) {
            let error_pct = if r != 0.0 {
                Some((s - r) * 100.0 / r.abs())
            } else if s == 0.0 {
                Some(0.0)
            } else {
                None
            };
            rows.push(Row { metric, sim: s, real: r, error_pct });
        }
    };
    push(
        "completion time [s]".into(),
        sim.makespan_ns.map(|x| x as f64 / 1e9),
        real.makespan_ns.map(|x| x as f64 / 1e9),
    );
    push("work done [CPU s]".into(), Some(sim.work_ns as f64 / 1e9), Some(real.work_ns as f64 / 1e9));
    for (name, per_sec) in &real.counters {
        let s = sim.counters.iter().find(|x| x.0 == *name).map(|x| x.1);
        push(format!("counter {name} [/s]"), s, Some(*per_sec));
    }
    // Tasks are compared per kind: the template name without its digits, so hackbench's g0-receiver3
    // and g1-receiver7 are one kind (`g-receiver`).
    let kind = |t: &SideTask| -> String { t.template.chars().filter(|c| !c.is_ascii_digit()).collect() };
    let mut kinds: Vec<String> = real.tasks.iter().map(kind).collect();
    kinds.sort();
    kinds.dedup();
    for tpl in &kinds {
        let of =
            |r: &'_ Side| -> Vec<SideTask> { r.tasks.iter().filter(|t| kind(t) == *tpl).cloned().collect() };
        let (s, r) = (of(sim), of(real));
        if s.is_empty() || r.is_empty() {
            continue;
        }
        type Get = fn(&SideTask) -> f64;
        let per_task: [(&str, Get); 4] = [
            ("run time per task [ms]", |t| t.run_ns as f64 / 1e6),
            ("runnable wait per task [ms]", |t| t.wait_ns as f64 / 1e6),
            ("voluntary switches per task", |t| t.nvcsw as f64),
            ("involuntary switches per task", |t| t.nivcsw as f64),
        ];
        for (name, get) in per_task {
            push(format!("{tpl}: {name}"), mean(s.iter().map(get)), mean(r.iter().map(get)));
        }
        // Latency only where both sides measure the same wakeups: sleeps and timers alone.
        let timed: Vec<&SideTask> = r.iter().filter(|t| t.latency_count > 0).collect();
        if !timed.is_empty() && timer_only.contains(tpl) {
            let lat = |v: &[&SideTask], p50: bool| {
                mean(v.iter().map(|t| (if p50 { t.latency_p50_ns } else { t.latency_p99_ns }) as f64 / 1e3))
            };
            let sim_timed: Vec<&SideTask> = s.iter().filter(|t| t.latency_count > 0).collect();
            push(format!("{tpl}: wakeup latency p50 [us]"), lat(&sim_timed, true), lat(&timed, true));
            push(format!("{tpl}: wakeup latency p99 [us]"), lat(&sim_timed, false), lat(&timed, false));
        }
    }
    let errs: Vec<f64> = rows.iter().filter_map(|r| r.error_pct.map(f64::abs)).collect();
    let mut sorted = errs.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    Validation {
        schema: "schedlab.validate/1",
        workload: real.workload.clone(),
        machine: sim.machine.clone(),
        kernel: real.policy.clone(),
        policy,
        within_25pct: errs.iter().filter(|e| **e <= 25.0).count(),
        compared: errs.len(),
        median_abs_error_pct: sorted.get(sorted.len() / 2).copied().unwrap_or(0.0),
        rows,
    }
}

fn num(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

impl Validation {
    /// The table for a terminal.
    pub fn table(&self) -> String {
        let mut s = format!(
            "{}: simulated on {} under {} against the real run on {}\n\n",
            self.workload, self.machine, self.policy, self.kernel
        );
        let w = self.rows.iter().map(|r| r.metric.len()).max().unwrap_or(6).max(6);
        let _ = writeln!(s, "  {:<w$}  {:>12}  {:>12}  {:>9}", "metric", "simulated", "real", "error");
        for r in &self.rows {
            let e = r.error_pct.map_or("n/a".into(), |e| format!("{e:+.1} %"));
            let _ = writeln!(s, "  {:<w$}  {:>12}  {:>12}  {:>9}", r.metric, num(r.sim), num(r.real), e);
        }
        let _ = writeln!(
            s,
            "\n  {} of {} metrics within 25 %; median absolute error {:.1} %",
            self.within_25pct, self.compared, self.median_abs_error_pct
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::{Side, SideTask};

    fn side(work_ns: u64, makespan_ns: Option<u64>, runs: &[u64]) -> Side {
        Side {
            workload: "w".into(),
            policy: "eevdf".into(),
            machine: "m".into(),
            makespan_ns,
            work_ns,
            counters: vec![("ops".into(), work_ns as f64)],
            tasks: runs
                .iter()
                .map(|&run_ns| SideTask {
                    template: "t".into(),
                    run_ns,
                    wait_ns: 0,
                    nvcsw: 0,
                    nivcsw: 0,
                    latency_count: 0,
                    latency_p50_ns: 0,
                    latency_p99_ns: 0,
                })
                .collect(),
        }
    }

    /// Two phases: work 100 and 300 pool to 200, counters likewise; the tasks of both runs are
    /// kept, so a kind's mean is over all three; a run that did not complete leaves no completion.
    #[test]
    fn pooled_runs_average_totals_and_keep_every_task() {
        let p = Side::pooled(&[side(100, Some(10), &[1, 2]), side(300, Some(30), &[6])]);
        assert_eq!((p.work_ns, p.makespan_ns), (200, Some(20)));
        assert_eq!(p.counters, vec![("ops".to_string(), 200.0)]);
        assert_eq!(p.tasks.iter().map(|t| t.run_ns).collect::<Vec<_>>(), [1, 2, 6]);
        let v = super::compare_sides(&p, &side(200, Some(20), &[3]), &[]);
        let run = v.rows.iter().find(|r| r.metric == "t: run time per task [ms]").unwrap();
        assert_eq!(run.sim, 3.0 / 1e6, "the mean over the three tasks");
        assert_eq!(Side::pooled(&[side(1, Some(1), &[]), side(1, None, &[])]).makespan_ns, None);
    }
}
