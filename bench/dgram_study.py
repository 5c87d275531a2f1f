# SPDX-License-Identifier: MIT
"""The datagram study (bench/README.md, "The datagram study"): a UDP echo, as a QUIC or game
server's traffic is, with 64-byte and 1,200-byte (QUIC-sized) datagrams and 1 and 100 peers.
The servers (bench/dgram/): the floor written by hand with epoll, recvmmsg and sendmmsg
(`raw`), iomux's mux_udp_t on epoll and on io_uring, libuv's uv_udp_t (recvmmsg,
uv_udp_try_send) and Boost.Asio's udp::socket (async_receive_from, async_send_to). The client
(dgram-client) keeps a window of datagrams in flight per peer, sends each peer's window with
UDP GSO (--dgram-send mmsg: one sendmmsg message per datagram, the first way), checks every
echo, and reads the server's on-CPU time and its own over the timed window.

Reported: datagrams per second, the server's CPU time per datagram, and the loss; each
server's ratios to the floor, paired within a repetition (the servers of a repetition run one
right after the other, in an order that rotates). The targets, for iomux on epoll and on
io_uring: at least 0.97x the floor's datagrams per second, and ahead of libuv and Asio in
datagrams per second and in CPU per datagram."""
import json
import os
import shlex
import signal
import statistics
import subprocess
import tempfile

import benchlib as h
from benchlib import Cell, Study as Base, log, median, read_line

FLOOR = "raw"
HELD = ("iomux-epoll", "iomux-uring")
PEERS = ("libuv", "asio")
TARGET = 0.97
ORDER = ["raw", "iomux-epoll", "iomux-uring", "libuv", "asio"]
MODES = {
    "smoke": dict(sizes=[64], peers=[1], seconds=0.5, warmup=0.2, reps=1, pairs=0),
    "quick": dict(sizes=[64, 1200], peers=[1, 100], seconds=0.5, warmup=0.3, reps=1, pairs=2,
                  pair_seconds=0.5, pair_warmup=0.2, pair_sizes=[64]),
    "full": dict(sizes=[64, 1200], peers=[1, 100], seconds=3.0, warmup=1.0, reps=5, pairs=15,
                 pair_seconds=1.0, pair_warmup=0.3),
}
SENDS = ("gso", "mmsg")
LIMITED = 90  # a server below this CPU share while the client is above it: the client's cell
METRICS = [("dps", "datagrams/s", "Datagrams per second", True),
           ("cpu_ns_per_dgram", "ns", "Server CPU per datagram", False),
           ("loss_pct", "%", "Lost", None)]


def window_for(peers):
    """Datagrams in flight per peer: 256 in all, at least 2 per peer."""
    return max(2, 256 // peers)


def discover(build):
    """({server: spec}, [(name, why skipped)], client path or None) from bench/dgram.txt."""
    manifest = os.path.join(build, "bench", "dgram.txt")
    if not os.path.exists(manifest):
        return {}, [("dgram", f"{manifest} not found: rebuild")], None
    servers, skipped, client = {}, [], None
    for line in open(manifest):
        parts = line.rstrip("\n").split(" ", 2)
        if parts[0] == "client":
            client = os.path.join(build, "bench", parts[1])
        elif parts[0] == "skipped" and len(parts) == 3:
            skipped.append((f"dgram {parts[1]}", parts[2]))
        elif parts[0] == "built" and len(parts) == 3:
            exe = os.path.join(build, "bench", parts[2])
            out = subprocess.run([exe, "--identify"], capture_output=True, text=True)
            if out.returncode != 0:
                skipped.append((f"dgram {parts[1]}", "does not reach the library it claims: " +
                                (out.stdout + out.stderr).strip()))
                continue
            ident = out.stdout.strip()
            if parts[1] == "iomux":  # one per backend, checked by the line it prints
                for b in ("epoll", "uring"):
                    servers[f"iomux-{b}"] = dict(cmd=[exe], env={"IOMUX_BACKEND": b},
                                                 expect=f"backend {b}", identity=ident)
            else:
                servers[parts[1]] = dict(cmd=[exe], env={}, expect=None, identity=ident)
    if client and not os.path.exists(client):
        client = None
    return servers, skipped, client


class Server:
    """One server process: started, its port read, always stopped (context manager)."""

    def __init__(self, runner, spec, cpu):
        self.cmd = runner.pin(spec["cmd"] + ["--port", "0"], cpu)
        self.spec, self.runner = spec, runner
        self.proc, self.port, self.error = None, None, None

    def __enter__(self):
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=self.err,
                                     env=dict(os.environ, **self.spec["env"]),
                                     preexec_fn=h.own_group(self.runner.args.group_nice))
        self.runner.live.add(self.proc)
        line = read_line(self.proc, 10)
        if line is None or not line.startswith("listening on 127.0.0.1:"):
            self.error = f"no 'listening on' line within 10 s ({line})"
        elif self.spec["expect"] and self.spec["expect"] not in line:
            self.error = f"wrong backend: '{line}', expected {self.spec['expect']}"
        else:
            self.port = int(line.split(":")[1].split()[0])
        return self

    def __exit__(self, *exc):
        p = self.proc
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                self.error = self.error or "did not exit within 10 s of SIGTERM"
        elif not self.error:
            self.error = f"exited by itself during the run (status {p.returncode})"
        if p.returncode not in (0, -signal.SIGKILL) and not self.error:
            self.err.seek(0)
            self.error = f"exit status {p.returncode}: " + self.err.read().decode(
                errors="replace").strip()[-200:]
        self.runner.live.discard(p)
        p.stdout.close()
        self.err.close()
        return False


class Study(Base):
    NAME = "dgram"
    TITLE = "the datagram study (a UDP echo: QUIC- and game-server traffic)"
    MODES = MODES

    def __init__(self, ctx):
        super().__init__(ctx)
        args, cfg = self.args, self.cfg
        self.servers, skipped, self.client = discover(args.build_abs)
        self.skipped += skipped
        if getattr(args, "dgram_sizes", None):
            cfg["sizes"] = [int(v) for v in args.dgram_sizes.split(",")]
        if getattr(args, "peers", None):
            cfg["peers"] = [int(v) for v in args.peers.split(",")]
        for k in ("seconds", "warmup"):
            if getattr(args, k, None) is not None:
                cfg[k] = getattr(args, k)
        if getattr(args, "pairs", None) is not None:
            cfg["pairs"] = args.pairs
        cfg["send"] = getattr(args, "dgram_send", None) or SENDS[0]
        self.reps = args.reps or cfg.get("reps", 1)
        want = ctx.want
        self.names = [n for n in ORDER if n in self.servers and (not want or n in want)]
        self.results = []
        self.cpus = args.echo_cpus

    @classmethod
    def options(cls, parser):
        parser.add_argument("--dgram-sizes", help="dgram: comma list of datagram sizes in "
                            "bytes (default 64,1200)")
        parser.add_argument("--peers", help="dgram: comma list of peer counts (default 1,100)")
        parser.add_argument("--pairs", type=int, help="dgram: back-to-back pairs per row "
                            "(default: quick 3, full 15)")
        parser.add_argument("--dgram-send", choices=SENDS, help="dgram: how the client sends "
                            "a peer's window: gso (default), one send cut into datagrams by "
                            "UDP_SEGMENT; mmsg, one sendmmsg message per datagram")

    def known(self):
        return set(ORDER)

    def why_not(self):
        if h.group_nice_why(self.args):
            return h.group_nice_why(self.args)
        if not self.client:
            return "dgram-client not built (rebuild with the benchmarks on)"
        return None if self.names else "no datagram server built"

    def banner(self):
        return (f"datagram study: UDP echo of {', '.join(map(str, self.cfg['sizes']))}-byte "
                f"datagrams, {', '.join(map(str, self.cfg['peers']))} peers, servers "
                f"{', '.join(self.names)}, {self.reps} repetitions")

    def reproduce(self):
        cmd = ["bench/run", "--build", h.build_arg(self.args), "--study", "dgram"]
        cmd += h.mode_arg(self.args)
        cmd += ["--reps", str(self.reps), "--dgram-sizes", ",".join(map(str, self.cfg["sizes"])),
                "--peers", ",".join(map(str, self.cfg["peers"])), "--seconds",
                str(self.cfg["seconds"]), "--warmup", str(self.cfg["warmup"]),
                "--echo-cpus", ",".join(map(str, self.cpus))]
        if self.cfg.get("pairs"):
            cmd += ["--pairs", str(self.cfg["pairs"])]
        if self.args.group_nice:
            cmd += ["--group-nice", str(self.args.group_nice)]
        if self.cfg["send"] != SENDS[0]:
            cmd += ["--dgram-send", self.cfg["send"]]
        return shlex.join(cmd)

    def pair_others(self):
        """The servers each iomux server is paired with: the floor, and the peers."""
        return [o for o in (FLOOR,) + PEERS if o in self.names]

    def schedule(self):
        cells = self.timed_cells()
        k = self.cfg.get("pairs", 0)
        self.pairs = []
        for size in self.pair_sizes():
            for peers in self.cfg["peers"]:
                for held in (x for x in HELD if x in self.names):
                    for other in self.pair_others():
                        got = dict(size=size, peers=peers, held=held, other=other, runs=[])
                        self.pairs.append(got)
                        for i in range(k):
                            cells.append(Cell(
                                f"dgram {size} B, {peers} peers, {held} / {other} (pair {i + 1})",
                                2 * (self.cfg["pair_seconds"] + self.cfg["pair_warmup"]) + 0.1,
                                lambda g=got, i=i: self.pair(g, i)))
        return cells

    def pair_sizes(self):
        """The sizes whose rows get back-to-back pairs: the quick run pairs one size only
        (the timed runs cover both); every size if --dgram-sizes names none of them."""
        want = self.cfg.get("pair_sizes")
        got = [s for s in self.cfg["sizes"] if not want or s in want]
        return got or self.cfg["sizes"]

    def pair(self, got, i):
        """The iomux server and another, one right after the other (the first alternating)."""
        first, second = (got["held"], got["other"]) if i % 2 == 0 else (got["other"], got["held"])
        r = {}
        for name in (first, second):
            r[name] = self.run_one(name, got["size"], got["peers"], i, keep=False,
                                   seconds=self.cfg["pair_seconds"],
                                   warmup=self.cfg["pair_warmup"])
        if r[first] and r[second]:
            got["runs"].append((r[got["held"]], r[got["other"]]))

    def timed_cells(self):
        cells = []
        for rep in range(self.reps):
            k = rep % len(self.names)
            order = self.names[k:] + self.names[:k]
            for size in self.cfg["sizes"]:
                for peers in self.cfg["peers"]:
                    for name in order:
                        cells.append(Cell(
                            f"dgram {size} B, {peers} peers, {name} (rep {rep + 1})",
                            self.cfg["seconds"] + self.cfg["warmup"] + 0.5,
                            lambda n=name, s=size, p=peers, r=rep: self.run_one(n, s, p, r)))
        return cells

    def run_one(self, name, size, peers, rep, keep=True, seconds=None, warmup=None):
        """One run; a run in which the client heard no echo at all is run once more, and the
        result says so (`retried`): on a machine at a load of 14-18 a quick run's first pair
        cell twice heard nothing from a server that had said it was listening, and took no
        CPU, while the same cell run again, and by hand, echoed as usual."""
        result, first = self.try_one(name, size, peers, rep, keep, seconds, warmup, last=False)
        if result is None and first:
            h.end_line()
            h.log(f"  dgram {name} {size} B {peers} peers: no echo ({first}); run once more")
            result, _ = self.try_one(name, size, peers, rep, keep, seconds, warmup, last=True)
            if result is not None:
                result["retried"] = first
        return result

    def try_one(self, name, size, peers, rep, keep, seconds, warmup, last):
        """(result, None), or (None, why) when the client heard nothing and `last` is false,
        or (None, None) after recording the failure."""
        spec = self.servers[name]
        result, ccmd = None, None
        seconds = self.cfg["seconds"] if seconds is None else seconds
        warmup = self.cfg["warmup"] if warmup is None else warmup
        with Server(self.runner, spec, self.cpus[0]) as srv:
            if not srv.error:
                ccmd = self.runner.pin(
                    [self.client, "--port", str(srv.port), "--size", str(size), "--peers",
                     str(peers), "--window", str(window_for(peers)), "--seconds",
                     str(seconds), "--warmup", str(warmup), "--send", self.cfg["send"],
                     "--server-pid", str(srv.proc.pid)], self.cpus[1])
                try:
                    out = subprocess.run(ccmd, capture_output=True, text=True,
                                         timeout=seconds + warmup + 60,
                                         preexec_fn=h.own_group(self.args.group_nice))
                    for line in out.stdout.splitlines():
                        if line.startswith("RESULT "):
                            result = json.loads(line[7:])
                    if out.returncode != 0 or result is None:
                        srv.error = "client: " + (out.stdout + out.stderr).strip()[-200:]
                        result = None
                except subprocess.TimeoutExpired:
                    srv.error = "client did not finish in time"
        server_cmd = " ".join([f"{k}={v}" for k, v in spec["env"].items()] + [shlex.join(srv.cmd)])
        if srv.error:
            if not last and "no echo in the timed window" in srv.error:
                return None, srv.error
            self.runner.fail(name, "dgram", f"{size} B", peers, srv.error,
                             server_cmd + " & " + shlex.join(ccmd or []))
            return None, None
        result.update(driver=name, rep=rep, cmd=shlex.join(ccmd), server_cmd=server_cmd)
        if keep:
            self.results.append(result)
        return result, None

    # ---- report ---------------------------------------------------------------------

    def cells(self):
        """{(size, peers): {server: {rep: result}}}."""
        got = {}
        for r in self.results:
            got.setdefault((r["size"], r["peers"]), {}).setdefault(r["driver"], {})[r["rep"]] = r
        return got

    @staticmethod
    def paired_ratio(mine, theirs, metric):
        """The median over repetitions of mine/theirs, both {rep: result}; None if none."""
        r = [mine[k][metric] / theirs[k][metric] for k in mine
             if k in theirs and theirs[k][metric] > 0]
        return (statistics.median(r), min(r), max(r), len(r)) if r else None

    def rows(self):
        out = []
        for (size, peers), by in sorted(self.cells().items()):
            floor = by.get(FLOOR, {})
            for name in self.names:
                if name not in by:
                    continue
                reps = by[name]
                row = dict(size=size, peers=peers, name=name, n=len(reps))
                for metric, _, _, _ in METRICS:
                    row[metric] = median([r[metric] for r in reps.values()])
                row["dps_ratio"] = self.paired_ratio(reps, floor, "dps") if floor else None
                row["cpu_ratio"] = self.paired_ratio(reps, floor, "cpu_ns_per_dgram") \
                    if floor else None
                row["client_cpu"] = median([r["client_cpu_pct"] for r in reps.values()])
                row["server_cpu"] = median([r["server_cpu_pct"] for r in reps.values()])
                out.append(row)
        return out

    @staticmethod
    def client_limited(rows):
        """The rows whose server was on its CPU less than LIMITED% of the window while the
        client was on its own more: the client set the rate there, not the server."""
        return [r for r in rows if r["server_cpu"] < LIMITED <= r["client_cpu"]]

    def client_limited_md(self, rows):
        got = self.client_limited(rows)
        if not got:
            return ["", f"In every row the server was on its CPU at least {LIMITED}% of the "
                    "window (the median over repetitions), or the client was not: no row's rate "
                    "was set by the client."]
        names = "; ".join(f"{r['size']} B, {r['peers']} peers, {r['name']} (server "
                          f"{r['server_cpu']:.0f}%, client {r['client_cpu']:.0f}%)" for r in got)
        return ["", f"**Client-limited** (the server below {LIMITED}% of its CPU, the client "
                f"above): {names}. There the rate measures the client, and the ratios of "
                "datagrams per second do not compare the servers."]

    def pair_rows(self):
        """The back-to-back pairs' ratios: [(size, peers, held, other, metric, n, median,
        interval, verdict)]. Datagrams per second against the floor: at least TARGET;
        against a peer, ahead (above 1); CPU per datagram: below the other's (the floor:
        at most 1 / TARGET)."""
        out = []
        for p in getattr(self, "pairs", []):
            if not p["runs"]:
                continue
            for metric, higher in (("dps", True), ("cpu_ns_per_dgram", False)):
                ratios = [a[metric] / b[metric] for a, b in p["runs"] if b[metric] > 0]
                if not ratios:
                    continue
                med = statistics.median(ratios)
                ci = h.median_interval(ratios)
                peer = p["other"] != FLOOR
                target = 1.0 if peer else TARGET if higher else 1 / TARGET
                v = h.verdict(med, ci, target, higher)
                if peer:
                    side = "ahead" if v.startswith("met") else "behind"
                    v = side if v in ("met", "missed") else f"{side} on the median, a tie " \
                        "within the noise"
                out.append((p["size"], p["peers"], p["held"], p["other"], metric, len(ratios),
                            med, ci, v))
        return out

    def verdicts(self):
        """[(size, peers, server, what, value, verdict)] for the targets."""
        got, v = self.cells(), []
        for (size, peers), by in sorted(got.items()):
            for held in HELD:
                if held not in by:
                    continue
                if FLOOR in by:
                    r = self.paired_ratio(by[held], by[FLOOR], "dps")
                    if r:
                        v.append((size, peers, held, "datagrams/s over the floor's", r[0],
                                  "met" if r[0] >= TARGET else "missed"))
                for peer in PEERS:
                    if peer not in by:
                        continue
                    for metric, word, higher in (("dps", "datagrams/s", True),
                                                 ("cpu_ns_per_dgram", "CPU per datagram", False)):
                        r = self.paired_ratio(by[held], by[peer], metric)
                        if r:
                            ahead = r[0] > 1 if higher else r[0] < 1
                            v.append((size, peers, held, f"{word} over {peer}'s", r[0],
                                      "ahead" if ahead else "behind"))
        return v

    def report_md(self, out):
        rows = self.rows()
        if not rows:
            return [], []
        md = ["## The datagram study: a UDP echo", "",
              "Each server echoes every datagram to its sender, on 127.0.0.1, pinned to CPU "
              f"{self.cpus[0]}; the client (`dgram-client --send {self.cfg['send']}`, CPU "
              f"{self.cpus[1]}) keeps 256 datagrams in flight in all (at least 2 per peer) and "
              "checks every echo. "
              f"{self.cfg['warmup']} s warm-up, {self.cfg['seconds']} s timed, {self.reps} "
              "repetitions in a rotating order; medians, and ratios to the floor (`raw`: epoll, "
              "recvmmsg and sendmmsg by hand) paired within each repetition (median, and the "
              "range over repetitions). CPU per datagram is the server's on-CPU time over the "
              "window divided by the datagrams echoed in it.", "",
              f"Reproduce: `{self.reproduce()}`", "",
              "| size | peers | server | datagrams/s | × floor | CPU ns/datagram | × floor | lost | "
              "server CPU | client CPU |", "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            def ratio(x):
                return "—" if not x else f"{x[0]:.3f} ({x[1]:.2f}–{x[2]:.2f})"
            md.append(f"| {r['size']} | {r['peers']} | {r['name']} | {h.fmt_num(r['dps'])} | "
                      f"{ratio(r['dps_ratio'])} | {h.fmt_num(r['cpu_ns_per_dgram'])} | "
                      f"{ratio(r['cpu_ratio'])} | {r['loss_pct']:.2f}% | {r['server_cpu']:.0f}% | "
                      f"{r['client_cpu']:.0f}% |")
        md += self.client_limited_md(rows)
        busy = [r for r in self.results if r["server_cpu_pct"] < 80 and r["client_cpu_pct"] < 80]
        if self.results and len(busy) * 2 > len(self.results):
            md += ["", f"In {len(busy)} of {len(self.results)} timed runs neither the server nor "
                   "the client was on its CPU 80% of the window, with datagrams in flight all "
                   "along: both waited for a CPU (a machine busy with other work). Datagrams per "
                   "second then measure the scheduler more than the server, and the CPU per "
                   "datagram, on-CPU time only, is the figure to compare."]
        md += ["", "### The targets: iomux at least 0.97x the floor, and ahead of libuv and Asio",
               "", "| size | peers | server | against | ratio | verdict |",
               "|---:|---:|---|---|---:|---|"]
        missed = []
        limited = {(r["size"], r["peers"]) for r in self.client_limited(rows)}
        for size, peers, held, what, val, verdict in self.verdicts():
            note = " (a client-limited cell)" if (size, peers) in limited else ""
            md.append(f"| {size} | {peers} | {held} | {what} | {val:.3f} | {verdict}{note} |")
            if verdict in ("missed", "behind"):
                missed.append(f"dgram {size} B, {peers} peers: {held} {what} {val:.3f}")
        prs = self.pair_rows()
        if prs:
            md += ["", "### Back-to-back pairs against the floor and the peers", "",
                   f"{self.cfg['pairs']} pairs per row, of "
                   f"{', '.join(map(str, self.pair_sizes()))}-byte datagrams "
                   f"({self.cfg['pair_warmup']} s warm-up, "
                   f"{self.cfg['pair_seconds']} s timed), the iomux server and the other one "
                   "right after the other, the first alternating; the ratio is the iomux "
                   "server's over the other's, the median over the pairs with a "
                   "distribution-free interval. Datagrams per second: higher is better, the "
                   f"floor's target {TARGET}x; CPU per datagram: lower is better.", "",
                   "| size | peers | server | against | metric | pairs | ratio | interval | "
                   "verdict |", "|---:|---:|---|---|---|---:|---:|---|---|"]
            for size, peers, held, other, metric, n, med, ci, v in prs:
                iv = f"{ci[0]:.3f}–{ci[1]:.3f} ({ci[2] * 100:.0f}%)" if ci else "—"
                word = "datagrams/s" if metric == "dps" else "CPU/datagram"
                md.append(f"| {size} | {peers} | {held} | {other} | {word} | {n} | {med:.3f} | "
                          f"{iv} | {v} |")
                if v.startswith("missed") or v.startswith("behind"):
                    missed.append(f"dgram pairs {size} B, {peers} peers: {held} {word} against "
                                  f"{other} {med:.3f} ({v})")
        if self.mode == "quick":
            md = h.mark_quick(md)
        return md + [""], missed

    def print_tables(self):
        for size, peers, held, other, metric, n, med, ci, v in self.pair_rows():
            log(f"dgram pairs {size:>5} B {peers:>4} peers {held:<12} / {other:<6} "
                f"{'dgrams/s' if metric == 'dps' else 'CPU/dgram':<10} {med:.3f} ({n} pairs): {v}")
        for r in self.rows():
            dr = r["dps_ratio"][0] if r["dps_ratio"] else float("nan")
            limited = "  CLIENT-LIMITED" if r in self.client_limited([r]) else ""
            log(f"dgram {r['size']:>5} B {r['peers']:>4} peers {r['name']:<12} "
                f"{r['dps']:>10,.0f} dgrams/s ({dr:.3f}x floor)  "
                f"{r['cpu_ns_per_dgram']:>7,.0f} ns CPU/dgram  lost {r['loss_pct']:.2f}%  "
                f"CPU server {r['server_cpu']:.0f}% client {r['client_cpu']:.0f}%{limited}")

    def smoke_summary(self):
        return [f"dgram: {len(self.results)} runs of {', '.join(self.names)}, every echo checked"]

    def json(self):
        return dict(results=self.results, pairs=getattr(self, "pairs", []), verdicts=[
            dict(size=s, peers=p, server=n, what=w, ratio=v, verdict=d)
            for s, p, n, w, v, d in self.verdicts()])

    def facts(self):
        got = [(f"dgram server {n}", self.servers[n]["identity"]) for n in self.names]
        got.append(("dgram client", f"dgram-client --send {self.cfg['send']}"))
        return got + [("dgram scheduling", h.group_nice_fact(self.args))]
