//! `schedlab exec` under faults, through the command line: Ctrl-C keeps a partial report that says it
//! is partial (stop_reason `interrupted`, a warning, exit status 130) and leaves no task behind; an
//! unwritable output path is refused before anything runs; a task that panics fails the run with one
//! error line and no report file.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The tests look for leftovers by name, so they run one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("schedlab-exec-faults-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Threads and task processes: computing, sleeping, blocked on a pipe; names start with `cli`.
const WORKLOAD: &str = r#"
[[pipe]]
name = "p"
[[task]]
name = "clihog"
instances = 2
ops = [ { loop = "forever", ops = [ { compute = "5ms" } ] } ]
[[task]]
name = "clithread"
threads = true
ops = [ { loop = "forever", ops = [ { compute = "5ms" }, { sleep = "1ms" } ] } ]
[[task]]
name = "clireader"
ops = [ { recv = "p", bytes = 8 } ]
"#;

/// Processes (anywhere) and threads named `cli...`.
fn leftovers() -> Vec<String> {
    let mut left = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if e.file_name().to_string_lossy().parse::<u32>().is_err() {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(e.path().join("task")) else { continue };
        for t in tasks.flatten() {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            if comm.starts_with("cli") {
                left.push(format!("{} {}", t.path().display(), comm.trim()));
            }
        }
    }
    left
}

#[test]
fn ctrl_c_keeps_a_report_marked_partial_and_leaves_nothing_running() {
    let _one = ONE_AT_A_TIME.lock();
    let d = dir("ctrl-c");
    std::fs::write(d.join("w.toml"), WORKLOAD).unwrap();
    let json = d.join("out.json");
    let child = Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .args(["exec", "w.toml", "--duration", "60s", "--no-trace", "--json", "out.json"])
        .current_dir(&d)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // Ctrl-C in a terminal signals the whole foreground process group: schedlab and its task
    // processes. SAFETY: signals the process group of the child started above.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    let start = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?} to stop", start.elapsed());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("warning: interrupted after") && err.contains("only the part that ran"), "{err}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["stop_reason"], "interrupted");
    let secs = report["duration_ns"].as_u64().unwrap() as f64 / 1e9;
    assert!(secs > 0.5 && secs < 10.0, "the report covers {secs} s");
    assert_eq!(report["tasks"].as_array().unwrap().len(), 4);
    std::thread::sleep(Duration::from_millis(200));
    let left = leftovers();
    assert!(left.is_empty(), "left running after Ctrl-C: {left:?}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn an_unwritable_report_path_is_refused_before_the_run() {
    let _one = ONE_AT_A_TIME.lock();
    let d = dir("unwritable");
    std::fs::write(d.join("w.toml"), WORKLOAD).unwrap();
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .args(["exec", "w.toml", "--duration", "30s", "--json", "no-such-dir/out.json"])
        .current_dir(&d)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err.trim_end(),
        "error: cannot write no-such-dir/out.json: No such file or directory (os error 2)"
    );
    assert!(start.elapsed() < Duration::from_secs(5), "it ran first: {:?}", start.elapsed());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_task_that_panics_fails_the_run_without_a_report_file() {
    let _one = ONE_AT_A_TIME.lock();
    let d = dir("panic");
    std::fs::write(d.join("w.toml"), WORKLOAD).unwrap();
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .args(["exec", "w.toml", "--duration", "30s", "--no-trace", "--json", "out.json"])
        .env("SCHEDLAB_EXEC_INJECT_PANIC", "clithread")
        .current_dir(&d)
        .output()
        .unwrap();
    // The failure wakes the controller at once (it does not poll): not the run's 30 s. (stderr in
    // the message: a run that waits out the start gate's or the stop's 10 s says which.)
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?} to stop: {err}", start.elapsed());
    assert_eq!(out.status.code(), Some(1), "{err}");
    let last = err.trim_end().lines().last().unwrap();
    assert!(
        last.starts_with("error: w.toml: task thread `clithread`")
            && last.contains("panicked: injected fault"),
        "{err}"
    );
    assert!(!d.join("out.json").exists(), "a report was written for a failed run");
    let left = leftovers();
    assert!(left.is_empty(), "left running: {left:?}");
    let _ = std::fs::remove_dir_all(&d);
}
