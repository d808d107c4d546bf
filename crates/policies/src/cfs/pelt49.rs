//! Per-entity load tracking as Linux 4.9 computes it (kernel/sched/fair.c `__update_load_avg`,
//! `__compute_runnable_contrib`, `decay_load`), for CFS with `load_tracking=4.9`: the signal the
//! 4.9 balancer and wakeup placement read where 2.6.38 read the runqueues' weights.
//!
//! The arithmetic differs from 6.6's ([`super::pelt`]) in ways that change the numbers:
//!
//! * the load sum is weighted as it accumulates (`load_sum += weight * delta`), and the average is
//!   the sum over the constant `LOAD_AVG_MAX` (47742), where 6.6 divides by
//!   `LOAD_AVG_MAX - 1024 + period_contrib`; so an always-runnable nice-0 task reads about 1002 just
//!   after a period boundary in 4.9 and 1024 in 6.6;
//! * the averages are recomputed only when an update crosses a period boundary (`decayed`);
//! * the periods crossed are summed with the `runnable_avg_yN_sum` table (`\Sum 1024 y^k` for
//!   k = 1..n, floored), halving per 32 periods beyond it;
//! * a runqueue keeps, beside its whole signal (blocked tasks' decaying load included),
//!   `runnable_load_sum` / `runnable_load_avg`: the same sum over the *queued* entities only, which
//!   an enqueue raises by the entity's sums and a dequeue lowers (`enqueue_entity_load_avg`,
//!   `dequeue_entity_load_avg`). 4.9's `weighted_cpuload` is that runnable average.
//!
//! Frequency and CPU capacity scaling (`arch_scale_freq_capacity`, `arch_scale_cpu_capacity`) are
//! 1024 (the full scale) on the machines schedlab models, so `cap_scale` is the identity.

use super::pelt::LOAD_AVG_MAX;
use schedlab_core::Ns;

/// 4.9's `runnable_avg_yN_inv[n]`: `2^32 y^n` for n in 0..32 (one below 6.6's table in most
/// entries: 4.9 rounds them down).
const Y_INV: [u64; 32] = [
    0xffffffff, 0xfa83b2da, 0xf5257d14, 0xefe4b99a, 0xeac0c6e6, 0xe5b906e6, 0xe0ccdeeb, 0xdbfbb796,
    0xd744fcc9, 0xd2a81d91, 0xce248c14, 0xc9b9bd85, 0xc5672a10, 0xc12c4cc9, 0xbd08a39e, 0xb8fbaf46,
    0xb504f333, 0xb123f581, 0xad583ee9, 0xa9a15ab4, 0xa5fed6a9, 0xa2704302, 0x9ef5325f, 0x9b8d39b9,
    0x9837f050, 0x94f4efa8, 0x91c3d373, 0x8ea4398a, 0x8b95c1e3, 0x88980e80, 0x85aac367, 0x82cd8698,
];

/// 4.9's `decay_load(val, n)`: `val * y^n`, exact for n = 0, 0 beyond 63 half-lives.
pub(crate) fn decay_load(val: u64, n: u64) -> u64 {
    if n == 0 {
        return val;
    }
    if n > LOAD_AVG_PERIOD * 63 {
        return 0;
    }
    let (mut v, mut n) = (val, n);
    if n >= LOAD_AVG_PERIOD {
        v >>= n / LOAD_AVG_PERIOD;
        n %= LOAD_AVG_PERIOD;
    }
    ((v as u128 * Y_INV[n as usize] as u128) >> 32) as u64
}

/// `LOAD_AVG_PERIOD`: periods per half-life.
const LOAD_AVG_PERIOD: u64 = 32;
/// `LOAD_AVG_MAX_N`: periods after which the contribution sum has reached `LOAD_AVG_MAX`.
const LOAD_AVG_MAX_N: u64 = 345;
/// `runnable_avg_yN_sum[n]`: `\Sum 1024 y^k` for k = 1..n, floored (4.9 fair.c).
const Y_N_SUM: [u64; 33] = [
    0, 1002, 1982, 2941, 3880, 4798, 5697, 6576, 7437, 8279, 9103, 9909, 10698, 11470, 12226, 12966, 13690,
    14398, 15091, 15769, 16433, 17082, 17718, 18340, 18949, 19545, 20128, 20698, 21256, 21802, 22336, 22859,
    23371,
];

/// `__compute_runnable_contrib(n)`: `\Sum 1024 y^k` for k = 1..n.
pub(crate) fn runnable_contrib(n: u64) -> u64 {
    if n <= LOAD_AVG_PERIOD {
        return Y_N_SUM[n as usize];
    }
    if n >= LOAD_AVG_MAX_N {
        return LOAD_AVG_MAX;
    }
    let mut n = n;
    let mut contrib = 0;
    loop {
        contrib /= 2;
        contrib += Y_N_SUM[LOAD_AVG_PERIOD as usize];
        n -= LOAD_AVG_PERIOD;
        if n <= LOAD_AVG_PERIOD {
            break;
        }
    }
    decay_load(contrib, n) + Y_N_SUM[n as usize]
}

/// A 4.9 `struct sched_avg`, and for a runqueue its `runnable_load_sum` / `runnable_load_avg`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Avg49 {
    /// `last_update_time`, ns (0: not attached to a runqueue, as after a migration).
    pub last_update_ns: Ns,
    /// `load_sum`: the decayed sum of weight times runnable time (kernel microseconds).
    pub load_sum: u64,
    /// `util_sum`: the decayed sum of running time times 1024.
    pub util_sum: u64,
    /// `period_contrib`: microseconds of the current period already accounted.
    pub period_contrib: u64,
    /// `load_avg`: `load_sum / LOAD_AVG_MAX`.
    pub load_avg: u64,
    /// `util_avg`: `util_sum / LOAD_AVG_MAX`.
    pub util_avg: u64,
    /// A runqueue's `runnable_load_sum` (0 for a task).
    pub runnable_load_sum: u64,
    /// A runqueue's `runnable_load_avg`, 4.9's `weighted_cpuload` (0 for a task).
    pub runnable_load_avg: u64,
}

impl Avg49 {
    /// `init_entity_runnable_average`: a new task is fully loaded (its weight as load average, the
    /// sum to match), has no utilisation, and is not attached yet (`last_update_time` 0); its
    /// `period_contrib` is 1023 so that its first update completes a period.
    pub(crate) fn new_task(weight: u64) -> Avg49 {
        Avg49 {
            last_update_ns: 0,
            load_sum: weight * LOAD_AVG_MAX,
            period_contrib: 1023,
            load_avg: weight,
            ..Avg49::default()
        }
    }

    /// A runqueue's signal, starting at `now` with nothing in it.
    pub(crate) fn runqueue(now: Ns) -> Avg49 {
        Avg49 { last_update_ns: now, ..Avg49::default() }
    }

    /// `__update_load_avg(now, cpu, sa, weight, running, cfs_rq)`: the time since the last update
    /// accrues `weight` (0 for a sleeping entity) and, if `running`, utilisation; `runqueue` also
    /// accrues the weight into the runnable sum (the call on a `cfs_rq`'s own signal). Returns
    /// whether a period ended (the averages were recomputed).
    pub(crate) fn update(&mut self, now: Ns, weight: u64, running: bool, runqueue: bool) -> bool {
        if now < self.last_update_ns {
            // Time went backwards (sched clock set-up): restart from now.
            self.last_update_ns = now;
            return false;
        }
        let mut delta = (now - self.last_update_ns) >> 10;
        if delta == 0 {
            return false;
        }
        self.last_update_ns = now;
        let mut decayed = false;
        let accrue = |s: &mut Avg49, d: u64| {
            if weight != 0 {
                s.load_sum += weight * d;
                if runqueue {
                    s.runnable_load_sum += weight * d;
                }
            }
            if running {
                s.util_sum += d * 1024;
            }
        };
        if delta + self.period_contrib >= 1024 {
            decayed = true;
            let delta_w = 1024 - self.period_contrib;
            self.period_contrib = 0;
            accrue(self, delta_w);
            delta -= delta_w;
            let periods = delta / 1024;
            delta %= 1024;
            self.load_sum = decay_load(self.load_sum, periods + 1);
            if runqueue {
                self.runnable_load_sum = decay_load(self.runnable_load_sum, periods + 1);
            }
            self.util_sum = decay_load(self.util_sum, periods + 1);
            accrue(self, runnable_contrib(periods));
        }
        accrue(self, delta);
        self.period_contrib += delta;
        if decayed {
            self.load_avg = self.load_sum / LOAD_AVG_MAX;
            if runqueue {
                self.runnable_load_avg = self.runnable_load_sum / LOAD_AVG_MAX;
            }
            self.util_avg = self.util_sum / LOAD_AVG_MAX;
        }
        decayed
    }

    /// `attach_entity_load_avg`: the entity takes the runqueue's update time and its sums join the
    /// runqueue's whole signal.
    pub(crate) fn attach(&mut self, se: &mut Avg49) {
        se.last_update_ns = self.last_update_ns;
        self.load_avg += se.load_avg;
        self.load_sum += se.load_sum;
        self.util_avg += se.util_avg;
        self.util_sum += se.util_sum;
    }

    /// `detach_entity_load_avg` / the removed load of `remove_entity_load_avg`: the entity's sums
    /// leave the runqueue's whole signal, never below zero (`sub_positive`).
    pub(crate) fn detach(&mut self, se: &Avg49) {
        self.load_avg = self.load_avg.saturating_sub(se.load_avg);
        self.load_sum = self.load_sum.saturating_sub(se.load_sum);
        self.util_avg = self.util_avg.saturating_sub(se.util_avg);
        self.util_sum = self.util_sum.saturating_sub(se.util_sum);
    }

    /// `enqueue_entity_load_avg`'s runnable part: a queued entity's sums join the runnable ones.
    pub(crate) fn enqueue(&mut self, se: &Avg49) {
        self.runnable_load_avg += se.load_avg;
        self.runnable_load_sum += se.load_sum;
    }

    /// `dequeue_entity_load_avg`: the entity's sums leave the runnable ones, never below zero.
    pub(crate) fn dequeue(&mut self, se: &Avg49) {
        self.runnable_load_avg = self.runnable_load_avg.saturating_sub(se.load_avg);
        self.runnable_load_sum = self.runnable_load_sum.saturating_sub(se.load_sum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERIOD_NS: Ns = 1024 * 1024;

    #[test]
    fn decay_halves_per_32_periods_and_keeps_a_value_over_none() {
        assert_eq!(decay_load(12345, 0), 12345);
        // A whole half-life shifts, then multiplies by y^0 stored as 0xffffffff: one unit lost.
        assert_eq!(decay_load(1 << 20, 32), (1 << 19) - 1);
        // y^16 = 2^-1/2, rounded down.
        assert_eq!(decay_load(1_000_000, 16), 707_106);
        assert_eq!(decay_load(u32::MAX as u64, 32 * 63 + 1), 0);
    }

    #[test]
    fn the_contribution_table_sums_the_decayed_periods() {
        // \Sum_{k=1..n} 1024 y^k with y = 2^(-1/32), floored per the table; beyond the table the
        // kernel halves per 32 periods and adds the rest, so it stays within a few units of the
        // closed form and reaches LOAD_AVG_MAX at 345 periods.
        let y = 0.5f64.powf(1.0 / 32.0);
        for n in [1u64, 5, 32, 33, 64, 100, 200, 344] {
            let exact = 1024.0 * y * (1.0 - y.powi(n as i32)) / (1.0 - y);
            let got = runnable_contrib(n) as f64;
            assert!(got <= exact + 0.5 && exact - got < 0.004 * exact + 4.0, "n={n}: {got} vs {exact}");
        }
        assert_eq!(runnable_contrib(1), 1002);
        assert_eq!(runnable_contrib(32), 23371);
        assert_eq!(runnable_contrib(345), LOAD_AVG_MAX);
    }

    #[test]
    fn an_always_running_task_reads_just_under_its_weight_after_a_boundary() {
        // 4.9 divides by LOAD_AVG_MAX: sampled just before a period boundary an always-running
        // nice-0 task reads its weight; just after one the new period holds almost nothing and
        // the average is about 1024 * (1 - 1024 * (1 - y) / LOAD_AVG_MAX), 1002.
        let mut a = Avg49::new_task(1024);
        a.last_update_ns = 1;
        let mut t = 1;
        for _ in 0..1000 {
            t += PERIOD_NS;
            a.update(t, 1024, true, false);
        }
        assert_eq!(a.period_contrib, 1023);
        assert!((1022..=1024).contains(&a.load_avg), "{}", a.load_avg);
        t += 2 * 1024;
        assert!(a.update(t, 1024, true, false));
        assert_eq!(a.period_contrib, 1);
        assert!((1000..=1003).contains(&a.load_avg), "{}", a.load_avg);
        assert!((1000..=1003).contains(&a.util_avg), "{}", a.util_avg);
    }

    #[test]
    fn a_sleeping_entity_halves_per_32_periods_and_only_at_boundaries() {
        let mut a = Avg49::new_task(1024);
        a.last_update_ns = 1;
        // 2 us: the first completes the period new tasks start in, the second opens the next.
        assert!(a.update(1 + 2 * 1024, 0, false, false));
        assert_eq!(a.period_contrib, 1);
        let start = a.load_avg;
        // 1000 us more stay inside that period: the average does not move.
        assert!(!a.update(1 + 1002 * 1024, 0, false, false));
        assert_eq!(a.load_avg, start);
        a.update(1 + 2 * 1024 + 32 * PERIOD_NS, 0, false, false);
        assert!(a.load_avg.abs_diff(start / 2) <= 2, "{} vs {}", a.load_avg, start / 2);
    }

    #[test]
    fn a_runqueue_tracks_its_queued_load_beside_its_whole_load() {
        let mut rq = Avg49::runqueue(0);
        let mut task = Avg49::new_task(1024);
        rq.attach(&mut task);
        rq.enqueue(&task);
        assert_eq!((rq.load_avg, rq.runnable_load_avg), (1024, 1024));
        // The task runs 10 periods with the runqueue: both signals decay and accrue alike.
        let t = 10 * PERIOD_NS;
        task.update(t, 1024, true, false);
        rq.update(t, 1024, true, true);
        assert_eq!(rq.runnable_load_avg, rq.load_avg);
        assert!(rq.load_avg.abs_diff(task.load_avg) <= 12, "{} vs {}", rq.load_avg, task.load_avg);
        // It sleeps: it leaves the runnable sum at once, its blocked load stays in the whole one.
        rq.dequeue(&task);
        assert!(rq.runnable_load_avg <= 1, "{}", rq.runnable_load_avg);
        assert!(rq.load_avg > 1000);
        rq.detach(&task);
        assert!(rq.load_avg <= 1, "{}", rq.load_avg);
    }
}
