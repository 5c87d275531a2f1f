# SPDX-License-Identifier: MIT
"""The HTTP study, run by bench/run (bench/README.md, "The HTTP study"): Asio's CK HTTP Test
(`ab -c 100`, a new connection per request, a 4 KB file) and keep-alive loads (`ab -k`, wrk,
h2load with and without pipelining) against iomux-httpd on epoll and io_uring, nginx and h2o.
The method is the echo study's: each server in its own process pinned to one CPU, the load
tool pinned to the other, over loopback TCP, every server once per cell in each repetition
in an order that rotates, ratios paired within a repetition, every command printed.

Server, nginx_conf and nginx_server also serve the dead-connection and scaling studies."""
import hashlib
import http.client
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import benchlib as h
from benchlib import Cell, Study as Base

SERVERS = ["iomux-epoll", "iomux-uring", "nginx", "h2o"]
PEERS = ["h2o", "nginx"]  # the ratio tables' references
# The load tools: the package each comes from, and whether its connections are kept alive.
TOOLS = {
    "ab": dict(exe="ab", package="apache2-utils", keep=False,
               what="`ab -c 100`: HTTP/1.0, a new connection per request (Asio's CK HTTP Test)"),
    "ab-k": dict(exe="ab", package="apache2-utils", keep=True,
                 what="`ab -k -c 100`: HTTP/1.0 with `Connection: Keep-Alive`"),
    "wrk": dict(exe="wrk", package="wrk", keep=True,
                what="`wrk -t1 -c100`: HTTP/1.1, one thread"),
    "h2load": dict(exe="h2load", package="nghttp2-client", keep=True,
                   what="`h2load --h1 -t1 -c100`: HTTP/1.1, one request in flight per "
                        "connection"),
    "h2load-m16": dict(exe="h2load", package="nghttp2-client", keep=True,
                       what="`h2load --h1 -t1 -c100 -m16`: HTTP/1.1, 16 requests pipelined "
                            "per connection"),
}
FILES = {"4k": 4096, "64k": 65536, "1m": 1 << 20}  # served as <label>.bin, random bytes
CONNECTIONS = 100
MAX_REQUESTS = 100000  # per connection: nginx's keepalive_requests, iomux-httpd's --max-requests
TARGET_RPS = 1.1  # iomux-httpd's requests/s over h2o's, paired, in every keep-alive cell
TARGET_CPU = 0.8  # ... and its server CPU per request over h2o's, paired, at most
LIMIT_PCT = 90  # a side using at least this much of its CPU is what limits the cell
PROFILE_CELL = ("wrk", "4k")  # the cell profiled with perf record, per server
TARGET_FEWER_CALLS = 3  # ... and at least this many system calls per request fewer than nginx
AB_TIMEOUT = 10  # ab -s: seconds it waits for a response before it gives up
MODES = {
    "smoke": dict(files=["4k"], more=[], seconds=1, warmup=0, reps=1, strace=[]),
    "quick": dict(files=["4k"], more=[], seconds=1, warmup=0, reps=1,
                  strace=[("wrk", "4k"), ("ab", "4k")]),
    "full": dict(files=None, more=[], seconds=5, warmup=1, reps=5,
                 strace=[("wrk", "4k"), ("ab", "4k")]),
}
METRICS = [("rps", "requests/s", "Throughput", "higher"),
           ("cpu_us", "µs per request", "Server CPU time per request", "lower"),
           ("cpu_pct", "% of one CPU", "Server CPU use over the timed window", None),
           ("tool_pct", "% of one CPU", "Load tool CPU use over the timed window", None)]


def cell_name(cell):
    return f"{cell[0]} {cell[1]}"


def whole(s):
    """The tools' windows are whole seconds."""
    return max(1, round(s))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def session_pids(sid):
    """The live processes of a session: a server and every process it started."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z" and int(fields[3]) == sid:
            pids.append(int(d))
    return sorted(pids)


def tasks_ns(pids):
    """{(pid, tid): on-CPU ns} of every thread of the processes (schedstat)."""
    ns = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    ns[(pid, tid)] = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    return ns


def proc_title(pid):
    """What a process calls itself: nginx: worker process, h2o, perl."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv0 = f.read().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return "?"
    return os.path.basename(argv0.split(" /")[0])


def threads(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


class Server:
    """One HTTP server, started in a session of its own (so that every process it starts can
    be found, counted and stopped), pinned to the server CPU, checked, and always stopped
    (context manager). Stands in runner.live for its whole session: kill() stops them all."""

    def __init__(self, study, name):
        self.study, self.spec = study, study.servers[name]
        self.port = None if self.spec["kind"] == "iomux" else free_port()
        if self.port:
            study.config(self.spec["kind"], self.port)
        self.cmd = study.runner.pin(self.spec["cmd"](self.port), study.cpus[0])
        self.proc, self.error, self.worker = None, None, None

    def shown_cmd(self):
        return " ".join([f"{k}={v}" for k, v in self.spec["env"].items()] + [shlex.join(self.cmd)])

    def __enter__(self):
        self.err = tempfile.TemporaryFile()
        # A session of its own, and with --group-nice (this study's) its own scheduler group.
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=self.err,
                                     env=dict(os.environ, **self.spec["env"]),
                                     start_new_session=True,
                                     preexec_fn=h.own_group(getattr(self.study, "nice", 0)))
        self.study.runner.live.add(self)
        self.pid, self.ready = self.proc.pid, False
        self.error = self.start()
        if self.error is None:
            self.ready = True
        elif self.proc.poll() is not None:
            self.error = "exited at start (" + self.ended() + ")"
        return self

    def start(self):
        """Waits until the server serves, and checks it: None, or what is wrong."""
        if self.spec["kind"] == "iomux":
            line = h.read_line(self.proc, 10)
            if line is None or not line.startswith("listening on 127.0.0.1:"):
                return f"no 'listening on' line within 10 s: {self.stderr() or line}"
            self.port = int(line.split(":")[1].split()[0])
            backend = self.spec["backend"]
            if f"({backend})" not in line:
                return f"wrong backend: '{line}', expected ({backend})"
            want = {"uring": "anon_inode:[io_uring]", "epoll": "anon_inode:[eventpoll]"}.get(
                backend)  # poll and select hold nothing to tell them by
            if want and want not in h.fd_kinds(self.pid):
                return f"holds no {want}: not the mechanism it claims"
            return None
        deadline = time.time() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.time() > deadline:
                    return f"not accepting on port {self.port} within 10 s"
                time.sleep(0.02)
        if self.spec["kind"] == "nginx":
            # The workers configured (one here; the scaling study's spec says how many); they
            # may come up a moment after the port opens.
            want = self.spec.get("workers", 1)
            while True:
                workers = [p for p in session_pids(self.pid) if p != self.pid
                           and proc_title(p).startswith("nginx: worker")]
                if len(workers) == want or time.time() > deadline:
                    break
                time.sleep(0.02)
            if len(workers) != want:
                return f"{len(workers)} worker processes, expected {want}"
            self.worker = workers[0]
        return None

    def ended(self):
        """How the server process ended, with the last line it or its log wrote."""
        rc = self.proc.returncode
        last = self.stderr() or self.spec.get("log", lambda: "")()
        return (f"killed by {signal.Signals(-rc).name}" if rc < 0 else
                f"status {rc}") + (f": {last}" if last else "")

    def serving_pid(self):
        """The process that serves: nginx's worker (its master only waits), else the server."""
        return self.worker or self.pid

    def processes(self):
        """The session's processes, as the report lists them."""
        return ", ".join(f"{proc_title(p)} ({threads(p)} thread" + ("s" if threads(p) > 1 else "")
                         + ")" for p in session_pids(self.pid))

    def cpu(self):
        return tasks_ns(session_pids(self.pid))

    def stderr(self):
        self.err.seek(0)
        lines = self.err.read().decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else ""

    def kill(self):
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def wait(self):
        self.proc.wait()

    def __exit__(self, *exc):
        p = self.proc
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
                p.wait()
                self.error = self.error or "did not exit within 10 s of SIGTERM"
        elif self.ready:  # what the tool then says (refused connections) follows from this
            self.error = f"exited by itself during the run ({self.ended()})" + (
                f"; then {self.error}" if self.error else "")
        if p.returncode != 0 and not self.error:
            self.error = f"exited after SIGTERM ({self.ended()})"
        deadline = time.time() + 2  # helpers that see the server gone and exit (h2o's)
        while session_pids(self.pid) and time.time() < deadline:
            time.sleep(0.02)
        self.kill()
        self.study.runner.live.discard(self)
        p.stdout.close()
        self.err.seek(0)  # all it said, for a study that reads its lines at exit (scaling)
        self.err_text = self.err.read().decode(errors="replace")
        self.err.close()
        return False


def traced(runner, pid, cpu, path, load, nice=0):
    """Runs load() with `strace -c -f -o path` attached to every thread of pid (pinned to
    cpu) once it is up, so that start-up and shutdown are left out; returns what load()
    returns, with the count in path once strace has detached. nice: --group-nice."""
    scmd = runner.pin([shutil.which("strace"), "-c", "-f", "-o", path, "-p", str(pid)], cpu)
    with tempfile.TemporaryFile() as err:
        st = subprocess.Popen(scmd, stderr=err, preexec_fn=h.own_group(nice))
        runner.live.add(st)
        deadline = time.time() + 10  # "Process N attached [with M threads]"
        while time.time() < deadline and st.poll() is None:
            err.seek(0)
            if b" attached" in err.read():
                break
            time.sleep(0.02)
        try:
            return load()
        finally:
            st.send_signal(signal.SIGINT)  # strace detaches and writes its count
            try:
                st.wait(timeout=10)
            except subprocess.TimeoutExpired:
                st.kill()
                st.wait()
            runner.live.discard(st)


def check_files(port, files):
    """Fetches every file over one HTTP/1.1 connection, which must stay open: the exact
    bytes (sha256) and the right Content-Length, else why not."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    sock = None
    try:
        for label, (size, digest) in files.items():
            path = f"/{label}.bin"
            conn.request("GET", path)
            r = conn.getresponse()
            body = r.read()
            if r.status != 200:
                return f"GET {path}: status {r.status}"
            if r.getheader("Content-Length") != str(size):
                return (f"GET {path}: Content-Length {r.getheader('Content-Length')}, "
                        f"expected {size}")
            if hashlib.sha256(body).hexdigest() != digest:
                return f"GET {path}: {len(body):,} bytes that are not the file's {size:,}"
            if sock is not None and conn.sock is not sock:
                return f"GET {path}: the keep-alive connection was closed after a response"
            sock = conn.sock
    except (OSError, http.client.HTTPException) as e:
        return f"{type(e).__name__}: {e}"
    finally:
        conn.close()
    return None


def http10_keep_alive(port):
    """How a server answers an HTTP/1.0 request with Connection: Keep-Alive, as ab -k sends
    it: None if it says keep-alive or closes after the response; else why ab -k cannot run
    (it keeps the connection open without saying so, and an HTTP/1.0 client then waits for
    the end of the response until its timeout)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET /4k.bin HTTP/1.0\r\nHost: 127.0.0.1\r\n"
                      b"Connection: Keep-Alive\r\n\r\n")
            buf = b""
            while b"\r\n\r\n" not in buf:
                chunk = s.recv(65536)
                if not chunk:
                    return None
                buf += chunk
            head, _, body = buf.partition(b"\r\n\r\n")
            fields = [l.split(b":", 1) for l in head.lower().split(b"\r\n")[1:]]
            fields = {k.strip(): v.strip() for k, v in (f for f in fields if len(f) == 2)}
            if b"keep-alive" in fields.get(b"connection", b""):
                return None
            length = int(fields.get(b"content-length", b"-1"))
            while len(body) < length:
                chunk = s.recv(65536)
                if not chunk:
                    return None
                body += chunk
            s.settimeout(1)
            try:
                if not s.recv(1):
                    return None
            except socket.timeout:
                pass
    except (OSError, ValueError) as e:
        return f"the HTTP/1.0 keep-alive probe failed: {e}"
    return ("answers an HTTP/1.0 request with `Connection: Keep-Alive` without "
            "`Connection: keep-alive` and keeps the connection open, so ab -k (HTTP/1.0) waits "
            "for the end of each response until its timeout")


def parse_perf(text):
    """[(what, percent)] from `perf report --stdio` lines ("  12.34%  comm  [k] sym")."""
    out = []
    for line in text.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(.*\S)", line)
        if m and not line.lstrip().startswith("#"):
            out.append((re.sub(r"\s+", " ", m.group(2)), float(m.group(1))))
    return out


SYSCALL_PREFIXES = ("__x64_sys_", "__do_sys_", "__sys_", "ksys_", "do_")


def by_syscall(text):
    """[(where, share %)] of the samples of `perf script -F ip,sym` with call chains, by
    where the time went: the system call each kernel sample was in (the frame that
    do_syscall_64 called, named without its __x64_sys_, __sys_, ksys_ or do_), "user space",
    or "kernel outside a system call" (interrupts, page faults). The loopback TCP path of a
    send runs inside it (the receiver's softirq on the sender's CPU), so a send's share is
    what delivering the bytes costs too."""
    counts, total = {}, 0
    for block in text.split("\n\n"):
        frames = [ln.split(None, 1) for ln in block.strip().splitlines()]
        frames = [f for f in frames if len(f) == 2]
        if not frames:
            continue
        total += 1
        syms = [f[1].strip() for f in frames]
        if not frames[0][0].startswith("ffff"):
            where = "user space"
        elif "do_syscall_64" in syms[1:]:
            where = syms[syms.index("do_syscall_64") - 1]
            for pre in SYSCALL_PREFIXES:
                if where.startswith(pre):
                    where = where[len(pre):]
                    break
            where = "the return to user space (task work)" if (
                where == "exit_to_user_mode_loop") else f"`{where}`"
        else:
            where = "kernel outside a system call"
        counts[where] = counts.get(where, 0) + 1
    return sorted(((k, v / total * 100) for k, v in counts.items()), key=lambda kv: -kv[1])


def run_rusage(cmd, timeout, preexec_fn=None):
    """Runs cmd like subprocess.run(capture_output=True, text=True), and also returns the CPU
    time (user + system, s) it and its children used, from wait4: a namespace with stdout,
    stderr, returncode and cpu_s, or None when it outlived `timeout` seconds (killed)."""
    import types
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, preexec_fn=preexec_fn)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                os.wait4(p.pid, 0)
                return None
            time.sleep(0.02)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return types.SimpleNamespace(stdout=out.read().decode(errors="replace"),
                                     stderr=err.read().decode(errors="replace"),
                                     returncode=p.returncode, cpu_s=ru.ru_utime + ru.ru_stime)


def tool_cmd(exe, tool, url, seconds):
    """The load command of a cell for a window of seconds, rounded to whole seconds (ab and
    wrk take no fraction; h2load is given the same)."""
    if tool in ("ab", "ab-k"):
        # -t sets the window; it implies -n 50000, so a larger -n comes after it.
        return [exe] + (["-k"] if tool == "ab-k" else []) + [
            "-c", str(CONNECTIONS), "-t", str(whole(seconds)), "-n", "100000000",
            "-s", str(AB_TIMEOUT), url]
    if tool == "wrk":
        return [exe, "-t1", f"-c{CONNECTIONS}", f"-d{whole(seconds)}s", url]
    return [exe, "--h1", "-t1", f"-c{CONNECTIONS}"] + (["-m16"] if tool == "h2load-m16" else []) + [
        "-D", str(whole(seconds)), url]


# What each tool prints: requests/s, requests completed, and the counts that fail a run.
PATTERNS = {
    "ab": (r"Requests per second:\s+([\d.]+)", r"Complete requests:\s+(\d+)",
           [(r"Failed requests:\s+(\d+)", ["failed"]),
            (r"Non-2xx responses:\s+(\d+)", ["non-2xx"]),
            (r"Write errors:\s+(\d+)", ["write errors"])]),
    "wrk": (r"Requests/sec:\s+([\d.]+)", r"(\d+) requests in ",
            [(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)",
              ["connect errors", "read errors", "write errors", "timeouts"]),
             (r"Non-2xx or 3xx responses: (\d+)", ["non-2xx or 3xx"])]),
    "h2load": (r"finished in [\d.]+\w+, ([\d.]+) req/s",
               r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded",
               [(r"succeeded, (\d+) failed, (\d+) errored, (\d+) timeout",
                 ["failed", "errored", "timeouts"]),
                (r"status codes: \d+ 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx",
                 ["3xx", "4xx", "5xx"])]),
}


def parse_tool(tool, text):
    """(requests/s, requests completed, why the run failed or None) from a tool's output."""
    rps_re, done_re, bad_res = PATTERNS[TOOLS[tool]["exe"]]
    rps, done = re.search(rps_re, text), re.search(done_re, text)
    if not rps or not done or not int(done.group(1)):
        return None, None, "no requests/s or no completed request in its output"
    bad = []
    for pattern, names in bad_res:
        m = re.search(pattern, text)
        bad += [f"{int(v):,} {k}" for k, v in zip(names, m.groups() if m else []) if int(v)]
    return float(rps.group(1)), int(done.group(1)), ", ".join(bad) or None


def nginx_conf(d, port, root_user, connections=4096, idle_s=None, nofile=None, workers=1,
               cpus=None, reuseport=False):
    """nginx's configuration; connections: worker_connections; nofile: the worker's
    descriptor limit (worker_rlimit_nofile; at most the hard limit, which an unprivileged
    container cannot raise); idle_s: how long a connection may stay silent, before its first
    request and between requests (nginx's defaults: 60 and 75 s). One worker, or the scaling
    study's `workers`, each bound to one of `cpus` in turn (worker_cpu_affinity), with a
    listening socket each (`reuseport`)."""
    masks = ["".join("1" if c == cpu else "0" for c in range(max(cpus), -1, -1))
             for cpu in cpus] if cpus else []
    return "\n".join(
        (["user root;  # the workers read the document root, in root's 0700 temporary "
          "directory"] if root_user else []) + [
        f"worker_processes {workers};"] + (
        [f"worker_cpu_affinity {' '.join(masks)};"] if masks else []) + [
        f"pid {d}/nginx.pid;",
        f"error_log {d}/nginx-error.log;"] + (
        [f"worker_rlimit_nofile {nofile};"] if nofile else []) + [
        f"events {{ worker_connections {connections}; }}",
        "http {",
        "    access_log off;",
        "    sendfile on;",
        f"    keepalive_requests {MAX_REQUESTS};"] + (
        [f"    client_header_timeout {idle_s}s;", f"    keepalive_timeout {idle_s}s;"]
        if idle_s else []) + [
        "    # Debian's temporary paths are under /var/lib/nginx, which only root may create",
        f"    client_body_temp_path {d}/body;",
        f"    proxy_temp_path {d}/proxy;",
        f"    fastcgi_temp_path {d}/fastcgi;",
        f"    uwsgi_temp_path {d}/uwsgi;",
        f"    scgi_temp_path {d}/scgi;",
        "    # the listen backlog iomux-httpd asks for, SOMAXCONN (nginx's default: 511)",
        f"    server {{ listen 127.0.0.1:{port} backlog={somaxconn()}"
        f"{' reuseport' if reuseport else ''}; root {d}/www; }}",
        "}", ""])


def somaxconn():
    """The kernel's cap on a listen backlog, which a listen(SOMAXCONN) gets: 4,096 from Linux
    5.4 on."""
    try:
        with open("/proc/sys/net/core/somaxconn") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 4096


def h2o_conf(d, port, root_user):
    return "\n".join(
        (["user: root  # else it runs as nobody, who cannot read root's 0700 temporary "
          "directory"] if root_user else []) + [
        "num-threads: 1",
        f"pid-file: {d}/h2o.pid",
        f"error-log: {d}/h2o-error.log",
        "hosts:",
        "  default:",
        "    listen:",
        "      host: 127.0.0.1",
        f"      port: {port}",
        "    paths:",
        "      /:",
        f"        file.dir: {d}/www", ""])


def tail(d, name):
    """The last line of a log in directory d, or ""."""
    try:
        with open(f"{d}/{name}") as f:
            lines = f.read().strip().splitlines()
        return lines[-1] if lines else ""
    except OSError:
        return ""


def nginx_server(study, settings):
    """Debian's nginx as a server of a study (Server's spec), started with the nginx.conf
    that study.config() writes to study.dir, or None when nginx is not installed; settings:
    what its identity adds to "one worker, sendfile on, access log off"."""
    nginx = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")
    if not nginx:
        return None
    v = subprocess.run([nginx, "-v"], capture_output=True, text=True)
    return dict(kind="nginx", env={}, log=lambda: tail(study.dir, "nginx-error.log"),
                cmd=lambda port: [nginx, "-c", f"{study.dir}/nginx.conf", "-g", "daemon off;"],
                identity=(v.stderr.strip().split(": ", 1)[-1] or "nginx") + ", one worker, "
                f"sendfile on, access log off, {settings}")


class Study(Base):
    """The HTTP study of one bench/run: its servers, tools and cells, its runs and report."""
    NAME = "http"
    TITLE = "the HTTP study (Asio's CK HTTP Test, and keep-alive)"
    MODES = MODES

    def __init__(self, ctx):
        super().__init__(ctx)
        why = self.validate(ctx.args)
        if why:
            raise SystemExit(f"run: {why}")
        args, cfg, want = self.args, self.cfg, ctx.want
        backends = {h.plain(n).split("-", 1)[1]: d for n, d in ctx.main_drivers.items()
                    if d["family"] == "iomux"}
        self.cpus, self.want = args.echo_cpus, want
        self.nice = args.group_nice  # the server's, the tool's, strace's and perf's group
        self.reps = args.reps or cfg["reps"]
        self.seconds = args.seconds if args.seconds is not None else cfg["seconds"]
        self.warmup = args.warmup if args.warmup is not None else cfg["warmup"]
        self.dir = None  # the document root and the peers' files, made when the run starts
        self.root_user = os.geteuid() == 0
        self.servers, self.configs = {}, {}
        exe = os.path.join(args.build_abs, "iomux-httpd")
        for b in ("epoll", "uring"):
            name = f"iomux-{b}"
            d = backends.get(b)
            if not os.path.exists(exe):
                self.skipped.append((name, f"{exe} not built"))
            elif d is None or not d["available"]:
                self.skipped.append((name, d.get("reason", "unavailable") if d else
                                     f"iomux built without the {b} backend"))
            else:
                self.servers[name] = dict(
                    kind="iomux", backend=b, env={"IOMUX_BACKEND": b},
                    cmd=lambda port, exe=exe: [exe, "--root", f"{self.dir}/www", "--port", "0",
                                               "--bind", "127.0.0.1", "--max-requests",
                                               str(MAX_REQUESTS)],
                    identity=f"examples/iomux-httpd --max-requests {MAX_REQUESTS:,}, iomux "
                             f"backend {b}")
        nginx = nginx_server(self, f"keepalive_requests {MAX_REQUESTS:,}")
        if nginx:
            self.servers["nginx"] = nginx
        else:
            self.skipped.append(("nginx", "nginx not installed (apt-get install nginx-light)"))
        h2o = shutil.which("h2o")
        if h2o:
            v = subprocess.run([h2o, "--version"], capture_output=True, text=True)
            self.servers["h2o"] = dict(
                kind="h2o", env={}, log=lambda: self.tail("h2o-error.log"),
                cmd=lambda port: [h2o, "-c", f"{self.dir}/h2o.conf"],
                identity=(v.stdout.splitlines()[0] if v.stdout else "h2o") + ", num-threads 1, "
                "no access log, no limit of requests per connection")
        else:
            self.skipped.append(("h2o", "h2o not installed (apt-get install h2o)"))
        self.names = [n for n in SERVERS if n in self.servers and (not want or n in want)]
        self.shown = list(self.names)  # the tables' rows: a server that fails stays in them
        self.tools = {}
        for tool, t in TOOLS.items():
            path = shutil.which(t["exe"])
            if path:
                self.tools[tool] = path
            elif not any(s[0] == t["exe"] for s in self.skipped):
                self.skipped.append((t["exe"], f"{t['exe']} not installed (apt-get install "
                                     f"{t['package']}): no cell with "
                                     + " or ".join(k for k, u in TOOLS.items()
                                                   if u["exe"] == t["exe"])))
        if args.http_tools or args.http_files:
            tools = args.http_tools.split(",") if args.http_tools else list(TOOLS)
            files = args.http_files.split(",") if args.http_files else ["4k"]
            cells = [(t, f) for f in files for t in tools]
        else:
            cells = [(t, f) for f in (cfg["files"] or list(FILES)) for t in TOOLS] + [
                tuple(c) for c in cfg["more"]]
        self.cells = [c for c in cells if c[0] in self.tools]
        self.strace_cells = [tuple(c) for c in cfg["strace"] if tuple(c) in self.cells]
        self.untimed = {}  # (server, tool) -> why that server cannot run that tool's cells
        self.checked = {}  # server -> processes, as the pre-flight check saw them
        self.syscalls, self.syscalls_why = {}, None
        self.last_tool_cpu = 0.0
        self.profiles, self.profile_why = {}, None  # server -> perf report of PROFILE_CELL

    @staticmethod
    def validate(args):
        """Why --http-tools or --http-files is wrong, or None."""
        for opt, known in (("http_tools", TOOLS), ("http_files", FILES)):
            bad = [v for v in (getattr(args, opt) or "").split(",") if v and v not in known]
            if bad:
                return f"unknown --{opt.replace('_', '-')} {bad}; known: {', '.join(known)}"
        return None

    def config(self, kind, port):
        """Writes a peer's configuration for a run on that port; the report shows it."""
        text = (nginx_conf if kind == "nginx" else h2o_conf)(self.dir, port, self.root_user)
        with open(f"{self.dir}/{kind}.conf", "w") as f:
            f.write(text)
        self.configs[kind] = text.replace(str(port), "PORT").replace(self.dir, "DIR")

    def tail(self, name):
        """The last line of a peer's log in the temporary directory."""
        return tail(self.dir, name)

    def known(self):
        return set(SERVERS)

    def why_not(self):
        return h.group_nice_why(self.args) or (None if self.names else "no HTTP server can run")

    def banner(self):
        return (f"HTTP servers {', '.join(self.names)}; server on CPU {self.cpus[0]}, load "
                f"tool on CPU {self.cpus[1]}; cells: "
                + (", ".join(cell_name(c) for c in self.cells) or
                   "none (no load tool): the servers are only checked"))

    def reproduce(self, cells=None):
        """The command that runs the study again as it ran, or only the cells given."""
        cmd = ["bench/run", "--build", h.build_arg(self.args), "--study", "http"]
        if cells:
            cmd += ["--http-tools", ",".join(dict.fromkeys(c[0] for c in cells)),
                    "--http-files", ",".join(dict.fromkeys(c[1] for c in cells))]
        elif self.args.http_tools or self.args.http_files:
            cmd += (["--http-tools", self.args.http_tools] if self.args.http_tools else []) + (
                ["--http-files", self.args.http_files] if self.args.http_files else [])
        elif self.args.full or self.args.smoke:
            cmd += ["--full" if self.args.full else "--smoke"]
        cmd += ["--seconds", str(self.seconds), "--warmup", str(self.warmup), "--reps",
                str(self.reps), "--echo-cpus", ",".join(map(str, self.cpus))]
        if self.want:
            cmd += ["--drivers", ",".join(self.shown)]
        if self.nice:
            cmd += ["--group-nice", str(self.nice)]
        return shlex.join(cmd)

    # -----------------------------------------------------------------------------------
    # Running.

    def schedule(self):
        """The pre-flight check of every server, the timed runs, then the system calls;
        finish() removes the document root whatever happens."""
        cells = [Cell("http: pre-flight check of every server", 1.0 * len(self.names),
                      self.prepare)]
        for rep in range(self.reps):
            k = rep % len(self.names) if self.names else 0
            order = self.names[k:] + self.names[:k]  # rotate so no server always runs first
            for cell in self.cells:
                for name in order:
                    cells.append(Cell(f"http {cell_name(cell)} {name} (rep {rep + 1})",
                                      whole(self.seconds) + (whole(self.warmup) if
                                                             self.warmup > 0 else 0),
                                      lambda cell=cell, name=name, rep=rep: self.timed(
                                          name, cell, rep)))
        if self.mode == "smoke":
            return cells
        if not self.args.no_syscalls:
            for cell in self.strace_cells:
                for name in self.names:
                    cells.append(Cell(f"http strace {cell_name(cell)} {name}", 1.5,
                                      lambda cell=cell, name=name: self.traced_run(name, cell)))
        if PROFILE_CELL in self.cells:
            for name in self.names:
                if name.startswith("iomux-") or name == "h2o":
                    cells.append(Cell(f"http perf record {cell_name(PROFILE_CELL)} {name}", 4.0,
                                      lambda name=name: self.profile(name)))
        return cells

    def prepare(self):
        """The document root, and every server checked before any timing."""
        self.dir = tempfile.mkdtemp(prefix="iomux-bench-http-")
        os.mkdir(f"{self.dir}/www")
        self.files = {}
        for label, size in FILES.items():
            data = os.urandom(size)  # incompressible, and the same for every server
            with open(f"{self.dir}/www/{label}.bin", "wb") as f:
                f.write(data)
            self.files[label] = (size, hashlib.sha256(data).hexdigest())
        self.preflight()

    def timed(self, name, cell, rep):
        if name not in self.names or (name, cell[0]) in self.untimed:
            return  # failed its pre-flight check, or cannot run that tool
        r = self.run_one(name, cell, rep)
        if r:
            self.runner.records.append(r)

    def traced_run(self, name, cell):
        if not shutil.which("strace"):
            self.syscalls_why = "strace not installed"
        elif name in self.names and (name, cell[0]) not in self.untimed:
            self.count_calls(name, cell)

    def finish(self):
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def preflight(self):
        """Every server once before any timing: each file's exact bytes and Content-Length
        over one kept-alive HTTP/1.1 connection, and how it answers HTTP/1.0 keep-alive
        (ab -k). A server that fails is reported as failed and not timed."""
        for name in list(self.names):
            with Server(self, name) as srv:
                why = srv.error or check_files(srv.port, self.files)
                if not why:
                    self.checked[name] = srv.processes()
                    ab_k = any(c[0] == "ab-k" for c in self.cells) and http10_keep_alive(srv.port)
                    if ab_k:
                        self.untimed[(name, "ab-k")] = ab_k
                        h.log(f"  http: {name} not timed with ab -k: {ab_k}")
            why = why or srv.error
            if why:
                self.fail(name, ("check", "every file"), f"pre-flight check: {why}",
                          srv.shown_cmd())
                self.names.remove(name)

    def fail(self, name, cell, why, cmd):
        self.runner.failures.append((name, "http", cell[0], cell[1], why, cmd))
        h.end_line()
        h.log(f"  FAILED http {cell_name(cell)} {name}: {why}")

    def load(self, srv, cell, seconds):
        """Runs the cell's tool against the server for that many seconds: its command and
        (requests/s, requests, why it failed)."""
        tool, label = cell
        url = f"http://127.0.0.1:{srv.port}/{label}.bin"
        cmd = self.runner.pin(tool_cmd(self.tools[tool], tool, url, seconds), self.cpus[1])
        out = run_rusage(cmd, whole(seconds) + AB_TIMEOUT + 60, h.own_group(self.nice))
        if out is None:
            return cmd, (None, None, "did not finish in time")
        rps, done, why = parse_tool(tool, out.stdout)
        if out.returncode != 0:
            why = (out.stderr.strip() or out.stdout.strip() or
                   f"exit status {out.returncode}").splitlines()[-1]
        self.last_tool_cpu = out.cpu_s  # the tool's own CPU time (taskset execs it)
        return cmd, (rps, done, why)

    def run_one(self, name, cell, rep):
        """One timed run: a fresh server, the warm-up, the window. Returns the record, or
        None (failure recorded)."""
        result, cmd = None, []
        with Server(self, name) as srv:
            if not srv.error and self.warmup > 0:
                cmd, (_, _, why) = self.load(srv, cell, self.warmup)
                srv.error = why and f"warm-up: {why}"
            if not srv.error:
                c0, t0 = srv.cpu(), time.monotonic()
                cmd, (rps, done, why) = self.load(srv, cell, self.seconds)
                wall, c1 = time.monotonic() - t0, srv.cpu()
                cpu = sum(v - c0.get(k, 0) for k, v in c1.items()) / 1e9
                srv.error = why
                # The tool's share is over its whole run, which is the window (ab and wrk
                # start at once; h2load's connecting is a few ms).
                result = dict(study="http", transport=cell[0], n=cell[1], active=None,
                              timeouts=None, driver=name, rep=rep, rps=rps, requests=done,
                              cpu_us=cpu / done * 1e6 if done else None,
                              cpu_pct=cpu / wall * 100,
                              tool_pct=self.last_tool_cpu / wall * 100,
                              cmd=shlex.join(cmd))
        if srv.error:
            self.fail(name, cell, srv.error, srv.shown_cmd() + " & " + shlex.join(cmd))
            return None
        result["server_cmd"] = srv.shown_cmd()
        return result

    def count_calls(self, name, cell):
        """The server's system calls over a 1 s run of the cell without warm-up, counted by
        strace -c -f attached to the serving process once it is up (so that start-up and
        shutdown are left out): nginx's worker, every thread of the others."""
        path = f"{self.dir}/strace.txt"
        with Server(self, name) as srv:
            if srv.error:
                self.fail(name, cell, srv.error, srv.shown_cmd())
                return
            cmd, (_, done, why) = traced(self.runner, srv.serving_pid(), self.cpus[0], path,
                                         lambda: self.load(srv, cell, 1), self.nice)
        shown = (f"{srv.shown_cmd()} & {shlex.join(['strace', '-c', '-f', '-p', 'PID'])} & "
                 f"{shlex.join(cmd)}").replace(self.dir, "DIR")
        if why or srv.error or not os.path.exists(path):
            self.fail(name, cell, f"under strace: {why or srv.error or 'no count'}", shown)
            return
        calls = h.parse_strace(path)
        os.unlink(path)
        self.syscalls.setdefault(cell_name(cell), {})[name] = dict(
            requests=done, total=sum(calls.values()) / done, cmd=shown,
            calls={c: v / done for c, v in calls.items() if v / done >= 0.01})

    def profile(self, name):
        """Where the server spends its time in the profiled cell: `perf record -e cpu-clock`
        attached to every process of the server once it is up, over a run of the cell, then
        `perf report` by shared object and by symbol. Software clock samples (a virtual
        machine may have no hardware counters), without call graphs."""
        perf = shutil.which("perf")
        if not perf or name not in self.names or (name, PROFILE_CELL[0]) in self.untimed:
            self.profile_why = self.profile_why or (None if perf else
                                                    "perf not installed (linux-perf)")
            return
        path = f"{self.dir}/perf.data"
        seconds = max(2, whole(self.seconds))
        with Server(self, name) as srv:
            if srv.error:
                self.fail(name, PROFILE_CELL, srv.error, srv.shown_cmd())
                return
            pids = ",".join(map(str, session_pids(srv.pid)))
            pcmd = self.runner.pin([perf, "record", "-g", "-e", "cpu-clock", "-F", "4999", "-o",
                                    path, "-p", pids, "--", "sleep", str(seconds)],
                                   self.cpus[1])
            with tempfile.TemporaryFile() as err:
                rec = subprocess.Popen(pcmd, stdout=err, stderr=err,
                                       preexec_fn=h.own_group(self.nice))
                self.runner.live.add(rec)
                cmd, (_, done, why) = self.load(srv, PROFILE_CELL, seconds)
                try:
                    rec.wait(timeout=seconds + 30)
                except subprocess.TimeoutExpired:
                    rec.kill()
                    rec.wait()
                self.runner.live.discard(rec)
                err.seek(0)
                perr = err.read().decode(errors="replace").strip()
        shown = (f"{srv.shown_cmd()} & {shlex.join(pcmd).replace(pids, 'PIDS')} & "
                 f"{shlex.join(cmd)}").replace(self.dir, "DIR")
        if why or rec.returncode != 0 or not os.path.exists(path):
            self.profile_why = f"perf record failed: {why or perr.splitlines()[-1:] or '?'}"
            return
        rep = lambda sort: subprocess.run(
            [perf, "report", "-i", path, "--no-children", "--sort", sort, "--stdio", "-g",
             "none", "--percent-limit", "0.5"], capture_output=True, text=True).stdout
        dsos = parse_perf(rep("dso"))
        syms = parse_perf(rep("dso,sym"))
        calls = by_syscall(subprocess.run([perf, "script", "-i", path, "-F", "ip,sym"],
                                          capture_output=True, text=True).stdout)
        os.unlink(path)
        kernel = sum(p for k, p in dsos if k.startswith("[kernel"))
        self.profiles[name] = dict(cmd=shown, requests=done, dsos=dsos[:6], kernel=kernel,
                                   symbols=syms[:25], by_call=calls[:8],
                                   report="perf report -i perf.data --no-children --sort "
                                          "dso,sym --stdio -g none")

    # -----------------------------------------------------------------------------------
    # Statistics and the report.

    def tables(self):
        """{metric: {cell: {server: stats}}}: the median of every sample with the spread,
        and for each peer run in the cell the server's ratios to it, paired per repetition."""
        samples = {}
        for r in self.runner.records:
            if r.get("study") != "http":
                continue
            for m, *_ in METRICS:
                if r.get(m) is not None:
                    samples.setdefault(m, {}).setdefault((r["transport"], r["n"]), {}).setdefault(
                        r["driver"], {}).setdefault(r["rep"], []).append(r[m])
        t = {}
        for m, bycell in samples.items():
            for cell, bysrv in bycell.items():
                for name, byrep in bysrv.items():
                    pooled = [x for xs in byrep.values() for x in xs]
                    med = h.median(pooled)
                    q1, q3 = h.quartiles(pooled)
                    st = dict(median=med, spread=(q3 - q1) / med * 100 if med else 0,
                              samples=len(pooled))
                    for peer in PEERS:
                        if peer in bysrv and peer != name:
                            pairs = h.paired(byrep, bysrv[peer])
                            st[peer] = dict(h.ratio_stats(pairs), pairs=pairs)
                    t.setdefault(m, {}).setdefault(cell, {})[name] = st
        return t

    def failed(self, name, cell):
        """Whether the server failed the cell, or its check before any timing."""
        return any(f[0] == name and f[1] == "http" and (f[2], f[3]) in (
            cell, ("check", "every file")) for f in self.runner.failures)

    def table(self, t, metric, peer=None, mark=None):
        """Rows servers, columns cells: median ±IQR%, or with peer the paired ratios to it."""
        lines = ["| server | " + " | ".join(cell_name(c) for c in self.cells) + " |",
                 "|---" * (len(self.cells) + 1) + "|"]
        for name in self.shown:
            if name == peer:
                continue
            row = []
            for cell in self.cells:
                s = t.get(metric, {}).get(cell, {}).get(name)
                if s is None:
                    row.append("not timed" if (name, cell[0]) in self.untimed else
                               "failed" if self.failed(name, cell) else "—")
                elif peer is None:
                    row.append(f"{h.fmt_num(s['median'])} ±{s['spread']:.0f}%")
                elif s.get(peer, {}).get("ratio") is None:
                    row.append("—")
                else:
                    r = s[peer]
                    row.append(f"{r['ratio']:.2f}x ({r['rmin']:.2f}–{r['rmax']:.2f})"
                               + (" **!**" if mark and mark(name, cell, r) else ""))
            lines.append(f"| {name} | " + " | ".join(row) + " |")
        return "\n".join(lines)

    def limit(self, t, name, cell):
        """What limited a server's runs in a cell, from the medians of the two CPU shares:
        "server" (it used at least LIMIT_PCT of its CPU), "load tool", or "neither" (both
        waited: latency, or the machine); None when not measured."""
        sv = t.get("cpu_pct", {}).get(cell, {}).get(name)
        tl = t.get("tool_pct", {}).get(cell, {}).get(name)
        if not sv:
            return None
        if sv["median"] >= LIMIT_PCT:
            return "server"
        if tl and tl["median"] >= LIMIT_PCT:
            return "load tool"
        return "neither"

    def limits_md(self, t):
        if "cpu_pct" not in t:
            return []
        lines = ["### What limits each cell: the server's and the load tool's CPU shares", "",
                 f"Each side's on-CPU time over the window in % of its CPU (medians): the side "
                 f"at {LIMIT_PCT}% or more is what limits the cell (the server first); "
                 "\"neither\" means both waited. The targets against h2o count only the "
                 "keep-alive cells where both the iomux server and h2o were the limit; the "
                 "others are named in the target's list, not counted.", "",
                 "| server | " + " | ".join(cell_name(c) for c in self.cells) + " |",
                 "|---" * (len(self.cells) + 1) + "|"]
        for name in self.shown:
            row = []
            for cell in self.cells:
                sv = t.get("cpu_pct", {}).get(cell, {}).get(name)
                tl = t.get("tool_pct", {}).get(cell, {}).get(name)
                lim = self.limit(t, name, cell)
                row.append("—" if not sv else f"{lim}: server {sv['median']:.0f}%, tool "
                           + (f"{tl['median']:.0f}%" if tl else "—"))
            lines.append(f"| {name} | " + " | ".join(row) + " |")
        return lines + [""]

    def profiles_md(self, t):
        if not self.profiles and not self.profile_why:
            return []
        md = [f"### Where the servers spend their time ({cell_name(PROFILE_CELL)}, perf record)",
              "", "Software clock samples (`perf record -g -e cpu-clock`) of every process of "
              "the server, pinned as in the timed runs, over a run of the cell; the shares "
              "are of the server's samples. The kernel's share is the loopback TCP path that "
              "every server pays alike (a send also runs the client socket's receive, in the "
              "softirq on the sender's CPU); the rest is the server's own. The first table "
              "puts each sample in the system call it was in (the call chain's frame below "
              "`do_syscall_64`), in user space, or in the kernel outside a call, with the "
              "µs per request that share is of the server's median CPU per request in the "
              "timed runs of the cell.", ""]
        if self.profile_why:
            md += [f"Not profiled: {self.profile_why}.", ""]
        for name, p in self.profiles.items():
            dsos = ", ".join(f"{k} {v:.1f}%" for k, v in p["dsos"])
            md += [f"**{name}**: kernel {p['kernel']:.1f}% ({dsos}).", "", "```",
                   p["cmd"], p["report"], "```", ""]
            us = t.get("cpu_us", {}).get(PROFILE_CELL, {}).get(name, {}).get("median")
            if p.get("by_call"):
                md += ["| where | share | µs per request |", "|---|---:|---:|"]
                md += [f"| {k} | {v:.1f}% | " + (f"{v / 100 * us:.2f}" if us else "—") + " |"
                       for k, v in p["by_call"]]
                md.append("")
            md += ["| share | symbol |", "|---|---|"]
            md += [f"| {v:.2f}% | `{k}` |" for k, v in p["symbols"]]
            md.append("")
        return md

    def counted(self, t):
        """How many (iomux server, keep-alive cell) the targets against h2o counted."""
        return sum(1 for n in self.shown if n.startswith("iomux-") for c in self.cells
                   if TOOLS[c[0]]["keep"] and self.limit(t, n, c) == "server"
                   and self.limit(t, "h2o", c) == "server")

    def misses(self, t):
        """The target, for each iomux server: in every keep-alive cell at least TARGET_RPS
        times h2o's requests/s (paired) and less server CPU per request (medians); in every
        cell counted with strace, TARGET_FEWER_CALLS system calls per request fewer than
        nginx. Returns what missed, and what could not be checked."""
        missed, unchecked = [], []
        iomux = [n for n in self.shown if n.startswith("iomux-")]
        keep = [c for c in self.cells if TOOLS[c[0]]["keep"]]
        if "h2o" not in self.shown:
            unchecked.append("requests/s and CPU per request: h2o was not run")
            keep = []
        for name in iomux:
            for cell in keep:
                what = f"{name} {cell_name(cell)}"
                rps = t.get("rps", {}).get(cell, {})
                cpu = t.get("cpu_us", {}).get(cell, {})
                if name not in rps:
                    missed.append(f"{what}: not measured: " + (
                        self.untimed.get((name, cell[0])) or "failed"))
                    continue
                if "h2o" not in rps:
                    unchecked.append(f"{what}: h2o failed in this cell")
                    continue
                lims = {n: self.limit(t, n, cell) for n in (name, "h2o")}
                if any(v != "server" for v in lims.values()):
                    unchecked.append(f"{what}: not counted: limited by " + ", ".join(
                        f"{v or 'nothing measured'} ({n})" for n, v in lims.items()
                        if v != "server") + ", not by the server")
                    continue
                r = rps[name]["h2o"]
                if r["ratio"] < TARGET_RPS:
                    missed.append(f"{what}: requests/s {r['ratio']:.2f}x h2o's "
                                  f"({r['rmin']:.2f}–{r['rmax']:.2f}), under {TARGET_RPS}x")
                c = cpu.get(name, {}).get("h2o")
                if c and c.get("ratio") is not None and c["ratio"] > TARGET_CPU:
                    missed.append(f"{what}: server CPU per request {c['ratio']:.2f}x h2o's "
                                  f"({c['rmin']:.2f}–{c['rmax']:.2f}), over {TARGET_CPU}x")
        for cell in self.strace_cells:
            table = self.syscalls.get(cell_name(cell), {})
            for name in iomux:
                what = f"{name} {cell_name(cell)}"
                if "nginx" not in table:
                    unchecked.append(f"{what}: system calls: nginx not counted")
                elif name not in table:
                    missed.append(f"{what}: system calls not counted")
                elif table[name]["total"] > table["nginx"]["total"] - TARGET_FEWER_CALLS:
                    missed.append(f"{what}: {table[name]['total']:.2f} system calls per request "
                                  f"against nginx's {table['nginx']['total']:.2f}, not "
                                  f"{TARGET_FEWER_CALLS} fewer")
        return missed, unchecked

    def bars(self, path, title, panels):
        """A figure of grouped bars, one panel above the other: a group per cell, a bar per
        server in the colour it has in every plot. panels: (title, {server: {cell: value}},
        y label, log, [(y, line style)] drawn across). False if matplotlib is missing."""
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            from matplotlib.patches import Patch
        except ImportError:
            return False
        names = [n for n in self.shown if any(p[1].get(n) for p in panels)]
        width = 0.8 / max(len(names), 1)
        fig, axes = plt.subplots(len(panels), 1, squeeze=False,
                                 figsize=(max(6.4, 1.2 * len(self.cells) + 2), 3.9 * len(panels)))
        for ax, (sub, values, ylabel, log, lines) in zip(axes.flat, panels):
            for i, name in enumerate(names):
                pts = [(j + (i - (len(names) - 1) / 2) * width, values[name][c])
                       for j, c in enumerate(self.cells) if values.get(name, {}).get(c)]
                if pts:
                    ax.bar([p[0] for p in pts], [p[1] for p in pts], width * 0.9,
                           color=h.driver_style(name)[0], zorder=2)
            for y, style in lines:
                ax.axhline(y, color="#000000", linestyle=style, linewidth=0.9, alpha=0.7,
                           zorder=3)
            ax.set_yscale("log" if log else "linear")
            h.readable_ticks(ax, ax.yaxis, log)
            ax.set_xticks(range(len(self.cells)))
            ax.set_xticklabels([cell_name(c) for c in self.cells], fontsize=9)
            ax.tick_params(axis="y", which="both", labelsize=9)
            ax.set_ylabel(ylabel)
            ax.set_title(sub, fontsize=10.5)
            ax.grid(True, axis="y", which="major", alpha=0.35, zorder=0)
            ax.grid(True, axis="y", which="minor", alpha=0.12, zorder=0)
        fig.suptitle(title, fontsize=12.5)
        fig.tight_layout()
        fig.legend([Patch(color=h.driver_style(n)[0]) for n in names], names,
                   title="server", loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=9,
                   title_fontsize=9.5, frameon=False)
        fig.savefig(path, dpi=110, bbox_inches="tight", pad_inches=0.15)
        plt.close(fig)
        return True

    def report_md(self, out):
        """The report's section, and the target's misses as the run's end lists them."""
        t = self.tables()
        md = ["## Study 3: HTTP (Asio's CK HTTP Test, and keep-alive)", "",
              f"Each server pinned to CPU {self.cpus[0]} (all its processes and threads), "
              f"the load tool to CPU {self.cpus[1]}, over loopback TCP with {CONNECTIONS} "
              "concurrent connections; a fresh server for every run, a warm-up of "
              f"{whole(self.warmup) if self.warmup > 0 else 0} s with the same tool, then "
              f"{whole(self.seconds)} s timed, {self.reps} repetitions with the servers in "
              "rotating order. Columns are cells: a load tool and a file of random bytes "
              "(4k = 4,096 bytes, 64k = 65,536, 1m = 1,048,576). Requests/s are the tool's; "
              "the server's CPU time is the on-CPU time (schedstat) of every thread of every "
              "process of the server (nginx's master and worker, h2o and its helper) over the "
              "timed run, divided by the requests the tool completed. Before any timing every "
              "server served each file once over one kept-alive HTTP/1.1 connection, and its "
              "bytes (sha256) and Content-Length were checked. Requests per connection are "
              f"limited to {MAX_REQUESTS:,} alike: nginx's `keepalive_requests` and "
              "iomux-httpd's `--max-requests` (h2o has no such limit). Scheduling: "
              + h.group_nice_fact(self.args) + (" (`--group-nice`: the other sessions' work "
                                                "does not set the rate)." if self.nice else
                                                "."), "",
              "```", self.reproduce(), "```", "",
              "| server | what it is | processes (all counted) |", "|---|---|---|"]
        for name in self.shown:
            md.append(f"| {name} | {self.servers[name]['identity']} | "
                      f"{self.checked.get(name, 'failed its check')} |")
        md += ["", "| cell | the load, as run (PORT: the server's) | this cell alone |",
               "|---|---|---|"]
        for cell in self.cells:
            r = next((r for r in self.runner.records if r.get("study") == "http"
                      and (r["transport"], r["n"]) == cell), None)
            cmd = r["cmd"].replace(r["cmd"].rsplit(":", 1)[1].split("/")[0], "PORT") if r else "—"
            md.append(f"| {cell_name(cell)} | {TOOLS[cell[0]]['what']}: `{cmd}` | "
                      f"`{self.reproduce([cell])}` |")
        md.append("")
        for (name, tool), why in sorted(self.untimed.items()):
            md += [f"Not timed: {name} with {tool}: it {why}.", ""]
        mark = lambda name, cell, r: (name.startswith("iomux-") and TOOLS[cell[0]]["keep"]
                                      and r["ratio"] < TARGET_RPS)
        for metric, unit, title, better in METRICS:
            if metric not in t:
                continue
            md += [f"### {title} ({unit}" + (f", {better} is better)" if better else ")"), "",
                   self.table(t, metric), ""]
            for peer in PEERS if better else []:
                if peer in self.shown:
                    marked = metric == "rps" and peer == "h2o"
                    note = (f"; **!** marks an iomux server under {TARGET_RPS}x in a "
                            "keep-alive cell" if marked else "")
                    md += [f"Ratio to {peer}, paired within each repetition ({better} is "
                           f"better){note}:", "",
                           self.table(t, metric, peer, mark if marked else None), ""]

        def series(metric, field):
            out = {}
            for cell, bysrv in t.get(metric, {}).items():
                for name, s in bysrv.items():
                    v = s["median"] if field is None else s.get(field, {}).get("ratio")
                    if v:
                        out.setdefault(name, {})[cell] = v
            return out

        if "rps" in t and self.bars(
                os.path.join(out, "http.png"), "HTTP study: requests per second and the "
                "server's CPU time per request",
                [("Requests per second (higher is better)", series("rps", None),
                  "requests/s (log scale)", True, []),
                 ("Server CPU time per request (lower is better)", series("cpu_us", None),
                  "µs per request (log scale)", True, [])]):
            md += ["![HTTP](http.png)", ""]
        if "h2o" in self.shown and "rps" in t and self.bars(
                os.path.join(out, "http-ratios.png"), "HTTP study: each server against h2o, "
                "paired within each repetition",
                [(f"Requests/s over h2o's (higher is better; dashed: iomux's target, "
                  f"{TARGET_RPS}x)", series("rps", "h2o"), "ratio to h2o", False,
                  [(1.0, "-"), (TARGET_RPS, "--")]),
                 ("Server CPU per request over h2o's (lower is better)",
                  series("cpu_us", "h2o"), "ratio to h2o", False, [(1.0, "-")])]):
            md += ["![HTTP ratios](http-ratios.png)", ""]
        for cell, table in self.syscalls.items():
            calls = sorted({c for v in table.values() for c in v["calls"]})
            md += [f"### Server system calls per request ({cell})", "",
                   "Counted with `strace -c -f` attached to the serving process once it was "
                   "up (nginx's worker; every thread of the others), over a 1 s run of the "
                   "cell without warm-up, divided by the requests the tool completed; the "
                   "total counts every call, the columns leave out calls under 0.01 per "
                   "request. strace slows the server, so these runs complete fewer requests.",
                   "", "```", next(iter(table.values()))["cmd"], "```", "",
                   "| server | requests | total | " + " | ".join(calls) + " |",
                   "|---" * (len(calls) + 3) + "|"]
            for name in [n for n in self.shown if n in table]:
                v = table[name]
                md.append(f"| {name} | {v['requests']:,} | {v['total']:.2f} | " + " | ".join(
                    f"{v['calls'].get(c, 0):.2f}" for c in calls) + " |")
            md.append("")
        if self.syscalls_why:
            md += [f"System calls not counted: {self.syscalls_why}.", ""]
        md += self.limits_md(t)
        md += self.profiles_md(t)
        missed, unchecked = self.misses(t)
        md += ["### iomux-httpd against its target", "",
               f"Target: `iomux-epoll` and `iomux-uring` each at least {TARGET_RPS}x h2o's "
               f"requests/s and at most {TARGET_CPU}x its server CPU per request (the medians "
               "of the paired ratios) in every keep-alive cell where the server is the limit "
               f"(both it and h2o used at least {LIMIT_PCT}% of their CPU; the others are "
               "named, not counted), and at least "
               f"{TARGET_FEWER_CALLS} system calls per request fewer than nginx in every cell "
               "counted with strace.", ""]
        counted = self.counted(t)
        md += [f"- missed: {m}" for m in missed] or (
            [f"- met in every counted cell ({counted})"] if counted else
            ["- no keep-alive cell was limited by the servers: nothing counted"])
        md += [f"- not checked: {m}" for m in unchecked]
        md.append("")
        if self.configs:
            md += ["### The peers' configurations, as generated (DIR: a temporary directory, "
                   "removed after the run)", ""]
            for kind, text in sorted(self.configs.items()):
                md += [f"`{kind}.conf`:", "", "```", text.rstrip(), "```", ""]
        return md, [f"http {m}" for m in missed]

    def print_tables(self):
        t = self.tables()
        for metric, unit, title, better in METRICS[:2]:
            if metric in t:
                h.log(f"\nhttp {title[:1].lower() + title[1:]} ({unit}; columns: tool "
                           "and file)")
                h.log(self.table(t, metric))
                if "h2o" in self.shown:
                    h.log(f"ratio to h2o, paired ({better} is better):")
                    h.log(self.table(t, metric, "h2o"))
        for cell, table in self.syscalls.items():
            h.log(f"\nhttp server system calls per request ({cell}): " + ", ".join(
                f"{n} {table[n]['total']:.2f}" for n in self.shown if n in table))

    def smoke_summary(self):
        runs = [r for r in self.runner.records if r.get("study") == "http"]
        lines = [f"http: {len(self.checked)} servers checked ({', '.join(self.checked) or 'none'}):"
                 " every file's bytes and Content-Length over one kept-alive connection; "
                 f"{len(runs)} timed runs, {sum(r['requests'] for r in runs):,} requests"
                 + (f" ({', '.join(cell_name(c) for c in self.cells)})" if self.cells else
                    ": no load tool installed")]
        lines += [f"http: {n} not timed with {tool}: {why}"
                  for (n, tool), why in sorted(self.untimed.items())]
        return lines

    def facts(self):
        return [("http scheduling", h.group_nice_fact(self.args))]

    def json(self):
        return dict(group_nice=self.nice,
                    servers={n: dict(identity=self.servers[n]["identity"],
                                     processes=self.checked.get(n)) for n in self.shown},
                    cells=[list(c) for c in self.cells], seconds=whole(self.seconds),
                    warmup=whole(self.warmup) if self.warmup > 0 else 0, reps=self.reps,
                    max_requests=MAX_REQUESTS, connections=CONNECTIONS,
                    untimed={f"{n} {tool}": why for (n, tool), why in self.untimed.items()},
                    configs=self.configs, syscalls=self.syscalls, skipped=self.skipped,
                    profiles=self.profiles, limit_pct=LIMIT_PCT)
