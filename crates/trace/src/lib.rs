//! Recorded Linux scheduling traces in schedlab: read them, measure them the way a simulated run is
//! measured, and turn them into workloads that replay under any policy and machine ("what if this
//! recorded run had used ULE?").
//!
//! The pipeline has one job per module:
//!
//! * [`text`] and [`perfetto`] read the formats scheduler developers record (ftrace's `trace` and
//!   `trace_pipe`, `trace-cmd report`, `perf script` / `perf sched script`, Perfetto protobuf) into
//!   one event model ([`event`]);
//! * [`timeline`] sorts the events and rebuilds every thread's life: running intervals, waits,
//!   sleeps, who woke whom, forks and exits, robust to lost events, threads alive before the trace
//!   and pid reuse;
//! * [`stats`] reports a recording in the simulator's `schedlab.run/1` form (`source = "trace"`), so
//!   `compare` tables put "recorded" next to "replayed under cfs/ule/htfs";
//! * [`import`] builds a schedlab workload from a recording: per thread a program of CPU bursts and
//!   blocking, wake dependencies as semaphore edges, forks and exits kept. docs/traces.md says what a
//!   trace cannot tell and what is assumed.

pub mod event;
pub mod import;
pub mod perfetto;
pub mod stats;
pub mod text;
pub mod timeline;

pub use event::{Event, Kind, Loc, PrevState, RawTrace, TaskRef};
pub use import::{import, BurstOp, ImportOptions, Imported};
pub use timeline::{Recording, Thread};

/// A trace that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be read.
    #[error("{file}: {err}")]
    Io {
        /// The file.
        file: String,
        /// Why.
        err: std::io::Error,
    },
    /// The content is not a trace of a known format, or is damaged.
    #[error("{file}: {loc}: {msg}")]
    Parse {
        /// The file.
        file: String,
        /// Where.
        loc: Loc,
        /// What is wrong.
        msg: String,
    },
    /// The file reads, but holds no scheduling events.
    #[error("{file}: no scheduling events (sched_switch, sched_waking...) in this {format} trace")]
    Empty {
        /// The file.
        file: String,
        /// Its format.
        format: &'static str,
    },
}

/// Reads a trace from bytes, recognising the format: Perfetto protobuf, or text (ftrace,
/// trace-cmd report, perf script). `name` names the input in errors.
pub fn read_bytes(name: &str, bytes: &[u8]) -> Result<RawTrace, TraceError> {
    let raw = if perfetto::looks_like(bytes) {
        perfetto::read(name, bytes)?
    } else {
        let src = std::str::from_utf8(bytes).map_err(|e| TraceError::Parse {
            file: name.to_string(),
            loc: Loc::Offset(e.valid_up_to()),
            msg: "neither a Perfetto protobuf trace nor text (invalid UTF-8)".into(),
        })?;
        text::read(name, src)?
    };
    if !raw.events.iter().any(|e| !matches!(e.kind, Kind::Lost { .. })) {
        return Err(TraceError::Empty { file: name.to_string(), format: raw.format });
    }
    Ok(raw)
}

/// Reads a trace file and rebuilds its threads.
pub fn load(path: &str) -> Result<Recording, TraceError> {
    let bytes = std::fs::read(path).map_err(|err| TraceError::Io { file: path.to_string(), err })?;
    Ok(timeline::build(read_bytes(path, &bytes)?))
}
