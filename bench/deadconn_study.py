# SPDX-License-Identifier: MIT
"""The dead-connection study, run by bench/run (bench/README.md, "The dead-connection study"):
Libenzi's measurements behind epoll (docs/studies.md, study 4) on today's kernel. An HTTP
server holds D idle ("dead") connections, opened by tools/deadconn, while httperf drives 100
live connections that request a 128-, 512- or 1,024-byte file one request after another;
D grows from 0 to what the fd limit allows. The servers: iomux-httpd on every backend this
build has (select only up to its FD_SETSIZE) and nginx. Reported: the reply rate, its
variation over repetitions, and the server's CPU time per reply; and Libenzi's burst test,
short connections of two requests each opened at a fixed rate (httperf --rate), with the
reply rate and the errors. Libenzi found epoll's reply rate flat and poll()'s falling as the
dead connections grow; the report says whether that holds here, backend by backend.

The method is the echo study's: the server pinned to one CPU, httperf and deadconn to the
other, a fresh server process for every (dead count, server) cell of every repetition, in an
order that rotates, ratios paired within a repetition. Servers are started and stopped with
bench/http_study.py's Server (its nginx configuration too, with room for the connections).
Then the target's ratio is settled as studies 1 and 2 settle theirs (settle_study.py): back to
back, in one server process, the live load with the most dead connections and with none, the
first alternating, K times; the median of the K ratios with a distribution-free interval.

The shared helpers come from benchlib.py."""
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import tempfile
import time

import benchlib as h
import http_study
from benchlib import Cell, Study as Base, median_interval, verdict

LIVE = 100  # Libenzi's live connections
SIZES = {"128": 128, "512": 512, "1k": 1024}  # the replies' bodies, served as <label>.bin
FD_SETSIZE = 1024
FD_MARGIN = 64  # descriptors each process keeps besides the connections
MAX_DEAD = 100000  # the most dead connections asked for, whatever the fd limit
HTTPERF_TIMEOUT = 5  # httperf --timeout, as Libenzi ran it
TARGET_FLAT = 0.95  # iomux-epoll's and iomux-uring's rate at the most dead over that at 0
TARGETED = ("iomux-epoll", "iomux-uring")
MODES = {
    "smoke": dict(dead=[0, 200], sizes=["128"], calls=20, warmup_calls=0, reps=1,
                  burst_dead=[0, 200], burst=dict(conns=200, rate=1000), pairs=1),
    "quick": dict(dead=[0, "max"], sizes=["128"], calls=200, warmup_calls=20, reps=1,
                  burst_dead=[0], burst=dict(conns=2000, rate=2000), pairs=1),
    "full": dict(dead=[0, 1000, 2000, 5000, 10000, "max"], sizes=["128", "512", "1k"],
                 calls=2500, warmup_calls=250, reps=5, burst_dead=[0, 10000, "max"],
                 burst=dict(conns=27000, rate=5000), pairs=15),
}
BACKEND_ORDER = ["epoll", "uring", "rtsig", "poll", "select"]


def build_backends(build):
    """{backend: None, or why it cannot run} for every backend of the build's library, in
    its order of preference, from `deadconn --backends` (mux_backend_name and
    mux_backend_probe): a backend added to the library (rtsig) joins the studies by itself."""
    exe = os.path.join(build, "deadconn")
    if not os.path.exists(exe):
        return {}
    out = subprocess.run([exe, "--backends"], capture_output=True, text=True)
    found = {}
    for line in out.stdout.splitlines():
        name, _, state = line.partition(" ")
        found[name] = None if state == "ok" else f"the kernel refuses it: {state}"
    return found


def count_fds(pid):
    """The sockets a process holds (its files are left out: iomux-httpd keeps the files it
    served open, which is no leak)."""
    n = 0
    try:
        for f in os.listdir(f"/proc/{pid}/fd"):
            try:
                n += os.readlink(f"/proc/{pid}/fd/{f}").startswith("socket:")
            except OSError:
                pass
    except OSError:
        return -1
    return n


def parse_httperf(text):
    """{replies, requests, seconds, conn_rate, errors: {kind: n}, status_2xx} from httperf's
    summary, or None when it printed none."""
    m = re.search(r"Total: connections (\d+) requests (\d+) replies (\d+) test-duration ([\d.]+) s",
                  text)
    if not m:
        return None
    out = dict(connections=int(m.group(1)), requests=int(m.group(2)), replies=int(m.group(3)),
               seconds=float(m.group(4)), errors={})
    c = re.search(r"Connection rate: ([\d.]+) conn/s", text)
    out["conn_rate"] = float(c.group(1)) if c else None
    s = re.search(r"Reply status: 1xx=\d+ 2xx=(\d+)", text)
    out["status_2xx"] = int(s.group(1)) if s else 0
    for line in re.findall(r"Errors: (.*)", text):
        for kind, n in re.findall(r"([\w-]+) (\d+)", line):
            if kind != "total" and int(n):
                out["errors"][kind] = int(n)
    return out


class Study(Base):
    """The dead-connection study of one bench/run."""
    NAME = "deadconn"
    TITLE = "the dead-connection study (Libenzi's, study 4)"
    MODES = MODES

    def __init__(self, ctx):
        super().__init__(ctx)
        args, cfg, lim = self.args, self.cfg, ctx.lim
        self.want = want = ctx.want
        self.cpus = args.echo_cpus
        self.reps = args.reps or cfg["reps"]
        self.dir, self.configs = None, {}
        self.root_user = os.geteuid() == 0
        self.nofile = lim["nofile"]
        # The fd limit's room, capped: deadconn takes at most MAX_DEAD (a hard limit of a
        # million would otherwise ask for a million loopback sockets per side).
        self.max_dead = min(self.nofile - LIVE - FD_MARGIN, MAX_DEAD)
        self.deadconn = os.path.join(args.build_abs, "deadconn")
        self.httperf = shutil.which("httperf")
        self.servers = {}
        self.caps = {}  # server -> the most dead connections it can hold
        httpd = os.path.join(args.build_abs, "iomux-httpd")
        backends = build_backends(args.build_abs)
        for b in sorted(backends, key=lambda b: (BACKEND_ORDER + [b]).index(b)):
            name, why = f"iomux-{b}", backends[b]
            if why:
                self.skipped.append((f"deadconn {name}", why))
                continue
            if not os.path.exists(httpd):
                self.skipped.append((f"deadconn {name}", f"{httpd} not built"))
                continue
            self.servers[name] = dict(
                kind="iomux", backend=b, env={"IOMUX_BACKEND": b},
                cmd=lambda port, exe=httpd: [
                    exe, "--root", f"{self.dir}/www", "--port", "0", "--bind", "127.0.0.1",
                    "--max-connections", str(self.max_dead + 2 * LIVE),
                    "--header-timeout", "86400", "--idle-timeout", "86400",
                    "--max-requests", str(1 << 30)],
                identity=f"examples/iomux-httpd, iomux backend {b}, no limit on connections, "
                         "requests per connection or silence that the study reaches")
            self.caps[name] = (FD_SETSIZE - LIVE - 24) if b == "select" else self.max_dead
        if "rtsig" not in backends:
            self.skipped.append(("deadconn iomux-rtsig", "this build has no rtsig backend "
                                 "(its backends: " + (", ".join(backends) or "none") + ")"))
        nginx = http_study.nginx_server(self, "worker_connections as the fd limit allows")
        if nginx:
            self.servers["nginx"] = nginx
            # nginx closes idle connections ("reusable" ones: a dead connection is one) when
            # fewer than 1/16 of its worker_connections are free, so it holds that much less,
            # and less again the connections the burst test has open at once (up to ~1,000).
            self.caps["nginx"] = (self.nofile - 32) * 15 // 16 - LIVE - FD_MARGIN - 1024
            if self.caps["nginx"] < 0:
                del self.servers["nginx"], self.caps["nginx"]
                self.skipped.append(("deadconn nginx", f"RLIMIT_NOFILE {self.nofile:,} leaves "
                                     "nginx no room for dead connections"))
        else:
            self.skipped.append(("deadconn nginx", "nginx not installed (apt-get install "
                                 "nginx-light)"))
        if not os.path.exists(self.deadconn):
            self.skipped.append(("deadconn", f"{self.deadconn} not built"))
            self.servers = {}
        if not self.httperf:
            self.skipped.append(("deadconn", "httperf not installed (apt-get install httperf)"))
            self.servers = {}
        self.names = [n for n in self.servers if not want or n in want]
        self.points = sorted({self.max_dead if p == "max" else min(int(p), self.max_dead)
                              for p in (cfg["dead"] if not args.dead else args.dead.split(","))})
        self.burst_points = sorted({self.max_dead if p == "max" else min(int(p), self.max_dead)
                                    for p in cfg["burst_dead"]} & set(self.points)) if \
            not args.dead else [p for p in self.points if p in (self.points[0], self.points[-1])]
        self.sizes = cfg["sizes"]
        self.results, self.checks = [], dict(cells=0, held=0, released=0)
        # The target's back-to-back pairs: the targeted servers that reach the most dead.
        self.k, self.pair_top = cfg.get("pairs", 0), self.points[-1] if self.points else 0
        self.pair_names = [n for n in TARGETED if n in self.names and self.k and
                           self.server_points(n)[-1] == self.pair_top > 0]
        self.pairs = {}  # server -> [dict(dead=rate, zero=rate, ratio, first)]

    def banner(self):
        return (f"dead connections (Libenzi) against {', '.join(self.names)}; D = "
                f"{', '.join(f'{p:,}' for p in self.points)}; server on CPU {self.cpus[0]}, "
                f"httperf and deadconn on CPU {self.cpus[1]}")

    def config(self, kind, port):
        """nginx's configuration with room for every connection of the study (Server calls
        this before it starts nginx)."""
        text = http_study.nginx_conf(self.dir, port, self.root_user, idle_s=86400,
                                     connections=self.nofile - 32, nofile=self.nofile)
        with open(f"{self.dir}/{kind}.conf", "w") as f:
            f.write(text)
        self.configs[kind] = text.replace(str(port), "PORT").replace(self.dir, "DIR")

    def server_points(self, name):
        cap = self.caps[name]
        pts = [p for p in self.points if p <= cap]
        if cap < self.points[-1] and cap not in pts:
            pts.append(cap)  # select: as many as FD_SETSIZE lets it watch
        return pts

    def known(self):
        return set(self.servers) | {"nginx"}

    def why_not(self):
        return None if self.names else "no server can run"

    def reproduce(self):
        cmd = ["bench/run", "--build", h.build_arg(self.args), "--study", "deadconn"]
        cmd += h.mode_arg(self.args)
        cmd += ["--dead", ",".join(map(str, self.points)), "--reps", str(self.reps),
                "--echo-cpus", ",".join(map(str, self.cpus))]
        if self.want:
            cmd += ["--drivers", ",".join(self.names)]
        return shlex.join(cmd)

    # -----------------------------------------------------------------------------------
    # Running.

    def schedule(self):
        """Every (dead count, server) of every repetition, then the target's pairs; finish()
        removes the document root."""
        cfg = self.cfg
        live = LIVE * (cfg["calls"] + cfg["warmup_calls"]) / 25000 * len(self.sizes)
        cells = [Cell("deadconn: the document root", 0.1, self.prepare)]

        def scans(name, dead):
            """poll and select look at every descriptor at each wait: about a second per
            1e8 descriptors looked at (the quick run's iomux-poll at a load of 5 to 8)."""
            if not name.endswith(("-poll", "-select")):
                return 0.0
            return dead * LIVE * (cfg["calls"] + cfg["warmup_calls"]) * len(self.sizes) / 1e8

        for rep in range(self.reps):
            k = rep % len(self.names) if self.names else 0
            order = self.names[k:] + self.names[:k]
            for dead in sorted({p for n in self.names for p in self.server_points(n)}):
                for name in order:
                    if dead not in self.server_points(name):
                        continue
                    cells.append(Cell(f"deadconn D={dead:,} {name} (rep {rep + 1})",
                                      0.5 + live / 2 + dead / 8000 + scans(name, dead) + (
                                          cfg["burst"]["conns"] / cfg["burst"]["rate"]
                                          if dead in self.burst_points else 0),
                                      lambda name=name, dead=dead, rep=rep: self.run_cell(
                                          name, dead, rep)))
        for name in self.pair_names:
            cells.append(Cell(f"deadconn pairs {name} 0 / {self.pair_top:,} dead "
                              f"({self.k} pairs)",
                              2 + self.k * (2 * LIVE * cfg["calls"] / 25000 +
                                            self.pair_top / 4000),
                              lambda name=name: self.run_pairs(name)))
        return cells

    def prepare(self):
        self.dir = tempfile.mkdtemp(prefix="iomux-bench-deadconn-")
        os.mkdir(f"{self.dir}/www")
        for label, size in SIZES.items():
            with open(f"{self.dir}/www/{label}.bin", "wb") as f:
                f.write(os.urandom(size))

    def finish(self):
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def fail(self, name, dead, why, cmd):
        self.runner.failures.append((name, "deadconn", "tcp", dead, why, cmd))
        h.end_line()
        h.log(f"  FAILED deadconn D={dead:,} {name}: {why}")

    def httperf_cmd(self, port, uri, conns, calls, rate):
        return self.runner.pin([self.httperf, "--server", "127.0.0.1", "--port", str(port),
                                "--uri", uri, "--num-conns", str(conns), "--num-calls",
                                str(calls), "--rate", str(rate), "--timeout",
                                str(HTTPERF_TIMEOUT)], self.cpus[1])

    def httperf_run(self, cmd):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            return None, "httperf did not finish within 600 s"
        r = parse_httperf(out.stdout)
        if out.returncode != 0 or r is None:
            return None, (out.stderr.strip() or out.stdout.strip() or
                          f"exit status {out.returncode}").splitlines()[-1]
        return r, None

    def start_deadconn(self, port, dead, pid, base):
        """deadconn holding `dead` connections, and the server holding them too: (process,
        None) or (process or None, why not)."""
        cmd = self.runner.pin([self.deadconn, "--port", str(port), "--count", str(dead),
                               "--seconds", "3600"], self.cpus[1])
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.runner.live.add(p)
        line = h.read_line(p, 120)
        if line is None or not line.startswith(f"holding {dead} connections"):
            return p, f"deadconn: {line or 'no holding line within 120 s'}"
        deadline = time.time() + 60
        while count_fds(pid) < base + dead and time.time() < deadline:
            time.sleep(0.05)
        if count_fds(pid) < base + dead:
            return p, (f"the server holds {count_fds(pid) - base:,} of the {dead:,} dead "
                       "connections deadconn made")
        return p, None

    def stop_deadconn(self, p, pid, base, dead):
        """Stops deadconn, checks its RESULT (every connection held, nothing leaked) and that
        the server lets every connection go: None or why not."""
        p.send_signal(signal.SIGTERM)
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        self.runner.live.discard(p)
        out = out.decode(errors="replace")
        res = [l for l in out.splitlines() if l.startswith(("RESULT", "FAIL"))]
        if p.returncode != 0:
            return "deadconn: " + ("; ".join(res) or err.decode(errors="replace").strip() or
                                   f"exit status {p.returncode}")
        self.checks["held"] += dead
        deadline = time.time() + 60
        while count_fds(pid) > base and time.time() < deadline:
            time.sleep(0.05)
        if count_fds(pid) > base:
            return (f"the server still holds {count_fds(pid) - base:,} more sockets than "
                    "before deadconn, 60 s after it closed its connections")
        self.checks["released"] += dead
        return None

    @staticmethod
    def live_short(r, calls):
        """Why httperf's live load of `calls` per connection did not come back whole (every
        reply 2xx, no error), or None."""
        want = LIVE * calls
        if r["replies"] != want or r["status_2xx"] != want or r["errors"]:
            return (f"{r['replies']:,} replies ({r['status_2xx']:,} 2xx) of {want:,}, "
                    f"errors {r['errors'] or 'none'}")
        return None

    def live_rate(self, srv, calls):
        """httperf's live load on the 128-byte file: (replies/s, None) or (None, why)."""
        cmd = self.httperf_cmd(srv.port, f"/{self.sizes[0]}.bin", LIVE, calls, 10000)
        r, why = self.httperf_run(cmd)
        why = why or self.live_short(r, calls)
        if why:
            return None, why
        if r["seconds"] <= 0:
            return None, f"httperf reported a test duration of {r['seconds']} s"
        return r["replies"] / r["seconds"], None

    def run_pairs(self, name):
        """The target's back-to-back pairs: one server process, warmed up; in each pair the
        live load with the most dead connections and with none, one right after the other
        (deadconn opened before the first and closed after it, or opened between the two),
        the first alternating. Nothing else differs between the two rates of a pair."""
        cfg, top, got = self.cfg, self.pair_top, []
        with http_study.Server(self, name) as srv:
            if srv.error:
                self.fail(name, top, f"pairs: {srv.error}", srv.shown_cmd())
                return
            pid = srv.serving_pid()
            base = count_fds(pid)
            _, why = self.live_rate(srv, max(cfg["warmup_calls"], 1))
            for i in range(self.k if not why else 0):
                rates = {}
                for dead in ((top, 0) if i % 2 == 0 else (0, top)):
                    dc = None
                    try:
                        if dead:
                            dc, why = self.start_deadconn(srv.port, dead, pid, base)
                        if not why:
                            rates[dead], why = self.live_rate(srv, cfg["calls"])
                    finally:
                        if dc is not None:  # closed whatever happened: nothing left open
                            stop_why = self.stop_deadconn(dc, pid, base, dead)
                            why = why or stop_why
                    if why:
                        break
                if why:
                    break
                got.append(dict(dead=rates[top], zero=rates[0], ratio=rates[top] / rates[0],
                                first="dead" if i % 2 == 0 else "none"))
        why = why or srv.error
        if why:
            self.fail(name, top, f"pairs: {why}", srv.shown_cmd())
        self.pairs[name] = got

    def pair_verdicts(self):
        """[(server, pairs, median, interval or None, verdict)] of the target's pairs."""
        out = []
        for name in self.pair_names:
            ratios = [p["ratio"] for p in self.pairs.get(name, [])]
            if not ratios:
                continue
            med, ci = h.median(ratios), median_interval(ratios)
            out.append((name, len(ratios), med, ci, verdict(med, ci, TARGET_FLAT, higher=True)))
        return out

    def run_cell(self, name, dead, rep):
        cfg = self.cfg
        with http_study.Server(self, name) as srv:
            if srv.error:
                self.fail(name, dead, srv.error, srv.shown_cmd())
                return
            pid = srv.serving_pid()
            base = count_fds(pid)
            dc, why = (None, None) if dead == 0 else self.start_deadconn(srv.port, dead, pid,
                                                                        base)
            cmds = []
            try:
                for label in ([] if why else self.sizes):
                    uri = f"/{label}.bin"
                    if cfg["warmup_calls"]:
                        _, why = self.httperf_run(self.httperf_cmd(
                            srv.port, uri, LIVE, cfg["warmup_calls"], 10000))
                        if why:
                            why = f"warm-up: {why}"
                            break
                    cmd = self.httperf_cmd(srv.port, uri, LIVE, cfg["calls"], 10000)
                    cmds.append(cmd)
                    c0 = srv.cpu()
                    r, why = self.httperf_run(cmd)
                    c1 = srv.cpu()
                    if why:
                        break
                    short = self.live_short(r, cfg["calls"])
                    if short:
                        why = f"{label}: {short}"
                        break
                    cpu = sum(v - c0.get(k, 0) for k, v in c1.items()) / 1e9
                    self.results.append(dict(
                        study="deadconn", kind="live", size=label, dead=dead, driver=name,
                        rep=rep, rps=r["replies"] / r["seconds"], replies=r["replies"],
                        seconds=r["seconds"], cpu_us=cpu / r["replies"] * 1e6,
                        cpu_pct=cpu / r["seconds"] * 100, cmd=shlex.join(cmd),
                        server_cmd=srv.shown_cmd()))
                top = self.server_points(name)[-1]  # the most this server can hold
                if not why and (dead in self.burst_points or
                                (dead == top and self.points[-1] in self.burst_points)):
                    b = cfg["burst"]
                    cmd = self.httperf_cmd(srv.port, "/128.bin", b["conns"], 2, b["rate"])
                    cmds.append(cmd)
                    c0 = srv.cpu()
                    r, why = self.httperf_run(cmd)
                    c1 = srv.cpu()
                    if not why:
                        cpu = sum(v - c0.get(k, 0) for k, v in c1.items()) / 1e9
                        errors = sum(r["errors"].values())
                        if self.args.smoke and (errors or r["replies"] != 2 * b["conns"]):
                            why = (f"burst: {r['replies']:,} replies of {2 * b['conns']:,}, "
                                   f"errors {r['errors'] or 'none'}")
                        else:
                            self.results.append(dict(
                                study="deadconn", kind="burst", size="128", dead=dead,
                                driver=name, rep=rep, rps=r["replies"] / r["seconds"],
                                replies=r["replies"], conn_rate=r["conn_rate"],
                                errors=errors, error_kinds=r["errors"],
                                cpu_us=cpu / max(r["replies"], 1) * 1e6, cmd=shlex.join(cmd)))
                if not why and dead and count_fds(pid) < base + dead:
                    why = "the server dropped dead connections during the run"
            finally:
                if dc is not None:
                    stop_why = self.stop_deadconn(dc, pid, base, dead)
                    why = why or stop_why
            if not why:
                self.checks["cells"] += 1
        why = why or srv.error
        if why:
            self.fail(name, dead, why, srv.shown_cmd() + " & " + " & ".join(
                shlex.join(c) for c in cmds[-1:]))

    # -----------------------------------------------------------------------------------
    # Statistics and the report.

    def table_data(self, kind, size, metric):
        """{server: {dead: dict(median, cv, n, ratio (to the same server at 0 dead, paired
        per repetition: median, min, max))}}."""
        by = {}
        for r in self.results:
            if r["kind"] == kind and r["size"] == size and r.get(metric) is not None:
                by.setdefault(r["driver"], {}).setdefault(r["dead"], {})[r["rep"]] = r[metric]
        t = {}
        for name, bydead in by.items():
            zero = bydead.get(0, {})
            for dead, byrep in bydead.items():
                v = list(byrep.values())
                mean = statistics.mean(v)
                cv = statistics.stdev(v) / mean * 100 if len(v) > 1 and mean else 0.0
                pairs = h.paired({k: [x] for k, x in byrep.items()},
                                      {k: [x] for k, x in zero.items()})
                t.setdefault(name, {})[dead] = dict(median=h.median(v), cv=cv, n=len(v),
                                                    **h.ratio_stats(pairs))
        return t

    def columns(self, t):
        return sorted({d for byd in t.values() for d in byd})

    def md_table(self, t, ratio=False, fmt=None):
        cols = self.columns(t)
        lines = ["| server | " + " | ".join(f"{d:,}" for d in cols) + " |",
                 "|---" * (len(cols) + 1) + "|"]
        for name in [n for n in self.names if n in t]:
            row = []
            for d in cols:
                s = t[name].get(d)
                if s is None:
                    row.append("—")
                elif ratio:
                    row.append("—" if s["ratio"] is None else
                               f"{s['ratio']:.2f}x ({s['rmin']:.2f}–{s['rmax']:.2f})")
                else:
                    row.append((fmt or h.fmt_num)(s["median"]) + f" ±{s['cv']:.1f}%")
            lines.append(f"| {name} | " + " | ".join(row) + " |")
        return "\n".join(lines)

    def plot(self, path, title, panels):
        """Reply rate against dead connections, a line per server, a panel per reply size:
        the original's figures (a linear axis of dead connections); below, the server's CPU
        time per reply, which a busy machine disturbs less. panels: (title, rates, cpu)."""
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            return False
        fig, axes = plt.subplots(2, len(panels), figsize=(5.6 * len(panels), 8.2), squeeze=False)
        cells = [(axes[0][i], sub, t, "replies/s") for i, (sub, t, _) in enumerate(panels)] + [
            (axes[1][i], sub + ": server CPU per reply", c, "µs per reply")
            for i, (sub, _, c) in enumerate(panels)]
        for ax, sub, t, ylabel in cells:
            for name in [n for n in self.names if n in t]:
                pts = sorted((d, s["median"]) for d, s in t[name].items())
                colour, marker, line, _ = h.driver_style(name)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=colour,
                        linestyle=line, linewidth=2.2 if name in TARGETED else 1.4,
                        label=name)
            ax.set_ylim(bottom=0)
            h.readable_ticks(ax, ax.xaxis, False)
            h.readable_ticks(ax, ax.yaxis, False)
            ax.set_xlabel("dead connections")
            ax.set_ylabel(ylabel)
            ax.set_title(sub, fontsize=10.5)
            ax.grid(True, alpha=0.35)
            ax.tick_params(labelsize=9)
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.suptitle(title, fontsize=12.5)
        fig.tight_layout()
        fig.legend(handles, labels, title="server", loc="center left",
                   bbox_to_anchor=(1.0, 0.5), fontsize=9, frameon=False)
        fig.savefig(path, dpi=110, bbox_inches="tight", pad_inches=0.15)
        plt.close(fig)
        return True

    def verdicts(self):
        """Per server and size: its rate at the most dead connections it held over its rate
        at none, and the word for it; and the target's misses."""
        lines, missed = [], []
        for size in self.sizes:
            t = self.table_data("live", size, "rps")
            c = self.table_data("live", size, "cpu_us")
            for name in [n for n in self.names if n in t]:
                top = max(t[name])
                s = t[name][top]
                if top == 0 or s["ratio"] is None:
                    if name in TARGETED and top > 0:
                        missed.append(f"deadconn {name} {size} at {top:,} dead: no rate at 0 "
                                      "dead connections to compare with")
                    continue
                word = ("flat" if s["ratio"] >= TARGET_FLAT else
                        "falls" if s["ratio"] < 0.9 else "falls a little")
                cs = c.get(name, {}).get(top)
                cpu = (f"; CPU per reply {cs['ratio']:.2f}x ({cs['rmin']:.2f}–{cs['rmax']:.2f})"
                       if cs and cs["ratio"] is not None else "")
                lines.append(f"- {name}, {SIZES[size]:,}-byte replies, {top:,} dead: reply rate "
                             f"{s['ratio']:.2f}x its rate at 0 ({s['rmin']:.2f}–{s['rmax']:.2f}): "
                             f"{word}{cpu}")
                if name in TARGETED and s["ratio"] < TARGET_FLAT:
                    missed.append(f"deadconn {name} {size} at {top:,} dead: {s['ratio']:.2f}x "
                                  f"its rate at 0 (< {TARGET_FLAT})")
            for name in TARGETED:
                if name in self.names and (name not in t or max(t[name], default=0) <
                                           self.max_dead):
                    missed.append(f"deadconn {name} {size}: not measured at {self.max_dead:,} "
                                  "dead")
        return lines, missed

    def report_md(self, out):
        cfg = self.cfg
        md = ["## Study 4: dead connections (Libenzi)", "",
              f"Each server pinned to CPU {self.cpus[0]}, httperf and deadconn to CPU "
              f"{self.cpus[1]}, over loopback. In each cell a fresh server first takes D idle "
              "connections from `deadconn` (tools/deadconn.c: connected, never a byte sent; "
              "the cell waits until the server's count of sockets shows every one), then "
              f"httperf opens {LIVE} live connections at once (`--rate 10000`) and each makes "
              f"{cfg['calls']:,} requests one after another (`--num-calls`; Libenzi: 2,500), "
              "for a file of 128, 512 or 1,024 random bytes; a shorter run of the same load "
              "warms the server first. The reply rate is httperf's replies over its test "
              "duration; every reply must come back 2xx and httperf must count no error. ±% is "
              "the coefficient of variation of the rate over the repetitions (Libenzi's "
              "variance); the ratios are each server's rate over its own rate with no dead "
              "connection in the same repetition. Server CPU is the on-CPU time (schedstat) "
              "of all its threads over httperf's run, per reply. After the load, deadconn "
              "closes its connections and must have held every one and closed every "
              "descriptor it opened, and the server's count of sockets must fall back to where "
              f"it was. `select` runs up to {FD_SETSIZE - LIVE - 24:,} dead connections (its "
              f"FD_SETSIZE of {FD_SETSIZE:,} less the live ones), nginx up to "
              f"{self.caps.get('nginx', 0):,} (it closes idle connections once fewer than a "
              "sixteenth of its worker_connections are free, and the burst's connections count "
              "too); the most the fd limit "
              f"allows is {self.max_dead:,} ({LIVE} live and {FD_MARGIN} spare descriptors "
              "less than RLIMIT_NOFILE in each process).", "",
              "```", self.reproduce(), "```", "",
              "| server | what it is |", "|---|---|"]
        md += [f"| {n} | {self.servers[n]['identity']} |" for n in self.names]
        md.append("")
        md += [f"Checked: {self.checks['cells']} cells ran clean; deadconn held "
               f"{self.checks['held']:,} dead connections in all and leaked no descriptor, and "
               f"the servers let all {self.checks['released']:,} go.", ""]
        panels = []
        for size in self.sizes:
            t = self.table_data("live", size, "rps")
            if not t:
                continue
            panels.append((f"{SIZES[size]:,}-byte replies", t,
                           self.table_data("live", size, "cpu_us")))
            md += [f"### Reply rate, {SIZES[size]:,}-byte replies (replies/s, higher is better; "
                   "columns: dead connections)", "", self.md_table(t), "",
                   "Over the same server's rate with no dead connection:", "",
                   self.md_table(t, ratio=True), ""]
            c = self.table_data("live", size, "cpu_us")
            md += ["Server CPU per reply (µs, lower is better; ±% over repetitions):", "",
                   self.md_table(c, fmt=lambda v: f"{v:.2f}"), ""]
        if panels and self.plot(os.path.join(out, "deadconn.png"),
                                "Study 4: reply rate against dead connections", panels):
            md += ["![dead connections](deadconn.png)", ""]
        b = self.table_data("burst", "128", "rps")
        if b:
            bc = cfg["burst"]
            md += [f"### Burst: {bc['conns']:,} connections of 2 requests each at "
                   f"{bc['rate']:,} connections/s (Libenzi: 27,000 at 5,000/s)", "",
                   "Replies/s (httperf's replies over its test duration; ±% over "
                   "repetitions); columns: dead connections held meanwhile:", "",
                   self.md_table(b), "", "Errors counted by httperf (sum over repetitions):",
                   "", "| server | " + " | ".join(f"{d:,}" for d in self.columns(b)) + " |",
                   "|---" * (len(self.columns(b)) + 1) + "|"]
            for name in [n for n in self.names if n in b]:
                row = []
                for d in self.columns(b):
                    rs = [r for r in self.results if r["kind"] == "burst" and
                          r["driver"] == name and r["dead"] == d]
                    kinds = {}
                    for r in rs:
                        for k, v in r["error_kinds"].items():
                            kinds[k] = kinds.get(k, 0) + v
                    row.append("—" if not rs else ", ".join(f"{v:,} {k}" for k, v in
                                                            sorted(kinds.items())) or "0")
                md.append(f"| {name} | " + " | ".join(row) + " |")
            md.append("")
        lines, missed = self.verdicts()
        md += ["### Does Libenzi's finding hold here?", "",
               f"Each server's reply rate with the most dead connections it held over its "
               f"rate with none (median of the paired ratios): flat at {TARGET_FLAT}x or "
               "more; and its CPU time per reply there over its CPU per reply with none, the "
               "steadier measure when the machine is busy.", ""] + (
                   lines or ["- nothing measured"]) + [""]
        pv = self.pair_verdicts()
        # A miss of the repetitions that the pairs measured again is settled by the pairs.
        again = tuple(f"deadconn {name} {self.sizes[0]} at {self.pair_top:,} dead:"
                      for name, *_ in pv)
        settled = [m for m in missed if again and m.startswith(again)]
        missed = [m for m in missed if m not in settled]
        md += ["### Target", "", f"`iomux-epoll` and `iomux-uring` at {self.max_dead:,} dead "
               f"connections at least {TARGET_FLAT}x their reply rate at 0, for every reply "
               "size. In the repetitions above (a fresh server per cell):", ""]
        md += ([f"- missed: {m}" for m in missed] +
               [f"- missed here, measured again by the back-to-back pairs below, which settle "
                f"it: {m}" for m in settled]) or ["- met"]
        md.append("")
        if pv:
            md += ["#### Back-to-back pairs", "",
                   f"The same comparison settled as studies 1 and 2 settle theirs: in one "
                   f"server process (warmed up first), the live load of {LIVE} connections of "
                   f"{cfg['calls']:,} requests for the {SIZES[self.sizes[0]]:,}-byte file with "
                   f"{self.pair_top:,} dead connections and with none, one right after the "
                   "other (deadconn opened before the run with them and closed after it), the "
                   f"first alternating, {self.k} times. The ratio is the rate with the dead "
                   "connections over the rate without, as the median over the pairs with a "
                   "distribution-free interval (order statistics); verdicts as in studies 1 "
                   f"and 2 (met, met on the median, missed on the median, missed), against "
                   f"{TARGET_FLAT}x. Each run's rate, and which came first, is in results.json.",
                   "", "| server | pairs | median | interval | verdict |", "|---|---|---|---|---|"]
            for name, k, med, ci, word in pv:
                iv = "—" if ci is None else f"{ci[0]:.3f}–{ci[1]:.3f} ({ci[2] * 100:.1f}%)"
                md.append(f"| {name} | {k} | {med:.3f}x | {iv} | {word} |")
            md.append("")
            missed += [f"deadconn {name} pairs at {self.pair_top:,} dead: {med:.3f}x its rate "
                       f"at 0 ({word})" for name, k, med, ci, word in pv
                       if word.startswith("missed")]
        for name, why in self.skipped:
            md.append(f"Skipped {name}: {why}.")
        if self.skipped:
            md.append("")
        if self.configs:
            md += ["nginx's configuration, as generated (DIR: a temporary directory):", "",
                   "```", self.configs["nginx"].rstrip(), "```", ""]
        return md, missed

    def print_tables(self):
        for size in self.sizes:
            t = self.table_data("live", size, "rps")
            if t:
                h.log(f"\ndeadconn reply rate, {size}-byte replies (columns: dead "
                           "connections)")
                h.log(self.md_table(t))
                h.log(self.md_table(t, ratio=True))
        b = self.table_data("burst", "128", "rps")
        if b:
            h.log("\ndeadconn burst: replies/s")
            h.log(self.md_table(b))

    def smoke_summary(self):
        live = [r for r in self.results if r["kind"] == "live"]
        return [f"deadconn: {self.checks['cells']} cells of {', '.join(self.names) or 'nothing'}"
                f" at {', '.join(f'{p:,}' for p in self.points)} dead: "
                f"{sum(r['replies'] for r in live):,} replies, every one 2xx; "
                f"{self.checks['held']:,} dead connections held and released, no descriptor "
                "leaked"]

    def json(self):
        return dict(results=self.results, pairs=self.pairs, points=self.points,
                    max_dead=self.max_dead,
                    servers={n: self.servers[n]["identity"] for n in self.names},
                    checks=self.checks, configs=self.configs, skipped=self.skipped)
