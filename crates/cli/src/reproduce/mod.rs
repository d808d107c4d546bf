//! `schedlab reproduce`: re-runs the seed papers' experiments (experiments/<paper>/<name>.toml) and
//! checks their claims.
//!
//! Every (experiment, case, policy, seed) is one independent simulation; they run on a pool of worker
//! threads (one per available core unless `--jobs` says otherwise) and their reports are put back in
//! a fixed order, so the output does not depend on the number of threads. For each claim the metric's
//! mean over the seeds is checked against the expectation written in the file; a claim that does not
//! hold is a finding to explain (experiments/README.md), not an error, so the exit status is zero
//! whenever everything ran.

pub mod claim;
pub mod free;
pub use schedlab_cli::metric;
pub mod real;
pub mod sensitivity;
pub mod spec;
pub mod unvaried;

use crate::report_html::{self, esc};
use anyhow::{bail, Context, Result};
use claim::Outcome;
use schedlab_sim::{RunConfig, Sim};
use serde_json::Value;
use spec::Experiment;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// What `schedlab reproduce` was asked to do.
pub struct Options {
    /// Papers (`ule-vs-cfs`), experiments (`ule-vs-cfs/fibo-sysbench` or `fibo-sysbench`) or files.
    pub select: Vec<String>,
    /// Every experiment.
    pub all: bool,
    /// Smaller sizes.
    pub quick: bool,
    /// The experiments directory.
    pub dir: PathBuf,
    /// Where HTML reports go (`None`: no reports).
    pub out: Option<PathBuf>,
    /// Worker threads.
    pub jobs: usize,
    /// Print one Markdown table of every claim instead of the text report.
    pub markdown: bool,
    /// Write the outcomes as JSON here.
    pub json: Option<PathBuf>,
    /// Show a progress bar (terminal only).
    pub progress: bool,
    /// Only read and validate the files and list what would run.
    pub list: bool,
    /// Run the cases in the VM too (`--real`): how it boots and how many runs of each.
    pub real: Option<(crate::vm_test::VmOptions, u32, PathBuf)>,
    /// Re-run every claim across seeds and at the ends of each free parameter's range instead
    /// (`--sensitivity`).
    pub sensitivity: bool,
}

/// The experiment files chosen by `select` / `all`.
fn choose(opts: &Options) -> Result<Vec<PathBuf>> {
    let all = spec::discover(&opts.dir)?;
    if opts.all {
        if !opts.select.is_empty() {
            bail!("give either --all or experiments, not both");
        }
        return Ok(all);
    }
    if opts.select.is_empty() {
        bail!("say which experiments: a paper, paper/experiment, an experiment file, or --all");
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for s in &opts.select {
        let as_file = Path::new(s);
        let hits: Vec<PathBuf> = if s.ends_with(".toml") && as_file.is_file() {
            vec![as_file.to_path_buf()]
        } else {
            all.iter()
                .filter(|p| {
                    let paper = p.parent().and_then(|d| d.file_name()).map(|n| n.to_string_lossy());
                    let stem = p.file_stem().map(|n| n.to_string_lossy());
                    let (paper, stem) = (paper.unwrap_or_default(), stem.unwrap_or_default());
                    *s == paper || *s == stem || *s == format!("{paper}/{stem}")
                })
                .cloned()
                .collect()
        };
        if hits.is_empty() {
            let papers: std::collections::BTreeSet<String> = all
                .iter()
                .filter_map(|p| Some(p.parent()?.file_name()?.to_string_lossy().into_owned()))
                .collect();
            bail!(
                "no experiment or paper `{s}` in {} (papers: {})",
                opts.dir.display(),
                papers.into_iter().collect::<Vec<_>>().join(", ")
            );
        }
        for h in hits {
            if !out.contains(&h) {
                out.push(h);
            }
        }
    }
    Ok(out)
}

/// One simulation to run.
struct Job<'a> {
    exp: &'a Experiment,
    case: &'a spec::Case,
    policy: usize,
    seed: u64,
    /// Simulate the policy deciding in user space (`--real`): the case's machine with these
    /// round trips (`real::RoundTrips::apply`: `CostModel::scx_round_trip_ns` and the kinds').
    scx: Option<real::RoundTrips>,
    /// Keep only the parts of the report the experiment's claims read ([`claim_report_keys`]): no
    /// HTML page will draw it, and a large run's tasks and series cost more to convert to JSON and
    /// free than the rest of the run (hackbench's 12,000 tasks).
    trim: bool,
}

/// The top-level report keys the claims of `exp` read, and `summary` (small; its machine costs are
/// listed by `--sensitivity`: [`unvaried`]).
fn claim_report_keys(exp: &Experiment) -> std::collections::BTreeSet<String> {
    let mut keys = std::collections::BTreeSet::from(["summary".to_string()]);
    for c in &exp.claims {
        c.metric.report_keys(&mut keys);
    }
    keys
}

/// The report as JSON; with `keys`, only those top-level keys, and the large parts no key names are
/// not converted at all.
fn report_json(
    mut report: schedlab_sim::RunReport,
    keys: Option<&std::collections::BTreeSet<String>>,
) -> Result<Value> {
    let Some(keys) = keys else { return Ok(serde_json::to_value(&report)?) };
    let unread = |k: &str| !keys.contains(k);
    if unread("tasks") {
        report.tasks = Vec::new();
    }
    if unread("series") {
        report.series = None;
    }
    if unread("timeline") {
        report.timeline = None;
    }
    if unread("pipes") {
        report.pipes = Vec::new();
    }
    if unread("cpus") {
        report.cpus = Vec::new();
    }
    let mut v = serde_json::to_value(&report)?;
    if let Some(o) = v.as_object_mut() {
        o.retain(|k, _| keys.contains(k));
    }
    Ok(v)
}

fn run_job(job: &Job) -> Result<Value> {
    let case = job.case;
    let spec = &case.policies[job.policy];
    let mut policy = crate::load_policy(spec)?;
    let cfg = RunConfig {
        duration_ns: case.duration_ns,
        seed: job.seed,
        sample_interval_ns: job.exp.sample_interval_ns,
        sample_tasks: job.exp.sample_tasks,
        ..RunConfig::default()
    };
    let mut machine = std::borrow::Cow::Borrowed(&case.machine);
    if let Some(rt) = job.scx {
        let m = machine.to_mut();
        rt.apply(&mut m.costs);
        // The policy ticks at schedlab-scx's rate there, whatever the experiment's machine says.
        m.hz = real::SCX_HZ;
    }
    let report = Sim::new(&machine, &case.workload, policy.as_mut(), spec.clone(), cfg)?.run()?;
    report_json(report, job.trim.then(|| claim_report_keys(job.exp)).as_ref())
}

/// Runs `jobs` on `threads` workers; results in job order.
fn run_all(jobs: &[Job], threads: usize, progress: bool) -> Vec<Result<Value>> {
    run_all_map(jobs, threads, progress, |_, v| v)
}

/// Runs `jobs` on `threads` workers and keeps `keep(job, report)` of each (so a long sweep need not
/// hold every report); results in job order.
fn run_all_map<T: Send>(
    jobs: &[Job],
    threads: usize,
    progress: bool,
    keep: impl Fn(&Job, Value) -> T + Sync,
) -> Vec<Result<T>> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<T>>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    let bar = crate::progress_bar(progress, jobs.len() as u64);
    if let Some(b) = &bar {
        b.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        b.set_message("simulations");
    }
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let r = run_job(job).map(|v| keep(job, v)).with_context(|| {
                    let c = job.case;
                    format!(
                        "{} case `{}` ({}), {} seed {}",
                        job.exp.id(),
                        c.name,
                        c.workload_spec,
                        c.policies[job.policy],
                        job.seed
                    )
                });
                if let Ok(mut v) = results.lock() {
                    v[i] = Some(r);
                }
                if let Some(b) = &bar {
                    b.inc(1);
                }
            });
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    results
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(anyhow::anyhow!("a worker thread died"))))
        .collect()
}

/// The runs of one experiment: `runs[case][policy][seed]`.
type Runs = Vec<Vec<Vec<Value>>>;

/// Mean of the metric over the seeds (`None` if any seed lacks it).
fn mean_of(claim: &claim::Claim, runs: &[Value]) -> Option<f64> {
    let v: Option<Vec<f64>> = runs.iter().map(|r| claim.metric.eval(r)).collect();
    v.filter(|v| !v.is_empty()).map(|v| v.iter().sum::<f64>() / v.len() as f64)
}

/// The metric's mean for (case index, policy index) over the runs at hand.
type MeanOf<'a> = dyn Fn(usize, usize) -> Option<f64> + 'a;

/// A claim's measurement for `policy` in `case`, divided by its value in the base case if any.
fn measure(exp: &Experiment, claim: &claim::Claim, case: &str, policy: &str, mean: &MeanOf) -> Option<f64> {
    let at = |case: &str| {
        let ci = exp.cases.iter().position(|c| c.name == case).unwrap_or(0);
        let pi = exp.cases[ci].policies.iter().position(|p| p == policy).unwrap_or(0);
        (ci, pi)
    };
    let (ci, pi) = at(case);
    let v = mean(ci, pi)?;
    match &claim.base_case {
        None => Some(v),
        Some(b) => {
            let (bi, bp) = at(b);
            let base = mean(bi, bp)?;
            (base != 0.0).then_some(v / base)
        }
    }
}

/// Checks every claim of `exp`; `mean(k, case, policy)` is claim `k`'s metric averaged over the runs.
fn check_claims(exp: &Experiment, mean: &dyn Fn(usize, usize, usize) -> Option<f64>) -> Vec<Outcome> {
    exp.claims
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let m = |ci: usize, pi: usize| mean(k, ci, pi);
            let value = measure(exp, c, &c.case, &c.policy, &m);
            let reference = c.is_ratio().then(|| {
                let case = c.vs_case.as_deref().unwrap_or(&c.case);
                measure(exp, c, case, c.vs.as_deref().unwrap_or(&c.policy), &m)
            });
            c.check(value, reference.flatten())
        })
        .collect()
}

fn check(exp: &Experiment, runs: &Runs) -> Vec<Outcome> {
    check_claims(exp, &|k, ci, pi| mean_of(&exp.claims[k], &runs[ci][pi]))
}

/// [`check`], with each outcome's spread over the seeds taken one at a time.
fn check_with_spread(exp: &Experiment, runs: &Runs) -> Vec<Outcome> {
    let mut outcomes = check(exp, runs);
    let seeds = runs.iter().flatten().map(|r| r.len()).min().unwrap_or(0);
    let per_seed: Vec<Vec<Outcome>> = (0..seeds)
        .map(|s| {
            check_claims(exp, &|k, ci, pi| runs[ci][pi].get(s).and_then(|r| exp.claims[k].metric.eval(r)))
        })
        .collect();
    claim::set_seed_ranges(&mut outcomes, &per_seed);
    outcomes
}

fn verdict(o: &Outcome) -> &'static str {
    match o.holds {
        Some(true) => "holds",
        Some(false) => "DOES NOT HOLD",
        None => "not measured",
    }
}

fn text_report(exp: &Experiment, outcomes: &[Outcome]) -> String {
    let mut s = format!("{}  {} ({})\n", exp.id(), exp.title, exp.source);
    for (c, o) in exp.claims.iter().zip(outcomes) {
        let _ = writeln!(s, "  [{}] {}: \"{}\" ({})", verdict(o), c.id, c.quote, c.source);
        let _ = writeln!(s, "      paper: {}", c.paper);
        let spread = match o.seed_range {
            Some(_) => format!(" (seeds {})", o.seed_range_text(c.checked_unit())),
            None => String::new(),
        };
        let _ = writeln!(
            s,
            "      schedlab: {}{spread}; expected {}: {}",
            o.shown,
            c.metric_text,
            c.expected_text()
        );
    }
    s
}

fn markdown_rows(exp: &Experiment, outcomes: &[Outcome]) -> String {
    let cell = |t: &str| t.replace('|', "\\|");
    let mut s = String::new();
    for (c, o) in exp.claims.iter().zip(outcomes) {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            exp.id(),
            c.id,
            cell(&c.paper),
            cell(&o.shown),
            o.seed_range_text(c.checked_unit()),
            cell(&c.expected_text()),
            verdict(o)
        );
    }
    s
}

fn html_report(exp: &Experiment, outcomes: &[Outcome], runs: &Runs, quick: bool) -> String {
    let mut b = String::new();
    let _ = writeln!(
        b,
        "<p>{}</p><p>Source: {}. File: <code>{}</code>. Seeds {:?}{}.</p><h2>Claims</h2><table><tr><th>claim</th><th>paper</th>\
         <th>schedlab</th><th>expected</th><th>result</th></tr>",
        esc(&exp.about),
        esc(&exp.source),
        esc(&exp.path.display().to_string()),
        exp.seeds,
        if quick { ", quick sizes" } else { "" }
    );
    for (c, o) in exp.claims.iter().zip(outcomes) {
        let class = match o.holds {
            Some(true) => "holds",
            Some(false) => "fails",
            None => "",
        };
        let _ = writeln!(
            b,
            "<tr><td><b>{}</b>: &ldquo;{}&rdquo; ({}){}</td><td>{}</td><td>{}</td><td><code>{}</code> {}</td>\
             <td class=\"{class}\">{}</td></tr>",
            esc(&c.id),
            esc(&c.quote),
            esc(&c.source),
            if c.note.is_empty() { String::new() } else { format!("<br><i>{}</i>", esc(&c.note)) },
            esc(&c.paper),
            esc(&o.shown),
            esc(&c.metric_text),
            esc(&c.expected_text()),
            verdict(o)
        );
    }
    b.push_str("</table>\n");
    for (i, (case, per_policy)) in exp.cases.iter().zip(runs).enumerate() {
        let _ = writeln!(
            b,
            "<h2>Case {}: {} on {}, {} simulated</h2>",
            esc(&case.name),
            esc(&case.workload_spec),
            esc(&case.machine.name),
            schedlab_core::fmt_ns(case.duration_ns)
        );
        // Every seed: the summary pools a policy's seeds into a confidence interval, the figures
        // draw its first.
        let every_seed: Vec<Value> = per_policy.iter().flatten().cloned().collect();
        if !every_seed.is_empty() {
            b.push_str(&report_html::body(&every_seed, &format!("case{i}")));
        }
    }
    report_html::page(&format!("{}: {}", exp.id(), exp.title), &b)
}

/// The experiments, their cases and claims, without running anything.
fn listing(exps: &[Experiment]) -> String {
    let mut s = String::new();
    let mut runs = 0;
    for e in exps {
        let n: usize = e.cases.iter().map(|c| c.policies.len() * e.seeds.len()).sum();
        runs += n;
        let _ = writeln!(s, "{}  {} ({})", e.id(), e.title, e.source);
        for c in &e.cases {
            let _ = writeln!(
                s,
                "  case {}: {} on {}, {} simulated, {} x {} seed(s)",
                c.name,
                c.workload_spec,
                c.machine.name,
                schedlab_core::fmt_ns(c.duration_ns),
                c.policies.join(", "),
                e.seeds.len()
            );
        }
        for c in &e.claims {
            let _ = writeln!(s, "  claim {}: {} ({})", c.id, c.quote, c.source);
        }
    }
    let claims: usize = exps.iter().map(|e| e.claims.len()).sum();
    let _ = writeln!(s, "\n{} experiment(s), {claims} claim(s), {runs} simulation(s)", exps.len());
    s
}

/// Runs `schedlab reproduce`; returns the text to print.
pub fn reproduce(opts: &Options) -> Result<String> {
    let files = choose(opts)?;
    let mode = match (&opts.real, opts.quick) {
        (Some(_), _) => spec::Mode::Real,
        (None, true) => spec::Mode::Quick,
        (None, false) => spec::Mode::Full,
    };
    let exps: Vec<Experiment> = files.iter().map(|f| spec::load(f, mode)).collect::<Result<_>>()?;
    if opts.list {
        return Ok(listing(&exps));
    }
    if let Some((vm, repeat, out)) = &opts.real {
        let ro = real::RealOptions {
            vm,
            repeat: *repeat,
            out: out.clone(),
            jobs: opts.jobs,
            progress: opts.progress,
        };
        return real::reproduce_real(&exps, &ro, opts.markdown, opts.json.as_deref());
    }
    if opts.sensitivity {
        return sensitivity::run(&exps, opts);
    }
    let mut jobs = Vec::new();
    for exp in &exps {
        for case in &exp.cases {
            for pi in 0..case.policies.len() {
                for &seed in &exp.seeds {
                    jobs.push(Job { exp, case, policy: pi, seed, scx: None, trim: opts.out.is_none() });
                }
            }
        }
    }
    let mut results = run_all(&jobs, opts.jobs, opts.progress).into_iter();
    let mut text = String::new();
    let mut md = String::from(
        "| experiment | claim | paper | schedlab | seeds one at a time | expected | result |\n|---|---|---|---|---|---|---|\n",
    );
    let mut summary = String::from(
        "| experiment | source | claims | hold | do not hold | not measured |\n|---|---|---|---|---|---|\n",
    );
    let mut all_outcomes = Vec::new();
    let (mut hold, mut fail, mut unmeasured) = (0, 0, 0);
    for exp in &exps {
        let mut runs: Runs = Vec::new();
        for case in &exp.cases {
            let mut per_policy = Vec::new();
            for _ in &case.policies {
                let seeds: Vec<Value> = (0..exp.seeds.len())
                    .map(|_| results.next().unwrap_or_else(|| bail!("lost a run")))
                    .collect::<Result<_>>()?;
                per_policy.push(seeds);
            }
            runs.push(per_policy);
        }
        let outcomes = check_with_spread(exp, &runs);
        let count = |h: Option<bool>| outcomes.iter().filter(|o| o.holds == h).count();
        let (h, f, u) = (count(Some(true)), count(Some(false)), count(None));
        let _ = writeln!(summary, "| {} | {} | {} | {h} | {f} | {u} |", exp.id(), exp.source, outcomes.len());
        (hold, fail, unmeasured) = (hold + h, fail + f, unmeasured + u);
        text.push_str(&text_report(exp, &outcomes));
        md.push_str(&markdown_rows(exp, &outcomes));
        if let Some(out) = &opts.out {
            let dir = out.join(&exp.paper);
            std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            let path = dir.join(format!("{}.html", exp.name));
            std::fs::write(&path, html_report(exp, &outcomes, &runs, opts.quick))
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        all_outcomes.push(serde_json::json!({
            "experiment": exp.id(),
            "title": exp.title,
            "claims": outcomes,
        }));
    }
    let _ = writeln!(
        text,
        "\n{} experiment(s), {} claim(s): {hold} hold, {fail} do not hold, {unmeasured} not measured{}",
        exps.len(),
        hold + fail + unmeasured,
        if opts.quick { " (quick sizes)" } else { "" }
    );
    if let Some(out) = &opts.out {
        let _ = writeln!(text, "HTML reports in {}", out.display());
    }
    if let Some(path) = &opts.json {
        let v = serde_json::json!({
            "schema": "schedlab.reproduce/1",
            "quick": opts.quick,
            "experiments": all_outcomes,
        });
        std::fs::write(path, serde_json::to_string_pretty(&v)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let _ = writeln!(summary, "| all | | {} | {hold} | {fail} | {unmeasured} |", hold + fail + unmeasured);
    Ok(if opts.markdown { format!("{summary}\n{md}") } else { text })
}
