//! The O(1) scheduler and RSDL (on O(1)'s run queues) in whole runs on two CPUs, where 2.6.22's
//! placement starts every task on one CPU (no fork balancing below NUMA) and the balancer spreads
//! them.

use schedlab_core::{NSEC_PER_MSEC, NSEC_PER_SEC};
use schedlab_sim::{Machine, RunConfig, RunReport, Sim};
use schedlab_workload::{ProgramBuilder as P, WorkloadBuilder};

const MS: u64 = NSEC_PER_MSEC;

/// Six tasks at nice -3, 0 and 3 (two each), each wanting 2 ms of every 3 ms, on two CPUs.
fn six_on_two(policy: &str) -> RunReport {
    let mut w = WorkloadBuilder::new("six");
    for i in 0..6 {
        let t = w.task(format!("t{i}"), P::new().forever(|x| x.compute(2 * MS).sleep(MS)).build());
        t.nice = (i % 3) as i8 * 3 - 3;
    }
    let w = w.build().unwrap();
    let mut p = schedlab_policies::create(policy).unwrap();
    let cfg = RunConfig { duration_ns: 2 * NSEC_PER_SEC, check_invariants: true, ..RunConfig::default() };
    Sim::new(&Machine::preset("athlon2-x2").unwrap(), &w, p.as_mut(), "test", cfg).unwrap().run().unwrap()
}

/// The machine is overloaded (four CPUs' worth of demand on two): both CPUs stay busy, and every
/// task, the nice-3 ones included, runs within a second of becoming runnable. The tasks start on
/// one CPU; the idle CPU pulls from it and the periodic balancer keeps pulling.
#[test]
fn an_overloaded_pair_of_cpus_stays_busy_and_runs_every_task() {
    for policy in ["o1", "rsdl"] {
        let r = six_on_two(policy);
        let idle = r.summary.idle_ns;
        assert!(idle * 100 <= 2 * 2 * NSEC_PER_SEC * 5, "{policy}: idle {idle} ns of 4 s");
        for t in &r.tasks {
            assert!(t.run_ns > 0, "{policy}: {} never ran", t.name);
            assert!(t.max_wait_ns < NSEC_PER_SEC, "{policy}: {} waited {} ns", t.name, t.max_wait_ns);
        }
        assert!(r.tasks.iter().any(|t| t.nr_migrations > 0), "{policy}: nothing was balanced");
    }
}
