//! AVEC scheduling (seed 004) on the burn* programs of its table 4.1, on the Core2Duo preset whose
//! cores share the L2 and the front-side bus.

use schedlab_core::{TaskId, NSEC_PER_SEC};
use schedlab_policies::cfs::avec::AvecPolicyParams;
use schedlab_policies::cfs::Cfs;
use schedlab_policies::linux_rt::LinuxClasses;
use schedlab_policies::Params;
use schedlab_sim::{Machine, RunConfig, RunReport, Sim};
use schedlab_workload::generators::builtin;
use schedlab_workload::Workload;

const KINDS: [&str; 6] = ["P5", "P6", "K6", "K7", "MMX", "BX"];

fn burners() -> Workload {
    let mut w = builtin("burn[kind=P5]").unwrap().unwrap();
    for k in &KINDS[1..] {
        w.merge(&builtin(&format!("burn[kind={k}]")).unwrap().unwrap(), k);
    }
    w
}

fn run_avec(pairs: &[(&str, &str)], secs: u64) -> (RunReport, LinuxClasses<Cfs>) {
    let mut p = AvecPolicyParams::default();
    for (k, v) in pairs {
        p.set(k, v).unwrap();
    }
    let mut policy = LinuxClasses::new(Cfs::new_avec(p));
    let m = Machine::preset("core2duo").unwrap();
    let w = burners();
    let cfg = RunConfig { duration_ns: secs * NSEC_PER_SEC, check_invariants: true, ..RunConfig::default() };
    let r = Sim::new(&m, &w, &mut policy, "avec", cfg).unwrap().run().unwrap();
    (r, policy)
}

#[test]
fn avec_boosted_signs_match_table_4_2() {
    let (r, policy) = run_avec(&[], 60);
    let av = policy.fair().avec().unwrap();
    for (i, k) in KINDS.iter().enumerate() {
        let t = TaskId(i as u32);
        assert!(r.tasks[i].name.contains(k), "task {i} is {}", r.tasks[i].name);
        let b = av.boosted(t);
        assert_eq!(r.tasks[i].policy.get("avec_boosted"), Some(&b), "the report carries the final value");
        let positive = matches!(*k, "MMX" | "BX");
        assert_eq!(
            b > 0,
            positive,
            "burn{k}: avec_boosted {b} (table 4.2: MMX and BX positive, the rest negative)"
        );
        // Table 4.2's positions: the FPU burners mostly run as the fairest task, MMX and BX from
        // further right.
        let pos = av.positions(t);
        let top = (0..pos.len()).max_by_key(|&j| pos[j]).unwrap();
        assert_eq!(top == 0, !positive, "burn{k}: positions {pos:?}");
    }
    // Hard protection keeps CPU time fair: every burner got a sixth of the two CPUs, within 5 %.
    for t in &r.tasks {
        let share = t.run_ns as f64 / (60.0 * 2.0 * NSEC_PER_SEC as f64);
        assert!((share - 1.0 / 6.0).abs() < 0.05 / 6.0, "{} ran {share:.4} of the machine", t.name);
    }
}

#[test]
fn co_scheduling_dissimilar_burners_does_more_work_than_cfs() {
    // Seed 004 table 4.5: AVEC ran a mixed load faster than vanilla CFS. With the contention model,
    // pairing the bus/L2-bound burners with FPU burners slows both less.
    let (avec, _) = run_avec(&[], 30);
    let m = Machine::preset("core2duo").unwrap();
    let mut cfs = schedlab_policies::create("cfs").unwrap();
    let cfg = RunConfig { duration_ns: 30 * NSEC_PER_SEC, ..RunConfig::default() };
    let plain = Sim::new(&m, &burners(), cfs.as_mut(), "cfs", cfg).unwrap().run().unwrap();
    let work = |r: &RunReport| r.tasks.iter().map(|t| t.work_ns).sum::<u64>();
    let (a, c) = (work(&avec), work(&plain));
    assert!(a > c + c / 100, "AVEC {a} ns of work vs CFS {c} ns");
}

#[test]
fn a_deficit_limit_of_zero_is_plain_cfs() {
    let (r, policy) = run_avec(&[("deficit_limit_ns", "0")], 10);
    let av = policy.fair().avec().unwrap();
    // Every pick took the fairest task.
    for i in 0..KINDS.len() {
        let pos = av.positions(TaskId(i as u32));
        assert!(pos.iter().skip(1).all(|&n| n == 0), "{}: {pos:?}", r.tasks[i].name);
    }
}

#[test]
fn the_hard_protection_bounds_every_tasks_deficit() {
    // The eq. 4 unfairness (largest run-time gap between two burners) stays within the deficit limit
    // plus CFS's own spread (~10 ms here), and follows the limit up.
    let mut last = 0;
    for limit_ms in [5u64, 20, 100] {
        let (r, _) = run_avec(&[("deficit_limit_ns", &(limit_ms * 1_000_000).to_string())], 30);
        let u = r.summary.fairness.unfairness_ns;
        assert!(u <= (limit_ms + 15) * 1_000_000, "limit {limit_ms} ms: unfairness {u} ns");
        assert!(u >= last, "unfairness grows with the limit: {u} after {last}");
        last = u;
    }
}
