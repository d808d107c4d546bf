//! The example policy passes the project's conformance suite, is created by spec once registered,
//! and divides the CPU by tickets within the statistics of a lottery.

use schedlab_core::weights::nice_to_weight;
use schedlab_core::NSEC_PER_MSEC;
use schedlab_example_lottery::{register, Lottery, LotteryParams};
use schedlab_sim::{Machine, RunConfig, Sim};
use schedlab_workload::{ProgramBuilder as P, WorkloadBuilder};

#[test]
fn it_passes_the_conformance_suite() {
    schedlab_sim::conformance::check(&|| Box::new(Lottery::new(LotteryParams::default())), "lottery")
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn once_registered_the_spec_works_everywhere_specs_are_read() {
    register();
    register(); // twice is harmless
    let p = schedlab_policies::create("lottery[quantum_ns=5000000]").unwrap();
    assert_eq!(p.name(), "lottery");
    assert!(schedlab_policies::policies().iter().any(|i| i.name == "lottery"));
    let e = schedlab_policies::create("lottery[quantum_ns=1]").err().unwrap().to_string();
    assert!(e.contains("lottery") && e.contains("quantum_ns=1"), "{e}");
}

#[test]
fn cpu_time_follows_the_tickets() {
    // Nice 0 (1,024 tickets) and nice 5 (335) on one CPU for 100 s of 10 ms quanta: 10,000 draws,
    // the nice-0 task winning each with p = 1024 / 1359 = 0.7535. The standard deviation of its share
    // is sqrt(p (1 - p) / 10,000) = 0.0043, so its share lies within 0.0150 (3.5 sigma) of p.
    let mut w = WorkloadBuilder::new("two-hogs");
    w.task("n0", P::new().forever(|x| x.compute(5 * NSEC_PER_MSEC)).build());
    w.task("n5", P::new().forever(|x| x.compute(5 * NSEC_PER_MSEC)).build()).nice = 5;
    let w = w.build().unwrap();
    let mut p = Lottery::new(LotteryParams::default());
    let d = 100_000 * NSEC_PER_MSEC;
    let cfg = RunConfig { duration_ns: d, ..RunConfig::default() };
    let r = Sim::new(&Machine::preset("up").unwrap(), &w, &mut p, "lottery", cfg).unwrap().run().unwrap();
    let run = |n: &str| r.tasks.iter().find(|t| t.name == n).unwrap().run_ns as f64;
    let share = run("n0") / (run("n0") + run("n5"));
    let p_win = nice_to_weight(0) as f64 / (nice_to_weight(0) + nice_to_weight(5)) as f64;
    assert!((share - p_win).abs() < 0.015, "share {share:.4}, tickets say {p_win:.4}");
}
