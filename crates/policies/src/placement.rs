//! Reduced CPU placement shared by policies whose kernel placement code is not modelled in detail
//! (HTFS's use of CFS's `select_task_rq_fair`). Each
//! policy passes its own notion of CPU load.

use schedlab_core::{CpuId, Ctx, Level, TaskId};

/// Fork placement: the least loaded allowed CPU, `home` (the parent's) on ties, then the lowest number.
pub(crate) fn least_loaded(ctx: &Ctx, t: TaskId, home: CpuId, mut load: impl FnMut(CpuId) -> u64) -> CpuId {
    let mut best: Option<(u64, bool, CpuId)> = None;
    for c in ctx.task(t).allowed.iter() {
        let key = (load(c), c != home, c);
        if best.is_none_or(|b| key < b) {
            best = Some(key);
        }
    }
    best.expect("non-empty affinity").2
}

/// Wakeup placement: the previous CPU, or the waker's when it is less loaded (the wake-affine test
/// reduced to its load comparison); then, if that CPU is busy, an idle allowed CPU sharing its
/// last-level cache (lowest number first).
pub(crate) fn wake_target(
    ctx: &Ctx,
    t: TaskId,
    waker_cpu: CpuId,
    mut load: impl FnMut(CpuId) -> u64,
) -> CpuId {
    let info = ctx.task(t);
    let prev = info.cpu;
    let mut target = prev;
    if waker_cpu != prev && info.allowed.contains(waker_cpu) && load(waker_cpu) < load(prev) {
        target = waker_cpu;
    }
    if !ctx.is_idle(target) {
        if let Some(c) =
            info.allowed.iter().find(|&c| ctx.is_idle(c) && ctx.topo.level(c, target) <= Level::Llc)
        {
            target = c;
        }
    }
    if !info.allowed.contains(target) {
        target = info.allowed.first().expect("non-empty affinity");
    }
    target
}

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
