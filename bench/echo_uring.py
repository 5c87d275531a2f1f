# SPDX-License-Identifier: MIT
"""The io_uring floor of the echo study, run by the echo study after its own cells
(bench/README.md, "The two floors"): back-to-back pairs of echo servers, at 16 KB and at
128-byte blocks, at several session counts.

- iomux-uring (examples/echo-server on io_uring) against raw-uring (the hand-written
  io_uring server, echo/server_raw_uring.c). Targets: echoes per second at least 0.97x
  raw-uring's, and server CPU per echo (per byte: the block is the same) at most 1.05x.
- raw-uring against raw-epoll: the two floors, the mechanisms themselves, and iomux-uring
  against iomux-epoll, the library on each. No target: the verdict says which is ahead at
  each session count (or that the pairs cannot tell them apart), which is what the default
  backend's rule rests on (docs/backends.md).

A pair is the two servers run one right after the other, the first alternating, each with
a fresh process (the echo study's run_echo_one); its ratio is the first named server's
figure over the other's. Reported per row: the median of the K ratios and a
distribution-free interval for it (settle_study.py), and the verdict."""
import shlex
import statistics

import benchlib as h
import echo_study
from benchlib import Cell, median_interval, verdict

MINE, FLOOR_URING, FLOOR_EPOLL = "iomux-uring", "raw-uring", "raw-epoll"  # echo_study.URING_FLOOR
EPS_TARGET = 0.97  # iomux-uring's echoes/s over raw-uring's, at least
CPU_TARGET = 1.05  # iomux-uring's server CPU per echo over raw-uring's, at most
# iomux-uring against the io_uring floor (the targets); the two floors, and iomux on its two
# Linux backends (no target: which one is ahead, the default backend's question).
COMPARISONS = [(MINE, FLOOR_URING), (FLOOR_URING, FLOOR_EPOLL), (MINE, "iomux-epoll")]
MODES = {
    "smoke": dict(blocks=[16384], sessions=[10], pairs=1, seconds=0.5, warmup=0.2),
    "quick": dict(blocks=[16384], sessions=[1000], pairs=2, seconds=1, warmup=0.3),
    "full": dict(blocks=[16384, 128], sessions=[100, 1000, 10000], pairs=15, seconds=2,
                 warmup=0.5),
}


class Pairs:
    NAME = "echo-uring"

    def __init__(self, runner, args, cfg, names):
        self.runner, self.args, self.cfg = runner, args, dict(cfg)
        if args.sessions:
            self.cfg["sessions"] = [int(v) for v in args.sessions.split(",")]
        if args.block:  # the block asked for, as the study's other cells take it
            self.cfg["blocks"] = [args.block]
        self.k = args.reps or self.cfg["pairs"]
        self.todo = [(a, b) for a, b in COMPARISONS if a in names and b in names]
        self.pairs = []  # dict(first, second, block, S, eps: [(a, b)], cpu: [(a, b)])

    def banner(self):
        if not self.todo:
            return None
        return ("io_uring echo pairs: " + ", ".join(f"{a} / {b}" for a, b in self.todo)
                + f"; blocks {', '.join(map(str, self.cfg['blocks']))} B, S = "
                + ", ".join(f"{s:,}" for s in self.cfg["sessions"]) + f", {self.k} pairs each")

    def reproduce(self):
        cmd = ["bench/run", "--build", self.args.build, "--study", "echo"] + h.mode_arg(
            self.args) + ["--reps", str(self.k), "--echo-cpus",
                          ",".join(map(str, self.args.echo_cpus))]
        if self.args.sessions:
            cmd += ["--sessions", self.args.sessions]
        if self.args.block:
            cmd += ["--block", str(self.args.block)]
        if self.args.drivers:
            cmd += ["--drivers", self.args.drivers]
        return shlex.join(cmd) + "   # the echo study runs these pairs after its own cells"

    def schedule(self):
        cells = []
        c = self.cfg
        for a, b in self.todo:
            for block in c["blocks"]:
                for s in c["sessions"]:
                    got = dict(first=a, second=b, block=block, S=s, eps=[], cpu=[])
                    self.pairs.append(got)
                    for i in range(self.k):
                        cells.append(Cell(
                            f"echo {block} B S={s:,} {a} / {b} (pair {i + 1})",
                            2 * ((c["seconds"] + c["warmup"]) * 0.8 + s / 4000),
                            lambda got=got, i=i: self.pair(got, i)))
        return cells

    def pair(self, got, i):
        a, b, s = got["first"], got["second"], got["S"]
        servers = self.runner.echo_servers
        if echo_study.echo_skip(a, s, servers) or echo_study.echo_skip(b, s, servers):
            return
        cfg = dict(block=got["block"], seconds=self.cfg["seconds"], warmup=self.cfg["warmup"])
        order = (a, b) if i % 2 == 0 else (b, a)
        r = {}
        for name in order:
            r[name] = echo_study.run_echo_one(self.runner, name, s, cfg, i,
                                              study=self.NAME)
        if r[a] and r[b]:
            got["eps"].append((r[a]["eps"], r[b]["eps"]))
            if r[a].get("cpu_us_per_echo") and r[b].get("cpu_us_per_echo"):
                got["cpu"].append((r[a]["cpu_us_per_echo"], r[b]["cpu_us_per_echo"]))

    # -----------------------------------------------------------------------------------

    @staticmethod
    def mechanism(med, ci, higher):
        """Which is ahead: the first (on io_uring) or the second (on epoll)."""
        ahead = (med > 1) == higher
        if ci and ci[0] <= 1.0 <= ci[1]:
            return ("io_uring" if ahead else "epoll") + " on the median, a tie within the noise"
        return "io_uring ahead" if ahead else "epoll ahead"

    def rows(self):
        out = []
        for p in self.pairs:
            for metric, pairs, higher in (("echoes/s", p["eps"], True),
                                          ("server CPU per echo", p["cpu"], False)):
                if not pairs:
                    out.append(dict(p, metric=metric, n=0, med=None, ci=None, target=None,
                                    verdict="not measured"))
                    continue
                ratios = [x / y for x, y in pairs]
                med = statistics.median(ratios)
                ci = median_interval(ratios)
                if p["first"] == MINE and p["second"] == FLOOR_URING:
                    target = EPS_TARGET if higher else CPU_TARGET
                    v = verdict(med, ci, target, higher)
                else:
                    target, v = None, self.mechanism(med, ci, higher)
                out.append(dict(p, metric=metric, n=len(ratios), med=med, ci=ci,
                                target=target, verdict=v))
        return out

    def table(self, rows):
        lines = ["| server over server | block | S | metric | pairs | median | interval | "
                 "verdict |", "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            ci = r["ci"]
            goal = ("" if r["target"] is None else
                    f" ({'≥' if r['metric'] == 'echoes/s' else '≤'} {r['target']:.2f}x)")
            lines.append(f"| {r['first']} over {r['second']} | {r['block']:,} B | {r['S']:,} | "
                         f"{r['metric']}{goal} | {r['n']} | "
                         + ("—" if r["med"] is None else f"{r['med']:.3f}x") + " | "
                         + ("— (too few pairs)" if not ci else
                            f"{ci[0]:.3f}–{ci[1]:.3f} ({ci[2] * 100:.1f}%)")
                         + f" | {r['verdict']} |")
        return "\n".join(lines)

    def report_md(self):
        if not self.pairs:
            return [], []
        rows = self.rows()
        c = self.cfg
        md = ["### The two floors, iomux on each, and iomux-uring against the io_uring floor "
              "(back-to-back pairs)", "",
              f"`{FLOOR_URING}` is io_uring written by hand (bench/echo/server_raw_uring.c): "
              "a multishot accept, one multishot receive per connection into a ring of "
              "provided buffers of the block's size, each buffer sent back as it came and "
              "given back to the ring when its send completes, SINGLE_ISSUER | DEFER_TASKRUN, "
              "one `io_uring_enter` per iteration (`io_uring_submit_and_wait`). Each row is "
              f"{self.k} pairs of runs ({c['warmup']} s warm-up, {c['seconds']} s timed), "
              "the two servers one right after the other, the first alternating; the ratio "
              "is the first's over the second's, as the median over the pairs and a "
              "distribution-free interval for it. Server CPU per echo is its on-CPU time "
              "(schedstat) over the window per echo; at one block size it is the CPU per "
              f"byte. Targets: `{MINE}` at least {EPS_TARGET}x `{FLOOR_URING}`'s echoes per "
              f"second and at most {CPU_TARGET}x its CPU per echo (met, met on the median, "
              "missed on the median, missed: as the back-to-back pairs of studies 1 and 2). "
              f"`{FLOOR_URING}` over `{FLOOR_EPOLL}` (the mechanisms) and `{MINE}` over "
              "`iomux-epoll` (the library on each) have no target: they say which is ahead, "
              "or that the pairs cannot tell them apart.", "", "```", self.reproduce(),
              "```", "", self.table(rows), ""]
        missed = [f"echo {r['block']} B S={r['S']:,}: {r['first']} over {r['second']} "
                  f"{r['metric']} " + ("not measured" if r["med"] is None else
                                       f"{r['med']:.3f}x: {r['verdict']}")
                  for r in rows if r["first"] == MINE and r["second"] == FLOOR_URING and
                  (r["verdict"].startswith("missed") or r["verdict"] == "not measured")]
        md += [f"- missed: {m}" for m in missed] or ["- met in every row"]
        md.append("")
        return md, missed

    def print_tables(self):
        if self.pairs:
            h.log("\nio_uring echo pairs (median ratio over the pairs, its interval)")
            h.log(self.table(self.rows()))

    def smoke_summary(self):
        n = sum(len(p["eps"]) for p in self.pairs)
        return [f"echo io_uring pairs: {len(self.pairs)} rows, {n} pairs run"] if self.pairs \
            else []

    def json(self):
        return dict(config=self.cfg, pairs=self.pairs, verdicts=self.rows())
