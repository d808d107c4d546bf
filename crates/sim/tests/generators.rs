//! Every built-in generator runs under CFS on a small machine, and a property computed from the real
//! benchmark's definition holds (message counts, yield counts, cascade order, ...). A test at the end
//! fails if a generator has no test here.

use schedlab_core::{NSEC_PER_MSEC as MS, NSEC_PER_USEC as US};
use schedlab_sim::report::TaskReport;
use schedlab_sim::{Machine, RunConfig, RunReport, Sim};
use schedlab_workload::generators::builtin;

const TESTED: &[&str] = &[
    "demo",
    "hogs",
    "fibo",
    "pi",
    "kernel-build",
    "unixbench-spawn",
    "unixbench-execl",
    "bonnie",
    "burn",
    "hackbench",
    "perf-messaging",
    "perf-pipe",
    "unixbench-context1",
    "unixbench-pipe",
    "sysbench-cpu",
    "sysbench-threads",
    "sysbench-mutex",
    "sysbench-oltp",
    "schbench",
    "cyclictest",
    "editor",
    "latency-probe",
    "system-noise",
    "volanomark",
    "apache-ab",
    "nas-mg",
    "c-ray",
    "pinned-spinners",
    "blackscholes",
    "ferret",
];

fn run(spec: &str, cpus: u32, duration_ns: u64) -> RunReport {
    let w = builtin(spec).unwrap_or_else(|e| panic!("{spec}: {e}")).unwrap();
    let m = Machine::flat(cpus);
    let mut p = schedlab_policies::create("cfs").unwrap();
    let cfg = RunConfig { duration_ns, check_invariants: true, ..RunConfig::default() };
    Sim::new(&m, &w, p.as_mut(), "cfs", cfg).unwrap().run().unwrap_or_else(|e| panic!("{spec}: {e}"))
}

fn counter(r: &RunReport, name: &str) -> u64 {
    r.counters.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no counter {name}")).value
}

fn tasks<'r>(r: &'r RunReport, template: &str) -> Vec<&'r TaskReport> {
    r.tasks.iter().filter(|t| t.template == template).collect()
}

fn one<'r>(r: &'r RunReport, name: &str) -> &'r TaskReport {
    r.tasks.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("no task {name}"))
}

#[test]
fn every_generator_is_tested_here() {
    for g in schedlab_workload::generators::generators() {
        assert!(TESTED.contains(&g.name), "generator `{}` has no property test", g.name);
    }
}

#[test]
fn hackbench_moves_groups_fds_fds_loops_messages() {
    for spec in
        ["hackbench[groups=2,fds=4,loops=10]", "hackbench[groups=2,fds=4,loops=10,pipe=true,threads=true]"]
    {
        let r = run(spec, 4, 10_000 * MS);
        assert_eq!(r.stop_reason, "all_done", "{spec}");
        assert_eq!(counter(&r, "messages"), 2 * 4 * 4 * 10, "{spec}");
        assert_eq!(r.pipes.iter().map(|p| p.nr_sends).sum::<u64>(), 2 * 4 * 4 * 10);
        assert_eq!(r.pipes.iter().map(|p| p.bytes).sum::<u64>(), 2 * 4 * 4 * 10 * 100);
        assert_eq!(r.tasks.len(), 2 * 2 * 4);
        let one_process = r.tasks.iter().all(|t| t.tgid == r.tasks[0].tgid);
        assert_eq!(one_process, spec.contains("threads=true"), "{spec}");
    }
    // A 64 KiB pipe holds 655 messages of 100 bytes: 20 senders x 100 loops into one receiver's pipe
    // must block writers, so senders switch voluntarily.
    let r = run("hackbench[groups=1,fds=20,loops=100,pipe=true]", 2, 60_000 * MS);
    assert_eq!(counter(&r, "messages"), 20 * 20 * 100);
    assert!(tasks(&r, "g0-sender0")[0].nvcsw > 1);
}

#[test]
fn perf_messaging_is_hackbench_with_perfs_defaults() {
    let a = builtin("perf-messaging").unwrap().unwrap();
    let b = builtin("hackbench").unwrap().unwrap();
    assert_eq!(a.tasks.len(), 400);
    assert_eq!(
        a.tasks.iter().map(|t| &t.program).collect::<Vec<_>>(),
        b.tasks.iter().map(|t| &t.program).collect::<Vec<_>>()
    );
    let r = run("perf-messaging[groups=1,fds=3,loops=5]", 2, 1_000 * MS);
    assert_eq!(counter(&r, "messages"), 3 * 3 * 5);
}

#[test]
fn perf_pipe_round_trips_cost_two_switches_each() {
    let r = run("perf-pipe[loops=1000]", 1, 10_000 * MS);
    assert_eq!(counter(&r, "round_trips"), 1000);
    // On one CPU every round trip switches to each side once (the waker may be preempted by the
    // woken task instead of blocking, so count both kinds).
    for name in ["a", "b"] {
        let t = one(&r, name);
        assert!(t.nvcsw + t.nivcsw >= 1000, "{name}: {} + {}", t.nvcsw, t.nivcsw);
    }
    assert!(r.summary.nr_switches >= 2000);
    // usecs/op: at least the four 1 us system calls plus two context switches.
    let per_op = r.summary.makespan_ns.unwrap() / 1000;
    assert!(per_op >= 4 * US + 2 * 2 * US, "{per_op} ns/op");
}

#[test]
fn unixbench_context1_and_pipe_rates_follow_their_costs() {
    let r = run("unixbench-context1", 2, 100 * MS);
    let trips = counter(&r, "round_trips");
    assert!(trips > 1000 && trips <= 100 * MS / (4 * US), "{trips}");
    // unixbench pipe: one task, no partner, so no switches after the first; each loop costs 2 us.
    let r = run("unixbench-pipe", 1, 10 * MS);
    let loops = counter(&r, "loops");
    assert!(loops.abs_diff(5000) <= 2, "{loops}");
    assert_eq!(r.summary.nr_switches, 1);
}

#[test]
fn sysbench_cpu_counts_events_from_work() {
    let r = run("sysbench-cpu[threads=2,events=50]", 2, 10_000 * MS);
    assert_eq!(counter(&r, "events"), 100);
    for t in tasks(&r, "sysbench") {
        assert_eq!(t.work_ns, 50 * MS);
    }
    // Cost grows as max_prime^1.5: 4x the primes, 8x the cost.
    let w = builtin("sysbench-cpu[max_prime=40000,events=1]").unwrap().unwrap();
    assert!(w.tasks[0].program.ops.contains(&schedlab_workload::Op::Compute { work: (8 * MS).into() }));
}

#[test]
fn sysbench_threads_performs_threads_x_events_x_yields() {
    let r = run("sysbench-threads[threads=4,events=10,yields=100,locks=8]", 2, 60_000 * MS);
    assert_eq!(r.stop_reason, "all_done");
    assert_eq!(counter(&r, "events"), 4 * 10);
    for i in 0..4 {
        assert_eq!(one(&r, &format!("thread{i}")).nr_yields, 10 * 100, "thread{i}");
    }
}

/// sysbench 0.4's --max-requests is a total, numbered by one shared counter, and request r takes lock
/// r mod --thread-locks: dealt in turn to 32 threads, 10,000 requests are 313 for threads 0-15 and
/// 312 for the rest, and thread i only ever takes lock i mod 8 (4 threads per lock).
#[test]
fn sysbench_threads_deals_its_requests_in_turn_and_takes_the_counters_lock() {
    let w = builtin("sysbench-threads[threads=32,requests=10000,yields=2,locks=8]").unwrap().unwrap();
    for (i, t) in w.tasks.iter().enumerate() {
        let locks: std::collections::BTreeSet<u32> = t
            .program
            .ops
            .iter()
            .filter_map(|op| match *op {
                schedlab_workload::Op::Lock(m) => Some(m),
                _ => None,
            })
            .collect();
        assert_eq!(locks.into_iter().collect::<Vec<_>>(), vec![i as u32 % 8], "thread{i}");
    }
    let r = run("sysbench-threads[threads=32,requests=10000,yields=2,locks=8]", 1, 600_000 * MS);
    assert_eq!(r.stop_reason, "all_done");
    assert_eq!(counter(&r, "events"), 10_000);
    assert_eq!(one(&r, "thread15").nr_yields, 313 * 2);
    assert_eq!(one(&r, "thread16").nr_yields, 312 * 2);
    // 12 threads and 8 locks: thread i's requests i, i + 12, i + 24 take locks i, i + 4, i (mod 8).
    let w = builtin("sysbench-threads[threads=12,requests=36,yields=1,locks=8]").unwrap().unwrap();
    let locks_of = |t: &schedlab_workload::TaskSpec| -> Vec<u32> {
        let mut v: Vec<u32> = t
            .program
            .ops
            .iter()
            .filter_map(|op| if let schedlab_workload::Op::Lock(m) = *op { Some(m) } else { None })
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    assert_eq!(locks_of(&w.tasks[1]), vec![1, 5]);
    for bad in ["sysbench-threads[threads=4,events=2,requests=8]", "sysbench-threads[threads=4,requests=3]"] {
        let e = builtin(bad).unwrap_err();
        assert!(e.contains("requests"), "{bad}: {e}");
    }
}

#[test]
fn sysbench_mutex_takes_every_lock() {
    let r = run("sysbench-mutex[threads=3,mutex_locks=100,mutex_loops=1000]", 2, 10_000 * MS);
    assert_eq!(r.stop_reason, "all_done");
    assert_eq!(counter(&r, "locks"), 300);
    // Each thread spins 100 x 1000 x 1 ns in empty loops.
    for i in 0..3 {
        assert!(one(&r, &format!("thread{i}")).work_ns >= 100 * 1000);
    }
}

#[test]
fn sysbench_oltp_throughput_matches_the_closed_loop() {
    let r = run("sysbench-oltp[threads=8]", 2, 2_000 * MS);
    // Closed loop: each client cycles think (10 ms) + query (0.3 ms) + update (0.02 ms); two CPUs are
    // far from saturated (8 x 0.32 / 10.32 < 1 CPU), so the rate is near 8 / 10.32 ms = 775/s.
    let tps = counter(&r, "transactions") as f64 / 2.0;
    assert!((tps / 775.0 - 1.0).abs() < 0.12, "{tps} transactions/s");
}

#[test]
fn sysbench_oltp_with_a_main_thread_creates_its_clients_one_by_one_then_starts_them_together() {
    // One CPU: the main thread computes 1 ms before creating each of 4 client threads (threads of
    // its process), and all five meet at the start barrier, so no client runs before the main
    // thread's 4 ms and the last creation, and every client then serves transactions.
    let r = run("sysbench-oltp[threads=4,master=1ms]", 1, 500 * MS);
    let main = one(&r, "main");
    let clients = tasks(&r, "client");
    assert_eq!(clients.len(), 4);
    assert!(main.work_ns == 4 * MS, "{}", main.work_ns);
    for c in &clients {
        assert_eq!(c.tgid, main.tgid, "{} is a thread of sysbench's process", c.name);
        assert!(c.started_ns >= Some(MS), "created after the first 1 ms: {:?}", c.started_ns);
        assert!(c.work_ns > 0);
    }
    // The last is created after the main thread's 4 ms of work.
    let last_start = clients.iter().filter_map(|c| c.started_ns).max().unwrap();
    assert!(last_start >= 4 * MS, "{last_start}");
    assert!(counter(&r, "transactions") > 4 * 30, "each client keeps serving");
    // Without `master` there is no main thread and the clients start at once.
    let r = run("sysbench-oltp[threads=4]", 1, 100 * MS);
    assert!(r.tasks.iter().all(|t| t.template == "client" && t.started_ns == Some(0)));
}

#[test]
fn fibo_and_hogs_keep_the_cpu_busy() {
    let r = run("fibo", 1, 1_000 * MS);
    assert!(one(&r, "fibo").work_ns > 995 * MS);
    let r = run("hogs[n=3,nice=5]", 3, 100 * MS);
    assert!(r.tasks.iter().all(|t| t.nice == 5 && t.work_ns > 95 * MS));
    let r = run("demo[hogs=2]", 4, 200 * MS);
    assert_eq!(r.tasks.len(), 2 + 1 + 4 + 4 + 4);
}

#[test]
fn schbench_workers_are_woken_round_by_round() {
    let r = run("schbench[workers=4]", 4, 200 * MS);
    let per_worker: Vec<u64> =
        (0..4).map(|j| one(&r, &format!("m0-worker{j}")).work_ns / (50 * US)).collect();
    let total = counter(&r, "requests");
    assert!(total > 100, "{total}");
    // The message thread releases all workers once per round: their request counts differ by at most 1.
    let (lo, hi) = (per_worker.iter().min().unwrap(), per_worker.iter().max().unwrap());
    assert!(hi - lo <= 1, "{per_worker:?}");
    assert!(one(&r, "m0-worker0").wakeup_latency.count > 0);
}

#[test]
fn cyclictest_threads_wake_on_their_own_periods() {
    let r = run("cyclictest[threads=2,loops=100]", 2, 10_000 * MS);
    let (t0, t1) = (one(&r, "cyclic0"), one(&r, "cyclic1"));
    assert_eq!((t0.nr_wakeups, t1.nr_wakeups), (100, 100));
    // Absolute periods of 1000 us and 1500 us: the 100th wakeups are at 100 ms and 150 ms.
    assert!(t0.last_wakeup_ns.unwrap().abs_diff(100 * MS) < 10 * US);
    assert!(t1.last_wakeup_ns.unwrap().abs_diff(150 * MS) < 10 * US);
    let r = run("cyclictest[threads=1,loops=10,priority=80]", 1, 1_000 * MS);
    assert_eq!(r.tasks[0].class, schedlab_core::SchedClass::Fifo);
}

#[test]
fn editor_types_at_its_think_rate() {
    let r = run("editor", 1, 20_000 * MS);
    // 20 s / (200 ms think + 3 ms burst) = 98 keystrokes expected; exponential think times vary.
    let k = counter(&r, "keystrokes");
    assert!((60..=140).contains(&k), "{k}");
    assert_eq!(r.stop_reason, "duration", "an editor without a session length types forever");
    // A session of 5 keystrokes: each editor types 5 times and exits, and the run ends with them.
    let r = run("editor[n=3,keystrokes=5]", 1, 20_000 * MS);
    assert_eq!(r.stop_reason, "all_done");
    assert_eq!(counter(&r, "keystrokes"), 15);
    for t in &r.tasks {
        assert_eq!(t.nr_wakeups, 5, "{}: one wakeup per think time", t.name);
        assert!(t.run_ns >= 5 * MS && t.run_ns <= 25 * MS, "{}: 5 bursts of 1-5 ms, {} ns", t.name, t.run_ns);
    }
}

/// Alone on an idle CPU the probe's cycle is its relative sleep plus its work: with 100 ms and 1 ms,
/// it wakes at about 100, 201, ..., 908 ms in a 1 s run (9 wakeups) and is never late by more than
/// the engine's wakeup costs. It is a background task, so nothing stops the run before its duration.
#[test]
fn latency_probe_sleeps_relative_periods_in_the_background() {
    let r = run("latency-probe[period=100ms,work=1ms]", 1, 1_000 * MS);
    assert_eq!(r.stop_reason, "duration");
    let p = one(&r, "probe");
    assert!(p.background);
    assert_eq!((p.nr_wakeups, counter(&r, "probes")), (9, 9));
    assert!(p.wakeup_latency.max_ns < 50 * US, "{:?}", p.wakeup_latency);
    assert!(p.run_ns.abs_diff(9 * MS) < MS, "{}", p.run_ns);
}

/// Four background wakers at a mean of 9 ms plus 1 ms of work each: about 4 x 10 s / 10 ms = 4,000
/// wakeups in 10 s on one CPU (a Poisson count: within 10 %), 1 ms of CPU each. Beside a CPU hog on
/// the same CPU, each wakeup preempts the hog (the woken task slept far longer than CFS's wakeup
/// granularity), so the hog's involuntary switches count the noise's wakeups, as a lone process's
/// count a real system's kernel threads (seed 003 fig. 4.4).
#[test]
fn system_noise_wakes_in_the_background_at_its_rate_and_preempts_a_hog() {
    let r = run("system-noise[n=4,interval=9ms,work=1ms]", 1, 10_000 * MS);
    assert_eq!(r.stop_reason, "duration");
    let wakeups = counter(&r, "noise_wakeups");
    assert!(wakeups.abs_diff(4_000) < 400, "{wakeups} wakeups");
    let noise = tasks(&r, "noise");
    assert_eq!(noise.len(), 4);
    assert!(noise.iter().all(|t| t.background));
    let work_ns: u64 = noise.iter().map(|t| t.work_ns).sum();
    assert!(work_ns.abs_diff(wakeups * MS) <= 4 * MS, "{work_ns} ns of work for {wakeups} wakeups");

    let src =
        "name = \"hog + noise\"\ninclude = [\"hogs[n=1]\", \"system-noise[interval=100ms,work=50us]\"]\n";
    let w = schedlab_workload::parse_toml("noise.toml", src).unwrap();
    let m = Machine::flat(1);
    let mut p = schedlab_policies::create("cfs").unwrap();
    let cfg = RunConfig { duration_ns: 10_000 * MS, check_invariants: true, ..RunConfig::default() };
    let r = Sim::new(&m, &w, p.as_mut(), "cfs", cfg).unwrap().run().unwrap();
    let names: Vec<&str> = r.counters.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["system-noise.noise_wakeups"], "an included application's counter is prefixed");
    let wakeups = counter(&r, "system-noise.noise_wakeups");
    assert!(wakeups.abs_diff(100) <= 30, "{wakeups} wakeups in 10 s at a 100 ms mean");
    let hog = r.tasks.iter().find(|t| !t.background).unwrap();
    assert_eq!(hog.nivcsw, wakeups, "one involuntary switch of the hog per noise wakeup");
}

#[test]
fn volanomark_delivers_every_message_to_every_other_user() {
    let r = run("volanomark[rooms=2,users=4,count=5]", 4, 10_000 * MS);
    assert_eq!(r.stop_reason, "all_done");
    assert_eq!(counter(&r, "messages"), 2 * 4 * 3 * 5);
    assert_eq!(r.tasks.len(), 2 * 4 * 4);
    let tgids: std::collections::BTreeSet<u32> = r.tasks.iter().map(|t| t.tgid).collect();
    assert_eq!(tgids.len(), 2, "one client and one server process");
}

#[test]
fn apache_ab_completes_n_requests() {
    let r = run("apache-ab[requests=200,concurrency=2,server_threads=4]", 2, 10_000 * MS);
    assert_eq!(r.stop_reason, "task_done");
    assert_eq!(counter(&r, "requests"), 200);
    let ab_done = one(&r, "ab").exited_ns.unwrap();
    // The httpd threads never exit; the benchmark's time is ab's: the run ends when ab is done.
    assert_eq!(r.summary.makespan_ns, Some(ab_done));
    assert_eq!(r.duration_ns, ab_done);
    // Worker threads share one process; prefork servers are processes of their own.
    let processes =
        |r: &RunReport| r.tasks.iter().map(|t| t.tgid).collect::<std::collections::BTreeSet<u32>>().len();
    assert_eq!(processes(&r), 2, "ab and the httpd process");
    let r = run("apache-ab[requests=200,concurrency=2,server_threads=4,prefork=true]", 2, 10_000 * MS);
    assert_eq!(counter(&r, "requests"), 200);
    assert_eq!(processes(&r), 5, "ab and four httpd processes");
}

/// Without keep-alive a server lingers on each connection until ab closes it (ap_lingering_close),
/// so it serves the next request only after ab's close; with `-k` it serves queued requests back to
/// back. One server, two connections, 20 requests, 1 ms of server work and 5 ms of ab work each, on
/// two CPUs, computed by hand:
/// - keep-alive: ab is the bottleneck; it finishes response k at 1 + 5k ms (k = 1..18, each
///   followed by a request), the server answers request 20 at 91 + 1 = 92 ms, ab's last read;
/// - no keep-alive: the server takes request i + 1 when ab's close of i arrives, at D_i, and
///   answers at D_i + 1, which ab reads at once and closes 5 ms later: D_i = 6i for i = 1..18, then
///   the last two responses (no ab work) at 109 and 110 ms.
#[test]
fn apache_servers_linger_until_ab_closes_each_connection() {
    let spec = |keepalive: bool| {
        format!(
            "apache-ab[server_threads=1,concurrency=2,requests=20,request_cost=1ms,request_stddev=0ns,\
             ab_cost=5ms,keepalive={keepalive}]"
        )
    };
    for (keepalive, expect_ns) in [(true, 92 * MS), (false, 110 * MS)] {
        let r = run(&spec(keepalive), 2, 10_000 * MS);
        assert_eq!(counter(&r, "requests"), 20);
        let got = r.summary.makespan_ns.unwrap();
        // The system calls and switches add microseconds to the hand-computed milliseconds.
        assert!(
            got >= expect_ns && got < expect_ns + expect_ns / 100,
            "keepalive={keepalive}: {got} ns, expected {expect_ns} ns + < 1 %"
        );
        // Each request's server wakes once (keep-alive: for the request; else for ab's close, the
        // request being queued by then), so the server blocks once a request either way.
        let httpd = one(&r, "httpd");
        assert!((19..=21).contains(&httpd.nr_wakeups), "keepalive={keepalive}: {}", httpd.nr_wakeups);
    }
}

#[test]
fn nas_mg_threads_do_the_v_cycle_work_between_barriers() {
    let r = run("nas-mg[threads=4,iterations=2,levels=3,top_work=8ms]", 4, 10_000 * MS);
    // Per V-cycle each thread does levels 3, 2, 1 down and 1, 2, 3 up: 2 x (8 + 1 + 0.125) ms.
    let per_thread = 2 * 2 * (8 * MS + MS + 125 * US);
    for t in tasks(&r, "mg") {
        assert_eq!(t.work_ns, per_thread, "{}", t.name);
    }
    assert!(r.summary.makespan_ns.unwrap() >= per_thread);
}

#[test]
fn c_ray_cascade_wakes_threads_in_order() {
    let r = run("c-ray[threads=64,work=5ms]", 4, 10_000 * MS);
    assert_eq!(r.stop_reason, "all_done");
    assert_eq!(one(&r, "c-ray0").nr_wakeups, 0);
    // Thread i is released by thread i - 1, so releases happen in thread order. A thread that reached
    // its wait after its predecessor's post finds the token and is never woken; every thread that was
    // woken was woken after all lower-numbered ones.
    let wakes: Vec<u64> = (1..64).filter_map(|i| one(&r, &format!("c-ray{i}")).last_wakeup_ns).collect();
    assert!(wakes.len() > 32, "most threads wait for the cascade: {}", wakes.len());
    assert!(wakes.windows(2).all(|w| w[0] <= w[1]), "{wakes:?}");
    assert!(r.tasks.iter().all(|t| t.work_ns == 5 * MS));
}

#[test]
fn blackscholes_reads_then_prices_in_parallel_then_writes() {
    // 1,001 options over 4 threads: 250 each (bs_thread leaves the last one unpriced), 10 runs.
    let r = run(
        "blackscholes[threads=4,options=1001,runs=10,price_cost=1us,read_cost=2us,write_cost=1us]",
        4,
        1_000 * MS,
    );
    assert_eq!(r.stop_reason, "all_done");
    let main = one(&r, "main");
    assert_eq!(main.work_ns, 1001 * 2 * US + 1001 * US, "the read and the write are the main thread's");
    let priced: Vec<&TaskReport> = r.tasks.iter().filter(|t| t.name.starts_with("worker")).collect();
    assert_eq!(priced.len(), 4);
    assert!(priced.iter().all(|t| t.work_ns == 250 * 10 * US), "each prices its 250 options 10 times");
    // No thread prices before the read is done, and the write starts after the last one ended.
    let read_done = 1001 * 2 * US;
    assert!(priced.iter().all(|t| t.started_ns.unwrap() >= read_done));
    let last_priced = priced.iter().map(|t| t.exited_ns.unwrap()).max().unwrap();
    assert!(main.exited_ns.unwrap() >= last_priced + 1001 * US);
    // On 4 CPUs the pricing runs in parallel: the run takes about read + 2.5 ms + write, not 10 ms more.
    let serial_sum = read_done + 4 * 2_500 * US + 1001 * US;
    assert!(r.summary.makespan_ns.unwrap() < serial_sum - 5 * MS, "{:?}", r.summary.makespan_ns);
}

#[test]
fn ferret_passes_every_query_through_every_stage_in_order() {
    let r = run(
        "ferret[threads=3,queries=10,depth=2,load_cost=1ms,seg_cost=2ms,extract_cost=1ms,vec_cost=3ms,rank_cost=2ms,out_cost=100us]",
        4,
        10_000 * MS,
    );
    assert_eq!(r.stop_reason, "all_done");
    assert_eq!(r.tasks.len(), 4 * 3 + 2, "4n + 2 threads");
    assert_eq!(one(&r, "load").work_ns, 10 * MS);
    assert_eq!(one(&r, "out").work_ns, 10 * 100 * US);
    for (stage, cost) in [("seg", 2 * MS), ("extract", MS), ("vec", 3 * MS), ("rank", 2 * MS)] {
        let threads: Vec<&TaskReport> =
            r.tasks.iter().filter(|t| t.template == stage || t.template == format!("{stage}+")).collect();
        assert_eq!(threads.len(), 3, "{stage}");
        assert_eq!(threads.iter().map(|t| t.work_ns).sum::<u64>(), 10 * cost, "{stage}: every query once");
        // 10 queries over 3 threads: one takes 4, two take 3.
        let mut shares: Vec<u64> = threads.iter().map(|t| t.work_ns / cost).collect();
        shares.sort();
        assert_eq!(shares, [3, 3, 4], "{stage}");
    }
    // The last query leaves the serial load stage at 10 ms and still passes through the four stages
    // and the output.
    assert!(r.summary.makespan_ns.unwrap() >= 10 * MS + (2 + 1 + 3 + 2) * MS + 100 * US);
}

#[test]
fn ferret_full_queues_hold_the_load_stage_back() {
    // One slow thread per stage and queues of one entry: the load thread, 100x faster than the
    // stages, must wait for free slots (it sleeps), and the output thread waits for results.
    let r = run(
        "ferret[threads=1,queries=20,depth=1,load_cost=100us,seg_cost=10ms,extract_cost=100us,vec_cost=100us,rank_cost=100us,out_cost=100us]",
        8,
        10_000 * MS,
    );
    assert_eq!(r.stop_reason, "all_done");
    let load = one(&r, "load");
    // With free slots it would be done at 2 ms; a full queue holds it until segmentation has taken
    // all but the queue's one entry and the one in hand: (20 - 2) x 10 ms.
    assert!(load.exited_ns.unwrap() >= 18 * 10 * MS, "{:?}", load.exited_ns);
    assert!(load.sleep_ns > 150 * MS && load.nvcsw >= 17, "{} {}", load.sleep_ns, load.nvcsw);
    assert!(one(&r, "out").nvcsw >= 19, "the output thread sleeps between results");
}

#[test]
fn pinned_spinners_stay_on_their_cpu_until_unpinned() {
    let r = run("pinned-spinners[threads=16,unpin_at=100ms]", 4, 1_000 * MS);
    let s = r.series.as_ref().unwrap();
    for (i, &t) in s.time_ns.iter().enumerate() {
        if t < 100 * MS {
            assert_eq!((s.nr_running[0][i], s.nr_running[1][i]), (16, 0), "at {t}");
        }
    }
    let last = s.time_ns.len() - 1;
    assert_eq!((0..4).map(|c| s.nr_running[c][last]).collect::<Vec<_>>(), vec![4, 4, 4, 4]);
}

#[test]
fn kernel_build_compiles_every_file_with_at_most_jobs_in_flight() {
    let r = run("kernel-build[jobs=2,files=10,compile=10ms,compile_stddev=2ms,link=20ms]", 4, 60_000 * MS);
    assert_eq!(r.stop_reason, "all_done");
    assert_eq!(counter(&r, "objects"), 10);
    assert_eq!(r.tasks.len(), 1 + 10 + 1);
    let cc: Vec<(u64, u64)> =
        tasks(&r, "cc").iter().map(|t| (t.started_ns.unwrap(), t.exited_ns.unwrap())).collect();
    for &(s, _) in &cc {
        let live = cc.iter().filter(|&&(a, b)| a <= s && s < b).count();
        assert!(live <= 2, "{live} compiles at {s}");
    }
    // make forks a job when wait() has reaped one (not when the job is about to exit): the k-th
    // compile starts after the (k-2)-th exit, and soon after it on these otherwise idle CPUs.
    let mut starts: Vec<u64> = cc.iter().map(|&(s, _)| s).collect();
    let mut exits: Vec<u64> = cc.iter().map(|&(_, e)| e).collect();
    starts.sort_unstable();
    exits.sort_unstable();
    for k in 2..starts.len() {
        let reaped = exits[k - 2];
        assert!(starts[k] >= reaped, "compile {k} starts at {} before the exit at {reaped}", starts[k]);
        assert!(starts[k] - reaped < MS, "compile {k} starts {} ns after the exit", starts[k] - reaped);
    }
    let ld = &tasks(&r, "ld")[0];
    assert!(cc.iter().all(|&(_, e)| e <= ld.started_ns.unwrap()), "link starts after every compile");
}

/// The ops a program runs, its loops unrolled (finite loops only).
fn unrolled(ops: &[schedlab_workload::Op]) -> Vec<schedlab_workload::Op> {
    use schedlab_workload::Op;
    let mut out = Vec::new();
    let mut i = 0;
    while i < ops.len() {
        match &ops[i] {
            Op::Loop { count, end } => {
                let body = unrolled(&ops[i + 1..*end as usize]);
                for _ in 0..*count {
                    out.extend(body.iter().copied());
                }
                i = *end as usize + 1;
            }
            op => {
                out.push(*op);
                i += 1;
            }
        }
    }
    out
}

/// make -j as GNU make runs it: the first `jobs` jobs are forked at once, and each further one only
/// after wait() has reaped a job; no semaphore stands in for the job tokens (a job that released a
/// token before its exit could be preempted between the two, which make never sees).
#[test]
fn kernel_build_make_forks_a_job_each_time_it_reaps_one() {
    use schedlab_workload::Op;
    for (spec, jobs, files) in [
        ("kernel-build[jobs=2,files=5]", 2, 5),
        ("kernel-build[jobs=3,files=4,processes=kbuild]", 3, 4),
        ("kernel-build[jobs=8,files=3]", 3, 3),
    ] {
        let w = builtin(spec).unwrap().unwrap();
        assert!(w.semaphores.is_empty(), "{spec}: {:?}", w.semaphores);
        let make = w.tasks.iter().find(|t| t.name == "make").unwrap();
        let seq: String = unrolled(&make.program.ops)
            .iter()
            .filter_map(|op| match op {
                Op::Fork(_) => Some('F'),
                Op::WaitChild => Some('w'),
                Op::WaitChildren => Some('W'),
                _ => None,
            })
            .collect();
        let want = format!("{}{}WFW", "F".repeat(jobs), "wF".repeat(files - jobs));
        assert_eq!(seq, want, "{spec}");
    }
}

/// `processes=kbuild`: Kbuild's command per file as arch/x86/Makefile builds it (`-pipe`): make forks
/// a shell, the shell the gcc driver, the driver cc1 and as joined by a pipe, then the shell runs
/// fixdep. cc1 writes 210 bytes of assembly a ms of its burst in 4 KiB writes, as reads them all and
/// pays 45 us a KiB; each file's burst belongs to the source tree, not to the run.
#[test]
fn kernel_build_kbuild_runs_each_files_programs_with_cc1_piping_into_as() {
    let spec = "kernel-build[jobs=2,files=6,processes=kbuild,compile=20ms,compile_stddev=10ms,link=5ms]";
    let run_seeded = |spec: &str, seed: u64| {
        let w = builtin(spec).unwrap().unwrap();
        let m = Machine::flat(2);
        let mut p = schedlab_policies::create("cfs").unwrap();
        let cfg =
            RunConfig { duration_ns: 60_000 * MS, seed, check_invariants: true, ..RunConfig::default() };
        Sim::new(&m, &w, p.as_mut(), "cfs", cfg).unwrap().run().unwrap()
    };
    let r = run_seeded(spec, 1);
    assert_eq!(r.stop_reason, "all_done");
    assert_eq!(counter(&r, "objects"), 6);
    // make, five processes per file (sh, gcc, cc1, as, fixdep: each a fork, then an exec), the link.
    assert_eq!(r.tasks.len(), 1 + 6 * 5 + 1);
    assert_eq!(tasks(&r, "fixdep").len(), 6);
    let bursts: Vec<u64> = (0..6).map(|f| tasks(&r, &format!("cc1-{f}"))[0].work_ns).collect();
    for (f, &burst) in bursts.iter().enumerate() {
        let chunks = (burst * 210 / MS).div_ceil(4096).max(1);
        let pipe = r.pipes.iter().find(|p| p.name == format!("cc1-as-{f}")).unwrap();
        assert_eq!((pipe.nr_sends, pipe.bytes), (chunks, chunks * 4096), "file {f}");
        assert_eq!(tasks(&r, &format!("as-{f}"))[0].work_ns, 2 * MS + chunks * 4 * 45 * US);
        assert_eq!(tasks(&r, &format!("sh-{f}"))[0].work_ns, 900 * US);
        assert_eq!(tasks(&r, &format!("gcc-{f}"))[0].work_ns, 1400 * US);
        // The driver outlives cc1 and as; the shell outlives the driver.
        let end = |name: String| tasks(&r, &name)[0].exited_ns.unwrap();
        assert!(end(format!("gcc-{f}")) >= end(format!("cc1-{f}")).max(end(format!("as-{f}"))));
        assert!(end(format!("sh-{f}")) > end(format!("gcc-{f}")));
    }
    let sh: Vec<(u64, u64)> = (0..6)
        .map(|f| {
            let t = tasks(&r, &format!("sh-{f}"))[0];
            (t.started_ns.unwrap(), t.exited_ns.unwrap())
        })
        .collect();
    for &(s, _) in &sh {
        assert!(sh.iter().filter(|&&(a, b)| a <= s && s < b).count() <= 2, "at most jobs shells at {s}");
    }
    // Log-normal around 20 ms, the same for another run seed, others for another tree.
    assert!(bursts.iter().all(|&b| b > 2 * MS && b < 200 * MS), "{bursts:?}");
    let again = run_seeded(spec, 2);
    assert_eq!((0..6).map(|f| tasks(&again, &format!("cc1-{f}"))[0].work_ns).collect::<Vec<_>>(), bursts);
    let other = run_seeded(&spec.replace("link=5ms", "link=5ms,tree_seed=2"), 1);
    assert_ne!((0..6).map(|f| tasks(&other, &format!("cc1-{f}"))[0].work_ns).collect::<Vec<_>>(), bursts);
    // The programs' costs mean nothing to one process per file: setting one there is an error.
    let e = builtin("kernel-build[files=6,fixdep_cost=2ms]").expect_err("an error");
    assert_eq!(e, "workload `kernel-build`: `fixdep_cost` applies only with `processes=kbuild`");
}

#[test]
fn unixbench_spawn_and_execl_count_their_loops() {
    let r = run("unixbench-spawn", 2, 50 * MS);
    let spawns = counter(&r, "spawns");
    assert!(spawns > 100);
    assert!((r.tasks.len() as u64).abs_diff(spawns + 1) <= 1);
    let r = run("unixbench-execl", 1, 30 * MS);
    assert!(counter(&r, "execs").abs_diff(100) <= 1);
    // An exec is the same task. On two CPUs CFS 2.6.38's sched_exec finds the exec'ing task's own
    // CPU loaded and the other idle, and moves it at every exec (each one right after its count).
    let r = run("unixbench-execl", 2, 30 * MS);
    assert_eq!(r.tasks.len(), 1);
    let execs = counter(&r, "execs");
    assert!(execs > 50, "{execs}");
    assert_eq!(r.tasks[0].nr_migrations, execs);
}

#[test]
fn pi_processes_share_one_cpu_by_nice() {
    let r = run("pi[n=4,work=100ms]", 1, 10_000 * MS);
    assert_eq!(r.summary.nr_exited, 4);
    // 400 ms of work, plus per switch at most its decision and context-switch cost and the work lost
    // to a cold cache (refill_evicted at half speed).
    let c = Machine::flat(1).costs;
    let per_switch =
        c.context_switch_ns + c.sched_base_ns + 8 * c.sched_per_task_ns + c.refill_evicted_ns / 2;
    let m = r.summary.makespan_ns.unwrap();
    assert!(m >= 400 * MS && m <= 400 * MS + r.summary.nr_switches * per_switch, "{m}");
    let r = run("pi[n=4,work=100ms,nice_half=true]", 1, 10_000 * MS);
    let last_nice0 = tasks(&r, "pi").iter().map(|t| t.exited_ns.unwrap()).max().unwrap();
    let first_nice10 = tasks(&r, "pi-nice10").iter().map(|t| t.exited_ns.unwrap()).min().unwrap();
    assert!(last_nice0 < first_nice10, "nice 0 finishes first");
}

#[test]
fn bonnie_serialises_on_one_disk() {
    let r = run("bonnie[procs=2,blocks=50]", 2, 10_000 * MS);
    assert_eq!(counter(&r, "blocks"), 100);
    assert!(r.summary.makespan_ns.unwrap() >= 100 * MS, "one request at a time");
}

#[test]
fn burn_programs_carry_table_4_1_activity_vectors() {
    let w = builtin("burn[kind=BX,n=2]").unwrap().unwrap();
    let a = w.tasks[0].activity.unwrap();
    assert_eq!((a.instr, a.l2, a.bus, a.int), (2, 10386, 11187, 1));
    let w = builtin("burn[kind=MMX]").unwrap().unwrap();
    assert_eq!(w.tasks[0].activity.unwrap().mmx, 4925);
    let r = run("burn[kind=P5,n=2]", 2, 100 * MS);
    assert!(r.tasks.iter().all(|t| t.work_ns > 95 * MS));
}

#[test]
fn workload_show_round_trips_to_an_identical_run() {
    for g in schedlab_workload::generators::generators() {
        let spec = match g.name {
            "hackbench" | "perf-messaging" => "hackbench[groups=1,fds=3,loops=5]".to_string(),
            "volanomark" => "volanomark[rooms=1,users=3,count=3]".to_string(),
            "c-ray" => "c-ray[threads=8,work=1ms]".to_string(),
            "pinned-spinners" => "pinned-spinners[threads=8,unpin_at=20ms]".to_string(),
            "nas-mg" => "nas-mg[threads=4,iterations=1,levels=3,top_work=2ms]".to_string(),
            "ferret" => "ferret[threads=2,queries=7,depth=2,load_cost=1ms,seg_cost=3ms]".to_string(),
            "blackscholes" => "blackscholes[threads=3,options=3000,runs=2]".to_string(),
            name => name.to_string(),
        };
        let w = builtin(&spec).unwrap().unwrap();
        let text = schedlab_workload::to_toml(&w);
        let back =
            schedlab_workload::parse_toml("show.toml", &text).unwrap_or_else(|e| panic!("{spec}: {e}"));
        let m = Machine::flat(2);
        let go = |w: &schedlab_workload::Workload| {
            let mut p = schedlab_policies::create("cfs").unwrap();
            let cfg = RunConfig { duration_ns: 50 * MS, ..RunConfig::default() };
            Sim::new(&m, w, p.as_mut(), "cfs", cfg).unwrap().run().unwrap().to_json()
        };
        assert!(go(&w) == go(&back), "{spec}: the re-read workload runs differently");
    }
}
