//! Message-passing benchmarks: hackbench (rt-tests) and perf bench sched messaging/pipe, UnixBench
//! context1 and pipe.

use super::{Args, Generator};
use crate::builder::{ProgramBuilder as P, WorkloadBuilder};
use crate::model::{SkbAccounting, StopWhen, Workload};

/// Linux pipe capacity (16 pages).
const PIPE_CAPACITY: u32 = 65_536;

const HACKBENCH_PARAMS: &[super::ParamDoc] = &[
    ("groups", "10", "-g: groups of senders and receivers"),
    ("fds", "20", "-f: receivers (and senders) per group"),
    ("loops", "100", "-l: messages each sender sends to each receiver"),
    ("datasize", "100", "-s: bytes per message"),
    ("pipe", "false", "-p: pipes (64 KiB) instead of AF_UNIX stream sockets"),
    (
        "skb",
        "linux",
        "how the kernel charges a socket message: `linux` (3.2 and later: 768 bytes for 100 against 212,992) or `linux-2.6` (360 against 124,928)",
    ),
    ("threads", "false", "-T: threads of one process instead of processes"),
    ("msg_cost", "2us", "CPU time of one write or read system call"),
];

pub(super) fn generators() -> Vec<Generator> {
    vec![
        Generator {
            name: "hackbench",
            summary: "hackbench (rt-tests): groups of senders flooding receivers through sockets or pipes",
            models: "each group has `fds` receivers, each with its own socket/pipe, and `fds` senders; every sender writes `loops` messages of `datasize` bytes to every receiver of its group, and every receiver reads fds x loops messages; writers block on full buffers, readers on empty ones; all workers start together",
            simplifies: "system calls cost a fixed `msg_cost` each; a socket charges each message its kernel buffer's truesize against the send buffer that every sender of a receiver shares, and wakes blocked senders, all of them, when the receiver has read it down to a quarter (net/unix/af_unix.c); the start barrier is instant",
            score: "makespan_ns (hackbench prints `Time:`, from the start signal until all workers are done); counter `messages` = groups x fds x fds x loops",
            params: HACKBENCH_PARAMS,
            build: |a| hackbench(a, "hackbench"),
        },
        Generator {
            name: "perf-messaging",
            summary: "perf bench sched messaging: the hackbench algorithm with perf's defaults",
            models: "identical to hackbench (same defaults: 10 groups, 20 fds, 100 loops, 100 bytes, sockets, processes)",
            simplifies: "as hackbench",
            score: "makespan_ns (perf prints `Total time`); counter `messages`",
            params: HACKBENCH_PARAMS,
            build: |a| hackbench(a, "perf-messaging"),
        },
        Generator {
            name: "perf-pipe",
            summary: "perf bench sched pipe: two tasks ping-pong a 4-byte integer over two pipes",
            models: "task A writes to pipe 1 and reads pipe 2; task B reads pipe 1 and writes pipe 2; every round trip is two wakeups and two context switches",
            simplifies: "system calls cost a fixed `msg_cost`; no pipe-buffer page handling",
            score: "makespan_ns / loops = usecs/op as perf prints it; counter `round_trips`",
            params: &[
                ("loops", "1000000", "-l: round trips"),
                ("threads", "false", "-T: threads of one process instead of processes"),
                ("msg_cost", "1us", "CPU time of one write or read system call"),
            ],
            build: perf_pipe,
        },
        Generator {
            name: "unixbench-context1",
            summary: "UnixBench context1: two processes pass an incrementing word over two pipes",
            models: "the same ping-pong as perf-pipe, run for a time rather than a count",
            simplifies: "system calls cost a fixed `msg_cost`",
            score: "counter `round_trips` per second (UnixBench reports loops per second)",
            params: &[("msg_cost", "1us", "CPU time of one write or read system call")],
            build: unixbench_context1,
        },
        Generator {
            name: "unixbench-pipe",
            summary: "UnixBench pipe: one process writes 512 bytes to a pipe and reads them back",
            models: "no other task is involved, so there are no context switches: it measures system call cost",
            simplifies: "system calls cost a fixed `msg_cost`",
            score: "counter `loops` per second",
            params: &[("msg_cost", "1us", "CPU time of one write or read system call")],
            build: unixbench_pipe,
        },
    ]
}

fn hackbench(a: &Args, name: &str) -> Result<Workload, String> {
    let groups = a.u32("groups", 1..=1000)?;
    let fds = a.u32("fds", 1..=1000)?;
    let loops = a.u32("loops", 1..=10_000_000)?;
    let datasize = a.u32("datasize", 1..=65_536)?;
    let pipe = a.bool("pipe")?;
    let skb = match a.choice("skb", &["linux", "linux-2.6"])? {
        "linux-2.6" => SkbAccounting::Linux26,
        _ => SkbAccounting::Linux,
    };
    let threads = a.bool("threads")?;
    let cost = a.dur("msg_cost")?;
    if groups as u64 * fds as u64 * 2 > 100_000 {
        return Err(format!(
            "workload `{name}`: groups x fds x 2 = {} tasks, more than 100000",
            groups * fds * 2
        ));
    }
    let mut w = WorkloadBuilder::new(format!("{name}[groups={groups},fds={fds},loops={loops}]"));
    let messages = w.counter("messages");
    if !pipe && datasize > skb.max_skb_bytes(skb.default_sndbuf()) {
        return Err(format!(
            "workload `{name}`: datasize {datasize} is more than one socket buffer carries ({} bytes); \
             a message split over several is not modelled",
            skb.max_skb_bytes(skb.default_sndbuf())
        ));
    }
    for g in 0..groups {
        // One channel per receiver, written by every sender of the group (hackbench's out_fds[r]).
        let chans: Vec<u32> = (0..fds)
            .map(|r| {
                let name = format!("g{g}-r{r}");
                if pipe {
                    w.pipe(name, PIPE_CAPACITY.max(datasize))
                } else {
                    w.unix_stream(name, skb.default_sndbuf(), skb)
                }
            })
            .collect();
        for (r, &ch) in chans.iter().enumerate() {
            let t = w.task(
                format!("g{g}-receiver{r}"),
                P::new().repeat(fds * loops, |p| p.recv(ch, datasize).compute(cost).count(messages)).build(),
            );
            t.process = threads.then(|| name.to_string());
        }
        for s in 0..fds {
            let chans = chans.clone();
            let t = w.task(
                format!("g{g}-sender{s}"),
                P::new()
                    .repeat(loops, |mut p| {
                        for &ch in &chans {
                            p = p.send(ch, datasize).compute(cost);
                        }
                        p
                    })
                    .build(),
            );
            t.process = threads.then(|| name.to_string());
        }
    }
    w.stop(StopWhen::AllDone);
    w.build()
}

fn ping_pong(name: &str, loops: u32, threads: bool, cost: u64, bytes: u32) -> Result<Workload, String> {
    let mut w = WorkloadBuilder::new(name);
    let c = w.counter("round_trips");
    let (p1, p2) = (w.pipe("pipe1", PIPE_CAPACITY), w.pipe("pipe2", PIPE_CAPACITY));
    let a = w.task(
        "a",
        P::new()
            .repeat(loops, |p| p.send(p1, bytes).compute(cost).recv(p2, bytes).compute(cost).count(c))
            .build(),
    );
    a.process = threads.then(|| name.to_string());
    let b = w.task(
        "b",
        P::new().repeat(loops, |p| p.recv(p1, bytes).compute(cost).send(p2, bytes).compute(cost)).build(),
    );
    b.process = threads.then(|| name.to_string());
    if loops > 0 {
        w.stop(StopWhen::AllDone);
    }
    w.build()
}

fn perf_pipe(a: &Args) -> Result<Workload, String> {
    ping_pong("perf-pipe", a.u32("loops", 1..=u32::MAX)?, a.bool("threads")?, a.dur("msg_cost")?, 4)
}

fn unixbench_context1(a: &Args) -> Result<Workload, String> {
    ping_pong("unixbench-context1", 0, false, a.dur("msg_cost")?, 4)
}

fn unixbench_pipe(a: &Args) -> Result<Workload, String> {
    let cost = a.dur("msg_cost")?;
    if cost == 0 {
        return Err(
            "workload `unixbench-pipe`: msg_cost must be above zero (the loop has no other cost)".into()
        );
    }
    let mut w = WorkloadBuilder::new("unixbench-pipe");
    let c = w.counter("loops");
    let p = w.pipe("pipe", PIPE_CAPACITY);
    w.task(
        "pipe",
        P::new().forever(|b| b.send(p, 512).compute(cost).recv(p, 512).compute(cost).count(c)).build(),
    );
    w.build()
}
