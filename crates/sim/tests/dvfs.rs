//! Frequency scaling and energy (docs/hardware-model.md) on the Core2Duo preset: 1600, 1867, 2133 and
//! 2400 MHz at 1100, 1150, 1212 and 1275 mV, one frequency for the package.

use schedlab_core::{NSEC_PER_MSEC, NSEC_PER_SEC};
use schedlab_sim::{Governor, Machine, RunConfig, RunReport, Sim};
use schedlab_workload::generators::builtin;
use schedlab_workload::Workload;

const MS: u64 = NSEC_PER_MSEC;

fn run(governor: Governor, w: &Workload, secs: u64) -> RunReport {
    let mut m = Machine::preset("core2duo").unwrap();
    m.dvfs.governor = governor;
    let mut p = schedlab_policies::create("cfs").unwrap();
    let cfg = RunConfig { duration_ns: secs * NSEC_PER_SEC, check_invariants: true, ..RunConfig::default() };
    Sim::new(&m, w, p.as_mut(), "test", cfg).unwrap().run().unwrap()
}

/// burnP6 (CPU-bound) and burnBX (memory-bound) sharing CPU 0.
fn p6_and_bx_on_cpu0() -> Workload {
    let mut w = builtin("burn[kind=P6]").unwrap().unwrap();
    w.merge(&builtin("burn[kind=BX]").unwrap().unwrap(), "b");
    for t in &mut w.tasks {
        t.cpus = Some(vec![0]);
    }
    w
}

fn task<'r>(r: &'r RunReport, name: &str) -> &'r schedlab_sim::report::TaskReport {
    r.tasks.iter().find(|t| t.name.contains(name)).unwrap()
}

#[test]
fn the_avec_governor_raises_the_frequency_for_cpu_bound_work_and_lowers_it_for_memory_bound() {
    let w = p6_and_bx_on_cpu0();
    let r = run(Governor::Avec, &w, 10);
    // burnP6 retires 8559 instructions per 10,000 cycles: it asks for 0.8559 x 2400 = 2054 MHz, the
    // 2133 MHz level; at it, its progress is 1 / (0.999 x 2400 / 2133 + 0.001) = 88.8 %.
    let p6 = task(&r, "burnP6");
    let rate = p6.work_ns as f64 / p6.run_ns as f64;
    assert!((rate - 0.888).abs() < 0.01, "burnP6 progressed at {rate:.4}");
    // burnBX retires almost nothing per cycle: the lowest level, where its bus-bound work loses nothing.
    let bx = task(&r, "burnBX");
    let rate = bx.work_ns as f64 / bx.run_ns as f64;
    assert!((rate - 1.0).abs() < 0.01, "burnBX progressed at {rate:.4}");
    // The package spent its time at 1600 MHz (burnBX) and 2133 MHz (burnP6), switching at each
    // context switch (10 us transitions).
    let res = &r.cpus[0].freq_residency_ns;
    let total: u64 = res.iter().sum();
    assert_eq!(total, 10 * NSEC_PER_SEC);
    assert!(res[1] + res[3] < total / 100, "residency {res:?}");
    assert!(
        res[0].abs_diff(bx.run_ns) < total / 50 && res[2].abs_diff(p6.run_ns) < total / 50,
        "residency {res:?}"
    );
    // Less energy than at full speed, for less work.
    let perf = run(Governor::Performance, &w, 10);
    assert!(
        r.summary.energy_uj < perf.summary.energy_uj,
        "{} vs {} uJ",
        r.summary.energy_uj,
        perf.summary.energy_uj
    );
}

#[test]
fn ondemand_lags_by_its_sampling_delay() {
    // A CPU-bound task starts at t = 0 with the package at 1600 MHz. Ondemand samples at the CPU's
    // ticks once 10 ms have passed: it sees 100 % load and asks for 2400 MHz, which arrives 10 us
    // later. So the first ~10 ms run at 1600 MHz, the rest at 2400.
    let w = builtin("burn[kind=P6]").unwrap().unwrap();
    let r = run(Governor::Ondemand, &w, 1);
    let res = &r.cpus[0].freq_residency_ns;
    assert!((10 * MS..=10 * MS + 20_000).contains(&res[0]), "residency {res:?}");
    assert_eq!(res[1] + res[2], 0);
    assert_eq!(res[3], NSEC_PER_SEC - res[0]);
    // Powersave keeps 1600 MHz; its energy is the lowest of the three.
    let save = run(Governor::Powersave, &w, 1);
    assert_eq!(save.cpus[0].freq_residency_ns[0], NSEC_PER_SEC);
    let perf = run(Governor::Performance, &w, 1);
    assert!(save.summary.energy_uj < r.summary.energy_uj && r.summary.energy_uj < perf.summary.energy_uj);
}

#[test]
fn energy_is_static_plus_dynamic_power_over_time() {
    // Performance governor, one burnP6 for 1 s on one of the two CPUs: static 5 W x 2 CPUs x 1 s plus
    // 25 W x 1 s for the busy CPU = 35 J, less 25 W for the microseconds before the task first runs.
    let w = builtin("burn[kind=P6]").unwrap().unwrap();
    let r = run(Governor::Performance, &w, 1);
    let busy: u64 = r.cpus.iter().map(|c| c.busy_ns + c.overhead_ns).sum();
    assert_eq!(r.summary.energy_uj, (5_000 * 2 * NSEC_PER_SEC + 25_000 * busy) / 1_000_000);
    assert!(r.summary.energy_uj.abs_diff(35_000_000) < 250, "{} uJ", r.summary.energy_uj);
}

#[test]
fn every_segment_runs_at_the_current_frequency_not_only_those_after_a_change() {
    // Powersave holds 1600 MHz, so after the first change no frequency change re-speeds a task: each
    // switch must start its segment at the low frequency by itself. Two hogs without an activity
    // profile (so no contention either: entirely CPU-bound, bus demand 0) share CPU 0 and switch a
    // hundred times in a second; each progresses at 1600 / 2400 of its run time, a little less for
    // the cache refill after each return to the CPU (50 us at half speed when the other ran 2 ms).
    let mut w = builtin("hogs[n=2]").unwrap().unwrap();
    for t in &mut w.tasks {
        t.cpus = Some(vec![0]);
    }
    let r = run(Governor::Powersave, &w, 1);
    assert!(r.summary.nr_switches >= 100, "{} switches", r.summary.nr_switches);
    for t in &r.tasks {
        assert!(t.run_ns > NSEC_PER_SEC / 3, "{} ran {} ns", t.name, t.run_ns);
        let rate = t.work_ns as f64 / t.run_ns as f64;
        assert!((rate - 2.0 / 3.0).abs() < 0.005, "{} progressed at {rate:.4}, not 0.6667", t.name);
    }
}
