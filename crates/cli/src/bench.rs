//! `schedlab bench`: the engine's speed and memory on fixed cases, compared with a committed baseline
//! (benchmarks/baseline.json), so a change that slows the simulator shows.
//!
//! An *event* is one entry popped from the engine's event queue (`summary.nr_events`: ticks, segment
//! ends, wakeups, reschedule requests, starts... stale ones included): the unit of simulation work.
//! Each case runs in its own process (`schedlab bench --case NAME`), so its peak resident memory
//! (`VmHWM` of /proc/self/status) is its own. Wall time is the simulation alone (machine, workload and
//! policy built before the clock starts), the best of at least three runs (more, up to ten, until
//! half a second has been simulated): this VM's speed varies by tens of percent between seconds.

use anyhow::{bail, Context, Result};
use schedlab_core::{Ns, NSEC_PER_MSEC, NSEC_PER_SEC};
use schedlab_sim::{Machine, RunConfig, Sim};
use serde::{Deserialize, Serialize};
use std::io::IsTerminal;

/// `schedlab bench`
#[derive(clap::Args)]
pub struct BenchArgs {
    /// Also run the long cases (1,000 simulated seconds on 64 CPUs; 100,000 tasks on 1,024 CPUs).
    #[arg(long)]
    full: bool,
    /// Only the cases whose name contains this.
    #[arg(long)]
    only: Option<String>,
    /// The baseline to compare with.
    #[arg(long, default_value = "benchmarks/baseline.json")]
    baseline: String,
    /// Write this run's results as the new baseline to this file.
    #[arg(long)]
    save: Option<String>,
    /// Run one case in this process and print its result as JSON (used by `bench` itself).
    #[arg(long, hide = true)]
    case: Option<String>,
}

/// One benchmark case.
struct Case {
    name: String,
    policy: &'static str,
    workload: String,
    cpus: u32,
    duration_ns: Ns,
    long: bool,
}

fn cases() -> Vec<Case> {
    let mut v = vec![Case {
        name: "cfs-hogs1000-64cpu".into(),
        policy: "cfs",
        workload: "hogs[n=1000]".into(),
        cpus: 64,
        duration_ns: 2 * NSEC_PER_SEC,
        long: false,
    }];
    for cpus in [2u32, 16, 64, 256, 1024] {
        v.push(Case {
            name: format!("cfs-hackbench-{cpus}cpu"),
            policy: "cfs",
            workload: format!("hackbench[groups={}]", (cpus / 4).max(1)),
            cpus,
            duration_ns: 200 * NSEC_PER_MSEC,
            long: false,
        });
        v.push(Case {
            name: format!("cfs-sysbench-cpu-{cpus}cpu"),
            policy: "cfs",
            workload: format!("sysbench-cpu[threads={}]", cpus * 2),
            cpus,
            duration_ns: NSEC_PER_SEC,
            long: false,
        });
    }
    for policy in ["eevdf", "o1", "ule", "bfs", "htfs", "linux24"] {
        v.push(Case {
            name: format!("{policy}-hogs1000-64cpu"),
            policy,
            workload: "hogs[n=1000]".into(),
            cpus: 64,
            duration_ns: NSEC_PER_SEC,
            long: false,
        });
    }
    v.push(Case {
        name: "cfs-oltp2000-64cpu-1000s".into(),
        policy: "cfs",
        workload: "sysbench-oltp[threads=2000]".into(),
        cpus: 64,
        duration_ns: 1000 * NSEC_PER_SEC,
        long: true,
    });
    v.push(Case {
        name: "cfs-hogs100000-1024cpu".into(),
        policy: "cfs",
        workload: "hogs[n=100000]".into(),
        cpus: 1024,
        duration_ns: 100 * NSEC_PER_MSEC,
        long: true,
    });
    v
}

/// The measurements of one case.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CaseResult {
    /// Case name.
    pub name: String,
    /// Tasks created.
    pub tasks: u64,
    /// CPUs.
    pub cpus: u32,
    /// Simulated time, s.
    pub simulated_s: f64,
    /// Events processed.
    pub events: u64,
    /// Wall time of the simulation, s.
    pub wall_s: f64,
    /// Events per wall second.
    pub events_per_s: f64,
    /// Peak resident memory of the process, KiB.
    pub peak_rss_kib: u64,
    /// Time of the reference loop ([`reference_s`]) measured beside the case, s: the machine's speed
    /// at that moment.
    pub reference_s: f64,
}

impl CaseResult {
    /// Events per reference-loop time: events/s scaled by the machine's momentary speed, so a
    /// slower moment of this VM does not look like a slower engine.
    pub fn speed(&self) -> f64 {
        self.events_per_s * if self.reference_s > 0.0 { self.reference_s } else { 1.0 }
    }
}

/// Best of three timings of a fixed integer loop (xorshift, 2^24 steps, about 50 ms here): the
/// machine's speed at the moment, since this VM has no hardware counters to count instructions.
fn reference_s() -> f64 {
    (0..3)
        .map(|_| {
            let start = std::time::Instant::now();
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            for _ in 0..(1u32 << 24) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
            }
            std::hint::black_box(x);
            start.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// A saved set of results.
#[derive(Debug, Serialize, Deserialize)]
pub struct Baseline {
    /// Where and how it was measured.
    pub machine: String,
    /// The command that produced it.
    pub command: String,
    /// Results by case.
    pub results: Vec<CaseResult>,
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn run_case(c: &Case) -> Result<CaseResult> {
    let machine = Machine::flat(c.cpus);
    let workload = crate::load_workload(&c.workload)?;
    let mut policy = crate::load_policy(c.policy)?;
    let cfg = RunConfig {
        duration_ns: c.duration_ns,
        sample_interval_ns: 0,
        check_invariants: false,
        ..RunConfig::default()
    };
    // This VM's speed varies by tens of percent from second to second: the best of several runs
    // (at least three, until 0.5 s of simulation or ten runs) is the engine's speed.
    let _ = reference_s(); // warm up the CPU's clock first
    let (mut wall_s, mut total_s, mut runs) = (f64::INFINITY, 0.0, 0);
    let mut report = None;
    while runs < 3 || (total_s < 0.5 && runs < 10) {
        let sim = Sim::new(&machine, &workload, policy.as_mut(), c.policy.to_string(), cfg.clone())?;
        let start = std::time::Instant::now();
        let r = sim.run()?;
        let t = start.elapsed().as_secs_f64();
        wall_s = wall_s.min(t);
        total_s += t;
        runs += 1;
        report = Some(r);
        policy = crate::load_policy(c.policy)?;
    }
    let report = report.expect("at least one run");
    let reference_s = reference_s();
    Ok(CaseResult {
        name: c.name.clone(),
        tasks: report.summary.nr_tasks,
        cpus: c.cpus,
        simulated_s: report.duration_ns as f64 / 1e9,
        events: report.summary.nr_events,
        wall_s,
        events_per_s: report.summary.nr_events as f64 / wall_s,
        peak_rss_kib: peak_rss_kib(),
        reference_s,
    })
}

/// Runs `schedlab bench`.
pub fn bench_cmd(args: BenchArgs) -> Result<()> {
    let all = cases();
    if let Some(name) = &args.case {
        let c = all.iter().find(|c| &c.name == name).with_context(|| format!("no bench case `{name}`"))?;
        println!("{}", serde_json::to_string(&run_case(c)?)?);
        return Ok(());
    }
    let chosen: Vec<&Case> = all
        .iter()
        .filter(|c| args.full || !c.long)
        .filter(|c| args.only.as_ref().is_none_or(|o| c.name.contains(o.as_str())))
        .collect();
    if chosen.is_empty() {
        bail!("--only: no case matches");
    }
    let baseline: Option<Baseline> = std::fs::read_to_string(&args.baseline)
        .ok()
        .map(|s| serde_json::from_str(&s).with_context(|| format!("{}: not a bench baseline", args.baseline)))
        .transpose()?;
    let exe = std::env::current_exe().context("cannot find the schedlab binary")?;
    let mut results = Vec::new();
    let mut out = format!(
        "{:<28} {:>7} {:>6} {:>9} {:>12} {:>8} {:>12} {:>10} {:>9}\n",
        "case", "tasks", "CPUs", "sim s", "events", "wall s", "events/s", "peak MiB", "vs base*"
    );
    let tty = std::io::stderr().is_terminal();
    for (i, c) in chosen.iter().enumerate() {
        if tty {
            eprint!("\r[{}/{}] {:<40}", i + 1, chosen.len(), c.name);
        }
        let o = std::process::Command::new(&exe).args(["bench", "--case", &c.name]).output()?;
        if !o.status.success() {
            bail!("bench case {}: {}", c.name, String::from_utf8_lossy(&o.stderr).trim());
        }
        let r: CaseResult = serde_json::from_slice(&o.stdout).context("bench case output")?;
        let change = baseline
            .as_ref()
            .and_then(|b| b.results.iter().find(|x| x.name == r.name))
            .map_or("-".to_string(), |b| format!("{:+.1} %", (r.speed() / b.speed() - 1.0) * 100.0));
        out.push_str(&format!(
            "{:<28} {:>7} {:>6} {:>9.3} {:>12} {:>8.3} {:>12.0} {:>10.1} {:>9}\n",
            r.name,
            r.tasks,
            r.cpus,
            r.simulated_s,
            r.events,
            r.wall_s,
            r.events_per_s,
            r.peak_rss_kib as f64 / 1024.0,
            change
        ));
        results.push(r);
    }
    if tty {
        eprint!("\r{:60}\r", "");
    }
    if let Some(b) = &baseline {
        out.push_str(&format!(
            "* events/s scaled by the machine's momentary speed (a reference loop), against {} ({})\n",
            args.baseline, b.machine
        ));
    }
    crate::emit(&out);
    if let Some(path) = &args.save {
        let b = Baseline {
            machine: format!(
                "{} ({} CPUs), Linux {}",
                schedlab_exec::measure::hostname(),
                schedlab_exec::sys::nr_cpus(),
                schedlab_exec::measure::kernel_release()
            ),
            command: format!("schedlab bench{}", if args.full { " --full" } else { "" }),
            results,
        };
        std::fs::write(path, serde_json::to_string_pretty(&b)? + "\n")
            .with_context(|| format!("cannot write {path}"))?;
    }
    Ok(())
}
