#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""iomux-httpd --threads 2: both loops answer, and SIGTERM closes every loop cleanly.

For each way of sharing the port (SO_REUSEPORT by hash; --acceptor, loop 0 handing the
connections round robin through channels; --steer cpu and --steer bpf where the kernel and
the CPUs allow), 20 keep-alive connections make 5 requests each for a file whose bytes are
checked, and one more connection stays open and idle. SIGTERM must end the server with
status 0 and close the idle connection (its client reads end of stream); the per-loop
lines printed at exit must account for every request: by hash both loops answered some,
round robin 51 and 50, steered each loop exactly the requests made from its CPU.

With IOMUX_TEST_WINE set to Wine's program, iomux-httpd.exe runs under Wine: Windows has no
SO_REUSEPORT, so --threads 2 alone is the acceptor there too (round robin, checked as such),
there is no steering, and Ctrl-C (Wine turns SIGINT into it) stops it.
"""
import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

HTTPD = sys.argv[1]
WINE = os.environ.get("IOMUX_TEST_WINE")
STOP = signal.SIGINT if WINE else signal.SIGTERM
CONNS, PER_CONN = 20, 5
BODY = bytes(range(256)) * 16


def kernel_at_least(major, minor):
    m = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= (major, minor)


def requests_on_one_connection(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for _ in range(PER_CONN):
        c.request("GET", "/f.bin")
        r = c.getresponse()
        body = r.read()
        if r.status != 200 or body != BODY:
            sys.exit(f"FAIL: GET /f.bin: status {r.status}, {len(body)} bytes")
    c.close()


def run(root, mode, cpus=None):
    where = "Z:" + root.replace("/", "\\") if WINE else root  # Wine's Z: drive is /
    cmd = ([WINE] if WINE else []) + [HTTPD, "--root", where, "--port", "0", "--threads", "2"]
    cmd += mode
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    saved, idle = os.sched_getaffinity(0), None
    try:
        line = proc.stdout.readline()
        if "listening on" not in line:
            err = proc.stderr.read()
            if "--steer" in mode and "ENOTSUP" in err:
                return None  # a build without that steering (the portable one: no BPF)
            sys.exit(f"FAIL: {' '.join(cmd)} did not start: {line!r} {err}")
        port = int(line.split()[2].split(":")[1])
        for cpu in cpus or [None]:
            if cpu is not None:
                os.sched_setaffinity(0, {cpu})  # the handshake runs on this CPU
            for _ in range(CONNS // len(cpus or [None])):
                requests_on_one_connection(port)
        os.sched_setaffinity(0, {cpus[0]} if cpus else saved)  # steered: loop 0's
        idle = socket.create_connection(("127.0.0.1", port), timeout=10)
        os.sched_setaffinity(0, saved)
        idle.sendall(b"GET /f.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        got = b""
        while len(got) < len(BODY) or b"\r\n\r\n" not in got:
            got += idle.recv(65536)  # answered: the connection belongs to a loop now
        proc.send_signal(STOP)
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            sys.exit(f"FAIL: {' '.join(cmd)} did not exit within 20 s of {STOP.name}")
        if proc.returncode != 0:
            sys.exit(f"FAIL: {' '.join(cmd)} exited with {proc.returncode}:\n{err}")
        if idle.recv(65536) != b"":
            sys.exit("FAIL: the idle connection was not closed by SIGTERM")
    finally:
        os.sched_setaffinity(0, saved)
        if idle:
            idle.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    loops = {int(m.group(1)): (int(m.group(3)), int(m.group(2)) if m.group(2) else None)
             for m in re.finditer(r"loop (\d+)(?: \(cpu (\d+)\))?: (\d+) requests", err)}
    total = CONNS * PER_CONN + 1
    if sorted(loops) != [0, 1] or sum(v[0] for v in loops.values()) != total:
        sys.exit(f"FAIL: {' '.join(cmd)}: the loops do not account for {total} requests:\n{err}")
    return loops


root = tempfile.mkdtemp(prefix="iomux-httpd-threads-")
try:
    with open(os.path.join(root, "f.bin"), "wb") as f:
        f.write(BODY)
    loops = run(root, [])
    if WINE:  # no SO_REUSEPORT: the acceptor, round robin
        if sorted(v[0] for v in loops.values()) != [50, 51]:
            sys.exit(f"FAIL: --threads 2 on Windows: not the acceptor's round robin: {loops}")
        print(f"--threads 2 (the acceptor on Windows): loops answered {loops[0][0]} and "
              f"{loops[1][0]} requests")
    elif min(v[0] for v in loops.values()) == 0:
        sys.exit(f"FAIL: SO_REUSEPORT: one loop answered every request: {loops}")
    else:
        print(f"reuseport: loops answered {loops[0][0]} and {loops[1][0]} requests")
    loops = run(root, ["--acceptor"])
    # 21 connections round robin from loop 0: 11 and 10, five requests each but the last's one
    if sorted(v[0] for v in loops.values()) != [50, 51]:
        sys.exit(f"FAIL: --acceptor: not round robin: {loops}")
    print(f"acceptor: loops answered {loops[0][0]} and {loops[1][0]} requests")
    cpus = [] if WINE else sorted(os.sched_getaffinity(0))
    for how, why in (("cpu", None if kernel_at_least(6, 2) else "Linux before 6.2"),
                     ("bpf", None if cpus[:2] == [0, 1] else "CPUs 0 and 1 not both allowed")):
        if len(cpus) < 2:
            why = "Windows has no such thing (no SO_REUSEPORT)" if WINE else "one CPU allowed"
        if why:
            print(f"steer {how}: not checked: {why}")
            continue
        loops = run(root, ["--steer", how], cpus[:2])
        if loops is None:
            print(f"steer {how}: not checked: this build has no such steering (ENOTSUP)")
            continue
        # 50 requests made from each CPU, and the idle connection's one from the first
        if loops[0] != (51, cpus[0]) or loops[1] != (50, cpus[1]):
            sys.exit(f"FAIL: --steer {how}: {loops}, not 51 requests for CPU {cpus[0]}'s "
                     f"loop and 50 for CPU {cpus[1]}'s")
        print(f"steer {how}: each loop answered the requests of its CPU")
finally:
    shutil.rmtree(root, ignore_errors=True)
print(f"iomux-httpd --threads 2: every loop answered, clean exit on {STOP.name}")
