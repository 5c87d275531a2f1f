#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Tests of tools/deadconn against a listener of this script's own on 127.0.0.1 (port 0).

    deadconn-test.py DEADCONN CASE

CASE is one of:
  holds        300 connections from 3 source addresses: the listener accepts all 300, none
               closes before deadconn is told to stop, deadconn then closes every one (the
               listener reads the end of stream on each) and reports them held, none lost
               or failed, and as many descriptors open at the end as at the start
  server_close the listener closes 10 of 50 connections while they are held: deadconn
               counts them lost and exits 1
  loopback     an address outside 127.0.0.0/8 is refused (exit 2) before any connect
"""
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def accept_all(lst, want, deadline):
    conns = []
    while len(conns) < want and time.time() < deadline:
        if select.select([lst], [], [], 0.1)[0]:
            c, addr = lst.accept()
            conns.append((c, addr))
    return conns


def result(out):
    lines = [l for l in out.splitlines() if l.startswith("RESULT ")]
    if not lines:
        fail(f"no RESULT line in: {out!r}")
    return json.loads(lines[-1][7:])


def run(exe, count, sources, close_some=0):
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1024)
    port = lst.getsockname()[1]
    p = subprocess.Popen([exe, "--port", str(port), "--count", str(count), "--sources",
                          str(sources), "--seconds", "30"], stdout=subprocess.PIPE, text=True)
    try:
        conns = accept_all(lst, count, time.time() + 20)
        if len(conns) != count:
            fail(f"the listener accepted {len(conns)} of {count} connections")
        first = p.stdout.readline()
        if not first.startswith(f"holding {count} connections"):
            fail(f"first line: {first!r}")
        srcs = {addr[0] for _, addr in conns}
        if len(srcs) != sources:
            fail(f"connections came from {sorted(srcs)}, expected {sources} addresses")
        fds = len(os.listdir(f"/proc/{p.pid}/fd"))
        for c, _ in conns[:close_some]:
            c.close()
        # deadconn closes each connection it finds closed: wait for its descriptors to go.
        deadline = time.time() + 10
        while close_some and len(os.listdir(f"/proc/{p.pid}/fd")) > fds - close_some:
            if time.time() > deadline:
                fail(f"deadconn did not close the {close_some} connections the server closed")
            time.sleep(0.01)
        for c, _ in conns[close_some:]:
            c.setblocking(False)
            try:
                if c.recv(1) is not None:
                    fail("deadconn sent a byte or closed a connection while holding it")
            except BlockingIOError:
                pass
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=20)
        for c, _ in conns[close_some:]:
            c.setblocking(True)
            c.settimeout(5)
            if c.recv(1) != b"":
                fail("a connection was not closed by deadconn")
            c.close()
        return p.returncode, result(out)
    finally:
        if p.poll() is None:
            p.kill()
        lst.close()


def check_backend(r):
    """The case runs once per backend: deadconn must have used the one it was given."""
    want = os.environ.get("IOMUX_BACKEND")
    if want and r.get("backend") != want:
        fail(f"deadconn ran on {r.get('backend')}, not {want}")


def main():
    exe, case = sys.argv[1], sys.argv[2]
    if case == "holds":
        rc, r = run(exe, 300, 3)
        check_backend(r)
        if rc != 0 or r["held"] != 300 or r["lost"] or r["failed"] or \
                r["fds_after"] != r["fds_before"] or r["held_at_end"] != 300:
            fail(f"exit {rc}, {r}")
    elif case == "server_close":
        rc, r = run(exe, 50, 1, close_some=10)
        check_backend(r)
        if rc != 1 or r["lost"] != 10 or r["held_at_end"] != 40 or \
                r["fds_after"] != r["fds_before"]:
            fail(f"exit {rc}, {r}")
    elif case == "loopback":
        # 0.0.0.0 is not in 127.0.0.0/8, and a connect to it would still stay on this host
        p = subprocess.run([exe, "--port", "80", "--count", "1", "--host", "0.0.0.0"],
                           capture_output=True, text=True)
        if p.returncode != 2 or "127.0.0.0/8" not in p.stderr:
            fail(f"exit {p.returncode}: {p.stderr!r}")
    else:
        fail(f"unknown case {case}")
    print("ok")


if __name__ == "__main__":
    main()
