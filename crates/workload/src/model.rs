//! The workload data model: what the simulator executes.

use schedlab_core::{Ns, SchedClass};

/// Index of a mutex in [`Workload::mutexes`].
pub type MutexId = u32;
/// Index of a condition variable in [`Workload::conds`].
pub type CondId = u32;
/// Index of a pipe in [`Workload::pipes`].
pub type PipeId = u32;
/// Index of a barrier in [`Workload::barriers`].
pub type BarrierId = u32;
/// Index of a device in [`Workload::devices`].
pub type DeviceId = u32;
/// Index of a task template in [`Workload::tasks`].
pub type TemplateId = u32;
/// Index of a task group in [`Workload::groups`] (0 is the root group).
pub type GroupIdx = u32;
/// Index of a semaphore in [`Workload::semaphores`].
pub type SemId = u32;
/// Index of a suspend/resume event in [`Workload::events`].
pub type EventId = u32;
/// Index of a CPU list in [`Workload::cpu_lists`].
pub type CpuListId = u32;
/// Index of a counter in [`Workload::counters`].
pub type CounterId = u32;
/// Index of a timer in [`Workload::timers`] (0 is each task's default timer).
pub type TimerId = u32;

/// A duration drawn from a distribution each time the op runs, from the run's seeded random number
/// generator (so a run stays reproducible). Parameters are nanoseconds; draws are rounded to whole
/// nanoseconds and never negative.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dist {
    /// Always this value.
    Fixed(Ns),
    /// Uniform over `lo..=hi`.
    Uniform {
        /// Lowest value.
        lo: Ns,
        /// Highest value.
        hi: Ns,
    },
    /// Exponential with this mean.
    Exponential {
        /// Mean.
        mean: Ns,
    },
    /// Normal, truncated at zero.
    Normal {
        /// Mean.
        mean: Ns,
        /// Standard deviation.
        stddev: Ns,
    },
    /// Log-normal with this mean and standard deviation (of the distribution itself, not of its log).
    LogNormal {
        /// Mean.
        mean: Ns,
        /// Standard deviation.
        stddev: Ns,
    },
}

impl Dist {
    /// The distribution's mean, ns (exact for all but the truncated normal, where it is the untruncated
    /// mean).
    pub fn mean(&self) -> Ns {
        match *self {
            Dist::Fixed(v) => v,
            Dist::Uniform { lo, hi } => lo + (hi - lo) / 2,
            Dist::Exponential { mean } | Dist::Normal { mean, .. } | Dist::LogNormal { mean, .. } => mean,
        }
    }
}

impl From<Ns> for Dist {
    fn from(v: Ns) -> Dist {
        Dist::Fixed(v)
    }
}

/// What a task does to the shared hardware resources, per 10,000 cycles (the activity vectors of seed
/// 004 table 4.1: instructions retired, cycles, L2-busy cycles, bus-busy cycles, MMX, SSE, x87, branch and
/// integer instructions). Read by the contention and activity-vector models; zero means unused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Activity {
    /// Instructions retired.
    pub instr: u32,
    /// Unhalted cycles.
    pub cycles: u32,
    /// Cycles the L2 cache is busy.
    pub l2: u32,
    /// Cycles the front-side bus is busy.
    pub bus: u32,
    /// MMX instructions.
    pub mmx: u32,
    /// SSE instructions.
    pub sse: u32,
    /// x87 floating-point instructions.
    pub x87: u32,
    /// Branch instructions.
    pub branch: u32,
    /// Integer instructions.
    pub int: u32,
}

impl Activity {
    /// Component names, in declaration order.
    pub const FIELDS: [&'static str; 9] =
        ["instr", "cycles", "l2", "bus", "mmx", "sse", "x87", "branch", "int"];

    /// The components in [`Activity::FIELDS`] order.
    pub fn values(&self) -> [u32; 9] {
        [self.instr, self.cycles, self.l2, self.bus, self.mmx, self.sse, self.x87, self.branch, self.int]
    }

    /// Sets a component by name; `false` if there is no such component.
    pub fn set(&mut self, name: &str, v: u32) -> bool {
        let slot = match name {
            "instr" => &mut self.instr,
            "cycles" => &mut self.cycles,
            "l2" => &mut self.l2,
            "bus" => &mut self.bus,
            "mmx" => &mut self.mmx,
            "sse" => &mut self.sse,
            "x87" => &mut self.x87,
            "branch" => &mut self.branch,
            "int" => &mut self.int,
            _ => return false,
        };
        *slot = v;
        true
    }
}

/// One operation of a task's program.
///
/// Blocking semantics (what the engine implements): `Lock` blocks while another task owns the mutex;
/// `Unlock` frees it and wakes the first waiter (if any waited since it was taken), which tries
/// again and may find it taken (glibc's mutex, no hand-off); `Recv` blocks until `bytes` are in
/// the pipe and `Send` until `bytes` fit, both served in FIFO order with the bytes handed over at wake
/// time; `Barrier` blocks until `parties` tasks have arrived; `CondWait` releases the mutex, waits for a
/// `Signal`/`Broadcast`, then re-acquires the mutex; `Io` queues on the device (FIFO, one request at a
/// time) and blocks for its service time; `WaitChildren` blocks until every task this task forked has
/// exited; `WaitChild` until one of them has (at once if one exited since the last wait).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Compute calibrated work: the wall time taken scales with CPU speed and cache warmth (rt-app's
    /// `run`).
    Compute {
        /// Work, in nanoseconds on a nominal-speed CPU with a warm cache.
        work: Dist,
    },
    /// Busy-wait for wall-clock time on the CPU, not scaled by speed (rt-app's `runtime`).
    Spin {
        /// Wall-clock nanoseconds spent running.
        time: Dist,
    },
    /// Sleep.
    Sleep {
        /// Nanoseconds.
        time: Dist,
    },
    /// Wait for the next expiry of this task's periodic timer. The first expiry is one period after the
    /// task started (as rt-app anchors its timers at the thread's start, `t_first`; for a shared timer,
    /// the start of the first task to use it), so work before the first wait falls inside the first
    /// period; each later expiry is one period after the previous expiry, so the
    /// period does not drift with run time. If the expiry has already passed (an overrun), the task
    /// continues at once; in `absolute` mode the expiries stay on the original grid (the task may then
    /// catch up several periods back to back), in relative mode the grid restarts from now.
    Timer {
        /// Which timer: per task unless the timer is shared (rt-app's non-`unique` refs).
        timer: TimerId,
        /// Period, nanoseconds.
        period_ns: Ns,
        /// Keep the original grid after an overrun (rt-app `mode: absolute`) rather than restart it.
        absolute: bool,
    },
    /// `sched_yield()`.
    Yield,
    /// Change the task's own nice level (`setpriority(PRIO_PROCESS, gettid(), nice)`), -20..=19.
    /// The policy keeps the task's history (Linux's `set_user_nice`, FreeBSD's `sched_nice`).
    Nice(i8),
    /// Change the task's own scheduling policy and RT priority (`sched_setscheduler(gettid(),
    /// policy, {rt_priority})`): 1..=99 for FIFO and RR, 0 for the others. A change to what the
    /// task already has does nothing (as in Linux); otherwise the policy keeps the task's history
    /// and queues it by its new class (`SchedPolicy::set_class`).
    SetClass {
        /// The new policy.
        class: SchedClass,
        /// The new RT priority (0 unless `class` is FIFO or RR).
        rt_priority: u8,
    },
    /// Lock a mutex.
    Lock(MutexId),
    /// Unlock a mutex the task owns.
    Unlock(MutexId),
    /// `pthread_cond_wait(cond, mutex)`; the task must own `mutex`.
    CondWait {
        /// The condition variable.
        cond: CondId,
        /// The mutex released while waiting and re-acquired after.
        mutex: MutexId,
    },
    /// Wake one waiter of a condition variable.
    Signal(CondId),
    /// Wake all waiters of a condition variable.
    Broadcast(CondId),
    /// Decrement a counting semaphore, blocking while it is zero (waiters served FIFO).
    SemWait(SemId),
    /// Increment a semaphore (or hand the unit to its first waiter).
    SemPost(SemId),
    /// Block until another task resumes this event; a resume that finds nobody suspended is lost
    /// (rt-app `suspend`).
    Suspend(EventId),
    /// Wake every task suspended on the event (rt-app `resume`).
    Resume(EventId),
    /// Change the task's own allowed CPUs (`sched_setaffinity(0, ..)`, rt-app per-phase `cpus`); an
    /// empty list means all CPUs.
    SetCpus(CpuListId),
    /// Write `bytes` to a pipe.
    Send {
        /// The pipe.
        pipe: PipeId,
        /// Bytes (at most the pipe capacity).
        bytes: u32,
    },
    /// Read `bytes` from a pipe.
    Recv {
        /// The pipe.
        pipe: PipeId,
        /// Bytes (at most the pipe capacity).
        bytes: u32,
    },
    /// Wait at a barrier (sleeping).
    Barrier(BarrierId),
    /// Wait at a barrier spinning on the CPU for up to `spin_ns`, then sleeping (libgomp's
    /// `GOMP_SPINCOUNT` behaviour, the NAS MG waits of seed 002).
    BarrierSpin {
        /// The barrier.
        barrier: BarrierId,
        /// Longest busy-wait before sleeping, ns.
        spin_ns: Ns,
    },
    /// Add one to a named counter (a benchmark's own score: events, messages, requests).
    Count(CounterId),
    /// Fork a child running a template's program with that template's properties.
    Fork(TemplateId),
    /// `execve()`: the task (a process of its own) goes on as a new program, the template's,
    /// from its first op, keeping its identity (pid, parent, children), scheduling properties and
    /// counters; the kernel may move it to another CPU on the way (Linux's `sched_exec`, asked
    /// through `SchedPolicy::exec_cpu`).
    Exec(TemplateId),
    /// Wait until every child this task forked has exited.
    WaitChildren,
    /// `wait()`: wait until one child this task forked has exited, and reap it; a child that
    /// exited since this task last waited is reaped at once, and with no child left it returns
    /// at once (`ECHILD`). How `make -j` learns that a job ended.
    WaitChild,
    /// Block on a device for a service time once the device is free (FIFO).
    Io {
        /// The device.
        device: DeviceId,
        /// Service time, nanoseconds.
        service: Dist,
    },
    /// Start of a loop body repeated `count` times (`0` = forever); `end` is the index of the matching
    /// [`Op::EndLoop`].
    Loop {
        /// Repetitions; 0 means forever.
        count: u32,
        /// Index of the matching `EndLoop`.
        end: u32,
    },
    /// End of a loop body; `start` is the index of the matching [`Op::Loop`].
    EndLoop {
        /// Index of the matching `Loop`.
        start: u32,
    },
    /// Exit now (reaching the end of the program also exits).
    Exit,
}

/// A program: a flat list of operations with loop markers.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Program {
    /// The operations, executed in order.
    pub ops: Vec<Op>,
}

/// A task template: a program plus scheduling properties. Templates with `instances > 0` start when
/// the run starts (after `start_ns`); any template can be forked with [`Op::Fork`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskSpec {
    /// Name; instance `i` is called `name-i` when there is more than one.
    pub name: String,
    /// The program each instance runs.
    pub program: Program,
    /// Instances started at the beginning (0 for a template that is only forked).
    pub instances: u32,
    /// Whether the instances are threads of one process (share a tgid/mm) rather than processes.
    pub threads: bool,
    /// Scheduling class.
    pub class: SchedClass,
    /// Nice level, -20..=19.
    pub nice: i8,
    /// RT priority 1..=99 (for FIFO/RR).
    pub rt_priority: u8,
    /// Task group.
    pub group: GroupIdx,
    /// Allowed CPUs (`None` = all).
    pub cpus: Option<Vec<u32>>,
    /// Delay before the instances start, nanoseconds.
    pub start_ns: Ns,
    /// Resource usage for the contention model (`None`: not modelled).
    pub activity: Option<Activity>,
    /// Process name: all tasks of all templates naming the same process share one tgid (threads of
    /// one process). `None`: each instance is its own process, unless `threads` is set.
    pub process: Option<String>,
    /// The task's own request size (slice) for the fair class, `sched_attr.sched_runtime` of a
    /// SCHED_NORMAL/BATCH/IDLE task: Linux 6.12+ EEVDF uses it instead of the base slice, clamped to
    /// 0.1-100 ms (`__setparam_fair`). `None`: the base slice. Policies without per-task slices
    /// ignore it (EEVDF 6.6 as Linux 6.6 did).
    pub slice_ns: Option<Ns>,
    /// A background task (a monitor, a probe, a daemon): the run does not wait for it. The stop
    /// conditions count only the other, foreground, tasks (`all_done` ends the run when the last of
    /// them exits); background tasks still running then end with the run, and the makespan and the
    /// fairness summary are over the foreground tasks.
    pub background: bool,
}

impl TaskSpec {
    /// A template with default properties: one instance, nice 0, SCHED_NORMAL, root group, all CPUs.
    pub fn new(name: impl Into<String>, program: Program) -> TaskSpec {
        TaskSpec {
            name: name.into(),
            program,
            instances: 1,
            threads: false,
            class: SchedClass::Normal,
            nice: 0,
            rt_priority: 0,
            group: 0,
            cpus: None,
            start_ns: 0,
            activity: None,
            process: None,
            slice_ns: None,
            background: false,
        }
    }

    /// Whether each instance runs as a process of its own: neither `threads` nor in a named
    /// `process` (`schedlab exec` forks each such instance as a process, which may fork in turn).
    /// The machine's process fork and exit costs apply to these.
    pub fn own_process(&self) -> bool {
        !self.threads && self.process.is_none()
    }
}

/// A pipe (or a socket buffer): a byte queue with a capacity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipeSpec {
    /// Name.
    pub name: String,
    /// Capacity, bytes (Linux pipes: 65536); for a socket its send buffer (`sk_sndbuf`), against
    /// which each message is charged its kernel size ([`PipeKind::UnixStream`]).
    pub capacity: u32,
    /// What kind of kernel object it is.
    pub kind: PipeKind,
}

impl PipeSpec {
    /// A pipe of `capacity` bytes.
    pub fn pipe(name: impl Into<String>, capacity: u32) -> PipeSpec {
        PipeSpec { name: name.into(), capacity, kind: PipeKind::Pipe }
    }

    /// The most bytes one send or receive may move (a socket's message is at most its largest
    /// kernel buffer; a pipe's at most its capacity).
    pub fn max_message_bytes(&self) -> u32 {
        match self.kind {
            PipeKind::Pipe => self.capacity,
            PipeKind::UnixStream(acc) => acc.max_skb_bytes(self.capacity),
        }
    }
}

/// The kernel object behind a workload pipe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PipeKind {
    /// A pipe: a byte counter against its capacity; a writer waits for room for its whole write
    /// and is woken as soon as there is.
    Pipe,
    /// An AF_UNIX stream socket (`socketpair(AF_UNIX, SOCK_STREAM)`), as hackbench uses: every
    /// message is one socket buffer charged its `truesize` against the sending socket's
    /// `sk_sndbuf` (the capacity; every writer of the socket shares it), a writer may send while
    /// the charge is below the capacity (`sock_alloc_send_pskb`), and blocked writers are woken,
    /// all of them, only when the reader has brought the charge down to a quarter of the capacity
    /// (`unix_writable`: `wmem_alloc << 2 <= sndbuf`), net/unix/af_unix.c.
    UnixStream(SkbAccounting),
}

/// How a kernel charges a socket buffer to its socket: which Linux.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkbAccounting {
    /// Linux before 3.2 (the HTFS thesis's 2.6.38): `truesize = SKB_DATA_ALIGN(len) +
    /// sizeof(struct sk_buff)` (net/core/skbuff.c `__alloc_skb`), with a 232-byte `sk_buff` on
    /// x86-64; the default send buffer `SK_WMEM_MAX = (sizeof(struct sk_buff) + 256) * 256` =
    /// 124,928 bytes (net/core/sock.c), the `net.core.wmem_default` such systems report.
    Linux26,
    /// Linux 3.2 and later (`SKB_TRUESIZE`, with the head's kmalloc size rounded up): a message
    /// of up to 3,776 bytes is one linear buffer of `roundup_pow_of_two(ALIGN(len, 64) + 320) + 256`
    /// bytes (768 for 100 bytes); a longer one keeps what is over a page's worth in pages, each
    /// charged whole (unix_stream_sendmsg); one buffer carries at most 36,544 bytes; the default
    /// send buffer is 212,992. Measured on Linux 6.18 (x86-64): a socket whose writes never block
    /// takes 278 writes of 1 to 100 bytes, 167 of 200 or 512, 93 of 1,000, 49 of 3,000, 44 of 4,096
    /// and 24 of 8,192 (`socket_charges_match_this_kernel` checks it on the machine that runs it).
    Linux,
}

/// `sizeof(struct sk_buff)` on x86-64 Linux 2.6.
const SK_BUFF_26: u32 = 232;
/// `SKB_DATA_ALIGN`'s alignment (`SMP_CACHE_BYTES` on x86-64).
const SKB_ALIGN: u32 = 64;
/// `SKB_DATA_ALIGN(sizeof(struct skb_shared_info))` on x86-64 Linux 3.2 and later.
const SHARED_INFO: u32 = 320;
/// `SKB_DATA_ALIGN(sizeof(struct sk_buff))` on x86-64 Linux 3.2 and later.
const SK_BUFF_ALIGNED: u32 = 256;
/// The largest linear head of one page (`SKB_MAX_HEAD(0)` = 4,096 - 320).
const SKB_MAX_HEAD: u32 = 4096 - SHARED_INFO;
/// Paged data one buffer may carry beyond its head (`UNIX_SKB_FRAGS_SZ`, 32 KiB).
const UNIX_SKB_FRAGS: u32 = 32_768;

fn align(x: u32, to: u32) -> u32 {
    x.div_ceil(to) * to
}

impl SkbAccounting {
    /// The kernel's default send buffer (`net.core.wmem_default`), bytes.
    pub fn default_sndbuf(self) -> u32 {
        match self {
            SkbAccounting::Linux26 => (SK_BUFF_26 + 256) * 256,
            SkbAccounting::Linux => 212_992,
        }
    }

    /// What one message of `len` bytes (one socket buffer) is charged, bytes.
    pub fn truesize(self, len: u32) -> u32 {
        match self {
            SkbAccounting::Linux26 => align(len, SKB_ALIGN) + SK_BUFF_26,
            SkbAccounting::Linux => {
                // unix_stream_sendmsg: what exceeds a page's head goes to whole pages.
                let paged = if len > SKB_MAX_HEAD { len.min(align(len - SKB_MAX_HEAD, 4096)) } else { 0 };
                let head = len - paged;
                (align(head, SKB_ALIGN) + SHARED_INFO).next_power_of_two()
                    + SK_BUFF_ALIGNED
                    + align(paged, 4096)
            }
        }
    }

    /// The most bytes one socket buffer carries with send buffer `sndbuf`: half of it less 64
    /// (unix_stream_sendmsg), and on 3.2 and later at most a head and 32 KiB of pages; on 2.6 at
    /// most `SKB_MAX_ALLOC` (four pages less the shared info; 384 bytes taken for it here).
    pub fn max_skb_bytes(self, sndbuf: u32) -> u32 {
        let half = (sndbuf >> 1).saturating_sub(64).max(1);
        match self {
            SkbAccounting::Linux26 => half.min(4 * 4096 - 384),
            SkbAccounting::Linux => half.min(SKB_MAX_HEAD + UNIX_SKB_FRAGS),
        }
    }

    /// The name a workload file uses (`skb = "..."`).
    pub fn name(self) -> &'static str {
        match self {
            SkbAccounting::Linux26 => "linux-2.6",
            SkbAccounting::Linux => "linux",
        }
    }

    /// The accounting a workload file names.
    pub fn from_name(s: &str) -> Option<SkbAccounting> {
        match s {
            "linux-2.6" => Some(SkbAccounting::Linux26),
            "linux" => Some(SkbAccounting::Linux),
            _ => None,
        }
    }
}

/// A timer: each task has its own copy, or all tasks share one (every use advances the shared expiry,
/// as rt-app's timers shared across a thread's instances do).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimerSpec {
    /// Name (index 0 is `default`, the implicit per-task timer).
    pub name: String,
    /// Shared by all tasks that use it.
    pub shared: bool,
}

/// A counting semaphore.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SemSpec {
    /// Name.
    pub name: String,
    /// Initial count.
    pub initial: u32,
}

/// A barrier released when `parties` tasks have arrived; it then resets for the next round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BarrierSpec {
    /// Name.
    pub name: String,
    /// Tasks that must arrive.
    pub parties: u32,
}

/// A task group (cgroup) with CPU shares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSpec {
    /// Name.
    pub name: String,
    /// Parent group (0 = root).
    pub parent: GroupIdx,
    /// `cpu.shares` (Linux default 1024).
    pub shares: u64,
}

/// A change of a template's instances' allowed CPUs at a given time (e.g. pinned, then unpinned).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AffinityChange {
    /// The template whose live instances change.
    pub template: TemplateId,
    /// When.
    pub at_ns: Ns,
    /// The new allowed CPUs (`None` = all).
    pub cpus: Option<Vec<u32>>,
}

/// When a run ends.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum StopWhen {
    /// After the run's duration.
    #[default]
    Duration,
    /// When every task has exited (or the duration, if that comes first).
    AllDone,
    /// When every instance of a template (and their forked descendants of that template) has exited.
    TemplateDone(TemplateId),
}

/// A complete workload.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Workload {
    /// Name, for reports.
    pub name: String,
    /// Task templates.
    pub tasks: Vec<TaskSpec>,
    /// Task groups; index 0 is the root group and always present.
    pub groups: Vec<GroupSpec>,
    /// Mutex names.
    pub mutexes: Vec<String>,
    /// Condition variable names.
    pub conds: Vec<String>,
    /// Pipes.
    pub pipes: Vec<PipeSpec>,
    /// Barriers.
    pub barriers: Vec<BarrierSpec>,
    /// Device names (each serves one request at a time, FIFO).
    pub devices: Vec<String>,
    /// Counting semaphores.
    pub semaphores: Vec<SemSpec>,
    /// Suspend/resume event names.
    pub events: Vec<String>,
    /// CPU lists used by [`Op::SetCpus`] (empty = all CPUs).
    pub cpu_lists: Vec<Vec<u32>>,
    /// Counter names (see [`Op::Count`]).
    pub counters: Vec<String>,
    /// Timers; index 0 is the implicit per-task `default` timer and always present.
    pub timers: Vec<TimerSpec>,
    /// Scheduled affinity changes.
    pub affinity_changes: Vec<AffinityChange>,
    /// Stop condition.
    pub stop: StopWhen,
    /// Duration limit, if the workload sets one (the CLI's `--duration` overrides it).
    pub duration_ns: Option<Ns>,
}

fn dist_ok(d: Dist) -> bool {
    let max = crate::duration::MAX_TIME_NS;
    match d {
        Dist::Fixed(v) => v <= max,
        Dist::Uniform { lo, hi } => lo <= hi && hi <= max,
        Dist::Exponential { mean } => mean <= max,
        Dist::Normal { mean, stddev } => mean <= max && stddev <= max,
        Dist::LogNormal { mean, stddev } => mean > 0 && mean <= max && stddev <= max,
    }
}

/// Starts a loop of `count` repetitions (0 = forever) at the end of `ops`; `None` for a single pass,
/// which needs no loop. Pair with [`close_loop`] after the body.
pub(crate) fn open_loop(ops: &mut Vec<Op>, count: u32) -> Option<usize> {
    (count != 1).then(|| {
        ops.push(Op::Loop { count, end: 0 });
        ops.len() - 1
    })
}

/// Ends the loop [`open_loop`] started, linking its two markers.
pub(crate) fn close_loop(ops: &mut Vec<Op>, start: Option<usize>) {
    if let Some(start) = start {
        let end = ops.len() as u32;
        let Op::Loop { count, .. } = ops[start] else { unreachable!("open_loop pushed a Loop") };
        ops.push(Op::EndLoop { start: start as u32 });
        ops[start] = Op::Loop { count, end };
    }
}

/// The implicit timer every workload starts with.
pub fn default_timer() -> TimerSpec {
    TimerSpec { name: "default".into(), shared: false }
}

impl Workload {
    /// The first task that asks for a real-time class (SCHED_FIFO or SCHED_RR), as its class or
    /// through a `policy` op, with that class: running it for real needs the permission to make
    /// threads real-time (`schedlab exec --allow-rt`).
    pub fn real_time_task(&self) -> Option<(&TaskSpec, SchedClass)> {
        self.tasks.iter().find_map(|t| {
            if t.class.is_rt() {
                return Some((t, t.class));
            }
            t.program.ops.iter().find_map(|op| match *op {
                Op::SetClass { class, .. } if class.is_rt() => Some((t, class)),
                _ => None,
            })
        })
    }

    /// Runs the whole workload as `taskset -c <cpus>` runs a program: every task whose template
    /// does not choose its own CPUs (`cpus`, a program's own `sched_setaffinity`) may run only on
    /// `cpus`, and so may its forked children, which inherit the mask. Later affinity changes (`cpus`
    /// ops, `[[affinity]]` entries) are the program's own calls and stay as they are. An empty
    /// list is refused (a mask with no CPU).
    pub fn taskset(&mut self, cpus: &[u32]) -> Result<(), String> {
        if cpus.is_empty() {
            return Err("a taskset needs at least one CPU".into());
        }
        let mut set = cpus.to_vec();
        set.sort_unstable();
        set.dedup();
        for t in &mut self.tasks {
            if t.cpus.is_none() {
                t.cpus = Some(set.clone());
            }
        }
        Ok(())
    }

    /// Checks internal consistency: references in range, loops matched, properties in range. Returns
    /// a description of the first problem found.
    pub fn validate(&self) -> Result<(), String> {
        if self.groups.is_empty() {
            return Err("a workload needs the root group at index 0".into());
        }
        if self.timers.first().is_none_or(|t| t.name != "default" || t.shared) {
            return Err("a workload needs the per-task `default` timer at index 0".into());
        }
        for (i, g) in self.groups.iter().enumerate().skip(1) {
            if g.parent as usize >= i {
                return Err(format!("group `{}`: parent must be defined before it", g.name));
            }
            if !(2..=262_144).contains(&g.shares) {
                return Err(format!("group `{}`: shares {} outside 2..=262144", g.name, g.shares));
            }
        }
        for b in &self.barriers {
            if b.parties == 0 {
                return Err(format!("barrier `{}` needs at least one party", b.name));
            }
        }
        for p in &self.pipes {
            if p.capacity == 0 {
                return Err(format!("pipe `{}` needs a capacity above 0", p.name));
            }
        }
        for t in &self.tasks {
            let ctx = |m: String| format!("task `{}`: {m}", t.name);
            if !(-20..=19).contains(&t.nice) {
                return Err(ctx(format!("nice {} outside -20..=19", t.nice)));
            }
            if t.class.is_rt() && !(1..=99).contains(&t.rt_priority) {
                return Err(ctx(format!("rt_priority {} outside 1..=99", t.rt_priority)));
            }
            match t.slice_ns {
                Some(0) => return Err(ctx("a slice of 0 (leave it out for the base slice)".into())),
                Some(_) if t.class.is_rt() => {
                    return Err(ctx("a slice (sched_runtime) is for fair-class tasks, not fifo or rr".into()))
                }
                _ => {}
            }
            if t.group as usize >= self.groups.len() {
                return Err(ctx(format!("unknown group index {}", t.group)));
            }
            if let Some(c) = &t.cpus {
                if c.is_empty() {
                    return Err(ctx("cpus must not be empty".into()));
                }
            }
            self.validate_program(&t.program).map_err(ctx)?;
            if !t.own_process() && t.program.ops.iter().any(|o| matches!(o, Op::Exec(_))) {
                return Err(ctx(
                    "exec from a thread (`threads` or `process`) is not modelled: only a process of its own \
                     may exec"
                        .into(),
                ));
            }
        }
        let max = crate::duration::MAX_TIME_NS;
        if let Some(t) = self.tasks.iter().find(|t| t.start_ns > max) {
            return Err(format!("task `{}`: start {} ns is later than 100 days", t.name, t.start_ns));
        }
        if self.duration_ns.is_some_and(|d| d > max) || self.affinity_changes.iter().any(|a| a.at_ns > max) {
            return Err("a duration or affinity change time is longer than 100 days".into());
        }
        for a in &self.affinity_changes {
            if a.template as usize >= self.tasks.len() {
                return Err(format!("affinity change names unknown task index {}", a.template));
            }
        }
        if let StopWhen::TemplateDone(t) = self.stop {
            if t as usize >= self.tasks.len() {
                return Err(format!("stop condition names unknown task index {t}"));
            }
        }
        if self.stop == StopWhen::AllDone
            && self.tasks.iter().any(|t| t.background)
            && self.tasks.iter().all(|t| t.background || t.instances == 0)
        {
            return Err(
                "stop `all_done` waits for the foreground tasks, and no task that starts with the run \
                        is one (every started task is `background`)"
                    .into(),
            );
        }
        Ok(())
    }

    fn validate_program(&self, p: &Program) -> Result<(), String> {
        let n = |v: &Vec<_>| v.len() as u32;
        for (i, op) in p.ops.iter().enumerate() {
            let bad = |what: &str, id: u32| Err(format!("op {i}: unknown {what} index {id}"));
            match *op {
                Op::Lock(m) | Op::Unlock(m) if m >= n(&self.mutexes) => return bad("mutex", m),
                Op::CondWait { cond, mutex } => {
                    if cond >= n(&self.conds) {
                        return bad("condition variable", cond);
                    }
                    if mutex >= n(&self.mutexes) {
                        return bad("mutex", mutex);
                    }
                }
                Op::Signal(c) | Op::Broadcast(c) if c >= n(&self.conds) => {
                    return bad("condition variable", c)
                }
                Op::Send { pipe, bytes } | Op::Recv { pipe, bytes } => {
                    if pipe >= self.pipes.len() as u32 {
                        return bad("pipe", pipe);
                    }
                    let cap = self.pipes[pipe as usize].max_message_bytes();
                    if bytes == 0 || bytes > cap {
                        return Err(format!(
                            "op {i}: {bytes} bytes on pipe `{}` must be 1..={cap}",
                            self.pipes[pipe as usize].name
                        ));
                    }
                }
                Op::Barrier(b) | Op::BarrierSpin { barrier: b, .. } if b >= self.barriers.len() as u32 => {
                    return bad("barrier", b)
                }
                Op::Count(c) if c >= n(&self.counters) => return bad("counter", c),
                Op::Timer { timer, .. } if timer as usize >= self.timers.len() => return bad("timer", timer),
                Op::SemWait(x) | Op::SemPost(x) if x >= self.semaphores.len() as u32 => {
                    return bad("semaphore", x)
                }
                Op::Suspend(e) | Op::Resume(e) if e >= n(&self.events) => return bad("event", e),
                Op::SetCpus(l) if l as usize >= self.cpu_lists.len() => return bad("CPU list", l),
                Op::Nice(v) if !(-20..=19).contains(&v) => {
                    return Err(format!("op {i}: nice {v} is outside -20..=19"))
                }
                Op::SetClass { class, rt_priority } if class.is_rt() && !(1..=99).contains(&rt_priority) => {
                    return Err(format!("op {i}: rt_priority {rt_priority} is outside 1..=99 for {class:?}"))
                }
                Op::SetClass { class, rt_priority } if !class.is_rt() && rt_priority != 0 => {
                    return Err(format!(
                        "op {i}: only fifo and rr have an RT priority ({class:?} has {rt_priority})"
                    ))
                }
                Op::Compute { work: d }
                | Op::Spin { time: d }
                | Op::Sleep { time: d }
                | Op::Io { service: d, .. }
                    if !dist_ok(d) =>
                {
                    return Err(format!("op {i}: impossible distribution {d:?}"))
                }
                Op::Fork(t) | Op::Exec(t) if t >= self.tasks.len() as u32 => return bad("task template", t),
                Op::Exec(t) if !self.tasks[t as usize].own_process() => {
                    return Err(format!(
                        "op {i}: exec of `{}`, which is a thread (`threads` or `process`): a program \
                         that execs must be a process of its own",
                        self.tasks[t as usize].name
                    ))
                }
                Op::Io { device, .. } if device >= n(&self.devices) => return bad("device", device),
                Op::Timer { period_ns: 0, .. } => return Err(format!("op {i}: timer period must be > 0")),
                Op::Timer { period_ns: t, .. } | Op::BarrierSpin { spin_ns: t, .. }
                    if t > crate::duration::MAX_TIME_NS =>
                {
                    return Err(format!(
                        "op {i}: {t} ns is longer than 100 days, the longest schedlab handles"
                    ))
                }
                Op::Loop { end, .. } if !matches!(p.ops.get(end as usize), Some(Op::EndLoop { start }) if *start as usize == i) =>
                {
                    return Err(format!("op {i}: loop without matching end"));
                }
                Op::EndLoop { start } if !matches!(p.ops.get(start as usize), Some(Op::Loop { end, .. }) if *end as usize == i) =>
                {
                    return Err(format!("op {i}: loop end without matching start"));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Total tasks started at the beginning (forks not counted).
    pub fn initial_tasks(&self) -> u64 {
        self.tasks.iter().map(|t| t.instances as u64).sum()
    }
}

impl Workload {
    /// Appends `other`'s tasks and objects to this workload, prefixing their names with `prefix.` and
    /// renumbering every reference (the root group and the default timer are shared). The stop
    /// condition and duration of `self` are kept.
    pub fn merge(&mut self, other: &Workload, prefix: &str) {
        let name = |n: &str| format!("{prefix}.{n}");
        let off = |len: usize| len as u32;
        let (m0, c0, p0, b0, d0) = (
            off(self.mutexes.len()),
            off(self.conds.len()),
            off(self.pipes.len()),
            off(self.barriers.len()),
            off(self.devices.len()),
        );
        let (s0, e0, l0, k0, t0) = (
            off(self.semaphores.len()),
            off(self.events.len()),
            off(self.cpu_lists.len()),
            off(self.counters.len()),
            off(self.tasks.len()),
        );
        let timer0 = off(self.timers.len()) - 1; // other's timer i > 0 lands at timer0 + i
        let group0 = off(self.groups.len()) - 1; // other's group i > 0 lands at group0 + i
        let timer = |t: u32| if t == 0 { 0 } else { timer0 + t };
        let group = |g: u32| if g == 0 { 0 } else { group0 + g };
        self.mutexes.extend(other.mutexes.iter().map(|n| name(n)));
        self.conds.extend(other.conds.iter().map(|n| name(n)));
        self.devices.extend(other.devices.iter().map(|n| name(n)));
        self.events.extend(other.events.iter().map(|n| name(n)));
        self.counters.extend(other.counters.iter().map(|n| name(n)));
        self.pipes.extend(other.pipes.iter().map(|p| PipeSpec { name: name(&p.name), ..p.clone() }));
        self.barriers.extend(other.barriers.iter().map(|b| BarrierSpec { name: name(&b.name), ..b.clone() }));
        self.semaphores.extend(other.semaphores.iter().map(|s| SemSpec { name: name(&s.name), ..s.clone() }));
        self.cpu_lists.extend(other.cpu_lists.iter().cloned());
        self.timers
            .extend(other.timers.iter().skip(1).map(|t| TimerSpec { name: name(&t.name), ..t.clone() }));
        self.groups.extend(other.groups.iter().skip(1).map(|g| GroupSpec {
            name: name(&g.name),
            parent: group(g.parent),
            ..g.clone()
        }));
        let remap = |op: &Op| match *op {
            Op::Lock(m) => Op::Lock(m0 + m),
            Op::Unlock(m) => Op::Unlock(m0 + m),
            Op::CondWait { cond, mutex } => Op::CondWait { cond: c0 + cond, mutex: m0 + mutex },
            Op::Signal(c) => Op::Signal(c0 + c),
            Op::Broadcast(c) => Op::Broadcast(c0 + c),
            Op::SemWait(s) => Op::SemWait(s0 + s),
            Op::SemPost(s) => Op::SemPost(s0 + s),
            Op::Suspend(e) => Op::Suspend(e0 + e),
            Op::Resume(e) => Op::Resume(e0 + e),
            Op::SetCpus(l) => Op::SetCpus(l0 + l),
            Op::Send { pipe, bytes } => Op::Send { pipe: p0 + pipe, bytes },
            Op::Recv { pipe, bytes } => Op::Recv { pipe: p0 + pipe, bytes },
            Op::Barrier(b) => Op::Barrier(b0 + b),
            Op::BarrierSpin { barrier, spin_ns } => Op::BarrierSpin { barrier: b0 + barrier, spin_ns },
            Op::Count(k) => Op::Count(k0 + k),
            Op::Fork(t) => Op::Fork(t0 + t),
            Op::Exec(t) => Op::Exec(t0 + t),
            Op::Io { device, service } => Op::Io { device: d0 + device, service },
            Op::Timer { timer: tm, period_ns, absolute } => {
                Op::Timer { timer: timer(tm), period_ns, absolute }
            }
            other => other,
        };
        for t in &other.tasks {
            let mut t = t.clone();
            t.name = name(&t.name);
            t.group = group(t.group);
            t.process = t.process.as_deref().map(name);
            t.program.ops = t.program.ops.iter().map(remap).collect();
            self.tasks.push(t);
        }
        self.affinity_changes.extend(
            other.affinity_changes.iter().map(|a| AffinityChange { template: t0 + a.template, ..a.clone() }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_messages_are_charged_as_each_kernel_sizes_their_buffers() {
        // 2.6: SKB_DATA_ALIGN(100) = 128 plus a 232-byte sk_buff; SK_WMEM_MAX = (232 + 256) x 256.
        let old = SkbAccounting::Linux26;
        assert_eq!((old.truesize(100), old.truesize(1), old.truesize(129)), (360, 296, 424));
        assert_eq!(old.default_sndbuf(), 124_928);
        // 3.2+: the head's kmalloc object (data aligned to 64 plus 320 of shared info) rounded up to
        // a power of two, plus the aligned 256-byte sk_buff: 100 -> 448 -> 512 -> 768.
        let new = SkbAccounting::Linux;
        assert_eq!((new.truesize(100), new.truesize(200), new.truesize(1000)), (768, 1280, 2304));
        // Past a page's head (3,776 bytes) the data goes to whole pages: 3,777 is a 0-byte head
        // (512 + 256) and one page.
        assert_eq!((new.truesize(3776), new.truesize(3777), new.truesize(8192)), (4352, 4864, 8960));
        assert_eq!(new.default_sndbuf(), 212_992);
        // One buffer: half the send buffer less 64, at most a page's head and 32 KiB of pages.
        assert_eq!(new.max_skb_bytes(212_992), 36_544);
        assert_eq!(new.max_skb_bytes(8192), 4032);
        assert_eq!(old.max_skb_bytes(124_928), 16_000);
        for acc in [old, new] {
            assert_eq!(SkbAccounting::from_name(acc.name()), Some(acc));
        }
    }
}
