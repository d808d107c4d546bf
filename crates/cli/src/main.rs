//! `schedlab`: the command-line front of the schedlab libraries.
//!
//! A thin shell: it parses arguments, resolves machine, policy and workload through the libraries,
//! runs the simulation and prints or writes the report. Errors are reported as one clear sentence
//! (with file, line and key where the input was a file) and a non-zero exit status.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use schedlab_cli::resolve::{load_policy, load_workload, load_workload_with, run_duration, split_specs};
use schedlab_cli::{compare, report_html};
use schedlab_core::fmt_ns;
use schedlab_sim::{Machine, RunConfig, Sim};
use schedlab_workload::{generators, parse_duration};
use std::io::{IsTerminal, Write};
use std::path::Path;

mod bench;
mod callgrind;
mod random_workload;
mod reproduce;
mod sweep_cmd;
mod trace_cmd;
mod validate;
mod validate_random;
mod vm_test;

/// A laboratory for CPU schedulers: run classic and modern schedulers side by side on a simulated
/// machine.
#[derive(Parser)]
#[command(name = "schedlab", version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Simulate a workload on a machine under a policy and print a summary.
    Run(RunArgs),
    /// Run several policies on the identical machine, workload and seeds and print them side by side,
    /// with differences against a baseline policy.
    Compare(CompareArgs),
    /// Run a workload for real on this machine's kernel, with one thread per task, and measure it into
    /// the same report as `run` (docs/exec.md).
    Exec(ExecArgs),
    /// Measure this machine (topology, HZ, context switch, cross-CPU wakeup, idle and timer exits,
    /// and each kind of kernel call's CPU time) and write a machine file for the simulator
    /// (docs/exec.md).
    Calibrate {
        /// The machine file to write.
        #[arg(short, long, default_value = "this-machine.toml")]
        output: String,
        /// Only measure the compute loop `schedlab exec` calibrates its work with and print its
        /// speed (picoseconds per loop, for `exec --ps-per-loop`); write no machine file.
        #[arg(long = "loop")]
        loop_only: bool,
    },
    /// Run a workload for real and simulate it on a model of this machine under EEVDF, and print the
    /// two metric by metric with the error (docs/validation.md).
    Validate(ValidateArgs),
    /// Make one self-contained HTML page with plots from run reports (`schedlab run --json`).
    Report {
        /// Run reports (JSON); the first is the baseline of the comparison chart.
        #[arg(required = true)]
        results: Vec<String>,
        /// The HTML file to write.
        #[arg(short, long, default_value = "report.html")]
        output: String,
    },
    /// Run every combination of a grid's machines, workloads, policies and seeds in parallel, into
    /// one table (CSV and JSON); an interrupted sweep resumes where it stopped (docs/sweep.md).
    Sweep(sweep_cmd::SweepArgs),
    /// Re-run the seed papers' experiments (experiments/) and check each claim: the paper's value,
    /// schedlab's, and whether the claim holds.
    Reproduce(ReproduceArgs),
    /// List what is available.
    List {
        /// What to list.
        what: ListWhat,
    },
    /// List the built-in workload generators with their parameters (same as `list workloads`).
    Workloads {
        /// Print the reference as Markdown (docs/workloads.md is this output).
        #[arg(long)]
        markdown: bool,
    },
    /// Work with one workload.
    Workload {
        #[command(subcommand)]
        cmd: WorkloadCmd,
    },
    /// Work with a recorded Linux scheduling trace: measure it, or turn it into a workload
    /// (docs/traces.md).
    Trace {
        #[command(subcommand)]
        cmd: trace_cmd::TraceCmd,
    },
    /// Measure the simulator's speed and memory on fixed cases and compare with the committed
    /// baseline (docs/performance.md).
    Bench(bench::BenchArgs),
    /// Replay a recorded trace under one or more policies and compare each with the recording:
    /// "what if this run had used ULE?" (docs/traces.md).
    Replay(trace_cmd::ReplayArgs),
    /// Boot a sched_ext kernel in a VM and run a workload under the kernel's EEVDF and under schedlab
    /// policies loaded with schedlab-scx; bring back each run's report (docs/real-kernel.md).
    VmTest(vm_test::VmTestArgs),
}

#[derive(Subcommand)]
enum WorkloadCmd {
    /// Print a workload (a built-in such as `hackbench[groups=2]`, or a file) as TOML, to copy and edit.
    Show {
        /// Built-in spec or workload file.
        spec: String,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum ListWhat {
    /// Scheduling policies and their parameters.
    Policies,
    /// Machine presets.
    Machines,
    /// Built-in workloads and their parameters.
    Workloads,
}

#[derive(clap::Args)]
struct RunArgs {
    /// Machine preset (see `schedlab list machines`) or a machine TOML file.
    #[arg(long, default_value = "xeon-e5520-2s")]
    machine: String,
    /// Policy spec such as `cfs` or `cfs[sched_latency_ns=6000000]`, or a policy TOML file.
    #[arg(long, default_value = "cfs")]
    policy: String,
    /// Built-in workload such as `demo` or `hogs[n=400]`, a workload TOML file, or an rt-app JSON file.
    #[arg(long, default_value = "demo")]
    workload: String,
    /// Simulated time to run, with a unit (`10s`, `500ms`). Default: the workload's own duration, else 10s.
    #[arg(long)]
    duration: Option<String>,
    /// Seed of the run's random number generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Override the machine's timer frequency (100, 250, 300 or 1000 Hz).
    #[arg(long)]
    hz: Option<u32>,
    /// Frequency governor: performance, powersave, ondemand or avec (needs a machine with frequency
    /// levels, such as core2duo; see docs/hardware-model.md).
    #[arg(long)]
    governor: Option<String>,
    /// Write the full report as JSON (schema `schedlab.run/1`, see docs/metrics.md) to this file.
    #[arg(long)]
    json: Option<String>,
    /// Write the simulated schedule as a Perfetto trace (open it in ui.perfetto.dev) to this file.
    #[arg(long)]
    trace: Option<String>,
    /// Time-series sampling interval with a unit (`10ms`); `0s` turns sampling off, and with it the
    /// per-CPU timeline of who ran where that the report's Gantt chart draws.
    #[arg(long, default_value = "10ms")]
    sample_interval: String,
    /// Also sample each task's cumulative run time (large with many tasks).
    #[arg(long)]
    sample_tasks: bool,
    /// Check engine and policy invariants after every event (slow).
    #[arg(long)]
    check: bool,
    /// Where the periodic ticks fall after the start, with a unit, below one tick (`1ms`). Default:
    /// a tick at the start. A real run starts at an arbitrary point between two ticks
    /// (docs/validation.md).
    #[arg(long)]
    tick_phase: Option<String>,
    /// Print nothing but errors.
    #[arg(long, short)]
    quiet: bool,
    #[command(flatten)]
    limits: LimitArgs,
}

/// Caps that stop a run that would otherwise exhaust time or memory (docs/errors.md).
#[derive(clap::Args, Clone)]
struct LimitArgs {
    /// Most tasks a run may have at once, started plus forked (and most a workload file may start).
    #[arg(long, default_value_t = schedlab_sim::limits::MAX_TASKS)]
    max_tasks: usize,
    /// Most simulation events a run may handle before it stops with an error.
    #[arg(long, default_value_t = schedlab_sim::limits::MAX_EVENTS)]
    max_events: u64,
    /// Longest simulated time a run may ask for, with a unit (default: 30 days).
    #[arg(long, default_value = "2592000s")]
    max_duration: String,
    /// Most events the --trace recording may hold.
    #[arg(long, default_value_t = schedlab_sim::limits::MAX_TRACE_EVENTS)]
    max_trace_events: usize,
}

impl LimitArgs {
    /// Sets the limits of a run configuration.
    fn apply(&self, cfg: &mut RunConfig) -> Result<()> {
        cfg.max_tasks = self.max_tasks;
        cfg.max_events = self.max_events;
        cfg.max_duration_ns =
            parse_duration(&self.max_duration).map_err(|e| anyhow::anyhow!("--max-duration: {e}"))?;
        cfg.max_trace_events = self.max_trace_events;
        Ok(())
    }
}

/// What `compare` runs without `--policies`: each general-purpose scheduler once (the modern
/// baseline first), leaving out variants of another (`avec` on CFS, `elsc` and `pmqs` on 2.4) and the
/// `fifo`/`rr` baselines.
const DEFAULT_COMPARE_POLICIES: &str = "eevdf,cfs,o1,rsdl,linux24,bfs,ule,4bsd,htfs,vtrr";

/// The text width `compare` fits its table to without `--wide`.
const COMPARE_WIDTH: usize = 100;

#[derive(clap::Args)]
struct CompareArgs {
    /// Policy specs separated by commas (commas inside `[...]` belong to a spec), e.g.
    /// `eevdf,cfs,ule,htfs,o1`. Default: the general-purpose schedulers of Linux and FreeBSD and the
    /// seeds' own designs (`DEFAULT_COMPARE_POLICIES`).
    #[arg(long, default_value = DEFAULT_COMPARE_POLICIES)]
    policies: String,
    /// The policy the others are compared with (default: eevdf if listed, else the first).
    #[arg(long)]
    baseline: Option<String>,
    /// Machine preset or machine TOML file. Default: xeon-e5520-2s; with --with, a machine of the
    /// real run's CPU count must be named (a preset or the file `schedlab calibrate` writes).
    #[arg(long)]
    machine: Option<String>,
    /// Built-in workload, workload TOML file or rt-app JSON file.
    #[arg(long, default_value = "demo")]
    workload: String,
    /// Simulated time per run, with a unit. Default: the workload's own duration, else 10s.
    #[arg(long)]
    duration: Option<String>,
    /// First seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Runs per policy, with seeds `seed`, `seed + 1`, ...: mean, standard deviation and 95 % intervals.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// Frequency governor (machines with frequency levels).
    #[arg(long)]
    governor: Option<String>,
    /// Run reports to add as columns (from `exec --json`, `vm-test` or `run --json`), e.g. the same
    /// workload run on a real kernel under the same policy; repeatable.
    #[arg(long)]
    with: Vec<String>,
    /// Print the table in one block however wide, instead of fitting 100 columns (blocks of
    /// policies, each with the metric names and the baseline).
    #[arg(long)]
    wide: bool,
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

#[derive(clap::Args)]
struct ExecArgs {
    /// Workload: a built-in, a workload TOML file or an rt-app JSON file.
    workload: String,
    /// Longest real time to run, with a unit (`5s`). Default: the workload's own duration, else 10s.
    #[arg(long)]
    duration: Option<String>,
    /// Most threads the run may create, forks included.
    #[arg(long, default_value_t = 256)]
    max_threads: usize,
    /// Allow SCHED_FIFO and SCHED_RR tasks (a runaway real-time thread can freeze the machine).
    #[arg(long)]
    allow_rt: bool,
    /// Seed of the random durations.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the report as JSON (schema `schedlab.run/1`, `source` = `real`) to this file.
    #[arg(long)]
    json: Option<String>,
    /// Do not trace `sched_migrate_task` events (tracefs, root) to count migrations; use the kernel's
    /// per-thread count or sampling instead.
    #[arg(long)]
    no_trace: bool,
    /// Run the controlling thread (which starts, times and stops the run) as SCHED_FIFO with
    /// SCHED_RESET_ON_FORK, so a policy that starves normal threads cannot keep the run from stopping;
    /// the task threads still start as SCHED_OTHER (root or CAP_SYS_NICE; a warning otherwise).
    #[arg(long)]
    fifo_controller: bool,
    /// Run the controlling thread on this CPU alone, off the CPUs it was started on, where the
    /// tasks still run (a task without `cpus` of its own is given those): its own wake-ups (at
    /// least every 50 ms) then leave the workload's CPUs alone.
    #[arg(long, value_name = "CPU")]
    controller_cpu: Option<u32>,
    /// The compute loop's speed in picoseconds per loop (`schedlab calibrate --loop` prints it),
    /// instead of measuring it as the run starts: the same work in every run of a series.
    #[arg(long, value_name = "PS")]
    ps_per_loop: Option<u64>,
    /// Sample every task's CPU time at this interval (`100ms`, at least 1ms) into the report's
    /// `series.task_run_ns`, as `run --sample-tasks` does: a task's share of a time window, not
    /// only its total. Off by default (the controller's reads take a little CPU).
    #[arg(long, value_name = "DURATION")]
    sample_interval: Option<String>,
    /// Create each initial task when its start comes (the controller forks it then) instead of
    /// creating all before the common start and holding them at a start gate, where they sleep: a
    /// policy that credits sleep (O(1), ULE) would treat them as interactive from the start.
    /// Instances that start together then start a fork apart.
    #[arg(long)]
    spawn_at_start: bool,
    /// Print nothing but errors and warnings.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(clap::Args)]
struct ValidateArgs {
    /// Workload: a built-in, a workload TOML file or an rt-app JSON file (not with --random).
    #[arg(required_unless_present = "random", conflicts_with = "random")]
    workload: Option<String>,
    /// Validate on N random workloads (seeded by --seed) instead: each runs for real --runs times
    /// and is simulated under each --policy; prints the distribution of errors per metric kind and
    /// the worst workloads, and saves every workload's TOML in --out.
    #[arg(long, value_name = "N")]
    random: Option<u64>,
    /// Real runs per random workload (at least 2: the real side's own spread is reported).
    #[arg(long, default_value_t = 2)]
    runs: u32,
    /// The simulated policy (repeatable with --random: each is compared with the same real runs).
    #[arg(long, default_value = "eevdf")]
    policy: Vec<String>,
    /// Directory for the random workloads' TOML and the summary JSON.
    #[arg(long, default_value = "validate-random-out")]
    out: String,
    /// With --random: compare with the real runs an earlier series saved in this directory (its
    /// --out; the same N, seed and duration) instead of running them again, so a model change is
    /// measured against the same real runs.
    #[arg(long, value_name = "DIR", requires = "random")]
    real_from: Option<String>,
    /// How many of the worst random workloads to list.
    #[arg(long, default_value_t = 5)]
    worst: usize,
    /// Simulate at this many tick phases, spread evenly over one tick, and compare their pooled
    /// figures: a real run starts at an arbitrary point between two ticks, and a periodic task
    /// keeps its phase against the tick for the whole run (docs/validation.md). 1: one run with a
    /// tick at the start.
    #[arg(long, default_value_t = 4)]
    phases: u32,
    /// Print nothing but the result (no progress).
    #[arg(long, short)]
    quiet: bool,
    /// The simulated machine: a machine file (from `schedlab calibrate`) or preset. Default: calibrate
    /// this machine now.
    #[arg(long)]
    machine: Option<String>,
    /// Longest time for both runs, with a unit. Default: the workload's own duration, else 10s.
    #[arg(long)]
    duration: Option<String>,
    /// Seed of both runs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Most threads of the real run.
    #[arg(long, default_value_t = 256)]
    max_threads: usize,
    /// Allow SCHED_FIFO and SCHED_RR tasks in the real run.
    #[arg(long)]
    allow_rt: bool,
    /// Write the comparison as JSON (schema `schedlab.validate/1`) to this file.
    #[arg(long)]
    json: Option<String>,
}

#[derive(clap::Args)]
struct ReproduceArgs {
    /// Papers (`ule-vs-cfs`), experiments (`ule-vs-cfs/fibo-sysbench` or `fibo-sysbench`) or
    /// experiment files.
    select: Vec<String>,
    /// Every experiment in the directory.
    #[arg(long)]
    all: bool,
    /// Smaller but still meaningful sizes (each file's `[quick]` section), for CI.
    #[arg(long)]
    quick: bool,
    /// The experiments directory.
    #[arg(long, default_value = "experiments")]
    dir: String,
    /// Directory for one HTML report per experiment (`<out>/<paper>/<experiment>.html`).
    #[arg(long, short, default_value = "reproduce-out")]
    out: String,
    /// Do not write HTML reports.
    #[arg(long)]
    no_html: bool,
    /// Simulations run at once (default: the available cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Print one Markdown table of every claim (experiments/README.md holds this output).
    #[arg(long)]
    markdown: bool,
    /// Only read and check the experiment files and list their cases and claims.
    #[arg(long)]
    list: bool,
    /// Write the outcomes as JSON (schema `schedlab.reproduce/1`) to this file.
    #[arg(long)]
    json: Option<String>,
    /// Print nothing but errors.
    #[arg(long, short)]
    quiet: bool,
    /// Also run each case in a virtual machine under each policy loaded as the kernel's scheduler
    /// (schedlab-scx, as `vm-test` does) and check the claims on the real reports beside the
    /// simulated ones, at the sizes of each file's `[real]` section (docs/real-kernel.md).
    #[arg(long)]
    real: bool,
    /// With --real: runs of each case under each policy in the VM.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// Re-run each claim with at least three seeds and at both ends of every free parameter's range
    /// (each file's `[[free]]`), and say per claim whether it holds everywhere, at the chosen point
    /// only, or nowhere.
    #[arg(long, conflicts_with_all = ["real", "list"])]
    sensitivity: bool,
    /// How the VM boots (with --real).
    #[command(flatten, next_help_heading = "The virtual machine (--real)")]
    vm: vm_test::VmOptions,
}

/// Writes to standard output; a closed pipe (`schedlab workloads | head`) ends the program quietly.
fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write to standard output: {e}");
        std::process::exit(1);
    }
}

fn main() {
    // Policies from outside schedlab-policies join through the public registry (one line each; see
    // docs/guide/your-policy.md).
    schedlab_example_lottery::register();
    let cli = Cli::parse();
    if std::env::var_os("SCHEDLAB_CHECK_ARGS").is_some() {
        // The docs' examples test (crates/cli/tests/docs_examples.rs): the arguments parsed, and
        // nothing runs.
        return;
    }
    let result = match cli.cmd {
        Cmd::Run(args) => run(args),
        Cmd::Compare(args) => compare_cmd(args),
        Cmd::Reproduce(args) => reproduce_cmd(args),
        Cmd::Exec(args) => exec_cmd(args),
        Cmd::Validate(args) => validate_cmd(args),
        Cmd::Calibrate { loop_only: true, .. } => {
            emit(&format!("{}\n", schedlab_exec::calibrate::ps_per_loop(5)));
            Ok(())
        }
        Cmd::Calibrate { output, .. } => schedlab_exec::machine_file::measure()
            .context("calibrate: a measurement could not set up its objects")
            .and_then(|c| {
                let text = c.to_toml();
                std::fs::write(&output, &text).with_context(|| format!("cannot write {output}")).map(|()| {
                    emit(&format!(
                        "{text}\nmachine file written to {output} (use it as --machine {output})\n"
                    ))
                })
            }),
        Cmd::Report { results, output } => report_html::load(&results).and_then(|runs| {
            let page = report_html::html(&runs)?;
            std::fs::write(&output, page).with_context(|| format!("cannot write {output}"))?;
            emit(&format!("report written to {output}\n"));
            Ok(())
        }),
        Cmd::List { what } => {
            emit(&list(what));
            Ok(())
        }
        Cmd::Workloads { markdown } => {
            emit(&if markdown { workloads_markdown() } else { list(ListWhat::Workloads) });
            Ok(())
        }
        Cmd::Workload { cmd: WorkloadCmd::Show { spec } } => {
            load_workload(&spec).map(|w| emit(&schedlab_workload::to_toml(&w)))
        }
        Cmd::Trace { cmd } => trace_cmd::trace_cmd(cmd),
        Cmd::Replay(args) => trace_cmd::replay_cmd(args),
        Cmd::Bench(args) => bench::bench_cmd(args),
        Cmd::Sweep(args) => sweep_cmd::sweep_cmd(args),
        Cmd::VmTest(args) => vm_test::vm_test_cmd(args),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn list(what: ListWhat) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    match what {
        ListWhat::Policies => {
            for p in schedlab_policies::policies() {
                let _ = writeln!(out, "{:<8} {}", p.name, p.summary);
                for i in (p.params)() {
                    let _ = writeln!(out, "    {:<30} default {:<12} {}", i.key, i.default, i.help);
                }
            }
        }
        ListWhat::Machines => {
            for (name, desc) in schedlab_sim::machine::presets() {
                let m = Machine::preset(name).expect("listed preset exists");
                let _ = writeln!(out, "{name:<16} {:>4} CPUs  HZ={:<5} {desc}", m.topology.nr_cpus(), m.hz);
            }
        }
        ListWhat::Workloads => {
            for g in generators::generators() {
                let _ = writeln!(out, "{:<18} {}", g.name, g.summary);
                let _ = writeln!(out, "{:<18} score: {}", "", g.score);
                for (k, d, h) in g.params {
                    let _ = writeln!(out, "    {k:<16} default {d:<8} {h}");
                }
            }
        }
    }
    out
}

/// The generator reference as Markdown (kept in docs/workloads.md; a test compares the two).
fn workloads_markdown() -> String {
    use std::fmt::Write as _;
    let mut out = String::from(
        "# Built-in workloads\n\nGenerated by `schedlab workloads --markdown`; use any of them as \
         `--workload name[key=value,...]` and print the expanded TOML with `schedlab workload show name`.\n\n\
         Every time or cost default says where it comes from: a *source* (the real program's own default, \
         a paper, a measurement), or *no source*, a value schedlab chose where none gives one \
         (crates/workload/src/generators/sources.rs). An experiment that runs a default with no source \
         must declare it `[[free]]` with a range, so `--sensitivity` shows whether a verdict rests on it; \
         `schedlab reproduce` refuses the file otherwise (experiments/README.md).\n",
    );
    for g in generators::generators() {
        let _ = write!(
            out,
            "\n## `{}`\n\n{}\n\n**Models:** {}\n\n**Simplifies:** {}\n\n**Score:** {}\n\n",
            g.name, g.summary, g.models, g.simplifies, g.score
        );
        out.push_str("| parameter | default | meaning | where the default comes from |\n|---|---|---|---|\n");
        for (k, d, h) in g.params {
            let source = generators::sources::source_of(g.name, k).map(|s| s.describe()).unwrap_or_default();
            let _ = writeln!(out, "| `{k}` | `{d}` | {h} | {source} |");
        }
    }
    out
}

fn run(args: RunArgs) -> Result<()> {
    let req = schedlab_cli::api::RunRequest {
        machine: args.machine.clone(),
        policy: args.policy.clone(),
        workload: args.workload.clone(),
        duration: args.duration.clone(),
        seed: args.seed,
        hz: args.hz,
        governor: args.governor.clone(),
        sample_interval: args.sample_interval.clone(),
        sample_tasks: args.sample_tasks,
        check: args.check,
        tick_phase: args.tick_phase.clone(),
    };
    let schedlab_cli::api::Prepared { machine, workload, mut policy, mut cfg } = req.prepare()?;
    let duration_ns = cfg.duration_ns;
    cfg.trace = args.trace.is_some();
    args.limits.apply(&mut cfg)?;
    // Find an unwritable output path now, not after the run.
    for path in [&args.json, &args.trace].into_iter().flatten() {
        check_writable(path)?;
    }
    let spec = args.policy.clone();
    let mut sim = Sim::new(&machine, &workload, policy.as_mut(), spec, cfg)?;
    let bar = progress_bar(!args.quiet, duration_ns);
    if let Some(bar) = bar.clone() {
        let start = std::time::Instant::now();
        let mut calls = 0u64;
        sim.on_progress(move |now, end| {
            calls += 1;
            let secs = start.elapsed().as_secs_f64();
            if secs < 1.0 {
                return; // runs shorter than a second show nothing
            }
            if bar.is_hidden() {
                bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            }
            bar.set_position(now);
            let rate = calls as f64 * 65_536.0 / secs / 1e6;
            bar.set_message(format!("{} of {} simulated, {rate:.1} M events/s", fmt_ns(now), fmt_ns(end)));
        });
    }
    let (report, trace) = sim.run_traced()?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if let (Some(path), Some(trace)) = (&args.trace, trace) {
        std::fs::write(path, trace.perfetto()).with_context(|| format!("cannot write {path}"))?;
    }
    if let Some(path) = &args.json {
        std::fs::write(path, report.to_json()).with_context(|| format!("cannot write {path}"))?;
    }
    if !args.quiet {
        let mut text = report.summary_table();
        if let Some(path) = &args.json {
            text.push_str(&format!("  report written to {path}\n"));
        }
        if let Some(path) = &args.trace {
            text.push_str(&format!("  Perfetto trace written to {path} (open it in ui.perfetto.dev)\n"));
        }
        emit(&text);
    }
    Ok(())
}

/// Fails if `path` cannot be written (a missing directory, no permission), leaving no file behind.
fn check_writable(path: &str) -> Result<()> {
    let existed = Path::new(path).exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .with_context(|| format!("cannot write {path}"))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

fn compare_cmd(args: CompareArgs) -> Result<()> {
    // The reports to add as columns, read first: a real run decides which machines make sense.
    let mut with = Vec::new();
    for path in &args.with {
        with.push((path, compare::load_report(path).with_context(|| "--with")?));
    }
    let machine = match &args.machine {
        Some(m) => m.clone(),
        None => {
            let default = "xeon-e5520-2s";
            let cpus = schedlab_cli::resolve::load_machine(default, None, None)?.topology.nr_cpus() as u64;
            for (path, v) in &with {
                match compare::nr_cpus_of(v) {
                    Some(n) if n != cpus => bail!(
                        "--with {path}: a run on {n} CPUs ({}), but the default machine {default} has {cpus}: name the machine to simulate with --machine (a preset of {n} CPUs, or the file `schedlab calibrate` writes for this machine)",
                        v["machine"]["name"].as_str().unwrap_or("?")
                    ),
                    _ => {}
                }
            }
            default.to_string()
        }
    };
    if args.machine.is_some() && !with.is_empty() {
        let cpus = schedlab_cli::resolve::load_machine(&machine, None, args.governor.as_deref())?
            .topology
            .nr_cpus() as u64;
        for (path, v) in &with {
            if let Some(n) = compare::nr_cpus_of(v).filter(|&n| n != cpus) {
                eprintln!(
                    "warning: --with {path} ran on {n} CPUs; the simulated machine {machine} has {cpus}"
                );
            }
        }
    }
    let req = schedlab_cli::api::CompareRequest {
        machine,
        governor: args.governor.clone(),
        workload: args.workload.clone(),
        policies: split_specs(&args.policies),
        baseline: args.baseline.clone(),
        duration: args.duration.clone(),
        seed: args.seed,
        repeat: args.repeat,
    };
    let total = req.policies.len() * args.repeat as usize;
    let bar = progress_bar(!args.quiet, total as u64);
    let start = std::time::Instant::now();
    let repeat = args.repeat as usize;
    let sim = req.simulate(&mut |i, j, spec, seed| {
        if let Some(bar) = &bar {
            if start.elapsed().as_secs_f64() >= 1.0 && bar.is_hidden() {
                bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            }
            bar.set_position((i * repeat + j) as u64);
            bar.set_message(format!("{spec}, seed {seed}"));
        }
    })?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let schedlab_cli::api::Simulated { policies, baseline, mut reports, seeds } = sim;
    let mut policies = policies;
    for (path, v) in with {
        policies.push(compare::label_of(&v, path));
        reports.push(vec![v]);
    }
    let cmp = compare::compare(&policies, baseline, &reports, &seeds);
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&cmp).context("cannot serialise the comparison")?;
        std::fs::write(path, text + "\n").with_context(|| format!("cannot write {path}"))?;
    }
    if let Some(path) = &args.csv {
        std::fs::write(path, cmp.csv()).with_context(|| format!("cannot write {path}"))?;
    }
    if !args.quiet {
        emit(&if args.wide { cmp.table() } else { cmp.table_width(COMPARE_WIDTH) });
    }
    Ok(())
}

fn exec_cmd(args: ExecArgs) -> Result<()> {
    let workload = load_workload(&args.workload)?;
    let duration_ns = run_duration(args.duration.as_deref(), &workload)?;
    if args.max_threads == 0 {
        bail!("--max-threads must be at least 1");
    }
    let cfg = schedlab_exec::ExecConfig {
        duration_ns,
        max_threads: args.max_threads,
        allow_rt: args.allow_rt,
        seed: args.seed,
        trace_migrations: !args.no_trace,
        // Fault injection for the fault tests (docs/exec.md).
        inject_panic: std::env::var("SCHEDLAB_EXEC_INJECT_PANIC").ok(),
        fifo_controller: args.fifo_controller,
        controller_cpu: args.controller_cpu,
        ps_per_loop: args.ps_per_loop,
        sample_interval_ns: match &args.sample_interval {
            Some(d) => parse_duration(d).map_err(|e| anyhow::anyhow!("--sample-interval: {e}"))?,
            None => 0,
        },
        spawn_at_start: args.spawn_at_start,
    };
    if args.ps_per_loop == Some(0) {
        bail!("--ps-per-loop must be at least 1 (picoseconds per compute loop)");
    }
    if let Some(c) = args.controller_cpu {
        let n = schedlab_exec::sys::nr_cpus();
        if c as usize >= n {
            bail!("--controller-cpu: there is no CPU {c} (this machine has CPUs 0-{})", n.saturating_sub(1));
        }
    }
    if let Some(path) = &args.json {
        check_writable(path)?;
    }
    let out = schedlab_exec::run(&workload, &cfg).map_err(|e| anyhow::anyhow!("{}: {e}", args.workload))?;
    let interrupted = out.report.stop_reason == "interrupted";
    for w in &out.warnings {
        eprintln!("warning: {w}");
    }
    if !args.quiet {
        for n in &out.notes {
            eprintln!("note: {n}");
        }
    }
    if let Some(path) = &args.json {
        std::fs::write(path, out.report.to_json()).with_context(|| format!("cannot write {path}"))?;
    }
    if !args.quiet {
        let mut text = out.report.summary_table();
        if let Some(path) = &args.json {
            text.push_str(&format!("  report written to {path}\n"));
        }
        emit(&text);
    }
    if interrupted {
        // A partial result: kept, marked (stop_reason), said, and not a success.
        eprintln!(
            "warning: interrupted after {}: the report covers only the part that ran (stop_reason = \"interrupted\")",
            fmt_ns(out.report.duration_ns)
        );
        std::process::exit(130);
    }
    Ok(())
}

fn validate_cmd(args: ValidateArgs) -> Result<()> {
    if args.phases == 0 {
        bail!("--phases: at least 1 (one simulated run with a tick at the start)");
    }
    if args.random.is_some() {
        return validate_random_cmd(args);
    }
    let spec = args.workload.clone().unwrap_or_default();
    if args.policy.len() != 1 {
        bail!("--policy: one policy for a single workload (several only with --random)");
    }
    let workload = load_workload(&spec)?;
    let duration_ns = run_duration(args.duration.as_deref(), &workload)?;
    let machine = match &args.machine {
        Some(m) => Machine::load(m)?,
        None => {
            let text = schedlab_exec::machine_file::measure().context("calibrating this machine")?.to_toml();
            Machine::from_toml("(calibrated now)", &text)?
        }
    };
    let cfg = schedlab_exec::ExecConfig {
        duration_ns,
        max_threads: args.max_threads,
        allow_rt: args.allow_rt,
        seed: args.seed,
        ..schedlab_exec::ExecConfig::default()
    };
    let real = schedlab_exec::run(&workload, &cfg).map_err(|e| anyhow::anyhow!("{spec}: {e}"))?;
    for w in &real.warnings {
        eprintln!("warning: {w}");
    }
    let sim_cfg = RunConfig { duration_ns, seed: args.seed, sample_interval_ns: 0, ..RunConfig::default() };
    let sim = validate::simulate_phases(&machine, &workload, &args.policy[0], &sim_cfg, args.phases)?;
    let v = validate::compare_sides(
        &sim,
        &validate::Side::of(&real.report),
        &validate::timer_only_kinds(&workload),
    );
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&v).context("cannot serialise the validation")?;
        std::fs::write(path, text + "\n").with_context(|| format!("cannot write {path}"))?;
    }
    emit(&v.table());
    Ok(())
}

/// One random workload's outcome under one policy, for the worst-workload list and the JSON.
#[derive(serde::Serialize)]
struct RandomOutcome {
    index: u64,
    name: String,
    tasks: u64,
    file: String,
    median_abs_error_pct: f64,
}

/// The real runs of random workload `rw` that an earlier series saved in `dir` (`--real-from`):
/// `None` if that series left it out (no saved runs); an error if the saved workload is not the
/// one this seed and index generate, or fewer than `runs` runs are saved.
fn saved_real_runs(
    dir: &str,
    rw: &random_workload::RandomWorkload,
    runs: u32,
) -> Result<Option<Vec<validate::Side>>> {
    let first = format!("{dir}/{}.real0.json", rw.name);
    if !std::path::Path::new(&first).exists() {
        return Ok(None);
    }
    let toml_file = format!("{dir}/{}.toml", rw.name);
    let saved = std::fs::read_to_string(&toml_file)
        .with_context(|| format!("--real-from: cannot read {toml_file}"))?;
    if saved != rw.toml {
        bail!(
            "--real-from: {toml_file} is not the workload this series generates for {}: the earlier series used another --seed or --duration",
            rw.name
        );
    }
    let mut reals = Vec::new();
    for r in 0..runs {
        let file = format!("{dir}/{}.real{r}.json", rw.name);
        let text = std::fs::read_to_string(&file).with_context(|| {
            format!("--real-from: cannot read {file} (the earlier series made fewer than --runs {runs} real runs)")
        })?;
        let side: validate::Side = serde_json::from_str(&text)
            .with_context(|| format!("--real-from: {file} is not a saved real run"))?;
        reals.push(side);
    }
    Ok(Some(reals))
}

/// `schedlab validate --random N` (see validate_random.rs).
fn validate_random_cmd(args: ValidateArgs) -> Result<()> {
    use validate_random::{samples, summarise, table, MetricKind, Sample};
    let n = args.random.unwrap_or(0);
    if n == 0 {
        bail!("--random: the number of workloads must be at least 1");
    }
    if args.runs < 2 {
        bail!("--runs: at least 2 real runs per workload (the real side's spread is part of the result)");
    }
    let machine = match &args.machine {
        Some(m) => Machine::load(m)?,
        None => {
            let text = schedlab_exec::machine_file::measure().context("calibrating this machine")?.to_toml();
            Machine::from_toml("(calibrated now)", &text)?
        }
    };
    let duration_ns = match &args.duration {
        Some(d) => parse_duration(d).map_err(|e| anyhow::anyhow!("--duration: {e}"))?,
        None => 2_000_000_000,
    };
    if duration_ns == 0 {
        bail!("--duration must be above zero");
    }
    for p in &args.policy {
        load_policy(p)?; // every policy spec checked before the first real run
    }
    let real_cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ncpus = machine.topology.nr_cpus().min(real_cpus) as u64;
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out))?;
    let mut all: Vec<Vec<Sample>> = vec![Vec::new(); args.policy.len()];
    let mut outcomes: Vec<Vec<RandomOutcome>> = (0..args.policy.len()).map(|_| Vec::new()).collect();
    let mut failed: Vec<String> = Vec::new();
    for i in 0..n {
        let rw = random_workload::generate(args.seed, i, ncpus, duration_ns);
        let file = format!("{}/{}.toml", args.out, rw.name);
        // Saved real runs are checked against the saved workload before anything is written over it.
        let saved = match &args.real_from {
            Some(dir) => Some(saved_real_runs(dir, &rw, args.runs)?),
            None => None,
        };
        std::fs::write(&file, &rw.toml).with_context(|| format!("cannot write {file}"))?;
        let workload = schedlab_workload::parse_toml(&file, &rw.toml)?;
        let cfg = schedlab_exec::ExecConfig {
            duration_ns,
            max_threads: args.max_threads,
            allow_rt: args.allow_rt,
            seed: args.seed,
            ..schedlab_exec::ExecConfig::default()
        };
        let reals = match saved {
            Some(Some(reals)) => reals,
            Some(None) => {
                let dir = args.real_from.as_deref().unwrap_or_default();
                eprintln!("error: {file}: no real runs saved in {dir} (left out of the statistics)");
                failed.push(file.clone());
                continue;
            }
            None => {
                let mut reals = Vec::new();
                for r in 0..args.runs {
                    match schedlab_exec::run(&workload, &cfg) {
                        Ok(real) => {
                            for w in &real.warnings {
                                eprintln!("warning: {file}: {w}");
                            }
                            let side = validate::Side::of(&real.report);
                            let saved = format!("{}/{}.real{r}.json", args.out, rw.name);
                            let text = serde_json::to_string(&side).context("cannot serialise a real run")?;
                            std::fs::write(&saved, text + "\n")
                                .with_context(|| format!("cannot write {saved}"))?;
                            reals.push(side);
                        }
                        Err(e) => {
                            // One workload that cannot run is reported and left out, not the end of
                            // the series.
                            eprintln!("error: {file}: {e} (left out of the statistics)");
                            failed.push(file.clone());
                            break;
                        }
                    }
                }
                if reals.len() < args.runs as usize {
                    continue;
                }
                reals
            }
        };
        let timer_only = validate::timer_only_kinds(&workload);
        let mut line = format!("  [{}/{n}] {} ({} tasks):", i + 1, rw.name, rw.tasks);
        for (k, spec) in args.policy.iter().enumerate() {
            let sim_cfg =
                RunConfig { duration_ns, seed: args.seed, sample_interval_ns: 0, ..RunConfig::default() };
            let sim_side = validate::simulate_phases(&machine, &workload, spec, &sim_cfg, args.phases)?;
            let per_real: Vec<validate::Validation> =
                reals.iter().map(|r| validate::compare_sides(&sim_side, r, &timer_only)).collect();
            let s = samples(i, &per_real);
            let mut errs: Vec<f64> =
                s.iter().filter(|x| x.kind != MetricKind::HogCpuShare).map(|x| x.error_pct.abs()).collect();
            let median = validate_random::quantile(&mut errs, 0.5);
            let _ =
                std::fmt::Write::write_fmt(&mut line, format_args!(" {spec} median |error| {median:.1} %;"));
            outcomes[k].push(RandomOutcome {
                index: i,
                name: rw.name.clone(),
                tasks: rw.tasks,
                file: file.clone(),
                median_abs_error_pct: median,
            });
            all[k].extend(s);
        }
        if !args.quiet {
            eprintln!("{}", line.trim_end_matches(';'));
        }
    }
    let mut text = String::new();
    let mut json = Vec::new();
    for (k, spec) in args.policy.iter().enumerate() {
        let summary = summarise(&all[k]);
        text.push_str(&table(spec, n as usize - failed.len(), &summary));
        let mut worst: Vec<&RandomOutcome> = outcomes[k].iter().collect();
        worst.sort_by(|a, b| b.median_abs_error_pct.total_cmp(&a.median_abs_error_pct));
        text.push_str(&format!("\n  worst workloads under {spec} (replay: schedlab validate <file>):\n"));
        for o in worst.iter().take(args.worst) {
            text.push_str(&format!(
                "    {:<22} {:>3} tasks  median |error| {:>6.1} %  {}\n",
                o.name, o.tasks, o.median_abs_error_pct, o.file
            ));
        }
        text.push('\n');
        json.push(serde_json::json!({
            "policy": spec,
            "summary": summary,
            "workloads": outcomes[k],
            "samples": all[k],
        }));
    }
    let doc = serde_json::json!({
        "schema": "schedlab.validate-random/1",
        "seed": args.seed,
        "workloads": n,
        "real_runs": args.runs,
        "real_from": args.real_from,
        "duration_ns": duration_ns,
        "machine": machine.name,
        "failed": failed,
        "policies": json,
    });
    let body = serde_json::to_string_pretty(&doc).context("cannot serialise the validation")? + "\n";
    let summary_file = format!("{}/summary.json", args.out);
    std::fs::write(&summary_file, &body).with_context(|| format!("cannot write {summary_file}"))?;
    if let Some(path) = &args.json {
        std::fs::write(path, &body).with_context(|| format!("cannot write {path}"))?;
    }
    text.push_str(&format!("  every workload's TOML and {summary_file} are in {}/\n", args.out));
    emit(&text);
    if !failed.is_empty() {
        bail!(
            "{} of {n} workloads could not run for real and are left out: {}",
            failed.len(),
            failed.join(", ")
        );
    }
    Ok(())
}

fn reproduce_cmd(args: ReproduceArgs) -> Result<()> {
    let jobs = match args.jobs {
        Some(0) => bail!("--jobs must be at least 1"),
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    if args.real && args.list {
        bail!("--real and --list: --list only reads the files; give one of them");
    }
    let opts = reproduce::Options {
        select: args.select,
        all: args.all,
        quick: args.quick,
        dir: args.dir.into(),
        out: (!args.no_html).then(|| args.out.clone().into()),
        jobs,
        markdown: args.markdown,
        json: args.json.map(Into::into),
        progress: !args.quiet,
        list: args.list,
        real: args.real.then(|| (args.vm, args.repeat, std::path::PathBuf::from(&args.out))),
        sensitivity: args.sensitivity,
    };
    let text = reproduce::reproduce(&opts)?;
    if !args.quiet {
        emit(&text);
    }
    Ok(())
}

/// A progress bar on standard error, hidden until the caller decides the run is long enough to show
/// it (over a second); `None` when quiet or when standard error is not a terminal.
fn progress_bar(enabled: bool, len: u64) -> Option<indicatif::ProgressBar> {
    if !enabled || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::with_draw_target(Some(len), indicatif::ProgressDrawTarget::hidden());
    let style = indicatif::ProgressStyle::with_template("  {bar:30} {percent:>3} %  {msg}  (ETA {eta})")
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    bar.set_style(style);
    Some(bar)
}
