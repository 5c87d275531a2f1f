# SPDX-License-Identifier: MIT
"""Back-to-back pairs, run by bench/run (bench/README.md, "Back-to-back pairs"): the
wall-clock targets of studies 1 and 2 measured again, so that noise does not decide them.

In studies 1 and 2 one process runs every cell of a driver at one n, and the drivers take
turns: two drivers meet a cell seconds apart. On this kind of machine (a virtual one of two
CPUs) a process's speed drifts by tens of percent over seconds while within a process it
holds to a few percent, so a cell's paired ratio swings from one repetition to the next
(0.53x to 1.55x has been seen) and a target of 1.03x or 1.05x is a coin toss there. Here
each comparison of a target is made K times as a pair of short processes, one cell each,
the two drivers right after one another (which goes first alternates); the ratio of a pair
is the first driver's median over the second's (per round in study 1, per iteration in study
2). Reported: the median of the K ratios and a distribution-free confidence interval for it
(order statistics of the binomial: for K = 15, the 4th to the 12th smallest ratio, 96.5%).

The comparisons (the targets of the io_uring and cost work): iomux-epoll over raw-epoll in
every Poller cell, at most 1.03x; iomux-uring over raw-uring (one-shot polls) in every Poller
and chain cell, at most 1.05x; iomux-uring-edge (MUX_EDGE watchers, multishot polls) over
raw-uring-multi (the hand-written multishot loop) in every Poller cell, at most 1.05x;
iomux-epoll over libev in every chain cell, at most 1.00x; iomux-kqueue over raw-kqueue in
every Poller cell, at most 1.05x (on Linux both on libkqueue: iomux's overhead over kevent(),
not a BSD kernel's cost). A verdict:
- met: the median is at or under the target, and so is the interval's top;
- met on the median: the median is, the interval's top is not (the noise still reaches over);
- missed on the median: the median is over, the interval's bottom is not;
- missed: the whole interval is over the target.
Against libev the target is a tie, 1.00x: where the interval holds 1.00 time cannot order
the two, and the cost table (instructions per chained write and per restart, when the run
has it) says which costs less; where it does not, the median says.

Registered in bench/run; a quick run's few pairs give an indicative verdict, the full run's
25 settle it."""
import shlex
import statistics
import subprocess
import json

import drivers_study
from benchlib import Cell, Study as Base, log, median_interval, plain, verdict, mode_arg

# (driver, reference, target, studies): the driver's time over the reference's, at most target
COMPARISONS = [("iomux-epoll", "raw-epoll", 1.03, ("poller",)),
               ("iomux-uring", "raw-uring", 1.05, ("poller", "chain")),
               ("iomux-uring-edge", "raw-uring-multi", 1.05, ("poller",)),
               ("iomux-epoll", "libev", 1.00, ("chain",)),
               ("iomux-kqueue", "raw-kqueue", 1.05, ("poller",))]  # both on libkqueue here
CONFIDENCE = 0.95
TIE_PEER = "libev"  # a target of 1.00 against a peer: a tie goes to the cost table


class Study(Base):
    """The back-to-back pairs (its report section follows every study's own, as it reads
    the cost table for the ties with libev)."""
    NAME = "settle"
    TITLE = ("the back-to-back pairs (the targets of studies 1 and 2 measured "
             "again)")
    # n: the slot counts compared (None: studies 1 and 2's)
    MODES = dict(smoke=dict(pairs=2, n=None), quick=dict(pairs=2, n=[1000]),
                 full=dict(pairs=25, n=None))

    def __init__(self, ctx):
        super().__init__(ctx)
        args = self.args
        spec = {}
        for study in ("poller", "chain"):
            c = drivers_study.study_cfg(study, self.mode, args)
            c.pop("n")
            spec[study] = c
        self.spec = spec
        ns = drivers_study.sizes([v if v == "max" else int(v) for v in args.n.split(",")]
                                 if args.n else self.cfg["n"] or
                                 drivers_study.POLLER[self.mode]["n"], "socketpair", ctx.lim)
        names = ctx.driver_names
        self.k = args.reps or self.cfg["pairs"]
        self.todo, self.results = [], []
        for drv, ref, target, studies in COMPARISONS:
            missing = [d for d in (drv, ref) if d not in names]
            if missing:
                self.skipped.append((f"settle {drv} over {ref}",
                                     f"{', '.join(missing)} not in this run"))
                continue
            for study in studies:
                for n in ns:
                    if study == "poller":
                        for active in spec["poller"]["active"]:
                            if active <= n:
                                self.todo.append((drv, ref, target, study, n, active, None))
                    else:
                        for active in spec["chain"]["active"]:
                            for to in spec["chain"]["timeouts"]:
                                if active <= n:
                                    self.todo.append((drv, ref, target, study, n, active, to))
        self.names = sorted({c[0] for c in self.todo} | {c[1] for c in self.todo})

    def why_not(self):
        return None if self.todo else "no comparison has both its drivers in this run"

    def banner(self):
        return (f"back-to-back pairs: {len(self.todo)} comparisons of the targets of studies 1 "
                f"and 2, {self.k} pairs each")

    def reproduce(self):
        cmd = ["bench/run", "--build", self.args.build, "--study", "settle"] + mode_arg(
            self.args) + ["--reps", str(self.k)]
        if self.args.n:
            cmd += ["--n", self.args.n]
        if self.args.drivers:
            cmd += ["--drivers", self.args.drivers]
        return shlex.join(cmd)

    def command(self, drv, study, n, active, timeouts):
        d = self.runner.drivers[drv]
        cmd = [d["exe"], "--driver", plain(drv), "--study", study, "--transport",
               "socketpair", "--n", str(n), "--active", str(active)]
        c = self.spec[study]
        if study == "poller":
            cmd += ["--rounds", str(c["rounds"]), "--batches", str(c["batches"]),
                    "--warmup", str(c["warmup"])]
        else:
            cmd += ["--writes", str(self.args.writes or c["writes"]), "--iterations",
                    str(c["iterations"]), "--warmup", str(c["warmup"]), "--timeouts",
                    str(timeouts)]
        return self.runner.pin(cmd)

    def one(self, drv, study, n, active, timeouts):
        """The driver's median time in the cell (µs per round, ms per iteration), or None."""
        cmd = self.command(drv, study, n, active, timeouts)
        out = subprocess.run(cmd, capture_output=True, text=True,
                             preexec_fn=self.runner.preexec())
        key = "round_us" if study == "poller" else "total_ms"
        for line in out.stdout.splitlines():
            kind, _, body = line.partition(" ")
            if kind == "RESULT":
                r = json.loads(body)
                if r.get(key):
                    return statistics.median(r[key])
        msg = (out.stderr.strip() or f"exit status {out.returncode}").splitlines()[-1]
        self.runner.fail(drv, f"settle {study}", "socketpair", n, msg, shlex.join(cmd))
        return None

    def schedule(self):
        cells = []
        for drv, ref, target, study, n, active, to in self.todo:
            got = dict(driver=drv, ref=ref, target=target, study=study, n=n, active=active,
                       timeouts=to, pairs=[])
            self.results.append(got)
            for i in range(self.k):
                cells.append(Cell(f"settle {study} n={n:,} active={active}"
                                  + ("" if to is None else f" timeouts={to}")
                                  + f" {drv} / {ref} (pair {i + 1})",
                                  (0.5 if study == "poller" else 0.4) * (1 + n / 5000),
                                  lambda i=i, got=got: self.pair(got, i)))
        return cells

    def pair(self, got, i):
        """One pair: the driver and its reference, one right after the other."""
        drv, ref = got["driver"], got["ref"]
        args = (got["study"], got["n"], got["active"], got["timeouts"])
        first, second = (drv, ref) if i % 2 == 0 else (ref, drv)
        t = {first: self.one(first, *args)}
        t[second] = self.one(second, *args)
        if t[drv] and t[ref]:
            got["pairs"].append((t[drv], t[ref]))

    # -----------------------------------------------------------------------------------

    def rows(self):
        out = []
        for r in self.results:
            ratios = [a / b for a, b in r["pairs"]]
            if not ratios:
                out.append(dict(r, med=None, ci=None, verdict="not measured"))
                continue
            med = statistics.median(ratios)
            ci = median_interval(ratios)
            v = verdict(med, ci, r["target"])
            if r["ref"] == TIE_PEER and ci is not None and ci[0] <= 1.0 <= ci[1]:
                v = self.tie(r)
            out.append(dict(r, med=med, ci=ci, verdict=v))
        return out

    def cost(self, unit, driver):
        costs = self.ctx.studies.get("costs")
        units = ((costs.result if costs else None) or {}).get("units", {})
        rows = (units.get(unit) or {}).get("rows", {})
        row = rows.get(driver) or {}
        return row.get("per_unit")

    def tie(self, r):
        """A tie with the peer: the cost table says which costs less, if this run has it."""
        unit = "chain-timeouts" if r["timeouts"] else "chain"
        mine, theirs = self.cost(unit, r["driver"]), self.cost(unit, r["ref"])
        rmine, rtheirs = self.cost("restart", r["driver"]), self.cost("restart", r["ref"])
        if None in (mine, theirs, rmine, rtheirs):
            return "a tie (no cost table in this run to break it)"
        facts = (f"{mine:,.1f} against {theirs:,.1f} instructions per chained write, "
                 f"{rmine:,.1f} against {rtheirs:,.1f} per restart")
        if mine < theirs and rmine < rtheirs:
            return f"a tie, broken for {r['driver']} ({facts})"
        return f"a tie, broken for {r['ref']} ({facts})"

    @staticmethod
    def missed(row):
        v = row["verdict"]
        return v.startswith("missed") or v == "not measured" or \
            (v.startswith("a tie") and "broken for" not in v) or \
            (v.startswith("a tie, broken for") and f"broken for {row['ref']}" in v)

    def cell_name(self, r):
        return (f"Poller, {r['active']:,} active" if r["study"] == "poller" else
                f"chain, {r['active']:,} active, " + ("idle timeouts" if r["timeouts"] else
                                                     "no timeouts"))

    def table(self, rows):
        lines = ["| driver over reference | cell | n | pairs | median | interval | verdict |",
                 "|---|---|---|---|---|---|---|"]
        for r in rows:
            ci = r["ci"]
            lines.append(f"| {r['driver']} over {r['ref']} (≤ {r['target']:.2f}x) | "
                         f"{self.cell_name(r)} | {r['n']:,} | {len(r['pairs'])} | "
                         + ("—" if r["med"] is None else f"{r['med']:.3f}x") + " | "
                         + ("— (too few pairs)" if not ci else
                            f"{ci[0]:.3f}–{ci[1]:.3f} ({ci[2] * 100:.1f}%)")
                         + f" | {r['verdict']} |")
        return "\n".join(lines)

    def report_tail_md(self, out):
        rows = self.rows()
        md = ["## Back-to-back pairs: the targets of studies 1 and 2 measured again", "",
              "Each comparison is made as pairs of short processes, one cell each: the "
              "driver and its reference right after one another (which goes first "
              "alternates), pinned as in the studies. A pair's ratio is the driver's median "
              "time over the reference's; the table gives the median of the pairs' ratios "
              "and a distribution-free interval for it (order statistics, at the confidence "
              "shown). Studies 1 and 2 run a driver's cells together in one process and the "
              "drivers take turns, so their pairs are seconds apart, and this machine's speed "
              "drifts by tens of percent over seconds: here both sides of a pair meet it in "
              "the same state. met: median and interval's top at or under the target; met on "
              "the median: the interval reaches over it; missed on the median; missed: the "
              "whole interval is over. Against libev (target 1.00x) an interval that holds "
              "1.00 is a tie, which the cost table breaks. bench/README.md, \"Back-to-back "
              "pairs\", explains the method.", "", "```", self.reproduce(), "```", "",
              self.table(rows), ""]
        missed = [f"settle: {r['driver']} over {r['ref']}, {self.cell_name(r)}, n={r['n']:,}: "
                  + ("not measured" if r["med"] is None else
                     f"{r['med']:.3f}x against a target of {r['target']:.2f}x: {r['verdict']}")
                  for r in rows if self.missed(r)]
        md += [f"- missed: {m}" for m in missed] or ["- every comparison met"]
        md.append("")
        return md, missed

    def print_tables(self):
        rows = self.rows()
        if rows:
            log("\nback-to-back pairs (median ratio over the pairs, its interval)")
            log(self.table(rows))

    def smoke_summary(self):
        n = sum(len(r["pairs"]) for r in self.results)
        return [f"settle: {len(self.results)} comparisons, {n} pairs run"]

    def json(self):
        return dict(results=self.rows(), pairs=self.k, confidence=CONFIDENCE,
                    skipped=self.skipped)
