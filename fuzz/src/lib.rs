//! Checks shared by the fuzz targets.

use schedlab_trace::{import, timeline, ImportOptions, RawTrace};

/// What must hold for any trace a reader accepted: it rebuilds into threads, gives stats, and
/// imports (when it has threads to keep) into a workload whose TOML reads back.
pub fn after_read(raw: RawTrace) {
    let rec = timeline::build(raw);
    let opts = ImportOptions { name: "fuzz".into(), ..ImportOptions::default() };
    let _ = schedlab_trace::stats::report(&rec, &opts.filter, "fuzz");
    if let Ok(imp) = import(&rec, &opts) {
        if let Err(e) = imp.workload.validate() {
            panic!("imported an invalid workload: {e}");
        }
        if let Err(e) = schedlab_workload::parse_toml("imported.toml", &imp.toml) {
            panic!("the imported workload's TOML does not read back: {e}\n{}", imp.toml);
        }
    }
}
