//! VTRR in whole runs: CPU hogs share a CPU in exactly the ratio of their shares (the paper's
//! proportional-share guarantee), with either share map; the expected ratios are the share ratios.

use schedlab_core::weights::nice_to_weight;
use schedlab_core::NSEC_PER_MSEC;
use schedlab_sim::{Machine, RunConfig, RunReport, Sim};
use schedlab_workload::{ProgramBuilder as P, WorkloadBuilder};

const MS: u64 = NSEC_PER_MSEC;

fn run(spec: &str, nices: &[i8], cpus: &str, duration_ns: u64) -> RunReport {
    let mut w = WorkloadBuilder::new("hogs");
    for (i, &n) in nices.iter().enumerate() {
        w.task(format!("h{i}"), P::new().forever(|x| x.compute(5 * MS)).build()).nice = n;
    }
    let w = w.build().unwrap();
    let mut p = schedlab_policies::create(spec).unwrap();
    let cfg = RunConfig { duration_ns, check_invariants: true, ..RunConfig::default() };
    Sim::new(&Machine::preset(cpus).unwrap(), &w, p.as_mut(), "test", cfg).unwrap().run().unwrap()
}

fn run_ns(r: &RunReport, name: &str) -> f64 {
    r.tasks.iter().find(|t| t.name == name).unwrap().run_ns as f64
}

#[test]
fn hogs_get_cpu_time_in_the_ratio_of_their_shares() {
    // Linear shares: nice 0, 10, 15 -> 20, 10, 5.
    let r = run("vtrr", &[0, 10, 15], "up", 7_000 * MS);
    let (a, b, c) = (run_ns(&r, "h0"), run_ns(&r, "h1"), run_ns(&r, "h2"));
    assert!((a / b - 2.0).abs() < 0.02, "20:10 -> {:.3}", a / b);
    assert!((b / c - 2.0).abs() < 0.02, "10:5 -> {:.3}", b / c);
    // CFS weights: nice 0 and 5 -> 1024 : 335.
    let r = run("vtrr[shares=cfs]", &[0, 5], "up", 7_000 * MS);
    let want = nice_to_weight(0) as f64 / nice_to_weight(5) as f64;
    let got = run_ns(&r, "h0") / run_ns(&r, "h1");
    assert!((got / want - 1.0).abs() < 0.02, "1024:335 = {want:.3}, got {got:.3}");
}

#[test]
fn on_two_cpus_equal_shares_get_equal_time() {
    // Three equal hogs on two CPUs: 2/3 of a CPU each.
    let d = 3_000 * MS;
    let r = run("vtrr", &[0, 0, 0], "athlon2-x2", d);
    for i in 0..3 {
        let share = run_ns(&r, &format!("h{i}")) / d as f64;
        assert!((share - 2.0 / 3.0).abs() < 0.02, "h{i}: {share:.3}");
    }
}
