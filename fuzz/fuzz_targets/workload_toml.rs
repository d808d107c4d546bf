//! The workload TOML reader: any input gives a workload or an error, never a panic; a workload it
//! accepts is valid and survives a round trip through the TOML writer unchanged.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let Ok(w) = schedlab_workload::parse_toml("fuzz.toml", src) else { return };
    if let Err(e) = w.validate() {
        panic!("accepted an invalid workload: {e}");
    }
    let text = schedlab_workload::to_toml(&w);
    let back = schedlab_workload::parse_toml("written.toml", &text)
        .unwrap_or_else(|e| panic!("the writer's output does not read back: {e}\n{text}"));
    assert_eq!(back, w, "round trip changed the workload:\n{text}");
});
