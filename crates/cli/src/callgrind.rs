//! Reading a callgrind profile (valgrind's `callgrind.out` format, 'Callgrind Format Specification' in
//! the valgrind manual) for `schedlab bench --instructions`: the instructions the run executed, and
//! how many of them were inside the scheduling policy.
//!
//! The policy's share is the inclusive cost of every call from outside the policies crate into one
//! of its hooks (a `<schedlab_policies::... as schedlab_core::policy::SchedPolicy>` method): the
//! hooks and everything they call, the context they read included. Only hooks count as entries: a
//! policy closure that library code (an iterator adapter, a collection) calls back on the policy's
//! behalf is already inside a hook's inclusive cost, and counting it again would inflate the
//! policy's share. The rest is the engine's own overhead: the event queue, accounting, the
//! workload's programs and the metrics.

use anyhow::{bail, Context, Result};
use std::collections::HashMap;

/// Instruction counts of one profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Profile {
    /// All instructions collected (the `summary:` or `totals:` line).
    pub total: u64,
    /// Instructions inside calls from outside the policies crate into a policy's hooks.
    pub policy: u64,
}

/// Whether a function name belongs to the policies crate.
fn is_policy(name: &str) -> bool {
    name.starts_with("schedlab_policies::") || name.starts_with("<schedlab_policies::")
}

/// Whether a function name is a policy's hook: its implementation of a `SchedPolicy` method.
fn is_hook(name: &str) -> bool {
    name.starts_with("<schedlab_policies::") && name.contains(" as schedlab_core::policy::SchedPolicy>::")
}

/// Resolves a possibly compressed name (`(id) name` defines id, `(id)` refers to it).
fn resolve(rest: &str, names: &mut HashMap<u64, String>, line: usize) -> Result<String> {
    let rest = rest.trim();
    let Some(after) = rest.strip_prefix('(') else { return Ok(rest.to_string()) };
    let (id, name) = after.split_once(')').with_context(|| format!("line {line}: bad name `{rest}`"))?;
    let id: u64 = id.parse().with_context(|| format!("line {line}: bad name id `{id}`"))?;
    let name = name.trim();
    if name.is_empty() {
        names
            .get(&id)
            .cloned()
            .with_context(|| format!("line {line}: name id {id} used before it is defined"))
    } else {
        names.insert(id, name.to_string());
        Ok(name.to_string())
    }
}

/// Parses a profile with a single event type (`Ir`).
pub fn parse(text: &str) -> Result<Profile> {
    let mut names = HashMap::new();
    let mut caller = String::new();
    let mut callee: Option<String> = None;
    let mut expect_call_cost = false;
    let (mut total, mut policy) = (None, 0u64);
    for (i, l) in text.lines().enumerate() {
        let line = i + 1;
        if expect_call_cost {
            expect_call_cost = false;
            let cost: u64 = l
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .with_context(|| format!("line {line}: expected `position cost` after calls="))?;
            let to = callee.take().with_context(|| format!("line {line}: calls= without cfn="))?;
            if is_hook(&to) && !is_policy(&caller) {
                policy += cost;
            }
        } else if let Some(rest) = l.strip_prefix("fn=") {
            caller = resolve(rest, &mut names, line)?;
        } else if let Some(rest) = l.strip_prefix("cfn=") {
            callee = Some(resolve(rest, &mut names, line)?);
        } else if l.starts_with("calls=") {
            expect_call_cost = true;
        } else if let Some(rest) = l.strip_prefix("summary:").or_else(|| l.strip_prefix("totals:")) {
            let v = rest.split_whitespace().next().unwrap_or("");
            total = Some(v.parse().with_context(|| format!("line {line}: bad total `{v}`"))?);
        } else if let Some(rest) = l.strip_prefix("events:") {
            if rest.split_whitespace().count() != 1 {
                bail!("line {line}: expected one event type, found `{}`", rest.trim());
            }
        }
    }
    let total = total.context("no summary: line (is this a callgrind profile?)")?;
    Ok(Profile { total, policy })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_calls_into_the_policy_from_outside_it() {
        // Shaped like callgrind's output: compressed names, subposition compression, a policy hook
        // that calls another policy function (not counted twice), an iterator adapter calling a
        // policy closure inside the hook (not counted twice either), a hook called through an
        // iterator adapter by the engine (counted) and a core helper.
        let text = "\
version: 1
creator: callgrind-3.19.0
positions: line
events: Ir
summary: 1000

fl=(1) /x/crates/sim/src/sim.rs
fn=(1) schedlab_sim::sim::Sim::dispatch
10 50
cfn=(2) <schedlab_policies::cfs::Cfs as schedlab_core::policy::SchedPolicy>::tick
calls=3 +5
+2 300
cfn=(3) schedlab_sim::sim::Sim::settle
calls=3 20
* 100
cfn=(7) core::iter::adapters::map::Map::fold
calls=1 11
11 30

fl=(2) /x/crates/policies/src/cfs/fair.rs
fn=(2)
5 200
cfn=(4) schedlab_policies::cfs::fair::update_curr
calls=3 7
7 100
cfn=(5) core::iter::adapters::map::Map::fold
calls=1 8
8 60

fn=(5)
30 10
cfn=(6) schedlab_policies::cfs::balance::find_idlest_group::{{closure}}
calls=4 9
31 50

fn=(7)
40 5
cfn=(8) <schedlab_policies::cfs::Cfs as schedlab_core::policy::SchedPolicy>::trace_values
calls=2 12
41 25

fn=(3)
20 100
cfn=(2)
calls=1 5
21 40
";
        let p = parse(text).unwrap();
        assert_eq!(p, Profile { total: 1000, policy: 365 });
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse("events: Ir\nfn=(1) a\ncfn=(9)\n").unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("id 9"), "{e}");
        let e = parse("events: Ir\n").unwrap_err().to_string();
        assert!(e.contains("summary"), "{e}");
    }
}
