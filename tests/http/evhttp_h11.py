#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""libiomux-event's evhttp replies read by h11, an independent HTTP/1.1 implementation.

    tests/http/evhttp_h11.py PROBE

PROBE is the evhttp-probe program (tests/http/evhttp_probe.c), run on the backend of
IOMUX_BACKEND. h11, as the client, sends requests on one keep-alive connection (GET, HEAD,
a chunked reply, a 204, a POST echoed back, then a 404, after which the server must close,
as libevent's does) and reads every reply with its framing checked (a reply h11 cannot frame
raises); then an error page on a second connection, closed after it too. Each reply's status, fields and body are checked too. Exit 0: all read and as
expected; 1: a difference, printed; 77: no h11.
"""
import os
import socket
import subprocess
import sys

try:
    import h11
except ImportError:
    print("SKIP: python3-h11 is not installed (scripts/install-deps test installs it)")
    sys.exit(77)


def exchange(conn, sock, method, target, body=b"", headers=()):
    """Sends one request; returns (status, fields as a dict, body) of its reply."""
    fields = [("Host", "probe")] + list(headers)
    if body:
        fields.append(("Content-Length", str(len(body))))
    data = conn.send(h11.Request(method=method, target=target, headers=fields))
    if body:
        data += conn.send(h11.Data(data=body))
    data += conn.send(h11.EndOfMessage())
    sock.sendall(data)
    status, got, out = None, {}, b""
    while True:
        ev = conn.next_event()
        if ev is h11.NEED_DATA:
            chunk = sock.recv(65536)
            conn.receive_data(chunk)
            continue
        if isinstance(ev, h11.Response):
            status = ev.status_code
            got = {k.decode().lower(): v.decode() for k, v in ev.headers}
        elif isinstance(ev, h11.Data):
            out += bytes(ev.data)
        elif isinstance(ev, h11.EndOfMessage):
            return status, got, out
        elif isinstance(ev, h11.ConnectionClosed):
            raise AssertionError(f"{method} {target}: closed before the reply ended")


def expect(what, cond):
    if not cond:
        print(f"FAIL: {what}")
        sys.exit(1)
    print(f"ok   {what}")


def main():
    probe = subprocess.Popen([sys.argv[1]], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        port, method = probe.stdout.readline().decode().split()
        port = int(port)
        want = os.environ.get("IOMUX_BACKEND")
        expect(f"the server runs on {want}", not want or method == want)
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        conn = h11.Connection(our_role=h11.CLIENT)

        def cycle(*args, **kw):
            r = exchange(conn, sock, *args, **kw)
            conn.start_next_cycle()
            return r

        st, f, body = cycle("GET", "/whole")
        expect("GET /whole: 200, Content-Length 13, the body",
               st == 200 and f.get("content-length") == "13" and body == b"hello, world\n"
               and "date" in f and f.get("content-type", "").startswith("text/html"))
        st, f, body = cycle("HEAD", "/whole")
        expect("HEAD /whole: 200 without a body", st == 200 and body == b"")
        st, f, body = cycle("GET", "/chunked")
        expect("GET /chunked: chunked, three parts",
               st == 200 and f.get("transfer-encoding") == "chunked"
               and body == b"part 0\npart 1\npart 2\n")
        st, f, body = cycle("GET", "/empty")
        expect("GET /empty: 204, no body", st == 204 and body == b"")
        payload = bytes(range(256)) * 40
        st, f, body = cycle("POST", "/echo", body=payload)
        expect("POST /echo: the body back",
               st == 200 and body == payload and f.get("x-body-length") == str(len(payload)))
        st, f, body = exchange(conn, sock, "GET", "/missing?a=<b>")
        expect("GET /missing: 404 with the target escaped, Connection: close",
               st == 404 and b"/missing?a=&lt;b&gt;" in body
               and f.get("connection") == "close")
        expect("the server closed after its 404 page", sock.recv(1) == b"")
        sock.close()
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        conn = h11.Connection(our_role=h11.CLIENT)
        st, f, body = exchange(conn, sock, "GET", "/error")
        expect("GET /error: 418, Connection: close",
               st == 418 and f.get("connection") == "close" and b"418" in body)
        expect("the server closed after the error page", sock.recv(1) == b"")
        sock.close()
    except (h11.RemoteProtocolError, h11.LocalProtocolError, AssertionError, OSError,
            ValueError) as e:
        print(f"FAIL: {type(e).__name__}: {e}")
        return 1
    finally:
        probe.stdin.close()
        probe.wait(timeout=10)
    return 0 if probe.returncode == 0 else 1


sys.exit(main())
