//! The placement of the single-queue baselines (FIFO, round robin, VTRR), which have no kernel
//! placement code of their own to follow.

use schedlab_core::{CpuId, Ctx, TaskId};

/// The previous CPU if idle, else the first idle allowed CPU, else the previous CPU (or the first
/// allowed one if the previous is not allowed): the placement of the single-queue baselines.
pub fn idle_first(ctx: &Ctx, t: TaskId) -> CpuId {
    let task = ctx.task(t);
    let prev = task.cpu;
    if task.allowed.contains(prev) && ctx.is_idle(prev) {
        return prev;
    }
    task.allowed.iter().find(|&c| ctx.is_idle(c)).unwrap_or(if task.allowed.contains(prev) {
        prev
    } else {
        task.allowed.first().expect("non-empty affinity")
    })
}
