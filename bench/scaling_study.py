# SPDX-License-Identifier: MIT
"""The CPU-scalability study, run by bench/run (bench/README.md, "The scaling study"): the last
test of Asio's performance project (docs/studies.md, study 3), one io_service run by N threads
against N io_services, one per CPU, re-run for N = 1 .. the CPUs this process may use.

Echo throughput (Asio's echo test, blocks of 16 KB and 128 B) and HTTP keep-alive requests/s
(wrk) for each N, with every server in the same run:
  - iomux: examples/echo-server and iomux-httpd with --threads N --pin, three ways of sharing
    the port: every loop listening (SO_REUSEPORT, the kernel's hash), --steer cpu (each
    connection to the loop on the CPU that received it, SO_INCOMING_CPU), and --acceptor (loop
    0 accepts and hands the connections round robin to the loops through channels);
    --full adds --steer bpf and the io_uring backend;
  - Boost.Asio both ways: one io_context run by N threads (echo-asio --threads N), and an
    io_context per thread (echo-asio-contexts);
  - libuv, a loop per thread on its own SO_REUSEPORT socket;
  - the floor, level-triggered epoll written by hand, a thread per loop;
  - nginx (HTTP) with N workers, each bound to a CPU, with a listening socket each.

The server runs on the first N CPUs of the set, the load (echo-client --threads, wrk -t) on
the others, a thread per CPU up to two per server loop; when no CPU is left it shares all of
them. Each run reports the server's and the load's CPU use, so that the report can say where
the load generator (or the machine) is the limit, and what each loop (thread, worker) did:
the connections and bytes (requests) it printed at exit, and its on-CPU time.

Servers start and stop through http_study.Server (one session per server, pinned, checked,
SIGTERM and a clean exit required), and nginx's configuration is http_study.nginx_conf's.
The shared helpers come from benchlib.py."""
import hashlib
import json
import os
import re
import resource
import shlex
import shutil
import subprocess
import tempfile
import time

import benchlib as h
import http_study
from benchlib import Cell, Study as Base

# Every server the study knows: (protocol, name) -> what it is. Which run in which mode is
# MODES' business ("more" adds the full-only ones).
MODES = {
    "smoke": dict(echo=[(16384, 10)], http=[("wrk", "4k")], seconds=1, warmup=0, reps=1),
    "quick": dict(echo=[(128, 100)], http=[("wrk", "4k")], seconds=1,
                  warmup=0.3, reps=1),
    "full": dict(echo=[(16384, 10), (16384, 100), (128, 100), (128, 1000)],
                 http=[("wrk", "4k")], seconds=5, warmup=1, reps=5, more=True),
}
ECHO_SERVERS = ["iomux", "iomux-steer", "iomux-acceptor", "iomux-bpf", "iomux-uring",
                "raw-epoll", "libuv", "asio", "asio-contexts"]
HTTP_SERVERS = ["iomux", "iomux-steer", "iomux-acceptor", "iomux-bpf", "nginx"]
FULL_ONLY = ["iomux-bpf", "iomux-uring"]
SERVERS = sorted(set(ECHO_SERVERS + HTTP_SERVERS))  # what --drivers may name
FLOOR = "raw-epoll"
TARGET_SCALING = 1.8  # iomux at N = 2 over N = 1, where the load is not the limit
TARGET_N = 2
RIVALS = ["asio", "libuv"]  # iomux at N = 2 must be ahead of both (echo)
LOAD_LIMIT = 0.9  # the load (or the machine) is the limit above this share of its CPUs
HTTP_CONNECTIONS = 100
HTTP_FILE = "4k"
ECHO_IOMUX_MODES = {"iomux": [], "iomux-steer": ["--steer", "cpu"],
                    "iomux-acceptor": ["--acceptor"], "iomux-bpf": ["--steer", "bpf"],
                    "iomux-uring": []}
LOOP_LINE = re.compile(r"(?:loop|thread) (\d+)(?: \(cpu (\d+)\))?: (\d+) (connections|requests)"
                       r"(?:, (\d+) bytes echoed)?")


def cell_name(cell):
    """('echo', 16384, 100) -> 'echo 16 KB, 100 sessions'; ('http', 'wrk', '4k') -> ..."""
    if cell[0] == "echo":
        size = f"{cell[1] // 1024} KB" if cell[1] >= 1024 else f"{cell[1]} B"
        return f"echo {size}, {cell[2]:,} sessions"
    return f"HTTP {cell[1]} {cell[2]}, {HTTP_CONNECTIONS} connections"


def cell_key(cell):
    return "/".join(str(c) for c in cell)


def shares(values):
    """[a, b, ...] -> 'a%/b%/...' of their sum, or '—'."""
    total = sum(values)
    return "/".join(f"{v / total * 100:.0f}" for v in values) + " %" if total else "—"


class Proc(http_study.Server):
    """http_study.Server, which also starts the echo servers: those print 'listening on
    127.0.0.1:PORT (IDENTITY)' and are checked for the backend they name."""

    def start(self):
        if self.spec["kind"] != "echo":
            return super().start()
        line = h.read_line(self.proc, 10)
        if line is None or not line.startswith("listening on 127.0.0.1:"):
            return f"no 'listening on' line within 10 s: {self.stderr() or line}"
        self.port = int(line.split(":")[1].split()[0])
        if self.spec.get("expect") and self.spec["expect"] not in line:
            return f"wrong backend: '{line}', expected {self.spec['expect']}"
        want = {"uring": "anon_inode:[io_uring]", "epoll": "anon_inode:[eventpoll]"}.get(
            self.spec.get("backend"))
        if want and want not in h.fd_kinds(self.pid):
            return f"holds no {want}: not the mechanism it claims"
        return None


class Study(Base):
    """The scaling study of one bench/run."""
    NAME = "scaling"
    TITLE = "the scaling study (Asio's CPU-scalability test)"
    MODES = MODES

    def __init__(self, ctx):
        super().__init__(ctx)
        args, cfg, want = self.args, self.cfg, ctx.want
        backends = {h.plain(n).split("-", 1)[1]: d for n, d in ctx.main_drivers.items()
                    if d["family"] == "iomux"}
        # also count each echo server's system calls
        self.strace = self.mode != "smoke" and not args.no_syscalls
        self.reps = args.reps or cfg["reps"]
        self.seconds = args.seconds if args.seconds is not None else cfg["seconds"]
        self.warmup = args.warmup if args.warmup is not None else cfg["warmup"]
        self.allowed = sorted(os.sched_getaffinity(0))
        ns = ([int(v) for v in args.scaling_n.split(",")] if args.scaling_n else
              list(range(1, len(self.allowed) + 1)))
        self.ns = [n for n in ns if 1 <= n <= len(self.allowed)]
        self.root_user = os.geteuid() == 0
        self.dir, self.servers, self.cpus = None, {}, None
        self.configs, self.identity = {}, {}
        build, bench = args.build_abs, os.path.join(args.build_abs, "bench")
        more = cfg.get("more", False)
        self.echo_names, self.http_names = [], []
        # iomux's echo server and HTTP server, on the backends the build opens.
        ok = {b for b, d in backends.items() if d["available"]}
        if "epoll" not in ok:
            self.skipped.append(("scaling iomux", "the build's epoll backend does not open"))
        exe = os.path.join(build, "echo-server")
        for name in ECHO_SERVERS[:5]:
            b = "uring" if name == "iomux-uring" else "epoll"
            if (name in FULL_ONLY and not more) or b not in ok:
                continue
            if not os.path.exists(exe):
                self.skipped.append((f"scaling echo {name}", f"{exe} not built"))
                continue
            self.echo_names.append(name)
            self.identity[("echo", name)] = " ".join(
                ["examples/echo-server --threads N --pin --timeout 0"] + ECHO_IOMUX_MODES[name]) + (
                f", iomux backend {b}")
        httpd = os.path.join(build, "iomux-httpd")
        for name in HTTP_SERVERS[:4]:
            if (name in FULL_ONLY and not more) or "epoll" not in ok:
                continue
            if not os.path.exists(httpd):
                self.skipped.append((f"scaling http {name}", f"{httpd} not built"))
                continue
            self.http_names.append(name)
            self.identity[("http", name)] = " ".join(
                ["examples/iomux-httpd --threads N --pin"] + ECHO_IOMUX_MODES[name] +
                [f"--max-requests {http_study.MAX_REQUESTS:,}, iomux backend epoll"])
        # The peers' echo servers: found by the manifest, checked with --identify.
        manifest = os.path.join(bench, "echo.txt")
        peers = {}
        for line in open(manifest) if os.path.exists(manifest) else []:
            parts = line.rstrip("\n").split(" ", 2)
            if parts[0] in ("built", "scaling-built") and len(parts) == 3:
                peers[parts[1]] = os.path.join(bench, parts[2])
            elif parts[0] in ("skipped", "scaling-skipped") and len(parts) == 3 and \
                    parts[1] in ECHO_SERVERS:
                self.skipped.append((f"scaling echo {parts[1]}", parts[2]))
        self.peer_exe = {}
        for name in ECHO_SERVERS[5:]:
            if name not in peers:
                continue
            out = subprocess.run([peers[name], "--identify"], capture_output=True, text=True)
            if out.returncode != 0:
                self.skipped.append((f"scaling echo {name}", "does not reach the library it "
                                     f"claims: {(out.stdout + out.stderr).strip()}"))
                continue
            self.peer_exe[name] = peers[name]
            self.identity[("echo", name)] = out.stdout.strip()
            self.echo_names.append(name)
        self.client = os.path.join(bench, "echo-client")
        if not os.path.exists(self.client):
            self.skipped.append(("scaling echo", f"{self.client} not built"))
            self.echo_names = []
        nginx = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/sbin")
        if nginx:
            v = subprocess.run([nginx, "-v"], capture_output=True, text=True)
            self.nginx = nginx
            self.http_names.append("nginx")
            self.identity[("http", "nginx")] = (
                (v.stderr.strip().split(": ", 1)[-1] or "nginx") + ", N workers bound to the "
                "server's CPUs (worker_cpu_affinity), a listening socket each (reuseport), "
                f"sendfile on, access log off, keepalive_requests {http_study.MAX_REQUESTS:,}")
        else:
            self.skipped.append(("scaling http nginx", "nginx not installed"))
        self.wrk_exe = shutil.which("wrk")
        if not self.wrk_exe:
            self.skipped.append(("scaling http", "wrk not installed (apt-get install wrk)"))
            self.http_names = []
        if want:
            self.echo_names = [n for n in self.echo_names if n in want]
            self.http_names = [n for n in self.http_names if n in want]
        self.cells = ([("echo", b, s) for b, s in cfg["echo"]] if self.echo_names else []) + (
            [("http", t, f) for t, f in cfg["http"]] if self.http_names else [])
        self.checked = {}  # (proto, name, n) -> the processes (and threads) the run saw
        self.syscalls, self.syscalls_why = {}, None  # {n: {server: per echo}}

    def names(self, cell):
        return self.echo_names if cell[0] == "echo" else self.http_names

    def known(self):
        return set(SERVERS)

    def why_not(self):
        return None if self.cells and self.ns else "no server or no N can run"

    def banner(self):
        return (f"scaling: N = {', '.join(map(str, self.ns))} loops; echo servers "
                f"{', '.join(self.echo_names) or 'none'}; HTTP servers "
                f"{', '.join(self.http_names) or 'none'}")

    def reproduce(self):
        cmd = ["bench/run", "--build", h.build_arg(self.args), "--study", "scaling"]
        cmd += h.mode_arg(self.args)
        cmd += ["--scaling-n", ",".join(map(str, self.ns)), "--seconds", str(self.seconds),
                "--warmup", str(self.warmup), "--reps", str(self.reps)]
        if self.args.drivers:
            cmd += ["--drivers", self.args.drivers]
        return shlex.join(cmd)

    # -----------------------------------------------------------------------------------
    # Where things run.

    def layout(self, n):
        """(server CPUs, load CPUs, apart): the first n CPUs serve; the load gets the others,
        up to two per server loop, or, when none is left, shares them all."""
        server, rest = self.allowed[:n], self.allowed[n:]
        if rest:
            return server, rest[:2 * n], True
        return server, list(self.allowed), False

    def specs(self, n, cell):
        """{name: spec for http_study.Server} of the cell's servers with n loops."""
        specs = {}
        if cell[0] == "echo":
            block, sessions = cell[1], cell[2]
            pool = max(4096, 2 * sessions)
            for name in self.echo_names:
                if name.startswith("iomux"):
                    b = "uring" if name == "iomux-uring" else "epoll"
                    exe = os.path.join(self.args.build_abs, "echo-server")
                    specs[name] = dict(
                        kind="echo", backend=b, expect=f"(backend {b})",
                        env={"IOMUX_BACKEND": b},
                        cmd=lambda port, exe=exe, name=name, pool=pool: [
                            exe, "--port", "0", "--buffer", str(block), "--pool", str(pool),
                            "--threads", str(n), "--pin", "--timeout", "0"]  # as the peers
                        + ECHO_IOMUX_MODES[name])
                else:
                    specs[name] = dict(
                        kind="echo", backend="epoll", env={},
                        cmd=lambda port, exe=self.peer_exe[name]: [
                            exe, "--port", "0", "--buffer", str(block), "--threads", str(n),
                            "--pin"])
            return specs
        for name in self.http_names:
            if name == "nginx":
                specs[name] = dict(kind="nginx", env={}, workers=n,
                                   log=lambda: self.tail("nginx-error.log"),
                                   cmd=lambda port: [self.nginx, "-c", f"{self.dir}/nginx.conf",
                                                     "-g", "daemon off;"])
            else:
                exe = os.path.join(self.args.build_abs, "iomux-httpd")
                specs[name] = dict(
                    kind="iomux", backend="epoll", env={"IOMUX_BACKEND": "epoll"},
                    cmd=lambda port, exe=exe, name=name: [
                        exe, "--root", f"{self.dir}/www", "--port", "0", "--bind", "127.0.0.1",
                        "--max-requests", str(http_study.MAX_REQUESTS), "--threads", str(n),
                        "--pin"] + ECHO_IOMUX_MODES[name])
        return specs

    def config(self, kind, port):
        """What http_study.Server asks of a server that needs a port first: nginx's file."""
        if kind != "nginx":
            return
        n, cpus = self.current
        text = http_study.nginx_conf(self.dir, port, self.root_user, workers=n, cpus=cpus,
                                     reuseport=True)
        with open(f"{self.dir}/nginx.conf", "w") as f:
            f.write(text)
        self.configs[f"nginx, N = {n}"] = text.replace(str(port), "PORT").replace(self.dir,
                                                                                    "DIR")

    tail = http_study.Study.tail  # the last line of a log in self.dir

    # -----------------------------------------------------------------------------------
    # Running.

    def schedule(self):
        """The timed runs, then (self.strace) the system calls of each echo server at each N
        in the first echo cell; finish() removes the temporary directory."""
        cells = [Cell("scaling: the document root", 0.1, self.prepare)]
        run = self.seconds + self.warmup + 0.4
        for rep in range(self.reps):
            for n in self.ns:
                for cell in self.cells:
                    names = self.names(cell)
                    k = (rep + n) % len(names)
                    for name in names[k:] + names[:k]:  # no server always first
                        cells.append(Cell(f"scaling N={n} {cell_name(cell)} {name} "
                                          f"(rep {rep + 1})", run,
                                          lambda name=name, n=n, cell=cell, rep=rep:
                                          self.timed(name, n, cell, rep)))
        echo = [c for c in self.cells if c[0] == "echo"]
        if self.strace and echo:
            for n in self.ns:
                for name in self.echo_names:
                    cells.append(Cell(f"scaling strace N={n} {cell_name(echo[0])} {name}", 1.2,
                                      lambda name=name, n=n: self.traced(name, n, echo[0])))
        return cells

    def prepare(self):
        self.dir = tempfile.mkdtemp(prefix="iomux-bench-scaling-")
        os.mkdir(f"{self.dir}/www")
        data = os.urandom(http_study.FILES[HTTP_FILE])
        with open(f"{self.dir}/www/{HTTP_FILE}.bin", "wb") as f:
            f.write(data)
        self.files = {HTTP_FILE: (len(data), hashlib.sha256(data).hexdigest())}

    def timed(self, name, n, cell, rep):
        r = self.run_one(name, n, cell, rep)
        if r:
            self.runner.records.append(r)

    def traced(self, name, n, cell):
        if not shutil.which("strace"):
            self.syscalls_why = "strace not installed"
        else:
            self.count_calls(name, n, cell)

    def finish(self):
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def count_calls(self, name, n, cell):
        """The server's system calls over a 1 s run of the cell without warm-up, counted by
        strace -c -f attached to every thread once it is up, per echo (futex apart: the
        calls of threads that wait for one another)."""
        server_cpus, load_cpus, _ = self.layout(n)
        self.servers = self.specs(n, cell)
        self.current = (n, server_cpus)
        self.cpus = (",".join(map(str, server_cpus)), ",".join(map(str, load_cpus)))
        path = f"{self.dir}/strace.txt"
        cmd, result, why = [], None, None
        with Proc(self, name) as srv:
            if srv.error:
                self.fail(name, n, cell, f"strace run: {srv.error}", srv.shown_cmd())
                return
            saved = (self.seconds, self.warmup)
            self.seconds, self.warmup = 1, 0
            try:
                cmd, result, why = http_study.traced(
                    self.runner, srv.pid, self.cpus[0], path,
                    lambda: self.echo_load(srv, cell, load_cpus))
            finally:
                self.seconds, self.warmup = saved
            echoes = None
            if result:
                echoes = result["echoes_total"]
        if why or srv.error or not echoes or not os.path.exists(path):
            self.fail(name, n, cell, f"under strace: {why or srv.error or 'no count'}",
                      srv.shown_cmd() + " & " + shlex.join(cmd))
            return
        calls = h.parse_strace(path)
        os.unlink(path)
        self.syscalls.setdefault(n, {})[name] = dict(
            echoes=echoes, total=sum(calls.values()) / echoes,
            futex=calls.get("futex", 0) / echoes,
            calls={c: v / echoes for c, v in calls.items() if v / echoes >= 0.01})

    def fail(self, name, n, cell, why, cmd):
        self.runner.failures.append((name, "scaling", f"N={n}", cell_name(cell), why, cmd))
        h.end_line()
        h.log(f"  FAILED scaling N={n} {cell_name(cell)} {name}: {why}")

    def run_one(self, name, n, cell, rep):
        """One timed run: a fresh server with n loops on its CPUs, the load on the others.
        Returns the record, or None (failure recorded)."""
        server_cpus, load_cpus, apart = self.layout(n)
        self.servers = self.specs(n, cell)
        self.current = (n, server_cpus)
        # http_study.Server pins to self.cpus[0] (taskset -c takes a list)
        self.cpus = (",".join(map(str, server_cpus)), ",".join(map(str, load_cpus)))
        result, cmd = None, []
        with Proc(self, name) as srv:
            if not srv.error and cell[0] == "http" and (cell[0], name, n) not in self.checked:
                why = http_study.check_files(srv.port, self.files)
                srv.error = why and f"check: {why}"
            if not srv.error and (cell[0], name, n) not in self.checked:
                self.checked[(cell[0], name, n)] = srv.processes()
            if not srv.error:
                t0 = http_study.tasks_ns(http_study.session_pids(srv.pid))
                if cell[0] == "echo":
                    cmd, result, srv.error = self.echo_load(srv, cell, load_cpus)
                else:
                    cmd, result, srv.error = self.http_load(srv, cell, load_cpus)
                t1 = http_study.tasks_ns(http_study.session_pids(srv.pid))
                if result:
                    result["thread_ns"] = sorted((v - t0.get(k, 0) for k, v in t1.items()),
                                                 reverse=True)
        shown = srv.shown_cmd() + " & " + shlex.join(cmd)
        if srv.error:
            self.fail(name, n, cell, srv.error, shown)
            return None
        loops = [(int(m.group(1)), int(m.group(2)) if m.group(2) else None, int(m.group(3)),
                  int(m.group(5)) if m.group(5) else int(m.group(3)))
                 for m in LOOP_LINE.finditer(getattr(srv, "err_text", ""))]
        why = self.check_loops(name, n, cell, loops, result)
        if why:
            self.fail(name, n, cell, why, shown)
            return None
        if result.get("server_cpu_pct"):  # what one CPU-second of the server moves
            result["per_cpu"] = result["rate"] / (result["server_cpu_pct"] / 100)
        result.update(study="scaling", proto=cell[0], cell=cell_key(cell), n=n, driver=name,
                      rep=rep, server_cpus=server_cpus, load_cpus=load_cpus, apart=apart,
                      loops=loops, cmd=shlex.join(cmd), server_cmd=srv.shown_cmd(),
                      transport=cell[0], active=None, timeouts=None)
        return result

    def check_loops(self, name, n, cell, loops, result):
        """What the servers said at exit, against what the load did: None or why it is
        wrong. The peers and iomux print a line per loop (thread) with several loops."""
        if name == "nginx":
            return None  # nginx says nothing per worker: its workers' CPU time tells
        if len(loops) != n:
            return f"{len(loops)} per-loop lines at exit, expected {n}"
        if cell[0] == "echo":
            # At least the load's: on a shared machine another program's connect to a port it
            # believes closed can land on a server's fresh port 0 now and then.
            conns = sum(l[2] for l in loops)
            if conns < cell[2]:
                return f"the loops served {conns} connections, the load opened {cell[2]}"
        if cell[0] == "http":
            answered = sum(l[2] for l in loops)
            done = result.get("requests_all", result["requests"])
            # requests in flight when wrk stopped are answered too; the check's own
            if not done <= answered <= done + 2 * HTTP_CONNECTIONS + len(self.files) + 1:
                return f"the loops answered {answered:,} requests, wrk completed {done:,}"
        return None

    def echo_load(self, srv, cell, load_cpus):
        cmd = self.runner.pin([
            self.client, "--port", str(srv.port), "--sessions", str(cell[2]), "--block",
            str(cell[1]), "--seconds", str(self.seconds), "--warmup", str(self.warmup),
            "--server-pid", str(srv.pid), "--threads", str(len(load_cpus)), "--cpus",
            ",".join(map(str, load_cpus))], ",".join(map(str, load_cpus)))
        try:
            out = subprocess.run(cmd, capture_output=True, text=True,
                                 timeout=self.seconds + self.warmup + 120)
        except subprocess.TimeoutExpired:
            return cmd, None, "the load did not finish in time"
        result = None
        for line in out.stdout.splitlines():
            if line.startswith("RESULT "):
                result = json.loads(line[7:])
        if out.returncode != 0 or result is None:
            fails = [l for l in out.stdout.splitlines() if l.startswith("FAIL")]
            return cmd, None, "client: " + (fails[-1] if fails else (
                out.stderr.strip() or f"exit status {out.returncode}").splitlines()[-1])
        return cmd, dict(rate=result["mbps"], server_cpu_pct=result.get("server_cpu_pct"),
                         client_cpu_pct=result["client_cpu_pct"], idle=result["idle_sessions"],
                         echoes_total=result["echoes_total"],
                         min_session=result["min_session_echoes"],
                         max_session=result["max_session_echoes"]), None

    def wrk(self, srv, cell, load_cpus, seconds):
        url = f"http://127.0.0.1:{srv.port}/{cell[2]}.bin"
        cmd = self.runner.pin([self.wrk_exe, f"-t{len(load_cpus)}", f"-c{HTTP_CONNECTIONS}",
                               f"-d{http_study.whole(seconds)}s", url],
                              ",".join(map(str, load_cpus)))
        try:
            out = subprocess.run(cmd, capture_output=True, text=True,
                                 timeout=http_study.whole(seconds) + 60)
        except subprocess.TimeoutExpired:
            return cmd, (None, None, "wrk did not finish in time")
        rps, done, why = http_study.parse_tool("wrk", out.stdout)
        if out.returncode != 0:
            why = (out.stderr.strip() or f"exit status {out.returncode}").splitlines()[-1]
        return cmd, (rps, done, why)

    def http_load(self, srv, cell, load_cpus):
        warm_done = 0
        if self.warmup > 0:
            cmd, (_, warm_done, why) = self.wrk(srv, cell, load_cpus, self.warmup)
            if why:
                return cmd, None, f"warm-up: {why}"
        c0, ru0, t0 = srv.cpu(), resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
        cmd, (rps, done, why) = self.wrk(srv, cell, load_cpus, self.seconds)
        wall = time.monotonic() - t0
        c1, ru1 = srv.cpu(), resource.getrusage(resource.RUSAGE_CHILDREN)
        if why:
            return cmd, None, why
        cpu = sum(v - c0.get(k, 0) for k, v in c1.items()) / 1e9
        load = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        return cmd, dict(rate=rps, requests=done, requests_all=done + (warm_done or 0),
                         server_cpu_pct=cpu / wall * 100, client_cpu_pct=load / wall * 100), None

    # -----------------------------------------------------------------------------------
    # Statistics and the report.

    def samples(self):
        """{(cell key, name, n): {rep: [record]}}"""
        out = {}
        for r in self.runner.records:
            if r.get("study") == "scaling":
                out.setdefault((r["cell"], r["driver"], r["n"]), {}).setdefault(
                    r["rep"], []).append(r)
        return out

    def stats(self, byrep, field="rate"):
        vals = [r[field] for rs in byrep.values() for r in rs if r.get(field) is not None]
        if not vals:
            return None
        med = h.median(vals)
        q1, q3 = h.quartiles(vals)
        return dict(median=med, spread=(q3 - q1) / med * 100 if med else 0, n=len(vals))

    def ratio(self, a, b, field="rate"):
        """Paired over repetitions: {rep: [records]} a over b, by `field`."""
        pa = {rep: [r[field] for r in rs if r.get(field)] for rep, rs in a.items()}
        pb = {rep: [r[field] for r in rs if r.get(field)] for rep, rs in b.items()}
        pairs = h.paired(pa, pb)
        return h.ratio_stats(pairs) if pairs else None

    def load_note(self, byrep, n):
        """Whether the load generator (or, sharing CPUs, the machine) was the limit: (limited,
        words)."""
        server_cpus, load_cpus, apart = self.layout(n)
        rs = [r for rs in byrep.values() for r in rs]
        if not rs:
            return False, "—"
        load = h.median([r["client_cpu_pct"] for r in rs])
        srv = h.median([r["server_cpu_pct"] or 0 for r in rs])
        if apart:
            limited = load >= LOAD_LIMIT * 100 * len(load_cpus)
            return limited, (f"load {load:.0f}% of {len(load_cpus) * 100}%" +
                             (" (the limit)" if limited else ""))
        limited = load + srv >= LOAD_LIMIT * 100 * len(self.allowed)
        return limited, (f"shared CPUs: server {srv:.0f}% + load {load:.0f}% of "
                         f"{len(self.allowed) * 100}%" + (" (full)" if limited else ""))

    def unit(self, cell):
        return "MB/s" if cell[0] == "echo" else "requests/s"

    def table(self, cell, smp, field="rate"):
        names = self.names(cell)
        top = max(self.ns)
        head = ["server"] + [f"N = {n}" for n in self.ns] + (
            [f"N = {top} / N = 1"] if top > 1 and 1 in self.ns else [])
        lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
        for name in names:
            row = [name]
            for n in self.ns:
                s = self.stats(smp.get((cell_key(cell), name, n), {}), field)
                row.append(f"{h.fmt_num(s['median'])} ±{s['spread']:.0f}%" if s else
                           "failed" if self.failed(name, n, cell) else "—")
            if len(head) > len(self.ns) + 1:
                r = self.ratio(smp.get((cell_key(cell), name, top), {}),
                               smp.get((cell_key(cell), name, 1), {}), field)
                row.append(f"{r['ratio']:.2f}x ({r['rmin']:.2f}–{r['rmax']:.2f})" if r else "—")
            lines.append("| " + " | ".join(row) + " |")
        return lines

    def failed(self, name, n, cell):
        return any(f[0] == name and f[1] == "scaling" and f[2] == f"N={n}" and
                   f[3] == cell_name(cell) for f in self.runner.failures)

    def versus(self, cell, smp):
        """iomux's ways against the peers, paired, at each N."""
        refs = [p for p in (RIVALS + ["asio-contexts", FLOOR] if cell[0] == "echo" else
                            ["nginx"]) if p in self.names(cell)]
        mine = [m for m in self.names(cell) if m.startswith("iomux")]
        if not refs or not mine:
            return []
        head = ["iomux", "N"] + [f"/ {p}" for p in refs]
        lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
        for m in mine:
            for n in self.ns:
                row = [m, str(n)]
                for p in refs:
                    r = self.ratio(smp.get((cell_key(cell), m, n), {}),
                                   smp.get((cell_key(cell), p, n), {}))
                    row.append(f"{r['ratio']:.2f}x ({r['rmin']:.2f}–{r['rmax']:.2f})" if r
                               else "—")
                lines.append("| " + " | ".join(row) + " |")
        return lines

    def cpu_table(self, cell, smp):
        head = ["server"] + [f"N = {n}: server, load" for n in self.ns]
        lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
        for name in self.names(cell):
            row = [name]
            for n in self.ns:
                rs = [r for rs in smp.get((cell_key(cell), name, n), {}).values() for r in rs]
                row.append(f"{h.median([r['server_cpu_pct'] or 0 for r in rs]):.0f}%, "
                           f"{h.median([r['client_cpu_pct'] for r in rs]):.0f}%"
                           if rs else "—")
            lines.append("| " + " | ".join(row) + " |")
        return lines

    def fairness(self, cell, smp, n):
        """Each loop's (thread's, worker's) share, at n loops, summed over the repetitions."""
        what = "bytes" if cell[0] == "echo" else "requests"
        lines = [f"| server | connections per loop | {what} per loop | on-CPU time per thread "
                 "(threads over 1% of the server's) |", "|---|---|---|---|"]
        for name in self.names(cell):
            rs = [r for rs in smp.get((cell_key(cell), name, n), {}).values() for r in rs]
            if not rs:
                continue
            per = {}
            for r in rs:
                for i, cpu, conns, amount in r["loops"]:
                    c, a = per.get(i, (0, 0))
                    per[i] = (c + conns, a + amount)
            cpu = [0] * max(len(r["thread_ns"]) for r in rs)
            for r in rs:
                for i, v in enumerate(r["thread_ns"]):
                    cpu[i] += v
            busy = [v for v in cpu if v > 0.01 * sum(cpu)]
            conns = shares([per[i][0] for i in sorted(per)]) if per and cell[0] == "echo" \
                else "—"
            lines.append(f"| {name} | {conns} | "
                         f"{shares([per[i][1] for i in sorted(per)]) if per else '—'} | "
                         f"{shares(busy)} |")
        return lines

    def misses(self, smp):
        """The target, per cell: iomux at N = 2 at least TARGET_SCALING its N = 1 figure where
        the load is not the limit, and (echo) ahead of Asio's one io_context and libuv."""
        missed, unchecked, met = [], [], []
        if TARGET_N not in self.ns or 1 not in self.ns:
            return [], [f"N = 1 and N = {TARGET_N} not both run"], []
        for cell in self.cells:
            if "iomux" not in self.names(cell):
                continue
            what = cell_name(cell)
            two = smp.get((cell_key(cell), "iomux", TARGET_N), {})
            r = self.ratio(two, smp.get((cell_key(cell), "iomux", 1), {}))
            limited1, note1 = self.load_note(smp.get((cell_key(cell), "iomux", 1), {}), 1)
            limited2, note2 = self.load_note(two, TARGET_N)
            if r is None:
                missed.append(f"{what}: iomux not measured at N = 1 and {TARGET_N}")
            elif limited1 or limited2 or not self.layout(TARGET_N)[2]:
                e = self.ratio(two, smp.get((cell_key(cell), "iomux", 1), {}), "per_cpu")
                unchecked.append(
                    f"{what}: N = {TARGET_N} / N = 1 is {r['ratio']:.2f}x, not held to "
                    f"{TARGET_SCALING}x: at N = 1 {note1}; at N = {TARGET_N} {note2}" + (
                        f"; per server CPU-second, N = {TARGET_N} moves {e['ratio']:.2f}x "
                        f"({e['rmin']:.2f}–{e['rmax']:.2f}) what N = 1 does" + (
                            "" if self.layout(TARGET_N)[2] else ", sharing its CPUs with the "
                            "load") if e else ""))
            elif r["ratio"] < TARGET_SCALING:
                missed.append(f"{what}: N = {TARGET_N} / N = 1 is {r['ratio']:.2f}x "
                              f"({r['rmin']:.2f}–{r['rmax']:.2f}), under {TARGET_SCALING}x")
            else:
                met.append(f"{what}: N = {TARGET_N} / N = 1 is {r['ratio']:.2f}x")
            for rival in RIVALS if cell[0] == "echo" else []:
                if rival not in self.names(cell):
                    unchecked.append(f"{what}: {rival} not run")
                    continue
                v = self.ratio(two, smp.get((cell_key(cell), rival, TARGET_N), {}))
                if v is None:
                    unchecked.append(f"{what}: iomux or {rival} failed at N = {TARGET_N}")
                elif v["ratio"] <= 1.0:
                    missed.append(f"{what}: at N = {TARGET_N} iomux is {v['ratio']:.2f}x "
                                  f"{rival} ({v['rmin']:.2f}–{v['rmax']:.2f}), not ahead")
                else:
                    met.append(f"{what}: at N = {TARGET_N} iomux is {v['ratio']:.2f}x {rival}")
        return missed, unchecked, met

    def report_md(self, out):
        smp = self.samples()
        md = ["## The scaling study (Asio's CPU-scalability test)", "",
              f"N loops on the first N of the CPUs this run may use "
              f"({', '.join(map(str, self.allowed))}), the load on the CPUs left, a thread per "
              "CPU up to two per loop, or on all of them when none is left (then the two "
              "compete, and the load's CPU use says how much it took). A fresh server for "
              f"every run, {self.warmup:g} s of warm-up, {self.seconds:g} s timed, "
              f"{self.reps} repetitions in rotating order; ratios are paired within a "
              "repetition (median and range). Echo: echo-client with its threads pinned, each "
              "byte checked; HTTP: `wrk -tT -c100` for a 4 KB file. CPU use is the on-CPU time "
              "of every thread of the server (schedstat) and of the load, in % of one CPU.",
              "", "```", self.reproduce(), "```", "",
              "| N | server CPUs | load CPUs (threads) |", "|---|---|---|"]
        for n in self.ns:
            s, l, apart = self.layout(n)
            md.append(f"| {n} | {', '.join(map(str, s))} | {', '.join(map(str, l))} "
                      f"({len(l)}){'' if apart else ', shared with the server'} |")
        md += ["", "| server | what it is | processes (all counted) |", "|---|---|---|"]
        for proto, names in (("echo", self.echo_names), ("http", self.http_names)):
            for name in names:
                seen = [self.checked[(proto, name, n)] for n in self.ns[::-1]
                        if (proto, name, n) in self.checked]
                md.append(f"| {proto} {name} | {self.identity.get((proto, name), '')} | "
                          + (f"N = {max(self.ns)}: " if seen else "")
                          + (seen[0] if seen else "not run") + " |")
        md.append("")
        for cell in self.cells:
            md += [f"### {cell_name(cell)}: {self.unit(cell)} (higher is better)", ""]
            md += self.table(cell, smp) + [""]
            md += [f"The same per second of server CPU ({self.unit(cell).split('/')[0]} per "
                   "CPU-second, higher is better): where the load or the machine is the limit, "
                   "whether a loop keeps its speed when there are more of them. Where the "
                   "server shares its CPUs with the load, this includes what the sharing costs "
                   "(the CPU switching between server and load threads, their caches):", ""]
            md += self.table(cell, smp, "per_cpu") + [""]
            notes = []
            for n in self.ns:
                byn = [smp.get((cell_key(cell), name, n), {}) for name in self.names(cell)]
                merged = {}
                for b in byn:
                    for rep, rs in b.items():
                        merged.setdefault(rep, []).extend(rs)
                notes.append(f"N = {n}: {self.load_note(merged, n)[1]}")
            md += ["Where the CPUs went (medians over the servers): " + "; ".join(notes) + ".",
                   ""]
            v = self.versus(cell, smp)
            if v:
                md += ["iomux against the others at the same N, paired (higher: iomux ahead):",
                       ""] + v + [""]
            md += ["Server and load CPU use, % of one CPU (medians):", ""]
            md += self.cpu_table(cell, smp) + [""]
            for n in [n for n in self.ns if n > 1]:
                md += [f"Fairness across loops at N = {n} (shares, summed over the runs; "
                       "the loops' own counts, warm-up included):", ""]
                md += self.fairness(cell, smp, n) + [""]
        echo = [c for c in self.cells if c[0] == "echo"]
        if self.syscalls and echo:
            calls = sorted({c for t in self.syscalls.values() for v in t.values()
                            for c in v["calls"]})
            md += [f"### Echo servers' system calls per echo ({cell_name(echo[0])})", "",
                   "Counted with `strace -c -f` attached to every thread of the server once it "
                   "was up, over a 1 s run without warm-up, divided by the echoes the client "
                   "completed; columns leave out calls under 0.01 per echo. `futex` is what "
                   "threads that share something pay to wait for each other. strace slows the "
                   "server, so these runs echo less, and batch differently.", "",
                   "| server | N | echoes | total | " + " | ".join(calls) + " |",
                   "|---" * (len(calls) + 4) + "|"]
            for name in self.echo_names:
                for n in self.ns:
                    v = self.syscalls.get(n, {}).get(name)
                    if v:
                        md.append(f"| {name} | {n} | {v['echoes']:,} | {v['total']:.2f} | " +
                                  " | ".join(f"{v['calls'].get(c, 0):.2f}" for c in calls) +
                                  " |")
            md.append("")
        if self.syscalls_why:
            md += [f"System calls not counted: {self.syscalls_why}.", ""]
        series = {}
        for cell in self.cells:
            panel = {}
            for name in self.names(cell):
                pts = []
                for n in self.ns:
                    s = self.stats(smp.get((cell_key(cell), name, n), {}))
                    if s:
                        pts.append((n, s["median"]))
                panel[name] = pts
            series[cell] = panel
        if len(self.ns) > 1 and series and h.plot(
                os.path.join(out, "scaling.png"), "Scaling study: throughput against loops",
                [(cell_name(c), series[c], self.unit(c)) for c in self.cells],
                "loops (threads, workers) N", ylog=False):
            md += ["![scaling](scaling.png)", ""]
        missed, unchecked, met = self.misses(smp)
        md += ["### iomux against its target", "",
               f"Target: at N = {TARGET_N}, iomux (every loop listening, SO_REUSEPORT) at least "
               f"{TARGET_SCALING}x its N = 1 throughput in each cell where the load generator "
               "is not the limit, and ahead of Asio's one io_context run by N threads and of "
               "libuv (echo cells), in the same run.", ""]
        md += [f"- met: {m}" for m in met] + [f"- missed: {m}" for m in missed] + [
            f"- not checked: {m}" for m in unchecked] or ["- nothing to check"]
        md += ["", "What to expect with more CPUs: the study runs unchanged, N = 1 .. the CPUs "
               "allowed, the load on the CPUs the server does not use (up to two per loop). "
               "Loops that share nothing (iomux, the floor, libuv, Asio's io_context per "
               "thread, nginx's workers) should then scale close to linearly until the load's "
               "CPUs run out (from N = CPUs / 3 on, the load has fewer than two per loop) or "
               "the loopback's memory bandwidth does; Asio's one io_context should flatten and "
               "fall as N grows, as in Asio's own figures (686, 671, 444 MB/s for 1, 2, 4 "
               "threads), because its threads share one reactor and one handler queue under a "
               "lock. Steering (SO_INCOMING_CPU) keeps each connection's client and loop on one "
               "CPU: on a machine where the load has CPUs of its own it decides which loop "
               "serves a connection by the client thread's CPU, which only helps when client "
               "and server threads share CPUs (here at N = 2). The acceptor adds one channel "
               "message per connection: it costs nothing per byte, only per connection.", ""]
        if self.configs:
            md += ["nginx's configuration, as generated (DIR: a temporary directory):", ""]
            last = list(self.configs.items())[-1]
            md += [f"`{last[0]}`:", "", "```", last[1].rstrip(), "```", ""]
        return md, [f"scaling {m}" for m in missed]

    def print_tables(self):
        smp = self.samples()
        for cell in self.cells:
            h.log(f"\nscaling {cell_name(cell)} ({self.unit(cell)}; columns: N)")
            h.log("\n".join(self.table(cell, smp)))
        missed, unchecked, met = self.misses(smp)
        for m in met:
            h.log(f"scaling target met: {m}")
        for m in unchecked:
            h.log(f"scaling target not checked: {m}")

    def smoke_summary(self):
        runs = [r for r in self.runner.records if r.get("study") == "scaling"]
        return [f"scaling: {len(runs)} runs at N = {', '.join(map(str, self.ns))} "
                f"({', '.join(cell_name(c) for c in self.cells) or 'no cell'}); echo servers: "
                f"{', '.join(self.echo_names) or 'none'}; HTTP servers: "
                f"{', '.join(self.http_names) or 'none'}; every echoed byte checked, every loop "
                "accounted for at exit"]

    def json(self):
        return dict(ns=self.ns, cpus=self.allowed, cells=[list(c) for c in self.cells],
                    echo_servers=self.echo_names, http_servers=self.http_names,
                    identity={f"{p} {n}": v for (p, n), v in self.identity.items()},
                    layout={n: self.layout(n) for n in self.ns}, seconds=self.seconds,
                    warmup=self.warmup, reps=self.reps, configs=self.configs,
                    syscalls=self.syscalls, skipped=self.skipped)
