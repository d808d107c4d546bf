//! Client/server benchmarks: VolanoMark (seed 001) and apache + ab (seed 002).

use super::{Args, Generator};
use crate::builder::{ProgramBuilder as P, WorkloadBuilder};
use crate::model::{Dist, StopWhen, Workload};

pub(super) fn generators() -> Vec<Generator> {
    vec![
        Generator {
            name: "volanomark",
            summary: "VolanoMark chat server (seed 001): rooms of 20 users, 4 threads per user, message fan-out",
            models: "a user is one loopback connection with a client sender, client receiver, server receiver and server sender thread; a client sends `count` messages; the server receiver hands each one to the room's other users' server senders, which write it to their clients' receivers; client and server are two processes (JVMs)",
            simplifies: "the JVMs are two processes of plain threads; network stack costs are a fixed `msg_cost` per message and hop; no garbage collection",
            score: "counter `messages` per second (VolanoMark's messages/s = rooms x users x (users - 1) x count / time)",
            params: &[
                ("rooms", "5", "chat rooms (seed 001 uses 5 to 20)"),
                ("users", "20", "users per room"),
                ("count", "100", "messages each client sends"),
                ("msg_cost", "5us", "CPU time to handle one message in a thread"),
                ("bytes", "100", "message size"),
            ],
            build: volanomark,
        },
        Generator {
            name: "apache-ab",
            summary: "apache + ab (seed 002 sec. 5.3): a pool of server threads and a single-threaded load generator",
            models: "ab (support/ab.c) keeps `concurrency` connections open and, as each response ends, starts the next request; without -k (ab's default, and the papers' runs) each request is a connection of its own: ab reads the response to the server's close, closes its end, connects again and writes the request. Apache listens with TCP_DEFER_ACCEPT (its Linux default, `AcceptFilter http data`), so a server's accept returns only when the request has arrived: ab's write wakes it, not its connect. The server reads the request, computes the response, writes it and shuts its end (`ap_lingering_close`), then reads until ab's close arrives, which wakes it again, before it accepts the next connection",
            simplifies: "shared queues stand for the listen socket and the connections (first in, first out, so each close reaches the server that waits on that connection); connect and close cost only their system calls, ab's other work per request is `ab_cost`; the threaded MPMs' listener thread (worker, event) is not modelled: every server accepts and closes its own connections, as prefork's processes do; no disk, a log-normal request cost",
            score: "counter `requests` per second (ab's Requests per second); makespan_ns for -n requests",
            params: &[
                ("server_threads", "16", "apache worker threads"),
                ("requests", "10000", "-n: requests"),
                ("concurrency", "1", "-c: requests in flight"),
                ("request_cost", "200us", "mean server CPU time per request (log-normal)"),
                ("request_stddev", "50us", "its standard deviation"),
                ("ab_cost", "20us", "ab CPU time per response"),
                (
                    "keepalive",
                    "false",
                    "ab -k: requests reuse their connection (no close and reconnect, no lingering close)",
                ),
                (
                    "prefork",
                    "false",
                    "servers are processes of their own (apache 2.2's default prefork MPM) instead of threads of one (worker, event)",
                ),
            ],
            build: apache_ab,
        },
    ]
}

fn volanomark(a: &Args) -> Result<Workload, String> {
    let rooms = a.u32("rooms", 1..=1000)?;
    let users = a.u32("users", 2..=1000)?;
    let count = a.u32("count", 1..=1_000_000)?;
    let cost = a.dur("msg_cost")?;
    let bytes = a.u32("bytes", 1..=65_536)?;
    if rooms as u64 * users as u64 * 4 > 100_000 {
        return Err("workload `volanomark`: rooms x users x 4 threads exceeds 100000".into());
    }
    let mut w = WorkloadBuilder::new(format!("volanomark[rooms={rooms}]"));
    let delivered = w.counter("messages");
    let fanout = users - 1;
    for r in 0..rooms {
        let c2s: Vec<u32> = (0..users).map(|u| w.pipe(format!("r{r}-u{u}-c2s"), 65_536)).collect();
        let queue: Vec<u32> = (0..users).map(|u| w.pipe(format!("r{r}-u{u}-queue"), 1 << 20)).collect();
        let s2c: Vec<u32> = (0..users).map(|u| w.pipe(format!("r{r}-u{u}-s2c"), 65_536)).collect();
        for u in 0..users as usize {
            let name = |role: &str| format!("r{r}-u{u}-{role}");
            let client = Some("volano-client".to_string());
            let server = Some("volano-server".to_string());
            w.task(
                name("client-sender"),
                P::new().repeat(count, |p| p.compute(cost).send(c2s[u], bytes)).build(),
            )
            .process = client.clone();
            let others: Vec<u32> = (0..users as usize).filter(|&v| v != u).map(|v| queue[v]).collect();
            w.task(
                name("server-receiver"),
                P::new()
                    .repeat(count, |mut p| {
                        p = p.recv(c2s[u], bytes).compute(cost);
                        for &q in &others {
                            p = p.send(q, bytes);
                        }
                        p
                    })
                    .build(),
            )
            .process = server.clone();
            w.task(
                name("server-sender"),
                P::new()
                    .repeat(count * fanout, |p| p.recv(queue[u], bytes).compute(cost).send(s2c[u], bytes))
                    .build(),
            )
            .process = server;
            w.task(
                name("client-receiver"),
                P::new()
                    .repeat(count * fanout, |p| p.recv(s2c[u], bytes).compute(cost).count(delivered))
                    .build(),
            )
            .process = client;
        }
    }
    w.stop(StopWhen::AllDone);
    w.build()
}

fn apache_ab(a: &Args) -> Result<Workload, String> {
    let servers = a.u32("server_threads", 1..=100_000)?;
    let n = a.u32("requests", 1..=u32::MAX)?;
    let c = a.u32("concurrency", 1..=100_000)?;
    if c > n {
        return Err("workload `apache-ab`: concurrency is above requests".into());
    }
    let (mean, stddev) = (a.dur("request_cost")?, a.dur("request_stddev")?);
    if mean == 0 {
        return Err("workload `apache-ab`: request_cost must be above zero".into());
    }
    let ab_cost = a.dur("ab_cost")?;
    let keepalive = a.bool("keepalive")?;
    let mut w = WorkloadBuilder::new("apache-ab");
    let done = w.counter("requests");
    // The requests as they reach the listen socket (accept returns with the request read:
    // TCP_DEFER_ACCEPT) or a kept-alive connection, the responses ending with the server's FIN,
    // and ab's closes, each reaching the server that lingers on that connection (FIFO order).
    let req = w.pipe("requests", 1 << 20);
    let resp = w.pipe("responses", 1 << 20);
    let closes = (!keepalive).then(|| w.pipe("closes", 1 << 20));
    // After a response: ab closes the connection and connects again (no wakeup: the listener
    // defers the accept), then writes the next request.
    let next = move |p: P| match closes {
        Some(c) => p.send(c, 1),
        None => p,
    };
    let ab = P::new()
        .repeat(c, |p| p.send(req, 100))
        .repeat(n - c, |p| next(p.recv(resp, 100).count(done).compute(ab_cost)).send(req, 100))
        .repeat(c, |p| next(p.recv(resp, 100).count(done)))
        .build();
    w.task("ab", ab);
    let worker = P::new().forever(|p| {
        let p = p.recv(req, 100).compute(Dist::LogNormal { mean, stddev }).send(resp, 100);
        // ap_lingering_close: shut the write side, read until the client's close.
        match closes {
            Some(c) => p.recv(c, 1),
            None => p,
        }
    });
    let t = w.task("httpd", worker.build());
    t.instances = servers;
    // prefork: each server a process of its own (its own address space to switch to).
    t.process = (!a.bool("prefork")?).then(|| "httpd".into());
    w.stop(StopWhen::TemplateDone(0));
    w.build()
}
