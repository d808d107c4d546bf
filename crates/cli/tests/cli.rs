//! The `schedlab` binary end to end: the main job, listing, JSON against the documented schema, and
//! one clear error with a non-zero exit for each kind of bad input.

mod common;
use common::schedlab;
use std::process::Command;

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("schedlab-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Panics, naming every mismatch, unless `report` matches docs/run-schema.json.
fn assert_matches_run_schema(report: &serde_json::Value) {
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../../docs/run-schema.json")).unwrap();
    let compiled = jsonschema::JSONSchema::compile(&schema).expect("schema compiles");
    let msgs: Vec<String> = match compiled.validate(report) {
        Ok(()) => return,
        Err(errors) => errors.map(|e| format!("{} at {}", e, e.instance_path)).collect(),
    };
    panic!("report does not match docs/run-schema.json:\n{}", msgs.join("\n"));
}

#[test]
fn sixteen_cpus_400_tasks_ten_seconds_with_schema_valid_json() {
    let json = tmp("r400.json");
    let (ok, out, err) = schedlab(&[
        "run",
        "--machine",
        "xeon-e5520-2s",
        "--policy",
        "cfs",
        "--workload",
        "hogs[n=400]",
        "--duration",
        "10s",
        "--seed",
        "7",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(ok, "stderr: {err}");
    assert!(out.contains("xeon-e5520-2s (16 CPUs"), "{out}");
    assert!(out.contains("400 created"), "{out}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_matches_run_schema(&report);
    assert_eq!(report["duration_ns"], 10_000_000_000u64);
    assert_eq!(report["tasks"].as_array().unwrap().len(), 400);
    // 400 hogs keep all 16 CPUs busy.
    assert!(report["summary"]["utilization"].as_f64().unwrap() > 0.97);
}

#[test]
fn the_schema_rejects_a_report_with_a_missing_field() {
    let json = tmp("small.json");
    let (ok, _, err) = schedlab(&[
        "run",
        "--machine",
        "up",
        "--workload",
        "hogs[n=2]",
        "--duration",
        "50ms",
        "--json",
        json.to_str().unwrap(),
        "-q",
    ]);
    assert!(ok, "{err}");
    let mut report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../../docs/run-schema.json")).unwrap();
    let compiled = jsonschema::JSONSchema::compile(&schema).unwrap();
    assert!(compiled.is_valid(&report));
    report["summary"].as_object_mut().unwrap().remove("nr_switches");
    assert!(!compiled.is_valid(&report), "a schema that cannot fail proves nothing");
}

/// Each of the VM's files in vm/ loads: the machine files (`*scx*`, `guest-*`) simulate
/// vm/one-cpu.toml under CFS, the workloads run under CFS on the default machine, and each run's
/// wakeups that waited for user space show in `summary.scx` for the sched_ext machines.
#[test]
fn every_vm_machine_and_workload_file_loads_and_runs() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../vm");
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut machines = 0;
    for f in files.iter().filter(|f| f.extension().is_some_and(|e| e == "toml")) {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let is_machine = name.contains("scx") || name.starts_with("guest-");
        let one_cpu = format!("{dir}/one-cpu.toml");
        let path = f.to_str().unwrap();
        let (machine, workload) = if is_machine { (path, one_cpu.as_str()) } else { ("athlon2-x2", path) };
        let json = tmp(&format!("vm-{name}.json"));
        let (ok, _, err) = schedlab(&[
            "run",
            "--machine",
            machine,
            "--workload",
            workload,
            "--duration",
            "200ms",
            "--json",
            json.to_str().unwrap(),
            "-q",
        ]);
        assert!(ok, "{name}: {err}");
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        if name.contains("scx") {
            machines += 1;
            let scx = &report["summary"]["scx"];
            assert!(scx["nr_blocks"].as_u64().unwrap() > 0, "{name}: {scx}");
        }
    }
    assert!(machines >= 2, "vm/scx-tcg.toml and vm/scx-tcg-one.toml");
}

/// A policy simulated under sched_ext (the test VM's machine file) reports its user-space round
/// trips by decision in `summary.scx`, which the schema knows; hogs on two CPUs decide only at
/// their start and their ticks.
#[test]
fn a_run_under_sched_ext_reports_its_round_trips_by_decision() {
    let json = tmp("scx.json");
    let machine = concat!(env!("CARGO_MANIFEST_DIR"), "/../../vm/scx-tcg.toml");
    let (ok, _, err) = schedlab(&[
        "run",
        "--machine",
        machine,
        "--workload",
        "hogs[n=3]",
        "--duration",
        "1s",
        "--json",
        json.to_str().unwrap(),
        "-q",
    ]);
    assert!(ok, "{err}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_matches_run_schema(&report);
    let scx = &report["summary"]["scx"];
    // Three hogs on two CPUs: one always waits, so the ticks ask user space (continues or switches).
    let decided = scx["nr_continues"].as_u64().unwrap() + scx["nr_switches"].as_u64().unwrap();
    assert!(decided > 200, "{scx}");
    assert!(scx["continue_ns"].as_u64().unwrap() > 0, "{scx}");
}

#[test]
fn the_default_run_works_and_lists_work() {
    let (ok, out, err) = schedlab(&["run", "--duration", "200ms"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("policy                       cfs") && out.contains("workload                     demo"),
        "{out}"
    );
    let (ok, out, _) = schedlab(&["list", "policies"]);
    assert!(ok && out.contains("cfs") && out.contains("sched_latency_ns") && out.contains("fifo"));
    let (ok, out, _) = schedlab(&["list", "machines"]);
    assert!(ok && out.contains("opteron6172-32") && out.contains("  32 CPUs"));
    let (ok, out, _) = schedlab(&["list", "workloads"]);
    assert!(ok && out.contains("hogs"));
}

#[test]
fn policy_parameters_from_spec_and_toml_change_the_run() {
    let base = schedlab(&["run", "--machine", "up", "--workload", "hogs[n=4]", "--duration", "1s"]).1;
    let spec = schedlab(&[
        "run",
        "--machine",
        "up",
        "--workload",
        "hogs[n=4]",
        "--duration",
        "1s",
        "--policy",
        "cfs[sched_latency_ns=24000000]",
    ])
    .1;
    let toml_file = tmp("policy.toml");
    std::fs::write(&toml_file, "name = \"cfs\"\n[params]\nsched_latency_ns = 24000000\n").unwrap();
    let from_toml = schedlab(&[
        "run",
        "--machine",
        "up",
        "--workload",
        "hogs[n=4]",
        "--duration",
        "1s",
        "--policy",
        toml_file.to_str().unwrap(),
    ])
    .1;
    let switches = |out: &str| out.lines().find(|l| l.contains("context switches")).unwrap().to_string();
    assert_ne!(switches(&base), switches(&spec), "a 4x longer latency must change the switch count");
    assert_eq!(switches(&spec), switches(&from_toml));
}

fn fails_with(args: &[&str], needles: &[&str]) {
    let (ok, _, err) = schedlab(args);
    assert!(!ok, "expected failure for {args:?}");
    assert!(err.starts_with("error: "), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one clear line, got: {err}");
    for n in needles {
        assert!(err.contains(n), "missing `{n}` in: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_input_gets_one_clear_error() {
    fails_with(&["run", "--policy", "nosuch"], &["unknown policy `nosuch`", "cfs"]);
    fails_with(&["run", "--policy", "cfs[sched_latency_ns=-3]"], &["sched_latency_ns=-3"]);
    fails_with(&["run", "--machine", "cray-1"], &["unknown machine `cray-1`", "xeon-e5520-2s"]);
    fails_with(&["run", "--duration", "10"], &["--duration", "needs a unit"]);
    fails_with(&["run", "--workload", "hogs[n=0]"], &["outside"]);
    let bad = tmp("bad.toml");
    std::fs::write(&bad, "[[task]]\nname = \"a\"\nops = [ { compute = \"1ms\" } ]\nnice = 99\n").unwrap();
    fails_with(&["run", "--workload", bad.to_str().unwrap()], &["bad.toml:4:", "key `nice`", "-20..=19"]);
    let machine = tmp("m.toml");
    std::fs::write(&machine, "sockets = 2\ncores_per_llc = 4\nhz = 7\n").unwrap();
    fails_with(&["run", "--machine", machine.to_str().unwrap()], &["m.toml:3:", "key `hz`"]);
    let pinned = tmp("pinned.toml");
    std::fs::write(&pinned, "[[task]]\nname = \"a\"\ncpus = [64]\nops = [ { compute = \"1ms\" } ]\n")
        .unwrap();
    fails_with(
        &["run", "--machine", "up", "--workload", pinned.to_str().unwrap()],
        &["task `a` names CPU 64"],
    );
    // exec refuses a controller CPU the machine does not have before it starts anything.
    fails_with(
        &["exec", "hogs[n=1]", "--duration", "1s", "--controller-cpu", "4096"],
        &["--controller-cpu", "there is no CPU 4096"],
    );
    // vm-test refuses a sampling interval it cannot use before it boots anything.
    let vm = |every: &str| {
        ["vm-test", "--policies", "cfs", "--workload", "vm/one-cpu.toml", "--sample-interval", every]
            .map(String::from)
    };
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    for (every, says) in [
        ("0ms", "at least 1 ms"),
        ("500us", "at least 1 ms"),
        ("5s", "at most the run's --duration"),
        ("10", "needs a unit"),
    ] {
        let out =
            Command::new(env!("CARGO_BIN_EXE_schedlab")).args(vm(every)).current_dir(root).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("--sample-interval") && err.contains(says),
            "{every}: {err}"
        );
    }
}

#[test]
fn workload_show_prints_toml_that_runs_the_same() {
    let (ok, toml_text, err) = schedlab(&["workload", "show", "hackbench[groups=1,fds=2,loops=3]"]);
    assert!(ok, "{err}");
    assert!(toml_text.contains("[[task]]") && toml_text.contains("name = \"g0-sender0\""));
    let file = tmp("hb.toml");
    std::fs::write(&file, &toml_text).unwrap();
    let a = tmp("a.json");
    let b = tmp("b.json");
    let (ok1, _, e1) = schedlab(&[
        "run",
        "--machine",
        "up",
        "--workload",
        "hackbench[groups=1,fds=2,loops=3]",
        "--json",
        a.to_str().unwrap(),
        "-q",
    ]);
    let (ok2, _, e2) = schedlab(&[
        "run",
        "--machine",
        "up",
        "--workload",
        file.to_str().unwrap(),
        "--json",
        b.to_str().unwrap(),
        "-q",
    ]);
    assert!(ok1 && ok2, "{e1} {e2}");
    let strip = |p: &std::path::Path| {
        let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        v["workload"] = serde_json::Value::Null;
        v
    };
    assert_eq!(strip(&a), strip(&b), "the shown TOML runs identically");
    let (ok, out, _) = schedlab(&["workloads"]);
    assert!(ok && out.contains("volanomark") && out.contains("score:"));
}

#[test]
fn rt_app_files_run_with_warnings_on_stderr() {
    let file = tmp("rt.json");
    std::fs::write(&file, "{ \"tasks\": { \"t\": { \"loop\": 3, \"run\": 1000, \"mem\": 100 } }, \"global\": { \"duration\": 1 } }").unwrap();
    let (ok, out, err) = schedlab(&["run", "--machine", "up", "--workload", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(err.contains("warning:") && err.contains("tasks.t.mem"), "{err}");
    assert!(out.contains("1 created, 1 exited"), "{out}");
}

#[test]
fn docs_workloads_md_is_the_generated_reference() {
    let (ok, out, _) = schedlab(&["workloads", "--markdown"]);
    assert!(ok);
    let doc = include_str!("../../../docs/workloads.md");
    assert!(
        doc == out,
        "docs/workloads.md is stale: regenerate it with `schedlab workloads --markdown > docs/workloads.md`"
    );
}

/// Compares `got` with the golden file `name` (crates/cli/tests/golden/); with `SCHEDLAB_BLESS=1` in
/// the environment, rewrites it instead (after a deliberate change of the engine or a policy).
fn golden(name: &str, got: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var_os("SCHEDLAB_BLESS").is_some() {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(got, want, "output differs from {} (SCHEDLAB_BLESS=1 rewrites it)", path.display());
}

#[test]
fn compare_prints_the_golden_single_seed_table() {
    let (ok, out, err) = schedlab(&[
        "compare",
        "--policies",
        "cfs,rr,fifo",
        "--workload",
        "hogs[n=4]",
        "--machine",
        "up",
        "--duration",
        "1s",
    ]);
    assert!(ok, "stderr: {err}");
    golden("compare-hogs.txt", &out);
}

#[test]
fn compare_with_repeats_gives_intervals_marks_noise_and_writes_json_and_csv() {
    let (json, csv) = (tmp("cmp.json"), tmp("cmp.csv"));
    let (ok, out, err) = schedlab(&[
        "compare",
        "--policies",
        "eevdf,cfs,ule[interact=30],htfs",
        "--workload",
        "sysbench-oltp[threads=16]",
        "--machine",
        "core2duo",
        "--duration",
        "2s",
        "--repeat",
        "3",
        "--json",
        json.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(ok, "stderr: {err}");
    golden("compare-sysbench-repeat3.txt", &out);
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["schema"], "schedlab.compare/1");
    assert_eq!(v["seeds"], serde_json::json!([1, 2, 3]));
    let first = &v["rows"][0]["cells"][1];
    assert_eq!(first["policy"], "cfs");
    assert_eq!(first["stat"]["n"], 3);
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert!(csv.starts_with("metric,better,policy,n,mean,sd,ci95,diff_pct,within_noise\n"), "{csv}");
    assert_eq!(csv.lines().count(), 1 + 4 * v["rows"].as_array().unwrap().len());
    // Errors: an unknown baseline, an unknown policy, zero repeats.
    let (ok, _, err) =
        schedlab(&["compare", "--policies", "cfs,rr", "--baseline", "ule", "--duration", "1s"]);
    assert!(!ok && err.contains("--baseline `ule` is not one of --policies"), "{err}");
    let (ok, _, err) = schedlab(&["compare", "--policies", "cfs,nope", "--duration", "1s"]);
    assert!(!ok && err.contains("`nope`") && err.contains("unknown policy"), "{err}");
    let (ok, _, err) = schedlab(&["compare", "--policies", "cfs", "--repeat", "0"]);
    assert!(!ok && err.contains("--repeat"), "{err}");
}

#[test]
fn compare_with_report_files_adds_them_as_columns() {
    // The same run, written by `run --json` and read back, must give the same numbers as the
    // simulated column (+0.0 % everywhere); the column is named after the file and its source.
    let json = tmp("with-cfs.json");
    let args = ["--workload", "hogs[n=4]", "--machine", "up", "--duration", "1s"];
    let (ok, _, err) =
        schedlab(&[&["run", "--policy", "cfs", "--json", json.to_str().unwrap()][..], &args[..]].concat());
    assert!(ok, "stderr: {err}");
    let (ok, out, err) = schedlab(
        &[&["compare", "--policies", "cfs", "--with", json.to_str().unwrap()][..], &args[..]].concat(),
    );
    assert!(ok, "stderr: {err}");
    let header = out.lines().find(|l| l.trim_start().starts_with("metric")).unwrap();
    assert!(header.contains("with-cfs (simulation)"), "{out}");
    let work = out.lines().find(|l| l.trim_start().starts_with("work done")).unwrap();
    assert!(work.contains("(+0.0 %)"), "{out}");
    // A file that is not a run report is refused with its name.
    let bad = tmp("not-a-report.json");
    std::fs::write(&bad, "{}").unwrap();
    let (ok, _, err) = schedlab(&["compare", "--policies", "cfs", "--with", bad.to_str().unwrap()]);
    assert!(!ok && err.contains("not-a-report.json") && err.contains("not a schedlab run report"), "{err}");
}

#[test]
fn long_runs_stay_quiet_on_stderr_when_it_is_not_a_terminal() {
    // Long enough (over a second of wall time) for the progress bar, which only a terminal shows.
    let (ok, out, err) = schedlab(&["run", "--workload", "demo", "--duration", "60s"]);
    assert!(ok, "stderr: {err}");
    assert!(out.contains("utilization"), "{out}");
    assert_eq!(err, "", "nothing on a non-terminal stderr");
}

#[test]
fn perfetto_traces_read_back_by_the_perfetto_packages_protos_match_the_report() {
    // An independent reader: scripts/perfetto_check.py parses the trace with the `perfetto` Python
    // package's generated protos and checks sched_switch counts per CPU, switch chains, thread names,
    // wakings and task creations against the JSON report (scripts/check installs the package).
    let (trace, json) = (tmp("demo.pftrace"), tmp("demo.json"));
    let (ok, out, err) = schedlab(&[
        "run",
        "--workload",
        "demo",
        "--duration",
        "1s",
        "--trace",
        trace.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(ok, "stderr: {err}");
    assert!(out.contains("Perfetto trace written to"), "{out}");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/perfetto_check.py");
    let check = Command::new("python3").arg(script).arg(&trace).arg(&json).output().expect("python3 runs");
    let text = String::from_utf8_lossy(&check.stdout).into_owned() + &String::from_utf8_lossy(&check.stderr);
    assert!(check.status.success(), "{text}");
    assert!(text.contains(": ok"), "{text}");
    // CFS's vruntime is there as one counter track per task (24 tasks in the demo).
    assert!(text.contains("on 24 counter tracks"), "{text}");
}

/// Headless Chromium (Debian's `chromium`; .ci/run installs it).
fn chromium() -> &'static str {
    for c in ["chromium", "chromium-browser", "google-chrome"] {
        if Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()) {
            return c;
        }
    }
    panic!("the HTML report test needs headless Chromium: apt-get install chromium (.ci/run does)");
}

#[test]
fn the_html_report_is_self_contained_and_chromium_renders_every_plot() {
    let (a, b, c, page, shot) = (
        tmp("rep-cfs.json"),
        tmp("rep-ule.json"),
        tmp("rep-cfs2.json"),
        tmp("report.html"),
        tmp("report.png"),
    );
    for (policy, seed, path) in [("cfs", "1", &a), ("ule", "1", &b), ("cfs", "2", &c)] {
        let (ok, _, err) = schedlab(&[
            "run",
            "--seed",
            seed,
            "--policy",
            policy,
            "--machine",
            "core2duo",
            "--workload",
            "hackbench[groups=1,loops=500]",
            "--duration",
            "6s",
            "--sample-tasks",
            "--sample-interval",
            "10ms",
            "--json",
            path.to_str().unwrap(),
            "-q",
        ]);
        assert!(ok, "{err}");
    }
    // With task sampling the series holds each task's policy values over time (ULE's score), in
    // the documented form: a row per task, as long as its run time's row.
    let ule: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&b).unwrap()).unwrap();
    assert_matches_run_schema(&ule);
    let scores =
        ule["series"]["task_policy"]["ule interactivity score"].as_array().expect("ULE's scores sampled");
    let runs = ule["series"]["task_run_ns"].as_array().unwrap();
    assert_eq!(scores.len(), runs.len(), "a row per task");
    for (s, r) in scores.iter().zip(runs) {
        assert_eq!(s.as_array().unwrap().len(), r.as_array().unwrap().len());
        assert!(s
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v.is_null() || (0..=100).contains(&v.as_i64().unwrap())));
    }
    // A task that exited before the last sample keeps its score from then to the end of the run.
    let last_sample = ule["series"]["time_ns"].as_array().unwrap().last().unwrap().as_u64().unwrap();
    let last = |t: &serde_json::Value| t.as_array().unwrap().last().unwrap().clone();
    let mut exited = 0;
    for (task, row) in ule["tasks"].as_array().unwrap().iter().zip(scores) {
        if task["exited_ns"].as_u64().is_some_and(|e| e <= last_sample) {
            assert_eq!(task["policy"]["ule interactivity score"], last(row), "{}", task["name"]);
            exited += 1;
        }
    }
    assert!(exited >= 10, "hackbench's tasks exit within the run: {exited}");
    let paths = [&a, &b, &c].map(|p| p.to_str().unwrap());
    let (ok, out, err) = schedlab(&["report", paths[0], paths[1], paths[2], "-o", page.to_str().unwrap()]);
    assert!(ok && out.contains("report written to"), "{err}");
    let html = std::fs::read_to_string(&page).unwrap();
    // The summary panel: both configurations, a verdict per metric with a better direction.
    assert!(html.contains("<h2>Summary: who wins</h2>"), "the summary panel");
    assert!(html.contains("cfs <span class=\"n\">(2 runs)</span>"), "cfs's two seeds pooled");
    assert!(html.contains(" ± "), "the pooled runs' confidence interval");
    let verdicts = html.matches(" beats ").count();
    assert!(verdicts >= 5, "a winner per key metric: {verdicts}");
    // Every figure is a Vega-Lite figure: the timeline, the runnable heat map, cumulative run
    // times, the policy's values per task, the rates, the two CDFs, each task's run lengths and
    // the elapsed times.
    let figures =
        ["gantt", "runnable", "cumulative", "policy", "rates", "latency", "runs", "task-runs", "elapsed"];
    assert_eq!(html.matches("class=\"vl-figure\"").count(), figures.len(), "figures in the page");
    for f in figures {
        assert!(html.contains(&format!("id=\"report-{f}\"")), "figure {f}");
    }
    let (page_part, _) = html.split_once("<script>").expect("the figures' scripts at the end");
    assert!(!page_part.contains("<svg"), "no hand-drawn SVG left");
    // Nothing is loaded: no element of the page names a source (the inlined libraries' code is
    // checked in Chromium instead), and the page's policy forbids every fetch (a blocked one would
    // show in data-vega-errors below).
    for needle in ["src=", "<link", "@import", "url("] {
        assert!(!page_part.contains(needle), "the page must not load anything ({needle})");
    }
    assert!(!html.contains("<script src"), "every script inline");
    assert!(html.contains("content=\"default-src 'none';"), "the Content-Security-Policy");
    // Rendered by headless Chromium at a laptop's width: every figure drawn, none empty, no script
    // or console error and no blocked fetch.
    let browser = chromium();
    let url = format!("file://{}", page.display());
    let dom = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1400,3000",
            "--virtual-time-budget=60000",
            "--dump-dom",
            &url,
        ])
        .output()
        .expect("chromium runs");
    let dom_text = String::from_utf8_lossy(&dom.stdout);
    assert!(dom.status.success(), "{}", String::from_utf8_lossy(&dom.stderr));
    let body = dom_text.split("<body").nth(1).and_then(|b| b.split('>').next()).unwrap_or("");
    assert!(body.contains("data-vega-figures=\"9\" data-vega-rendered=\"9\""), "{body}");
    assert!(body.contains("data-vega-done=\"yes\""), "{body}");
    assert!(!body.contains("data-vega-errors"), "{body}");
    // What a screenshot of each figure shows: its image at least as wide as the figure's share of
    // the page (it took the full width) and a real part of it inked.
    let inked = body.split("data-vega-inked=\"").nth(1).and_then(|s| s.split('"').next()).unwrap_or("");
    for f in figures {
        let seen = inked
            .split(' ')
            .find_map(|e| e.strip_prefix(&format!("report-{f}=")))
            .unwrap_or_else(|| panic!("figure {f} not drawn: {inked}"));
        let (size, ink) = seen.split_once(':').unwrap();
        let (w, h) = size.split_once('x').unwrap();
        let (w, h, ink): (f64, f64, f64) = (w.parse().unwrap(), h.parse().unwrap(), ink.parse().unwrap());
        assert!(w >= 1_000.0, "{f}: {w} px wide in a 1,400 px window: the full width");
        assert!(ink >= 0.02 * w * h, "{f}: {ink} of {w} x {h} pixels inked");
    }
    let shot_arg = format!("--screenshot={}", shot.display());
    let st = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1400,4000",
            "--virtual-time-budget=60000",
            &shot_arg,
            &url,
        ])
        .output()
        .expect("chromium runs");
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 100_000, "screenshot of {} bytes", png.len());
    // Bad input: a file that is not a run report.
    let (ok, _, err) = schedlab(&["report", page.to_str().unwrap()]);
    assert!(!ok && err.contains("not JSON"), "{err}");
}

#[test]
fn exec_runs_a_workload_for_real_into_a_schema_valid_report() {
    let json = tmp("exec.json");
    let (ok, out, err) =
        schedlab(&["exec", "perf-pipe[loops=2000]", "--duration", "5s", "--json", json.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("real time") && out.contains("stopped by all_done"), "{out}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_matches_run_schema(&report);
    assert_eq!(report["source"], "real");
    assert_eq!(report["counters"][0]["value"], 2000, "perf bench sched pipe's round trips, exactly");
    // Bad input: a real-time workload without --allow-rt, and an unknown workload.
    let rt = tmp("rt.toml");
    std::fs::write(&rt, "[[task]]\nname = \"rt\"\npolicy = \"fifo\"\nops = [ { compute = \"1ms\" } ]\n")
        .unwrap();
    let (ok, _, err) = schedlab(&["exec", rt.to_str().unwrap()]);
    assert!(!ok && err.contains("--allow-rt") && err.lines().count() == 1, "{err}");
    let (ok, _, err) = schedlab(&["exec", "no-such-workload"]);
    assert!(!ok && err.contains("neither a built-in"), "{err}");
}

#[test]
fn calibrate_writes_a_machine_file_the_simulator_reads_and_validate_compares_real_and_simulated() {
    let file = tmp("this-machine.toml");
    let (ok, out, err) = schedlab(&["calibrate", "-o", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("context_switch_ns = ") && out.contains("machine file written to"), "{out}");
    let text = std::fs::read_to_string(&file).unwrap();
    // A switch between threads and one between processes (a forked echo process), measured apart.
    assert!(text.contains("thread_switch_ns = ") && text.contains("ns between processes"), "{text}");
    // The periodic tick seen from a spinning thread, or said not seen (a tickless busy CPU).
    let tick = text.lines().find_map(|l| l.strip_prefix("tick_irq_ns = ")).map(|v| v.parse::<u64>().unwrap());
    assert!(tick.is_some_and(|ns| ns > 0) || text.contains("saw no periodic tick"), "{text}");
    let cpus = std::fs::read_dir("/sys/devices/system/cpu")
        .unwrap()
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_prefix("cpu").is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
        })
        .count();
    // The file is a machine: the simulator runs on it, with this machine's CPU count.
    let json = tmp("on-this-machine.json");
    let (ok, _, err) = schedlab(&[
        "run",
        "--machine",
        file.to_str().unwrap(),
        "--workload",
        "hogs[n=4]",
        "--duration",
        "100ms",
        "--json",
        json.to_str().unwrap(),
        "-q",
    ]);
    assert!(ok, "{err}\n{text}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["machine"]["nr_cpus"], cpus, "{text}");
    // validate: two 200 ms computations finish under both; the work done is the nominal work exactly.
    let vjson = tmp("validate.json");
    let (ok, out, err) = schedlab(&[
        "validate",
        "pi[n=2,work=200ms]",
        "--machine",
        file.to_str().unwrap(),
        "--duration",
        "5s",
        "--json",
        vjson.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("completion time [s]") && out.contains("metrics within 25 %"), "{out}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&vjson).unwrap()).unwrap();
    assert_eq!(v["schema"], "schedlab.validate/1");
    let work = v["rows"].as_array().unwrap().iter().find(|r| r["metric"] == "work done [CPU s]").unwrap();
    assert_eq!((work["sim"].as_f64(), work["real"].as_f64()), (Some(0.4), Some(0.4)), "{work}");
    assert_eq!(work["error_pct"], 0.0);

    // validate --random: two random workloads, each run for real twice, under two policies.
    let out_dir = tmp("vr");
    let _ = std::fs::remove_dir_all(&out_dir);
    let (ok, out, err) = schedlab(&[
        "validate",
        "--random",
        "2",
        "--seed",
        "3",
        "--machine",
        file.to_str().unwrap(),
        "--duration",
        "300ms",
        "--policy",
        "eevdf",
        "--policy",
        "eevdf[kernel=6.6]",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains("errors over 2 random workloads") && out.contains("worst workloads under eevdf"),
        "{out}"
    );
    assert!(err.contains("[2/2] random-3-1"), "progress on stderr: {err}");
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        (s["schema"].as_str(), s["real_runs"].as_u64()),
        (Some("schedlab.validate-random/1"), Some(2))
    );
    let policies = s["policies"].as_array().unwrap();
    assert_eq!(policies.len(), 2);
    for p in policies {
        let rows = p["summary"].as_array().unwrap();
        assert!(rows.iter().any(|k| k["kind"] == "run_time" && k["rows"].as_u64() > Some(0)), "{p}");
        for sample in p["samples"].as_array().unwrap() {
            // The error is against the mean of the two real runs, and the verdict follows it.
            let (e, spread) =
                (sample["error_pct"].as_f64().unwrap(), sample["real_spread_pct"].as_f64().unwrap());
            if spread >= e.abs() {
                assert_eq!(sample["verdict"], "within_noise", "{sample}");
            }
        }
    }
    for i in 0..2 {
        // Every workload was saved as TOML that `run` accepts.
        let w = out_dir.join(format!("random-3-{i}.toml"));
        let (ok, _, err) = schedlab(&["run", "--workload", w.to_str().unwrap(), "--duration", "50ms"]);
        assert!(ok, "{}: {err}", w.display());
    }
    // --real-from: the same real runs (saved as JSON by the first series) against another policy
    // and a machine with a 20 ms context switch: every sample's real side is the first series',
    // the simulated side differs.
    let again = tmp("vr-again");
    let _ = std::fs::remove_dir_all(&again);
    let slow = tmp("slow-switch.toml");
    std::fs::write(&slow, "name = \"slow\"\ncores_per_llc = 2\n[costs]\ncontext_switch_ns = 20000000\n")
        .unwrap();
    let args = |dir: &std::path::Path, duration: &str| {
        let v: Vec<String> = [
            "validate",
            "--random",
            "2",
            "--seed",
            "3",
            "--machine",
            slow.to_str().unwrap(),
            "--duration",
            duration,
            "--policy",
            "cfs",
            "--out",
            dir.to_str().unwrap(),
            "--real-from",
            out_dir.to_str().unwrap(),
        ]
        .iter()
        .map(|x| x.to_string())
        .collect();
        v
    };
    let a = args(&again, "300ms");
    let (ok, _, err) = schedlab(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(ok, "{err}");
    let s2: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(again.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s2["real_from"].as_str(), out_dir.to_str());
    let reals = |doc: &serde_json::Value| -> Vec<(String, f64)> {
        let mut v: Vec<(String, f64)> = doc["policies"][0]["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| (format!("{}/{}", x["workload"], x["metric"]), x["real"].as_f64().unwrap()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    let (first, second) = (reals(&s), reals(&s2));
    let work =
        |v: &[(String, f64)]| v.iter().filter(|x| x.0.contains("work done")).map(|x| x.1).collect::<Vec<_>>();
    assert_eq!(work(&first), work(&second), "the same real runs");
    let sims = |doc: &serde_json::Value| -> Vec<f64> {
        doc["policies"][0]["samples"].as_array().unwrap().iter().map(|x| x["sim"].as_f64().unwrap()).collect()
    };
    assert_ne!(sims(&s), sims(&s2), "another model simulated");
    // Saved runs of other workloads (another duration) are refused, naming the file.
    let b = args(&tmp("vr-wrong"), "400ms");
    let (ok, _, err) = schedlab(&b.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!ok && err.contains("random-3-0.toml") && err.contains("another --seed or --duration"), "{err}");
    fails_with(&["validate", "--random", "0"], &["--random", "at least 1"]);
    fails_with(&["validate", "--random", "3", "--runs", "1"], &["--runs", "at least 2"]);
    // --phases 0 is refused before any real run; so is a tick phase of a tick or more.
    fails_with(&["validate", "demo", "--phases", "0"], &["--phases", "at least 1"]);
    fails_with(&["run", "--workload", "demo", "--tick-phase", "20ms"], &["tick phase", "not below the tick"]);
    let (ok, _, err) =
        schedlab(&["run", "--workload", "demo", "--duration", "50ms", "--tick-phase", "500us"]);
    assert!(ok, "{err}");
}

#[test]
fn bench_runs_a_case_and_compares_it_with_the_committed_baseline() {
    let baseline = concat!(env!("CARGO_MANIFEST_DIR"), "/../../benchmarks/baseline.json");
    let saved = tmp("bench.json");
    let (ok, out, err) = schedlab(&[
        "bench",
        "--only",
        "cfs-sysbench-cpu-2cpu",
        "--baseline",
        baseline,
        "--save",
        saved.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let row = out.lines().find(|l| l.starts_with("cfs-sysbench-cpu-2cpu")).unwrap_or_else(|| panic!("{out}"));
    // Deterministic columns: 4 tasks, 2 CPUs, 1 simulated second, 3997 events; then a change in %.
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cols[1..5], &["4", "2", "1.000", "3997"], "{row}");
    assert!(cols[8].ends_with('%') || cols[9] == "%", "{row}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    assert_eq!(v["results"][0]["events"], 3997);
    assert!(v["results"][0]["reference_s"].as_f64().unwrap() > 0.0);
    let (ok, _, err) = schedlab(&["bench", "--only", "nosuch"]);
    assert!(!ok && err.contains("--only: no case matches"), "{err}");
}

/// `bench --instructions` runs the case under the real valgrind (installed by .ci/run) and splits the
/// count between the engine and the policy; instruction counts do not depend on the machine's speed.
#[test]
fn bench_counts_instructions_under_callgrind() {
    let saved = tmp("instructions.json");
    let (ok, out, err) = schedlab(&[
        "bench",
        "--instructions",
        "--only",
        "cfs-sysbench-cpu-2cpu",
        "--save",
        saved.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let r = &v["results"][0];
    assert_eq!((r["name"].as_str(), r["events"].as_u64()), (Some("cfs-sysbench-cpu-2cpu"), Some(3997)));
    let (total, policy) = (r["instructions"].as_u64().unwrap(), r["policy_instructions"].as_u64().unwrap());
    // A simulated second of 4 threads on 2 CPUs takes hundreds to thousands of instructions per event,
    // part of them in CFS's tick and pick.
    assert!((100 * 3997..100_000 * 3997).contains(&total), "{total}");
    assert!(policy > total / 20 && policy < total, "{policy} of {total}");
    let row = out.lines().find(|l| l.starts_with("cfs-sysbench-cpu-2cpu")).unwrap_or_else(|| panic!("{out}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols[2], total.to_string(), "{row}");
    let engine: f64 = cols[4].parse().unwrap();
    let pol: f64 = cols[5].parse().unwrap();
    assert!((engine + pol - (total as f64 / 3997.0)).abs() <= 1.0, "{row}");
    // Against its own numbers the change rounds to zero (counts of one case may differ by a few
    // instructions between runs, in alignment-dependent library routines; never by 0.05 %).
    let (ok, out, err) = schedlab(&[
        "bench",
        "--instructions",
        "--only",
        "cfs-sysbench-cpu-2cpu",
        "--baseline",
        saved.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(out.lines().any(|l| l.starts_with("cfs-sysbench-cpu-2cpu") && l.ends_with("+0.0 %")), "{out}");
}

#[test]
fn compare_without_policies_runs_the_default_set_with_eevdf_as_baseline() {
    let args = ["compare", "--workload", "hogs[n=4]", "--machine", "up", "--duration", "200ms"];
    let (ok, out, err) = schedlab(&[&args[..], &["--wide"]].concat());
    assert!(ok, "stderr: {err}");
    assert!(out.contains("baseline eevdf"), "{out}");
    let default_set = ["eevdf", "cfs", "o1", "rsdl", "linux24", "bfs", "ule", "4bsd", "htfs", "vtrr"];
    let header = out.lines().find(|l| l.trim_start().starts_with("metric")).expect("a header row");
    let columns: Vec<&str> = header.split_whitespace().skip(1).collect();
    assert_eq!(columns, default_set, "{header}");
    // Without --wide the same table fits 100 columns, in blocks that each start with the baseline
    // and together hold every policy once.
    let (ok, fitted, err) = schedlab(&args);
    assert!(ok, "stderr: {err}");
    assert!(fitted.lines().all(|l| l.chars().count() <= 100), "{fitted}");
    let headers: Vec<Vec<&str>> = fitted
        .lines()
        .filter(|l| l.trim_start().starts_with("metric"))
        .map(|l| l.split_whitespace().skip(1).collect())
        .collect();
    assert!(headers.len() >= 2, "{fitted}");
    assert!(headers.iter().all(|h| h[0] == "eevdf"), "{fitted}");
    let mut others: Vec<&str> = headers.iter().flat_map(|h| h[1..].iter().copied()).collect();
    others.insert(0, "eevdf");
    assert_eq!(others, default_set, "{fitted}");
}
