//! Experiment files: `experiments/<paper>/<experiment>.toml` (format in experiments/README.md).
//!
//! An experiment names a machine, policies, seeds and a duration, one or more cases (a workload, and
//! optionally their own machine, duration or policies), and the claims checked on them. `[quick]`
//! overrides duration and seeds, and a case's `quick_workload` its workload, for `--quick`. `[real]`
//! does the same for `--real` (runs in a virtual machine under the policies loaded as the kernel's
//! scheduler), on top of the quick sizes, and may name the cases that fit such a machine; a case's
//! `real_workload` and `real_duration` override its workload and duration there. Everything is
//! validated when the file is read: every error names the file, the line and the key.

use super::claim::{Claim, Expect, Unit};
pub use super::free::FreeParam;
use super::metric::Metric;
use anyhow::Result;
use schedlab_core::Ns;
use schedlab_sim::Machine;
use schedlab_workload::generators::ParamOverride;
use schedlab_workload::{parse_duration, Workload};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    title: String,
    source: String,
    #[serde(default)]
    about: String,
    machine: Option<Spanned<String>>,
    /// Every case's workload runs as under `taskset -c <cpus>` (the paper pinned its runs).
    taskset: Option<Spanned<Vec<u32>>>,
    policies: Option<Spanned<Vec<String>>>,
    #[serde(default = "default_seeds")]
    seeds: Vec<u64>,
    duration: Option<Spanned<String>>,
    sample_interval: Option<Spanned<String>>,
    #[serde(default)]
    sample_tasks: bool,
    quick: Option<QuickDoc>,
    real: Option<Spanned<RealDoc>>,
    #[serde(default)]
    case: Vec<Spanned<CaseDoc>>,
    #[serde(default)]
    claim: Vec<Spanned<ClaimDoc>>,
    #[serde(default)]
    free: Vec<Spanned<FreeDoc>>,
}

/// `[[free]]`: a parameter the experiment chose where the paper and the sources are silent.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FreeDoc {
    param: String,
    chosen: String,
    range: Vec<String>,
    why: String,
}

fn default_seeds() -> Vec<u64> {
    vec![1]
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QuickDoc {
    duration: Option<Spanned<String>>,
    seeds: Option<Vec<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RealDoc {
    duration: Option<Spanned<String>>,
    seeds: Option<Vec<u64>>,
    cases: Option<Vec<String>>,
    skip: Option<String>,
}

/// Which sizes an experiment file is read for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The full sizes.
    Full,
    /// `--quick`: the `[quick]` section and the cases' `quick_*` keys.
    Quick,
    /// `--real`: the quick sizes with the `[real]` section and the cases' `real_*` keys on top.
    Real,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Specs {
    One(String),
    Many(Vec<String>),
}

impl Specs {
    fn list(&self) -> Vec<String> {
        match self {
            Specs::One(s) => vec![s.clone()],
            Specs::Many(v) => v.clone(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseDoc {
    name: String,
    workload: Specs,
    quick_workload: Option<Specs>,
    real_workload: Option<Specs>,
    machine: Option<String>,
    taskset: Option<Vec<u32>>,
    duration: Option<String>,
    quick_duration: Option<String>,
    real_duration: Option<String>,
    policies: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaimDoc {
    id: String,
    quote: String,
    source: String,
    case: Option<String>,
    metric: String,
    policy: String,
    vs: Option<String>,
    vs_case: Option<String>,
    base_case: Option<String>,
    expect: String,
    paper: String,
    #[serde(default)]
    unit: String,
    #[serde(default)]
    note: String,
    paper_value: Option<f64>,
    band: Option<f64>,
    band_why: Option<String>,
    #[serde(default)]
    figure_only: bool,
}

/// One case: a workload on a machine, run under each policy with each seed.
#[derive(Clone)]
pub struct Case {
    /// Name, unique in the experiment.
    pub name: String,
    /// Machine (preset or file).
    pub machine: Machine,
    /// The workload's spec(s), for the report.
    pub workload_spec: String,
    /// The workload.
    pub workload: Workload,
    /// Simulated time per run.
    pub duration_ns: Ns,
    /// Policy specs.
    pub policies: Vec<String>,
    /// Whether `--real` runs this case (the `[real]` section's `cases`, or every case).
    pub real: bool,
    /// The workload specs as read (files resolved against the experiment's directory), to rebuild the
    /// workload with a free parameter changed.
    pub specs: Vec<String>,
    /// The CPUs every task may run on, as under `taskset -c` (the case's `taskset`, else the
    /// file's; `None`: no restriction).
    pub taskset: Option<Vec<u32>>,
}

/// A parsed, validated experiment (for the chosen mode, full or quick).
pub struct Experiment {
    /// The paper's directory name (`ule-vs-cfs`).
    pub paper: String,
    /// The file stem (`fibo-sysbench`).
    pub name: String,
    /// The file.
    pub path: PathBuf,
    /// Title.
    pub title: String,
    /// Source in the paper.
    pub source: String,
    /// What the experiment shows.
    pub about: String,
    /// Seeds every run uses.
    pub seeds: Vec<u64>,
    /// Sample interval of the series (0 = off).
    pub sample_interval_ns: Ns,
    /// Sample per-task run time too.
    pub sample_tasks: bool,
    /// Cases.
    pub cases: Vec<Case>,
    /// Claims.
    pub claims: Vec<Claim>,
    /// Why `--real` cannot run this experiment (the `[real]` section's `skip`), if it cannot.
    pub real_skip: Option<String>,
    /// The parameters the experiment chose itself, with their plausible ranges (`[[free]]`).
    pub free: Vec<FreeParam>,
}

impl Experiment {
    /// `paper/name`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.paper, self.name)
    }
}

struct Reader<'a> {
    file: String,
    src: &'a str,
    dir: &'a Path,
}

impl Reader<'_> {
    /// An error at `key` inside the table at `span`: the key's own line when the table has it, else
    /// the table's first line.
    fn err(&self, span: std::ops::Range<usize>, key: &str, msg: impl std::fmt::Display) -> anyhow::Error {
        let (start, end) = (span.start.min(self.src.len()), span.end.min(self.src.len()));
        let mut at = start;
        let mut off = start;
        for line in self.src[start..end].split_inclusive('\n') {
            let t = line.trim_start();
            if t.strip_prefix(key).is_some_and(|r| r.trim_start().starts_with('=')) {
                at = off + (line.len() - t.len());
                break;
            }
            off += line.len();
        }
        let upto = &self.src[..at];
        let line = upto.matches('\n').count() + 1;
        anyhow::anyhow!("{}:{line}: key `{key}`: {msg}", self.file)
    }

    /// A file reference relative to the experiment file, or a built-in name as it is.
    fn resolve(&self, spec: &str) -> String {
        let p = self.dir.join(spec);
        if (spec.ends_with(".toml") || spec.ends_with(".json")) && p.exists() {
            p.to_string_lossy().into_owned()
        } else {
            spec.to_string()
        }
    }
}

/// The workload of `specs` (already resolved), every generator built with `overrides`, run under
/// `taskset` when given; `file` names the experiment in errors.
pub fn build_workload(
    file: &str,
    specs: &[String],
    overrides: &[ParamOverride],
    taskset: Option<&[u32]>,
) -> Result<Workload> {
    let mut w = build_untasked(file, specs, overrides)?;
    if let Some(cpus) = taskset {
        w.taskset(cpus).map_err(|m| anyhow::anyhow!("taskset: {m}"))?;
    }
    Ok(w)
}

fn build_untasked(file: &str, specs: &[String], overrides: &[ParamOverride]) -> Result<Workload> {
    match specs {
        [] => anyhow::bail!("no workload"),
        [one] => crate::load_workload_with(one, overrides),
        many => {
            // Several generators run together, as a workload file's `include` list merges them. The
            // run ends when the foreground ones are done if each of them ends by itself (`all_done`,
            // as pi and bonnie do); background ones (system-noise, a probe) do not count.
            let list: Vec<String> = many.iter().map(|s| format!("{s:?}")).collect();
            let mut src = format!("name = {:?}\ninclude = [{}]\n", many.join(" + "), list.join(", "));
            if ends_by_itself(many, overrides)? {
                src.push_str("stop = \"all_done\"\n");
            }
            Ok(schedlab_workload::parse_toml_overriding(file, &src, &Default::default(), overrides)?)
        }
    }
}

/// Whether every generator in `specs` with a foreground task stops by itself at `all_done` (and at
/// least one has one): a list mixing such generators with background ones ends when the foreground
/// tasks are done, not at the experiment's duration. A spec that is not a generator (a file) keeps
/// the duration.
fn ends_by_itself(specs: &[String], overrides: &[ParamOverride]) -> Result<bool> {
    let mut foreground = false;
    for spec in specs {
        let Some(w) =
            schedlab_workload::generators::builtin_with(spec, overrides).map_err(anyhow::Error::msg)?
        else {
            return Ok(false);
        };
        if w.tasks.iter().all(|t| t.background) {
            continue;
        }
        if w.stop != schedlab_workload::StopWhen::AllDone {
            return Ok(false);
        }
        foreground = true;
    }
    Ok(foreground)
}

fn duration(r: &Reader, text: &str, span: std::ops::Range<usize>, key: &str) -> Result<Ns> {
    let d = parse_duration(text).map_err(|e| r.err(span.clone(), key, e))?;
    if d == 0 {
        return Err(r.err(span, key, "must be above zero"));
    }
    Ok(d)
}

/// Reads and validates one experiment file for `mode`'s sizes.
pub fn load(path: &Path, mode: Mode) -> Result<Experiment> {
    let quick = mode != Mode::Full;
    let file = path.to_string_lossy().into_owned();
    let src = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read {file}: {e}"))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let r = Reader { file: file.clone(), src: &src, dir };
    let doc: Doc = toml::from_str(&src).map_err(|e| {
        let upto = &src[..e.span().map_or(0, |s| s.start).min(src.len())];
        anyhow::anyhow!("{file}:{}: {}", upto.matches('\n').count() + 1, e.message().trim())
    })?;
    let paper = dir.file_name().map_or("-".into(), |n| n.to_string_lossy().into_owned());
    let name = path.file_stem().map_or("-".into(), |n| n.to_string_lossy().into_owned());
    let quick_doc = doc.quick.as_ref().filter(|_| quick);
    let real_doc = doc.real.as_ref().filter(|_| mode == Mode::Real);
    let seeds = real_doc
        .and_then(|r| r.get_ref().seeds.clone())
        .or_else(|| quick_doc.and_then(|q| q.seeds.clone()))
        .unwrap_or(doc.seeds.clone());
    if seeds.is_empty() {
        return Err(r.err(0..0, "seeds", "at least one seed"));
    }
    let dur = real_doc
        .and_then(|r| r.get_ref().duration.as_ref())
        .or_else(|| quick_doc.and_then(|q| q.duration.as_ref()))
        .or(doc.duration.as_ref());
    let default_duration = match dur {
        Some(d) => Some(duration(&r, d.get_ref(), d.span(), "duration")?),
        None => None,
    };
    let sample_interval_ns = match &doc.sample_interval {
        Some(s) => parse_duration(s.get_ref()).map_err(|e| r.err(s.span(), "sample_interval", e))?,
        None => 10_000_000,
    };
    let policies = doc.policies.as_ref().map(|p| (p.get_ref().clone(), p.span()));
    if let Some((list, span)) = &policies {
        for p in list {
            crate::load_policy(p).map_err(|e| r.err(span.clone(), "policies", e))?;
        }
    }
    if doc.case.is_empty() {
        return Err(r.err(src.len()..src.len(), "case", "an experiment needs at least one [[case]]"));
    }
    let mut cases: Vec<Case> = Vec::new();
    // Per case: where it is written, its workload key and the unsourced defaults its generators read.
    let mut chosen_defaults = Vec::new();
    for c in &doc.case {
        let (span, d) = (c.span(), c.get_ref());
        if cases.iter().any(|x| x.name == d.name) {
            return Err(r.err(span, "name", format!("duplicate case `{}`", d.name)));
        }
        let machine_name = d.machine.as_deref().or(doc.machine.as_ref().map(|m| m.get_ref().as_str()));
        let machine_name = machine_name
            .ok_or_else(|| r.err(span.clone(), "machine", "no machine for this case or the file"))?;
        let machine =
            Machine::load(&r.resolve(machine_name)).map_err(|e| r.err(span.clone(), "machine", e))?;
        let (specs, key) = match (&d.real_workload, &d.quick_workload) {
            (Some(w), _) if mode == Mode::Real => (w.list(), "real_workload"),
            (_, Some(q)) if quick => (q.list(), "quick_workload"),
            _ => (d.workload.list(), "workload"),
        };
        let workload_spec = specs.clone();
        let specs: Vec<String> = specs.iter().map(|s| r.resolve(s)).collect();
        let taskset = d.taskset.clone().or(doc.taskset.as_ref().map(|t| t.get_ref().clone()));
        if let Some(cpus) = &taskset {
            let n = machine.topology.nr_cpus() as u32;
            if let Some(bad) = cpus.iter().find(|&&c| c >= n) {
                return Err(r.err(
                    span.clone(),
                    "taskset",
                    format!("CPU {bad}, but machine `{}` has CPUs 0..={}", machine.name, n - 1),
                ));
            }
        }
        let (built, chosen) = schedlab_workload::generators::record_chosen_defaults(|| {
            build_workload(&file, &specs, &[], taskset.as_deref())
        });
        let workload = built.map_err(|e| r.err(span.clone(), key, format!("{e:#}")))?;
        chosen_defaults.push((span.clone(), key, chosen));
        let real_dur = d.real_duration.as_ref().filter(|_| mode == Mode::Real);
        let case_dur = if quick {
            real_dur.or(d.quick_duration.as_ref()).or(d.duration.as_ref())
        } else {
            d.duration.as_ref()
        };
        let duration_ns = match case_dur {
            Some(t) => duration(&r, t, span.clone(), "duration")?,
            None => default_duration.or(workload.duration_ns).ok_or_else(|| {
                r.err(span.clone(), "duration", "no duration for this case, the file or the workload")
            })?,
        };
        let policies = match (&d.policies, &policies) {
            (Some(list), _) => {
                for p in list {
                    crate::load_policy(p).map_err(|e| r.err(span.clone(), "policies", e))?;
                }
                list.clone()
            }
            (None, Some((list, _))) => list.clone(),
            (None, None) => return Err(r.err(span, "policies", "no policies for this case or the file")),
        };
        cases.push(Case {
            name: d.name.clone(),
            machine,
            workload_spec: workload_spec.join(" + "),
            workload,
            duration_ns,
            policies,
            real: true,
            specs,
            taskset,
        });
    }
    let real_skip = doc.real.as_ref().and_then(|rd| rd.get_ref().skip.clone());
    if real_skip.as_deref().is_some_and(|s| s.trim().is_empty()) {
        let span = doc.real.as_ref().map_or(0..0, |rd| rd.span());
        return Err(r.err(span, "skip", "say why the experiment cannot run on the real kernel"));
    }
    if let Some(rd) = &doc.real {
        if let Some(names) = &rd.get_ref().cases {
            if names.is_empty() {
                return Err(r.err(rd.span(), "cases", "name at least one case to run on the real kernel"));
            }
            for n in names {
                if !cases.iter().any(|c| &c.name == n) {
                    return Err(r.err(rd.span(), "cases", format!("no case `{n}`")));
                }
            }
            for c in &mut cases {
                c.real = names.contains(&c.name);
            }
        }
    }
    let mut claims: Vec<Claim> = Vec::new();
    for c in &doc.claim {
        let (span, d) = (c.span(), c.get_ref());
        let e = |key: &str, msg: String| r.err(span.clone(), key, msg);
        if claims.iter().any(|x| x.id == d.id) {
            return Err(e("id", format!("duplicate claim `{}`", d.id)));
        }
        let case = match &d.case {
            Some(name) => name.clone(),
            None if cases.len() == 1 => cases[0].name.clone(),
            None => return Err(e("case", "several cases: say which one the claim is about".into())),
        };
        let find = |name: &str, key: &str| {
            cases.iter().find(|c| c.name == name).ok_or_else(|| e(key, format!("no case `{name}`")))
        };
        let the_case = find(&case, "case")?;
        let ref_case = match &d.vs_case {
            Some(v) => find(v, "vs_case")?,
            None => the_case,
        };
        if !the_case.policies.contains(&d.policy) {
            return Err(e("policy", format!("`{}` is not run in case `{case}`", d.policy)));
        }
        if let Some(b) = &d.base_case {
            let base = find(b, "base_case")?;
            for p in [Some(&d.policy), d.vs.as_ref()].into_iter().flatten() {
                if !base.policies.contains(p) {
                    return Err(e("base_case", format!("`{p}` is not run in case `{b}`")));
                }
            }
        }
        let ref_policy = d.vs.as_ref().unwrap_or(&d.policy);
        if !ref_case.policies.contains(ref_policy) {
            return Err(e("vs", format!("`{ref_policy}` is not run in case `{}`", ref_case.name)));
        }
        let metric = Metric::parse(&d.metric).map_err(|x| e("metric", x.to_string()))?;
        let expect = Expect::parse(&d.expect).map_err(|x| e("expect", x.to_string()))?;
        let unit = Unit::parse(&d.unit).map_err(|x| e("unit", x.to_string()))?;
        let magnitude = match (d.paper_value, d.band, &d.band_why) {
            (None, None, None) => None,
            (Some(value), Some(band), Some(why)) => {
                if !(band > 0.0 && band.is_finite()) {
                    return Err(e("band", format!("{band}: a relative band above zero (0.25 for 25 %)")));
                }
                if why.trim().is_empty() || !value.is_finite() || value == 0.0 {
                    let key = if value == 0.0 || !value.is_finite() { "paper_value" } else { "band_why" };
                    return Err(e(
                        key,
                        "a non-zero paper_value, and why the band is as wide as it is".into(),
                    ));
                }
                if d.figure_only {
                    return Err(e(
                        "figure_only",
                        "a claim with the paper's number is not figure-only".into(),
                    ));
                }
                Some(super::claim::Magnitude { value, band, why: why.clone() })
            }
            _ => {
                let key = ["paper_value", "band", "band_why"]
                    .into_iter()
                    .zip([d.paper_value.is_some(), d.band.is_some(), d.band_why.is_some()])
                    .find(|(_, set)| !set)
                    .map_or("band", |(k, _)| k);
                return Err(e(key, "paper_value, band and band_why go together".into()));
            }
        };
        claims.push(Claim {
            id: d.id.clone(),
            quote: d.quote.clone(),
            source: d.source.clone(),
            case,
            metric_text: d.metric.clone(),
            metric,
            policy: d.policy.clone(),
            vs: d.vs.clone(),
            vs_case: d.vs_case.clone(),
            base_case: d.base_case.clone(),
            expect_text: d.expect.clone(),
            expect,
            paper: d.paper.clone(),
            unit,
            note: d.note.clone(),
            magnitude,
            figure_only: d.figure_only,
        });
    }
    if claims.is_empty() {
        return Err(r.err(src.len()..src.len(), "claim", "an experiment needs at least one [[claim]]"));
    }
    let mut free: Vec<FreeParam> = Vec::new();
    for f in &doc.free {
        let (span, d) = (f.span(), f.get_ref());
        if free.iter().any(|x| x.param == d.param) {
            return Err(r.err(span, "param", format!("`{}` is declared twice", d.param)));
        }
        let [low, high] = d.range.as_slice() else {
            return Err(r.err(span, "range", "two values: [low, high]"));
        };
        let p = FreeParam::new(&d.param, &d.chosen, low, high, &d.why)
            .map_err(|(key, msg)| r.err(span.clone(), key, msg))?;
        p.check_against(&file, &cases).map_err(|(key, msg)| r.err(span.clone(), key, msg))?;
        free.push(p);
    }
    for (case, (span, key, read)) in cases.iter().zip(&chosen_defaults) {
        check_chosen_defaults(&file, case, read, &free).map_err(|m| r.err(span.clone(), key, m))?;
    }
    Ok(Experiment {
        paper,
        name,
        path: path.to_path_buf(),
        title: doc.title,
        source: doc.source,
        about: doc.about,
        seeds,
        sample_interval_ns,
        sample_tasks: doc.sample_tasks,
        cases,
        claims,
        real_skip,
        free,
    })
}

/// Refuses a case that runs a generator default with no source (`Source::Chosen`,
/// crates/workload/src/generators/sources.rs) which the experiment does not declare `[[free]]`: such a
/// number would decide a verdict without anyone having chosen it for this paper. `read` are the chosen
/// defaults the case's generators read; one counts when doubling it changes the case's workload.
fn check_chosen_defaults(
    file: &str,
    case: &Case,
    read: &[(&'static str, &'static str)],
    free: &[FreeParam],
) -> Result<(), String> {
    use schedlab_workload::generators::{generators, sources::source_of, ParamOverride};
    let mut unsourced = Vec::new();
    for &(generator, param) in read {
        let name = format!("{generator}.{param}");
        if free.iter().any(|f| f.param == name) {
            continue;
        }
        let default = generators()
            .into_iter()
            .find(|g| g.name == generator)
            .and_then(|g| g.params.iter().find(|p| p.0 == param).map(|p| p.1))
            .unwrap_or_default();
        let Ok(ns) = parse_duration(default) else { continue };
        let o = ParamOverride {
            generator: generator.into(),
            param: param.into(),
            value: format!("{}ns", ns * 2),
        };
        let doubled =
            build_workload(file, &case.specs, &[o], case.taskset.as_deref()).map_err(|e| format!("{e:#}"))?;
        if doubled != case.workload {
            let why = source_of(generator, param).map(|s| s.describe()).unwrap_or_default();
            unsourced.push(format!("`{name}` = {default} ({why})"));
        }
    }
    if unsourced.is_empty() {
        return Ok(());
    }
    Err(format!(
        "case `{}` runs generator defaults that have no source: {}; set each in the workload with its \
         source, or declare it [[free]] with a plausible range",
        case.name,
        unsourced.join("; ")
    ))
}

/// Every experiment file under `dir` (`dir/<paper>/<name>.toml`), sorted.
pub fn discover(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| {
        anyhow::anyhow!(
            "cannot read the experiments directory {}: {e} (run from the project root or pass --dir)",
            dir.display()
        )
    })?;
    for paper in entries.flatten() {
        if !paper.path().is_dir() {
            continue;
        }
        for f in std::fs::read_dir(paper.path())?.flatten() {
            let p = f.path();
            if p.extension().is_some_and(|e| e == "toml") && !p.to_string_lossy().contains("/workloads/") {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}
