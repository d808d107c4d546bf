//! UTIL_EST (kernel/sched/fair.c of Debian's 6.12.117: `util_est_update`, `util_est_enqueue`,
//! `util_est_dequeue`, `cpu_util`): the estimate takes a rise at once and a fall a quarter at a time,
//! is not lowered for a task that waited, is summed per CPU only while the task is queued, and
//! makes a CPU whose woken task PELT has forgotten look as busy as the task was. Each expected
//! value is computed here from the rule and the task's stored utilisation at its sleep.

use super::{Cfs, CfsParams, EevdfParams};
use crate::testworld::TestWorld;
use schedlab_core::{CpuId, SchedPolicy, SwitchReason};

const CPU0: CpuId = CpuId(0);
const MS: u64 = 1_000_000;

fn eevdf(w: &TestWorld, util_est: bool) -> Cfs {
    let p = CfsParams {
        util_est,
        f612: super::Features612 { delay_dequeue: Some(false), ..Default::default() },
        ..CfsParams::default()
    };
    let mut c = Cfs::new_eevdf(EevdfParams(p)).expect("valid parameters");
    c.init(&w.ctx());
    c
}

/// Runs the task alone on CPU 0 for `run_ns` (ticks update its signal) and puts it to sleep;
/// returns its stored (util_avg, runnable_avg) as `util_est_update` read them.
fn run_then_sleep(w: &mut TestWorld, c: &mut Cfs, run_ns: u64) -> (u64, u64) {
    let t = w.pick(c, CPU0).expect("the task");
    w.advance(c, run_ns);
    let avg = c.pelt_task[t.idx()];
    w.stop(c, CPU0, SwitchReason::Blocked);
    (avg.util_avg, avg.runnable_avg)
}

#[test]
fn the_estimate_rises_at_once_and_falls_a_quarter_at_a_time() {
    let mut w = TestWorld::new(1);
    let mut c = eevdf(&w, true);
    let t = w.add_task(0);
    w.start(&mut c, t);
    // 100 ms of running: the stored utilisation (at the last tick) is the first sample, taken whole.
    let (u1, _) = run_then_sleep(&mut w, &mut c, 100 * MS);
    assert!(u1 > 900, "a task that ran 100 ms has nearly full utilisation: {u1}");
    assert_eq!(c.task_ue(t), u1, "a rise is taken at once");
    assert_eq!(c.cpu_ue(CPU0), 0, "a sleeping task counts on no CPU");
    // Asleep 60 ms, it wakes: its estimate joins the CPU's sum while PELT has decayed it.
    w.advance(&mut c, 60 * MS);
    w.wake(&mut c, t, CPU0);
    assert_eq!(c.cpu_ue(CPU0), u1);
    // 3 ms of running, alone (runnable = util, so it got all the CPU it wanted): the sample is
    // far below the estimate, which moves a quarter of the way down.
    let (u2, r2) = run_then_sleep(&mut w, &mut c, 3 * MS);
    assert!(u2 + 10 < u1 && u2 + 10 >= r2, "sample {u2}, runnable {r2}");
    let expected = ((u1 << 2) - (u1 - u2)) >> 2;
    assert_eq!(c.task_ue(t), expected);
    assert!(expected > u2 && expected < u1);
}

/// The estimate is not lowered for a task that did not get all the CPU it wanted (runnable more
/// than 1 % of capacity above utilisation at the sleep).
#[test]
fn a_task_that_waited_keeps_its_estimate() {
    let mut w = TestWorld::new(1);
    let mut c = eevdf(&w, true);
    let (a, b) = (w.add_task(0), w.add_task(0));
    w.start(&mut c, a);
    let (u1, _) = run_then_sleep(&mut w, &mut c, 100 * MS);
    assert_eq!(c.task_ue(a), u1);
    w.advance(&mut c, 60 * MS);
    // Both tasks queued; they take turns for 40 ms, so A waits about half the time.
    w.start(&mut c, b);
    w.wake(&mut c, a, CPU0);
    for _ in 0..40 {
        w.pick(&mut c, CPU0).expect("a task");
        w.advance(&mut c, MS);
        w.stop(&mut c, CPU0, SwitchReason::Preempted);
    }
    // A runs once more and sleeps.
    loop {
        let t = w.pick(&mut c, CPU0).expect("a task");
        if t == a {
            break;
        }
        w.advance(&mut c, MS);
        w.stop(&mut c, CPU0, SwitchReason::Preempted);
    }
    let avg = c.pelt_task[a.idx()];
    assert!(avg.util_avg + 10 < avg.runnable_avg, "A waited: {avg:?}");
    assert!(avg.util_avg + 10 < u1);
    w.stop(&mut c, CPU0, SwitchReason::Blocked);
    assert_eq!(c.task_ue(a), u1, "no lowering without proof the task got all it wanted");
}

/// `cpu_util_cfs` (the balancer's group utilisation): a woken task whose PELT utilisation decayed
/// over a 60 ms sleep counts with its estimate; with UTIL_EST off, only the decayed average.
#[test]
fn a_woken_task_counts_with_its_estimate_in_the_cpu_utilisation() {
    for util_est in [true, false] {
        let mut w = TestWorld::new(1);
        let mut c = eevdf(&w, util_est);
        let t = w.add_task(0);
        w.start(&mut c, t);
        let (u1, _) = run_then_sleep(&mut w, &mut c, 100 * MS);
        w.advance(&mut c, 60 * MS);
        w.wake(&mut c, t, CPU0);
        let pelt = c.pelt_cpu[CPU0.idx()].util_avg;
        // 60 ms is 58 periods: the CPU's utilisation fell below half of u1 (32 periods halve it).
        assert!(pelt < u1 / 2, "{pelt} vs {u1}");
        let expected = if util_est { u1 } else { pelt };
        assert_eq!(c.cpu_util_cfs(CPU0, w.now), expected);
    }
}
