# SPDX-License-Identifier: MIT
"""The small-message echo and the ping-pong, run by bench/run beside the echo study (study
3; bench/README.md, "Small messages and ping-pong"). The echo study's 16 KB blocks measure
mostly the kernel's copy; with 128-byte blocks the loop's own cost shows. Every echo server
of the echo study (the hand-written epoll floor, iomux, libev, libevent, libuv, Asio, ...)
runs with the same client, `echo-client --block 128 --latency`: echoes per second, the
server's CPU time per echo, and every echo's round trip timed (median and 99th
percentile). At one session that is the ping-pong: one message in flight, its round trip
the latency the loop adds. Same method as the echo study: the server pinned to one CPU, the
client to the other, a fresh server per run, rotating order, ratios to the floor paired
within each repetition.

Then back-to-back pairs: the runs of a repetition are seconds apart and this machine's speed
drifts by tens of percent over seconds, which is more than the differences the target is
about. So iomux-epoll and each of the floor and the peers also run as K pairs of shorter
runs, one right after the other (the first alternating), at every S; a pair's ratio is
iomux-epoll's echoes per second over the other's (and its median round trip over the
other's), reported as the median over the pairs with a distribution-free interval
(bench/settle_study.py). Against the floor the target is 0.97x; against a peer, ahead: an
interval that holds 1.00 is a tie within the noise, on the side its median is.

The echo study (echo_study.py) runs it after its own cells: its cells, report section and
tables are part of that study's; the shared helpers come from benchlib.py."""
import shlex
import statistics

import benchlib as h
import echo_study
from benchlib import Cell, median_interval, verdict

FLOOR = "raw-epoll"
TARGET = 0.97  # iomux-epoll over the floor: echoes/s, and the floor's round trip over its own
HELD = "iomux-epoll"  # the server the target is for
PEERS = ["libev", "libevent", "libuv", "asio"]
METRICS = [("eps", "echoes/s", "Echoes per second", "higher"),
           ("cpu_us_per_echo", "µs", "Server CPU per echo", "lower"),
           ("rtt_us_p50", "µs", "Round trip, median", "lower"),
           ("rtt_us_p99", "µs", "Round trip, 99th percentile", "lower"),
           ("server_cpu_pct", "% of one CPU", "Server CPU use", None)]


class Study:
    NAME = "echo-small"

    def __init__(self, runner, args, cfg, names, reps):
        self.runner, self.args, self.cfg = runner, args, cfg
        self.names, self.reps = names, reps
        self.sessions = cfg["sessions"]
        self.results, self.skipped = [], []
        self.k = cfg.get("pairs", 0)  # back-to-back pairs per comparison (0: none)
        self.others = [o for o in [FLOOR] + PEERS if HELD in names and o in names]
        self.pairs = []  # {other, S, eps: [(mine, theirs)], rtt: [(mine, theirs)]}

    def banner(self):
        return (f"small-message echo ({self.cfg['block']}-byte blocks, round trips timed; "
                f"S = {', '.join(f'{s:,}' for s in self.sessions)}; S = 1 is the ping-pong)")

    def reproduce(self):
        build = self.args.build
        cmd = ["bench/run", "--build", build, "--study", "echo"]
        cmd += h.mode_arg(self.args)
        cmd += ["--reps", str(self.reps), "--echo-cpus", ",".join(map(str, self.args.echo_cpus))]
        if self.args.drivers:
            cmd += ["--drivers", ",".join(self.names)]
        return shlex.join(cmd) + "   # the echo study runs this variant after its own"

    def schedule(self):
        """The timed runs (every server once per session count in each repetition), then
        the back-to-back pairs."""
        cfg = dict(block=self.cfg["block"], seconds=self.cfg["seconds"],
                   warmup=self.cfg["warmup"])
        cells = []
        for rep in range(self.reps):
            k = rep % len(self.names)
            order = self.names[k:] + self.names[:k]
            for s in self.sessions:
                for name in order:
                    cells.append(Cell(f"echo {cfg['block']} B S={s:,} {name} (rep {rep + 1})",
                                      (cfg["seconds"] + cfg["warmup"]) * 0.8 + 0.3 + s / 8000,
                                      lambda s=s, name=name, rep=rep: self.run_one(
                                          name, s, cfg, rep)))
        pcfg = dict(block=self.cfg["block"], seconds=self.cfg["pair_seconds"],
                    warmup=self.cfg["pair_warmup"])
        for s in self.sessions:
            for other in self.others:
                got = dict(other=other, S=s, eps=[], rtt=[])
                self.pairs.append(got)
                for i in range(self.k):
                    cells.append(Cell(f"echo {pcfg['block']} B S={s:,} {HELD} / {other} "
                                      f"(pair {i + 1})",
                                      2 * ((pcfg["seconds"] + pcfg["warmup"]) * 0.8 + s / 8000),
                                      lambda s=s, got=got, i=i: self.pair(got, s, pcfg, i)))
        return cells

    def run_one(self, name, s, cfg, rep):
        if echo_study.echo_skip(name, s, self.runner.echo_servers):
            return
        r = echo_study.run_echo_one(self.runner, name, s, cfg, rep, study=self.NAME,
                                    client_args=["--latency"])
        if r:
            self.results.append(r)

    def pair(self, got, s, cfg, i):
        """iomux-epoll and another server, one right after the other."""
        other = got["other"]
        if echo_study.echo_skip(HELD, s, self.runner.echo_servers) or \
                echo_study.echo_skip(other, s, self.runner.echo_servers):
            return
        first, second = (HELD, other) if i % 2 == 0 else (other, HELD)
        r = {}
        for name in (first, second):
            r[name] = echo_study.run_echo_one(self.runner, name, s, cfg, i,
                                              study=self.NAME + "-pairs",
                                              client_args=["--latency"])
        if r[HELD] and r[other]:
            got["eps"].append((r[HELD]["eps"], r[other]["eps"]))
            if r[HELD].get("rtt_us_p50") and r[other].get("rtt_us_p50"):
                got["rtt"].append((r[HELD]["rtt_us_p50"], r[other]["rtt_us_p50"]))

    @staticmethod
    def pair_verdict(ratios, target, higher, peer):
        """For echoes/s (higher) or a round trip (lower): against the floor, settle_study's
        verdict on the target ratio; against a peer (target 1.0), ahead or behind, or a tie
        within the noise (on the median's side) where the interval holds 1.0."""
        med = statistics.median(ratios)
        ci = median_interval(ratios)
        v = verdict(med, ci, target, higher)
        if peer:
            side = "ahead" if v.startswith("met") else "behind"
            v = side if v in ("met", "missed") else f"{side} on the median, a tie within the noise"
        return med, ci, v

    def pair_rows(self):
        rows = []
        for p in self.pairs:
            for metric, pairs, higher in (("echoes/s", p["eps"], True),
                                          ("median round trip", p["rtt"], False)):
                if not pairs or (metric != "echoes/s" and p["S"] != 1):
                    continue  # round trips are the ping-pong's (S = 1) target
                ratios = [a / b for a, b in pairs]
                peer = p["other"] != FLOOR
                target = 1.0 if peer else TARGET if higher else 1 / TARGET
                med, ci, v = self.pair_verdict(ratios, target, higher, peer)
                rows.append(dict(other=p["other"], S=p["S"], metric=metric, n=len(ratios),
                                 med=med, ci=ci, target=target, verdict=v))
        return rows

    def pairs_md(self):
        rows = self.pair_rows()
        if not rows:
            return []
        md = [f"### Back-to-back pairs: {HELD} against the floor and each peer", "",
              f"{self.k} pairs of runs per row ({self.cfg['pair_warmup']} s warm-up, "
              f"{self.cfg['pair_seconds']} s timed), {HELD} and the other server one right "
              "after the other, the first alternating; the ratio is "
              f"{HELD}'s over the other's, as the median over the pairs and a "
              "distribution-free interval for it. Echoes per second: higher is better; round "
              "trip: lower. Against the floor the target is "
              f"{TARGET}x (round trip {1 / TARGET:.3f}x), and the verdicts are the back-to-back "
              "pairs' of studies 1 and 2 (met, met on the median, missed on the median, "
              "missed); against a peer, ahead: an interval that holds 1.00 is a tie within "
              "the noise.", "",
              f"| {HELD} over | S | metric | pairs | median | interval | verdict |",
              "|---|---|---|---|---|---|---|"]
        for r in rows:
            ci = r["ci"]
            md.append(f"| {r['other']} | {r['S']:,} | {r['metric']} | {r['n']} | "
                      f"{r['med']:.3f}x | " + ("— (too few pairs)" if not ci else
                                               f"{ci[0]:.3f}–{ci[1]:.3f} ({ci[2] * 100:.1f}%)")
                      + f" | {r['verdict']} |")
        md.append("")
        return md

    # -----------------------------------------------------------------------------------

    def tables(self):
        """{metric: {server: {S: dict(median, cv, ratio, rmin, rmax)}}}, ratios to the floor
        paired within each repetition."""
        by = {}
        for r in self.results:
            for m, *_ in METRICS:
                if r.get(m) is not None:
                    by.setdefault(m, {}).setdefault(r["driver"], {}).setdefault(
                        r["n"], {})[r["rep"]] = r[m]
        t = {}
        for m, bysrv in by.items():
            floor = bysrv.get(FLOOR, {})
            for name, bys in bysrv.items():
                for s, byrep in bys.items():
                    v = list(byrep.values())
                    mean = statistics.mean(v)
                    pairs = h.paired({k: [x] for k, x in byrep.items()},
                                          {k: [x] for k, x in floor.get(s, {}).items()})
                    t.setdefault(m, {}).setdefault(name, {})[s] = dict(
                        median=h.median(v), n=len(v),
                        cv=statistics.stdev(v) / mean * 100 if len(v) > 1 and mean else 0.0,
                        **h.ratio_stats(pairs))
        return t

    def table(self, t, metric, ratio=False, mark=None):
        rows = t.get(metric, {})
        lines = ["| server | " + " | ".join(f"{s:,}" for s in self.sessions) + " |",
                 "|---" * (len(self.sessions) + 1) + "|"]
        for name in echo_study.echo_order(self.names):
            cells = []
            for s in self.sessions:
                st = rows.get(name, {}).get(s)
                if st is None:
                    cells.append("—")
                elif ratio:
                    cells.append("—" if st["ratio"] is None else
                                 f"{st['ratio']:.2f}x ({st['rmin']:.2f}–{st['rmax']:.2f})"
                                 + (" **!**" if mark and mark(name, s, st) else ""))
                else:
                    cells.append(f"{h.fmt_num(st['median'])} ±{st['cv']:.0f}%")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def misses(self, t):
        """iomux-epoll against the floor and the peers: echoes/s at every S, and at S = 1 the
        median round trip too."""
        out = []
        eps, rtt = t.get("eps", {}), t.get("rtt_us_p50", {})
        me = eps.get(HELD, {})
        if not me:
            return [f"echo-small: {HELD} not measured"] if HELD in self.names else []
        for s in self.sessions:
            st = me.get(s)
            if not st:
                out.append(f"echo-small {HELD} S={s:,}: not measured")
                continue
            if st["ratio"] is not None and st["ratio"] < TARGET:
                out.append(f"echo-small {HELD} S={s:,}: echoes/s {st['ratio']:.2f}x the floor "
                           f"(< {TARGET})")
            for p in PEERS:
                ps = eps.get(p, {}).get(s)
                if ps and ps["median"] >= st["median"]:
                    out.append(f"echo-small {HELD} S={s:,}: echoes/s {st['median']:,.0f}, not "
                               f"ahead of {p}'s {ps['median']:,.0f}")
        mine, floor = rtt.get(HELD, {}).get(1), rtt.get(FLOOR, {}).get(1)
        if mine and floor and mine["ratio"]:
            if 1 / mine["ratio"] < TARGET:
                out.append(f"ping-pong {HELD}: median round trip {mine['median']:.1f} µs, the "
                           f"floor's over it {1 / mine['ratio']:.2f}x (< {TARGET})")
            for p in PEERS:
                ps = rtt.get(p, {}).get(1)
                if ps and ps["median"] <= mine["median"]:
                    out.append(f"ping-pong {HELD}: median round trip {mine['median']:.1f} µs, "
                               f"not below {p}'s {ps['median']:.1f} µs")
        return out

    def report_md(self, out):
        t = self.tables()
        c = self.cfg
        md = [f"## Study 3, small messages: {c['block']}-byte echo and ping-pong", "",
              f"The echo study's servers and client with {c['block']}-byte blocks (`echo-client "
              f"--block {c['block']} --latency`): each session writes a block and waits for its "
              "whole echo, every byte checked, and every echo in the window is timed from the "
              "write of its block to the read of its last byte. At S = 1 this is the ping-pong: "
              f"the round trip is the latency the server's loop adds. {c['warmup']} s warm-up, "
              f"{c['seconds']} s timed, {self.reps} repetitions in rotating order; ±% is the "
              "variation over repetitions. Server CPU is its on-CPU time (schedstat) over the "
              "window, per echo. Columns are sessions.", "", "```", self.reproduce(), "```", ""]
        mark = lambda name, s, st: name == HELD and st["ratio"] is not None and \
            st["ratio"] < TARGET
        for metric, unit, title, better in METRICS:
            if metric not in t:
                continue
            md += [f"### {title} ({unit}" + (f", {better} is better)" if better else ")"), "",
                   self.table(t, metric), ""]
            if metric in ("eps", "cpu_us_per_echo", "rtt_us_p50"):
                md += [f"Ratio to {FLOOR}, paired within each repetition ({better} is better)"
                       + ("; **!** marks iomux-epoll under the target" if metric == "eps" else "")
                       + ":", "", self.table(t, metric, True, mark if metric == "eps" else None),
                       ""]
        if "eps" in t:
            series = lambda m: {n: [(s, st["median"]) for s, st in byS.items()]
                                for n, byS in t.get(m, {}).items()}
            if h.plot(f"{out}/echo-small.png", f"Study 3 with {c['block']}-byte blocks: "
                           "echoes per second and round trips",
                           [("Echoes per second (higher is better)", series("eps"), "echoes/s"),
                            ("Server CPU per echo (lower is better)", series("cpu_us_per_echo"),
                             "µs per echo"),
                            ("Round trip, median (lower is better)", series("rtt_us_p50"), "µs"),
                            ("Round trip, 99th percentile (lower is better)",
                             series("rtt_us_p99"), "µs")],
                           "Concurrent sessions (log scale)", legend_title="server"):
                md += ["![small-message echo](echo-small.png)", ""]
        missed = self.misses(t)
        md += ["### iomux-epoll against its target (small messages, ping-pong)", "",
               f"Target: `{HELD}` at least {TARGET}x the floor's echoes per second (paired) at "
               "every S and ahead of " + ", ".join(PEERS) + " (medians); in the ping-pong "
               f"(S = 1) a median round trip no more than 1/{TARGET} of the floor's and below "
               "every peer's.", ""]
        md += [f"- missed: {m}" for m in missed] or ["- met in every cell"]
        md.append("")
        md += self.pairs_md()
        return md, missed

    def print_tables(self):
        t = self.tables()
        for metric in ("eps", "rtt_us_p50"):
            if metric in t:
                h.log(f"\necho {self.cfg['block']} B: {metric} (columns: sessions)")
                h.log(self.table(t, metric))
                h.log(self.table(t, metric, True))
        pmd = self.pairs_md()
        if pmd:
            h.log("\n" + "\n".join(pmd[4:]).rstrip())

    def smoke_summary(self):
        n = sum(r["echoes_total"] for r in self.results)
        k = sum(len(p["eps"]) for p in self.pairs)
        return [f"echo {self.cfg['block']} B: {len(self.results)} runs, {n:,} echoes, every "
                f"byte checked and every round trip timed; {k} back-to-back pairs"]

    def json(self):
        return dict(config=self.cfg, sessions=self.sessions, results=self.results,
                    pairs=self.pairs, pair_verdicts=self.pair_rows())
