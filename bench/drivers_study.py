# SPDX-License-Identifier: MIT
"""Studies 1 and 2, run by bench/run (bench/README.md, "What is measured"): Kegel's
Poller_bench and libevent's bench.c as Lehmann ran it, each driver (harness.h) in its own
process pinned to one CPU, every driver once per size in each repetition in an order that
rotates. Their targets: iomux-epoll at most 1.03x the floor in every cell; iomux-uring at
most 1.05x raw-uring, and no more than one io_uring_enter per Poller round; iomux-epoll's
chain ratios at most libev's, the cost table breaking a tie; iomux-kqueue at most 1.05x
raw-kqueue in every Poller cell, both on libkqueue here (report_tail_md)."""
import os
import shlex
import shutil
import subprocess
import json

from benchlib import (FLOOR, Cell, Study as Base, driver_order, fmt_num, log, median,
                      paired, parse_strace, plain, plot, ratio_stats, table_md, baseline_arg,
                      build_arg, mode_arg)

TARGET = ("iomux-epoll", 1.03)  # the driver held to a ratio, and the ratio
POLLER = dict(smoke=dict(n=[10, 300], active=[1, 100], rounds=20, batches=2, warmup=2),
              quick=dict(n=[100, 1000, "max"], active=[1, 100], rounds=100, batches=5,
                         warmup=20),
              full=dict(n=[100, 1000, 10000, "max"], active=[1, 100], rounds=200, batches=5,
                        warmup=20))
CHAIN = dict(smoke=dict(n=[10, 300], active=[5, 100], writes=300, iterations=1, warmup=1,
                        timeouts=[0, 1]),
             quick=dict(n=[100, 1000, "max"], active=[100, 1000], writes=10000, iterations=1,
                        warmup=1, timeouts=[0, 1]),
             full=dict(n=[100, 200, 500, 1000, 2000, 5000, 10000, 20000, "max"],
                       active=[100, 1000], writes=10000, iterations=3, warmup=1,
                       timeouts=[0, 1]))
METRICS = {  # study -> (metric, unit, title)
    "poller": [("round_us", "µs per round", "time per round (writes + dispatch)"),
               ("create_ns", "ns per watcher", "creating the watchers"),
               ("teardown_ns", "ns per watcher", "tearing down the watchers")],
    "chain": [("total_ms", "ms per iteration", "total per iteration (re-arm + writes + events)"),
              ("proc_ms", "ms per iteration", "event processing alone")],
}
BASE_METRICS = {"poller": ["round_us"], "chain": ["total_ms"]}
STRACE_N = 1000  # the Poller cells whose system calls are counted: n, and the active counts
STRACE_ACTIVE = dict(smoke=(), quick=(100,), full=(1, 100))  # per mode


def sizes(spec, transport, lim):
    """The slot counts of a --n list: 'max' is the most the fd limit allows."""
    top = lim["max_slots"][transport]
    out = []
    for v in spec:
        n = top if v == "max" else min(int(v), top)
        if n not in out:
            out.append(n)
    return sorted(out)


def cell_estimate(study, n, cfg):
    """About how many seconds one process of study 1 or 2 takes at n slots (a quick run's
    times at a load average of 5 to 8): study 2 restarts all n watchers at each iteration,
    the warm-up's included, and the poll-based drivers scan all n at each dispatch."""
    if study == "poller":
        return 0.3 * (1 + n / 5000)
    return 0.5 + 7.5e-5 * n * (cfg["iterations"] + cfg["warmup"])


def study_cfg(study, mode, args):
    """Study 1's or 2's configuration in this mode, with the command line's changes."""
    cfg = dict((POLLER if study == "poller" else CHAIN)[mode])
    if args.n:
        cfg["n"] = [v if v == "max" else int(v) for v in args.n.split(",")]
    if args.active:
        cfg["active"] = [int(v) for v in args.active.split(",")]
    if args.timeouts and study == "chain":
        cfg["timeouts"] = [int(v) for v in args.timeouts.split(",")]
    if args.writes and study == "chain":
        cfg["writes"] = args.writes
    return cfg


# iomux-uring against the hand-written io_uring loop, and iomux-epoll's chain cells against
# libev's: the wall-clock targets of the io_uring and cost work (bench/README.md, "Reading
# the report").
URING = ("iomux-uring", "raw-uring", 1.05)  # at most this ratio in every cell
# MUX_EDGE watchers on io_uring (multishot polls) against the hand-written multishot loop, in
# study 1 (the drivers are edge-triggered: harness.h).
URING_EDGE = ("iomux-uring-edge", "raw-uring-multi", 1.05)
CHAIN_PEER = ("iomux-epoll", "libev")  # the first's ratio to the floor at most the second's
# iomux-kqueue against the hand-written kevent loop, at most this ratio in every Poller cell.
# On Linux both run on libkqueue: iomux's overhead over kevent(), not a BSD kernel's cost.
KQUEUE = ("iomux-kqueue", "raw-kqueue", 1.05)


def peer_cells(tables, plan):
    """(study, transport, active, timeouts, n, title) of every Poller round and chain total
    that ran, in report order."""
    cells = []
    for study, transport, cfg, ns, reps in plan:
        metric = "round_us" if study == "poller" else "total_ms"
        variants = [(a, None) for a in cfg["active"]] if study == "poller" else \
            [(a, t) for t in cfg["timeouts"] for a in cfg["active"]]
        for active, tmo in variants:
            if (study, transport, active, tmo, metric) not in tables:
                continue
            what = ("Poller" if study == "poller" else "chain") + f" {transport}, " + \
                f"{active:,} active" + (", idle timeouts" if tmo else
                                         ", no timeouts" if tmo == 0 else "")
            cells += [(study, transport, active, tmo, metric, n, what) for n in ns]
    return cells


def fmt_ratio(st):
    return f"{st['ratio']:.2f}x ({st['rmin']:.2f}–{st['rmax']:.2f})"


def ratio_rows(tables, cells, drv, floor, limit, held):
    """Table rows of drv's paired ratio to floor in every cell both ran, and the misses of
    the limit in the cells of the studies `held` to it: (rows, misses)."""
    rows, missed = [], []
    for study, transport, active, tmo, metric, n, what in cells:
        t = tables[(study, transport, active, tmo, metric)]
        a, b = t.get(drv, {}).get(n), t.get(floor, {}).get(n)
        if not a or not b:
            continue
        st = ratio_stats(paired(a["byrep"], b["byrep"]))
        if st["ratio"] is None:
            continue
        miss = study in held and st["ratio"] > limit
        rows.append(f"| {what} | {n:,} | {fmt_ratio(st)}{' **!**' if miss else ''} |")
        if miss:
            missed.append(f"{what}, n={n:,}: {drv} {st['ratio']:.3f}x {floor} "
                          f"({st['rmin']:.2f}–{st['rmax']:.2f}), over {limit:.2f}x")
    return rows, missed


def peer_targets_md(tables, plan, syscalls, costs):
    """The report's section on iomux-uring against raw-uring (every Poller and chain cell, and
    io_uring_enter per Poller round) and on iomux-epoll's chain ratios against libev's, with
    the cost table as the tie-breaker where time cannot order the two: (markdown, misses)."""
    drv, floor, limit = URING
    ours, peer = CHAIN_PEER
    cells = peer_cells(tables, plan)
    md, missed = [], []
    rows = {}  # (driver, floor) -> table rows
    for d, f, lim in (URING, URING_EDGE):
        r, m = ratio_rows(tables, cells, d, f, lim, ("poller", "chain"))
        if r:
            rows[(d, f)] = r
        missed += m
    enters = []
    edge, efloor, _ = URING_EDGE
    for key, table in (syscalls or {}).items():
        tr, n, act = key.split("/")
        for d in (drv, floor, edge, efloor):
            if d in table:
                e = table[d].get("io_uring_enter", 0)
                enters.append(f"| {tr}, n={int(n):,}, {int(act):,} active | {d} | {e:.2f} |")
                if d in (drv, edge) and e > 1.005:
                    missed.append(f"Poller {tr}, n={int(n):,}, {int(act):,} active: {d} makes "
                                  f"{e:.2f} io_uring_enter per round, over 1")
    if rows or enters:
        md += [f"## {drv} against {floor}, and {ours}'s chain cells against {peer}'s", "",
               f"Targets of the io_uring and cost work: `{drv}` at most {limit:.2f}x `{floor}` "
               "(the hand-written io_uring loop of one-shot polls) in every Poller and chain "
               f"cell, and `{edge}` (MUX_EDGE watchers: multishot polls) at most "
               f"{URING_EDGE[2]:.2f}x `{efloor}` (the hand-written multishot loop) in every "
               "Poller cell, paired within each repetition (the median and range of the "
               "repetitions' ratios), and no more than one `io_uring_enter` per Poller round; `"
               + ours + "`'s ratio to "
               f"`{FLOOR}` at most `{peer}`'s in every chain cell, and its time over "
               f"`{peer}`'s in the same repetition at most 1. Where either says `{peer}` is "
               "ahead but some repetition had it behind, time cannot order the two on this "
               "machine, and the cost table (above) breaks the tie: the instructions per "
               "chained write (with or without timeouts, as the cell) and per restart.", ""]
    for (d, f), r in rows.items():
        md += [f"### {d} over {f}", "", "| cell | n | ratio |", "|---|---|---|"] + r + [""]
    if enters:
        md += ["### io_uring_enter per Poller round (strace, as in the system-call tables)", "",
               "| cell | driver | enters per round |", "|---|---|---|"] + enters + [""]
    units = (costs or {}).get("units", {})

    def count(unit, d):
        row = units.get(unit, {}).get("rows", {}).get(d)
        return row.get("per_unit") if row else None

    crows = []
    for study, transport, active, tmo, metric, n, what in cells:
        if study != "chain":
            continue
        t = tables[(study, transport, active, tmo, metric)]
        a, b = t.get(ours, {}).get(n), t.get(peer, {}).get(n)
        if not a or not b or a["ratio"] is None or b["ratio"] is None:
            continue
        direct = ratio_stats(paired(a["byrep"], b["byrep"]))
        verdict = "met"
        # Behind by either reading: its ratio to the floor over the peer's, or its time over
        # the peer's in the same repetition. A tie when some repetition had it ahead.
        if a["ratio"] > b["ratio"] or direct["ratio"] > 1:
            overlap = direct["rmin"] <= 1
            unit = "chain-timeouts" if tmo else "chain"
            w = (count(unit, ours), count(unit, peer))
            r = (count("restart", ours), count("restart", peer))
            if not overlap:
                verdict = f"missed ({peer} ahead in every repetition)"
            elif None in w or None in r:
                verdict = "missed (a tie, and no cost table to break it)"
            elif w[0] < w[1] and r[0] < r[1]:
                verdict = (f"tie broken for {ours} ({w[0]:,.1f} against "
                           f"{w[1]:,.1f} instructions per chained write, {r[0]:,.1f} against "
                           f"{r[1]:,.1f} per restart)")
            else:
                verdict = (f"missed (a tie the cost table breaks for {peer}: "
                           f"{w[0]:,.1f} against {w[1]:,.1f} per chained write, {r[0]:,.1f} "
                           f"against {r[1]:,.1f} per restart)")
            if verdict.startswith("missed"):
                missed.append(f"{what}, n={n:,}: {ours} {a['ratio']:.2f}x {FLOOR}, "
                              f"{peer} {b['ratio']:.2f}x: {verdict}")
        crows.append(f"| {what} | {n:,} | {fmt_ratio(a)} | {fmt_ratio(b)} | "
                     f"{fmt_ratio(direct)} | {verdict} |")
    if crows:
        md += [f"### {ours} and {peer} in the chain study (ratios to {FLOOR})", "",
               f"| cell | n | {ours} | {peer} | {ours} over {peer} | verdict |",
               "|---|---|---|---|---|---|"] + crows + [""]
    if rows or enters or crows:
        md += [f"- missed: {m}" for m in missed] or ["- met in every cell"]
        md.append("")
    return md, missed


def kqueue_target_md(tables, plan):
    """The report's section on iomux-kqueue against raw-kqueue: every Poller and chain cell,
    the Poller cells held to the target: (markdown, misses)."""
    drv, floor, limit = KQUEUE
    rows, missed = ratio_rows(tables, peer_cells(tables, plan), drv, floor, limit, ("poller",))
    if not rows:
        return [], []
    md = [f"## {drv} against {floor}", "",
          f"`{floor}` is a hand-written level-triggered `kevent()` loop. Here both run on "
          "libkqueue (kqueue(2) and kevent(2) in a library over epoll), so the ratio is what "
          "iomux adds to `kevent()`, not what a BSD kernel's kqueue costs, and their times "
          "include libkqueue's own (an `ioctl` per read event, for one). Target: "
          f"`{drv}` at most {limit:.2f}x `{floor}` in every Poller cell, paired within each "
          "repetition (the median and range of the repetitions' ratios); the chain cells are "
          "shown, not held. The back-to-back pairs measure the Poller cells again.", "",
          "| cell | n | ratio |", "|---|---|---|"] + rows + [""]
    md += [f"- missed: {m}" for m in missed] or ["- met in every Poller cell"]
    md.append("")
    return md, missed


def metric_words(study, metric):
    """(unit, title) of a metric in words, from METRICS, the title capitalised."""
    for m, unit, title in METRICS[study]:
        if m == metric:
            return unit, title[:1].upper() + title[1:]
    return metric, metric


def active_words(a):
    return f"{a:,} active slot" + ("" if a == 1 else "s")


def plots_for(out, study, transport, cfg, tables):
    md = []

    def series(key):
        return {drv: [(n, s["median"]) for n, s in byn.items()]
                for drv, byn in tables.get(key, {}).items()}

    def panel(key, what):
        unit, words = metric_words(study, key[-1])
        return (words + (f", {what}" if what else ""), series(key), f"{unit} (log scale)")

    xl = f"Slots watched, one {transport} each (log scale)"
    if study == "poller":
        panels = [panel((study, transport, a, None, "round_us"), active_words(a))
                  for a in cfg["active"]]
        f = f"poller-{transport}.png"
        if plot(os.path.join(out, f), f"Study 1 (Poller), {transport} slots: time per "
                "round, lower is better", panels, xl):
            md += [f"![Poller, {transport}]({f})", ""]
        panels = [panel((study, transport, None, None, m), None)
                  for m in ("create_ns", "teardown_ns")]
        f = f"poller-setup-{transport}.png"
        if plot(os.path.join(out, f), f"Study 1 (Poller), {transport} slots: creating and "
                "tearing down the watchers, lower is better", panels, xl):
            md += [f"![set-up, {transport}]({f})", ""]
    else:
        for tmo in cfg["timeouts"]:
            panels = []
            for a in cfg["active"]:
                for m in ("total_ms", "proc_ms"):
                    panels.append(panel((study, transport, a, tmo, m), active_words(a)))
            f = f"chain-{transport}-{'timeouts' if tmo else 'plain'}.png"
            t = "with idle timeouts" if tmo else "no timeouts"
            if plot(os.path.join(out, f), f"Study 2 (chained writes), {transport} slots, "
                    f"{'an idle timeout on every slot' if tmo else 'no timeouts'}: time per "
                    "iteration, lower is better", panels, xl):
                md += [f"![chain {t}, {transport}]({f})", ""]
    return md


def syscall_md(syscalls):
    md = []
    for key, table in syscalls.items():
        transport, n, active = key.split("/")
        n, active = int(n), int(active)
        calls = sorted({c for t in table.values() for c in t})
        md += [f"## System calls per Poller round ({transport}, n={n:,}, {active} active)", "",
               "Counted with `strace -c -f` as the difference between two runs that differ "
               "only in their number of rounds, divided by that difference: set-up and "
               "tear-down cancel out.", "",
               "| driver | " + " | ".join(calls) + " |", "|---" * (len(calls) + 1) + "|"]
        for drv in driver_order(table):
            md.append(f"| {drv} | " + " | ".join(
                f"{table[drv].get(c, 0):.2f}" for c in calls) + " |")
        md.append("")
    return md


def reproduce_cmd(args, study, transport, ns, cfg, active=None, timeouts=None, reps=None):
    cmd = ["bench/run", "--build", build_arg(args)] + mode_arg(args) + [
        "--study", study, "--transport", transport, "--n", ",".join(map(str, ns)),
        "--active", ",".join(map(str, active if active else cfg["active"]))]
    if study == "chain":
        cmd += ["--writes", str(cfg["writes"]),
                "--timeouts", ",".join(map(str, timeouts if timeouts is not None
                                            else cfg["timeouts"]))]
    cmd += ["--reps", str(reps)] + baseline_arg(args)
    if args.cpu_used is not None:
        cmd += ["--cpu", str(args.cpu_used)]
    return shlex.join(cmd)


def target_mark(drv, n, s):
    """A ratio cell where the held driver misses its target."""
    return drv == TARGET[0] and s["ratio"] > TARGET[1]


def print_tables_(tables, skips, plan):
    for study, transport, cfg, ns, reps in plan:
        for key, t in sorted(tables.items(), key=lambda kv: str(kv[0])):
            if key[0] != study or key[1] != transport or key[4] in ("create_ns", "teardown_ns"):
                continue
            names = driver_order(t)
            log(f"\n{study} {transport} {key[4]} active={key[2]}"
                + (f" timeouts={key[3]}" if key[3] is not None else ""))
            log(table_md(t, ns, names, skips, key, False))
            if FLOOR in t:
                log(table_md(t, ns, names, skips, key, True, target_mark))



class Study(Base):
    """Studies 1 and 2 (`--study poller`, `--study chain`, or both)."""
    NAME = "poller"
    NAMES = ("poller", "chain")
    NUMBERED = True
    MODES = {m: dict(reps=r, transports=t) for m, r, t in (
        ("smoke", 1, ["socketpair", "eventfd"]), ("quick", 1, ["socketpair"]),
        ("full", 7, ["socketpair", "eventfd"]))}
    METRICS = METRICS

    def __init__(self, ctx):
        super().__init__(ctx)
        args = self.args
        self.studies = [s for s in self.NAMES if s in ctx.selected]
        self.names = list(ctx.driver_names)
        transports = args.transport.split(",") if args.transport else self.cfg["transports"]
        reps = args.reps or self.cfg["reps"]
        self.plan = []  # (study, transport, cfg, ns, reps)
        for study in self.studies:
            cfg = study_cfg(study, self.mode, args)
            for transport in transports:
                self.plan.append((study, transport, cfg, sizes(cfg["n"], transport, ctx.lim),
                                  reps))
        self.syscalls = {}

    def titles(self):
        return {"poller": "1 (Kegel's Poller_bench)",
                "chain": "2 (libevent's bench.c as Lehmann ran it)"}

    def why_not(self):
        return None if self.names else "no driver can run"

    def names_for(self, study):
        """The drivers a study runs: edge-triggered ones run study 1 only (harness.h)."""
        return [d for d in self.names
                if study == "poller" or not self.runner.drivers[d].get("edge")]

    def banner(self):
        return (f"drivers {', '.join(self.names)}; pinned to CPU {self.args.cpu_used}")

    def reproduce(self, study=None, transport=None, ns=None, cfg=None, active=None,
                  timeouts=None, reps=None):
        """The command of one plan entry (all of them without arguments)."""
        if study is None:
            return "\n".join(f"{p[0]} {p[1]}, n = {', '.join(f'{n:,}' for n in p[3])}: "
                             + self.reproduce(p[0], p[1], p[3], p[2], reps=p[4])
                             for p in self.plan)
        return reproduce_cmd(self.args, study, transport, ns, cfg, active, timeouts, reps)

    def schedule(self):
        cells = []
        for study, transport, cfg, ns, reps in self.plan:
            names = self.names_for(study)
            for rep in range(reps):
                k = rep % len(names)
                order = names[k:] + names[:k]  # rotate: no driver always first
                for n in ns:
                    est_n = cell_estimate(study, n, cfg)
                    for drv in order:
                        cells.append(Cell(f"{study} {transport} n={n} {drv} (rep {rep + 1})",
                                          est_n, lambda s=study, t=transport, n=n, d=drv,
                                          c=cfg, r=rep: self.run_one(s, t, n, d, c, r)))
        if self.mode != "smoke" and not self.args.no_syscalls and "poller" in self.studies:
            for active in STRACE_ACTIVE[self.mode]:
                for drv in self.names:
                    cells.append(Cell(f"strace poller n={STRACE_N:,} {active} active {drv}",
                                      1.0, lambda a=active, d=drv: self.count_calls(d, a)))
        return cells

    def run_one(self, study, transport, n, drv, cfg, rep):
        runner = self.runner
        d = runner.drivers[drv]
        cmd = [d["exe"], "--driver", plain(drv), "--study", study, "--transport", transport,
               "--n", str(n), "--active", ",".join(map(str, cfg["active"]))]
        if study == "poller":
            cmd += ["--rounds", str(cfg["rounds"]), "--batches", str(cfg["batches"]),
                    "--warmup", str(cfg["warmup"])]
        else:
            cmd += ["--writes", str(cfg["writes"]), "--iterations", str(cfg["iterations"]),
                    "--warmup", str(cfg["warmup"]),
                    "--timeouts", ",".join(map(str, cfg["timeouts"]))]
        cmd = runner.pin(cmd)
        out = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=runner.preexec())
        for line in out.stdout.splitlines():
            kind, _, body = line.partition(" ")
            if kind == "RESULT":
                r = json.loads(body)
                r["driver"] = drv  # <name>@base for the baseline build's driver
                r["rep"] = rep
                r["cmd"] = shlex.join(cmd)
                runner.records.append(r)
            elif kind == "TRANSPORT":
                runner.transport_costs.append(json.loads(body))
        if out.returncode != 0:
            msg = (out.stderr.strip() or f"exit status {out.returncode}").splitlines()[-1]
            runner.fail(drv, study, transport, n, msg, shlex.join(cmd))

    def count_calls(self, drv, active):
        """System calls per round, counted with strace -c -f: two runs differing only in
        the number of rounds, so that set-up and tear-down cancel out and what is left is
        exact."""
        strace = shutil.which("strace")
        key = f"socketpair/{STRACE_N}/{active}"
        if not strace:
            self.syscalls_why = "strace not installed"
            return
        table = self.syscalls.setdefault(key, {})
        lo, hi = (100, 300) if active < 10 else (10, 30)
        d = self.runner.drivers[drv]
        counts = []
        for rounds in (lo, hi):
            path = f"/tmp/iomux-bench-strace-{os.getpid()}.txt"
            cmd = [strace, "-c", "-f", "-o", path, d["exe"], "--driver", plain(drv), "--study",
                   "poller", "--transport", "socketpair", "--n", str(STRACE_N), "--active",
                   str(active), "--rounds", str(rounds), "--batches", "1", "--warmup", "0"]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0 or '"skip"' in out.stdout:
                counts = None  # failed (already reported by the timed runs) or skipped
                break
            counts.append(parse_strace(path))
            os.unlink(path)
        if counts:
            a, b = counts
            table[drv] = {k: (b.get(k, 0) - a.get(k, 0)) / (hi - lo) for k in set(a) | set(b)
                          if abs(b.get(k, 0) - a.get(k, 0)) >= (hi - lo) / 10}

    # -----------------------------------------------------------------------------------
    # Report.

    def report_md(self, out):
        ctx, tables, skips = self.ctx, self.ctx.tables, self.ctx.skips
        names = driver_order({r["driver"] for r in self.runner.records
                              if r.get("study") in self.NAMES})
        md, misses = [], []
        for study, transport, cfg, ns, reps in self.plan:
            md += [f"## Study {'1: Poller' if study == 'poller' else '2: chained writes'}"
                   f" — {transport}", ""]
            variants = [(a, None) for a in cfg["active"]] if study == "poller" else \
                [(a, t) for t in cfg["timeouts"] for a in cfg["active"]]
            for metric, unit, mtitle in METRICS[study]:
                per_active = metric not in ("create_ns", "teardown_ns")
                for active, tmo in (variants if per_active else [(None, None)]):
                    key = (study, transport, active, tmo, metric)
                    if key not in tables:
                        continue
                    t = tables[key]
                    what = mtitle + (f", {active} active" if active else "") + (
                        ", idle timeouts" if tmo else (", no timeouts" if tmo == 0 else ""))
                    md += [f"### {what} ({unit})", ""]
                    md += ["```", self.reproduce(study, transport, ns, cfg,
                                                 [active] if active else None,
                                                 [tmo] if tmo is not None else None, reps),
                           "```", ""]
                    md += [table_md(t, ns, names, skips, key, False), ""]
                    md += [f"Ratio to {FLOOR}:", "",
                           table_md(t, ns, names, skips, key, True, target_mark), ""]
                    for n in ns:
                        s = t.get(TARGET[0], {}).get(n)
                        if s and s["ratio"] and s["ratio"] > TARGET[1]:
                            misses.append(f"{study} {transport} {what}, n={n:,}: "
                                          f"{s['ratio']:.2f}x")
            md += plots_for(out, study, transport, cfg, tables)
        ts = {}
        for c in self.runner.transport_costs:
            for k in ("open_ns", "close_ns"):
                if k in c:
                    ts.setdefault((c["transport"], k), []).append(c[k])
        if ts:
            md += ["## Transport cost (harness, not timed in any study)", "",
                   "| transport | open per slot (ns) | close per slot (ns) |", "|---|---|---|"]
            for tr in ("socketpair", "eventfd"):
                if (tr, "open_ns") in ts:
                    md.append(f"| {tr} | {fmt_num(median(ts[(tr, 'open_ns')]))} | "
                              f"{fmt_num(median(ts.get((tr, 'close_ns'), [])))} |")
            md.append("")
        if self.syscalls:
            md += syscall_md(self.syscalls)
        if self.plan:
            md += [f"## {TARGET[0]} against its target ({TARGET[1]:.2f}x of {FLOOR})", ""]
            md += [f"- missed: {m}" for m in misses] or ["- met in every cell"]
            md.append("")
        ctx.held_misses = misses
        return md, [f"{TARGET[0]} misses {TARGET[1]:.2f}x: {m}" for m in misses]

    def report_tail_md(self, out):
        costs = self.ctx.studies.get("costs")
        md, missed = peer_targets_md(self.ctx.tables, self.plan, self.syscalls,
                                     costs.result if costs else None)
        kmd, kmissed = kqueue_target_md(self.ctx.tables, self.plan)
        return md + kmd, missed + kmissed

    def print_tables(self):
        print_tables_(self.ctx.tables, self.ctx.skips, self.plan)

    def smoke_summary(self):
        checked = sum(r.get("callbacks_checked", 0) for r in self.runner.records)
        cells = [r for r in self.runner.records if r.get("study") in self.NAMES]
        return [f"{len(cells)} cells, {checked:,} callbacks counted and checked; drivers run: "
                f"{', '.join(self.names)}"]

    def json_parts(self):
        return {"syscalls": self.syscalls}

    def baseline_blocks(self):
        blocks = []
        for study, transport, cfg, ns, reps in self.plan:
            variants = ([(a, None) for a in cfg["active"]] if study == "poller" else
                        [(a, t) for t in cfg["timeouts"] for a in cfg["active"]])
            for metric in BASE_METRICS[study]:
                for active, tmo in variants:
                    blocks.append(((study, transport, active, tmo, metric), ns, "n"))
        return blocks
