//! The grid file of `schedlab sweep`: which policies, workloads, machines and seeds to cross, read
//! and checked before anything runs. Every error names the file, the line and the key.
//!
//! ```toml
//! name = "latency"                       # optional; default: the file's stem
//! policies = ["cfs", "eevdf", "ule"]     # policy specs or policy TOML files
//! workloads = ["hackbench[groups=2]", "my-workload.toml"]
//! machines = ["xeon-e5520-2s"]           # optional; default: xeon-e5520-2s
//! seeds = 3                              # 3 means 1, 2, 3; or a list: [7, 11]; default 1
//! duration = "2s"                        # optional; default: each workload's own, else 10 s
//!
//! [metrics]                              # optional extra columns: metric expressions
//! p99_us = "summary.wakeup_latency.p99_ns / 1000"
//! ```
//!
//! Files are found relative to the grid file.

use crate::metric::Metric;
use crate::resolve::{load_policy, load_workload};
use anyhow::{bail, Result};
use schedlab_core::Ns;
use schedlab_workload::parse_duration;
use serde::Deserialize;
use std::path::Path;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GridDoc {
    name: Option<Spanned<String>>,
    policies: Option<Spanned<Vec<Spanned<String>>>>,
    workloads: Option<Spanned<Vec<Spanned<String>>>>,
    machines: Option<Spanned<Vec<Spanned<String>>>>,
    seeds: Option<Spanned<Seeds>>,
    duration: Option<Spanned<String>>,
    metrics: Option<std::collections::BTreeMap<String, Spanned<String>>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Seeds {
    Count(i64),
    List(Vec<i64>),
}

/// A checked grid.
#[derive(Debug)]
pub struct Grid {
    /// Name (output directory and report titles).
    pub name: String,
    /// Policy specs, as written (the row keys).
    pub policies: Vec<String>,
    /// Workload specs, as written.
    pub workloads: Vec<String>,
    /// Machine specs, as written.
    pub machines: Vec<String>,
    /// Seeds.
    pub seeds: Vec<u64>,
    /// The duration for every run, if set.
    pub duration_ns: Option<Ns>,
    /// Extra metric columns: name, expression text, parsed expression.
    pub metrics: Vec<(String, String, Metric)>,
    /// Where relative file names are looked up.
    pub dir: std::path::PathBuf,
}

impl Grid {
    /// A file name relative to the grid file when such a file exists there; else the spec as given
    /// (a built-in, or a path relative to the current directory).
    pub fn resolve(&self, spec: &str) -> String {
        resolve(&self.dir, spec)
    }

    /// Number of runs.
    pub fn nr_runs(&self) -> usize {
        self.policies.len() * self.workloads.len() * self.machines.len() * self.seeds.len()
    }
}

/// `spec` as a file relative to `dir` when such a file exists there, else as given.
fn resolve(dir: &Path, spec: &str) -> String {
    let p = dir.join(spec);
    if (spec.ends_with(".toml") || spec.ends_with(".json")) && p.exists() {
        p.to_string_lossy().into_owned()
    } else {
        spec.to_string()
    }
}

/// The 1-based line of byte offset `at` in `src`.
fn line_of(src: &str, at: usize) -> usize {
    src[..at.min(src.len())].matches('\n').count() + 1
}

/// Reads and checks a grid file: every policy, workload and machine is loaded once here, so a bad
/// entry stops the sweep before any run.
pub fn read(path: &Path) -> Result<Grid> {
    let file = path.display().to_string();
    let src =
        std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read grid file {file}: {e}"))?;
    let doc: GridDoc = toml::from_str(&src).map_err(|e| {
        let line = e.span().map_or(String::new(), |s| format!("{}:", line_of(&src, s.start)));
        anyhow::anyhow!("{file}:{line} {}", e.message())
    })?;
    let err = |at: usize, key: &str, msg: String| {
        anyhow::anyhow!("{file}:{}: key `{key}`: {msg}", line_of(&src, at))
    };
    let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let mut grid = Grid {
        name: match &doc.name {
            Some(n) if n.get_ref().trim().is_empty() => {
                return Err(err(n.span().start, "name", "is empty".into()))
            }
            Some(n) => n.get_ref().clone(),
            None => path.file_stem().map_or("sweep".into(), |s| s.to_string_lossy().into_owned()),
        },
        policies: Vec::new(),
        workloads: Vec::new(),
        machines: Vec::new(),
        seeds: vec![1],
        duration_ns: None,
        metrics: Vec::new(),
        dir,
    };
    // A list of specs: present, non-empty, no repeats; each checked by `load`.
    let list = |key: &str,
                v: &Option<Spanned<Vec<Spanned<String>>>>,
                default: Option<&str>,
                load: &dyn Fn(&str) -> Result<()>|
     -> Result<Vec<String>> {
        let items: Vec<(usize, String)> = match v {
            None => match default {
                Some(d) => vec![(0, d.to_string())],
                None => bail!("{file}: key `{key}`: missing (a list such as {key} = [\"...\"])"),
            },
            Some(l) if l.get_ref().is_empty() => return Err(err(l.span().start, key, "is empty".into())),
            Some(l) => l.get_ref().iter().map(|s| (s.span().start, s.get_ref().clone())).collect(),
        };
        let mut out: Vec<String> = Vec::new();
        for (at, spec) in items {
            if out.contains(&spec) {
                return Err(err(at, key, format!("`{spec}` is listed twice")));
            }
            load(&spec).map_err(|e| err(at, key, format!("`{spec}`: {e:#}")))?;
            out.push(spec);
        }
        Ok(out)
    };
    let dir = grid.dir.clone();
    grid.policies = list("policies", &doc.policies, None, &|s| load_policy(&resolve(&dir, s)).map(|_| ()))?;
    grid.workloads =
        list("workloads", &doc.workloads, None, &|s| load_workload(&resolve(&dir, s)).map(|_| ()))?;
    grid.machines = list("machines", &doc.machines, Some("xeon-e5520-2s"), &|s| {
        schedlab_sim::Machine::load(&resolve(&dir, s)).map(|_| ()).map_err(anyhow::Error::from)
    })?;
    if let Some(s) = &doc.seeds {
        let at = s.span().start;
        grid.seeds = match s.get_ref() {
            Seeds::Count(n) if *n >= 1 => (1..=*n as u64).collect(),
            Seeds::Count(n) => return Err(err(at, "seeds", format!("{n}: need at least one seed"))),
            Seeds::List(l) if l.is_empty() => return Err(err(at, "seeds", "is empty".into())),
            Seeds::List(l) => {
                let mut seeds: Vec<u64> = Vec::new();
                for &x in l {
                    if x < 0 {
                        return Err(err(at, "seeds", format!("{x}: seeds are not negative")));
                    }
                    if seeds.contains(&(x as u64)) {
                        return Err(err(at, "seeds", format!("{x} is listed twice")));
                    }
                    seeds.push(x as u64);
                }
                seeds
            }
        };
    }
    if let Some(d) = &doc.duration {
        let at = d.span().start;
        let ns = parse_duration(d.get_ref()).map_err(|e| err(at, "duration", e.to_string()))?;
        if ns == 0 {
            return Err(err(at, "duration", "must be above zero".into()));
        }
        grid.duration_ns = Some(ns);
    }
    // Metric columns in name order (a TOML table has no order of its own here).
    for (name, v) in doc.metrics.iter().flatten() {
        let key = format!("metrics.{name}");
        let metric = Metric::parse(v.get_ref()).map_err(|e| err(v.span().start, &key, format!("{e:#}")))?;
        grid.metrics.push((name.clone(), v.get_ref().clone(), metric));
    }
    Ok(grid)
}
