//! Figures of `schedlab report` drawn by Vega-Lite (issue 33): each figure is a Vega-Lite
//! specification written into the page as JSON, rendered in the browser by the Vega libraries inlined
//! into the page (`assets/vega.js`, Vega 6 / Vega-Lite 6 / vega-embed 7 as bundled by vl-convert;
//! `scripts/vendor-vega` regenerates it, licences in `assets/VEGA-LICENSES.md`).
//!
//! Why Vega-Lite: a maintained grammar of interactive graphics whose specifications are plain JSON,
//! so the same figure is made here, drawn with zoom, pan and tooltips in the page, exported as SVG or
//! PNG from the page's own menu (vega-embed's actions), and rendered to static images from Python
//! (vl-convert) without a browser. A page that holds a figure carries a Content-Security-Policy that
//! forbids every fetch, so a page that renders is a page that is self-contained.

use serde_json::{json, Value};

/// The bundled Vega libraries (about 0.9 MB).
const VEGA_JS: &str = include_str!("../assets/vega.js");

/// Renders every figure of the page, and records on `<body>` what happened for a test or a curious
/// reader: `data-vega-figures` (figures in the page), `data-vega-rendered` (drawn so far),
/// `data-vega-inked` (per figure, `id=WxH:n`: the size of its image and how many of its pixels are
/// not background, as a screenshot of it would show), `data-vega-done` (all settled) and
/// `data-vega-errors` (script errors, unhandled rejections, console errors, blocked fetches,
/// failed figures, joined by ` | `).
const RUNTIME_JS: &str = r##"(function () {
  var errors = [];
  function note(m) { errors.push(String(m)); document.body.dataset.vegaErrors = errors.join(" | "); }
  window.addEventListener("error", function (e) { note(e.message); });
  window.addEventListener("unhandledrejection", function (e) { note("unhandled: " + e.reason); });
  document.addEventListener("securitypolicyviolation", function (e) { note("blocked " + e.violatedDirective + " " + e.blockedURI); });
  var consoleError = console.error;
  console.error = function () { note("console: " + Array.prototype.join.call(arguments, " ")); consoleError.apply(console, arguments); };
  var specs = Array.prototype.slice.call(document.querySelectorAll("script.vl-spec"));
  var rendered = 0, inked = [];
  document.body.dataset.vegaFigures = String(specs.length);
  // Pixels of a drawn figure that are not background: what a screenshot of it would show.
  function ink(view) {
    return view.toCanvas(1).then(function (canvas) {
      var px = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data, n = 0;
      for (var i = 0; i < px.length; i += 4) { if (px[i + 3] > 0 && (px[i] < 235 || px[i + 1] < 235 || px[i + 2] < 235)) n += 1; }
      return canvas.width + "x" + canvas.height + ":" + n;
    });
  }
  Promise.all(specs.map(function (s) {
    var spec = JSON.parse(s.textContent);
    // The page's full width: the plot area takes what the legend and labels leave.
    var room = document.getElementById(s.dataset.target).clientWidth;
    var unit = spec.spec || spec;
    if (typeof unit.width === "number" && room > 0) { unit.width = Math.max(360, room - (spec.spec ? 300 : 260)); }
    var options = { mode: "vega-lite", renderer: s.dataset.renderer || "svg", actions: { export: true, source: false, compiled: false, editor: false } };
    return vegaEmbed("#" + s.dataset.target, spec, options)
      .then(function (result) { rendered += 1; document.body.dataset.vegaRendered = String(rendered); return ink(result.view); })
      .then(function (seen) { inked.push(s.dataset.target + "=" + seen); document.body.dataset.vegaInked = inked.sort().join(" "); })
      .catch(function (e) { note(s.dataset.target + ": " + e); });
  })).then(function () { document.body.dataset.vegaDone = "yes"; });
})();"##;

/// The policy a page with figures declares: nothing may be fetched (no network, no file), inline
/// scripts and styles run (Vega compiles its expressions, hence `unsafe-eval`), images only from
/// data the page made itself (the export menu).
pub const CSP: &str = "default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; \
style-src 'unsafe-inline'; img-src data: blob:";

/// A figure: a placeholder the runtime draws `spec` into as SVG, and the specification as JSON
/// (with `</` escaped so no string in it can close the script element). The plot takes the page's
/// width.
pub fn figure(id: &str, spec: &Value) -> String {
    figure_on(id, spec, "svg")
}

/// A figure drawn by `renderer`: `svg`, or `canvas` for figures of many thousand marks (the
/// export menu still writes SVG).
pub fn figure_on(id: &str, spec: &Value, renderer: &str) -> String {
    let json = spec.to_string().replace("</", "<\\/");
    format!(
        "<div class=\"vl-figure\" id=\"{id}\"></div>\n\
         <script type=\"application/json\" class=\"vl-spec\" data-target=\"{id}\" data-renderer=\"{renderer}\">{json}</script>"
    )
}

/// Whether an HTML fragment holds a figure (and so needs [`scripts`] and [`CSP`]).
pub fn has_figures(html: &str) -> bool {
    html.contains("class=\"vl-figure\"")
}

/// The scripts that draw the figures: the Vega libraries, then the runtime. Put at the page's end.
pub fn scripts() -> String {
    format!("<script>{VEGA_JS}</script>\n<script>{RUNTIME_JS}</script>\n")
}

/// What a distribution figure shows: the report's key under `distributions`, and the words.
struct Cdf {
    key: &'static str,
    title: &'static str,
    subtitle: &'static str,
    x_title: &'static str,
    y_title: &'static str,
    count: &'static str,
}

/// The exact wakeup-latency CDF of each run from its whole distribution (`distributions`, the
/// histogram buckets), on a log axis, overlaid per run; `None` when no run carries a distribution
/// (reports written before it existed). Each bucket gives a point at its upper end: the fraction of
/// wakeups below it.
pub fn latency_cdf(runs: &[Value], label: impl Fn(&Value) -> String) -> Option<Value> {
    cdf(
        runs,
        label,
        &Cdf {
            key: "wakeup_latency",
            title: "Wakeup latency: the whole distribution (CDF)",
            subtitle: "every wakeup of every task; drag to pan, scroll to zoom; the menu exports SVG or PNG",
            x_title: "wakeup latency [us] (log scale)",
            y_title: "fraction of wakeups at most this late",
            count: "wakeups",
        },
    )
}

/// The run lengths' CDF of each run (how long a task ran each time it had a CPU, from switch-in to
/// switch-out): the slices, preemptions and blocking a policy produced, overlaid per run; `None`
/// when no run has one (real runs, older reports).
pub fn run_length_cdf(runs: &[Value], label: impl Fn(&Value) -> String) -> Option<Value> {
    cdf(
        runs,
        label,
        &Cdf {
            key: "run_length",
            title: "Run lengths: how long a task ran each time it had a CPU (CDF)",
            subtitle: "from its switch-in to its switch-out, every task; drag to pan, scroll to zoom",
            x_title: "run length [us] (log scale)",
            y_title: "fraction of runs at most this long",
            count: "runs",
        },
    )
}

fn cdf(runs: &[Value], label: impl Fn(&Value) -> String, what: &Cdf) -> Option<Value> {
    let mut rows = Vec::new();
    for r in runs {
        let Some(buckets) = r["distributions"][what.key].as_array() else { continue };
        let total: f64 = buckets.iter().map(|b| b["count"].as_f64().unwrap_or(0.0)).sum();
        if total == 0.0 {
            continue;
        }
        let name = label(r);
        let first_us = buckets[0]["low_ns"].as_f64().unwrap_or(0.0).max(1.0) / 1e3;
        rows.push(json!({"run": name, "x_us": first_us, "fraction": 0.0, "count": 0}));
        let mut seen = 0.0;
        for b in buckets {
            seen += b["count"].as_f64().unwrap_or(0.0);
            let high = b["high_ns"].as_f64().unwrap_or(0.0).min(u64::MAX as f64 / 2.0);
            rows.push(json!({"run": name, "x_us": high / 1e3, "fraction": seen / total, "count": seen}));
        }
    }
    if rows.is_empty() {
        return None;
    }
    Some(json!({
        "title": {"text": what.title, "subtitle": what.subtitle},
        "width": 700,
        "height": 320,
        "data": {"values": rows},
        "mark": {"type": "line", "interpolate": "step-after", "clip": true},
        "encoding": {
            "x": {"field": "x_us", "type": "quantitative", "scale": {"type": "log"}, "title": what.x_title},
            "y": {"field": "fraction", "type": "quantitative", "scale": {"domain": [0, 1]}, "title": what.y_title},
            "color": {"field": "run", "type": "nominal", "title": "run", "legend": {"labelLimit": 400}},
            "tooltip": [
                {"field": "run", "type": "nominal"},
                {"field": "x_us", "type": "quantitative", "title": "[us]", "format": ",.1f"},
                {"field": "fraction", "type": "quantitative", "format": ".4f"},
                {"field": "count", "type": "quantitative", "title": what.count, "format": ","}
            ]
        },
        "params": [{"name": "zoom", "select": "interval", "bind": "scales"}]
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, buckets: Value) -> Value {
        json!({"policy": name, "distributions": {"wakeup_latency": buckets, "run_length": []}})
    }

    #[test]
    fn the_cdf_rises_bucket_by_bucket_to_one() {
        let r = run(
            "cfs",
            json!([{"low_ns": 5, "high_ns": 6, "count": 1}, {"low_ns": 992, "high_ns": 1008, "count": 3}]),
        );
        let spec = latency_cdf(&[r], |r| r["policy"].as_str().unwrap().to_string()).unwrap();
        let rows = spec["data"]["values"].as_array().unwrap();
        let pts: Vec<(f64, f64)> =
            rows.iter().map(|p| (p["x_us"].as_f64().unwrap(), p["fraction"].as_f64().unwrap())).collect();
        assert_eq!(pts, [(0.005, 0.0), (0.006, 0.25), (1.008, 1.0)]);
        assert_eq!(spec["encoding"]["x"]["scale"]["type"], "log");
        let lengths = run_length_cdf(&[run("cfs", json!([]))], |_| String::new());
        assert!(lengths.is_none(), "no runs recorded: no figure");
        assert!(
            latency_cdf(&[json!({"policy": "old"})], |_| String::new()).is_none(),
            "no distribution: no figure"
        );
    }

    #[test]
    fn a_figure_cannot_close_its_script_and_the_page_knows_it_has_one() {
        let f = figure("fig-1", &json!({"title": "</script><b>"}));
        assert!(!f.contains("</script><b>") && f.contains("<\\/script><b>"));
        assert!(has_figures(&f) && !has_figures("<svg class=\"plot\"></svg>"));
        assert!(!VEGA_JS.contains("</script"), "the bundle must not close its own script element");
        assert!(scripts().contains("window.vegaEmbed="));
    }
}
