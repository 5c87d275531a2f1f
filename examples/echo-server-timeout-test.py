#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Clients that stop reading cannot keep others from being served, and idle ones are closed.

Runs echo-server (the backend in IOMUX_BACKEND) with a pool of 4 buffers and --timeout 1.
Four clients send without ever reading: each ends up holding one or two pool buffers in
echoes that cannot be written, so the pool is dry. A normal client must still get its echo, once
the write timeout has closed the stuck ones (within 4 s; without the timeout it would wait
forever). Then a client that connects and says nothing must be closed by the server within
4 s. Exit 0 when both hold.
"""
import socket
import subprocess
import sys
import time

server = sys.argv[1]
proc = subprocess.Popen([server, "--port", "0", "--pool", "4", "--timeout", "1"],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
try:
    line = proc.stdout.readline()
    if "listening on" not in line:
        sys.exit(f"server did not start: {line!r}")
    port = int(line.split(":")[1].split()[0])

    hogs = []
    for _ in range(4):  # send 16 MB each, never read: the echoes stall once buffers fill
        s = socket.create_connection(("127.0.0.1", port))
        s.setblocking(False)
        hogs.append([s, 16 << 20])
    deadline = time.monotonic() + 1.0
    block = b"x" * 65536
    while time.monotonic() < deadline and any(left > 0 for _, left in hogs):
        for h in hogs:
            if h[1] > 0:
                try:
                    h[1] -= h[0].send(block[:min(len(block), h[1])])
                except BlockingIOError:
                    pass
                except OSError:
                    h[1] = 0  # closed by the server already
        time.sleep(0.001)

    c = socket.create_connection(("127.0.0.1", port))
    c.settimeout(4)
    t0 = time.monotonic()
    c.sendall(b"are you there?")
    got = b""
    try:
        while len(got) < 14:
            chunk = c.recv(64)
            if not chunk:
                break
            got += chunk
    except socket.timeout:
        pass
    waited = time.monotonic() - t0
    if got != b"are you there?":
        sys.exit(f"FAIL: a normal client got {got!r} after {waited:.1f} s "
                 "while four clients that do not read held the pool")
    print(f"echo after {waited:.2f} s with the pool held by clients that do not read")
    c.close()
    for s, _ in hogs:
        s.close()

    idle = socket.create_connection(("127.0.0.1", port))
    idle.settimeout(4)
    t0 = time.monotonic()
    try:
        closed = idle.recv(1) == b""
    except socket.timeout:
        closed = False
    except ConnectionResetError:
        closed = True
    if not closed:
        sys.exit("FAIL: an idle connection was not closed within 4 s")
    print(f"idle connection closed after {time.monotonic() - t0:.2f} s")
finally:
    proc.terminate()
    proc.wait(timeout=10)
