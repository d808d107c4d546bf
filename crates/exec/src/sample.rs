//! Per-task run-time series of a real run (`exec --sample-interval`): every interval the controller
//! reads each live task's `/proc/<tgid>/task/<tid>/schedstat` (field 1, the kernel's
//! `sum_exec_runtime`: its time on a CPU since its creation, brought up to date at ticks and
//! switches), so a report can say how a task's CPU time grew, not only its total: e.g. fibo's share
//! of the core after sysbench starts, whatever fibo got before (seed 002 sec. 5.1).
//!
//! The report's `series` then has `time_ns` and `task_run_ns` in the simulator's form (a task's row
//! starts at the first sample after its creation and is aligned to the end); the per-CPU run-queue
//! lengths, switches and migrations the simulator samples are not readable without tracing and are
//! left empty. A task that ended keeps its last sampled value, so the run it did after its last
//! sample (less than an interval) is missing from its row (its total is in `run_ns`); one that lived
//! and ended between two samples has no values.
//!
//! The cost: one `pread` of a kept-open file per live task per sample, made by the controller
//! thread, which runs at SCHED_FIFO when `--fifo-controller` is given and so takes that time from the
//! workload's CPUs.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// The most samples a run may take: the simulator's cap on a series
/// ([`schedlab_sim::report::MAX_SERIES_SAMPLES`]).
pub const MAX_SAMPLES: u64 = schedlab_sim::report::MAX_SERIES_SAMPLES as u64;

/// The finest interval allowed, ns: finer ones make the controller's reads a load of their own.
pub const MIN_INTERVAL_NS: u64 = 1_000_000;

/// One task's row.
struct Row {
    /// Its schedstat file, while the task lives.
    file: Option<File>,
    /// Values, from its first sample on.
    values: Vec<u64>,
}

/// The samples taken so far.
pub struct Sampler {
    interval_ns: u64,
    /// When the next sample is due, ns after the common start (on the interval's grid: a late
    /// sample does not shift the later ones).
    next_ns: u64,
    /// Sample times, ns after the common start.
    times: Vec<u64>,
    /// Rows by task id.
    rows: BTreeMap<u32, Row>,
    buf: Vec<u8>,
}

/// Field 1 of a schedstat file's text: ns on a CPU.
fn parse_run_ns(text: &[u8]) -> Option<u64> {
    std::str::from_utf8(text).ok()?.split_whitespace().next()?.parse().ok()
}

impl Sampler {
    /// A sampler taking a sample every `interval_ns`.
    pub fn new(interval_ns: u64) -> Sampler {
        Sampler { interval_ns, next_ns: 0, times: Vec::new(), rows: BTreeMap::new(), buf: vec![0; 256] }
    }

    /// When the next sample is due, ns after the common start.
    pub fn next_ns(&self) -> u64 {
        self.next_ns
    }

    /// Takes a sample at `at_ns` (after the common start) of the live tasks `(id, tid, tgid)`; a
    /// task sampled before and no longer live keeps its last value.
    pub fn sample(&mut self, at_ns: u64, live: &[(u32, i32, i32)]) {
        self.times.push(at_ns);
        self.next_ns = (at_ns / self.interval_ns + 1) * self.interval_ns;
        let live_ids: std::collections::BTreeSet<u32> = live.iter().map(|l| l.0).collect();
        for &(id, tid, tgid) in live {
            self.rows.entry(id).or_insert_with(|| Row {
                file: File::open(format!("/proc/{tgid}/task/{tid}/schedstat")).ok(),
                values: Vec::new(),
            });
        }
        for (id, row) in self.rows.iter_mut() {
            if !live_ids.contains(id) {
                row.file = None;
            }
            let read = row.file.as_ref().and_then(|f| {
                let n = f.read_at(&mut self.buf, 0).ok()?;
                parse_run_ns(&self.buf[..n])
            });
            if read.is_none() {
                // Ended (or unreadable): it keeps its last value from here on.
                row.file = None;
            }
            // A task unreadable from its first sample on has no values.
            if let Some(v) = read.or_else(|| row.values.last().copied()) {
                row.values.push(v);
            }
        }
    }

    /// The series for the report: rows in the order of `ids` (the report's tasks).
    pub fn finish(self, ids: &[u32]) -> schedlab_sim::report::Series {
        let task_run_ns =
            ids.iter().map(|id| self.rows.get(id).map(|r| r.values.clone()).unwrap_or_default()).collect();
        schedlab_sim::report::Series {
            interval_ns: self.interval_ns,
            time_ns: self.times,
            nr_running: Vec::new(),
            task_run_ns: Some(task_run_ns),
            task_policy: None,
            switches: Vec::new(),
            migrations: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_field_one_is_the_run_time() {
        assert_eq!(parse_run_ns(b"123456 789 3\n"), Some(123_456));
        assert_eq!(parse_run_ns(b""), None);
        assert_eq!(parse_run_ns(b"x 1 2"), None);
    }

    fn spin_ms(ms: u64) {
        let t = crate::sys::now_ns();
        while crate::sys::now_ns() < t + ms * 1_000_000 {}
    }

    #[test]
    fn this_threads_row_grows_with_its_cpu_time_and_an_ended_task_keeps_its_last_value() {
        let (tid, pid) = (crate::sys::gettid(), crate::sys::getpid());
        let mut s = Sampler::new(1_000_000);
        s.sample(0, &[(0, tid, pid), (1, i32::MAX - 1, pid)]);
        spin_ms(12);
        s.sample(1_000_000, &[(0, tid, pid)]);
        spin_ms(3);
        s.sample(2_000_000, &[]);
        let series = s.finish(&[0, 1]);
        let rows = series.task_run_ns.unwrap();
        assert_eq!(series.time_ns, vec![0, 1_000_000, 2_000_000]);
        assert_eq!(rows[0].len(), 3);
        // It spun 12 ms between the samples; schedstat is brought up to date at ticks and switches,
        // so a reading lags by at most a tick (10 ms at HZ 100).
        assert!(rows[0][1] >= rows[0][0] + 2_000_000, "{:?}", rows[0]);
        assert_eq!(rows[0][2], rows[0][1], "kept after its end");
        assert!(rows[1].is_empty(), "no such thread: no values");
    }
}
