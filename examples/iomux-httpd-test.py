#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""iomux-httpd driven by independent clients: h11 (python3-h11) and curl.

    examples/iomux-httpd-test.py PATH-TO-iomux-httpd

Serves a temporary directory; checks with h11 a keep-alive connection, 304, a range, a
HEAD and a refused request; with curl a plain GET and a conditional one; then SIGTERM must
end the server with status 0, after it said on stderr which limit on open files it got.
Then the static files' options and defences, each with h11 and curl: several ranges as
multipart/byteranges (curl -r), 416 and the error bodies' type, a redirect longer than
4 KB, /.well-known/ and --dotfiles, --autoindex, --mime-types, and more distinct files
than the descriptor limit with clients arriving at once. The backend is IOMUX_BACKEND's.
Exit 0: pass; 1: fail; 77: no h11 or no curl (with the reason).

With IOMUX_TEST_WINE set to Wine's program, PATH-TO-iomux-httpd is iomux-httpd.exe and runs
under Wine, driven by the same clients from this machine: its directory is given as a Windows
path (Z: is /), Ctrl-C (Wine turns SIGINT into it) stops it instead of SIGTERM, and what
Windows has no such thing as is left out, saying so: the descriptor limit (the 300 files are
served all the same), and names with '<' or '>' (a name without them is listed instead).
"""
import email.parser
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import threading

try:
    import h11
except ImportError:
    print("SKIP: python3-h11 is not installed (scripts/install-deps test installs it)")
    sys.exit(77)
if not shutil.which("curl"):
    print("SKIP: curl is not installed")
    sys.exit(77)

HTTPD = sys.argv[1]
WINE = os.environ.get("IOMUX_TEST_WINE")
STOP = signal.SIGINT if WINE else signal.SIGTERM
failures = 0


def server_path(p):
    """The path as the server takes it: a Windows one under Wine, whose Z: drive is /."""
    return "Z:" + p.replace("/", "\\") if WINE else p


def server_cmd(*args):
    """The command line that runs the server with `args` (under Wine when it is Windows')."""
    return ([WINE] if WINE else []) + [HTTPD] + list(args)


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


def start(root, *flags, limits=None):
    """Starts iomux-httpd on a free port (with RLIMIT_NOFILE set to `limits`, a (soft,
    hard) pair); returns (process, port)."""
    pre = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, limits)) if limits else None
    cmd = server_cmd("--root", server_path(root), "--port", "0", *flags)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=pre)
    line = proc.stdout.readline()
    check(line.startswith("listening on 127.0.0.1:"), "the server says where it listens: " + line)
    return proc, int(line.split()[2].split(":")[1])


def stop(proc):
    """SIGTERM (Ctrl-C under Wine); returns its stderr once it ended (checked to end with 0)."""
    proc.send_signal(STOP)
    # Wine ends a process through its server, which the first cases of a parallel run keep
    # busy: seen taking more than 10 s there once.
    _, err = proc.communicate(timeout=30 if WINE else 10)
    check(proc.returncode == 0, "%s ends the server with 0, got %d" % (STOP.name, proc.returncode))
    check(("SIGINT: " if WINE else "SIGTERM: ") in err, "it says which signal: " + err)
    return err


def curl(*args):
    return subprocess.run(["curl", "-s"] + list(args), capture_output=True, timeout=10)


def multipart(ctype, body):
    """The parts of a multipart/byteranges body: [(content-range, content-type, bytes)]."""
    msg = email.parser.BytesParser().parsebytes(
        b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
    if not msg.is_multipart():
        return None
    return [(p["Content-Range"], p["Content-Type"], p.get_payload(decode=True))
            for p in msg.get_payload()]


def run_options(root):
    """Ranges, error bodies, redirects, dot-files, listings and media types."""
    data = bytes(range(256)) * 64
    os.mkdir(os.path.join(root, "sub"))
    os.makedirs(os.path.join(root, ".well-known", "acme-challenge"))
    with open(os.path.join(root, ".well-known", "acme-challenge", "tok"), "w") as f:
        f.write("token\n")
    with open(os.path.join(root, ".env"), "w") as f:
        f.write("SECRET=1\n")
    odd = "a b&c.txt" if WINE else "a <b>&c.txt"  # Windows has no names with < or >
    with open(os.path.join(root, "sub", odd), "w") as f:
        f.write("x")
    with open(os.path.join(root, "sub", ".hidden"), "w") as f:
        f.write("x")
    os.mkdir(os.path.join(root, "sub", "inner"))
    with open(os.path.join(root, "page.iomux"), "w") as f:
        f.write("x")
    types = os.path.join(root, "types")
    with open(types, "w") as f:
        f.write("application/x-iomux-page iomux\n")
    proc, port = start(root, "--autoindex", "--mime-types", server_path(types), "--max-ranges", "4")
    base = "http://127.0.0.1:%d" % port

    # Several ranges: multipart/byteranges, parsed part by part (curl and h11).
    out = curl("-D", "-", "-o", "-", "-r", "0-9,100-199,5-20", base + "/data.bin")
    head, _, body = out.stdout.partition(b"\r\n\r\n")
    check(head.startswith(b"HTTP/1.1 206 "), "curl -r with three ranges is 206")
    ctype = [l.split(b": ", 1)[1].decode() for l in head.split(b"\r\n")
             if l.lower().startswith(b"content-type:")][0]
    parts = multipart(ctype, body)
    check(parts == [("bytes 0-20/16384", "application/octet-stream", data[0:21]),
                    ("bytes 100-199/16384", "application/octet-stream", data[100:200])],
          "the parts are the ranges, the overlapping two merged: %r" % (parts,)[:200])
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    conn = h11.Connection(h11.CLIENT)
    resp, body = exchange(sock, conn, "GET", "/data.bin", [("Range", "bytes=-6, 0-1")])
    parts = multipart(header(resp, "content-type"), body)
    check(resp.status_code == 206 and parts is not None and
          [p[0] for p in parts] == ["bytes 16378-16383/16384", "bytes 0-1/16384"] and
          [p[2] for p in parts] == [data[-6:], data[:2]], "h11: a suffix and a range, in order")
    resp, body = exchange(sock, conn, "GET", "/data.bin",
                          [("Range", "bytes=0-0,2-2,4-4,6-6,8-8")])
    check(resp.status_code == 200 and body == data, "more than --max-ranges: the whole")
    resp, body = exchange(sock, conn, "GET", "/data.bin", [("Range", "bytes=20000-")])
    check(resp.status_code == 416 and header(resp, "content-range") == "bytes */16384" and
          header(resp, "content-type") == "text/plain", "416 with its range and a text body")
    # Error bodies are typed; a redirect past 4 KB is answered.
    resp, body = exchange(sock, conn, "GET", "/nothing")
    check(resp.status_code == 404 and header(resp, "content-type") == "text/plain" and
          body == b"404 Not Found\n", "404 has a text body")
    resp, body = exchange(sock, conn, "GET", "/sub?" + "q" * 4194)
    check(resp.status_code == 301 and header(resp, "location") == "/sub/?" + "q" * 4194,
          "a redirect longer than 4 KB")
    resp, body = exchange(sock, conn, "GET", "/" * 5000 + "sub")
    check(resp.status_code == 301 and header(resp, "location") == "/sub/",
          "the redirect goes to the resolved path")
    # Dot-files: /.well-known/ only.
    resp, body = exchange(sock, conn, "GET", "/.well-known/acme-challenge/tok")
    check(resp.status_code == 200 and body == b"token\n", "/.well-known/ is served")
    resp, body = exchange(sock, conn, "GET", "/.env")
    check(resp.status_code == 403, "other dot-files are not")
    # The listing and the media types.
    resp, body = exchange(sock, conn, "GET", "/sub/")
    item = (b'<a href="a%20b%26c.txt">a b&amp;c.txt</a>' if WINE else
            b'<a href="a%20%3Cb%3E%26c.txt">a &lt;b&gt;&amp;c.txt</a>')
    check(resp.status_code == 200 and item in body and
          header(resp, "content-type") == "text/html; charset=utf-8", "the listing, escaped")
    check(b'<a href="inner/">inner/</a>' in body and b".hidden" not in body,
          "the listing: directories marked, dot-files left out")
    resp, body = exchange(sock, conn, "HEAD", "/page.iomux")
    check(header(resp, "content-type") == "application/x-iomux-page", "--mime-types")
    sock.close()
    out = curl("-o", "/dev/null", "-w", "%{http_code} %{content_type}", base + "/sub/")
    check(out.stdout == b"200 text/html; charset=utf-8", "curl gets the listing")
    stop(proc)

    proc, port = start(root, "--dotfiles")
    out = curl("-o", "-", "-w", " %{http_code}", "http://127.0.0.1:%d/.env" % port)
    check(out.stdout == b"SECRET=1\n 200", "--dotfiles serves them")
    out = curl("-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:%d/sub/" % port)
    check(out.stdout == b"404", "no listing without --autoindex")
    stop(proc)


def run_watch_root(root):
    """--watch-root: a file changed in place, its size and time kept as they were (which the
    cache's once-a-second check cannot tell), is served anew at once, in the root and in a
    directory made after the start; without it, the old bytes for up to a second. Where the
    build's file-system watcher is kqueue's (IOMUX_TEST_FS_KQUEUE=1), whose directory watch
    tells an entry created, removed or renamed but not one written in place (docs/fs.md), a
    change is made as editors save: a new file, its size and time the old one's, renamed over
    it."""
    path = os.path.join(root, "watched.txt")
    by_rename = os.environ.get("IOMUX_TEST_FS_KQUEUE") == "1"

    def put(name, text, times=None):
        target = name + ".new" if by_rename and os.path.exists(name) else name
        with open(target, "w") as f:
            f.write(text)
        if times:
            os.utime(target, ns=times)
        if target != name:
            os.replace(target, name)

    def get(port, target):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        resp, body = exchange(sock, h11.Connection(h11.CLIENT), "GET", target)
        sock.close()
        return body

    # A renamed file has a new inode, which the cache's own check once a second sees: there
    # the new bytes must come sooner than that check could bring them (the GET just before the
    # change cached the file).
    within = 0.8 if by_rename else 3

    def settle(port, target, want):
        deadline = time.monotonic() + within
        got = get(port, target)
        while got != want and time.monotonic() < deadline:
            time.sleep(0.02)
            got = get(port, target)
        return got

    put(path, "AAAA")
    st = os.stat(path)
    times = (st.st_atime_ns, st.st_mtime_ns)
    probe = subprocess.run(server_cmd("--root", server_path(root), "--port", "0", "--watch-root",
                                      "--help"), capture_output=True, text=True, timeout=10)
    check(probe.returncode == 0 and "--watch-root" in probe.stdout, "--watch-root is known")
    if subprocess.run(server_cmd("--version"), capture_output=True).returncode != 0 or \
            not os.path.exists("/proc/sys/fs/inotify"):
        print("NOTE: --watch-root not checked: this system has no inotify")
        return
    proc = subprocess.Popen(server_cmd("--root", server_path(root), "--port", "0", "--watch-root"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line:  # refused at start: this build has no notifications (the portable build)
        err = proc.stderr.read()
        proc.wait(timeout=10)
        check(proc.returncode == 1 and "ENOTSUP" in err, "--watch-root refused: " + err)
        print("NOTE: --watch-root not checked further: this build has no file-system "
              "notifications (%s)" % err.strip().splitlines()[-1])
        return
    port = int(line.split()[2].split(":")[1])
    if by_rename:
        print("NOTE: --watch-root on kqueue: each change is a new file renamed over the old "
              "(a directory's watch there does not tell a file written in place)")
    check(get(port, "/watched.txt") == b"AAAA", "--watch-root: the file")
    put(path, "BBBB", times)  # same size, same time: only the event tells
    check(settle(port, "/watched.txt", b"BBBB") == b"BBBB", "--watch-root: changed in place")
    os.mkdir(os.path.join(root, "later"))
    time.sleep(0.1)  # the new directory is watched once its creation is heard
    inner = os.path.join(root, "later", "f.txt")
    put(inner, "1111")
    st = os.stat(inner)
    check(settle(port, "/later/f.txt", b"1111") == b"1111", "--watch-root: a new directory")
    put(inner, "2222", (st.st_atime_ns, st.st_mtime_ns))
    check(settle(port, "/later/f.txt", b"2222") == b"2222",
          "--watch-root: a file in a directory made after the start")
    stop(proc)


def run_descriptor_pressure(root):
    """Under a limit of 128 descriptors that the server cannot raise, 300 distinct files of
    70,000 bytes (each kept open by the cache, which is not in memory) are all served, and
    10 clients arriving at once are all answered within 3 s."""
    files = os.path.join(root, "many")
    os.mkdir(files)
    for i in range(300):
        with open(os.path.join(files, "f%d" % i), "wb") as f:
            f.write(b"file %d\n" % i)
            f.truncate(70000)
    if WINE:
        print("descriptor pressure: Windows has no such thing as a descriptor limit; the 300 "
              "files are served all the same")
    proc, port = start(root, limits=None if WINE else (128, 128))
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    conn = h11.Connection(h11.CLIENT)
    bad = []
    for i in range(300):
        resp, body = exchange(sock, conn, "GET", "/many/f%d" % i, [("Range", "bytes=0-15")])
        if resp.status_code != 206 or not body.startswith(b"file %d\n" % i):
            bad.append((i, resp.status_code))
    check(not bad, "300 files under 128 descriptors: %r" % bad[:5])
    answered = []

    def client():
        out = curl("-m", "3", "-o", "/dev/null", "-w", "%{http_code}",
                   "http://127.0.0.1:%d/many/f299" % port)
        answered.append(out.stdout)
    threads = [threading.Thread(target=client) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(answered == [b"200"] * 10, "10 clients at once all answered within 3 s: %r" % answered)
    sock.close()
    err = stop(proc)
    if not WINE:
        check("open files: 128\n" in err, "the limit it got: " + err)


root = tempfile.mkdtemp(prefix="iomux-httpd-")
try:
    with open(os.path.join(root, "index.html"), "w") as f:
        f.write("<h1>hello</h1>\n")
    with open(os.path.join(root, "data.bin"), "wb") as f:
        f.write(bytes(range(256)) * 64)  # 16 KB
    proc, port = start(root)

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

    err = stop(proc)
    if WINE:
        check("open files: no limit (Windows handles)" in err, "no limit to raise: " + err)
    else:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        check("open files: %d" % hard in err, "the server raised its open files limit: " + err)

    run_options(root)
    run_watch_root(root)
    run_descriptor_pressure(root)
finally:
    shutil.rmtree(root)

print("iomux-httpd: %s" % ("ok" if not failures else "%d failures" % failures))
sys.exit(1 if failures else 0)
