#!/usr/bin/env python3
"""Converts an ftrace text trace (the kernel's `trace` file, key=value event format) into a Perfetto
protobuf trace with the `perfetto` Python package's generated protos: an encoder independent of
schedlab's, used to test schedlab's Perfetto reader on a real recording.

Each event becomes a full FtraceEvent (timestamp, the current pid, common_flags with the hard/soft IRQ
bits from the flags column) in an FtraceEventBundle of its CPU: sched_switch, sched_waking,
sched_wakeup, sched_wakeup_new, sched_migrate_task, sched_process_fork/exec/exit. Other events
(sched_stat_runtime has no Perfetto message) are dropped. prev_state letters become the kernel's bits
(R 0, R+ 0x100, S 1, D 2, T 4, t 8, X 0x10, Z 0x20, P 0x40, I 0x80).

Usage: ftrace_to_perfetto.py TRACE.txt OUT.pftrace
"""
import re
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

LINE = re.compile(r"^\s*(?P<comm>.*)-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[(?P<cpu>\d+)\]\s+"
                  r"(?P<flags>\S+)\s+(?P<ts>\d+\.\d+):\s+(?P<event>\w+):\s*(?P<payload>.*)$")
STATE_BITS = {"S": 1, "D": 2, "T": 4, "t": 8, "X": 0x10, "Z": 0x20, "P": 0x40, "I": 0x80}


def fields(payload, keys):
    """key=value fields in order; a value runs to the next key (comm may hold spaces)."""
    out, pos, starts = {}, 0, []
    for k in keys:
        m = re.compile(r"(?:^|\s)" + re.escape(k) + "=").search(payload, pos)
        if m:
            starts.append((k, m.end()))
            pos = m.end()
    for i, (k, v) in enumerate(starts):
        end = len(payload)
        if i + 1 < len(starts):
            end = payload.rfind(" " + starts[i + 1][0] + "=", 0, starts[i + 1][1])
        out[k] = payload[v:end].strip()
    return out


def state_bits(s):
    s = s.replace("==>", "").strip()
    if s.startswith("R"):
        return 0x100 if s.endswith("+") else 0
    bits = 0
    for part in s.split("|"):
        bits |= STATE_BITS.get(part.strip("+"), 0)
    return bits


def convert(src):
    trace = pb.Trace()
    bundle, bundle_cpu = None, None
    for line in src.splitlines():
        m = LINE.match(line)
        if not m or line.lstrip().startswith("#"):
            continue
        cpu, ev_name, p = int(m["cpu"]), m["event"], m["payload"]
        ev = pb.FtraceEvent()
        ev.timestamp = int(round(float(m["ts"]) * 1e6)) * 1000
        ev.pid = int(m["pid"])
        flags = m["flags"]
        if len(flags) >= 3:
            ev.common_flags = {"h": 0x08, "H": 0x18, "s": 0x10, "z": 0x40, "Z": 0x48}.get(flags[2], 0)
        if ev_name == "sched_switch":
            f = fields(p, ["prev_comm", "prev_pid", "prev_prio", "prev_state", "next_comm", "next_pid",
                           "next_prio"])
            s = ev.sched_switch
            s.prev_comm, s.prev_pid, s.prev_prio = f["prev_comm"], int(f["prev_pid"]), int(f["prev_prio"])
            s.prev_state = state_bits(f["prev_state"])
            s.next_comm, s.next_pid, s.next_prio = f["next_comm"], int(f["next_pid"]), int(f["next_prio"])
        elif ev_name in ("sched_waking", "sched_wakeup", "sched_wakeup_new"):
            f = fields(p, ["comm", "pid", "prio", "target_cpu"])
            w = {"sched_waking": ev.sched_waking, "sched_wakeup": ev.sched_wakeup,
                 "sched_wakeup_new": ev.sched_wakeup_new}[ev_name]
            w.comm, w.pid, w.prio, w.target_cpu = f["comm"], int(f["pid"]), int(f["prio"]), int(f["target_cpu"])
        elif ev_name == "sched_migrate_task":
            f = fields(p, ["comm", "pid", "prio", "orig_cpu", "dest_cpu"])
            t = ev.sched_migrate_task
            t.comm, t.pid, t.prio = f["comm"], int(f["pid"]), int(f["prio"])
            t.orig_cpu, t.dest_cpu = int(f["orig_cpu"]), int(f["dest_cpu"])
        elif ev_name == "sched_process_fork":
            f = fields(p, ["comm", "pid", "child_comm", "child_pid"])
            t = ev.sched_process_fork
            t.parent_comm, t.parent_pid = f["comm"], int(f["pid"])
            t.child_comm, t.child_pid = f["child_comm"], int(f["child_pid"])
        elif ev_name == "sched_process_exec":
            f = fields(p, ["filename", "pid", "old_pid"])
            ev.sched_process_exec.filename, ev.sched_process_exec.pid = f["filename"], int(f["pid"])
        elif ev_name == "sched_process_exit":
            f = fields(p, ["comm", "pid", "prio", "group_dead"])
            t = ev.sched_process_exit
            t.comm, t.pid, t.prio = f["comm"], int(f["pid"]), int(f["prio"])
        else:
            continue
        if bundle is None or bundle_cpu != cpu:
            packet = trace.packet.add()
            packet.trusted_packet_sequence_id = 1
            bundle, bundle_cpu = packet.ftrace_events, cpu
            bundle.cpu = cpu
        bundle.event.append(ev)
    return trace.SerializeToString()


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        data = convert(f.read())
    with open(sys.argv[2], "wb") as f:
        f.write(data)
