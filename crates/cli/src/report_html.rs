//! `schedlab report`: one self-contained HTML page from run reports (`schedlab run --json`), with
//! plots as inline SVG (no scripts, styles or fonts from the network).
//!
//! Plots: runnable tasks per CPU over time as a heat map (seed 002 fig. 6-7), cumulative run time per
//! task over time (seed 002 fig. 1 and 3; needs `--sample-tasks`), context switches and migrations per
//! second over time (one line per run), wakeup latency percentiles per run
//! (the exact CDF from the whole distribution, a Vega-Lite figure: `report_vega`; for older reports a
//! staircase through p50, p90, p99, p99.9 and max), the run lengths' CDF (Vega-Lite), per-task
//! elapsed times sorted (seed 003 sec. 5), bars of
//! key metrics against the first run (the baseline), and tables of policy statistics and of each run's
//! configuration. The SVG is written by hand: a handful of primitives (axes with ticks, polylines,
//! rectangles, a legend) cover these plots, and no plotting crate renders text without font files.

use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::fmt::Write;

const W: f64 = 720.0;
const H: f64 = 300.0;
const ML: f64 = 70.0;
const MR: f64 = 150.0;
const MT: f64 = 30.0;
const MB: f64 = 45.0;
const COLORS: [&str; 8] =
    ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

/// HTML-escapes text.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A "nice" tick step for a range.
fn step(span: f64) -> f64 {
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let n = raw / mag;
    mag * if n < 1.5 {
        1.0
    } else if n < 3.5 {
        2.0
    } else if n < 7.5 {
        5.0
    } else {
        10.0
    }
}

/// A tick label for a tick at `v` on an axis stepped by `st` (from [`step`]: 1, 2 or 5 times a power
/// of ten): as many decimals as the step needs and no more ("0.5", "1.25" is never a tick, "0.002",
/// "2", "2500").
fn fmt_tick(v: f64, st: f64) -> String {
    let decimals = if st >= 1.0 { 0 } else { (-st.log10().floor()).clamp(0.0, 15.0) as usize };
    let s = format!("{v:.decimals$}");
    let s = if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s };
    if s == "-0" {
        "0".into()
    } else {
        s
    }
}

/// The ticks of an axis from `lo` to `hi` every `st`: each at a whole multiple of the step (not
/// accumulated, so no rounding drift), with its label.
fn ticks(lo: f64, hi: f64, st: f64) -> Vec<(f64, String)> {
    let first = (lo / st).ceil() as i64;
    (first..)
        .map(|k| k as f64 * st)
        .take_while(|&v| v <= hi + st * 1e-9)
        .map(|v| (v, fmt_tick(v, st)))
        .collect()
}

/// An SVG plot area with linear axes.
struct Plot {
    svg: String,
    /// Integer ticks on the y axis (CPU numbers).
    int_y: bool,
    /// Numeric ticks on the x axis.
    x_ticks: bool,
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    legend: usize,
}

impl Plot {
    fn new(title: &str, xlabel: &str, ylabel: &str, x: (f64, f64), y: (f64, f64)) -> Plot {
        Plot::build(title, xlabel, ylabel, x, y, false, true)
    }

    /// Like [`Plot::new`], with integer y ticks.
    fn new_int_y(title: &str, xlabel: &str, ylabel: &str, x: (f64, f64), y: (f64, f64)) -> Plot {
        Plot::build(title, xlabel, ylabel, x, y, true, true)
    }

    /// Like [`Plot::new`], without x ticks (the caller labels categories with [`Plot::category`]).
    fn new_categories(title: &str, xlabel: &str, ylabel: &str, x: (f64, f64), y: (f64, f64)) -> Plot {
        Plot::build(title, xlabel, ylabel, x, y, false, false)
    }

    fn build(
        title: &str,
        xlabel: &str,
        ylabel: &str,
        x: (f64, f64),
        y: (f64, f64),
        int_y: bool,
        x_ticks: bool,
    ) -> Plot {
        let x1 = if x.1 > x.0 { x.1 } else { x.0 + 1.0 };
        let y1 = if y.1 > y.0 { y.1 } else { y.0 + 1.0 };
        let mut svg = String::new();
        let _ = write!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" class="plot" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img"><title>{t}</title><text x="{cx}" y="18" text-anchor="middle" class="title">{t}</text>"#,
            t = esc(title),
            cx = ML + (W - ML - MR) / 2.0
        );
        let mut p = Plot { svg, int_y, x_ticks, x0: x.0, x1, y0: y.0, y1, legend: 0 };
        p.axes(xlabel, ylabel);
        p
    }

    /// A category label under the x axis at `x`.
    fn category(&mut self, x: f64, text: &str) {
        let _ = write!(
            self.svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            self.sx(x),
            H - MB + 16.0,
            esc(text)
        );
    }

    fn sx(&self, x: f64) -> f64 {
        ML + (x - self.x0) / (self.x1 - self.x0) * (W - ML - MR)
    }

    fn sy(&self, y: f64) -> f64 {
        H - MB - (y - self.y0) / (self.y1 - self.y0) * (H - MT - MB)
    }

    fn axes(&mut self, xlabel: &str, ylabel: &str) {
        let (bx, by) = (ML, H - MB);
        let _ = write!(
            self.svg,
            r#"<line x1="{bx}" y1="{by}" x2="{x2}" y2="{by}" class="axis"/><line x1="{bx}" y1="{by}" x2="{bx}" y2="{MT}" class="axis"/>"#,
            x2 = W - MR
        );
        for (lo, hi, horizontal) in [(self.x0, self.x1, true), (self.y0, self.y1, false)] {
            let st = if !horizontal && self.int_y { step(hi - lo).max(1.0).round() } else { step(hi - lo) };
            if horizontal && !self.x_ticks {
                continue;
            }
            for (v, l) in ticks(lo, hi, st) {
                if horizontal {
                    let x = self.sx(v);
                    let _ = write!(
                        self.svg,
                        r#"<line x1="{x}" y1="{by}" x2="{x}" y2="{y2}" class="axis"/><text x="{x}" y="{ty}" text-anchor="middle">{l}</text>"#,
                        y2 = by + 4.0,
                        ty = by + 16.0,
                    );
                } else {
                    let y = self.sy(v);
                    let _ = write!(
                        self.svg,
                        r#"<line x1="{x1}" y1="{y}" x2="{bx}" y2="{y}" class="axis"/><line x1="{bx}" y1="{y}" x2="{x3}" y2="{y}" class="grid"/><text x="{tx}" y="{ty}" text-anchor="end">{l}</text>"#,
                        x1 = bx - 4.0,
                        x3 = W - MR,
                        tx = bx - 6.0,
                        ty = y + 4.0,
                    );
                }
            }
        }
        let _ = write!(
            self.svg,
            r#"<text x="{cx}" y="{ly}" text-anchor="middle">{xl}</text><text transform="translate(16,{cy}) rotate(-90)" text-anchor="middle">{yl}</text>"#,
            cx = ML + (W - ML - MR) / 2.0,
            ly = H - 8.0,
            cy = MT + (H - MT - MB) / 2.0,
            xl = esc(xlabel),
            yl = esc(ylabel)
        );
    }

    fn line(&mut self, pts: &[(f64, f64)], color: &str, label: &str) {
        let mut d = String::new();
        for (x, y) in pts {
            let _ = write!(d, "{:.1},{:.1} ", self.sx(*x), self.sy(*y));
        }
        let _ =
            write!(self.svg, r#"<polyline points="{d}" fill="none" stroke="{color}" stroke-width="1.5"/>"#);
        self.key(color, label);
    }

    fn key(&mut self, color: &str, label: &str) {
        if label.is_empty() || self.legend >= 16 {
            return;
        }
        let y = MT + 14.0 * self.legend as f64;
        let x = W - MR + 10.0;
        let _ = write!(
            self.svg,
            r#"<rect x="{x}" y="{ry}" width="10" height="10" fill="{color}"/><text x="{tx}" y="{ty}">{l}</text>"#,
            ry = y - 9.0,
            tx = x + 14.0,
            ty = y,
            l = esc(label)
        );
        self.legend += 1;
    }

    fn bar(&mut self, x: f64, w: f64, y: f64, color: &str) {
        let (a, b) = (self.sx(x), self.sx(x + w));
        let (top, base) = (self.sy(y.max(self.y0)), self.sy(self.y0.max(0.0).min(self.y1)));
        let (ytop, h) = if top < base { (top, base - top) } else { (base, top - base) };
        let _ = write!(
            self.svg,
            r#"<rect x="{a:.1}" y="{ytop:.1}" width="{:.1}" height="{h:.1}" fill="{color}"/>"#,
            b - a
        );
    }

    fn finish(mut self) -> String {
        self.svg.push_str("</svg>");
        self.svg
    }
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// Label of a run: its policy, and the seed when several runs share the policy.
fn label(r: &Value) -> String {
    format!("{} (seed {})", r["policy"].as_str().unwrap_or("?"), r["seed"])
}

fn heatmap(r: &Value) -> Option<String> {
    let s = r.get("series")?.as_object()?;
    let times: Vec<f64> = s["time_ns"].as_array()?.iter().map(|t| num(t) / 1e9).collect();
    let rows = s["nr_running"].as_array()?;
    if times.len() < 2 || rows.is_empty() {
        return None;
    }
    let max = rows.iter().flat_map(|r| r.as_array().into_iter().flatten()).map(num).fold(1.0, f64::max);
    let ncpu = rows.len() as f64;
    let mut p = Plot::new_int_y(
        &format!("Runnable tasks per CPU over time: {}", label(r)),
        "time [s]",
        "CPU (row c from c to c + 1)",
        (times[0], *times.last()?),
        (0.0, ncpu),
    );
    let dt = times[1] - times[0];
    for (c, row) in rows.iter().enumerate() {
        for (i, v) in row.as_array()?.iter().enumerate() {
            let v = num(v);
            if v == 0.0 {
                continue;
            }
            let shade = (255.0 - 215.0 * (v / max)).round() as u8;
            let (x, w) = (p.sx(times[i]), p.sx(times[i] + dt) - p.sx(times[i]));
            let (y, h) = (p.sy(c as f64 + 1.0), p.sy(c as f64) - p.sy(c as f64 + 1.0));
            let _ = write!(
                p.svg,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{:.2}" height="{h:.1}" fill="rgb(255,{shade},{shade})"/>"#,
                w.max(0.5)
            );
        }
    }
    p.key("rgb(255,40,40)", &format!("{max:.0} tasks"));
    p.key("rgb(255,148,148)", &format!("{:.0} tasks", max / 2.0));
    Some(p.finish())
}

fn cumulative(r: &Value) -> Option<String> {
    let s = r.get("series")?.as_object()?;
    let times: Vec<f64> = s["time_ns"].as_array()?.iter().map(|t| num(t) / 1e9).collect();
    let runs = s.get("task_run_ns")?.as_array()?;
    if times.len() < 2 || runs.is_empty() {
        return None;
    }
    let tasks = r["tasks"].as_array()?;
    let ymax = runs
        .iter()
        .flat_map(|r| r.as_array().into_iter().flatten())
        .map(|v| num(v) / 1e9)
        .fold(0.0, f64::max);
    let mut p = Plot::new(
        &format!("Cumulative run time per task: {}", label(r)),
        "time [s]",
        "run time [s]",
        (times[0], *times.last()?),
        (0.0, ymax),
    );
    for (i, row) in runs.iter().enumerate().take(24) {
        let vals = row.as_array()?;
        let off = times.len().saturating_sub(vals.len());
        let pts: Vec<(f64, f64)> =
            vals.iter().enumerate().map(|(j, v)| (times[off + j], num(v) / 1e9)).collect();
        let name = tasks.get(i).and_then(|t| t["name"].as_str()).unwrap_or("?");
        p.line(&pts, COLORS[i % COLORS.len()], name);
    }
    Some(p.finish())
}

/// Rate per second of a cumulative machine-wide counter in the series (`switches` or `migrations`),
/// one line per run: the increase between consecutive samples over the sample interval, drawn at the
/// end of that interval.
fn rate_over_time(runs: &[Value], key: &str, what: &str) -> Option<String> {
    let mut lines: Vec<(Vec<(f64, f64)>, String)> = Vec::new();
    for r in runs {
        let Some(s) = r.get("series").and_then(Value::as_object) else { continue };
        let (Some(t), Some(c)) = (s["time_ns"].as_array(), s.get(key).and_then(Value::as_array)) else {
            continue;
        };
        let pts: Vec<(f64, f64)> = t
            .windows(2)
            .zip(c.windows(2))
            .map(|(t, c)| {
                let dt = (num(&t[1]) - num(&t[0])) / 1e9;
                (num(&t[1]) / 1e9, if dt > 0.0 { (num(&c[1]) - num(&c[0])) / dt } else { 0.0 })
            })
            .collect();
        if !pts.is_empty() {
            lines.push((pts, label(r)));
        }
    }
    if lines.is_empty() {
        return None;
    }
    let all = lines.iter().flat_map(|(p, _)| p.iter());
    let (x0, x1, ymax) =
        all.fold((f64::MAX, f64::MIN, 0.0f64), |(a, b, m), &(x, y)| (a.min(x), b.max(x), m.max(y)));
    let mut p = Plot::new(
        &format!("{what} per second over time"),
        "time [s]",
        &format!("{} / s", what.to_lowercase()),
        (x0, x1.max(x0 + 1e-9)),
        (0.0, ymax.max(1.0)),
    );
    for (i, (pts, name)) in lines.iter().enumerate() {
        p.line(pts, COLORS[i % COLORS.len()], name);
    }
    Some(p.finish())
}

fn latency(runs: &[Value]) -> String {
    let keys = [("p50_ns", 0.5), ("p90_ns", 0.9), ("p99_ns", 0.99), ("p999_ns", 0.999), ("max_ns", 1.0)];
    let xmax = runs
        .iter()
        .map(|r| num(&r["summary"]["wakeup_latency"]["max_ns"]) / 1e3)
        .fold(1.0, f64::max)
        .log10()
        .ceil();
    let mut p = Plot::new(
        "Wakeup latency (CDF through the percentiles)",
        "latency [log10 us]",
        "fraction of wakeups",
        (0.0, xmax.max(1.0)),
        (0.0, 1.0),
    );
    for (i, r) in runs.iter().enumerate() {
        let l = &r["summary"]["wakeup_latency"];
        let mut pts = vec![(0.0, 0.0)];
        for (k, q) in keys {
            let x = (num(&l[k]) / 1e3).max(1.0).log10();
            pts.push((x, pts.last().map_or(0.0, |p: &(f64, f64)| p.1)));
            pts.push((x, q));
        }
        p.line(&pts, COLORS[i % COLORS.len()], &label(r));
    }
    p.finish()
}

fn elapsed(runs: &[Value]) -> Option<String> {
    let per: Vec<Vec<f64>> = runs
        .iter()
        .map(|r| {
            let mut v: Vec<f64> = r["tasks"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| Some((num(t.get("exited_ns")?) - num(t.get("started_ns")?)) / 1e9))
                .filter(|v| *v > 0.0)
                .collect();
            v.sort_by(|a, b| a.total_cmp(b));
            v
        })
        .collect();
    let n = per.iter().map(Vec::len).max()?;
    if n == 0 {
        return None;
    }
    let ymax = per.iter().flatten().copied().fold(0.0, f64::max);
    let mut p =
        Plot::new("Per-task elapsed time, sorted", "task rank", "elapsed [s]", (0.0, n as f64), (0.0, ymax));
    for (i, (v, r)) in per.iter().zip(runs).enumerate() {
        let pts: Vec<(f64, f64)> = v.iter().enumerate().map(|(j, y)| (j as f64 + 0.5, *y)).collect();
        p.line(&pts, COLORS[i % COLORS.len()], &label(r));
    }
    Some(p.finish())
}

fn bars(runs: &[Value]) -> String {
    type Read = fn(&Value) -> f64;
    let metrics: [(&str, Read); 5] = [
        ("work/s", |r| num(&r["summary"]["work_per_sec"])),
        ("p99 latency", |r| num(&r["summary"]["wakeup_latency"]["p99_ns"])),
        ("switches/s", |r| num(&r["summary"]["switches_per_sec"])),
        ("migrations/s", |r| num(&r["summary"]["migrations_per_sec"])),
        ("unfairness", |r| num(&r["summary"]["fairness"]["unfairness_ns"])),
    ];
    let rel: Vec<Vec<f64>> = metrics
        .iter()
        .map(|(_, f)| {
            let base = f(&runs[0]);
            runs.iter().map(|r| if base == 0.0 { 0.0 } else { (f(r) - base) * 100.0 / base.abs() }).collect()
        })
        .collect();
    let lo = rel.iter().flatten().copied().fold(-10.0, f64::min);
    let hi = rel.iter().flatten().copied().fold(10.0, f64::max);
    let mut p = Plot::new_categories(
        &format!("Key metrics against {} [%]", label(&runs[0])),
        "metric",
        "difference [%]",
        (0.0, metrics.len() as f64),
        (lo, hi),
    );
    for (m, (name, _)) in metrics.iter().enumerate() {
        p.category(m as f64 + 0.5, name);
    }
    let w = 0.8 / runs.len() as f64;
    for (m, vals) in rel.iter().enumerate() {
        for (i, v) in vals.iter().enumerate() {
            p.bar(m as f64 + 0.1 + i as f64 * w, w * 0.9, *v, COLORS[i % COLORS.len()]);
        }
    }
    for (i, r) in runs.iter().enumerate() {
        p.key(COLORS[i % COLORS.len()], &label(r));
    }
    p.finish()
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

/// The report page for `runs` (parsed `schedlab.run/1` reports; the first is the baseline).
pub fn html(runs: &[Value]) -> Result<String> {
    if runs.is_empty() {
        bail!("no results given");
    }
    let intro = format!("<p>{} run(s); the first is the baseline of the bar chart.</p>\n", runs.len());
    Ok(page("schedlab report", &(intro + &body(runs))))
}

/// The plots and tables of a set of runs (the first is the baseline), as an HTML fragment.
pub fn body(runs: &[Value]) -> String {
    let mut plots: Vec<String> = Vec::new();
    for r in runs {
        plots.extend(heatmap(r));
        plots.extend(cumulative(r));
    }
    plots.extend(rate_over_time(runs, "switches", "Context switches"));
    plots.extend(rate_over_time(runs, "migrations", "Migrations"));
    // The exact CDF from the runs' whole distributions where they carry them (Vega-Lite); the
    // percentile staircase for reports written before distributions existed.
    match crate::report_vega::latency_cdf(runs, label) {
        Some(spec) => plots.push(crate::report_vega::figure("fig-latency", &spec)),
        None => plots.push(latency(runs)),
    }
    plots.extend(
        crate::report_vega::run_length_cdf(runs, label).map(|s| crate::report_vega::figure("fig-runs", &s)),
    );
    plots.extend(elapsed(runs));
    plots.push(bars(runs));
    let mut out = String::from("<h2>Plots</h2>\n");
    for p in &plots {
        out.push_str(p);
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
        "<style>\
body{font-family:sans-serif;margin:24px;max-width:1100px;color:#222}\
svg.plot{display:block;margin:16px 0;background:#fff;border:1px solid #ddd}\
svg text{font-size:12px;fill:#222}svg text.title{font-size:14px;font-weight:bold}\
line.axis{stroke:#444}line.grid{stroke:#eee}\
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}\
td.holds{background:#e6f4e6}td.fails{background:#fbe3e3}\
div.vl-figure{margin:16px 0}\
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_text_is_escaped() {
        assert_eq!(step(10.0), 2.0);
        assert_eq!(step(1.0), 0.2);
        assert_eq!(step(1000.0), 200.0);
        let labels: Vec<String> =
            [(0.5, 0.5), (1.2, 0.2), (2.0, 1.0), (0.05, 0.05), (2500.0, 500.0), (-1.5, 0.5)]
                .map(|(v, st)| fmt_tick(v, st))
                .to_vec();
        assert_eq!(labels, ["0.5", "1.2", "2", "0.05", "2500", "-1.5"]);
        assert_eq!(esc("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }

    #[test]
    fn ticks_of_a_few_milliseconds_in_seconds_are_told_apart() {
        // Cumulative run times of 0-4.3 ms plotted in seconds: a step of 1 ms, labelled with three
        // decimals (two decimals labelled every tick "0").
        let st = step(0.0043);
        assert_eq!(st, 0.001);
        let labels: Vec<String> = ticks(0.0, 0.0043, st).into_iter().map(|(_, l)| l).collect();
        assert_eq!(labels, ["0", "0.001", "0.002", "0.003", "0.004"]);
        // A step of 0.2 from -0.4: no drift ("0.6000000001"), no "-0".
        let labels: Vec<String> = ticks(-0.4, 1.0, 0.2).into_iter().map(|(_, l)| l).collect();
        assert_eq!(labels, ["-0.4", "-0.2", "0", "0.2", "0.4", "0.6", "0.8", "1"]);
    }
}
