//! `schedlab reproduce --sensitivity`: how far each verdict rests on the experiment's own choices.
//!
//! Every claim is checked at the chosen point (the file as it is) with each seed on its own, then at
//! each end of each free parameter's range (`[[free]]`, one parameter moved at a time, the others at
//! their chosen values; the claim's mean over the seeds there). Seeds are the mode's, at least three
//! (`1, 2, 3` fill up a shorter list). A claim then:
//!
//! - *holds everywhere*: at the chosen point with every seed and at every end;
//! - *holds at the chosen point only*: its mean holds, but some seed or some end does not (the README
//!   counts it as not holding);
//! - *fails at the chosen point*: its mean does not hold, some seed or end does;
//! - *fails everywhere*, or is *not measured* (nowhere measured).
//!
//! A case a parameter does not change is not run again: its chosen-point runs stand in; and a case
//! runs only under the policies some claim reads there. Each run is
//! reduced to the claims' metric values as it ends, so a full sweep does not keep its reports.
//!
//! Beside the verdicts, each experiment lists the machine costs its chosen-point runs charged that no
//! free parameter varies and no source sets ([`super::unvaried`]).

use super::claim::{Outcome, Unit};
use super::spec::{Case, Experiment};
use super::unvaried::{self, Charged, Unvaried};
use super::{check_claims, run_all_map, Job, Options};
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::fmt::Write;

/// At least this many seeds per point.
const MIN_SEEDS: usize = 3;

/// One place a claim was checked: a seed at the chosen point, or a free parameter's range end.
#[derive(Serialize)]
struct Point {
    /// `seed 2`, or `costs.context_switch_ns=4us`.
    at: String,
    /// The number the expectation is checked on there.
    checked: Option<f64>,
    /// Whether it holds there.
    holds: Option<bool>,
}

/// One claim's verdict over all points.
#[derive(Serialize)]
struct ClaimResult {
    id: String,
    verdict: &'static str,
    /// The claim at the chosen point, mean over the seeds.
    chosen: Outcome,
    /// The chosen point's spread over the seeds (min, max of the checked number).
    seed_min: Option<f64>,
    seed_max: Option<f64>,
    points: Vec<Point>,
    /// How the checked numbers are shown (seconds for a time, plain for a ratio).
    #[serde(skip)]
    unit: Unit,
}

fn classify(chosen: Option<bool>, points: &[Point]) -> &'static str {
    let all = || points.iter().all(|p| p.holds == Some(true));
    let none = || points.iter().all(|p| p.holds != Some(true));
    match chosen {
        Some(true) if all() => "holds everywhere",
        Some(true) => "holds at the chosen point only",
        Some(false) if none() => "fails everywhere",
        Some(false) => "fails at the chosen point",
        None if points.iter().all(|p| p.holds.is_none()) => "not measured",
        None if none() => "fails everywhere",
        None => "fails at the chosen point",
    }
}

/// The seeds a point runs: the experiment's, filled up to [`MIN_SEEDS`].
fn seeds_of(exp: &Experiment) -> Vec<u64> {
    fill_seeds(&exp.seeds)
}

/// `seeds`, then the smallest seeds not in it until there are [`MIN_SEEDS`].
fn fill_seeds(seeds: &[u64]) -> Vec<u64> {
    let mut s = seeds.to_vec();
    let mut next = 1;
    while s.len() < MIN_SEEDS {
        if !s.contains(&next) {
            s.push(next);
        }
        next += 1;
    }
    s
}

/// Every claim's metric value in one run (`None` where the run cannot give it).
type Values = Vec<Option<f64>>;

/// One case's runs at one point: per policy (`None` where it was not run), per seed.
type CaseRuns = Vec<Option<Vec<Values>>>;

/// One free parameter's end: its label and each case, `None` where it changes nothing.
struct Variant {
    exp: usize,
    label: String,
    cases: Vec<Option<Case>>,
}

/// `read[case][policy]`: whether some claim of `exp` reads that case's runs under that policy (as its
/// value, reference or base); the sweep runs no others.
fn read_by_claims(exp: &Experiment) -> Vec<Vec<bool>> {
    let read =
        std::cell::RefCell::new(exp.cases.iter().map(|c| vec![false; c.policies.len()]).collect::<Vec<_>>());
    check_claims(exp, &|_, ci, pi| {
        read.borrow_mut()[ci][pi] = true;
        Some(1.0)
    });
    read.into_inner()
}

/// Runs the sensitivity sweep of `exps`; returns the text (or Markdown) to print.
pub fn run(exps: &[Experiment], opts: &Options) -> Result<String> {
    let mut variants: Vec<Variant> = Vec::new();
    for (ei, exp) in exps.iter().enumerate() {
        let file = exp.path.to_string_lossy();
        for f in &exp.free {
            for end in f.ends() {
                let cases = exp
                    .cases
                    .iter()
                    .map(|c| f.case_at(&file, c, end))
                    .collect::<Result<Vec<_>>>()
                    .with_context(|| format!("{}: {}={end}", exp.id(), f.param))?;
                variants.push(Variant { exp: ei, label: format!("{}={end}", f.param), cases });
            }
        }
    }
    let seeds: Vec<Vec<u64>> = exps.iter().map(seeds_of).collect();
    let read: Vec<Vec<Vec<bool>>> = exps.iter().map(read_by_claims).collect();
    let mut jobs: Vec<Job> = Vec::new();
    fn push<'a>(jobs: &mut Vec<Job<'a>>, exp: &'a Experiment, case: &'a Case, seeds: &[u64], read: &[bool]) {
        for pi in (0..case.policies.len()).filter(|&pi| read[pi]) {
            jobs.extend(seeds.iter().map(|&seed| Job { exp, case, policy: pi, seed, scx: None, trim: true }));
        }
    }
    // The chosen points first, then every variant's changed cases, each (policy, seed) in order; only
    // the policies some claim reads in a case are run (the others' runs would change no verdict).
    let mut chosen_jobs: Vec<Job> = Vec::new();
    for (ei, exp) in exps.iter().enumerate() {
        for (ci, case) in exp.cases.iter().enumerate() {
            push(&mut chosen_jobs, exp, case, &seeds[ei], &read[ei][ci]);
        }
    }
    for v in &variants {
        for (ci, case) in v.cases.iter().enumerate() {
            if let Some(case) = case {
                push(&mut jobs, &exps[v.exp], case, &seeds[v.exp], &read[v.exp][ci]);
            }
        }
    }
    chosen_jobs.append(&mut jobs);
    let jobs = chosen_jobs;
    let keep = |job: &Job, report: serde_json::Value| -> (Values, Charged) {
        (job.exp.claims.iter().map(|c| c.metric.eval(&report)).collect(), Charged::of(&report))
    };
    let mut results = run_all_map(&jobs, opts.jobs, opts.progress, keep).into_iter();
    // What each chosen-point run charged of the machine's costs, per experiment: (case, charges).
    let mut charged: Vec<Vec<(usize, Charged)>> = vec![Vec::new(); exps.len()];
    // The runs of one case, per policy (`None` for a policy not run) and seed; the charges of each
    // run go to `charges` when given.
    let mut take = |case: &Case, n_seeds: usize, read: &[bool], mut charges: Option<&mut Vec<Charged>>| {
        (0..case.policies.len())
            .map(|pi| {
                read[pi]
                    .then(|| {
                        (0..n_seeds)
                            .map(|_| {
                                let (values, c) = results.next().unwrap_or_else(|| bail!("lost a run"))?;
                                if let Some(list) = charges.as_deref_mut() {
                                    list.push(c);
                                }
                                Ok(values)
                            })
                            .collect::<Result<Vec<Values>>>()
                    })
                    .transpose()
            })
            .collect::<Result<CaseRuns>>()
    };
    // chosen[exp][case][policy][seed]
    let mut chosen: Vec<Vec<Vec<Vec<Values>>>> = Vec::new();
    for (ei, exp) in exps.iter().enumerate() {
        let mut per_case = Vec::new();
        for (ci, c) in exp.cases.iter().enumerate() {
            let mut list = Vec::new();
            let runs = take(c, seeds[ei].len(), &read[ei][ci], Some(&mut list))?;
            charged[ei].extend(list.into_iter().map(|c| (ci, c)));
            per_case.push(runs.into_iter().map(Option::unwrap_or_default).collect());
        }
        chosen.push(per_case);
    }
    // varied[variant][case][policy]: Some where the variant changed the case and a claim reads it.
    let mut varied: Vec<Vec<Option<CaseRuns>>> = Vec::new();
    for v in &variants {
        let mut per_case = Vec::new();
        for (ci, c) in v.cases.iter().enumerate() {
            per_case
                .push(c.as_ref().map(|c| take(c, seeds[v.exp].len(), &read[v.exp][ci], None)).transpose()?);
        }
        varied.push(per_case);
    }
    let mut out = Vec::new();
    for (ei, exp) in exps.iter().enumerate() {
        let runs = &chosen[ei];
        let mean = |runs: &[Values], k: usize| -> Option<f64> {
            let v: Option<Vec<f64>> = runs.iter().map(|r| r[k]).collect();
            v.filter(|v| !v.is_empty()).map(|v| v.iter().sum::<f64>() / v.len() as f64)
        };
        let at_chosen = check_claims(exp, &|k, ci, pi| mean(&runs[ci][pi], k));
        let per_seed: Vec<Vec<Outcome>> =
            (0..seeds[ei].len()).map(|s| check_claims(exp, &|k, ci, pi| runs[ci][pi][s][k])).collect();
        let per_variant: Vec<(String, Vec<Outcome>)> = variants
            .iter()
            .zip(&varied)
            .filter(|(v, _)| v.exp == ei)
            .map(|(v, cases)| {
                let m = |k: usize, ci: usize, pi: usize| match cases[ci].as_ref().and_then(|r| r[pi].as_ref())
                {
                    Some(r) => mean(r, k),
                    None => mean(&runs[ci][pi], k),
                };
                (v.label.clone(), check_claims(exp, &m))
            })
            .collect();
        let mut claims = Vec::new();
        for (k, c) in exp.claims.iter().enumerate() {
            let mut points: Vec<Point> = seeds[ei]
                .iter()
                .zip(&per_seed)
                .map(|(seed, o)| Point {
                    at: format!("seed {seed}"),
                    checked: o[k].checked,
                    holds: o[k].holds,
                })
                .collect();
            let seed_vals: Vec<f64> = points.iter().filter_map(|p| p.checked).collect();
            let (seed_min, seed_max) =
                (seed_vals.iter().copied().reduce(f64::min), seed_vals.iter().copied().reduce(f64::max));
            points.extend(per_variant.iter().map(|(label, o)| Point {
                at: label.clone(),
                checked: o[k].checked,
                holds: o[k].holds,
            }));
            claims.push(ClaimResult {
                id: c.id.clone(),
                verdict: classify(at_chosen[k].holds, &points),
                chosen: at_chosen[k].clone(),
                seed_min,
                seed_max,
                points,
                unit: c.checked_unit(),
            });
        }
        let runs: Vec<(usize, &Charged)> = charged[ei].iter().map(|(ci, c)| (*ci, c)).collect();
        out.push((exp, claims, unvaried::unvaried(exp, &runs)));
    }
    if let Some(path) = &opts.json {
        let v = serde_json::json!({
            "schema": "schedlab.sensitivity/1",
            "quick": opts.quick,
            "experiments": out.iter().map(|(exp, claims, unvaried)| serde_json::json!({
                "experiment": exp.id(),
                "seeds": seeds_of(exp),
                "free": exp.free.iter().map(|f| serde_json::json!({
                    "param": f.param, "chosen": f.chosen, "range": [f.low, f.high], "why": f.why,
                })).collect::<Vec<_>>(),
                "claims": claims,
                "unvaried_costs": unvaried,
            })).collect::<Vec<_>>(),
        });
        std::fs::write(path, serde_json::to_string_pretty(&v)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(if opts.markdown { markdown(&out) } else { text(&out, opts.quick) })
}

const VERDICTS: [&str; 5] = [
    "holds everywhere",
    "holds at the chosen point only",
    "fails at the chosen point",
    "fails everywhere",
    "not measured",
];

fn show(v: Option<f64>, unit: Unit) -> String {
    v.map_or("n/a".into(), |v| unit.show(v))
}

/// The points where the claim's verdict differs from its verdict at the chosen point.
fn flips(r: &ClaimResult) -> String {
    let want = r.chosen.holds;
    let list: Vec<String> = r
        .points
        .iter()
        .filter(|p| p.holds != want)
        .map(|p| {
            let word = match p.holds {
                Some(true) => "holds",
                Some(false) => "fails",
                None => "not measured",
            };
            format!("{} {word} ({})", p.at, show(p.checked, r.unit))
        })
        .collect();
    if list.is_empty() {
        "-".into()
    } else {
        list.join("; ")
    }
}

fn spread(r: &ClaimResult) -> String {
    let show = |v| show(v, r.unit);
    format!("{} (seeds {} to {})", show(r.chosen.checked), show(r.seed_min), show(r.seed_max))
}

/// Per experiment: its claims' results and the unsourced machine costs its runs charged unvaried.
type Results<'a> = [(&'a Experiment, Vec<ClaimResult>, Vec<Unvaried>)];

fn text(out: &Results, quick: bool) -> String {
    let mut s = String::new();
    let mut counts = [0usize; 5];
    for (exp, claims, unvaried) in out {
        let _ = writeln!(s, "{}  {}", exp.id(), exp.title);
        for f in &exp.free {
            let _ = writeln!(s, "  free {} = {} in [{}, {}]", f.param, f.chosen, f.low, f.high);
        }
        if exp.free.is_empty() {
            let _ = writeln!(s, "  no free parameters declared: seeds only");
        }
        if !unvaried.is_empty() {
            let _ =
                writeln!(s, "  unsourced machine costs charged, not varied: {}", unvaried::show(unvaried));
        }
        for r in claims {
            counts[VERDICTS.iter().position(|v| *v == r.verdict).unwrap_or(4)] += 1;
            let _ = writeln!(s, "  [{}] {}: {}", r.verdict, r.id, spread(r));
            if !["holds everywhere", "fails everywhere", "not measured"].contains(&r.verdict) {
                let _ = writeln!(s, "      differs: {}", flips(r));
            }
        }
    }
    let total: usize = counts.iter().sum();
    let _ = writeln!(
        s,
        "\n{total} claim(s): {} hold everywhere, {} hold at the chosen point only, {} fail at the chosen point, \
         {} fail everywhere, {} not measured{}",
        counts[0],
        counts[1],
        counts[2],
        counts[3],
        counts[4],
        if quick { " (quick sizes)" } else { "" }
    );
    s
}

fn markdown(out: &Results) -> String {
    let mut summary = String::from(
        "| experiment | free parameters | claims | hold everywhere | hold at the chosen point only | \
         fail at the chosen point | fail everywhere | not measured |\n|---|---|---|---|---|---|---|---|\n",
    );
    let mut rows = String::from(
        "| experiment | claim | chosen point (seed spread) | verdict | where it differs |\n|---|---|---|---|---|\n",
    );
    let mut costs = String::from(
        "| experiment | unsourced machine costs its claims' runs charged that no free parameter varies \
         (charged time over the runs' CPU time) |\n|---|---|\n",
    );
    let mut total = [0usize; 5];
    let cell = |t: &str| t.replace('|', "\\|");
    for (exp, claims, unvaried) in out {
        let _ = writeln!(costs, "| {} | {} |", exp.id(), unvaried::show(unvaried));
        let mut counts = [0usize; 5];
        for r in claims {
            counts[VERDICTS.iter().position(|v| *v == r.verdict).unwrap_or(4)] += 1;
            let _ = writeln!(
                rows,
                "| {} | {} | {} | {} | {} |",
                exp.id(),
                r.id,
                spread(r),
                r.verdict,
                cell(&flips(r))
            );
        }
        let free: Vec<String> = exp
            .free
            .iter()
            .map(|f| format!("`{}` {} in [{}, {}]", f.param, f.chosen, f.low, f.high))
            .collect();
        let _ = writeln!(
            summary,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            exp.id(),
            if free.is_empty() { "none".into() } else { free.join(", ") },
            claims.len(),
            counts[0],
            counts[1],
            counts[2],
            counts[3],
            counts[4]
        );
        for (t, c) in total.iter_mut().zip(counts) {
            *t += c;
        }
    }
    let _ = writeln!(
        summary,
        "| all | | {} | {} | {} | {} | {} | {} |",
        total.iter().sum::<usize>(),
        total[0],
        total[1],
        total[2],
        total[3],
        total[4]
    );
    format!("{summary}\n{costs}\n{rows}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(holds: Option<bool>) -> Point {
        Point { at: "x".into(), checked: Some(1.0), holds }
    }

    #[test]
    fn verdicts_follow_the_points() {
        assert_eq!(classify(Some(true), &[p(Some(true)), p(Some(true))]), "holds everywhere");
        assert_eq!(classify(Some(true), &[p(Some(true)), p(Some(false))]), "holds at the chosen point only");
        assert_eq!(classify(Some(true), &[p(Some(true)), p(None)]), "holds at the chosen point only");
        assert_eq!(classify(Some(false), &[p(Some(false)), p(None)]), "fails everywhere");
        assert_eq!(classify(Some(false), &[p(Some(false)), p(Some(true))]), "fails at the chosen point");
        assert_eq!(classify(None, &[p(None), p(None)]), "not measured");
        assert_eq!(classify(None, &[p(None), p(Some(true))]), "fails at the chosen point");
    }

    #[test]
    fn short_seed_lists_are_filled_up_to_three() {
        assert_eq!(fill_seeds(&[7]), vec![7, 1, 2]);
        assert_eq!(fill_seeds(&[2]), vec![2, 1, 3]);
        assert_eq!(fill_seeds(&[1, 2, 3, 4]), vec![1, 2, 3, 4]);
    }
}
