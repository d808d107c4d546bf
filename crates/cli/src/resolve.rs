//! Resolving what a user names: machines, workloads, policies, durations and governors, with the
//! error messages every front end (the `schedlab` command, the Python package) shows.

use anyhow::{bail, Context, Result};
use schedlab_core::Ns;
use schedlab_sim::Machine;
use schedlab_workload::{generators, parse_duration, parse_toml_overriding, Workload};
use std::path::Path;

/// A machine preset or machine file, with the timer frequency and governor overridden if given.
pub fn load_machine(spec: &str, hz: Option<u32>, governor: Option<&str>) -> Result<Machine> {
    let mut machine = Machine::load(spec)?;
    if let Some(hz) = hz {
        if ![100, 250, 300, 1000].contains(&hz) {
            bail!("--hz {hz}: expected 100, 250, 300 or 1000");
        }
        machine.hz = hz;
    }
    set_governor(&mut machine, governor)?;
    Ok(machine)
}

/// A workload from a built-in spec (`hackbench[groups=2]`), a workload TOML file or an rt-app JSON file
/// (its warnings go to standard error).
pub fn load_workload(spec: &str) -> Result<Workload> {
    load_workload_with(spec, &[])
}

/// [`load_workload`], every generator it builds (named, or included by a workload file) built with
/// `overrides`. An rt-app file has no generators and is read as it is.
pub fn load_workload_with(spec: &str, overrides: &[generators::ParamOverride]) -> Result<Workload> {
    if let Some(w) = generators::builtin_with(spec, overrides).map_err(anyhow::Error::msg)? {
        return Ok(w);
    }
    let path = Path::new(spec);
    if !path.exists() {
        let names: Vec<_> = generators::generators().iter().map(|g| g.name).collect();
        bail!("workload `{spec}` is neither a built-in ({}) nor an existing file", names.join(", "));
    }
    let src = std::fs::read_to_string(path).with_context(|| format!("cannot read workload file {spec}"))?;
    if path.extension().is_some_and(|e| e == "json") {
        // An rt-app file: report what could not be modelled, then run the rest.
        let imported = schedlab_workload::rtapp::import(spec, &src)?;
        if imported.workload.tasks.is_empty() {
            // rt-app refuses a file without tasks ("No tasks section"); a fragment is not a workload.
            bail!("{spec}:1:1: key `tasks`: no tasks: an rt-app file needs at least one task to run");
        }
        for w in &imported.warnings {
            eprintln!("warning: {w}");
        }
        return Ok(imported.workload);
    }
    Ok(parse_toml_overriding(spec, &src, &Default::default(), overrides)?)
}

/// A policy from a spec (`cfs[sched_latency_ns=6000000]`) or a policy TOML file (`name` and `[params]`).
pub fn load_policy(spec: &str) -> Result<Box<dyn schedlab_core::SchedPolicy>> {
    let path = Path::new(spec);
    if spec.ends_with(".toml") && path.exists() {
        // name = "cfs"
        // [params]
        // sched_latency_ns = 6000000
        let src = std::fs::read_to_string(path).with_context(|| format!("cannot read policy file {spec}"))?;
        let doc: toml::Table =
            toml::from_str(&src).map_err(|e| anyhow::anyhow!("{spec}: {}", e.message()))?;
        let name = doc.get("name").and_then(|v| v.as_str()).ok_or_else(|| {
            anyhow::anyhow!("{spec}: key `name`: a policy file needs `name = \"<policy>\"`")
        })?;
        if let Some(k) = doc.keys().find(|k| *k != "name" && *k != "params") {
            bail!("{spec}: key `{k}`: a policy file has only `name` and a `[params]` table");
        }
        let mut pairs = Vec::new();
        if let Some(params) = doc.get("params") {
            let t =
                params.as_table().ok_or_else(|| anyhow::anyhow!("{spec}: key `params` must be a table"))?;
            for (k, v) in t {
                let text = match v {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Integer(i) => i.to_string(),
                    toml::Value::Boolean(b) => b.to_string(),
                    _ => bail!("{spec}: key `params.{k}`: expected a number, boolean or string"),
                };
                pairs.push((k.clone(), text));
            }
        }
        return schedlab_policies::registry::create_with(name, &pairs)
            .map_err(|e| anyhow::anyhow!("{spec}: {e}"));
    }
    Ok(schedlab_policies::create(spec)?)
}

/// `--duration` if given, else the workload's own duration, else 10 s; never zero.
pub fn run_duration(arg: Option<&str>, workload: &Workload) -> Result<Ns> {
    let d = match arg {
        Some(d) => parse_duration(d).map_err(|e| anyhow::anyhow!("--duration: {e}"))?,
        None => workload.duration_ns.unwrap_or(10_000_000_000),
    };
    if d == 0 {
        bail!("--duration must be above zero");
    }
    Ok(d)
}

/// Sets the machine's frequency governor by name, if one is given.
pub fn set_governor(machine: &mut Machine, governor: Option<&str>) -> Result<()> {
    if let Some(g) = governor {
        machine.dvfs.governor = g.parse().map_err(|e: String| anyhow::anyhow!("--governor: {e}"))?;
        if machine.dvfs.levels_mhz.is_empty() && machine.dvfs.governor != schedlab_sim::Governor::Performance
        {
            bail!(
                "--governor {g}: machine `{}` has no frequency levels (set [dvfs] levels_mhz)",
                machine.name
            );
        }
    }
    Ok(())
}

/// Splits `a,b[x=1,y=2],c` at the commas outside brackets.
pub fn split_specs(list: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut depth, mut cur) = (0i32, String::new());
    for ch in list.chars() {
        match ch {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur).trim().to_string());
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    out.push(cur.trim().to_string());
    out.into_iter().filter(|s| !s.is_empty()).collect()
}
