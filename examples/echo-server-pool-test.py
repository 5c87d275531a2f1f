#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Many clients on a small pool get every byte back, and a client that reads late does not
take the pool.

Runs echo-server (the backend in IOMUX_BACKEND) with a pool of 16 buffers of 1 KB and no
timeout. A client with a small receive buffer sends until it can send no more (the socket
buffers on the way take megabytes) and reads nothing until the others are done: its echoes
stall, and the server must stop reading from it once more than a buffer's
worth waits, so that its echoes hold two buffers at most (and, on io_uring, the few the
kernel filled for it before the stop took effect, as many as the ring held: at most 9).
Meanwhile six clients each send 64 KB in pieces that are not a buffer's size and read their
echoes as they come: the pool runs dry again and again (five buffers or more for six), and every connection waiting for a buffer must be served when
one comes back. They must all finish while the late client still reads nothing (a late client
that held the whole pool would stop them), and then the late client reads all of its echo.
Every echo is checked byte for byte. Exit 0 when all arrive intact within 30 s.
"""
import selectors
import socket
import subprocess
import sys
import time


def pattern(seed, n):
    period = bytes((seed * 31 + i * 7 + (i >> 8)) & 0xFF for i in range(4093))
    return (period * (n // len(period) + 1))[:n]


server = sys.argv[1]
proc = subprocess.Popen([server, "--port", "0", "--pool", "16", "--buffer", "1024",
                         "--timeout", "0"],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
try:
    line = proc.stdout.readline()
    if "listening on" not in line:
        sys.exit(f"server did not start: {line!r}")
    port = int(line.split(":")[1].split()[0])
    deadline = time.monotonic() + 30

    # The late reader: its echoes fill the sockets, and it reads nothing until the others end.
    late = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    late.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    late.connect(("127.0.0.1", port))
    late.setblocking(False)
    late_out = pattern(99, 64 << 20)
    late_sent = 0
    late_in = bytearray()
    late_reads = False
    # First it sends until it can send no more for 0.3 s: the server no longer reads from it.
    last_progress = time.monotonic()
    while time.monotonic() - last_progress < 0.3 and late_sent < len(late_out):
        if time.monotonic() > deadline:
            sys.exit("FAIL: the late reader's sends never stalled")
        try:
            late_sent += late.send(late_out[late_sent:late_sent + 65536])
            last_progress = time.monotonic()
        except BlockingIOError:
            time.sleep(0.01)
    if late_sent == len(late_out):
        sys.exit("FAIL: all 64 MB of the late reader went out with no stall")
    late_out = late_out[:late_sent]  # what it sent is what it waits for

    sel = selectors.DefaultSelector()
    clients = []
    for k in range(6):
        s = socket.create_connection(("127.0.0.1", port))
        s.setblocking(False)
        c = {"s": s, "out": pattern(k, 64 << 10), "sent": 0, "got": bytearray()}
        clients.append(c)
        sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE, c)

    while time.monotonic() < deadline:
        done = all(len(c["got"]) == len(c["out"]) for c in clients)
        if done:
            late_reads = True
            break
        for key, ev in sel.select(timeout=0.01):
            c = key.data
            if ev & selectors.EVENT_WRITE and c["sent"] < len(c["out"]):
                n = c["s"].send(c["out"][c["sent"]:c["sent"] + 1500])  # not a buffer's size
                c["sent"] += n
                if c["sent"] == len(c["out"]):
                    sel.modify(c["s"], selectors.EVENT_READ, c)
            if ev & selectors.EVENT_READ:
                chunk = c["s"].recv(65536)
                if not chunk:
                    sys.exit("FAIL: the server closed a client")
                c["got"] += chunk
    if not late_reads:
        sys.exit("FAIL: the six clients were not done in 30 s while the late reader held its "
                 "echoes (did it take the whole pool?)")
    # Then the late reader reads its echoes.
    late.setblocking(True)
    late.settimeout(max(0.1, deadline - time.monotonic()))
    try:
        while len(late_in) < len(late_out):
            chunk = late.recv(1 << 20)
            if not chunk:
                sys.exit("FAIL: the server closed the late reader")
            late_in += chunk
    except socket.timeout:
        pass
    for k, c in enumerate(clients):
        if bytes(c["got"]) != c["out"]:
            sys.exit(f"FAIL: client {k} got {len(c['got'])} of {len(c['out'])} bytes"
                     + (" (not what it sent)" if len(c["got"]) == len(c["out"]) else ""))
    if bytes(late_in) != late_out:
        sys.exit(f"FAIL: the late reader got {len(late_in)} of {len(late_out)} bytes")
    print("6 clients on a pool of 16 buffers and a late reader: every byte echoed intact")
    for c in clients:
        c["s"].close()
    late.close()
finally:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        sys.exit("FAIL: the server did not exit on SIGTERM")
if proc.returncode != 0:
    sys.exit(f"FAIL: the server exited with {proc.returncode}")
