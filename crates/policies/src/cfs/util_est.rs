//! `util_est`, the utilisation estimate of the EEVDF variant (feature UTIL_EST, on in 6.6, 6.12
//! and 6.18).
//!
//! Source: kernel/sched/fair.c of Debian's linux-source-6.12 (6.12.117): `task_util_est`,
//! `util_est_enqueue`, `util_est_dequeue`, `util_est_update` and the util_est term of
//! `cpu_util`; kernel/sched/pelt.h `cfs_se_util_change`. PELT forgets a task's utilisation while it
//! sleeps, so a task that runs 5 ms of every 20 ms looks small right after each wakeup. At every
//! sleep the kernel therefore keeps a moving average of the task's utilisation at its dequeues (the
//! *ewma*: a rise is taken at once, a fall a quarter at a time, left alone within 1 % of capacity,
//! and not lowered when the task did not get all the CPU it wanted, runnable above utilisation),
//! and each CPU sums the ewma of the tasks queued on it. The readers take the larger of the PELT
//! value and the estimate: `cpu_util_cfs` (the balancer's group utilisation and with it the group
//! classification, SIS_UTIL's scan depth), `cpu_util_cfs_boost` (the busiest CPU for a utilisation
//! migration), `cpu_util_without` (`find_idlest_group`'s statistics) and `task_util_est`
//! (`detach_tasks` for a utilisation migration).
//!
//! 6.6 keeps two fields (`enqueued`, `ewma`) and a UTIL_EST_FASTUP feature (on); 6.8 folded them
//! into one (commit 11137d384996). With FASTUP on, the ewma 6.6 writes is never below its
//! `enqueued`, so `_task_util_est` is the same in both and one form serves every version.
//!
//! The `UTIL_AVG_UNCHANGED` flag (the estimate is not updated again until PELT has recomputed the
//! task's averages) is kept as a boolean that a task PELT update ending a period clears
//! (`cfs_se_util_change`). The task's utilisation read at a sleep is its stored average, last
//! brought up to date at a tick, pick or enqueue, as the kernel's `util_est_update` reads it before
//! the dequeue updates the load average.

use super::load_avg::CPU_CAPACITY;
use super::Cfs;
use schedlab_core::{CpuId, TaskId};

/// `UTIL_EST_WEIGHT_SHIFT`: a new sample weighs a quarter.
const WEIGHT_SHIFT: u32 = 2;
/// `UTIL_EST_MARGIN`: 1 % of capacity.
const MARGIN: u64 = CPU_CAPACITY / 100;
/// Not counted in any CPU's sum.
const NOWHERE: u32 = u32::MAX;

/// One task's estimate (`p->se.avg.util_est`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TaskUtilEst {
    /// The moving average, 0..1024.
    pub ewma: u64,
    /// `UTIL_AVG_UNCHANGED`: PELT has not recomputed the averages since the last update.
    pub unchanged: bool,
    /// The CPU whose `cfs_rq->avg.util_est` holds `ewma` (`NOWHERE`: none).
    counted_on: u32,
}

impl Default for TaskUtilEst {
    fn default() -> Self {
        TaskUtilEst { ewma: 0, unchanged: false, counted_on: NOWHERE }
    }
}

impl Cfs {
    /// The estimate of `t` (grown as tasks appear).
    fn ue_mut(&mut self, t: TaskId) -> &mut TaskUtilEst {
        if self.ue_task.len() <= t.idx() {
            self.ue_task.resize(t.idx() + 1, TaskUtilEst::default());
        }
        &mut self.ue_task[t.idx()]
    }

    /// `_task_util_est(p)`: the task's ewma (0 with UTIL_EST off).
    pub(crate) fn task_ue(&self, t: TaskId) -> u64 {
        self.ue_task.get(t.idx()).map_or(0, |u| u.ewma)
    }

    /// `util_est_enqueue`: `t`'s estimate joins `cpu`'s sum.
    pub(crate) fn util_est_enqueue(&mut self, cpu: CpuId, t: TaskId) {
        if !self.p.util_est {
            return;
        }
        let u = self.ue_mut(t);
        if u.counted_on != NOWHERE {
            return;
        }
        u.counted_on = cpu.0;
        let ewma = u.ewma;
        self.ue_cpu[cpu.idx()] += ewma;
    }

    /// `util_est_dequeue`: `t`'s estimate leaves the sum of the CPU that holds it (never below 0).
    pub(crate) fn util_est_dequeue(&mut self, t: TaskId) {
        if !self.p.util_est {
            return;
        }
        let u = self.ue_mut(t);
        if u.counted_on == NOWHERE {
            return;
        }
        let (cpu, ewma) = (u.counted_on as usize, u.ewma);
        u.counted_on = NOWHERE;
        self.ue_cpu[cpu] = self.ue_cpu[cpu].saturating_sub(ewma);
    }

    /// `util_est_update(cfs_rq, p, task_sleep)` on `cpu`: at a sleep, the task's stored
    /// utilisation becomes a new sample of its estimate (not lowered when it is above the CPU's
    /// capacity: no proof of idle time).
    pub(crate) fn util_est_update(&mut self, t: TaskId, cpu: CpuId, task_sleep: bool) {
        if !self.p.util_est || !task_sleep {
            return;
        }
        let Some(avg) = self.pelt_task.get(t.idx()).copied() else { return };
        let capacity = self.capacity(cpu);
        let u = self.ue_mut(t);
        if u.unchanged {
            return;
        }
        let dequeued = avg.util_avg;
        let mut ewma = u.ewma;
        if ewma <= dequeued {
            ewma = dequeued;
        } else {
            let diff = ewma - dequeued;
            if diff >= MARGIN {
                if dequeued > capacity {
                    return;
                }
                if dequeued + MARGIN >= avg.runnable_avg {
                    ewma = ((ewma << WEIGHT_SHIFT) - diff) >> WEIGHT_SHIFT;
                }
            }
        }
        u.ewma = ewma;
        u.unchanged = true;
    }

    /// `cfs_se_util_change`: PELT recomputed `t`'s averages, so its next sleep updates the estimate.
    pub(crate) fn util_est_pelt_changed(&mut self, t: TaskId) {
        if let Some(u) = self.ue_task.get_mut(t.idx()) {
            u.unchanged = false;
        }
    }

    /// `cfs_rq->avg.util_est` of `cpu`: the estimates of the tasks queued there.
    pub(crate) fn cpu_ue(&self, cpu: CpuId) -> u64 {
        self.ue_cpu.get(cpu.idx()).copied().unwrap_or(0)
    }

    /// Whether `t`'s estimate is counted in `cpu`'s sum (`task_on_rq_queued(p)` there).
    pub(crate) fn ue_counted_on(&self, t: TaskId, cpu: CpuId) -> bool {
        self.ue_task.get(t.idx()).is_some_and(|u| u.counted_on == cpu.0)
    }
}
