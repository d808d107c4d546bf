//! `schedlab report`: one self-contained HTML page from run reports (`schedlab run --json`): nothing
//! is fetched when it is viewed (the figure libraries are inlined, and the page's
//! Content-Security-Policy forbids every fetch).
//!
//! The page, top to bottom: the summary panel (`report_summary`: who wins each key metric and by
//! how much, with confidence intervals over repeated runs), the per-CPU timeline of who ran where
//! (`report_gantt`), runnable tasks per CPU as a heat map, cumulative run time per task,
//! context switches and migrations per second (`report_figures`), the wakeup-latency and run-length
//! CDFs from the runs' whole distributions (`report_vega`), each task's run lengths, per-task
//! elapsed times sorted, and
//! tables of each run's configuration and policy statistics. Every figure is a Vega-Lite
//! specification (docs/report.md says why), drawn full width with zoom, pan, tooltips and an
//! SVG/PNG export menu. Runs of one configuration with different seeds are repeats: the summary
//! pools them, the figures draw the first of them.

use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::fmt::Write;

/// HTML-escapes text.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// Label of a run: its policy, and the seed when several runs share the policy.
fn label(r: &Value) -> String {
    format!("{} (seed {})", r["policy"].as_str().unwrap_or("?"), r["seed"])
}

fn tables(runs: &[Value]) -> String {
    let mut out = String::from("<h2>Runs</h2><table><tr><th>run</th><th>machine</th><th>workload</th><th>duration</th><th>tasks</th><th>work/s</th><th>switches/s</th><th>energy [J]</th></tr>");
    for r in runs {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{} ({} CPUs, HZ {})</td><td>{}</td><td>{:.3} s</td><td>{}</td><td>{:.3}</td><td>{:.0}</td><td>{:.3}</td></tr>",
            esc(&label(r)),
            esc(r["machine"]["name"].as_str().unwrap_or("?")),
            r["machine"]["nr_cpus"],
            r["machine"]["hz"],
            esc(r["workload"].as_str().unwrap_or("?")),
            num(&r["duration_ns"]) / 1e9,
            r["summary"]["nr_tasks"],
            num(&r["summary"]["work_per_sec"]),
            num(&r["summary"]["switches_per_sec"]),
            num(&r["summary"]["energy_uj"]) / 1e6,
        );
    }
    out.push_str("</table><h2>Policy statistics</h2>");
    for r in runs {
        let decisions = num(&r["summary"]["nr_decisions"]).max(1.0);
        let _ = write!(
            out,
            "<h3>{}</h3><table><tr><th>counter</th><th>value</th><th>meaning</th></tr><tr><td>tasks examined per decision</td><td>{:.2}</td><td>seed 001 fig. 5's cost measure</td></tr>",
            esc(&label(r)),
            num(&r["summary"]["nr_examined"]) / decisions
        );
        for s in r["policy_stats"].as_array().into_iter().flatten() {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(s["name"].as_str().unwrap_or("")),
                s["value"],
                esc(s["help"].as_str().unwrap_or(""))
            );
        }
        out.push_str("</table>");
    }
    out
}

/// The report page for `runs` (parsed `schedlab.run/1` reports).
pub fn html(runs: &[Value]) -> Result<String> {
    if runs.is_empty() {
        bail!("no results given");
    }
    let intro = format!("<p class=\"note\">{} run(s).</p>\n", runs.len());
    Ok(page("schedlab report", &(intro + &body(runs, "report"))))
}

/// A figure of the report: its name (`gantt`, `runnable`, `cumulative`, `policy`, `rates`,
/// `latency`, `runs`, `task-runs`, `elapsed`), its Vega-Lite specification, and the renderer the page draws it with.
pub struct Figure {
    /// Name, unique in a report.
    pub name: &'static str,
    /// The Vega-Lite specification, data inlined.
    pub spec: Value,
    /// `svg`, or `canvas` for figures of many thousand marks.
    pub renderer: &'static str,
}

/// The report's figures for `runs`, in page order, leaving out those the runs have no data for.
/// Runs of one configuration with different seeds are repeats, drawn once: the first of them.
/// The page and the Python package (`schedlab.plot`) draw these same specifications.
pub fn figures(runs: &[Value]) -> Vec<Figure> {
    use crate::report_figures as f;
    use crate::report_vega as v;
    let groups = crate::report_summary::groups(runs);
    let shown: Vec<Value> = groups.iter().map(|g| g.runs[0].clone()).collect();
    let all = [
        ("gantt", crate::report_gantt::gantt(&shown, label), "canvas"),
        ("runnable", f::runnable_heatmap(&shown, label), "canvas"),
        ("cumulative", f::cumulative(&shown, label), "svg"),
        ("policy", crate::report_policy::policy_values(&shown, label), "svg"),
        ("rates", f::rates(&shown, label), "svg"),
        // The exact CDF where the runs carry whole distributions; the percentile staircase for
        // reports written before distributions existed.
        ("latency", v::latency_cdf(&shown, label).or_else(|| f::percentile_cdf(&shown, label)), "svg"),
        ("runs", v::run_length_cdf(&shown, label), "svg"),
        ("task-runs", f::task_run_lengths(&shown, label), "svg"),
        ("elapsed", f::elapsed(&shown, label), "svg"),
    ];
    all.into_iter()
        .filter_map(|(name, spec, renderer)| Some(Figure { name, spec: spec?, renderer }))
        .collect()
}

/// The summary, figures and tables of a set of runs as an HTML fragment; `scope` names its
/// figures apart from other fragments' on the same page (`{scope}-gantt`, ...).
pub fn body(runs: &[Value], scope: &str) -> String {
    let mut out = crate::report_summary::panel(runs);
    out.push_str("<h2>Figures</h2>\n");
    for f in figures(runs) {
        out.push_str(&crate::report_vega::figure_on(&format!("{scope}-{}", f.name), &f.spec, f.renderer));
        out.push('\n');
    }
    out.push_str(&tables(runs));
    out
}

/// A whole self-contained page around an HTML fragment.
pub fn page(title: &str, body: &str) -> String {
    let mut page = String::from("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    let figures = crate::report_vega::has_figures(body);
    if figures {
        let _ = write!(
            page,
            "<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">",
            crate::report_vega::CSP
        );
    }
    let _ = write!(page, "<title>{}</title>", esc(title));
    page.push_str(
        "<meta name=\"viewport\" content=\"width=device-width\"><style>\
body{font-family:sans-serif;margin:16px 24px;color:#222}\
p,li{max-width:110ch}\
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}\
td.holds{background:#e6f4e6}td.fails{background:#fbe3e3}\
table.summary td.wins{background:#e6f4e6;font-weight:bold}span.n{font-weight:normal;color:#666}\
p.note{color:#444}\
div.vl-figure{margin:18px 0;width:100%}\
</style></head><body>",
    );
    let _ = writeln!(page, "<h1>{}</h1>", esc(title));
    page.push_str(body);
    if figures {
        page.push('\n');
        page.push_str(&crate::report_vega::scripts());
    }
    page.push_str("\n</body></html>\n");
    page
}

/// Reads `schedlab.run/1` reports from files.
pub fn load(paths: &[String]) -> Result<Vec<Value>> {
    paths
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).with_context(|| format!("cannot read {p}"))?;
            let v: Value = serde_json::from_str(&text).with_context(|| format!("{p}: not JSON"))?;
            if v["schema"] != "schedlab.run/1" {
                bail!("{p}: not a schedlab run report (schema `schedlab.run/1`, from `schedlab run --json`)");
            }
            Ok(v)
        })
        .collect()
}
