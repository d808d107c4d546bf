//! Cross-checks against the real tools of Debian's rt-tests package (.ci/run installs it): cyclictest
//! and hackbench run on this machine beside `schedlab exec` running schedlab's model of the same
//! benchmark. The tests run one at a time, as parallel runs would share the CPUs they measure.

use schedlab_exec::{run, ExecConfig};
use schedlab_workload::generators::builtin;
use std::process::Command;
use std::sync::Mutex;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs a tool of rt-tests and returns its standard output.
fn tool(name: &str, args: &[&str]) -> String {
    let out = Command::new(name).args(args).output().unwrap_or_else(|e| {
        panic!("{name} is needed for this cross-check: install Debian's rt-tests package (.ci/run does): {e}")
    });
    assert!(out.status.success(), "{name} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn exec(spec: &str) -> schedlab_sim::RunReport {
    let w = builtin(spec).unwrap().unwrap();
    run(&w, &ExecConfig { duration_ns: 20_000_000_000, ..ExecConfig::default() }).unwrap().report
}

/// `T: 0 ( 1234) P: 0 I:1000 C:   1000 Min:   54 Act:   58 Avg:   74 Max:  203` -> Avg.
fn cyclictest_avg_us(out: &str) -> f64 {
    let line = out.lines().rev().find(|l| l.trim_start().starts_with("T:")).expect("a thread line");
    let after = line.split("Avg:").nth(1).expect("Avg:");
    after.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn cyclictest_and_exec_see_the_same_timer_latency() {
    let _one = ONE_AT_A_TIME.lock();
    // One SCHED_OTHER thread, 1 ms interval, 1,000 loops: the real tool, then schedlab's model of it
    // executed for real. Both time absolute clock_nanosleep wakeups on the same kernel, so both see
    // the same lateness (timer slack, interrupt and wakeup path), within run-to-run noise.
    let avg_us = cyclictest_avg_us(&tool("cyclictest", &["-t1", "-i1000", "-l1000", "-q"]));
    let r = exec("cyclictest[threads=1,loops=1000]");
    let t = &r.tasks[0];
    // One measured wakeup per loop, except after a wakeup later than a whole period (an overrun
    // continues at once on the absolute grid, with no sleep to measure).
    assert!((950..=1000).contains(&t.wakeup_latency.count), "{} wakeups measured", t.wakeup_latency.count);
    let ours_us = t.wakeup_latency.mean_ns as f64 / 1000.0;
    let gap = (ours_us - avg_us).abs();
    assert!(
        gap <= 25.0_f64.max(0.5 * avg_us.max(ours_us)),
        "cyclictest Avg {avg_us} us, schedlab exec mean {ours_us:.1} us"
    );
}

#[test]
fn hackbench_time_and_the_executed_model_agree() {
    let _one = ONE_AT_A_TIME.lock();
    // hackbench -g 2 -l 100 -T -p: 2 groups of 20 sender and 20 receiver threads, 100 messages of 100
    // bytes from each sender to each receiver through 64 KiB pipes. schedlab's model of it executed
    // for real does the same with the model's per-call CPU cost set to 0 (the real calls cost their
    // own time); its threads also count messages and check for the stop between ops.
    // The least of three runs each: a transient disturbance only ever makes a run slower.
    let real_s = (0..3)
        .map(|_| {
            let out = tool("hackbench", &["-g", "2", "-l", "100", "-T", "-p"]);
            let t = out.lines().find_map(|l| l.strip_prefix("Time:")).expect("hackbench prints Time:");
            t.trim().parse::<f64>().unwrap()
        })
        .fold(f64::MAX, f64::min);
    let ours_s = (0..3)
        .map(|_| {
            let r = exec("hackbench[groups=2,loops=100,threads=true,pipe=true,msg_cost=0s]");
            assert_eq!(r.counters[0].value, 2 * 20 * 20 * 100, "every message was received");
            r.summary.makespan_ns.expect("all finished") as f64 / 1e9
        })
        .fold(f64::MAX, f64::min);
    let ratio = ours_s / real_s;
    // Measured here: 0.052-0.058 s against 0.081-0.100 s (1.4-1.8x).
    assert!((0.4..=2.5).contains(&ratio), "hackbench Time {real_s} s, schedlab exec {ours_s:.3} s");
}
