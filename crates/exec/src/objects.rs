//! The workload's shared objects as real ones: POSIX mutexes, condition variables and semaphores,
//! pipes, and (built on those) barriers with an optional spin phase, rt-app's suspend/resume events,
//! devices served one request at a time, and shared periodic timers. Everything but the pipes lives in
//! shared memory and is process-shared, so task processes use the same objects as threads. Every
//! blocking wait gives up when the run stops.

use crate::shm::{SharedU64, ShmArena, ShmCells};
use crate::sys::{now_ns, PCond, PMutex, PSem, Pipe, PipeMode};
use schedlab_workload::{Op, PipeKind, SkbAccounting, Workload};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A barrier for `parties` tasks (threads or task processes): a process-shared mutex and condition
/// variable, an arrival count and a generation word, all in shared memory; the generation lets a
/// spinning waiter see the release.
pub struct Barrier {
    parties: u64,
    m: PMutex,
    cv: PCond,
    count: SharedU64,
    generation: SharedU64,
}

impl Barrier {
    /// A barrier that opens when `parties` tasks wait.
    pub fn new(arena: &mut ShmArena, parties: u32) -> Barrier {
        Barrier {
            parties: parties.max(1) as u64,
            m: PMutex::new(arena),
            cv: PCond::new(arena),
            count: SharedU64::new(arena),
            generation: SharedU64::new(arena),
        }
    }

    /// Waits, busy-polling up to `spin_ns` first (libgomp style); false if the run stopped.
    pub fn wait(&self, spin_ns: u64, stop: &AtomicBool) -> bool {
        let (count, generation) = (self.count.get(), self.generation.get());
        self.m.lock();
        let arrived = count.load(Ordering::Relaxed) + 1;
        if arrived >= self.parties {
            count.store(0, Ordering::Relaxed);
            generation.fetch_add(1, Ordering::Release);
            self.cv.broadcast();
            self.m.unlock();
            return true;
        }
        count.store(arrived, Ordering::Relaxed);
        let gen = generation.load(Ordering::Acquire);
        if spin_ns > 0 {
            self.m.unlock();
            let until = now_ns() + spin_ns;
            while now_ns() < until {
                if generation.load(Ordering::Acquire) != gen {
                    return true;
                }
                if stop.load(Ordering::Relaxed) {
                    return false;
                }
                std::hint::spin_loop();
            }
            self.m.lock();
        }
        let mut released = true;
        while generation.load(Ordering::Acquire) == gen {
            if stop.load(Ordering::Relaxed) {
                released = false;
                break;
            }
            self.cv.wait(&self.m);
        }
        self.m.unlock();
        released
    }

    /// Wakes every waiter so it can see the stop.
    pub fn wake_all(&self) {
        self.m.lock();
        self.cv.broadcast();
        self.m.unlock();
    }
}

/// rt-app's event: `suspend` blocks until a `resume`; a resume with nobody suspended is lost.
pub struct Event {
    m: PMutex,
    cv: PCond,
    generation: SharedU64,
}

impl Event {
    /// An event in shared memory.
    pub fn new(arena: &mut ShmArena) -> Event {
        Event { m: PMutex::new(arena), cv: PCond::new(arena), generation: SharedU64::new(arena) }
    }

    /// Blocks until the next resume; false if the run stopped.
    pub fn suspend(&self, stop: &AtomicBool) -> bool {
        let generation = self.generation.get();
        self.m.lock();
        let mine = generation.load(Ordering::Relaxed);
        let mut resumed = true;
        while generation.load(Ordering::Relaxed) == mine {
            if stop.load(Ordering::Relaxed) {
                resumed = false;
                break;
            }
            self.cv.wait(&self.m);
        }
        self.m.unlock();
        resumed
    }

    /// Wakes every suspended task.
    pub fn resume(&self) {
        self.m.lock();
        self.generation.get().fetch_add(1, Ordering::Relaxed);
        self.cv.broadcast();
        self.m.unlock();
    }

    /// Wakes waiters so they can see the stop (without resuming them).
    pub fn wake_all(&self) {
        self.m.lock();
        self.cv.broadcast();
        self.m.unlock();
    }
}

/// A shared periodic timer's next expiry (monotonic ns; 0 until first use), under a process-shared
/// mutex.
pub struct SharedTimer {
    m: PMutex,
    next: SharedU64,
}

impl SharedTimer {
    /// Runs `f` on the next expiry (`None` before first use) and stores what it returns.
    pub fn update(&self, f: impl FnOnce(Option<u64>) -> (u64, u64)) -> u64 {
        self.m.lock();
        let cur = self.next.get().load(Ordering::Relaxed);
        let (expiry, next) = f((cur != 0).then_some(cur));
        self.next.get().store(next.max(1), Ordering::Relaxed);
        self.m.unlock();
        expiry
    }
}

/// All shared objects of a workload.
pub struct Objects {
    /// Mutexes.
    pub mutexes: Vec<PMutex>,
    /// Condition variables.
    pub conds: Vec<PCond>,
    /// Semaphores.
    pub sems: Vec<PSem>,
    /// Pipes.
    pub pipes: Vec<Pipe>,
    /// Barriers.
    pub barriers: Vec<Barrier>,
    /// Events.
    pub events: Vec<Event>,
    /// Devices: one request at a time.
    pub devices: Vec<PMutex>,
    /// The stop flag, the counters, and each pipe's sends and bytes, in memory shared with the tasks
    /// run as processes.
    pub cells: ShmCells,
    /// The next expiry of each shared timer, set at first use.
    pub timers: Vec<SharedTimer>,
    counters_len: usize,
    /// The shared memory the synchronisation objects live in (dropped last).
    _arena: ShmArena,
}

/// How each pipe of `w` is made real, with a note for each pipe whose real buffer differs from the
/// model's. The model lets a send in when the bytes buffered plus the message fit the capacity, so
/// `capacity / size` messages of one size are in flight at most. A real pipe buffers a power of two
/// pages: a capacity of that form is exact as a byte stream; otherwise, when every send and receive
/// on the pipe moves the same size (at most a page) and the number in flight is a power of two, a
/// packet-mode pipe with that many slots is exact (stress-ng's `switch` stressor uses one slot);
/// anything else is a stream rounded up, and noted.
pub fn pipe_plan(w: &Workload) -> (Vec<PipeMode>, Vec<String>) {
    const PAGE: u32 = 4096;
    let mut notes = Vec::new();
    let mut rounded: std::collections::BTreeMap<(u32, u32), Vec<String>> = Default::default();
    let modes = w
        .pipes
        .iter()
        .enumerate()
        .map(|(i, p)| {
            if let PipeKind::UnixStream(acc) = p.kind {
                // A real socket pair; the running kernel charges its messages as it does.
                if acc != SkbAccounting::Linux {
                    notes.push(format!(
                        "socket `{}`: the model charges its messages as {} did; this kernel charges its own",
                        p.name,
                        acc.name()
                    ));
                }
                let default = p.capacity == SkbAccounting::Linux.default_sndbuf();
                return PipeMode::UnixStream { sndbuf: (!default).then_some(p.capacity) };
            }
            let pages = p.capacity / PAGE;
            if p.capacity % PAGE == 0 && pages.is_power_of_two() {
                return PipeMode::Stream { bytes: p.capacity };
            }
            let mut sizes = w.tasks.iter().flat_map(|t| &t.program.ops).filter_map(|op| match *op {
                Op::Send { pipe, bytes } | Op::Recv { pipe, bytes } if pipe as usize == i => Some(bytes),
                _ => None,
            });
            let first = sizes.next();
            if let Some(m) = first.filter(|&m| m > 0 && m <= PAGE && m <= p.capacity) {
                let in_flight = p.capacity / m;
                if sizes.all(|b| b == m) && in_flight.is_power_of_two() {
                    return PipeMode::Packets { slots: in_flight };
                }
            }
            let real = p.capacity.max(PAGE).next_power_of_two();
            rounded.entry((p.capacity, real)).or_default().push(p.name.clone());
            PipeMode::Stream { bytes: real }
        })
        .collect();
    // One note per (model, real) size, naming the pipes (hackbench's model has one per receiver).
    for ((model, real), names) in rounded {
        let which = match names.len() {
            1 => format!("pipe `{}`", names[0]),
            n => format!("{n} pipes (`{}`, ...)", names[0]),
        };
        notes.push(format!(
            "{which}: the model buffers {model} bytes; the real pipe buffers {real} (a power of two pages)"
        ));
    }
    (modes, notes)
}

impl Objects {
    /// Real objects for a workload; pipes as [`pipe_plan`] says.
    pub fn new(w: &Workload) -> std::io::Result<Objects> {
        let (pipe_modes, _) = pipe_plan(w);
        // Slots: a mutex, condition variable, semaphore or word each.
        let slots = w.mutexes.len()
            + w.conds.len()
            + w.semaphores.len()
            + 4 * w.barriers.len()
            + 3 * w.events.len()
            + w.devices.len()
            + 2 * w.timers.len();
        let mut arena = ShmArena::new(slots)?;
        let a = &mut arena;
        Ok(Objects {
            mutexes: w.mutexes.iter().map(|_| PMutex::new(a)).collect(),
            conds: w.conds.iter().map(|_| PCond::new(a)).collect(),
            sems: w.semaphores.iter().map(|s| PSem::new(a, s.initial)).collect(),
            pipes: pipe_modes.into_iter().map(Pipe::new).collect::<std::io::Result<_>>()?,
            barriers: w.barriers.iter().map(|b| Barrier::new(a, b.parties)).collect(),
            events: w.events.iter().map(|_| Event::new(a)).collect(),
            devices: w.devices.iter().map(|_| PMutex::new(a)).collect(),
            cells: ShmCells::new(w.counters.len() + 2 * w.pipes.len() + 3 + w.tasks.len())?,
            timers: w
                .timers
                .iter()
                .map(|_| SharedTimer { m: PMutex::new(a), next: SharedU64::new(a) })
                .collect(),
            counters_len: w.counters.len(),
            _arena: arena,
        })
    }

    /// The run's stop flag (shared with child processes).
    pub fn stop(&self) -> &AtomicBool {
        self.cells.flag()
    }

    /// The common start, monotonic ns; 0 until the controller opens the start gate.
    pub fn start(&self) -> &AtomicU64 {
        self.cells.cell(self.counters_len + 2 * self.pipes.len())
    }

    /// Initial tasks waiting at the start gate.
    pub fn ready(&self) -> &AtomicU64 {
        self.cells.cell(self.counters_len + 2 * self.pipes.len() + 1)
    }

    /// Task instances created so far, initial and forked, by this process or a task process: the
    /// next instance's id and the count `--max-threads` bounds.
    pub fn created(&self) -> &AtomicU64 {
        self.cells.cell(self.counters_len + 2 * self.pipes.len() + 2)
    }

    /// Instances of template `t` forked so far (by any process), which numbers the next one.
    pub fn forked(&self, t: u32) -> &AtomicU64 {
        self.cells.cell(self.counters_len + 2 * self.pipes.len() + 3 + t as usize)
    }

    /// Counter `c`.
    pub fn counter(&self, c: u32) -> &AtomicU64 {
        self.cells.cell(c as usize)
    }

    /// Pipe `p`'s whole messages sent and bytes sent.
    pub fn pipe_counts(&self, p: u32) -> (&AtomicU64, &AtomicU64) {
        let first = self.counters_len + 2 * p as usize;
        (self.cells.cell(first), self.cells.cell(first + 1))
    }

    /// Wakes everything a thread may wait on, so that waiters see the stop: condition variables are
    /// broadcast, semaphores posted `posts` times, barriers and events notified.
    pub fn release_waiters(&self, posts: usize) {
        for c in &self.conds {
            c.broadcast();
        }
        for s in &self.sems {
            for _ in 0..posts {
                s.post();
            }
        }
        for b in &self.barriers {
            b.wake_all();
        }
        for e in &self.events {
            e.wake_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_barrier_opens_for_its_parties_and_events_lose_early_resumes() {
        let mut arena = ShmArena::new(16).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let b = Arc::new(Barrier::new(&mut arena, 3));
        let passed = Arc::new(AtomicU64::new(0));
        let hs: Vec<_> = (0..3)
            .map(|i| {
                let (b, stop, passed) = (b.clone(), stop.clone(), passed.clone());
                std::thread::spawn(move || {
                    if b.wait(if i == 0 { 2_000_000 } else { 0 }, &stop) {
                        passed.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(passed.load(Ordering::SeqCst), 3);
        // A resume before anyone suspends is lost: the suspender then waits for the next one.
        let e = Arc::new(Event::new(&mut arena));
        e.resume();
        let (e2, stop2) = (e.clone(), stop.clone());
        let h = std::thread::spawn(move || e2.suspend(&stop2));
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!h.is_finished(), "still suspended");
        e.resume();
        assert!(h.join().unwrap());
        // The stop releases a waiter with `false`.
        let b = Arc::new(Barrier::new(&mut arena, 2));
        let (b2, stop3) = (b.clone(), stop.clone());
        let h = std::thread::spawn(move || b2.wait(0, &stop3));
        std::thread::sleep(std::time::Duration::from_millis(20));
        stop.store(true, Ordering::SeqCst);
        b.wake_all();
        assert!(!h.join().unwrap());
    }

    #[test]
    fn a_barrier_and_a_semaphore_work_across_a_fork() {
        // The objects are process-shared in shared memory: a forked child arrives at the barrier and
        // posts the semaphore; the parent passes both.
        let mut arena = ShmArena::new(16).unwrap();
        let b = Barrier::new(&mut arena, 2);
        let sem = PSem::new(&mut arena, 0);
        let stop = AtomicBool::new(false);
        // SAFETY: the child only waits at the barrier, posts and _exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let ok = b.wait(0, &stop);
            sem.post();
            // SAFETY: ends the child without running the parent's destructors.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        assert!(b.wait(0, &stop), "the child's arrival opened the barrier");
        assert!(sem.wait(&stop), "the child's post arrived");
        let mut status = 0;
        // SAFETY: reaps the child made above.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "status {status}");
    }

    /// A workload with one pipe of `capacity` bytes, a writer sending `sends` sizes and a reader
    /// receiving `recvs` sizes.
    fn one_pipe(capacity: u32, sends: &[u32], recvs: &[u32]) -> Workload {
        use schedlab_workload::{ProgramBuilder as P, WorkloadBuilder};
        let mut w = WorkloadBuilder::new("pipes");
        let p = w.pipe("p", capacity);
        w.task("w", sends.iter().fold(P::new(), |b, &n| b.send(p, n)).build());
        w.task("r", recvs.iter().fold(P::new(), |b, &n| b.recv(p, n)).build());
        w.build().unwrap()
    }

    #[test]
    fn pipes_are_made_exact_where_a_real_pipe_can_be() {
        // Linux's default 64 KiB: a stream, exact.
        assert_eq!(
            pipe_plan(&one_pipe(65536, &[100], &[100])),
            (vec![PipeMode::Stream { bytes: 65536 }], vec![])
        );
        // One message in flight (stress-ng switch's 1-byte pipe): one packet slot.
        assert_eq!(pipe_plan(&one_pipe(1, &[1], &[1])).0, vec![PipeMode::Packets { slots: 1 }]);
        // Two 100-byte messages fit in 250 bytes: two slots.
        assert_eq!(pipe_plan(&one_pipe(250, &[100, 100], &[100])).0, vec![PipeMode::Packets { slots: 2 }]);
        // Three in flight cannot be a power-of-two slot count; mixed sizes cannot be packets; a 12 KiB
        // capacity is not a power of two pages: all streams rounded up, each noted.
        for (w, real) in [
            (one_pipe(300, &[100], &[100]), 4096),
            (one_pipe(100, &[100], &[50, 50]), 4096),
            (one_pipe(12288, &[100], &[100]), 16384),
        ] {
            let (modes, notes) = pipe_plan(&w);
            assert_eq!(modes, vec![PipeMode::Stream { bytes: real }]);
            assert_eq!(notes.len(), 1, "{notes:?}");
            assert!(notes[0].contains(&format!("buffers {real}")), "{notes:?}");
        }
    }

    #[test]
    fn a_one_slot_packet_pipe_holds_one_message() {
        let p = Pipe::new(PipeMode::Packets { slots: 1 }).unwrap();
        let stop = AtomicBool::new(false);
        assert!(p.write_all(&[7], &stop));
        // The second write would block: the pipe is full after one packet.
        // SAFETY: a valid descriptor; O_NONBLOCK only changes whether a full pipe blocks.
        unsafe { libc::fcntl(p.wr, libc::F_SETFL, libc::O_NONBLOCK) };
        // SAFETY: a one-byte buffer.
        let n = unsafe { libc::write(p.wr, [8u8].as_ptr().cast(), 1) };
        assert_eq!(n, -1, "a second packet found room");
        let mut b = [0u8; 1];
        assert!(p.read_exact(&mut b, &stop));
        assert_eq!(b, [7]);
    }
}
