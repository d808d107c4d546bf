//! # schedlab-core
//!
//! The vocabulary every schedlab layer shares, and nothing else: integer-nanosecond time ([`Ns`]),
//! task, CPU and group ids, CPU sets, the machine [`Topology`], the read-only [`Ctx`] a scheduling
//! policy sees, and the [`SchedPolicy`] trait through which the simulator (and later a real kernel
//! through sched_ext) drives a policy.
//!
//! This crate knows nothing about events, workloads or metrics: a policy written against it is pure
//! logic over its own private state plus what [`Ctx`] shows, which is what lets the same policy run in
//! the simulator, in unit tests and on a real kernel.
#![warn(missing_docs)]

pub mod cpuset;
pub mod ctx;
pub mod ids;
pub mod pmc;
pub mod policy;
pub mod spec;
pub mod time;
pub mod topology;
pub mod weights;

pub use cpuset::CpuSet;
pub use ctx::{
    jiffies_at, CpuInfo, Ctx, DecisionCost, GroupInfo, SchedClass, TaskInfo, TaskState, CAPACITY_SCALE,
};
pub use ids::{CpuId, GroupId, TaskId};
pub use pmc::{ActivityVector, Pmc, PmcEvent, AVEC_ELEMS, NR_AVEC_ELEMS};
pub use policy::{
    BalanceKind, DequeueReason, Dispatch, EnqueueReason, Migration, PolicyStat, SchedPolicy, SwitchReason,
    WaitKind, WakeInfo, WakeKind, WorkConservation,
};
pub use time::{fmt_ns, Ns, NSEC_PER_MSEC, NSEC_PER_SEC, NSEC_PER_USEC};
pub use topology::{Level, Topology, TopologyError};
