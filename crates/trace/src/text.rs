//! Text traces: the kernel's own `trace` / `trace_pipe` output, `trace-cmd report`, and `perf script`
//! (also `perf sched script`), in both the kernel's `key=value` event format and the older
//! libtraceevent plugin format (`bash:42 [120] S ==> swapper/1:0 [120]`).
//!
//! Every event line has the same skeleton, only the task column differs:
//!
//! ```text
//! ftrace:     bash-42      [001] d..2. 123.456789: sched_switch: prev_comm=bash prev_pid=42 ...
//! ftrace+tgid bash-42  (   42) [001] d..2. 123.456789: sched_switch: ...
//! trace-cmd:  bash-42      [001] 123.456789: sched_switch:    bash:42 [120] S ==> ...
//! perf:       bash    42   [001] 123.456789:  sched:sched_switch: prev_comm=bash ...   (or 41/42)
//! ```
//!
//! so a line is read as: the task (`comm-pid`, or `comm pid[/tid]` for perf, optionally a `(tgid)`),
//! the first `[NNN]` CPU column, an optional flags column (`d.s4.`: its third letter says hard IRQ `h`
//! or soft IRQ `s` context), the timestamp (`secs.frac:`), the event name and its fields. Fields are
//! found by their keys in the format's order, so a `comm` containing spaces still reads right.
//! Comments (`#`), trace-cmd's headers (`cpus=2`, `version = 6`, `CPU 3 is empty`) and other
//! tracepoints are skipped; `CPU:N [LOST M EVENTS]` becomes a [`Kind::Lost`] on that CPU. A line that
//! looks like none of these, or a scheduling event whose fields do not read, is an error naming the
//! line.

use crate::event::{Event, Kind, Loc, PrevState, RawTrace, TaskRef};
use crate::TraceError;
use schedlab_core::Ns;

/// Reads a text trace. `name` is the file name for error messages.
pub fn read(name: &str, src: &str) -> Result<RawTrace, TraceError> {
    let mut out = RawTrace { format: "text", ..RawTrace::default() };
    // Lost-event markers wait for the next event on their CPU to take its timestamp.
    let mut pending_lost: Vec<(u32, Option<u64>, usize)> = Vec::new();
    let mut after_other_event = false;
    let ends_with_newline = src.ends_with('\n');
    let nlines = src.lines().count();
    let mut kinds = Formats::default();
    for (i, line) in src.lines().enumerate() {
        let lineno = i + 1;
        let err = |msg: String| TraceError::Parse { file: name.to_string(), loc: Loc::Line(lineno), msg };
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix('#') {
            if let Some(p) = rest.find("#P:") {
                out.nr_cpus = rest[p + 3..].trim().parse().ok();
                check_nr_cpus(out.nr_cpus).map_err(err)?;
            }
            continue;
        }
        if let Some(h) = header(trimmed) {
            match h {
                Header::Cpus(n) => {
                    out.nr_cpus = Some(n);
                    check_nr_cpus(out.nr_cpus).map_err(err)?;
                }
                Header::Lost(cpu, count) => pending_lost.push((cpu, count, lineno)),
                Header::Ignored => {}
            }
            continue;
        }
        let parsed = match parse_line(line) {
            Some(p) => p,
            None if after_other_event => continue, // a multi-line message of a skipped event (bprint)
            None if lineno == nlines && !ends_with_newline => {
                return Err(err(format!("the trace ends in the middle of a line: `{}`", clip(line))))
            }
            None => return Err(err(format!("not a trace event line: `{}`", clip(line)))),
        };
        let event_name = parsed.event.strip_prefix("sched:").unwrap_or(parsed.event);
        let kind = match fields(event_name, parsed.payload, &mut kinds) {
            Ok(Some(k)) => k,
            Ok(None) => {
                out.skipped += 1;
                after_other_event = true;
                continue;
            }
            Err(msg) => {
                let cut = lineno == nlines && !ends_with_newline;
                let why = if cut { "the trace ends in the middle of this event" } else { msg.as_str() };
                return Err(err(format!("{event_name}: {why}: `{}`", clip(line))));
            }
        };
        after_other_event = false;
        if let Some(tgid) = parsed.tgid {
            out.tgids.push((parsed.pid, tgid));
        }
        let mut k = 0;
        while k < pending_lost.len() {
            if pending_lost[k].0 == parsed.cpu {
                let (cpu, count, l) = pending_lost.remove(k);
                out.events.push(Event {
                    ts: parsed.ts,
                    cpu,
                    current: None,
                    irq: None,
                    kind: Kind::Lost { count },
                    loc: Loc::Line(l),
                });
            } else {
                k += 1;
            }
        }
        out.events.push(Event {
            ts: parsed.ts,
            cpu: parsed.cpu,
            current: Some(parsed.pid),
            irq: parsed.irq,
            kind,
            loc: Loc::Line(lineno),
        });
    }
    out.format = kinds.name();
    out.check_cpus().map_err(|(loc, msg)| TraceError::Parse { file: name.to_string(), loc, msg })?;
    Ok(out)
}

/// Which event formats were seen, to name the input's format.
#[derive(Default)]
struct Formats {
    key_value: bool,
    plugin: bool,
}

impl Formats {
    fn name(&self) -> &'static str {
        match (self.key_value, self.plugin) {
            (true, true) => "text (key=value and plugin)",
            (false, true) => "text (plugin)",
            _ => "text (key=value)",
        }
    }
}

fn clip(line: &str) -> String {
    let t = line.trim();
    match t.char_indices().nth(120) {
        Some((i, _)) => format!("{}...", &t[..i]),
        None => t.to_string(),
    }
}

enum Header {
    Cpus(u32),
    Lost(u32, Option<u64>),
    Ignored,
}

/// A CPU count from a header (`#P:n`, `cpus=n`) within [`crate::event::MAX_CPUS`].
fn check_nr_cpus(n: Option<u32>) -> Result<(), String> {
    match n {
        Some(n) if n > crate::event::MAX_CPUS => {
            Err(format!("{n} CPUs is more than a trace may have ({})", crate::event::MAX_CPUS))
        }
        _ => Ok(()),
    }
}

/// trace-cmd's and ftrace's non-event lines.
fn header(t: &str) -> Option<Header> {
    if let Some(n) = t.strip_prefix("cpus=") {
        return n.trim().parse().ok().map(Header::Cpus);
    }
    if t.starts_with("version =") || t.starts_with("#####") {
        return Some(Header::Ignored);
    }
    if t.starts_with("CPU ") && t.ends_with(" is empty") {
        return Some(Header::Ignored);
    }
    // `CPU:1 [LOST 123 EVENTS]` (trace-cmd, trace_pipe).
    if let Some(rest) = t.strip_prefix("CPU:") {
        let (cpu, rest) = rest.split_once(' ')?;
        let cpu: u32 = cpu.trim().parse().ok()?;
        let inner = rest.trim().strip_prefix("[LOST ")?.strip_suffix(" EVENTS]")?;
        return Some(Header::Lost(cpu, inner.trim().parse().ok()));
    }
    None
}

/// The common part of an event line.
struct Line<'a> {
    pid: i32,
    tgid: Option<i32>,
    cpu: u32,
    irq: Option<bool>,
    ts: Ns,
    event: &'a str,
    payload: &'a str,
}

/// Splits an event line into its columns; `None` if it is not one.
fn parse_line(line: &str) -> Option<Line<'_>> {
    let (cpu_at, cpu_end, cpu) = cpu_column(line)?;
    let (pid, tgid) = task_column(&line[..cpu_at])?;
    let rest = &line[cpu_end..];
    let mut irq = None;
    let mut ts = None;
    let mut after_ts = 0;
    let mut cursor = 0;
    for tok in rest.split_whitespace() {
        let start = cursor + rest[cursor..].find(tok)?;
        cursor = start + tok.len();
        if let Some(t) = tok.strip_suffix(':').and_then(parse_ts) {
            ts = Some(t);
            after_ts = cursor;
            break;
        }
        if irq.is_none() && tok.len() >= 3 && tok.chars().all(|c| c.is_ascii_alphanumeric() || c == '.') {
            irq = tok.chars().nth(2).map(|c| "hHsSzZ".contains(c));
        }
    }
    let ts = ts?;
    let tail = &rest[after_ts..];
    let ev_start = tail.len() - tail.trim_start().len();
    let tail2 = &tail[ev_start..];
    let ev_end = tail2.find(':')?;
    let event = &tail2[..ev_end];
    // `sched:sched_switch:` (perf) has the colon inside the name.
    let (event, payload) = if event == "sched" || !tail2[ev_end + 1..].starts_with(char::is_whitespace) {
        let second = tail2[ev_end + 1..].find(':')? + ev_end + 1;
        (&tail2[..second], &tail2[second + 1..])
    } else {
        (event, &tail2[ev_end + 1..])
    };
    if event.is_empty() || event.contains(char::is_whitespace) {
        return None;
    }
    Some(Line { pid, tgid, cpu, irq, ts, event, payload: payload.trim() })
}

/// The first ` [NNN]` column: its start, end and value.
fn cpu_column(line: &str) -> Option<(usize, usize, u32)> {
    let b = line.as_bytes();
    let mut i = 0;
    while let Some(off) = line[i..].find('[') {
        let at = i + off;
        let close = line[at..].find(']').map(|c| at + c);
        if let Some(close) = close {
            let inner = &line[at + 1..close];
            let spaced = at == 0 || b[at - 1].is_ascii_whitespace() || b[at - 1] == b')';
            if spaced && !inner.is_empty() && inner.bytes().all(|c| c.is_ascii_digit()) {
                return Some((at, close + 1, inner.parse().ok()?));
            }
        }
        i = at + 1;
    }
    None
}

/// `comm-pid`, `comm-pid (tgid)`, `comm pid` or `comm pid/tid`: the thread id and the tgid if given.
fn task_column(head: &str) -> Option<(i32, Option<i32>)> {
    let mut head = head.trim_end();
    let mut tgid = None;
    if head.ends_with(')') {
        let open = head.rfind('(')?;
        tgid = head[open + 1..head.len() - 1].trim().parse().ok();
        head = head[..open].trim_end();
    }
    let head = head.trim_start();
    let last = head.split_whitespace().last()?;
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    // perf: the last column is `tid` or `pid/tid`.
    if let Some((p, t)) = last.split_once('/') {
        if numeric(p) && numeric(t) {
            return Some((t.parse().ok()?, tgid.or(p.parse().ok())));
        }
    }
    if numeric(last) && head.len() > last.len() {
        return Some((last.parse().ok()?, tgid));
    }
    let (_, pid) = head.rsplit_once('-')?;
    Some((pid.parse().ok()?, tgid))
}

/// `123.456789` (any number of decimals up to 9) as nanoseconds.
fn parse_ts(s: &str) -> Option<Ns> {
    let (secs, frac) = s.split_once('.')?;
    if secs.is_empty() || frac.is_empty() || frac.len() > 9 {
        return None;
    }
    if !secs.bytes().all(|c| c.is_ascii_digit()) || !frac.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let frac_ns: Ns = frac.parse::<Ns>().ok()? * 10u64.pow(9 - frac.len() as u32);
    secs.parse::<Ns>().ok()?.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// Reads the fields of a scheduling event; `Ok(None)` for events schedlab does not use.
fn fields(event: &str, p: &str, seen: &mut Formats) -> Result<Option<Kind>, String> {
    let kind = match event {
        "sched_switch" => {
            if p.contains("prev_comm=") {
                seen.key_value = true;
                let v = keys(
                    p,
                    &[
                        ("prev_comm", true),
                        ("prev_pid", true),
                        ("prev_prio", true),
                        ("prev_state", true),
                        ("next_comm", true),
                        ("next_pid", true),
                        ("next_prio", true),
                    ],
                )?;
                let state = v[3].unwrap_or("").trim_end_matches("==>").trim();
                Kind::Switch {
                    prev: task(v[0], v[1], v[2])?,
                    prev_state: PrevState::from_letters(state)
                        .ok_or_else(|| format!("unknown prev_state `{state}`"))?,
                    next: task(v[4], v[5], v[6])?,
                }
            } else {
                seen.plugin = true;
                let (left, right) = p.split_once("==>").ok_or("no `==>` between the two tasks")?;
                let left = left.trim();
                let (left, state) = left.rsplit_once(char::is_whitespace).ok_or("no prev_state")?;
                let prev_state =
                    PrevState::from_letters(state).ok_or_else(|| format!("unknown prev_state `{state}`"))?;
                Kind::Switch { prev: plugin_task(left)?, prev_state, next: plugin_task(right.trim())? }
            }
        }
        "sched_waking" | "sched_wakeup" | "sched_wakeup_new" => {
            let (task, target_cpu) = if p.contains("comm=") {
                seen.key_value = true;
                let v = keys(
                    p,
                    &[
                        ("comm", true),
                        ("pid", true),
                        ("prio", false),
                        ("success", false),
                        ("target_cpu", true),
                    ],
                )?;
                (task(v[0], v[1], v[2])?, num(v[4], "target_cpu")?)
            } else {
                // `comm:pid [prio] success=1 CPU:001` (the success field only on old kernels).
                seen.plugin = true;
                let (rest, cpu) = p.rsplit_once("CPU:").ok_or("no `CPU:` field")?;
                let rest = rest.trim();
                let rest = match rest.rsplit_once(char::is_whitespace) {
                    Some((r, s)) if s.starts_with("success=") => r,
                    _ => rest,
                };
                (plugin_task(rest.trim())?, num(Some(cpu), "CPU")?)
            };
            match event {
                "sched_wakeup_new" => Kind::WakeupNew { task, target_cpu },
                _ => Kind::Wake { task, target_cpu, woken: event == "sched_wakeup" },
            }
        }
        "sched_migrate_task" => {
            seen.key_value = true;
            let v = keys(
                p,
                &[("comm", true), ("pid", true), ("prio", false), ("orig_cpu", true), ("dest_cpu", true)],
            )?;
            Kind::Migrate {
                task: task(v[0], v[1], v[2])?,
                orig_cpu: num(v[3], "orig_cpu")?,
                dest_cpu: num(v[4], "dest_cpu")?,
            }
        }
        "sched_stat_runtime" => {
            // `runtime=1234 [ns]`, followed on older kernels by `vruntime=5678 [ns]`.
            let v = keys(p, &[("comm", true), ("pid", true), ("runtime", true), ("vruntime", false)])?;
            let runtime = v[2].unwrap_or("").trim_end_matches("[ns]").trim();
            Kind::Runtime { task: task(v[0], v[1], None)?, runtime_ns: num(Some(runtime), "runtime")? }
        }
        "sched_process_fork" => {
            let v = keys(p, &[("comm", true), ("pid", true), ("child_comm", true), ("child_pid", true)])?;
            Kind::Fork { parent: task(v[0], v[1], None)?, child: task(v[2], v[3], None)? }
        }
        "sched_process_exec" => {
            let v = keys(p, &[("filename", true), ("pid", true), ("old_pid", false)])?;
            Kind::Exec { pid: num(v[1], "pid")?, filename: v[0].unwrap_or("").to_string() }
        }
        "sched_process_exit" => {
            let v = keys(p, &[("comm", true), ("pid", true), ("prio", false), ("group_dead", false)])?;
            Kind::Exit { task: task(v[0], v[1], v[2])? }
        }
        _ => return Ok(None),
    };
    Ok(Some(kind))
}

/// Finds `key=value` fields in the given order (`required` or optional); a value runs to the next
/// key found, so it may contain spaces.
fn keys<'a>(p: &'a str, spec: &[(&str, bool)]) -> Result<Vec<Option<&'a str>>, String> {
    let mut starts: Vec<Option<(usize, usize)>> = Vec::with_capacity(spec.len());
    let mut pos = 0;
    for &(key, required) in spec {
        let pat = format!("{key}=");
        let mut found = None;
        let mut from = pos;
        while let Some(off) = p[from..].find(&pat) {
            let at = from + off;
            if at == 0 || p.as_bytes()[at - 1].is_ascii_whitespace() {
                found = Some((at, at + pat.len()));
                break;
            }
            from = at + 1;
        }
        match found {
            Some((at, val)) => {
                starts.push(Some((at, val)));
                pos = val;
            }
            None if required => return Err(format!("no `{key}=` field")),
            None => starts.push(None),
        }
    }
    let mut out = Vec::with_capacity(spec.len());
    for (i, s) in starts.iter().enumerate() {
        out.push(s.map(|(_, val)| {
            let end = starts[i + 1..].iter().flatten().next().map_or(p.len(), |&(at, _)| at);
            p[val..end].trim()
        }));
    }
    Ok(out)
}

fn num<T: std::str::FromStr>(v: Option<&str>, what: &str) -> Result<T, String> {
    let v = v.ok_or_else(|| format!("no `{what}`"))?;
    v.trim().parse().map_err(|_| format!("`{what}` is `{v}`, not a number"))
}

fn task(comm: Option<&str>, pid: Option<&str>, prio: Option<&str>) -> Result<TaskRef, String> {
    Ok(TaskRef {
        pid: num(pid, "pid")?,
        comm: comm.unwrap_or("").to_string(),
        prio: match prio {
            Some(p) => Some(num(Some(p), "prio")?),
            None => None,
        },
    })
}

/// `comm:pid [prio]` of the plugin format.
fn plugin_task(s: &str) -> Result<TaskRef, String> {
    let (name, prio) = match s.rsplit_once('[') {
        Some((n, p)) => (n.trim_end(), Some(p.trim_end_matches(']'))),
        None => (s, None),
    };
    let (comm, pid) = name.rsplit_once(':').ok_or_else(|| format!("`{name}` is not `comm:pid`"))?;
    task(Some(comm), Some(pid), prio)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> Event {
        let t = read("t", &format!("{line}\n")).unwrap();
        assert_eq!(t.events.len(), 1, "{line}");
        t.events.into_iter().next().unwrap()
    }

    #[test]
    fn reads_the_kernel_format_with_flags() {
        // As this machine's kernel (6.18) writes it.
        let e = one("            bash-29964   [001] d..2. 31418.705165: sched_switch: prev_comm=bash prev_pid=29964 prev_prio=120 prev_state=R+ ==> next_comm=dpkg next_pid=29926 next_prio=120");
        assert_eq!((e.ts, e.cpu, e.current, e.irq), (31_418_705_165_000, 1, Some(29964), Some(false)));
        let Kind::Switch { prev, prev_state, next } = e.kind else { panic!() };
        assert_eq!((prev.pid, prev.comm.as_str(), prev.prio), (29964, "bash", Some(120)));
        assert_eq!(prev_state, PrevState::Runnable);
        assert_eq!((next.pid, next.comm.as_str()), (29926, "dpkg"));
        let e = one("            bash-29964   [001] d.s4. 31418.705311: sched_waking: comm=dpkg pid=29926 prio=120 target_cpu=001");
        assert_eq!(e.irq, Some(true), "softirq context");
        assert!(matches!(e.kind, Kind::Wake { ref task, target_cpu: 1, woken: false } if task.pid == 29926));
    }

    #[test]
    fn reads_the_plugin_format_of_trace_cmd() {
        // From ARM-software/trappy tests/trace_not_raw.txt.
        let e = one("              ls-4734  [002] 106439.675591: sched_switch:         trace-cmd:4734 [120] R ==> migration/2:18 [0]");
        assert_eq!((e.ts, e.cpu, e.current, e.irq), (106_439_675_591_000, 2, Some(4734), None));
        let Kind::Switch { prev, prev_state, next } = e.kind else { panic!() };
        assert_eq!((prev.pid, prev.comm.as_str(), prev.prio), (4734, "trace-cmd", Some(120)));
        assert_eq!(prev_state, PrevState::Runnable);
        assert_eq!((next.pid, next.comm.as_str(), next.prio), (18, "migration/2", Some(0)));
        let e = one("          <idle>-0     [001] 106439.675742: sched_wakeup:         kworker/u8:2:1100 [120] success=1 CPU:003");
        assert!(
            matches!(e.kind, Kind::Wake { ref task, target_cpu: 3, woken: true } if task.comm == "kworker/u8:2")
        );
        assert_eq!(e.current, Some(0));
    }

    #[test]
    fn reads_perf_script_lines_with_pid_slash_tid_and_spaces_in_comm() {
        let e = one("     Web Content  4100/4101  [000] 12345.678901234:       sched:sched_switch: prev_comm=Web Content prev_pid=4101 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120");
        assert_eq!((e.ts, e.cpu, e.current), (12_345_678_901_234, 0, Some(4101)));
        let Kind::Switch { prev, prev_state, next } = e.kind else { panic!() };
        assert_eq!((prev.comm.as_str(), prev.pid), ("Web Content", 4101));
        assert_eq!(prev_state, PrevState::Blocked { uninterruptible: false });
        assert_eq!(next.pid, 0);
        let t = read("t", "  sleep 51 [001]   99.000001: sched:sched_process_exit: comm=sleep pid=51 prio=120 group_dead=true\n  bash  50 [000] 98.5: sched:sched_process_fork: comm=bash pid=50 child_comm=bash child_pid=51\n").unwrap();
        assert!(matches!(t.events[0].kind, Kind::Exit { ref task } if task.pid == 51));
        assert!(
            matches!(t.events[1].kind, Kind::Fork { ref parent, ref child } if parent.pid == 50 && child.pid == 51)
        );
        assert_eq!(t.events[1].ts, 98_500_000_000);
    }

    #[test]
    fn reads_sched_stat_runtime_of_new_and_old_kernels() {
        let e = one("  hog-614 [001] 32313.837468: sched_stat_runtime:   comm=hog pid=614 runtime=8292 [ns]");
        assert!(matches!(e.kind, Kind::Runtime { ref task, runtime_ns: 8292 } if task.pid == 614));
        let e = one(
            "  hog-614 [001] 1.5: sched_stat_runtime: comm=hog pid=614 runtime=8292 [ns] vruntime=99 [ns]",
        );
        assert!(matches!(e.kind, Kind::Runtime { runtime_ns: 8292, .. }));
    }

    #[test]
    fn tgid_column_headers_lost_events_and_other_tracepoints() {
        let src = "# tracer: nop\n# entries-in-buffer/entries-written: 3/3   #P:4\ncpus=4\nCPU 3 is empty\n\
                   ls-7 (      5) [002] .... 1.000000: bprint: fig: a\n gid=4\n\
                   CPU:2 [LOST 17 EVENTS]\n\
                   ls-7 (      5) [002] d..3 1.500000: sched_migrate_task: comm=ls pid=7 prio=120 orig_cpu=2 dest_cpu=0\n";
        let t = read("t", src).unwrap();
        assert_eq!(t.nr_cpus, Some(4));
        assert_eq!(t.skipped, 1);
        assert_eq!(t.tgids, vec![(7, 5)]);
        assert_eq!(t.events.len(), 2);
        assert_eq!((t.events[0].cpu, t.events[0].ts), (2, 1_500_000_000));
        assert!(matches!(t.events[0].kind, Kind::Lost { count: Some(17) }));
        assert!(matches!(t.events[1].kind, Kind::Migrate { orig_cpu: 2, dest_cpu: 0, .. }));
    }

    #[test]
    fn bad_and_truncated_lines_name_the_line() {
        let good = "  a-1 [000] 1.0: sched_switch: prev_comm=a prev_pid=1 prev_prio=120 prev_state=S ==> next_comm=b next_pid=2 next_prio=120\n";
        let e = read("x.txt", &format!("{good}hello world\n")).unwrap_err().to_string();
        assert!(e.contains("x.txt") && e.contains("line 2") && e.contains("not a trace event line"), "{e}");
        let e = read("x.txt", &format!("{good}  a-1 [000] 1.1: sched_switch: prev_comm=a prev_pid=1 prev_prio=120 prev_state=Q ==> next_comm=b next_pid=2 next_prio=120\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("unknown prev_state `Q`"), "{e}");
        let cut = &good[..good.len() - 30];
        let e = read("x.txt", &format!("{good}{cut}")).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("ends in the middle"), "{e}");
        let e = read("x.txt", "  a-1 [000] 1.0: sched_waking: comm=a pid=x prio=120 target_cpu=001\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1") && e.contains("`pid` is `x`"), "{e}");
    }

    #[test]
    fn cpu_numbers_beyond_the_limit_are_errors_naming_the_line() {
        let e = read("t.txt", "# tracer: nop\ncpus=3000000000\n").unwrap_err().to_string();
        assert_eq!(e, "t.txt: line 2: 3000000000 CPUs is more than a trace may have (8192)");
        let e =
            read("t.txt", "# entries-in-buffer/entries-written: 3/3   #P:9000\n").unwrap_err().to_string();
        assert_eq!(e, "t.txt: line 1: 9000 CPUs is more than a trace may have (8192)");
        let line = "  a-10 [000] d..3. 1.001: sched_waking: comm=b pid=11 prio=120 target_cpu=001\n";
        let far = line.replace("[000]", "[4000000000]");
        let e = read("t.txt", &format!("{line}{far}")).unwrap_err().to_string();
        assert_eq!(
            e,
            "t.txt: line 2: CPU 4000000000 is beyond the largest CPU number a trace may name (8191)"
        );
        let e = read("t.txt", &line.replace("target_cpu=001", "target_cpu=8192")).unwrap_err().to_string();
        assert!(e.contains("line 1: CPU 8192 is beyond"), "{e}");
        assert!(read("t.txt", &line.replace("target_cpu=001", "target_cpu=8191")).is_ok());
    }
}
