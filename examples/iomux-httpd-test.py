#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""iomux-httpd driven by independent clients: h11 (python3-h11) and curl.

    examples/iomux-httpd-test.py PATH-TO-iomux-httpd

Serves a temporary directory; checks with h11 a keep-alive connection, 304, a range, a
HEAD and a refused request; with curl a plain GET and a conditional one; then SIGTERM must
end the server with status 0. The backend is IOMUX_BACKEND's. Exit 0: pass; 1: fail; 77:
no h11 or no curl (with the reason).
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

try:
    import h11
except ImportError:
    print("SKIP: python3-h11 is not installed (scripts/install-deps test installs it)")
    sys.exit(77)
if not shutil.which("curl"):
    print("SKIP: curl is not installed")
    sys.exit(77)

HTTPD = sys.argv[1]
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


def exchange(sock, conn, method, target, headers=()):
    """One request on an h11 connection; returns (response, body)."""
    hs = [("Host", "t")] + list(headers)
    sock.sendall(conn.send(h11.Request(method=method, target=target, headers=hs)))
    sock.sendall(conn.send(h11.EndOfMessage()))
    resp, body = None, b""
    while True:
        ev = conn.next_event()
        if ev is h11.NEED_DATA:
            data = sock.recv(65536)
            conn.receive_data(data)
            continue
        if isinstance(ev, h11.Response):
            resp = ev
        elif isinstance(ev, h11.Data):
            body += ev.data
        elif isinstance(ev, (h11.EndOfMessage, h11.ConnectionClosed)):
            break
    if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
        conn.start_next_cycle()
    return resp, body


def header(resp, name):
    for n, v in resp.headers:
        if n == name.lower().encode():
            return v.decode()
    return None


root = tempfile.mkdtemp(prefix="iomux-httpd-")
try:
    with open(os.path.join(root, "index.html"), "w") as f:
        f.write("<h1>hello</h1>\n")
    with open(os.path.join(root, "data.bin"), "wb") as f:
        f.write(bytes(range(256)) * 64)  # 16 KB
    proc = subprocess.Popen([HTTPD, "--root", root, "--port", "0"], stdout=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline()
    check(line.startswith("listening on 127.0.0.1:"), "the server says where it listens: " + line)
    port = int(line.split()[2].split(":")[1])

    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    conn = h11.Connection(h11.CLIENT)
    resp, body = exchange(sock, conn, "GET", "/")
    check(resp.status_code == 200 and body == b"<h1>hello</h1>\n", "GET / gives index.html")
    check(header(resp, "content-type") == "text/html; charset=utf-8", "its media type")
    etag = header(resp, "etag")
    resp, body = exchange(sock, conn, "GET", "/", [("If-None-Match", etag)])
    check(resp.status_code == 304 and body == b"", "If-None-Match gives 304")
    resp, body = exchange(sock, conn, "GET", "/data.bin", [("Range", "bytes=256-511")])
    check(resp.status_code == 206 and body == bytes(range(256)), "a range gives 206 and its bytes")
    check(header(resp, "content-range") == "bytes 256-511/16384", "its Content-Range")
    resp, body = exchange(sock, conn, "HEAD", "/data.bin")
    check(resp.status_code == 200 and body == b"" and header(resp, "content-length") == "16384",
          "HEAD gives the length and no body")
    resp, body = exchange(sock, conn, "GET", "/../etc/passwd")
    check(resp.status_code == 403, "a path above the root is 403")
    resp, body = exchange(sock, conn, "GET", "/nothing")
    check(resp.status_code == 404, "a missing file is 404")
    sock.close()

    # A malformed request: 400 and a closed connection; the server serves on.
    s2 = socket.create_connection(("127.0.0.1", port), timeout=5)
    s2.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nBad Field: x\r\n\r\n")
    got = b""
    while True:
        d = s2.recv(65536)
        if not d:
            break
        got += d
    check(got.startswith(b"HTTP/1.1 400 Bad Request\r\n"), "a bad field is 400, then closed")
    s2.close()

    url = "http://127.0.0.1:%d/data.bin" % port
    out = subprocess.run(["curl", "-s", "-o", "-", url], capture_output=True, timeout=10)
    check(out.returncode == 0 and out.stdout == bytes(range(256)) * 64, "curl GETs the file")
    out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                          "-H", "If-None-Match: " + etag, "http://127.0.0.1:%d/" % port],
                         capture_output=True, text=True, timeout=10)
    check(out.stdout == "304", "curl's conditional GET is 304, got " + out.stdout)

    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=10)
    check(rc == 0, "SIGTERM ends the server with 0, got %d" % rc)
finally:
    shutil.rmtree(root)

print("iomux-httpd: %s" % ("ok" if not failures else "%d failures" % failures))
sys.exit(1 if failures else 0)
