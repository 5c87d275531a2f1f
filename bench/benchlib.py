# SPDX-License-Identifier: MIT
"""What every study of the benchmark suite shares (bench/README.md, "Adding a study"): the
study interface (Study, Cell), the runner's state while the cells run (Runner: pinning,
processes to stop, records, failures, the progress line), statistics (medians, paired
ratios, the median's confidence interval and the verdict on a target), tables, plots (one
look per driver in every plot), strace and callgrind counts, and the build's facts.

bench/run is the runner: it parses the command line, finds what the build holds, builds
every registered study (its STUDIES list), runs their cells in order and writes the report.
A study is one module with one class derived from Study, registered by one line there."""
import glob
import gzip
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FLOOR = "raw-epoll"  # the hand-written level-triggered epoll loop: every ratio's reference
HELD = "iomux-epoll"  # the driver most targets are for: drawn bold beside the floor
FD_RESERVE = 40  # fds left for stdio and the libraries' own (epoll, eventfd, pipes)
BASE = "@base"  # suffix of the drivers and echo servers taken from the --baseline build
CONFIDENCE = 0.95  # of the median's interval in the back-to-back pairs
PACE_PRIOR = 60.0  # seconds: the weight of the estimates against the time measured (left())
# A quick run's verdicts rest on few repetitions: the report marks them so (mark_quick()).
QUICK_MARK = " (quick run: indicative, not settled; `make bench-full` settles it)"


def log(msg):
    print(msg, flush=True)


def plain(name):
    """The driver's own name: iomux-epoll for iomux-epoll@base."""
    return name[:-len(BASE)] if name.endswith(BASE) else name


def shown_path(path):
    """A path as the report shows it: relative to the repository when inside it."""
    rel = os.path.relpath(path, ROOT)
    return path if rel.startswith("..") else rel



def fmt_dur(s):
    s = int(s)
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"



# ---------------------------------------------------------------------------------------
# The study interface.

class Cell:
    """One unit of a study's work, as the progress line counts it: what it is (shown),
    about how many seconds it takes (the whole run's estimate adds these up), and the
    function that runs it. A cell records its own results and failures."""
    __slots__ = ("what", "seconds", "run")

    def __init__(self, what, seconds, run):
        self.what, self.seconds, self.run = what, seconds, run


class Study:
    """One study of the suite. bench/run builds every registered study with the run's
    context and keeps those with something to run; it asks each for its schedule() (the
    cells it will run, which the progress line counts up front), then for each study in
    turn prints its reproduce() command, runs its cells one by one and calls finish(). At
    the end it asks each for its report section and plots (report_md), the sections that
    read other studies' results (report_tail_md, after every study's own), the tables it
    prints, the lines of a smoke run and its part of results.json.

    ctx (a namespace) holds: args (the command line), mode ("smoke", "quick" or "full"),
    runner (Runner), drivers (the harness drivers: {name: bench-X --list entry}, the
    baseline's <name>@base among them), main_drivers (this build's), lim (RLIMIT_NOFILE and
    the largest n), want (the --drivers list or None), studies ({name: Study} of the run,
    in run order), tables and skips (aggregate() of the runner's records, once every
    cell ran) and out (the report directory)."""
    NAME = None  # what --study names it
    NAMES = ()  # every name --study may give it, when it answers to more than one
    TITLE = ""  # the report's words for it in its first paragraph ("" for none)
    NUMBERED = False  # its TITLE is a number of the original studies ("3 (Asio's ...)")
    MODES = {}  # its configuration per mode: {"smoke": {...}, "quick": {...}, "full": {...}}
    METRICS = {}  # {record study: [(metric, unit, title)]} that aggregate() tables

    def __init__(self, ctx):
        self.ctx, self.runner, self.args = ctx, ctx.runner, ctx.args
        self.mode = ctx.mode
        self.cfg = dict(self.MODES.get(ctx.mode, {}))
        self.skipped = []  # [(what, why)] the report's machine table lists

    @classmethod
    def study_names(cls):
        return cls.NAMES or (cls.NAME,)

    @classmethod
    def options(cls, parser):
        """Adds the study's own command-line options to bench/run's (argparse) parser;
        the options several studies share (--reps, --seconds, --drivers, ...) are the
        runner's."""

    def titles(self):
        """{name: TITLE}, for the report's first paragraph."""
        return {self.NAME: self.TITLE} if self.TITLE else {}

    def why_not(self):
        """Why this study has nothing to run (its line in the skipped list), or None."""
        return None

    def banner(self):
        """One line on what the study runs, printed before any cell runs; or None."""
        return None

    def known(self):
        """The names --drivers may give this study's drivers or servers."""
        return set()

    def reproduce(self):
        """The command line that runs the study again as it ran."""
        return None

    def schedule(self):
        """[Cell] in the order they run."""
        return []

    def finish(self):
        """After the cells, whatever happened (temporary files go here)."""

    def report_md(self, out):
        """(markdown lines, [missed target]) of the study's own section, its plots written
        to the directory out."""
        return [], []

    def report_tail_md(self, out):
        """(markdown lines, [missed target]) of what reads other studies' results; these
        sections follow every study's own."""
        return [], []

    def print_tables(self):
        """The tables printed on the terminal at the end of a run."""

    def smoke_summary(self):
        """Lines a smoke run prints: what was run and checked."""
        return []

    def json(self):
        """The study's part of results.json, under its name (None: it has none)."""
        return None

    def json_parts(self):
        """{key: value} that results.json holds for this study: json() under its name."""
        part = self.json()
        return {} if part is None else {self.NAME: part}

    def facts(self):
        """[(fact, value)] rows of the report's machine table."""
        return []

    def baseline_blocks(self):
        """For --baseline: [(table key, columns, column word, section label)] of the
        aggregate() tables compared with the baseline build's twins."""
        return []


def mark_quick(md):
    """A quick run's report sections with every verdict's heading marked as indicative."""
    verdicts = re.compile(r"target|against|Back-to-back pairs|finding hold", re.I)
    return [line + QUICK_MARK if line.startswith("#") and verdicts.search(line)
            and not line.endswith(QUICK_MARK) else line for line in md]


def build_arg(args):
    """The --build the report's commands name: relative to the repository when inside."""
    build = os.path.relpath(args.build_abs, ROOT)
    return args.build_abs if build.startswith("..") else build


def mode_arg(args):
    """The mode option of a reproduce command ([] for the quick run)."""
    return ["--full"] if args.full else ["--smoke"] if args.smoke else []


def baseline_arg(args):
    return ["--baseline", shown_path(args.baseline_abs)] if args.baseline else []


def end_line():
    """Ends a progress line that a terminal shows in place."""
    if sys.stdout.isatty():
        print()


# ---------------------------------------------------------------------------------------
# Running.

class Runner:
    """What the studies share while they run: the drivers and echo servers, the CPUs, the
    records and failures, the processes to stop whatever happens, and the progress line,
    whose estimate covers the whole run (every study's cells)."""

    def __init__(self, args, drivers, cpu):
        self.args, self.drivers, self.cpu = args, drivers, cpu
        self.taskset = shutil.which("taskset")
        self.records, self.transport_costs, self.failures = [], [], []
        self.done, self.total, self.t0 = 0, 0, time.time()
        self.est_total, self.est_done = 0.0, 0.0  # the cells' estimated seconds
        self.live = set()  # processes to stop whatever happens
        self.echo_servers, self.echo_client, self.echo_cpus = {}, None, (0, 0)
        self.keep_callgrind = False  # the costs study: keep the callgrind output files

    def pin(self, cmd, cpu=None):
        cpu = self.cpu if cpu is None else cpu
        if cpu is None or not self.taskset:
            return cmd  # without taskset, only the harness pins itself (preexec)
        return [self.taskset, "-c", str(cpu)] + cmd

    def preexec(self):
        if self.cpu is not None and not self.taskset:
            return lambda: os.sched_setaffinity(0, {self.cpu})
        return None

    def plan(self, cells):
        self.total += len(cells)
        self.est_total += sum(c.seconds for c in cells)

    def plan_after(self, seconds):
        """Work after the last cell (the report and its plots), counted in the estimate."""
        self.est_total += seconds

    def left(self):
        """Seconds the rest of the run should take: the cells' estimates still to run (and
        the report's), scaled by how the estimates of those that ran compare with the time
        they took. The pace starts from 1 and moves to the measured one as the run goes on
        (PACE_PRIOR seconds of weight), so that the first seconds' small, often overestimated
        cells do not halve the estimate of the whole run."""
        el = time.time() - self.t0
        pace = (el + PACE_PRIOR) / (self.est_done + PACE_PRIOR)
        return max(self.est_total - self.est_done, 0) * min(max(pace, 0.5), 3.0)

    def progress(self, what, seconds=0.0):
        """Called before each cell runs."""
        self.done += 1
        line = (f"[{self.done}/{self.total} {fmt_dur(time.time() - self.t0)} elapsed, "
                f"~{fmt_dur(self.left())} left] {what}")
        self.est_done += seconds
        if sys.stdout.isatty():
            print("\r\033[K" + line, end="", flush=True)
        else:
            log(line)

    def fail(self, name, study, where, n, why, cmd):
        """Records a failed run; the report lists it with its command."""
        self.failures.append((name, study, where, n, why, cmd))
        end_line()
        log(f"  FAILED {study} {name} {where} n={n}: {why}")


# ---------------------------------------------------------------------------------------
# Processes.

def own_group(nice):
    """A preexec function that puts the process in a session of its own (unless it already
    leads one, as after Popen's start_new_session) and gives that session's scheduler group
    (Linux's autogroup) the nice value `nice`, or None for 0 (--group-nice; the datagram and
    HTTP studies).

    Where autogroup is on, the scheduler shares a CPU between sessions first: with other
    sessions' builds and tests busy on both CPUs, a server and its load get a session's share
    of each (a fifth of it with four others busy), wait for it at every round of the closed
    loop, and the rate measures the other work rather than the server (bench/README.md, "The
    machine's other work, and --group-nice"). With a group of its own at -19, each takes its
    CPU when it has work, as on a quiet machine; every process it starts (nginx's worker,
    h2o's helper) stays in that session and group. Root only; the runs are bounded."""
    if not nice:
        return None

    def apply():
        if os.getsid(0) != os.getpid():
            os.setsid()
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(nice))
    return apply


def group_nice_why(args):
    """Why --group-nice cannot be honoured on this machine, or None."""
    if args.group_nice and not os.path.exists("/proc/self/autogroup"):
        return "--group-nice: this kernel has no autogroup (/proc/self/autogroup)"
    return None


def group_nice_fact(args):
    """The report's line on how the servers and their loads were scheduled."""
    nice = args.group_nice
    return (f"each server and load in a session of its own, its autogroup at nice {nice}"
            if nice else "the caller's session")


def read_line(proc, timeout):
    """The first line the process prints, or None if it prints none in time."""
    import select
    buf, deadline = b"", time.time() + timeout
    fd = proc.stdout.fileno()
    while b"\n" not in buf:
        left = deadline - time.time()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        buf += chunk
    return buf.split(b"\n", 1)[0].decode(errors="replace")


def fd_kinds(pid):
    kinds = set()
    try:
        for f in os.listdir(f"/proc/{pid}/fd"):
            try:
                kinds.add(os.readlink(f"/proc/{pid}/fd/{f}"))
            except OSError:
                pass
    except OSError:
        pass
    return kinds



# ---------------------------------------------------------------------------------------
# Statistics: medians with spread, and ratios paired within a repetition: to the floor,
# and for a driver of this build to its twin from the baseline build (<name>@base).

def parse_strace(path):
    calls = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
            try:
                calls[f[-1]] = int(f[3])
            except ValueError:
                pass
    return calls


# ---------------------------------------------------------------------------------------
# Statistics: medians with spread, and ratios paired within a repetition: to the floor,
# and for a driver of this build to its twin from the baseline build (<name>@base).

def median(v):
    return statistics.median(v) if v else None


def quartiles(v):
    if len(v) < 2:
        return v[0], v[0]
    q = statistics.quantiles(v, n=4, method="inclusive")
    return q[0], q[2]


def paired(byrep, ref):
    """The ratios of two drivers, repetition by repetition: the median of a repetition's
    samples in byrep over the median of the same repetition's in ref (both {rep: [samples]});
    a repetition missing from either (a failed run) is left out."""
    pairs = []
    for rep in sorted(byrep):
        if byrep[rep] and ref.get(rep):
            a, b = median(byrep[rep]), median(ref[rep])
            if b > 0:
                pairs.append(dict(rep=rep, value=a, ref=b, ratio=a / b))
    return pairs


def ratio_stats(pairs):
    """The median of paired ratios and their range over repetitions."""
    r = [p["ratio"] for p in pairs]
    return dict(ratio=median(r), rmin=min(r) if r else None, rmax=max(r) if r else None)



def median_interval(xs, confidence=CONFIDENCE):
    """(low, high, level) of a distribution-free interval for the median of xs: the l-th
    smallest and the l-th largest, l the largest for which the binomial tails outside add up
    to at most 1 - confidence. None when there are too few values for any such l."""
    x, k = sorted(xs), len(xs)
    tail, l = 0.0, 0
    for i in range(k // 2):
        p = math.comb(k, i) / 2 ** k
        if 2 * (tail + p) > 1 - confidence:
            break
        tail += p
        l = i + 1
    if l == 0:
        return None
    return x[l - 1], x[k - l], 1 - 2 * tail


def verdict(med, ci, target, higher=False):
    """met, met on the median, missed on the median, or missed (settle_study.py says
    which is which): a ratio at most `target`, or with `higher` at least."""
    good = (lambda x: x >= target) if higher else (lambda x: x <= target)
    if ci is None:
        return "met on the median" if good(med) else "missed on the median"
    worst, best = (ci[0], ci[1]) if higher else (ci[1], ci[0])
    if good(med):
        return "met" if good(worst) else "met on the median"
    return "missed" if not good(best) else "missed on the median"


def aggregate(records, metrics):
    """metrics: {record study: [(metric, unit, title)]} (the studies' METRICS). Returns
    ({(study, transport, active, timeouts, metric): {driver: {n: stats}}}, skips); a driver
    with a twin from the baseline build also gets stats["base"], its ratios to the twin."""
    samples, skips = {}, {}
    for r in records:
        if r.get("study") not in metrics:
            continue  # the other studies pair their runs themselves
        base = (r["study"], r["transport"])
        if "skip" in r:
            skips[(r["study"], r["transport"], r["driver"], r["n"])] = r["skip"]
            continue
        for metric, _, _ in metrics[r["study"]]:
            if metric not in r:
                continue
            v = r[metric] if isinstance(r[metric], list) else [r[metric]]
            active = None if metric in ("create_ns", "teardown_ns") else r["active"]
            key = base + (active, r.get("timeouts"), metric)
            per = samples.setdefault(key, {}).setdefault(r["driver"], {}).setdefault(r["n"], {})
            per.setdefault(r["rep"], []).extend(v)
    tables = {}
    for key, bydrv in samples.items():
        floor = bydrv.get(FLOOR, {})
        t = tables.setdefault(key, {})
        for drv, byn in bydrv.items():
            for n, byrep in byn.items():
                pooled = [x for xs in byrep.values() for x in xs]
                med = median(pooled)
                q1, q3 = quartiles(pooled)
                st = t.setdefault(drv, {})[n] = dict(
                    median=med, q1=q1, q3=q3, spread=(q3 - q1) / med * 100 if med else 0,
                    samples=len(pooled), byrep=byrep,
                    **ratio_stats(paired(byrep, floor.get(n, {}))))
                twin = bydrv.get(drv + BASE, {}).get(n)
                if twin:
                    pairs = paired(byrep, twin)
                    st["base"] = dict(ratio_stats(pairs), pairs=pairs)
    return tables, skips


# ---------------------------------------------------------------------------------------
# Report.


# ---------------------------------------------------------------------------------------
# Tables.

def fmt_num(v):
    if v is None:
        return "—"
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def driver_order(names):
    rank = {"raw": 0, "iomux": 1}
    return sorted(names, key=lambda d: (rank.get(d.split("-")[0], 2), d))


def table_md(t, ns, names, skips, key, ratio, missed=None):
    """A markdown table of t ({driver: {n: stats}}): medians with their spread, or with ratio
    the paired ratios to the floor; missed(driver, n, stats) marks a cell (True: **!**, or
    the mark itself)."""
    study, transport = key[0], key[1]
    head = "| driver | " + " | ".join(f"{n:,}" for n in ns) + " |"
    lines = [head, "|---" * (len(ns) + 1) + "|"]
    for drv in names:
        cells = []
        for n in ns:
            s = t.get(drv, {}).get(n)
            if s is None:
                why = skips.get((study, transport, drv, n))
                cells.append("skip" if why else "—")
            elif ratio:
                if s["ratio"] is None:
                    cells.append("—")
                else:
                    miss = missed(drv, n, s) if missed else False
                    mark = miss if isinstance(miss, str) else " **!**" if miss else ""
                    cells.append(f"{s['ratio']:.2f}x ({s['rmin']:.2f}–{s['rmax']:.2f}){mark}")
            else:
                cells.append(f"{fmt_num(s['median'])} ±{s['spread']:.0f}%")
        lines.append(f"| {drv} | " + " | ".join(cells) + " |")
    return "\n".join(lines)



# ---------------------------------------------------------------------------------------
# Plots.

# Every driver's look: (colour, marker, line style), the same in every plot of every report.
# Colours are the Okabe-Ito palette (safe for the common colour-blindnesses), with greys for
# the hand-written floors and Tol's wine and olive for the two it lacks; every driver has a
# marker of its own, so two drivers whose points coincide still show both. A baseline twin
# (<name>@base) keeps its driver's colour and marker, hollow, on a dotted line.
STYLES = {
    # the floors, written by hand: the reference lines, black and greys (dash-dot but for
    # the floor every ratio is taken to)
    "raw-epoll": ("#000000", "o", "-"),
    "raw-uring": ("#474747", "D", "-."),
    "raw-poll": ("#7a7a7a", "^", "-."),
    "raw-select": ("#a8a8a8", "v", "-."),
    # iomux: warm colours, solid lines
    "iomux-epoll": ("#D55E00", "s", "-"),   # vermillion
    "iomux-uring": ("#882255", "p", "-"),   # wine
    "iomux-poll": ("#E69F00", "<", "-"),    # orange
    "iomux-select": ("#CC79A7", ">", "-"),  # reddish purple
    "iomux-rtsig": ("#AA4499", "^", "-"),   # purple
    "iomux-io": ("#D55E00", "o", ":"),      # the watcher echo server: iomux-epoll's colour
    # the peer libraries: cool colours, dashed lines
    "libev": ("#009E73", "P", "--"),        # bluish green
    "libevent": ("#56B4E9", "X", "--"),     # sky blue
    # libiomux-event, iomux's libevent emulation: warm colours, solid lines, as iomux
    "iomux-event-epoll": ("#EE3377", "d", "-"),   # magenta
    "iomux-event-uring": ("#CC3311", "x", "-"),   # red
    "iomux-event-bev": ("#EE3377", "d", "-"),     # the bufferevent echo server on it
    "libevent-bev": ("#56B4E9", "v", ":"),        # and on libevent
    "libuv": ("#0072B2", "h", "--"),        # blue
    "asio": ("#999933", "*", "--"),         # olive
    # the HTTP study's peer servers, in Tol's colours
    "nginx": ("#332288", "H", "--"),        # indigo
    "h2o": ("#44AA99", "8", "--"),          # teal
}
# For a driver the table does not know: a colour of its family and a marker no known driver
# has, picked by a checksum of its name (not hash(), which changes between runs), moved on
# to the next pair while a known driver or an earlier unknown one has that pair. Kept in
# FALLBACK_STYLES, so that every plot of a report draws it alike.
FALLBACK_COLORS = {"raw": ["#5e5e5e", "#929292", "#2b2b2b"],
                   "iomux": ["#AA4499", "#EE3377", "#CC3311"],
                   "": ["#117733", "#44AA99", "#332288", "#88CCEE", "#DDCC77", "#CC6677"]}
FALLBACK_MARKERS = ["d", "H", "8", "+", "x"]
FALLBACK_STYLES = {}  # driver -> (colour, marker), for the whole report
BOLD = (FLOOR, HELD)  # drawn with a heavier line


def driver_style(name):
    """(colour, marker, line style, hollow) of a driver, the same in every plot."""
    own = plain(name)
    fam = own.split("-")[0] if own.split("-")[0] in ("raw", "iomux") else ""
    if own in STYLES:
        colour, marker, line = STYLES[own]
    else:
        if own not in FALLBACK_STYLES:
            taken = {s[:2] for s in STYLES.values()} | set(FALLBACK_STYLES.values())
            colours = FALLBACK_COLORS[fam]
            h = zlib.crc32(own.encode())
            known = []
            for s in STYLES.values():
                if s[1] not in FALLBACK_MARKERS + known:
                    known.append(s[1])
            markers = [FALLBACK_MARKERS[(h + i) % len(FALLBACK_MARKERS)]
                       for i in range(len(FALLBACK_MARKERS))] + known
            combos = [(colours[(h // 7 + j) % len(colours)], m)
                      for m in markers for j in range(len(colours))]
            FALLBACK_STYLES[own] = next((c for c in combos if c not in taken), combos[0])
        colour, marker = FALLBACK_STYLES[own]
        line = "-." if fam == "raw" else "-" if fam == "iomux" else "--"
    return colour, marker, ":" if name != own else line, name != own


def plot_styles(names):
    """{driver: style} for the drivers of one plot; unknown names take their styles in
    the order of their names, so that the same drivers always get the same styles."""
    return {n: driver_style(n) for n in sorted(names, key=lambda n: (plain(n), n))}


def tick_label(v, decimals=None):
    """A tick's number as a reader writes it: 100, 1,000, 25,000, 0.5, 1.04; with decimals,
    that many (so that evenly spaced ticks read 0.8, 1.0, 1.2)."""
    if decimals is not None:
        return f"{v:,.{decimals}f}"
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 1 and float(v).is_integer():
        return f"{v:.0f}"
    return f"{v:.3g}"


def readable_ticks(ax, axis, log):
    """Major ticks labelled with plain numbers on every axis, minor ticks unlabelled. A log
    axis gets its decades if four are in view, else 1-2-5 if three are, else (a small
    range) evenly spaced ticks, which are labelled with the same number of decimals."""
    from matplotlib import ticker

    class Plain(ticker.Formatter):
        def __init__(self, even):
            self.even, self.decimals = even, None

        def set_locs(self, locs):
            super().set_locs(locs)
            self.decimals = None
            if self.even:
                self.decimals = next((d for d in range(5) if all(
                    abs(round(v, d) - v) <= 1e-9 * max(1.0, abs(v)) for v in locs)), 4)

        def __call__(self, v, pos=None):
            return tick_label(v, self.decimals)

    lo, hi = sorted(ax.get_xlim() if axis is ax.xaxis else ax.get_ylim())
    even = True
    if log:
        major = None
        lo = max(lo, 1e-300)
        decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
        for subs, enough in (((1.0,), 4), ((1.0, 2.0, 5.0), 3)):
            # counted here: LogLocator itself turns linear on a range this small
            if sum(lo <= m * 10.0 ** e <= hi for e in decades for m in subs) >= enough:
                major, even = ticker.LogLocator(base=10, subs=subs, numticks=30), False
                break
        axis.set_major_locator(major or ticker.MaxNLocator(nbins=9, steps=[1, 2, 5, 10]))
        axis.set_minor_locator(ticker.LogLocator(base=10, subs=tuple(range(1, 10)),
                                                 numticks=30))
    else:
        axis.set_major_locator(ticker.MaxNLocator(nbins=8, steps=[1, 2, 5, 10]))
        axis.set_minor_locator(ticker.AutoMinorLocator())
    axis.set_major_formatter(Plain(even))
    axis.set_minor_formatter(ticker.NullFormatter())


def plot(path, title, panels, xlabel, ylog=True, zero=True, ref=None, legend_title="driver"):
    """Draws one figure of one or more panels and saves it as a PNG: False if matplotlib is
    missing. panels: list of (panel title, {driver: [(x, value)]}, y-axis label). The x
    axis is logarithmic, the y axis too unless ylog is false (then it starts at 0 unless
    zero is false); ref: a value drawn as a thin horizontal line (1 on ratio plots).
    The legend stands to the right of the panels, outside them."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.lines import Line2D
    except ImportError:
        return False
    shown = driver_order({d for panel in panels for d, pts in panel[1].items() if pts})
    styles = plot_styles(shown)
    cols = 2 if len(panels) > 1 else 1
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.4 * cols, 4.4 * rows), squeeze=False)
    for ax, (sub, lines, ylabel) in zip(axes.flat, panels):
        if ref is not None:
            ax.axhline(ref, color="#000000", linewidth=0.8, alpha=0.6, zorder=1)
        for drv in shown:
            pts = sorted(lines.get(drv, []))
            if not pts:
                continue
            colour, marker, line, hollow = styles[drv]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle=line, marker=marker,
                    color=colour, markersize=7 if marker == "*" else 6,
                    markerfacecolor="white" if hollow else colour,
                    markeredgewidth=1.3 if hollow else 0.8,
                    linewidth=2.4 if drv in BOLD else 1.4, zorder=3 if drv in BOLD else 2)
        ax.set_xscale("log")
        ax.set_yscale("log" if ylog else "linear")
        if not ylog and zero:
            ax.set_ylim(bottom=0)
        readable_ticks(ax, ax.xaxis, True)
        readable_ticks(ax, ax.yaxis, ylog)
        ax.tick_params(which="both", labelsize=9)
        ax.tick_params(which="major", length=5)
        ax.tick_params(which="minor", length=2.5)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(sub, fontsize=10.5)
        ax.grid(True, which="major", alpha=0.35)
        ax.grid(True, which="minor", alpha=0.12)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    handles = []
    for drv in shown:
        colour, marker, line, hollow = styles[drv]
        handles.append(Line2D([], [], linestyle=line, marker=marker, color=colour,
                              markersize=7, markerfacecolor="white" if hollow else colour,
                              markeredgewidth=1.3 if hollow else 0.8,
                              linewidth=2.4 if drv in BOLD else 1.4))
    fig.suptitle(title, fontsize=12.5)
    fig.tight_layout()
    if handles:
        fig.legend(handles, shown, title=legend_title, loc="center left",
                   bbox_to_anchor=(1.0, 0.5), fontsize=9, title_fontsize=9.5,
                   frameon=False, handlelength=3.2)
    fig.savefig(path, dpi=110, bbox_inches="tight", pad_inches=0.15)
    plt.close(fig)
    return True

# ---------------------------------------------------------------------------------------
# System calls (strace -c -f) and user-space instructions (valgrind's callgrind).

# The drivers print their timings: formatting a number costs more or fewer instructions
# depending on its value, so what is spent in these functions is left out of every count.
COST_EXCLUDED = ("printf", "__printf_chk")


def callgrind_cmd(out):
    """valgrind's callgrind, writing OUT.<pid> (and OUT.<pid>.<n> for each dump); removes
    what an earlier run with the same OUT left (a report directory used again)."""
    for old in glob.glob(glob.escape(out) + ".*"):
        os.unlink(old)
    return [shutil.which("valgrind") or "valgrind", "--tool=callgrind",
            f"--callgrind-out-file={out}.%p"]


def callgrind_file_ir(path):
    """(Ir, Ir spent in calls to COST_EXCLUDED) of one callgrind output file: the totals
    line, and the inclusive cost of every call to an excluded function (the line after
    its calls= line; names are compressed to "(id) name" the first time, "(id)" after)."""
    names, total, excluded, cfn, call_cost = {}, None, 0, None, False
    with open(path, errors="replace") as f:
        for line in f:
            if call_cost:
                call_cost = False
                if cfn in COST_EXCLUDED:
                    excluded += int(line.split()[-1])
            elif line.startswith(("fn=", "cfn=")):
                key, _, name = line.rstrip("\n").partition("=")
                if name.startswith("("):
                    ident, _, rest = name.partition(")")
                    if rest.strip():
                        names[ident] = rest.strip()
                    name = names.get(ident, ident)
                if key == "cfn":
                    cfn = name
            elif line.startswith("calls="):
                call_cost = True
            elif line.startswith("totals:") or (total is None and line.startswith("summary:")):
                total = int(line.split()[1])
    return total, excluded


def callgrind_ir(out):
    """The instructions of one run under callgrind, less those in COST_EXCLUDED: the sum
    over its output files (one per process, one more per dump), and the files; None for
    the instructions if there is no file or one without totals."""
    files = sorted(glob.glob(glob.escape(out) + ".*"))
    ir = 0
    for path in files:
        total, excluded = callgrind_file_ir(path)
        if total is None:
            return None, files
        ir += total - excluded
    return (ir if files else None), files


def keep_callgrind(files, keep):
    """Compresses a run's output files in place (gunzip them for callgrind_annotate), or
    deletes them."""
    for path in files:
        if keep:
            with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
                shutil.copyfileobj(src, dst)
        os.unlink(path)


def strace_run(cmd, path):
    """System calls of cmd by name, counted with strace -c -f; None if cmd failed."""
    out = subprocess.run([shutil.which("strace"), "-c", "-f", "-o", path] + cmd,
                         capture_output=True, text=True)
    calls = parse_strace(path) if out.returncode == 0 and os.path.exists(path) else None
    if os.path.exists(path):
        os.unlink(path)
    return calls


def calls_diff(a, b, units):
    """Per unit, the system calls of run b less those of run a (by name)."""
    return {k: (b.get(k, 0) - a.get(k, 0)) / units for k in set(a) | set(b)}



def failed_line(out):
    """The line that says why a run failed: FAIL: ..., else valgrind's or the last."""
    lines = [l for l in out.stderr.splitlines() if l.strip()]
    fails = [l for l in lines if "FAIL" in l]
    own = [l for l in lines if not l.startswith("==")]
    return (fails or own or lines or [f"exit status {out.returncode}"])[-1]



def callgrind_unavailable(build):
    """Why callgrind cannot measure this build, or None."""
    if not shutil.which("valgrind"):
        return "valgrind not installed (apt-get install valgrind)"
    cache = os.path.join(build, "CMakeCache.txt")
    if os.path.exists(cache):
        for line in open(cache):
            key, _, value = line.strip().partition("=")
            if (key.startswith("IOMUX_SANITIZE:") and value) or (
                    key.startswith("CMAKE_C_FLAGS") and "-fsanitize" in value):
                return f"a sanitizer build ({line.strip()}): valgrind cannot run it"
    return None



# ---------------------------------------------------------------------------------------
# The build.

def build_commit(build):
    """(source dir, short commit, uncommitted changes?) of the git checkout a CMake build
    directory was configured from (CMakeCache.txt's source dir), or of the build directory
    itself if it is the top of a checkout; (None, None, False) if neither is."""
    candidates = []
    cache = os.path.join(build, "CMakeCache.txt")
    if os.path.exists(cache):
        for line in open(cache):
            if line.startswith("CMAKE_HOME_DIRECTORY:"):
                candidates.append(line.split("=", 1)[1].strip())
    candidates.append(build)

    def git(src, *a):
        out = subprocess.run(["git", "-C", src] + list(a), capture_output=True, text=True)
        return out.stdout.strip() if out.returncode == 0 else None

    for src in candidates:
        top = git(src, "rev-parse", "--show-toplevel") if os.path.isdir(src) else None
        if not top:
            continue
        if src == build and os.path.realpath(top) != os.path.realpath(build):
            continue  # a build directory inside another checkout says nothing of its source
        dirty = git(src, "status", "--porcelain", "--untracked-files=no")
        return src, git(src, "rev-parse", "--short", "HEAD"), bool(dirty)
    return None, None, False


def describe_build(build):
    src, commit, dirty = build_commit(build)
    if not commit:
        return f"`{shown_path(build)}` (commit unknown: its source is not a git checkout)"
    return (f"`{shown_path(build)}` (commit {commit}" + (", with uncommitted changes"
            if dirty else "") + f", source `{os.path.abspath(src)}`)")

