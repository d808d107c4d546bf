#!/usr/bin/env python3
"""Reads a schedlab Perfetto trace back with the `perfetto` Python package's generated protos (an
independent reader of the format) and checks it against the run's JSON report:

* every sched_switch event sits in an FtraceEventBundle of a valid CPU, and the number of switches per
  CPU equals the report's cpus[].nr_switches;
* switches on a CPU chain: each one's prev_pid is the previous one's next_pid;
* every task named in a switch or wakeup is a thread of the ProcessTree, with its name;
* the sched_waking events equal the report's summary.nr_wakeups; sched_wakeup_new one per task;
* policy values are counter events on declared counter tracks.

Usage: perfetto_check.py TRACE REPORT.json   (exit status 0 when everything holds)
"""
import json
import sys
from collections import Counter

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb


def main(trace_path, report_path):
    trace = pb.Trace()
    with open(trace_path, "rb") as f:
        trace.ParseFromString(f.read())
    with open(report_path) as f:
        report = json.load(f)
    ncpus = len(report["cpus"])
    threads = {}
    switches = Counter()
    last_next = {}
    wakings = 0
    new = 0
    counter_tracks = {}
    counter_values = 0
    errors = []
    for packet in trace.packet:
        if packet.HasField("track_descriptor"):
            d = packet.track_descriptor
            if d.HasField("counter"):
                counter_tracks[d.uuid] = d.name
        if packet.HasField("track_event"):
            te = packet.track_event
            if te.type != pb.TrackEvent.TYPE_COUNTER or te.track_uuid not in counter_tracks:
                errors.append(f"track event on unknown counter track {te.track_uuid}")
            counter_values += 1
        if packet.HasField("process_tree"):
            for t in packet.process_tree.threads:
                threads[t.tid] = t.name
        if not packet.HasField("ftrace_events"):
            continue
        bundle = packet.ftrace_events
        if not 0 <= bundle.cpu < ncpus:
            errors.append(f"bundle on CPU {bundle.cpu} of {ncpus}")
        for ev in bundle.event:
            if ev.HasField("sched_switch"):
                s = ev.sched_switch
                switches[bundle.cpu] += 1
                if bundle.cpu in last_next and last_next[bundle.cpu] != s.prev_pid:
                    errors.append(f"CPU {bundle.cpu} at {ev.timestamp}: prev_pid {s.prev_pid} after next_pid {last_next[bundle.cpu]}")
                last_next[bundle.cpu] = s.next_pid
                for pid, comm in ((s.prev_pid, s.prev_comm), (s.next_pid, s.next_comm)):
                    if pid != 0 and threads.get(pid) != comm:
                        errors.append(f"pid {pid} named {comm!r}, process tree says {threads.get(pid)!r}")
            elif ev.HasField("sched_waking"):
                wakings += 1
                if ev.sched_waking.pid not in threads:
                    errors.append(f"waking of unknown pid {ev.sched_waking.pid}")
            elif ev.HasField("sched_wakeup_new"):
                new += 1
    for cpu in range(ncpus):
        want = report["cpus"][cpu]["nr_switches"]
        if switches[cpu] != want:
            errors.append(f"CPU {cpu}: {switches[cpu]} sched_switch events, report says {want}")
    if wakings != report["summary"]["nr_wakeups"]:
        errors.append(f"{wakings} sched_waking events, report says {report['summary']['nr_wakeups']} wakeups")
    if new != report["summary"]["nr_tasks"]:
        errors.append(f"{new} sched_wakeup_new events for {report['summary']['nr_tasks']} tasks")
    if len(threads) != report["summary"]["nr_tasks"]:
        errors.append(f"{len(threads)} threads in the process tree for {report['summary']['nr_tasks']} tasks")
    for e in errors[:20]:
        print("perfetto_check:", e, file=sys.stderr)
    total = sum(switches.values())
    print(f"perfetto_check: {len(trace.packet)} packets, {total} switches on {ncpus} CPUs, {wakings} wakings, {len(threads)} threads, {counter_values} values on {len(counter_tracks)} counter tracks: {'ok' if not errors else 'FAILED'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
