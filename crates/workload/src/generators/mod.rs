//! Built-in workload generators: the seed papers' benchmarks (and the tools Linux scheduler
//! developers use) as parameterised programs over the workload model.
//!
//! Each generator is usable by name with parameters, `hackbench[groups=10,fds=20,loops=100]`, from the
//! CLI and from TOML (`schedlab workload show <spec>` prints the expanded TOML to copy and edit). Each
//! documents the real benchmark behaviour it models, what it simplifies, and which metric is the
//! benchmark's own score. Parameter names and defaults are the real benchmark's options where it has
//! them; durations carry units (`msg_cost=2us`).

mod batch;
mod latency;
mod messaging;
mod parallel;
mod parsec;
mod servers;
pub mod sources;
mod sysbench;

use crate::model::Workload;
use schedlab_core::Ns;
use std::cell::RefCell;

thread_local! {
    /// The chosen defaults read while [`record_chosen_defaults`] runs on this thread.
    static CHOSEN_READ: RefCell<Option<Vec<(&'static str, &'static str)>>> = const { RefCell::new(None) };
}

/// Runs `f` and returns with its result every `(generator, parameter)` that a generator built inside
/// it read at a default with no source ([`sources::Source::Chosen`]), once each, in the order first
/// read. Builds nested in `f` (a workload file's includes) count too.
pub fn record_chosen_defaults<T>(f: impl FnOnce() -> T) -> (T, Vec<(&'static str, &'static str)>) {
    let outer = CHOSEN_READ.with(|c| c.replace(Some(Vec::new())));
    let out = f();
    let read = CHOSEN_READ.with(|c| c.replace(outer)).unwrap_or_default();
    CHOSEN_READ.with(|c| {
        if let Some(outer) = c.borrow_mut().as_mut() {
            for r in &read {
                if !outer.contains(r) {
                    outer.push(*r);
                }
            }
        }
    });
    (out, read)
}

/// One documented parameter: key, default (as text), what it means.
pub type ParamDoc = (&'static str, &'static str, &'static str);

/// A built-in workload generator.
pub struct Generator {
    /// Name used in specs.
    pub name: &'static str,
    /// One line: what it is.
    pub summary: &'static str,
    /// Which real benchmark behaviour it models.
    pub models: &'static str,
    /// What it leaves out or approximates.
    pub simplifies: &'static str,
    /// The benchmark's own score and where to read it in a report.
    pub score: &'static str,
    /// Parameters.
    pub params: &'static [ParamDoc],
    build: fn(&Args) -> Result<Workload, String>,
}

/// Parameter values of one generator call: given values over documented defaults, typed on access.
pub struct Args {
    generator: &'static str,
    params: &'static [ParamDoc],
    given: Vec<(String, String)>,
}

impl Args {
    fn raw(&self, key: &str) -> &str {
        if let Some((_, v)) = self.given.iter().find(|(k, _)| k == key) {
            return v.as_str();
        }
        let doc = self.params.iter().find(|p| p.0 == key);
        let Some(&(name, default, _)) = doc else {
            panic!("generator `{}` reads undocumented parameter `{key}`", self.generator)
        };
        if matches!(sources::source_of(self.generator, name), Some(sources::Source::Chosen(_))) {
            CHOSEN_READ.with(|c| {
                if let Some(read) = c.borrow_mut().as_mut() {
                    if !read.contains(&(self.generator, name)) {
                        read.push((self.generator, name));
                    }
                }
            });
        }
        default
    }

    fn bad(&self, key: &str, msg: String) -> String {
        format!("workload `{}`: `{key}={}`: {msg}", self.generator, self.raw(key))
    }

    /// A whole number in `range`.
    pub fn u64(&self, key: &str, range: std::ops::RangeInclusive<u64>) -> Result<u64, String> {
        let v: u64 = self.raw(key).parse().map_err(|_| self.bad(key, "expected a whole number".into()))?;
        if !range.contains(&v) {
            return Err(self.bad(key, format!("outside {}..={}", range.start(), range.end())));
        }
        Ok(v)
    }

    /// A whole number in `range`, as u32.
    pub fn u32(&self, key: &str, range: std::ops::RangeInclusive<u32>) -> Result<u32, String> {
        self.u64(key, *range.start() as u64..=*range.end() as u64).map(|v| v as u32)
    }

    /// A signed whole number in `range`.
    pub fn i64(&self, key: &str, range: std::ops::RangeInclusive<i64>) -> Result<i64, String> {
        let v: i64 = self.raw(key).parse().map_err(|_| self.bad(key, "expected a whole number".into()))?;
        if !range.contains(&v) {
            return Err(self.bad(key, format!("outside {}..={}", range.start(), range.end())));
        }
        Ok(v)
    }

    /// A duration with a unit.
    pub fn dur(&self, key: &str) -> Result<Ns, String> {
        crate::parse_duration(self.raw(key)).map_err(|m| self.bad(key, m))
    }

    /// `true` or `false`.
    pub fn bool(&self, key: &str) -> Result<bool, String> {
        match self.raw(key) {
            "true" | "1" => Ok(true),
            "false" | "0" => Ok(false),
            _ => Err(self.bad(key, "expected true or false".into())),
        }
    }

    /// Whether the spec (or an override) set `key`, rather than leaving its default.
    pub fn given(&self, key: &str) -> bool {
        self.given.iter().any(|(k, _)| k == key)
    }

    /// One of `choices`.
    pub fn choice(&self, key: &str, choices: &[&'static str]) -> Result<&'static str, String> {
        let v = self.raw(key);
        choices
            .iter()
            .copied()
            .find(|c| *c == v)
            .ok_or_else(|| self.bad(key, format!("expected one of {}", choices.join(", "))))
    }
}

/// Every generator, in the order `schedlab workloads` lists them.
pub fn generators() -> Vec<Generator> {
    let mut v = Vec::new();
    v.extend(batch::generators());
    v.extend(messaging::generators());
    v.extend(sysbench::generators());
    v.extend(latency::generators());
    v.extend(servers::generators());
    v.extend(parallel::generators());
    v.extend(parsec::generators());
    v
}

/// A generator parameter set from outside the spec, as a sensitivity run sets a free parameter: every
/// call of `generator` builds with `param = value`, whatever its spec gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamOverride {
    /// The generator's name (`hackbench`).
    pub generator: String,
    /// One of its parameters (`msg_cost`).
    pub param: String,
    /// The value, as a spec would write it (`4us`).
    pub value: String,
}

impl ParamOverride {
    /// Whether `generator` documents `param` (an override of anything else is an error).
    pub fn known(generator: &str, param: &str) -> Result<(), String> {
        let Some(g) = generators().into_iter().find(|g| g.name == generator) else {
            let names: Vec<_> = generators().iter().map(|g| g.name).collect();
            return Err(format!("no workload generator `{generator}` (there are: {})", names.join(", ")));
        };
        if !g.params.iter().any(|p| p.0 == param) {
            let known: Vec<_> = g.params.iter().map(|p| p.0).collect();
            return Err(format!(
                "workload `{generator}` has no parameter `{param}` (it has: {})",
                known.join(", ")
            ));
        }
        Ok(())
    }
}

/// Builds a generator's workload from a spec such as `hackbench[groups=4]`. `Ok(None)` if the name is
/// not a generator (it may be a file).
pub fn builtin(spec: &str) -> Result<Option<Workload>, String> {
    builtin_with(spec, &[])
}

/// [`builtin`], with `overrides` replacing (or adding) the parameters they name for their generator.
pub fn builtin_with(spec: &str, overrides: &[ParamOverride]) -> Result<Option<Workload>, String> {
    // Not a generator name: perhaps a file (the caller decides).
    let head = spec.trim().split('[').next().unwrap_or("");
    if !generators().iter().any(|g| g.name == head) {
        return Ok(None);
    }
    let (name, given) =
        schedlab_core::spec::split_spec(spec).map_err(|m| format!("workload `{spec}`: {m}"))?;
    let name = name.as_str();
    let Some(g) = generators().into_iter().find(|g| g.name == name) else { return Ok(None) };
    let mut given = given;
    for o in overrides.iter().filter(|o| o.generator == name) {
        given.retain(|(k, _)| *k != o.param);
        given.push((o.param.clone(), o.value.clone()));
    }
    for (k, _) in &given {
        if !g.params.iter().any(|p| p.0 == k) {
            let known: Vec<_> = g.params.iter().map(|p| p.0).collect();
            return Err(format!("workload `{name}` has no parameter `{k}` (it has: {})", known.join(", ")));
        }
    }
    let args = Args { generator: g.name, params: g.params, given };
    let w = (g.build)(&args)?;
    w.validate().map_err(|m| format!("workload `{name}` built an invalid workload: {m}"))?;
    Ok(Some(w))
}

/// A deterministic pseudo-random sequence for generators that need "random" choices fixed at build
/// time (a 64-bit LCG, Knuth's MMIX constants).
pub(crate) struct Lcg(u64);

impl Lcg {
    pub(crate) fn new(seed: u64) -> Lcg {
        Lcg(seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407))
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_generator_builds_with_defaults_and_has_docs() {
        let mut names = std::collections::HashSet::new();
        for g in generators() {
            assert!(names.insert(g.name), "duplicate generator {}", g.name);
            assert!(
                !g.summary.is_empty()
                    && !g.models.is_empty()
                    && !g.simplifies.is_empty()
                    && !g.score.is_empty(),
                "{}",
                g.name
            );
            let w = builtin(g.name).unwrap_or_else(|e| panic!("{}: {e}", g.name)).unwrap();
            assert!(!w.tasks.is_empty(), "{}", g.name);
            let mut seen = std::collections::HashSet::new();
            assert!(
                w.tasks.iter().all(|t| seen.insert(t.name.clone())),
                "{}: template names must be unique",
                g.name
            );
        }
    }

    #[test]
    fn builds_record_the_defaults_they_read_that_have_no_source() {
        let (w, read) = record_chosen_defaults(|| builtin("hackbench[groups=1,loops=1]"));
        assert!(w.unwrap().is_some());
        assert_eq!(read, [("hackbench", "msg_cost")]);
        // Given in the spec: the file's choice, not a default.
        let (_, read) = record_chosen_defaults(|| builtin("hackbench[groups=1,loops=1,msg_cost=1us]"));
        assert!(read.is_empty(), "{read:?}");
        // cyclictest's interval and distance are cyclictest's own defaults (cited).
        let (_, read) = record_chosen_defaults(|| builtin("cyclictest"));
        assert!(read.is_empty(), "{read:?}");
        // Nested recordings add to the outer one; outside a recording nothing is kept.
        let ((_, inner), outer) = record_chosen_defaults(|| {
            let _ = builtin("editor");
            record_chosen_defaults(|| builtin("apache-ab"))
        });
        assert_eq!(
            inner,
            [("apache-ab", "request_cost"), ("apache-ab", "request_stddev"), ("apache-ab", "ab_cost")]
        );
        assert_eq!(outer.len(), 6, "editor's three and apache-ab's three: {outer:?}");
        assert!(builtin("apache-ab").is_ok() && CHOSEN_READ.with(|c| c.borrow().is_none()));
    }

    #[test]
    fn bad_parameters_are_named() {
        assert!(builtin("hogs[m=3]").unwrap_err().contains("no parameter `m`"));
        assert!(builtin("hogs[n=x]").unwrap_err().contains("`n=x`: expected a whole number"));
        assert!(builtin("hogs[n=0]").unwrap_err().contains("outside"));
        assert!(builtin("hackbench[msg_cost=3]").unwrap_err().contains("needs a unit"));
        assert!(builtin("nope").unwrap().is_none());
        assert!(builtin("hogs[n=2").unwrap_err().contains("missing closing"));
    }
}
