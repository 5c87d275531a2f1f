# SPDX-License-Identifier: MIT
"""The cost table, run by bench/run (bench/README.md, "Cost table"): user-space instructions
per unit of work, counted with valgrind's callgrind, and system calls per unit, counted with
strace -c -f; both as the difference between two runs that differ only in their length (L
and COST_FACTOR * L units), divided by the difference in units, so that start-up, set-up,
tear-down and the final report cancel out. Callgrind counts what the program executes, not
time: the same build given the same work counts the same instructions however busy the
machine is, so one run per length is enough. It breaks the ties of the timed studies, whose
cells overlap (studies 1 and 2's report_tail_md, the back-to-back pairs)."""
import os
import shlex
import shutil
import subprocess
import tempfile
import time

import echo_study
from benchlib import (FLOOR, Cell, Study as Base, COST_EXCLUDED, baseline_arg, build_arg,
                      callgrind_cmd, callgrind_ir, callgrind_unavailable, calls_diff,
                      driver_order, end_line, failed_line, fmt_dur, keep_callgrind, log,
                      parse_strace, plain, strace_run)
from echo_study import (IDLE, ECHO_WATCHERS, URING_FLOOR, echo_order, run_echo_one,
                        with_idle_timeout)

# Each unit runs for L and for COST_FACTOR * L units (Poller rounds, chained writes, chain
# iterations of n restarts each, or seconds of echoing), under callgrind; then under strace
# with the shorter lengths of COST_STRACE_LENGTHS.
COST_FACTOR = 3
COST_LENGTHS = {"poller-1": 1000, "poller-100": 100, "chain": 2000, "chain-timeouts": 2000,
                "restart": 20, "echo": 0.5}
COST_STRACE_LENGTHS = {"poller-1": 100, "poller-100": 10, "chain": 300, "chain-timeouts": 300,
                       "restart": 3, "echo": 0.5}
ECHO_MANY_LENGTH = 2  # the echo unit's L in seconds at more than one session (--sessions)
# rows: the drivers and echo servers measured (None: every one the mode's backends and
# peers allow); the quick run keeps the floors, iomux on epoll, io_uring and kqueue (libkqueue
# here), its libevent emulation and the peers, which is what the back-to-back pairs' ties need.
QUICK_ROWS = ["raw-epoll", "raw-uring", "raw-uring-multi", "raw-kqueue", "iomux-epoll",
              "iomux-uring", "iomux-uring-edge", "iomux-kqueue", "iomux-event-epoll", "iomux-io",
              "libev", "libevent", "libuv",
              "asio"]
MODES = {
    "smoke": dict(n=100, units=["poller-1", "echo"], lengths={"poller-1": 100, "echo": 0.2},
                  strace=None, block=128, backends=["epoll", "uring"], peers=False, rows=None),
    "quick": dict(n=100, units=None, lengths=dict(COST_LENGTHS, echo=0.3),
                  strace=dict(echo=0.3),
                  block=128, backends=["epoll", "uring"], peers=True, rows=QUICK_ROWS),
    "full": dict(n=100, units=None, lengths=COST_LENGTHS, strace=COST_STRACE_LENGTHS,
                 block=128, backends=None, peers=True, rows=None),
}

COST_UNITS = {  # unit -> its title, what one unit is, and how a driver runs it
    "poller-1": dict(
        title="Poller round, 1 active slot", unit="round", study="poller",
        args=["--active", "1", "--batches", "1", "--warmup", "20"], length="--rounds",
        what="one round of study 1 with 1 of the n slots active: a token written, one "
             "non-blocking dispatch, and the callback that reads the token"),
    "poller-100": dict(
        title="Poller round, 100 active slots", unit="round", study="poller",
        args=["--active", "100", "--batches", "1", "--warmup", "20"], length="--rounds",
        what="one round of study 1 with every one of the 100 slots active: 100 tokens "
             "written, one dispatch (more if the library caps its batch of events), and 100 "
             "callbacks that read them"),
    "chain": dict(
        title="Chained write, no timeouts", unit="write", study="chain",
        args=["--active", "100", "--iterations", "1", "--warmup", "0", "--timeouts", "0"],
        length="--writes",
        what="one token passed on in study 2 (100 active of 100 slots): a callback that "
             "reads a token and writes one to the next slot, and its share of the "
             "dispatches. It contains no watcher restart: study 2 restarts every watcher "
             "once per iteration, not per write (see the restart unit)"),
    "chain-timeouts": dict(
        title="Chained write, idle timeouts", unit="write", study="chain",
        args=["--active", "100", "--iterations", "1", "--warmup", "0", "--timeouts", "1"],
        length="--writes",
        what="the same with an idle timer on every slot, which each read restarts the way "
             "the library does it best (study 2's second variant)",
        note="Not exact: every driver orders its timers by deadline, now + timeout, so how "
             "far a restarted timer moves in the heap depends on the time that passed since "
             "the others were set, and the counts vary a little between runs (bench/README.md "
             "says by how much); a difference under 1% in this table is not one"),
    "restart": dict(
        title="Watcher restart (stop + start)", unit="restart", study="chain",
        args=["--active", "1", "--writes", "0", "--warmup", "1", "--timeouts", "0"],
        length="--iterations", per_length="n", minus="poller-1",
        what="stopping and starting the read watcher of one slot, as study 2 does to every "
             "slot at the start of an iteration. Measured with study 2 iterations that pass "
             "no token on (1 active slot): an iteration is n restarts, the dispatch after "
             "them (where the libraries that batch changes apply them) and one token "
             "written and read; less the Poller round at 1 active slot, divided by n. So "
             "1/n of a dispatch that finds nothing ready is included"),
    "echo": dict(
        title="Echo round trip, 1 session", unit="echo", study="echo",
        what="one echo of a study 3 server, 1 session of 128-byte blocks: the server "
             "reads the block and writes it back (the client, not counted, checks it and "
             "sends the next). The unit count is the client's own count of echoes, and "
             "the run length its window, in seconds",
        note="The servers that read again before they wait (libuv after a read that fills "
             "its buffer, Asio) find the next block there or not depending on how quick the "
             "client was, so their instructions vary a little between runs (bench/README.md "
             "says by how much) and their system calls more (strace slows the server); the "
             "others' are exact to within one echo in flight at the end. The iomux servers "
             "run as in study 3, with no idle timeout, as none of the other servers has one; "
             f"`iomux-epoll{IDLE}` is the same server with the example's default idle timeout "
             "of 10 s: each echo also restarts the connection's timer, and the loop reads "
             "the clock at every iteration"),
}


def cost_driver_cmd(d, drv, unit, transport, n, length):
    u = COST_UNITS[unit]
    return [d["exe"], "--driver", plain(drv), "--study", u["study"], "--transport", transport,
            "--n", str(n)] + u["args"] + [u["length"], str(length)]



def cost_driver(runner, drv, unit, cfg, transport, lengths, slengths, outdir):
    """One unit of a readiness driver: two runs under callgrind, two under strace. Returns
    the row (instructions and calls per run length unit), or None (failure recorded)."""
    d, n = runner.drivers[drv], cfg["n"]
    row = dict(ir=[], commands=[])
    for length in lengths:
        out = os.path.join(outdir, f"{unit}.{drv}.{length}")
        cmd = runner.pin(callgrind_cmd(out) + cost_driver_cmd(d, drv, unit, transport, n,
                                                              length))
        p = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=runner.preexec())
        ir, files = callgrind_ir(out)
        why = (failed_line(p) if p.returncode != 0 else
               "skipped: " + p.stdout.split('"skip":', 1)[1].strip('"}\n ') if '"skip"' in
               p.stdout else "no callgrind output" if ir is None else None)
        keep_callgrind(files, runner.keep_callgrind and not why)
        if why:
            return cost_failed(runner, drv, transport, n, why, cmd)
        row["ir"].append(ir)
        row["commands"].append(shlex.join(cmd))
    row["per_length"] = (row["ir"][1] - row["ir"][0]) / (lengths[1] - lengths[0])
    if slengths:
        calls = []
        for length in slengths:
            cmd = cost_driver_cmd(d, drv, unit, transport, n, length)
            c = strace_run(cmd, os.path.join(outdir, f"strace.{unit}.{drv}.{length}.txt"))
            if c is None:
                return cost_failed(runner, drv, transport, n, "failed under strace", cmd)
            calls.append(c)
            row.setdefault("strace_commands", []).append(
                shlex.join(["strace", "-c", "-f", "-o", "FILE"] + cmd))
        row["calls_per_length"] = calls_diff(calls[0], calls[1], slengths[1] - slengths[0])
    return row


def echo_pair(runner, name, s, ecfg, lengths, outdir):
    """The two callgrind runs of one echo server's cost, one per run length. Returns the
    row (ir, echoes, commands), or None (failure recorded)."""
    row = dict(ir=[], echoes=[], commands=[])
    for secs in lengths:
        out = os.path.join(outdir, f"echo.{name}.{secs}s")
        r = run_echo_one(runner, name, s, ecfg, -1, seconds=secs, warmup=0,
                         callgrind_out=out, study="costs")
        ir, files = callgrind_ir(out)
        keep_callgrind(files, runner.keep_callgrind and r is not None and ir is not None)
        if r is None:
            return None
        if ir is None:
            return cost_failed(runner, name, "tcp", s, "no callgrind output",
                               r["server_cmd"], "costs")
        row["ir"].append(ir)
        row["echoes"].append(r["echoes_total"])
        row["commands"].append(f"{r['server_cmd']} & {r['cmd']}")
        if "server_stop" in r:
            row["server_stop"] = r["server_stop"]
    return row


def cost_echo(runner, name, cfg, lengths, slengths, outdir):
    """One echo server: two runs under callgrind, two under strace, each with the client
    echoing for that many seconds over cfg["sessions"] sessions (1 unless --sessions names
    another count). Returns the row, or None (failure recorded)."""
    ecfg, s = dict(block=cfg["block"]), cfg["sessions"]
    row = echo_pair(runner, name, s, ecfg, lengths, outdir)
    if row is None:
        return None
    if row["echoes"][1] <= row["echoes"][0]:
        # Under callgrind on a loaded machine the longer run can be starved into echoing
        # fewer than the shorter one (seen once: 1,136 then 53 in a smoke run at load 15):
        # the pair is run once more before the cell counts as failed, and the row says so.
        first = row["echoes"]
        row = echo_pair(runner, name, s, ecfg, lengths, outdir)
        if row is None:
            return None
        row["retried"] = f"the first pair's echoes did not grow with the run length: {first}"
    units = row["echoes"][1] - row["echoes"][0]
    if units <= 0:
        return cost_failed(runner, name, "tcp", s, f"echoes did not grow with the run "
                           f"length: {row['echoes']}", row["commands"][1])
    row["units"] = units
    row["per_length"] = (row["ir"][1] - row["ir"][0]) / units  # per echo
    if slengths:
        calls, echoes = [], []
        for secs in slengths:
            path = os.path.join(outdir, f"strace.echo.{name}.{secs}s.txt")
            r = run_echo_one(runner, name, s, ecfg, -1, seconds=secs, warmup=0,
                             strace_path=path, study="costs")
            c = parse_strace(path) if r and os.path.exists(path) else None
            if os.path.exists(path):
                os.unlink(path)
            if c is None:
                return None if r is None else cost_failed(
                    runner, name, "tcp", s, "no strace count", r["server_cmd"])
            calls.append(c)
            echoes.append(r["echoes_total"])
            row.setdefault("strace_commands", []).append(f"{r['server_cmd']} & {r['cmd']}")
        if echoes[1] > echoes[0]:
            row["strace_echoes"] = echoes
            row["calls_per_length"] = calls_diff(calls[0], calls[1], echoes[1] - echoes[0])
    return row


def cost_failed(runner, name, transport, n, why, cmd, study="costs"):
    runner.failures.append((name, study, transport, n, why,
                            cmd if isinstance(cmd, str) else shlex.join(cmd)))
    end_line()
    log(f"  FAILED costs {name}: {why}")
    return None



def summarize(runner, cfg, units, measured, transport, do_strace):
    """What the report and results.json show, from the rows measured ({unit: {name:
    row}}): per unit, per row, the instructions and system calls per unit, and the
    commands."""
    n = cfg["n"]
    res = dict(transport=transport, n=n, factor=COST_FACTOR, block=cfg["block"],
               sessions=cfg["sessions"],
               excluded=list(COST_EXCLUDED), floor=FLOOR, units={})
    for unit in units:
        u = COST_UNITS[unit]
        lo = cfg["lengths"][unit]
        lengths = [lo, lo * COST_FACTOR]
        slo = (cfg["strace"] or {}).get(unit) if do_strace else None
        slengths = [slo, slo * COST_FACTOR] if slo else None
        rows = measured.get(unit, {})
        title, what = u["title"], u["what"]
        if unit == "echo" and (cfg["sessions"] != 1 or cfg["block"] != 128):
            sessions = (f"{cfg['sessions']:,} session{'s' if cfg['sessions'] != 1 else ''}"
                        f" of {cfg['block']:,}-byte blocks")
            title = f"Echo round trip, {sessions}"
            what = what.replace("1 session of 128-byte blocks", sessions)
        res["units"][unit] = dict(title=title, unit=u["unit"], what=what,
                                  lengths=lengths, strace_lengths=slengths, rows=rows)
        minus = res["units"].get(u.get("minus"), {}).get("rows", {})
        for name, row in list(rows.items()):
            per, calls = row["per_length"], row.get("calls_per_length")
            if u.get("minus"):
                if name not in minus:
                    del rows[name]
                    continue
                per -= minus[name]["per_length"]
                if calls is not None and "calls_per_length" in minus[name]:
                    calls = calls_diff(minus[name]["calls_per_length"], calls, 1)
                else:
                    calls = None
            div = n if u.get("per_length") == "n" else 1
            row["per_unit"] = per / div
            if row["ir"][1] <= row["ir"][0]:
                cost_failed(runner, name, transport, n, f"{unit}: the instructions did not "
                            f"grow with the run length: {row['ir']}", row["commands"][1])
            if calls is not None:
                row["syscalls"] = {k: v / div for k, v in sorted(calls.items())
                                   if abs(v / div) >= 0.005}
                row["syscalls_total"] = sum(row["syscalls"].values())
        floor = rows.get(FLOOR)
        for row in rows.values():
            row["ratio"] = (row["per_unit"] / floor["per_unit"]
                            if floor and floor["per_unit"] > 0 else None)
        libs = [name for name in rows if not plain(name).startswith("raw-")]
        if libs:
            res["units"][unit]["lowest"] = min(libs, key=lambda k: rows[k]["per_unit"])
    return res

def costs_reproduce(args, mode, units, names):
    cmd = ["bench/run", "--build", build_arg(args)] + (["--full"] if mode == "full" else []) + [
        "--study", "costs", "--units", ",".join(units)]
    if "echo" in units and args.sessions:
        cmd += ["--sessions", args.sessions.split(",")[0]]
    if "echo" in units and args.block:
        cmd += ["--block", str(args.block)]
    if args.transport:
        cmd += ["--transport", args.transport.split(",")[0]]
    if names:
        cmd += ["--drivers", ",".join(names)]
    cmd += baseline_arg(args)
    if units == ["echo"]:
        cmd += ["--echo-cpus", ",".join(map(str, args.echo_cpus))]
    elif args.cpu_used is not None:
        cmd += ["--cpu", str(args.cpu_used)]
    return shlex.join(cmd)


def fmt_calls(row):
    if "syscalls" not in row:
        return "—"
    parts = ", ".join(f"{k} {v:.2f}" for k, v in sorted(row["syscalls"].items(),
                                                       key=lambda kv: (-abs(kv[1]), kv[0])))
    return f"{row['syscalls_total']:.2f}" + (f" ({parts})" if parts else "")


def costs_table(entry, order):
    unit = entry["unit"]
    rows, low = entry["rows"], entry.get("lowest")
    who = "server" if unit == "echo" else "driver"
    lines = [f"| {who} | instructions per {unit} | ratio to {FLOOR} | system calls per {unit} |",
             "|---|---|---|---|"]
    for name in order:
        row = rows.get(name)
        if row is None:
            lines.append(f"| {name} | failed | — | — |")
            continue
        v = f"{row['per_unit']:,.1f}"
        lines.append(f"| {name} | " + (f"**{v}**" if name == low else v) + " | " + (
            f"{row['ratio']:.2f}x" if row.get("ratio") is not None else "—") + " | "
            + fmt_calls(row) + " |")
    return "\n".join(lines)


URING_IR_TARGET = 1.3  # iomux-uring's instructions per echo over the io_uring floor's
URING_ENTER_TARGET = 1.05  # io_uring_enter per echo, at most


def uring_floor_lines(rows, sessions=1):
    """iomux-uring against the io_uring floor in the echo unit: (lines, misses)."""
    mine, floor = rows.get("iomux-uring"), rows.get(URING_FLOOR)
    if not mine or not floor or not floor.get("per_unit"):
        return [], []
    ratio = mine["per_unit"] / floor["per_unit"]
    enters = [r.get("syscalls", {}).get("io_uring_enter") for r in (mine, floor)]
    lines = [f"`iomux-uring` over `{URING_FLOOR}` (the io_uring floor): {mine['per_unit']:,.1f} "
             f"against {floor['per_unit']:,.1f} instructions per echo, {ratio:.2f}x (target: "
             f"at most {URING_IR_TARGET}x)"]
    misses = []
    if ratio > URING_IR_TARGET:
        misses.append(f"costs echo (S = {sessions:,}): iomux-uring {ratio:.2f}x {URING_FLOOR}'s "
                      f"instructions per echo, over {URING_IR_TARGET}x")
    if None not in enters:
        lines[0] += (f"; `io_uring_enter` per echo {enters[0]:.2f} against {enters[1]:.2f} "
                     f"(target: at most {URING_ENTER_TARGET})" + (
                         ". At one session every server that sends through the ring gets its "
                         "send's completion at once, in the enter that submitted it, and waits "
                         "for the next block in a second one" if sessions == 1 else
                         f", at {sessions:,} sessions"))
        if enters[0] > URING_ENTER_TARGET:
            misses.append(f"costs echo (S = {sessions:,}): iomux-uring {enters[0]:.2f} "
                          f"io_uring_enter per echo (the floor {enters[1]:.2f}), over "
                          f"{URING_ENTER_TARGET}")
    return [lines[0] + ".", ""], misses


def uring_floor_md(rows, sessions=1):
    return uring_floor_lines(rows, sessions)[0]


def unit_names(unit, names, drivers):
    """The drivers a unit has a row for: the edge-triggered ones run study 1's units only."""
    return [n for n in names if COST_UNITS[unit]["study"] != "chain" or
            not drivers.get(n, {}).get("edge")]


def costs_md(args, mode, costs, names, enames, want, drivers):
    md = ["## Cost table: user-space instructions per unit (callgrind)", "",
          "User-space instructions per unit of work, counted by valgrind's callgrind (the "
          "`Ir` total of its output files, summed when a process dumps more than once), as "
          f"the difference between two runs that differ only in their length, L and "
          f"{costs['factor']}L units, divided by the difference in units: start-up, set-up, "
          "tear-down and the final report cancel out. What is spent in "
          + ", ".join(f"`{f}`" for f in costs["excluded"]) + " is left out (the drivers print "
          "their timings, and formatting a number costs more or fewer instructions with its "
          "value). Callgrind counts what the program executes, not time: the same build given "
          "the same work counts the same however busy the machine is, so one run per length "
          "is enough, and it breaks the ties between cells of the timed studies that overlap. "
          "The kernel's side is not in these counts; the system calls are, counted with "
          "`strace -c -f` in the same way (shorter runs; calls under 0.005 per unit left "
          f"out). Slots are {costs['transport']}s, n = {costs['n']}. Ratios are to "
          f"`{FLOOR}` (for echo, the hand-written epoll echo server); **bold** marks the "
          "lowest count among the libraries (every row but the hand-written `raw-*` "
          f"floors). This study took {fmt_dur(costs['seconds'])}. bench/README.md, \"Cost "
          "table\", says what each unit is."
          + (" Every run's callgrind output is kept, compressed, in `callgrind/` next to this "
             "report: gunzip one to read it with `callgrind_annotate`." if costs.get("kept")
             else ""), ""]
    for unit, entry in costs["units"].items():
        order = (echo_order(set(entry["rows"]) | set(enames)) if unit == "echo" else
                 driver_order(set(entry["rows"]) | set(unit_names(unit, names, drivers))))
        what = entry["what"]
        md += [f"### {entry['title']}: instructions per {entry['unit']}", "",
               what[:1].upper() + what[1:] + ".", "", "```",
               costs_reproduce(args, mode, [unit], want)]
        ex = entry["rows"].get(FLOOR) or next(iter(entry["rows"].values()), None)
        if ex:
            which = next(k for k, v in entry["rows"].items() if v is ex)
            runs = ("runs" if unit != "echo" else
                    f"runs ({ex['echoes'][0]:,} and {ex['echoes'][1]:,} echoes)")
            md += [f"# {which}'s two {runs}, as every row's:"] + ex["commands"]
        md += ["```", "", costs_table(entry, order), ""]
        if not entry["strace_lengths"] and mode == "quick":
            md += ["The quick run counts no system calls for this unit (`--full` does); study "
                   "1's system-call table has those of the Poller rounds at n = 1,000, 100 "
                   "active.", ""]
        if COST_UNITS[unit].get("note"):
            md += [COST_UNITS[unit]["note"] + ".", ""]
        if unit == "echo":
            md += uring_floor_md(entry["rows"], costs.get("sessions", 1))
        stops = [k for k, v in entry["rows"].items() if "server_stop" in v]
        if stops:
            md += ["Under valgrind, " + ", ".join(f"`{k}`" for k in stops) + " did not exit on "
                   "SIGTERM: valgrind holds signals back while a process sleeps in "
                   "`io_uring_enter`, so its counts were dumped with `callgrind_control -d`, "
                   "which also woke it to exit.", ""]
    return md


def print_costs(costs, names, enames, drivers):
    for unit, entry in costs["units"].items():
        order = (echo_order(set(entry["rows"]) | set(enames)) if unit == "echo" else
                 driver_order(set(entry["rows"]) | set(unit_names(unit, names, drivers))))
        lo, hi = entry["lengths"]
        runs = (f"windows of {lo} s and {hi} s" if unit == "echo" else
                f"runs of {lo:,} and {hi:,} {COST_UNITS[unit]['length'].lstrip('-')}")
        log(f"\ncosts {unit}: {entry['title']}, instructions per {entry['unit']} (callgrind, "
            f"{runs})")
        log(costs_table(entry, order))




class Study(Base):
    """The cost table (its rows: the harness drivers for five units, the echo servers for
    the echo unit)."""
    NAME = "costs"
    TITLE = "the cost table (user-space instructions per unit, callgrind)"
    MODES = MODES

    def __init__(self, ctx):
        super().__init__(ctx)
        args, runner, cfg, want = self.args, self.runner, self.cfg, ctx.want
        # The echo unit runs at one session of the mode's block unless --sessions (its first
        # count) and --block say otherwise: iomux-uring's targets against the io_uring floor
        # are also set at 100 to 10,000 sessions and at 16 KB.
        cfg["sessions"] = int(args.sessions.split(",")[0]) if args.sessions else 1
        if args.block:
            cfg["block"] = args.block
        if cfg["sessions"] > 1:
            # Under callgrind a server of many sessions echoes a few thousand blocks a second
            # and its start-up (every accept) is longer: half a second is too short a window
            # for the difference of two runs to be the echoes' own.
            cfg["lengths"] = dict(cfg["lengths"], echo=ECHO_MANY_LENGTH)
            if cfg.get("strace"):
                cfg["strace"] = dict(cfg["strace"], echo=ECHO_MANY_LENGTH)
        units = args.units.split(",") if args.units else (cfg["units"] or list(COST_UNITS))
        unknown = [u for u in units if u not in COST_UNITS]
        if unknown:
            raise SystemExit(f"run: unknown cost units {unknown}; known: "
                             f"{', '.join(COST_UNITS)}")
        if "restart" in units and "poller-1" not in units:
            units.append("poller-1")  # a restart is an iteration less a Poller round
        units = [u for u in COST_UNITS if u in units]
        self.skipped += echo_study.discover(ctx)
        if "echo" in units and not runner.echo_client:
            self.skipped.append(("costs echo", "echo-client not built"))
            units.remove("echo")
        rows = None if want else cfg["rows"]
        self.names = [n for n in ctx.driver_names if not rows or plain(n) in rows]
        self.enames = []
        servers = runner.echo_servers
        for n in echo_order(servers) if "echo" in units else []:
            own = plain(n)
            if n.endswith(IDLE):
                continue
            if want:
                if n in want:
                    self.enames.append(n)
            elif rows and own not in rows:
                continue
            elif own in (FLOOR, URING_FLOOR, ECHO_WATCHERS) or (own.startswith("iomux-") and (
                    cfg["backends"] is None or own.split("-", 1)[1] in cfg["backends"])) or (
                    cfg["peers"] and not own.startswith(("iomux-", "raw-"))):
                self.enames.append(n)
        for n in list(self.enames):
            if n == "iomux-epoll" and n + IDLE not in servers:
                servers[n + IDLE] = with_idle_timeout(servers[n])
                self.enames.insert(self.enames.index(n) + 1, n + IDLE)
        # Any other iomux server with its idle timeout, when --drivers names it (iomux-uring+idle).
        for w in want or []:
            base = w[:-len(IDLE)] if w.endswith(IDLE) else None
            if "echo" in units and base and base.startswith("iomux-") and base in servers \
                    and w not in self.enames:
                servers.setdefault(w, with_idle_timeout(servers[base]))
                at = self.enames.index(base) + 1 if base in self.enames else len(self.enames)
                self.enames.insert(at, w)
        if "echo" in units and not self.enames:
            units.remove("echo")
        if not self.names:
            units = [u for u in units if u == "echo"]
        self.units = units
        self.why = callgrind_unavailable(args.build_abs)
        if not units or not (self.names or self.enames):
            self.why = self.why or "no driver or echo server selected"
        self.transport = args.transport.split(",")[0] if args.transport else "socketpair"
        self.strace = self.mode != "smoke" and not args.no_syscalls
        self.result, self.rows, self.t0, self.dir = None, {}, None, None

    def known(self):
        servers = self.runner.echo_servers
        return set(servers) | {n + IDLE for n in servers if plain(n).startswith("iomux-")}

    def banner(self):
        return (f"costs of {', '.join(self.units)} under callgrind"
                + (f": drivers {', '.join(self.names)}" if self.names else "")
                + (f"; echo servers {', '.join(self.enames)}" if self.enames else "")
                + (f" (skipped: {self.why})" if self.why else ""))

    def reproduce(self):
        return costs_reproduce(self.args, self.mode, self.units, self.ctx.want)

    def schedule(self):
        if self.why:
            return []
        cells = []
        for unit in self.units:
            self.rows[unit] = {}
            for name in (self.enames if unit == "echo" else
                         unit_names(unit, self.names, self.runner.drivers)):
                # about what a row takes at a load of 5 to 8 (callgrind's start-up is most
                # of it), and twice that with strace's two runs
                slo = (self.cfg["strace"] or {}).get(unit) if self.strace else None
                est = (2.5 if unit == "poller-100" else 1.2) * (2 if slo else 1)
                if unit == "echo":
                    est = 2.0 + 4 * self.cfg["lengths"]["echo"] * (2 if slo else 1)
                cells.append(Cell(f"costs {unit} {name}", est,
                                  lambda u=unit, name=name: self.run_row(u, name)))
        return cells

    def start(self):
        """The directory of the callgrind files, and the clock of the study."""
        if self.dir is None:
            self.t0 = time.time()
            self.runner.keep_callgrind = self.mode != "smoke"
            self.dir = (tempfile.mkdtemp(prefix="iomux-bench-costs-") if self.mode == "smoke"
                        else os.path.join(self.ctx.out, "callgrind"))
            os.makedirs(self.dir, exist_ok=True)
            if self.strace and not shutil.which("strace"):
                log("costs: system calls not counted: strace not installed")
                self.strace = False

    def run_row(self, unit, name):
        self.start()
        cfg, runner = self.cfg, self.runner
        lo = cfg["lengths"][unit]
        lengths = [lo, lo * COST_FACTOR]
        slo = (cfg["strace"] or {}).get(unit) if self.strace else None
        slengths = [slo, slo * COST_FACTOR] if slo else None
        row = (cost_echo(runner, name, cfg, lengths, slengths, self.dir) if unit == "echo"
               else cost_driver(runner, name, unit, cfg, self.transport, lengths, slengths,
                                self.dir))
        if row:
            self.rows[unit][name] = row

    def finish(self):
        if self.dir is None:
            return
        self.result = summarize(self.runner, self.cfg, self.units, self.rows, self.transport,
                                self.strace)
        self.result["seconds"] = round(time.time() - self.t0, 1)
        self.result["kept"] = self.runner.keep_callgrind
        if self.mode == "smoke":
            shutil.rmtree(self.dir, ignore_errors=True)
        end_line()

    def report_md(self, out):
        if self.result:
            echo = self.result["units"].get("echo", {}).get("rows", {})
            return costs_md(self.args, self.mode, self.result, self.names, self.enames,
                            self.ctx.want, self.runner.drivers), uring_floor_lines(
                                echo, self.cfg["sessions"])[1]
        return ["## Cost table: user-space instructions per unit (callgrind)", "",
                f"Not measured: {self.why or 'no row ran'}.", ""], []

    def print_tables(self):
        if self.result:
            print_costs(self.result, self.names, self.enames, self.runner.drivers)

    def smoke_summary(self):
        costs = self.result
        if not costs:
            return [f"costs: skipped: {self.why}"]
        measured = sum(len(e["rows"]) for e in costs["units"].values())
        failed = sum(1 for f in self.runner.failures if f[1] == "costs")
        return [f"costs: {measured} drivers and servers measured at two run lengths under "
                f"callgrind ({', '.join(self.units)}), "
                + (f"{failed} failed" if failed else "every count growing with the length")
                + f"; took {fmt_dur(costs['seconds'])}"]

    def json_parts(self):
        return {"costs": self.result}
