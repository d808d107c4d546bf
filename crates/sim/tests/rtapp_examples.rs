//! rt-app's own example files, from Debian's `rt-app` package (installed by .ci/run with apt-get; the
//! files are GPL and not part of this repository): every file must import and run. The test prints a
//! line per file with its result.

use schedlab_core::NSEC_PER_MSEC as MS;
use schedlab_sim::{Machine, RunConfig, Sim};
use std::path::{Path, PathBuf};

const EXAMPLES: &str = "/usr/share/doc/rt-app/examples";

fn json_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            json_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "json") {
            out.push(p);
        }
    }
}

#[test]
fn every_rt_app_example_imports_and_runs() {
    let dir = Path::new(EXAMPLES);
    assert!(
        dir.is_dir(),
        "{EXAMPLES} is missing: install Debian's rt-app package (apt-get install rt-app); .ci/run does this"
    );
    let mut files = Vec::new();
    json_files(dir, &mut files);
    assert!(files.len() >= 15, "expected rt-app's example files, found {}", files.len());
    let machine = Machine::flat(8);
    let mut failures = Vec::new();
    for f in &files {
        let name = f.strip_prefix(dir).unwrap().display().to_string();
        let src = std::fs::read_to_string(f).unwrap();
        let result =
            schedlab_workload::rtapp::import(&name, &src).map_err(|e| e.to_string()).and_then(|imp| {
                let w = &imp.workload;
                let mut p = schedlab_policies::create("cfs").unwrap();
                let duration_ns = w.duration_ns.unwrap_or(2_000 * MS).min(500 * MS);
                let cfg = RunConfig { duration_ns, check_invariants: true, ..RunConfig::default() };
                let r = Sim::new(&machine, w, p.as_mut(), "cfs", cfg)
                    .and_then(|s| s.run())
                    .map_err(|e| e.to_string())?;
                Ok(format!(
                    "{} threads, {} warnings, ran {} ms: {} switches, {} ms of work",
                    r.summary.nr_tasks,
                    imp.warnings.len(),
                    r.duration_ns / MS,
                    r.summary.nr_switches,
                    r.summary.work_ns / MS
                ))
            });
        match result {
            Ok(line) => println!("rt-app example {name}: ok, {line}"),
            Err(e) => {
                println!("rt-app example {name}: FAILED: {e}");
                failures.push(name);
            }
        }
    }
    assert!(failures.is_empty(), "rt-app examples that failed: {failures:?}");
}
