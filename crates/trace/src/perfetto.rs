//! Perfetto protobuf traces: `Trace { repeated TracePacket packet = 1 }`, reading the kernel's
//! scheduling events from each packet's `FtraceEventBundle` (field 1) and thread groups from its
//! `ProcessTree` (field 2). Both event encodings Perfetto writes are read:
//!
//! * full `FtraceEvent`s (bundle field 2): timestamp, the current pid, `common_flags` (hard/soft IRQ
//!   context) and one of `sched_switch` (4), `sched_wakeup` (17), `sched_waking` (20),
//!   `sched_wakeup_new` (114), `task_newtask` (235, read as a fork by the current task),
//!   `sched_process_exec` (237), `sched_process_exit` (238), `sched_process_fork` (239),
//!   `sched_migrate_task` (491);
//! * the `compact_sched` form (bundle field 4) Perfetto uses by default for switches and wakings:
//!   parallel packed arrays with delta-encoded timestamps (the accumulator starts at 0 in each
//!   bundle, as Perfetto's trace processor decodes them) and comms interned per bundle; a compact
//!   switch does not name the previous task, which is the task the CPU's previous switch started
//!   (unknown, pid -1, for a CPU's first compact switch).
//!
//! A bundle's `lost_events` flag becomes a [`Kind::Lost`] on its CPU. Field numbers are those of
//! perfetto's protos/perfetto/trace (checked against the `perfetto` Python package's descriptors).
//! The decoder is written by hand (varints, length-delimited fields, fixed 32/64-bit fields skipped);
//! a truncated or malformed message is an error naming its byte offset.

use crate::event::{Event, Kind, Loc, PrevState, RawTrace, TaskRef};
use crate::TraceError;
use std::collections::HashMap;

/// IRQ-context bits of the kernel's trace entry flags: hard IRQ, soft IRQ, NMI.
const FLAGS_IRQ: u64 = 0x08 | 0x10 | 0x40;

/// One field's value.
enum Val<'a> {
    Int(u64),
    Bytes(&'a [u8], usize),
}

/// A cursor over one message; `base` is the message's offset in the file.
struct Msg<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
}

impl<'a> Msg<'a> {
    fn new(buf: &'a [u8], base: usize) -> Self {
        Msg { buf, pos: 0, base }
    }

    fn varint(&mut self) -> Result<u64, (usize, String)> {
        let start = self.base + self.pos;
        let mut v: u64 = 0;
        for shift in (0..70).step_by(7) {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err((start, "the trace ends inside a varint".into()));
            };
            self.pos += 1;
            if shift == 63 && b > 1 {
                return Err((start, "a varint longer than 64 bits".into()));
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err((start, "a varint longer than 10 bytes".into()))
    }

    /// The next field, `None` at the end of the message.
    fn next(&mut self) -> Result<Option<(u32, Val<'a>)>, (usize, String)> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let at = self.base + self.pos;
        let key = self.varint()?;
        let field = (key >> 3) as u32;
        if field == 0 {
            return Err((at, "field number 0 (not a protobuf message)".into()));
        }
        let val = match key & 7 {
            0 => Val::Int(self.varint()?),
            1 | 5 => {
                let n = if key & 7 == 1 { 8 } else { 4 };
                if self.pos + n > self.buf.len() {
                    return Err((at, "the trace ends inside a fixed-size field".into()));
                }
                let mut v = 0u64;
                for (i, b) in self.buf[self.pos..self.pos + n].iter().enumerate() {
                    v |= (*b as u64) << (8 * i);
                }
                self.pos += n;
                Val::Int(v)
            }
            2 => {
                let len = self.varint()? as usize;
                let start = self.pos;
                if len > self.buf.len() - start {
                    return Err((
                        at,
                        format!(
                            "field {field} says {len} bytes but only {} remain (truncated trace?)",
                            self.buf.len() - start
                        ),
                    ));
                }
                self.pos += len;
                Val::Bytes(&self.buf[start..start + len], self.base + start)
            }
            w => return Err((at, format!("unknown wire type {w} (not a Perfetto trace?)"))),
        };
        Ok(Some((field, val)))
    }
}

/// The values of a repeated scalar field, packed or not, appended to `out`.
fn push_repeated(v: &Val<'_>, out: &mut Vec<u64>) -> Result<(), (usize, String)> {
    match *v {
        Val::Int(x) => out.push(x),
        Val::Bytes(b, base) => {
            let mut m = Msg::new(b, base);
            while m.pos < b.len() {
                out.push(m.varint()?);
            }
        }
    }
    Ok(())
}

fn text(v: &Val<'_>) -> String {
    match *v {
        Val::Bytes(b, _) => String::from_utf8_lossy(b).into_owned(),
        Val::Int(_) => String::new(),
    }
}

fn int(v: &Val<'_>) -> u64 {
    match *v {
        Val::Int(x) => x,
        Val::Bytes(..) => 0,
    }
}

/// A signed protobuf `int32` (negative values are sign-extended to 64 bits on the wire).
fn i32v(v: &Val<'_>) -> i32 {
    int(v) as i64 as i32
}

/// Whether `bytes` start like a Perfetto trace: field 1, length-delimited (`0x0a`).
pub fn looks_like(bytes: &[u8]) -> bool {
    bytes.first() == Some(&0x0a)
}

/// Reads a Perfetto trace. `name` is the file name for error messages.
pub fn read(name: &str, bytes: &[u8]) -> Result<RawTrace, TraceError> {
    let mut r =
        Reader { out: RawTrace { format: "perfetto", ..RawTrace::default() }, last_next: HashMap::new() };
    r.trace(bytes).map_err(|(at, msg)| TraceError::Parse {
        file: name.to_string(),
        loc: Loc::Offset(at),
        msg,
    })?;
    r.out.check_cpus().map_err(|(loc, msg)| TraceError::Parse { file: name.to_string(), loc, msg })?;
    Ok(r.out)
}

struct Reader {
    out: RawTrace,
    /// The task each CPU's last switch started (the `prev` of its next compact switch).
    last_next: HashMap<u32, TaskRef>,
}

type R<T> = Result<T, (usize, String)>;

impl Reader {
    fn trace(&mut self, bytes: &[u8]) -> R<()> {
        let mut m = Msg::new(bytes, 0);
        while let Some((f, v)) = m.next()? {
            match (f, v) {
                (1, Val::Bytes(b, base)) => self.packet(b, base)?,
                (1, _) => return Err((0, "a TracePacket that is not a message".into())),
                _ => {}
            }
        }
        Ok(())
    }

    fn packet(&mut self, b: &[u8], base: usize) -> R<()> {
        let mut m = Msg::new(b, base);
        while let Some((f, v)) = m.next()? {
            match (f, v) {
                (1, Val::Bytes(b, base)) => self.bundle(b, base)?,
                (2, Val::Bytes(b, base)) => self.process_tree(b, base)?,
                _ => {}
            }
        }
        Ok(())
    }

    fn process_tree(&mut self, b: &[u8], base: usize) -> R<()> {
        let mut m = Msg::new(b, base);
        while let Some((f, v)) = m.next()? {
            if let (2, Val::Bytes(b, base)) = (f, v) {
                let (mut tid, mut tgid) = (None, None);
                let mut t = Msg::new(b, base);
                while let Some((f, v)) = t.next()? {
                    match f {
                        1 => tid = Some(i32v(&v)),
                        3 => tgid = Some(i32v(&v)),
                        _ => {}
                    }
                }
                if let (Some(tid), Some(tgid)) = (tid, tgid) {
                    self.out.tgids.push((tid, tgid));
                }
            }
        }
        Ok(())
    }

    fn bundle(&mut self, b: &[u8], base: usize) -> R<()> {
        // The CPU may come after the events in the encoding: collect first.
        let mut cpu = 0u32;
        let mut events = Vec::new();
        let mut compact = None;
        let mut lost = false;
        let mut m = Msg::new(b, base);
        while let Some((f, v)) = m.next()? {
            match (f, v) {
                (1, v) => cpu = int(&v) as u32,
                (2, Val::Bytes(b, base)) => events.push((b, base)),
                (3, v) => lost = int(&v) != 0,
                (4, Val::Bytes(b, base)) => compact = Some((b, base)),
                _ => {}
            }
        }
        if cpu >= crate::event::MAX_CPUS {
            // Checked here too, not only on events: a bundle with no events still sizes tables.
            return Err((
                base,
                format!(
                    "CPU {cpu} is beyond the largest CPU number a trace may name ({})",
                    crate::event::MAX_CPUS - 1
                ),
            ));
        }
        self.out.nr_cpus = Some(self.out.nr_cpus.unwrap_or(0).max(cpu.saturating_add(1)));
        let mut first = true;
        for (b, base) in events {
            if let Some(mut e) = self.event(cpu, b, base)? {
                if first && lost {
                    let l = Event { kind: Kind::Lost { count: None }, current: None, irq: None, ..e.clone() };
                    self.out.events.push(l);
                }
                first = false;
                if let Kind::Switch { next, .. } = &e.kind {
                    self.last_next.insert(cpu, next.clone());
                }
                e.loc = Loc::Offset(base);
                self.out.events.push(e);
            }
        }
        if let Some((b, base)) = compact {
            self.compact(cpu, b, base)?;
        }
        Ok(())
    }

    fn event(&mut self, cpu: u32, b: &[u8], base: usize) -> R<Option<Event>> {
        let mut m = Msg::new(b, base);
        let (mut ts, mut current, mut flags) = (None, None, None);
        let mut kind = None;
        while let Some((f, v)) = m.next()? {
            match (f, &v) {
                (1, _) => ts = Some(int(&v)),
                (2, _) => current = Some(int(&v) as i32),
                (5, _) => flags = Some(int(&v)),
                (4 | 17 | 20 | 114 | 235 | 237 | 238 | 239 | 491, Val::Bytes(b, base)) => {
                    kind = Some(self.payload(f, b, *base)?);
                }
                _ => {}
            }
        }
        let Some(kind) = kind else {
            self.out.skipped += 1;
            return Ok(None);
        };
        let ts = ts.ok_or((base, "an ftrace event without a timestamp".to_string()))?;
        let kind = match kind {
            // task_newtask: the current task created the new one.
            Kind::Fork { parent, child } if parent.pid < 0 => {
                Kind::Fork { parent: TaskRef { pid: current.unwrap_or(-1), ..parent }, child }
            }
            k => k,
        };
        Ok(Some(Event {
            ts,
            cpu,
            current,
            irq: flags.map(|f| f & FLAGS_IRQ != 0),
            kind,
            loc: Loc::Offset(base),
        }))
    }

    fn payload(&self, f: u32, b: &[u8], base: usize) -> R<Kind> {
        let mut vals: HashMap<u32, Val<'_>> = HashMap::new();
        let mut m = Msg::new(b, base);
        while let Some((k, v)) = m.next()? {
            vals.insert(k, v);
        }
        let s = |k: u32| vals.get(&k).map(text).unwrap_or_default();
        let i = |k: u32| vals.get(&k).map(i32v);
        let need = |k: u32, what: &str| i(k).ok_or((base, format!("event field `{what}` is missing")));
        let task = |c: u32, p: u32, pr: Option<u32>| -> R<TaskRef> {
            Ok(TaskRef { pid: need(p, "pid")?, comm: s(c), prio: pr.and_then(i) })
        };
        Ok(match f {
            4 => Kind::Switch {
                prev: task(1, 2, Some(3))?,
                prev_state: PrevState::from_bits(vals.get(&4).map(int).unwrap_or(0) as i64),
                next: task(5, 6, Some(7))?,
            },
            17 | 20 => Kind::Wake {
                task: task(1, 2, Some(3))?,
                target_cpu: i(5).unwrap_or(0) as u32,
                woken: f == 17,
            },
            114 => Kind::WakeupNew { task: task(1, 2, Some(3))?, target_cpu: i(5).unwrap_or(0) as u32 },
            235 => Kind::Fork {
                parent: TaskRef { pid: -1, comm: String::new(), prio: None },
                child: TaskRef { pid: need(1, "pid")?, comm: s(2), prio: None },
            },
            237 => Kind::Exec { pid: need(2, "pid")?, filename: s(1) },
            238 => Kind::Exit { task: task(1, 2, Some(4))? },
            239 => Kind::Fork { parent: task(1, 2, None)?, child: task(3, 4, None)? },
            491 => Kind::Migrate {
                task: task(1, 2, Some(3))?,
                orig_cpu: need(4, "orig_cpu")? as u32,
                dest_cpu: need(5, "dest_cpu")? as u32,
            },
            _ => unreachable!("only the fields matched in `event`"),
        })
    }

    fn compact(&mut self, cpu: u32, b: &[u8], base: usize) -> R<()> {
        let mut interned: Vec<String> = Vec::new();
        let mut cols: HashMap<u32, Vec<u64>> = HashMap::new();
        let mut m = Msg::new(b, base);
        while let Some((f, v)) = m.next()? {
            if f == 5 {
                interned.push(text(&v));
            } else if (1..=12).contains(&f) {
                push_repeated(&v, cols.entry(f).or_default())?;
            }
        }
        let col = |f: u32| cols.get(&f).map(Vec::as_slice).unwrap_or(&[]);
        let comm = |i: u64| -> R<String> {
            interned
                .get(i as usize)
                .cloned()
                .ok_or((base, format!("compact_sched comm index {i} beyond its intern table")))
        };
        let n = col(1).len();
        for f in [2, 3, 4, 6] {
            if col(f).len() != n {
                return Err((base, format!("compact_sched switch arrays of different lengths (field {f})")));
            }
        }
        let mut ts = 0u64;
        for k in 0..n {
            ts = ts.wrapping_add(col(1)[k]);
            let next = TaskRef {
                pid: col(3)[k] as i64 as i32,
                comm: comm(col(6)[k])?,
                prio: Some(col(4)[k] as i64 as i32),
            };
            let prev = self.last_next.insert(cpu, next.clone()).unwrap_or(TaskRef {
                pid: -1,
                comm: String::new(),
                prio: None,
            });
            self.out.events.push(Event {
                ts,
                cpu,
                current: (prev.pid >= 0).then_some(prev.pid),
                irq: Some(false),
                kind: Kind::Switch { prev, prev_state: PrevState::from_bits(col(2)[k] as i64), next },
                loc: Loc::Offset(base),
            });
        }
        let n = col(7).len();
        for f in [8, 9, 10, 11] {
            if col(f).len() != n {
                return Err((base, format!("compact_sched waking arrays of different lengths (field {f})")));
            }
        }
        let flags = col(12);
        let mut ts = 0u64;
        for k in 0..n {
            ts = ts.wrapping_add(col(7)[k]);
            let task = TaskRef {
                pid: col(8)[k] as i64 as i32,
                comm: comm(col(11)[k])?,
                prio: Some(col(10)[k] as i64 as i32),
            };
            self.out.events.push(Event {
                ts,
                cpu,
                current: None,
                irq: flags.get(k).map(|f| f & FLAGS_IRQ != 0),
                kind: Kind::Wake { task, target_cpu: col(9)[k] as u32, woken: false },
                loc: Loc::Offset(base),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny protobuf writer for the tests (independent of the reader).
    #[derive(Default)]
    struct W(Vec<u8>);
    impl W {
        fn varint(&mut self, mut v: u64) {
            while v >= 0x80 {
                self.0.push(v as u8 | 0x80);
                v >>= 7;
            }
            self.0.push(v as u8);
        }
        fn int(mut self, f: u32, v: u64) -> Self {
            self.varint((f as u64) << 3);
            self.varint(v);
            self
        }
        fn bytes(mut self, f: u32, b: &[u8]) -> Self {
            self.varint(((f as u64) << 3) | 2);
            self.varint(b.len() as u64);
            self.0.extend_from_slice(b);
            self
        }
        fn packed(self, f: u32, vs: &[u64]) -> Self {
            let mut p = W::default();
            for &v in vs {
                p.varint(v);
            }
            self.bytes(f, &p.0)
        }
    }

    #[test]
    fn compact_sched_switches_and_wakings_decode_with_delta_timestamps() {
        let compact = W::default()
            .bytes(5, b"swapper/1")
            .bytes(5, b"worker")
            .packed(1, &[1_000, 500, 250]) // switches at 1000, 1500, 1750
            .packed(2, &[0, 1, 0x100])
            .packed(3, &[7, 0, 7])
            .packed(4, &[120, 120, 120])
            .packed(6, &[1, 0, 1])
            .packed(7, &[1_200]) // waking at 1200, from a soft IRQ
            .packed(8, &[9])
            .packed(9, &[1])
            .packed(10, &[(-1i64) as u64]) // a negative int32 is sign-extended on the wire
            .packed(11, &[1])
            .packed(12, &[0x10]);
        let bundle = W::default().int(1, 1).bytes(4, &compact.0).int(3, 1);
        let packet = W::default().bytes(1, &bundle.0);
        let trace = W::default().bytes(1, &packet.0);
        let t = read("t.pftrace", &trace.0).unwrap();
        let sw: Vec<_> = t
            .events
            .iter()
            .filter_map(|e| match &e.kind {
                Kind::Switch { prev, prev_state, next } => Some((e.ts, prev.pid, *prev_state, next.pid)),
                _ => None,
            })
            .collect();
        assert_eq!(
            sw,
            vec![
                (1_000, -1, PrevState::Runnable, 7),
                (1_500, 7, PrevState::Blocked { uninterruptible: false }, 0),
                (1_750, 0, PrevState::Runnable, 7),
            ]
        );
        let w = t.events.iter().find(|e| matches!(e.kind, Kind::Wake { .. })).unwrap();
        assert_eq!((w.ts, w.cpu, w.irq), (1_200, 1, Some(true)));
        assert!(
            matches!(&w.kind, Kind::Wake { task, target_cpu: 1, .. } if task.pid == 9 && task.prio == Some(-1))
        );
        assert_eq!(t.nr_cpus, Some(2));
    }

    #[test]
    fn truncated_and_malformed_traces_name_the_offset() {
        let ev = W::default().int(1, 5).int(2, 3);
        let bundle = W::default().int(1, 0).bytes(2, &ev.0);
        let trace = W::default().bytes(1, &W::default().bytes(1, &bundle.0).0);
        let cut = &trace.0[..trace.0.len() - 3];
        let e = read("x.pftrace", cut).unwrap_err().to_string();
        assert!(e.contains("x.pftrace") && e.contains("byte offset 0") && e.contains("only"), "{e}");
        let e = read("x.pftrace", &[0x0a, 0x02, 0x0f, 0x00]).unwrap_err().to_string();
        assert!(e.contains("byte offset 2") && e.contains("wire type 7"), "{e}");
    }

    #[test]
    fn a_cpu_number_beyond_the_limit_is_an_error_not_a_huge_table() {
        // A compact switch recorded on CPU 4,000,000,000 (found by fuzzing: it sized per-CPU tables).
        let compact = W::default()
            .bytes(5, b"worker")
            .packed(1, &[1_000])
            .packed(2, &[0])
            .packed(3, &[7])
            .packed(4, &[120])
            .packed(6, &[0]);
        let bundle = W::default().int(1, 4_000_000_000).bytes(4, &compact.0);
        let trace = W::default().bytes(1, &W::default().bytes(1, &bundle.0).0);
        let e = read("big.pftrace", &trace.0).unwrap_err().to_string();
        assert!(e.starts_with("big.pftrace: byte offset") && e.contains("CPU 4000000000 is beyond"), "{e}");
        // The same CPU in a bundle with no events at all (found by fuzzing: the CPU count alone sized
        // a 187 GB table).
        let bundle = W::default().int(1, 3_000_000_000);
        let trace = W::default().bytes(1, &W::default().bytes(1, &bundle.0).0);
        let e = read("empty.pftrace", &trace.0).unwrap_err().to_string();
        assert!(e.starts_with("empty.pftrace: byte offset") && e.contains("CPU 3000000000 is beyond"), "{e}");
    }
}
