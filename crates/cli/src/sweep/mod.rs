//! Sweeps: every combination of a grid's machines, workloads, policies and seeds, each run a row of
//! one table (docs/sweep.md). The `schedlab sweep` command runs the cells on local threads; the
//! Python package runs the same cells on local processes or a Dask cluster. Both keep the same
//! journal and write the same results, through this module.
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
//! * `runs/NNNN.json` with reports on: each run's full report (`schedlab.run/1`), NNNN being the
//!   row's index in grid order.

pub mod grid;

use crate::metric::Metric;
use crate::resolve::{load_policy, load_workload};
use anyhow::{Context, Result};
use schedlab_core::Ns;
use schedlab_sim::{Machine, RunConfig, Sim};
use schedlab_workload::Workload;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::path::{Path, PathBuf};

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

/// What identifies a run: machine, workload, policy, seed, duration.
pub type Key = (String, String, String, u64, Ns);

impl Row {
    /// The run this row is the result of.
    pub fn key(&self) -> Key {
        (self.machine.clone(), self.workload.clone(), self.policy.clone(), self.seed, self.duration_ns)
    }
}

/// One run of a grid.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    /// Its index in grid order (machine, workload, policy, seed).
    pub index: usize,
    /// Index into the grid's machines.
    pub machine: usize,
    /// Index into the grid's workloads.
    pub workload: usize,
    /// Index into the grid's policies.
    pub policy: usize,
    /// Seed.
    pub seed: u64,
    /// Simulated duration, ns.
    pub duration_ns: Ns,
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
pub fn read_journal(path: &Path) -> Result<Vec<Row>> {
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

/// A checked grid with its machines and workloads loaded and its cells in grid order.
pub struct Plan {
    /// The grid.
    pub grid: grid::Grid,
    /// Its machines, loaded.
    pub machines: Vec<Machine>,
    /// Its workloads, loaded.
    pub workloads: Vec<Workload>,
    /// Every run, in grid order.
    pub cells: Vec<Cell>,
}

impl Plan {
    /// Reads and checks a grid file (every error names the file, line and key) and lists its runs.
    pub fn read(path: &Path) -> Result<Plan> {
        let grid = grid::read(path)?;
        let machines: Vec<Machine> =
            grid.machines.iter().map(|m| Machine::load(&grid.resolve(m))).collect::<Result<_, _>>()?;
        let workloads: Vec<Workload> =
            grid.workloads.iter().map(|w| load_workload(&grid.resolve(w))).collect::<Result<_>>()?;
        let mut cells = Vec::with_capacity(grid.nr_runs());
        for machine in 0..grid.machines.len() {
            for (workload, w) in workloads.iter().enumerate() {
                let duration_ns = grid.duration_ns.or(w.duration_ns).unwrap_or(10_000_000_000);
                for policy in 0..grid.policies.len() {
                    for &seed in &grid.seeds {
                        cells.push(Cell { index: cells.len(), machine, workload, policy, seed, duration_ns });
                    }
                }
            }
        }
        Ok(Plan { grid, machines, workloads, cells })
    }

    /// The key of a cell's row.
    pub fn key(&self, c: &Cell) -> Key {
        let g = &self.grid;
        (
            g.machines[c.machine].clone(),
            g.workloads[c.workload].clone(),
            g.policies[c.policy].clone(),
            c.seed,
            c.duration_ns,
        )
    }

    /// The sampling interval runs need: none unless metrics or full reports may read the series.
    pub fn sample_interval_ns(&self, reports: bool) -> Ns {
        if self.grid.metrics.is_empty() && !reports {
            0
        } else {
            10_000_000
        }
    }

    /// The rows of `journal` for this grid's runs (failed ones are run again), and how many rows
    /// belong to runs no longer in the grid.
    pub fn done(&self, journal: Vec<Row>) -> (HashMap<Key, Row>, usize) {
        let mut done = HashMap::new();
        for row in journal {
            if row.status == "ok" {
                done.insert(row.key(), row);
            }
        }
        let wanted: std::collections::HashSet<Key> = self.cells.iter().map(|c| self.key(c)).collect();
        let stale = done.keys().filter(|k| !wanted.contains(*k)).count();
        (done, stale)
    }

    /// Each run's row from a journal holding every run's result: its `ok` row, else its last
    /// failed one (what the results of a finished sweep show).
    pub fn finished(&self, journal: Vec<Row>) -> HashMap<Key, Row> {
        let mut rows: HashMap<Key, Row> = HashMap::new();
        for row in journal {
            let keep = rows.get(&row.key()).is_none_or(|old| old.status != "ok");
            if keep {
                rows.insert(row.key(), row);
            }
        }
        rows
    }

    /// Simulates one cell into its row; a failure is a row with status `error` and its message.
    /// With `reports`, the full report is written to `reports/NNNN.json`.
    pub fn run(&self, c: &Cell, reports: Option<&Path>) -> Row {
        let g = &self.grid;
        let policy_spec = &g.policies[c.policy];
        let mut row = Row {
            machine: g.machines[c.machine].clone(),
            workload: g.workloads[c.workload].clone(),
            policy: policy_spec.clone(),
            seed: c.seed,
            duration_ns: c.duration_ns,
            status: "ok".into(),
            error: None,
            summary: serde_json::Value::Null,
            metrics: BTreeMap::new(),
        };
        let result = (|| -> Result<()> {
            let mut policy = load_policy(&g.resolve(policy_spec))?;
            let cfg = RunConfig {
                duration_ns: c.duration_ns,
                seed: c.seed,
                sample_interval_ns: self.sample_interval_ns(reports.is_some()),
                ..RunConfig::default()
            };
            let sim = Sim::new(
                &self.machines[c.machine],
                &self.workloads[c.workload],
                policy.as_mut(),
                policy_spec.clone(),
                cfg,
            )?;
            let json = sim.run()?.to_json();
            if let Some(dir) = reports {
                let path = dir.join(format!("{:04}.json", c.index));
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

    /// Writes `results.csv` and `results.json` in `out` from the rows of every cell (in grid
    /// order); returns the rows and the two paths. Fails if a cell has no row.
    pub fn write_results(
        &self,
        out: &Path,
        mut done: HashMap<Key, Row>,
    ) -> Result<(Vec<Row>, PathBuf, PathBuf)> {
        let rows: Vec<Row> = self
            .cells
            .iter()
            .map(|c| {
                done.remove(&self.key(c)).ok_or_else(|| anyhow::anyhow!("run {} has no result", c.index))
            })
            .collect::<Result<_>>()?;
        let metric_names: Vec<String> = self.grid.metrics.iter().map(|(n, _, _)| n.clone()).collect();
        let csv_path = out.join("results.csv");
        std::fs::write(&csv_path, csv(&rows, &metric_names))
            .with_context(|| format!("cannot write {}", csv_path.display()))?;
        let json_path = out.join("results.json");
        let doc = serde_json::json!({
            "schema": "schedlab.sweep/1",
            "name": self.grid.name,
            "metrics": self.grid.metrics.iter().map(|(n, t, _)| serde_json::json!({"name": n, "expr": t})).collect::<Vec<_>>(),
            "rows": rows,
        });
        std::fs::write(&json_path, serde_json::to_string_pretty(&doc)? + "\n")
            .with_context(|| format!("cannot write {}", json_path.display()))?;
        Ok((rows, csv_path, json_path))
    }
}

/// Appends one row to the journal and flushes it.
pub fn append_row(journal: &mut std::fs::File, row: &Row) -> std::io::Result<()> {
    let line = serde_json::to_string(row).expect("a row serialises") + "\n";
    journal.write_all(line.as_bytes())?;
    journal.flush()
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
