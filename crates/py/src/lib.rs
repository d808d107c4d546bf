//! `schedlab._native`: the Rust engine behind the schedlab Python package (python/schedlab).
//!
//! Every function takes the inputs the command line takes and goes through the same code
//! ([`schedlab_cli::api`], [`schedlab_cli::resolve`]), so a run from Python and `schedlab run` with the
//! same arguments give the same report, and bad input fails with the message the command prints
//! (raised as `schedlab.SchedlabError`). Reports cross the boundary as their JSON text, which the
//! Python side turns into dictionaries and pandas DataFrames. Simulations run with the interpreter
//! released (`Python::detach`), so Python threads keep running meanwhile.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use schedlab_cli::api::{CompareRequest, RunRequest};
use schedlab_cli::sweep::{read_journal, Plan};
use serde_json::{json, Value};
use std::path::Path;

create_exception!(_native, SchedlabError, PyException, "An error schedlab reports about its input or a run.");

/// The message the command line prints after `error: `.
fn err(e: anyhow::Error) -> PyErr {
    SchedlabError::new_err(format!("{e:#}"))
}

/// Every registered policy with its parameters, as JSON.
#[pyfunction]
fn policies() -> String {
    let v: Vec<Value> = schedlab_policies::policies()
        .iter()
        .map(|p| {
            let params: Vec<Value> = (p.params)()
                .iter()
                .map(|i| json!({"key": i.key, "default": i.default, "help": i.help}))
                .collect();
            json!({"name": p.name, "summary": p.summary, "params": params})
        })
        .collect();
    Value::Array(v).to_string()
}

/// The machine presets, as JSON.
#[pyfunction]
fn machines() -> String {
    let v: Vec<Value> = schedlab_sim::machine::presets()
        .iter()
        .map(|(name, desc)| {
            let m = schedlab_sim::Machine::preset(name).expect("listed preset exists");
            json!({"name": name, "cpus": m.topology.nr_cpus(), "hz": m.hz, "description": desc})
        })
        .collect();
    Value::Array(v).to_string()
}

/// The built-in workload generators with their parameters, as JSON.
#[pyfunction]
fn workloads() -> String {
    let v: Vec<Value> = schedlab_workload::generators::generators()
        .iter()
        .map(|g| {
            let params: Vec<Value> = g
                .params
                .iter()
                .map(|(k, d, h)| {
                    let source =
                        schedlab_workload::generators::sources::source_of(g.name, k).map(|s| s.describe());
                    json!({"key": k, "default": d, "help": h, "source": source})
                })
                .collect();
            json!({"name": g.name, "summary": g.summary, "score": g.score, "params": params})
        })
        .collect();
    Value::Array(v).to_string()
}

/// A workload (built-in spec or file) as editable TOML, as `schedlab workload show`.
#[pyfunction]
fn workload_toml(spec: &str) -> PyResult<String> {
    let w = schedlab_cli::resolve::load_workload(spec).map_err(err)?;
    Ok(schedlab_workload::to_toml(&w))
}

/// One simulation, as `schedlab run --json`; returns the report's JSON text.
#[pyfunction]
#[pyo3(signature = (machine, policy, workload, duration=None, seed=1, hz=None, governor=None,
                    sample_interval="10ms".to_string(), sample_tasks=false, check=false))]
#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    machine: String,
    policy: String,
    workload: String,
    duration: Option<String>,
    seed: u64,
    hz: Option<u32>,
    governor: Option<String>,
    sample_interval: String,
    sample_tasks: bool,
    check: bool,
) -> PyResult<String> {
    let req = RunRequest {
        machine,
        policy,
        workload,
        duration,
        seed,
        hz,
        governor,
        sample_interval,
        sample_tasks,
        check,
        tick_phase: None,
    };
    py.detach(|| req.simulate().map(|r| r.to_json())).map_err(err)
}

/// Several policies on the identical machine, workload and seeds, as `schedlab compare --json`;
/// returns the comparison's JSON text and, per policy, its runs' reports.
#[pyfunction]
#[pyo3(signature = (policies, workload, machine, duration=None, seed=1, repeat=1, baseline=None, governor=None))]
#[allow(clippy::too_many_arguments)]
fn compare(
    py: Python<'_>,
    policies: Vec<String>,
    workload: String,
    machine: String,
    duration: Option<String>,
    seed: u64,
    repeat: u32,
    baseline: Option<String>,
    governor: Option<String>,
) -> PyResult<(String, String)> {
    let req = CompareRequest { machine, governor, workload, policies, baseline, duration, seed, repeat };
    py.detach(|| -> anyhow::Result<(String, String)> {
        let sim = req.simulate(&mut |_, _, _, _| {})?;
        let cmp = schedlab_cli::compare::compare(&sim.policies, sim.baseline, &sim.reports, &sim.seeds);
        Ok((
            serde_json::to_string(&cmp)?,
            Value::Array(sim.reports.into_iter().map(Value::Array).collect()).to_string(),
        ))
    })
    .map_err(err)
}

/// Run reports given as JSON texts, parsed.
fn parse_reports(reports: &[String]) -> PyResult<Vec<Value>> {
    reports
        .iter()
        .enumerate()
        .map(|(i, text)| {
            serde_json::from_str(text)
                .map_err(|e| SchedlabError::new_err(format!("report {i}: not JSON: {e}")))
        })
        .collect()
}

/// The HTML report of `schedlab report` from run reports given as JSON texts; returns the page.
#[pyfunction]
fn report_html(reports: Vec<String>) -> PyResult<String> {
    schedlab_cli::report_html::html(&parse_reports(&reports)?).map_err(err)
}

/// The figures of `schedlab report` for run reports given as JSON texts: a JSON list of
/// `{name, spec}`, each `spec` the page's Vega-Lite specification.
#[pyfunction]
fn report_figures(reports: Vec<String>) -> PyResult<String> {
    let runs = parse_reports(&reports)?;
    let list: Vec<Value> = schedlab_cli::report_html::figures(&runs)
        .into_iter()
        .map(|f| serde_json::json!({"name": f.name, "spec": f.spec}))
        .collect();
    Ok(Value::Array(list).to_string())
}

/// A sweep's grid file, checked (errors name the file, line and key): its name, its extra metric
/// names and every cell in grid order, as JSON.
#[pyfunction]
fn sweep_plan(grid: &str) -> PyResult<String> {
    let plan = Plan::read(Path::new(grid)).map_err(err)?;
    let g = &plan.grid;
    let cells: Vec<Value> = plan
        .cells
        .iter()
        .map(|c| {
            json!({"index": c.index, "machine": g.machines[c.machine], "workload": g.workloads[c.workload],
                   "policy": g.policies[c.policy], "seed": c.seed, "duration_ns": c.duration_ns})
        })
        .collect();
    let metrics: Vec<&String> = g.metrics.iter().map(|(n, _, _)| n).collect();
    Ok(json!({"name": g.name, "metrics": metrics, "cells": cells}).to_string())
}

/// Runs cell `index` of a grid; returns its journal row (one JSON line). A failed run is a row with
/// status `error`, not an exception. With `reports`, the full report goes to `reports/NNNN.json`.
#[pyfunction]
#[pyo3(signature = (grid, index, reports=None))]
fn sweep_cell(py: Python<'_>, grid: &str, index: usize, reports: Option<String>) -> PyResult<String> {
    let plan = Plan::read(Path::new(grid)).map_err(err)?;
    let cell = plan
        .cells
        .get(index)
        .ok_or_else(|| {
            SchedlabError::new_err(format!("{grid}: no run {index} (the grid has {})", plan.cells.len()))
        })?
        .clone();
    let row = py.detach(|| plan.run(&cell, reports.as_deref().map(Path::new)));
    Ok(serde_json::to_string(&row).expect("a row serialises"))
}

/// The rows of a sweep's journal (`out/rows.jsonl`) as JSON, a last line cut by an interruption
/// dropped from the file.
#[pyfunction]
fn sweep_journal(out: &str) -> PyResult<String> {
    let rows = read_journal(&Path::new(out).join("rows.jsonl")).map_err(err)?;
    Ok(serde_json::to_string(&rows).expect("rows serialise"))
}

/// Writes `results.csv` and `results.json` in `out` from its journal, as `schedlab sweep` does;
/// returns their paths. Fails if a run of the grid has no row yet.
#[pyfunction]
fn sweep_finish(grid: &str, out: &str) -> PyResult<(String, String)> {
    let plan = Plan::read(Path::new(grid)).map_err(err)?;
    let out = Path::new(out);
    let rows = plan.finished(read_journal(&out.join("rows.jsonl")).map_err(err)?);
    let (_, csv, json) = plan.write_results(out, rows).map_err(err)?;
    Ok((csv.display().to_string(), json.display().to_string()))
}

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The same policies as the `schedlab` command: the built-ins and those registered in its main().
    schedlab_example_lottery::register();
    m.add("SchedlabError", m.py().get_type::<SchedlabError>())?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(machines, m)?)?;
    m.add_function(wrap_pyfunction!(workloads, m)?)?;
    m.add_function(wrap_pyfunction!(workload_toml, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(compare, m)?)?;
    m.add_function(wrap_pyfunction!(report_html, m)?)?;
    m.add_function(wrap_pyfunction!(report_figures, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_plan, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_cell, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_journal, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_finish, m)?)?;
    Ok(())
}
