//! A recording measured like a simulated run: the `schedlab.run/1` report with `source = "trace"`,
//! so the same tables, JSON and `compare` columns apply to "recorded" and "replayed".
//!
//! Times are relative to the trace's first event. A trace cannot tell calibrated work from run time,
//! so `work_ns` is the run time. Per thread, context switches are the switches away from it
//! (voluntary or not) as the kernel counts them; the run's total counts switches the way the
//! simulator does with only the kept threads on the machine (each switch to one of them, and each
//! from one of them to the idle task; a switch to an unkept task counts as one to idle only if it
//! went to the idle task). Policy counters, overhead, energy and performance counters are not in a
//! trace and are 0.

use crate::import::Filter;
use crate::timeline::{Recording, Thread};
use schedlab_core::{Ns, SchedClass, TaskId, TaskState};
use schedlab_sim::report::{
    measured_summary, CpuReport, Distributions, MachineSummary, PmcReport, TaskReport, SCHEMA,
};
use schedlab_sim::timeline::{Timeline, TimelineReport};
use schedlab_sim::{Histogram, RunReport};

/// Scheduling class and nice (or RT priority) from a kernel `prio`: below 100 is real-time
/// (`rt_priority = 99 - prio`; SCHED_FIFO and SCHED_RR look the same in a trace, FIFO is assumed),
/// 100..=139 is `nice = prio - 120`; a deadline task (`prio` -1) is shown as FIFO 99.
pub fn class_of(prio: Option<i32>) -> (SchedClass, i8, u8) {
    match prio {
        Some(p) if p < 100 => (SchedClass::Fifo, 0, (99 - p).clamp(1, 99) as u8),
        Some(p) => (SchedClass::Normal, (p - 120).clamp(-20, 19) as i8, 0),
        None => (SchedClass::Normal, 0, 0),
    }
}

/// The name schedlab gives a thread: `comm-pid` (as ftrace prints it), `.n` for a reused pid's
/// n-th generation.
pub fn thread_name(t: &Thread) -> String {
    let comm = if t.comm.is_empty() { "task" } else { t.comm.as_str() };
    match t.generation {
        0 => format!("{comm}-{}", t.pid),
        g => format!("{comm}-{}.{g}", t.pid),
    }
}

/// The report of a recording, over the threads `filter` keeps.
pub fn report(rec: &Recording, filter: &Filter, name: &str) -> RunReport {
    let start = rec.start_ns;
    let duration_ns = rec.span_ns();
    let mut all = Histogram::new();
    let mut run_lengths = Histogram::new();
    let kept: Vec<&Thread> = rec.threads.iter().filter(|t| filter.keeps(t)).collect();
    let mut busy = vec![0u64; rec.nr_cpus as usize];
    let tasks: Vec<TaskReport> = kept
        .iter()
        .enumerate()
        .map(|(i, t)| {
            all.merge(&t.latency);
            let mut own_runs = Histogram::new();
            for r in &t.runs {
                busy[r.cpu as usize] += r.to - r.from;
                // A run still going at the trace's end (or cut by lost events) did not end: left out,
                // as the engine leaves out runs still going at the end.
                if r.left_runnable.is_some() {
                    own_runs.record(r.to - r.from);
                }
            }
            run_lengths.merge(&own_runs);
            let (class, nice, _) = class_of(t.prio);
            TaskReport {
                id: i as u32,
                name: thread_name(t),
                template: thread_name(t),
                tgid: t.tgid.max(0) as u32,
                class,
                nice,
                state: if t.exited_ns.is_some() { TaskState::Exited } else { TaskState::Running },
                cpu: t.last_cpu.unwrap_or(0),
                run_ns: t.run_ns,
                wait_ns: t.wait_ns,
                sleep_ns: t.sleep_ns,
                max_wait_ns: t.max_wait_ns,
                work_ns: t.run_ns,
                spin_ns: 0,
                nvcsw: t.nvcsw,
                nivcsw: t.nivcsw,
                nr_migrations: t.nr_migrations,
                nr_wakeups: t.nr_wakeups,
                last_wakeup_ns: t.last_wakeup_ns.map(|w| w - start),
                nr_yields: 0,
                wakeup_latency: t.latency.summary(),
                run_length: own_runs.summary(),
                started_ns: Some(t.first_ns - start),
                exited_ns: t.exited_ns.map(|x| x - start),
                pmc: PmcReport::default(),
                policy: Default::default(),
                background: false,
            }
        })
        .collect();
    let cpus: Vec<CpuReport> = busy
        .iter()
        .enumerate()
        .map(|(i, &busy_ns)| CpuReport {
            id: i as u32,
            node: 0,
            busy_ns,
            idle_ns: duration_ns.saturating_sub(busy_ns),
            overhead_ns: 0,
            nr_switches: rec.cpus.get(i).map_or(0, |c| c.nr_switches),
            utilization: if duration_ns == 0 { 0.0 } else { (busy_ns as f64 / duration_ns as f64).min(1.0) },
            energy_uj: 0,
            freq_residency_ns: vec![duration_ns],
        })
        .collect();
    let nr_exited = tasks.iter().filter(|t| t.exited_ns.is_some()).count();
    let stop_reason = if nr_exited == tasks.len() && !tasks.is_empty() { "all_done" } else { "duration" };
    // As the simulator counts them with only these threads on the machine: every switch to one of
    // them, and every switch from one of them to the idle task.
    let nr_switches: u64 = kept.iter().map(|t| t.nr_switch_in + t.nr_out_to_idle).sum();
    let summary = measured_summary(
        &tasks,
        &cpus,
        duration_ns,
        stop_reason,
        rec.nr_events as u64,
        nr_switches,
        all.summary(),
    );
    RunReport {
        schema: SCHEMA,
        source: "trace",
        machine: MachineSummary {
            name: "traced machine".into(),
            nr_cpus: cpus.len().max(1),
            hz: 0,
            numa: false,
        },
        policy: "recorded".into(),
        workload: name.to_string(),
        seed: 0,
        duration_ns,
        stop_reason,
        stalled_ns: None,
        summary,
        distributions: Distributions { wakeup_latency: all.buckets(), run_length: run_lengths.buckets() },
        tasks,
        cpus,
        policy_stats: Vec::new(),
        counters: Vec::new(),
        pipes: Vec::new(),
        series: None,
        timeline: Some(timeline(&kept, start, rec.nr_cpus as usize, duration_ns)),
    }
}

/// Who ran where, from the kept threads' runs (task ids as in the report: the kept threads' order).
fn timeline(kept: &[&Thread], start: Ns, nr_cpus: usize, duration_ns: Ns) -> TimelineReport {
    let mut runs: Vec<(&crate::timeline::Run, u32)> =
        kept.iter().enumerate().flat_map(|(i, t)| t.runs.iter().map(move |r| (r, i as u32))).collect();
    runs.sort_by_key(|(r, i)| (r.cpu, r.from, r.to, *i));
    let mut tl = Timeline::new(nr_cpus);
    for (i, t) in kept.iter().enumerate() {
        tl.name_task(TaskId(i as u32), if t.comm.is_empty() { "task" } else { &t.comm });
    }
    for (r, i) in runs {
        let (from, to) = (r.from.saturating_sub(start), r.to.saturating_sub(start));
        tl.add_run(r.cpu as usize, TaskId(i), from, to, r.left_runnable);
    }
    tl.report(duration_ns)
}
