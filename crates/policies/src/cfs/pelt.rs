//! Per-entity load tracking (PELT) as in Linux 6.6 kernel/sched/pelt.c, used by the EEVDF variant's
//! load balancer in place of 2.6.38's instantaneous weights and `cpu_load[]` averages.
//!
//! Time is cut into periods of 1024 "microseconds" (the kernel's `ns >> 10`, so a period is
//! 1,048,576 ns). A signal's sum decays by `y` per period with `y^32 = 1/2` (a 32-period, ~33 ms
//! half-life) and grows by the runnable time of the current period times a load. The average is the
//! sum divided by the sum's maximum, `LOAD_AVG_MAX - 1024 + period_contrib`:
//!
//! * a task's `load_sum` counts runnable time (load 1), and its `load_avg` is `weight * load_sum /
//!   divider`: a task runnable half the time has half its weight as load;
//! * a CPU's runqueue sums its weight over time (load = the root runqueue's current weight), so its
//!   `load_avg` keeps the decaying contribution of tasks that went to sleep there (blocked load);
//! * a task that moves to another CPU takes its own average with it (`detach_entity_load_avg` /
//!   `attach_entity_load_avg`), and a new task starts fully loaded (`init_entity_runnable_average`).
//!
//! * beside load, each signal carries the *runnable* sum (time with tasks queued, times their number
//!   for a runqueue) and the *utilisation* sum (time running), both scaled by 1024
//!   (`SCHED_CAPACITY_SCALE`): a CPU's `util_avg` is 1024 when it never idles, its `runnable_avg`
//!   grows beyond that when tasks wait. The 6.6 balancer classifies groups by them.
//!
//! Simplifications: no frequency or capacity invariance (every CPU has capacity 1024, the clock is
//! not scaled), no `util_est`, and a task in a task group attaches its own weighted average to the
//! CPU's root signal where the kernel propagates the group entity's change up the hierarchy.

use schedlab_core::Ns;

/// A period in the kernel's microseconds (`ns >> 10`).
const PERIOD_US: u64 = 1024;
/// Periods over which a signal halves (`LOAD_AVG_PERIOD`).
const HALF_LIFE_PERIODS: u64 = 32;
/// The maximum of a signal's sum (`LOAD_AVG_MAX`: the sum of `1024 * y^n` as the kernel truncates it).
pub(crate) const LOAD_AVG_MAX: u64 = 47742;

/// `runnable_avg_yN_inv`: `2^32 * y^n` for n in 0..32, rounded down (n = 0 capped at `u32::MAX`).
const Y_INV: [u64; 32] = [
    0xffffffff, 0xfa83b2db, 0xf5257d15, 0xefe4b99b, 0xeac0c6e7, 0xe5b906e7, 0xe0ccdeec, 0xdbfbb797,
    0xd744fcca, 0xd2a81d91, 0xce248c15, 0xc9b9bd86, 0xc5672a11, 0xc12c4cca, 0xbd08a39f, 0xb8fbaf47,
    0xb504f333, 0xb123f581, 0xad583eea, 0xa9a15ab4, 0xa5fed6a9, 0xa2704303, 0x9ef53260, 0x9b8d39b9,
    0x9837f051, 0x94f4efa8, 0x91c3d373, 0x8ea4398b, 0x8b95c1e3, 0x88980e80, 0x85aac367, 0x82cd8698,
];

/// `decay_load(val, n)`: `val * y^n`.
pub(crate) fn decay_load(val: u64, periods: u64) -> u64 {
    if periods > HALF_LIFE_PERIODS * 63 {
        return 0;
    }
    let mut v = val;
    let mut n = periods;
    if n >= HALF_LIFE_PERIODS {
        v >>= n / HALF_LIFE_PERIODS;
        n %= HALF_LIFE_PERIODS;
    }
    ((v as u128 * Y_INV[n as usize] as u128) >> 32) as u64
}

/// `__accumulate_pelt_segments`: the contribution of `d1` (the end of the first period), `periods - 1`
/// full periods and `d3` (the start of the current one), decayed to now.
fn accumulate_segments(periods: u64, d1: u64, d3: u64) -> u64 {
    let c1 = decay_load(d1, periods);
    let c2 = LOAD_AVG_MAX - decay_load(LOAD_AVG_MAX, periods) - PERIOD_US;
    c1 + c2 + d3
}

/// `SCHED_CAPACITY_SHIFT`: runnable and utilisation sums count time times 1024.
const CAPACITY_SHIFT: u32 = 10;
/// `PELT_MIN_DIVIDER`: the smallest divider, which a detach keeps each sum at least consistent with.
const MIN_DIVIDER: u64 = LOAD_AVG_MAX - PERIOD_US;

/// One PELT signal (`struct sched_avg`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Avg {
    /// Time of the last update, in the kernel's microseconds.
    last_update_us: u64,
    /// The decayed load sum.
    pub load_sum: u64,
    /// The decayed runnable sum (x 1024).
    pub runnable_sum: u64,
    /// The decayed running sum (x 1024).
    pub util_sum: u64,
    /// The load average (the sum over the divider, times the entity's weight for a task).
    pub load_avg: u64,
    /// The runnable average (0..1024 for a task; up to 1024 x queued tasks for a runqueue).
    pub runnable_avg: u64,
    /// The utilisation average (0..1024).
    pub util_avg: u64,
    /// Microseconds of the current period already accounted.
    period_contrib: u64,
}

impl Avg {
    /// A signal starting at `now` with the given load sum and average (nothing runnable or running).
    pub(crate) fn starting(now: Ns, load_sum: u64, load_avg: u64) -> Avg {
        Avg { last_update_us: now >> 10, load_sum, load_avg, ..Avg::default() }
    }

    /// `get_pelt_divider`.
    pub(crate) fn divider(&self) -> u64 {
        LOAD_AVG_MAX - PERIOD_US + self.period_contrib
    }

    /// `___update_load_sum` + `___update_load_avg`: brings the signal to `now`, with `load` (the load
    /// that was present since the last update), `runnable` (queued entities: 1 for a queued task, the
    /// number of tasks for a runqueue) and `running` (the entity, or some entity of the runqueue, ran)
    /// accumulating, and `scale` multiplying the load average (a task's weight; 1 for a runqueue
    /// whose sum is already weighted). Without load nothing is runnable or running, as in the
    /// kernel. Returns whether a period ended.
    pub(crate) fn update(&mut self, now: Ns, load: u64, runnable: u64, running: bool, scale: u64) -> bool {
        let now_us = now >> 10;
        let Some(delta) = now_us.checked_sub(self.last_update_us) else {
            self.last_update_us = now_us;
            return false;
        };
        if delta == 0 {
            return false;
        }
        self.last_update_us = now_us;
        let (runnable, running) = if load == 0 { (0, false) } else { (runnable, running) };
        let mut contrib = delta;
        let total = delta + self.period_contrib;
        let periods = total / PERIOD_US;
        let rest = total % PERIOD_US;
        if periods > 0 {
            self.load_sum = decay_load(self.load_sum, periods);
            self.runnable_sum = decay_load(self.runnable_sum, periods);
            self.util_sum = decay_load(self.util_sum, periods);
            if load != 0 {
                contrib = accumulate_segments(periods, PERIOD_US - self.period_contrib, rest);
            }
        }
        self.period_contrib = rest;
        if load != 0 {
            self.load_sum += load * contrib;
        }
        if runnable != 0 {
            self.runnable_sum += (runnable * contrib) << CAPACITY_SHIFT;
        }
        if running {
            self.util_sum += contrib << CAPACITY_SHIFT;
        }
        if periods > 0 {
            let divider = self.divider();
            self.load_avg = scale * self.load_sum / divider;
            self.runnable_avg = self.runnable_sum / divider;
            self.util_avg = self.util_sum / divider;
        }
        periods > 0
    }

    /// This signal brought to `now` without changing it (for readers that only look).
    pub(crate) fn peek(&self, now: Ns, load: u64, runnable: u64, running: bool, scale: u64) -> Avg {
        let mut copy = *self;
        copy.update(now, load, runnable, running, scale);
        copy
    }

    /// `attach_entity_load_avg`: adds a task's signal (`weight` its load weight); the task's
    /// period alignment becomes the runqueue's and its sums are rebuilt from its averages.
    pub(crate) fn attach(&mut self, task: &mut Avg, weight: u64) {
        task.last_update_us = self.last_update_us;
        task.period_contrib = self.period_contrib;
        let divider = task.divider();
        task.util_sum = task.util_avg * divider;
        task.runnable_sum = task.runnable_avg * divider;
        let load_sum = task.load_avg * divider;
        task.load_sum = if weight < load_sum { load_sum / weight } else { 1 };
        self.load_avg += task.load_avg;
        self.load_sum += weight * task.load_sum;
        self.util_avg += task.util_avg;
        self.util_sum += task.util_sum;
        self.runnable_avg += task.runnable_avg;
        self.runnable_sum += task.runnable_sum;
    }

    /// `reweight_entity`'s load-average part on this runqueue's signal: the task's load average is
    /// taken out at its old weight (`dequeue_load_avg`), recomputed from its load sum at the new
    /// weight, and added back (`enqueue_load_avg`).
    pub(crate) fn reweight(&mut self, task: &mut Avg, old_weight: u64, weight: u64) {
        self.load_avg = self.load_avg.saturating_sub(task.load_avg);
        self.load_sum =
            self.load_sum.saturating_sub(old_weight * task.load_sum).max(self.load_avg * MIN_DIVIDER);
        task.load_avg = weight * task.load_sum / task.divider();
        self.load_avg += task.load_avg;
        self.load_sum += weight * task.load_sum;
    }

    /// `detach_entity_load_avg`: removes a task's signal, never below zero, keeping each sum at least
    /// its average times the smallest divider as the kernel does.
    pub(crate) fn detach(&mut self, task: &Avg, weight: u64) {
        self.load_avg = self.load_avg.saturating_sub(task.load_avg);
        self.load_sum = self.load_sum.saturating_sub(weight * task.load_sum).max(self.load_avg * MIN_DIVIDER);
        self.util_avg = self.util_avg.saturating_sub(task.util_avg);
        self.util_sum = self.util_sum.saturating_sub(task.util_sum).max(self.util_avg * MIN_DIVIDER);
        self.runnable_avg = self.runnable_avg.saturating_sub(task.runnable_avg);
        self.runnable_sum =
            self.runnable_sum.saturating_sub(task.runnable_sum).max(self.runnable_avg * MIN_DIVIDER);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERIOD_NS: Ns = 1024 * 1024;

    #[test]
    fn decay_halves_every_32_periods() {
        // y^0 is stored as 0xffffffff / 2^32, so whole half-lives lose at most one unit.
        assert_eq!(decay_load(1 << 20, 32), (1 << 19) - 1);
        assert_eq!(decay_load(1 << 20, 64), (1 << 18) - 1);
        // y^16 = 2^-1/2.
        let half_root = decay_load(1_000_000, 16);
        assert!((707_106..=707_107).contains(&half_root), "{half_root}");
        assert_eq!(decay_load(u32::MAX as u64, 32 * 64), 0);
    }

    #[test]
    fn an_always_runnable_task_converges_to_its_weight() {
        let mut a = Avg::starting(0, 0, 0);
        // 1024 * sum(y^n) for n >= 0 is 1024 / (1 - 2^(-1/32)) ~ 47788; the kernel's truncated table
        // gives LOAD_AVG_MAX = 47742. After 2 s the task's average is its weight within 0.5 %.
        for p in 1..=2000 {
            a.update(p * PERIOD_NS, 1, 1, true, 1024);
        }
        assert!(a.load_avg >= 1019 && a.load_avg <= 1024, "{}", a.load_avg);
        assert!(a.load_sum <= LOAD_AVG_MAX, "{}", a.load_sum);
    }

    #[test]
    fn a_sleeping_task_loses_half_its_load_per_half_life() {
        let mut a = Avg::starting(0, 0, 0);
        a.update(2000 * PERIOD_NS, 1, 1, true, 1024);
        let full = a.load_avg;
        a.update(2032 * PERIOD_NS, 0, 0, false, 1024);
        let expect = full / 2;
        assert!(a.load_avg.abs_diff(expect) <= 2, "{} vs {expect}", a.load_avg);
    }

    #[test]
    fn a_half_runnable_task_carries_half_its_weight() {
        let mut a = Avg::starting(0, 0, 0);
        let mut t = 0;
        for _ in 0..500 {
            t += 4 * PERIOD_NS;
            a.update(t, 1, 1, true, 1024);
            t += 4 * PERIOD_NS;
            a.update(t, 0, 0, false, 1024);
        }
        // Sampled at the end of a sleep, the average is below half: the runnable part decayed for 4
        // periods. Geometric series: (1 - y^4) / (1 - y^8) * y^4 of the weight.
        let y4 = 0.5f64.powf(4.0 / 32.0);
        let expect = 1024.0 * y4 * (1.0 - y4) / (1.0 - y4 * y4);
        assert!((a.load_avg as f64 - expect).abs() < 4.0, "{} vs {expect}", a.load_avg);
    }

    #[test]
    fn attach_and_detach_move_a_tasks_load() {
        let mut rq = Avg::starting(0, 0, 0);
        let mut task = Avg::starting(0, 0, 0);
        task.load_avg = 1024;
        rq.attach(&mut task, 1024);
        assert_eq!(rq.load_avg, 1024);
        assert_eq!(task.load_sum, task.divider());
        rq.detach(&task, 1024);
        assert_eq!(rq.load_avg, 0);
        assert_eq!(rq.load_sum, 0);
    }
}
