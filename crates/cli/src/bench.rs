//! `schedlab bench`: the engine's speed and memory on fixed cases, compared with a committed baseline
//! (benchmarks/baseline.json), so a change that slows the simulator shows.
//!
//! An *event* is one event the engine handles (`summary.nr_events`: ticks, segment ends, wakeups,
//! reschedule requests, starts...): the unit of simulation work. `--instructions` counts instructions
//! under callgrind instead of timing (exact, and split between engine and policy).
//! Each case runs in its own process (`schedlab bench --case NAME`), so its peak resident memory
//! (`VmHWM` of /proc/self/status) is its own. Wall time is the simulation alone (machine, workload and
//! policy built before the clock starts), the best of three runs (fewer for a case whose runs take
//! over 10 s together; more, up to ten, until half a second has been simulated): this VM's speed
//! varies by tens of percent between seconds. Memory per task, per CPU and over simulated time are
//! differences of peaks between pairs of the long cases (`MEMORY_PAIRS`).

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
    /// The baseline to compare with [default: benchmarks/baseline.json, or
    /// benchmarks/instructions.json with --instructions].
    #[arg(long)]
    baseline: Option<String>,
    /// Count instructions under valgrind's callgrind instead of timing: exact and repeatable on any
    /// machine, and split between the engine and the policy (needs `valgrind`; about 50 times slower,
    /// so the 1,024-CPU cases are left out).
    #[arg(long)]
    instructions: bool,
    /// Write this run's results as the new baseline to this file.
    #[arg(long)]
    save: Option<String>,
    /// Run one case in this process and print its result as JSON (used by `bench` itself).
    #[arg(long, hide = true)]
    case: Option<String>,
    /// With --case: one run, without the reference loop (for counting instructions under callgrind).
    #[arg(long, hide = true)]
    once: bool,
}

/// One benchmark case.
struct Case {
    name: String,
    policy: &'static str,
    workload: String,
    cpus: u32,
    duration_ns: Ns,
    long: bool,
    /// Sample the time series every 10 ms, as `schedlab run` does by default (the other cases
    /// switch sampling off to time the engine alone).
    sampled: bool,
}

impl Case {
    /// Whether `--instructions` runs this case (a minute or less under callgrind).
    fn counted(&self) -> bool {
        !self.long && self.cpus < 1024
    }
}

fn cases() -> Vec<Case> {
    let mut v = vec![Case {
        name: "cfs-hogs1000-64cpu".into(),
        policy: "cfs",
        workload: "hogs[n=1000]".into(),
        cpus: 64,
        duration_ns: 2 * NSEC_PER_SEC,
        long: false,
        sampled: false,
    }];
    for cpus in [2u32, 16, 64, 256, 1024] {
        v.push(Case {
            name: format!("cfs-hackbench-{cpus}cpu"),
            policy: "cfs",
            workload: format!("hackbench[groups={}]", (cpus / 4).max(1)),
            cpus,
            duration_ns: 200 * NSEC_PER_MSEC,
            long: false,
            sampled: false,
        });
        v.push(Case {
            name: format!("cfs-sysbench-cpu-{cpus}cpu"),
            policy: "cfs",
            workload: format!("sysbench-cpu[threads={}]", cpus * 2),
            cpus,
            duration_ns: NSEC_PER_SEC,
            long: false,
            sampled: false,
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
            sampled: false,
        });
    }
    // The first two simulated seconds of the case below, short enough to count under callgrind.
    v.push(Case {
        name: "cfs-oltp2000-64cpu-2s".into(),
        policy: "cfs",
        workload: "sysbench-oltp[threads=2000]".into(),
        cpus: 64,
        duration_ns: 2 * NSEC_PER_SEC,
        long: false,
        sampled: false,
    });
    v.push(Case {
        name: "cfs-oltp2000-64cpu-1000s".into(),
        policy: "cfs",
        workload: "sysbench-oltp[threads=2000]".into(),
        cpus: 64,
        duration_ns: 1000 * NSEC_PER_SEC,
        long: true,
        sampled: false,
    });
    v.push(Case {
        name: "cfs-hogs100000-1024cpu".into(),
        policy: "cfs",
        workload: "hogs[n=100000]".into(),
        cpus: 1024,
        duration_ns: 100 * NSEC_PER_MSEC,
        long: true,
        sampled: false,
    });
    // Memory: per task (the slope between 50,000 and 100,000 tasks on 1,024 CPUs), per CPU (1,000
    // tasks on 64 and on 1,024 CPUs) and over time (the same sampled run for 6 and for 60 minutes).
    v.push(Case {
        name: "cfs-hogs50000-1024cpu".into(),
        policy: "cfs",
        workload: "hogs[n=50000]".into(),
        cpus: 1024,
        duration_ns: 100 * NSEC_PER_MSEC,
        long: true,
        sampled: false,
    });
    v.push(Case {
        name: "cfs-hogs1000-1024cpu".into(),
        policy: "cfs",
        workload: "hogs[n=1000]".into(),
        cpus: 1024,
        duration_ns: 200 * NSEC_PER_MSEC,
        long: true,
        sampled: false,
    });
    for minutes in [6, 60] {
        v.push(Case {
            name: format!("cfs-oltp64-8cpu-{minutes}min-sampled"),
            policy: "cfs",
            workload: "sysbench-oltp[threads=64]".into(),
            cpus: 8,
            duration_ns: minutes * 60 * NSEC_PER_SEC,
            long: true,
            sampled: true,
        });
    }
    v
}

/// Memory figures derived from pairs of cases, when both ran: (label, case A, case B, divisor
/// of the peak difference B - A or 0 to print both peaks).
const MEMORY_PAIRS: [(&str, &str, &str, u64); 3] = [
    (
        "memory per task (50,000 more tasks, 1,024 CPUs)",
        "cfs-hogs50000-1024cpu",
        "cfs-hogs100000-1024cpu",
        50_000,
    ),
    ("memory per CPU (960 more CPUs, 1,000 tasks)", "cfs-hogs1000-64cpu", "cfs-hogs1000-1024cpu", 960),
    (
        "peak memory, 6 and 60 simulated minutes (sampled)",
        "cfs-oltp64-8cpu-6min-sampled",
        "cfs-oltp64-8cpu-60min-sampled",
        0,
    ),
];

/// The lines of [`MEMORY_PAIRS`] whose two cases are in `results`.
fn memory_lines(results: &[CaseResult]) -> String {
    let peak = |name: &str| results.iter().find(|r| r.name == name).map(|r| r.peak_rss_kib);
    let mut out = String::new();
    for (label, a, b, per) in MEMORY_PAIRS {
        let (Some(pa), Some(pb)) = (peak(a), peak(b)) else { continue };
        if per == 0 {
            out.push_str(&format!(
                "{label}: {:.1} MiB and {:.1} MiB\n",
                pa as f64 / 1024.0,
                pb as f64 / 1024.0
            ));
        } else {
            let bytes = (pb as f64 - pa as f64) * 1024.0 / per as f64;
            out.push_str(&format!("{label}: {bytes:.0} bytes ({b} minus {a}, peak resident)\n"));
        }
    }
    out
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
    /// Simulations per reference-loop time: the inverse of the wall time, scaled by the machine's
    /// momentary speed, so a slower moment of this VM does not look like a slower engine. (Wall
    /// time rather than events/s: the same case is the same work even when the engine needs fewer
    /// events for it.)
    pub fn speed(&self) -> f64 {
        (if self.reference_s > 0.0 { self.reference_s } else { 1.0 }) / self.wall_s
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

/// The instruction counts of one case (`--instructions`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct InstrResult {
    /// Case name.
    pub name: String,
    /// Events processed.
    pub events: u64,
    /// Instructions of the simulation (`Sim::run_traced` and everything it calls).
    pub instructions: u64,
    /// Of those, the instructions inside the policy's hooks.
    pub policy_instructions: u64,
}

impl InstrResult {
    /// Instructions per event.
    pub fn per_event(&self) -> f64 {
        self.instructions as f64 / self.events.max(1) as f64
    }
    /// The engine's own instructions per event.
    pub fn engine_per_event(&self) -> f64 {
        (self.instructions - self.policy_instructions) as f64 / self.events.max(1) as f64
    }
    /// The policy's instructions per event.
    pub fn policy_per_event(&self) -> f64 {
        self.policy_instructions as f64 / self.events.max(1) as f64
    }
}

/// A saved set of instruction counts.
#[derive(Debug, Serialize, Deserialize)]
pub struct InstrBaseline {
    /// How it was measured.
    pub command: String,
    /// Results by case.
    pub results: Vec<InstrResult>,
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

fn run_case(c: &Case, once: bool) -> Result<CaseResult> {
    let machine = Machine::flat(c.cpus);
    let workload = crate::load_workload(&c.workload)?;
    let mut policy = crate::load_policy(c.policy)?;
    let cfg = RunConfig {
        duration_ns: c.duration_ns,
        sample_interval_ns: if c.sampled { RunConfig::default().sample_interval_ns } else { 0 },
        check_invariants: false,
        ..RunConfig::default()
    };
    // This VM's speed varies by tens of percent from second to second: the best of several runs
    // (three, or fewer once 10 s have been spent; more, up to ten, until 0.5 s) is the engine's speed.
    if !once {
        let _ = reference_s(); // warm up the CPU's clock first
    }
    let (mut wall_s, mut total_s, mut runs) = (f64::INFINITY, 0.0, 0);
    // What the report says (the same every run) and the process's peak after the first run: the
    // peak of one run, before later runs' allocations could add to it.
    let mut first: Option<(u64, u64, u64, u64)> = None;
    while runs < 1 || (!once && ((runs < 3 && total_s < 10.0) || (total_s < 0.5 && runs < 10))) {
        let sim = Sim::new(&machine, &workload, policy.as_mut(), c.policy.to_string(), cfg.clone())?;
        let start = std::time::Instant::now();
        let r = sim.run()?;
        let t = start.elapsed().as_secs_f64();
        wall_s = wall_s.min(t);
        total_s += t;
        runs += 1;
        let (tasks, events, duration_ns) = (r.summary.nr_tasks, r.summary.nr_events, r.duration_ns);
        drop(r);
        first.get_or_insert_with(|| (tasks, events, duration_ns, peak_rss_kib()));
        policy = crate::load_policy(c.policy)?;
    }
    let (tasks, events, duration_ns, peak_rss_kib) = first.expect("at least one run");
    let reference_s = if once { 0.0 } else { reference_s() };
    Ok(CaseResult {
        name: c.name.clone(),
        tasks,
        cpus: c.cpus,
        simulated_s: duration_ns as f64 / 1e9,
        events,
        wall_s,
        events_per_s: events as f64 / wall_s,
        peak_rss_kib,
        reference_s,
    })
}

/// Runs `schedlab bench`.
pub fn bench_cmd(args: BenchArgs) -> Result<()> {
    let all = cases();
    if let Some(name) = &args.case {
        let c = all.iter().find(|c| &c.name == name).with_context(|| format!("no bench case `{name}`"))?;
        println!("{}", serde_json::to_string(&run_case(c, args.once)?)?);
        return Ok(());
    }
    let chosen: Vec<&Case> = all
        .iter()
        .filter(|c| args.full || !c.long)
        .filter(|c| !args.instructions || c.counted())
        .filter(|c| args.only.as_ref().is_none_or(|o| c.name.contains(o.as_str())))
        .collect();
    if chosen.is_empty() {
        bail!("--only: no case matches");
    }
    let exe = std::env::current_exe().context("cannot find the schedlab binary")?;
    if args.instructions {
        return instructions_cmd(&args, &chosen, &exe);
    }
    let baseline_path = args.baseline.clone().unwrap_or("benchmarks/baseline.json".into());
    let baseline: Option<Baseline> = if args.baseline.is_some() {
        Some(
            read_baseline(&baseline_path)?
                .with_context(|| format!("--baseline {baseline_path}: no such file"))?,
        )
    } else {
        read_baseline(&baseline_path)?
    };
    let mut results = Vec::new();
    let mut pairs: Vec<(f64, f64)> = Vec::new();
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
        let base = baseline.as_ref().and_then(|b| b.results.iter().find(|x| x.name == r.name));
        if let Some(b) = base {
            pairs.push((pct(r.speed(), b.speed()), pct(b.reference_s, r.reference_s)));
        }
        let change = base.map_or("-".to_string(), |b| change_pct(r.speed(), b.speed()));
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
    out.push_str(&memory_lines(&results));
    match &baseline {
        Some(b) => {
            out.push_str(&format!(
                "* speed (1 / wall time) scaled by the machine's momentary speed (a reference loop), against {} ({})\n",
                baseline_path, b.machine
            ));
            if let Some(v) = verdict(&pairs, &b.machine) {
                out.push_str(&v);
                out.push('\n');
            }
        }
        None => out.push_str(&format!(
            "* no baseline to compare with: {baseline_path} is not here (run from the project root, or pass --baseline FILE)\n"
        )),
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

/// Reads a baseline file; a missing file is no baseline.
fn read_baseline<T: serde::de::DeserializeOwned>(path: &str) -> Result<Option<T>> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(serde_json::from_str(&s).with_context(|| format!("{path}: not a bench baseline"))?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {path}")),
    }
}

/// Runs one case once under callgrind, collecting only the simulation.
fn count_case(exe: &std::path::Path, c: &Case) -> Result<InstrResult> {
    let out =
        std::env::temp_dir().join(format!("schedlab-bench-{}-{}.callgrind", std::process::id(), c.name));
    let o = std::process::Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg("--toggle-collect=schedlab_sim::sim::Sim::run_traced*")
        .arg(exe)
        .args(["bench", "--case", &c.name, "--once"])
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                anyhow::anyhow!("--instructions needs valgrind (apt install valgrind)")
            }
            _ => anyhow::Error::new(e).context("cannot run valgrind"),
        })?;
    if !o.status.success() {
        bail!("bench case {} under valgrind: {}", c.name, String::from_utf8_lossy(&o.stderr).trim());
    }
    let r: CaseResult = serde_json::from_slice(&o.stdout).context("bench case output")?;
    let text = std::fs::read_to_string(&out).with_context(|| format!("{}", out.display()));
    let _ = std::fs::remove_file(&out);
    let text = text?;
    let p = crate::callgrind::parse(&text).with_context(|| format!("callgrind profile of {}", c.name))?;
    Ok(InstrResult {
        name: c.name.clone(),
        events: r.events,
        instructions: p.total,
        policy_instructions: p.policy,
    })
}

/// `schedlab bench --instructions`.
fn instructions_cmd(args: &BenchArgs, chosen: &[&Case], exe: &std::path::Path) -> Result<()> {
    let baseline_path = args.baseline.clone().unwrap_or("benchmarks/instructions.json".into());
    let baseline: Option<InstrBaseline> = read_baseline(&baseline_path)?;
    let mut out = format!(
        "{:<28} {:>12} {:>14} {:>10} {:>10} {:>10} {:>14} {:>9}\n",
        "case", "events", "instructions", "per event", "engine", "policy", "engine:policy", "vs base*"
    );
    let tty = std::io::stderr().is_terminal();
    let mut results = Vec::new();
    for (i, c) in chosen.iter().enumerate() {
        if tty {
            eprint!("\r[{}/{}] {:<40}", i + 1, chosen.len(), c.name);
        }
        let r = count_case(exe, c)?;
        let change = baseline
            .as_ref()
            .and_then(|b| b.results.iter().find(|x| x.name == r.name))
            .map_or("-".to_string(), |b| change_pct(r.per_event(), b.per_event()));
        out.push_str(&format!(
            "{:<28} {:>12} {:>14} {:>10.0} {:>10.0} {:>10.0} {:>14.2} {:>9}\n",
            r.name,
            r.events,
            r.instructions,
            r.per_event(),
            r.engine_per_event(),
            r.policy_per_event(),
            r.engine_per_event() / r.policy_per_event().max(1e-9),
            change
        ));
        results.push(r);
    }
    if tty {
        eprint!("\r{:60}\r", "");
    }
    out.push_str(
        "engine and policy: instructions per event outside and inside the policy's hooks (callgrind)\n",
    );
    if baseline.is_some() {
        out.push_str(&format!("* instructions per event against {baseline_path}\n"));
    }
    crate::emit(&out);
    if let Some(path) = &args.save {
        let b = InstrBaseline { command: "schedlab bench --instructions".into(), results };
        std::fs::write(path, serde_json::to_string_pretty(&b)? + "\n")
            .with_context(|| format!("cannot write {path}"))?;
    }
    Ok(())
}

/// The change from `base` to `new` in percent with one decimal and its sign; a change that rounds to
/// zero is `+0.0 %` whichever side of zero it fell (callgrind's counts of one case can differ by a
/// few instructions between runs, in library routines whose cost depends on address alignment).
/// The change from `base` to `new`, percent.
fn pct(new: f64, base: f64) -> f64 {
    if base > 0.0 && new > 0.0 {
        (new / base - 1.0) * 100.0
    } else {
        0.0
    }
}

/// How far a case's scaled speed moves between runs of the same code here (docs/performance.md:
/// up to 12 % on the tick-driven cases), percent.
const NOISE_PCT: f64 = 12.0;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One line on the "vs base" column as a whole, from each compared case's `(scaled speed change,
/// reference-loop speed change)` against the baseline, both percent: whether the cases are slower or
/// faster beyond the noise, and whether the machine's own speed explains the wall times.
fn verdict(pairs: &[(f64, f64)], baseline_machine: &str) -> Option<String> {
    if pairs.is_empty() {
        return None;
    }
    let change = median(pairs.iter().map(|p| p.0).collect());
    let machine = median(pairs.iter().map(|p| p.1).collect());
    let slower = pairs.iter().filter(|p| p.0 < 0.0).count();
    let machine_text = format!(
        "this machine's reference loop runs {machine:+.1} % against the baseline's ({baseline_machine})"
    );
    let line = if slower == pairs.len() && change <= -NOISE_PCT {
        format!(
            "verdict: every case is slower than the baseline, {change:+.1} % (median) after scaling by the machine's speed, more than the +-{NOISE_PCT:.0} % noise: the code regressed, or this machine differs from the baseline's in more than speed (caches, memory); {machine_text}"
        )
    } else if slower == pairs.len() {
        format!(
            "verdict: every case is slower than the baseline in scaled speed, but by {change:+.1} % (median), within the +-{NOISE_PCT:.0} % noise; the machine's speed explains the rest of the wall time ({machine_text})"
        )
    } else if change >= NOISE_PCT {
        format!("verdict: faster than the baseline, {change:+.1} % (median) after scaling by the machine's speed; {machine_text}")
    } else if change <= -NOISE_PCT {
        format!("verdict: slower than the baseline, {change:+.1} % (median) after scaling by the machine's speed; {machine_text}")
    } else {
        format!("verdict: as fast as the baseline within the +-{NOISE_PCT:.0} % noise ({change:+.1} % median); {machine_text}")
    };
    Some(line)
}

fn change_pct(new: f64, base: f64) -> String {
    let pct = ((new / base - 1.0) * 1000.0).round() / 10.0;
    format!("{:+.1} %", if pct == 0.0 { 0.0 } else { pct })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(name: &str, peak_rss_kib: u64) -> CaseResult {
        CaseResult {
            name: name.into(),
            tasks: 0,
            cpus: 0,
            simulated_s: 0.0,
            events: 0,
            wall_s: 1.0,
            events_per_s: 0.0,
            peak_rss_kib,
            reference_s: 0.0,
        }
    }

    #[test]
    fn the_verdict_separates_a_slow_machine_from_slow_code() {
        // Every case slower in scaled speed by 20-30 %: the code (the machine's speed is already
        // divided out, whatever the reference loop says).
        let v = verdict(&[(-20.0, -40.0), (-25.0, -41.0), (-30.0, -39.0)], "vm").unwrap();
        assert!(v.contains("every case is slower") && v.contains("the code regressed"), "{v}");
        assert!(v.contains("-25.0 % (median)") && v.contains("-40.0 %"), "{v}");
        // Every case slower in wall time on a machine 40 % slower, but only 2-5 % after scaling:
        // the machine explains it.
        let v = verdict(&[(-2.0, -40.0), (-5.0, -41.0), (-3.0, -39.0)], "vm").unwrap();
        assert!(v.contains("within the +-12 % noise") && v.contains("machine's speed explains"), "{v}");
        assert!(!v.contains("regressed"), "{v}");
        let v = verdict(&[(15.0, 0.0), (20.0, 0.0), (-1.0, 0.0)], "vm").unwrap();
        assert!(v.starts_with("verdict: faster"), "{v}");
        assert_eq!(verdict(&[], "vm"), None);
    }

    #[test]
    fn changes_that_round_to_zero_have_no_sign() {
        assert_eq!(change_pct(100.0, 100.0), "+0.0 %");
        assert_eq!(change_pct(99.9999, 100.0), "+0.0 %");
        assert_eq!((change_pct(101.0, 100.0), change_pct(99.0, 100.0)), ("+1.0 %".into(), "-1.0 %".into()));
    }

    #[test]
    fn memory_lines_divide_peak_differences_and_skip_missing_pairs() {
        let results = vec![
            result("cfs-hogs50000-1024cpu", 100_000),
            result("cfs-hogs100000-1024cpu", 200_000),
            result("cfs-oltp64-8cpu-6min-sampled", 8 * 1024),
            result("cfs-oltp64-8cpu-60min-sampled", 9 * 1024),
        ];
        let text = memory_lines(&results);
        // 100,000 KiB more for 50,000 more tasks: 2,048 bytes each.
        assert!(text.contains("memory per task (50,000 more tasks, 1,024 CPUs): 2048 bytes"), "{text}");
        assert!(text.contains("8.0 MiB and 9.0 MiB"), "{text}");
        assert!(!text.contains("per CPU"), "the per-CPU pair did not run: {text}");
        // Every pair names cases that exist.
        let names: Vec<String> = cases().into_iter().map(|c| c.name).collect();
        for (_, a, b, _) in MEMORY_PAIRS {
            assert!(names.iter().any(|n| n == a) && names.iter().any(|n| n == b), "{a} {b}");
        }
    }
}
