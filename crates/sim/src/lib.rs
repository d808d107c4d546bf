//! # schedlab-sim
//!
//! A deterministic discrete-event simulation of a multicore machine that drives a
//! [`SchedPolicy`](schedlab_core::SchedPolicy) with a [`Workload`](schedlab_workload::Workload).
//!
//! * Time is integer nanoseconds; events fire in `(time, sequence)` order ([`event`]), so the same
//!   machine, policy, workload and seed give byte-identical results.
//! * The engine owns the clock, task state machines, blocking objects, the context switch and every
//!   cost (context switch, scheduler decisions from the work a policy reports, IPI latency, cache
//!   refill after migration or eviction) and all accounting ([`report`]).
//! * The hook call order and conventions are documented on the trait
//!   ([`schedlab_core::policy`]); the cost model on [`CostModel`]; docs/architecture.md ties it together.
#![warn(missing_docs)]

pub mod conformance;
pub mod contention;
pub mod dvfs;
pub mod event;
mod exec;
pub mod histogram;
pub mod machine;
mod pmc;
pub mod random;
pub mod report;
mod sim;
pub mod timeline;
pub mod trace;

pub use contention::ContentionModel;
pub use dvfs::{DvfsModel, Governor};
pub use histogram::{Bucket, Histogram, LatencySummary};
pub use machine::{CostModel, Machine, MachineError};
pub use random::RunRng;
pub use report::RunReport;
pub use sim::{limits, RunConfig, RunError, Sim};
pub use trace::Trace;
