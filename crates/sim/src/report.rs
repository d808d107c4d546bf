//! The result of a run: per-run summary, per-task and per-CPU accounting, policy counters and time
//! series, serialisable as versioned JSON (schema `schedlab.run/1`, described in docs/metrics.md and
//! docs/run-schema.json). Every metric is defined in docs/metrics.md.

use crate::histogram::{Bucket, Histogram, LatencySummary};
use crate::sim::Sim;
use schedlab_core::weights::nice_to_weight;
use schedlab_core::{Ns, SchedClass, TaskState, NSEC_PER_SEC};
use serde::Serialize;
use std::collections::BTreeMap;

/// The schema identifier written into every report.
pub const SCHEMA: &str = "schedlab.run/1";

/// A whole run.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// `simulation` for schedlab's engine, `real` for `schedlab exec` on the machine's own kernel
    /// (whose reports leave the fields the kernel does not expose at 0, see docs/metrics.md).
    pub source: &'static str,
    /// The machine.
    pub machine: MachineSummary,
    /// The policy as named (with parameters), e.g. `cfs[sched_latency_ns=6000000]`.
    pub policy: String,
    /// Workload name.
    pub workload: String,
    /// The run's seed.
    pub seed: u64,
    /// Simulated length of the run, ns.
    pub duration_ns: Ns,
    /// Why it ended: `duration`, `all_done` or `task_done`.
    pub stop_reason: &'static str,
    /// Present when the run reached its duration with tasks left that nothing could wake (each
    /// blocked on another task, none on a timer or device): the time the last of them blocked. A
    /// deadlock of the workload's own making; the run simply idled from then on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stalled_ns: Option<Ns>,
    /// Run-wide metrics.
    pub summary: Summary,
    /// Whole distributions behind the summary's percentiles (bounded: at most 1,920 buckets each).
    pub distributions: Distributions,
    /// One entry per task, by id.
    pub tasks: Vec<TaskReport>,
    /// One entry per CPU, by id.
    pub cpus: Vec<CpuReport>,
    /// The policy's own counters.
    pub policy_stats: Vec<PolicyStatReport>,
    /// The workload's named counters (a benchmark's own score: events, messages, requests).
    pub counters: Vec<CounterReport>,
    /// Traffic through each pipe.
    pub pipes: Vec<PipeReport>,
    /// Time series (absent when sampling is off).
    pub series: Option<Series>,
    /// Who ran where, per column of time (absent unless asked for: `RunConfig::timeline`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<crate::timeline::TimelineReport>,
}

/// Whole distributions of a run, as histogram buckets (docs/metrics.md, "Distributions").
#[derive(Clone, Debug, Default, Serialize)]
pub struct Distributions {
    /// Every wakeup's latency (all tasks): the distribution of `summary.wakeup_latency`.
    pub wakeup_latency: Vec<Bucket>,
    /// How long a task ran each time from being switched in until another task or idle took its
    /// CPU (simulated and traced runs; empty for real runs, whose kernel does not say).
    pub run_length: Vec<Bucket>,
}

/// The machine a run used.
#[derive(Clone, Debug, Serialize)]
pub struct MachineSummary {
    /// Name.
    pub name: String,
    /// Logical CPUs.
    pub nr_cpus: usize,
    /// Tick rate.
    pub hz: u32,
    /// NUMA or not.
    pub numa: bool,
}

/// Run-wide metrics (see docs/metrics.md).
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// Events the engine handled (and the few superseded ones dropped when they fire): the unit of simulation cost.
    pub nr_events: u64,
    /// Tasks created (initial and forked).
    pub nr_tasks: u64,
    /// Tasks that exited.
    pub nr_exited: u64,
    /// Time the last task exited, if all exited.
    pub makespan_ns: Option<Ns>,
    /// Calibrated work completed, ns at nominal speed (all tasks).
    pub work_ns: Ns,
    /// Work completed per second of run: the machine's useful throughput in CPUs' worth of work.
    pub work_per_sec: f64,
    /// Exits per second of run.
    pub exits_per_sec: f64,
    /// Context switches (task to task, to idle, from idle).
    pub nr_switches: u64,
    /// Context switches per second.
    pub switches_per_sec: f64,
    /// Task migrations (changes of a task's CPU after its first placement).
    pub nr_migrations: u64,
    /// Migrations per second.
    pub migrations_per_sec: f64,
    /// Wakeups.
    pub nr_wakeups: u64,
    /// Calls to the policy's `balance` hook.
    pub nr_balance_calls: u64,
    /// Migrations requested by `balance`.
    pub nr_balance_migrations: u64,
    /// Scheduling decisions (`pick_next` rounds).
    pub nr_decisions: u64,
    /// Tasks the policy reported examining (picks and balancing).
    pub nr_examined: u64,
    /// Sum of CPU busy time (tasks running), ns.
    pub busy_ns: Ns,
    /// Sum of CPU idle time, ns.
    pub idle_ns: Ns,
    /// Sum of scheduling overhead (decisions and context switches), ns.
    pub overhead_ns: Ns,
    /// busy / (CPUs x duration).
    pub utilization: f64,
    /// Wakeup latency over all tasks.
    pub wakeup_latency: LatencySummary,
    /// Longest time any task waited runnable without running, ns (starvation indicator).
    pub max_wait_ns: Ns,
    /// Fairness among the non-RT tasks alive at the end.
    pub fairness: Fairness,
    /// Energy drawn by all CPUs, microjoules (docs/hardware-model.md).
    pub energy_uj: u64,
    /// The user-space round trips of a policy simulated under sched_ext, by what they decided
    /// (`CostModel::scx_round_trip_ns`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scx: Option<ScxRoundTrips>,
    /// The machine's costs the run charged, one entry per cost charged at least once, in
    /// [`CHARGED_COSTS`] order (absent from reports built from a trace).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub machine_costs: Vec<CostCharge>,
}

/// The `CostModel` fields whose charges a run counts, in report order: the decision (base and per
/// task examined), the switch (of address space, between threads), the reschedule IPI and the exit
/// from idle, the cache refill after a move at each topology level or an eviction, and the tick's
/// interrupt.
pub const CHARGED_COSTS: [&str; 13] = [
    "sched_base_ns",
    "sched_per_task_ns",
    "context_switch_ns",
    "thread_switch_ns",
    "wakeup_ipi_ns",
    "idle_exit_ns",
    "refill_smt_ns",
    "refill_llc_ns",
    "refill_node_ns",
    "refill_socket_ns",
    "refill_machine_ns",
    "refill_evicted_ns",
    "tick_irq_ns",
];

/// How often and how much a run charged one machine cost (docs/metrics.md, "Machine costs").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CostCharge {
    /// The `CostModel` field (`[costs]` key of a machine file).
    pub cost: &'static str,
    /// Times charged: decisions, tasks examined, switches, IPIs, idle exits, refills, ticks.
    pub count: u64,
    /// What it added, ns: CPU time for the decision, switch and tick costs, wakeup latency for the
    /// IPI and idle exit, and for a refill the time added to the task's cold period (run at
    /// `cold_speed_pct`).
    pub ns: Ns,
}

/// The user-space round trips of a run simulated under sched_ext, by the decision each waited
/// for, as schedlab-scx counts its orders on the real kernel (docs/real-kernel.md): a count and
/// the round trips' total, ns, for each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ScxRoundTrips {
    /// Ticks after which the running task went on while another waited (schedlab-scx's
    /// `continues`): the CPU waited the whole round trip.
    pub nr_continues: u64,
    /// Their total, ns.
    pub continue_ns: Ns,
    /// Switches decided at a task's own slice or tick end.
    pub nr_switches: u64,
    /// Their total, ns.
    pub switch_ns: Ns,
    /// Picks after a block (or exit) of the running task.
    pub nr_blocks: u64,
    /// Their total, ns.
    pub block_ns: Ns,
    /// Decisions on a wakeup for a CPU running a task (a wakeup preemption if the policy asks
    /// for one; schedlab-scx's `preempt_dispatches` count those): the running task runs on
    /// meanwhile.
    pub nr_busy_kicks: u64,
    /// Their total, ns.
    pub busy_kick_ns: Ns,
    /// Decisions on a wakeup for an idle CPU (or one whose task blocked unheard).
    pub nr_idle_kicks: u64,
    /// Their total, ns.
    pub idle_kick_ns: Ns,
    /// Wakeups told late (with the halves of a round trip set, `Sim::wake`) whose CPU's task had
    /// blocked meanwhile, unheard: the block was heard in the same round and the CPU picked
    /// without a preemption (its round trip is the block's, counted in `nr_blocks`).
    pub nr_blocked_kicks: u64,
}

/// Fairness metrics.
#[derive(Clone, Debug, Serialize)]
pub struct Fairness {
    /// Tasks considered (non-RT, started, not exited at the end).
    pub nr_tasks: u64,
    /// Seed 000 eq. 4 at the end: max over task pairs of |run_i/w_i - run_j/w_j|, in ns of nice-0
    /// run time (each run time scaled by 1024/weight), over the tasks above.
    pub unfairness_ns: Ns,
    /// Eq. 4 at its largest: the maximum over every sample instant (`sample_interval`) and the end
    /// of the unfairness among the tasks alive then (foreground, non-RT, started, not exited), as
    /// seed 000 sec. 3 takes "the maximal possible unfairness" as the measure. A run that ends when
    /// its tasks are all done has no task alive at the end; this keeps what happened before.
    /// Without sampling (and in measured runs) it is the end's value.
    pub max_unfairness_ns: Ns,
    /// When `max_unfairness_ns` was reached, ns from the start.
    pub max_unfairness_at_ns: Ns,
    /// Jain's fairness index of weight-normalised run time (1 = perfectly fair).
    pub jain_index: f64,
    /// Work spread among identical tasks (same template and nice), for classes of two or more.
    pub work_spread: Vec<WorkSpread>,
}

/// Work statistics of one class of identical tasks.
#[derive(Clone, Debug, Serialize)]
pub struct WorkSpread {
    /// Template name.
    pub template: String,
    /// Nice level.
    pub nice: i8,
    /// Tasks in the class.
    pub nr_tasks: u64,
    /// Mean work done, ns.
    pub mean_work_ns: f64,
    /// Population standard deviation of work done, ns.
    pub stddev_work_ns: f64,
    /// Mean run time, ns.
    pub mean_run_ns: f64,
    /// Population standard deviation of run time, ns.
    pub stddev_run_ns: f64,
}

/// One task.
#[derive(Clone, Debug, Serialize)]
pub struct TaskReport {
    /// Id.
    pub id: u32,
    /// Name.
    pub name: String,
    /// Template name.
    pub template: String,
    /// Process id.
    pub tgid: u32,
    /// Class.
    pub class: SchedClass,
    /// Nice.
    pub nice: i8,
    /// Final state.
    pub state: TaskState,
    /// CPU it ended on.
    pub cpu: u32,
    /// Time running, ns.
    pub run_ns: Ns,
    /// Time runnable but not executing (queued, or in its switch-in overhead), ns.
    pub wait_ns: Ns,
    /// Time blocked, ns.
    pub sleep_ns: Ns,
    /// Longest runnable-but-not-running stretch, ns.
    pub max_wait_ns: Ns,
    /// Calibrated work done, ns.
    pub work_ns: Ns,
    /// Spin time done, ns.
    pub spin_ns: Ns,
    /// Voluntary context switches (blocked or exited).
    pub nvcsw: u64,
    /// Involuntary context switches (preempted or yielded, as Linux counts yields).
    pub nivcsw: u64,
    /// Migrations.
    pub nr_migrations: u64,
    /// Wakeups.
    pub nr_wakeups: u64,
    /// Time of the last wakeup.
    pub last_wakeup_ns: Option<Ns>,
    /// `sched_yield` calls.
    pub nr_yields: u64,
    /// Wakeup latency: from wakeup until the task executes again (switch overhead included).
    pub wakeup_latency: LatencySummary,
    /// The lengths of its runs on a CPU, each from its switch-in to its switch-out (simulated and
    /// traced runs; all 0 for real runs, whose kernel does not say).
    pub run_length: LatencySummary,
    /// Start time.
    pub started_ns: Option<Ns>,
    /// Exit time.
    pub exited_ns: Option<Ns>,
    /// Performance counters (see docs/hardware-model.md).
    pub pmc: PmcReport,
    /// The policy's internals for this task at the end of the run (`SchedPolicy::trace_values`:
    /// CFS's vruntime, ULE's interactivity score, AVEC's avec_boosted...), by name.
    pub policy: PolicyValues,
    /// A background task (a monitor beside the workload, `background = true`): left out of the
    /// makespan and the fairness summary. Written only when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub background: bool,
}

/// Named values a policy reports for one task, sorted by name; serialized as a JSON object. (A
/// sorted slice rather than a map: a handful of entries, and a map's node costs a few hundred
/// bytes per task on runs of 100,000 tasks.)
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyValues(Box<[(&'static str, i64)]>);

impl PolicyValues {
    /// From `(name, value)` pairs in any order; of repeated names the last value counts.
    pub fn new(mut values: Vec<(&'static str, i64)>) -> PolicyValues {
        values.reverse();
        values.sort_by_key(|v| v.0); // stable: the last value of a name comes first
        values.dedup_by_key(|v| v.0);
        PolicyValues(values.into_boxed_slice())
    }

    /// The value called `name`.
    pub fn get(&self, name: &str) -> Option<&i64> {
        self.0.binary_search_by(|v| v.0.cmp(name)).ok().map(|i| &self.0[i].1)
    }

    /// The `(name, value)` pairs, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, i64)> + '_ {
        self.0.iter().copied()
    }
}

impl Serialize for PolicyValues {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0.iter() {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// Events by name, in `schedlab_core::PmcEvent` order.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct PmcEvents {
    /// Instructions retired.
    pub instructions: u64,
    /// Unhalted cycles.
    pub cycles: u64,
    /// x87 instructions.
    pub x87: u64,
    /// MMX instructions.
    pub mmx: u64,
    /// SSE instructions.
    pub sse: u64,
    /// Branch instructions.
    pub branch: u64,
    /// Non-memory instructions.
    pub non_memory: u64,
    /// Cycles the L2 cache was busy.
    pub l2_busy: u64,
    /// Cycles the bus was busy.
    pub bus_busy: u64,
}

impl From<[u64; schedlab_core::pmc::NR_PMC_EVENTS]> for PmcEvents {
    fn from(v: [u64; schedlab_core::pmc::NR_PMC_EVENTS]) -> Self {
        PmcEvents {
            instructions: v[0],
            cycles: v[1],
            x87: v[2],
            mmx: v[3],
            sse: v[4],
            branch: v[5],
            non_memory: v[6],
            l2_busy: v[7],
            bus_busy: v[8],
        }
    }
}

/// A task's performance counters: what was counted, and for how many cycles each event was counted
/// (the counters rotate, so `count / cycles_counted` is the event's rate per cycle).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct PmcReport {
    /// Events counted.
    pub count: PmcEvents,
    /// Cycles during which each event was being counted.
    pub cycles_counted: PmcEvents,
}

/// One CPU.
#[derive(Clone, Debug, Serialize)]
pub struct CpuReport {
    /// Id.
    pub id: u32,
    /// NUMA node of the CPU.
    pub node: u32,
    /// Task time, ns.
    pub busy_ns: Ns,
    /// Idle time, ns.
    pub idle_ns: Ns,
    /// Overhead time, ns.
    pub overhead_ns: Ns,
    /// Context switches.
    pub nr_switches: u64,
    /// busy / duration.
    pub utilization: f64,
    /// Energy drawn (static + dynamic), microjoules.
    pub energy_uj: u64,
    /// Time its frequency domain spent at each level, ns (one entry without frequency levels).
    pub freq_residency_ns: Vec<Ns>,
}

/// A workload counter.
#[derive(Clone, Debug, Serialize)]
pub struct CounterReport {
    /// Name.
    pub name: String,
    /// Count at the end.
    pub value: u64,
    /// Count per second of run.
    pub per_sec: f64,
}

/// Traffic through one pipe.
#[derive(Clone, Debug, Serialize)]
pub struct PipeReport {
    /// Name.
    pub name: String,
    /// Send operations.
    pub nr_sends: u64,
    /// Bytes sent.
    pub bytes: u64,
}

/// A policy counter.
#[derive(Clone, Debug, Serialize)]
pub struct PolicyStatReport {
    /// Name.
    pub name: &'static str,
    /// Value.
    pub value: u64,
    /// What it counts.
    pub help: &'static str,
}

/// Time series sampled at a fixed interval.
#[derive(Clone, Debug, Serialize)]
pub struct Series {
    /// Interval between the samples kept, ns: the configured interval, doubled each time the
    /// series thinned itself (see [`MAX_SERIES_SAMPLES`]).
    pub interval_ns: Ns,
    /// Sample times, ns.
    pub time_ns: Vec<Ns>,
    /// `nr_running[cpu][sample]`: tasks counted on each CPU (running + queued).
    pub nr_running: Vec<Vec<u32>>,
    /// `task_run_ns[task][sample]`: cumulative run time per task (only with task sampling on;
    /// tasks created later have shorter rows, aligned to the end).
    pub task_run_ns: Option<Vec<Vec<Ns>>>,
    /// `task_policy[name][task][sample]`: the policy's internals per task (`SchedPolicy::trace_values`:
    /// ULE's interactivity score, CFS's vruntime lag...) by name, with task sampling on (rows aligned
    /// to the end as `task_run_ns`'s; `null` where the policy gave no such value for the task).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_policy: Option<std::collections::BTreeMap<String, Vec<Vec<Option<i64>>>>>,
    /// Context switches so far, machine-wide, at each sample.
    pub switches: Vec<u64>,
    /// Migrations so far, machine-wide, at each sample.
    pub migrations: Vec<u64>,
}

impl Series {
    pub(crate) fn new(interval_ns: Ns, ncpus: usize) -> Series {
        Series {
            interval_ns,
            time_ns: Vec::new(),
            nr_running: vec![Vec::new(); ncpus],
            task_run_ns: None,
            task_policy: None,
            switches: Vec::new(),
            migrations: Vec::new(),
        }
    }

    pub(crate) fn record(
        &mut self,
        now: Ns,
        per_cpu: impl Iterator<Item = u32>,
        per_task: Option<Vec<Ns>>,
        per_task_policy: Option<&[Vec<(&'static str, i64)>]>,
        (switches, migrations): (u64, u64),
    ) {
        self.time_ns.push(now);
        self.switches.push(switches);
        self.migrations.push(migrations);
        for (row, v) in self.nr_running.iter_mut().zip(per_cpu) {
            row.push(v);
        }
        if let Some(vals) = per_task {
            let rows = self.task_run_ns.get_or_insert_with(Vec::new);
            rows.resize(vals.len(), Vec::new());
            for (row, v) in rows.iter_mut().zip(vals) {
                row.push(v);
            }
        }
        if let Some(values) = per_task_policy {
            self.record_policy(values);
        }
        // Per-task rows multiply the values per sample: many tasks lower the sample cap so the
        // whole series stays within MAX_SERIES_VALUES.
        let policy_rows: usize = self.task_policy.iter().flat_map(|m| m.values()).map(Vec::len).sum();
        let columns = 3 + self.nr_running.len() + self.task_run_ns.as_ref().map_or(0, Vec::len) + policy_rows;
        let cap = MAX_SERIES_SAMPLES.min((MAX_SERIES_VALUES / columns).max(2));
        while self.time_ns.len() > cap {
            self.thin();
        }
    }

    /// Appends the policy's values of each task (`values[task]`: `(name, value)` pairs) to the
    /// sample whose time [`Series::record`] just pushed. A name seen for the first time, or a task
    /// first seen now, starts its row at this sample (rows are aligned to the end).
    fn record_policy(&mut self, values: &[Vec<(&'static str, i64)>]) {
        let samples = self.time_ns.len();
        let map = self.task_policy.get_or_insert_with(Default::default);
        for (name, _) in values.iter().flatten() {
            if !map.contains_key(*name) {
                map.insert(name.to_string(), Vec::new());
            }
        }
        for (name, rows) in map.iter_mut() {
            if rows.len() < values.len() {
                rows.resize(values.len(), Vec::new());
            }
            for (t, row) in rows.iter_mut().enumerate() {
                let v = values.get(t).and_then(|p| p.iter().find(|(n, _)| n == name)).map(|(_, v)| *v);
                debug_assert!(row.len() < samples, "one value per task and sample");
                row.push(v);
            }
        }
    }

    /// Keeps every other sample (the first, the third, ..., and so the newest) and doubles the
    /// interval, so a series of any length stays within [`MAX_SERIES_SAMPLES`] samples.
    fn thin(&mut self) {
        fn keep_even<T: Copy>(v: &mut Vec<T>, offset: usize) {
            let mut i = 0;
            v.retain(|_| {
                i += 1;
                (offset + i - 1).is_multiple_of(2)
            });
        }
        let n = self.time_ns.len();
        keep_even(&mut self.time_ns, 0);
        keep_even(&mut self.switches, 0);
        keep_even(&mut self.migrations, 0);
        for row in &mut self.nr_running {
            keep_even(row, 0);
        }
        // A task's row covers the newest samples only (it started later): align it to the end.
        for row in self.task_run_ns.iter_mut().flatten() {
            let offset = n - row.len();
            keep_even(row, offset);
        }
        for row in self.task_policy.iter_mut().flat_map(|m| m.values_mut()).flatten() {
            let offset = n - row.len();
            keep_even(row, offset);
        }
        self.interval_ns *= 2;
    }
}

/// The most samples a [`Series`] keeps: when a sample would exceed it, every other sample is
/// dropped and the interval doubles (at the default 10 ms, the first halving comes after about
/// 164 simulated seconds). This bounds the series' memory on runs of any length.
pub const MAX_SERIES_SAMPLES: usize = 16_384;

/// The most values a [`Series`] keeps in all (samples x (CPUs + tasks sampled + 3)): with per-task
/// sampling of many tasks, fewer samples are kept (100,000 tasks: 335), bounding the memory and the
/// report's size (about 256 MiB of values).
pub const MAX_SERIES_VALUES: usize = 32 * 1024 * 1024;

/// `n` per second of `dur` ns (0 for an empty run).
pub fn per_sec(n: u64, dur: Ns) -> f64 {
    if dur == 0 {
        0.0
    } else {
        n as f64 * NSEC_PER_SEC as f64 / dur as f64
    }
}

fn mean_std(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    (mean, var.sqrt())
}

pub(crate) fn build(sim: &Sim, end: Ns, stop: &'static str) -> RunReport {
    let w = sim.w;
    let ncpus = sim.cpus.len();
    let mut all_lat = Histogram::new();
    let mut all_runs = Histogram::new();
    let tasks: Vec<TaskReport> = sim
        .tasks
        .iter()
        .zip(&sim.views)
        .map(|(tk, v)| {
            all_lat.merge(&tk.wake_lat);
            all_runs.merge(&tk.run_len);
            TaskReport {
                id: v.id.0,
                name: tk.name.clone(),
                template: w.tasks[tk.template as usize].name.clone(),
                tgid: v.tgid,
                class: v.class,
                nice: v.nice,
                state: v.state,
                cpu: v.cpu.0,
                run_ns: tk.run_ns,
                wait_ns: tk.wait_ns,
                sleep_ns: tk.sleep_ns,
                max_wait_ns: tk.max_wait_ns,
                work_ns: tk.work_ns,
                spin_ns: tk.spin_ns,
                nvcsw: tk.nvcsw,
                nivcsw: tk.nivcsw,
                nr_migrations: tk.nr_migrations,
                nr_wakeups: tk.nr_wakeups,
                last_wakeup_ns: tk.last_wakeup,
                nr_yields: tk.nr_yields,
                wakeup_latency: tk.wake_lat.summary(),
                run_length: tk.run_len.summary(),
                started_ns: tk.started_at,
                exited_ns: tk.exited_at,
                pmc: PmcReport { count: v.pmc.count.into(), cycles_counted: v.pmc.cycles_counted.into() },
                policy: {
                    let mut values = Vec::new();
                    sim.policy.trace_values(v.id, &mut values);
                    PolicyValues::new(values)
                },
                background: w.tasks[tk.template as usize].background,
            }
        })
        .collect();
    let cpus: Vec<CpuReport> = sim
        .cpus
        .iter()
        .enumerate()
        .map(|(i, c)| CpuReport {
            id: i as u32,
            node: sim.machine.topology.place(schedlab_core::CpuId(i as u32)).node,
            busy_ns: c.busy_ns,
            idle_ns: c.idle_ns,
            overhead_ns: c.overhead_ns,
            nr_switches: c.nr_switches,
            utilization: if end == 0 { 0.0 } else { c.busy_ns as f64 / end as f64 },
            energy_uj: ((sim.machine.dvfs.static_mw as u128 * end as u128 + c.dynamic_pj) / 1_000_000) as u64,
            freq_residency_ns: {
                let d = &sim.domains[sim.domain_of[i]];
                let mut r = d.residency.clone();
                r[d.level] += end.saturating_sub(d.since);
                r
            },
        })
        .collect();
    let nr_exited = tasks.iter().filter(|t| t.exited_ns.is_some()).count() as u64;
    let makespan_ns = makespan(&tasks, stop, end);
    let busy: Ns = cpus.iter().map(|c| c.busy_ns).sum();
    let c = &sim.counters;
    let work_ns: Ns = tasks.iter().map(|t| t.work_ns).sum();
    RunReport {
        schema: SCHEMA,
        source: "simulation",
        machine: MachineSummary {
            name: sim.machine.name.clone(),
            nr_cpus: ncpus,
            hz: sim.machine.hz,
            numa: sim.machine.numa,
        },
        policy: sim.policy_spec.clone(),
        workload: w.name.clone(),
        seed: sim.cfg.seed,
        duration_ns: end,
        stop_reason: stop,
        stalled_ns: None,
        summary: Summary {
            nr_events: c.nr_events,
            nr_tasks: tasks.len() as u64,
            nr_exited,
            makespan_ns,
            work_ns,
            work_per_sec: if end == 0 { 0.0 } else { work_ns as f64 / end as f64 },
            energy_uj: cpus.iter().map(|c| c.energy_uj).sum(),
            exits_per_sec: per_sec(nr_exited, end),
            nr_switches: c.nr_switches,
            switches_per_sec: per_sec(c.nr_switches, end),
            nr_migrations: c.nr_migrations,
            migrations_per_sec: per_sec(c.nr_migrations, end),
            nr_wakeups: c.nr_wakeups,
            nr_balance_calls: c.nr_balance_calls,
            nr_balance_migrations: c.nr_balance_migrations,
            nr_decisions: c.nr_decisions,
            nr_examined: c.nr_examined,
            busy_ns: busy,
            idle_ns: cpus.iter().map(|c| c.idle_ns).sum(),
            overhead_ns: cpus.iter().map(|c| c.overhead_ns).sum(),
            utilization: if end == 0 { 0.0 } else { busy as f64 / (end as f64 * ncpus as f64) },
            wakeup_latency: all_lat.summary(),
            max_wait_ns: tasks.iter().map(|t| t.max_wait_ns).max().unwrap_or(0),
            fairness: {
                let mut f = fairness(&tasks, end);
                let (sampled, at) = sim.max_unfairness;
                if sampled > f.max_unfairness_ns {
                    (f.max_unfairness_ns, f.max_unfairness_at_ns) = (sampled, at);
                }
                f
            },
            scx: sim.machine.costs.scx_round_trip_ns.map(|_| c.scx),
            machine_costs: CHARGED_COSTS
                .iter()
                .zip(c.machine_costs)
                .filter(|(_, (count, _))| *count > 0)
                .map(|(&cost, (count, ns))| CostCharge { cost, count, ns })
                .collect(),
        },
        distributions: Distributions { wakeup_latency: all_lat.buckets(), run_length: all_runs.buckets() },
        tasks,
        cpus,
        policy_stats: sim
            .policy
            .stats()
            .into_iter()
            .map(|s| PolicyStatReport { name: s.name, value: s.value, help: s.help })
            .collect(),
        counters: w
            .counters
            .iter()
            .zip(&sim.user_counters)
            .map(|(name, &value)| CounterReport { name: name.clone(), value, per_sec: per_sec(value, end) })
            .collect(),
        pipes: w
            .pipes
            .iter()
            .zip(&sim.pipes)
            .map(|(spec, p)| PipeReport {
                name: spec.name.clone(),
                nr_sends: p.nr_sends,
                bytes: p.bytes_sent,
            })
            .collect(),
        series: (sim.cfg.sample_interval_ns > 0).then(|| sim.series.clone()),
        timeline: sim.timeline.as_ref().map(|t| t.report(end)),
    }
}

/// The run-wide summary of a measured run (a real run or a recorded trace), from its tasks and CPUs:
/// the counts the kernel or a trace gives, with the engine-only fields (decisions, balancing,
/// overhead, energy) at 0. `nr_switches` is passed in, as each source counts switches its own way.
pub fn measured_summary(
    tasks: &[TaskReport],
    cpus: &[CpuReport],
    duration_ns: Ns,
    stop_reason: &str,
    nr_events: u64,
    nr_switches: u64,
    wakeup_latency: LatencySummary,
) -> Summary {
    let ncpus = cpus.len().max(1);
    let nr_exited = tasks.iter().filter(|t| t.exited_ns.is_some()).count() as u64;
    let work_ns: u64 = tasks.iter().map(|t| t.work_ns).sum();
    let nr_migrations: u64 = tasks.iter().map(|t| t.nr_migrations).sum();
    let busy: u64 = cpus.iter().map(|c| c.busy_ns).sum();
    Summary {
        nr_events,
        nr_tasks: tasks.len() as u64,
        nr_exited,
        makespan_ns: makespan(tasks, stop_reason, duration_ns),
        work_ns,
        work_per_sec: if duration_ns == 0 { 0.0 } else { work_ns as f64 / duration_ns as f64 },
        exits_per_sec: per_sec(nr_exited, duration_ns),
        nr_switches,
        switches_per_sec: per_sec(nr_switches, duration_ns),
        nr_migrations,
        migrations_per_sec: per_sec(nr_migrations, duration_ns),
        nr_wakeups: tasks.iter().map(|t| t.nr_wakeups).sum(),
        nr_balance_calls: 0,
        nr_balance_migrations: 0,
        nr_decisions: 0,
        nr_examined: 0,
        busy_ns: busy,
        idle_ns: cpus.iter().map(|c| c.idle_ns).sum(),
        overhead_ns: 0,
        utilization: if duration_ns == 0 {
            0.0
        } else {
            (busy as f64 / (duration_ns as f64 * ncpus as f64)).min(1.0)
        },
        wakeup_latency,
        max_wait_ns: tasks.iter().map(|t| t.max_wait_ns).max().unwrap_or(0),
        fairness: fairness(tasks, duration_ns),
        energy_uj: 0,
        scx: None,
        machine_costs: Vec::new(),
    }
}

/// The workload's completion: the last exit when every foreground task exited, or the end of a run stopped
/// because the stop task's instances were all done (a server that never exits, run until its load
/// generator finishes); `None` otherwise.
pub fn makespan(tasks: &[TaskReport], stop_reason: &str, end: Ns) -> Option<Ns> {
    let foreground = || tasks.iter().filter(|t| !t.background);
    let exited = foreground().filter(|t| t.exited_ns.is_some()).count();
    if exited == foreground().count() && exited > 0 {
        foreground().filter_map(|t| t.exited_ns).max()
    } else if stop_reason == "task_done" {
        Some(end)
    } else {
        None
    }
}

/// Fairness over the foreground non-RT tasks that were alive (started, not exited) at the end,
/// `end_ns` (the largest eq. 4 unfairness is the end's: a simulation raises it from its samples).
pub fn fairness(tasks: &[TaskReport], end_ns: Ns) -> Fairness {
    let alive: Vec<&TaskReport> = tasks
        .iter()
        .filter(|t| !t.background && !t.class.is_rt() && t.started_ns.is_some() && t.exited_ns.is_none())
        .collect();
    let norm: Vec<u128> =
        alive.iter().map(|t| t.run_ns as u128 * 1024 / nice_to_weight(t.nice) as u128).collect();
    let unfairness_ns = unfairness_of(norm.iter().copied());
    let sum: f64 = norm.iter().map(|&x| x as f64).sum();
    let sq: f64 = norm.iter().map(|&x| (x as f64) * (x as f64)).sum();
    let jain_index = if sq == 0.0 { 1.0 } else { sum * sum / (norm.len() as f64 * sq) };
    let mut classes: BTreeMap<(String, i8), Vec<&TaskReport>> = BTreeMap::new();
    for t in tasks.iter().filter(|t| t.started_ns.is_some()) {
        classes.entry((t.template.clone(), t.nice)).or_default().push(t);
    }
    let work_spread = classes
        .into_iter()
        .filter(|(_, v)| v.len() >= 2)
        .map(|((template, nice), v)| {
            let (mean_work_ns, stddev_work_ns) =
                mean_std(&v.iter().map(|t| t.work_ns as f64).collect::<Vec<_>>());
            let (mean_run_ns, stddev_run_ns) =
                mean_std(&v.iter().map(|t| t.run_ns as f64).collect::<Vec<_>>());
            WorkSpread {
                template,
                nice,
                nr_tasks: v.len() as u64,
                mean_work_ns,
                stddev_work_ns,
                mean_run_ns,
                stddev_run_ns,
            }
        })
        .collect();
    Fairness {
        nr_tasks: alive.len() as u64,
        unfairness_ns,
        max_unfairness_ns: unfairness_ns,
        max_unfairness_at_ns: end_ns,
        jain_index,
        work_spread,
    }
}

/// Eq. 4 over run times normalised to nice 0 (`run_ns x 1024 / weight`): the largest minus the
/// smallest; 0 for fewer than two.
pub fn unfairness_of(normalised: impl Iterator<Item = u128>) -> Ns {
    let (mut hi, mut lo) = (None::<u128>, None::<u128>);
    for x in normalised {
        hi = Some(hi.map_or(x, |h| h.max(x)));
        lo = Some(lo.map_or(x, |l| l.min(x)));
    }
    match (hi, lo) {
        (Some(h), Some(l)) => (h - l) as Ns,
        _ => 0,
    }
}

impl RunReport {
    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("reports serialise")
    }

    /// A readable summary table for terminals.
    pub fn summary_table(&self) -> String {
        use schedlab_core::fmt_ns;
        let s = &self.summary;
        let mut out = String::new();
        let real = self.source == "real";
        let traced = self.source == "trace";
        let mut row = |k: &str, v: String| out.push_str(&format!("  {k:<28} {v}\n"));
        let hz = if self.machine.hz == 0 { String::new() } else { format!(", HZ={}", self.machine.hz) };
        row("machine", format!("{} ({} CPUs{hz})", self.machine.name, self.machine.nr_cpus));
        row("policy", self.policy.clone());
        row("workload", self.workload.clone());
        row("seed", self.seed.to_string());
        row(
            match self.source {
                "real" => "real time",
                "trace" => "recorded time",
                _ => "simulated time",
            },
            format!("{} (stopped by {})", fmt_ns(self.duration_ns), self.stop_reason),
        );
        if let Some(t) = self.stalled_ns {
            row(
                "stalled",
                format!("from {}: every task left waits on another (a deadlock of the workload)", fmt_ns(t)),
            );
        }
        row("tasks", format!("{} created, {} exited", s.nr_tasks, s.nr_exited));
        if let Some(m) = s.makespan_ns {
            row("makespan", fmt_ns(m));
        }
        row("utilization", format!("{:.1} %", s.utilization * 100.0));
        row("work done", format!("{} ({:.3} CPUs' worth)", fmt_ns(s.work_ns), s.work_per_sec));
        row("context switches", format!("{} ({:.0}/s)", s.nr_switches, s.switches_per_sec));
        row("migrations", format!("{} ({:.0}/s)", s.nr_migrations, s.migrations_per_sec));
        row("wakeups", s.nr_wakeups.to_string());
        let l = &s.wakeup_latency;
        row(
            "wakeup latency",
            format!("p50 {}  p99 {}  max {}", fmt_ns(l.p50_ns), fmt_ns(l.p99_ns), fmt_ns(l.max_ns)),
        );
        if real {
            // The kernel does not expose these without tracing (docs/metrics.md, real runs).
            let wait: Ns = self.tasks.iter().map(|t| t.wait_ns).sum();
            row("waiting (runnable)", format!("{} in all (schedstat)", fmt_ns(wait)));
        } else if traced {
            let wait: Ns = self.tasks.iter().map(|t| t.wait_ns).sum();
            row("waiting (runnable)", format!("{} in all", fmt_ns(wait)));
            row("longest wait (runnable)", fmt_ns(s.max_wait_ns));
        } else {
            row("longest wait (runnable)", fmt_ns(s.max_wait_ns));
            row("scheduler decisions", format!("{} ({} tasks examined)", s.nr_decisions, s.nr_examined));
            row(
                "balancing",
                format!(
                    "{} chances (the policy's hook at busy ticks, before idling, for idle CPUs), {} migrations",
                    s.nr_balance_calls, s.nr_balance_migrations
                ),
            );
            row("overhead", format!("{} of CPU time", fmt_ns(s.overhead_ns)));
            row("energy", format!("{:.3} J", s.energy_uj as f64 / 1e6));
        }
        let f = &s.fairness;
        row(
            "fairness, nice-weighted",
            format!(
                "run time per unit of weight differs by up to {} between two of the {} tasks (seed 000 eq. 4); Jain index {:.4} (1 = equal, 1/n = one task takes all)",
                fmt_ns(f.unfairness_ns),
                f.nr_tasks,
                f.jain_index
            ),
        );
        for c in &self.counters {
            row(&format!("counter {}", c.name), format!("{} ({:.1}/s)", c.value, c.per_sec));
        }
        for p in &self.policy_stats {
            row(p.name, p.value.to_string());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_values_are_a_sorted_map_keeping_the_last_of_a_name() {
        let v = PolicyValues::new(vec![("vruntime", 5), ("avec_boosted", 1), ("vruntime", 7)]);
        assert_eq!(v.get("vruntime"), Some(&7));
        assert_eq!(v.get("avec_boosted"), Some(&1));
        assert_eq!(v.get("lag"), None);
        assert_eq!(serde_json::to_string(&v).unwrap(), r#"{"avec_boosted":1,"vruntime":7}"#);
    }

    #[test]
    fn series_thins_to_a_bound_keeping_aligned_samples() {
        let mut s = Series::new(10, 2);
        // Task 1 appears at sample 3, so its row is 3 shorter than task 0's.
        for k in 0..(MAX_SERIES_SAMPLES as u64 + 1 + MAX_SERIES_SAMPLES as u64 / 2) {
            let now = s.time_ns.last().map_or(0, |&t| t + s.interval_ns);
            let tasks = if k < 3 { vec![now] } else { vec![now, now + 1] };
            // The policy's values: task 0's score from the start and its prio from sample 5,
            // task 1's score from sample 3 (it has no prio).
            let t = now as i64;
            let mut policy = vec![vec![("score", t)]];
            if k >= 5 {
                policy[0].push(("prio", -t));
            }
            if k >= 3 {
                policy.push(vec![("score", t + 2)]);
            }
            s.record(now, [k as u32, 7].into_iter(), Some(tasks), Some(&policy), (k, 2 * k));
            assert!(s.time_ns.len() <= MAX_SERIES_SAMPLES);
        }
        // Thinned at 16,385 samples (to 8,193, interval 20) and again after 8,192 more (interval 40).
        assert_eq!(s.interval_ns, 40);
        let n = s.time_ns.len();
        assert_eq!(n, MAX_SERIES_SAMPLES / 2 + 1);
        // Thinning always finds evenly spaced samples, so they stay evenly spaced.
        assert!(s.time_ns.windows(2).all(|w| w[1] - w[0] == 40));
        // Every kept sample still pairs each value with its own time.
        for (i, &t) in s.time_ns.iter().enumerate() {
            let k = s.switches[i];
            assert_eq!(s.migrations[i], 2 * k);
            assert_eq!(s.nr_running[1][i], 7);
            let rows = s.task_run_ns.as_ref().unwrap();
            assert_eq!(rows[0][i], t);
            let late = &rows[1];
            if i >= n - late.len() {
                assert_eq!(late[i - (n - late.len())], t + 1);
            }
            // The policy's rows stay aligned to the end the same way.
            let policy = s.task_policy.as_ref().unwrap();
            let at = |name: &str, task: usize| {
                let row = &policy[name][task];
                (i >= n - row.len()).then(|| row[i - (n - row.len())])
            };
            assert_eq!(at("score", 0), Some(Some(t as i64)));
            assert_eq!(at("score", 1).flatten(), if i >= n - late.len() { Some(t as i64 + 2) } else { None });
            assert!(at("prio", 1).is_none_or(|v| v.is_none()), "task 1 has no prio: null");
            if let Some(Some(p)) = at("prio", 0) {
                assert_eq!(p, -(t as i64));
            }
        }
        assert_eq!(s.time_ns[0], 0);
        // prio was first seen at sample 5: its rows are shorter than score's.
        let policy = s.task_policy.as_ref().unwrap();
        assert!(policy["prio"][0].len() < policy["score"][0].len());
        assert_eq!(policy["score"][1].len(), late_len(&s));
    }

    fn late_len(s: &Series) -> usize {
        s.task_run_ns.as_ref().unwrap()[1].len()
    }

    #[test]
    fn series_with_many_sampled_tasks_keep_fewer_samples_within_the_value_bound() {
        let tasks = 100_000;
        let mut s = Series::new(10, 2);
        let cap = MAX_SERIES_VALUES / (3 + 2 + tasks);
        assert_eq!(cap, 335);
        for k in 0..(2 * cap as u64) {
            let now = k * 10;
            s.record(now, [1, 2].into_iter(), Some(vec![now; tasks]), None, (k, k));
            assert!(s.time_ns.len() <= cap, "{} samples at k = {k}", s.time_ns.len());
        }
        let rows = s.task_run_ns.as_ref().unwrap();
        let values = s.time_ns.len() * 3
            + s.nr_running.iter().map(Vec::len).sum::<usize>()
            + rows.iter().map(Vec::len).sum::<usize>();
        assert!(values <= MAX_SERIES_VALUES, "{values} values");
        assert!(s.interval_ns > 10, "it thinned");
        assert!(rows.iter().all(|r| r.len() == s.time_ns.len()));
    }
}
