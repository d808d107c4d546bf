//! The figure of each task's policy values over time (`series.task_policy`, with `--sample-tasks`):
//! ULE's interactivity score per thread as seed 002 draws it (fig. 2 and 4), CFS's vruntime lag,
//! HTFS's boosted weight. One panel per run on a shared time axis, one step line per task (a value
//! holds until the next sample changes it), and a menu choosing which of the policy's values is
//! drawn.
//!
//! What the page carries is bounded: a line keeps only the samples where its value changes (and its
//! last), which draws the same steps, and a run keeps at most [`MAX_POLICY_POINTS`] points per
//! value, thinned evenly within each line beyond that. The rows travel as CSV text.

use serde_json::{json, Value};
use std::fmt::Write;

/// Most points one run carries per policy value, over all its tasks.
pub const MAX_POLICY_POINTS: usize = 20_000;

/// Most tasks named in the legend; beyond it the legend is left out and the tooltip names them.
const MAX_LEGEND_TASKS: usize = 30;

/// One task's line: the samples where the value changes, and the last sample. `None` values (the
/// task not started, or no such value for it) break nothing: they are left out.
fn changes(times: &[f64], row: &[Value]) -> Vec<(f64, i64)> {
    let off = times.len().saturating_sub(row.len());
    let mut out: Vec<(f64, i64)> = Vec::new();
    let mut last_kept = None;
    for (j, v) in row.iter().enumerate() {
        let Some(v) = v.as_i64() else { continue };
        let t = times[off + j];
        if last_kept != Some(v) {
            out.push((t, v));
            last_kept = Some(v);
        } else if j + 1 == row.len() {
            out.push((t, v));
        }
    }
    out
}

/// Keeps at most `max` of `points`, evenly, always the first and the last.
fn thin(points: Vec<(f64, i64)>, max: usize) -> Vec<(f64, i64)> {
    if points.len() <= max.max(2) {
        return points;
    }
    let k = points.len().div_ceil(max.max(2) - 1);
    let last = *points.last().expect("non-empty");
    let mut out: Vec<(f64, i64)> = points.into_iter().step_by(k).collect();
    if out.last() != Some(&last) {
        out.push(last);
    }
    out
}

/// A CSV field, quoted when it holds a comma, a quote or a line break.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Each task's policy values over time, one panel per run; `None` when no run sampled them.
pub fn policy_values(runs: &[Value], label: impl Fn(&Value) -> String) -> Option<Value> {
    let mut csv = String::from("run,value,task,t_s,v\n");
    let mut names: Vec<String> = Vec::new();
    let mut most_tasks = 0;
    let mut rows = 0;
    for r in runs {
        let s = &r["series"];
        let Some(map) = s["task_policy"].as_object() else { continue };
        let times: Vec<f64> =
            s["time_ns"].as_array().into_iter().flatten().filter_map(Value::as_f64).collect();
        let tasks = r["tasks"].as_array().map_or(&[][..], Vec::as_slice);
        let run = field(&label(r));
        for (name, per_task) in map {
            let lines: Vec<(usize, Vec<(f64, i64)>)> = per_task
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, row)| (i, changes(&times, row.as_array().map_or(&[][..], Vec::as_slice))))
                .filter(|(_, l)| !l.is_empty())
                .collect();
            if lines.is_empty() {
                continue;
            }
            if !names.contains(name) {
                names.push(name.clone());
            }
            most_tasks = most_tasks.max(lines.len());
            let per_line = (MAX_POLICY_POINTS / lines.len()).max(2);
            for (i, line) in lines {
                let task = field(tasks.get(i).and_then(|t| t["name"].as_str()).unwrap_or("?"));
                for (t, v) in thin(line, per_line) {
                    let _ = writeln!(csv, "{run},{},{task},{},{v}", field(name), t / 1e9);
                    rows += 1;
                }
            }
        }
    }
    if rows == 0 {
        return None;
    }
    let legend = if most_tasks <= MAX_LEGEND_TASKS { json!({"symbolLimit": 30}) } else { Value::Null };
    Some(json!({
        "title": {"text": "The policy's values per task over time", "subtitle": ["each task's value as the policy holds it (ULE's interactivity score, CFS's vruntime lag, ...), sampled with the series;", "one panel per run on a shared time axis; choose the value below; hover for the task"]},
        "data": {"values": csv, "format": {"type": "csv", "parse": {"t_s": "number", "v": "number"}}},
        "params": [{
            "name": "policy_value", "value": names[0],
            "bind": {"input": "select", "options": names, "name": "value "}
        }],
        "transform": [{"filter": "datum.value == policy_value"}],
        "facet": {"row": {"field": "run", "type": "nominal", "title": null, "sort": null,
                          "header": {"labelAngle": 0, "labelAlign": "left", "labelAnchor": "start", "labelOrient": "top", "labelFontWeight": "bold", "labelLimit": 900}}},
        "spec": {
            "width": 900,
            "height": 220,
            "params": [{"name": "zoom", "select": {"type": "interval", "encodings": ["x"]}, "bind": "scales"}],
            "mark": {"type": "line", "interpolate": "step-after", "clip": true, "strokeWidth": 1.2},
            "encoding": {
                "x": {"field": "t_s", "type": "quantitative", "title": "time [s]"},
                "y": {"field": "v", "type": "quantitative", "title": "value"},
                "color": {"field": "task", "type": "nominal", "title": "task", "legend": legend},
                "detail": {"field": "task", "type": "nominal"},
                "tooltip": [
                    {"field": "run", "type": "nominal"},
                    {"field": "task", "type": "nominal"},
                    {"field": "value", "type": "nominal", "title": "value of"},
                    {"field": "t_s", "type": "quantitative", "title": "time [s]", "format": ",.3f"},
                    {"field": "v", "type": "quantitative", "title": "value"}
                ]
            }
        },
        "resolve": {"scale": {"x": "shared", "y": "shared"}}
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(r: &Value) -> String {
        r["policy"].as_str().unwrap().to_string()
    }

    fn csv_rows(spec: &Value) -> Vec<Vec<String>> {
        spec["data"]["values"]
            .as_str()
            .unwrap()
            .lines()
            .skip(1)
            .map(|l| l.split(',').map(String::from).collect())
            .collect()
    }

    #[test]
    fn a_line_keeps_the_changes_and_its_last_sample() {
        // Samples at 0..5 s; task a: 0, 9, 9, 9, 50, 50; task b starts at 3 s (null before): 4, 4, 4.
        let r = json!({
            "policy": "ule",
            "tasks": [{"name": "a"}, {"name": "b,1"}],
            "series": {
                "time_ns": [0, 1e9, 2e9, 3e9, 4e9, 5e9],
                "task_policy": {"score": [[0, 9, 9, 9, 50, 50], [null, null, 4, 4, 4]]}
            }
        });
        let spec = policy_values(&[r], label).unwrap();
        let rows = csv_rows(&spec);
        let a: Vec<(f64, i64)> = rows
            .iter()
            .filter(|r| r[2] == "a")
            .map(|r| (r[3].parse().unwrap(), r[4].parse().unwrap()))
            .collect();
        assert_eq!(a, [(0.0, 0), (1.0, 9), (4.0, 50), (5.0, 50)]);
        // b's row is aligned to the end: its first value is at 3 s. Its name is quoted.
        let text = spec["data"]["values"].as_str().unwrap();
        assert!(
            text.contains("ule,score,\"b,1\",3,4\n") && text.contains("ule,score,\"b,1\",5,4\n"),
            "{text}"
        );
        assert_eq!(spec["params"][0]["bind"]["options"], json!(["score"]));
        assert!(policy_values(&[json!({"policy": "cfs", "series": {"time_ns": [0]}})], label).is_none());
    }

    #[test]
    fn a_run_carries_a_bounded_number_of_points_per_value() {
        // 200 tasks whose value changes at each of 1,000 samples: 200,000 changes, thinned to at
        // most MAX_POLICY_POINTS (plus each line's last), each line keeping its first and last.
        let n = 1_000;
        let times: Vec<u64> = (0..n).map(|i| i * 1_000_000).collect();
        let rows: Vec<Vec<i64>> = (0..200).map(|t| (0..n as i64).map(|i| i + t).collect()).collect();
        let tasks: Vec<Value> = (0..200).map(|t| json!({"name": format!("t{t}")})).collect();
        let r = json!({"policy": "cfs", "tasks": tasks, "series": {"time_ns": times, "task_policy": {"lag": rows}}});
        let spec = policy_values(&[r], label).unwrap();
        let rows = csv_rows(&spec);
        assert!(rows.len() <= MAX_POLICY_POINTS + 200, "{} points", rows.len());
        assert!(rows.len() >= MAX_POLICY_POINTS / 2, "{} points", rows.len());
        let t7: Vec<&Vec<String>> = rows.iter().filter(|r| r[2] == "t7").collect();
        assert_eq!((t7[0][3].as_str(), t7[0][4].as_str()), ("0", "7"));
        assert_eq!((t7[t7.len() - 1][3].as_str(), t7[t7.len() - 1][4].as_str()), ("0.999", "1006"));
        assert!(spec["spec"]["encoding"]["color"]["legend"].is_null(), "200 tasks: no legend");
    }
}
