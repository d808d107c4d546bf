//! `schedlab sweep GRID`: a grid's runs on local threads (rayon), through the shared
//! [`schedlab_cli::sweep`] plan, journal and results (docs/sweep.md).

use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use schedlab_cli::sweep::{append_row, read_journal, Plan, Row};
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

/// Runs `schedlab sweep`.
pub fn sweep_cmd(args: SweepArgs) -> Result<()> {
    let plan = Plan::read(Path::new(&args.grid))?;
    let g = &plan.grid;
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
    let (mut done, stale) = plan.done(read_journal(&journal)?);
    let pending: Vec<_> = plan.cells.iter().filter(|c| !done.contains_key(&plan.key(c))).collect();
    let resumed = plan.cells.len() - pending.len();
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .context("cannot start the worker threads")?;
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
        pending.par_iter().for_each(|cell| {
            let row = plan.run(cell, reports.as_deref());
            if let Err(e) = append_row(&mut file.lock().expect("journal lock"), &row) {
                write_error.lock().expect("lock").get_or_insert(anyhow::Error::new(e));
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
    let (rows, csv_path, json_path) = plan.write_results(&out, done)?;
    let failed: Vec<&Row> = rows.iter().filter(|r| r.status != "ok").collect();
    if !args.quiet {
        let n = |k: usize, one: &str, many: &str| format!("{k} {}", if k == 1 { one } else { many });
        let mut text = format!(
            "sweep {}: {} runs ({} x {} x {} x {}), {} run now on {} threads in {:.1} s, {} from an earlier sweep\n",
            g.name,
            plan.cells.len(),
            n(g.machines.len(), "machine", "machines"),
            n(g.workloads.len(), "workload", "workloads"),
            n(g.policies.len(), "policy", "policies"),
            n(g.seeds.len(), "seed", "seeds"),
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
