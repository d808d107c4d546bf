//! EEVDF as in Linux 6.18: 6.12 with the slice protection of 6.17 (`se->vprot`; tip commits
//! 74eec63661d4 "Fix NO_RUN_TO_PARITY case", 9de74a9850b9 "Remove spurious shorter slice
//! preemption", 052c3d87c82e "Limit run to parity to the min slice of enqueued entities",
//! 3a0baa8e6c57 "Fix entity's lag with run to parity", 0b9ca2dcabc3 "Always trigger resched at the
//! end of a protected period"), checked against values derived by hand from those changes.
//!
//! Both tests run on one CPU (base slice 0.7 ms) with new tasks placed with a whole request
//! (`place_deadline_initial = false`) and no delayed dequeue, so every vruntime is simple to follow.

use super::{Cfs, CfsParams, EevdfKernel, EevdfParams};
use crate::testworld::TestWorld;
use schedlab_core::{CpuId, SchedPolicy, SwitchReason, WakeKind};

const CPU0: CpuId = CpuId(0);

#[test]
fn the_default_kernel_is_618() {
    assert_eq!(CfsParams::default().eevdf_kernel, EevdfKernel::V6_18);
}

fn eevdf(w: &TestWorld, kernel: EevdfKernel, run_to_parity: bool) -> Cfs {
    let p = CfsParams {
        eevdf_kernel: kernel,
        run_to_parity,
        place_deadline_initial: false,
        f612: super::Features612 { delay_dequeue: Some(false), ..Default::default() },
        ..CfsParams::default()
    };
    let mut c = Cfs::new_eevdf(EevdfParams(p)).expect("valid parameters");
    c.init(&w.ctx());
    c
}

/// `set_protect_slice` at pick time. S (own slice 0.3 ms) and H (base slice 0.7 ms) start at v0
/// with deadlines v0 + 0.3 and v0 + 0.7 ms. S runs its 0.3 ms and is preempted (V = v0 + 0.15 ms, so
/// S is not eligible); H is picked. 6.18 protects H only for the shortest queued slice, S's 0.3 ms:
/// vprot = v0 + 0.3 ms. After 0.35 ms, H's vruntime is past it, and the tick's `update_curr`
/// reschedules (6.18 reschedules at the end of every protected period). 6.12 protects H up to its
/// deadline (v0 + 0.7 ms) and does not. 6.18 without RUN_TO_PARITY protects for the base slice
/// (0.7 ms), so up to the deadline too.
#[test]
fn the_protection_lasts_the_shortest_queued_slice() {
    let cases = [
        (EevdfKernel::V6_18, true, true),
        (EevdfKernel::V6_12, true, false),
        (EevdfKernel::V6_18, false, false),
    ];
    for (kernel, run_to_parity, resched) in cases {
        let mut w = TestWorld::new(1);
        w.tick_ns = 1_000_000_000; // ticks are called by hand
        let mut c = eevdf(&w, kernel, run_to_parity);
        let (s, h) = (w.add_task(0), w.add_task(0));
        w.tasks[s.idx()].slice_ns = Some(300_000);
        w.start(&mut c, s);
        w.start(&mut c, h);
        assert_eq!(w.pick(&mut c, CPU0), Some(s), "the earlier deadline");
        w.advance(&mut c, 300_000);
        w.stop(&mut c, CPU0, SwitchReason::Preempted);
        assert!(!c.is_eligible(s));
        assert_eq!(w.pick(&mut c, CPU0), Some(h));
        w.advance(&mut c, 350_000);
        assert_eq!(c.tick(&w.ctx(), CPU0, h), resched, "{kernel:?}, RUN_TO_PARITY={run_to_parity}");
    }
}

/// `check_preempt_wakeup_fair` and `update_protect_slice`. S (slice 0.3 ms) runs 0.3 ms beside H
/// (V = v0 + 0.15 ms) and blocks with lag -0.15 ms. H is picked alone: protected to its deadline,
/// v0 + 0.7 ms. After 0.1 ms S wakes, placed at V - lag x (W + w) / W = v0 + 0.1 + 0.3 ms: not
/// eligible, so it does not win even without H's protection, and H keeps the CPU in both versions.
/// 6.18 then cuts H's protection to S's slice from now (vprot = v0 + 0.4 ms); after 0.35 ms more the
/// tick reschedules. 6.12 leaves the protection (S is not eligible, so no `do_preempt_short`) and
/// does not.
#[test]
fn a_shorter_slice_that_does_not_win_cuts_the_protection() {
    for (kernel, resched) in [(EevdfKernel::V6_18, true), (EevdfKernel::V6_12, false)] {
        let mut w = TestWorld::new(1);
        w.tick_ns = 1_000_000_000;
        let mut c = eevdf(&w, kernel, true);
        let (s, h) = (w.add_task(0), w.add_task(0));
        w.tasks[s.idx()].slice_ns = Some(300_000);
        w.start(&mut c, s);
        w.start(&mut c, h);
        assert_eq!(w.pick(&mut c, CPU0), Some(s));
        w.advance(&mut c, 300_000);
        w.stop(&mut c, CPU0, SwitchReason::Blocked);
        assert_eq!(c.lag_of(s), -150_000, "V - v_S at the dequeue");
        assert_eq!(w.pick(&mut c, CPU0), Some(h));
        w.advance(&mut c, 100_000);
        w.wake(&mut c, s, CPU0);
        assert_eq!(c.vruntime_of(s).wrapping_sub(c.vruntime_of(h)), 300_000, "placed 0.3 ms right of H");
        assert!(!c.is_eligible(s));
        assert!(!c.check_preempt(&w.ctx(), CPU0, h, s, WakeKind::Wakeup), "{kernel:?}: S does not win");
        w.advance(&mut c, 350_000);
        assert_eq!(c.tick(&w.ctx(), CPU0, h), resched, "{kernel:?}");
    }
}

/// 6.12's group entity slice (`enqueue_task_fair`: `se->slice = slice; se->custom_slice = 1` with
/// `slice = cfs_rq_min_slice(cfs_rq)` of the level below; `dequeue_entities`' second loop): a
/// group holding a task of 0.3 ms and one of the base slice (0.7 ms) asks for 0.3 ms; when the
/// short task leaves, the group's entity asks for 0.7 ms again. 6.6 has no per-task slices.
#[test]
fn a_group_entity_asks_for_the_shortest_slice_below_it() {
    let mut w = TestWorld::new(1);
    w.groups.push(schedlab_core::GroupInfo { parent: Some(schedlab_core::GroupId(0)), shares: 1024 });
    let g = schedlab_core::GroupId(1);
    let mut c = eevdf(&w, EevdfKernel::V6_18, true);
    let (s, h, r) = (w.add_task(0), w.add_task(0), w.add_task(0));
    w.tasks[s.idx()].group = g;
    w.tasks[h.idx()].group = g;
    w.tasks[s.idx()].slice_ns = Some(300_000);
    let gse = c.group_se[g.idx()] as usize; // one CPU: the group's entity on CPU 0
    w.start(&mut c, h);
    assert_eq!(c.ses[gse].slice, 700_000, "the base slice while only H is in the group");
    w.start(&mut c, r);
    w.start(&mut c, s);
    assert_eq!(c.ses[gse].slice, 300_000, "S's slice once S joins");
    // S runs, then sleeps: the group keeps H, whose slice it takes.
    while w.pick(&mut c, CPU0) != Some(s) {
        w.stop(&mut c, CPU0, SwitchReason::Preempted);
        w.advance(&mut c, 100_000);
    }
    w.stop(&mut c, CPU0, SwitchReason::Blocked);
    assert!(!c.is_delayed(s), "no delayed dequeue in these tests");
    assert_eq!(c.ses[gse].slice, 700_000, "H's slice once S has left");
}

/// `update_cfs_group(se)` (6.6 `enqueue_entity`) reweights the entity being enqueued from its own
/// runqueue, which already holds the task below it: a group's first task enters with the group's
/// full shares, so a group of shares 2048 beside one of 1024 with two tasks gets two thirds of the
/// CPU from the first millisecond (it used to enter at `MIN_SHARES` and wait out a deadline 1,000
/// times too far, about half a second on one CPU). A group created after `init` (`group_new`, as the
/// sched_ext adapter makes them) works the same.
#[test]
fn a_groups_first_task_enters_at_the_groups_full_shares() {
    for late in [false, true] {
        let mut w = TestWorld::new(1);
        let (a, b) = (schedlab_core::GroupId(1), schedlab_core::GroupId(2));
        let mut c = if late {
            let mut c = eevdf(&w, EevdfKernel::V6_6, true);
            for shares in [1024, 2048] {
                w.groups.push(schedlab_core::GroupInfo { parent: Some(schedlab_core::GroupId(0)), shares });
                c.group_new(&w.ctx(), schedlab_core::GroupId(w.groups.len() as u32 - 1));
            }
            c
        } else {
            for shares in [1024, 2048] {
                w.groups.push(schedlab_core::GroupInfo { parent: Some(schedlab_core::GroupId(0)), shares });
            }
            eevdf(&w, EevdfKernel::V6_6, true)
        };
        let (a1, a2, b1) = (w.add_task(0), w.add_task(0), w.add_task(0));
        w.tasks[a1.idx()].group = a;
        w.tasks[a2.idx()].group = a;
        w.tasks[b1.idx()].group = b;
        for t in [a1, a2, b1] {
            w.start(&mut c, t);
        }
        assert_eq!(c.ses[c.group_se[b.idx()] as usize].weight, 2048, "late {late}");
        // 300 ms in 100 us steps, the running task put back and the next picked at each step.
        let mut ran = [0u64; 3];
        for _ in 0..3000 {
            let t = w.pick(&mut c, CPU0).expect("a task");
            w.advance(&mut c, 100_000);
            ran[[a1, a2, b1].iter().position(|&x| x == t).unwrap()] += 100_000;
            w.stop(&mut c, CPU0, SwitchReason::Preempted);
        }
        let b_share = ran[2] as f64 / 300e6;
        assert!((b_share - 2.0 / 3.0).abs() < 0.03, "late {late}: b got {b_share:.3} of the first 300 ms");
    }
}
