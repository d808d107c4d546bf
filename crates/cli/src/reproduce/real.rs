//! `schedlab reproduce --real`: an experiment's claims checked on a real kernel.
//!
//! Each experiment boots the `vm-test` virtual machine once (docs/real-kernel.md) with as many CPUs
//! as the experiment's machine has, and runs each of its cases under each of its policies loaded as
//! the kernel's scheduler by schedlab-scx: the same policy code the simulator runs, now making the
//! real kernel's decisions for real threads (`schedlab exec`). The cases are read for `--real`
//! (the `[real]` section on top of the quick sizes: what fits a software-emulated guest), and the
//! same cases are simulated with the experiment's seeds, so every claim is shown three times: as the
//! simulator answers it, as the simulator answers it with the policy deciding in user space (the
//! case's machine with the round trips schedlab-scx measured under that policy in the VM:
//! `CostModel::scx_round_trip_ns`), and as the real kernel does. A case the `[real]` section leaves
//! out is simulated nowhere here and its claims say so.
//!
//! The real reports, the serial log and an HTML report go to `<out>/<paper>/<experiment>-real/`.
//! The command fails if a run failed in the VM (the scheduler ejected, the workload not completed):
//! a claim checked on such a run would describe the kernel's fallback scheduler, not the policy.

use super::claim::Outcome;
use super::spec::Experiment;
use super::{check, html_report, run_all, verdict, Job, Runs};
use crate::vm_test::{self, Boot, Run, VmOptions};
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The tick rate the policies get on the real path: schedlab-scx's `--hz`, which the VM leaves at
/// its default (the guest kernel's own HZ is 250 too). The simulation under sched_ext uses it.
pub const SCX_HZ: u32 = 250;

/// What `reproduce --real` needs besides the experiments.
pub struct RealOptions<'a> {
    /// How the VM boots.
    pub vm: &'a VmOptions,
    /// Runs of each (case, policy) in the VM.
    pub repeat: u32,
    /// Root of the output (`<out>/<paper>/<experiment>-real/`).
    pub out: PathBuf,
    /// Simulations run at once.
    pub jobs: usize,
    /// Show a progress bar for the simulations.
    pub progress: bool,
}

/// The runs of one experiment in the VM.
pub struct RealRuns {
    /// `runs[case][policy][repeat]`; empty for cases not run.
    pub runs: Runs,
    /// `round_trips[case][policy]`: the user-space round trips schedlab-scx measured over the
    /// policy's runs of the case (`None`: none measured).
    pub round_trips: Vec<Vec<Option<RoundTrips>>>,
    /// Runs that failed a check, with why.
    pub failures: Vec<String>,
}

/// User-space round trips measured by schedlab-scx (its `continue_gap*`, `switch_gap*` and
/// `block_gap*` counters: from a task's stop to the next start on its CPU, in the kernel's
/// timestamps, counted only where the next task's message shows that start).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoundTrip {
    /// How many.
    pub count: u64,
    /// Their mean, ns.
    pub mean_ns: u64,
    /// Their standard deviation, ns.
    pub sd_ns: u64,
}

impl RoundTrip {
    /// The half-width of the uniform spread with this standard deviation (`sqrt(3) * sd`), at most
    /// the mean: `CostModel::scx_round_trip_jitter_ns`.
    pub fn jitter_ns(&self) -> u64 {
        ((self.sd_ns as f64 * 3f64.sqrt()).round() as u64).min(self.mean_ns)
    }

    /// Pools groups of round trips (count, mean and standard deviation of each) into one.
    pub fn pool(groups: impl IntoIterator<Item = RoundTrip>) -> Option<RoundTrip> {
        let (mut n, mut sum, mut sq) = (0u64, 0f64, 0f64);
        for g in groups.into_iter().filter(|g| g.count > 0) {
            let (c, m, sd) = (g.count as f64, g.mean_ns as f64, g.sd_ns as f64);
            n += g.count;
            sum += c * m;
            sq += c * (sd * sd + m * m);
        }
        if n == 0 {
            return None;
        }
        let mean = sum / n as f64;
        let var = (sq / n as f64 - mean * mean).max(0.0);
        Some(RoundTrip { count: n, mean_ns: mean.round() as u64, sd_ns: var.sqrt().round() as u64 })
    }
}

/// How the round trips of one kind split: the dispatch halves (from the user-space scheduler's
/// decision to the picked task's start) of those whose start was sent on the scheduler's clock,
/// against those round trips' own total.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Halves {
    /// Round trips with both halves measured.
    pub count: u64,
    /// Their mean dispatch half, ns.
    pub dispatch_ns: u64,
    /// Their mean round trip, ns.
    pub gap_ns: u64,
}

impl Halves {
    /// The dispatch half's share of the round trip, in thousandths (`None` with fewer than
    /// [`MIN_KIND_ROUND_TRIPS`] measured).
    pub fn dispatch_permille(&self) -> Option<u32> {
        (self.count >= MIN_KIND_ROUND_TRIPS && self.gap_ns > 0)
            .then(|| (self.dispatch_ns * 1000 / self.gap_ns).min(1000) as u32)
    }

    /// Pools the halves of several runs (weighted by count).
    pub fn pool(groups: impl IntoIterator<Item = Halves>) -> Halves {
        let (mut n, mut d, mut g) = (0u64, 0u128, 0u128);
        for h in groups {
            n += h.count;
            d += u128::from(h.count) * u128::from(h.dispatch_ns);
            g += u128::from(h.count) * u128::from(h.gap_ns);
        }
        match n {
            0 => Halves::default(),
            n => Halves {
                count: n,
                dispatch_ns: (d / u128::from(n)) as u64,
                gap_ns: (g / u128::from(n)) as u64,
            },
        }
    }
}

/// A kind of round trip with fewer measured than this is simulated with the pooled mean and spread
/// (its own mean and deviation from so few would be noise).
pub const MIN_KIND_ROUND_TRIPS: u64 = 100;

/// The user-space round trips schedlab-scx measured in a run (or pooled over runs), by kind.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoundTrips {
    /// Every kind pooled.
    pub all: RoundTrip,
    /// Continues: a task sent back to its CPU after its tick.
    pub continues: RoundTrip,
    /// Switches: another task picked when one came back.
    pub switches: RoundTrip,
    /// After blocks: a task picked for a CPU whose task blocked (none from a schedlab-scx older
    /// than these counters).
    pub blocks: RoundTrip,
    /// The halves of the switches (none from a schedlab-scx older than these counters).
    pub switch_halves: Halves,
    /// The halves of the round trips after blocks.
    pub block_halves: Halves,
}

impl RoundTrips {
    /// The round trips in schedlab-scx's output: its last counter line's continue, switch and block
    /// gaps. `None` if no line has them (an older schedlab-scx) or none was measured.
    pub fn from_scx_log(log: &[String]) -> Option<RoundTrips> {
        let line =
            log.iter().rev().find(|l| l.contains("schedlab-scx: t=") && l.contains("continue_gaps="))?;
        let field = |key: &str| -> Option<u64> {
            let start = line.find(&format!(" {key}="))? + key.len() + 2;
            line[start..].split_whitespace().next()?.parse().ok()
        };
        let group = |kind: &str| -> Option<RoundTrip> {
            Some(RoundTrip {
                count: field(&format!("{kind}_gaps"))?,
                mean_ns: field(&format!("{kind}_gap_us"))? * 1000,
                sd_ns: field(&format!("{kind}_gap_sd_us"))? * 1000,
            })
        };
        let none = RoundTrip { count: 0, mean_ns: 0, sd_ns: 0 };
        let (continues, switches) = (group("continue")?, group("switch")?);
        let blocks = group("block").unwrap_or(none);
        let all = RoundTrip::pool([continues, switches, blocks])?;
        let halves = |kind: &str| -> Halves {
            let h = || -> Option<Halves> {
                Some(Halves {
                    count: field(&format!("{kind}_halves"))?,
                    dispatch_ns: field(&format!("{kind}_dispatch_us"))? * 1000,
                    gap_ns: field(&format!("{kind}_halves_gap_us"))? * 1000,
                })
            };
            h().unwrap_or_default()
        };
        let (switch_halves, block_halves) = (halves("switch"), halves("block"));
        Some(RoundTrips { all, continues, switches, blocks, switch_halves, block_halves })
    }

    /// Pools the round trips of several runs, kind by kind.
    pub fn pool(runs: &[RoundTrips]) -> Option<RoundTrips> {
        let none = RoundTrip { count: 0, mean_ns: 0, sd_ns: 0 };
        let kind = |f: fn(&RoundTrips) -> RoundTrip| RoundTrip::pool(runs.iter().map(f)).unwrap_or(none);
        Some(RoundTrips {
            all: RoundTrip::pool(runs.iter().map(|r| r.all))?,
            continues: kind(|r| r.continues),
            switches: kind(|r| r.switches),
            blocks: kind(|r| r.blocks),
            switch_halves: Halves::pool(runs.iter().map(|r| r.switch_halves)),
            block_halves: Halves::pool(runs.iter().map(|r| r.block_halves)),
        })
    }

    /// Makes `costs` a policy deciding in user space with these round trips: a switch's (and a
    /// wakeup's) as `scx_round_trip_ns`, a continue's and a block's as their own; a kind with
    /// fewer than [`MIN_KIND_ROUND_TRIPS`] measured takes the pooled mean and spread.
    pub fn apply(&self, costs: &mut schedlab_sim::CostModel) {
        let enough = |rt: RoundTrip| (rt.count >= MIN_KIND_ROUND_TRIPS).then_some(rt);
        let base = enough(self.switches).unwrap_or(self.all);
        costs.scx_round_trip_ns = Some(base.mean_ns.max(1));
        costs.scx_round_trip_jitter_ns = Some(base.jitter_ns().min(base.mean_ns.max(1)));
        let own =
            |rt: Option<RoundTrip>| rt.map(|rt| (rt.mean_ns.max(1), rt.jitter_ns().min(rt.mean_ns.max(1))));
        let c = own(enough(self.continues));
        costs.scx_continue_round_trip_ns = c.map(|c| c.0);
        costs.scx_continue_round_trip_jitter_ns = c.map(|c| c.1);
        let b = own(enough(self.blocks));
        costs.scx_block_round_trip_ns = b.map(|b| b.0);
        costs.scx_block_round_trip_jitter_ns = b.map(|b| b.1);
        // Each half charged where the real path charges it, where enough were measured.
        costs.scx_switch_dispatch_permille = self.switch_halves.dispatch_permille();
        costs.scx_block_dispatch_permille = self.block_halves.dispatch_permille();
    }
}

/// The VM run name of a case under a policy, repeat `rep` (1-based).
pub fn run_name(case: &str, policy: &str, rep: u32) -> String {
    let base = format!("{}-{}", vm_test::file_safe(case), vm_test::file_safe(policy));
    if rep == 1 {
        base
    } else {
        format!("{base}-r{rep}")
    }
}

/// The virtual CPUs for an experiment: its real cases' machines must agree.
pub fn vm_cpus(exp: &Experiment) -> Result<u32> {
    if exp.real_skip.is_some() {
        return Ok(0);
    }
    let mut cpus: Option<(usize, &str)> = None;
    for c in exp.cases.iter().filter(|c| c.real) {
        let n = c.machine.topology.nr_cpus();
        match cpus {
            None => cpus = Some((n, &c.name)),
            Some((m, other)) if m != n => bail!(
                "{}: cases `{other}` ({m} CPUs) and `{}` ({n} CPUs) need different virtual machines; \
                 name the cases of one size in the file's [real] section",
                exp.path.display(),
                c.name
            ),
            Some(_) => {}
        }
    }
    let (n, _) =
        cpus.with_context(|| format!("{}: no case to run on the real kernel", exp.path.display()))?;
    if n > 8 {
        bail!(
            "{}: the experiment's machine has {n} CPUs; a software-emulated guest runs at most 8 usefully \
             (give the file a [real] section with cases on a smaller machine)",
            exp.path.display()
        );
    }
    Ok(n as u32)
}

/// The per-task sampling interval of a real run of `exp` lasting at most `limit_ns`: the
/// experiment's when it samples tasks (its claims may read the series), made coarse enough for the
/// executor's bounds (at least 1 ms, at most its number of samples); `None` when it does not.
pub fn real_sample_interval(exp: &Experiment, limit_ns: u64) -> Option<u64> {
    if !exp.sample_tasks || exp.sample_interval_ns == 0 {
        return None;
    }
    let fewest = limit_ns.div_ceil(schedlab_exec::sample::MAX_SAMPLES);
    Some(exp.sample_interval_ns.max(fewest).max(schedlab_exec::sample::MIN_INTERVAL_NS))
}

/// The boot that runs `exp`'s real cases; `sim_ns[case]` is the longest simulated run of the case,
/// which bounds the wait for a workload that ends by itself.
pub fn plan(exp: &Experiment, repeat: u32, sim_ns: &[u64]) -> Result<Boot> {
    let mut files = Vec::new();
    let mut runs = Vec::new();
    let mut longest_ns = 0u64;
    for (ci, case) in exp.cases.iter().enumerate().filter(|(_, c)| c.real) {
        let file = format!("{}.toml", vm_test::file_safe(&case.name));
        files.push((file.clone(), schedlab_workload::to_toml(&case.workload).into_bytes()));
        // A real run may be slower than the simulated one (the guest is emulated): twice the
        // simulated length, never more than the case's limit.
        let expect_ns = sim_ns.get(ci).copied().unwrap_or(case.duration_ns).saturating_mul(2);
        longest_ns = longest_ns.max(expect_ns.min(case.duration_ns).max(5_000_000_000));
        // A workload that ends by itself (all its tasks done) stops the run sooner; `exec` runs
        // for at most 10 minutes.
        let limit_ns = case.duration_ns.min(schedlab_exec::MAX_DURATION_NS);
        let sample_interval = real_sample_interval(exp, limit_ns).map(schedlab_workload::fmt_duration);
        for rep in 1..=repeat {
            for p in &case.policies {
                runs.push(Run {
                    name: run_name(&case.name, p, rep),
                    policy: Some(p.clone()),
                    workload: file.clone(),
                    duration: schedlab_workload::fmt_duration(limit_ns),
                    max_threads: 4096,
                    sample_interval: sample_interval.clone(),
                    // As the simulator's tasks, created at their start: none sleeps at a start
                    // gate first, which O(1) and ULE would credit as interactive behaviour.
                    spawn_at_start: true,
                    allow_rt: case.workload.real_time_task().is_some(),
                });
            }
        }
    }
    Ok(Boot {
        files,
        runs,
        cpus: vm_cpus(exp)?,
        calibrate: false,
        calibrate_policy: None,
        longest_run: Duration::from_nanos(longest_ns),
        // The kernel's limit: a starvation claim (ULE's batch thread behind interactive ones) can
        // be watched for up to 30 s before the kernel ejects the scheduler.
        watchdog_ms: Some(30_000),
        scheduler_cpu: true,
    })
}

/// Sorts the VM's outcomes into `runs[case][policy][repeat]`, keeping only runs that passed every
/// check.
pub fn collect(exp: &Experiment, repeat: u32, outcomes: &[vm_test::RunOutcome], serial: &Path) -> RealRuns {
    let mut failures = Vec::new();
    let mut runs: Runs = Vec::new();
    let mut round_trips = Vec::new();
    for case in &exp.cases {
        let mut per_policy = Vec::new();
        let mut trips = Vec::new();
        for p in &case.policies {
            let mut reports = Vec::new();
            let mut measured = Vec::new();
            for rep in (1..=repeat).filter(|_| case.real) {
                let name = run_name(&case.name, p, rep);
                let Some(o) = outcomes.iter().find(|o| o.name == name) else {
                    failures
                        .push(format!("{name}: the VM never reached this run (see {})", serial.display()));
                    continue;
                };
                let problems = vm_test::check_run(Some(p), o);
                if !problems.is_empty() {
                    failures.extend(problems);
                    continue;
                }
                match o.report.as_deref().map(serde_json::from_str::<Value>) {
                    Some(Ok(v)) => reports.push(v),
                    _ => failures.push(format!("{name}: the report that came back is not JSON")),
                }
                measured.extend(RoundTrips::from_scx_log(&o.scx_log));
            }
            per_policy.push(reports);
            trips.push(RoundTrips::pool(&measured));
        }
        runs.push(per_policy);
        round_trips.push(trips);
    }
    RealRuns { runs, round_trips, failures }
}

/// Whether the claim's cases were all run in the VM.
fn claim_runs(exp: &Experiment, c: &super::claim::Claim) -> bool {
    let real = |name: &str| exp.cases.iter().any(|x| x.name == name && x.real);
    real(&c.case) && c.vs_case.as_deref().is_none_or(real) && c.base_case.as_deref().is_none_or(real)
}

/// The text and Markdown rows of one experiment: each claim simulated, simulated under sched_ext
/// (with the round trips measured in the VM) and real.
fn report(
    exp: &Experiment,
    sim: &[Outcome],
    scx: &[Outcome],
    real: &[Outcome],
    text: &mut String,
    md: &mut String,
) {
    let _ = writeln!(text, "{}  {} ({})", exp.id(), exp.title, exp.source);
    let cell = |t: &str| t.replace('|', "\\|");
    for (((c, s), x), r) in exp.claims.iter().zip(sim).zip(scx).zip(real) {
        let ran = claim_runs(exp, c);
        let real_verdict = if ran { verdict(r) } else { "not run in the VM" };
        let shown = |o: &Outcome| if ran { o.shown.clone() } else { "-".to_string() };
        let _ = writeln!(text, "  {}: \"{}\" ({})", c.id, c.quote, c.source);
        let _ = writeln!(text, "      expected:       {}: {}", c.metric_text, c.expected_text());
        let _ = writeln!(text, "      simulated:      [{}] {}", verdict(s), s.shown);
        let _ = writeln!(text, "      sim. sched_ext: [{}] {}", if ran { verdict(x) } else { "-" }, shown(x));
        let _ = writeln!(text, "      real kernel:    [{real_verdict}] {}", shown(r));
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} ({}) | {} ({}) | {} ({}) | {} |",
            exp.id(),
            c.id,
            cell(&c.paper),
            cell(&shown(s)),
            if ran { verdict(s) } else { "-" },
            cell(&shown(x)),
            if ran { verdict(x) } else { "-" },
            cell(&shown(r)),
            real_verdict,
            cell(&c.expected_text()),
        );
    }
}

/// The simulations of `exp`'s real cases under each policy and seed: in the kernel (`trips`
/// `None`), or deciding in user space with the round trips measured for each case and policy
/// (a policy with none measured is simulated in the kernel and marked so by the caller).
fn sim_jobs<'a>(exp: &'a Experiment, trips: Option<&[Vec<Option<RoundTrips>>]>) -> Vec<Job<'a>> {
    let mut jobs = Vec::new();
    for (ci, c) in exp.cases.iter().enumerate().filter(|(_, c)| c.real) {
        for pi in 0..c.policies.len() {
            let scx = trips.and_then(|t| t.get(ci)?.get(pi).copied().flatten());
            jobs.extend(exp.seeds.iter().map(|&seed| Job {
                exp,
                case: c,
                policy: pi,
                seed,
                scx,
                trim: false,
            }));
        }
    }
    jobs
}

/// Sorts simulation results into `runs[case][policy][seed]` (empty for cases not run), with the
/// longest simulated run of each case.
fn sort_sims(exp: &Experiment, results: Vec<Result<Value>>) -> Result<(Runs, Vec<u64>)> {
    let mut results = results.into_iter();
    let mut sim: Runs = Vec::new();
    let mut sim_ns = Vec::new();
    for case in &exp.cases {
        let mut per_policy = Vec::new();
        let mut longest = 0u64;
        for _ in &case.policies {
            let mut seeds = Vec::new();
            for _ in exp.seeds.iter().filter(|_| case.real) {
                let v = results.next().unwrap_or_else(|| bail!("lost a simulation"))?;
                longest = longest.max(v["duration_ns"].as_u64().unwrap_or(case.duration_ns));
                seeds.push(v);
            }
            per_policy.push(seeds);
        }
        sim.push(per_policy);
        sim_ns.push(longest);
    }
    Ok((sim, sim_ns))
}

/// Runs `exps` in the VM and beside it in the simulator; returns the text to print (Markdown when
/// `markdown`) and writes the JSON outcomes to `json` if given.
pub fn reproduce_real(
    exps: &[Experiment],
    o: &RealOptions,
    markdown: bool,
    json: Option<&Path>,
) -> Result<String> {
    for exp in exps {
        vm_cpus(exp)?;
    }
    if !(1..=20).contains(&o.repeat) {
        bail!("--repeat: must be 1 to 20, got {}", o.repeat);
    }
    o.vm.validate()?;
    let mut text = String::new();
    let mut md = String::from(
        "| experiment | claim | paper | simulated | simulated under sched_ext | real kernel (sched_ext) | expected |\n|---|---|---|---|---|---|---|\n",
    );
    let mut failures = Vec::new();
    let mut all = Vec::new();
    for exp in exps {
        if let Some(why) = &exp.real_skip {
            let _ = writeln!(
                text,
                "{}  {} ({})\n  not run on the real kernel: {why}\n",
                exp.id(),
                exp.title,
                exp.source
            );
            for c in &exp.claims {
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | - | - | - (not run in the VM) | - |",
                    exp.id(),
                    c.id,
                    c.paper.replace('|', "\\|")
                );
            }
            all.push(serde_json::json!({ "experiment": exp.id(), "title": exp.title, "skipped": why }));
            continue;
        }
        let (sim, sim_ns) = sort_sims(exp, run_all(&sim_jobs(exp, None), o.jobs, o.progress))?;
        let boot = plan(exp, o.repeat, &sim_ns)?;
        let dir = o.out.join(&exp.paper).join(format!("{}-real", exp.name));
        eprintln!(
            "reproduce --real {}: {} runs in the VM, reports in {}",
            exp.id(),
            boot.runs.len(),
            dir.display()
        );
        let outcomes = vm_test::boot_runs(o.vm, &boot, &dir)?;
        let real = collect(exp, o.repeat, &outcomes, &dir.join("serial.log"));
        failures.extend(real.failures.iter().map(|f| format!("{}: {f}", exp.id())));
        let (scx, _) = sort_sims(exp, run_all(&sim_jobs(exp, Some(&real.round_trips)), o.jobs, o.progress))?;
        let sim_out = check(exp, &sim);
        let scx_out = check(exp, &scx);
        let real_out = check(exp, &real.runs);
        report(exp, &sim_out, &scx_out, &real_out, &mut text, &mut md);
        for (case, trips) in exp.cases.iter().zip(&real.round_trips).filter(|(c, _)| c.real) {
            for (p, rt) in case.policies.iter().zip(trips) {
                let ms = |rt: RoundTrip| format!("{:.2} ms ({})", rt.mean_ns as f64 / 1e6, rt.count);
                let half = |h: Halves| match h.dispatch_permille() {
                    Some(p) => {
                        format!("{:.1} % of {:.2} ms ({})", p as f64 / 10.0, h.gap_ns as f64 / 1e6, h.count)
                    }
                    None => format!("too few measured ({})", h.count),
                };
                let _ = match rt {
                    Some(rt) => writeln!(
                        text,
                        "  round trip under {p} ({}): {:.2} ms, sd {:.2} ms, {} measured (continues {}, switches {}, after blocks {}); dispatch halves: switches {}, after blocks {}",
                        case.name,
                        rt.all.mean_ns as f64 / 1e6,
                        rt.all.sd_ns as f64 / 1e6,
                        rt.all.count,
                        ms(rt.continues),
                        ms(rt.switches),
                        ms(rt.blocks),
                        half(rt.switch_halves),
                        half(rt.block_halves),
                    ),
                    None => writeln!(
                        text,
                        "  round trip under {p} ({}): none measured; its sched_ext simulation is the plain one",
                        case.name
                    ),
                };
            }
        }
        let page = dir.join("report.html");
        std::fs::write(&page, html_report(exp, &real_out, &real.runs, true))
            .with_context(|| format!("cannot write {}", page.display()))?;
        let _ = writeln!(text, "  real reports, serial log and report.html in {}\n", dir.display());
        all.push(serde_json::json!({
            "experiment": exp.id(),
            "title": exp.title,
            "repeat": o.repeat,
            "simulated": sim_out,
            "simulated_scx": scx_out,
            "round_trips": real.round_trips.iter().map(|per| per.iter().map(|rt| rt.map(|rt| {
                let kind = |k: RoundTrip| serde_json::json!({ "count": k.count, "mean_ns": k.mean_ns, "sd_ns": k.sd_ns });
                let halves = |h: Halves| serde_json::json!({
                    "count": h.count, "dispatch_ns": h.dispatch_ns, "gap_ns": h.gap_ns,
                    "dispatch_permille": h.dispatch_permille(),
                });
                serde_json::json!({
                    "count": rt.all.count, "mean_ns": rt.all.mean_ns, "sd_ns": rt.all.sd_ns,
                    "continues": kind(rt.continues), "switches": kind(rt.switches), "blocks": kind(rt.blocks),
                    "switch_halves": halves(rt.switch_halves), "block_halves": halves(rt.block_halves),
                })
            })).collect::<Vec<_>>()).collect::<Vec<_>>(),
            "real": real_out,
            "real_run": exp.claims.iter().map(|c| claim_runs(exp, c)).collect::<Vec<_>>(),
            "failures": real.failures,
        }));
    }
    if let Some(path) = json {
        let v = serde_json::json!({ "schema": "schedlab.reproduce-real/1", "experiments": all });
        std::fs::write(path, serde_json::to_string_pretty(&v)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let out = if markdown { md } else { text };
    if !failures.is_empty() {
        print!("{out}");
        bail!("runs failed in the VM (their claims are not measured):\n  {}", failures.join("\n  "));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::spec::{load, Mode};
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn tempdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("schedlab-real-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    const EXP: &str = r#"
title = "t"
source = "s"
machine = "up"
policies = ["cfs", "ule"]
duration = "60s"
[quick]
duration = "20s"
[real]
duration = "10s"
cases = ["small"]
[[case]]
name = "small"
workload = "pi[n=4,work=1s]"
real_workload = "pi[n=2,work=1s]"
[[case]]
name = "big"
workload = "pi[n=400,work=1s]"
[[claim]]
id = "a"
quote = "q"
source = "s"
case = "small"
metric = "summary.nr_switches"
policy = "cfs"
vs = "ule"
expect = "> 1"
paper = "p"
[[claim]]
id = "b"
quote = "q"
source = "s"
case = "big"
metric = "summary.nr_switches"
policy = "cfs"
expect = "> 1"
paper = "p"
"#;

    /// The round trips come from schedlab-scx's last counter line, continues and switches pooled:
    /// 3 of 1 ms (sd 0) and 1 of 3 ms (sd 0) are 4 of mean 1.5 ms and sd sqrt(0.75) ms.
    #[test]
    fn round_trips_are_read_from_the_last_counter_line_and_pooled() {
        let log: Vec<String> = [
            "schedlab-scx: policy cfs enabled as schedlab_cfs on 2 CPUs",
            "schedlab-scx: t=1.0s tasks=3 continue_gaps=1 continue_gap_us=9000 continue_gap_sd_us=0 switch_gaps=0 switch_gap_us=0 switch_gap_sd_us=0 kernel_dispatches=3",
            "schedlab-scx: t=2.0s tasks=3 continue_gaps=3 continue_gap_us=1000 continue_gap_sd_us=0 switch_gaps=1 switch_gap_us=3000 switch_gap_sd_us=0 kernel_dispatches=3",
            "schedlab-scx: policy cfs unregistered cleanly",
        ]
        .map(String::from)
        .to_vec();
        let rts = RoundTrips::from_scx_log(&log).unwrap();
        let rt = rts.all;
        assert_eq!((rt.count, rt.mean_ns, rt.sd_ns), (4, 1_500_000, 866_025));
        assert_eq!((rts.continues.count, rts.switches.count, rts.blocks.count), (3, 1, 0));
        assert_eq!(rt.jitter_ns(), 1_499_999, "sqrt(3) x 0.866025 ms, below the mean");
        let narrow = RoundTrip { count: 9, mean_ns: 1_000_000, sd_ns: 100_000 };
        assert_eq!(narrow.jitter_ns(), 173_205);
        // Pooling keeps a single group as it is, and nothing measured is no round trip.
        assert_eq!(RoundTrip::pool([narrow]), Some(narrow));
        assert_eq!(RoundTrip::pool([]), None);
        assert_eq!(RoundTrip::pool([RoundTrip { count: 0, mean_ns: 5, sd_ns: 1 }]), None);
        // With round trips after blocks, 4 of 0.5 ms (sd 0): 3 of 1 ms, 1 of 3 ms and 4 of 0.5 ms
        // are 8 of mean 1 ms and sd sqrt((3 x 1 + 9 + 4 x 0.25) / 8 - 1) = sqrt(0.625) ms.
        let with_blocks = [
            "schedlab-scx: t=2.0s tasks=3 continue_gaps=3 continue_gap_us=1000 continue_gap_sd_us=0 switch_gaps=1 switch_gap_us=3000 switch_gap_sd_us=0 block_gaps=4 block_gap_us=500 block_gap_sd_us=0 gaps_unverified=2".to_string(),
        ];
        let rts = RoundTrips::from_scx_log(&with_blocks).unwrap();
        let rt = rts.all;
        assert_eq!((rt.count, rt.mean_ns, rt.sd_ns), (8, 1_000_000, 790_569));
        assert_eq!(rts.block_halves, Halves::default(), "no halves in this schedlab-scx's line");
        // With the halves: 3 of the 4 after blocks, 0.3 ms of their 0.5 ms dispatched.
        let with_halves =
            [with_blocks[0].clone() + " block_halves=3 block_dispatch_us=300 block_halves_gap_us=500"];
        let rts = RoundTrips::from_scx_log(&with_halves).unwrap();
        assert_eq!(rts.block_halves, Halves { count: 3, dispatch_ns: 300_000, gap_ns: 500_000 });
        assert_eq!(rts.block_halves.dispatch_permille(), None, "too few for the model");
        // An older schedlab-scx without the counters.
        assert_eq!(RoundTrips::from_scx_log(&["schedlab-scx: t=1.0s tasks=3 continues=4".to_string()]), None);
    }

    /// The simulations under sched_ext take each real case's policy's own round trips, at
    /// schedlab-scx's tick rate; a policy with none measured is simulated in the kernel.
    #[test]
    fn each_policy_is_simulated_with_its_own_measured_round_trips() {
        let dir = tempdir("scx-jobs");
        let e = load(&write(&dir, "e.toml", EXP), Mode::Real).unwrap();
        let kind = |count, mean_ns| RoundTrip { count, mean_ns, sd_ns: 300_000 };
        let cfs = RoundTrips {
            all: kind(210, 1_200_000),
            continues: kind(100, 1_000_000),
            switches: kind(10, 2_000_000),
            blocks: kind(100, 1_240_000),
            switch_halves: Halves::default(),
            block_halves: Halves::default(),
        };
        let trips = vec![vec![Some(cfs), None], vec![None, None]];
        let jobs = sim_jobs(&e, Some(&trips));
        // Only the real case ("small"), each policy, each seed.
        assert_eq!(jobs.len(), 2 * e.seeds.len());
        assert!(jobs.iter().all(|j| std::ptr::eq(j.case, &e.cases[0])));
        assert!(jobs.iter().filter(|j| j.policy == 0).all(|j| j.scx == Some(cfs)));
        assert!(jobs.iter().filter(|j| j.policy == 1).all(|j| j.scx.is_none()));
        assert!(sim_jobs(&e, None).iter().all(|j| j.scx.is_none()));
        let run = super::super::run_job(&jobs[0]).unwrap();
        let plain = super::super::run_job(&sim_jobs(&e, None)[0]).unwrap();
        // Round trips of 1.2 ms cost the CPU time the kernel simulation does not lose.
        let idle = |v: &Value| {
            v["cpus"][0]["idle_ns"].as_u64().unwrap() + v["cpus"][0]["overhead_ns"].as_u64().unwrap()
        };
        assert!(idle(&run) > idle(&plain) + 100_000_000, "{} vs {}", idle(&run), idle(&plain));
    }

    /// Each kind of round trip with enough measured is simulated as its own; one with too few
    /// (here the 10 switches) takes the pooled mean and spread.
    #[test]
    fn each_kind_of_round_trip_is_simulated_with_its_own_measurement() {
        let kind = |count, mean_ns, sd_ns| RoundTrip { count, mean_ns, sd_ns };
        let rts = RoundTrips {
            all: kind(210, 1_200_000, 300_000),
            continues: kind(100, 1_000_000, 100_000),
            switches: kind(10, 2_000_000, 0),
            blocks: kind(100, 1_300_000, 2_000_000),
            switch_halves: Halves { count: 10, dispatch_ns: 1_000_000, gap_ns: 2_000_000 },
            block_halves: Halves { count: 100, dispatch_ns: 910_000, gap_ns: 1_300_000 },
        };
        let mut costs = schedlab_sim::CostModel::default();
        rts.apply(&mut costs);
        assert_eq!(costs.scx_round_trip_ns, Some(1_200_000), "pooled: too few switches");
        assert_eq!(costs.scx_round_trip_jitter_ns, Some(519_615), "sqrt(3) x 0.3 ms");
        assert_eq!(costs.scx_continue_round_trip_ns, Some(1_000_000));
        assert_eq!(costs.scx_continue_round_trip_jitter_ns, Some(173_205));
        assert_eq!(costs.scx_block_round_trip_ns, Some(1_300_000));
        assert_eq!(costs.scx_block_round_trip_jitter_ns, Some(1_300_000), "capped at the mean");
        // The halves: too few switches measured for theirs; after blocks, 0.91 of 1.3 ms.
        assert_eq!(costs.scx_switch_dispatch_permille, None);
        assert_eq!(costs.scx_block_dispatch_permille, Some(700));
        assert_eq!(costs.validate_scx(), Ok(()));
        // Pooled over two runs, kind by kind.
        let two = RoundTrips::pool(&[rts, rts]).unwrap();
        assert_eq!(
            (two.all.count, two.continues.count, two.switches.count, two.blocks.count),
            (420, 200, 20, 200)
        );
        assert_eq!(two.blocks.mean_ns, 1_300_000);
        assert_eq!(two.block_halves, Halves { count: 200, dispatch_ns: 910_000, gap_ns: 1_300_000 });
        assert_eq!(RoundTrips::pool(&[]), None);
    }

    /// `--real` reads the `[real]` section over the quick sizes: its duration and cases, and a
    /// case's `real_workload`; the boot runs each real case under each policy and repeat, with the
    /// case's workload written as a file the guest's `schedlab exec` reads back identically.
    #[test]
    fn the_real_section_chooses_sizes_and_cases_and_the_boot_runs_each_policy() {
        let dir = tempdir("sizes");
        let p = write(&dir, "e.toml", EXP);
        let quick = load(&p, Mode::Quick).unwrap();
        assert_eq!(quick.cases[0].duration_ns, 20_000_000_000);
        assert_eq!(quick.cases[0].workload.tasks.iter().map(|t| t.instances).sum::<u32>(), 4);
        let e = load(&p, Mode::Real).unwrap();
        assert_eq!(e.cases[0].duration_ns, 10_000_000_000);
        assert!(e.cases[0].real && !e.cases[1].real);
        let boot = plan(&e, 2, &[3_000_000_000, 0]).unwrap();
        let names: Vec<&str> = boot.runs.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["small-cfs", "small-ule", "small-cfs-r2", "small-ule-r2"]);
        assert_eq!(boot.cpus, 1);
        assert_eq!(boot.runs[0].duration, "10s");
        let mut long = load(&p, Mode::Real).unwrap();
        long.cases[0].duration_ns = 3_000_000_000_000;
        assert_eq!(plan(&long, 1, &[20_000_000_000, 0]).unwrap().runs[0].duration, "600s", "exec's limit");
        // Twice the simulated 3 s, within the case's 10 s.
        assert_eq!(boot.longest_run, Duration::from_secs(6));
        let (name, bytes) = &boot.files[0];
        assert_eq!(name, "small.toml");
        let back = schedlab_workload::parse_toml(name, std::str::from_utf8(bytes).unwrap()).unwrap();
        assert_eq!(back, e.cases[0].workload);
        assert!(claim_runs(&e, &e.claims[0]) && !claim_runs(&e, &e.claims[1]));
        assert_eq!(boot.runs[0].sample_interval, None, "the experiment samples no tasks");
        assert!(boot.runs.iter().all(|r| r.spawn_at_start), "no start gate on the real kernel");
        let mut sampled = load(&p, Mode::Real).unwrap();
        (sampled.sample_tasks, sampled.sample_interval_ns) = (true, 100_000_000);
        assert_eq!(plan(&sampled, 1, &[0, 0]).unwrap().runs[0].sample_interval.as_deref(), Some("100ms"));
        // Coarse enough for exec's 16,384 samples over 600 s (600 s / 16,384 = 36.62 ms, rounded up), and at least 1 ms.
        sampled.sample_interval_ns = 10_000;
        assert_eq!(real_sample_interval(&sampled, 600_000_000_000), Some(36_621_094));
        assert_eq!(real_sample_interval(&sampled, 1_000_000_000), Some(1_000_000));
    }

    #[test]
    fn a_real_section_naming_an_unknown_case_is_an_error_at_its_line() {
        let dir = tempdir("unknown");
        let p = write(&dir, "e.toml", &EXP.replace("cases = [\"small\"]", "cases = [\"huge\"]"));
        let err = load(&p, Mode::Real).err().expect("unknown case").to_string();
        assert!(err.contains("e.toml:11: key `cases`: no case `huge`"), "{err}");
    }

    /// `skip` says why an experiment cannot run in the VM: it boots nothing for it; an empty reason
    /// is an error.
    #[test]
    fn a_real_section_can_say_why_an_experiment_cannot_run() {
        let dir = tempdir("skip");
        let p = write(&dir, "e.toml", &EXP.replace("cases = [\"small\"]", "skip = \"too slow\""));
        let e = load(&p, Mode::Real).unwrap();
        assert_eq!((e.real_skip.as_deref(), vm_cpus(&e).unwrap()), (Some("too slow"), 0));
        let p = write(&dir, "f.toml", &EXP.replace("cases = [\"small\"]", "skip = \" \""));
        let err = load(&p, Mode::Real).err().expect("empty reason").to_string();
        assert!(err.contains("key `skip`: say why"), "{err}");
    }

    /// Outcomes sort into `runs[case][policy][repeat]`; a run whose scheduler was ejected is left
    /// out and reported, not counted.
    #[test]
    fn only_runs_that_passed_their_checks_count() {
        let dir = tempdir("collect");
        let e = load(&write(&dir, "e.toml", EXP), Mode::Real).unwrap();
        let ok = |name: &str, policy: &str| vm_test::RunOutcome {
            name: name.into(),
            state: "enabled".into(),
            ops: format!("schedlab_{policy}"),
            exec_exit: Some(0),
            state_before_stop: "enabled".into(),
            scx_exit: Some(0),
            state_after: "disabled".into(),
            report: Some(r#"{"summary":{"nr_switches":5}}"#.into()),
            ..Default::default()
        };
        let mut ejected = ok("small-ule", "ule");
        ejected.state_before_stop = "disabled".into();
        let r = collect(&e, 1, &[ok("small-cfs", "cfs"), ejected], Path::new("serial.log"));
        assert_eq!(r.runs[0][0].len(), 1);
        assert!(r.runs[0][1].is_empty() && r.runs[1][0].is_empty());
        assert_eq!(r.failures.len(), 1, "{:?}", r.failures);
        assert!(
            r.failures[0].starts_with("small-ule: sched_ext was \"disabled\" before"),
            "{:?}",
            r.failures
        );
        let out = check(&e, &r.runs);
        assert_eq!(out[0].holds, None, "ule's run is missing, so the ratio is not measured");
    }
}
