//! `schedlab vm-test`: boots a sched_ext kernel in a QEMU virtual machine and runs one workload with
//! `schedlab exec` under the kernel's own scheduler (EEVDF, the baseline) and then under each
//! requested schedlab policy loaded with `schedlab-scx`, and brings back each run's report.
//!
//! The steps (docs/real-kernel.md):
//!
//! 1. **Kernel**: `--kernel` names one, or Debian's newest `cloud-amd64` kernel is fetched from the
//!    unstable archive with `apt-get download`, through a private apt configuration in the cache
//!    directory (nothing on the host changes), and kept there; its config must say
//!    `CONFIG_SCHED_CLASS_EXT=y`.
//! 2. **Initramfs**: a cpio archive written here: a static busybox, `schedlab-scx`, this `schedlab`
//!    binary, the shared libraries `ldd` lists for them, the workload, and an `/init` script that
//!    does the runs and prints everything to the serial console between `SCHEDLAB-VM` markers (the
//!    reports base64-encoded).
//! 3. **VM**: `qemu-system-x86_64 -accel tcg` (software emulation: KVM guests crash early on the
//!    machines this was built on), `--cpus` virtual CPUs, 1 GiB, serial console on stdout.
//! 4. **Results**: the serial log, one report per run (`OUT/<run>.json`, the same schema as
//!    `schedlab exec --json`, so `schedlab report` puts them side by side), and a table of checks:
//!    sched_ext enabled with our ops name, the workload completed, no watchdog ejection, clean
//!    unregistration; the command fails if any check fails.

use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How the test VM boots: shared by `schedlab vm-test` and `schedlab reproduce --real`.
#[derive(clap::Args, Debug, Clone)]
pub struct VmOptions {
    /// The schedlab-scx binary (build it with `bash scripts/build-scx`).
    #[arg(long, default_value = "crates/schedlab-scx/target/release/schedlab-scx")]
    pub scx: String,
    /// A kernel image (bzImage) to boot instead of Debian's sched_ext kernel.
    #[arg(long)]
    pub kernel: Option<String>,
    /// Where the fetched kernel is kept (default: $XDG_CACHE_HOME/schedlab/vm or ~/.cache/schedlab/vm).
    #[arg(long)]
    pub cache: Option<String>,
    /// Seconds after which the VM is stopped and the command fails (default: estimated from the
    /// runs: 300 s for booting, 600 s for `--calibrate` (1500 s under a policy), plus 4 times
    /// each run's length and 30 s).
    #[arg(long)]
    pub timeout: Option<u64>,
    /// Run the guest on QEMU's instruction counting: each instruction takes 2^SHIFT ns of guest
    /// time (`-icount shift=SHIFT,sleep=off`), so the guest sees a machine of fixed speed however
    /// slowly or unevenly the host emulates it (idle time passes at once). 0 to 10; 4 is 62.5
    /// million instructions per guest second.
    #[arg(long, value_name = "SHIFT")]
    pub icount: Option<u32>,
}

impl VmOptions {
    /// Checks the options that can be checked before anything runs.
    pub fn validate(&self) -> Result<()> {
        if self.icount.is_some_and(|s| s > 10) {
            bail!(
                "--icount: the shift must be 0 to 10 (2^SHIFT ns per instruction), got {}",
                self.icount.unwrap_or(0)
            );
        }
        if self.timeout == Some(0) {
            bail!("--timeout: must be at least 1 second");
        }
        if !Path::new(&self.scx).is_file() {
            bail!("--scx {}: no such file; build schedlab-scx with `bash scripts/build-scx`", self.scx);
        }
        Ok(())
    }
}

/// Options of `schedlab vm-test`.
#[derive(clap::Args, Debug)]
pub struct VmTestArgs {
    /// Policies to load with schedlab-scx, comma-separated (the kernel's own EEVDF always runs
    /// first as the baseline). `--policies` is the same option, as `compare` and `replay` spell it.
    #[arg(long, visible_alias = "policies", value_delimiter = ',', default_value = "cfs,ule,htfs")]
    pub policy: Vec<String>,
    /// Workload run by `schedlab exec` in the VM: a built-in, a workload TOML or an rt-app JSON file.
    #[arg(long, default_value = "vm/mixed.toml")]
    pub workload: String,
    /// Real time for each run of the workload, with a unit.
    #[arg(long, default_value = "4s")]
    pub duration: String,
    /// Directory for the serial log and the reports.
    #[arg(long, short, default_value = "vm-results")]
    pub output: String,
    /// Virtual CPUs.
    #[arg(long, default_value_t = 2)]
    pub cpus: u32,
    /// Run the workload this many times under each scheduler, in one boot (the repeats are named
    /// `<run>-r2`, `<run>-r3`...), to see the run-to-run spread.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// First measure the guest with `schedlab calibrate` (under the kernel's own scheduler) and
    /// bring back its machine file as OUT/guest-machine.toml, for simulating the guest.
    #[arg(long)]
    pub calibrate: bool,
    /// With `--calibrate`: calibrate with this policy loaded by schedlab-scx instead of under the
    /// kernel's own scheduler, so the per-call CPU times (a pipe write that wakes, a read that
    /// blocks, a context switch...) include what sched_ext's path charges the calling thread.
    #[arg(long, value_name = "POLICY", requires = "calibrate")]
    pub calibrate_under: Option<String>,
    /// Give the user-space scheduler a virtual CPU of its own (the VM gets `--cpus` + 1, the
    /// workload is confined to the first `--cpus`), as `reproduce --real` does; without it the
    /// scheduler shares the workload's CPUs.
    #[arg(long)]
    pub scheduler_cpu: bool,
    /// Create each initial task when its start comes (`schedlab exec --spawn-at-start`), as
    /// `reproduce --real` does; without it every task waits asleep at a start gate first.
    #[arg(long)]
    pub spawn_at_start: bool,
    /// The sched_ext watchdog's limit in milliseconds (`schedlab-scx --watchdog-ms`; the kernel
    /// allows up to 30000); without it, schedlab-scx's default of 5 s.
    #[arg(long)]
    pub watchdog_ms: Option<u32>,
    /// Sample every task's cumulative CPU time this often in each run (`schedlab exec
    /// --sample-interval`, with a unit, e.g. `100ms`): each report then carries the per-task series
    /// a simulated run gives with `--sample-tasks`, to see when a task got its CPU.
    #[arg(long, value_name = "INTERVAL")]
    pub sample_interval: Option<String>,
    /// How the VM boots.
    #[command(flatten)]
    pub vm: VmOptions,
}

/// The name the guest's `schedlab calibrate` result travels under in the serial log.
const CALIBRATE: &str = "calibrate";

/// The name of the run under the kernel's own scheduler.
pub const BASELINE: &str = "kernel";

/// One run inside the VM.
#[derive(Clone, Debug)]
pub struct Run {
    /// A file-safe name, unique in the boot.
    pub name: String,
    /// The policy spec loaded with schedlab-scx (`None`: the kernel's own scheduler).
    pub policy: Option<String>,
    /// The workload file, by its name among the boot's files (it lands in the guest's `/work`).
    pub workload: String,
    /// The longest the run may take, with a unit (`schedlab exec --duration`).
    pub duration: String,
    /// `schedlab exec --max-threads`.
    pub max_threads: usize,
    /// `schedlab exec --sample-interval` (with a unit), for claims on the per-task series.
    pub sample_interval: Option<String>,
    /// `schedlab exec --spawn-at-start`: no task sleeps at a start gate before its start.
    pub spawn_at_start: bool,
    /// `schedlab exec --allow-rt`: the workload makes threads real-time (the guest is a VM of its
    /// own; the workload's threads still cannot take the controller's CPU: it runs SCHED_FIFO).
    pub allow_rt: bool,
}

/// One boot of the VM: its files, runs and CPUs.
pub struct Boot {
    /// Files copied into the guest's `/work`: (name, contents).
    pub files: Vec<(String, Vec<u8>)>,
    /// The runs, in order.
    pub runs: Vec<Run>,
    /// Virtual CPUs.
    pub cpus: u32,
    /// Run `schedlab calibrate` in the guest first (on the workload's CPUs).
    pub calibrate: bool,
    /// The policy schedlab-scx runs while the guest calibrates (`None`: the kernel's own).
    pub calibrate_policy: Option<String>,
    /// The most real time a run can take, for the default timeout.
    pub longest_run: Duration,
    /// `schedlab-scx --watchdog-ms` (`None`: its default, 5 s).
    pub watchdog_ms: Option<u32>,
    /// Give the user-space scheduler a CPU of its own: the VM gets one CPU more than `cpus`, the
    /// workload is confined to the first `cpus`, and `schedlab-scx --scheduler-cpu` makes the BPF
    /// side run the scheduler on the last one only (an in-kernel scheduler takes no CPU time from
    /// the workload worth counting; scx_rustland_core runs it on whichever CPU asks first, which
    /// took 17-20 % of the workload's CPU). schedlab-scx is not pinned with an affinity mask: it
    /// finds idle CPUs through the kernel's idle tracking for its own mask, so pinned it would see
    /// only its own CPU free.
    pub scheduler_cpu: bool,
}

/// What the serial log says about one run.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    /// Run name.
    pub name: String,
    /// `/sys/kernel/sched_ext/state` once the workload started.
    pub state: String,
    /// `/sys/kernel/sched_ext/root/ops`.
    pub ops: String,
    /// Exit status of `schedlab exec`.
    pub exec_exit: Option<i32>,
    /// The state just before schedlab-scx was stopped.
    pub state_before_stop: String,
    /// Exit status of schedlab-scx.
    pub scx_exit: Option<i32>,
    /// The state after it exited.
    pub state_after: String,
    /// schedlab-scx's own output.
    pub scx_log: Vec<String>,
    /// schedlab exec's output.
    pub exec_log: Vec<String>,
    /// How many loads of schedlab-scx the kernel refused before the one the run used (ops.init_task
    /// failing to allocate; the init script tries again, three tries in all).
    pub load_refusals: u32,
    /// schedlab-scx's output in the refused tries.
    pub refused_log: Vec<String>,
    /// The report, decoded.
    pub report: Option<String>,
}

/// Entry point of `schedlab vm-test`.
pub fn vm_test_cmd(args: VmTestArgs) -> Result<()> {
    if args.policy.is_empty() {
        bail!("--policy: name at least one policy");
    }
    for p in &args.policy {
        schedlab_policies::create(p).with_context(|| format!("--policy {p}"))?;
    }
    if !(1..=64).contains(&args.cpus) {
        bail!("--cpus: must be 1 to 64, got {}", args.cpus);
    }
    if !(1..=20).contains(&args.repeat) {
        bail!("--repeat: must be 1 to 20, got {}", args.repeat);
    }
    if let Some(ms) = args.watchdog_ms {
        if !(1..=30_000).contains(&ms) {
            bail!("--watchdog-ms: must be 1 to 30000 (the kernel's SCX_WATCHDOG_MAX_TIMEOUT), got {ms}");
        }
    }
    let workload_src = std::fs::read(&args.workload).with_context(|| {
        format!("--workload {}: cannot read it (a file is needed: it is copied into the VM)", args.workload)
    })?;
    let allow_rt = crate::load_workload(&args.workload)?.real_time_task().is_some();
    let run_ns =
        schedlab_workload::parse_duration(&args.duration).map_err(|e| anyhow::anyhow!("--duration: {e}"))?;
    if let Some(every) = &args.sample_interval {
        let every_ns = schedlab_workload::parse_duration(every)
            .map_err(|e| anyhow::anyhow!("--sample-interval: {e}"))?;
        let min_ns = schedlab_exec::sample::MIN_INTERVAL_NS;
        if every_ns < min_ns || every_ns > run_ns {
            bail!(
                "--sample-interval: must be at least {} ms (finer, the exec's controller loads the run) and at most the run's --duration ({}), got {every}",
                min_ns / 1_000_000,
                args.duration
            );
        }
    }
    args.vm.validate()?;
    let out = PathBuf::from(&args.output);
    let ext = Path::new(&args.workload).extension().and_then(|e| e.to_str()).unwrap_or("toml");
    let workload_name = format!("workload.{ext}");
    let mut runs = Vec::new();
    for rep in 1..=args.repeat {
        let suffix = if rep == 1 { String::new() } else { format!("-r{rep}") };
        let run = |name: String, policy: Option<String>| Run {
            name,
            policy,
            workload: workload_name.clone(),
            duration: args.duration.clone(),
            max_threads: 256,
            sample_interval: args.sample_interval.clone(),
            spawn_at_start: args.spawn_at_start,
            allow_rt,
        };
        runs.push(run(format!("{BASELINE}{suffix}"), None));
        for p in &args.policy {
            let name = format!("{}{suffix}", file_safe(p));
            if runs.iter().any(|r| r.name == name) {
                bail!("--policy: {p} is named twice");
            }
            runs.push(run(name, Some(p.clone())));
        }
    }
    let boot = Boot {
        files: vec![(workload_name, workload_src)],
        runs,
        cpus: args.cpus,
        calibrate: args.calibrate,
        calibrate_policy: args.calibrate_under.clone(),
        longest_run: Duration::from_nanos(run_ns),
        watchdog_ms: args.watchdog_ms,
        scheduler_cpu: args.scheduler_cpu,
    };
    let outcomes = boot_runs(&args.vm, &boot, &out)?;
    let serial_path = out.join("serial.log");
    let mut failures = Vec::new();
    if args.calibrate {
        match outcomes.iter().find(|o| o.name == CALIBRATE).and_then(|o| o.report.as_ref()) {
            Some(machine) => {
                let path = out.join("guest-machine.toml");
                std::fs::write(&path, machine).with_context(|| format!("cannot write {}", path.display()))?;
                println!("guest machine file (schedlab calibrate in the VM): {}", path.display());
            }
            None => failures.push(format!(
                "calibrate: no machine file came back from the guest (see {})",
                serial_path.display()
            )),
        }
    }
    let mut table = String::from(
        "run          sched_ext   ops                            workload   scheduler exit   after      nice0/nice5  round trip\n",
    );
    for run in &boot.runs {
        let Some(o) = outcomes.iter().find(|o| o.name == run.name) else {
            failures.push(format!(
                "{}: the VM never reached this run (see {})",
                run.name,
                serial_path.display()
            ));
            continue;
        };
        failures.extend(check_run(run.policy.as_deref(), o));
        table.push_str(&format!(
            "{:<12} {:<11} {:<30} {:<10} {:<16} {:<10} {:<12} {}\n",
            o.name,
            o.state,
            short(&o.ops, 30),
            match o.exec_exit {
                Some(0) => "completed".to_string(),
                Some(c) => format!("exit {c}"),
                None => "-".into(),
            },
            match (run.policy.is_some(), o.scx_exit) {
                (false, _) => "-".to_string(),
                (true, Some(c)) => format!("{c}"),
                (true, None) => "none".into(),
            },
            if run.policy.is_some() { o.state_after.as_str() } else { "-" },
            o.report.as_deref().and_then(nice_share_ratio).map_or("-".to_string(), |r| format!("{r:.2}")),
            // schedlab-scx's measured user-space round trip: mean and standard deviation.
            crate::reproduce::real::RoundTrips::from_scx_log(&o.scx_log).map_or(
                "-".to_string(),
                |rt| format!(
                    "{:.2} ms (sd {:.2}, {})",
                    rt.all.mean_ns as f64 / 1e6,
                    rt.all.sd_ns as f64 / 1e6,
                    rt.all.count
                )
            )
        ));
    }
    print!("{table}");
    for o in outcomes.iter().filter(|o| o.load_refusals > 0) {
        println!(
            "{}: the kernel refused the scheduler {} time(s) as it loaded{}: {}",
            o.name,
            o.load_refusals,
            if o.state == "enabled" { ", then took it" } else { "" },
            o.refused_log.iter().rev().find(|l| l.contains("EXIT")).map_or("", |l| l.as_str())
        );
    }
    println!("serial log: {}; reports: {}/<run>.json", serial_path.display(), out.display());
    if !failures.is_empty() {
        bail!("vm-test failed:\n  {}", failures.join("\n  "));
    }
    println!("vm-test: all checks passed");
    Ok(())
}

/// How many boots a run that a code-patching crash cut short gets (see [`patching_oops`]).
const BOOTS: u32 = 3;

/// Boots the VM for `boot`'s runs and returns what the serial log says about each; the serial log
/// goes to `out/serial.log` and each report to `out/<run>.json`. When the guest kernel crashes in
/// its own code patching (see [`patching_oops`]), the runs that had finished are kept, the log is
/// kept as `out/serial-<n>.log`, and the rest run in a new boot, up to three boots in all.
pub fn boot_runs(opts: &VmOptions, boot: &Boot, out: &Path) -> Result<Vec<RunOutcome>> {
    let qemu =
        which("qemu-system-x86_64").context("qemu-system-x86_64 is needed (apt install qemu-system-x86)")?;
    let busybox = which("busybox").context("busybox is needed (apt install busybox-static)")?;
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let kernel = match &opts.kernel {
        Some(k) => PathBuf::from(k),
        None => {
            let cache = match &opts.cache {
                Some(c) => PathBuf::from(c),
                None => default_cache()?,
            };
            fetch_kernel(&cache)?
        }
    };
    let me = std::env::current_exe().context("cannot find the schedlab binary itself")?;
    let scx = PathBuf::from(&opts.scx);
    let initrd = out.join("initrd.cpio");
    let serial_path = out.join("serial.log");
    let vm_cpus = boot.cpus + u32::from(boot.scheduler_cpu);
    let mut done: Vec<RunOutcome> = Vec::new();
    let mut pending = Boot {
        runs: boot.runs.clone(),
        files: boot.files.clone(),
        calibrate_policy: boot.calibrate_policy.clone(),
        ..*boot
    };
    for attempt in 1..=BOOTS {
        eprintln!("vm-test: writing the initramfs {}", initrd.display());
        write_initramfs(
            &initrd,
            &busybox,
            &[(&me, "schedlab"), (&scx, "schedlab-scx")],
            &pending.files,
            &init_script(&pending),
        )?;
        let per_run = pending.longest_run.as_secs() * 4 + 30;
        // `schedlab calibrate` takes about 4 minutes in the emulated guest, about 10 with a
        // schedlab policy deciding every switch in user space.
        let calibrate = match (pending.calibrate, &pending.calibrate_policy) {
            (false, _) => 0,
            (true, None) => 600,
            (true, Some(_)) => 1500,
        };
        let timeout = Duration::from_secs(
            opts.timeout.unwrap_or(300 + calibrate + per_run * pending.runs.len() as u64),
        );
        eprintln!(
            "vm-test: booting {} on {vm_cpus} virtual CPUs{} (software emulation; {} runs, at most {} s each; \
             stopped after {} s)",
            kernel.display(),
            if boot.scheduler_cpu { ", the last for the scheduler" } else { "" },
            pending.runs.len(),
            pending.longest_run.as_secs(),
            timeout.as_secs()
        );
        let serial = boot_vm(&qemu, &kernel, &initrd, vm_cpus, opts.icount, timeout, &serial_path)?;
        let got = parse_serial(&serial);
        let crash = patching_oops(&serial).map(|l| l.trim().to_string());
        let Some(line) = crash.filter(|_| attempt < BOOTS) else {
            done.extend(got);
            break;
        };
        let kept = out.join(format!("serial-{attempt}.log"));
        std::fs::rename(&serial_path, &kept)
            .with_context(|| format!("cannot rename {} to {}", serial_path.display(), kept.display()))?;
        let (finished, _): (Vec<RunOutcome>, Vec<RunOutcome>) =
            got.into_iter().partition(|o| run_finished(boot, o));
        pending.runs.retain(|r| !finished.iter().any(|o| o.name == r.name));
        pending.calibrate = pending.calibrate && !finished.iter().any(|o| o.name == CALIBRATE);
        eprintln!(
            "vm-test: the guest kernel crashed in its own code patching (`{line}`; {}), most likely a race of \
             QEMU's software emulation of several CPUs; {} runs had finished, booting again for the other {}",
            kept.display(),
            finished.len(),
            pending.runs.len()
        );
        done.extend(finished);
        if pending.runs.is_empty() && !pending.calibrate {
            break;
        }
    }
    for o in &done {
        if let (Some(r), true) = (&o.report, boot.runs.iter().any(|run| run.name == o.name)) {
            let path = out.join(format!("{}.json", o.name));
            std::fs::write(&path, r).with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    Ok(done)
}

/// Whether a run got to its end in a boot that crashed later: its report came back and, under a
/// policy, schedlab-scx's exit was seen.
fn run_finished(boot: &Boot, o: &RunOutcome) -> bool {
    if o.name == CALIBRATE {
        return o.report.is_some();
    }
    let Some(run) = boot.runs.iter().find(|r| r.name == o.name) else { return false };
    o.report.is_some() && (run.policy.is_none() || o.scx_exit.is_some())
}

/// The checks of one run: `policy` is `None` for the baseline.
pub fn check_run(policy: Option<&str>, o: &RunOutcome) -> Vec<String> {
    let mut f = Vec::new();
    let name = &o.name;
    if o.exec_exit != Some(0) {
        f.push(format!(
            "{name}: the workload did not complete (schedlab exec exit {:?}): {}",
            o.exec_exit,
            o.exec_log.join(" | ")
        ));
    }
    if o.report.is_none() {
        f.push(format!("{name}: no report came back"));
    }
    let Some(spec) = policy else {
        if o.state != "disabled" {
            f.push(format!("{name}: sched_ext should be off for the baseline, state is {:?}", o.state));
        }
        return f;
    };
    let base = spec.split('[').next().unwrap_or(spec);
    if o.state != "enabled" {
        f.push(format!("{name}: sched_ext state was {:?}, not enabled", o.state));
    }
    if !o.ops.starts_with(&format!("schedlab_{base}")) {
        f.push(format!("{name}: the loaded ops are {:?}, not schedlab_{base}", o.ops));
    }
    if o.state_before_stop != "enabled" {
        f.push(format!(
            "{name}: sched_ext was {:?} before the scheduler was stopped (ejected?)",
            o.state_before_stop
        ));
    }
    let ejected = o.scx_log.iter().any(|l| l.contains("ejected") || l.contains("stall"));
    if o.scx_exit != Some(0) || ejected {
        f.push(format!(
            "{name}: schedlab-scx exit {:?}: {}",
            o.scx_exit,
            o.scx_log.last().map_or("", |s| s.as_str())
        ));
    }
    if o.state_after != "disabled" {
        f.push(format!(
            "{name}: sched_ext state after the scheduler exited is {:?}, not disabled",
            o.state_after
        ));
    }
    if base == "cfs" {
        if let Some(ratio) = o.report.as_deref().and_then(nice_share_ratio) {
            // Weights 1024 and 335 (sched_prio_to_weight): 3.06; TCG timing is noisy, so +-25 %.
            if !(2.3..=3.8).contains(&ratio) {
                f.push(format!(
                    "{name}: the nice-0 hog got {ratio:.2} times the nice-5 hog's CPU time, not about 3.06"
                ));
            }
        }
    }
    f
}

/// In a report of `vm/mixed.toml`: the CPU time of `hog-nice0` over that of `hog-nice5`, which
/// share one CPU (CFS gives them 1024:335, 3.06), if the report has both.
pub fn nice_share_ratio(report: &str) -> Option<f64> {
    let v: serde_json::Value = serde_json::from_str(report).ok()?;
    let run = |name: &str| -> Option<f64> {
        v["tasks"].as_array()?.iter().find(|t| t["name"] == name)?["run_ns"].as_f64()
    };
    let (a, b) = (run("hog-nice0")?, run("hog-nice5")?);
    (b > 0.0).then(|| a / b)
}

fn short(s: &str, n: usize) -> String {
    if s.len() <= n {
        s.to_string()
    } else {
        format!("{}...", &s[..n.saturating_sub(3)])
    }
}

/// A run name usable as a file name: `ule[slice_ns=1]` becomes `ule_slice_ns_1_`.
pub fn file_safe(spec: &str) -> String {
    spec.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect()
}

fn which(prog: &str) -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
        .ok_or_else(|| anyhow::anyhow!("{prog} not found on PATH"))
}

fn default_cache() -> Result<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(x).join("schedlab/vm"));
    }
    let home = std::env::var_os("HOME").context("neither XDG_CACHE_HOME nor HOME is set: pass --cache")?;
    Ok(PathBuf::from(home).join(".cache/schedlab/vm"))
}

/// Debian's newest cloud kernel from the unstable archive, fetched once into `cache`: returns its
/// vmlinuz after checking its config enables sched_ext.
fn fetch_kernel(cache: &Path) -> Result<PathBuf> {
    let apt = cache.join("apt");
    for d in ["lists/partial", "cache/archives/partial"] {
        std::fs::create_dir_all(apt.join(d)).with_context(|| format!("cannot create {}", apt.display()))?;
    }
    let list = apt.join("sources.list");
    std::fs::write(
        &list,
        "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main\n",
    )
    .with_context(|| format!("cannot write {}", list.display()))?;
    let opts: Vec<String> = vec![
        format!("-oDir::Etc::SourceList={}", list.display()),
        "-oDir::Etc::SourceParts=/dev/null".into(),
        format!("-oDir::State::Lists={}", apt.join("lists").display()),
        format!("-oDir::Cache={}", apt.join("cache").display()),
        "-oDir::State::Status=/dev/null".into(),
        "-oAPT::Architecture=amd64".into(),
        "-oAPT::Sandbox::User=root".into(),
    ];
    let lists_fresh = std::fs::read_dir(apt.join("lists"))
        .map(|d| d.flatten().any(|e| e.file_name().to_string_lossy().contains("_Packages")))
        .unwrap_or(false);
    if !lists_fresh {
        eprintln!("vm-test: reading Debian unstable's package list (private apt state in {})", apt.display());
        run_ok(
            Command::new("apt-get").args(&opts).args(["update", "-qq"]),
            "apt-get update (Debian unstable)",
        )?;
    }
    let search = Command::new("apt-cache")
        .args(&opts)
        .args(["search", "--names-only", r"^linux-binary-[0-9].*-cloud-amd64$"])
        .output()
        .context("cannot run apt-cache (vm-test fetches the kernel with Debian's apt; or pass --kernel)")?;
    let text = String::from_utf8_lossy(&search.stdout);
    let mut versions: Vec<String> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|p| p.strip_prefix("linux-binary-"))
        .filter_map(|v| v.strip_suffix("-cloud-amd64"))
        .map(String::from)
        .collect();
    versions.sort_by(|a, b| cmp_versions(a, b));
    let Some(ver) = versions.pop() else {
        bail!("no linux-binary-*-cloud-amd64 package in Debian unstable's list (apt-cache found none); pass --kernel");
    };
    let dir = cache.join(format!("kernel-{ver}"));
    let vmlinuz = dir.join(format!("usr/lib/modules/{ver}-cloud-amd64/vmlinuz"));
    let config = dir.join(format!("usr/lib/modules/{ver}-cloud-amd64/config"));
    if !(vmlinuz.is_file() && config.is_file()) {
        eprintln!("vm-test: fetching Debian's {ver}-cloud-amd64 kernel into {}", dir.display());
        std::fs::create_dir_all(&dir)?;
        let debs = cache.join("debs");
        std::fs::create_dir_all(&debs)?;
        for pkg in [format!("linux-binary-{ver}-cloud-amd64"), format!("linux-base-{ver}-cloud-amd64")] {
            run_ok(
                Command::new("apt-get").current_dir(&debs).args(&opts).args(["download", "-qq", &pkg]),
                &format!("apt-get download {pkg}"),
            )?;
        }
        for e in std::fs::read_dir(&debs)?.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "deb") && p.to_string_lossy().contains(&ver) {
                run_ok(Command::new("dpkg-deb").arg("-x").arg(&p).arg(&dir), "dpkg-deb -x")?;
            }
        }
    }
    let cfg =
        std::fs::read_to_string(&config).with_context(|| format!("cannot read {}", config.display()))?;
    if !cfg.lines().any(|l| l.trim() == "CONFIG_SCHED_CLASS_EXT=y") {
        bail!("{}: CONFIG_SCHED_CLASS_EXT is not enabled in this kernel; pass --kernel", config.display());
    }
    if !vmlinuz.is_file() {
        bail!("{}: the kernel package did not hold a vmlinuz", vmlinuz.display());
    }
    Ok(vmlinuz)
}

/// Orders Debian kernel versions such as `7.2.13+deb14` numerically, part by part.
pub fn cmp_versions(a: &str, b: &str) -> std::cmp::Ordering {
    let parts = |s: &str| -> Vec<u64> {
        s.split(|c: char| !c.is_ascii_digit())
            .filter(|p| !p.is_empty())
            .filter_map(|p| p.parse().ok())
            .collect()
    };
    parts(a).cmp(&parts(b))
}

fn run_ok(cmd: &mut Command, what: &str) -> Result<()> {
    let o = cmd.output().with_context(|| format!("cannot run {what}"))?;
    if !o.status.success() {
        bail!("{what} failed ({}): {}", o.status, String::from_utf8_lossy(&o.stderr).trim());
    }
    Ok(())
}

/// The `/init` of the VM.
fn init_script(boot: &Boot) -> String {
    let (runs, calibrate) = (&boot.runs, boot.calibrate);
    let mut s = String::from(
        r#"#!/bin/sh
# Written by `schedlab vm-test`.
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmp /tmp
mkdir -p /sys/fs/cgroup && mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null && echo +cpu > /sys/fs/cgroup/cgroup.subtree_control
say() { echo "SCHEDLAB-VM $*"; }
SCX_ENV="env @SCX_ENV@"
state() { cat /sys/kernel/sched_ext/state 2>/dev/null || echo missing; }
say boot kernel="$(uname -r)" cpus="$(nproc)" state="$(state)"
# The guest's clocks: task run times come from sched_clock, elapsed times from the clocksource.
say clock source="$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)" sched_clock="$(dmesg | grep -o 'sched_clock: Marking [a-z]*' | tail -1 | cut -d' ' -f3)"
# The compute loop's speed, measured once under the kernel's own scheduler: every run does the same
# work (measured at each start, with a schedlab scheduler loaded, it swings by half under TCG).
PS=$(@EXEC_PIN@/bin/schedlab calibrate --loop 2>/dev/null)
say loop ps-per-loop="$PS"
alive() { [ -r /proc/$1/stat ] && [ "$(cut -d' ' -f3 /proc/$1/stat)" != Z ]; }
# Starts schedlab-scx for run $1 under policy $2 and waits until sched_ext is enabled (30 s at
# most). A load the kernel ejects because ops.init_task() could not allocate a task's storage
# (-12: a transient failure of the kernel's lock-free allocator) is tried again, three tries in all;
# each refused try is reported with its log. $scx is the running scheduler's pid.
start_scx() {
  try=1
  while :; do
    $SCX_ENV /bin/schedlab-scx --policy "$2" --stats-interval 1@SCX_ARGS@ > /tmp/scx-$1.log 2>&1 &
    scx=$!
    i=0
    while [ "$(state)" != enabled ] && [ $i -lt 300 ] && alive $scx; do sleep 0.1; i=$((i+1)); done
    if [ "$(state)" = enabled ] || alive $scx || [ $try -ge 3 ] \
       || ! grep -q 'ops.init_task() failed (-12)' /tmp/scx-$1.log; then
      return
    fi
    wait $scx
    say run $1 load-refused=$try
    sed "s/^/SCHEDLAB-VM refused $1: /" /tmp/scx-$1.log
    i=0
    while [ "$(state)" != disabled ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
    try=$((try+1))
  done
}
run() {
  name=$1; policy=$2; workload=$3; duration=$4; threads=$5; sample=$6; spawn=$7; rt=$8
  if [ -n "$policy" ]; then
    start_scx $name "$policy"
  fi
  say run $name state="$(state)" ops="$(cat /sys/kernel/sched_ext/root/ops 2>/dev/null)"
"#,
    );
    let scx_env = if std::env::var_os("SCHEDLAB_SCX_TRACE").is_some() { "SCHEDLAB_SCX_TRACE=1" } else { "" };
    s = s.replace("@SCX_ENV@", scx_env);
    let mut scx_args = boot.watchdog_ms.map_or(String::new(), |ms| format!(" --watchdog-ms {ms}"));
    if boot.scheduler_cpu {
        // The last CPU, which the workload does not use (schedlab-scx runs there and only there).
        scx_args.push_str(&format!(" --scheduler-cpu {}", boot.cpus));
    }
    s = s.replace("@SCX_ARGS@", &scx_args);
    let exec_pin = if boot.scheduler_cpu {
        format!("taskset -c 0-{} ", boot.cpus.saturating_sub(1))
    } else {
        String::new()
    };
    s = s.replace("@EXEC_PIN@", &exec_pin);
    s.push_str(&format!(
        "  {exec_pin}/bin/schedlab exec /work/$workload --duration $duration --max-threads $threads ${{PS:+--ps-per-loop $PS}} ${{sample:+--sample-interval $sample}} ${{spawn:+--spawn-at-start}} ${{rt:+--allow-rt}} --json /tmp/$name.json --no-trace --fifo-controller -q > /tmp/exec-$name.log 2>&1\n"
    ));
    s.push_str(
        r#"  say run $name exec-exit=$?
  if [ -n "$policy" ]; then
    say run $name state-before-stop="$(state)"
    kill -INT $scx
    wait $scx
    rc=$?
    say run $name scx-exit=$rc state-after="$(state)"
    sed "s/^/SCHEDLAB-VM scx $name: /" /tmp/scx-$name.log
  fi
  sed "s/^/SCHEDLAB-VM exec $name: /" /tmp/exec-$name.log
  say begin $name
  base64 /tmp/$name.json 2>/dev/null
  say end $name
}
"#,
    );
    if calibrate {
        // On the workload's CPUs; under a schedlab policy if asked, started and stopped as a run's.
        let (start, stop) = match &boot.calibrate_policy {
            Some(p) => (
                format!("start_scx {CALIBRATE} '{p}'\n"),
                format!(
                    "kill -INT $scx\nwait $scx\n\
                     sed \"s/^/SCHEDLAB-VM scx {CALIBRATE}: /\" /tmp/scx-{CALIBRATE}.log\n"
                ),
            ),
            None => (String::new(), String::new()),
        };
        s.push_str(&format!(
            "{start}say run {CALIBRATE} state=\"$(state)\"\n\
             {exec_pin}/bin/schedlab calibrate -o /tmp/{CALIBRATE}.toml > /tmp/exec-{CALIBRATE}.log 2>&1\n\
             say run {CALIBRATE} exec-exit=$?\n{stop}\
             sed \"s/^/SCHEDLAB-VM exec {CALIBRATE}: /\" /tmp/exec-{CALIBRATE}.log\n\
             say begin {CALIBRATE}\nbase64 /tmp/{CALIBRATE}.toml 2>/dev/null\nsay end {CALIBRATE}\n"
        ));
    }
    for r in runs {
        s.push_str(&format!(
            "run {} '{}' '{}' {} {} '{}' '{}' '{}'\n",
            r.name,
            r.policy.as_deref().unwrap_or(""),
            r.workload,
            r.duration,
            r.max_threads,
            r.sample_interval.as_deref().unwrap_or(""),
            if r.spawn_at_start { "1" } else { "" },
            if r.allow_rt { "1" } else { "" }
        ));
    }
    s.push_str("say done\ndmesg | grep -i sched_ext | sed 's/^/SCHEDLAB-VM dmesg: /'\npoweroff -f\n");
    s
}

/// Reads the `SCHEDLAB-VM` lines of a serial log.
pub fn parse_serial(log: &str) -> Vec<RunOutcome> {
    let mut out: Vec<RunOutcome> = Vec::new();
    let mut b64: Option<(String, String)> = None;
    let field = |rest: &str, key: &str| -> Option<String> {
        let start = rest.find(&format!("{key}="))? + key.len() + 1;
        let tail = &rest[start..];
        // Values run to the next ` key=` or the end of the line.
        let end = tail.find(" state-after=").or_else(|| tail.find(" ops=")).unwrap_or(tail.len());
        Some(tail[..end].trim().to_string())
    };
    for raw in log.lines() {
        let line = raw.trim_end_matches('\r');
        if let Some((name, buf)) = b64.as_mut() {
            if line == format!("SCHEDLAB-VM end {name}") {
                let name = name.clone();
                let decoded = base64_decode(buf).and_then(|b| String::from_utf8(b).ok());
                if let Some(o) = out.iter_mut().find(|o| o.name == name) {
                    o.report = decoded.filter(|s| !s.trim().is_empty());
                }
                b64 = None;
            } else {
                buf.push_str(line.trim());
            }
            continue;
        }
        let Some(rest) = line.find("SCHEDLAB-VM ").map(|i| &line[i + "SCHEDLAB-VM ".len()..]) else {
            continue;
        };
        let mut words = rest.splitn(3, ' ');
        let (kind, name, tail) =
            (words.next().unwrap_or(""), words.next().unwrap_or(""), words.next().unwrap_or(""));
        let name = name.trim_end_matches(':').to_string();
        let get = |out: &mut Vec<RunOutcome>| -> usize {
            match out.iter().position(|o| o.name == name) {
                Some(i) => i,
                None => {
                    out.push(RunOutcome { name: name.clone(), ..RunOutcome::default() });
                    out.len() - 1
                }
            }
        };
        match kind {
            "run" => {
                let i = get(&mut out);
                let o = &mut out[i];
                if let Some(v) = field(tail, "state") {
                    if tail.starts_with("state=") {
                        o.state = v;
                        o.ops = field(tail, "ops").unwrap_or_default();
                    }
                }
                if let Some(v) = field(tail, "exec-exit") {
                    o.exec_exit = v.parse().ok();
                }
                if let Some(v) = field(tail, "state-before-stop") {
                    o.state_before_stop = v;
                }
                if let Some(v) = field(tail, "load-refused") {
                    o.load_refusals = o.load_refusals.max(v.parse().unwrap_or(0));
                }
                if let Some(v) = field(tail, "scx-exit") {
                    o.scx_exit = v.parse().ok();
                    o.state_after = field(tail, "state-after").unwrap_or_default();
                }
            }
            "scx" => {
                let i = get(&mut out);
                out[i].scx_log.push(tail.to_string());
            }
            "exec" => {
                let i = get(&mut out);
                out[i].exec_log.push(tail.to_string());
            }
            "refused" => {
                let i = get(&mut out);
                out[i].refused_log.push(tail.to_string());
            }
            "begin" => {
                get(&mut out);
                b64 = Some((name, String::new()));
            }
            _ => {}
        }
    }
    out
}

/// Standard base64 (busybox `base64` output), `None` if malformed.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let bytes: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for chunk in bytes.chunks(4) {
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 {
            return None;
        }
        let mut n = 0u32;
        for &c in &chunk[..4 - pad] {
            n = (n << 6) | val(c)?;
        }
        n <<= 6 * pad as u32;
        let b = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&b[..3 - pad]);
    }
    Some(out)
}

/// Writes an uncompressed initramfs (cpio "newc"): busybox with its applets, the binaries with the
/// shared libraries `ldd` lists, the workload and `/init`.
fn write_initramfs(
    path: &Path,
    busybox: &Path,
    bins: &[(&Path, &str)],
    files: &[(String, Vec<u8>)],
    init: &str,
) -> Result<()> {
    let mut a = Cpio::default();
    for d in ["bin", "dev", "proc", "sys", "tmp", "work", "lib", "lib64", "usr", "usr/lib"] {
        a.dir(d);
    }
    a.file(
        "bin/busybox",
        &std::fs::read(busybox).with_context(|| format!("cannot read {}", busybox.display()))?,
        0o755,
    );
    for applet in [
        "sh", "mount", "mkdir", "taskset", "cat", "sleep", "kill", "sed", "base64", "poweroff", "nproc",
        "uname", "grep", "dmesg", "echo", "env",
    ] {
        a.symlink(&format!("bin/{applet}"), "busybox");
    }
    let mut libs: Vec<PathBuf> = Vec::new();
    for (bin, name) in bins {
        a.file(
            &format!("bin/{name}"),
            &std::fs::read(bin).with_context(|| format!("cannot read {}", bin.display()))?,
            0o755,
        );
        for lib in ldd(bin)? {
            if !libs.contains(&lib) {
                libs.push(lib);
            }
        }
    }
    for lib in &libs {
        let rel = lib.to_string_lossy().trim_start_matches('/').to_string();
        let mut parent = PathBuf::new();
        if let Some(p) = Path::new(&rel).parent() {
            for c in p.components() {
                parent.push(c);
                a.dir(&parent.to_string_lossy());
            }
        }
        let bytes = std::fs::read(lib).with_context(|| format!("cannot read {}", lib.display()))?;
        a.file(&rel, &bytes, 0o755);
    }
    for (name, bytes) in files {
        a.file(&format!("work/{name}"), bytes, 0o644);
    }
    a.file("init", init.as_bytes(), 0o755);
    let bytes = a.finish();
    let mut f = std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
    f.write_all(&bytes).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// The shared libraries of an executable, as `ldd` resolves them (none for a static one).
fn ldd(bin: &Path) -> Result<Vec<PathBuf>> {
    let o = Command::new("ldd").arg(bin).output().context("cannot run ldd")?;
    let text = String::from_utf8_lossy(&o.stdout);
    Ok(text
        .lines()
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with('/')))
        .map(|p| std::fs::canonicalize(p).map(|real| (PathBuf::from(p), real)))
        .filter_map(|r| r.ok())
        // Keep the name the loader asks for (the symlink's), with the real file's bytes.
        .map(|(asked, _)| asked)
        .collect())
}

/// A cpio "newc" archive, as the kernel's initramfs unpacker reads it.
#[derive(Default)]
pub struct Cpio {
    bytes: Vec<u8>,
    ino: u32,
    dirs: Vec<String>,
}

impl Cpio {
    fn entry(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.ino += 1;
        let header = format!(
            "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            self.ino,
            mode,
            0,
            0,
            1,
            0,
            data.len(),
            0,
            0,
            0,
            0,
            name.len() + 1,
            0
        );
        self.bytes.extend_from_slice(header.as_bytes());
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.push(0);
        self.pad();
        self.bytes.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.bytes.len().is_multiple_of(4) {
            self.bytes.push(0);
        }
    }

    /// A directory (once).
    pub fn dir(&mut self, name: &str) {
        if !self.dirs.iter().any(|d| d == name) {
            self.dirs.push(name.to_string());
            self.entry(name, 0o040755, &[]);
        }
    }

    /// A regular file.
    pub fn file(&mut self, name: &str, data: &[u8], perm: u32) {
        self.entry(name, 0o100000 | perm, data);
    }

    /// A symbolic link to `target`.
    pub fn symlink(&mut self, name: &str, target: &str) {
        self.entry(name, 0o120777, target.as_bytes());
    }

    /// The archive with its trailer.
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, &[]);
        self.bytes
    }
}

/// The line of a guest kernel oops at an `int3` trap, if the serial log has one.
///
/// The kernel patches its own code whenever a static key flips (sched_ext flips several as a BPF
/// scheduler is enabled and disabled): it writes an `int3` over the first byte, makes every CPU
/// synchronise, writes the rest, then the first byte, and its `int3` handler steers any CPU that
/// meets the breakpoint meanwhile. Under QEMU's software emulation with several virtual CPUs, a CPU
/// can most likely still execute the breakpoint from code translated before the patch ended, which the handler no
/// longer claims: an `Oops: int3` in ordinary kernel code (seen once, in
/// `sched_balance_update_blocked_averages`, as the CFS run's scheduler unregistered). A BPF
/// scheduler's programs cannot plant a breakpoint, so [`vm_test_cmd`] boots once more instead of
/// failing.
pub fn patching_oops(log: &str) -> Option<&str> {
    log.lines().find(|l| l.contains("Oops: int3:"))
}

/// Boots the VM and returns its serial output (also written to `serial_path`).
fn boot_vm(
    qemu: &Path,
    kernel: &Path,
    initrd: &Path,
    cpus: u32,
    icount: Option<u32>,
    timeout: Duration,
    serial_path: &Path,
) -> Result<String> {
    let log = std::fs::File::create(serial_path)
        .with_context(|| format!("cannot write {}", serial_path.display()))?;
    let mut cmd = Command::new(qemu);
    cmd.args(["-accel", "tcg", "-cpu", "max", "-m", "1G", "-nographic", "-no-reboot"])
        .args(["-smp", &cpus.to_string()]);
    if let Some(shift) = icount {
        cmd.args(["-icount", &format!("shift={shift},sleep=off")]);
    }
    let mut child = cmd
        .arg("-kernel")
        .arg(kernel)
        .arg("-initrd")
        .arg(initrd)
        .args(["-append", "console=ttyS0 quiet panic=-1"])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("cannot start {}", qemu.display()))?;
    let start = Instant::now();
    let mut last_report = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            let text = std::fs::read_to_string(serial_path).unwrap_or_default();
            if !status.success() {
                bail!("qemu exited with {status}; serial log {}", serial_path.display());
            }
            return Ok(text);
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "the VM did not finish in {} s (--timeout); serial log {}",
                timeout.as_secs(),
                serial_path.display()
            );
        }
        if last_report.elapsed() > Duration::from_secs(15) {
            last_report = Instant::now();
            let text = std::fs::read_to_string(serial_path).unwrap_or_default();
            let last = text.lines().rev().find(|l| l.contains("SCHEDLAB-VM run")).unwrap_or("booting");
            eprintln!("vm-test: {:>4.0} s: {}", start.elapsed().as_secs_f64(), last.trim());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_what_busybox_writes() {
        assert_eq!(base64_decode("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(base64_decode("aGVsbG8h\naGk=\n").unwrap(), b"hello!hi");
        assert_eq!(base64_decode("YQ==").unwrap(), b"a");
        assert_eq!(base64_decode("abc"), None);
        assert!(base64_decode("a*==").is_none());
    }

    /// `--calibrate` runs `schedlab calibrate` in the guest before the runs and sends its machine
    /// file back the way reports travel; `--repeat` names each repeat of a run apart.
    #[test]
    fn the_guest_calibration_travels_back_and_repeats_are_named_apart() {
        let runs = [
            Run {
                name: BASELINE.into(),
                policy: None,
                workload: "workload.toml".into(),
                duration: "4s".into(),
                max_threads: 256,
                sample_interval: None,
                spawn_at_start: false,
                allow_rt: false,
            },
            Run {
                name: "cfs-r2".into(),
                policy: Some("cfs".into()),
                workload: "g10.toml".into(),
                duration: "3000000000ns".into(),
                max_threads: 4096,
                sample_interval: Some("100ms".into()),
                spawn_at_start: true,
                allow_rt: true,
            },
        ];
        let mut boot = Boot {
            files: Vec::new(),
            runs: runs.into(),
            cpus: 1,
            calibrate: true,
            calibrate_policy: None,
            longest_run: Duration::from_secs(4),
            watchdog_ms: Some(30_000),
            scheduler_cpu: true,
        };
        let init = init_script(&boot);
        assert!(
            init.contains(
                "$SCX_ENV /bin/schedlab-scx --policy \"$2\" --stats-interval 1 --watchdog-ms 30000 \
                 --scheduler-cpu 1 >"
            ),
            "{init}"
        );
        let cal = init
            .find("taskset -c 0-0 /bin/schedlab calibrate -o /tmp/calibrate.toml")
            .expect("calibrate step");
        assert!(cal < init.find("run kernel '' 'workload.toml' 4s 256").expect("baseline run"), "{init}");
        assert!(!init[..cal].contains("--policy 'cfs'"), "calibrated under the kernel's scheduler: {init}");
        // --calibrate-under: schedlab-scx runs the policy while the guest calibrates, then stops.
        boot.calibrate_policy = Some("cfs".into());
        let under = init_script(&boot);
        let start = under.find("start_scx calibrate 'cfs'\n").expect("started");
        let cal = under.find("/bin/schedlab calibrate -o /tmp/calibrate.toml").expect("calibrate step");
        let stop = under[cal..].find("kill -INT $scx").expect("stopped") + cal;
        assert!(start < cal && stop < under.find("run kernel ''").expect("baseline run"), "{under}");
        boot.calibrate_policy = None;
        assert!(init.contains("run cfs-r2 'cfs' 'g10.toml' 3000000000ns 4096 '100ms' '1' '1'\n"), "{init}");
        assert!(init.contains("run kernel '' 'workload.toml' 4s 256 '' '' ''\n"), "{init}");
        assert!(init.contains("${rt:+--allow-rt}"), "{init}");
        assert!(init.contains("${spawn:+--spawn-at-start}"), "{init}");
        assert!(init.contains("${sample:+--sample-interval $sample}"), "{init}");
        assert!(init.contains(
            "taskset -c 0-0 /bin/schedlab exec /work/$workload --duration $duration --max-threads $threads \
             ${PS:+--ps-per-loop $PS}"
        ));
        let loop_at =
            init.find("PS=$(taskset -c 0-0 /bin/schedlab calibrate --loop").expect("the loop measured");
        assert!(
            loop_at < init.find("run kernel ''").expect("the first run"),
            "measured once, before the runs"
        );
        (boot.calibrate, boot.watchdog_ms, boot.scheduler_cpu) = (false, None, false);
        let plain = init_script(&boot);
        assert!(
            !plain.contains("calibrate -o") && !plain.contains("--watchdog-ms") && !plain.contains("taskset")
        );
        assert!(plain.contains("PS=$(/bin/schedlab calibrate --loop"), "the loop is measured in every boot");
        // The guest's clocks, in every boot's log (run times come from sched_clock).
        assert!(plain.contains("say clock source=") && plain.contains("sched_clock: Marking"), "{plain}");
        let log = "SCHEDLAB-VM run calibrate state=disabled\nSCHEDLAB-VM run calibrate exec-exit=0\n\
                   SCHEDLAB-VM begin calibrate\nbmFtZSA9ICJ2bSIK\nSCHEDLAB-VM end calibrate\n";
        let o = parse_serial(log);
        assert_eq!((o[0].name.as_str(), o[0].report.as_deref()), ("calibrate", Some("name = \"vm\"\n")));
    }

    /// After a crash, a run counts as finished only if its report came back and, under a policy,
    /// schedlab-scx's exit was seen (the crash usually comes as a scheduler is switched off).
    #[test]
    fn a_run_cut_short_by_a_crash_is_run_again() {
        let run = |name: &str, policy: Option<&str>| Run {
            name: name.into(),
            policy: policy.map(String::from),
            workload: "w.toml".into(),
            duration: "1s".into(),
            max_threads: 8,
            sample_interval: None,
            spawn_at_start: false,
            allow_rt: false,
        };
        let boot = one_cpu_boot(vec![run("kernel", None), run("cfs", Some("cfs")), run("ule", Some("ule"))]);
        let log =
            "SCHEDLAB-VM run kernel exec-exit=0\nSCHEDLAB-VM begin kernel\ne30K\nSCHEDLAB-VM end kernel\n\
                   SCHEDLAB-VM run cfs exec-exit=0\nSCHEDLAB-VM begin cfs\ne30K\nSCHEDLAB-VM end cfs\n\
                   SCHEDLAB-VM run ule exec-exit=0\nSCHEDLAB-VM run ule scx-exit=0 state-after=disabled\n\
                   SCHEDLAB-VM begin ule\ne30K\nSCHEDLAB-VM end ule\n";
        let finished: Vec<String> =
            parse_serial(log).into_iter().filter(|o| run_finished(&boot, o)).map(|o| o.name).collect();
        assert_eq!(finished, ["kernel", "ule"], "cfs's scheduler never reported its exit");
    }

    #[test]
    fn kernel_versions_order_numerically() {
        let mut v = vec!["7.10.1+deb14", "7.2.13+deb14", "7.2.9+deb14"];
        v.sort_by(|a, b| cmp_versions(a, b));
        assert_eq!(v, ["7.2.9+deb14", "7.2.13+deb14", "7.10.1+deb14"]);
    }

    /// Only a breakpoint-trap oops (the emulator's code-patching race) earns the second boot; any other
    /// crash, and a clean log, do not.
    #[test]
    fn only_an_int3_oops_counts_as_the_patching_race() {
        let race = "SCHEDLAB-VM run cfs state-before-stop=enabled\n\
                    [   12.344371] Oops: int3: 0000 [#1] SMP NOPTI\n\
                    [   12.344950] RIP: 0010:sched_balance_update_blocked_averages+0x45/0x80\n";
        assert_eq!(patching_oops(race), Some("[   12.344371] Oops: int3: 0000 [#1] SMP NOPTI"));
        let gpf = "[    9.1] Oops: general protection fault, probably for non-canonical address\n\
                   [    9.2] Kernel panic - not syncing: Fatal exception\n";
        assert_eq!(patching_oops(gpf), None);
        let bug = "[    3.0] BUG: kernel NULL pointer dereference, address: 0000000000000008\n";
        assert_eq!(patching_oops(bug), None);
        assert_eq!(patching_oops("SCHEDLAB-VM run cfs scx-exit=0 state-after=disabled\n"), None);
    }

    #[test]
    fn a_serial_log_gives_each_runs_outcome_and_report() {
        let log = "\
noise\r
SCHEDLAB-VM boot kernel=7.2.13 cpus=2 state=disabled\r
SCHEDLAB-VM run eevdf state=disabled ops=\r
SCHEDLAB-VM run eevdf exec-exit=0\r
SCHEDLAB-VM begin eevdf\r
eyJhIjox\r
fQ==\r
SCHEDLAB-VM end eevdf\r
SCHEDLAB-VM run cfs state=enabled ops=schedlab_cfs_0.1.0_x86_64\r
[   5.1] a kernel line SCHEDLAB-VM exec cfs: note: something\r
SCHEDLAB-VM run cfs exec-exit=0\r
SCHEDLAB-VM run cfs state-before-stop=enabled\r
SCHEDLAB-VM run cfs scx-exit=0 state-after=disabled\r
SCHEDLAB-VM scx cfs: schedlab-scx: policy cfs unregistered cleanly\r
SCHEDLAB-VM begin cfs\r
SCHEDLAB-VM end cfs\r
";
        let o = parse_serial(log);
        assert_eq!(o.len(), 2);
        assert_eq!(o[0].name, "eevdf");
        assert_eq!(o[0].report.as_deref(), Some("{\"a\":1}"));
        assert!(check_run(None, &o[0]).is_empty(), "{:?}", check_run(None, &o[0]));
        let cfs = &o[1];
        assert_eq!((cfs.state.as_str(), cfs.ops.as_str()), ("enabled", "schedlab_cfs_0.1.0_x86_64"));
        assert_eq!((cfs.exec_exit, cfs.scx_exit), (Some(0), Some(0)));
        assert_eq!(cfs.state_after, "disabled");
        assert_eq!(cfs.exec_log, ["note: something"]);
        // No report came back for cfs: that alone fails its checks.
        assert_eq!(check_run(Some("cfs"), cfs), ["cfs: no report came back"]);
        // A wrong ops name, an ejection and a workload that did not finish are each named.
        let mut bad = cfs.clone();
        bad.report = Some("{}".into());
        bad.ops = "other".into();
        bad.state_before_stop = "disabled".into();
        bad.exec_exit = Some(1);
        let f = check_run(Some("cfs[sched_latency_ns=1]"), &bad);
        assert_eq!(f.len(), 3, "{f:?}");
        // CFS's nice weighting is checked on the hogs' CPU times.
        let mut shares = bad.clone();
        shares.ops = "schedlab_cfs_0.1.0".into();
        shares.state_before_stop = "enabled".into();
        shares.exec_exit = Some(0);
        let report = |a: u64, b: u64| {
            format!(
                r#"{{"tasks":[{{"name":"hog-nice0","run_ns":{a}}},{{"name":"hog-nice5","run_ns":{b}}}]}}"#
            )
        };
        shares.report = Some(report(3_060, 1_000));
        assert!(check_run(Some("cfs"), &shares).is_empty());
        shares.report = Some(report(1_000, 1_000));
        let f = check_run(Some("cfs"), &shares);
        assert!(f.len() == 1 && f[0].contains("1.00 times"), "{f:?}");
        // Other policies weight nice levels their own way: no such check.
        shares.ops = "schedlab_ule_0.1.0".into();
        assert!(check_run(Some("ule"), &shares).is_empty());
    }

    /// A boot of `runs` on one CPU, without calibration, watchdog or scheduler CPU.
    fn one_cpu_boot(runs: Vec<Run>) -> Boot {
        Boot {
            files: Vec::new(),
            runs,
            cpus: 1,
            calibrate: false,
            calibrate_policy: None,
            longest_run: Duration::from_secs(1),
            watchdog_ms: None,
            scheduler_cpu: false,
        }
    }

    /// A directory removed when dropped.
    struct TempDir(PathBuf);
    impl TempDir {
        fn path(&self) -> &Path {
            &self.0
        }
    }
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// The init script's `start_scx`, run by a real shell with a stand-in for schedlab-scx that the
    /// kernel "ejects" as it did in CI (ops.init_task() failed (-12)) on its first `refuse` starts:
    /// a refused load is tried again and reported, three tries in all; another failure is not.
    #[test]
    fn a_load_the_kernel_refuses_for_want_of_memory_is_tried_again() {
        let Ok(shell) = which("busybox").map(|b| (b, true)).or_else(|_| which("sh").map(|s| (s, false)))
        else {
            panic!("neither busybox nor sh is installed");
        };
        let boot = one_cpu_boot(Vec::new());
        let init = init_script(&boot);
        let from = init.find("alive() {").expect("alive()");
        let to = init.find("run() {").expect("run()");
        let dir = TempDir(std::env::temp_dir().join(format!("schedlab-start-scx-{}", std::process::id())));
        std::fs::create_dir_all(dir.path()).unwrap();
        let d = dir.path().display();
        // The stand-in: counts its starts; refused ones print the kernel's exit and end, a taken one
        // enables sched_ext (a file here) and runs until killed.
        let fake = format!(
            "#!/bin/sh\nn=$(($(cat {d}/starts 2>/dev/null || echo 0) + 1)); echo $n > {d}/starts\n\
             if [ $n -le $(cat {d}/refuse) ]; then echo disabled > {d}/state; echo \"schedlab-scx: ejected by the \
             kernel: EXIT: runtime error ($(cat {d}/reason) for init[1]) on CPU 0\"; exit 1; fi\n\
             echo enabled > {d}/state; echo \"schedlab-scx: policy $2 enabled\"; exec sleep 30\n"
        );
        std::fs::write(dir.path().join("scx"), fake).unwrap();
        std::fs::set_permissions(dir.path().join("scx"), std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let run = |refuse: u32, reason: &str| -> (String, u32) {
            std::fs::write(dir.path().join("refuse"), refuse.to_string()).unwrap();
            std::fs::write(dir.path().join("reason"), reason).unwrap();
            std::fs::write(dir.path().join("state"), "disabled").unwrap();
            let _ = std::fs::remove_file(dir.path().join("starts"));
            let script = format!(
                "say() {{ echo \"SCHEDLAB-VM $*\"; }}\nstate() {{ cat {d}/state; }}\nSCX_ENV=env\n{}\n\
                 start_scx ule 'ule'\nsay run ule state=\"$(state)\" ops=\n\
                 alive $scx && kill $scx\ntrue\n",
                init[from..to]
                    .replace("/tmp/", &format!("{d}/"))
                    .replace("/bin/schedlab-scx", &format!("{d}/scx"))
            );
            let mut cmd = Command::new(&shell.0);
            if shell.1 {
                cmd.arg("sh");
            }
            let out = cmd.arg("-c").arg(script).output().unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let starts = std::fs::read_to_string(dir.path().join("starts")).unwrap().trim().parse().unwrap();
            (String::from_utf8(out.stdout).unwrap(), starts)
        };
        let enomem = "ops.init_task() failed (-12)";
        // Taken at once: one start, nothing reported.
        let (log, starts) = run(0, enomem);
        assert_eq!(starts, 1, "{log}");
        let o = parse_serial(&log);
        assert_eq!((o[0].state.as_str(), o[0].load_refusals), ("enabled", 0), "{log}");
        // Refused twice, taken at the third try.
        let (log, starts) = run(2, enomem);
        assert_eq!(starts, 3, "{log}");
        let o = parse_serial(&log);
        assert_eq!((o[0].state.as_str(), o[0].load_refusals), ("enabled", 2), "{log}");
        assert_eq!(o[0].refused_log.len(), 2, "{log}");
        assert!(o[0].refused_log[1].contains(enomem), "{log}");
        // Refused three times: given up, the run's checks fail on the state.
        let (log, starts) = run(5, enomem);
        assert_eq!(starts, 3, "{log}");
        let o = parse_serial(&log);
        assert_eq!((o[0].state.as_str(), o[0].load_refusals), ("disabled", 2), "{log}");
        // Any other ejection is the scheduler's own failure: not tried again.
        let (log, starts) = run(1, "ops.init_task() failed (-22)");
        assert_eq!(starts, 1, "{log}");
        assert_eq!(parse_serial(&log)[0].load_refusals, 0, "{log}");
    }

    #[test]
    fn run_names_are_file_safe() {
        assert_eq!(file_safe("ule[slice_ns=10000000]"), "ule_slice_ns_10000000_");
        assert_eq!(file_safe("cfs"), "cfs");
    }

    #[test]
    fn the_cpio_archive_is_newc_with_a_trailer() {
        let mut a = Cpio::default();
        a.dir("bin");
        a.file("bin/x", b"abc", 0o755);
        a.symlink("bin/y", "x");
        let b = a.finish();
        assert!(b.starts_with(b"070701"));
        assert_eq!(b.len() % 4, 0);
        let text = String::from_utf8_lossy(&b);
        assert!(text.contains("bin/x\0") && text.contains("TRAILER!!!\0"));
        // The file entry's size field (7th) says 3 bytes.
        let at = text.find("bin/x").unwrap() - 110;
        assert_eq!(&text[at + 6 + 6 * 8..at + 6 + 7 * 8], "00000003");
        // Checked against the real cpio tool where it is installed.
        if let Ok(mut child) =
            Command::new("cpio").args(["-t", "--quiet"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()
        {
            child.stdin.take().unwrap().write_all(&b).unwrap();
            let out = child.wait_with_output().unwrap();
            assert_eq!(
                String::from_utf8_lossy(&out.stdout).lines().collect::<Vec<_>>(),
                ["bin", "bin/x", "bin/y"]
            );
        }
    }
}
