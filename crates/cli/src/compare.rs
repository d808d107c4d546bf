//! `schedlab compare`: every policy on the identical machine, workload and seeds, side by side.
//!
//! Each metric of each policy is summarised over the seeds by its mean, sample standard deviation and
//! a 95 % confidence interval of the mean (Student's t with n - 1 degrees of freedom). The difference
//! against the baseline policy is in percent of the baseline's mean; it is marked `~` ("inside the
//! noise") when the two confidence intervals overlap, or, with a single seed, never (one deterministic
//! run has no noise to speak of: the same inputs give the same result).

use schedlab_sim::RunReport;
use serde::Serialize;
use serde_json::Value;

/// Whether more of a metric is better, worse, or neither.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    /// More is better (throughput).
    Higher,
    /// Less is better (latency, unfairness, energy).
    Lower,
    /// Neither (context switches, migrations: context, not a goal).
    Neither,
}

/// Reads a metric from a report in its JSON form (`schedlab.run/1`, as `run --json`, `exec --json`
/// and `vm-test` write it), `None` when the report lacks it. Working on the JSON lets a comparison
/// take real runs read from files beside the simulated ones.
pub type Getter = Box<dyn Fn(&Value) -> Option<f64>>;

/// One metric read from a report.
pub struct Metric {
    /// Name with unit, as printed.
    pub name: String,
    /// Direction.
    pub better: Better,
    /// The value in a report, if the report has it.
    pub get: Getter,
}

/// The metrics compared, the workload's own counters (per second) first.
pub fn metrics(first: &Value) -> Vec<Metric> {
    let mut m: Vec<Metric> = Vec::new();
    for c in first["counters"].as_array().into_iter().flatten() {
        let Some(name) = c["name"].as_str().map(String::from) else { continue };
        m.push(Metric {
            name: format!("{name} [/s]"),
            better: Better::Higher,
            get: Box::new(move |r| {
                r["counters"].as_array()?.iter().find(|x| x["name"] == name.as_str())?["per_sec"].as_f64()
            }),
        });
    }
    type Read = fn(&Value) -> Option<f64>;
    let list: Vec<(&str, Better, Read)> = vec![
        ("work done [CPUs]", Better::Higher, |r| r["summary"]["work_per_sec"].as_f64()),
        ("makespan [ms]", Better::Lower, |r| r["summary"]["makespan_ns"].as_f64().map(|x| x / 1e6)),
        ("wakeup p50 [us]", Better::Lower, |r| {
            r["summary"]["wakeup_latency"]["p50_ns"].as_f64().map(|x| x / 1e3)
        }),
        ("wakeup p99 [us]", Better::Lower, |r| {
            r["summary"]["wakeup_latency"]["p99_ns"].as_f64().map(|x| x / 1e3)
        }),
        ("longest wait [ms]", Better::Lower, |r| r["summary"]["max_wait_ns"].as_f64().map(|x| x / 1e6)),
        ("unfairness [ms]", Better::Lower, |r| {
            fairness_defined(r)
                .then(|| r["summary"]["fairness"]["unfairness_ns"].as_f64().map(|x| x / 1e6))?
        }),
        ("Jain index", Better::Higher, |r| {
            fairness_defined(r).then(|| r["summary"]["fairness"]["jain_index"].as_f64())?
        }),
        ("switches [/s]", Better::Neither, |r| r["summary"]["switches_per_sec"].as_f64()),
        ("migrations [/s]", Better::Neither, |r| r["summary"]["migrations_per_sec"].as_f64()),
        ("sched overhead [%]", Better::Lower, |r| {
            let v = |k: &str| r["summary"][k].as_f64();
            let (busy, idle, over) = (v("busy_ns")?, v("idle_ns")?, v("overhead_ns")?);
            let total = busy + idle + over;
            (total > 0.0).then(|| over * 100.0 / total)
        }),
        ("energy [J]", Better::Lower, |r| r["summary"]["energy_uj"].as_f64().map(|x| x / 1e6)),
    ];
    for (name, better, f) in list {
        let real_too = !NOT_MEASURED_FOR_REAL.contains(&name);
        m.push(Metric {
            name: name.into(),
            better,
            get: Box::new(move |r| if real_too || r["source"] != "real" { f(r) } else { None }),
        });
    }
    m
}

/// The metrics a real run (`exec`, `vm-test`) does not measure: its report leaves them at 0
/// (docs/exec.md: the kernel's longest run-queue wait, its scheduling overhead and the energy are
/// not read), so a comparison shows them as `-` rather than a 100 % drop.
pub const NOT_MEASURED_FOR_REAL: [&str; 3] = ["longest wait [ms]", "sched overhead [%]", "energy [J]"];

/// The CPU count of a report's machine.
pub fn nr_cpus_of(v: &Value) -> Option<u64> {
    v["machine"]["nr_cpus"].as_u64()
}

/// A simulated run's report in the JSON form the metrics read.
pub fn to_json(r: &RunReport) -> Value {
    serde_json::to_value(r).expect("a run report serialises")
}

/// Reads a run report written by `run --json`, `exec --json` or `vm-test` (schema
/// `schedlab.run/1`).
pub fn load_report(path: &str) -> anyhow::Result<Value> {
    use anyhow::Context;
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
    let v: Value = serde_json::from_str(&text).with_context(|| format!("{path}: not JSON"))?;
    if v["schema"] != "schedlab.run/1" {
        anyhow::bail!(
            "{path}: not a schedlab run report (schema `schedlab.run/1`, from `run`, `exec` or `vm-test`)"
        );
    }
    Ok(v)
}

/// The column name of a report read from a file: the file's name and where the run happened, e.g.
/// `cfs (real)` for `vm-results/cfs.json` from `vm-test`.
pub fn label_of(v: &Value, path: &str) -> String {
    let source = v["source"].as_str().unwrap_or("file");
    let stem = std::path::Path::new(path).file_stem().and_then(|s| s.to_str()).unwrap_or(path);
    if stem == source {
        stem.to_string()
    } else {
        format!("{stem} ({source})")
    }
}

/// A metric summarised over the seeds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Stat {
    /// Runs.
    pub n: usize,
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation (0 for one run).
    pub sd: f64,
    /// Half-width of the 95 % confidence interval of the mean (0 for one run).
    pub ci95: f64,
}

/// Student's t quantile for a two-sided 95 % interval with `df` degrees of freedom.
pub fn t95(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        31..=60 => 2.000,
        61..=120 => 1.980,
        _ => 1.960,
    }
}

impl Stat {
    /// Mean, sample standard deviation and 95 % interval of `v` (not empty).
    pub fn of(v: &[f64]) -> Stat {
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        if n < 2 {
            return Stat { n, mean, sd: 0.0, ci95: 0.0 };
        }
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64;
        let sd = var.sqrt();
        Stat { n, mean, sd, ci95: t95(n - 1) * sd / (n as f64).sqrt() }
    }

    /// Whether the difference to `base` is inside the noise: the two 95 % intervals overlap.
    pub fn within_noise(&self, base: &Stat) -> bool {
        self.n > 1 && (self.mean - base.mean).abs() <= self.ci95 + base.ci95
    }
}

/// One cell of the comparison.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    /// Policy spec.
    pub policy: String,
    /// The summary, absent when some run lacked the metric.
    pub stat: Option<Stat>,
    /// Difference of the mean against the baseline, percent.
    pub diff_pct: Option<f64>,
    /// The difference is inside the noise.
    pub within_noise: bool,
}

/// One row: a metric across the policies.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Metric name with unit.
    pub metric: String,
    /// Direction.
    pub better: Better,
    /// One cell per policy, in the order given.
    pub cells: Vec<Cell>,
}

/// The whole comparison, as written by `--json` (schema `schedlab.compare/1`).
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// Always `schedlab.compare/1`.
    pub schema: &'static str,
    /// Machine name.
    pub machine: String,
    /// Workload name.
    pub workload: String,
    /// Simulated time per run, ns.
    pub duration_ns: u64,
    /// Seeds run for every policy.
    pub seeds: Vec<u64>,
    /// Baseline policy spec.
    pub baseline: String,
    /// Rows.
    pub rows: Vec<Row>,
}

/// Builds the comparison from `reports[policy][seed]`.
pub fn compare(policies: &[String], baseline: usize, reports: &[Vec<Value>], seeds: &[u64]) -> Comparison {
    let first = &reports[0][0];
    let rows = metrics(first)
        .into_iter()
        .filter_map(|m| {
            let stats: Vec<Option<Stat>> = reports
                .iter()
                .map(|runs| {
                    let v: Option<Vec<f64>> = runs.iter().map(|r| (m.get)(r)).collect();
                    v.filter(|v| !v.is_empty()).map(|v| Stat::of(&v))
                })
                .collect();
            if stats.iter().all(Option::is_none) {
                return None;
            }
            let base = stats[baseline];
            let cells = policies
                .iter()
                .zip(&stats)
                .enumerate()
                .map(|(i, (p, s))| {
                    let (diff_pct, within_noise) = match (s, base) {
                        (Some(s), Some(b)) if i != baseline && b.mean != 0.0 => {
                            (Some((s.mean - b.mean) * 100.0 / b.mean.abs()), s.within_noise(&b))
                        }
                        _ => (None, false),
                    };
                    Cell { policy: p.clone(), stat: *s, diff_pct, within_noise }
                })
                .collect();
            Some(Row { metric: m.name, better: m.better, cells })
        })
        .collect();
    Comparison {
        schema: "schedlab.compare/1",
        machine: first["machine"]["name"].as_str().unwrap_or("").to_string(),
        workload: first["workload"].as_str().unwrap_or("").to_string(),
        duration_ns: first["duration_ns"].as_u64().unwrap_or(0),
        seeds: seeds.to_vec(),
        baseline: policies[baseline].clone(),
        rows,
    }
}

/// A number with about four significant digits.
fn num(x: f64) -> String {
    let a = x.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1000.0 {
        format!("{x:.0}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 10.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// Splits a grid's columns (`widths[0]` the metric names, `base` the baseline's) into blocks of at
/// most `width` characters of text (two spaces of margin and two between columns): all of them in
/// their own order if they fit, else blocks that each start with the metric names and the baseline
/// and take the other columns in order while they fit (at least one each).
fn column_blocks(widths: &[usize], base: Option<usize>, width: usize) -> Vec<Vec<usize>> {
    let line = |cols: &[usize]| {
        2 + cols.iter().map(|&j| widths[j]).sum::<usize>() + 2 * cols.len().saturating_sub(1)
    };
    let all: Vec<usize> = (0..widths.len()).collect();
    if line(&all) <= width {
        return vec![all];
    }
    let fixed: Vec<usize> = std::iter::once(0).chain(base).collect();
    let mut blocks: Vec<Vec<usize>> = Vec::new();
    for j in (1..widths.len()).filter(|j| !fixed.contains(j)) {
        match blocks.last_mut() {
            Some(b) if b.len() > fixed.len() && line(&[b.as_slice(), &[j]].concat()) > width => {
                blocks.push([fixed.as_slice(), &[j]].concat())
            }
            Some(b) => b.push(j),
            None => blocks.push([fixed.as_slice(), &[j]].concat()),
        }
    }
    if blocks.is_empty() {
        blocks.push(fixed);
    }
    blocks
}

/// A difference against the baseline as printed: a percentage, or from ten times the baseline on
/// a ratio (`x31`), which reads at a glance where `+2967550.0 %` does not.
pub fn diff_text(diff_pct: f64) -> String {
    if diff_pct >= 900.0 {
        let ratio = 1.0 + diff_pct / 100.0;
        if ratio >= 100.0 {
            format!("x{ratio:.0}")
        } else {
            format!("x{ratio:.1}")
        }
    } else {
        format!("{diff_pct:+.1} %")
    }
}

impl Comparison {
    /// The side-by-side table.
    pub fn table(&self) -> String {
        let mut out = self.table_header();
        out.push_str(&self.columns(usize::MAX));
        out
    }

    /// The table fitted to `width` columns of text: the policies are split into as few groups as
    /// fit, each printed as a block with the metric names (`schedlab compare` without `--wide`
    /// fits 100 columns). The baseline is in every block, first, so each difference has its base
    /// beside it.
    pub fn table_width(&self, width: usize) -> String {
        let mut out = self.table_header();
        out.push_str(&self.columns(width));
        out
    }

    fn table_header(&self) -> String {
        let mut out = format!(
            "compare: {} on {}, {} s, seed{} {}, baseline {}\n",
            self.workload,
            self.machine,
            self.duration_ns as f64 / 1e9,
            if self.seeds.len() > 1 { "s" } else { "" },
            self.seeds.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(","),
            self.baseline,
        );
        if self.seeds.len() > 1 {
            out.push_str(
                "  values: mean ±95 % CI; (diff vs baseline %, or xN from ten times), ~ = inside the noise\n",
            );
        } else {
            out.push_str(
                "  values: one run each (deterministic); (diff vs baseline %, or xN from ten times)\n",
            );
        }
        out
    }

    /// The grid column (1 + cell index) of the baseline policy.
    fn baseline_column(&self) -> Option<usize> {
        self.rows.first().and_then(|r| r.cells.iter().position(|c| c.policy == self.baseline)).map(|b| b + 1)
    }

    /// The value grid: a header line and one line per metric, the policies in blocks that fit
    /// `width` (one block when `usize::MAX`).
    fn columns(&self, width: usize) -> String {
        let mut grid: Vec<Vec<String>> = Vec::new();
        let mut head = vec!["metric".to_string()];
        head.extend(self.rows.first().map_or(vec![], |r| r.cells.iter().map(|c| c.policy.clone()).collect()));
        grid.push(head);
        for r in &self.rows {
            let mut line = vec![r.metric.clone()];
            for c in &r.cells {
                let mut s = match c.stat {
                    None => "-".to_string(),
                    Some(st) if st.n > 1 => format!("{} ±{}", num(st.mean), num(st.ci95)),
                    Some(st) => num(st.mean),
                };
                if let Some(d) = c.diff_pct {
                    s.push_str(&format!(" ({}{})", diff_text(d), if c.within_noise { " ~" } else { "" }));
                }
                line.push(s);
            }
            grid.push(line);
        }
        let widths: Vec<usize> = (0..grid[0].len())
            .map(|j| grid.iter().map(|l| l[j].chars().count()).max().unwrap_or(0))
            .collect();
        let blocks = column_blocks(&widths, self.baseline_column(), width);
        let mut out = String::new();
        for (i, block) in blocks.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            for l in &grid {
                let cells: Vec<String> =
                    block.iter().map(|&j| format!("{:<w$}", l[j], w = widths[j])).collect();
                out.push_str(&format!("  {}\n", cells.join("  ").trim_end()));
            }
        }
        out
    }

    /// CSV: one line per metric and policy.
    pub fn csv(&self) -> String {
        let mut out = String::from("metric,better,policy,n,mean,sd,ci95,diff_pct,within_noise\n");
        for r in &self.rows {
            for c in &r.cells {
                let (n, mean, sd, ci) =
                    c.stat.map_or((String::new(), String::new(), String::new(), String::new()), |s| {
                        (s.n.to_string(), s.mean.to_string(), s.sd.to_string(), s.ci95.to_string())
                    });
                let better = serde_json::to_string(&r.better).unwrap_or_default().replace('"', "");
                out.push_str(&format!(
                    "\"{}\",{better},\"{}\",{n},{mean},{sd},{ci},{},{}\n",
                    r.metric,
                    c.policy,
                    c.diff_pct.map_or(String::new(), |d| d.to_string()),
                    c.within_noise
                ));
            }
        }
        out
    }
}

/// Whether a report's fairness compares tasks: it is computed over the tasks alive at the end, so
/// with fewer than two (a replay whose threads all exited) it has no value to show (`-`), where
/// its 0 and 1.0 would read as perfect fairness. Reports without the count are taken as they are.
fn fairness_defined(r: &serde_json::Value) -> bool {
    r["summary"]["fairness"]["nr_tasks"].as_u64().is_none_or(|n| n >= 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_tables_split_into_blocks_that_fit_each_with_the_baseline() {
        // Metric names 10 wide, five policies 20 wide, the baseline third: 2 + 10 + 5 x 22 = 122.
        let widths = [10, 20, 20, 20, 20, 20];
        assert_eq!(column_blocks(&widths, Some(3), 122), vec![vec![0, 1, 2, 3, 4, 5]], "fits: own order");
        // In 80: the names, the baseline and two others (2 + 10 + 3 x 22 = 78) per block.
        assert_eq!(column_blocks(&widths, Some(3), 80), vec![vec![0, 3, 1, 2], vec![0, 3, 4, 5]]);
        // Too narrow for even one more column: still one other column per block.
        assert_eq!(
            column_blocks(&widths, Some(1), 20),
            vec![vec![0, 1, 2], vec![0, 1, 3], vec![0, 1, 4], vec![0, 1, 5]]
        );
    }

    #[test]
    fn large_differences_read_as_ratios() {
        assert_eq!(diff_text(12.34), "+12.3 %");
        assert_eq!(diff_text(-99.0), "-99.0 %");
        assert_eq!(diff_text(899.0), "+899.0 %");
        assert_eq!(diff_text(900.0), "x10.0");
        assert_eq!(diff_text(3_000_000.0), "x30001");
    }

    #[test]
    fn a_real_run_shows_what_it_does_not_measure_as_missing() {
        let report = |source: &str| {
            serde_json::json!({
                "source": source,
                "summary": { "max_wait_ns": 0, "energy_uj": 0, "busy_ns": 10, "idle_ns": 0, "overhead_ns": 0,
                             "work_per_sec": 1.5 }
            })
        };
        let (real, sim) = (report("real"), report("simulated"));
        for m in metrics(&sim) {
            let unmeasured = NOT_MEASURED_FOR_REAL.contains(&m.name.as_str());
            match m.name.as_str() {
                "longest wait [ms]" | "sched overhead [%]" | "energy [J]" | "work done [CPUs]" => {
                    assert!((m.get)(&sim).is_some(), "{}", m.name);
                    assert_eq!((m.get)(&real).is_none(), unmeasured, "{}", m.name);
                }
                _ => {}
            }
        }
        assert_eq!(label_of(&real, "out/real.json"), "real");
        assert_eq!(label_of(&real, "vm-results/cfs.json"), "cfs (real)");
    }

    #[test]
    fn fairness_over_fewer_than_two_live_tasks_is_missing_not_perfect() {
        let report = |n: Option<u64>| {
            let mut f = serde_json::json!({ "unfairness_ns": 0, "jain_index": 1.0 });
            if let Some(n) = n {
                f["nr_tasks"] = n.into();
            }
            serde_json::json!({ "source": "simulated", "summary": { "fairness": f } })
        };
        for m in metrics(&report(Some(3))) {
            if m.name == "unfairness [ms]" || m.name == "Jain index" {
                assert!((m.get)(&report(Some(3))).is_some(), "{}", m.name);
                assert!((m.get)(&report(None)).is_some(), "{}: a report without the count", m.name);
                assert!((m.get)(&report(Some(1))).is_none(), "{}: one live task", m.name);
                assert!((m.get)(&report(Some(0))).is_none(), "{}: none", m.name);
            }
        }
    }

    #[test]
    fn mean_sd_and_the_95_percent_interval() {
        let s = Stat::of(&[10.0, 12.0, 14.0]);
        assert_eq!((s.n, s.mean, s.sd), (3, 12.0, 2.0));
        // t(0.975, 2) = 4.303: 4.303 x 2 / sqrt(3).
        assert!((s.ci95 - 4.303 * 2.0 / 3f64.sqrt()).abs() < 1e-9);
        let one = Stat::of(&[5.0]);
        assert_eq!((one.sd, one.ci95), (0.0, 0.0));
        assert!(!one.within_noise(&Stat::of(&[5.0])), "a single deterministic run has no noise band");
        let far = Stat::of(&[30.0, 31.0, 32.0]);
        assert!(!far.within_noise(&s));
        assert!(Stat::of(&[13.0, 14.0, 15.0]).within_noise(&s));
        assert_eq!(t95(1), 12.706);
        assert_eq!(t95(1000), 1.96);
    }
}
