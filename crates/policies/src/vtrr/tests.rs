//! VTRR's documented behaviour; each expected schedule is worked out by hand from the rules of
//! Nieh, Vaill and Zhong (2001), sec. 2, in the comments beside it.

use super::*;
use crate::testworld::TestWorld;

const Q: Ns = 10_000_000;

fn world(cpus: u32) -> (TestWorld, Vtrr) {
    let w = TestWorld::new(cpus);
    let mut p = Vtrr::new(VtrrParams::default());
    p.init(&w.ctx());
    (w, p)
}

/// Runs `n` full quanta on CPU 0 and returns who ran each.
fn run_quanta(w: &mut TestWorld, p: &mut Vtrr, n: usize) -> Vec<TaskId> {
    (0..n)
        .map(|_| {
            let t = w.pick(p, CpuId(0)).expect("a client");
            w.advance(p, Q);
            w.stop(p, CpuId(0), SwitchReason::SliceExpired);
            t
        })
        .collect()
}

#[test]
fn shares_follow_nice_linearly_or_by_cfs_weights() {
    assert_eq!(
        (ShareMap::Linear.share(-20), ShareMap::Linear.share(0), ShareMap::Linear.share(19)),
        (40, 20, 1)
    );
    assert_eq!(
        (ShareMap::Cfs.share(0), ShareMap::Cfs.share(-20), ShareMap::Cfs.share(19)),
        (1024, 88761, 15)
    );
}

#[test]
fn the_queue_is_ordered_by_share_and_by_arrival_within_a_share() {
    let (mut w, mut p) = world(1);
    let a = w.add_task(0);
    let b = w.add_task(5);
    let c = w.add_task(-5);
    let d = w.add_task(0);
    for t in [a, b, c, d] {
        w.start(&mut p, t);
    }
    assert_eq!(p.queue(), vec![c, a, d, b]);
    // A client that blocks leaves; when it returns it goes behind its equals.
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(c));
    w.stop(&mut p, CpuId(0), SwitchReason::Blocked);
    assert_eq!(p.queue(), vec![a, d, b]);
    w.wake(&mut p, c, CpuId(0));
    assert_eq!(p.queue(), vec![c, a, d, b]);
}

#[test]
fn shares_3_2_1_give_the_papers_schedule() {
    // Shares 3, 2, 1 (nice 17, 18, 19); sum 6. In quanta: VT steps 1/3, 1/2, 1; QVT steps 1/6.
    // Counters start 3, 2, 1.
    //  1. no current client: the head, A (TC_A 2; VT_A 1/3, QVT 1/6)
    //  2. B after A: TC 2 > 2 no; VT_B 0 < 1/6 -> B (TC_B 1; VT_B 1/2, QVT 2/6)
    //  3. C after B: TC 1 > 1 no; VT_C 0 < 2/6 -> C (TC_C 0; VT_C 1, QVT 3/6)
    //  4. nothing after C: the head A (TC_A 1; VT_A 2/3, QVT 4/6)
    //  5. B: VT_B 1/2 < 4/6 -> B (TC_B 0; VT_B 1, QVT 5/6)
    //  6. C has no quanta left: the head A (TC_A 0; VT_A 1, QVT 1)
    //  7. B has none either: the head has TC 0, a new cycle: A.
    let (mut w, mut p) = world(1);
    let a = w.add_task(17);
    let b = w.add_task(18);
    let c = w.add_task(19);
    for t in [a, b, c] {
        w.start(&mut p, t);
    }
    assert_eq!((p.time_counter(a), p.time_counter(b), p.time_counter(c)), (3, 2, 1));
    let seq = run_quanta(&mut w, &mut p, 12);
    assert_eq!(seq, vec![a, b, c, a, b, a, a, b, c, a, b, a]);
    assert_eq!(p.stats()[0].value, 1, "one cycle reset");
    // After each full cycle every virtual time equals the queue virtual time (perfect fairness), up to
    // the integer division of each charge (under one unit each: 12 quanta of 10 ticks, 132 charges).
    for t in [a, b, c] {
        assert!(p.virtual_time(t).abs_diff(p.queue_virtual_time()) <= 132, "{t:?}");
    }
    assert!(p.virtual_time(a) > 12 * Q as u128 / 6 * VT_ONE - 132);
}

#[test]
fn a_larger_counter_after_the_current_client_runs_first() {
    // Shares 2, 1, 1 (nice 18, 19, 19); sum 4; VT steps 1/2, 1, 1; QVT step 1/4.
    //  1. A (TC 1; VT_A 1/2, QVT 1/4)   2. B: VT 0 < 1/4 (TC_B 0; VT_B 1, QVT 1/2)
    //  3. C after B: TC_C 1 > TC_B 0, the counter rule (TC_C 0; QVT 3/4)   4. the head A (TC 0)
    //  5. B has TC 0, the head has TC 0: a new cycle, A.
    let (mut w, mut p) = world(1);
    let a = w.add_task(18);
    let b = w.add_task(19);
    let c = w.add_task(19);
    for t in [a, b, c] {
        w.start(&mut p, t);
    }
    let seq = run_quanta(&mut w, &mut p, 8);
    assert_eq!(seq, vec![a, b, c, a, a, b, c, a]);
    let stat = |name: &str| p.stats().iter().find(|s| s.name == name).unwrap().value;
    assert_eq!(stat("nr_counter_rule"), 2, "C after B, in each cycle");
}

#[test]
fn a_client_ahead_of_the_queue_virtual_time_sends_the_scheduler_back_to_the_head() {
    let (mut w, mut p) = world(1);
    let a = w.add_task(0);
    let b = w.add_task(0);
    for t in [a, b] {
        w.start(&mut p, t);
    }
    p.cur = a.0;
    p.clients[a.idx()].tc = 5;
    p.clients[b.idx()].tc = 5;
    // VFT_B - QVT < q / S_B holds exactly when VT_B < QVT.
    p.clients[b.idx()].vt = p.qvt + 1;
    assert_eq!(p.rule_choice(), a.0, "B is ahead: back to the head");
    p.clients[b.idx()].vt = p.qvt;
    assert_eq!(p.rule_choice(), a.0, "equal is not behind");
    p.clients[b.idx()].vt = p.qvt.saturating_sub(1);
    p.qvt += 2;
    assert_eq!(p.rule_choice(), b.0, "B is behind: it runs");
    // With no quanta left in the cycle it does not, even when behind.
    p.clients[b.idx()].tc = 0;
    assert_eq!(p.rule_choice(), a.0);
}

#[test]
fn cpu_shares_converge_to_the_share_ratios() {
    // Shares 20, 10, 5 (nice 0, 10, 15): every cycle of 35 quanta gives exactly 20, 10 and 5.
    let (mut w, mut p) = world(1);
    let ts: Vec<TaskId> = [0, 10, 15].iter().map(|&n| w.add_task(n)).collect();
    for &t in &ts {
        w.start(&mut p, t);
    }
    let seq = run_quanta(&mut w, &mut p, 350);
    let count = |t: TaskId| seq.iter().filter(|&&x| x == t).count();
    assert_eq!((count(ts[0]), count(ts[1]), count(ts[2])), (200, 100, 50));
    // Within a cycle the service error stays bounded: after any prefix of the schedule no client is
    // more than two quanta away from its exact share of the time so far.
    let total: u32 = 35;
    for k in 1..=seq.len() {
        for (&t, share) in ts.iter().zip([20u32, 10, 5]) {
            let got = seq[..k].iter().filter(|&&x| x == t).count() as f64;
            let ideal = k as f64 * share as f64 / total as f64;
            assert!((got - ideal).abs() <= 2.0, "after {k} quanta {t:?} got {got}, ideal {ideal:.2}");
        }
    }
}

#[test]
fn decisions_examine_a_constant_number_of_clients_whatever_the_queue_length() {
    // Equal shares: a cycle of n x 20 quanta. Per decision the rule looks at the current client, the
    // next one and (for the cycle reset) every client once per cycle: at most about 4 per decision
    // for 10 clients and for 1,000 alike, where a scan would look at every client.
    for n in [10usize, 1000] {
        let (mut w, mut p) = world(1);
        let ts: Vec<TaskId> = (0..n).map(|_| w.add_task(0)).collect();
        for &t in &ts {
            w.start(&mut p, t);
        }
        p.take_examined();
        let decisions = n * 20;
        run_quanta(&mut w, &mut p, decisions);
        let per = p.take_examined() as f64 / decisions as f64;
        assert!(per <= 4.5, "{n} clients: {per:.2} examined per decision");
    }
}

#[test]
fn an_early_leaver_gets_no_time_back_and_a_leader_keeps_its_lead() {
    // Equal shares, A and B. A has a full quantum, then B runs 1 ms and blocks: it had 1 ms while its
    // fair share of the 11 ms was 5.5 ms. Behind, it gets nothing back: it returns at QVT.
    let (mut w, mut p) = world(1);
    let a = w.add_task(0);
    let b = w.add_task(0);
    for t in [a, b] {
        w.start(&mut p, t);
    }
    assert_eq!(run_quanta(&mut w, &mut p, 1), vec![a]);
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(b), "TC_B 20 > TC_A 19");
    w.advance(&mut p, 1_000_000);
    w.stop(&mut p, CpuId(0), SwitchReason::Blocked);
    assert!(p.virtual_time(b) < p.queue_virtual_time());
    run_quanta(&mut w, &mut p, 3);
    w.wake(&mut p, b, CpuId(0));
    assert_eq!(p.virtual_time(b), p.queue_virtual_time(), "behind when it left: nothing back");
    // A, now ahead (it ran alone), blocks after 2 ms of its next quantum and returns later: its lead
    // over the queue virtual time is what it was when it left.
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(a), "B (TC 16, VT = QVT) is not behind: the head");
    w.advance(&mut p, 2_000_000);
    w.stop(&mut p, CpuId(0), SwitchReason::Blocked);
    let lead = p.virtual_time(a) - p.queue_virtual_time();
    assert!(lead > 0);
    run_quanta(&mut w, &mut p, 2);
    w.wake(&mut p, a, CpuId(0));
    assert_eq!(p.virtual_time(a) - p.queue_virtual_time(), lead);
}

#[test]
fn a_joining_client_takes_at_most_the_counter_of_the_client_before_it() {
    let (mut w, mut p) = world(1);
    let a = w.add_task(0); // share 20
    let b = w.add_task(0);
    w.start(&mut p, a);
    run_quanta(&mut w, &mut p, 15);
    assert_eq!(p.time_counter(a), 5);
    w.start(&mut p, b);
    assert_eq!(p.time_counter(b), 5, "min(share 20, TC of A 5)");
    // A larger share joins at the head with its full share.
    let c = w.add_task(-10);
    w.start(&mut p, c);
    assert_eq!((p.queue()[0], p.time_counter(c)), (c, 30));
    // B (VT = QVT) is not behind: back to the head, C. C blocks during its quantum and returns in
    // the same cycle: it keeps no more than the 29 quanta it left with.
    assert_eq!(w.pick(&mut p, CpuId(0)), Some(c));
    w.advance(&mut p, 1_000_000);
    w.stop(&mut p, CpuId(0), SwitchReason::Blocked);
    w.wake(&mut p, c, CpuId(0));
    assert_eq!(p.time_counter(c), 29);
}

#[test]
fn two_cpus_share_one_queue_and_never_run_one_client_twice() {
    let (mut w, mut p) = world(2);
    let ts: Vec<TaskId> = (0..3).map(|_| w.add_task(0)).collect();
    for &t in &ts {
        w.start(&mut p, t);
    }
    let x = w.pick(&mut p, CpuId(0)).unwrap();
    let y = w.pick(&mut p, CpuId(1)).unwrap();
    assert_ne!(x, y);
    // Over 60 quanta per CPU, equal shares get equal numbers of quanta (40 each).
    let mut count = [0usize; 3];
    count[x.idx()] += 1;
    count[y.idx()] += 1;
    for _ in 0..59 {
        w.advance(&mut p, Q);
        for cpu in [CpuId(0), CpuId(1)] {
            w.stop(&mut p, cpu, SwitchReason::SliceExpired);
        }
        for cpu in [CpuId(0), CpuId(1)] {
            let t = w.pick(&mut p, cpu).unwrap();
            count[t.idx()] += 1;
        }
    }
    assert_eq!(count, [40, 40, 40]);
}

#[test]
fn bad_parameters_are_refused() {
    let e = crate::create("vtrr[shares=weird]").err().unwrap();
    assert!(e.to_string().contains("expected `linear` or `cfs`"), "{e}");
    assert!(crate::create("vtrr[quantum_ns=10]").is_err());
    assert!(crate::create("vtrr[quantum_ns=5000000,shares=cfs]").is_ok());
}
