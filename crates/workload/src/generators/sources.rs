//! Where each generator's time and cost defaults come from (issue 32: "give each cost a source").
//!
//! Every parameter whose default is a nonzero duration (a CPU cost, a disk time, a think time, a
//! period) has an entry here, checked by a test: either [`Source::Cited`], from the real program's
//! own option default, a paper or a measurement, or [`Source::Chosen`], a value schedlab picked where
//! no source gives one. `schedlab reproduce` refuses an experiment whose case runs a chosen default
//! without declaring it `[[free]]` with a range (crates/cli/src/reproduce/spec.rs), so no unsourced
//! number can decide a verdict unseen. A zero default that switches a mechanism off (`master=0s`,
//! `create_cost=0s`) is not a cost and needs no entry.

/// The origin of one parameter's default value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// From the real program, a paper or a measurement: the citation.
    Cited(&'static str),
    /// Picked by schedlab where no source gives it: why the value is plausible. An experiment that
    /// runs it must declare it `[[free]]`.
    Chosen(&'static str),
}

impl Source {
    /// The text for a reference table: `source: ...` or `no source: ...`.
    pub fn describe(&self) -> String {
        match self {
            Source::Cited(s) => format!("source: {s}"),
            Source::Chosen(s) => format!("no source: {s}"),
        }
    }
}

use Source::{Chosen, Cited};

const KBUILD_MEASURED: &str = "measured with perf stat on a 2026 x86-64 VM compiling libbpf's C sources with gcc -O2 -pipe (the generator's notes), not on the papers' machines";
const HACKBENCH_MSG: &str = "a write or read of a 100-byte message on a current machine; seed 000's Athlon II took 0.9 us (its table 5's CFS times), which its experiments set";
const PIPE_MSG: &str = "a light pipe call; `schedlab calibrate` measures this machine's (`syscall_ns`)";

/// `(generator, parameter, source)` for every nonzero duration default.
const SOURCES: &[(&str, &str, Source)] = &[
    ("pi", "work", Cited("seed 003 fig. 4.1-4.6: one pi.pl process alone ran 4.55 s (O(1)) to 4.63 s (CFS); the experiments run 4.66 s, the thesis's 466.66 s for 100 processes")),
    ("kernel-build", "compile", Chosen("the papers give no compile times for their trees: a gcc -O2 compile of a mid-sized C file")),
    ("kernel-build", "compile_stddev", Chosen("a wide spread of file sizes")),
    ("kernel-build", "read", Chosen("reading a cold source file from a 2000s disk")),
    ("kernel-build", "write", Chosen("writing an object file")),
    ("kernel-build", "link", Chosen("the final link")),
    ("kernel-build", "sh_cost", Cited(KBUILD_MEASURED)),
    ("kernel-build", "driver_cost", Cited(KBUILD_MEASURED)),
    ("kernel-build", "as_cost", Cited(KBUILD_MEASURED)),
    ("kernel-build", "as_per_kib", Cited(KBUILD_MEASURED)),
    ("kernel-build", "fixdep_cost", Cited(KBUILD_MEASURED)),
    ("unixbench-spawn", "fork_cost", Chosen("a fork of a small process")),
    ("unixbench-spawn", "child_cost", Chosen("a child's exit path")),
    ("unixbench-execl", "exec_cost", Chosen("an execve of a small static program and its first run")),
    ("bonnie", "block_io", Chosen("one block's service time on a SATA disk")),
    ("bonnie", "block_cpu", Chosen("copying one block through the page cache")),
    ("hackbench", "msg_cost", Chosen(HACKBENCH_MSG)),
    ("perf-messaging", "msg_cost", Chosen(HACKBENCH_MSG)),
    ("perf-pipe", "msg_cost", Chosen(PIPE_MSG)),
    ("unixbench-context1", "msg_cost", Chosen(PIPE_MSG)),
    ("unixbench-pipe", "msg_cost", Chosen(PIPE_MSG)),
    ("sysbench-cpu", "event_cost", Chosen("one event on a current core; seed 000's table 6 implies 1.72 ms on its Athlon II, which its experiments set")),
    ("sysbench-threads", "op_cost", Chosen("an uncontended pthread mutex lock or unlock with its system call")),
    ("sysbench-mutex", "loop_cost", Chosen("one iteration of an empty loop")),
    ("sysbench-oltp", "think", Chosen("the ULE paper does not give its clients' pace")),
    ("sysbench-oltp", "query", Chosen("a short read-write transaction's CPU time in MySQL")),
    ("sysbench-oltp", "query_stddev", Chosen("a spread of query costs")),
    ("sysbench-oltp", "update", Chosen("an update under the table lock")),
    ("schbench", "sleep", Cited("schbench's own default, `-s` (sleep_usec = 100 in schbench.c)")),
    ("schbench", "work", Chosen("five 256 KB matrix multiplies (`-n 5 -F 256`) on a current core")),
    ("cyclictest", "interval", Cited("cyclictest's DEFAULT_INTERVAL, 1000 us (rt-tests src/cyclictest/cyclictest.c)")),
    ("cyclictest", "distance", Cited("cyclictest's DEFAULT_DISTANCE, 500 us (rt-tests src/cyclictest/cyclictest.c)")),
    ("editor", "think", Chosen("a typist's pause between keystrokes")),
    ("editor", "burst_min", Chosen("handling one keystroke")),
    ("editor", "burst_max", Chosen("handling one keystroke")),
    ("latency-probe", "period", Cited("seed 000 sec. 5.1: the probe sleeps 0.25 s")),
    ("latency-probe", "work", Chosen("reading the clock and recording the lateness: a few system calls")),
    ("system-noise", "interval", Cited("seed 003 fig. 4.4: a lone pi.pl process was switched involuntarily 13.6 times in 4.63 s (CFS) and 13.48 in 4.55 s (O(1)), 2.95 a second")),
    ("system-noise", "work", Chosen("a kernel thread's or daemon's short job")),
    ("volanomark", "msg_cost", Chosen("a Java thread's work on one message, network stack included")),
    ("apache-ab", "request_cost", Chosen("serving one small static page")),
    ("apache-ab", "request_stddev", Chosen("a spread of request costs")),
    ("apache-ab", "ab_cost", Chosen("ab's handling of one response")),
    ("nas-mg", "top_work", Chosen("a thread's share of the finest grid level")),
    ("nas-mg", "spin", Cited("seed 002 sec. 6.3: a thread \"waits on a spin-barrier for 100ms and then sleeps\"")),
    ("c-ray", "work", Chosen("a thread's share of the image")),
    ("blackscholes", "price_cost", Chosen("one Black-Scholes evaluation (two CNDF calls, a log, an exp and a square root) on a 2 GHz core without vectors")),
    ("blackscholes", "read_cost", Chosen("fscanf of one line of nine fields")),
    ("blackscholes", "write_cost", Chosen("fprintf of one price")),
    ("ferret", "load_cost", Chosen("decoding one small JPEG; the ULE paper says ferret does not scale to 32 cores, which a serial stage of this size gives")),
    ("ferret", "seg_cost", Chosen("segmenting one image")),
    ("ferret", "extract_cost", Chosen("extracting one image's region features")),
    ("ferret", "vec_cost", Chosen("one LSH index query")),
    ("ferret", "rank_cost", Chosen("ranking one query's candidates by earth mover's distance")),
    ("ferret", "out_cost", Chosen("printing one result line")),
    ("pinned-spinners", "unpin_at", Cited("seed 002 sec. 6.1, fig. 6: the taskset command runs at 14.5 s")),
];

/// Where `generator`'s default for `param` comes from; `None` when the parameter has no entry (its
/// default is not a nonzero duration).
pub fn source_of(generator: &str, param: &str) -> Option<Source> {
    SOURCES.iter().find(|(g, p, _)| *g == generator && *p == param).map(|e| e.2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generators::generators;

    #[test]
    fn every_nonzero_duration_default_names_its_source_and_every_entry_is_a_parameter() {
        for g in generators() {
            for (key, default, _) in g.params {
                let nonzero_duration = crate::parse_duration(default).is_ok_and(|ns| ns > 0);
                let entry = source_of(g.name, key);
                assert_eq!(
                    nonzero_duration,
                    entry.is_some(),
                    "{}.{key} = {default}: a nonzero duration default needs an entry in SOURCES (and only one)",
                    g.name
                );
            }
        }
        for (g, p, _) in SOURCES {
            let gen = generators().into_iter().find(|x| x.name == *g);
            assert!(gen.is_some_and(|x| x.params.iter().any(|d| d.0 == *p)), "{g}.{p} is not a parameter");
        }
        let mut seen = std::collections::HashSet::new();
        assert!(SOURCES.iter().all(|(g, p, _)| seen.insert((g, p))), "an entry is listed twice");
        assert_eq!(source_of("hackbench", "groups"), None);
        assert!(matches!(source_of("cyclictest", "interval"), Some(Source::Cited(_))));
        assert!(matches!(source_of("apache-ab", "request_cost"), Some(Source::Chosen(_))));
    }
}
