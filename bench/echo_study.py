# SPDX-License-Identifier: MIT
"""Study 3, the echo study (Asio's CK Echo Test), run by bench/run (bench/README.md, "Study
3 — echo"): one echo server per system in its own process pinned to one CPU, the load
client pinned to another, over loopback TCP; every server once per session count in each
repetition, in an order that rotates; then each server's system calls per echo counted
with strace. echo_small.py is its variant with 128-byte blocks and every round trip timed,
run by this study after its own cells. The echo servers and EchoServer also serve the cost
table (costs_study.py)."""
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile

import echo_small
import echo_uring
from benchlib import (BASE, FLOOR, Cell, Study as Base, build_arg, baseline_arg,
                      callgrind_cmd, end_line, fd_kinds, log, median, paired, parse_strace,
                      plain, plot, ratio_stats, read_line, shown_path, table_md)

MODES = {
    "smoke": dict(sessions=[1, 10], seconds=1, warmup=0.2, block=16384, reps=1,
                  backends=None, strace=[],
                  small=dict(block=128, sessions=[1], seconds=1, warmup=0.2, pairs=1,
                             pair_seconds=1, pair_warmup=0.2)),
    "quick": dict(sessions=[1, 100], seconds=0.5, warmup=0.3, block=16384, reps=1,
                  backends=["epoll", "uring"], strace=[100],
                  small=dict(block=128, sessions=[1], seconds=0.5, warmup=0.3, pairs=1,
                             pair_seconds=0.5, pair_warmup=0.2)),
    "full": dict(sessions=[1, 10, 100, 1000, 10000], seconds=5, warmup=1, block=16384,
                 reps=5, backends=None, strace=[1, 10, 1000, 10000],
                 small=dict(block=128, sessions=[1, 10, 100, 1000, 10000], seconds=5,
                            warmup=1, pairs=15, pair_seconds=2, pair_warmup=0.5)),
}
METRICS = {"echo": [("mbps", "MB/s", "throughput, bytes echoed per second"),
                    ("cpu_ms_per_mb", "server CPU ms per MB", "server CPU time per megabyte "
                     "echoed"),
                    ("server_cpu_pct", "% of one CPU", "server CPU use over the timed window")]}
BASE_METRICS = ["mbps", "cpu_ms_per_mb"]

ECHO_PEERS = ["libev", "libevent", "libuv", "asio"]
ECHO_POOL = 16384  # read buffers of the iomux echo server, shared by its connections
ECHO_TARGET = 0.97  # iomux's MB/s over the floor's, paired, in every column
ECHO_BEV_TARGET = 0.9  # libiomux-event's bufferevent server's MB/s over the floor's (issue 13)
ECHO_URING_ABOVE_FROM = 100  # ... and iomux-uring above the floor from this many sessions
IDLE = "+idle"  # the cost table's iomux-epoll echo server with its default idle timeout
ECHO_WATCHERS = "iomux-io"  # iomux's readiness watchers in libev's idiom: runs with the floor
URING_FLOOR = "raw-uring"  # the hand-written io_uring echo server: the io_uring floor
SERVER_BACKEND = {URING_FLOOR: "uring"}  # the kernel instance a built server must hold
SELECT_MAX_SESSIONS = 1000  # select's FD_SETSIZE (1024) less the server's own fds


def iomux_echo_servers(build, drivers_all):
    """The iomux echo server (examples/echo-server, at the top of the build) on every
    backend the build's iomux drivers name: ({server: spec}, [(name, why skipped)]). The
    servers are named after the drivers, so a baseline build's are <name>@base too."""
    servers, skipped = {}, []
    iomux = os.path.join(build, "echo-server")
    for name, d in sorted(drivers_all.items()):
        if d.get("family") != "iomux" or d.get("edge"):
            continue  # one echo server per backend: the edge-triggered drivers have none
        backend = plain(name).split("-", 1)[1]
        if not os.path.exists(iomux):
            skipped.append((name, f"{iomux} not built"))
        elif not d["available"]:
            skipped.append((f"echo {name}", d.get("reason", "unavailable")))
        else:
            # A pool as big as the largest session count: the peers' servers hold a buffer
            # per session, and a dry pool costs io_uring a failed receive per reader. No
            # idle timeout, as none of the peers' servers has one (the cost table adds a
            # row with the example's default, IDLE).
            identity = (f"examples/echo-server --pool {ECHO_POOL} --timeout 0, "
                        f"iomux backend {backend}")
            servers[name] = dict(cmd=[iomux, "--pool", str(ECHO_POOL), "--timeout", "0"],
                                 env={"IOMUX_BACKEND": backend},
                                 expect=f"(backend {backend})", backend=backend,
                                 identity=identity + (", baseline build"
                                                      if name.endswith(BASE) else ""))
    return servers, skipped


def with_idle_timeout(spec):
    """The spec of an iomux echo server with the example's default idle timeout (10 s): each
    read and write restarts the connection's timer, and the loop reads the clock at every
    iteration. For the cost table's row of what that costs."""
    cmd = list(spec["cmd"])
    i = cmd.index("--timeout")
    del cmd[i:i + 2]
    return dict(spec, cmd=cmd, identity=spec["identity"].replace(
        " --timeout 0,", " (its default idle timeout of 10 s),"))


def discover_echo(build, drivers_all):
    """Returns ({server: spec}, [(name, why skipped)], client path or None)."""
    manifest = os.path.join(build, "bench", "echo.txt")
    if not os.path.exists(manifest):
        return {}, [("echo", f"{manifest} not found: rebuild")], None
    servers, skipped = iomux_echo_servers(build, drivers_all)
    client = None
    for line in open(manifest):
        parts = line.rstrip("\n").split(" ", 2)
        if parts[0] == "client":
            client = os.path.join(build, "bench", parts[1])
        elif parts[0] == "skipped" and len(parts) == 3:
            skipped.append((f"echo {parts[1]}", parts[2]))
        elif parts[0] == "built" and len(parts) == 3:
            exe = os.path.join(build, "bench", parts[2])
            out = subprocess.run([exe, "--identify"], capture_output=True, text=True)
            if out.returncode != 0:
                log(f"run: FAIL echo server {parts[1]} does not reach the library it claims: "
                    f"{(out.stdout + out.stderr).strip()}")
                sys.exit(1)
            servers[parts[1]] = dict(cmd=[exe], env={}, expect=None,
                                     backend=SERVER_BACKEND.get(parts[1], "epoll"),
                                     identity=out.stdout.strip())
    if client and not os.path.exists(client):
        client = None
    return servers, skipped, client


def echo_order(names):
    rank = {"raw-epoll": 0, URING_FLOOR: 1, "iomux-epoll": 2, "iomux-uring": 3}  # +idle after
    return sorted(names, key=lambda d: (rank.get(plain(d).removesuffix(IDLE),
                                                 4 if d.startswith("iomux") else 5), d))



class EchoServer:
    """One echo server process: started, checked, and always stopped (context manager)."""

    def __init__(self, runner, name, block, strace_path=None, callgrind_out=None):
        self.runner, self.name, self.spec = runner, name, runner.echo_servers[name]
        cmd = self.spec["cmd"] + ["--port", "0", "--buffer", str(block)]
        if strace_path:
            cmd = [shutil.which("strace"), "-c", "-f", "-o", strace_path, "--"] + cmd
        elif callgrind_out:  # valgrind runs the server in its own process: same pid
            cmd = callgrind_cmd(callgrind_out) + cmd
        self.cmd = runner.pin(cmd, runner.echo_cpus[0])
        self.env_prefix = [f"{k}={v}" for k, v in self.spec["env"].items()]
        self.proc, self.pid, self.port, self.error = None, None, None, None
        self.strace, self.callgrind = bool(strace_path), bool(callgrind_out)
        self.stop_note, self.killed = None, False  # how a server under callgrind stopped

    def __enter__(self):
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=self.err,
                                     env=dict(os.environ, **self.spec["env"]))
        self.runner.live.add(self.proc)
        self.pid = self.proc.pid
        line = read_line(self.proc, 10)
        if line is None or not line.startswith("listening on 127.0.0.1:"):
            self.error = f"no 'listening on' line within 10 s: {self.stderr() or line}"
            return self
        self.port = int(line.split(":")[1].split()[0])
        if self.spec["expect"] and self.spec["expect"] not in line:
            self.error = f"wrong backend: '{line}', expected {self.spec['expect']}"
            return self
        if self.strace:  # the server is strace's child
            try:
                with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
                    self.pid = int(f.read().split()[0])
            except (OSError, IndexError, ValueError):
                self.error = "cannot find the traced server's pid"
                return self
        want = {"uring": "anon_inode:[io_uring]", "epoll": "anon_inode:[eventpoll]"}.get(
            self.spec["backend"])
        if want and want not in fd_kinds(self.pid):
            self.error = f"holds no {want}: not the mechanism it claims"
        return self

    def callgrind_stop(self, p):
        """Stops a server under callgrind that did not exit on SIGTERM. Valgrind holds
        signals back while the server sleeps in a system call it does not interrupt
        (io_uring_enter waiting for completions), so the signal stays pending; a dump
        requested with callgrind_control writes the counts so far and interrupts that call,
        after which the server sees the signal and exits. Killed if it still does not."""
        ctl = shutil.which("callgrind_control")
        if ctl:
            try:
                subprocess.run([ctl, "-d", str(p.pid)], capture_output=True, timeout=30)
            except subprocess.TimeoutExpired:
                pass
        self.stop_note = "did not exit on SIGTERM under valgrind: dumped with " \
            "callgrind_control -d, then exited"
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            self.killed = True
            self.stop_note = self.stop_note.replace("then exited", "then killed")

    def stderr(self):
        self.err.seek(0)
        lines = self.err.read().decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else ""

    def __exit__(self, *exc):
        p = self.proc
        if p.poll() is None:
            if self.pid != p.pid:  # traced: stop the server, strace then exits
                try:
                    os.kill(self.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            else:
                p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=1 if self.callgrind else 10)
            except subprocess.TimeoutExpired:
                if self.callgrind:
                    self.callgrind_stop(p)
                else:
                    p.kill()
                    p.wait()
                    self.error = self.error or "did not exit within 10 s of SIGTERM"
        elif not self.error:
            self.error = f"exited by itself during the run (status {p.returncode})"
        if p.returncode != 0 and not self.error and not self.killed:
            self.error = f"exit status {p.returncode} after SIGTERM: {self.stderr()}"
        self.runner.live.discard(p)
        p.stdout.close()
        self.err.close()
        return False


def echo_skip(name, sessions, servers):
    if servers[name]["backend"] == "select" and sessions > SELECT_MAX_SESSIONS:
        return "select cannot watch fds above FD_SETSIZE (1024)"
    return None


def run_echo_one(runner, name, sessions, cfg, rep, seconds=None, warmup=None,
                 strace_path=None, callgrind_out=None, study="echo", client_args=()):
    """Runs one cell; returns the client's RESULT dict, or None (failure recorded). With
    strace_path the server runs under strace -c -f, with callgrind_out under callgrind;
    client_args go to the client as well (--latency)."""
    seconds = cfg["seconds"] if seconds is None else seconds
    warmup = cfg["warmup"] if warmup is None else warmup
    what = f"{study} S={sessions:,} {name}"
    result, ccmd = None, None
    with EchoServer(runner, name, cfg["block"], strace_path, callgrind_out) as srv:
        if not srv.error:
            ccmd = runner.pin([runner.echo_client, "--port", str(srv.port), "--sessions",
                               str(sessions), "--block", str(cfg["block"]), "--seconds",
                               str(seconds), "--warmup", str(warmup), "--server-pid",
                               str(srv.pid)] + list(client_args), runner.echo_cpus[1])
            try:
                out = subprocess.run(ccmd, capture_output=True, text=True,
                                     timeout=seconds + warmup + 120)
                for line in out.stdout.splitlines():
                    if line.startswith("RESULT "):
                        result = json.loads(line[7:])
                starved_only = (result is not None and result["errors"] ==
                                result["idle_sessions"])
                if out.returncode != 0 and strace_path and starved_only:
                    pass  # counting calls: a traced server may be too slow to serve all
                elif out.returncode != 0:
                    fails = [l for l in out.stdout.splitlines() if l.startswith("FAIL")]
                    srv.error = "client: " + (fails[-1] if fails else (
                        out.stderr.strip() or f"exit status {out.returncode}").splitlines()[-1])
                    detail = [l for l in out.stderr.splitlines() if "error:" in l][:3]
                    if detail:
                        srv.error += " (" + "; ".join(detail) + ")"
                    result = None
                if result is None and not srv.error:
                    srv.error = "client printed no RESULT line"
            except subprocess.TimeoutExpired:
                srv.error = "client did not finish in time"
    server_cmd = " ".join(srv.env_prefix + [shlex.join(srv.cmd)])
    if srv.error:
        runner.failures.append((name, study, "tcp", sessions, srv.error,
                                server_cmd + " & " + shlex.join(ccmd or [])))
        end_line()
        log(f"  FAILED {what}: {srv.error}")
        return None
    result.update(study=study, transport="tcp", n=sessions, active=None, timeouts=None,
                  driver=name, rep=rep, cmd=shlex.join(ccmd), server_cmd=server_cmd)
    if srv.stop_note:
        result["server_stop"] = srv.stop_note
    return result


def echo_misses(t, sessions):
    """The cells where an iomux server misses its target, as (server, S, why)."""
    misses = []
    mb, cpu = t.get("mbps", {}), t.get("cpu_ms_per_mb", {})
    for s in sessions:
        m = mb.get("iomux-event-bev", {}).get(s)
        if m and m["ratio"] is not None and m["ratio"] < ECHO_BEV_TARGET:
            misses.append(("iomux-event-bev", s, f"MB/s {m['ratio']:.2f}x the floor "
                           f"(< {ECHO_BEV_TARGET})"))
    for drv in [d for d in echo_order(mb) if d in ("iomux-epoll", "iomux-uring")]:
        for s in sessions:
            m = mb.get(drv, {}).get(s)
            if not m:
                continue
            if m["ratio"] is not None and m["ratio"] < ECHO_TARGET:
                misses.append((drv, s, f"MB/s {m['ratio']:.2f}x the floor (< {ECHO_TARGET})"))
            if (drv == "iomux-uring" and s >= ECHO_URING_ABOVE_FROM and m["ratio"] is not None
                    and m["ratio"] <= 1.0):
                misses.append((drv, s, f"MB/s {m['ratio']:.2f}x the floor, not above it"))
            for peer in ECHO_PEERS:
                p = mb.get(peer, {}).get(s)
                if p and p["median"] >= m["median"]:
                    misses.append((drv, s, f"MB/s {m['median']:.0f} not ahead of {peer} "
                                   f"({p['median']:.0f})"))
                c, pc = cpu.get(drv, {}).get(s), cpu.get(peer, {}).get(s)
                if c and pc and pc["median"] <= c["median"]:
                    misses.append((drv, s, f"CPU {c['median']:.3f} ms/MB not below {peer} "
                                   f"({pc['median']:.3f})"))
    return misses


def floors_md(t, sessions):
    """The two floors against each other, and iomux-uring against the io_uring floor, from the
    timed runs (paired within each repetition): which mechanism is ahead at each S."""
    pairs = [(URING_FLOOR, FLOOR, "the io_uring floor over the epoll floor"),
             ("iomux-uring", URING_FLOOR, "iomux-uring over the io_uring floor")]
    lines = []
    for metric, better in (("mbps", "higher"), ("cpu_ms_per_mb", "lower")):
        byd = t.get(metric, {})
        for a, b, words in pairs:
            cells = []
            for s in sessions:
                x, y = byd.get(a, {}).get(s), byd.get(b, {}).get(s)
                st = ratio_stats(paired(x["byrep"], y["byrep"])) if x and y else None
                cells.append("—" if not st or st["ratio"] is None else
                             f"{st['ratio']:.2f}x ({st['rmin']:.2f}–{st['rmax']:.2f})")
            if any(c != "—" for c in cells):
                lines.append(f"| {words} | {metric_words(metric)[0]} ({better} is better) | "
                             + " | ".join(cells) + " |")
    if not lines:
        return []
    return ["### The two floors, and iomux-uring against the io_uring floor", "",
            f"`{URING_FLOOR}` is io_uring written by hand; `{FLOOR}` is epoll written by hand. "
            "Ratios paired within each repetition, as the tables above; the back-to-back pairs "
            "below settle them.", "",
            "| ratio | metric | " + " | ".join(f"S={s:,}" for s in sessions) + " |",
            "|---|---|" + "---|" * len(sessions)] + lines + [""]


def echo_reproduce(args, cfg, reps, names=None):
    cmd = ["bench/run", "--build", build_arg(args), "--study", "echo", "--sessions",
           ",".join(map(str, cfg["sessions"])), "--seconds", str(cfg["seconds"]),
           "--warmup", str(cfg["warmup"]), "--block", str(cfg["block"]), "--reps", str(reps),
           "--echo-cpus", ",".join(map(str, args.echo_cpus))] + baseline_arg(args)
    if names:
        cmd += ["--drivers", ",".join(names)]
    return shlex.join(cmd)


def echo_tables(tables):
    return {key[4]: t for key, t in tables.items() if key[0] == "echo"}


def echo_md(args, out, runner, tables, skips, cfg, reps, names, syscalls):
    t = echo_tables(tables)
    ss = cfg["sessions"]
    md = ["## Study 3: echo (Asio's CK Echo Test)", "",
          f"Server pinned to CPU {args.echo_cpus[0]}, client to CPU {args.echo_cpus[1]}; "
          f"{cfg['block']:,}-byte blocks; each session writes a block and waits for its whole "
          f"echo, every byte checked; {cfg['warmup']} s warm-up, then {cfg['seconds']} s timed, "
          f"{reps} repetitions with the servers in rotating order. Columns are sessions. "
          "1 MB = 10^6 bytes. Server CPU is its on-CPU time (schedstat) over the timed window.",
          "", "```", echo_reproduce(args, cfg, reps, names), "```", ""]
    mark_mb = lambda d, n, s: (d.startswith("iomux") and s["ratio"] is not None
                               and s["ratio"] < ECHO_TARGET)
    for metric, unit, title in METRICS["echo"]:
        if metric not in t:
            continue
        key = ("echo", "tcp", None, None, metric)
        md += [f"### {title} ({unit})", "", table_md(t[metric], ss, names, skips, key, False),
               ""]
        if metric == "server_cpu_pct":
            continue
        better = "higher" if metric == "mbps" else "lower"
        md += [f"Ratio to {FLOOR}, paired within each repetition ({better} is better):", "",
               table_md(t[metric], ss, names, skips, key, True,
                        mark_mb if metric == "mbps" else lambda d, n, s: False), ""]
    md += floors_md(t, ss)
    if "mbps" in t:
        def series(metric, field):
            return {d: [(n, s[field]) for n, s in byn.items() if s[field] is not None]
                    for d, byn in t.get(metric, {}).items()}
        xl = "Concurrent sessions, one TCP connection each (log scale)"
        mb_unit, mb_words = metric_words("mbps")
        cpu_unit, cpu_words = metric_words("cpu_ms_per_mb")
        if plot(os.path.join(out, "echo.png"), "Study 3 (echo over loopback TCP): "
                "throughput and the server's CPU cost",
                [(f"{mb_words} (higher is better)", series("mbps", "median"), mb_unit),
                 (f"{cpu_words} (lower is better)", series("cpu_ms_per_mb", "median"),
                  cpu_unit[:1].upper() + cpu_unit[1:])], xl, ylog=False,
                legend_title="server"):
            md += ["![echo](echo.png)", ""]
        if plot(os.path.join(out, "echo-ratios.png"), "Study 3 (echo): each server against "
                f"the hand-written epoll server ({FLOOR}), paired within each repetition",
                [("Throughput, ratio to the hand-written epoll loop (higher is better)",
                  series("mbps", "ratio"), f"MB/s over {FLOOR}'s MB/s"),
                 ("Server CPU per MB, ratio to the hand-written epoll loop (lower is better)",
                  series("cpu_ms_per_mb", "ratio"), f"CPU per MB over {FLOOR}'s")],
                xl, ylog=False, zero=False, ref=1.0, legend_title="server"):
            md += ["![echo ratios](echo-ratios.png)", ""]
    fair = {}
    for r in runner.records:
        if r.get("study") == "echo" and "min_session_echoes" in r:
            fair.setdefault((r["driver"], r["n"]), []).append(
                r["min_session_echoes"] / max(r["echoes"] / r["n"], 1e-9))
    if fair:
        md += ["### Fairness: echoes of the slowest session over the mean (1 = even)", "",
               "| server | " + " | ".join(f"{s:,}" for s in ss) + " |",
               "|---" * (len(ss) + 1) + "|"]
        for d in names:
            md.append(f"| {d} | " + " | ".join(
                f"{median(fair[(d, s)]):.2f}" if (d, s) in fair else "—" for s in ss) + " |")
        md.append("")
    for s, table in (syscalls or {}).items():
        calls = sorted({c for v in table.values() for c in v if c != "echoes"})
        md += [f"### Server system calls per echo (S={int(s):,})", "",
               "Counted with `strace -c -f` on the server over a 1.2 s run (accepts included), "
               "divided by the echoes completed; calls under 0.01 per echo are left out.", "",
               "| server | echoes | " + " | ".join(calls) + " |",
               "|---" * (len(calls) + 2) + "|"]
        for d in echo_order(table):
            md.append(f"| {d} | {table[d]['echoes']:,} | " + " | ".join(
                f"{table[d].get(c, 0):.2f}" for c in calls) + " |")
        md.append("")
    misses = echo_misses(t, ss)
    md += ["### iomux against its target", "",
           f"Target: every iomux server ahead of every peer in MB/s and in server CPU per MB "
           f"(medians), at least {ECHO_TARGET}x the floor's MB/s (paired), and iomux-uring "
           f"above the floor from {ECHO_URING_ABOVE_FROM} sessions up; libiomux-event's "
           f"bufferevent server (`iomux-event-bev`) at least {ECHO_BEV_TARGET}x the floor's "
           f"MB/s.", ""]
    md += [f"- missed: {d} S={s:,}: {why}" for d, s, why in misses] or ["- met in every cell"]
    md.append("")
    return md, [f"echo {d} S={s:,}: {why}" for d, s, why in misses]




def metric_words(metric):
    """(unit, title) of a metric in words, the title capitalised."""
    for m, unit, title in METRICS["echo"]:
        if m == metric:
            return unit, title[:1].upper() + title[1:]
    return metric, metric


def discover(ctx):
    """The echo servers and the client, found once per run for the echo study and the cost
    table: the runner's echo_servers and echo_client; returns what was skipped, and why."""
    runner = ctx.runner
    if getattr(ctx, "echo_found", None) is not None:
        return []
    servers, skipped, client = discover_echo(ctx.args.build_abs, ctx.main_drivers)
    base = {n: d for n, d in ctx.drivers.items() if n.endswith(BASE)}
    if base:  # the baseline's own examples/echo-server, found the same way
        more, why = iomux_echo_servers(ctx.args.baseline_abs, base)
        servers.update(more)
        skipped += why
    runner.echo_servers, runner.echo_client = servers, client
    runner.echo_cpus = ctx.args.echo_cpus
    ctx.echo_found = True
    return skipped


class Study(Base):
    """Study 3 and, after its own cells, its small-message variant (echo_small.py)."""
    NAME = "echo"
    TITLE = "3 (Asio's CK Echo Test)"
    NUMBERED = True
    MODES = MODES
    METRICS = METRICS

    def __init__(self, ctx):
        super().__init__(ctx)
        args, runner = self.args, self.runner
        self.skipped += discover(ctx)
        if not runner.echo_client:
            sys.exit(f"run: echo-client not built in {args.build_abs}/bench: build first")
        cfg = self.cfg
        if args.sessions:
            cfg["sessions"] = [int(v) for v in args.sessions.split(",")]
        for k in ("seconds", "warmup", "block"):
            if getattr(args, k) is not None:
                cfg[k] = getattr(args, k)
        self.reps = args.reps or cfg["reps"]
        self.names, self.left_out, want = [], [], ctx.want
        for n in echo_order(runner.echo_servers):
            if n.endswith(IDLE):
                continue
            if want:
                if n in want:
                    self.names.append(n)
            elif (cfg["backends"] is None or not n.startswith("iomux-")
                  or plain(n) == ECHO_WATCHERS or plain(n).split("-", 1)[1] in cfg["backends"]):
                self.names.append(n)
            else:
                self.left_out.append(n)
        self.syscalls = {}
        self.small = None
        if cfg.get("small") and self.names:
            scfg = dict(cfg["small"])
            if args.sessions:
                scfg["sessions"] = cfg["sessions"]
            self.small = echo_small.Study(runner, args, scfg, self.names, self.reps)
        self.uring = echo_uring.Pairs(runner, args, echo_uring.MODES[self.mode], self.names)

    def known(self):
        return set(self.runner.echo_servers)

    def why_not(self):
        return None if self.names else "no echo server can run"

    def banner(self):
        lines = [f"echo servers {', '.join(self.names)}; server on CPU {self.args.echo_cpus[0]}, "
                 f"client on CPU {self.args.echo_cpus[1]}"]
        if self.left_out:
            lines.append(f"  left out of the {self.mode} echo run: {', '.join(self.left_out)} "
                         f"(--full or --drivers runs them)")
        if self.small:
            lines.append(self.small.banner())
        if self.uring.banner():
            lines.append(self.uring.banner())
        return "\n".join(lines)

    def reproduce(self):
        return echo_reproduce(self.args, self.cfg, self.reps,
                              self.names if self.ctx.want else None)

    def schedule(self):
        cfg, names, cells = self.cfg, self.names, []
        for rep in range(self.reps):
            k = rep % len(names)
            order = names[k:] + names[:k]  # rotate so no server always runs first
            for s in cfg["sessions"]:
                for name in order:
                    cells.append(Cell(f"echo S={s:,} {name} (rep {rep + 1})",
                                      (cfg["seconds"] + cfg["warmup"]) * 0.8 + 0.3 + s / 8000,
                                      lambda s=s, name=name, rep=rep: self.run_one(name, s, rep)))
        if self.small:
            cells += self.small.schedule()
        cells += self.uring.schedule()
        if self.mode != "smoke" and not self.args.no_syscalls and cfg["strace"]:
            for s in cfg["strace"]:
                for name in names:
                    if not echo_skip(name, s, self.runner.echo_servers):
                        cells.append(Cell(f"strace echo S={s:,} {name}", 2.0 + s / 2000,
                                          lambda s=s, name=name: self.count_calls(name, s)))
        return cells

    def run_one(self, name, s, rep):
        runner = self.runner
        why = echo_skip(name, s, runner.echo_servers)
        if why:
            runner.records.append(dict(study="echo", transport="tcp", n=s, rep=rep,
                                       driver=name, active=None, skip=why))
            return
        r = run_echo_one(runner, name, s, self.cfg, rep)
        if r:
            runner.records.append(r)

    def count_calls(self, name, s):
        """System calls per echo of one server, counted with strace -c -f on the server
        over a short run (accepting S connections is included but small beside the
        echoes)."""
        if not shutil.which("strace"):
            self.syscalls_why = "strace not installed"
            return
        table = self.syscalls
        path = f"/tmp/iomux-bench-echo-strace-{os.getpid()}.txt"
        r = run_echo_one(self.runner, name, s, self.cfg, -1, seconds=1, warmup=0.2,
                         strace_path=path)
        if r and os.path.exists(path):
            calls = parse_strace(path)
            total = r["echoes_total"]
            table.setdefault(str(s), {})[name] = {
                c: v / total for c, v in calls.items() if v / total >= 0.01}
            table[str(s)][name]["echoes"] = total
        if os.path.exists(path):
            os.unlink(path)

    def facts(self):
        args, md = self.args, []
        govs = []
        for c in args.echo_cpus:
            g = f"/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"
            govs.append(f"CPU {c}" + (f" ({open(g).read().strip()})" if os.path.exists(g)
                                      else ""))
        md.append(("echo: server, client pinned to", f"{govs[0]}, {govs[1]}"))
        for name in echo_order(self.names):
            srv = self.runner.echo_servers[name]
            env = "".join(f"{k}={v} " for k, v in srv["env"].items())
            exe = os.path.relpath(srv["cmd"][0], args.build_abs)
            exe = shown_path(srv["cmd"][0]) if exe.startswith("..") else exe
            md.append((f"echo server {name}", f"{srv['identity']} (`{env}{exe}`)"))
        return md

    def report_md(self, out):
        ctx = self.ctx
        md, missed = echo_md(self.args, out, self.runner, ctx.tables, ctx.skips, self.cfg,
                             self.reps, self.names, self.syscalls)
        umd, umissed = self.uring.report_md()
        md += umd
        missed += umissed
        if self.small:
            smd, smissed = self.small.report_md(out)
            md += smd
            missed += smissed
        return md, missed

    def print_tables(self):
        et = echo_tables(self.ctx.tables)
        for metric in ("mbps", "cpu_ms_per_mb"):
            if metric in et:
                key = ("echo", "tcp", None, None, metric)
                log(f"\necho {metric} (columns: sessions)")
                log(table_md(et[metric], self.cfg["sessions"], self.names, self.ctx.skips,
                             key, False))
                log(table_md(et[metric], self.cfg["sessions"], self.names, self.ctx.skips,
                             key, True, lambda d, n, s: False))
        self.uring.print_tables()
        if self.small:
            self.small.print_tables()

    def smoke_summary(self):
        echoes = [r for r in self.runner.records
                  if r.get("study") == "echo" and "echoes_total" in r]
        mb = sum(r["echoes_total"] * r["block"] for r in echoes) / 1e6
        lines = [f"echo: {len(echoes)} runs, {mb:,.0f} MB echoed and every byte checked; "
                 f"servers run: {', '.join(self.names)}"]
        return lines + (self.small.smoke_summary() if self.small else []) + \
            self.uring.smoke_summary()

    def json_parts(self):
        out = {"echo_syscalls": self.syscalls}
        if self.small:
            out[self.small.NAME] = self.small.json()
        out[self.uring.NAME] = self.uring.json()
        return out

    def baseline_blocks(self):
        return [(("echo", "tcp", None, None, metric), self.cfg["sessions"], "S")
                for metric in BASE_METRICS]
