//! Built-in workloads usable by name (`--workload demo`, `--workload hogs[n=400]`).
//!
//! This is the minimal set the simulation core needs for its defaults and tests; the seed papers'
//! benchmark generators (hackbench, sysbench, ...) are a separate library.

use crate::builder::{ProgramBuilder, WorkloadBuilder};
use crate::model::Workload;
use schedlab_core::{NSEC_PER_MSEC, NSEC_PER_USEC};

/// Looks a parameter up by key (given value or default), as a whole number.
pub type ParamLookup<'a> = dyn Fn(&str) -> Result<u64, String> + 'a;

/// A built-in workload: name, one-line description, parameters `(key, default, help)`.
pub struct Builtin {
    /// Name.
    pub name: &'static str,
    /// What it models.
    pub summary: &'static str,
    /// Parameters: key, default, help.
    pub params: &'static [(&'static str, &'static str, &'static str)],
    build: fn(&ParamLookup) -> Result<Workload, String>,
}

/// Every built-in workload.
pub fn builtins() -> Vec<Builtin> {
    vec![
        Builtin {
            name: "demo",
            summary: "a mixed machine: CPU hogs at nice 0 and 5, interactive sleepers, pipe ping-pong pairs, threads contending on a mutex",
            params: &[("hogs", "8", "CPU-bound tasks at nice 0 (as many again at nice 5, halved)")],
            build: |get| {
                let hogs = get("hogs")?;
                let mut w = WorkloadBuilder::new("demo");
                let forever_compute = ProgramBuilder::new().forever(|p| p.compute(10 * NSEC_PER_MSEC)).build();
                w.task("hog", forever_compute.clone()).instances = hogs as u32;
                let niced = w.task("hog-nice5", forever_compute);
                niced.instances = (hogs / 2) as u32;
                niced.nice = 5;
                w.task(
                    "editor",
                    ProgramBuilder::new().forever(|p| p.sleep(20 * NSEC_PER_MSEC).compute(500 * NSEC_PER_USEC)).build(),
                )
                .instances = 4;
                for i in 0..2 {
                    let ab = w.pipe(format!("ping{i}"), 65536);
                    let ba = w.pipe(format!("pong{i}"), 65536);
                    w.task(format!("ping{i}"), ProgramBuilder::new().forever(|p| p.send(ab, 64).recv(ba, 64).compute(20 * NSEC_PER_USEC)).build());
                    w.task(format!("pong{i}"), ProgramBuilder::new().forever(|p| p.recv(ab, 64).compute(20 * NSEC_PER_USEC).send(ba, 64)).build());
                }
                let m = w.mutex("lock");
                let t = w.task(
                    "locker",
                    ProgramBuilder::new()
                        .forever(|p| p.compute(200 * NSEC_PER_USEC).lock(m).compute(50 * NSEC_PER_USEC).unlock(m).sleep(NSEC_PER_MSEC))
                        .build(),
                );
                t.instances = 4;
                t.threads = true;
                w.build()
            },
        },
        Builtin {
            name: "hogs",
            summary: "n CPU-bound tasks that never sleep",
            params: &[("n", "16", "number of tasks"), ("nice", "0", "nice level + 20 (0..39), so 20 = nice 0")],
            build: |get| {
                let n = get("n")?;
                if !(1..=100_000).contains(&n) {
                    return Err(format!("n = {n} is outside 1..=100000"));
                }
                let nice = get("nice")? as i64 - 20;
                let mut w = WorkloadBuilder::new(format!("hogs[n={n}]"));
                let t = w.task("hog", ProgramBuilder::new().forever(|p| p.compute(10 * NSEC_PER_MSEC)).build());
                t.instances = n as u32;
                t.nice = nice as i8;
                w.build()
            },
        },
    ]
}

/// Builds a built-in from a spec such as `hogs[n=400]`. `Ok(None)` if the name is not a built-in.
pub fn builtin(spec: &str) -> Result<Option<Workload>, String> {
    let (name, args) = match spec.find('[') {
        Some(i) => {
            let inner =
                spec[i + 1..].strip_suffix(']').ok_or_else(|| format!("`{spec}`: missing closing `]`"))?;
            (&spec[..i], inner)
        }
        None => (spec, ""),
    };
    let Some(b) = builtins().into_iter().find(|b| b.name == name) else { return Ok(None) };
    let mut given = Vec::new();
    for part in args.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').ok_or_else(|| format!("`{part}` is not key=value"))?;
        if !b.params.iter().any(|p| p.0 == k.trim()) {
            let known: Vec<_> = b.params.iter().map(|p| p.0).collect();
            return Err(format!(
                "workload `{name}` has no parameter `{}` (it has: {})",
                k.trim(),
                known.join(", ")
            ));
        }
        given.push((k.trim().to_string(), v.trim().to_string()));
    }
    let get = |key: &str| -> Result<u64, String> {
        let raw = given
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .or_else(|| b.params.iter().find(|p| p.0 == key).map(|p| p.1))
            .ok_or_else(|| format!("no parameter `{key}`"))?;
        raw.parse().map_err(|_| format!("workload `{name}`: `{key}={raw}` is not a whole number"))
    };
    (b.build)(&get).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_build_and_reject_bad_params() {
        let w = builtin("hogs[n=400]").unwrap().unwrap();
        assert_eq!(w.initial_tasks(), 400);
        assert!(builtin("demo").unwrap().unwrap().initial_tasks() > 10);
        assert!(builtin("nope").unwrap().is_none());
        assert!(builtin("hogs[m=3]").unwrap_err().contains("no parameter `m`"));
        assert!(builtin("hogs[n=x]").unwrap_err().contains("not a whole number"));
        assert!(builtin("hogs[n=0]").unwrap_err().contains("outside"));
    }
}
