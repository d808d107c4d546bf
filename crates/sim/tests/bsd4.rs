//! FreeBSD 4BSD's decay-usage behaviour in whole runs: nice levels shift CPU shares only as far as
//! the decayed usage lets them (no starvation, unlike strict priorities, and far less than CFS's
//! weights), and a thread that sleeps most of the time wakes with a better priority than CPU hogs
//! and preempts them at once. The bounds are derived in each test from the formulas of
//! sched_4bsd.c, not recorded outputs.

use schedlab_core::NSEC_PER_MSEC;
use schedlab_sim::{Machine, RunConfig, RunReport, Sim};
use schedlab_workload::{ProgramBuilder as P, Workload, WorkloadBuilder};

const MS: u64 = NSEC_PER_MSEC;
const S: u64 = 1000 * MS;

/// Two CPU hogs at nice 0 and 5 and a thread sleeping 10 ms between 1 ms bursts, on one CPU.
fn hogs_and_sleeper() -> Workload {
    let mut w = WorkloadBuilder::new("hogs-and-sleeper");
    w.task("n0", P::new().forever(|x| x.compute(5 * MS)).build());
    w.task("n5", P::new().forever(|x| x.compute(5 * MS)).build()).nice = 5;
    w.task("sleeper", P::new().forever(|x| x.sleep(10 * MS).compute(MS)).build());
    w.build().unwrap()
}

fn run(spec: &str, duration_ns: u64) -> RunReport {
    let mut p = schedlab_policies::create(spec).unwrap();
    let cfg = RunConfig { duration_ns, check_invariants: true, ..RunConfig::default() };
    Sim::new(&Machine::preset("up").unwrap(), &hogs_and_sleeper(), p.as_mut(), "test", cfg)
        .unwrap()
        .run()
        .unwrap()
}

fn share(r: &RunReport, name: &str, duration_ns: u64) -> f64 {
    r.tasks.iter().find(|t| t.name == name).unwrap().run_ns as f64 / duration_ns as f64
}

#[test]
fn nice_shifts_the_shares_of_hogs_only_by_the_decayed_usage() {
    // With the load average near 2, schedcpu keeps about 4 to 5 seconds' worth of charge:
    // estcpu ~ 4.5 x 127 x share. The nice-5 hog runs once its priority, 120 + estcpu / 8 + 25, is
    // no worse than the other's, 120 + estcpu / 8 + 20, give or take the 4 priorities of a run-queue
    // list: estcpu(n0) - estcpu(n5) = 40 +- 32, so share(n0) - share(n5) = 40 / 571 +- 32 / 571,
    // about 0.01 to 0.13 of the CPU. CFS's weights (1024 : 335) would give the hogs 0.75 : 0.25 of
    // theirs, a difference of about 0.45 of the CPU here.
    let d = 300 * S;
    let r = run("4bsd", d);
    let (n0, n5) = (share(&r, "n0", d), share(&r, "n5", d));
    assert!(n0 > n5, "nice 0 runs more: {n0:.3} vs {n5:.3}");
    assert!(n0 - n5 > 0.01 && n0 - n5 < 0.13, "difference {:.3} outside the decay-usage band", n0 - n5);
    let cfs = run("cfs", d);
    let diff_cfs = share(&cfs, "n0", d) - share(&cfs, "n5", d);
    assert!(diff_cfs > 0.35, "CFS's weights separate them far more: {diff_cfs:.3}");
}

#[test]
fn a_sleeper_wakes_with_a_better_priority_and_preempts_the_hogs() {
    // The sleeper uses 1 ms in 11: estcpu ~ 4.5 x 127 x 0.09 ~ 52, priority ~ 146, while each hog
    // sits near 120 + 4.5 x 127 x 0.45 / 8 + 20 ~ 172: every wakeup reschedules the CPU at once
    // (maybe_resched), so the sleeper waits a context switch, not the hog's 94.5 ms slice. Only the
    // first second, before any estcpu has built up and all three share priority 140, makes it wait
    // for slices.
    let d = 60 * S;
    let r = run("4bsd", d);
    let s = r.tasks.iter().find(|t| t.name == "sleeper").unwrap();
    let per_wakeup_us = s.wait_ns as f64 / s.nr_wakeups as f64 / 1e3;
    assert!(per_wakeup_us < 200.0, "mean wait per wakeup {per_wakeup_us:.1} us");
    let resched = r.policy_stats.iter().find(|x| x.name == "nr_wakeup_resched").unwrap().value;
    assert!(resched as f64 > 0.95 * s.nr_wakeups as f64, "{resched} of {} wakeups preempted", s.nr_wakeups);
}
