//! The text trace readers (ftrace, trace-cmd report, perf script) and what follows them: any input
//! gives a trace or an error, never a panic; a trace that reads rebuilds into threads, gives stats,
//! and imports into a workload whose TOML reads back.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let Ok(raw) = schedlab_trace::text::read("fuzz.txt", src) else { return };
    schedlab_fuzz::after_read(raw);
});
