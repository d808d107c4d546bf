//! The workload's shared objects as real ones: POSIX mutexes, condition variables and semaphores,
//! pipes, and (built on a std mutex and condition variable, which are futexes underneath) barriers with
//! an optional spin phase, rt-app's suspend/resume events, devices served one request at a time, and
//! shared periodic timers. Every blocking wait gives up when the run stops.

use crate::sys::{now_ns, PCond, PMutex, PSem, Pipe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

/// A barrier for `parties` threads; the generation counter lets a spinning waiter see the release.
pub struct Barrier {
    parties: u32,
    state: Mutex<(u32, u64)>,
    cv: Condvar,
    generation: AtomicU64,
}

impl Barrier {
    /// A barrier that opens when `parties` threads wait.
    pub fn new(parties: u32) -> Barrier {
        Barrier {
            parties: parties.max(1),
            state: Mutex::new((0, 0)),
            cv: Condvar::new(),
            generation: AtomicU64::new(0),
        }
    }

    /// Waits, busy-polling up to `spin_ns` first (libgomp style); false if the run stopped.
    pub fn wait(&self, spin_ns: u64, stop: &AtomicBool) -> bool {
        let Ok(mut st) = self.state.lock() else { return false };
        st.0 += 1;
        if st.0 >= self.parties {
            st.0 = 0;
            st.1 += 1;
            self.generation.store(st.1, Ordering::Release);
            self.cv.notify_all();
            return true;
        }
        let gen = st.1;
        if spin_ns > 0 {
            drop(st);
            let until = now_ns() + spin_ns;
            while now_ns() < until {
                if self.generation.load(Ordering::Acquire) != gen {
                    return true;
                }
                if stop.load(Ordering::Relaxed) {
                    return false;
                }
                std::hint::spin_loop();
            }
            let Ok(s) = self.state.lock() else { return false };
            st = s;
        }
        while st.1 == gen {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            let Ok(s) = self.cv.wait(st) else { return false };
            st = s;
        }
        true
    }

    /// Wakes every waiter so it can see the stop.
    pub fn wake_all(&self) {
        let _g = self.state.lock();
        self.cv.notify_all();
    }
}

/// rt-app's event: `suspend` blocks until a `resume`; a resume with nobody suspended is lost.
#[derive(Default)]
pub struct Event {
    generation: Mutex<u64>,
    cv: Condvar,
}

impl Event {
    /// Blocks until the next resume; false if the run stopped.
    pub fn suspend(&self, stop: &AtomicBool) -> bool {
        let Ok(mut g) = self.generation.lock() else { return false };
        let mine = *g;
        while *g == mine {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            let Ok(x) = self.cv.wait(g) else { return false };
            g = x;
        }
        true
    }

    /// Wakes every suspended thread.
    pub fn resume(&self) {
        if let Ok(mut g) = self.generation.lock() {
            *g += 1;
            self.cv.notify_all();
        }
    }

    /// Wakes waiters so they can see the stop (without resuming them).
    pub fn wake_all(&self) {
        let _g = self.generation.lock();
        self.cv.notify_all();
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
    /// Pipes, with sends and bytes counted.
    pub pipes: Vec<(Pipe, AtomicU64, AtomicU64)>,
    /// Barriers.
    pub barriers: Vec<Barrier>,
    /// Events.
    pub events: Vec<Event>,
    /// Devices: one request at a time.
    pub devices: Vec<Mutex<()>>,
    /// Counters.
    pub counters: Vec<AtomicU64>,
    /// The next expiry of each shared timer (monotonic ns), set at first use.
    pub timers: Vec<Mutex<Option<u64>>>,
}

impl Objects {
    /// Real objects for a workload.
    pub fn new(w: &schedlab_workload::Workload) -> std::io::Result<Objects> {
        Ok(Objects {
            mutexes: w.mutexes.iter().map(|_| PMutex::new()).collect(),
            conds: w.conds.iter().map(|_| PCond::new()).collect(),
            sems: w.semaphores.iter().map(|s| PSem::new(s.initial)).collect(),
            pipes: w
                .pipes
                .iter()
                .map(|p| Ok((Pipe::new(p.capacity)?, AtomicU64::new(0), AtomicU64::new(0))))
                .collect::<std::io::Result<_>>()?,
            barriers: w.barriers.iter().map(|b| Barrier::new(b.parties)).collect(),
            events: w.events.iter().map(|_| Event::default()).collect(),
            devices: w.devices.iter().map(|_| Mutex::new(())).collect(),
            counters: w.counters.iter().map(|_| AtomicU64::new(0)).collect(),
            timers: w.timers.iter().map(|_| Mutex::new(None)).collect(),
        })
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
        let stop = Arc::new(AtomicBool::new(false));
        let b = Arc::new(Barrier::new(3));
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
        let e = Arc::new(Event::default());
        e.resume();
        let (e2, stop2) = (e.clone(), stop.clone());
        let h = std::thread::spawn(move || e2.suspend(&stop2));
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!h.is_finished(), "still suspended");
        e.resume();
        assert!(h.join().unwrap());
        // The stop releases a waiter with `false`.
        let b = Arc::new(Barrier::new(2));
        let (b2, stop3) = (b.clone(), stop.clone());
        let h = std::thread::spawn(move || b2.wait(0, &stop3));
        std::thread::sleep(std::time::Duration::from_millis(20));
        stop.store(true, Ordering::SeqCst);
        b.wake_all();
        assert!(!h.join().unwrap());
    }
}
