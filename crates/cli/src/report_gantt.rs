//! The per-CPU timeline of `schedlab report` (issue 33): a Gantt chart of who held each CPU, from
//! a run report's `timeline` (crates/sim/src/timeline.rs, docs/metrics.md "Timeline").
//!
//! One panel per run, all on one time axis, so the same moment lines up across the runs compared.
//! Coloured by application (the tasks' templates without instance numbers, from the engine, which
//! keeps per column the application whose tasks together held the CPU longest) or by task (the
//! single task that held it longest), chosen under the figure. Neighbouring columns with the same
//! holder are drawn as one rectangle, the lighter the less of it that holder held (shared or idle).
//! The page draws at most [`GANTT_COLUMNS`] columns per run (the engine's most, so a run's
//! timeline is drawn as recorded) and [`MAX_GANTT_CELLS`] over all runs: beyond that (many runs on
//! a machine of dozens of CPUs) neighbouring columns are grouped, the holder whose columns held the
//! CPU longest in all winning. A report keeps only each column's longest holder, so a grouped
//! column's share counts its holder's time in the columns it led, not in the others: grouped
//! columns where the lead changes hands look lighter than they were.

use serde_json::{json, Value};
use std::fmt::Write as _;

/// A CSV field: quoted when it holds a comma, a quote or a line break (quotes doubled).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Nanoseconds as seconds, to the nanosecond, without trailing zeros.
fn seconds(ns: u64) -> String {
    let text = format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `part / whole` to three decimals, without trailing zeros.
fn fraction(part: u64, whole: u64) -> String {
    let text = format!("{:.3}", part as f64 / whole.max(1) as f64);
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Most timeline cells (CPUs x columns over all runs) a page draws.
pub const MAX_GANTT_CELLS: usize = 150_000;

/// Columns a run's timeline is drawn with at most: the engine's most
/// (`schedlab_sim::timeline::MAX_COLUMNS`).
pub const GANTT_COLUMNS: usize = schedlab_sim::timeline::MAX_COLUMNS;

/// One CPU's columns for one way of colouring: the holder of each column (a task id or an
/// application index) and its time there, with the column's busy time and switches.
struct Lane {
    who: Vec<Option<u64>>,
    who_ns: Vec<u64>,
    busy_ns: Vec<u64>,
    switches: Vec<u64>,
    preempted: Vec<u64>,
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array().into_iter().flatten().map(|x| x.as_u64().unwrap_or(0)).collect()
}

impl Lane {
    /// The lane of `timeline.cpus[i]` by `key` (`task` or `app`), its columns cut to the
    /// shortest of its arrays.
    fn read(v: &Value, key: &str) -> Lane {
        let who: Vec<Option<u64>> = v[key].as_array().into_iter().flatten().map(Value::as_u64).collect();
        let mut l = Lane {
            who,
            who_ns: u64s(&v[format!("{key}_ns")]),
            busy_ns: u64s(&v["busy_ns"]),
            switches: u64s(&v["switches"]),
            preempted: u64s(&v["preempted"]),
        };
        let n = [l.who.len(), l.who_ns.len(), l.busy_ns.len(), l.switches.len(), l.preempted.len()]
            .into_iter()
            .min()
            .unwrap_or(0);
        l.who.truncate(n);
        l.who_ns.truncate(n);
        l.busy_ns.truncate(n);
        l.switches.truncate(n);
        l.preempted.truncate(n);
        l
    }

    /// Every `k` neighbouring columns as one: the holder of the group is the one whose columns
    /// held the CPU longest in all (of equals, the first); times and counts add up.
    fn group(&self, k: usize) -> Lane {
        let k = k.max(1);
        let mut out =
            Lane { who: vec![], who_ns: vec![], busy_ns: vec![], switches: vec![], preempted: vec![] };
        for start in (0..self.who.len()).step_by(k) {
            let end = (start + k).min(self.who.len());
            let mut held: Vec<(u64, u64)> = Vec::new();
            for i in start..end {
                if let Some(t) = self.who[i] {
                    match held.iter_mut().find(|(s, _)| *s == t) {
                        Some((_, ns)) => *ns += self.who_ns[i],
                        None => held.push((t, self.who_ns[i])),
                    }
                }
            }
            let best = held.iter().fold(None, |b: Option<(u64, u64)>, &(t, ns)| match b {
                Some((_, bn)) if bn >= ns => b,
                _ => Some((t, ns)),
            });
            out.who.push(best.map(|b| b.0));
            out.who_ns.push(best.map_or(0, |b| b.1));
            out.busy_ns.push(self.busy_ns[start..end].iter().sum());
            out.switches.push(self.switches[start..end].iter().sum());
            out.preempted.push(self.preempted[start..end].iter().sum());
        }
        out
    }

    /// One rectangle per stretch of one holder: `(first column, past the last, holder)`.
    fn stretches(&self) -> Vec<(usize, usize, u64)> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.who.len() {
            let Some(t) = self.who[i] else {
                i += 1;
                continue;
            };
            let mut j = i + 1;
            while j < self.who.len() && self.who[j] == Some(t) {
                j += 1;
            }
            out.push((i, j, t));
            i = j;
        }
        out
    }
}

/// The Gantt chart of each run that carries a timeline; `None` when none does. Its data are CSV
/// text (`data.values`, with `data.format`): one row per rectangle, `by` `a` (coloured by
/// application) or `t` (by task).
pub fn gantt(runs: &[Value], label: impl Fn(&Value) -> String) -> Option<Value> {
    let with: Vec<&Value> = runs.iter().filter(|r| r["timeline"]["cpus"].is_array()).collect();
    let cells: usize = with
        .iter()
        .map(|r| {
            let tl = &r["timeline"];
            tl["columns"].as_u64().unwrap_or(0) as usize * tl["cpus"].as_array().map_or(0, Vec::len)
        })
        .sum();
    if cells == 0 {
        return None;
    }
    // The rows as CSV (a third of the size of JSON objects: a big machine's timeline is tens of
    // thousands of rectangles), parsed by Vega.
    let mut csv = String::from("run,cpu,by,who,from_s,to_s,held,busy,preempted,blocked\n");
    let mut nr_rows = 0;
    let mut max_cpus = 1;
    let end_s = with.iter().map(|r| r["duration_ns"].as_f64().unwrap_or(0.0)).fold(0.0, f64::max) / 1e9;
    for r in &with {
        let tl = &r["timeline"];
        let columns = tl["columns"].as_u64().unwrap_or(0) as usize;
        let lanes = tl["cpus"].as_array().map_or(&[][..], Vec::as_slice);
        max_cpus = max_cpus.max(lanes.len());
        // Columns per drawn column: a screen's width, and the page's cell budget over all runs.
        let mut k = 1;
        while columns.div_ceil(k) > GANTT_COLUMNS || cells.div_ceil(k) > MAX_GANTT_CELLS {
            k *= 2;
        }
        let width_ns = tl["column_ns"].as_u64().unwrap_or(1) * k as u64;
        let tasks = r["tasks"].as_array().map_or(&[][..], Vec::as_slice);
        let apps = tl["applications"].as_array().map_or(&[][..], Vec::as_slice);
        let name = label(r);
        for (cpu, lane) in lanes.iter().enumerate() {
            for (by, key) in [("t", "task"), ("a", "app")] {
                let l = Lane::read(lane, key).group(k);
                for (i, j, who) in l.stretches() {
                    let span_ns = (j - i) as u64 * width_ns;
                    let sum = |v: &[u64]| v[i..j].iter().sum::<u64>();
                    let (held, busy) = (sum(&l.who_ns), sum(&l.busy_ns));
                    let (switches, preempted) = (sum(&l.switches), sum(&l.preempted));
                    let list = if key == "task" { tasks } else { apps };
                    let entry = list.get(who as usize);
                    let text = entry.and_then(|e| e["name"].as_str().or(e.as_str()));
                    let who = text.map_or_else(|| format!("{key} {who}"), str::to_string);
                    let _ = writeln!(
                        csv,
                        "{},{cpu},{by},{},{},{},{},{},{preempted},{}",
                        csv_field(&name),
                        csv_field(&who),
                        seconds(i as u64 * width_ns),
                        seconds(j as u64 * width_ns),
                        fraction(held, span_ns),
                        fraction(busy, span_ns),
                        switches - preempted
                    );
                    nr_rows += 1;
                }
            }
        }
    }
    if nr_rows == 0 {
        return None;
    }
    Some(json!({
        "title": {"text": "Who ran where: the per-CPU timeline", "subtitle": ["the application or task that held each CPU longest, per stretch of time, one panel per run on a shared time axis;", "lighter: it held the CPU only part of the time (shared or idle); drag to pan, scroll to zoom, hover for details"]},
        "data": {"values": csv, "format": {"type": "csv", "parse": {
            "cpu": "number", "from_s": "number", "to_s": "number", "held": "number", "busy": "number",
            "preempted": "number", "blocked": "number"}}},
        "params": [{
            "name": "colour_by", "value": "a",
            "bind": {"input": "radio", "options": ["a", "t"], "labels": ["application", "task"], "name": "colour by "}
        }],
        "transform": [{"filter": "datum.by == colour_by"}],
        "facet": {"row": {"field": "run", "type": "nominal", "title": null, "sort": null,
                          "header": {"labelAngle": 0, "labelAlign": "left", "labelAnchor": "start", "labelOrient": "top", "labelFontWeight": "bold", "labelLimit": 900}}},
        "spec": {
            "width": 900,
            "height": (max_cpus * 14).clamp(40, 480),
            "params": [{"name": "zoom", "select": {"type": "interval", "encodings": ["x"]}, "bind": "scales"}],
            "mark": {"type": "rect", "clip": true},
            "encoding": {
                "x": {"field": "from_s", "type": "quantitative", "title": "time [s]", "scale": {"domain": [0, end_s], "nice": false}},
                "x2": {"field": "to_s"},
                "y": {"field": "cpu", "type": "ordinal", "title": "CPU", "axis": {"labelOverlap": true}},
                "color": {"field": "who", "type": "nominal", "title": null, "legend": {"symbolLimit": 30, "labelLimit": 240}},
                "opacity": {"field": "held", "type": "quantitative", "scale": {"domain": [0, 1], "range": [0.2, 1]}, "legend": null},
                "tooltip": [
                    {"field": "run", "type": "nominal"},
                    {"field": "cpu", "type": "ordinal", "title": "CPU"},
                    {"field": "who", "type": "nominal", "title": "held longest by"},
                    {"field": "from_s", "type": "quantitative", "title": "from [s]", "format": ",.6f"},
                    {"field": "to_s", "type": "quantitative", "title": "to [s]", "format": ",.6f"},
                    {"field": "held", "type": "quantitative", "title": "its share", "format": ".0%"},
                    {"field": "busy", "type": "quantitative", "title": "CPU busy", "format": ".0%"},
                    {"field": "preempted", "type": "quantitative", "title": "tasks leaving runnable (preempted)"},
                    {"field": "blocked", "type": "quantitative", "title": "tasks leaving blocked or exited"}
                ]
            }
        },
        "resolve": {"scale": {"x": "shared", "y": "independent"}}
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of one CPU whose columns are held by `task` (ids into two tasks) and `app` (indices
    /// into two applications).
    fn run(
        columns: usize,
        task: Vec<Value>,
        task_ns: Vec<u64>,
        app: Vec<Value>,
        app_ns: Vec<u64>,
        busy_ns: Vec<u64>,
    ) -> Value {
        let n = task.len();
        json!({
            "policy": "cfs", "duration_ns": columns as u64 * 1_000,
            "tasks": [{"name": "fibo.fibo"}, {"name": "sysbench.client-1"}],
            "timeline": {"column_ns": 1_000, "columns": columns, "applications": ["fibo", "sysbench"], "cpus": [{
                "task": task, "task_ns": task_ns, "app": app, "app_ns": app_ns, "busy_ns": busy_ns,
                "switches": vec![1; n], "preempted": vec![0; n]
            }]}
        })
    }

    /// Splits CSV text into records (RFC 4180: quoted fields, doubled quotes).
    fn parse_csv(text: &str) -> Vec<Vec<String>> {
        let (mut records, mut record, mut field) = (Vec::new(), Vec::new(), String::new());
        let (mut quoted, mut chars) = (false, text.chars().peekable());
        while let Some(c) = chars.next() {
            match (quoted, c) {
                (true, '"') if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                (_, '"') => quoted = !quoted,
                (false, ',') => record.push(std::mem::take(&mut field)),
                (false, '\n') => {
                    record.push(std::mem::take(&mut field));
                    records.push(std::mem::take(&mut record));
                }
                _ => field.push(c),
            }
        }
        records
    }

    /// The rectangles coloured `by` (`t` or `a`), as objects with the numbers parsed.
    fn rows(spec: &Value, by: &str) -> Vec<Value> {
        let records = parse_csv(spec["data"]["values"].as_str().unwrap());
        let header = &records[0];
        records[1..]
            .iter()
            .map(|r| {
                let obj: serde_json::Map<String, Value> = header
                    .iter()
                    .zip(r)
                    .map(|(k, v)| {
                        let parsed =
                            v.parse::<f64>().ok().filter(|_| !["run", "by", "who"].contains(&k.as_str()));
                        (k.clone(), parsed.map_or_else(|| json!(v), |x| json!(x)))
                    })
                    .collect();
                Value::Object(obj)
            })
            .filter(|r| r["by"] == by)
            .collect()
    }

    #[test]
    fn csv_fields_are_quoted_and_numbers_short() {
        assert_eq!(csv_field("cfs (seed 1)"), "cfs (seed 1)");
        assert_eq!(csv_field("a,\"b\""), "\"a,\"\"b\"\"\"");
        assert_eq!(parse_csv("x,\"a,\"\"b\"\"\"\n"), [["x", "a,\"b\""]]);
        assert_eq!(
            (seconds(0), seconds(1_500_000_000), seconds(2_000)),
            ("0".into(), "1.5".into(), "0.000002".into())
        );
        assert_eq!(
            (fraction(3, 4), fraction(1, 3), fraction(5, 5)),
            ("0.75".into(), "0.333".into(), "1".into())
        );
    }

    #[test]
    fn a_rectangle_per_stretch_of_one_holder_in_each_colouring() {
        // Columns: fibo, fibo, idle, sysbench by task; by application sysbench held the second.
        let r = run(
            4,
            vec![json!(0), json!(0), Value::Null, json!(1)],
            vec![1_000, 500, 0, 200],
            vec![json!(0), json!(1), Value::Null, json!(1)],
            vec![1_000, 600, 0, 300],
            vec![1_000, 1_000, 0, 300],
        );
        let spec = gantt(&[r], |_| "cfs".into()).unwrap();
        let by_task = rows(&spec, "t");
        assert_eq!(by_task.len(), 2);
        let a = &by_task[0];
        assert_eq!(a["who"], "fibo.fibo");
        assert_eq!((a["from_s"].as_f64(), a["to_s"].as_f64()), (Some(0.0), Some(2e-6)));
        assert_eq!(
            (a["held"].as_f64(), a["busy"].as_f64(), a["blocked"].as_f64()),
            (Some(0.75), Some(1.0), Some(2.0))
        );
        assert_eq!(
            (by_task[1]["who"].as_str(), by_task[1]["from_s"].as_f64()),
            (Some("sysbench.client-1"), Some(3e-6))
        );
        let by_app: Vec<(String, f64, f64)> = rows(&spec, "a")
            .iter()
            .map(|r| {
                (
                    r["who"].as_str().unwrap().to_string(),
                    r["from_s"].as_f64().unwrap(),
                    r["to_s"].as_f64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            by_app,
            [
                ("fibo".to_string(), 0.0, 1e-6),
                ("sysbench".to_string(), 1e-6, 2e-6),
                ("sysbench".to_string(), 3e-6, 4e-6)
            ]
        );
    }

    #[test]
    fn a_long_timeline_is_drawn_in_at_most_the_engines_columns() {
        // 6,000 columns (more than a report holds) are drawn as 1,500 of four each; alternating
        // tasks with fibo longer in every group: one rectangle of fibo over the whole run, holding
        // 45 % of it.
        let n = 6_000;
        let task: Vec<Value> = (0..n).map(|i| json!(i % 2)).collect();
        let held: Vec<u64> = (0..n).map(|i| if i % 2 == 0 { 900 } else { 800 }).collect();
        let r = run(n, task.clone(), held.clone(), task, held, vec![1_000; n]);
        let spec = gantt(&[r], |_| "cfs".into()).unwrap();
        let t = rows(&spec, "t");
        assert_eq!(t.len(), 1);
        assert_eq!(
            (t[0]["to_s"].as_f64(), t[0]["held"].as_f64(), t[0]["preempted"].as_f64()),
            (Some(6e-3), Some(0.45), Some(0.0))
        );
        assert_eq!(t[0]["blocked"].as_f64(), Some(6_000.0), "every column's switch counted");
        assert!(gantt(&[json!({"policy": "x"})], |_| String::new()).is_none(), "no timeline: no figure");
    }
}
