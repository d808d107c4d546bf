//! `schedlab sweep GRID`: every combination of a grid's machines, workloads, policies and seeds,
//! simulated in parallel on the local cores (rayon), into one table (docs/sweep.md).
//!
//! Output directory:
//! * `rows.jsonl`: one JSON row per finished run, appended (and flushed) as each run ends, in
//!   completion order. It is the sweep's journal: a sweep started again with the same output
//!   directory reads it and runs only what is missing (or failed), so an interrupted sweep resumes
//!   where it stopped. A last line cut by the interruption is dropped.
//! * `results.csv` and `results.json` (schema `schedlab.sweep/1`): every row of the grid in grid
//!   order (machine, workload, policy, seed), written when all runs are done. The runs are
//!   deterministic, so these two files are byte-identical however many jobs ran them and however
//!   often the sweep was interrupted.
//! * `runs/NNNN.json` with `--reports`: each run's full report (`schedlab.run/1`), NNNN being the
//!   row's index in grid order.

pub mod grid;

use crate::reproduce::metric::Metric;
use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use schedlab_core::Ns;
use schedlab_sim::{Machine, RunConfig, Sim};
use schedlab_workload::Workload;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// `schedlab sweep`
#[derive(clap::Args)]
pub struct SweepArgs {
    /// The grid file (TOML: policies, workloads, machines, seeds, duration, metrics; docs/sweep.md).
    grid: String,
    /// Output directory [default: `<grid name>-sweep` in the current directory].
    #[arg(short, long)]
    out: Option<String>,
    /// Runs at the same time [default: one per CPU].
    #[arg(short, long)]
    jobs: Option<usize>,
    /// Also write every run's full report to `runs/NNNN.json` in the output directory.
    #[arg(long)]
    reports: bool,
    /// Discard the rows of an earlier sweep in the output directory instead of resuming it.
    #[arg(long)]
    fresh: bool,
    /// Print nothing but errors.
    #[arg(short, long)]
    quiet: bool,
}

/// One run's result: a line of `rows.jsonl` and a row of the results.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Row {
    /// Machine spec, as in the grid.
    pub machine: String,
    /// Workload spec.
    pub workload: String,
    /// Policy spec.
    pub policy: String,
    /// Seed.
    pub seed: u64,
    /// Simulated duration, ns.
    pub duration_ns: Ns,
    /// `ok` or `error`.
    pub status: String,
    /// What went wrong, for a failed run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The run report's `summary` (docs/metrics.md); null for a failed run.
    #[serde(default)]
    pub summary: serde_json::Value,
    /// The grid's extra metrics (null where the report cannot give one).
    #[serde(default)]
    pub metrics: BTreeMap<String, Option<f64>>,
}

/// What identifies a run.
type Key = (String, String, String, u64, Ns);

impl Row {
    fn key(&self) -> Key {
        (self.machine.clone(), self.workload.clone(), self.policy.clone(), self.seed, self.duration_ns)
    }
}

/// One run to do.
struct Run {
    index: usize,
    machine: usize,
    workload: usize,
    policy: usize,
    seed: u64,
    duration_ns: Ns,
}

/// The summary fields of the CSV, as paths into the summary object.
const CSV_FIELDS: &[(&str, &str)] = &[
    ("nr_tasks", "nr_tasks"),
    ("nr_exited", "nr_exited"),
    ("makespan_ns", "makespan_ns"),
    ("work_per_sec", "work_per_sec"),
    ("switches_per_sec", "switches_per_sec"),
    ("migrations_per_sec", "migrations_per_sec"),
    ("utilization", "utilization"),
    ("wakeup_mean_ns", "wakeup_latency.mean_ns"),
    ("wakeup_p50_ns", "wakeup_latency.p50_ns"),
    ("wakeup_p99_ns", "wakeup_latency.p99_ns"),
    ("wakeup_max_ns", "wakeup_latency.max_ns"),
    ("max_wait_ns", "max_wait_ns"),
    ("jain_index", "fairness.jain_index"),
    ("overhead_ns", "overhead_ns"),
    ("energy_uj", "energy_uj"),
    ("nr_events", "nr_events"),
];

/// Reads the journal: the rows of finished runs. A last line without its newline (the sweep was
/// killed while writing it) is dropped and cut from the file; any other bad line is an error.
fn read_journal(path: &Path) -> Result<Vec<Row>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let mut rows = Vec::new();
    let mut complete_len = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if !line.ends_with('\n') {
            break; // cut by an interruption
        }
        complete_len += line.len();
        if line.trim().is_empty() {
            continue;
        }
        let row: Row = serde_json::from_str(line).with_context(|| {
            format!("{}:{}: not a sweep row (delete the file, or use --fresh)", path.display(), i + 1)
        })?;
        rows.push(row);
    }
    if complete_len < text.len() {
        let f = std::fs::OpenOptions::new().write(true).open(path)?;
        f.set_len(complete_len as u64)?;
    }
    Ok(rows)
}

/// Quotes a CSV field when it needs it.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A summary value by dotted path, as CSV text.
fn csv_value(summary: &serde_json::Value, path: &str) -> String {
    let mut v = summary;
    for part in path.split('.') {
        v = &v[part];
    }
    match v {
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The results table.
fn csv(rows: &[Row], metrics: &[String]) -> String {
    let mut out = String::from("machine,workload,policy,seed,duration_ns,status");
    for (name, _) in CSV_FIELDS {
        out.push(',');
        out.push_str(name);
    }
    for m in metrics {
        out.push(',');
        out.push_str(&csv_field(m));
    }
    out.push_str(",error\n");
    for r in rows {
        let mut cells =
            vec![csv_field(&r.machine), csv_field(&r.workload), csv_field(&r.policy), r.seed.to_string()];
        cells.push(r.duration_ns.to_string());
        cells.push(r.status.clone());
        for (_, path) in CSV_FIELDS {
            cells.push(csv_value(&r.summary, path));
        }
        for m in metrics {
            cells.push(r.metrics.get(m).copied().flatten().map_or(String::new(), |x| x.to_string()));
        }
        cells.push(csv_field(r.error.as_deref().unwrap_or("")));
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

/// Simulates one run.
fn execute(
    run: &Run,
    g: &grid::Grid,
    machines: &[Machine],
    workloads: &[Workload],
    sample_interval_ns: Ns,
    reports: Option<&Path>,
) -> Row {
    let policy_spec = &g.policies[run.policy];
    let mut row = Row {
        machine: g.machines[run.machine].clone(),
        workload: g.workloads[run.workload].clone(),
        policy: policy_spec.clone(),
        seed: run.seed,
        duration_ns: run.duration_ns,
        status: "ok".into(),
        error: None,
        summary: serde_json::Value::Null,
        metrics: BTreeMap::new(),
    };
    let result = (|| -> Result<()> {
        let mut policy = crate::load_policy(&g.resolve(policy_spec))?;
        let cfg = RunConfig {
            duration_ns: run.duration_ns,
            seed: run.seed,
            sample_interval_ns,
            ..RunConfig::default()
        };
        let sim = Sim::new(
            &machines[run.machine],
            &workloads[run.workload],
            policy.as_mut(),
            policy_spec.clone(),
            cfg,
        )?;
        let report = sim.run()?;
        let json = report.to_json();
        if let Some(dir) = reports {
            let path = dir.join(format!("{:04}.json", run.index));
            std::fs::write(&path, &json).with_context(|| format!("cannot write {}", path.display()))?;
        }
        let v: serde_json::Value = serde_json::from_str(&json)?;
        for (name, _, m) in &g.metrics {
            row.metrics.insert(name.clone(), Metric::eval(m, &v));
        }
        row.summary = v["summary"].clone();
        Ok(())
    })();
    if let Err(e) = result {
        row.status = "error".into();
        row.error = Some(format!("{e:#}"));
    }
    row
}

/// Runs `schedlab sweep`.
pub fn sweep_cmd(args: SweepArgs) -> Result<()> {
    let g = grid::read(Path::new(&args.grid))?;
    if args.jobs == Some(0) {
        bail!("--jobs must be at least 1");
    }
    let out = PathBuf::from(args.out.clone().unwrap_or_else(|| format!("{}-sweep", g.name)));
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let journal = out.join("rows.jsonl");
    if args.fresh {
        let _ = std::fs::remove_file(&journal);
    }
    let reports = if args.reports {
        let d = out.join("runs");
        std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
        Some(d)
    } else {
        None
    };
    let machines: Vec<Machine> =
        g.machines.iter().map(|m| Machine::load(&g.resolve(m))).collect::<Result<_, _>>()?;
    let workloads: Vec<Workload> =
        g.workloads.iter().map(|w| crate::load_workload(&g.resolve(w))).collect::<Result<_>>()?;
    // Every run, in grid order.
    let mut runs = Vec::with_capacity(g.len());
    for machine in 0..g.machines.len() {
        for (workload, w) in workloads.iter().enumerate() {
            let duration_ns = g.duration_ns.or(w.duration_ns).unwrap_or(10_000_000_000);
            for policy in 0..g.policies.len() {
                for &seed in &g.seeds {
                    runs.push(Run { index: runs.len(), machine, workload, policy, seed, duration_ns });
                }
            }
        }
    }
    let key_of = |r: &Run| -> Key {
        (
            g.machines[r.machine].clone(),
            g.workloads[r.workload].clone(),
            g.policies[r.policy].clone(),
            r.seed,
            r.duration_ns,
        )
    };
    let mut done: HashMap<Key, Row> = HashMap::new();
    for row in read_journal(&journal)? {
        if row.status == "ok" {
            done.insert(row.key(), row);
        }
    }
    let wanted: std::collections::HashSet<Key> = runs.iter().map(key_of).collect();
    let stale = done.keys().filter(|k| !wanted.contains(*k)).count();
    let pending: Vec<&Run> = runs.iter().filter(|r| !done.contains_key(&key_of(r))).collect();
    let resumed = runs.len() - pending.len();
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .context("cannot start the worker threads")?;
    let sample_interval_ns = if g.metrics.is_empty() && !args.reports { 0 } else { 10_000_000 };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&journal)
        .with_context(|| format!("cannot open {}", journal.display()))?;
    let file = Mutex::new(file);
    let bar = crate::progress_bar(!args.quiet, pending.len() as u64);
    let start = std::time::Instant::now();
    let finished: Mutex<Vec<Row>> = Mutex::new(Vec::new());
    let write_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    pool.install(|| {
        pending.par_iter().for_each(|run| {
            let row = execute(run, &g, &machines, &workloads, sample_interval_ns, reports.as_deref());
            let line = serde_json::to_string(&row).expect("a row serialises") + "\n";
            {
                let mut f = file.lock().expect("journal lock");
                if let Err(e) = f.write_all(line.as_bytes()).and_then(|()| f.flush()) {
                    write_error.lock().expect("lock").get_or_insert(anyhow::Error::new(e));
                }
            }
            if let Some(bar) = &bar {
                if start.elapsed().as_secs_f64() >= 1.0 && bar.is_hidden() {
                    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                }
                bar.inc(1);
                bar.set_message(format!("{} {} {} seed {}", row.machine, row.workload, row.policy, row.seed));
            }
            finished.lock().expect("rows lock").push(row);
        });
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if let Some(e) = write_error.into_inner().expect("lock") {
        return Err(e).with_context(|| format!("cannot append to {}", journal.display()));
    }
    for row in finished.into_inner().expect("rows lock") {
        done.insert(row.key(), row);
    }
    let rows: Vec<Row> = runs.iter().map(|r| done.remove(&key_of(r)).expect("every run has a row")).collect();
    let metric_names: Vec<String> = g.metrics.iter().map(|(n, _, _)| n.clone()).collect();
    let csv_path = out.join("results.csv");
    std::fs::write(&csv_path, csv(&rows, &metric_names))
        .with_context(|| format!("cannot write {}", csv_path.display()))?;
    let json_path = out.join("results.json");
    let doc = serde_json::json!({
        "schema": "schedlab.sweep/1",
        "name": g.name,
        "metrics": g.metrics.iter().map(|(n, t, _)| serde_json::json!({"name": n, "expr": t})).collect::<Vec<_>>(),
        "rows": rows,
    });
    std::fs::write(&json_path, serde_json::to_string_pretty(&doc)? + "\n")
        .with_context(|| format!("cannot write {}", json_path.display()))?;
    let failed: Vec<&Row> = rows.iter().filter(|r| r.status != "ok").collect();
    if !args.quiet {
        let mut text = format!(
            "sweep {}: {} runs ({} machine x {} workload x {} policy x {} seed), {} run now on {} threads in {:.1} s, {} from an earlier sweep\n",
            g.name,
            runs.len(),
            g.machines.len(),
            g.workloads.len(),
            g.policies.len(),
            g.seeds.len(),
            pending.len(),
            jobs,
            start.elapsed().as_secs_f64(),
            resumed
        );
        if stale > 0 {
            text.push_str(&format!(
                "  {stale} earlier rows in {} are not in this grid (left out)\n",
                journal.display()
            ));
        }
        text.push_str(&format!("  results: {} and {}\n", csv_path.display(), json_path.display()));
        crate::emit(&text);
    }
    if !failed.is_empty() {
        let list: Vec<String> = failed
            .iter()
            .take(5)
            .map(|r| {
                format!(
                    "  {} / {} / {} / seed {}: {}",
                    r.machine,
                    r.workload,
                    r.policy,
                    r.seed,
                    r.error.as_deref().unwrap_or("")
                )
            })
            .collect();
        bail!(
            "{} of {} runs failed (rows with status `error`):\n{}",
            failed.len(),
            rows.len(),
            list.join("\n")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_specs_with_commas() {
        let row = Row {
            machine: "up".into(),
            workload: "hackbench[groups=1,loops=5]".into(),
            policy: "cfs".into(),
            seed: 2,
            duration_ns: 5,
            status: "ok".into(),
            error: None,
            summary: serde_json::json!({"nr_tasks": 3, "wakeup_latency": {"p99_ns": 7}}),
            metrics: BTreeMap::from([("x".to_string(), Some(1.5)), ("y".to_string(), None)]),
        };
        let text = csv(&[row], &["x".into(), "y".into()]);
        let line = text.lines().nth(1).unwrap();
        assert!(line.starts_with("up,\"hackbench[groups=1,loops=5]\",cfs,2,5,ok,3,"), "{line}");
        assert!(line.ends_with(",1.5,,"), "{line}");
        let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
        assert_eq!(header.len(), 6 + CSV_FIELDS.len() + 3);
        let p99 = header.iter().position(|h| *h == "wakeup_p99_ns").unwrap();
        // Column p99 of the row (after the quoted workload, which holds one comma).
        assert_eq!(line.split(',').nth(p99 + 1), Some("7"));
    }

    #[test]
    fn journal_drops_a_cut_last_line_and_rejects_a_bad_one() {
        let dir = std::env::temp_dir().join(format!("schedlab-journal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("rows.jsonl");
        let good = r#"{"machine":"up","workload":"w","policy":"cfs","seed":1,"duration_ns":5,"status":"ok"}"#;
        std::fs::write(&p, format!("{good}\n{{\"machine\":\"u")).unwrap();
        let rows = read_journal(&p).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), format!("{good}\n"));
        std::fs::write(&p, format!("not json\n{good}\n")).unwrap();
        let e = read_journal(&p).unwrap_err().to_string();
        assert!(e.contains("rows.jsonl:1: not a sweep row"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
