//! Migrations from the kernel's own trace events: a private tracefs instance
//! (`instances/schedlab-<pid>`, so the global buffer and other users' tracing are untouched) with the
//! `sched:sched_migrate_task` event enabled for the run. The kernel emits that event from
//! `set_task_cpu()` whenever it places a task, including on its own CPU; a migration is an event whose
//! `orig_cpu` differs from `dest_cpu`, the same condition under which the kernel counts
//! `se.nr_migrations`.
//!
//! Tracefs needs root. When it is not mounted, it is mounted at /sys/kernel/tracing for the run and
//! unmounted after. Where any of this is not possible the caller falls back to the kernel's per-thread
//! count (`/proc/<tid>/sched`, CONFIG_SCHED_DEBUG) or to sampling `sched_getcpu()`, and says so.

use std::collections::HashMap;
use std::ffi::CString;
use std::fs;
use std::path::{Path, PathBuf};

/// Where tracefs lives on current kernels.
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Size of each CPU's buffer of the instance, KiB: about 100,000 migration events per CPU.
const BUFFER_KB: u32 = 8192;

/// A running trace of `sched_migrate_task` events.
pub struct MigrationTrace {
    instance: PathBuf,
    mounted_here: bool,
}

/// One `sched_migrate_task` event: when, the task and the CPUs it moved between.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MigrateEvent {
    /// Timestamp, ns of the trace clock (`mono`: CLOCK_MONOTONIC, printed to the microsecond).
    pub ts_ns: u64,
    /// The task moved (its thread id).
    pub pid: i32,
    /// Its CPU before.
    pub orig_cpu: u32,
    /// Its CPU after.
    pub dest_cpu: u32,
}

/// Parses the event part of a `trace` line:
/// `  cat-42  [001] d..2.  12.5: sched_migrate_task: comm=x pid=42 prio=120 orig_cpu=1 dest_cpu=0`.
/// Other lines (comments, other events) give `None`.
pub fn parse_migrate_line(line: &str) -> Option<MigrateEvent> {
    let (head, fields) = line.split_once(": sched_migrate_task:")?;
    let ts = head.split_whitespace().last()?;
    let (secs, frac) = ts.split_once('.').unwrap_or((ts, "0"));
    let frac_ns: u64 = format!("{frac:0<9}").get(..9)?.parse().ok()?;
    let ts_ns = secs.parse::<u64>().ok()?.checked_mul(1_000_000_000)?.checked_add(frac_ns)?;
    // `comm=` may contain spaces; the numeric fields follow it, so read them from the end.
    let field = |name: &str| -> Option<i64> {
        let key = format!(" {name}=");
        let at = fields.rfind(&key)? + key.len();
        fields[at..].split_whitespace().next()?.parse().ok()
    };
    Some(MigrateEvent {
        ts_ns,
        pid: field("pid")?.try_into().ok()?,
        orig_cpu: field("orig_cpu")?.try_into().ok()?,
        dest_cpu: field("dest_cpu")?.try_into().ok()?,
    })
}

/// Counts the migrations (events with `orig_cpu != dest_cpu`) of each thread of `windows` inside its
/// window (monotonic ns, inclusive; the span its other counters cover) in a `trace` file's text.
pub fn count_migrations(trace: &str, windows: &HashMap<i32, (u64, u64)>) -> HashMap<i32, u64> {
    let mut counts = HashMap::new();
    for e in trace.lines().filter_map(parse_migrate_line) {
        let inside = windows.get(&e.pid).is_some_and(|&(from, to)| (from..=to).contains(&e.ts_ns));
        if inside && e.orig_cpu != e.dest_cpu {
            *counts.entry(e.pid).or_insert(0) += 1;
        }
    }
    counts
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    fs::write(path, value).map_err(|e| format!("cannot write `{value}` to {}: {e}", path.display()))
}

impl MigrationTrace {
    /// Starts tracing migrations, mounting tracefs first if needed; the error says why it cannot.
    pub fn start() -> Result<MigrationTrace, String> {
        let root = Path::new(TRACEFS);
        let mut mounted_here = false;
        if !root.join("instances").is_dir() {
            if !root.is_dir() {
                return Err(format!("{TRACEFS} does not exist (a kernel without tracefs)"));
            }
            mount_tracefs()?;
            mounted_here = true;
        }
        let instance = root.join("instances").join(format!("schedlab-{}", crate::sys::getpid()));
        let t = MigrationTrace { instance, mounted_here };
        if let Err(e) = fs::create_dir(&t.instance) {
            return Err(format!("cannot create the trace instance {}: {e}", t.instance.display()));
        }
        let event = t.instance.join("events/sched/sched_migrate_task/enable");
        if !event.exists() {
            return Err("this kernel has no sched:sched_migrate_task event".into());
        }
        write(&t.instance.join("buffer_size_kb"), &BUFFER_KB.to_string())?;
        // Timestamps on CLOCK_MONOTONIC, the clock of the threads' own measurements.
        write(&t.instance.join("trace_clock"), "mono")?;
        write(&event, "1")?;
        write(&t.instance.join("tracing_on"), "1")?;
        Ok(t)
    }

    /// Stops tracing and counts the migrations of each thread of `windows` in its window; an error if
    /// events were lost.
    pub fn finish(self, windows: &HashMap<i32, (u64, u64)>) -> Result<HashMap<i32, u64>, String> {
        write(&self.instance.join("tracing_on"), "0")?;
        let lost = self.overruns();
        if lost > 0 {
            return Err(format!("the trace buffer lost {lost} events (more than {BUFFER_KB} KiB per CPU)"));
        }
        let trace = fs::read_to_string(self.instance.join("trace"))
            .map_err(|e| format!("cannot read {}/trace: {e}", self.instance.display()))?;
        Ok(count_migrations(&trace, windows))
    }

    /// Events lost to a full buffer, over all CPUs (`per_cpu/cpuN/stats`, `overrun:`).
    fn overruns(&self) -> u64 {
        let Ok(dir) = fs::read_dir(self.instance.join("per_cpu")) else { return 0 };
        dir.flatten()
            .filter_map(|cpu| fs::read_to_string(cpu.path().join("stats")).ok())
            .flat_map(|stats| {
                stats
                    .lines()
                    .filter_map(|l| l.strip_prefix("overrun:").and_then(|v| v.trim().parse::<u64>().ok()))
                    .collect::<Vec<_>>()
            })
            .sum()
    }
}

impl Drop for MigrationTrace {
    /// Removes the instance (the kernel frees its buffers) and unmounts tracefs if this mounted it.
    fn drop(&mut self) {
        let _ = fs::write(self.instance.join("events/sched/sched_migrate_task/enable"), "0");
        let _ = fs::remove_dir(&self.instance);
        if self.mounted_here {
            if let Ok(target) = CString::new(TRACEFS) {
                // SAFETY: a valid NUL-terminated path.
                unsafe { libc::umount(target.as_ptr()) };
            }
        }
    }
}

/// `mount -t tracefs nodev /sys/kernel/tracing`.
fn mount_tracefs() -> Result<(), String> {
    let (src, target, fstype) = (c"nodev", CString::new(TRACEFS).map_err(|e| e.to_string())?, c"tracefs");
    // SAFETY: valid NUL-terminated strings and no data.
    let rc = unsafe { libc::mount(src.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
    if rc != 0 {
        return Err(format!(
            "tracefs is not mounted and mounting it failed: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrate_lines_are_parsed_and_same_cpu_placements_are_not_migrations() {
        let trace = "\
# tracer: nop
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
          <idle>-0       [000] dNh2.   100.000001: sched_migrate_task: comm=worker 1 pid=42 prio=120 orig_cpu=1 dest_cpu=0
     ksoftirqd/1-22      [001] d..2.   100.000002: sched_migrate_task: comm=b pid=43 prio=120 orig_cpu=1 dest_cpu=1
           <...>-42      [000] d..2.   100.000003: sched_migrate_task: comm=worker 1 pid=42 prio=120 orig_cpu=0 dest_cpu=1
           <...>-42      [000] d..2.   100.000004: sched_switch: prev_comm=a prev_pid=42 prev_prio=120
";
        assert_eq!(
            parse_migrate_line(trace.lines().nth(2).unwrap()),
            Some(MigrateEvent { ts_ns: 100_000_001_000, pid: 42, orig_cpu: 1, dest_cpu: 0 })
        );
        let all = HashMap::from([(42, (0, u64::MAX)), (43, (0, u64::MAX))]);
        let counts = count_migrations(trace, &all);
        assert_eq!(counts.get(&42), Some(&2));
        assert_eq!(counts.get(&43), None, "placed on its own CPU: no migration");
        // Only inside the thread's window; threads not asked about are not counted.
        let late = HashMap::from([(42, (100_000_002_000, 100_000_009_000))]);
        assert_eq!(count_migrations(trace, &late), HashMap::from([(42, 1)]));
        assert_eq!(parse_migrate_line("sched_migrate_task: comm=x pid=oops orig_cpu=0 dest_cpu=1"), None);
    }
}
