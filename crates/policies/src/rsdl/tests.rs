//! RSDL's documented behaviour; each expectation is worked out by hand from the design document's
//! rules (quota per level, staircase, minor and major rotations) in the comments beside it.

use super::*;
use crate::testworld::TestWorld;

const MS: Ns = 1_000_000;

fn world(cpus: u32) -> (TestWorld, Rsdl) {
    let w = TestWorld::new(cpus); // HZ 1000: RR_INTERVAL = 6 ticks = 6 ms
    let mut p = Rsdl::new(RsdlParams::default());
    p.init(&w.ctx());
    (w, p)
}

/// Runs CPU 0 tick by tick for `ms` ms, switching whenever a tick asks; returns the ms each task ran
/// and, per task, the time it first ran.
fn run(w: &mut TestWorld, p: &mut Rsdl, ms: u64) -> (Vec<u64>, Vec<Option<Ns>>) {
    let n = w.tasks.len();
    let (mut ran, mut first) = (vec![0; n], vec![None; n]);
    if w.cpus[0].curr.is_none() {
        w.pick(p, CpuId(0));
    }
    for _ in 0..ms {
        let t = w.cpus[0].curr.expect("a task runs");
        first[t.idx()].get_or_insert(w.now);
        ran[t.idx()] += 1;
        let resched = w.advance(p, MS);
        if !resched.is_empty() {
            w.stop(p, CpuId(0), SwitchReason::Preempted);
            w.pick(p, CpuId(0));
        }
    }
    (ran, first)
}

#[test]
fn rr_interval_quota_and_levels_follow_the_patch() {
    // 6 x HZ / 1001 + 1 ticks: HZ 1000 -> 6 (6 ms), 250 -> 2 (8 ms), 100 -> 1 (10 ms).
    assert_eq!((rr_interval_ticks(1000), rr_interval_ticks(250), rr_interval_ticks(100)), (6, 2, 1));
    let rr = 6 * MS;
    assert_eq!((rr_quota(0, rr), rr_quota(19, rr), rr_quota(-3, rr)), (rr, rr, 9 * MS));
    assert_eq!((rr_quota(-10, rr), rr_quota(-20, rr)), (15 * MS, 60 * MS));
    assert_eq!((levels(-20), levels(0), levels(19)), (40, 20, 1));
    let (w, p) = world(1);
    assert_eq!(p.rr_interval_ns(), 6 * MS);
    // Balancer weights: the entitlement of the nice level, 128 for nice 0.
    let mut w = w;
    let (a, b, c) = (w.add_task(0), w.add_task(19), w.add_task(-20));
    let ctx = w.ctx();
    assert_eq!(Rsdl::load_weight(&ctx, a, 6 * MS), 128);
    assert_eq!(Rsdl::load_weight(&ctx, b, 6 * MS), 6, "1 level of 1 quota: 128 / 20");
    assert_eq!(Rsdl::load_weight(&ctx, c, 6 * MS), 2560, "40 levels of 10 quotas");
}

#[test]
fn a_lone_task_walks_down_the_staircase_one_quota_per_level() {
    // Nice 0: levels 120..139, 6 ms each. After 6 ms it is at 121, after 60 ms at 130; after 120 ms
    // every level is spent, it expires, and the next decision starts a new major rotation at 120.
    let (mut w, mut p) = world(1);
    let a = w.add_task(0);
    w.start(&mut p, a);
    assert_eq!(
        (p.prio_of(a), p.time_slice(a), p.level_quota(CpuId(0), 120)),
        (120, 6 * MS as i64, 6 * MS as i64)
    );
    run(&mut w, &mut p, 6);
    assert_eq!(p.prio_of(a), 121);
    run(&mut w, &mut p, 54);
    assert_eq!(p.prio_of(a), 130);
    assert_eq!(p.rotation(CpuId(0)), 0);
    run(&mut w, &mut p, 60);
    assert_eq!((p.rotation(CpuId(0)), p.prio_of(a)), (1, 120));
    assert_eq!(p.stats()[0].value, 20, "one minor rotation per level");
}

#[test]
fn nice_divides_the_cpu_by_levels_times_quota() {
    // Nice 0 (levels 120..139) and nice 10 (130..139), 6 ms per level: per major rotation 120 ms and
    // 60 ms. Levels 120..129 are A's alone (60 ms); at 130..139 B (queued there from the start) runs
    // its quota, then A: 2:1 over each 180 ms rotation.
    let (mut w, mut p) = world(1);
    let a = w.add_task(0);
    let b = w.add_task(10);
    w.start(&mut p, a);
    w.start(&mut p, b);
    let (ran, first) = run(&mut w, &mut p, 360);
    assert_eq!((ran[a.idx()], ran[b.idx()]), (240, 120));
    assert_eq!(first[b.idx()], Some(60 * MS), "B waits for A's ten levels above it");
    assert_eq!(p.rotation(CpuId(0)), 2);
}

#[test]
fn nothing_starves_and_the_wait_is_bounded_by_the_quotas_above() {
    // Nice -20 gets 40 levels of 60 ms; nice 19 one level (139) of 6 ms. The nice-19 task waits for
    // the 39 levels above it, 39 x 60 = 2340 ms, then runs first at 139 (queued there first).
    let (mut w, mut p) = world(1);
    let h = w.add_task(-20);
    let l = w.add_task(19);
    w.start(&mut p, h);
    w.start(&mut p, l);
    let (ran, first) = run(&mut w, &mut p, 2406 * 2);
    assert_eq!(first[l.idx()], Some(2340 * MS));
    assert_eq!((ran[h.idx()], ran[l.idx()]), (4800, 12), "2400 : 6 per rotation");
}

#[test]
fn when_a_level_runs_out_its_queued_tasks_move_down_with_their_slices() {
    let (mut w, mut p) = world(1);
    let a = w.add_task(0);
    let b = w.add_task(0);
    w.start(&mut p, a);
    w.start(&mut p, b);
    assert_eq!(p.level_quota(CpuId(0), 120), 12 * MS as i64);
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(a));
    // Let the level's deadline be 2 ms away.
    p.q.rqs[0].x.quota[20] = 2 * MS as i64;
    assert!(w.advance(&mut p, MS).is_empty());
    assert_eq!(w.advance(&mut p, MS), vec![CpuId(0)], "the level's quota is spent: reschedule");
    assert_eq!((p.prio_of(b), p.time_slice(b)), (121, 6 * MS as i64), "B moved down, slice intact");
    assert_eq!(p.level_quota(CpuId(0), 121), 6 * MS as i64);
    // A had 4 ms of slice left, but its level has no quota: it takes 121 with a fresh quota, behind B.
    w.stop(&mut p, CpuId(0), SwitchReason::Preempted);
    assert_eq!(
        (p.prio_of(a), p.time_slice(a), p.level_quota(CpuId(0), 121)),
        (121, 6 * MS as i64, 12 * MS as i64)
    );
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(b));
}

#[test]
fn a_fresh_wakeup_preempts_a_task_further_down_its_staircase() {
    let (mut w, mut p) = world(1);
    let a = w.add_task(0);
    let s = w.add_task(0);
    w.start(&mut p, a);
    w.start(&mut p, s);
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(a));
    // A runs a slice (6 ms) at 120; then S runs 1 ms and sleeps with 5 ms left at 120.
    w.advance(&mut p, 6 * MS);
    w.stop(&mut p, CpuId(0), SwitchReason::Preempted);
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(s));
    w.advance(&mut p, MS);
    w.stop(&mut p, CpuId(0), SwitchReason::Blocked);
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(a));
    assert_eq!(p.prio_of(a), 121);
    // S wakes in the same rotation with slice left and its level's quota left: back at 120, better
    // than A's 121, so it preempts.
    w.wake(&mut p, s, CpuId(0));
    assert_eq!((p.prio_of(s), p.time_slice(s)), (120, 5 * MS as i64));
    assert!(p.check_preempt(&w.ctx(), CpuId(0), a, s, WakeKind::Wakeup));
    // A SCHED_BATCH task does not preempt.
    w.tasks[s.idx()].class = SchedClass::Batch;
    assert!(!p.check_preempt(&w.ctx(), CpuId(0), a, s, WakeKind::Wakeup));
}

#[test]
fn a_yield_goes_to_the_expired_array() {
    let (mut w, mut p) = world(1);
    let a = w.add_task(0);
    let b = w.add_task(0);
    w.start(&mut p, a);
    w.start(&mut p, b);
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(a));
    w.stop(&mut p, CpuId(0), SwitchReason::Yielded);
    assert!(p.in_expired(a));
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(b));
}

#[test]
fn bad_parameters_are_refused() {
    assert!(crate::create("rsdl[rr_interval_ns=10]").is_err());
    assert!(crate::create("rsdl[rr_interval_ns=8000000]").is_ok());
}
