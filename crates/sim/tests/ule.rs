//! ULE against CFS on the experiments of seed 002 (Bouron et al., "The Battle of the Schedulers"):
//! starvation of a batch thread by interactive ones on one CPU (sec. 5.1), the fork inheritance behind
//! sysbench's starved late threads (sec. 5.2), and how 512 spinners pinned on CPU 0 spread once
//! unpinned (sec. 6.1). The expectations are the mechanisms' consequences, computed from their
//! constants, not recorded outputs.

use schedlab_core::NSEC_PER_MSEC;
use schedlab_sim::{Machine, RunConfig, RunReport, Sim};
use schedlab_workload::generators::builtin;
use schedlab_workload::{ProgramBuilder as P, Workload, WorkloadBuilder};

const MS: u64 = NSEC_PER_MSEC;
const S: u64 = 1000 * MS;

fn run(machine: &Machine, w: &Workload, spec: &str, duration_ns: u64, sample_ns: u64) -> RunReport {
    let mut p = schedlab_policies::create(spec).unwrap();
    let cfg = RunConfig { duration_ns, sample_interval_ns: sample_ns, ..RunConfig::default() };
    Sim::new(machine, w, p.as_mut(), "test", cfg).unwrap().run().unwrap()
}

fn stat(r: &RunReport, name: &str) -> u64 {
    r.policy_stats.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no stat {name}")).value
}

/// fibo alone for 2 s, then 80 request threads (sysbench-like, about 1.2 CPUs of demand) join it on
/// one CPU until 12 s. Each application is in its own cgroup, as systemd places them (seed 002 sec.
/// 2.1), so CFS shares the CPU between the two applications. Returns fibo's share of the CPU while the
/// requests flow.
fn fibo_share_with_requests(spec: &str) -> f64 {
    let app = |w: &mut Workload, name: &str| {
        w.groups.push(schedlab_workload::GroupSpec { name: name.into(), parent: 0, shares: 1024 });
        let g = w.groups.len() as u32 - 1;
        for t in &mut w.tasks {
            t.group = g;
        }
    };
    let mut w = builtin("fibo").unwrap().unwrap();
    app(&mut w, "fibo");
    let mut req =
        builtin("sysbench-oltp[threads=80,think=20ms,query=300us,query_stddev=100us]").unwrap().unwrap();
    app(&mut req, "sysbench");
    for t in &mut req.tasks {
        t.start_ns = 2 * S;
    }
    w.merge(&req, "sysbench");
    let r = run(&Machine::preset("up").unwrap(), &w, spec, 12 * S, 0);
    let fibo = r.tasks.iter().find(|t| t.name.starts_with("fibo")).unwrap();
    (fibo.run_ns.saturating_sub(2 * S)) as f64 / (10 * S) as f64
}

#[test]
fn interactive_request_threads_starve_a_batch_thread_under_ule_not_under_cfs() {
    let ule = fibo_share_with_requests("ule");
    let cfs = fibo_share_with_requests("cfs");
    // ULE: the request threads sleep far more than they run (score ~1, interactive) and fill the CPU,
    // so fibo (score 50, batch) only runs in the gaps when no request is queued.
    assert!(ule < 0.05, "ULE: fibo got {ule:.3} of the CPU");
    // CFS: the two applications' groups have equal shares, so fibo keeps about half.
    assert!((0.35..0.65).contains(&cfs), "CFS: fibo got {cfs:.3} of the CPU");
}

#[test]
fn spinners_unpinned_from_cpu0_spread_one_per_invocation_under_ule_fast_under_cfs() {
    let m = Machine::preset("opteron6172-32").unwrap();
    let w = builtin("pinned-spinners[threads=512,unpin_at=1s]").unwrap().unwrap();
    let horizon = 11 * S;
    let sample = 10 * MS;
    let ule = run(&m, &w, "ule", horizon, sample);
    let s = ule.series.as_ref().unwrap();
    let at = |t: u64| s.time_ns.iter().position(|&x| x >= t).unwrap();
    // Just after unpinning, every idle CPU has stolen exactly one thread from CPU 0.
    let i = at(S + 20 * MS);
    assert_eq!(s.nr_running[0][i], 512 - 31, "CPU 0 keeps 481");
    assert!((1..32).all(|c| s.nr_running[c][i] == 1), "one thread on every other CPU");
    // The balancer on CPU 0 runs every 0.5-1.5 s; CPU 0 can be a donor once per pass, so it loses at
    // most one thread per pass and is far from balanced 10 s later (512 / 32 = 16 each).
    let runs = stat(&ule, "nr_balance_runs");
    let last = s.time_ns.len() - 1;
    assert!((7..=22).contains(&runs), "{runs} balancer passes in 11 s");
    assert!(stat(&ule, "nr_balance_moved") <= runs * 16, "one move per CPU pair per pass");
    assert!(s.nr_running[0][last] as u64 >= 481 - runs, "CPU 0 gave at most one thread per pass");
    assert!(s.nr_running[0][last] > 400, "CPU 0 still has {} threads", s.nr_running[0][last]);
    // CFS spreads most of them within half a second.
    let cfs = run(&m, &w, "cfs", 2 * S, sample);
    let c = cfs.series.as_ref().unwrap();
    let j = c.time_ns.iter().position(|&x| x >= S + 500 * MS).unwrap();
    assert!(c.nr_running[0][j] < 100, "CFS left {} on CPU 0 after 0.5 s", c.nr_running[0][j]);
}

#[test]
fn threads_forked_late_by_a_busy_master_start_as_batch_and_starve() {
    // A master computes 10 ms between forks, then releases the workers together; each child inherits
    // the master's history. The master starts from an idle shell's history (0.5 s asleep) and its
    // score passes 30 after about 17 forks (unit test `a_busy_master_forks_interactive_then_batch_
    // children`): later children are batch. Each worker wants 1 ms per 11 ms, so about 11 interactive
    // ones fill the CPU; they run ahead of everything batch, and the late children starve.
    let mut w = WorkloadBuilder::new("master");
    let start = w.barrier("start", 65);
    let child = w.next_template() + 1;
    w.task(
        "master",
        P::new().repeat(64, |x| x.compute(10 * MS).fork(child)).barrier(start).wait_children().build(),
    );
    let t = w.task("worker", P::new().barrier(start).forever(|x| x.sleep(10 * MS).compute(MS)).build());
    t.instances = 0;
    let w = w.build().unwrap();
    let r = run(&Machine::preset("up").unwrap(), &w, "ule", 10 * S, 0);
    let mut workers: Vec<_> = r.tasks.iter().filter(|t| t.template == "worker").collect();
    workers.sort_by_key(|t| t.id);
    assert_eq!(workers.len(), 64);
    let early: u64 = workers[..16].iter().map(|t| t.run_ns).sum::<u64>() / 16;
    let late: u64 = workers[48..].iter().map(|t| t.run_ns).sum::<u64>() / 16;
    assert!(late * 4 < early, "early children ran {early} ns each, late ones {late} ns");
    let starved = workers.iter().filter(|t| t.run_ns < 10 * MS).count();
    assert!(starved >= 40, "{starved} of 64 workers ran less than 10 ms in 10 s");
}

#[test]
fn batch_threads_all_progress_through_the_calendar_queue() {
    // Three CPU hogs on one CPU at nice 0, 10 and 19: all batch. The calendar queue inserts worse
    // priorities further from the removal index, so each runs, the nicer ones less often.
    let mut w = WorkloadBuilder::new("nice");
    for (name, nice) in [("n0", 0), ("n10", 10), ("n19", 19)] {
        w.task(name, P::new().forever(|x| x.compute(10 * MS)).build()).nice = nice;
    }
    let r = run(&Machine::preset("up").unwrap(), &w.build().unwrap(), "ule", 20 * S, 0);
    let get = |n: &str| r.tasks.iter().find(|t| t.name == n).unwrap().run_ns;
    let (a, b, c) = (get("n0"), get("n10"), get("n19"));
    assert!(a > b && b > c, "nicer runs less: {a} {b} {c}");
    assert!(c > S / 2, "nice 19 still gets {c} ns of 20 s: no starvation among batch threads");
}
