//! RSDL in whole runs: hogs share a CPU by their staircases (levels x quota per major rotation),
//! and the lowest priority still runs once per rotation (no starvation). The expected ratios are
//! computed from the design's rules, not recorded outputs.

use schedlab_core::NSEC_PER_MSEC;
use schedlab_sim::{Machine, RunConfig, RunReport, Sim};
use schedlab_workload::{ProgramBuilder as P, WorkloadBuilder};

const MS: u64 = NSEC_PER_MSEC;

fn run(nices: &[i8], machine: &str, duration_ns: u64) -> RunReport {
    let mut w = WorkloadBuilder::new("hogs");
    for (i, &n) in nices.iter().enumerate() {
        w.task(format!("h{i}"), P::new().forever(|x| x.compute(5 * MS)).build()).nice = n;
    }
    let w = w.build().unwrap();
    let mut p = schedlab_policies::create("rsdl").unwrap();
    let cfg = RunConfig { duration_ns, check_invariants: true, ..RunConfig::default() };
    Sim::new(&Machine::preset(machine).unwrap(), &w, p.as_mut(), "test", cfg).unwrap().run().unwrap()
}

fn run_ns(r: &RunReport, name: &str) -> f64 {
    r.tasks.iter().find(|t| t.name == name).unwrap().run_ns as f64
}

#[test]
fn hogs_share_the_cpu_by_levels_times_quota() {
    // Nice 0: 20 levels, nice 5: 15, nice 10: 10, all with one quota: 20 : 15 : 10. At HZ 1000 a
    // quota is 6 ms and a major rotation 45 x 6 = 270 ms; the run lasts 33 whole rotations (inside a
    // rotation nice 0 is ahead: it has levels 120..124 alone).
    let r = run(&[0, 5, 10], "up", 33 * 270 * MS);
    let (a, b, c) = (run_ns(&r, "h0"), run_ns(&r, "h1"), run_ns(&r, "h2"));
    assert!((a / c - 2.0).abs() < 0.03, "20:10 -> {:.3}", a / c);
    assert!((b / c - 1.5).abs() < 0.03, "15:10 -> {:.3}", b / c);
    let rotations = r.policy_stats.iter().find(|s| s.name == "nr_major_rotations").unwrap().value;
    assert_eq!(rotations, 32, "one at the end of each rotation but the last, which ends with the run");
}

#[test]
fn the_lowest_priority_is_never_starved() {
    // Two nice -20 hogs and one nice 19 hog: the nice-19 task gets one quota per major rotation of
    // 2 x 40 x 10 + 1 = 801 quanta: 1/801 of the CPU.
    let d = 20_000 * MS;
    let r = run(&[-20, -20, 19], "up", d);
    let low = run_ns(&r, "h2") / d as f64;
    assert!((low * 801.0 - 1.0).abs() < 0.15, "share {low:.5}, 1/801 = {:.5}", 1.0 / 801.0);
}
