//! `schedlab validate --random N`: the simulator against the real kernel on N random workloads
//! ([`crate::random_workload`]) nobody tuned the model for.
//!
//! Each workload runs for real `runs` times (at least two: real runs are noisy) and is simulated
//! at `--phases` tick phases per policy ([`crate::validate::simulate_phases`]);
//! [`crate::validate::compare_sides`] pairs the metrics. Per compared row the error is
//! (simulated - mean real) / mean real and the real side's own spread is (max - min) / mean real over
//! its runs. A row whose spread is at least its |error| is *within noise* (the real kernel disagrees
//! with itself by more than the model disagrees with it): neither a pass nor a failure. Rows are then
//! pooled per metric kind across the N workloads: the median and p90 of |error|, the median spread and
//! the counts that pass, fail or are within noise against the kind's target.

use crate::validate::Validation;
use serde::Serialize;
use std::fmt::Write;

/// What a compared row measures, for pooling rows across workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricKind {
    /// Run time per task of one kind of task.
    RunTime,
    /// The run time of CPU-bound tasks (`hog-*`): their CPU share.
    HogCpuShare,
    /// Runnable wait per task.
    RunnableWait,
    /// Voluntary switches per task.
    VoluntarySwitches,
    /// Involuntary switches per task.
    InvoluntarySwitches,
    /// Wakeup latency p50 of tasks that block only in sleeps and timers.
    WakeupLatencyP50,
    /// Wakeup latency p99 of the same tasks.
    WakeupLatencyP99,
    /// CPU time of the whole workload.
    WorkDone,
    /// Anything else (completion time, counters).
    Other,
}

impl MetricKind {
    /// The kind of a row of [`Validation`], by its metric name.
    pub fn of(metric: &str) -> MetricKind {
        if metric.ends_with("run time per task [ms]") {
            MetricKind::RunTime
        } else if metric.ends_with("runnable wait per task [ms]") {
            MetricKind::RunnableWait
        } else if metric.ends_with(": voluntary switches per task") {
            MetricKind::VoluntarySwitches
        } else if metric.ends_with("involuntary switches per task") {
            MetricKind::InvoluntarySwitches
        } else if metric.ends_with("wakeup latency p50 [us]") {
            MetricKind::WakeupLatencyP50
        } else if metric.ends_with("wakeup latency p99 [us]") {
            MetricKind::WakeupLatencyP99
        } else if metric.starts_with("work done") {
            MetricKind::WorkDone
        } else {
            MetricKind::Other
        }
    }

    /// The target for the median |error|, percent (`None`: reported, not judged).
    pub fn target_pct(self) -> Option<f64> {
        match self {
            MetricKind::RunTime | MetricKind::RunnableWait => Some(10.0),
            MetricKind::HogCpuShare => Some(5.0),
            MetricKind::VoluntarySwitches
            | MetricKind::InvoluntarySwitches
            | MetricKind::WakeupLatencyP50 => Some(20.0),
            _ => None,
        }
    }

    /// A label for tables.
    pub fn label(self) -> &'static str {
        match self {
            MetricKind::RunTime => "run time per task",
            MetricKind::HogCpuShare => "CPU share of hogs",
            MetricKind::RunnableWait => "runnable wait per task",
            MetricKind::VoluntarySwitches => "voluntary switches",
            MetricKind::InvoluntarySwitches => "involuntary switches",
            MetricKind::WakeupLatencyP50 => "wakeup latency p50",
            MetricKind::WakeupLatencyP99 => "wakeup latency p99",
            MetricKind::WorkDone => "work done",
            MetricKind::Other => "other",
        }
    }
}

/// How a row compares with its target and with the real side's noise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// |error| within the kind's target, and above the real spread.
    Pass,
    /// |error| above the target and above the real spread.
    Fail,
    /// The real runs disagree with each other by at least the |error|.
    WithinNoise,
    /// The kind has no target and the error is above the spread.
    Reported,
}

/// One compared metric of one workload, against the mean of several real runs.
#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    /// Index of the workload in the series.
    pub workload: u64,
    /// The metric (as `validate` names it).
    pub metric: String,
    /// Its kind.
    pub kind: MetricKind,
    /// Simulated value.
    pub sim: f64,
    /// Mean of the real runs.
    pub real: f64,
    /// (max - min) / mean of the real runs, percent.
    pub real_spread_pct: f64,
    /// (sim - real) / real, percent.
    pub error_pct: f64,
    /// Against target and noise.
    pub verdict: Verdict,
}

/// Pairs one simulation's comparisons with each real run (`per_real[i]` = compare(sim, real i)) into
/// samples: only metrics every real run has, with a non-zero mean.
pub fn samples(workload: u64, per_real: &[Validation]) -> Vec<Sample> {
    let Some(first) = per_real.first() else { return Vec::new() };
    let mut out = Vec::new();
    for row in &first.rows {
        let reals: Vec<f64> = per_real
            .iter()
            .filter_map(|v| v.rows.iter().find(|r| r.metric == row.metric).map(|r| r.real))
            .collect();
        if reals.len() != per_real.len() {
            continue;
        }
        let mean = reals.iter().sum::<f64>() / reals.len() as f64;
        if mean == 0.0 {
            continue;
        }
        let (lo, hi) = reals.iter().fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)));
        let spread = (hi - lo) * 100.0 / mean.abs();
        let error = (row.sim - mean) * 100.0 / mean.abs();
        let mut kinds = vec![MetricKind::of(&row.metric)];
        if kinds[0] == MetricKind::RunTime && row.metric.starts_with("hog-") {
            kinds.push(MetricKind::HogCpuShare);
        }
        for kind in kinds {
            let verdict = if spread >= error.abs() {
                Verdict::WithinNoise
            } else {
                match kind.target_pct() {
                    Some(t) if error.abs() <= t => Verdict::Pass,
                    Some(_) => Verdict::Fail,
                    None => Verdict::Reported,
                }
            };
            out.push(Sample {
                workload,
                metric: row.metric.clone(),
                kind,
                sim: row.sim,
                real: mean,
                real_spread_pct: spread,
                error_pct: error,
                verdict,
            });
        }
    }
    out
}

/// The pooled statistics of one metric kind.
#[derive(Clone, Debug, Serialize)]
pub struct KindSummary {
    /// The kind.
    pub kind: MetricKind,
    /// Rows pooled (across workloads and kinds of task).
    pub rows: usize,
    /// Median |error|, percent.
    pub median_abs_error_pct: f64,
    /// 90th percentile of |error|, percent.
    pub p90_abs_error_pct: f64,
    /// Median real spread, percent.
    pub median_real_spread_pct: f64,
    /// Rows passing their target.
    pub pass: usize,
    /// Rows failing it.
    pub fail: usize,
    /// Rows within the real side's noise.
    pub within_noise: usize,
    /// The target for the median |error|, percent.
    pub target_pct: Option<f64>,
    /// Whether the median |error| meets the target.
    pub median_meets_target: Option<bool>,
}

/// The value at quantile `q` (nearest rank) of `v`, sorted here.
pub fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// Pools samples per metric kind, in the kinds' order.
pub fn summarise(samples: &[Sample]) -> Vec<KindSummary> {
    let mut kinds: Vec<MetricKind> = samples.iter().map(|s| s.kind).collect();
    kinds.sort();
    kinds.dedup();
    kinds
        .into_iter()
        .map(|kind| {
            let of: Vec<&Sample> = samples.iter().filter(|s| s.kind == kind).collect();
            let mut errs: Vec<f64> = of.iter().map(|s| s.error_pct.abs()).collect();
            let mut spreads: Vec<f64> = of.iter().map(|s| s.real_spread_pct).collect();
            let median = quantile(&mut errs, 0.5);
            let count = |v: Verdict| of.iter().filter(|s| s.verdict == v).count();
            KindSummary {
                kind,
                rows: of.len(),
                median_abs_error_pct: median,
                p90_abs_error_pct: quantile(&mut errs, 0.9),
                median_real_spread_pct: quantile(&mut spreads, 0.5),
                pass: count(Verdict::Pass),
                fail: count(Verdict::Fail),
                within_noise: count(Verdict::WithinNoise),
                target_pct: kind.target_pct(),
                median_meets_target: kind.target_pct().map(|t| median <= t),
            }
        })
        .collect()
}

/// The distribution table for a terminal.
pub fn table(policy: &str, n: usize, summary: &[KindSummary]) -> String {
    let mut s =
        format!("{policy}: errors over {n} random workloads (|error| against the mean of the real runs)\n\n");
    let _ = writeln!(
        s,
        "  {:<24} {:>5} {:>10} {:>9} {:>11} {:>5} {:>5} {:>6}  {:>7}",
        "metric kind", "rows", "median|e|", "p90|e|", "real spread", "pass", "fail", "noise", "target"
    );
    for k in summary {
        let target = match (k.target_pct, k.median_meets_target) {
            (Some(t), Some(true)) => format!("<={t:.0} % met"),
            (Some(t), _) => format!("<={t:.0} % not met"),
            _ => "-".into(),
        };
        let _ = writeln!(
            s,
            "  {:<24} {:>5} {:>8.1} % {:>7.1} % {:>9.1} % {:>5} {:>5} {:>6}  {}",
            k.kind.label(),
            k.rows,
            k.median_abs_error_pct,
            k.p90_abs_error_pct,
            k.median_real_spread_pct,
            k.pass,
            k.fail,
            k.within_noise,
            target
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::Row;

    fn v(rows: &[(&str, f64, f64)]) -> Validation {
        Validation {
            schema: "schedlab.validate/1",
            workload: "w".into(),
            machine: "m".into(),
            kernel: "k".into(),
            policy: "eevdf".into(),
            rows: rows
                .iter()
                .map(|&(m, s, r)| Row { metric: m.into(), sim: s, real: r, error_pct: None })
                .collect(),
            within_25pct: 0,
            compared: 0,
            median_abs_error_pct: 0.0,
        }
    }

    #[test]
    fn errors_are_against_the_mean_of_the_real_runs_and_noise_is_their_spread() {
        let a = v(&[
            ("hog-a: run time per task [ms]", 104.0, 90.0),
            ("x: runnable wait per task [ms]", 150.0, 100.0),
        ]);
        let b = v(&[
            ("hog-a: run time per task [ms]", 104.0, 110.0),
            ("x: runnable wait per task [ms]", 150.0, 100.0),
        ]);
        let s = samples(3, &[a, b]);
        // hog run time: mean 100, spread 20 %, error +4 %: within noise, also as a CPU share.
        assert_eq!(s.len(), 3);
        assert_eq!((s[0].kind, s[0].verdict), (MetricKind::RunTime, Verdict::WithinNoise));
        assert!((s[0].error_pct - 4.0).abs() < 1e-9 && (s[0].real_spread_pct - 20.0).abs() < 1e-9);
        assert_eq!((s[1].kind, s[1].verdict), (MetricKind::HogCpuShare, Verdict::WithinNoise));
        // wait: real runs agree (spread 0), error +50 % > 10 %: a failure.
        assert_eq!((s[2].kind, s[2].verdict), (MetricKind::RunnableWait, Verdict::Fail));
        assert!((s[2].error_pct - 50.0).abs() < 1e-9);
    }

    #[test]
    fn a_metric_missing_from_a_real_run_or_zero_is_not_pooled() {
        let a = v(&[("x: voluntary switches per task", 5.0, 0.0), ("y: wakeup latency p50 [us]", 5.0, 4.0)]);
        let b = v(&[("x: voluntary switches per task", 5.0, 0.0)]);
        assert!(samples(0, &[a, b]).is_empty());
    }

    #[test]
    fn summaries_pool_medians_and_p90_by_nearest_rank() {
        let mk = |e: f64| Sample {
            workload: 0,
            metric: "t: runnable wait per task [ms]".into(),
            kind: MetricKind::RunnableWait,
            sim: 100.0 + e,
            real: 100.0,
            real_spread_pct: 1.0,
            error_pct: e,
            verdict: if e.abs() <= 10.0 { Verdict::Pass } else { Verdict::Fail },
        };
        let all: Vec<Sample> =
            [-2.0, 4.0, 8.0, -12.0, 30.0, 1.0, 3.0, 5.0, 6.0, 50.0].into_iter().map(mk).collect();
        let k = &summarise(&all)[0];
        // |e| sorted: 1 2 3 4 5 6 8 12 30 50; median = 5th = 5, p90 = 9th = 30.
        assert_eq!((k.rows, k.median_abs_error_pct, k.p90_abs_error_pct), (10, 5.0, 30.0));
        assert_eq!((k.pass, k.fail, k.median_meets_target), (7, 3, Some(true)));
    }

    #[test]
    fn metric_kinds_by_name() {
        assert_eq!(MetricKind::of("a: voluntary switches per task"), MetricKind::VoluntarySwitches);
        assert_eq!(MetricKind::of("a: involuntary switches per task"), MetricKind::InvoluntarySwitches);
        assert_eq!(MetricKind::of("work done [CPU s]"), MetricKind::WorkDone);
        assert_eq!(MetricKind::of("completion time [s]"), MetricKind::Other);
    }
}
