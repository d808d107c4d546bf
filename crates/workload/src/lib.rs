//! # schedlab-workload
//!
//! What runs on the simulated machine: a [`Workload`] is a set of task templates, each running a
//! [`Program`] of [`Op`]s (compute, sleep, lock, send, fork, ...), plus the shared objects those
//! operations use (mutexes, condition variables, pipes, barriers, devices), task groups, scheduled
//! affinity changes and a stop condition.
//!
//! Workloads are built in Rust with [`WorkloadBuilder`] or read from TOML with [`parse_toml`]
//! (the format is in docs/workload-format.md). Both produce the same validated [`Workload`]; the
//! simulator (schedlab-sim) executes it. This crate does not depend on the simulator.
#![warn(missing_docs)]

mod builder;
mod duration;
pub mod generators;
mod model;
pub mod rtapp;
mod toml_form;
mod toml_write;

pub use builder::{ProgramBuilder, WorkloadBuilder};
pub use duration::{parse_duration, MAX_TIME_NS};
pub use model::*;
pub use toml_form::{parse_toml, parse_toml_overriding, parse_toml_with, Limits, WorkloadError};
pub use toml_write::{fmt_duration, to_toml};
