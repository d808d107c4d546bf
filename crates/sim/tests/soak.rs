//! Soak test: one simulated hour of a 64-CPU machine with thousands of tasks under each policy,
//! checking that memory stays flat and the invariants hold. Not part of the default suite (it takes
//! minutes per policy); run it with
//!
//! ```text
//! cargo test --release -p schedlab-sim --test soak -- --ignored --nocapture
//! ```
//!
//! Environment: `SOAK_SECONDS` (simulated seconds, default 3600), `SOAK_TASKS` (default 2000),
//! `SOAK_POLICIES` (comma-separated, default every registered policy). Results: docs/testing.md.

use schedlab_core::{Topology, NSEC_PER_SEC};
use schedlab_sim::{Machine, RunConfig, Sim};
use std::sync::{Arc, Mutex};

/// Resident memory of this process, KiB (`VmRSS`).
fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn env_or(key: &str, default: u64) -> u64 {
    std::env::var(key).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// 2 sockets x 2 NUMA nodes x 8 cores x 2 SMT threads.
fn machine() -> Machine {
    let mut m = Machine::flat(1);
    m.name = "soak-64".into();
    m.topology = Topology::symmetric(2, 2, 1, 8, 2).unwrap();
    m.numa = true;
    m.speed_permille = vec![1000; 64];
    m
}

fn soak(spec: &str, seconds: u64, tasks: u64) {
    let m = machine();
    let w =
        schedlab_workload::generators::builtin(&format!("sysbench-oltp[threads={tasks}]")).unwrap().unwrap();
    let mut p = schedlab_policies::create(spec).unwrap();
    let cfg = RunConfig {
        duration_ns: seconds * NSEC_PER_SEC,
        check_invariants: true,
        invariant_every: 1000,
        ..RunConfig::default()
    };
    let samples: Arc<Mutex<Vec<(u64, u64)>>> = Arc::default();
    let mut sim = Sim::new(&m, &w, p.as_mut(), spec, cfg).unwrap();
    let s = samples.clone();
    let (mut last, every) = (0, seconds * NSEC_PER_SEC / 30);
    sim.on_progress(move |now, _| {
        // About 30 samples over the run.
        if now >= last + every {
            last = now;
            s.lock().unwrap().push((now, rss_kib()));
        }
    });
    let start = std::time::Instant::now();
    let r = sim.run().unwrap_or_else(|e| panic!("{spec}: {e}"));
    let wall = start.elapsed().as_secs_f64();
    let samples = samples.lock().unwrap().clone();
    assert!(samples.len() >= 10, "{spec}: too few memory samples ({})", samples.len());
    let half = samples.len() / 2;
    let first = samples[..half].iter().map(|s| s.1).max().unwrap();
    let second = samples[half..].iter().map(|s| s.1).max().unwrap();
    println!(
        "soak {spec}: {seconds} s simulated, {tasks} tasks, {} events in {wall:.0} s; \
         RSS max first half {first} KiB, second half {second} KiB",
        r.summary.nr_events
    );
    // Flat: the second half may not exceed the first by more than 5 % plus 4 MiB of allocator noise.
    assert!(second <= first + first / 20 + 4096, "{spec}: memory grows: {first} KiB then {second} KiB");
    assert_eq!(r.stop_reason, "duration");
    let busy: u64 = r.cpus.iter().map(|c| c.busy_ns).sum();
    assert_eq!(busy, r.tasks.iter().map(|t| t.run_ns).sum::<u64>(), "{spec}: CPU time not conserved");
}

#[test]
#[ignore = "minutes per policy; run with --ignored (docs/testing.md)"]
fn one_hour_64_cpus_thousands_of_tasks() {
    let seconds = env_or("SOAK_SECONDS", 3600);
    let tasks = env_or("SOAK_TASKS", 2000);
    let policies: Vec<String> = match std::env::var("SOAK_POLICIES") {
        Ok(list) => list.split(',').map(String::from).collect(),
        Err(_) => schedlab_policies::policies().iter().map(|p| p.name.to_string()).collect(),
    };
    for spec in &policies {
        soak(spec, seconds, tasks);
    }
}
