//! MQS and PMQS in whole runs on the two-node Xeon (16 CPUs): sixteen CPU hogs that all start in
//! node 0's pool. MQS (one pool) spreads them over every CPU at once; PMQS with a pool per node keeps
//! them in node 0 until its balancer moves half of them, and without a balancer node 1 stays idle.
//! The bounds follow from the pools' sizes and the balancer's interval.

use schedlab_core::{NSEC_PER_MSEC, NSEC_PER_SEC};
use schedlab_sim::{Machine, RunConfig, RunReport, Sim};
use schedlab_workload::{ProgramBuilder as P, WorkloadBuilder};

fn run(spec: &str) -> RunReport {
    let mut w = WorkloadBuilder::new("hogs");
    w.task("hog", P::new().forever(|x| x.compute(5 * NSEC_PER_MSEC)).build()).instances = 16;
    let w = w.build().unwrap();
    let mut p = schedlab_policies::create(spec).unwrap();
    let cfg = RunConfig { duration_ns: NSEC_PER_SEC, check_invariants: true, ..RunConfig::default() };
    Sim::new(&Machine::preset("xeon-e5520-2s").unwrap(), &w, p.as_mut(), "test", cfg).unwrap().run().unwrap()
}

/// CPU-seconds the hogs ran in the one-second run.
fn cpu_seconds(r: &RunReport) -> f64 {
    r.tasks.iter().map(|t| t.run_ns).sum::<u64>() as f64 / NSEC_PER_SEC as f64
}

fn node1_busy(r: &RunReport) -> f64 {
    r.cpus.iter().filter(|c| c.node == 1).map(|c| c.busy_ns).sum::<u64>() as f64 / NSEC_PER_SEC as f64
}

#[test]
fn one_pool_uses_every_cpu_at_once() {
    let r = run("pmqs[pool_size=16]");
    assert!(cpu_seconds(&r) > 15.5, "MQS: {:.2} CPU-s of 16", cpu_seconds(&r));
}

#[test]
fn pools_without_balancing_leave_the_other_node_idle() {
    let r = run("pmqs[balance_interval_ms=60000]");
    assert!(cpu_seconds(&r) <= 8.0, "only node 0's 8 CPUs: {:.2} CPU-s", cpu_seconds(&r));
    assert_eq!(node1_busy(&r), 0.0);
}

#[test]
fn the_pool_balancer_moves_half_the_hogs_after_its_first_interval() {
    // Node 1 idles for the first 100 ms, then runs 8 hogs: at most 16 - 8 x 0.1 = 15.2 CPU-s.
    let r = run("pmqs");
    let (total, node1) = (cpu_seconds(&r), node1_busy(&r));
    assert!(total > 14.5 && total <= 15.2, "{total:.2} CPU-s");
    assert!(node1 > 7.0 && node1 <= 7.2, "node 1 busy {node1:.2} CPU-s");
    let moves = r.policy_stats.iter().find(|s| s.name == "nr_pool_moves").unwrap().value;
    assert_eq!(moves, 8, "16 : 0 over two pools of 8 CPUs -> 8 : 8");
}
