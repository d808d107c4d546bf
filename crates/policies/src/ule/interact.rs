//! ULE's priority space, interactivity score and CPU-usage estimate (FreeBSD sys/kern/sched_ule.c:
//! `sched_interact_score`, `sched_interact_update`, `sched_interact_fork`, `sched_priority`,
//! `sched_pctcpu_update`, `tdq_slice`; priority ranges from sys/sys/priority.h).
//!
//! Everything here is pure integer arithmetic on the same units FreeBSD uses: run and sleep history in
//! hz ticks shifted left by [`TICK_SHIFT`], CPU-usage windows in hz ticks, slices in stathz ticks.

/// `PRI_MIN_REALTIME`: best priority of real-time threads (rtprio 0).
pub const PRI_MIN_REALTIME: u8 = 48;
/// `PRI_MIN_KERN`: kernel priorities start here; the default `preempt_thresh`.
pub const PRI_MIN_KERN: u8 = 80;
/// `PRI_MIN_TIMESHARE`.
pub const PRI_MIN_TIMESHARE: u8 = 120;
/// `PRI_MAX_TIMESHARE`.
pub const PRI_MAX_TIMESHARE: u8 = 223;
/// `PRI_MIN_IDLE`: the idle class and idle CPUs.
pub const PRI_MIN_IDLE: u8 = 224;
/// `PRI_MAX_IDLE`: the idle thread, i.e. an idle CPU's `tdq_lowpri`.
pub const PRI_MAX_IDLE: u8 = 255;

/// `SCHED_PRI_NRESV`: the number of nice values (`PRIO_MAX - PRIO_MIN` = 40).
const PRI_NRESV: u32 = 40;
/// `PRI_INTERACT_RANGE`: (104 - 40) / 2 = 32 interactive priorities.
const PRI_INTERACT_RANGE: u32 = (PRI_MAX_TIMESHARE as u32 - PRI_MIN_TIMESHARE as u32 + 1 - PRI_NRESV) / 2;
/// `PRI_MIN_INTERACT` = 120.
pub const PRI_MIN_INTERACT: u8 = PRI_MIN_TIMESHARE;
/// `PRI_MAX_INTERACT` = 151.
pub const PRI_MAX_INTERACT: u8 = PRI_MIN_TIMESHARE + PRI_INTERACT_RANGE as u8 - 1;
/// `PRI_MIN_BATCH` = 152: threads at or above it go to the timeshare (calendar) queue.
pub const PRI_MIN_BATCH: u8 = PRI_MIN_TIMESHARE + PRI_INTERACT_RANGE as u8;
/// `PRI_BATCH_RANGE` = 72.
pub const PRI_BATCH_RANGE: u32 = PRI_MAX_TIMESHARE as u32 - PRI_MIN_BATCH as u32 + 1;
/// `SCHED_PRI_MIN` = 172: the best batch priority reachable at nice 0.
pub const SCHED_PRI_MIN: u8 = PRI_MIN_BATCH + (PRI_NRESV / 2) as u8;
/// `SCHED_PRI_RANGE` = 32: batch priorities set by recent CPU usage.
pub const SCHED_PRI_RANGE: i64 =
    (PRI_MAX_TIMESHARE as i64 - (PRI_NRESV / 2) as i64) - SCHED_PRI_MIN as i64 + 1;

/// `SCHED_TICK_SHIFT`: history is kept in hz ticks << 10.
pub const TICK_SHIFT: u32 = 10;
/// `SCHED_TICK_SECS`: the CPU-usage window, seconds.
const TICK_SECS: i64 = 10;
/// `SCHED_INTERACT_MAX`.
pub const INTERACT_MAX: u32 = 100;
/// `SCHED_INTERACT_HALF`.
pub const INTERACT_HALF: u32 = INTERACT_MAX / 2;
/// `SCHED_INTERACT_THRESH`: the default `kern.sched.interact`.
pub const INTERACT_THRESH: u32 = 30;
/// `SCHED_SLICE_MIN_DIVISOR`: the shortest slice is `slice / 6`.
pub const SLICE_MIN_DIVISOR: u32 = 6;

/// A thread's voluntary run and sleep history (`ts_runtime`, `ts_slptime`), hz ticks << 10.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct History {
    /// Time spent running.
    pub runtime: u64,
    /// Time spent voluntarily sleeping (not waiting for a CPU).
    pub slptime: u64,
}

/// `SCHED_SLP_RUN_MAX`: 5 s of history, in hz ticks << 10.
pub fn slp_run_max(hz: u64) -> u64 {
    (hz * 5) << TICK_SHIFT
}

/// `SCHED_SLP_RUN_FORK`: the history a child inherits is scaled down to 0.5 s.
pub fn slp_run_fork(hz: u64) -> u64 {
    (hz / 2) << TICK_SHIFT
}

/// `sched_interact_score`: 0 (sleeps all the time) to 100 (never sleeps). With a threshold of at most
/// 50 a thread that runs at least as much as it sleeps cannot be interactive, and FreeBSD returns 50 at
/// once without the division (so a CPU hog scores 50, not 100, at the default threshold 30).
pub fn interact_score(h: History, interact_thresh: u32) -> u32 {
    let half = INTERACT_HALF as u64;
    if interact_thresh <= INTERACT_HALF && h.runtime >= h.slptime {
        return INTERACT_HALF;
    }
    if h.runtime > h.slptime {
        let div = (h.runtime / half).max(1);
        return (half + (half - h.slptime / div)) as u32;
    }
    if h.slptime > h.runtime {
        let div = (h.slptime / half).max(1);
        return (h.runtime / div) as u32;
    }
    if h.runtime > 0 {
        INTERACT_HALF
    } else {
        0
    }
}

/// `sched_interact_update`: keeps the history within [`slp_run_max`]. Over the limit by less than a
/// fifth both parts shrink to 4/5; by more, they halve; beyond twice the limit the larger part is set
/// to the limit and the other to 1.
pub fn interact_update(h: &mut History, slp_run_max: u64) {
    let sum = h.runtime + h.slptime;
    if sum < slp_run_max {
        return;
    }
    if sum > slp_run_max * 2 {
        if h.runtime > h.slptime {
            *h = History { runtime: slp_run_max, slptime: 1 };
        } else {
            *h = History { runtime: 1, slptime: slp_run_max };
        }
        return;
    }
    if sum > (slp_run_max / 5) * 6 {
        h.runtime /= 2;
        h.slptime /= 2;
        return;
    }
    h.runtime = (h.runtime / 5) * 4;
    h.slptime = (h.slptime / 5) * 4;
}

/// `sched_interact_fork`: a child's inherited history is divided down to about [`slp_run_fork`], so it
/// keeps its parent's ratio but a short memory.
pub fn interact_fork(h: &mut History, slp_run_fork: u64) {
    let sum = h.runtime + h.slptime;
    if sum > slp_run_fork {
        let ratio = sum / slp_run_fork;
        h.runtime /= ratio;
        h.slptime /= ratio;
    }
}

/// Recent CPU usage over a sliding window of about 10 s (`ts_ticks`, `ts_ltick`, `ts_ftick`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PctCpu {
    /// Run time in the window, hz ticks << 10.
    pub ticks: i64,
    /// The last update, hz ticks.
    pub ltick: i64,
    /// The start of the window, hz ticks.
    pub ftick: i64,
}

impl PctCpu {
    /// A window starting now.
    pub fn starting(now_ticks: i64) -> PctCpu {
        PctCpu { ticks: 0, ltick: now_ticks, ftick: now_ticks }
    }

    /// `sched_pctcpu_update(ts, run)` at hz tick `t`: slide the window (10 s target, rescaled once it
    /// exceeds 11 s) and, if `run`, charge the ticks since the last update as run time.
    pub fn update(&mut self, t: i64, run: bool, hz: i64) {
        let targ = hz * TICK_SECS;
        if t - self.ltick >= targ {
            self.ticks = 0;
            self.ftick = t - targ;
        } else if t - self.ftick >= targ + hz {
            self.ticks = (self.ticks / (self.ltick - self.ftick)) * (self.ltick - (t - targ));
            self.ftick = t - targ;
        }
        if run {
            self.ticks += (t - self.ltick) << TICK_SHIFT;
        }
        self.ltick = t;
    }

    /// `SCHED_PRI_TICKS`: the usage part of a batch priority, 0 ..= 31 after clamping by the caller.
    fn pri_ticks(&self, hz: i64) -> i64 {
        let total = (self.ltick - self.ftick).max(hz);
        // roundup(total, 32) / 32: hz ticks of window per priority step.
        let per_step = (total + SCHED_PRI_RANGE - 1) / SCHED_PRI_RANGE;
        (self.ticks >> TICK_SHIFT) / per_step.max(1)
    }
}

/// `sched_priority` for a timeshare thread: its user priority. A score (plus nice, at least 0) under the
/// threshold gives an interactive priority, `120 + (32 / thresh) x score`; otherwise a batch priority,
/// `172 + recent CPU usage scaled to 0..31 + nice`.
pub fn user_priority(h: History, pct: &PctCpu, nice: i32, interact_thresh: u32, hz: i64) -> u8 {
    let score = (interact_score(h, interact_thresh) as i32 + nice).max(0) as u32;
    if score < interact_thresh {
        let step = (PRI_MAX_INTERACT as u32 - PRI_MIN_INTERACT as u32 + 1) / interact_thresh;
        return PRI_MIN_INTERACT + (step * score) as u8;
    }
    let mut pri = SCHED_PRI_MIN as i64;
    if pct.ticks != 0 {
        pri += pct.pri_ticks(hz).min(SCHED_PRI_RANGE - 1);
    }
    pri += nice as i64;
    pri.clamp(PRI_MIN_BATCH as i64, PRI_MAX_TIMESHARE as i64) as u8
}

/// `tdq_slice`: the slice in stathz ticks for a CPU with `sysload` threads (the running one included).
/// The threads other than the running one share `slice`; the result is never below `slice / 6`.
pub fn tdq_slice(sysload: u32, slice: u32) -> u32 {
    let load = sysload as i64 - 1;
    let slice_min = slice / SLICE_MIN_DIVISOR;
    if load >= SLICE_MIN_DIVISOR as i64 {
        slice_min
    } else if load <= 1 {
        slice
    } else {
        slice / load as u32
    }
}

/// The paper's port mapped ULE priorities into Linux's 100..139 range because the Linux kernel shares
/// one priority field among its classes (seed 002 sec. 3). schedlab keeps FreeBSD's priorities inside
/// the policy; this mapping is only for showing a timeshare priority on Linux's scale.
pub fn linux_prio(pri: u8) -> u8 {
    let p = pri.clamp(PRI_MIN_TIMESHARE, PRI_MAX_TIMESHARE) as u32 - PRI_MIN_TIMESHARE as u32;
    (100 + p * 40 / (PRI_MAX_TIMESHARE as u32 - PRI_MIN_TIMESHARE as u32 + 1)) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    const HZ: u64 = 1000;
    /// `s` seconds of history in hz ticks << 10.
    fn secs(s: u64) -> u64 {
        (s * HZ) << TICK_SHIFT
    }

    #[test]
    fn priority_ranges_match_freebsd() {
        assert_eq!((PRI_MIN_INTERACT, PRI_MAX_INTERACT, PRI_MIN_BATCH), (120, 151, 152));
        assert_eq!((SCHED_PRI_MIN, SCHED_PRI_RANGE, PRI_BATCH_RANGE), (172, 32, 72));
    }

    #[test]
    fn scores_for_given_run_and_sleep_histories() {
        // 1 s run / 3 s sleep: runtime / (slptime / 50) = 1024000 / 61440 = 16.
        assert_eq!(interact_score(History { runtime: secs(1), slptime: secs(3) }, 30), 16);
        // 3 s run / 1 s sleep: at the default threshold the shortcut answers 50 ...
        assert_eq!(interact_score(History { runtime: secs(3), slptime: secs(1) }, 30), 50);
        // ... and with a threshold above 50 the formula runs: 50 + (50 - 1024000 / 61440) = 84.
        assert_eq!(interact_score(History { runtime: secs(3), slptime: secs(1) }, 60), 84);
        // Only sleeping: 0; only running (threshold 60): 100; equal: 50.
        assert_eq!(interact_score(History { runtime: 0, slptime: secs(2) }, 30), 0);
        assert_eq!(interact_score(History { runtime: secs(2), slptime: 0 }, 60), 100);
        assert_eq!(interact_score(History { runtime: secs(2), slptime: secs(2) }, 60), 50);
        // No history at all: 50 at the default threshold (the shortcut), 0 above 50.
        assert_eq!(interact_score(History::default(), 30), 50);
        assert_eq!(interact_score(History::default(), 60), 0);
        // The classification boundary at nice 0: sleeping 60 % of the time is not quite enough.
        let h = History { runtime: secs(2), slptime: secs(3) }; // 2048000 / 61440 = 33
        assert_eq!(interact_score(h, 30), 33);
        let h = History { runtime: secs(1), slptime: secs(3) + secs(1) / 2 }; // 1024000 / 71680 = 14
        assert_eq!(interact_score(h, 30), 14);
    }

    #[test]
    fn history_decays_past_five_seconds() {
        let max = slp_run_max(HZ);
        assert_eq!(max, 5_120_000);
        // Under the limit: unchanged.
        let mut h = History { runtime: secs(2), slptime: secs(2) };
        interact_update(&mut h, max);
        assert_eq!(h, History { runtime: 2_048_000, slptime: 2_048_000 });
        // 4 s + 2 s = 6 s, not above 6/5 of the limit: both x 4/5 (integer: /5 then x4).
        let mut h = History { runtime: secs(4), slptime: secs(2) };
        interact_update(&mut h, max);
        assert_eq!(h, History { runtime: 4_096_000 / 5 * 4, slptime: 2_048_000 / 5 * 4 });
        // 7 s: above 6/5 of the limit: halved.
        let mut h = History { runtime: secs(5), slptime: secs(2) };
        interact_update(&mut h, max);
        assert_eq!(h, History { runtime: 2_560_000, slptime: 1_024_000 });
        // 11 s: above twice the limit: clamped, the larger part wins.
        let mut h = History { runtime: secs(1), slptime: secs(10) };
        interact_update(&mut h, max);
        assert_eq!(h, History { runtime: 1, slptime: max });
        // The ratio, and so the score, survives the 4/5 decay.
        let mut h = History { runtime: secs(1), slptime: secs(4) + 100 };
        let before = interact_score(h, 30);
        interact_update(&mut h, max);
        assert_eq!(interact_score(h, 30), before);
    }

    #[test]
    fn a_child_inherits_its_parents_ratio_over_half_a_second() {
        let fork = slp_run_fork(HZ);
        assert_eq!(fork, 512_000);
        let mut h = History { runtime: secs(1), slptime: secs(3) };
        interact_fork(&mut h, fork);
        // sum 4096000 / 512000 = ratio 8.
        assert_eq!(h, History { runtime: 128_000, slptime: 384_000 });
        assert_eq!(interact_score(h, 30), 16);
    }

    #[test]
    fn interactive_priority_interpolates_the_score_and_batch_uses_cpu_usage() {
        let pct = PctCpu::starting(0);
        // Score 16 at nice 0: 120 + 16.
        let h = History { runtime: secs(1), slptime: secs(3) };
        assert_eq!(user_priority(h, &pct, 0, 30, 1000), 136);
        // Nice -5 lowers the score to 11; nice +14 pushes it to 30: batch.
        assert_eq!(user_priority(h, &pct, -5, 30, 1000), 131);
        assert_eq!(user_priority(h, &pct, 14, 30, 1000), SCHED_PRI_MIN + 14);
        // A hog that used the CPU for its whole 10 s window: 172 + 31.
        let hog = History { runtime: secs(5), slptime: 0 };
        let full = PctCpu { ticks: 10_000 << TICK_SHIFT, ltick: 10_000, ftick: 0 };
        assert_eq!(user_priority(hog, &full, 0, 30, 1000), 203);
        // Half the window: 5000 / (roundup(10000, 32) / 32 = 313) = 15.
        let half = PctCpu { ticks: 5_000 << TICK_SHIFT, ltick: 10_000, ftick: 0 };
        assert_eq!(user_priority(hog, &half, 0, 30, 1000), 172 + 15);
        assert_eq!(user_priority(hog, &half, 19, 30, 1000), 172 + 15 + 19);
    }

    #[test]
    fn the_usage_window_slides_and_rescales() {
        let hz = 1000;
        let mut p = PctCpu::starting(0);
        p.update(4000, true, hz);
        assert_eq!(p, PctCpu { ticks: 4000 << TICK_SHIFT, ltick: 4000, ftick: 0 });
        // Past 11 s the window is cut back to 10 s, scaling the run time by the part kept.
        p.update(11_500, false, hz);
        assert_eq!(p.ftick, 1500);
        assert_eq!(p.ticks, ((4000 << TICK_SHIFT) / 4000) * (4000 - 1500));
        // Idle for 10 s or more: forgotten.
        p.update(30_000, false, hz);
        assert_eq!((p.ticks, p.ftick), (0, 20_000));
    }

    #[test]
    fn slices_shrink_with_load_down_to_a_sixth() {
        // sched_slice = 127 / 10 = 12 stathz ticks, slice_min = 2.
        let s = |n| tdq_slice(n, 12);
        assert_eq!([s(1), s(2), s(3), s(4), s(5), s(6), s(7), s(20)], [12, 12, 6, 4, 3, 2, 2, 2]);
        // The paper's 10-tick slice: 10, 10, 2 (10 / 5) for 6 threads, 1 (10 / 6) for 20.
        let p = |n| tdq_slice(n, 10);
        assert_eq!([p(1), p(2), p(6), p(20)], [10, 10, 2, 1]);
    }

    #[test]
    fn linux_mapping_spans_100_to_139() {
        assert_eq!(linux_prio(120), 100);
        assert_eq!(linux_prio(223), 139);
        assert_eq!(linux_prio(172), 120);
    }
}
