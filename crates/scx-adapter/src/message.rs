//! What schedlab's variant of `scx_rustland_core`'s BPF program packs into a message beyond the
//! stock fields (crates/schedlab-scx/build.rs): the task's scheduling policy and real-time priority
//! in the upper bits of `nr_cpus_allowed`, and a message of its own, marked [`LEFT_EXT_FLAG`], when
//! a live task leaves sched_ext (`ops.disable` outside an exit: a change to a real-time policy).

use schedlab_core::SchedClass;

/// The `flags` bit of a message that says the task left sched_ext alive (`ops.disable`): the
/// kernel's real-time or deadline class runs it now. No `SCX_ENQ_*` flag uses bit 62.
pub const LEFT_EXT_FLAG: u64 = 1 << 62;

/// Linux's `SCHED_DEADLINE`, which schedlab does not model.
const SCHED_DEADLINE: u32 = 6;

/// The facts one message's `nr_cpus_allowed` carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packed {
    /// How many CPUs the task may run on (`p->nr_cpus_allowed`, bits 0-31).
    pub nr_cpus_allowed: u64,
    /// Its scheduling class (`p->policy` + 1 in bits 32-39), `None` when not sent (stock BPF).
    pub class: Option<SchedClass>,
    /// Its real-time priority (`p->rt_priority`, bits 40-47): 1-99 in a real-time class, else 0.
    pub rt_priority: u8,
}

/// Splits a message's `nr_cpus_allowed` field into the facts packed into it.
pub fn unpack_nr_cpus_allowed(raw: u64) -> Packed {
    let policy_plus_one = ((raw >> 32) & 0xff) as u32;
    let rt_priority = ((raw >> 40) & 0xff) as u8;
    let class = policy_plus_one.checked_sub(1).map(class_of_linux_policy);
    Packed { nr_cpus_allowed: raw & 0xffff_ffff, class, rt_priority }
}

/// The class of a Linux scheduling policy number (`SCHED_*`). `SCHED_DEADLINE`, which runs ahead
/// of every real-time task, is taken as SCHED_FIFO (its real-time priority is 0, read as the
/// highest, 99, by [`rt_priority_of`]); `SCHED_EXT` (7) and unknown numbers as SCHED_NORMAL.
pub fn class_of_linux_policy(policy: u32) -> SchedClass {
    match policy {
        1 => SchedClass::Fifo,
        2 => SchedClass::Rr,
        3 => SchedClass::Batch,
        5 => SchedClass::Idle,
        SCHED_DEADLINE => SchedClass::Fifo,
        _ => SchedClass::Normal,
    }
}

/// The real-time priority schedlab gives a task of `class` whose kernel `rt_priority` is
/// `rt_priority`: 0 outside the real-time classes, 99 for a real-time class reported without one
/// (a deadline task).
pub fn rt_priority_of(class: SchedClass, rt_priority: u8) -> u8 {
    match (class.is_rt(), rt_priority) {
        (false, _) => 0,
        (true, 0) => 99,
        (true, p) => p.min(99),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_and_real_time_priority_come_out_of_the_upper_bits() {
        // SCHED_FIFO (1) at priority 50 on 3 CPUs, as the BPF side packs it.
        let raw = 3 | ((1 + 1) << 32) | (50 << 40);
        let p = unpack_nr_cpus_allowed(raw);
        assert_eq!(p, Packed { nr_cpus_allowed: 3, class: Some(SchedClass::Fifo), rt_priority: 50 });
        // SCHED_BATCH (3), SCHED_IDLE (5), SCHED_NORMAL (0).
        assert_eq!(unpack_nr_cpus_allowed(8 | (4 << 32)).class, Some(SchedClass::Batch));
        assert_eq!(unpack_nr_cpus_allowed(8 | (6 << 32)).class, Some(SchedClass::Idle));
        assert_eq!(unpack_nr_cpus_allowed(8 | (1 << 32)).class, Some(SchedClass::Normal));
    }

    #[test]
    fn a_stock_message_carries_no_class() {
        let p = unpack_nr_cpus_allowed(4);
        assert_eq!(p, Packed { nr_cpus_allowed: 4, class: None, rt_priority: 0 });
    }

    #[test]
    fn a_deadline_task_is_taken_as_the_highest_fifo() {
        let p = unpack_nr_cpus_allowed(2 | ((6 + 1) << 32));
        assert_eq!(p.class, Some(SchedClass::Fifo));
        assert_eq!(rt_priority_of(SchedClass::Fifo, p.rt_priority), 99);
        assert_eq!(rt_priority_of(SchedClass::Batch, 7), 0);
    }
}
