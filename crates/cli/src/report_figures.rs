//! The time-series figures of `schedlab report` as Vega-Lite specifications (issue 33), drawn from
//! a run report's `series` and `tasks`: runnable tasks per CPU as a heat map (seed 002 fig. 6-7),
//! cumulative run time per task (seed 002 fig. 1 and 3; needs `--sample-tasks`), context switches
//! and migrations per second, each task's run lengths (median and 99th percentile) and per-task
//! elapsed times sorted (seed 003 sec. 5).
//!
//! Layout: runs compared are small multiples on shared axes. A figure of one panel per run stacks
//! the panels on one time axis (so the same moment lines up across runs) with one colour scale; a
//! figure where runs overlay well (rates, sorted elapsed times, distributions) draws one line per
//! run. Every figure is bounded in what it carries into the page: at most [`MAX_POINTS`] points per
//! line or [`MAX_BINS`] time bins per CPU, made by merging neighbouring samples (a rate over the
//! merged interval is the exact mean rate over it, a bin of the heat map the mean of its samples).

use serde_json::{json, Value};

/// Most points a line of a figure carries.
pub const MAX_POINTS: usize = 1_000;

/// Most time bins per CPU of a heat map.
pub const MAX_BINS: usize = 1_024;

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

fn nums(v: &Value) -> Vec<f64> {
    v.as_array().into_iter().flatten().map(num).collect()
}

/// Samples merged per point so that `n` samples give at most `max` points.
fn stride(n: usize, max: usize) -> usize {
    n.div_ceil(max.max(1)).max(1)
}

/// Zoom and pan on the x axis.
fn zoom() -> Value {
    json!([{"name": "zoom", "select": {"type": "interval", "encodings": ["x"]}, "bind": "scales"}])
}

/// The header of a panel per run: its name above it, left-aligned.
fn run_rows() -> Value {
    json!({"field": "run", "type": "nominal", "title": null, "sort": null,
           "header": {"labelAngle": 0, "labelAlign": "left", "labelAnchor": "start", "labelOrient": "top",
                      "labelFontWeight": "bold", "labelLimit": 900}})
}

/// Runnable tasks (running and queued) per CPU over time, one panel per run on one time axis and
/// one colour scale; `None` without series.
pub fn runnable_heatmap(runs: &[Value], label: impl Fn(&Value) -> String) -> Option<Value> {
    let mut rows = Vec::new();
    let mut max_cpus = 1;
    for r in runs {
        let s = &r["series"];
        let times = nums(&s["time_ns"]);
        let Some(lanes) = s["nr_running"].as_array() else { continue };
        if times.len() < 2 {
            continue;
        }
        max_cpus = max_cpus.max(lanes.len());
        let k = stride(times.len(), MAX_BINS);
        let step = times[1] - times[0];
        let name = label(r);
        for (cpu, lane) in lanes.iter().enumerate() {
            let v = nums(lane);
            for start in (0..v.len().min(times.len())).step_by(k) {
                let end = (start + k).min(v.len());
                let mean = v[start..end].iter().sum::<f64>() / (end - start) as f64;
                if mean == 0.0 {
                    continue;
                }
                let to = times.get(end).copied().unwrap_or(times[end - 1] + step);
                rows.push(json!({"run": name, "cpu": cpu, "from_s": times[start] / 1e9, "to_s": to / 1e9, "tasks": mean}));
            }
        }
    }
    if rows.is_empty() {
        return None;
    }
    Some(json!({
        "title": {"text": "Runnable tasks per CPU over time (running + queued)", "subtitle": "sampled; one panel per run on one time axis and one colour scale; white: none; drag to pan, scroll to zoom"},
        "data": {"values": rows},
        "facet": {"row": run_rows()},
        "spec": {
            "width": 900,
            "height": (max_cpus * 12).clamp(40, 400),
            "params": zoom(),
            "mark": {"type": "rect", "clip": true},
            "encoding": {
                "x": {"field": "from_s", "type": "quantitative", "title": "time [s]"},
                "x2": {"field": "to_s"},
                "y": {"field": "cpu", "type": "ordinal", "title": "CPU", "axis": {"labelOverlap": true}},
                "color": {"field": "tasks", "type": "quantitative", "title": "tasks", "scale": {"scheme": "orangered", "domainMin": 0}},
                "tooltip": [
                    {"field": "run", "type": "nominal"},
                    {"field": "cpu", "type": "ordinal", "title": "CPU"},
                    {"field": "from_s", "type": "quantitative", "title": "from [s]", "format": ",.3f"},
                    {"field": "tasks", "type": "quantitative", "title": "runnable tasks (mean)", "format": ".2f"}
                ]
            }
        },
        "resolve": {"scale": {"x": "shared", "y": "independent", "color": "shared"}}
    }))
}

/// Most tasks whose cumulative run time is drawn per run.
pub const MAX_TASK_LINES: usize = 24;

/// Cumulative run time of each task over time (the first [`MAX_TASK_LINES`] tasks), one panel per
/// run on shared axes; `None` without per-task series (`run --sample-tasks`).
pub fn cumulative(runs: &[Value], label: impl Fn(&Value) -> String) -> Option<Value> {
    let mut rows = Vec::new();
    for r in runs {
        let s = &r["series"];
        let times = nums(&s["time_ns"]);
        let Some(per_task) = s["task_run_ns"].as_array() else { continue };
        let tasks = r["tasks"].as_array().map_or(&[][..], Vec::as_slice);
        let name = label(r);
        for (i, row) in per_task.iter().enumerate().take(MAX_TASK_LINES) {
            let v = nums(row);
            // A task created later has a shorter row, aligned to the end.
            let off = times.len().saturating_sub(v.len());
            let task = tasks.get(i).and_then(|t| t["name"].as_str()).unwrap_or("?");
            let k = stride(v.len(), MAX_POINTS);
            let last = v.len().saturating_sub(1);
            for j in (0..v.len()).step_by(k).chain((!last.is_multiple_of(k)).then_some(last)) {
                rows.push(
                    json!({"run": name, "task": task, "t_s": times[off + j] / 1e9, "run_s": v[j] / 1e9}),
                );
            }
        }
    }
    if rows.is_empty() {
        return None;
    }
    Some(json!({
        "title": {"text": "Cumulative run time per task", "subtitle": format!("the first {MAX_TASK_LINES} tasks of each run; one panel per run on shared axes; equal slopes are equal CPU shares")},
        "data": {"values": rows},
        "facet": {"row": run_rows()},
        "spec": {
            "width": 900,
            "height": 220,
            "params": zoom(),
            "mark": {"type": "line", "clip": true},
            "encoding": {
                "x": {"field": "t_s", "type": "quantitative", "title": "time [s]"},
                "y": {"field": "run_s", "type": "quantitative", "title": "run time [s]"},
                "color": {"field": "task", "type": "nominal", "title": "task", "legend": {"symbolLimit": 30}},
                "tooltip": [
                    {"field": "run", "type": "nominal"},
                    {"field": "task", "type": "nominal"},
                    {"field": "t_s", "type": "quantitative", "title": "time [s]", "format": ",.3f"},
                    {"field": "run_s", "type": "quantitative", "title": "run time [s]", "format": ",.4f"}
                ]
            }
        },
        "resolve": {"scale": {"x": "shared", "y": "shared"}}
    }))
}

/// Context switches and migrations per second over time, one line per run, a panel per counter on
/// one time axis; `None` without series. A point is the counter's increase over the interval ending
/// there, divided by it (merged intervals: the mean rate over them).
pub fn rates(runs: &[Value], label: impl Fn(&Value) -> String) -> Option<Value> {
    let mut rows = Vec::new();
    for r in runs {
        let s = &r["series"];
        let times = nums(&s["time_ns"]);
        let name = label(r);
        for (key, what) in [("switches", "context switches / s"), ("migrations", "migrations / s")] {
            let c = nums(&s[key]);
            let n = times.len().min(c.len());
            if n < 2 {
                continue;
            }
            let k = stride(n - 1, MAX_POINTS);
            let mut i = 0;
            while i + 1 < n {
                let j = (i + k).min(n - 1);
                let dt = (times[j] - times[i]) / 1e9;
                let rate = if dt > 0.0 { (c[j] - c[i]) / dt } else { 0.0 };
                rows.push(json!({"run": name, "counter": what, "t_s": times[j] / 1e9, "per_s": rate}));
                i = j;
            }
        }
    }
    if rows.is_empty() {
        return None;
    }
    Some(json!({
        "title": {"text": "Context switches and migrations per second over time", "subtitle": "one line per run; drag to pan, scroll to zoom"},
        "data": {"values": rows},
        "facet": {"row": {"field": "counter", "type": "nominal", "title": null, "sort": ["context switches / s", "migrations / s"],
                          "header": {"labelAngle": 0, "labelAlign": "left", "labelAnchor": "start", "labelOrient": "top", "labelFontWeight": "bold"}}},
        "spec": {
            "width": 900,
            "height": 180,
            "params": zoom(),
            "mark": {"type": "line", "clip": true, "interpolate": "step-before"},
            "encoding": {
                "x": {"field": "t_s", "type": "quantitative", "title": "time [s]"},
                "y": {"field": "per_s", "type": "quantitative", "title": "per second"},
                "color": {"field": "run", "type": "nominal", "title": "run", "sort": null, "legend": {"labelLimit": 400}},
                "tooltip": [
                    {"field": "run", "type": "nominal"},
                    {"field": "counter", "type": "nominal"},
                    {"field": "t_s", "type": "quantitative", "title": "until [s]", "format": ",.3f"},
                    {"field": "per_s", "type": "quantitative", "title": "per second", "format": ",.0f"}
                ]
            }
        },
        "resolve": {"scale": {"x": "shared", "y": "independent"}}
    }))
}

/// Each task's elapsed time (start to exit), sorted, one line per run; `None` when no task exited.
pub fn elapsed(runs: &[Value], label: impl Fn(&Value) -> String) -> Option<Value> {
    let mut rows = Vec::new();
    for r in runs {
        let mut v: Vec<f64> = r["tasks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| Some((t.get("exited_ns")?.as_f64()? - t.get("started_ns")?.as_f64()?) / 1e9))
            .filter(|v| *v > 0.0)
            .collect();
        v.sort_by(f64::total_cmp);
        let name = label(r);
        let k = stride(v.len(), MAX_POINTS);
        let last = v.len().saturating_sub(1);
        for j in (0..v.len()).step_by(k).chain((!v.is_empty() && !last.is_multiple_of(k)).then_some(last)) {
            rows.push(json!({"run": name, "rank": j + 1, "elapsed_s": v[j]}));
        }
    }
    if rows.is_empty() {
        return None;
    }
    Some(json!({
        "title": {"text": "Per-task elapsed time (start to exit), sorted", "subtitle": "one line per run: a flat line is fair, a steep end is a straggler"},
        "width": 900,
        "height": 280,
        "data": {"values": rows},
        "params": zoom(),
        "mark": {"type": "line", "point": rows.len() <= 200, "clip": true},
        "encoding": {
            "x": {"field": "rank", "type": "quantitative", "title": "task rank (shortest first)"},
            "y": {"field": "elapsed_s", "type": "quantitative", "title": "elapsed [s]"},
            "color": {"field": "run", "type": "nominal", "title": "run", "sort": null, "legend": {"labelLimit": 400}},
            "tooltip": [
                {"field": "run", "type": "nominal"},
                {"field": "rank", "type": "quantitative"},
                {"field": "elapsed_s", "type": "quantitative", "title": "elapsed [s]", "format": ",.4f"}
            ]
        }
    }))
}

/// Each task's run lengths (`tasks[].run_length`): the median of its runs as a line and the band
/// from the median to the 99th percentile, tasks sorted by median, one colour per run, log axis;
/// `None` when no task has a run (real runs, older reports).
pub fn task_run_lengths(runs: &[Value], label: impl Fn(&Value) -> String) -> Option<Value> {
    let mut rows = Vec::new();
    for r in runs {
        let mut per: Vec<(f64, f64, f64, &str)> = r["tasks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["run_length"]["count"].as_u64().unwrap_or(0) > 0)
            .map(|t| {
                let l = &t["run_length"];
                (
                    (num(&l["p50_ns"]) / 1e3).max(0.001),
                    (num(&l["p99_ns"]) / 1e3).max(0.001),
                    num(&l["count"]),
                    t["name"].as_str().unwrap_or("?"),
                )
            })
            .collect();
        per.sort_by(|a, b| a.0.total_cmp(&b.0));
        let name = label(r);
        let k = stride(per.len(), MAX_POINTS);
        let last = per.len().saturating_sub(1);
        for j in (0..per.len()).step_by(k).chain((!per.is_empty() && !last.is_multiple_of(k)).then_some(last))
        {
            let (p50, p99, count, task) = per[j];
            rows.push(json!({"run": name, "rank": j + 1, "task": task, "p50_us": p50, "p99_us": p99, "runs": count}));
        }
    }
    if rows.is_empty() {
        return None;
    }
    let x =
        json!({"field": "rank", "type": "quantitative", "title": "task rank (shortest median run first)"});
    let colour = json!({"field": "run", "type": "nominal", "title": "run", "sort": null, "legend": {"labelLimit": 400}});
    Some(json!({
        "title": {"text": "Run lengths per task: the median (line) and up to the 99th percentile (band)", "subtitle": "each task's runs from switch-in to switch-out; tasks sorted by their median; one colour per run"},
        "width": 900,
        "height": 280,
        "data": {"values": rows},
        "layer": [
            {
                "mark": {"type": "area", "opacity": 0.18, "clip": true},
                "encoding": {"x": x, "y": {"field": "p50_us", "type": "quantitative", "scale": {"type": "log"}, "title": "run length [us] (log scale)"},
                             "y2": {"field": "p99_us"}, "color": colour}
            },
            {
                "params": zoom(),
                "mark": {"type": "line", "clip": true},
                "encoding": {
                    "x": x,
                    "y": {"field": "p50_us", "type": "quantitative", "scale": {"type": "log"}},
                    "color": colour,
                    "tooltip": [
                        {"field": "run", "type": "nominal"},
                        {"field": "task", "type": "nominal"},
                        {"field": "p50_us", "type": "quantitative", "title": "median [us]", "format": ",.1f"},
                        {"field": "p99_us", "type": "quantitative", "title": "p99 [us]", "format": ",.1f"},
                        {"field": "runs", "type": "quantitative", "format": ","}
                    ]
                }
            }
        ]
    }))
}

/// The wakeup-latency CDF through the summary's percentiles, for reports written before they
/// carried whole distributions: a staircase through p50, p90, p99, p99.9 and the maximum.
pub fn percentile_cdf(runs: &[Value], label: impl Fn(&Value) -> String) -> Option<Value> {
    let keys = [("p50_ns", 0.5), ("p90_ns", 0.9), ("p99_ns", 0.99), ("p999_ns", 0.999), ("max_ns", 1.0)];
    let mut rows = Vec::new();
    for r in runs {
        let l = &r["summary"]["wakeup_latency"];
        if l["max_ns"].as_f64().is_none_or(|m| m <= 0.0) {
            continue;
        }
        let name = label(r);
        for (k, q) in keys {
            rows.push(json!({"run": name, "x_us": (num(&l[k]) / 1e3).max(0.001), "fraction": q}));
        }
    }
    if rows.is_empty() {
        return None;
    }
    Some(json!({
        "title": {"text": "Wakeup latency through the percentiles", "subtitle": "these reports carry percentiles only (written before whole distributions): a staircase through p50, p90, p99, p99.9 and max"},
        "width": 900,
        "height": 300,
        "data": {"values": rows},
        "mark": {"type": "line", "interpolate": "step-after", "point": true},
        "encoding": {
            "x": {"field": "x_us", "type": "quantitative", "scale": {"type": "log"}, "title": "wakeup latency [us] (log scale)"},
            "y": {"field": "fraction", "type": "quantitative", "scale": {"domain": [0, 1]}, "title": "fraction of wakeups"},
            "color": {"field": "run", "type": "nominal", "title": "run", "sort": null},
            "tooltip": [{"field": "run", "type": "nominal"}, {"field": "x_us", "type": "quantitative", "title": "[us]", "format": ",.1f"}, {"field": "fraction", "type": "quantitative"}]
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(r: &Value) -> String {
        r["policy"].as_str().unwrap().to_string()
    }

    fn values(spec: &Value) -> &Vec<Value> {
        spec["data"]["values"].as_array().unwrap()
    }

    #[test]
    fn rates_are_exact_means_over_merged_intervals() {
        // 2,001 samples 10 ms apart, 5 switches per interval then 15: 2,000 intervals merge in
        // pairs (1,000 points), each pair's mean rate exactly 500 or 1,500 per second.
        let n = 2_001;
        let times: Vec<u64> = (0..n).map(|i| i * 10_000_000).collect();
        let mut c = vec![0u64];
        for i in 1..n {
            c.push(c[i as usize - 1] + if i <= 1_000 { 5 } else { 15 });
        }
        let r = json!({"policy": "cfs", "series": {"time_ns": times, "switches": c, "migrations": vec![0; n as usize]}});
        let spec = rates(&[r], label).unwrap();
        let sw: Vec<&Value> =
            values(&spec).iter().filter(|v| v["counter"] == "context switches / s").collect();
        assert_eq!(sw.len(), 1_000);
        assert_eq!((sw[0]["t_s"].as_f64().unwrap(), sw[0]["per_s"].as_f64().unwrap()), (0.02, 500.0));
        assert_eq!(sw[999]["per_s"].as_f64().unwrap(), 1_500.0);
        let total: f64 = sw.iter().map(|v| v["per_s"].as_f64().unwrap() * 0.02).sum();
        assert!((total - (5_000.0 + 15_000.0)).abs() < 1e-6, "every switch counted once: {total}");
    }

    #[test]
    fn the_heat_map_bins_are_means_and_idle_is_blank() {
        // 4 samples, one CPU: 0, 2, 4, 0 tasks: nothing binned (4 <= MAX_BINS), the zeros left out.
        let r =
            json!({"policy": "ule", "series": {"time_ns": [0, 10, 20, 30], "nr_running": [[0, 2, 4, 0]]}});
        let spec = runnable_heatmap(&[r], label).unwrap();
        let v = values(&spec);
        assert_eq!(v.len(), 2);
        assert_eq!(
            (v[1]["tasks"].as_f64(), v[1]["from_s"].as_f64(), v[1]["to_s"].as_f64()),
            (Some(4.0), Some(20e-9), Some(30e-9))
        );
        // 3,000 samples: 3 per bin, 1,000 bins, each the mean of its three.
        let lane: Vec<u32> = (0..3_000).map(|i| (i % 3) as u32).collect();
        let times: Vec<u64> = (0..3_000).collect();
        let r = json!({"policy": "ule", "series": {"time_ns": times, "nr_running": [lane]}});
        let spec = runnable_heatmap(&[r], label).unwrap();
        assert_eq!(values(&spec).len(), 1_000);
        assert!(values(&spec).iter().all(|v| v["tasks"].as_f64() == Some(1.0)));
        assert!(runnable_heatmap(&[json!({"policy": "x"})], label).is_none());
    }

    #[test]
    fn tasks_are_ranked_by_their_median_run() {
        let t = |name: &str, p50: u64, p99: u64, count: u64| json!({"name": name, "run_length": {"count": count, "p50_ns": p50, "p99_ns": p99}});
        let r = json!({"policy": "cfs", "tasks": [t("b", 3_000_000, 4_000_000, 10), t("idle", 0, 0, 0), t("a", 20_000, 900_000, 500)]});
        let spec = task_run_lengths(&[r], label).unwrap();
        let v: Vec<(&str, f64, f64)> = values(&spec)
            .iter()
            .map(|r| {
                (r["task"].as_str().unwrap(), r["p50_us"].as_f64().unwrap(), r["p99_us"].as_f64().unwrap())
            })
            .collect();
        assert_eq!(v, [("a", 20.0, 900.0), ("b", 3_000.0, 4_000.0)], "a task without runs left out");
        assert!(task_run_lengths(&[json!({"policy": "x", "tasks": []})], label).is_none());
    }

    #[test]
    fn elapsed_times_are_sorted_and_the_longest_is_kept() {
        let tasks: Vec<Value> =
            (0..2_500u64).map(|i| json!({"started_ns": 0, "exited_ns": (2_500 - i) * 1_000_000})).collect();
        let spec = elapsed(&[json!({"policy": "cfs", "tasks": tasks})], label).unwrap();
        let v = values(&spec);
        // Every third of 2,500 (0, 3, ..., 2,499): 834 points, the last the longest task.
        assert_eq!(v.len(), 834);
        assert_eq!((v[0]["rank"].as_u64(), v[0]["elapsed_s"].as_f64()), (Some(1), Some(0.001)));
        assert_eq!((v[833]["rank"].as_u64(), v[833]["elapsed_s"].as_f64()), (Some(2_500), Some(2.5)));
    }
}
