//! Migrations from the kernel's own trace events: a private tracefs instance
//! (`instances/schedlab-<pid>-<n>`, one per run, so the global buffer, other users' tracing and other
//! runs, in this process or another, are untouched) with the `sched:sched_migrate_task` event enabled
//! for the run. The kernel emits that event from `set_task_cpu()` whenever it places a task, including
//! on its own CPU; a migration is an event whose `orig_cpu` differs from `dest_cpu`, the same
//! condition under which the kernel counts `se.nr_migrations`.
//!
//! Tracefs needs root. When it is not mounted at /sys/kernel/tracing, the run mounts it at a
//! directory of its own (tracefs is one file system however often it is mounted) and unmounts that
//! after, so a run that ends never takes the file system from under another that is still tracing.
//! Instances live in the kernel, not in a mount: one left by a run killed before it could remove it
//! (its buffers stay allocated) is removed by the next run once its process is gone. Where any of this
//! is not possible the caller falls back to the kernel's per-thread count (`/proc/<tid>/sched`,
//! CONFIG_SCHED_DEBUG) or to sampling `sched_getcpu()`, and says so.

use std::collections::HashMap;
use std::ffi::CString;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Where tracefs lives on current kernels.
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Size of each CPU's buffer of the instance, KiB: about 100,000 migration events per CPU.
const BUFFER_KB: u32 = 8192;

/// Prefix of the instances runs make: `schedlab-<pid>-<n>`.
pub const INSTANCE_PREFIX: &str = "schedlab-";

/// Runs traced so far by this process: the `<n>` of the next instance's name.
static NEXT_INSTANCE: AtomicU32 = AtomicU32::new(0);

/// A running trace of `sched_migrate_task` events.
pub struct MigrationTrace {
    instance: PathBuf,
    /// The directory tracefs was mounted at for this trace alone, if it was not mounted already.
    private_mount: Option<PathBuf>,
    /// Whether the instance is gone (removed, or never made).
    removed: bool,
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
        let (root, private_mount) = tracefs_root()?;
        remove_orphans(&root.join("instances"));
        let name = format!(
            "{INSTANCE_PREFIX}{}-{}",
            crate::sys::getpid(),
            NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed)
        );
        let instance = root.join("instances").join(name);
        let mut t = MigrationTrace { instance, private_mount, removed: true };
        if let Err(e) = fs::create_dir(&t.instance) {
            return Err(format!("cannot create the trace instance {}: {e}", t.instance.display()));
        }
        t.removed = false;
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

    /// The instance's name (`schedlab-<pid>-<n>`).
    pub fn name(&self) -> String {
        self.instance.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    }

    /// Stops tracing and counts the migrations of each thread of `windows` in its window; an error if
    /// events were lost.
    pub fn finish(&mut self, windows: &HashMap<i32, (u64, u64)>) -> Result<HashMap<i32, u64>, String> {
        write(&self.instance.join("tracing_on"), "0")?;
        let lost = self.overruns();
        if lost > 0 {
            return Err(format!("the trace buffer lost {lost} events (more than {BUFFER_KB} KiB per CPU)"));
        }
        let trace = fs::read_to_string(self.instance.join("trace"))
            .map_err(|e| format!("cannot read {}/trace: {e}", self.instance.display()))?;
        Ok(count_migrations(&trace, windows))
    }

    /// Removes the instance (the kernel frees its buffers) and unmounts tracefs if it was mounted for
    /// this trace; the error says what is left behind.
    pub fn remove(mut self) -> Result<(), String> {
        self.remove_now()
    }

    fn remove_now(&mut self) -> Result<(), String> {
        let mut result = Ok(());
        if !self.removed {
            let _ = fs::write(self.instance.join("events/sched/sched_migrate_task/enable"), "0");
            result = fs::remove_dir(&self.instance).map_err(|e| {
                format!("the trace instance {} could not be removed: {e}", self.instance.display())
            });
            self.removed = true;
        }
        if let Some(dir) = self.private_mount.take() {
            unmount(&dir);
            let _ = fs::remove_dir(&dir);
        }
        result
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
    /// Removes what [`MigrationTrace::remove`] was not called to remove (a run that failed).
    fn drop(&mut self) {
        let _ = self.remove_now();
    }
}

/// Where tracefs can be used: /sys/kernel/tracing when it is mounted there, else a directory of this
/// trace's own with tracefs mounted on it (returned second, for the unmount).
fn tracefs_root() -> Result<(PathBuf, Option<PathBuf>), String> {
    let root = Path::new(TRACEFS);
    if root.join("instances").is_dir() {
        return Ok((root.to_path_buf(), None));
    }
    if !root.is_dir() {
        return Err(format!("{TRACEFS} does not exist (a kernel without tracefs)"));
    }
    let dir = std::env::temp_dir().join(format!(
        "schedlab-tracefs-{}-{}",
        crate::sys::getpid(),
        NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed)
    ));
    fs::create_dir_all(&dir)
        .map_err(|e| format!("cannot create {} to mount tracefs on: {e}", dir.display()))?;
    if let Err(e) = mount_tracefs(&dir) {
        let _ = fs::remove_dir(&dir);
        return Err(e);
    }
    Ok((dir.clone(), Some(dir)))
}

/// The process that made an instance, from its name (`schedlab-<pid>-<n>`, or `schedlab-<pid>` as
/// earlier versions named it); `None` for names not of that form.
pub fn instance_owner(name: &str) -> Option<i32> {
    let rest = name.strip_prefix(INSTANCE_PREFIX)?;
    let (pid, n) = rest.split_once('-').unwrap_or((rest, "0"));
    n.parse::<u32>().ok()?;
    pid.parse().ok().filter(|&p: &i32| p > 0)
}

/// This tool's instances in `instances` whose process is gone (killed before it could remove them).
pub fn orphan_instances(instances: &Path) -> Vec<PathBuf> {
    let Ok(dir) = fs::read_dir(instances) else { return Vec::new() };
    dir.flatten()
        .filter(|e| {
            instance_owner(&e.file_name().to_string_lossy())
                .is_some_and(|pid| !crate::sys::process_exists(pid))
        })
        .map(|e| e.path())
        .collect()
}

/// The names of the kernel's trace instances (all users'), mounting tracefs for the look if needed.
pub fn instance_names() -> Result<Vec<String>, String> {
    let (root, private_mount) = tracefs_root()?;
    let names = fs::read_dir(root.join("instances"))
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .map_err(|e| format!("cannot list {}/instances: {e}", root.display()));
    if let Some(dir) = private_mount {
        unmount(&dir);
        let _ = fs::remove_dir(&dir);
    }
    names
}

/// Removes the orphans (best effort: one still in use stays).
fn remove_orphans(instances: &Path) {
    for orphan in orphan_instances(instances) {
        let _ = fs::remove_dir(orphan);
    }
}

fn unmount(dir: &Path) {
    if let Ok(target) = CString::new(dir.as_os_str().as_encoded_bytes()) {
        // SAFETY: a valid NUL-terminated path.
        unsafe { libc::umount(target.as_ptr()) };
    }
}

/// `mount -t tracefs nodev <dir>`.
fn mount_tracefs(dir: &Path) -> Result<(), String> {
    let target = CString::new(dir.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
    let (src, fstype) = (c"nodev", c"tracefs");
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

    #[test]
    fn an_instance_name_gives_the_process_that_made_it() {
        assert_eq!(instance_owner("schedlab-4242-7"), Some(4242));
        assert_eq!(instance_owner("schedlab-4242"), Some(4242), "the name earlier versions gave");
        assert_eq!(instance_owner("schedlab-x-1"), None);
        assert_eq!(instance_owner("schedlab-42-x"), None);
        assert_eq!(instance_owner("schedlab-0-1"), None);
        assert_eq!(instance_owner("other-42-1"), None);
    }

    /// A process that has exited (and been reaped): its pid names no process for a while.
    fn dead_pid() -> i32 {
        let mut child = std::process::Command::new("true").spawn().expect("spawn true");
        let pid = child.id() as i32;
        child.wait().expect("wait for true");
        pid
    }

    #[test]
    fn runs_keep_their_instances_apart_and_remove_those_of_killed_runs() {
        let Ok((root, mount)) = tracefs_root() else {
            eprintln!("tracefs is not usable here (not root?): nothing to check");
            return;
        };
        let instances = root.join("instances");
        let (dead, alive) = (dead_pid(), crate::sys::getpid());
        let orphan = instances.join(format!("{INSTANCE_PREFIX}{dead}-0"));
        let kept = instances.join(format!("{INSTANCE_PREFIX}{alive}-999999"));
        fs::create_dir(&orphan).expect("make an instance as a killed run would leave it");
        fs::create_dir(&kept).expect("make an instance of a live process");
        let orphans = orphan_instances(&instances);
        assert!(orphans.contains(&orphan) && !orphans.contains(&kept), "{orphans:?}");
        // Two traces at once, the first ended while the second still traces (two runs that overlap):
        // the second's instance and file system stay until it ends.
        let mut first = MigrationTrace::start().expect("start a trace");
        let mut second = MigrationTrace::start().expect("start a second trace");
        assert_ne!(first.name(), second.name());
        assert!(!orphan.exists(), "the killed run's instance is removed");
        assert!(kept.exists(), "a live process's instance is left alone");
        first.finish(&HashMap::new()).expect("the first trace reads");
        first.remove().expect("the first trace's instance is removed");
        second.finish(&HashMap::new()).expect("the second trace still reads after the first ended");
        let second_name = second.name();
        second.remove().expect("the second trace's instance is removed");
        let names = instance_names().expect("list the instances");
        assert!(!names.contains(&second_name), "{names:?}");
        fs::remove_dir(&kept).expect("remove the test's instance");
        if let Some(dir) = mount {
            unmount(&dir);
            let _ = fs::remove_dir(&dir);
        }
    }
}
