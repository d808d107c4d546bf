//! The summary panel at the top of `schedlab report` (issue 33): for each key metric, which run
//! wins and by how much. Runs of one configuration (policy, machine and workload alike, seeds
//! differing) are repeats: they are pooled into a mean with its 95 % confidence interval
//! ([`crate::compare::Stat`]), and a win whose interval overlaps the runner-up's is called within
//! the noise. The metrics, their units and which direction is better are `schedlab compare`'s
//! ([`crate::compare::metrics`]); those with no better direction (switches, migrations) are listed
//! without a winner.

use crate::compare::{metrics, Better, Stat};
use crate::report_html::esc;
use serde_json::Value;
use std::fmt::Write as _;

/// Runs of one configuration.
pub struct Group<'a> {
    /// What the runs share: policy, and machine and workload when they differ between groups.
    pub name: String,
    /// The runs.
    pub runs: Vec<&'a Value>,
}

fn key(r: &Value) -> (String, String, String) {
    let s = |k: &str| r[k].as_str().unwrap_or("?").to_string();
    (s("policy"), r["machine"]["name"].as_str().unwrap_or("?").to_string(), s("workload"))
}

/// The runs grouped by configuration, in order of first appearance.
pub fn groups(runs: &[Value]) -> Vec<Group<'_>> {
    let mut keys: Vec<(String, String, String)> = Vec::new();
    let mut out: Vec<Group> = Vec::new();
    for r in runs {
        let k = key(r);
        match keys.iter().position(|x| *x == k) {
            Some(i) => out[i].runs.push(r),
            None => {
                keys.push(k);
                out.push(Group { name: String::new(), runs: vec![r] });
            }
        }
    }
    let differ = |f: fn(&(String, String, String)) -> &String| keys.iter().any(|k| f(k) != f(&keys[0]));
    let (machines, workloads) = (differ(|k| &k.1), differ(|k| &k.2));
    for (g, k) in out.iter_mut().zip(&keys) {
        let mut name = k.0.clone();
        if machines {
            let _ = write!(name, " on {}", k.1);
        }
        if workloads {
            let _ = write!(name, " running {}", k.2);
        }
        g.name = name;
    }
    out
}

/// One metric's verdict.
#[derive(Debug)]
pub struct Verdict {
    /// Metric name with unit.
    pub metric: String,
    /// Each group's value (`None`: not measured in some run).
    pub stats: Vec<Option<Stat>>,
    /// The winning group and the runner-up (none when no direction is better or fewer than two
    /// groups have the metric).
    pub winner: Option<(usize, usize)>,
    /// How much better the winner is than the runner-up, percent of the runner-up's value.
    pub margin_pct: Option<f64>,
    /// The winner's and the runner-up's 95 % intervals overlap.
    pub within_noise: bool,
}

/// The verdict on every metric the first run has.
pub fn verdicts(groups: &[Group]) -> Vec<Verdict> {
    let Some(first) = groups.first().and_then(|g| g.runs.first()) else { return Vec::new() };
    metrics(first)
        .into_iter()
        .filter_map(|m| {
            let stats: Vec<Option<Stat>> = groups
                .iter()
                .map(|g| {
                    let v: Option<Vec<f64>> = g.runs.iter().map(|r| (m.get)(r)).collect();
                    v.filter(|v| !v.is_empty()).map(|v| Stat::of(&v))
                })
                .collect();
            if stats.iter().all(Option::is_none) {
                return None;
            }
            let mut ranked: Vec<(usize, Stat)> =
                stats.iter().enumerate().filter_map(|(i, s)| s.map(|s| (i, s))).collect();
            let sign = match m.better {
                Better::Higher => -1.0,
                Better::Lower => 1.0,
                Better::Neither => 0.0,
            };
            ranked.sort_by(|a, b| (sign * a.1.mean).total_cmp(&(sign * b.1.mean)).then(a.0.cmp(&b.0)));
            let (winner, margin_pct, within_noise) = match ranked.as_slice() {
                [w, r, ..] if sign != 0.0 => {
                    let margin =
                        (r.1.mean != 0.0).then(|| (w.1.mean - r.1.mean).abs() * 100.0 / r.1.mean.abs());
                    (Some((w.0, r.0)), margin, w.1.within_noise(&r.1))
                }
                _ => (None, None, false),
            };
            Some(Verdict { metric: m.name, stats, winner, margin_pct, within_noise })
        })
        .collect()
}

fn value(s: &Option<Stat>) -> String {
    match s {
        None => "-".into(),
        Some(s) if s.n > 1 => format!("{} ± {}", short(s.mean), short(s.ci95)),
        Some(s) => short(s.mean),
    }
}

/// About four significant digits.
fn short(x: f64) -> String {
    let a = x.abs();
    if a == 0.0 || (1e-3..1e6).contains(&a) {
        let digits = if a >= 1000.0 {
            0
        } else if a >= 10.0 {
            2
        } else {
            3
        };
        format!("{x:.digits$}")
    } else {
        format!("{x:.3e}")
    }
}

/// The panel: a table of the metrics, one column per configuration, the winner's cell marked, and
/// a sentence per metric saying who wins by how much.
pub fn panel(runs: &[Value]) -> String {
    let groups = groups(runs);
    let verdicts = verdicts(&groups);
    let repeated = groups.iter().any(|g| g.runs.len() > 1);
    let mut out = String::from("<h2>Summary: who wins</h2>\n");
    let _ = writeln!(
        out,
        "<p class=\"note\">{} configuration(s) from {} run(s); {}</p>",
        groups.len(),
        runs.len(),
        if repeated {
            "runs of one configuration with different seeds are pooled: mean ± the 95 % confidence \
             interval of the mean; a win whose interval overlaps the runner-up's is within the noise."
        } else {
            "one run each: no confidence interval (repeat runs with other seeds to get one)."
        }
    );
    out.push_str("<table class=\"summary\"><tr><th>metric</th>");
    for g in &groups {
        let _ = write!(
            out,
            "<th>{} <span class=\"n\">({} run{})</span></th>",
            esc(&g.name),
            g.runs.len(),
            if g.runs.len() == 1 { "" } else { "s" }
        );
    }
    out.push_str("<th>verdict</th></tr>\n");
    for v in &verdicts {
        let _ = write!(out, "<tr><td>{}</td>", esc(&v.metric));
        for (i, s) in v.stats.iter().enumerate() {
            let win = v.winner.is_some_and(|(w, _)| w == i);
            let class = if win && !v.within_noise { " class=\"wins\"" } else { "" };
            let _ = write!(out, "<td{class}>{}</td>", value(s));
        }
        let verdict = match (v.winner, v.margin_pct) {
            (None, _) if v.stats.iter().flatten().count() < 2 => "-".to_string(),
            (None, _) => "no better direction".to_string(),
            (Some((w, r)), margin) => {
                let by = margin.map_or(String::new(), |m| format!(" by {m:.1} %"));
                let noise = if v.within_noise { " (within the noise)" } else { "" };
                format!("{} beats {}{by}{noise}", groups[w].name, groups[r].name)
            }
        };
        let _ = writeln!(out, "<td>{}</td></tr>", esc(&verdict));
    }
    out.push_str("</table>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(policy: &str, seed: u64, work: f64, p99_ns: f64) -> Value {
        json!({
            "policy": policy, "seed": seed, "workload": "w", "source": "simulation",
            "machine": {"name": "m"},
            "summary": {"work_per_sec": work, "wakeup_latency": {"p50_ns": 1000.0, "p99_ns": p99_ns},
                        "switches_per_sec": 10.0}
        })
    }

    #[test]
    fn repeats_pool_into_an_interval_and_the_better_mean_wins() {
        let runs = [
            run("cfs", 1, 1.0, 2_000.0),
            run("ule", 1, 1.5, 9_000.0),
            run("cfs", 2, 1.2, 2_200.0),
            run("ule", 2, 1.7, 9_100.0),
        ];
        let g = groups(&runs);
        assert_eq!(
            g.iter().map(|g| (g.name.as_str(), g.runs.len())).collect::<Vec<_>>(),
            [("cfs", 2), ("ule", 2)]
        );
        let v = verdicts(&g);
        let work = v.iter().find(|v| v.metric == "work done [CPUs]").unwrap();
        // ule 1.6 ± 12.706 x 0.1414 / 1.414 = 1.2706; cfs 1.1 ± the same: they overlap.
        assert_eq!(work.winner, Some((1, 0)));
        let margin = work.margin_pct.unwrap();
        assert!((margin - 0.5 / 1.1 * 100.0).abs() < 1e-9, "{margin}");
        assert!(work.within_noise);
        let ule = work.stats[1].unwrap();
        assert!((ule.ci95 - 12.706 * 0.1).abs() < 1e-9, "{}", ule.ci95);
        // p99: cfs 2.1 ± 1.27 us, ule 9.05 ± 0.635 us; lower wins: cfs, by (9.05 - 2.1) / 9.05,
        // beyond the noise.
        let p99 = v.iter().find(|v| v.metric == "wakeup p99 [us]").unwrap();
        assert_eq!(p99.winner, Some((0, 1)));
        assert!((p99.margin_pct.unwrap() - 6.95 / 9.05 * 100.0).abs() < 1e-9);
        assert!(!p99.within_noise);
        // Switches have no better direction.
        let sw = v.iter().find(|v| v.metric == "switches [/s]").unwrap();
        assert_eq!(sw.winner, None);
        let html = panel(&runs);
        assert!(html.contains("ule beats cfs by 45.5 % (within the noise)"), "{html}");
        assert!(html.contains("cfs beats ule by 76.8 %</td>"), "{html}");
        assert!(html.contains("1.600 ± 1.271"), "{html}");
    }

    #[test]
    fn single_runs_have_no_interval_and_names_say_what_differs() {
        let mut other = run("cfs", 1, 2.0, 1_000.0);
        other["workload"] = json!("x");
        let runs = [run("cfs", 1, 1.0, 2_000.0), other];
        let g = groups(&runs);
        assert_eq!(g.iter().map(|g| g.name.as_str()).collect::<Vec<_>>(), ["cfs running w", "cfs running x"]);
        let v = verdicts(&g);
        let work = v.iter().find(|v| v.metric == "work done [CPUs]").unwrap();
        assert!(!work.within_noise, "one run each: a difference is a difference");
        assert!(panel(&runs).contains("no confidence interval"));
    }
}
