//! rt-app JSON import (scheduler-tools/rt-app, doc/tutorial.txt), with rt-app's semantics:
//!
//! * event keys match by prefix in rt-app's order (lock, unlock, wait, signal, broad, sync, sleep,
//!   runtime, run, timer, suspend, resume, memrun, mem, iorun, yield, barrier, fork, sem_post,
//!   sem_wait), so `run1`, `sleep2` repeat events, and events run in file order (duplicate keys kept);
//! * `run` is calibrated work (it scales with CPU speed), `runtime` wall-clock busy time; durations in
//!   microseconds;
//! * a timer's period counts from its previous expiry; timers are shared by all threads that name them
//!   unless the ref starts with `unique` (then each thread has its own); `mode` relative (default:
//!   an overrun restarts the grid) or absolute;
//! * `sync` signals the condition then waits on it with the mutex the thread holds (rt-app's
//!   `rtapp_sig_and_wait`; its example files bracket `sync` with `lock` and `unlock` themselves, so the
//!   tutorial's "lock, signal, wait, unlock" describes the whole idiom); a barrier's user count is the
//!   number of threads naming
//!   it; `suspend`/`resume` keep no memory of an early resume, `sem_post`/`sem_wait` do;
//! * `instance` threads named `<task>-<i>`, `phases` in file order with their own `loop` (default 1)
//!   and `cpus` (inheriting the thread's), thread `loop` (default -1: forever) around all phases,
//!   `delay`, `policy`/`priority` (nice for SCHED_OTHER/BATCH/IDLE, RT priority otherwise, default 10),
//!   `cpus`, `taskgroup` paths, `global.duration` (-1: until every thread ends), `default_policy`;
//! * the legacy rt-app 0.x thread format (`exec`, `period`, `lock_order`, `resources`) is translated:
//!   each loop takes the listed resources in order around their durations, runs the rest of `exec`,
//!   then waits for the next `period`.
//!
//! What schedlab cannot model is imported as close as it can be and reported as a warning naming the
//! key, never dropped silently (`mem`/`iorun` become CPU time; SCHED_DEADLINE, priority inheritance,
//! uclamp, NUMA binding and logging options are reported and ignored).

pub mod json;

use crate::model::*;
use crate::toml_form::WorkloadError;
use json::{Json, Value};
use schedlab_core::{Ns, SchedClass};
use std::collections::HashMap;

/// CPU time per byte for `mem` events (a memory write at a few GB/s).
const MEM_NS_PER_BYTE_X1000: u64 = 250;
/// CPU time per byte for `iorun` events (a write to /dev/null through the VFS).
const IORUN_NS_PER_BYTE_X1000: u64 = 1000;

/// An imported workload and the warnings about what could not be modelled.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The workload.
    pub workload: Workload,
    /// One line per key that was approximated or ignored.
    pub warnings: Vec<String>,
}

/// rt-app's event prefixes, in its matching order.
const EVENTS: [&str; 20] = [
    "lock", "unlock", "wait", "signal", "broad", "sync", "sleep", "runtime", "run", "timer", "suspend",
    "resume", "memrun", "mem", "iorun", "yield", "barrier", "fork", "sem_post", "sem_wait",
];

const THREAD_KEYS: [&str; 14] = [
    "instance",
    "loop",
    "policy",
    "priority",
    "cpus",
    "delay",
    "phases",
    "taskgroup",
    "dl-runtime",
    "dl-period",
    "dl-deadline",
    "nodes_membind",
    "util_min",
    "util_max",
];

const LEGACY_KEYS: [&str; 5] = ["exec", "period", "deadline", "lock_order", "resources"];

struct Ctx<'a> {
    file: &'a str,
    w: Workload,
    warnings: Vec<String>,
    mutexes: HashMap<String, u32>,
    conds: HashMap<String, u32>,
    events: HashMap<String, u32>,
    sems: HashMap<String, u32>,
    barriers: HashMap<String, u32>,
    timers: HashMap<String, u32>,
    templates: HashMap<String, u32>,
    /// Legacy resource types from the top-level `resources` object.
    legacy_types: HashMap<String, (String, Option<String>)>,
}

type R<T> = Result<T, WorkloadError>;

impl Ctx<'_> {
    fn err(&self, at: &Json, key: &str, msg: impl Into<String>) -> WorkloadError {
        WorkloadError {
            file: self.file.into(),
            line: at.line,
            column: at.col,
            key: key.into(),
            msg: msg.into(),
        }
    }

    fn warn(&mut self, key: &str, msg: &str) {
        let line = format!("{}: {key}: {msg}", self.file);
        if !self.warnings.contains(&line) {
            self.warnings.push(line);
        }
    }

    fn id(map: &mut HashMap<String, u32>, list: &mut Vec<String>, name: &str) -> u32 {
        *map.entry(name.to_string()).or_insert_with(|| {
            list.push(name.to_string());
            list.len() as u32 - 1
        })
    }

    fn mutex(&mut self, name: &str) -> u32 {
        Self::id(&mut self.mutexes, &mut self.w.mutexes, name)
    }

    fn cond(&mut self, name: &str) -> u32 {
        Self::id(&mut self.conds, &mut self.w.conds, name)
    }

    fn event(&mut self, name: &str) -> u32 {
        Self::id(&mut self.events, &mut self.w.events, name)
    }

    fn sem(&mut self, name: &str) -> u32 {
        let sems = &mut self.w.semaphores;
        *self.sems.entry(name.to_string()).or_insert_with(|| {
            sems.push(SemSpec { name: name.to_string(), initial: 0 });
            sems.len() as u32 - 1
        })
    }

    fn barrier(&mut self, name: &str) -> u32 {
        let bs = &mut self.w.barriers;
        *self.barriers.entry(name.to_string()).or_insert_with(|| {
            bs.push(BarrierSpec { name: name.to_string(), parties: 0 });
            bs.len() as u32 - 1
        })
    }

    /// The workload's timer for rt-app's timer `ref` `name`, made on first use. A workload always
    /// holds schedlab's own per-task timer `default` (index 0), so an rt-app ref of that name (or
    /// of a name made here before) gets a fresh name (`default-rtapp`, then `-2`, ...): same-named
    /// rt-app refs still share one timer, and the workload still writes as TOML that reads back.
    fn timer(&mut self, name: &str, key: &str) -> u32 {
        if let Some(&i) = self.timers.get(name) {
            return i;
        }
        let mut fresh = name.to_string();
        let mut n = 1;
        while self.w.timers.iter().any(|t| t.name == fresh) {
            fresh = if n == 1 { format!("{name}-rtapp") } else { format!("{name}-rtapp-{n}") };
            n += 1;
        }
        if fresh != name {
            self.warn(
                key,
                &format!("timer `{name}` is named `{fresh}` (schedlab's per-task timer is `default`)"),
            );
        }
        self.w.timers.push(TimerSpec { name: fresh, shared: !name.starts_with("unique") });
        let i = self.w.timers.len() as u32 - 1;
        self.timers.insert(name.to_string(), i);
        i
    }

    fn cpu_list(&mut self, list: Vec<u32>) -> u32 {
        match self.w.cpu_lists.iter().position(|l| *l == list) {
            Some(i) => i as u32,
            None => {
                self.w.cpu_lists.push(list);
                self.w.cpu_lists.len() as u32 - 1
            }
        }
    }

    fn int(&self, v: &Json, key: &str) -> R<i64> {
        v.as_i64().ok_or_else(|| self.err(v, key, format!("expected a whole number, found {}", v.kind())))
    }

    fn us(&self, v: &Json, key: &str) -> R<Ns> {
        let n = self.int(v, key)?;
        if n < 0 {
            return Err(self.err(v, key, format!("{n} us is negative")));
        }
        Ok(n as Ns * 1000)
    }

    fn string<'j>(&self, v: &'j Json, key: &str) -> R<&'j str> {
        v.as_str().ok_or_else(|| self.err(v, key, format!("expected a string, found {}", v.kind())))
    }

    fn cpus(&self, v: &Json, key: &str) -> R<Vec<u32>> {
        let Value::Arr(items) = &v.v else {
            return Err(self.err(v, key, "expected an array of CPU numbers"));
        };
        let list: Option<Vec<u32>> =
            items.iter().map(|x| x.as_i64().filter(|n| (0..1024).contains(n)).map(|n| n as u32)).collect();
        match list {
            Some(l) if !l.is_empty() => Ok(l),
            Some(_) => Err(self.err(v, key, "an empty CPU list leaves the thread nowhere to run")),
            None => Err(self.err(v, key, "expected CPU numbers 0..=1023")),
        }
    }
}

/// Imports an rt-app JSON file. `file` is used in messages only.
pub fn import(file: &str, src: &str) -> Result<Imported, WorkloadError> {
    let root = json::parse(src).map_err(|e| WorkloadError {
        file: file.into(),
        line: e.line,
        column: e.col,
        key: String::new(),
        msg: e.msg,
    })?;
    let mut cx = Ctx {
        file,
        w: Workload {
            name: std::path::Path::new(file)
                .file_stem()
                .map_or(file.into(), |s| s.to_string_lossy().into_owned()),
            groups: vec![GroupSpec { name: "root".into(), parent: 0, shares: 1024 }],
            timers: vec![default_timer()],
            stop: StopWhen::AllDone,
            ..Workload::default()
        },
        warnings: Vec::new(),
        mutexes: HashMap::new(),
        conds: HashMap::new(),
        events: HashMap::new(),
        sems: HashMap::new(),
        barriers: HashMap::new(),
        timers: HashMap::new(),
        templates: HashMap::new(),
        legacy_types: HashMap::new(),
    };
    let Some(top) = root.as_obj() else { return Err(cx.err(&root, "", "an rt-app file is a JSON object")) };
    let mut default_policy = (SchedClass::Normal, false);
    if let Some(g) = root.get("global") {
        default_policy = global(&mut cx, g)?;
    }
    if let Some(res) = root.get("resources") {
        legacy_resources(&mut cx, res)?;
    }
    for (k, v) in top {
        if !["global", "tasks", "resources"].contains(&k.as_str()) {
            cx.warn(k, &format!("unknown top-level key ignored (line {})", v.line));
        }
    }
    // A fragment without tasks (rt-app's merge examples) imports as an empty workload with a warning;
    // running one is refused where workloads are loaded to run (as rt-app refuses such a file).
    let Some(tasks) = root.get("tasks") else {
        cx.warn("tasks", "no tasks: the workload is empty");
        cx.w.validate().map_err(|m| cx.err(&root, "", m))?;
        return Ok(Imported { workload: cx.w, warnings: cx.warnings });
    };
    let Some(entries) = tasks.as_obj() else {
        return Err(cx.err(tasks, "tasks", "expected an object of threads"));
    };
    // Templates first, so `fork` can name a thread defined later.
    for (i, (name, v)) in entries.iter().enumerate() {
        if cx.templates.insert(name.clone(), i as u32).is_some() {
            return Err(cx.err(v, &format!("tasks.{name}"), "a thread name appears twice"));
        }
    }
    for (name, v) in entries {
        let spec = thread(&mut cx, name, v, default_policy)?;
        cx.w.tasks.push(spec);
    }
    // A barrier's users are the threads that name it.
    for b in 0..cx.w.barriers.len() {
        let users: u64 =
            cx.w.tasks
                .iter()
                .filter(|t| t.program.ops.iter().any(|op| matches!(op, Op::Barrier(x) if *x == b as u32)))
                .map(|t| t.instances.max(1) as u64)
                .sum();
        cx.w.barriers[b].parties = users.max(1) as u32;
        if users < 2 {
            let name = cx.w.barriers[b].name.clone();
            cx.warn(&format!("barrier {name}"), "used by a single thread: it never blocks");
        }
    }
    cx.w.validate().map_err(|m| cx.err(&root, "tasks", m))?;
    Ok(Imported { workload: cx.w, warnings: cx.warnings })
}

fn policy_of(cx: &Ctx, v: &Json, key: &str) -> R<(SchedClass, bool)> {
    Ok(match cx.string(v, key)? {
        "SCHED_OTHER" => (SchedClass::Normal, false),
        "SCHED_BATCH" => (SchedClass::Batch, false),
        "SCHED_IDLE" => (SchedClass::Idle, false),
        "SCHED_FIFO" => (SchedClass::Fifo, false),
        "SCHED_RR" => (SchedClass::Rr, false),
        "SCHED_DEADLINE" => (SchedClass::Fifo, true),
        other => {
            return Err(cx.err(
                v,
                key,
                format!("unknown policy `{other}` (SCHED_OTHER, BATCH, IDLE, FIFO, RR, DEADLINE)"),
            ))
        }
    })
}

fn global(cx: &mut Ctx, g: &Json) -> R<(SchedClass, bool)> {
    let Some(entries) = g.as_obj() else { return Err(cx.err(g, "global", "expected an object")) };
    let mut policy = (SchedClass::Normal, false);
    for (k, v) in entries {
        let key = format!("global.{k}");
        match k.as_str() {
            "duration" => {
                let d = cx.int(v, &key)?;
                if d > 0 {
                    cx.w.duration_ns = Some(d as Ns * 1_000_000_000);
                } else if d != -1 {
                    return Err(cx.err(
                        v,
                        &key,
                        format!("{d}: expected seconds above 0, or -1 for no limit"),
                    ));
                }
            }
            "default_policy" => policy = policy_of(cx, v, &key)?,
            "calibration" => cx.warn(&key, "no effect: `run` is calibrated work by construction in schedlab"),
            "pi_enabled" if v.v == Value::Bool(true) => cx.warn(&key, "priority inheritance is not modelled"),
            "pi_enabled" => {}
            "lock_pages" | "logdir" | "log_basename" | "log_size" | "ftrace" | "gnuplot"
            | "cumulative_slack" | "io_device" | "mem_buffer_size" | "frag" => {
                cx.warn(&key, "setup or logging option, no effect on scheduling; ignored")
            }
            _ => cx.warn(&key, "unknown global key ignored"),
        }
    }
    if policy.1 {
        cx.warn(
            "global.default_policy",
            "SCHED_DEADLINE is not modelled; threads run as SCHED_FIFO priority 99",
        );
    }
    Ok(policy)
}

fn legacy_resources(cx: &mut Ctx, res: &Json) -> R<()> {
    let Some(entries) = res.as_obj() else { return Err(cx.err(res, "resources", "expected an object")) };
    for (name, v) in entries {
        let ty = v.get("type").and_then(Json::as_str).unwrap_or("mutex").to_string();
        let target = v.get("target").and_then(Json::as_str).map(str::to_string);
        cx.legacy_types.insert(name.clone(), (ty, target));
    }
    cx.warn("resources", "legacy resource declarations: used only to type the legacy `lock_order` resources");
    Ok(())
}

fn thread(cx: &mut Ctx, name: &str, v: &Json, default_policy: (SchedClass, bool)) -> R<TaskSpec> {
    let base = format!("tasks.{name}");
    let Some(entries) = v.as_obj() else { return Err(cx.err(v, &base, "expected a thread object")) };
    let mut spec = TaskSpec::new(name, Program::default());
    spec.process = Some(cx.w.name.clone()); // rt-app threads are threads of one process
    let (mut class, mut deadline) = default_policy;
    if let Some(p) = v.get("policy") {
        (class, deadline) = policy_of(cx, p, &format!("{base}.policy"))?;
    }
    spec.class = class;
    if deadline {
        cx.warn(
            &format!("{base}.policy"),
            "SCHED_DEADLINE is not modelled; the thread runs as SCHED_FIFO priority 99",
        );
        spec.rt_priority = 99;
    } else if class.is_rt() {
        spec.rt_priority = 10;
    }
    if let Some(p) = v.get("priority") {
        let key = format!("{base}.priority");
        let n = cx.int(p, &key)?;
        if class.is_rt() && !deadline {
            if !(1..=99).contains(&n) {
                return Err(cx.err(p, &key, format!("{n} is not an RT priority 1..=99")));
            }
            spec.rt_priority = n as u8;
        } else if !class.is_rt() {
            if !(-20..=19).contains(&n) {
                return Err(cx.err(p, &key, format!("{n} is not a nice level -20..=19")));
            }
            spec.nice = n as i8;
        }
    }
    if let Some(i) = v.get("instance") {
        let key = format!("{base}.instance");
        let n = cx.int(i, &key)?;
        if !(0..=100_000).contains(&n) {
            return Err(cx.err(i, &key, format!("{n} instances: expected 0..=100000")));
        }
        spec.instances = n as u32;
    }
    if let Some(c) = v.get("cpus") {
        spec.cpus = Some(cx.cpus(c, &format!("{base}.cpus"))?);
    }
    if let Some(d) = v.get("delay") {
        spec.start_ns = cx.us(d, &format!("{base}.delay"))?;
    }
    if let Some(tg) = v.get("taskgroup") {
        spec.group = taskgroup(cx, tg, &format!("{base}.taskgroup"))?;
    }
    for k in ["dl-runtime", "dl-period", "dl-deadline"] {
        if v.get(k).is_some() {
            cx.warn(&format!("{base}.{k}"), "SCHED_DEADLINE parameters are not modelled; ignored");
        }
    }
    for k in ["nodes_membind", "util_min", "util_max"] {
        if v.get(k).is_some() {
            cx.warn(
                &format!("{base}.{k}"),
                "not modelled (NUMA memory binding / utilization clamping); ignored",
            );
        }
    }
    let thread_loop = match v.get("loop") {
        None => 0,
        Some(l) => loop_count(cx, l, &format!("{base}.loop"))?,
    };
    let mut ops = Vec::new();
    let start = open_loop(&mut ops, thread_loop);
    match v.get("phases") {
        Some(phases) => {
            let key = format!("{base}.phases");
            let Some(list) = phases.as_obj() else {
                return Err(cx.err(phases, &key, "expected an object of phases"));
            };
            let any_cpus = list.iter().any(|(_, p)| p.get("cpus").is_some());
            for (pname, p) in list {
                let pkey = format!("{key}.{pname}");
                let Some(pentries) = p.as_obj() else {
                    return Err(cx.err(p, &pkey, "expected a phase object"));
                };
                if any_cpus {
                    // Phase affinity; phases without `cpus` inherit the thread's (or all CPUs).
                    let list = match p.get("cpus") {
                        Some(c) => cx.cpus(c, &format!("{pkey}.cpus"))?,
                        None => spec.cpus.clone().unwrap_or_default(),
                    };
                    let id = cx.cpu_list(list);
                    ops.push(Op::SetCpus(id));
                }
                let ploop = match p.get("loop") {
                    None => 1,
                    Some(l) => loop_count(cx, l, &format!("{pkey}.loop"))?,
                };
                let pstart = open_loop(&mut ops, ploop);
                events(cx, name, &pkey, pentries, &["loop", "cpus"], &mut ops)?;
                close_loop(&mut ops, pstart);
            }
            for (k, val) in entries {
                if !THREAD_KEYS.contains(&k.as_str()) {
                    cx.warn(
                        &format!("{base}.{k}"),
                        &format!(
                            "not a thread key (events belong in the phases); ignored (line {})",
                            val.line
                        ),
                    );
                }
            }
        }
        None => events(cx, name, &base, entries, &THREAD_KEYS, &mut ops)?,
    }
    close_loop(&mut ops, start);
    if ops.iter().all(|o| matches!(o, Op::Loop { .. } | Op::EndLoop { .. } | Op::SetCpus(_))) {
        cx.warn(&base, "the thread has no events: it exits at once");
        ops.clear();
    }
    // A program whose every op takes no time loops forever at one instant: refuse it here.
    let timed = ops.iter().any(|o| {
        matches!(
            o,
            Op::Compute { .. } | Op::Spin { .. } | Op::Sleep { .. } | Op::Timer { .. } | Op::Io { .. }
        ) || matches!(
            o,
            Op::Yield | Op::Suspend(_) | Op::SemWait(_) | Op::Barrier(_) | Op::CondWait { .. } | Op::Lock(_)
        )
    });
    if !timed && thread_loop == 0 && !ops.is_empty() {
        return Err(cx.err(v, &base, "the thread loops forever over events that take no time"));
    }
    crate::toml_form::check_locking(&ops, &cx.w.mutexes).map_err(|m| cx.err(v, &base, m))?;
    spec.program = Program { ops };
    Ok(spec)
}

fn loop_count(cx: &Ctx, v: &Json, key: &str) -> R<u32> {
    match cx.int(v, key)? {
        -1 => Ok(0),
        n if (1..=u32::MAX as i64).contains(&n) => Ok(n as u32),
        n => Err(cx.err(v, key, format!("{n}: expected a positive count or -1 (forever)"))),
    }
}

fn taskgroup(cx: &mut Ctx, v: &Json, key: &str) -> R<u32> {
    let path = cx.string(v, key)?;
    let mut parent = 0u32;
    let mut full = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        full.push('/');
        full.push_str(part);
        parent = match cx.w.groups.iter().position(|g| g.name == full) {
            Some(i) => i as u32,
            None => {
                cx.w.groups.push(GroupSpec { name: full.clone(), parent, shares: 1024 });
                cx.w.groups.len() as u32 - 1
            }
        };
    }
    Ok(parent)
}

/// Translates the events of a phase (or of a thread without phases), skipping `skip` keys.
fn events(
    cx: &mut Ctx,
    thread: &str,
    base: &str,
    entries: &[(String, Json)],
    skip: &[&str],
    ops: &mut Vec<Op>,
) -> R<()> {
    let legacy = entries.iter().any(|(k, _)| LEGACY_KEYS.contains(&k.as_str()));
    if legacy {
        return legacy_events(cx, base, entries, ops);
    }
    for (k, v) in entries {
        if skip.contains(&k.as_str()) {
            continue;
        }
        let key = format!("{base}.{k}");
        let Some(kind) = EVENTS.iter().find(|e| k.starts_with(*e)) else {
            cx.warn(&key, &format!("unknown key ignored (line {})", v.line));
            continue;
        };
        match *kind {
            "run" => ops.push(Op::Compute { work: Dist::Fixed(cx.us(v, &key)?) }),
            "runtime" => ops.push(Op::Spin { time: Dist::Fixed(cx.us(v, &key)?) }),
            "memrun" => {
                cx.warn(
                    &key,
                    "memrun's memory traffic is not modelled; it runs as `run` (calibrated CPU work)",
                );
                ops.push(Op::Compute { work: Dist::Fixed(cx.us(v, &key)?) });
            }
            "sleep" => match v.v {
                Value::Bool(_) => cx.warn(&key, "a legacy boolean `sleep` flag; ignored"),
                _ => ops.push(Op::Sleep { time: Dist::Fixed(cx.us(v, &key)?) }),
            },
            "mem" | "iorun" => {
                let bytes = cx.int(v, &key)?.max(0) as u64;
                let per = if *kind == "mem" { MEM_NS_PER_BYTE_X1000 } else { IORUN_NS_PER_BYTE_X1000 };
                let msg = format!("{kind} is modelled as CPU time, {} ns per 1000 bytes", per);
                cx.warn(&key, &msg);
                ops.push(Op::Compute { work: Dist::Fixed((bytes * per / 1000).max(1)) });
            }
            "timer" => {
                let r = v
                    .get("ref")
                    .map(|x| cx.string(x, &format!("{key}.ref")))
                    .transpose()?
                    .unwrap_or("unique");
                let r = r.to_string();
                let period = v.get("period").ok_or_else(|| cx.err(v, &key, "a timer needs `period` (us)"))?;
                let period_ns = cx.us(period, &format!("{key}.period"))?;
                if period_ns == 0 {
                    // rt-app's template.json: a zero period disables the timer.
                    cx.warn(&format!("{key}.period"), "a zero period: the timer never waits");
                    continue;
                }
                let absolute =
                    match v.get("mode").map(|m| cx.string(m, &format!("{key}.mode"))).transpose()? {
                        None | Some("relative") => false,
                        Some("absolute") => true,
                        Some(other) => {
                            return Err(cx.err(
                                v,
                                &format!("{key}.mode"),
                                format!("`{other}`: expected relative or absolute"),
                            ))
                        }
                    };
                let timer = cx.timer(&r, &format!("{key}.ref"));
                ops.push(Op::Timer { timer, period_ns, absolute });
            }
            "lock" => {
                let m = cx.mutex(cx.string(v, &key)?);
                ops.push(Op::Lock(m));
            }
            "unlock" => {
                let m = cx.mutex(cx.string(v, &key)?);
                ops.push(Op::Unlock(m));
            }
            "wait" | "sync" => {
                let r = v
                    .get("ref")
                    .ok_or_else(|| cx.err(v, &key, "expected { \"ref\": cond, \"mutex\": mutex }"))?;
                let m = v
                    .get("mutex")
                    .ok_or_else(|| cx.err(v, &key, "expected { \"ref\": cond, \"mutex\": mutex }"))?;
                let cond = cx.cond(cx.string(r, &format!("{key}.ref"))?);
                let mutex = cx.mutex(cx.string(m, &format!("{key}.mutex"))?);
                if *kind == "sync" {
                    ops.extend([Op::Signal(cond), Op::CondWait { cond, mutex }]);
                } else {
                    ops.push(Op::CondWait { cond, mutex });
                }
            }
            "signal" => {
                let c = cx.cond(cx.string(v, &key)?);
                ops.push(Op::Signal(c));
            }
            "broad" => {
                let c = cx.cond(cx.string(v, &key)?);
                ops.push(Op::Broadcast(c));
            }
            "suspend" | "resume" => {
                let target = match cx.string(v, &key)? {
                    "" => thread,
                    t => t,
                }
                .to_string();
                let e = cx.event(&target);
                ops.push(if *kind == "suspend" { Op::Suspend(e) } else { Op::Resume(e) });
            }
            "yield" => ops.push(Op::Yield),
            "barrier" => {
                let b = cx.barrier(cx.string(v, &key)?);
                ops.push(Op::Barrier(b));
            }
            "fork" => {
                let target = cx.string(v, &key)?;
                let t = *cx
                    .templates
                    .get(target)
                    .ok_or_else(|| cx.err(v, &key, format!("fork of unknown thread `{target}`")))?;
                ops.push(Op::Fork(t));
            }
            "sem_post" | "sem_wait" => {
                let s = cx.sem(cx.string(v, &key)?);
                ops.push(if *kind == "sem_post" { Op::SemPost(s) } else { Op::SemWait(s) });
            }
            _ => unreachable!("every prefix is handled"),
        }
    }
    Ok(())
}

/// The rt-app 0.x thread format: `exec` us of work per `period` us, resources taken in `lock_order`.
fn legacy_events(cx: &mut Ctx, base: &str, entries: &[(String, Json)], ops: &mut Vec<Op>) -> R<()> {
    cx.warn(base, "legacy rt-app 0.x format (exec/period/lock_order/resources): each loop takes the resources in order around their durations, runs the rest of `exec`, then waits for the next `period`");
    let get = |k: &str| entries.iter().find(|(x, _)| x == k).map(|(_, v)| v);
    let exec = match get("exec") {
        Some(v) => cx.us(v, &format!("{base}.exec"))?,
        None => 0,
    };
    let period = match get("period") {
        Some(v) => cx.us(v, &format!("{base}.period"))?,
        None => exec,
    };
    if get("deadline").is_some() {
        cx.warn(&format!("{base}.deadline"), "deadlines are not modelled; ignored");
    }
    let mut used: Ns = 0;
    if let Some(order) = get("lock_order") {
        let key = format!("{base}.lock_order");
        let Value::Arr(names) = &order.v else {
            return Err(cx.err(order, &key, "expected an array of resource names"));
        };
        let resources = get("resources");
        for n in names {
            let rname = cx.string(n, &key)?.to_string();
            let rspec = resources.and_then(|r| r.get(&rname));
            let duration = match rspec.and_then(|r| r.get("duration")) {
                Some(d) => cx.us(d, &format!("{base}.resources.{rname}.duration"))?,
                None => 0,
            };
            let access: Vec<String> = match rspec.and_then(|r| r.get("access")) {
                Some(Json { v: Value::Arr(a), .. }) => {
                    a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect()
                }
                _ => Vec::new(),
            };
            let held: Vec<u32> = access.iter().map(|m| cx.mutex(m)).collect();
            ops.extend(held.iter().map(|&m| Op::Lock(m)));
            let (ty, target) = cx.legacy_types.get(&rname).cloned().unwrap_or(("mutex".into(), None));
            match ty.as_str() {
                "wait" => {
                    let mutex = match held.last() {
                        Some(&m) => m,
                        None => {
                            let m = cx.mutex(&format!("{rname}.mutex"));
                            ops.push(Op::Lock(m));
                            m
                        }
                    };
                    let cond = cx.cond(&rname);
                    ops.push(Op::CondWait { cond, mutex });
                    if held.is_empty() {
                        ops.push(Op::Unlock(mutex));
                    }
                }
                "signal" | "broadcast" => {
                    let cond = cx.cond(target.as_deref().unwrap_or(&rname));
                    ops.push(if ty == "signal" { Op::Signal(cond) } else { Op::Broadcast(cond) });
                }
                _ => {
                    let m = cx.mutex(&rname);
                    ops.push(Op::Lock(m));
                    if duration > 0 {
                        ops.push(Op::Compute { work: Dist::Fixed(duration) });
                    }
                    ops.push(Op::Unlock(m));
                }
            }
            ops.extend(held.iter().rev().map(|&m| Op::Unlock(m)));
            used += duration;
        }
    }
    if exec > used {
        ops.push(Op::Compute { work: Dist::Fixed(exec - used) });
    }
    if period > 0 {
        let timer = cx.timer("unique-period", &format!("{base}.period"));
        ops.push(Op::Timer { timer, period_ns: period, absolute: true });
    }
    for (k, v) in entries {
        if !LEGACY_KEYS.contains(&k.as_str()) && !THREAD_KEYS.contains(&k.as_str()) {
            cx.warn(&format!("{base}.{k}"), &format!("not a legacy thread key; ignored (line {})", v.line));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fragment_without_tasks_imports_empty_with_a_warning() {
        let imp = import("global.json", r#"{ "global": { "duration": 1 } }"#).unwrap();
        assert!(imp.workload.tasks.is_empty());
        assert!(imp.warnings.iter().any(|w| w.contains("no tasks")), "{:?}", imp.warnings);
    }

    #[test]
    fn prefix_matched_events_in_file_order() {
        let src = r#"{
            "tasks": {
                "t": { "instance": 2, "loop": 3, "priority": -5,
                       "run0": 100, "runtime": 50, "sleep1": 200, "run1": 10,
                       "timer": { "ref": "tick", "period": 1000 },
                       "lock": "m", "sync": { "ref": "c", "mutex": "m" }, "unlock": "m", "barrier": "B" },
                "u": { "loop": -1, "delay": 5, "policy": "SCHED_FIFO",
                       "timer": { "ref": "unique", "period": 500, "mode": "absolute" }, "run": 20, "barrier": "B" }
            },
            "global": { "duration": 3, "logdir": "./" }
        }"#;
        let imp = import("x.json", src).unwrap();
        let w = &imp.workload;
        let t = &w.tasks[0];
        assert_eq!((t.instances, t.nice), (2, -5));
        use Op::*;
        assert_eq!(
            t.program.ops,
            vec![
                Loop { count: 3, end: 11 },
                Compute { work: Dist::Fixed(100_000) },
                Spin { time: Dist::Fixed(50_000) },
                Sleep { time: Dist::Fixed(200_000) },
                Compute { work: Dist::Fixed(10_000) },
                Timer { timer: 1, period_ns: 1_000_000, absolute: false },
                Lock(0),
                Signal(0),
                CondWait { cond: 0, mutex: 0 },
                Unlock(0),
                Barrier(0),
                EndLoop { start: 0 },
            ]
        );
        assert!(w.timers[1].shared && !w.timers[2].shared, "`tick` shared, `unique` per thread");
        let u = &w.tasks[1];
        assert_eq!((u.class, u.rt_priority, u.start_ns), (SchedClass::Fifo, 10, 5_000));
        assert_eq!(w.barriers[0].parties, 3, "2 instances of t + 1 of u");
        assert_eq!(w.duration_ns, Some(3_000_000_000));
        assert!(imp.warnings.iter().any(|l| l.contains("global.logdir")), "{:?}", imp.warnings);
    }

    #[test]
    fn a_timer_ref_named_default_is_renamed_shared_and_reads_back() {
        // Found by `scripts/fuzz rtapp_json`: schedlab's own per-task timer is `default`, so the
        // ref became a second `default` and the written TOML did not read back.
        let src = r#"{ "tasks": {
            "a": { "instance": 2, "run": 10, "timer": { "ref": "default", "period": 100 } },
            "b": { "run": 10, "timer": { "ref": "default-rtapp", "period": 100 },
                   "timer1": { "ref": "default", "period": 200 } } } }"#;
        let imp = import("d.json", src).unwrap();
        let w = &imp.workload;
        let names: Vec<(&str, bool)> = w.timers.iter().map(|t| (t.name.as_str(), t.shared)).collect();
        assert_eq!(names, vec![("default", false), ("default-rtapp", true), ("default-rtapp-rtapp", true)]);
        let timers = |t: &TaskSpec| -> Vec<u32> {
            t.program
                .ops
                .iter()
                .filter_map(|o| if let Op::Timer { timer, .. } = o { Some(*timer) } else { None })
                .collect()
        };
        assert_eq!((timers(&w.tasks[0]), timers(&w.tasks[1])), (vec![1], vec![2, 1]), "same ref, same timer");
        assert!(imp
            .warnings
            .iter()
            .any(|l| l.contains("tasks.a.timer.ref") && l.contains("`default-rtapp`")));
        let back = crate::parse_toml("d.toml", &crate::to_toml(w)).expect("the TOML reads back");
        assert_eq!(back.timers, w.timers);
    }

    #[test]
    fn bad_files_name_line_and_key() {
        let e = import("b.json", "{ \"tasks\": { \"t\": { \"run\": \"fast\" } } }").unwrap_err();
        assert_eq!((e.key.as_str(), e.line), ("tasks.t.run", 1));
        assert!(e.msg.contains("expected a whole number"), "{e}");
        let e =
            import("b.json", "{\n\"tasks\": {\n \"t\": { \"fork\": \"ghost\", \"run\": 1 } } }").unwrap_err();
        assert!(e.msg.contains("fork of unknown thread `ghost`") && e.line == 3, "{e}");
        let e = import("b.json", "{ \"tasks\": { \"t\": { \"policy\": \"SCHED_WHAT\", \"run\": 1 } } }")
            .unwrap_err();
        assert!(e.msg.contains("unknown policy"), "{e}");
        let e = import("b.json", "{ \"tasks\": { \"t\": { \"priority\": 40, \"run\": 1 } } }").unwrap_err();
        assert!(e.msg.contains("nice level"), "{e}");
        let e = import("b.json", "{ \"tasks\": { \"t\": { \"lock\": \"m\" } } }").unwrap_err();
        assert!(e.msg.contains("lock it again"), "{e}");
        let e = import("b.json", "{ \"tasks\": [1] }").unwrap_err();
        assert_eq!(e.key, "tasks");
        assert!(import("b.json", "{ \"tasks\": ").is_err());
    }

    #[test]
    fn unmodelled_keys_are_reported_not_dropped() {
        let src = r#"{ "tasks": { "t": { "loop": 1, "mem": 1000, "iorun": 500, "util_min": 512,
                       "policy": "SCHED_DEADLINE", "dl-runtime": 100, "frobnicate": 3, "run": 10 } } }"#;
        let imp = import("w.json", src).unwrap();
        for key in [
            "tasks.t.mem",
            "tasks.t.iorun",
            "tasks.t.util_min",
            "tasks.t.policy",
            "tasks.t.dl-runtime",
            "tasks.t.frobnicate",
        ] {
            assert!(imp.warnings.iter().any(|l| l.contains(key)), "no warning for {key}: {:?}", imp.warnings);
        }
        assert_eq!(imp.workload.tasks[0].rt_priority, 99);
    }
}
