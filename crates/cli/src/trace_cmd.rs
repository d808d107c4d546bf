//! `schedlab trace import|stats` and `schedlab replay`: recorded Linux traces as workloads, as
//! measurements, and replayed under any policy next to the recording (crates/trace).

use anyhow::{bail, Context, Result};
use schedlab_sim::{Machine, RunConfig, RunReport, Sim};
use schedlab_trace::import::{BurstOp, Filter, ImportOptions};
use schedlab_trace::Recording;

/// Which threads of the trace to use.
#[derive(clap::Args, Clone, Default)]
pub struct SelectArgs {
    /// Keep only these thread ids (comma-separated; with --tgid and --comm: any match keeps).
    #[arg(long, value_delimiter = ',')]
    pid: Vec<i32>,
    /// Keep only the threads of these processes (thread group ids).
    #[arg(long, value_delimiter = ',')]
    tgid: Vec<i32>,
    /// Keep only threads whose name contains one of these strings.
    #[arg(long, value_delimiter = ',')]
    comm: Vec<String>,
    /// Keep the kernel's own threads too (kworker, ksoftirqd, migration, rcu...).
    #[arg(long)]
    kernel_threads: bool,
}

impl SelectArgs {
    fn filter(&self) -> Filter {
        Filter {
            pids: self.pid.clone(),
            tgids: self.tgid.clone(),
            comms: self.comm.clone(),
            kernel_threads: self.kernel_threads,
        }
    }
}

/// How CPU bursts replay.
#[derive(Clone, Copy, clap::ValueEnum, Default)]
pub enum Bursts {
    /// Calibrated work: scales with the simulated CPU's speed and cache warmth.
    #[default]
    Compute,
    /// Wall-clock busy time: the recorded time on any machine.
    Spin,
}

impl From<Bursts> for BurstOp {
    fn from(b: Bursts) -> BurstOp {
        match b {
            Bursts::Compute => BurstOp::Compute,
            Bursts::Spin => BurstOp::Spin,
        }
    }
}

/// `schedlab trace ...`
#[derive(clap::Subcommand)]
pub enum TraceCmd {
    /// Turn a recorded trace (ftrace text, trace-cmd report, perf script, Perfetto) into a workload
    /// TOML file that replays it.
    Import {
        /// The trace file.
        trace: String,
        /// Write the workload here (default: standard output).
        #[arg(long, short)]
        output: Option<String>,
        /// How CPU bursts replay.
        #[arg(long, value_enum, default_value_t = Bursts::Compute)]
        bursts: Bursts,
        #[command(flatten)]
        select: SelectArgs,
    },
    /// Measure a recorded trace like a simulated run: per-thread run, wait and sleep time, wakeup
    /// latency, context switches, migrations.
    Stats {
        /// The trace file.
        trace: String,
        /// Also print one line per thread.
        #[arg(long)]
        tasks: bool,
        /// Write the report as JSON (schema `schedlab.run/1`, `source` = `trace`) to this file.
        #[arg(long)]
        json: Option<String>,
        #[command(flatten)]
        select: SelectArgs,
    },
}

/// `schedlab replay`
#[derive(clap::Args)]
pub struct ReplayArgs {
    /// The trace file.
    trace: String,
    /// Policy specs separated by commas, each replayed and compared with the recording.
    #[arg(long, alias = "policy", default_value = "eevdf")]
    policies: String,
    /// Machine preset or machine TOML file (default: a flat machine with the trace's CPU count and
    /// the default costs; `schedlab calibrate` writes a model of this machine).
    #[arg(long)]
    machine: Option<String>,
    /// Longest simulated time, with a unit (default: the recorded span plus the larger of it and 1s).
    #[arg(long)]
    duration: Option<String>,
    /// Seed of the runs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How CPU bursts replay.
    #[arg(long, value_enum, default_value_t = Bursts::Compute)]
    bursts: Bursts,
    #[command(flatten)]
    select: SelectArgs,
    /// Write the comparison as JSON (schema `schedlab.compare/1`) to this file.
    #[arg(long)]
    json: Option<String>,
    /// Write the comparison as CSV to this file.
    #[arg(long)]
    csv: Option<String>,
    /// Print nothing but errors.
    #[arg(long, short)]
    quiet: bool,
}

fn load(path: &str) -> Result<Recording> {
    let rec = schedlab_trace::load(path)?;
    for w in &rec.warnings {
        eprintln!("warning: {path}: {w}");
    }
    Ok(rec)
}

fn file_name(path: &str) -> String {
    std::path::Path::new(path).file_name().map_or(path.to_string(), |n| n.to_string_lossy().into_owned())
}

/// Runs `schedlab trace <cmd>`.
pub fn trace_cmd(cmd: TraceCmd) -> Result<()> {
    match cmd {
        TraceCmd::Import { trace, output, bursts, select } => {
            let rec = load(&trace)?;
            let opts = ImportOptions {
                name: format!("trace:{}", file_name(&trace)),
                bursts: bursts.into(),
                filter: select.filter(),
            };
            let im = schedlab_trace::import(&rec, &opts).map_err(|e| anyhow::anyhow!("{trace}: {e}"))?;
            match output {
                Some(path) => {
                    std::fs::write(&path, &im.toml).with_context(|| format!("cannot write {path}"))?;
                    eprintln!(
                        "{path}: {} threads ({} dropped), {} wait edges, {} sleeps, {} forks",
                        im.nr_threads, im.nr_dropped, im.nr_edges, im.nr_sleeps, im.nr_forks
                    );
                }
                None => crate::emit(&im.toml),
            }
        }
        TraceCmd::Stats { trace, tasks, json, select } => {
            let rec = load(&trace)?;
            let report = schedlab_trace::stats::report(&rec, &select.filter(), &file_name(&trace));
            if let Some(path) = json {
                std::fs::write(&path, report.to_json() + "\n")
                    .with_context(|| format!("cannot write {path}"))?;
            }
            let mut out = format!("{} trace, {} events\n", rec.format, rec.nr_events);
            out.push_str(&report.summary_table());
            if tasks {
                out.push_str(&task_table(&report));
            }
            crate::emit(&out);
        }
    }
    Ok(())
}

/// One line per task: times in ms, latency in us.
fn task_table(r: &RunReport) -> String {
    let mut out = format!(
        "\n  {:<28} {:>10} {:>10} {:>10} {:>7} {:>7} {:>6} {:>9} {:>9} {:>9}\n",
        "thread", "run ms", "wait ms", "sleep ms", "vcsw", "ivcsw", "migr", "lat p50", "lat p99", "lat max"
    );
    let ms = |ns: u64| format!("{:.3}", ns as f64 / 1e6);
    let us = |ns: u64| format!("{:.1}us", ns as f64 / 1e3);
    for t in &r.tasks {
        let l = &t.wakeup_latency;
        out.push_str(&format!(
            "  {:<28} {:>10} {:>10} {:>10} {:>7} {:>7} {:>6} {:>9} {:>9} {:>9}\n",
            t.name,
            ms(t.run_ns),
            ms(t.wait_ns),
            ms(t.sleep_ns),
            t.nvcsw,
            t.nivcsw,
            t.nr_migrations,
            us(l.p50_ns),
            us(l.p99_ns),
            us(l.max_ns)
        ));
    }
    out
}

/// Per-thread CPU time of a replay against the recording: mean and largest relative error over the
/// threads that ran at least 10 us, and the thread with the largest.
pub fn cpu_time_error(recorded: &RunReport, replayed: &RunReport) -> Option<(f64, f64, String)> {
    let mut errs = Vec::new();
    for t in recorded.tasks.iter().filter(|t| t.run_ns >= 10_000) {
        let run: u64 = replayed.tasks.iter().filter(|r| r.template == t.template).map(|r| r.run_ns).sum();
        errs.push(((run as f64 - t.run_ns as f64).abs() / t.run_ns as f64, t.name.clone()));
    }
    let n = errs.len();
    let (max, name) = errs.iter().cloned().max_by(|a, b| a.0.total_cmp(&b.0))?;
    Some((errs.iter().map(|e| e.0).sum::<f64>() / n as f64, max, name))
}

/// Runs `schedlab replay`.
pub fn replay_cmd(args: ReplayArgs) -> Result<()> {
    let rec = load(&args.trace)?;
    let filter = args.select.filter();
    let name = file_name(&args.trace);
    let mut recorded = schedlab_trace::stats::report(&rec, &filter, &name);
    if matches!(args.bursts, Bursts::Spin) {
        // Replayed as spin, the recorded run time is spin time, not calibrated work.
        for t in &mut recorded.tasks {
            (t.spin_ns, t.work_ns) = (t.work_ns, 0);
        }
        recorded.summary.work_ns = 0;
        recorded.summary.work_per_sec = 0.0;
    }
    let opts = ImportOptions { name: format!("trace:{name}"), bursts: args.bursts.into(), filter };
    let im = schedlab_trace::import(&rec, &opts).map_err(|e| anyhow::anyhow!("{}: {e}", args.trace))?;
    let machine = match &args.machine {
        Some(m) => Machine::load(m)?,
        None => Machine::flat(rec.nr_cpus),
    };
    if machine.topology.nr_cpus() as u32 != rec.nr_cpus && !args.quiet {
        eprintln!(
            "note: the trace was recorded on {} CPUs, the machine `{}` has {}",
            rec.nr_cpus,
            machine.name,
            machine.topology.nr_cpus()
        );
    }
    let policies = crate::split_specs(&args.policies);
    if policies.is_empty() {
        bail!("--policies: no policy given");
    }
    let duration_ns = crate::run_duration(args.duration.as_deref(), &im.workload)?;
    let bar = crate::progress_bar(!args.quiet, policies.len() as u64);
    let mut reports = vec![vec![recorded.clone()]];
    for (i, spec) in policies.iter().enumerate() {
        if let Some(bar) = &bar {
            bar.set_position(i as u64);
            bar.set_message(spec.clone());
        }
        let mut policy = crate::load_policy(spec).with_context(|| format!("--policies: `{spec}`"))?;
        let cfg = RunConfig { duration_ns, seed: args.seed, sample_interval_ns: 0, ..RunConfig::default() };
        reports.push(vec![Sim::new(&machine, &im.workload, policy.as_mut(), spec.clone(), cfg)?.run()?]);
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let mut names = vec!["recorded".to_string()];
    names.extend(policies.iter().cloned());
    let json: Vec<Vec<serde_json::Value>> =
        reports.iter().map(|runs| runs.iter().map(crate::compare::to_json).collect()).collect();
    let mut cmp = crate::compare::compare(&names, 0, &json, &[args.seed]);
    // The table's machine is the one the replays ran on (the recording's is in the first line).
    cmp.machine = machine.name.clone();
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&cmp).context("cannot serialise the comparison")?;
        std::fs::write(path, text + "\n").with_context(|| format!("cannot write {path}"))?;
    }
    if let Some(path) = &args.csv {
        std::fs::write(path, cmp.csv()).with_context(|| format!("cannot write {path}"))?;
    }
    if !args.quiet {
        let mut out = format!(
            "replay of {} ({} trace: {} threads, {} CPUs) on {} ({} CPUs)\n",
            args.trace,
            rec.format,
            im.nr_threads,
            rec.nr_cpus,
            machine.name,
            machine.topology.nr_cpus()
        );
        out.push_str(&cmp.table());
        out.push_str("\nCPU time per thread, replayed vs recorded (threads that ran at least 10 us):\n");
        for (spec, runs) in policies.iter().zip(&reports[1..]) {
            if let Some((mean, max, who)) = cpu_time_error(&recorded, &runs[0]) {
                out.push_str(&format!(
                    "  {spec:<20} mean |error| {:.2} %, largest {:.2} % ({who})\n",
                    mean * 100.0,
                    max * 100.0
                ));
            }
        }
        crate::emit(&out);
    }
    Ok(())
}
