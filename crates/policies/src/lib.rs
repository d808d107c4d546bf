//! # schedlab-policies
//!
//! The schedulers schedlab implements, each behind [`SchedPolicy`], one file (or folder) per policy,
//! each opening with an essay that names its source. Policies depend only on schedlab-core: they are
//! pure logic over their own state and the read-only [`Ctx`](schedlab_core::Ctx).
//!
//! Policies are created by name through the [`registry`]: a spec such as
//! `cfs[sched_latency_ns=6000000,start_debit=false]` names a policy and overrides parameters; each
//! policy documents its parameters with defaults and units ([`PolicyInfo::params`]).
#![warn(missing_docs)]

pub mod bfs;
pub mod bsd4;
pub mod cfs;
pub mod domains;
pub mod elsc;
pub mod fifo;
pub mod htfs;
pub mod linux24;
pub mod linux_rt;
pub mod o1;
pub mod params;
pub mod placement;
pub mod pmqs;
mod prandom;
pub mod registry;
pub mod rsdl;
#[cfg(test)]
mod tests_renice;
pub mod testworld;
pub mod ule;
pub mod vtrr;

pub use params::{apply, parse_bool, parse_u64, ParamError, ParamInfo, Params};
pub use registry::{create, parse_spec, policies, register, PolicyInfo};
pub use schedlab_core::SchedPolicy;
