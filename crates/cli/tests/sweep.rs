//! `schedlab sweep` end to end: the grid's rows match single `schedlab run`s, an interrupted sweep
//! (the process killed) resumes to the same results, failed runs are rows with an error, and bad
//! grids get one error naming the file, line and key.

mod common;
use common::schedlab;
use std::path::{Path, PathBuf};
use std::process::Command;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("schedlab-sweep-test-{}", std::process::id())).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(path: &Path, text: &str) -> String {
    std::fs::write(path, text).unwrap();
    path.to_str().unwrap().to_string()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_row_is_the_run_schedlab_run_gives() {
    let d = dir("rows");
    let grid = write(
        &d.join("grid.toml"),
        r#"
policies = ["cfs", "ule"]
workloads = ["hackbench[groups=1,loops=20]", "sysbench-cpu[threads=6]"]
machines = ["core2duo"]
seeds = [3, 4]
duration = "300ms"

[metrics]
p99_us = "summary.wakeup_latency.p99_ns / 1000"
switches = "summary.nr_switches"
"#,
    );
    let out = d.join("out");
    let (ok, text, err) = schedlab(&["sweep", &grid, "-o", out.to_str().unwrap(), "--jobs", "2"]);
    assert!(ok, "{err}");
    assert!(text.contains("8 runs (1 machine x 2 workloads x 2 policies x 2 seeds), 8 run now"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&read(&out.join("results.json"))).unwrap();
    assert_eq!(json["schema"], "schedlab.sweep/1");
    let rows = json["rows"].as_array().unwrap();
    // Grid order: machine, workload, policy, seed.
    let order: Vec<(String, String, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["workload"].as_str().unwrap().into(),
                r["policy"].as_str().unwrap().into(),
                r["seed"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(order[0], ("hackbench[groups=1,loops=20]".into(), "cfs".into(), 3));
    assert_eq!(order[1], ("hackbench[groups=1,loops=20]".into(), "cfs".into(), 4));
    assert_eq!(order[2], ("hackbench[groups=1,loops=20]".into(), "ule".into(), 3));
    assert_eq!(order[7], ("sysbench-cpu[threads=6]".into(), "ule".into(), 4));
    // Each row is what a single run of the same configuration reports.
    for i in [2, 5] {
        let r = &rows[i];
        let single = d.join(format!("single{i}.json"));
        let (ok, _, err) = schedlab(&[
            "run",
            "-q",
            "--machine",
            "core2duo",
            "--policy",
            r["policy"].as_str().unwrap(),
            "--workload",
            r["workload"].as_str().unwrap(),
            "--seed",
            &r["seed"].to_string(),
            "--duration",
            "300ms",
            "--json",
            single.to_str().unwrap(),
        ]);
        assert!(ok, "{err}");
        let s: serde_json::Value = serde_json::from_str(&read(&single)).unwrap();
        assert_eq!(r["summary"], s["summary"], "row {i}");
        let p99 = s["summary"]["wakeup_latency"]["p99_ns"].as_f64().unwrap() / 1000.0;
        assert_eq!(r["metrics"]["p99_us"].as_f64(), Some(p99));
        assert_eq!(r["metrics"]["switches"].as_f64(), s["summary"]["nr_switches"].as_f64());
    }
    // The CSV: a header and one line per row, the specs with commas quoted.
    let csv = read(&out.join("results.csv"));
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 9, "{csv}");
    assert!(lines[0].starts_with("machine,workload,policy,seed,duration_ns,status,"), "{}", lines[0]);
    assert!(lines[0].ends_with(",p99_us,switches,error"), "{}", lines[0]);
    assert!(
        lines[1].starts_with("core2duo,\"hackbench[groups=1,loops=20]\",cfs,3,300000000,ok,"),
        "{}",
        lines[1]
    );
}

#[test]
fn a_killed_sweep_resumes_to_the_same_results() {
    let d = dir("resume");
    let grid = write(
        &d.join("grid.toml"),
        "policies = [\"cfs\", \"ule\", \"eevdf\"]\nworkloads = [\"demo\"]\nmachines = [\"xeon-e5520-2s\"]\nseeds = 2\nduration = \"4s\"\n",
    );
    // The reference: one uninterrupted sweep on two threads.
    let whole = d.join("whole");
    let (ok, _, err) = schedlab(&["sweep", &grid, "-q", "-o", whole.to_str().unwrap(), "--jobs", "2"]);
    assert!(ok, "{err}");
    // One thread, killed once its first rows are in the journal.
    let cut = d.join("cut");
    let mut child = Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .args(["sweep", &grid, "-q", "-o", cut.to_str().unwrap(), "--jobs", "1"])
        .spawn()
        .unwrap();
    let journal = cut.join("rows.jsonl");
    let start = std::time::Instant::now();
    loop {
        let lines = std::fs::read_to_string(&journal).map_or(0, |t| t.matches('\n').count());
        if lines >= 2 {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "the sweep ended before it could be interrupted");
        assert!(start.elapsed().as_secs() < 120, "no rows after two minutes");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let kept = read(&journal).matches('\n').count();
    assert!((2..6).contains(&kept), "{kept} rows kept");
    assert!(!cut.join("results.csv").exists());
    // A cut line, as a kill in the middle of a write leaves.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&journal)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"{\"machine\":\"xeon"))
        .unwrap();
    let (ok, text, err) = schedlab(&["sweep", &grid, "-o", cut.to_str().unwrap(), "--jobs", "2"]);
    assert!(ok, "{err}");
    assert!(
        text.contains(&format!("{} run now", 6 - kept))
            && text.contains(&format!("{kept} from an earlier sweep")),
        "{text}"
    );
    assert_eq!(read(&cut.join("results.csv")), read(&whole.join("results.csv")));
    assert_eq!(read(&cut.join("results.json")), read(&whole.join("results.json")));
    // Once more: nothing left to run, same files.
    let (ok, text, _) = schedlab(&["sweep", &grid, "-o", cut.to_str().unwrap()]);
    assert!(ok && text.contains("0 run now") && text.contains("6 from an earlier sweep"), "{text}");
    assert_eq!(read(&cut.join("results.csv")), read(&whole.join("results.csv")));
}

#[test]
fn failed_runs_are_rows_with_their_error_and_the_exit_is_non_zero() {
    let d = dir("failed");
    let grid = write(
        &d.join("grid.toml"),
        "policies = [\"cfs\"]\nworkloads = [\"pinned-spinners[threads=4,cpu=3,unpin_at=50ms]\"]\nmachines = [\"up\", \"xeon-e5520-2s\"]\nduration = \"100ms\"\n",
    );
    let out = d.join("out");
    let (ok, _, err) = schedlab(&["sweep", &grid, "-q", "-o", out.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        err.contains("1 of 2 runs failed") && err.contains("names CPU 3, but machine `up` has CPUs 0..=0"),
        "{err}"
    );
    let csv = read(&out.join("results.csv"));
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[1].starts_with("up,") && lines[1].contains(",error,"), "{}", lines[1]);
    assert!(lines[2].starts_with("xeon-e5520-2s,") && lines[2].contains(",ok,"), "{}", lines[2]);
}

#[test]
fn bad_grids_name_the_file_line_and_key() {
    let d = dir("bad");
    let cases = [
        (
            "policies = [\"cfs\",\n  \"nosuch\"]\nworkloads = [\"hogs\"]\n",
            ":2: key `policies`: `nosuch`: unknown policy",
        ),
        (
            "policies = [\"cfs\"]\nworkloads = [\"hogs\"]\nseeds = 0\n",
            ":3: key `seeds`: 0: need at least one seed",
        ),
        (
            "policies = [\"cfs\"]\nworkloads = [\"hogs\", \"hogs\"]\n",
            ":2: key `workloads`: `hogs` is listed twice",
        ),
        ("policies = [\"cfs\"]\nworkloads = [\"hogs\"]\nmachines = [\"vax\"]\n", ":3: key `machines`: `vax`"),
        (
            "policies = [\"cfs\"]\nworkloads = [\"hogs\"]\nduration = \"0s\"\n",
            ":3: key `duration`: must be above zero",
        ),
        ("policies = [\"cfs\"]\nworkloads = [\"hogs\"]\n[metrics]\nx = \"sum(\"\n", ":4: key `metrics.x`"),
        ("policies = [\"cfs\"]\nworkload = [\"hogs\"]\n", ":2: unknown field `workload`"),
        ("policies = [\"cfs\"]\n", "key `workloads`: missing"),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let grid = write(&d.join(format!("bad{i}.toml")), text);
        let (ok, _, err) = schedlab(&["sweep", &grid, "-o", d.join("out").to_str().unwrap()]);
        assert!(!ok, "case {i} passed");
        assert!(err.contains(&format!("bad{i}.toml")) && err.contains(want), "case {i}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "case {i}: {err}");
    }
}
