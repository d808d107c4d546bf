//! The Perfetto protobuf trace reader: any bytes give a trace or an error, never a panic; a trace
//! that reads rebuilds into threads, gives stats, and imports into a workload whose TOML reads back.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = schedlab_trace::perfetto::read("fuzz.pftrace", data) else { return };
    schedlab_fuzz::after_read(raw);
});
