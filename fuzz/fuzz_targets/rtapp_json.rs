//! The rt-app JSON importer: any input gives a workload or an error, never a panic; a workload it
//! accepts is valid and, unless it is a fragment without tasks (imported with a warning, refused when
//! run, and not a workload file), can be written as TOML that reads back.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let Ok(imp) = schedlab_workload::rtapp::import("fuzz.json", src) else { return };
    if let Err(e) = imp.workload.validate() {
        panic!("accepted an invalid workload: {e}");
    }
    if imp.workload.tasks.is_empty() {
        return;
    }
    let text = schedlab_workload::to_toml(&imp.workload);
    if let Err(e) = schedlab_workload::parse_toml("written.toml", &text) {
        panic!("the imported workload's TOML does not read back: {e}\n{text}");
    }
});
