//! Property-based tests: random machines and random workloads under every registered policy.
//!
//! Each case draws a machine (1 to 64 CPUs; random sockets, NUMA nodes, LLCs, cores per LLC and SMT
//! width, possibly uneven; tick rate; per-CPU speeds; cost, contention and frequency-scaling models)
//! and a workload built from groups of tasks that can always finish: independent tasks mixing
//! compute, spin, sleep, periodic timers, yield, I/O, counters and affinity changes (some exiting
//! early), pipe producer/consumer pairs, mutex users, barrier parties (sleeping or spinning),
//! semaphore pairs, condition-variable waiters with a handshake that makes every signal land, forking
//! parents waiting for their children, and suspend/resume pairs (whose resume may be lost, as in
//! rt-app). Tasks get random nice levels, scheduling classes, RT priorities, affinities, start
//! times, task groups and timed affinity changes.
//!
//! Checked for every case, against expectations computed from the generated workload alone:
//! * the run passes the engine's invariant checks after every event (as in the conformance suite);
//! * every task that can finish finishes: the run ends `all_done`, or, only when a resume was lost,
//!   the report says the run stalled and the tasks left are suspenders blocked on their event;
//! * each finished task did exactly the compute work and spin time its program asks for; the
//!   counter counts every `count` op; each pipe carried every byte sent;
//! * time is conserved: per task, run + wait + sleep = its life; per CPU, busy + idle + overhead =
//!   the run length; the tasks' run time is the CPUs' busy time; the summary is the sum of the rows;
//! * two runs with the same seed give byte-identical reports.
//!
//! The number of cases per policy is `PROPTEST_CASES` (default below). A failing case is shrunk and
//! its seed saved by proptest in `properties.proptest-regressions` beside this file (replayed first
//! by every later run); the shrunk case is also written out as a named test at the end of this file.

#[macro_use]
mod common;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use schedlab_core::topology::CpuPlace;
use schedlab_core::{SchedClass, Topology};
use schedlab_sim::{CostModel, Machine, RunConfig, RunReport, Sim};
use schedlab_workload::{ProgramBuilder as P, StopWhen, Workload, WorkloadBuilder};
use std::collections::BTreeMap;

/// Cases per policy when `PROPTEST_CASES` is not set.
const DEFAULT_CASES: u32 = 128;

/// Simulated time a case may take before it counts as stuck.
const CAP_NS: u64 = 120_000_000_000;

// ------------------------------------------------------------------------------------------------
// The generated description (plain data, so proptest can shrink and print it)
// ------------------------------------------------------------------------------------------------

/// A machine: cores per LLC for each LLC of each node of each socket.
#[derive(Clone, Debug)]
struct MachineCase {
    shape: Vec<Vec<Vec<u32>>>,
    threads: u32,
    hz: u32,
    /// Per-CPU speeds in permille, repeated over the CPUs; empty = all nominal.
    speeds: Vec<u32>,
    /// 0: no costs, 1: default costs, 2: default costs plus syscall time and timer slack.
    costs: u8,
    contention: bool,
    /// 0: fixed frequency; 1: ondemand; 2: powersave (with levels).
    dvfs: u8,
}

/// One op of an independent task.
#[derive(Clone, Debug)]
enum Simple {
    Compute(u64),
    Spin(u64),
    Sleep(u64),
    Timer(u64),
    TimerAbsolute(u64),
    Yield,
    Io(u64),
    Count,
    /// Raw CPU numbers, taken modulo the machine's CPU count; empty = all CPUs.
    SetCpus(Vec<u32>),
    /// `setpriority` on itself.
    Nice(i8),
}

/// A group of tasks that can always complete.
#[derive(Clone, Debug)]
enum Kind {
    Solo { instances: u32, body: Vec<Simple>, reps: u32, exit_early: bool },
    Pipe { msgs: u32, bytes: u32, slack: u32, work: u64 },
    Mutex { tasks: u32, rounds: u32, hold: u64, outside: u64, yield_inside: bool },
    Barrier { parties: u32, rounds: u32, work: u64, spin_ns: Option<u64> },
    Sem { n: u32, work: u64 },
    Cond { waiters: u32, broadcast: bool, work: u64 },
    Fork { children: u32, grandchildren: u32, body: Vec<Simple> },
    Crowd { instances: u32, work: u64, reps: u32 },
    Suspend { resumes: u32, gap: u64, work: u64 },
}

/// Scheduling attributes shared by a group's tasks.
#[derive(Clone, Debug)]
struct Attrs {
    nice: i8,
    /// 0..=3 normal, 4 batch, 5 idle, 6 iso, 7 fifo, 8 rr.
    class: u8,
    rt_priority: u8,
    /// Raw CPU numbers (modulo the CPU count); `None` = all.
    cpus: Option<Vec<u32>>,
    start_ns: u64,
    /// A task group of these shares under the root.
    shares: Option<u64>,
    /// An affinity change of the group's first template: when, and to which CPUs.
    affinity_change: Option<(u64, Option<Vec<u32>>)>,
}

#[derive(Clone, Debug)]
struct Group {
    kind: Kind,
    attrs: Attrs,
}

#[derive(Clone, Debug)]
struct Case {
    machine: MachineCase,
    groups: Vec<Group>,
    seed: u64,
}

// ------------------------------------------------------------------------------------------------
// Strategies
// ------------------------------------------------------------------------------------------------

fn machine_case() -> impl Strategy<Value = MachineCase> {
    let llc = 1u32..=8;
    let node = prop::collection::vec(llc, 1..=2);
    let socket = prop::collection::vec(node, 1..=2);
    (
        prop::collection::vec(socket, 1..=4),
        1u32..=2,
        prop::sample::select(vec![100u32, 250, 300, 1000]),
        prop_oneof![3 => Just(Vec::new()), 1 => prop::collection::vec(300u32..=1500, 1..=4)],
        0u8..=2,
        any::<bool>(),
        prop_oneof![3 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
    )
        .prop_map(|(shape, threads, hz, speeds, costs, contention, dvfs)| MachineCase {
            shape,
            threads,
            hz,
            speeds,
            costs,
            contention,
            dvfs,
        })
}

fn cpu_list() -> impl Strategy<Value = Vec<u32>> {
    prop::collection::vec(0u32..64, 1..=4)
}

fn simple() -> impl Strategy<Value = Simple> {
    prop_oneof![
        4 => (0u64..=3_000_000).prop_map(Simple::Compute),
        1 => (0u64..=1_000_000).prop_map(Simple::Spin),
        2 => (0u64..=2_000_000).prop_map(Simple::Sleep),
        1 => (100_000u64..=4_000_000).prop_map(Simple::Timer),
        1 => (100_000u64..=4_000_000).prop_map(Simple::TimerAbsolute),
        1 => Just(Simple::Yield),
        1 => (1u64..=500_000).prop_map(Simple::Io),
        1 => Just(Simple::Count),
        1 => prop_oneof![Just(Vec::new()), cpu_list()].prop_map(Simple::SetCpus),
        1 => (-20i8..=19).prop_map(Simple::Nice),
    ]
}

/// A body with at least one op that takes time, so no loop spins without using time.
fn body() -> impl Strategy<Value = Vec<Simple>> {
    (prop::collection::vec(simple(), 0..=4), 1u64..=2_000_000).prop_map(|(mut v, w)| {
        v.push(Simple::Compute(w));
        v
    })
}

fn kind() -> impl Strategy<Value = Kind> {
    let work = 1u64..=2_000_000;
    prop_oneof![
        4 => (1u32..=8, body(), 1u32..=10, prop::bool::weighted(0.2))
            .prop_map(|(instances, body, reps, exit_early)| Kind::Solo { instances, body, reps, exit_early }),
        2 => (1u32..=20, 1u32..=4096, 0u32..=3, work.clone())
            .prop_map(|(msgs, bytes, slack, work)| Kind::Pipe { msgs, bytes, slack, work }),
        2 => (2u32..=5, 1u32..=8, work.clone(), work.clone(), any::<bool>()).prop_map(
            |(tasks, rounds, hold, outside, yield_inside)| Kind::Mutex { tasks, rounds, hold, outside, yield_inside }
        ),
        2 => (2u32..=5, 1u32..=6, work.clone(), prop::option::of(1u64..=200_000))
            .prop_map(|(parties, rounds, work, spin_ns)| Kind::Barrier { parties, rounds, work, spin_ns }),
        1 => (1u32..=10, work.clone()).prop_map(|(n, work)| Kind::Sem { n, work }),
        1 => (1u32..=4, any::<bool>(), work.clone())
            .prop_map(|(waiters, broadcast, work)| Kind::Cond { waiters, broadcast, work }),
        2 => (1u32..=4, 0u32..=3, body())
            .prop_map(|(children, grandchildren, body)| Kind::Fork { children, grandchildren, body }),
        1 => (10u32..=120, 1u64..=500_000, 1u32..=5)
            .prop_map(|(instances, work, reps)| Kind::Crowd { instances, work, reps }),
        1 => (1u32..=5, 1u64..=3_000_000, work).prop_map(|(resumes, gap, work)| Kind::Suspend { resumes, gap, work }),
    ]
}

fn attrs() -> impl Strategy<Value = Attrs> {
    (
        -20i8..=19,
        0u8..=8,
        1u8..=99,
        prop::option::weighted(0.3, cpu_list()),
        prop_oneof![3 => Just(0u64), 1 => 0u64..=5_000_000],
        prop::option::weighted(0.2, prop::sample::select(vec![2u64, 100, 1024, 4096, 262_144])),
        prop::option::weighted(0.2, (0u64..=10_000_000, prop::option::of(cpu_list()))),
    )
        .prop_map(|(nice, class, rt_priority, cpus, start_ns, shares, affinity_change)| Attrs {
            nice,
            class,
            rt_priority,
            cpus,
            start_ns,
            shares,
            affinity_change,
        })
}

fn case() -> impl Strategy<Value = Case> {
    (
        machine_case(),
        prop::collection::vec((kind(), attrs()).prop_map(|(kind, attrs)| Group { kind, attrs }), 1..=8),
        any::<u64>(),
    )
        .prop_map(|(machine, groups, seed)| Case { machine, groups, seed })
}

// ------------------------------------------------------------------------------------------------
// Building the machine and the workload, and what to expect of them
// ------------------------------------------------------------------------------------------------

fn build_machine(mc: &MachineCase) -> Machine {
    let mut places = Vec::new();
    let (mut core, mut llc, mut node) = (0u32, 0u32, 0u32);
    'out: for (socket, nodes) in mc.shape.iter().enumerate() {
        for llcs in nodes {
            for &cores in llcs {
                for _ in 0..cores {
                    for _ in 0..mc.threads {
                        if places.len() == 64 {
                            break 'out;
                        }
                        places.push(CpuPlace { core, llc, node, socket: socket as u32 });
                    }
                    core += 1;
                }
                llc += 1;
            }
            node += 1;
        }
    }
    let n = places.len();
    let nodes = places.last().map_or(1, |p| p.node + 1);
    let mut m = Machine::flat(1);
    m.name = format!("prop{n}");
    m.topology = Topology::from_places(places).expect("generated topology nests");
    m.numa = nodes > 1;
    m.hz = mc.hz;
    m.speed_permille = if mc.speeds.is_empty() {
        vec![1000; n]
    } else {
        (0..n).map(|i| mc.speeds[i % mc.speeds.len()]).collect()
    };
    m.costs = match mc.costs {
        0 => CostModel {
            context_switch_ns: 0,
            sched_base_ns: 0,
            sched_per_task_ns: 0,
            wakeup_ipi_ns: 0,
            idle_exit_ns: 0,
            cold_speed_pct: 100,
            refill_smt_ns: 0,
            refill_llc_ns: 0,
            refill_node_ns: 0,
            refill_socket_ns: 0,
            refill_machine_ns: 0,
            evict_after_ns: 0,
            refill_evicted_ns: 0,
            timer_slack_ns: 0,
            syscall_ns: 0,
            ..CostModel::default()
        },
        1 => CostModel::default(),
        // A calibrated machine's: timer slack, system-call time and the per-kind kernel paths.
        _ => CostModel {
            syscall_ns: 700,
            timer_slack_ns: 50_000,
            sleep_ns: Some(4_500),
            yield_ns: Some(300),
            fork_ns: Some(10_000),
            pipe_wait_ns: Some(1_700),
            pipe_wake_ns: Some(1_300),
            mutex_wait_ns: Some(1_600),
            mutex_wake_ns: Some(1_500),
            cond_wait_ns: Some(2_200),
            cond_wake_ns: Some(1_700),
            futex_wait_ns: Some(1_800),
            futex_wake_ns: Some(1_500),
            timer_exit_ns: Some(9_000),
            tick_irq_ns: Some(2_000),
            ..CostModel::default()
        },
    };
    m.contention.enabled = mc.contention;
    if mc.dvfs > 0 {
        m.dvfs.levels_mhz = vec![1200, 1800, 2500];
        m.dvfs.levels_mv = vec![900, 1000, 1100];
        m.dvfs.governor =
            if mc.dvfs == 1 { schedlab_sim::Governor::Ondemand } else { schedlab_sim::Governor::Powersave };
    }
    m
}

/// What a template's every finished task must have done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Expect {
    work_ns: u64,
    /// `None` where barrier spinning adds an unknown amount of spin time.
    spin_ns: Option<u64>,
    /// A suspender: may be left blocked if its resume was lost.
    may_hang: bool,
}

/// The workload and, per template name, what its tasks must do; plus the counter's and pipes' totals.
struct Built {
    workload: Workload,
    expect: BTreeMap<String, Expect>,
    count: u64,
    pipe_bytes: BTreeMap<String, u64>,
}

fn cpus_of(raw: &[u32], n: u32) -> Vec<u32> {
    let mut v: Vec<u32> = raw.iter().map(|c| c % n).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Adds `body` to `p`, returning the program and the (work, spin, counts) of one pass.
fn add_simple(
    w: &mut WorkloadBuilder,
    mut p: P,
    body: &[Simple],
    dev: schedlab_workload::DeviceId,
    counter: schedlab_workload::CounterId,
    ncpus: u32,
) -> (P, u64, u64, u64) {
    let (mut work, mut spin, mut counts) = (0, 0, 0);
    for op in body {
        p = match op {
            Simple::Compute(n) => {
                work += n;
                p.compute(*n)
            }
            Simple::Spin(n) => {
                spin += n;
                p.spin(*n)
            }
            Simple::Sleep(n) => p.sleep(*n),
            Simple::Timer(n) => p.timer(*n),
            Simple::TimerAbsolute(n) => p.timer_absolute(*n),
            Simple::Yield => p.yield_now(),
            Simple::Io(n) => p.io(dev, *n),
            Simple::Count => {
                counts += 1;
                p.count(counter)
            }
            Simple::SetCpus(raw) => {
                let l = w.cpu_list(cpus_of(raw, ncpus));
                p.set_cpus(l)
            }
            Simple::Nice(n) => p.nice(*n),
        };
    }
    (p, work, spin, counts)
}

fn build_workload(case: &Case, ncpus: u32) -> Built {
    let mut w = WorkloadBuilder::new("prop");
    let dev = w.device("disk");
    let counter = w.counter("ops");
    let mut expect = BTreeMap::new();
    let mut count = 0u64;
    let mut pipe_bytes = BTreeMap::new();
    for (gi, g) in case.groups.iter().enumerate() {
        let first_template = w.next_template();
        // (template name, program, instances, expectation)
        let mut tasks: Vec<(String, schedlab_workload::Program, u32, Expect)> = Vec::new();
        let exact = |work, spin| Expect { work_ns: work, spin_ns: Some(spin), may_hang: false };
        match &g.kind {
            Kind::Solo { instances, body, reps, exit_early } => {
                let (b, work, spin, counts) = add_simple(&mut w, P::new(), body, dev, counter, ncpus);
                let ops = b.build().ops;
                if *exit_early {
                    // One pass, exit, then work that must never run.
                    let p = ops.iter().fold(P::new(), |x, op| x.op(*op)).exit().compute(1_000_000).build();
                    count += counts * *instances as u64;
                    tasks.push((format!("g{gi}solo"), p, *instances, exact(work, spin)));
                } else {
                    let p = P::new().repeat(*reps, |x| ops.iter().fold(x, |x, op| x.op(*op))).build();
                    let reps = *reps as u64;
                    count += counts * reps * *instances as u64;
                    tasks.push((format!("g{gi}solo"), p, *instances, exact(work * reps, spin * reps)));
                }
            }
            Kind::Pipe { msgs, bytes, slack, work } => {
                let pipe = w.pipe(format!("g{gi}pipe"), bytes * (1 + slack));
                pipe_bytes.insert(format!("g{gi}pipe"), *msgs as u64 * *bytes as u64);
                let prod = P::new().repeat(*msgs, |x| x.compute(*work).send(pipe, *bytes)).build();
                let cons = P::new().repeat(*msgs, |x| x.recv(pipe, *bytes).compute(*work)).build();
                tasks.push((format!("g{gi}prod"), prod, 1, exact(work * *msgs as u64, 0)));
                tasks.push((format!("g{gi}cons"), cons, 1, exact(work * *msgs as u64, 0)));
            }
            Kind::Mutex { tasks: n, rounds, hold, outside, yield_inside } => {
                let m = w.mutex(format!("g{gi}m"));
                let p = P::new()
                    .repeat(*rounds, |x| {
                        let x = x.lock(m).compute(*hold);
                        let x = if *yield_inside { x.yield_now() } else { x };
                        x.unlock(m).compute(*outside)
                    })
                    .build();
                tasks.push((format!("g{gi}locker"), p, *n, exact((hold + outside) * *rounds as u64, 0)));
            }
            Kind::Barrier { parties, rounds, work, spin_ns } => {
                let b = w.barrier(format!("g{gi}b"), *parties);
                let p = P::new()
                    .repeat(*rounds, |x| {
                        let x = x.compute(*work);
                        match spin_ns {
                            Some(s) => x.barrier_spin(b, *s),
                            None => x.barrier(b),
                        }
                    })
                    .build();
                let e = Expect {
                    work_ns: work * *rounds as u64,
                    spin_ns: if spin_ns.is_some() { None } else { Some(0) },
                    may_hang: false,
                };
                tasks.push((format!("g{gi}party"), p, *parties, e));
            }
            Kind::Sem { n, work } => {
                let s = w.semaphore(format!("g{gi}s"), 0);
                let post = P::new().repeat(*n, |x| x.compute(*work).sem_post(s)).build();
                let wait = P::new().repeat(*n, |x| x.sem_wait(s).compute(*work)).build();
                tasks.push((format!("g{gi}post"), post, 1, exact(work * *n as u64, 0)));
                tasks.push((format!("g{gi}wait"), wait, 1, exact(work * *n as u64, 0)));
            }
            Kind::Cond { waiters, broadcast, work } => {
                // Each waiter announces itself on a semaphore while holding the mutex, so the
                // signaller can only take the mutex once the waiter is waiting: no signal is lost.
                let m = w.mutex(format!("g{gi}m"));
                let c = w.cond(format!("g{gi}c"));
                let s = w.semaphore(format!("g{gi}s"), 0);
                let waiter = P::new()
                    .compute(*work)
                    .lock(m)
                    .sem_post(s)
                    .cond_wait(c, m)
                    .unlock(m)
                    .compute(*work)
                    .build();
                let signaller = if *broadcast {
                    P::new()
                        .repeat(*waiters, |x| x.sem_wait(s))
                        .lock(m)
                        .broadcast(c)
                        .unlock(m)
                        .compute(*work)
                        .build()
                } else {
                    P::new()
                        .repeat(*waiters, |x| x.sem_wait(s).lock(m).signal(c).unlock(m))
                        .compute(*work)
                        .build()
                };
                tasks.push((format!("g{gi}cwait"), waiter, *waiters, exact(2 * work, 0)));
                tasks.push((format!("g{gi}csig"), signaller, 1, exact(*work, 0)));
            }
            Kind::Fork { children, grandchildren, body } => {
                // parent -> children -> grandchildren, each waiting for its own.
                let (child_t, grandchild_t) = (first_template + 1, first_template + 2);
                let forks = |n: u32, t: u32| (0..n).fold(P::new(), |x, _| x.fork(t));
                let parent = forks(*children, child_t).wait_children().compute(100_000).build();
                let (b, work, spin, counts) =
                    add_simple(&mut w, forks(*grandchildren, grandchild_t), body, dev, counter, ncpus);
                let child = b.wait_children().build();
                count += counts * *children as u64;
                tasks.push((format!("g{gi}parent"), parent, 1, exact(100_000, 0)));
                tasks.push((format!("g{gi}child"), child, 0, exact(work, spin)));
                tasks.push((
                    format!("g{gi}grandchild"),
                    P::new().compute(50_000).exit().compute(1).build(),
                    0,
                    exact(50_000, 0),
                ));
            }
            Kind::Crowd { instances, work, reps } => {
                let p = P::new().repeat(*reps, |x| x.compute(*work).yield_now()).build();
                tasks.push((format!("g{gi}crowd"), p, *instances, exact(work * *reps as u64, 0)));
            }
            Kind::Suspend { resumes, gap, work } => {
                let e = w.event(format!("g{gi}e"));
                let susp = P::new().compute(*work).suspend(e).compute(*work).build();
                let res = P::new().repeat(*resumes, |x| x.sleep(*gap).resume(e)).build();
                tasks.push((
                    format!("g{gi}susp"),
                    susp,
                    1,
                    Expect { work_ns: 2 * work, spin_ns: Some(0), may_hang: true },
                ));
                tasks.push((format!("g{gi}res"), res, 1, exact(0, 0)));
            }
        }
        continue_group(&mut w, g, &mut tasks, first_template, ncpus, &mut expect);
    }
    w.stop(StopWhen::AllDone);
    let workload = w.build().unwrap_or_else(|e| panic!("generated workload is invalid: {e}"));
    Built { workload, expect, count, pipe_bytes }
}

/// Adds a group's templates with its attributes.
fn continue_group(
    w: &mut WorkloadBuilder,
    g: &Group,
    tasks: &mut Vec<(String, schedlab_workload::Program, u32, Expect)>,
    first_template: u32,
    ncpus: u32,
    expect: &mut BTreeMap<String, Expect>,
) {
    let a = &g.attrs;
    let group = a.shares.map(|s| w.group(format!("cg{first_template}"), 0, s));
    for (name, program, instances, e) in tasks.drain(..) {
        let t = w.task(name.clone(), program);
        t.instances = instances;
        t.nice = a.nice;
        t.class = match a.class {
            4 => SchedClass::Batch,
            5 => SchedClass::Idle,
            6 => SchedClass::Iso,
            7 => SchedClass::Fifo,
            8 => SchedClass::Rr,
            _ => SchedClass::Normal,
        };
        t.rt_priority = if matches!(t.class, SchedClass::Fifo | SchedClass::Rr) { a.rt_priority } else { 0 };
        t.cpus = a.cpus.as_ref().map(|raw| cpus_of(raw, ncpus));
        t.start_ns = a.start_ns;
        if let Some(gr) = group {
            t.group = gr;
        }
        expect.insert(name, e);
    }
    if let Some((at_ns, cpus)) = &a.affinity_change {
        w.affinity_change(first_template, *at_ns, cpus.as_ref().map(|raw| cpus_of(raw, ncpus)));
    }
}

// ------------------------------------------------------------------------------------------------
// The checks
// ------------------------------------------------------------------------------------------------

fn run(spec: &str, m: &Machine, w: &Workload, seed: u64) -> Result<RunReport, String> {
    let mut p = schedlab_policies::create(spec).map_err(|e| e.to_string())?;
    let cfg = RunConfig { duration_ns: CAP_NS, seed, check_invariants: true, ..RunConfig::default() };
    let sim = Sim::new(m, w, p.as_mut(), spec, cfg).map_err(|e| format!("setup: {e}"))?;
    sim.run().map_err(|e| format!("run: {e}"))
}

/// Runs one case under `spec` and checks everything; an `Err` says what broke.
fn check_case(spec: &str, case: &Case) -> Result<(), String> {
    let m = build_machine(&case.machine);
    let built = build_workload(case, m.topology.nr_cpus() as u32);
    check_built(spec, &m, &built, case.seed)
}

/// Runs a built workload under `spec` and checks it against its expectations.
fn check_built(spec: &str, m: &Machine, built: &Built, seed: u64) -> Result<(), String> {
    let r = run(spec, m, &built.workload, seed)?;
    if std::env::var("SCHEDLAB_PROP_LOG").is_ok() {
        eprintln!(
            "{spec} cpus={} tasks={} events={} stop={} dur={}",
            r.cpus.len(),
            r.tasks.len(),
            r.summary.nr_events,
            r.stop_reason,
            r.duration_ns
        );
    }

    // Every task that can finish finishes.
    if r.stop_reason != "all_done" {
        // Only a stall can keep these workloads from finishing, and the report must say so.
        if r.stalled_ns.is_none() {
            return Err(format!(
                "stopped by {} without finishing, and not reported as stalled",
                r.stop_reason
            ));
        }
        for t in r.tasks.iter().filter(|t| t.exited_ns.is_none()) {
            let e = built.expect.get(&t.template).ok_or(format!("task {} of unknown template", t.name))?;
            if !e.may_hang || t.state != schedlab_core::TaskState::Blocked {
                return Err(format!(
                    "stopped by {} with task {} ({:?}) unfinished: lost wakeup or deadlock",
                    r.stop_reason, t.name, t.state
                ));
            }
        }
    }
    if r.summary.nr_tasks != r.tasks.len() as u64 {
        return Err(format!("summary counts {} tasks, {} rows", r.summary.nr_tasks, r.tasks.len()));
    }
    let exited = r.tasks.iter().filter(|t| t.exited_ns.is_some()).count() as u64;
    if r.summary.nr_exited != exited {
        return Err(format!("summary counts {} exits, rows {exited}", r.summary.nr_exited));
    }

    // Work and spin exactly as the programs ask, for every finished task.
    for t in r.tasks.iter().filter(|t| t.exited_ns.is_some()) {
        let e = built.expect.get(&t.template).ok_or(format!("task {} of unknown template", t.name))?;
        if t.work_ns != e.work_ns {
            return Err(format!(
                "task {}: work {} ns, its program asks for {}",
                t.name, t.work_ns, e.work_ns
            ));
        }
        if let Some(s) = e.spin_ns {
            if t.spin_ns != s {
                return Err(format!("task {}: spin {} ns, its program asks for {s}", t.name, t.spin_ns));
            }
        }
    }
    let counted = r.counters.iter().find(|c| c.name == "ops").map_or(0, |c| c.value);
    if r.stop_reason == "all_done" && counted != built.count {
        return Err(format!("counter `ops` = {counted}, the programs count {}", built.count));
    }
    for (name, bytes) in &built.pipe_bytes {
        let got = r.pipes.iter().find(|p| &p.name == name).map_or(0, |p| p.bytes);
        if got != *bytes {
            return Err(format!("pipe {name} carried {got} bytes, {bytes} were sent"));
        }
    }

    // Time is conserved.
    let end = r.duration_ns;
    for t in &r.tasks {
        let Some(start) = t.started_ns else { continue };
        let life = t.exited_ns.unwrap_or(end) - start;
        if t.run_ns + t.wait_ns + t.sleep_ns != life {
            return Err(format!(
                "task {}: run {} + wait {} + sleep {} != life {life}",
                t.name, t.run_ns, t.wait_ns, t.sleep_ns
            ));
        }
    }
    for c in &r.cpus {
        if c.busy_ns + c.idle_ns + c.overhead_ns != end {
            return Err(format!(
                "CPU {}: busy {} + idle {} + overhead {} != run length {end}",
                c.id, c.busy_ns, c.idle_ns, c.overhead_ns
            ));
        }
    }
    let task_run: u64 = r.tasks.iter().map(|t| t.run_ns).sum();
    let cpu_busy: u64 = r.cpus.iter().map(|c| c.busy_ns).sum();
    if task_run != cpu_busy {
        return Err(format!("tasks ran {task_run} ns, CPUs were busy {cpu_busy} ns"));
    }
    let sums = (
        r.cpus.iter().map(|c| c.idle_ns).sum::<u64>(),
        r.cpus.iter().map(|c| c.overhead_ns).sum::<u64>(),
        r.tasks.iter().map(|t| t.work_ns).sum::<u64>(),
    );
    if (r.summary.busy_ns, r.summary.idle_ns, r.summary.overhead_ns, r.summary.work_ns)
        != (cpu_busy, sums.0, sums.1, sums.2)
    {
        return Err("summary busy/idle/overhead/work are not the sums of the rows".into());
    }

    // Deterministic for a seed.
    let again = run(spec, m, &built.workload, seed)?;
    if again.to_json() != r.to_json() {
        return Err("two runs with the same seed differ".into());
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(DEFAULT_CASES)
}

fn check_policy(spec: &str) {
    let config = Config {
        cases: cases(),
        // Integration tests run in the package's directory.
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Direct(
            "tests/properties.proptest-regressions",
        ))),
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let result = runner
        .run(&case(), |c| check_case(spec, &c).map_err(|e| TestCaseError::fail(format!("{spec}: {e}"))));
    if let Err(e) = result {
        panic!("{e}");
    }
}

every_policy!(check_policy);

fn small_case(kind: Kind) -> Case {
    Case {
        machine: MachineCase {
            shape: vec![vec![vec![2]]],
            threads: 1,
            hz: 1000,
            speeds: vec![],
            costs: 1,
            contention: false,
            dvfs: 0,
        },
        groups: vec![Group {
            kind,
            attrs: Attrs {
                nice: 0,
                class: 0,
                rt_priority: 1,
                cpus: None,
                start_ns: 0,
                shares: None,
                affinity_change: None,
            },
        }],
        seed: 1,
    }
}

/// The checks catch a wrong answer: expectations off by one nanosecond of work, one count or one
/// byte fail, and a workload that deadlocks by its own design is reported as unfinished.
#[test]
fn the_checks_catch_wrong_answers() {
    let m = build_machine(&small_case(Kind::Sem { n: 1, work: 1 }).machine);
    let solo = small_case(Kind::Solo {
        instances: 2,
        body: vec![Simple::Compute(1_000_000), Simple::Count],
        reps: 3,
        exit_early: false,
    });
    let built = build_workload(&solo, 2);
    assert_eq!(check_built("cfs", &m, &built, 1), Ok(()));
    let mut wrong = build_workload(&solo, 2);
    wrong.expect.get_mut("g0solo").unwrap().work_ns += 1;
    let err = check_built("cfs", &m, &wrong, 1).unwrap_err();
    assert!(err.contains("work 3000000 ns, its program asks for 3000001"), "{err}");
    let mut wrong = build_workload(&solo, 2);
    wrong.count += 1;
    let err = check_built("cfs", &m, &wrong, 1).unwrap_err();
    assert!(err.contains("counter `ops` = 6, the programs count 7"), "{err}");

    let pipe = small_case(Kind::Pipe { msgs: 3, bytes: 10, slack: 0, work: 1000 });
    let mut wrong = build_workload(&pipe, 2);
    *wrong.pipe_bytes.get_mut("g0pipe").unwrap() += 1;
    let err = check_built("cfs", &m, &wrong, 1).unwrap_err();
    assert!(err.contains("pipe g0pipe carried 30 bytes, 31 were sent"), "{err}");

    // A waiter on a semaphore nobody posts: the workload's own deadlock, reported, not hidden.
    let mut w = WorkloadBuilder::new("stuck");
    let s = w.semaphore("s", 0);
    w.task("stuck", P::new().compute(1000).sem_wait(s).build());
    w.stop(StopWhen::AllDone);
    let stuck = Built {
        workload: w.build().unwrap(),
        expect: [("stuck".to_string(), Expect { work_ns: 1000, spin_ns: Some(0), may_hang: false })].into(),
        count: 0,
        pipe_bytes: BTreeMap::new(),
    };
    let err = check_built("cfs", &m, &stuck, 1).unwrap_err();
    assert!(err.contains("with task stuck (Blocked) unfinished"), "{err}");
}

// ------------------------------------------------------------------------------------------------
// Shrunk failing cases found by the properties above, kept as named tests
// ------------------------------------------------------------------------------------------------

fn attrs0() -> Attrs {
    Attrs { nice: 0, class: 0, rt_priority: 1, cpus: None, start_ns: 0, shares: None, affinity_change: None }
}

/// CFS group scheduling: a task pinned to one CPU inside a task group, unpinned later, next to a
/// barrier pair. Found by `cfs` above: periodic balancing asked to move a task from a CPU it had
/// already left.
#[test]
fn regression_cfs_group_task_unpinned() {
    let case = Case {
        machine: MachineCase {
            shape: vec![vec![vec![2, 3]]],
            threads: 1,
            hz: 1000,
            speeds: vec![],
            costs: 0,
            contention: false,
            dvfs: 1,
        },
        groups: vec![
            Group {
                kind: Kind::Cond { waiters: 1, broadcast: false, work: 1_440_001 },
                attrs: Attrs {
                    cpus: Some(vec![2]),
                    shares: Some(2),
                    affinity_change: Some((5_000_001, None)),
                    ..attrs0()
                },
            },
            Group {
                kind: Kind::Barrier { parties: 2, rounds: 2, work: 1_046_351, spin_ns: None },
                attrs: Attrs { start_ns: 1_640_203, ..attrs0() },
            },
        ],
        seed: 0,
    };
    for spec in ["cfs", "avec"] {
        assert_eq!(check_case(spec, &case), Ok(()), "{spec}");
    }
}
