//! The minimal TOML form of a workload (documented in docs/workload-format.md).
//!
//! Every error names the file, line, column and key and says what was expected. Errors inside a
//! nested loop body point at the enclosing top-level op and give the path to the key (`ops[2].ops[0]`).

use crate::duration::parse_duration;
use crate::model::*;
use schedlab_core::SchedClass;
use serde::Deserialize;
use std::collections::HashMap;
use toml::Spanned;

/// A workload file that cannot be used, with where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {key}{msg}", key = if key.is_empty() { String::new() } else { format!("key `{key}`: ") })]
pub struct WorkloadError {
    /// The file (or `<string>`).
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// The key at fault (may be empty when the parser could not tell).
    pub key: String,
    /// What is wrong and what was expected.
    pub msg: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    name: Option<String>,
    #[serde(default)]
    include: Vec<Spanned<IncludeDoc>>,
    duration: Option<Spanned<String>>,
    stop: Option<Spanned<String>>,
    #[serde(default)]
    mutex: Vec<Spanned<Named>>,
    #[serde(default)]
    cond: Vec<Spanned<Named>>,
    #[serde(default)]
    device: Vec<Spanned<Named>>,
    #[serde(default)]
    event: Vec<Spanned<Named>>,
    #[serde(default)]
    counter: Vec<Spanned<Named>>,
    #[serde(default)]
    timer: Vec<Spanned<TimerDoc>>,
    #[serde(default)]
    semaphore: Vec<Spanned<SemDoc>>,
    #[serde(default)]
    pipe: Vec<Spanned<PipeDoc>>,
    #[serde(default)]
    barrier: Vec<Spanned<BarrierDoc>>,
    #[serde(default)]
    group: Vec<Spanned<GroupDoc>>,
    #[serde(default)]
    task: Vec<Spanned<TaskDoc>>,
    #[serde(default)]
    affinity: Vec<Spanned<AffinityDoc>>,
}

/// `include` entries: a generator spec, or a table that also delays its tasks' start, puts them in a
/// task group of their own and names the prefix.
#[derive(Deserialize)]
#[serde(untagged)]
enum IncludeDoc {
    Spec(String),
    Table(IncludeTable),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IncludeTable {
    spec: String,
    start: Option<String>,
    group: Option<String>,
    prefix: Option<String>,
    /// Every task of the included application is a background task (a monitor beside the workload).
    #[serde(default)]
    background: bool,
    /// The application runs under `taskset -c <cpus>`: its tasks that choose no CPUs of their own
    /// may run only on these ([`crate::Workload::taskset`]).
    cpus: Option<Vec<u32>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Named {
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PipeDoc {
    name: String,
    /// Default: a pipe's 65,536 bytes, a socket's kernel default send buffer.
    capacity: Option<u32>,
    /// `pipe` (default) or `unix-stream`.
    kind: Option<String>,
    /// A socket's accounting: `linux` (default) or `linux-2.6`.
    skb: Option<String>,
}

/// A pipe's capacity when the file gives none (Linux: 16 pages).
const DEFAULT_PIPE_CAPACITY: u32 = 65536;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BarrierDoc {
    name: String,
    parties: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TimerDoc {
    name: String,
    #[serde(default)]
    shared: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SemDoc {
    name: String,
    #[serde(default)]
    initial: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupDoc {
    name: String,
    parent: Option<Spanned<String>>,
    shares: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskDoc {
    name: String,
    instances: Option<Spanned<i64>>,
    #[serde(default)]
    threads: bool,
    #[serde(default)]
    background: bool,
    policy: Option<Spanned<String>>,
    nice: Option<Spanned<i64>>,
    rt_priority: Option<Spanned<i64>>,
    slice: Option<Spanned<String>>,
    group: Option<Spanned<String>>,
    cpus: Option<Spanned<Vec<u32>>>,
    start: Option<Spanned<String>>,
    process: Option<String>,
    activity: Option<Spanned<toml::Table>>,
    #[serde(rename = "loop")]
    loop_count: Option<Spanned<toml::Value>>,
    ops: Option<Vec<Spanned<toml::Table>>>,
    phases: Option<Vec<Spanned<toml::Table>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AffinityDoc {
    task: Spanned<String>,
    at: Spanned<String>,
    cpus: Option<Vec<u32>>,
}

/// Limits applied while reading, so a typo cannot ask for a billion tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most tasks started at the beginning (sum of `instances`). Default 100,000.
    pub max_tasks: u64,
    /// Most ops in one task's program after expansion. Default 100,000.
    pub max_ops: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_tasks: 100_000, max_ops: 100_000 }
    }
}

struct Reader<'a> {
    file: &'a str,
    src: &'a str,
}

impl Reader<'_> {
    fn err(&self, span: std::ops::Range<usize>, key: &str, msg: impl Into<String>) -> WorkloadError {
        let upto = &self.src[..span.start.min(self.src.len())];
        let line = upto.matches('\n').count() + 1;
        let column = upto.rfind('\n').map_or(upto.len(), |p| upto.len() - p - 1) + 1;
        WorkloadError { file: self.file.to_string(), line, column, key: key.to_string(), msg: msg.into() }
    }
}

/// Reads a workload from TOML text with the default [`Limits`]. `file` is used in error messages only.
pub fn parse_toml(file: &str, src: &str) -> Result<Workload, WorkloadError> {
    parse_toml_with(file, src, &Limits::default())
}

/// Reads a workload from TOML text within `limits`.
pub fn parse_toml_with(file: &str, src: &str, limits: &Limits) -> Result<Workload, WorkloadError> {
    parse_toml_overriding(file, src, limits, &[])
}

/// Reads a workload from TOML text within `limits`, every included generator built with `overrides`
/// ([`crate::generators::builtin_with`]).
pub fn parse_toml_overriding(
    file: &str,
    src: &str,
    limits: &Limits,
    overrides: &[crate::generators::ParamOverride],
) -> Result<Workload, WorkloadError> {
    let r = Reader { file, src };
    let doc: Doc = toml::from_str(src).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        r.err(span, "", e.message().trim().to_string())
    })?;
    let mut w = Workload {
        name: doc.name.unwrap_or_else(|| file.to_string()),
        groups: vec![GroupSpec { name: "root".into(), parent: 0, shares: 1024 }],
        timers: vec![default_timer()],
        ..Workload::default()
    };
    let index = |list: &[Spanned<Named>], kind: &str, out: &mut Vec<String>| {
        let mut names = HashMap::new();
        for n in list {
            if names.insert(n.get_ref().name.clone(), out.len() as u32).is_some() {
                return Err(r.err(n.span(), "name", format!("duplicate {kind} `{}`", n.get_ref().name)));
            }
            out.push(n.get_ref().name.clone());
        }
        Ok(names)
    };
    let mutexes = index(&doc.mutex, "mutex", &mut w.mutexes)?;
    let conds = index(&doc.cond, "cond", &mut w.conds)?;
    let devices = index(&doc.device, "device", &mut w.devices)?;
    let events = index(&doc.event, "event", &mut w.events)?;
    let counters = index(&doc.counter, "counter", &mut w.counters)?;
    for tm in &doc.timer {
        let v = tm.get_ref();
        if w.timers.iter().any(|x| x.name == v.name) {
            return Err(r.err(tm.span(), "name", format!("duplicate timer `{}`", v.name)));
        }
        w.timers.push(TimerSpec { name: v.name.clone(), shared: v.shared });
    }
    let mut semaphores = HashMap::new();
    for x in &doc.semaphore {
        let v = x.get_ref();
        if semaphores.insert(v.name.clone(), w.semaphores.len() as u32).is_some() {
            return Err(r.err(x.span(), "name", format!("duplicate semaphore `{}`", v.name)));
        }
        w.semaphores.push(SemSpec { name: v.name.clone(), initial: v.initial });
    }

    let mut pipes = HashMap::new();
    for p in &doc.pipe {
        let v = p.get_ref();
        let kind = match v.kind.as_deref() {
            None | Some("pipe") => {
                if v.skb.is_some() {
                    return Err(r.err(p.span(), "skb", "`skb` applies to `kind = \"unix-stream\"` only"));
                }
                PipeKind::Pipe
            }
            Some("unix-stream") => match v.skb.as_deref().map(SkbAccounting::from_name) {
                None => PipeKind::UnixStream(SkbAccounting::Linux),
                Some(Some(acc)) => PipeKind::UnixStream(acc),
                Some(None) => {
                    return Err(r.err(p.span(), "skb", "unknown accounting: want `linux` or `linux-2.6`"))
                }
            },
            Some(other) => {
                return Err(r.err(
                    p.span(),
                    "kind",
                    format!("unknown kind `{other}`: want `pipe` or `unix-stream`"),
                ))
            }
        };
        let capacity = v.capacity.unwrap_or(match kind {
            PipeKind::Pipe => DEFAULT_PIPE_CAPACITY,
            PipeKind::UnixStream(acc) => acc.default_sndbuf(),
        });
        if capacity == 0 {
            return Err(r.err(p.span(), "capacity", "a pipe needs a capacity of at least 1 byte"));
        }
        if pipes.insert(v.name.clone(), w.pipes.len() as u32).is_some() {
            return Err(r.err(p.span(), "name", format!("duplicate pipe `{}`", v.name)));
        }
        w.pipes.push(PipeSpec { name: v.name.clone(), capacity, kind });
    }
    let mut barriers = HashMap::new();
    let mut barrier_parties_given = Vec::new();
    for b in &doc.barrier {
        let v = b.get_ref();
        let parties = match &v.parties {
            Some(p) if !(1..=1_000_000).contains(p.get_ref()) => {
                return Err(r.err(p.span(), "parties", format!("{} is not in 1..=1000000", p.get_ref())))
            }
            Some(p) => *p.get_ref() as u32,
            None => 0, // counted from the tasks that use it, below
        };
        if barriers.insert(v.name.clone(), w.barriers.len() as u32).is_some() {
            return Err(r.err(b.span(), "name", format!("duplicate barrier `{}`", v.name)));
        }
        barrier_parties_given.push(v.parties.is_some());
        w.barriers.push(BarrierSpec { name: v.name.clone(), parties });
    }

    let mut groups: HashMap<String, u32> = HashMap::from([("root".to_string(), 0)]);
    for g in &doc.group {
        let v = g.get_ref();
        let parent = match &v.parent {
            None => 0,
            Some(p) => *groups.get(p.get_ref()).ok_or_else(|| {
                r.err(p.span(), "parent", format!("unknown group `{}` (define parents first)", p.get_ref()))
            })?,
        };
        let shares = match &v.shares {
            None => 1024,
            Some(s) if (2..=262_144).contains(s.get_ref()) => *s.get_ref() as u64,
            Some(s) => {
                return Err(r.err(s.span(), "shares", format!("{} is not in 2..=262144", s.get_ref())))
            }
        };
        if groups.insert(v.name.clone(), w.groups.len() as u32).is_some() {
            return Err(r.err(g.span(), "name", format!("duplicate group `{}`", v.name)));
        }
        w.groups.push(GroupSpec { name: v.name.clone(), parent, shares });
    }
    let templates: HashMap<String, u32> =
        doc.task.iter().enumerate().map(|(i, t)| (t.get_ref().name.clone(), i as u32)).collect();
    if templates.len() != doc.task.len() {
        let mut seen = std::collections::HashSet::new();
        let dup = doc.task.iter().find(|t| !seen.insert(t.get_ref().name.clone())).expect("a duplicate");
        return Err(r.err(dup.span(), "name", format!("duplicate task `{}`", dup.get_ref().name)));
    }
    let names = Names {
        mutexes,
        conds,
        devices,
        pipes,
        barriers,
        templates: templates.clone(),
        semaphores,
        events,
        counters,
    };
    let mut cpu_lists: Vec<Vec<u32>> = Vec::new();
    let mut total = 0u64;
    for t in &doc.task {
        let v = t.get_ref();
        let mut spec = TaskSpec::new(v.name.clone(), Program::default());
        spec.threads = v.threads;
        spec.background = v.background;
        spec.process = v.process.clone();
        if let Some(n) = &v.instances {
            if *n.get_ref() < 0 {
                return Err(r.err(n.span(), "instances", "must be 0 (a fork-only template) or more"));
            }
            spec.instances = *n.get_ref() as u32;
            total += spec.instances as u64;
            if total > limits.max_tasks {
                return Err(r.err(
                    n.span(),
                    "instances",
                    format!("more than {} tasks in all (the configured limit)", limits.max_tasks),
                ));
            }
        }
        if let Some(p) = &v.policy {
            spec.class = parse_class(p.get_ref()).map_err(|m| r.err(p.span(), "policy", m))?;
        }
        if let Some(n) = &v.nice {
            if !(-20..=19).contains(n.get_ref()) {
                return Err(r.err(n.span(), "nice", format!("{} is not in -20..=19", n.get_ref())));
            }
            spec.nice = *n.get_ref() as i8;
        }
        match &v.rt_priority {
            Some(p) if !(1..=99).contains(p.get_ref()) => {
                return Err(r.err(p.span(), "rt_priority", format!("{} is not in 1..=99", p.get_ref())))
            }
            Some(p) if !spec.class.is_rt() => {
                return Err(r.err(p.span(), "rt_priority", "only fifo and rr tasks have an RT priority"))
            }
            Some(p) => spec.rt_priority = *p.get_ref() as u8,
            None if spec.class.is_rt() => spec.rt_priority = 10,
            None => {}
        }
        if let Some(sl) = &v.slice {
            let ns = parse_duration(sl.get_ref()).map_err(|m| r.err(sl.span(), "slice", m))?;
            if ns == 0 {
                return Err(r.err(
                    sl.span(),
                    "slice",
                    "0 is no slice (leave `slice` out for the base slice)",
                ));
            }
            if spec.class.is_rt() {
                return Err(r.err(
                    sl.span(),
                    "slice",
                    "a slice (sched_runtime) is for fair-class tasks, not fifo or rr",
                ));
            }
            spec.slice_ns = Some(ns);
        }
        if let Some(g) = &v.group {
            spec.group = *groups
                .get(g.get_ref())
                .ok_or_else(|| r.err(g.span(), "group", format!("unknown group `{}`", g.get_ref())))?;
        }
        if let Some(c) = &v.cpus {
            if c.get_ref().is_empty() {
                return Err(r.err(c.span(), "cpus", "an empty CPU list leaves the task nowhere to run"));
            }
            spec.cpus = Some(c.get_ref().clone());
        }
        if let Some(s) = &v.start {
            spec.start_ns = parse_duration(s.get_ref()).map_err(|m| r.err(s.span(), "start", m))?;
        }
        if let Some(a) = &v.activity {
            let mut act = Activity::default();
            for (k, val) in a.get_ref() {
                let key = format!("activity.{k}");
                let n = match val {
                    toml::Value::Integer(n) if (0..=100_000).contains(n) => *n as u32,
                    _ => return Err(r.err(a.span(), &key, "expected a count per 10000 cycles, 0..=100000")),
                };
                if !act.set(k, n) {
                    let msg = format!("not a component (use {})", Activity::FIELDS.join(", "));
                    return Err(r.err(a.span(), &key, msg));
                }
            }
            spec.activity = Some(act);
        }
        let mut ops = Vec::new();
        let mut cx = OpCx { names: &names, cpu_lists: &mut cpu_lists, timers: &mut w.timers };
        match (&v.ops, &v.phases) {
            (Some(list), None) => {
                if let Some(l) = &v.loop_count {
                    let msg = "a task-level `loop` repeats `phases`; with `ops`, use a loop op";
                    return Err(r.err(l.span(), "loop", msg));
                }
                for (i, op) in list.iter().enumerate() {
                    parse_op(op.get_ref(), &format!("ops[{i}]"), &mut cx, &mut ops)
                        .map_err(|(key, m)| r.err(op.span(), &key, m))?;
                }
            }
            (None, Some(phases)) => {
                let count = match &v.loop_count {
                    None => 1,
                    Some(l) => loop_count(l.get_ref()).map_err(|m| r.err(l.span(), "loop", m))?,
                };
                let start = open_loop(&mut ops, count);
                for (pi, ph) in phases.iter().enumerate() {
                    parse_phase(ph.get_ref(), &format!("phases[{pi}]"), &mut cx, &mut ops)
                        .map_err(|(key, m)| r.err(ph.span(), &key, m))?;
                }
                close_loop(&mut ops, start);
            }
            (Some(_), Some(_)) => {
                return Err(r.err(t.span(), "phases", "a task has `ops` or `phases`, not both"))
            }
            (None, None) => {
                return Err(r.err(t.span(), "ops", "a task needs `ops = [ ... ]` or `phases = [ ... ]`"))
            }
        }
        if ops.len() > limits.max_ops {
            let msg = format!("{} ops after expansion, more than the limit of {}", ops.len(), limits.max_ops);
            return Err(r.err(t.span(), "ops", msg));
        }
        check_locking(&ops, &w.mutexes).map_err(|m| r.err(t.span(), "ops", m))?;

        spec.program = Program { ops };
        w.tasks.push(spec);
    }
    // Only a process of its own execs, into a program that is one (validate's rule, with a line).
    for (t, spec) in doc.task.iter().zip(&w.tasks) {
        for op in &spec.program.ops {
            let Op::Exec(target) = *op else { continue };
            if !spec.own_process() {
                let key = if spec.threads { "threads" } else { "process" };
                let msg =
                    "exec from a thread (`threads` or `process`) is not modelled: only a process of its \
                           own may exec";
                return Err(r.err(t.span(), key, msg));
            }
            let target = &w.tasks[target as usize];
            if !target.own_process() {
                let msg = format!(
                    "exec of `{}`, which is a thread (`threads` or `process`): a program that execs must \
                     be a process of its own",
                    target.name
                );
                return Err(r.err(t.span(), "ops", msg));
            }
        }
    }
    for a in &doc.affinity {
        let v = a.get_ref();
        let template = *templates
            .get(v.task.get_ref())
            .ok_or_else(|| r.err(v.task.span(), "task", format!("unknown task `{}`", v.task.get_ref())))?;
        let at_ns = parse_duration(v.at.get_ref()).map_err(|m| r.err(v.at.span(), "at", m))?;
        w.affinity_changes.push(AffinityChange { template, at_ns, cpus: v.cpus.clone() });
    }
    if let Some(d) = &doc.duration {
        w.duration_ns = Some(parse_duration(d.get_ref()).map_err(|m| r.err(d.span(), "duration", m))?);
    }
    w.cpu_lists = cpu_lists;
    // Barriers: parties default to the number of tasks that use them; a barrier with fewer users than
    // parties (and no forked user who could make up the number) would never open.
    for (bi, b) in w.barriers.iter_mut().enumerate() {
        let uses = |t: &TaskSpec| {
            t.program.ops.iter().any(
                |op| matches!(op, Op::Barrier(x) | Op::BarrierSpin { barrier: x, .. } if *x == bi as u32),
            )
        };
        let initial: u64 = w.tasks.iter().filter(|t| uses(t)).map(|t| t.instances as u64).sum();
        let forked = w.tasks.iter().any(|t| t.instances == 0 && uses(t));
        let span = doc.barrier[bi].span();
        if !barrier_parties_given[bi] {
            if initial < 2 && !forked {
                let msg = format!(
                    "barrier `{}` is used by {initial} task(s); a barrier needs at least two",
                    b.name
                );
                return Err(r.err(span, "name", msg));
            }
            b.parties = initial.max(1) as u32;
        } else if (b.parties as u64) > initial && !forked {
            let msg = format!("barrier `{}` waits for {} tasks but only {initial} use it", b.name, b.parties);
            return Err(r.err(span, "parties", msg));
        }
    }
    // Built-in generators merged in, their names prefixed with the generator's name (and a number
    // when the same generator is included twice).
    let mut seen: HashMap<String, u32> = HashMap::new();
    for inc in &doc.include {
        let t = match inc.get_ref() {
            IncludeDoc::Spec(spec) => IncludeTable {
                spec: spec.clone(),
                start: None,
                group: None,
                prefix: None,
                background: false,
                cpus: None,
            },
            IncludeDoc::Table(t) => IncludeTable {
                spec: t.spec.clone(),
                start: t.start.clone(),
                group: t.group.clone(),
                prefix: t.prefix.clone(),
                background: t.background,
                cpus: t.cpus.clone(),
            },
        };
        let spec = &t.spec;
        let built =
            crate::generators::builtin_with(spec, overrides).map_err(|m| r.err(inc.span(), "include", m))?;
        let Some(mut other) = built else {
            return Err(r.err(
                inc.span(),
                "include",
                format!("`{spec}` is not a built-in generator (see `schedlab workloads`)"),
            ));
        };
        if let Some(start) = &t.start {
            let delay = parse_duration(start).map_err(|m| r.err(inc.span(), "include.start", m))?;
            for task in &mut other.tasks {
                task.start_ns += delay;
            }
        }
        if t.background {
            for task in &mut other.tasks {
                task.background = true;
            }
        }
        if let Some(cpus) = &t.cpus {
            other.taskset(cpus).map_err(|m| r.err(inc.span(), "include.cpus", m))?;
        }
        if let Some(group) = &t.group {
            // One task group (cgroup) for the whole application, as systemd gives each service one.
            if group.is_empty() || w.groups.iter().any(|g| &g.name == group) {
                return Err(r.err(
                    inc.span(),
                    "include.group",
                    format!("`{group}`: empty or already a group"),
                ));
            }
            other.groups.push(GroupSpec { name: group.clone(), parent: 0, shares: 1024 });
            let g = other.groups.len() as u32 - 1;
            for (i, grp) in other.groups.iter_mut().enumerate() {
                if i != 0 && i as u32 != g && grp.parent == 0 {
                    grp.parent = g;
                }
            }
            for task in &mut other.tasks {
                if task.group == 0 {
                    task.group = g;
                }
            }
        }
        let base = spec.split('[').next().unwrap_or(spec).trim().to_string();
        let prefix = match &t.prefix {
            Some(p) if p.is_empty() || p.contains('.') => {
                return Err(r.err(inc.span(), "include.prefix", format!("`{p}`: not empty, no dots")));
            }
            Some(p) => p.clone(),
            None => {
                let n = seen.entry(base.clone()).or_insert(0);
                *n += 1;
                if *n == 1 {
                    base
                } else {
                    format!("{base}{n}")
                }
            }
        };
        w.merge(&other, &prefix);
        if let Some(group) = &t.group {
            // merge prefixes group names; the application's group keeps the name it was given.
            if let Some(g) = w.groups.iter_mut().find(|g| g.name == format!("{prefix}.{group}")) {
                g.name = group.clone();
            }
        }
    }
    // After the includes, so `task:<name>` may name an included task (`task:fibo.fibo`).
    if let Some(s) = &doc.stop {
        w.stop = match s.get_ref().as_str() {
            "duration" => StopWhen::Duration,
            "all_done" => StopWhen::AllDone,
            other => match other.strip_prefix("task:").and_then(|n| w.tasks.iter().position(|t| t.name == n))
            {
                Some(t) => StopWhen::TemplateDone(t as u32),
                None => {
                    return Err(r.err(
                        s.span(),
                        "stop",
                        format!("`{other}` is not duration, all_done or task:<known task name>"),
                    ))
                }
            },
        };
    }
    // Only a workload with background tasks: one whose tasks all start at 0 instances (an rt-app
    // import's `instance: 0`) ends at once, as it always did.
    if w.stop == StopWhen::AllDone
        && w.tasks.iter().any(|t| t.background)
        && w.tasks.iter().all(|t| t.background || t.instances == 0)
    {
        let span = doc.stop.as_ref().map_or(0..0, |s| s.span());
        return Err(r.err(
            span,
            "stop",
            "`all_done` waits for the foreground tasks, and every task that starts with the run is \
             `background`: nothing to wait for (leave `background` off the workload's own tasks)",
        ));
    }
    if w.tasks.is_empty() {
        // rt-app refuses a file without tasks; an empty workload would run nothing and report zeros.
        return Err(r.err(0..0, "task", "no [[task]] and no `include`: a workload needs at least one task"));
    }
    if w.initial_tasks() > limits.max_tasks {
        return Err(r.err(
            0..0,
            "include",
            format!("more than {} tasks in all (the configured limit)", limits.max_tasks),
        ));
    }
    w.validate().map_err(|m| r.err(0..0, "", m))?;
    Ok(w)
}

/// Checks a program's locking in program order: no unlock of a mutex it has not locked, no lock of a
/// mutex it holds, no condition wait without its mutex, and no loop body that ends holding a mutex it
/// did not hold when the body began (the next iteration would lock it again).
pub(crate) fn check_locking(ops: &[Op], mutex_names: &[String]) -> Result<(), String> {
    let mut held = std::collections::BTreeSet::new();
    let mut at_loop_start = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let name = |m: u32| &mutex_names[m as usize];
        match *op {
            Op::Lock(m) if !held.insert(m) => {
                return Err(format!("op {i} locks mutex `{}` that the task already holds", name(m)));
            }
            Op::Unlock(m) if !held.remove(&m) => {
                return Err(format!("op {i} unlocks mutex `{}` that the task has not locked", name(m)));
            }
            Op::CondWait { mutex, .. } if !held.contains(&mutex) => {
                return Err(format!("op {i} waits on a condition without holding mutex `{}`", name(mutex)));
            }
            Op::Loop { .. } => at_loop_start.push(held.clone()),
            Op::EndLoop { .. } => {
                let before = at_loop_start.pop().unwrap_or_default();
                if let Some(m) = held.difference(&before).next() {
                    return Err(format!(
                        "op {i}: the loop ends holding mutex `{}` it locked inside, so its next iteration would lock it again",
                        name(*m)
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn loop_count(v: &toml::Value) -> Result<u32, String> {
    match v {
        toml::Value::Integer(c) if *c >= 0 && *c <= u32::MAX as i64 => Ok(*c as u32),
        toml::Value::String(s) if s == "forever" => Ok(0),
        _ => Err("expected a repetition count (0 or \"forever\" = forever)".into()),
    }
}

/// A phase: `{ loop = N, cpus = [...], ops = [...] }`, expanded to an optional affinity change and a
/// loop.
fn parse_phase(t: &toml::Table, path: &str, cx: &mut OpCx, out: &mut Vec<Op>) -> Result<(), OpErr> {
    for k in t.keys() {
        if !["loop", "cpus", "ops"].contains(&k.as_str()) {
            return Err((format!("{path}.{k}"), "not a key of a phase (allowed: loop, cpus, ops)".into()));
        }
    }
    if let Some(c) = t.get("cpus") {
        let list = cpu_list(c).map_err(|m| (format!("{path}.cpus"), m))?;
        out.push(Op::SetCpus(cx.list_id(list)));
    }
    let count = match t.get("loop") {
        None => 1,
        Some(v) => loop_count(v).map_err(|m| (format!("{path}.loop"), m))?,
    };
    let Some(toml::Value::Array(body)) = t.get("ops") else {
        return Err((format!("{path}.ops"), "a phase needs `ops = [ ... ]`".into()));
    };
    parse_looped(body, path, count, cx, out)
}

/// Parses an op list as the body of a loop of `count` passes.
fn parse_looped(
    body: &[toml::Value],
    path: &str,
    count: u32,
    cx: &mut OpCx,
    out: &mut Vec<Op>,
) -> Result<(), OpErr> {
    let start = open_loop(out, count);
    for (i, v) in body.iter().enumerate() {
        let p = format!("{path}.ops[{i}]");
        match v {
            toml::Value::Table(inner) => parse_op(inner, &p, cx, out)?,
            _ => return Err((p, "expected an op table such as { compute = \"1ms\" }".into())),
        }
    }
    close_loop(out, start);
    Ok(())
}

fn cpu_list(v: &toml::Value) -> Result<Vec<u32>, String> {
    if v.as_str() == Some("all") {
        return Ok(Vec::new());
    }
    let toml::Value::Array(a) = v else { return Err("expected a list of CPU numbers or \"all\"".into()) };
    let list: Option<Vec<u32>> =
        a.iter().map(|x| x.as_integer().filter(|n| (0..1024).contains(n)).map(|n| n as u32)).collect();
    match list {
        Some(l) if !l.is_empty() => Ok(l),
        Some(_) => Err("an empty CPU list leaves the task nowhere to run".into()),
        None => Err("expected CPU numbers 0..=1023".into()),
    }
}

/// Parses a duration value: a string with a unit, or one distribution table.
pub(crate) fn parse_dist(v: &toml::Value) -> Result<Dist, String> {
    let d = |x: &toml::Value| -> Result<u64, String> {
        match x {
            toml::Value::String(s) => parse_duration(s),
            _ => Err("expected a duration string such as \"5ms\"".into()),
        }
    };
    let pair = |x: &toml::Value| -> Result<(u64, u64), String> {
        match x {
            toml::Value::Array(a) if a.len() == 2 => Ok((d(&a[0])?, d(&a[1])?)),
            _ => Err("expected two durations, e.g. [\"1ms\", \"3ms\"]".into()),
        }
    };
    match v {
        toml::Value::String(s) => Ok(Dist::Fixed(parse_duration(s)?)),
        toml::Value::Table(t) if t.len() == 1 => {
            let (k, x) = t.iter().next().expect("one entry");
            match k.as_str() {
                "uniform" => {
                    let (lo, hi) = pair(x)?;
                    if lo > hi {
                        return Err(format!("uniform range is empty: {lo} ns > {hi} ns"));
                    }
                    Ok(Dist::Uniform { lo, hi })
                }
                "exponential" => Ok(Dist::Exponential { mean: d(x)? }),
                "normal" => pair(x).map(|(mean, stddev)| Dist::Normal { mean, stddev }),
                "lognormal" => {
                    let (mean, stddev) = pair(x)?;
                    if mean == 0 {
                        return Err("a log-normal mean must be above zero".into());
                    }
                    Ok(Dist::LogNormal { mean, stddev })
                }
                other => {
                    Err(format!("unknown distribution `{other}` (uniform, exponential, normal, lognormal)"))
                }
            }
        }
        _ => Err(
            "expected a duration such as \"5ms\" or a distribution such as { uniform = [\"1ms\", \"3ms\"] }"
                .into(),
        ),
    }
}

struct Names {
    counters: HashMap<String, u32>,
    semaphores: HashMap<String, u32>,
    events: HashMap<String, u32>,
    mutexes: HashMap<String, u32>,
    conds: HashMap<String, u32>,
    devices: HashMap<String, u32>,
    pipes: HashMap<String, u32>,
    barriers: HashMap<String, u32>,
    templates: HashMap<String, u32>,
}

const VERBS: &str = "compute, spin, sleep, timer, yield, lock, unlock, wait, signal, broadcast, sem_wait, \
sem_post, suspend, resume, cpus, nice, policy, count, send, recv, barrier, fork, exec, wait_children, wait_child, io, loop, exit";

/// A scheduling policy by its workload-file name (`policy = "fifo"`, as `sched_setscheduler` names
/// them without `SCHED_`).
fn parse_class(name: &str) -> Result<SchedClass, String> {
    Ok(match name {
        "normal" | "other" => SchedClass::Normal,
        "batch" => SchedClass::Batch,
        "idle" => SchedClass::Idle,
        "iso" => SchedClass::Iso,
        "fifo" => SchedClass::Fifo,
        "rr" => SchedClass::Rr,
        other => return Err(format!("`{other}` is not one of normal, batch, idle, iso, fifo, rr")),
    })
}

/// The workload-file name of a scheduling policy (the inverse of `parse_class`).
pub(crate) fn class_name(class: SchedClass) -> &'static str {
    match class {
        SchedClass::Normal => "normal",
        SchedClass::Batch => "batch",
        SchedClass::Idle => "idle",
        SchedClass::Iso => "iso",
        SchedClass::Fifo => "fifo",
        SchedClass::Rr => "rr",
    }
}

/// What op parsing needs besides the op: the name tables and the CPU lists being collected.
struct OpCx<'a> {
    names: &'a Names,
    cpu_lists: &'a mut Vec<Vec<u32>>,
    timers: &'a mut Vec<TimerSpec>,
}

impl OpCx<'_> {
    fn list_id(&mut self, list: Vec<u32>) -> u32 {
        match self.cpu_lists.iter().position(|l| *l == list) {
            Some(i) => i as u32,
            None => {
                self.cpu_lists.push(list);
                self.cpu_lists.len() as u32 - 1
            }
        }
    }
}

type OpErr = (String, String);

fn parse_op(t: &toml::Table, path: &str, cx: &mut OpCx, out: &mut Vec<Op>) -> Result<(), OpErr> {
    let names = cx.names;
    let verbs: Vec<&str> =
        t.keys().map(String::as_str).filter(|k| VERBS.split(", ").any(|v| v == *k)).collect();
    let verb = match verbs.as_slice() {
        [v] => *v,
        [] => return Err((path.to_string(), format!("an op needs one of: {VERBS}"))),
        many => {
            return Err((path.to_string(), format!("an op has exactly one verb, found {}", many.join(", "))))
        }
    };
    let key = |k: &str| format!("{path}.{k}");
    let allowed_extra: &[&str] = match verb {
        "send" | "recv" => &["bytes"],
        "wait" => &["mutex"],
        "io" => &["service"],
        "timer" => &["mode", "ref"],
        "barrier" => &["spin_max"],
        "loop" => &["ops"],
        "policy" => &["rt_priority"],
        _ => &[],
    };
    for k in t.keys() {
        if k != verb && !allowed_extra.contains(&k.as_str()) {
            return Err((
                key(k),
                format!(
                    "not a key of a `{verb}` op (allowed: {verb}{}{})",
                    if allowed_extra.is_empty() { "" } else { ", " },
                    allowed_extra.join(", ")
                ),
            ));
        }
    }
    let dur = |k: &str| -> Result<u64, OpErr> {
        match t.get(k) {
            Some(toml::Value::String(s)) => parse_duration(s).map_err(|m| (key(k), m)),
            Some(_) => Err((key(k), "expected a duration string such as \"5ms\"".into())),
            None => Err((key(k), "missing; expected a duration string such as \"5ms\"".into())),
        }
    };
    let name = |k: &str, map: &HashMap<String, u32>, kind: &str| -> Result<u32, OpErr> {
        match t.get(k) {
            Some(toml::Value::String(s)) => {
                map.get(s).copied().ok_or_else(|| (key(k), format!("unknown {kind} `{s}`")))
            }
            _ => Err((key(k), format!("expected the name of a {kind}"))),
        }
    };
    let dist = |k: &str| -> Result<Dist, OpErr> {
        match t.get(k) {
            Some(v) => parse_dist(v).map_err(|m| (key(k), m)),
            None => Err((key(k), "missing; expected a duration such as \"5ms\"".into())),
        }
    };
    let flag = |k: &str| -> Result<(), OpErr> {
        match t.get(k) {
            Some(toml::Value::Boolean(true)) => Ok(()),
            _ => Err((key(k), "expected `true`".into())),
        }
    };
    let bytes = || -> Result<u32, OpErr> {
        match t.get("bytes") {
            Some(toml::Value::Integer(b)) if *b > 0 && *b <= u32::MAX as i64 => Ok(*b as u32),
            Some(_) => Err((key("bytes"), "expected a positive number of bytes".into())),
            None => Err((key("bytes"), "missing; expected a positive number of bytes".into())),
        }
    };
    let op = match verb {
        "compute" => Op::Compute { work: dist("compute")? },
        "spin" => Op::Spin { time: dist("spin")? },
        "sleep" => Op::Sleep { time: dist("sleep")? },
        "timer" => {
            let period_ns = dur("timer")?;
            if period_ns == 0 {
                return Err((key("timer"), "a timer period must be above 0".into()));
            }
            let absolute = match t.get("mode") {
                None => false,
                Some(toml::Value::String(m)) if m == "relative" => false,
                Some(toml::Value::String(m)) if m == "absolute" => true,
                Some(_) => return Err((key("mode"), "expected \"relative\" or \"absolute\"".into())),
            };
            // `ref` names a timer: declared `[[timer]]`s may be shared; others are per task.
            let timer = match t.get("ref") {
                None => 0,
                Some(toml::Value::String(name)) => match cx.timers.iter().position(|x| &x.name == name) {
                    Some(i) => i as u32,
                    None => {
                        cx.timers.push(TimerSpec { name: name.clone(), shared: false });
                        cx.timers.len() as u32 - 1
                    }
                },
                Some(_) => return Err((key("ref"), "expected a timer name".into())),
            };
            Op::Timer { timer, period_ns, absolute }
        }
        "yield" => {
            flag("yield")?;
            Op::Yield
        }
        "exit" => {
            flag("exit")?;
            Op::Exit
        }
        "wait_children" => {
            flag("wait_children")?;
            Op::WaitChildren
        }
        "wait_child" => {
            flag("wait_child")?;
            Op::WaitChild
        }
        "lock" => Op::Lock(name("lock", &names.mutexes, "mutex")?),
        "unlock" => Op::Unlock(name("unlock", &names.mutexes, "mutex")?),
        "wait" => Op::CondWait {
            cond: name("wait", &names.conds, "cond")?,
            mutex: name("mutex", &names.mutexes, "mutex")?,
        },
        "signal" => Op::Signal(name("signal", &names.conds, "cond")?),
        "broadcast" => Op::Broadcast(name("broadcast", &names.conds, "cond")?),
        "send" => Op::Send { pipe: name("send", &names.pipes, "pipe")?, bytes: bytes()? },
        "recv" => Op::Recv { pipe: name("recv", &names.pipes, "pipe")?, bytes: bytes()? },
        "barrier" => {
            let b = name("barrier", &names.barriers, "barrier")?;
            match t.get("spin_max") {
                None => Op::Barrier(b),
                Some(_) => Op::BarrierSpin { barrier: b, spin_ns: dur("spin_max")? },
            }
        }
        "count" => Op::Count(name("count", &names.counters, "counter")?),
        "fork" => Op::Fork(name("fork", &names.templates, "task")?),
        "exec" => Op::Exec(name("exec", &names.templates, "task")?),
        "io" => Op::Io { device: name("io", &names.devices, "device")?, service: dist("service")? },
        "sem_wait" => Op::SemWait(name("sem_wait", &names.semaphores, "semaphore")?),
        "sem_post" => Op::SemPost(name("sem_post", &names.semaphores, "semaphore")?),
        "suspend" => Op::Suspend(name("suspend", &names.events, "event")?),
        "resume" => Op::Resume(name("resume", &names.events, "event")?),
        "cpus" => {
            let list = cpu_list(&t["cpus"]).map_err(|m| (key("cpus"), m))?;
            Op::SetCpus(cx.list_id(list))
        }
        "nice" => match t["nice"] {
            toml::Value::Integer(n) if (-20..=19).contains(&n) => Op::Nice(n as i8),
            _ => return Err((key("nice"), "expected a nice level, an integer in -20..=19".into())),
        },
        "policy" => {
            let class = match &t["policy"] {
                toml::Value::String(n) => parse_class(n).map_err(|m| (key("policy"), m))?,
                _ => {
                    return Err((
                        key("policy"),
                        "expected a policy name: normal, batch, idle, iso, fifo, rr".into(),
                    ))
                }
            };
            let rt_priority = match t.get("rt_priority") {
                None if class.is_rt() => 10,
                None => 0,
                Some(_) if !class.is_rt() => {
                    return Err((key("rt_priority"), "only fifo and rr have an RT priority".into()))
                }
                Some(toml::Value::Integer(p)) if (1..=99).contains(p) => *p as u8,
                Some(_) => {
                    return Err((key("rt_priority"), "expected an RT priority, an integer in 1..=99".into()))
                }
            };
            Op::SetClass { class, rt_priority }
        }
        "loop" => {
            let count = loop_count(&t["loop"]).map_err(|m| (key("loop"), m))?;
            let body = match t.get("ops") {
                Some(toml::Value::Array(a)) => a,
                _ => return Err((key("ops"), "a loop needs `ops = [ ... ]`".into())),
            };
            return parse_looped(body, path, count, cx, out);
        }
        _ => unreachable!("verb list and match agree"),
    };
    out.push(op);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "demo"
duration = "2s"
stop = "all_done"

[[mutex]]
name = "m"

[[pipe]]
name = "p"
capacity = 4096

[[group]]
name = "web"
shares = 2048

[[task]]
name = "worker"
instances = 3
nice = 5
group = "web"
cpus = [0, 1]
ops = [
  { compute = "1ms" },
  { loop = 4, ops = [ { lock = "m" }, { unlock = "m" }, { sleep = "100us" } ] },
  { send = "p", bytes = 100 },
]
"#;

    #[test]
    fn reads_a_workload() {
        let w = parse_toml("demo.toml", GOOD).unwrap();
        assert_eq!(w.tasks.len(), 1);
        let t = &w.tasks[0];
        assert_eq!((t.instances, t.nice, t.group), (3, 5, 1));
        assert_eq!(t.program.ops.len(), 7);
        assert_eq!(t.program.ops[1], Op::Loop { count: 4, end: 5 });
        assert_eq!(w.stop, StopWhen::AllDone);
        assert_eq!(w.duration_ns, Some(2_000_000_000));
    }

    fn err(src: &str) -> WorkloadError {
        parse_toml("bad.toml", src).unwrap_err()
    }

    #[test]
    fn a_workload_without_tasks_is_an_error_naming_the_file() {
        for src in ["", "name = \"nothing\"\n", "[[mutex]]\nname = \"m\"\n"] {
            let e = err(src);
            assert_eq!((e.file.as_str(), e.line, e.key.as_str()), ("bad.toml", 1, "task"), "{e}");
            assert!(e.msg.contains("at least one task"), "{e}");
        }
    }

    #[test]
    fn a_socket_pipe_is_read_written_and_checked() {
        let task = "[[task]]\nname = \"a\"\nops = [ { send = \"s\", bytes = 100 } ]\n";
        let w =
            parse_toml("s.toml", &format!("[[pipe]]\nname = \"s\"\nkind = \"unix-stream\"\n{task}")).unwrap();
        assert_eq!(
            (w.pipes[0].kind, w.pipes[0].capacity),
            (PipeKind::UnixStream(SkbAccounting::Linux), 212_992)
        );
        let src = format!("[[pipe]]\nname = \"s\"\nkind = \"unix-stream\"\nskb = \"linux-2.6\"\n{task}");
        let w = parse_toml("s.toml", &src).unwrap();
        assert_eq!(
            (w.pipes[0].kind, w.pipes[0].capacity),
            (PipeKind::UnixStream(SkbAccounting::Linux26), 124_928)
        );
        // Written back, it reads the same.
        assert_eq!(parse_toml("again.toml", &crate::to_toml(&w)).unwrap().pipes, w.pipes);
        // A pipe's default is 65,536 bytes.
        let w = parse_toml("p.toml", &format!("[[pipe]]\nname = \"s\"\n{task}")).unwrap();
        assert_eq!((w.pipes[0].kind, w.pipes[0].capacity), (PipeKind::Pipe, 65_536));
        for (pipe, key, msg) in [
            ("kind = \"tcp\"", "kind", "unknown kind `tcp`"),
            ("kind = \"unix-stream\"\nskb = \"bsd\"", "skb", "want `linux` or `linux-2.6`"),
            ("skb = \"linux\"", "skb", "applies to `kind = \"unix-stream\"` only"),
        ] {
            let e = err(&format!("[[pipe]]\nname = \"s\"\n{pipe}\n{task}"));
            assert_eq!((e.line, e.key.as_str()), (1, key), "{e}");
            assert!(e.msg.contains(msg), "{e}");
        }
        // A message larger than one socket buffer carries is refused.
        let big = "[[pipe]]\nname = \"s\"\nkind = \"unix-stream\"\n[[task]]\nname = \"a\"\nops = [ { send = \"s\", bytes = 40000 } ]\n";
        assert!(err(big).msg.contains("1..=36544"), "{}", err(big));
    }

    #[test]
    fn unknown_key_names_line_and_key() {
        let e = err("[[task]]\nname = \"a\"\nops = []\nnicety = 3\n");
        assert_eq!(e.line, 4, "{e}");
        assert!(e.to_string().contains("nicety"), "{e}");
        assert!(e.to_string().starts_with("bad.toml:4:"), "{e}");
    }

    #[test]
    fn a_nice_op_is_read_written_and_checked() {
        let w =
            parse_toml("n.toml", "[[task]]\nname = \"a\"\nops = [ { nice = -3 }, { compute = \"1ms\" } ]\n")
                .unwrap();
        assert_eq!(w.tasks[0].program.ops[0], Op::Nice(-3));
        let again = parse_toml("again.toml", &crate::toml_write::to_toml(&w)).unwrap();
        assert_eq!(again.tasks[0].program.ops[0], Op::Nice(-3));
        let e = err("[[task]]\nname = \"a\"\nops = [\n  { nice = 20 },\n]\n");
        assert_eq!(e.line, 4, "{e}");
        assert!(e.key.ends_with("nice") && e.to_string().contains("-20..=19"), "{e}");
    }

    #[test]
    fn a_policy_op_is_read_written_and_checked() {
        let src = "[[task]]\nname = \"a\"\nops = [ { policy = \"fifo\", rt_priority = 40 }, { compute = \"1ms\" }, \
                   { policy = \"rr\" }, { policy = \"idle\" } ]\n";
        let w = parse_toml("p.toml", src).unwrap();
        let ops = &w.tasks[0].program.ops;
        assert_eq!(ops[0], Op::SetClass { class: SchedClass::Fifo, rt_priority: 40 });
        // The task-level default RT priority, 10, when none is given.
        assert_eq!(ops[2], Op::SetClass { class: SchedClass::Rr, rt_priority: 10 });
        assert_eq!(ops[3], Op::SetClass { class: SchedClass::Idle, rt_priority: 0 });
        let again = parse_toml("again.toml", &crate::toml_write::to_toml(&w)).unwrap();
        assert_eq!(&again.tasks[0].program.ops, ops);
        let cases = [
            ("{ policy = \"normal\", rt_priority = 5 }", "rt_priority", "only fifo and rr"),
            ("{ policy = \"fifo\", rt_priority = 100 }", "rt_priority", "1..=99"),
            ("{ policy = \"deadline\" }", "policy", "not one of normal, batch, idle, iso, fifo, rr"),
            ("{ policy = 1 }", "policy", "expected a policy name"),
        ];
        for (op, key, msg) in cases {
            let e = err(&format!("[[task]]\nname = \"a\"\nops = [\n  {op},\n]\n"));
            assert_eq!(e.line, 4, "{e}");
            assert!(e.key.ends_with(key) && e.to_string().contains(msg), "{op}: {e}");
        }
    }

    #[test]
    fn wrong_type_and_impossible_values() {
        let e = err("[[task]]\nname = \"a\"\nnice = 40\nops = []\n");
        assert_eq!((e.line, e.key.as_str()), (3, "nice"), "{e}");
        let e = err("[[task]]\nname = \"a\"\nslice = \"0ms\"\nops = []\n");
        assert_eq!((e.line, e.key.as_str()), (3, "slice"), "{e}");
        let e = err("[[task]]\nname = \"a\"\npolicy = \"fifo\"\nslice = \"1ms\"\nops = []\n");
        assert!(e.key == "slice" && e.msg.contains("fair-class"), "{e}");
        let e = err("[[task]]\nname = \"a\"\nslice = \"3\"\nops = []\n");
        assert_eq!((e.line, e.key.as_str()), (3, "slice"), "{e}");
        let e = err("[[task]]\nname = \"a\"\nops = [ { sleep = \"-5ms\" } ]\n");
        assert_eq!((e.line, e.key.as_str()), (3, "ops[0].sleep"), "{e}");
        let e = err("[[task]]\nname = \"a\"\nops = [ { sleep = 5 } ]\n");
        assert!(e.msg.contains("expected a duration"), "{e}");
        let e = err("[[task]]\nname = \"a\"\nops = [ { loop = 2, ops = [ { lock = \"nope\" } ] } ]\n");
        assert_eq!(e.key, "ops[0].ops[0].lock", "{e}");
        assert!(e.msg.contains("unknown mutex `nope`"), "{e}");
        let e = err("[[task]]\nname = \"a\"\ninstances = 200000\nops = []\n");
        assert_eq!(e.key, "instances", "{e}");
        let e = err("[[task]]\nname = \"a\"\nops = [ { fork = \"ghost\" } ]\n");
        assert!(e.msg.contains("unknown task `ghost`"), "{e}");
        let e = err("[[task]]\nname = \"a\"\nops = [ { exec = \"ghost\" } ]\n");
        assert_eq!((e.line, e.key.as_str()), (3, "ops[0].exec"), "{e}");
        assert!(e.msg.contains("unknown task `ghost`"), "{e}");
        let e = err("[[task]]\nname = \"a\"\nthreads = true\nops = [ { exec = \"a\" } ]\n");
        assert_eq!((e.line, e.key.as_str()), (1, "threads"), "{e}");
        assert!(e.msg.contains("exec from a thread"), "{e}");
        let e = err("name = \"w\"\n[[task]]\nname = \"a\"\nops = [ { exec = \"b\" } ]\n[[task]]\nname = \"b\"\nthreads = true\nops = []\n");
        assert_eq!((e.line, e.key.as_str()), (2, "ops"), "{e}");
        assert!(e.msg.contains("a program that execs must be a process"), "{e}");
        let e = err("[[task]]\nname = \"a\"\nops = [ { compute = \"1ms\", sleep = \"1ms\" } ]\n");
        assert!(e.msg.contains("exactly one verb"), "{e}");
    }
}

#[cfg(test)]
mod language_tests {
    use super::*;

    fn err(src: &str) -> WorkloadError {
        parse_toml("w.toml", src).unwrap_err()
    }

    #[test]
    fn phases_distributions_activity_and_new_ops() {
        let w = parse_toml(
            "w.toml",
            r#"
[[semaphore]]
name = "s"
initial = 2
[[event]]
name = "e"
[[task]]
name = "t"
loop = 3
activity = { instr = 6822, cycles = 10000, x87 = 3208 }
phases = [
  { cpus = [0], loop = 2, ops = [ { compute = { uniform = ["1ms", "3ms"] } }, { sem_wait = "s" } ] },
  { ops = [ { sleep = { exponential = "2ms" } }, { sem_post = "s" }, { resume = "e" }, { cpus = [1, 2] } ] },
]
"#,
        )
        .unwrap();
        let t = &w.tasks[0];
        assert_eq!(t.activity.unwrap().x87, 3208);
        assert_eq!(w.cpu_lists, vec![vec![0], vec![1, 2]]);
        use Op::*;
        assert_eq!(
            t.program.ops,
            vec![
                Loop { count: 3, end: 10 },
                SetCpus(0),
                Loop { count: 2, end: 5 },
                Compute { work: Dist::Uniform { lo: 1_000_000, hi: 3_000_000 } },
                SemWait(0),
                EndLoop { start: 2 },
                Sleep { time: Dist::Exponential { mean: 2_000_000 } },
                SemPost(0),
                Resume(0),
                SetCpus(1),
                EndLoop { start: 0 },
            ]
        );
    }

    #[test]
    fn impossible_workloads_are_rejected_with_their_key() {
        let e = err("[[mutex]]\nname = \"m\"\n[[task]]\nname = \"a\"\nops = [ { unlock = \"m\" } ]\n");
        assert!(e.msg.contains("unlocks mutex `m` that the task has not locked"), "{e}");
        let e = err("[[barrier]]\nname = \"b\"\n[[task]]\nname = \"a\"\nops = [ { barrier = \"b\" } ]\n");
        assert!(e.msg.contains("used by 1 task(s)"), "{e}");
        assert_eq!(e.line, 1, "{e}");
        let e = err("[[barrier]]\nname = \"b\"\nparties = 5\n[[task]]\nname = \"a\"\ninstances = 3\nops = [ { barrier = \"b\" } ]\n");
        assert!(e.msg.contains("waits for 5 tasks but only 3 use it"), "{e}");
        let e = err("[[task]]\nname = \"a\"\nops = [ { sleep = { uniform = [\"3ms\", \"1ms\"] } } ]\n");
        assert!(e.msg.contains("uniform range is empty"), "{e}");
        let e = err("[[task]]\nname = \"a\"\nops = [ { sleep = { gamma = \"1ms\" } } ]\n");
        assert!(e.msg.contains("unknown distribution `gamma`"), "{e}");
        let e = err("[[task]]\nname = \"a\"\nactivity = { fpu = 3 }\nops = [ { sleep = \"1ms\" } ]\n");
        assert!(e.key == "activity.fpu" && e.msg.contains("x87"), "{e}");
        let e = err("[[task]]\nname = \"a\"\nops = [ { cpus = [] } ]\n");
        assert!(e.msg.contains("nowhere to run"), "{e}");
        let e = err(
            "[[task]]\nname = \"a\"\nphases = [ { loop = 2, ops = [ { sleep = \"1ms\" } ], cpu = [0] } ]\n",
        );
        assert_eq!(e.key, "phases[0].cpu", "{e}");
        let e = parse_toml_with(
            "w.toml",
            "[[task]]\nname = \"a\"\ninstances = 11\nops = [ { sleep = \"1ms\" } ]\n",
            &Limits { max_tasks: 10, ..Limits::default() },
        )
        .unwrap_err();
        assert!(e.msg.contains("configured limit"), "{e}");
    }
}

#[cfg(test)]
mod doc_tests {
    /// Every complete example (a TOML block with a `[[task]]`) in docs/workload-format.md parses.
    #[test]
    fn documented_examples_parse() {
        let doc = include_str!("../../../docs/workload-format.md");
        let mut checked = 0;
        for block in doc.split("```toml").skip(1) {
            let block = block.split("```").next().unwrap();
            if block.contains("[[task]]") {
                super::parse_toml("docs/workload-format.md", block)
                    .unwrap_or_else(|e| panic!("{e}\n{block}"));
                checked += 1;
            }
        }
        assert!(checked >= 6, "only {checked} examples found");
    }
}

#[cfg(test)]
mod include_tests {
    use super::*;

    #[test]
    fn generators_can_be_included_and_combined() {
        let w = parse_toml(
            "multi.toml",
            "name = \"fibo+oltp\"\ninclude = [\"fibo\", \"sysbench-oltp[threads=4]\", \"fibo\"]\n\
             [[task]]\nname = \"own\"\nops = [ { compute = \"1ms\" } ]\n",
        )
        .unwrap();
        let names: Vec<&str> = w.tasks.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, vec!["own", "fibo.fibo", "sysbench-oltp.client", "fibo2.fibo"]);
        assert_eq!(w.mutexes, vec!["sysbench-oltp.table"]);
        assert_eq!(w.counters, vec!["sysbench-oltp.transactions"]);
        assert_eq!(w.tasks[2].instances, 4);
        // The merged program points at the renumbered objects.
        assert!(
            w.tasks[2].program.ops.contains(&Op::Lock(0)) && w.tasks[2].program.ops.contains(&Op::Count(0))
        );
        let e = parse_toml("m.toml", "include = [\"warp-drive\"]\n").unwrap_err();
        assert!(e.key == "include" && e.msg.contains("not a built-in"), "{e}");
        let e = parse_toml("m.toml", "include = [\"hogs[n=0]\"]\n").unwrap_err();
        assert!(e.msg.contains("outside"), "{e}");
    }

    #[test]
    fn overrides_set_a_generators_parameter_wherever_it_is_included() {
        use crate::generators::{builtin, builtin_with, ParamOverride};
        let src = "include = [\"hackbench[groups=1,msg_cost=2us]\", \"fibo\"]\n";
        let o = |g: &str, p: &str, v: &str| ParamOverride {
            generator: g.into(),
            param: p.into(),
            value: v.into(),
        };
        let plain = parse_toml("m.toml", src).unwrap();
        let same =
            parse_toml_overriding("m.toml", src, &Limits::default(), &[o("hackbench", "msg_cost", "2us")]);
        assert_eq!(same.unwrap(), plain, "the value the spec gives changes nothing");
        let slow =
            parse_toml_overriding("m.toml", src, &Limits::default(), &[o("hackbench", "msg_cost", "4us")]);
        let direct = builtin("hackbench[groups=1,msg_cost=4us]").unwrap().unwrap();
        let slow = slow.unwrap();
        assert_ne!(slow, plain);
        assert_eq!(slow.tasks[0].program, direct.tasks[0].program, "as if the spec had said 4us");
        let other =
            parse_toml_overriding("m.toml", src, &Limits::default(), &[o("perf-pipe", "msg_cost", "4us")]);
        assert_eq!(other.unwrap(), plain, "another generator's parameter is not this one's");
        // A parameter the spec leaves at its default is set too.
        let d = builtin_with("hackbench[groups=1]", &[o("hackbench", "msg_cost", "4us")]).unwrap().unwrap();
        assert_eq!(d, direct);
        assert!(ParamOverride::known("hackbench", "msg_cost").is_ok());
        assert!(ParamOverride::known("hackbench", "speed").unwrap_err().contains("no parameter `speed`"));
        assert!(ParamOverride::known("warp", "x").unwrap_err().contains("no workload generator `warp`"));
    }

    #[test]
    fn an_included_application_can_start_late_in_its_own_group_under_its_own_prefix() {
        let w = parse_toml(
            "multi.toml",
            "include = [\"fibo\", { spec = \"sysbench-oltp[threads=4]\", start = \"7s\", group = \"db\", \
             prefix = \"sb\" }]\n",
        )
        .unwrap();
        let names: Vec<&str> = w.tasks.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, vec!["fibo.fibo", "sb.client"]);
        assert_eq!((w.tasks[0].start_ns, w.tasks[1].start_ns), (0, 7_000_000_000));
        let db = w.groups.iter().position(|g| g.name == "db").expect("the application's group");
        assert_eq!((w.groups[db].parent, w.groups[db].shares), (0, 1024));
        assert_eq!((w.tasks[0].group, w.tasks[1].group), (0, db as u32), "fibo stays in the root group");
        for (bad, key) in [
            ("include = [{ spec = \"fibo\", start = \"soon\" }]\n", "include.start"),
            ("include = [{ spec = \"fibo\", prefix = \"a.b\" }]\n", "include.prefix"),
            (
                "include = [{ spec = \"fibo\", group = \"g\" }, { spec = \"fibo\", group = \"g\" }]\n",
                "include.group",
            ),
        ] {
            let e = parse_toml("m.toml", bad).unwrap_err();
            assert_eq!(e.key, key, "{e}");
            assert_eq!(e.line, 1, "{e}");
        }
    }

    #[test]
    fn an_included_application_runs_under_taskset_where_its_tasks_choose_no_cpus() {
        // fibo's one task takes the mask (sorted, once each); hackbench's forked children are
        // templates too, so they inherit it; pinned-spinners pins its own threads to CPU 0 and
        // keeps that, with its own later unpinning.
        let w = parse_toml(
            "ts.toml",
            "include = [{ spec = \"fibo\", cpus = [3, 1, 3] },\n\
             { spec = \"hackbench[groups=1]\", cpus = [2] },\n\
             { spec = \"pinned-spinners[threads=2]\", cpus = [1, 2] }]\n",
        )
        .unwrap();
        let cpus = |prefix: &str| -> Vec<Option<Vec<u32>>> {
            w.tasks.iter().filter(|t| t.name.starts_with(prefix)).map(|t| t.cpus.clone()).collect()
        };
        assert_eq!(cpus("fibo."), vec![Some(vec![1, 3])]);
        let hb = cpus("hackbench.");
        assert!(hb.len() >= 2 && hb.iter().all(|c| c == &Some(vec![2])), "{hb:?}");
        assert_eq!(cpus("pinned-spinners."), vec![Some(vec![0])]);
        assert!(w.affinity_changes.iter().all(|a| a.cpus.is_none()), "the unpinning stays the program's");
        // A mask with no CPU is refused at the include's line.
        let e =
            parse_toml("e.toml", "name = \"x\"\ninclude = [{ spec = \"fibo\", cpus = [] }]\n").unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (2, "include.cpus"), "{e}");
    }

    #[test]
    fn a_task_or_an_included_application_can_be_in_the_background() {
        let w = parse_toml(
            "probe.toml",
            "include = [\"hackbench[groups=1]\", { spec = \"fibo\", background = true }]\nstop = \"all_done\"\n\
             [[task]]\nname = \"mon\"\nbackground = true\nops = [ { sleep = \"1s\" } ]\n",
        )
        .unwrap();
        let bg: Vec<&str> = w.tasks.iter().filter(|t| t.background).map(|t| t.name.as_str()).collect();
        assert_eq!(bg, vec!["mon", "fibo.fibo"]);
        assert!(w.tasks.iter().filter(|t| t.name.starts_with("hackbench.")).all(|t| !t.background));
        // The probe generator is a background task of its own accord.
        let p = crate::generators::builtin("latency-probe").unwrap().unwrap();
        assert!(p.tasks.len() == 1 && p.tasks[0].background);
        // Waiting for all to be done with nothing in the foreground is refused at `stop`.
        let e = parse_toml("m.toml", "include = [\"latency-probe\"]\n\nstop = \"all_done\"\n").unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (3, "stop"), "{e}");
        assert!(e.msg.contains("background"), "{e}");
        // Without background tasks, a workload of templates only (0 instances) still reads, as the
        // rt-app importer writes it (`instance: 0`; found by the rtapp_json fuzz target).
        let w = parse_toml(
            "zero.toml",
            "stop = \"all_done\"\n[[task]]\nname = \"t\"\ninstances = 0\nops = [ { compute = \"1ms\" } ]\n",
        )
        .unwrap();
        assert_eq!(w.tasks[0].instances, 0);
    }
}
