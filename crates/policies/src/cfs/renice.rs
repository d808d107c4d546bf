//! A live task's new nice level: `set_user_nice` (kernel/sched.c in 2.6.38, kernel/sched/core.c in
//! 6.6, kernel/sched/syscalls.c in 6.12 and 6.18) with the fair class's parts.
//!
//! 2.6.38 takes a queued task (running or not) off its runqueue with `dequeue_task(rq, p, 0)` (its
//! vruntime becomes relative to `min_vruntime`), sets the weight of the new nice level, enqueues it
//! again (the vruntime absolute once more), and reschedules the CPU when the priority rose, or when
//! it fell for the running task. A sleeping task only gets the new weight.
//!
//! 6.6 onwards: `dequeue_task(DEQUEUE_SAVE)` saves the lag (and in 6.12 makes the deadline relative,
//! PLACE_REL_DEADLINE), the running task is put back (`put_prev_task`), `reweight_task` scales the
//! saved lag by old/new weight (`reweight_entity` of an entity off its runqueue: the kernel keeps
//! `vlag = V - v` while the lag in service is `w * (V - v)`; 6.12.y and 6.18 scale a relative
//! deadline likewise) and rescales the task's load average, `enqueue_task(ENQUEUE_RESTORE)` places
//! it at the scaled lag, `set_next_task` makes a running task current again, and
//! `prio_changed_fair` reschedules: the running task when its priority fell, another queued task by
//! the wakeup-preemption test. A sleeping task's saved lag is scaled the same way. A task whose
//! dequeue 6.12 delayed (DELAY_DEQUEUE) is still queued for the kernel: it takes the same path and
//! stays delayed.

use super::fair::task_load;
use super::Cfs;
use schedlab_core::{Ctx, TaskId, TaskState};

impl Cfs {
    /// A change between the fair classes (SCHED_OTHER, BATCH, IDLE) of a task off its runqueue
    /// (`__sched_setscheduler` after `dequeue_task(DEQUEUE_SAVE)`): `set_load_weight` gives it the
    /// weight of its new class (`WEIGHT_IDLEPRIO` for SCHED_IDLE), through `reweight_task` in 6.6
    /// onwards (its saved lag scaled by old/new weight, its load average rescaled), a store in
    /// 2.6.38 (its relative vruntime kept). The enqueue that follows places it.
    pub(crate) fn reclass_fair(&mut self, ctx: &Ctx, t: TaskId) {
        let info = ctx.task(t);
        let se = self.task_se[t.idx()];
        let old_weight = self.ses[se as usize].weight;
        let (weight, inv_weight) = task_load(info.class, info.nice);
        if weight == old_weight {
            return;
        }
        if self.eevdf {
            self.pelt_reweight(t, false, old_weight, weight, ctx.now);
        }
        self.reweight_entity(se, weight, ctx.now);
        self.ses[se as usize].inv_weight = inv_weight;
    }

    /// `set_user_nice` for a task of the fair class; `ctx.task(t).nice` is the new level. Returns
    /// whether the task's CPU is to be rescheduled.
    pub(crate) fn renice_fair(&mut self, ctx: &Ctx, t: TaskId, old_nice: i8) -> bool {
        let info = ctx.task(t);
        let now = ctx.now;
        let (cpu, running) = (info.cpu, info.state == TaskState::Running);
        let delayed = self.eevdf && self.is_delayed(t);
        let queued = running || info.state == TaskState::Runnable || delayed;
        let se = self.task_se[t.idx()];
        let old_weight = self.ses[se as usize].weight;
        let (weight, inv_weight) = task_load(info.class, info.nice);
        if queued {
            if self.eevdf {
                self.pelt_before_dequeue(cpu, t, now);
            }
            if self.load49() {
                // set_user_nice's dequeue_task: the signals accrue at the old weight up to now.
                self.l49_before_dequeue(cpu, t, now);
            }
            if delayed {
                // The delay took it out of the count already; `dequeue_task` takes it out again.
                self.nr_running_total += 1;
            }
            self.dequeue_task(t, false, now);
            if self.eevdf && running {
                self.put_prev_task(t, now);
            }
        }
        if self.eevdf {
            self.pelt_reweight(t, queued, old_weight, weight, now);
        }
        // reweight_entity of an entity off its runqueue; 2.6.38's set_load_weight only stores it.
        self.reweight_entity(se, weight, now);
        self.ses[se as usize].inv_weight = inv_weight;
        if !queued {
            return false;
        }
        if self.load49() {
            self.l49_before_enqueue(cpu, t, now);
        }
        self.enqueue_task(t, false, false, now);
        if delayed {
            self.nr_running_total -= 1;
        }
        if !self.eevdf {
            // 2.6.38: `if (delta < 0 || (delta > 0 && task_running(rq, p))) resched_task(rq->curr)`.
            let delta = info.nice as i32 - old_nice as i32;
            return delta < 0 || (delta > 0 && running);
        }
        if running {
            self.set_next_task(t, now);
        }
        // prio_changed_fair.
        if self.rqs[self.root(cpu) as usize].nr_running == 1 {
            return false;
        }
        if running {
            return info.nice > old_nice;
        }
        match ctx.cpu(cpu).curr {
            Some(curr) if !delayed && curr != t => self.check_preempt_eevdf(ctx, curr, t, false),
            _ => false,
        }
    }
}
