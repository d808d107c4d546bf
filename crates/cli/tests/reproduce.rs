//! `schedlab reproduce`: a toy experiment whose claims are known to hold, fail and be unmeasurable;
//! determinism across worker counts; clear errors for bad experiment files; and every experiment of
//! the seed papers (issue 9) present and valid in experiments/.

mod common;
use common::schedlab;
use std::path::{Path, PathBuf};

/// A fresh experiments directory with one paper directory.
fn experiments(test: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("schedlab-reproduce-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("toy")).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join("toy").join(name), text).unwrap();
    }
    dir
}

/// Two identical CPU hogs on one CPU: under CFS each gets half the busy time; both policies keep the
/// CPU busy all the time; there are exactly two hogs; the workload has no counter `nope`.
const TOY: &str = r#"
title = "two hogs"
source = "arithmetic"
machine = "up"
policies = ["cfs", "rr"]
seeds = [1, 2]
duration = "2s"

[quick]
duration = "1s"
seeds = [1]

[[case]]
name = "hogs"
workload = "hogs[n=2]"

[[claim]]
id = "half"
quote = "each of two equal hogs gets half"
source = "by symmetry"
metric = "max(tasks[hog*].run_ns) / summary.busy_ns"
policy = "cfs"
expect = "in [0.49, 0.51]"
unit = "%"
paper = "50 %"

[[claim]]
id = "both-busy"
quote = "both policies keep the CPU busy"
source = "work conservation"
metric = "summary.busy_ns"
policy = "rr"
vs = "cfs"
expect = "in [0.99, 1.01]"
paper = "1"

[[claim]]
id = "three-hogs"
quote = "a false claim: there are three hogs"
source = "none"
metric = "count(tasks[hog*])"
policy = "cfs"
expect = "> 2"
paper = "3"

[[claim]]
id = "no-counter"
quote = "a counter the workload does not have"
source = "none"
metric = "counter(nope)"
policy = "cfs"
expect = "> 0"
paper = "-"
"#;

#[test]
fn claims_hold_fail_or_are_not_measured_and_reports_are_written() {
    let dir = experiments("toy", &[("two-hogs.toml", TOY)]);
    let (out_dir, json) = (dir.join("out"), dir.join("r.json"));
    let (ok, out, err) = schedlab(&[
        "reproduce",
        "toy",
        "--dir",
        dir.to_str().unwrap(),
        "-o",
        out_dir.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert_eq!(err, "", "nothing on a non-terminal stderr");
    assert!(out.contains("[holds] half:"), "{out}");
    assert!(out.contains("[holds] both-busy:"), "{out}");
    assert!(out.contains("[DOES NOT HOLD] three-hogs:"), "{out}");
    assert!(out.contains("[not measured] no-counter:"), "{out}");
    assert!(out.contains("1 experiment(s), 4 claim(s): 2 hold, 1 do not hold, 1 not measured\n"), "{out}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["schema"], "schedlab.reproduce/1");
    let claims = &v["experiments"][0]["claims"];
    assert_eq!(claims[2]["value"], 2.0, "exactly two hogs");
    assert_eq!(claims[2]["holds"], false);
    assert!(claims[3]["holds"].is_null());
    let half = claims[0]["value"].as_f64().unwrap();
    assert!((half - 0.5).abs() < 0.01, "{half}");
    let html = std::fs::read_to_string(out_dir.join("toy/two-hogs.html")).unwrap();
    for needle in ["three-hogs", "DOES NOT HOLD", "Case hogs", "Summary: who wins", "id=\"case0-runs\""] {
        assert!(html.contains(needle), "{needle} in the HTML report");
    }
    // Self-contained: the hogs' run lengths are a Vega-Lite figure whose libraries are inlined, under
    // a policy that forbids every fetch; nothing outside the scripts names a source.
    assert!(html.contains("class=\"vl-figure\"") && html.contains("content=\"default-src 'none';"));
    let (page, _) = html.split_once("<script>").expect("the figures' scripts");
    assert!(!page.contains("src=") && !html.contains("<script src"), "self-contained");
}

#[test]
fn claims_read_the_same_values_from_whole_reports_and_from_reports_cut_to_what_they_read() {
    // With HTML pages each run's whole report is kept; without, only the report keys the claims
    // read. The outcomes (values, seeds, verdicts) must not differ.
    let dir = experiments("cut", &[("two-hogs.toml", TOY)]);
    let d = dir.to_str().unwrap();
    let outcomes = |extra: &[&str], name: &str| {
        let json = dir.join(name);
        let (ok, _, err) =
            schedlab(&[&["reproduce", "toy", "--dir", d, "--json", json.to_str().unwrap()], extra].concat());
        assert!(ok, "{err}");
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        v["experiments"].clone()
    };
    let whole = outcomes(&["-o", dir.join("html").to_str().unwrap()], "whole.json");
    let cut = outcomes(&["--no-html"], "cut.json");
    assert_eq!(whole, cut);
    assert_eq!(whole[0]["claims"][2]["value"], 2.0, "the tasks were read: exactly two hogs");
}

#[test]
fn results_do_not_depend_on_the_number_of_workers() {
    let dir = experiments("jobs", &[("two-hogs.toml", TOY), ("again.toml", TOY)]);
    let run = |jobs: &str| {
        let (ok, out, err) = schedlab(&[
            "reproduce",
            "--all",
            "--dir",
            dir.to_str().unwrap(),
            "--no-html",
            "--markdown",
            "--jobs",
            jobs,
        ]);
        assert!(ok, "{err}");
        out
    };
    let one = run("1");
    assert_eq!(one, run("3"));
    // A summary (a row per experiment and the total), then every claim.
    let (summary, claims) = one.split_once("\n\n").unwrap();
    assert_eq!(
        summary.lines().collect::<Vec<_>>()[2..],
        [
            "| toy/again | arithmetic | 4 | 2 | 1 | 1 |",
            "| toy/two-hogs | arithmetic | 4 | 2 | 1 | 1 |",
            "| all | | 8 | 4 | 2 | 2 |"
        ]
    );
    assert!(
        claims.starts_with(
            "| experiment | claim | paper | schedlab | seeds one at a time | expected | result |\n"
        ),
        "{one}"
    );
    assert_eq!(claims.lines().count(), 2 + 8, "a header, a rule and four claims for each of two experiments");
    // --quick takes the [quick] section: one seed, one simulated second.
    let (ok, list, err) =
        schedlab(&["reproduce", "toy/again", "--dir", dir.to_str().unwrap(), "--quick", "--list"]);
    assert!(ok, "{err}");
    assert!(list.contains("case hogs: hogs[n=2] on up, 1.000s simulated, cfs, rr x 1 seed(s)"), "{list}");
    assert!(list.ends_with("1 experiment(s), 4 claim(s), 2 simulation(s)\n"), "{list}");
}

#[test]
fn a_taskset_pins_every_case_to_its_cpus() {
    // Two hogs on a two-CPU machine for 1 s: alone they keep both CPUs busy (2 s of busy time);
    // under `taskset = [1]` they share CPU 1 (1 s), and a case may widen it again.
    let text = r#"
title = "pinned hogs"
source = "arithmetic"
machine = "core2duo"
taskset = [1]
policies = ["cfs"]
duration = "1s"

[[case]]
name = "pinned"
workload = "hogs[n=2]"

[[case]]
name = "both"
workload = "hogs[n=2]"
taskset = [0, 1]

[[claim]]
id = "one-cpu-busy"
quote = "pinned, the hogs keep one CPU busy"
source = "arithmetic"
case = "pinned"
metric = "summary.busy_ns"
policy = "cfs"
expect = "in [0.99e9, 1.0e9]"
paper = "1 s"

[[claim]]
id = "two-cpus-busy"
quote = "on both CPUs they keep two busy"
source = "arithmetic"
case = "both"
metric = "summary.busy_ns"
policy = "cfs"
expect = "in [1.98e9, 2.0e9]"
paper = "2 s"
"#;
    let dir = experiments("taskset", &[("e.toml", text)]);
    let (ok, out, err) = schedlab(&["reproduce", "toy", "--dir", dir.to_str().unwrap(), "--no-html"]);
    assert!(ok, "{err}");
    assert!(out.contains("[holds] one-cpu-busy:") && out.contains("[holds] two-cpus-busy:"), "{out}");
    // A CPU the machine does not have is refused, naming the key.
    let dir = experiments("taskset-bad", &[("e.toml", &text.replace("taskset = [1]", "taskset = [2]"))]);
    let (ok, _, err) = schedlab(&["reproduce", "--all", "--dir", dir.to_str().unwrap(), "--list"]);
    assert!(!ok && err.contains("key `taskset`: CPU 2, but machine `core2duo` has CPUs 0..=1"), "{err}");
}

#[test]
fn bad_experiment_files_name_the_file_line_and_key() {
    let cases: [(&str, String, &str); 6] = [
        (
            "unknown-key",
            TOY.replace("seeds = [1, 2]", "seeds = [1, 2]\ncolour = \"red\""),
            "unknown field `colour`",
        ),
        (
            "bad-metric",
            TOY.replace("count(tasks[hog*])", "median(tasks[hog*].run_ns)"),
            "key `metric`: unknown function `median`",
        ),
        ("bad-expect", TOY.replace("expect = \"> 2\"", "expect = \"about 2\""), "key `expect`"),
        ("bad-policy", TOY.replace("[\"cfs\", \"rr\"]", "[\"cfs\", \"nope\"]"), "key `policies`"),
        (
            "bad-case",
            TOY.replace("policy = \"rr\"", "policy = \"rr\"\ncase = \"other\""),
            "key `case`: no case `other`",
        ),
        ("bad-workload", TOY.replace("hogs[n=2]", "hogs[n=0]"), "key `workload`"),
    ];
    for (name, text, want) in cases {
        let dir = experiments(name, &[("e.toml", &text)]);
        let (ok, _, err) = schedlab(&["reproduce", "--all", "--dir", dir.to_str().unwrap(), "--list"]);
        assert!(!ok, "{name} must fail");
        assert!(err.contains(want), "{name}: {err}");
        assert!(err.contains("toy/e.toml:"), "{name}: the file is named: {err}");
        // The line of the key at fault (or of its table when the key is missing).
        let line: usize = err.split("e.toml:").nth(1).unwrap().split(':').next().unwrap().parse().unwrap();
        let key = match name {
            "unknown-key" => "colour",
            "bad-metric" => "metric = \"median",
            "bad-expect" => "expect = \"about",
            "bad-policy" => "policies",
            "bad-case" => "case = \"other",
            _ => "workload",
        };
        let want_line = text.lines().position(|l| l.starts_with(key)).unwrap() + 1;
        assert_eq!(line, want_line, "{name}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
    }
    let dir = experiments("select", &[("e.toml", TOY)]);
    let (ok, _, err) = schedlab(&["reproduce", "nope", "--dir", dir.to_str().unwrap()]);
    assert!(!ok && err.contains("no experiment or paper `nope`") && err.contains("papers: toy"), "{err}");
    let (ok, _, err) = schedlab(&["reproduce", "--dir", dir.to_str().unwrap()]);
    assert!(!ok && err.contains("--all"), "{err}");
    let (ok, _, err) = schedlab(&["reproduce", "--all", "--dir", "/nonexistent/experiments"]);
    assert!(!ok && err.contains("cannot read the experiments directory"), "{err}");
}

#[test]
fn every_experiment_the_seed_papers_need_is_present_and_valid() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let (ok, out, err) = schedlab(&["reproduce", "--all", "--dir", dir.to_str().unwrap(), "--list"]);
    assert!(ok, "{err}");
    let (ok, quick, err) =
        schedlab(&["reproduce", "--all", "--dir", dir.to_str().unwrap(), "--list", "--quick"]);
    assert!(ok, "{err}");
    for id in [
        // seed 000 (HTFS vs CFS)
        "htfs/sysbench-threads",
        "htfs/sysbench-cpu",
        "htfs/hackbench",
        "htfs/builds",
        "htfs/apache",
        "htfs/balancing",
        "htfs/speedup",
        "htfs/unixbench-execl",
        "htfs/unixbench-spawn",
        "htfs/hackbench-dual-core",
        "htfs/xeon-16",
        // seed 001 (goodness vs ELSC)
        "elsc/volanomark",
        "elsc/kernel-compile",
        // seed 002 (ULE vs CFS)
        "ule-vs-cfs/fibo-sysbench-1core",
        "ule-vs-cfs/sysbench-128-threads",
        "ule-vs-cfs/pinned-spinners",
        "ule-vs-cfs/c-ray",
        "ule-vs-cfs/nas-mg",
        "ule-vs-cfs/apache-ab-1core",
        "ule-vs-cfs/fibo-sysbench-32cores",
        "ule-vs-cfs/sysbench-32cores",
        "ule-vs-cfs/cray-ep",
        "ule-vs-cfs/apache-sysbench",
        // seed 003 (O(1) vs CFS)
        "o1-vs-cfs/cpu-bound",
        "o1-vs-cfs/nice-half",
        "o1-vs-cfs/io-bound",
        "o1-vs-cfs/mixed",
        "o1-vs-cfs/editors",
        // seed 004 (AVEC vs CFS)
        "avec/single-tasks",
        "avec/multiple-tasks",
        "avec/burners",
        "avec/migration",
    ] {
        let mut lines = out.lines().skip_while(|l| !l.starts_with(&format!("{id}  ")));
        assert!(lines.next().is_some(), "{id} is missing");
        let claims = lines.take_while(|l| l.starts_with("  ")).filter(|l| l.starts_with("  claim ")).count();
        assert!(claims > 0, "{id} has no claim");
        let text = std::fs::read_to_string(dir.join(format!("{id}.toml"))).unwrap();
        assert!(text.contains("[[free]]"), "{id} declares its free parameters");
        assert!(quick.contains(&format!("{id}  ")), "{id} in the quick set");
    }
    // At least three seeds for every case at full size, so each claim has a spread.
    for l in out.lines().filter(|l| l.starts_with("  case ")) {
        let seeds: usize = l.rsplit(" x ").next().unwrap().trim_end_matches(" seed(s)").parse().unwrap();
        assert!(seeds >= 3, "{l}");
    }
    // The quick set is smaller: fewer simulated seconds in all.
    let total = |text: &str| -> f64 {
        text.lines()
            .filter_map(|l| l.split(", ").find(|p| p.ends_with("s simulated")))
            .map(|p| {
                let d = p.trim_end_matches(" simulated");
                let (number, scale) = [("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9), ("s", 1.0)]
                    .into_iter()
                    .find_map(|(unit, scale)| d.strip_suffix(unit).map(|n| (n, scale)))
                    .unwrap();
                number.parse::<f64>().unwrap_or_else(|e| panic!("{p}: {e}")) * scale
            })
            .sum()
    };
    assert!(total(&quick) < total(&out), "quick {} s against full {} s", total(&quick), total(&out));
}

/// A claim whose direction holds fails when its value is outside the band around the paper's
/// number; figure-only claims are marked; the band's keys go together.
#[test]
fn a_paper_number_is_checked_within_its_band() {
    let text = TOY.replace(
        "paper = \"3\"",
        "paper = \"3\"\n\n[[claim]]\nid = \"two-not-four\"\nquote = \"four hogs\"\nsource = \"none\"\n\
         metric = \"count(tasks[hog*])\"\npolicy = \"cfs\"\nexpect = \"> 1\"\npaper = \"4\"\npaper_value = 4\n\
         band = 0.25\nband_why = \"a test\"\n\n[[claim]]\nid = \"two-near-two\"\nquote = \"two hogs\"\n\
         source = \"none\"\nmetric = \"count(tasks[hog*])\"\npolicy = \"cfs\"\nexpect = \"> 1\"\npaper = \"2.2\"\n\
         paper_value = 2.2\nband = 0.25\nband_why = \"a test\"\n\n[[claim]]\nid = \"figure\"\nquote = \"two\"\n\
         source = \"fig. 1\"\nmetric = \"count(tasks[hog*])\"\npolicy = \"cfs\"\nexpect = \"> 1\"\npaper = \"-\"\n\
         figure_only = true",
    );
    let dir = experiments("band", &[("e.toml", &text)]);
    let (ok, out, err) = schedlab(&["reproduce", "--all", "--dir", dir.to_str().unwrap(), "--no-html"]);
    assert!(ok, "{err}");
    assert!(out.contains("[DOES NOT HOLD] two-not-four:"), "2 is above 1 but not within 25 % of 4: {out}");
    assert!(out.contains("count(tasks[hog*]): value > 1 and within 25 % of 4.000"), "{out}");
    assert!(out.contains("[holds] two-near-two:"), "2 is within 25 % of 2.2: {out}");
    assert!(out.contains("[holds] figure:") && out.contains("value > 1 (direction: figure only)"), "{out}");
    for (from, to, want) in [
        (
            "band = 0.25\nband_why = \"a test\"\n\n[[claim]]\nid = \"two-near",
            "\n\n[[claim]]\nid = \"two-near",
            "key `band`",
        ),
        (
            "band = 0.25\nband_why = \"a test\"\n\n[[claim]]\nid = \"two-near",
            "band = -1\nband_why = \"a test\"\n\n[[claim]]\nid = \"two-near",
            "a relative band above zero",
        ),
        ("paper_value = 2.2", "paper_value = 0", "key `paper_value`"),
        (
            "paper = \"-\"\nfigure_only = true",
            "paper = \"-\"\nfigure_only = true\npaper_value = 1\nband = 0.1\nband_why = \"x\"",
            "key `figure_only`",
        ),
    ] {
        assert!(text.contains(from), "{from}");
        let d = experiments("band-bad", &[("e.toml", &text.replacen(from, to, 1))]);
        let (ok, _, err) = schedlab(&["reproduce", "--all", "--dir", d.to_str().unwrap(), "--list"]);
        assert!(!ok && err.contains(want) && err.contains("e.toml:"), "{want}: {err}");
    }
}

/// Two pi processes of `work` CPU time each on one CPU: they finish together after 2 x work (1 s
/// chosen, so 2 s), whatever the seed; the range's ends give 1 s and 4 s.
const SENSITIVE: &str = r#"
title = "two pi processes"
source = "arithmetic"
machine = "up"
policies = ["cfs"]
seeds = [1]
duration = "10s"

[[case]]
name = "pair"
workload = "pi[n=2,work=1s]"

[[claim]]
id = "under-2.5s"
quote = "done within 2.5 s"
source = "2 x 1 s"
metric = "summary.makespan_ns"
policy = "cfs"
expect = "< 2.5e9"
paper = "2 s"

[[claim]]
id = "under-1.5s"
quote = "done within 1.5 s"
source = "false at 1 s of work each"
metric = "summary.makespan_ns"
policy = "cfs"
expect = "< 1.5e9"
paper = "-"

[[claim]]
id = "two"
quote = "two processes"
source = "n=2"
metric = "count(tasks[*])"
policy = "cfs"
expect = "in [2, 2]"
paper = "2"

[[claim]]
id = "three"
quote = "three processes"
source = "false"
metric = "count(tasks[*])"
policy = "cfs"
expect = "> 2"
paper = "3"

[[free]]
param = "pi.work"
chosen = "1s"
range = ["500ms", "2s"]
why = "a test's choice"

[[free]]
param = "costs.context_switch_ns"
chosen = "2us"
range = ["2us", "4us"]
why = "one-sided: only the high end differs"

[[free]]
param = "machine.hz"
chosen = "1000"
range = ["250", "1000"]
why = "the up preset ticks at 1000 Hz"
"#;

#[test]
fn sensitivity_says_where_each_verdict_holds_across_seeds_and_free_ranges() {
    let dir = experiments("sens", &[("pair.toml", SENSITIVE)]);
    let json = dir.join("s.json");
    let args = ["reproduce", "toy", "--dir", dir.to_str().unwrap(), "--sensitivity"];
    let (ok, out, err) = schedlab(&[&args[..], &["--json", json.to_str().unwrap()]].concat());
    assert!(ok, "{err}");
    assert!(out.contains("  free pi.work = 1s in [500ms, 2s]\n"), "{out}");
    assert!(out.contains("[holds at the chosen point only] under-2.5s:"), "{out}");
    assert!(out.contains("differs: pi.work=2s fails (4."), "work 2 s: both end after 4 s: {out}");
    assert!(out.contains("[fails at the chosen point] under-1.5s:"), "{out}");
    assert!(out.contains("differs: pi.work=500ms holds (1."), "{out}");
    assert!(out.contains("[holds everywhere] two:"), "{out}");
    assert!(out.contains("[fails everywhere] three:"), "{out}");
    assert!(
        out.ends_with(
            "4 claim(s): 1 hold everywhere, 1 hold at the chosen point only, 1 fail at the chosen point, \
             1 fail everywhere, 0 not measured\n"
        ),
        "{out}"
    );
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["schema"], "schedlab.sensitivity/1");
    let e = &v["experiments"][0];
    assert_eq!(e["seeds"], serde_json::json!([1, 2, 3]), "one seed filled up to three");
    let points: Vec<&str> =
        e["claims"][0]["points"].as_array().unwrap().iter().map(|p| p["at"].as_str().unwrap()).collect();
    assert_eq!(
        points,
        [
            "seed 1",
            "seed 2",
            "seed 3",
            "pi.work=500ms",
            "pi.work=2s",
            "costs.context_switch_ns=4us",
            "machine.hz=250"
        ],
        "each seed, then each end that differs from the chosen value"
    );
    // The machine costs charged at the engine's defaults (no source) that nothing varies are listed,
    // most charged first; the context switch is declared free, so it is not.
    let unvaried: Vec<(&str, f64)> = e["unvaried_costs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| (u["cost"].as_str().unwrap(), u["share"].as_f64().unwrap()))
        .collect();
    let names: Vec<&str> = unvaried.iter().map(|u| u.0).collect();
    assert!(names.contains(&"sched_base_ns") && !names.contains(&"context_switch_ns"), "{unvaried:?}");
    assert!(unvaried.windows(2).all(|w| w[0].1 >= w[1].1), "{unvaried:?}");
    // A decision costs 250 ns; with 2 s of CPU time the decisions' share is 250 ns times their
    // number over 2 s: well under 1 %, above none.
    let base = unvaried.iter().find(|u| u.0 == "sched_base_ns").unwrap().1;
    assert!(base > 0.0 && base < 0.01, "{base}");
    assert!(out.contains("  unsourced machine costs charged, not varied: `"), "{out}");
    // Two processes of 1 s each end together a little after 2 s (switches and ticks cost time), and
    // at the range's ends after a little more than 1 s and 4 s.
    let checked = |k: usize| e["claims"][0]["points"][k]["checked"].as_f64().unwrap();
    let chosen = e["claims"][0]["chosen"]["value"].as_f64().unwrap();
    assert!((2.0e9..2.05e9).contains(&chosen), "{chosen}");
    assert_eq!(checked(0), chosen, "a deterministic workload: every seed the same");
    assert!((1.0e9..1.03e9).contains(&checked(3)) && (4.0e9..4.1e9).contains(&checked(4)), "{e}");
    // At 250 Hz CFS switches the two processes less often, so less time goes to switching: they
    // end a little sooner.
    assert!(checked(6) < chosen && checked(6) > 2.0e9, "{e}");
    // Same inputs, same output, whatever the number of workers.
    let (ok, again, err) = schedlab(&[&args[..], &["--jobs", "1"]].concat());
    assert!(ok, "{err}");
    assert_eq!(out, again);
    // Declarations that do not match what the experiment runs are refused with the file, line and key.
    for (name, from, to, key, want) in [
        ("wrong-chosen", "chosen = \"1s\"", "chosen = \"3s\"", "chosen", "outside its range"),
        ("not-run", "chosen = \"1s\"", "chosen = \"1.5s\"", "chosen", "is not what case `pair` runs with"),
        ("unused", "param = \"pi.work\"", "param = \"hogs.n\"", "param", "changes nothing in any case"),
        ("unknown", "param = \"pi.work\"", "param = \"pi.speed\"", "param", "has no parameter `speed`"),
        ("no-cost", "costs.context_switch_ns", "costs.warp_ns", "param", "warp_ns"),
        ("bad-hz", "chosen = \"1000\"", "chosen = \"500\"", "chosen", "expected 100, 250, 300 or 1000"),
        ("one-end", "range = [\"500ms\", \"2s\"]", "range = [\"2s\"]", "range", "two values"),
    ] {
        let text = SENSITIVE.replacen(from, to, 1);
        let d = experiments(name, &[("pair.toml", &text)]);
        let (ok, _, err) = schedlab(&["reproduce", "--all", "--dir", d.to_str().unwrap(), "--list"]);
        assert!(!ok, "{name} must fail");
        assert!(err.contains(&format!("key `{key}`")) && err.contains(want), "{name}: {err}");
        let line: usize = err.split("pair.toml:").nth(1).unwrap().split(':').next().unwrap().parse().unwrap();
        let want_line = text.lines().position(|l| l.starts_with(&format!("{key} ="))).unwrap() + 1;
        let in_table = text.lines().take(line).filter(|l| *l == "[[free]]").count();
        assert!(line >= want_line && in_table >= 1, "{name}: line {line}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
    }
}

/// `--real` refuses what a VM cannot run before booting one: an experiment on more CPUs than a
/// software-emulated guest runs usefully, `--list` beside it, and a missing schedlab-scx binary.
/// (The runs themselves need the VM: scripts/vm-test runs `--real o1-vs-cfs/nice-shares` in CI.)
#[test]
fn reproduce_real_refuses_what_the_vm_cannot_run() {
    let big = TOY.replace("machine = \"up\"", "machine = \"opteron6172-32\"");
    let dir = experiments("real", &[("e.toml", TOY), ("big.toml", &big)]);
    let d = dir.to_str().unwrap();
    let (ok, _, err) = schedlab(&["reproduce", "toy/big", "--dir", d, "--real", "--no-html"]);
    assert!(!ok && err.contains("big.toml: the experiment's machine has 32 CPUs"), "{err}");
    let (ok, _, err) = schedlab(&["reproduce", "toy/e", "--dir", d, "--real", "--list"]);
    assert!(!ok && err.contains("--real and --list"), "{err}");
    let (ok, _, err) = schedlab(&["reproduce", "toy/e", "--dir", d, "--real", "--scx", "/nonexistent/scx"]);
    assert!(!ok && err.contains("--scx /nonexistent/scx: no such file"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    let bad = TOY.replace("[quick]", "[real]\ncases = [\"nope\"]\n\n[quick]");
    let dir = experiments("real-bad", &[("e.toml", &bad)]);
    let (ok, _, err) = schedlab(&["reproduce", "toy/e", "--dir", dir.to_str().unwrap(), "--real"]);
    let line = bad.lines().position(|l| l.starts_with("cases = [\"nope\"]")).unwrap() + 1;
    assert!(!ok && err.contains(&format!("e.toml:{line}: key `cases`: no case `nope`")), "{err}");
}

/// A case's list of generators ends with its foreground tasks when each generator that has some
/// ends by itself (two pi processes of 50 ms each beside system-noise's background daemon: 0.1 s),
/// and runs to the experiment's duration when one does not (a hog runs forever: 2 s).
#[test]
fn a_list_of_generators_ends_with_its_foreground_tasks_when_each_ends_by_itself() {
    let file = r#"
title = "lists"
source = "arithmetic"
machine = "up"
policies = ["cfs"]
seeds = [1]
duration = "2s"

[[case]]
name = "ends"
workload = ["pi[n=2,work=50ms]", "system-noise[interval=10ms,work=10us]"]

[[case]]
name = "forever"
workload = ["hogs[n=1]", "system-noise[interval=10ms,work=10us]"]

[[claim]]
id = "ends-with-pi"
quote = "two 50 ms processes"
source = "arithmetic"
case = "ends"
metric = "duration_ns"
policy = "cfs"
expect = "in [100e6, 102e6]"
paper = "0.1 s"

[[claim]]
id = "runs-to-duration"
quote = "a hog never ends"
source = "arithmetic"
case = "forever"
metric = "duration_ns"
policy = "cfs"
expect = "in [2e9, 2e9]"
paper = "2 s"
"#;
    let dir = experiments("lists", &[("lists.toml", file)]);
    let (ok, out, err) = schedlab(&["reproduce", "toy", "--dir", dir.to_str().unwrap(), "--no-html"]);
    assert!(ok, "{err}");
    assert!(out.contains("[holds] ends-with-pi:"), "{out}");
    assert!(out.contains("[holds] runs-to-duration:"), "{out}");
}

/// A generator default that has no source (crates/workload/src/generators/sources.rs) may decide a
/// verdict only where the experiment declares it `[[free]]`: a case that runs one undeclared is
/// refused with the file, line and key, naming every such default; set explicitly or declared free,
/// the file loads.
#[test]
fn a_default_with_no_source_must_be_set_or_declared_free() {
    let base = r#"
title = "apache on one CPU"
source = "arithmetic"
machine = "up"
policies = ["cfs"]
duration = "1s"

[[case]]
name = "web"
workload = "apache-ab[server_threads=2,concurrency=2,requests=100,request_cost=100us]"

[[claim]]
id = "busy"
quote = "the CPU does some work"
source = "none"
metric = "summary.busy_ns"
policy = "cfs"
expect = "> 0"
paper = "-"
"#;
    let list = |name: &str, text: &str| {
        let d = experiments(name, &[("web.toml", text)]);
        schedlab(&["reproduce", "--all", "--dir", d.to_str().unwrap(), "--list"])
    };
    let (ok, _, err) = list("unsourced", base);
    assert!(!ok, "request_stddev and ab_cost run at their defaults undeclared");
    let want_line = base.lines().position(|l| l.starts_with("workload =")).unwrap() + 1;
    assert!(err.contains(&format!("web.toml:{want_line}: key `workload`: case `web`")), "{err}");
    assert!(err.contains("`apache-ab.request_stddev` = 50us (no source:"), "{err}");
    assert!(err.contains("`apache-ab.ab_cost` = 20us (no source:"), "{err}");
    assert!(!err.contains("request_cost"), "set in the workload: the file's own choice: {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    // Set in the workload, or declared free: the file loads.
    let set = base.replace("request_cost=100us]", "request_cost=100us,request_stddev=10us,ab_cost=5us]");
    let (ok, out, err) = list("set", &set);
    assert!(ok && out.contains("web"), "{err}");
    let free = format!(
        "{base}\n[[free]]\nparam = \"apache-ab.request_stddev\"\nchosen = \"50us\"\nrange = [\"25us\", \"100us\"]\n\
         why = \"no source\"\n\n[[free]]\nparam = \"apache-ab.ab_cost\"\nchosen = \"20us\"\n\
         range = [\"10us\", \"40us\"]\nwhy = \"no source\"\n"
    );
    let (ok, _, err) = list("free", &free);
    assert!(ok, "{err}");
}

/// The workload files kept beside the experiments for the measurements experiments/README.md reports
/// (`experiments/<paper>/workloads/*.toml`, read by no case of their own) still load, so a reported
/// measurement can be re-run.
#[test]
fn every_kept_measurement_workload_loads() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut n = 0;
    for paper in std::fs::read_dir(&root).unwrap().flatten() {
        let Ok(files) = std::fs::read_dir(paper.path().join("workloads")) else { continue };
        for f in files.flatten().filter(|f| f.path().extension().is_some_and(|e| e == "toml")) {
            let path = f.path();
            let w = schedlab_cli::resolve::load_workload(path.to_str().unwrap())
                .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
            assert!(!w.tasks.is_empty(), "{}", path.display());
            n += 1;
        }
    }
    assert!(n >= 15, "the kept workload files: {n}");
}
