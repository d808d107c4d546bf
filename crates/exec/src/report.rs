//! The report of a real run, in the simulator's `schedlab.run/1` form with `source = "real"`. Fields
//! the kernel does not expose without tracing (scheduler decisions, tasks examined, balancing calls,
//! overhead, energy, per-CPU switches, performance counters, policy internals) are 0 or empty, as
//! docs/metrics.md says.

use crate::measure::CpuTimes;
use crate::runner::TaskResult;
use crate::{sys, Shared};
use schedlab_core::TaskState;
use schedlab_sim::report::{
    measured_summary, per_sec, CounterReport, CpuReport, MachineSummary, PipeReport, PmcReport,
    PolicyStatReport, TaskReport, SCHEMA,
};
use schedlab_sim::{Histogram, LatencySummary, RunReport};

/// Builds the report from the threads' results and the CPU times before and after.
pub fn build(
    shared: &Shared,
    mut results: Vec<TaskResult>,
    stop_reason: &'static str,
    duration_ns: u64,
    before: &CpuTimes,
    after: &CpuTimes,
) -> RunReport {
    results.sort_by_key(|r| r.id);
    let w = &shared.w;
    let mut all = Histogram::new();
    let tasks: Vec<TaskReport> = results
        .iter()
        .map(|r| {
            all.merge(&r.latency);
            let spec = &w.tasks[r.template as usize];
            let life = r.exited_ns.unwrap_or(duration_ns).saturating_sub(r.started_ns);
            TaskReport {
                id: r.id,
                name: r.name.clone(),
                template: spec.name.clone(),
                tgid: r.tgid as u32,
                class: spec.class,
                nice: spec.nice,
                state: if r.exited_ns.is_some() { TaskState::Exited } else { TaskState::Running },
                cpu: r.cpu,
                run_ns: r.stat.run_ns,
                wait_ns: r.stat.wait_ns,
                sleep_ns: life.saturating_sub(r.stat.run_ns + r.stat.wait_ns),
                max_wait_ns: 0,
                work_ns: r.work_ns,
                spin_ns: r.spin_ns,
                nvcsw: r.stat.nvcsw,
                nivcsw: r.stat.nivcsw,
                nr_migrations: r.migrations,
                nr_wakeups: r.stat.nvcsw,
                last_wakeup_ns: r.last_wakeup_ns,
                nr_yields: r.yields,
                wakeup_latency: r.latency.summary(),
                run_length: LatencySummary::default(),
                started_ns: Some(r.started_ns),
                exited_ns: r.exited_ns,
                pmc: PmcReport::default(),
                policy: Default::default(),
                background: spec.background,
            }
        })
        .collect();
    let tck = sys::clk_tck();
    let ticks_ns = |t: u64| t * 1_000_000_000 / tck;
    let cpus: Vec<CpuReport> = after
        .per_cpu
        .iter()
        .enumerate()
        .map(|(i, &(busy, idle))| {
            let (b0, i0) = before.per_cpu.get(i).copied().unwrap_or((busy, idle));
            let busy_ns = ticks_ns(busy.saturating_sub(b0));
            CpuReport {
                id: i as u32,
                node: 0,
                busy_ns,
                idle_ns: ticks_ns(idle.saturating_sub(i0)),
                overhead_ns: 0,
                nr_switches: 0,
                utilization: if duration_ns == 0 {
                    0.0
                } else {
                    (busy_ns as f64 / duration_ns as f64).min(1.0)
                },
                energy_uj: 0,
                freq_residency_ns: vec![duration_ns],
            }
        })
        .collect();
    let nr_switches: u64 = tasks.iter().map(|t| t.nvcsw + t.nivcsw).sum();
    let summary = measured_summary(&tasks, &cpus, duration_ns, stop_reason, 0, nr_switches, all.summary());
    let counters = w
        .counters
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let value = shared.objects.counter(i as u32).load(std::sync::atomic::Ordering::Relaxed);
            CounterReport { name: name.clone(), value, per_sec: per_sec(value, duration_ns) }
        })
        .collect();
    let pipes = w
        .pipes
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let (sends, bytes) = shared.objects.pipe_counts(i as u32);
            PipeReport {
                name: spec.name.clone(),
                nr_sends: sends.load(std::sync::atomic::Ordering::Relaxed),
                bytes: bytes.load(std::sync::atomic::Ordering::Relaxed),
            }
        })
        .collect();
    RunReport {
        schema: SCHEMA,
        source: "real",
        machine: MachineSummary {
            name: format!("{} (this machine)", crate::measure::hostname()),
            nr_cpus: cpus.len().max(1),
            hz: 0,
            numa: false,
        },
        policy: format!("linux {} (the running kernel)", crate::measure::kernel_release()),
        workload: w.name.clone(),
        seed: shared.cfg.seed,
        duration_ns,
        stop_reason,
        stalled_ns: None,
        summary,
        distributions: schedlab_sim::report::Distributions {
            wakeup_latency: all.buckets(),
            run_length: Vec::new(),
        },
        tasks,
        cpus,
        policy_stats: vec![PolicyStatReport {
            name: "ps_per_loop",
            value: shared.ps_per_loop,
            help: "calibration: picoseconds per compute loop iteration",
        }],
        counters,
        pipes,
        series: None,
        timeline: None,
    }
}
