//! A public trace: the head of TRAPpy's `tests/trace_not_raw.txt` (Apache-2.0, see data/README.md),
//! a `trace-cmd report` of a 6-CPU machine in the plugin format with no wakeup events. The expected
//! numbers are worked out by hand from the lines of the file (timestamps in microseconds after
//! 106439.675000).

use schedlab_trace::import::Filter;

const FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/trappy-trace_not_raw-head.txt");

#[test]
fn trappys_trace_cmd_report_reads_and_measures_as_worked_out_by_hand() {
    let bytes = std::fs::read(FILE).unwrap();
    let raw = schedlab_trace::read_bytes(FILE, &bytes).unwrap();
    assert_eq!(raw.format, "text (plugin)");
    assert_eq!(raw.nr_cpus, Some(6), "the `cpus=6` header");
    assert_eq!(raw.skipped, 2, "two bprint events (their second lines are continuations)");
    assert_eq!(raw.events.len(), 24, "24 sched_switch lines");
    let rec = schedlab_trace::timeline::build(raw);
    assert!(rec.warnings.is_empty(), "{:?}", rec.warnings);
    assert!(!rec.has_wakeups);
    // From the first sched_switch (591) to the last (841).
    assert_eq!(rec.span_ns(), 250_000);
    let th = |pid: i32| rec.threads.iter().find(|t| t.pid == pid).unwrap();
    // 4729 on CPU 1: 718-733, 742-752, 759-768, 774-782, 789-796, 802-810, 815-819, 824-828, and
    // switched in again at 841, the end: 15+10+9+8+7+8+4+4 = 65 us, 8 sleeps.
    let t = th(4729);
    assert_eq!((t.run_ns, t.nvcsw, t.nivcsw, t.nr_switch_in), (65_000, 8, 0, 9));
    // Without wakeup events, a sleep lasts until the switch-in: 733-742 ... 828-841 (from the last
    // sleep at 828 to the switch-in at 841: 13), 9+7+6+7+6+5+5+13 = 58 us.
    assert_eq!(t.sleep_ns, 58_000);
    // 4734 (`ls` after its exec, `trace-cmd` in the switch fields) was running on CPU 2 when the
    // trace began, is preempted at 591, waits 206 us and runs on CPU 5 from 797 to the end (44 us):
    // one migration, inferred from the change of CPU.
    let t = th(4734);
    assert_eq!((t.run_ns, t.wait_ns, t.nivcsw, t.nr_migrations), (44_000, 206_000, 1, 1));
    assert_eq!(t.runs.iter().map(|r| r.cpu).collect::<Vec<_>>(), vec![2, 5]);
    // 4732 on CPU 2 from 613 to its preemption at 825 (212 us), runnable until 841 (16 us).
    let t = th(4732);
    assert_eq!((t.run_ns, t.nivcsw, t.wait_ns), (212_000, 1, 16_000));
    // migration/2 (prio 0: real time) ran 591-613; a kernel thread, left out of the report and
    // the import by default.
    let m = th(18);
    assert_eq!(m.run_ns, 22_000);
    let report = schedlab_trace::stats::report(&rec, &Filter::default(), "trappy");
    assert!(report.tasks.iter().all(|t| !t.name.starts_with("migration/")));
    let with_kernel = Filter { kernel_threads: true, ..Filter::default() };
    let report = schedlab_trace::stats::report(&rec, &with_kernel, "trappy");
    let mig = report.tasks.iter().find(|t| t.name == "migration/2-18").unwrap();
    assert_eq!((mig.class, mig.run_ns), (schedlab_core::SchedClass::Fifo, 22_000));
    // CPU 1 was busy 65 us (4729) + 718-698 = 20 us (4730 from 698) + 836-841 = 5 (4730) of 250.
    assert_eq!(report.cpus[1].busy_ns, 90_000);
    // The timeline says the same per 1 us column: 250 of them, CPU 1 busy 90 us in all, left 11
    // times, each time asleep (4731's at 698, CPU 1's first event; 4729's eight sleeps; 4730's at
    // 718 and 841); on CPU 2, 4734's and 4732's preemptions (at 591 and 825) are the two runnable
    // leavings.
    let tl = report.timeline.as_ref().expect("a recording has a timeline");
    assert_eq!((tl.column_ns, tl.columns, tl.cpus.len()), (1_000, 250, 6));
    let cpu1 = &tl.cpus[1];
    assert_eq!(cpu1.busy_ns.iter().sum::<u64>(), 90_000);
    assert_eq!((cpu1.switches.iter().sum::<u32>(), cpu1.preempted.iter().sum::<u32>()), (11, 0));
    assert_eq!(tl.cpus[2].preempted.iter().sum::<u32>(), 2);
    // 4729 holds CPU 1 over 718-733 (columns 127-141 after the first switch at 591).
    let id_4729 = report.tasks.iter().position(|t| t.name.ends_with("-4729")).unwrap() as u32;
    assert!((127..142).all(|c| cpu1.task[c] == Some(id_4729) && cpu1.busy_ns[c] == 1_000));
    assert_eq!(tl.applications[cpu1.app[127].unwrap() as usize], "trace-cmd");
}

#[test]
fn the_public_trace_imports_and_replays() {
    let rec = schedlab_trace::load(FILE).unwrap();
    let opts = schedlab_trace::ImportOptions {
        name: "trappy".into(),
        bursts: schedlab_trace::BurstOp::Spin,
        filter: Filter::default(),
    };
    let im = schedlab_trace::import(&rec, &opts).unwrap();
    // No wakeup events: every sleep is a timed sleep, none a wait for a traced waker.
    assert_eq!(im.nr_edges, 0);
    // 4729's eight and 4730's (718-836); sleeps still going at the end (4730 from 841, 4731, 4733)
    // end their programs.
    assert_eq!(im.nr_sleeps, 8 + 1);
    let w = &im.workload;
    let machine = schedlab_sim::Machine::flat(6);
    let mut p = schedlab_policies::create("eevdf").unwrap();
    let cfg = schedlab_sim::RunConfig { duration_ns: w.duration_ns.unwrap(), ..Default::default() };
    let r = schedlab_sim::Sim::new(&machine, w, p.as_mut(), "eevdf".to_string(), cfg).unwrap().run().unwrap();
    assert_eq!(r.stop_reason, "all_done");
    let ran = |name: &str| r.tasks.iter().find(|t| t.template == name).unwrap().run_ns;
    assert_eq!(ran("trace-cmd-4729"), 65_000);
    assert_eq!(ran("trace-cmd-4734"), 44_000);
    assert_eq!(ran("trace-cmd-4732"), 212_000);
}
