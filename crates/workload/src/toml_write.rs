//! Writes a [`Workload`] as TOML in the form [`parse_toml`](crate::parse_toml) reads, so any workload
//! (a built-in generator's output, an rt-app import) can be printed, edited and read back. Phases are
//! written expanded (as loops and `cpus` ops); barrier parties are written explicitly. Reading the text
//! back gives a workload that runs identically (tested for every built-in).

use crate::model::*;
use schedlab_core::{Ns, SchedClass};
use std::fmt::Write;

/// A duration in the largest unit that keeps it exact: `5ms`, `1500us`, `7ns`.
pub fn fmt_duration(ns: Ns) -> String {
    const UNITS: [(Ns, &str); 3] = [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")];
    for (scale, unit) in UNITS {
        if ns >= scale && ns.is_multiple_of(scale) {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

fn q(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn qd(ns: Ns) -> String {
    q(&fmt_duration(ns))
}

fn dist(d: Dist) -> String {
    match d {
        Dist::Fixed(v) => qd(v),
        Dist::Uniform { lo, hi } => format!("{{ uniform = [{}, {}] }}", qd(lo), qd(hi)),
        Dist::Exponential { mean } => format!("{{ exponential = {} }}", qd(mean)),
        Dist::Normal { mean, stddev } => format!("{{ normal = [{}, {}] }}", qd(mean), qd(stddev)),
        Dist::LogNormal { mean, stddev } => format!("{{ lognormal = [{}, {}] }}", qd(mean), qd(stddev)),
    }
}

fn cpus(list: &[u32]) -> String {
    format!("[{}]", list.iter().map(u32::to_string).collect::<Vec<_>>().join(", "))
}

/// Writes `ops[from..to]` as TOML array elements at `indent`.
fn write_ops(out: &mut String, w: &Workload, ops: &[Op], from: usize, to: usize, indent: usize) {
    let pad = " ".repeat(indent);
    let mut i = from;
    while i < to {
        let line = match ops[i] {
            Op::Loop { count, end } => {
                let c = if count == 0 { q("forever") } else { count.to_string() };
                let _ = writeln!(out, "{pad}{{ loop = {c}, ops = [");
                write_ops(out, w, ops, i + 1, end as usize, indent + 2);
                let _ = writeln!(out, "{pad}] }},");
                i = end as usize + 1;
                continue;
            }
            Op::EndLoop { .. } => unreachable!("loop ends are consumed with their loop"),
            Op::Compute { work } => format!("{{ compute = {} }}", dist(work)),
            Op::Spin { time } => format!("{{ spin = {} }}", dist(time)),
            Op::Sleep { time } => format!("{{ sleep = {} }}", dist(time)),
            Op::Timer { timer, period_ns, absolute } => {
                let mode = if absolute { ", mode = \"absolute\"" } else { "" };
                let r = if timer == 0 {
                    String::new()
                } else {
                    format!(", ref = {}", q(&w.timers[timer as usize].name))
                };
                format!("{{ timer = {}{mode}{r} }}", qd(period_ns))
            }
            Op::Yield => "{ yield = true }".into(),
            Op::Nice(n) => format!("{{ nice = {n} }}"),
            Op::SetClass { class, rt_priority } => {
                let name = crate::toml_form::class_name(class);
                if class.is_rt() {
                    format!("{{ policy = {}, rt_priority = {rt_priority} }}", q(name))
                } else {
                    format!("{{ policy = {} }}", q(name))
                }
            }
            Op::Lock(m) => format!("{{ lock = {} }}", q(&w.mutexes[m as usize])),
            Op::Unlock(m) => format!("{{ unlock = {} }}", q(&w.mutexes[m as usize])),
            Op::CondWait { cond, mutex } => {
                format!(
                    "{{ wait = {}, mutex = {} }}",
                    q(&w.conds[cond as usize]),
                    q(&w.mutexes[mutex as usize])
                )
            }
            Op::Signal(c) => format!("{{ signal = {} }}", q(&w.conds[c as usize])),
            Op::Broadcast(c) => format!("{{ broadcast = {} }}", q(&w.conds[c as usize])),
            Op::SemWait(s) => format!("{{ sem_wait = {} }}", q(&w.semaphores[s as usize].name)),
            Op::SemPost(s) => format!("{{ sem_post = {} }}", q(&w.semaphores[s as usize].name)),
            Op::Suspend(e) => format!("{{ suspend = {} }}", q(&w.events[e as usize])),
            Op::Resume(e) => format!("{{ resume = {} }}", q(&w.events[e as usize])),
            Op::SetCpus(l) => match w.cpu_lists[l as usize].as_slice() {
                [] => "{ cpus = \"all\" }".to_string(),
                list => format!("{{ cpus = {} }}", cpus(list)),
            },
            Op::Send { pipe, bytes } => {
                format!("{{ send = {}, bytes = {bytes} }}", q(&w.pipes[pipe as usize].name))
            }
            Op::Recv { pipe, bytes } => {
                format!("{{ recv = {}, bytes = {bytes} }}", q(&w.pipes[pipe as usize].name))
            }
            Op::Barrier(b) => format!("{{ barrier = {} }}", q(&w.barriers[b as usize].name)),
            Op::BarrierSpin { barrier, spin_ns } => {
                format!(
                    "{{ barrier = {}, spin_max = {} }}",
                    q(&w.barriers[barrier as usize].name),
                    qd(spin_ns)
                )
            }
            Op::Count(c) => format!("{{ count = {} }}", q(&w.counters[c as usize])),
            Op::Fork(t) => format!("{{ fork = {} }}", q(&w.tasks[t as usize].name)),
            Op::Exec(t) => format!("{{ exec = {} }}", q(&w.tasks[t as usize].name)),
            Op::WaitChildren => "{ wait_children = true }".into(),
            Op::WaitChild => "{ wait_child = true }".into(),
            Op::Io { device, service } => {
                format!("{{ io = {}, service = {} }}", q(&w.devices[device as usize]), dist(service))
            }
            Op::Exit => "{ exit = true }".into(),
        };
        let _ = writeln!(out, "{pad}{line},");
        i += 1;
    }
}

/// The workload as TOML text.
pub fn to_toml(w: &Workload) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# schedlab workload; format: docs/workload-format.md");
    let _ = writeln!(out, "name = {}", q(&w.name));
    if let Some(d) = w.duration_ns {
        let _ = writeln!(out, "duration = {}", qd(d));
    }
    match w.stop {
        StopWhen::Duration => {}
        StopWhen::AllDone => out.push_str("stop = \"all_done\"\n"),
        StopWhen::TemplateDone(t) => {
            let _ = writeln!(out, "stop = {}", q(&format!("task:{}", w.tasks[t as usize].name)));
        }
    }
    let mut section = |kind: &str, body: String| {
        let _ = write!(out, "\n[[{kind}]]\n{body}");
    };
    for m in &w.mutexes {
        section("mutex", format!("name = {}\n", q(m)));
    }
    for c in &w.conds {
        section("cond", format!("name = {}\n", q(c)));
    }
    for e in &w.events {
        section("event", format!("name = {}\n", q(e)));
    }
    for c in &w.counters {
        section("counter", format!("name = {}\n", q(c)));
    }
    for t in w.timers.iter().skip(1) {
        section("timer", format!("name = {}\nshared = {}\n", q(&t.name), t.shared));
    }
    for s in &w.semaphores {
        section("semaphore", format!("name = {}\ninitial = {}\n", q(&s.name), s.initial));
    }
    for d in &w.devices {
        section("device", format!("name = {}\n", q(d)));
    }
    for p in &w.pipes {
        let kind = match p.kind {
            PipeKind::Pipe => String::new(),
            PipeKind::UnixStream(acc) => format!("kind = \"unix-stream\"\nskb = {}\n", q(acc.name())),
        };
        section("pipe", format!("name = {}\ncapacity = {}\n{kind}", q(&p.name), p.capacity));
    }
    for b in &w.barriers {
        section("barrier", format!("name = {}\nparties = {}\n", q(&b.name), b.parties));
    }
    for g in w.groups.iter().skip(1) {
        let parent = &w.groups[g.parent as usize].name;
        section("group", format!("name = {}\nparent = {}\nshares = {}\n", q(&g.name), q(parent), g.shares));
    }
    for t in &w.tasks {
        let mut b = format!("name = {}\ninstances = {}\n", q(&t.name), t.instances);
        if t.threads {
            b.push_str("threads = true\n");
        }
        if t.background {
            b.push_str("background = true\n");
        }
        if let Some(p) = &t.process {
            let _ = writeln!(b, "process = {}", q(p));
        }
        let policy = match t.class {
            SchedClass::Normal => None,
            SchedClass::Batch => Some("batch"),
            SchedClass::Idle => Some("idle"),
            SchedClass::Iso => Some("iso"),
            SchedClass::Fifo => Some("fifo"),
            SchedClass::Rr => Some("rr"),
        };
        if let Some(p) = policy {
            let _ = writeln!(b, "policy = {}", q(p));
        }
        if t.nice != 0 {
            let _ = writeln!(b, "nice = {}", t.nice);
        }
        if t.class.is_rt() {
            let _ = writeln!(b, "rt_priority = {}", t.rt_priority);
        }
        if let Some(ns) = t.slice_ns {
            let _ = writeln!(b, "slice = {}", qd(ns));
        }
        if t.group != 0 {
            let _ = writeln!(b, "group = {}", q(&w.groups[t.group as usize].name));
        }
        if let Some(c) = &t.cpus {
            let _ = writeln!(b, "cpus = {}", cpus(c));
        }
        if t.start_ns != 0 {
            let _ = writeln!(b, "start = {}", qd(t.start_ns));
        }
        if let Some(a) = &t.activity {
            let parts: Vec<String> =
                Activity::FIELDS.iter().zip(a.values()).map(|(k, v)| format!("{k} = {v}")).collect();
            let _ = writeln!(b, "activity = {{ {} }}", parts.join(", "));
        }
        b.push_str("ops = [\n");
        write_ops(&mut b, w, &t.program.ops, 0, t.program.ops.len(), 2);
        b.push_str("]\n");
        section("task", b);
    }
    for a in &w.affinity_changes {
        let mut b = format!("task = {}\nat = {}\n", q(&w.tasks[a.template as usize].name), qd(a.at_ns));
        if let Some(c) = &a.cpus {
            let _ = writeln!(b, "cpus = {}", cpus(c));
        }
        section("affinity", b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_toml;

    #[test]
    fn durations_use_the_largest_exact_unit() {
        assert_eq!(fmt_duration(5_000_000), "5ms");
        assert_eq!(fmt_duration(1_500_000), "1500us");
        assert_eq!(fmt_duration(7), "7ns");
        assert_eq!(fmt_duration(0), "0ns");
        assert_eq!(fmt_duration(3_000_000_000), "3s");
    }

    #[test]
    fn a_workload_survives_the_round_trip() {
        let src = r#"
name = "rt"
duration = "2s"
stop = "task:b"
[[mutex]]
name = "m \"quoted\""
[[cond]]
name = "c"
[[semaphore]]
name = "s"
initial = 1
[[event]]
name = "e"
[[counter]]
name = "done"
[[device]]
name = "disk"
[[pipe]]
name = "p"
capacity = 100
[[group]]
name = "g"
shares = 512
[[task]]
name = "a"
instances = 2
threads = true
policy = "rr"
rt_priority = 7
group = "g"
cpus = [0, 1]
start = "3ms"
activity = { l2 = 10258, mmx = 4925 }
phases = [ { loop = 3, cpus = [1], ops = [ { compute = { normal = ["2ms", "500us"] } }, { lock = "m \"quoted\"" }, { wait = "c", mutex = "m \"quoted\"" }, { unlock = "m \"quoted\"" } ] } ]
[[task]]
name = "b"
background = true
nice = -3
slice = "300us"
ops = [ { loop = "forever", ops = [ { timer = "1ms", mode = "absolute", ref = "tick" }, { signal = "c" }, { io = "disk", service = { lognormal = ["1ms", "1ms"] } }, { sem_wait = "s" }, { sem_post = "s" }, { resume = "e" }, { count = "done" }, { send = "p", bytes = 10 }, { recv = "p", bytes = 10 }, { yield = true } ] }, { fork = "c" }, { wait_children = true }, { wait_child = true }, { exec = "d" } ]
[[task]]
name = "c"
instances = 0
process = "cc"
policy = "batch"
ops = [ { suspend = "e" }, { spin = { exponential = "3us" } }, { sleep = { uniform = ["1us", "2us"] } } ]
[[task]]
name = "d"
instances = 0
ops = [ { compute = "1ms" }, { exit = true } ]
[[affinity]]
task = "a"
at = "1s"
"#;
        let w = parse_toml("rt.toml", src).unwrap();
        let text = to_toml(&w);
        let back = parse_toml("show.toml", &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back, w, "{text}");
        assert_eq!(to_toml(&back), text);
    }
}
