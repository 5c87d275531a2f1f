#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""echo-server --threads 2: both loops serve, and SIGTERM closes every loop cleanly.

For each way of sharing the port (SO_REUSEPORT by hash; --acceptor, loop 0 handing
connections round robin through channels; --steer cpu and --steer bpf, where the kernel and
the CPUs allow), the server (backend from IOMUX_BACKEND) gets 40 connections, each echoing
one message, while a few more stay open and idle. SIGTERM must then close the idle ones
(their clients read end of stream), end the process with status 0, and the per-loop lines
printed at exit must account for every connection and byte: by hash both loops served some,
round robin 20 each, steered each loop exactly the connections made from its CPU.
"""
import os
import re
import signal
import socket
import subprocess
import sys

server = sys.argv[1]
CONNS, HELD, MSG = 40, 4, b"the same bytes back, please"


def allowed_cpus():
    return sorted(os.sched_getaffinity(0))


def kernel_at_least(major, minor):
    m = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= (major, minor)


def echo_once(port):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(MSG)
        got = b""
        while len(got) < len(MSG):
            chunk = s.recv(64)
            if not chunk:
                sys.exit(f"FAIL: end of stream after {len(got)} bytes of an echo")
            got += chunk
        if got != MSG:
            sys.exit(f"FAIL: echoed {got!r}")


def run(mode, cpus=None):
    """Starts the server with `mode`, makes the connections (from each CPU of `cpus` in turn
    when given, CONNS / len(cpus) from each), stops it; returns {loop: (conns, bytes, cpu)}."""
    cmd = [server, "--port", "0", "--threads", "2"] + mode
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    held, saved = [], os.sched_getaffinity(0)
    try:
        line = proc.stdout.readline()
        if "listening on" not in line:
            err = proc.stderr.read()
            if "--steer" in mode and "ENOTSUP" in err:
                return None  # a build without that steering (the portable one: no BPF)
            sys.exit(f"FAIL: {' '.join(cmd)} did not start: {line!r} {err}")
        port = int(line.split(":")[1].split()[0])
        for cpu in cpus or [None]:
            if cpu is not None:
                os.sched_setaffinity(0, {cpu})  # the handshake runs on this CPU
            for _ in range(CONNS // len(cpus or [None])):
                echo_once(port)
            for _ in range(HELD // len(cpus or [None])):
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                s.sendall(MSG)
                s.recv(64)  # served: it belongs to a loop now
                held.append(s)
        os.sched_setaffinity(0, saved)
        proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            sys.exit(f"FAIL: {' '.join(cmd)} did not exit within 20 s of SIGTERM")
        if proc.returncode != 0:
            sys.exit(f"FAIL: {' '.join(cmd)} exited with {proc.returncode} after SIGTERM:\n{err}")
        for s in held:
            s.settimeout(10)
            if s.recv(64) != b"":
                sys.exit("FAIL: an idle connection got bytes instead of end of stream")
            s.close()
    finally:
        os.sched_setaffinity(0, saved)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    loops = {}
    for m in re.finditer(r"loop (\d+)(?: \(cpu (\d+)\))?: (\d+) connections, (\d+) bytes", err):
        loops[int(m.group(1))] = (int(m.group(3)), int(m.group(4)),
                                  int(m.group(2)) if m.group(2) else None)
    if sorted(loops) != [0, 1]:
        sys.exit(f"FAIL: {' '.join(cmd)}: no line per loop at exit:\n{err}")
    conns = sum(v[0] for v in loops.values())
    if conns != CONNS + HELD or sum(v[1] for v in loops.values()) != (CONNS + HELD) * len(MSG):
        sys.exit(f"FAIL: {' '.join(cmd)}: the loops account for {conns} connections and "
                 f"{sum(v[1] for v in loops.values())} bytes, not {CONNS + HELD} and "
                 f"{(CONNS + HELD) * len(MSG)}:\n{err}")
    return loops


if subprocess.run([server, "--threads", "0"], capture_output=True).returncode != 2:
    sys.exit("FAIL: --threads 0 was accepted")

loops = run([])
if min(v[0] for v in loops.values()) == 0:
    sys.exit(f"FAIL: SO_REUSEPORT: one loop served every connection: {loops}")
print(f"reuseport: loops served {loops[0][0]} and {loops[1][0]} connections")

loops = run(["--acceptor"])
if loops[0][0] != loops[1][0]:
    sys.exit(f"FAIL: --acceptor: not round robin: {loops}")
print(f"acceptor: loops served {loops[0][0]} and {loops[1][0]} connections")

cpus = allowed_cpus()
for how, why in (("cpu", None if kernel_at_least(6, 2) else "Linux before 6.2"),
                 ("bpf", None if cpus[:2] == [0, 1] else "CPUs 0 and 1 not both allowed")):
    if len(cpus) < 2:
        why = "one CPU allowed"
    if why:
        print(f"steer {how}: not checked: {why}")
        continue
    loops = run(["--steer", how], cpus[:2])
    if loops is None:
        print(f"steer {how}: not checked: this build has no such steering (ENOTSUP)")
        continue
    for i in (0, 1):
        if loops[i][2] != cpus[i] or loops[i][0] != (CONNS + HELD) // 2:
            sys.exit(f"FAIL: --steer {how}: loop {i} on CPU {loops[i][2]} served "
                     f"{loops[i][0]} connections, not the {(CONNS + HELD) // 2} made from "
                     f"CPU {cpus[i]}")
    print(f"steer {how}: each loop served the {(CONNS + HELD) // 2} connections of its CPU")
print("echo-server --threads 2: every loop served, clean exit on SIGTERM")
