# SPDX-License-Identifier: MIT
"""The libevent study, run by bench/run (bench/README.md, "The libevent study"): libevent's own
test/bench.c as Marc Lehmann ran it (docs/studies.md, study 2), built three ways from the
same source with the same compiler flags, side by side in one run: against libevent 2.1
itself (libevent-dev), against libev's libevent emulation (the <event.h> of Debian's
libev-libevent-dev over libev.so, completed by our headers in bench/libev-compat/), and against
libiomux-event (iomux's libevent 2.1 emulation) on its epoll and io_uring backends. Each
bench.c process prints 25 iterations; the second is used, over several processes the minimum
and the median are reported (Lehmann: the minimum of six runs, the second iteration).
test/bench_cascade.c is built and run the same three ways. In the same run, the chain study's
drivers iomux-<backend> (iomux's own API) and iomux-event-<backend> (bench/drivers/libevent.c
compiled against libiomux-event) run the same sizes, so that the cost of the emulation over
iomux itself is measured on the same harness.

libevent's source is fetched at run time with scripts/libevent-source (Debian's source
package); none of it is kept in this repository. The variant with idle timeouts is made from
the fetched test/bench.c by timeouts_variant() below, which bench/README.md shows exactly.
When the source cannot be fetched the study says why and is skipped (not failed).

Where valgrind runs, the study also counts the user-space instructions per write passed on in
bench.c under callgrind, the cost table's way (two run lengths, their difference): exact where
the timed cells overlap.

The shared helpers come from benchlib.py."""
import glob
import hashlib
import json
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys

import benchlib as h
from benchlib import Cell, Study as Base

# The bench.c programs: what each is built against and the method it is run on (bench.c -m).
PROGRAMS = {
    "libevent": dict(lib="libevent", method="epoll",
                     what="libevent 2.1 itself (Debian's libevent-dev, libevent_core)"),
    "libev-emulation": dict(lib="libev", method="epoll",
                  what="libev's libevent 1.4 emulation (libev-libevent-dev's event.h over "
                       "libev.so) with bench/libev-compat/, LIBEV_FLAGS=4 (epoll)"),
    "iomux-event-epoll": dict(lib="iomux-event", method="epoll",
                              what="libiomux-event (shared library of this build), epoll"),
    "iomux-event-uring": dict(lib="iomux-event", method="uring",
                              what="libiomux-event (shared library of this build), io_uring"),
}
MODES = {
    "smoke": dict(n=[100], active=[100], writes=300, timeouts=[0, 1], reps=1, cascade_n=[100],
                  iomux=["epoll", "uring"], chain_backends=["epoll"]),
    "quick": dict(n=[1000], active=[100], writes=10000, timeouts=[0, 1], reps=1,
                  cascade_n=[100], iomux=["epoll", "uring"], chain_backends=["epoll"],
                  callgrind=dict(n=100, active=100, writes=[500, 1500])),
    "full": dict(n=[100, 1000, 10000, 100000], active=[100, 1000], writes=10000,
                 timeouts=[0, 1], reps=6, cascade_n=[100, 1000, 10000, 100000],
                 iomux=["epoll", "uring"], chain_backends=["epoll", "uring"],
                 callgrind=dict(n=100, active=100, writes=[1000, 3000])),
}
REFERENCE = "libevent"  # the ratio tables divide by it
TARGET_PROGRAM = "iomux-event-epoll"  # held to the targets
TARGET_CHAIN = 1.05  # iomux-event-<backend> at most this many times iomux-<backend> (chain)
# The chain study's drivers paired per backend: (iomux's own API, the libevent emulation).
CHAIN_PAIRS = {"epoll": ("iomux-epoll", "iomux-event-epoll"),
               "uring": ("iomux-uring", "iomux-event-uring")}
CHAIN_RUN = dict(iterations=3, warmup=1)  # as the chain study's quick run
ITERATIONS = 25  # what every bench.c and bench_cascade.c process prints
ITERATION = 1  # the one used: the second (Lehmann's)
RUN_TIMEOUT = 300  # seconds; a missed or spurious event leaves bench.c spinning or blocked
FD_EXTRA = 50  # bench.c sets RLIMIT_NOFILE to 2N + 50, soft and hard
LIBEV_FLAGS = "4"  # EVBACKEND_EPOLL: libev's emulation reads its backend from LIBEV_FLAGS
LIBEV_PACKAGE = "libev-libevent-dev"
METHODS = {"libevent": ["epoll", "poll", "select"], "libev": None,
           "iomux-event": ["epoll", "uring", "poll", "select"]}
HERE = os.path.dirname(os.path.abspath(__file__))

# The variant with idle timeouts: in run_once(), every event is added with a timeout of 10 s
# plus a random 0 to 999,999 µs. The events are EV_READ | EV_PERSIST already, so this is
# libevent 2.x's idiom for an idle timeout: the library restarts the timeout whenever the
# event becomes active, and read_cb is unchanged. random() is never seeded, so every build
# draws the same timeouts. The replaced line must occur exactly once.
TIMEOUT_ANCHOR = "\t\tevent_add(&events[i], NULL);\n"
TIMEOUT_REPLACEMENT = (
    "\t\t{ /* bench/libevent_study.py: a random idle timeout of 10 to 11 s */\n"
    "\t\t\tstruct timeval tv_idle;\n"
    "\t\t\ttv_idle.tv_sec = 10;\n"
    "\t\t\ttv_idle.tv_usec = random() % 1000000;\n"
    "\t\t\tevent_add(&events[i], &tv_idle);\n"
    "\t\t}\n")

# Under valgrind bench.c's setrlimit (2N + 50 fds, soft and hard) fails: valgrind keeps
# descriptors of its own above the limit and refuses to move the hard one. For the counts, a
# preloaded no-op takes its place; the limit the process inherits is enough at N = 100.
NO_SETRLIMIT = ("/* Written by bench/libevent_study.py: preloaded into bench.c under valgrind "
                "only. */\n#include <sys/resource.h>\n"
                "int setrlimit(__rlimit_resource_t r, const struct rlimit *l)\n"
                "{\n    (void)r;\n    (void)l;\n    return 0;\n}\n")

# bench.c includes libevent's internal "../util-internal.h", which needs the rest of
# libevent's build (evconfig-private.h); of it, bench.c uses EV_SSIZE_FMT alone.
UTIL_INTERNAL = ("/* Written by bench/libevent_study.py in place of libevent's internal "
                 "util-internal.h:\n * of it, test/bench.c uses EV_SSIZE_FMT alone. */\n"
                 "#define EV_SSIZE_FMT \"%zd\"\n")


def timeouts_variant(text):
    """bench.c with an idle timeout on every event (see TIMEOUT_ANCHOR)."""
    if text.count(TIMEOUT_ANCHOR) != 1:
        raise ValueError(f"test/bench.c has {text.count(TIMEOUT_ANCHOR)} lines "
                         f"{TIMEOUT_ANCHOR.strip()!r}, expected one: not libevent 2.1.12's")
    return text.replace(TIMEOUT_ANCHOR, TIMEOUT_REPLACEMENT)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def can_raise_nofile(limit):
    """Whether a process may set RLIMIT_NOFILE to `limit` (soft and hard), as bench.c does."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY or limit <= hard:
        return True
    code = f"import resource; resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, {limit}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


def last_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1].strip() if lines else ""


class Study(Base):
    """The libevent study of one bench/run: its builds, runs, statistics and report."""
    NAME = "libevent"
    TITLE = ("the libevent study (libevent's test/bench.c against libevent, "
             "libev's emulation and libiomux-event)")
    MODES = MODES

    def __init__(self, ctx):
        super().__init__(ctx)
        args, cfg, want = self.args, self.cfg, ctx.want
        # every driver the build has, for the chain pairs; the chain harness's largest n
        self.drivers = drivers = ctx.main_drivers
        self.lim = ctx.lim
        self.reps = args.reps or cfg["reps"]
        self.writes = args.writes or cfg["writes"]
        self.active = [int(v) for v in args.active.split(",")] if args.active else cfg["active"]
        self.timeouts = ([int(v) for v in args.timeouts.split(",")] if args.timeouts
                         else cfg["timeouts"])
        spec = [v if v == "max" else int(v) for v in args.n.split(",")] if args.n else None
        self.hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        self.max_n = (self.hard - FD_EXTRA) // 2 if self.hard != resource.RLIM_INFINITY else None
        self.capped = []  # (asked, run) where RLIMIT_NOFILE stopped a size
        self.sizes = self.fit(spec or cfg["n"])
        self.cascade_sizes = self.fit(spec or cfg["cascade_n"])
        self.why = None
        self.programs = []
        for name, p in PROGRAMS.items():
            if want and name not in want:
                continue
            if p["lib"] == "iomux-event" and p["method"] not in cfg["iomux"]:
                continue
            d = drivers.get(f"iomux-{p['method']}")
            if p["lib"] == "iomux-event" and not (d and d["available"]):
                self.skipped.append((f"libevent {name}", (d or {}).get(
                    "reason", f"iomux built without the {p['method']} backend")))
                continue
            self.programs.append(name)
        self.pairs = []  # (backend, iomux driver, iomux-event driver)
        for b in cfg["chain_backends"]:
            native, emulated = CHAIN_PAIRS[b]
            if any(p for p in self.programs if PROGRAMS[p]["lib"] == "iomux-event"
                   and PROGRAMS[p]["method"] == b) or not want:
                miss = [n for n in (native, emulated)
                        if n not in drivers or not drivers[n]["available"]]
                if miss:
                    self.skipped.append((f"libevent chain pair {b}", f"{', '.join(miss)} not "
                                         "built or unavailable (bench/drivers.txt)"))
                else:
                    self.pairs.append((b, native, emulated))
        self.cells_ = [(t, a, n) for t in self.timeouts for a in self.active for n in self.sizes
                      if a <= n]
        self.left_out = [(t, a, n) for t in self.timeouts for a in self.active
                         for n in self.sizes if a > n]
        self.work = os.path.join(args.build_abs, "bench", "libevent-study")
        self.builds = {}  # lib -> dict(ok, why, cmds, needed, ...)
        self.exes = {}  # (program kind, lib) -> executable
        self.source = None  # dict(tree, files: {name: sha256})
        self.records = []
        self.counts, self.counts_why = {}, None  # (timeouts, program) -> instructions
        self.libev_header_dir = None

    def fit(self, spec):
        """The sizes bench.c can run: a size whose 2N + 50 fds exceed RLIMIT_NOFILE (which
        bench.c sets, soft and hard, and only a privileged process may raise) becomes the
        largest that fits, and the report says so."""
        out = []
        for v in spec:
            n = self.max_n if v == "max" else int(v)
            if n is None:
                continue
            if self.max_n is not None and n > self.max_n and not can_raise_nofile(
                    2 * n + FD_EXTRA):
                if v != "max":
                    self.capped.append((n, self.max_n))
                n = self.max_n
            if n not in out:
                out.append(n)
        return sorted(out)

    def known(self):
        return set(PROGRAMS)

    def banner(self):
        return (f"libevent's test/bench.c against {', '.join(self.programs) or 'nothing'}; "
                f"N = {', '.join(f'{n:,}' for n in self.sizes)}, A = "
                f"{', '.join(f'{a:,}' for a in self.active)}; pinned to CPU "
                f"{self.args.cpu_used}")

    def reproduce(self):
        cmd = ["bench/run", "--build", h.build_arg(self.args), "--study", "libevent"]
        cmd += h.mode_arg(self.args)
        for opt in ("n", "active", "writes", "timeouts", "reps", "drivers"):
            if getattr(self.args, opt):  # what the mode does not set by itself
                cmd += [f"--{opt}", str(getattr(self.args, opt))]
        if self.args.cpu_used is not None:
            cmd += ["--cpu", str(self.args.cpu_used)]
        return shlex.join(cmd)

    # -----------------------------------------------------------------------------------
    # The sources and the builds.

    def fetch(self):
        """libevent's source tree, or None with self.why set. A tree the libevent regression
        tests fetched into the same build is used as it is."""
        for d in (os.path.join(self.args.build_abs, "libevent-regress", "source"),
                  os.path.join(self.work, "source")):
            for tree in sorted(os.listdir(d)) if os.path.isdir(d) else []:
                if os.path.exists(os.path.join(d, tree, "test", "bench.c")):
                    return os.path.join(d, tree)
        script = os.path.join(h.ROOT, "scripts", "libevent-source")
        h.log(f"libevent: fetching libevent's source ({shlex.join([script, 'DIR'])})")
        try:
            out = subprocess.run([script, os.path.join(self.work, "source")],
                                 capture_output=True, text=True, timeout=240)
        except subprocess.TimeoutExpired:
            self.why = "scripts/libevent-source did not finish within 240 s"
            return None
        if out.returncode != 0:
            self.why = ("libevent's source could not be fetched (scripts/libevent-source, exit "
                        f"status {out.returncode}): {last_line(out.stderr) or 'no reason given'}")
            return None
        tree = last_line(out.stdout)
        if not os.path.exists(os.path.join(tree, "test", "bench.c")):
            self.why = f"the fetched tree {tree} has no test/bench.c"
            return None
        return tree

    def libev_header(self):
        """The directory holding libev's libevent-emulation <event.h>, or (None, why). It is
        Debian's libev-libevent-dev, which conflicts with libevent-dev (both ship
        /usr/include/event.h), so it is not installed: its package is downloaded with apt-get
        download into the study's directory and unpacked there (dpkg-deb -x). Installed
        instead of libevent-dev, its /usr/include/event.h is used as it is."""
        try:
            with open("/usr/include/event.h", errors="replace") as f:
                if "libevent compatibility header" in f.read(4096):
                    return "/usr/include", None
        except OSError:
            pass
        root = os.path.join(self.work, "libev")
        inc = os.path.join(root, "unpacked", "usr", "include")
        if os.path.exists(os.path.join(inc, "event.h")):
            return inc, None
        if not shutil.which("apt-get") or not shutil.which("dpkg-deb"):
            return None, "apt-get or dpkg-deb not found (needed to unpack libev-libevent-dev)"
        os.makedirs(root, exist_ok=True)
        out = subprocess.run(["apt-get", "download", LIBEV_PACKAGE], cwd=root,
                             capture_output=True, text=True, timeout=120)
        debs = [f for f in os.listdir(root) if f.endswith(".deb")]
        if out.returncode != 0 or not debs:
            return None, (f"apt-get download {LIBEV_PACKAGE} failed: "
                          f"{last_line(out.stderr) or out.returncode}")
        out = subprocess.run(["dpkg-deb", "-x", os.path.join(root, debs[0]),
                              os.path.join(root, "unpacked")], capture_output=True, text=True)
        if out.returncode != 0 or not os.path.exists(os.path.join(inc, "event.h")):
            return None, f"dpkg-deb -x {debs[0]} failed: {last_line(out.stderr)}"
        return inc, None

    def cache_value(self, key):
        """A value of the build's CMakeCache.txt, or None."""
        cache = os.path.join(self.args.build_abs, "CMakeCache.txt")
        if os.path.exists(cache):
            for line in open(cache):
                if line.startswith(key + ":"):
                    return line.split("=", 1)[1].strip()
        return None

    def compiler(self):
        return self.cache_value("CMAKE_C_COMPILER") or shutil.which("cc") or "cc"

    def lib_flags(self, lib):
        """(include flags, link flags, package) for a library, or None with the reason."""
        build = self.args.build_abs
        if lib == "libevent":
            out = subprocess.run(["pkg-config", "--cflags", "--libs", "libevent_core"],
                                 capture_output=True, text=True)
            if out.returncode != 0:
                return None, ("pkg-config libevent_core not found (libevent-dev): install it "
                              "with scripts/install-deps bench")
            flags = shlex.split(out.stdout)
            return ([f for f in flags if not f.startswith(("-l", "-L"))],
                    [f for f in flags if f.startswith(("-l", "-L"))]), None
        if lib == "libev":
            inc, why = self.libev_header()
            if not inc:
                return None, why
            self.libev_header_dir = inc
            return (["-I", os.path.join(HERE, "libev-compat"), "-I", inc], ["-lev"]), None
        so = os.path.join(build, "libiomux-event.so")
        if not os.path.exists(so):
            return None, f"{so} not built (the build has no libiomux-event)"
        # A sanitized build's library needs its sanitizer's runtime in the program too (the
        # smoke run of `make test` builds with the address sanitizer).
        san = self.cache_value("IOMUX_SANITIZE")
        san = [f"-fsanitize={san}"] if san else []
        return (san + ["-I", os.path.join(h.ROOT, "include", "iomux"), "-I",
                       os.path.join(h.ROOT, "include")],
                [so, f"-Wl,-rpath,{build}"] + san), None

    def prepare(self):
        """Fetches the source, writes the three programs (bench.c and bench_cascade.c as
        fetched, bench.c with timeouts), and builds each against each library. False (and
        self.why) when nothing can run."""
        tree = self.fetch()
        if not tree:
            return False
        src = os.path.join(self.work, "src")
        os.makedirs(os.path.join(src, "test"), exist_ok=True)
        files = {}
        for name in ("bench.c", "bench_cascade.c"):
            shutil.copyfile(os.path.join(tree, "test", name), os.path.join(src, "test", name))
            files[name] = sha256(os.path.join(src, "test", name))
        try:
            with open(os.path.join(src, "test", "bench.c")) as f:
                variant = timeouts_variant(f.read())
        except ValueError as e:
            self.why = str(e)
            return False
        with open(os.path.join(src, "test", "bench_timeouts.c"), "w") as f:
            f.write(variant)
        with open(os.path.join(src, "util-internal.h"), "w") as f:
            f.write(UTIL_INTERNAL)
        self.source = dict(tree=tree, sha256=files)
        cc = self.compiler()
        bindir = os.path.join(self.work, "bin")
        os.makedirs(bindir, exist_ok=True)
        libs = sorted({PROGRAMS[p]["lib"] for p in self.programs},
                      key=["libevent", "libev", "iomux-event"].index)
        for lib in libs:
            flags, why = self.lib_flags(lib)
            b = self.builds[lib] = dict(ok=False, why=why, cmds={}, errors={})
            if not flags:
                continue
            incs, links = flags
            for kind, name in (("bench", "bench.c"), ("timeouts", "bench_timeouts.c"),
                               ("cascade", "bench_cascade.c")):
                exe = os.path.join(bindir, f"{kind}-{lib}")
                cmd = [cc, "-O2"] + incs + ["-o", exe, os.path.join(src, "test", name)] + links
                out = subprocess.run(cmd, capture_output=True, text=True)
                b["cmds"][kind] = cmd
                if out.returncode == 0:
                    self.exes[(kind, lib)] = exe
                else:
                    errs = [l for l in out.stderr.splitlines() if "error" in l]
                    b["errors"][kind] = (errs[0] if errs else last_line(out.stderr)).replace(
                        src + "/", "")
            b["ok"] = ("bench", lib) in self.exes
            if not b["ok"]:
                b["why"] = f"test/bench.c does not build: {b['errors'].get('bench')}"
            b["needed"] = self.linked(self.exes.get(("bench", lib)))
        self.programs = [p for p in self.programs if self.builds[PROGRAMS[p]["lib"]]["ok"]]
        for lib, b in self.builds.items():
            if not b["ok"]:
                self.skipped.append((f"libevent bench.c against {lib}", b["why"]))
            elif "cascade" in b["errors"]:
                self.skipped.append((f"libevent bench_cascade.c against {lib}",
                                     f"does not build: {b['errors']['cascade']}"))
        if not self.programs:
            self.why = "test/bench.c built against none of the libraries: " + "; ".join(
                f"{lib}: {b['why']}" for lib, b in self.builds.items())
            return False
        return True

    @staticmethod
    def linked(exe):
        """The event libraries an executable loads, as ldd resolves them."""
        if not exe:
            return []
        out = subprocess.run(["ldd", exe], capture_output=True, text=True)
        return [l.strip().split(" (")[0] for l in out.stdout.splitlines()
                if re.search(r"lib(event|ev\.so|iomux)", l)]

    # -----------------------------------------------------------------------------------
    # Running.

    def env(self, name, kind):
        """The environment of a run: EVENT_SHOW_METHOD (libevent and libiomux-event print the
        method they opened; so does bench/libev-compat for libev), LIBEV_FLAGS for libev,
        and for bench_cascade.c, which has no -m, libevent's EVENT_NO<METHOD> variables."""
        p = PROGRAMS[name]
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("EVENT_NO") and k not in ("LIBEV_FLAGS", "IOMUX_BACKEND")}
        extra = {"EVENT_SHOW_METHOD": "1"}
        if p["lib"] == "libev":
            extra["LIBEV_FLAGS"] = LIBEV_FLAGS
        elif kind == "cascade":
            for m in METHODS[p["lib"]]:
                if m != p["method"]:
                    extra[f"EVENT_NO{m.upper()}"] = "1"
        return dict(env, **extra), extra

    def fail(self, name, where, n, why, cmd):
        self.runner.failures.append((name, "libevent", where, n, why, cmd))
        h.end_line()
        h.log(f"  FAILED libevent {where} n={n:,} {name}: {why}")

    def run_bench(self, name, kind, n, a, rep, tmo=0):
        """One bench.c (kind bench or timeouts) or bench_cascade.c process; its record."""
        p = PROGRAMS[name]
        exe = self.exes.get(("timeouts" if tmo else kind, p["lib"]))
        if not exe:
            return
        cmd = [exe, "-n", str(n)]
        if kind == "bench":
            cmd += ["-a", str(a), "-w", str(self.writes), "-m", p["method"]]
        cmd = self.runner.pin(cmd)
        env, extra = self.env(name, kind)
        shown = " ".join(f"{k}={v}" for k, v in extra.items()) + " " + shlex.join(cmd)
        shown = shown.replace(self.work + "/", "")
        where = (f"bench.c A={a}" + (" timeouts" if tmo else "") if kind == "bench"
                 else "bench_cascade.c")
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, env=env,
                                 timeout=RUN_TIMEOUT, preexec_fn=self.runner.preexec())
        except subprocess.TimeoutExpired:
            self.fail(name, where, n, f"did not finish within {RUN_TIMEOUT} s (a missed event "
                      "leaves bench.c dispatching forever, a spurious one blocked in recv)",
                      shown)
            return
        m = re.search(r"using: (\S+)", out.stderr)
        values = [l.strip() for l in out.stdout.splitlines() if l.strip()]
        why = None
        if out.returncode != 0:
            lines = [l for l in out.stderr.splitlines() if not l.startswith("Xcount")]
            why = (f"exit status {out.returncode}" if out.returncode > 0 else
                   f"killed by signal {-out.returncode}") + (
                       f": {lines[-1].strip()}" if lines else "")
        elif not m or m.group(1) != p["method"]:
            why = (f"opened method {m.group(1)}, not {p['method']}" if m else
                   "printed no 'using: <method>' line (EVENT_SHOW_METHOD)")
        elif len(values) != ITERATIONS or not all(v.isdigit() for v in values):
            why = f"printed {len(values)} lines, not {ITERATIONS} times in µs"
        if why:
            self.fail(name, where, n, why, shown)
            return
        times = [int(v) for v in values]
        r = dict(study="libevent", kind="cascade" if kind == "cascade" else "bench",
                 driver=name, n=n, active=a if kind == "bench" else None,
                 timeouts=tmo if kind == "bench" else None, rep=rep, us=times[ITERATION],
                 iterations=times, method=m.group(1), cmd=shown)
        self.records.append(r)
        self.runner.records.append(r)

    def run_chain(self, drv, n, a, tmo, rep):
        """One chain study process of a driver at the cell's size; its record."""
        d = self.drivers[drv]
        cmd = self.runner.pin([d["exe"], "--driver", drv, "--study", "chain", "--transport",
                               "socketpair", "--n", str(n), "--active", str(a), "--writes",
                               str(self.writes), "--iterations", str(CHAIN_RUN["iterations"]),
                               "--warmup", str(CHAIN_RUN["warmup"]), "--timeouts", str(tmo)])
        where = f"chain A={a}" + (" timeouts" if tmo else "")
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                                 preexec_fn=self.runner.preexec())
        except subprocess.TimeoutExpired:
            self.fail(drv, where, n, f"did not finish within {RUN_TIMEOUT} s", shlex.join(cmd))
            return
        res = None
        for line in out.stdout.splitlines():
            if line.startswith("RESULT "):
                res = json.loads(line[7:])
        if out.returncode != 0 or not res or "skip" in res:
            why = (res or {}).get("skip") or last_line(out.stderr) or \
                f"exit status {out.returncode}"
            self.fail(drv, where, n, why, shlex.join(cmd))
            return
        r = dict(study="libevent", kind="chain", driver=drv, n=n, active=a, timeouts=tmo,
                 rep=rep, total_ms=res["total_ms"], proc_ms=res["proc_ms"],
                 cmd=shlex.join(cmd))
        self.records.append(r)
        self.runner.records.append(r)

    def schedule(self):
        """The builds, then every cell: each repetition runs every program once per cell,
        in an order that rotates between repetitions, each in a fresh process pinned to
        one CPU; then the instructions under callgrind."""
        cells = [Cell("libevent: fetch and build bench.c three ways", 15.0, self.build)]
        chain_max = self.lim["max_slots"]["socketpair"]

        def run(kind, n):
            """About how many seconds a process takes (a quick run's at a load of 5 to 8):
            bench.c's 25 iterations of W writes, or the chain study's few iterations."""
            if kind == "chain":
                return 0.4 * (1 + n / 3000)
            return (0.3 + ITERATIONS * self.writes * 1.2e-5) * (1 + n / 20000)
        for rep in range(self.reps):
            for tmo, a, n in self.cells_:
                runs = [("bench", p) for p in self.programs]
                if n <= chain_max:
                    runs += [("chain", d) for _, native, emu in self.pairs for d in (native, emu)]
                k = rep % len(runs)
                for kind, name in runs[k:] + runs[:k]:  # rotate: no program always first
                    cells.append(Cell(f"libevent n={n:,} A={a}" + (" timeouts" if tmo else "")
                                      + f" {name}{' (chain)' if kind == 'chain' else ''} "
                                      f"(rep {rep + 1})", run(kind, n),
                                      lambda kind=kind, name=name, n=n, a=a, tmo=tmo, rep=rep:
                                      self.one(kind, name, n, a, tmo, rep)))
            for n in self.cascade_sizes:
                k = rep % len(self.programs) if self.programs else 0
                for name in self.programs[k:] + self.programs[:k]:
                    cells.append(Cell(f"libevent bench_cascade n={n:,} {name} (rep {rep + 1})",
                                      0.2 * (1 + n / 2000),
                                      lambda name=name, n=n, rep=rep: self.one(
                                          "cascade", name, n, None, 0, rep)))
        c = self.cfg.get("callgrind")
        if c:
            cells.append(Cell("libevent: instructions per write under callgrind",
                              len(self.programs) * len(self.timeouts)
                              * sum(0.6 + w / 1500 for w in c["writes"]),
                              self.count_instructions))
        return cells

    def build(self):
        os.makedirs(self.work, exist_ok=True)
        if not self.programs:
            self.why = "no bench.c program selected (--drivers names none of " + ", ".join(
                PROGRAMS) + ")"
        if self.why or not self.prepare():
            h.log(f"libevent study skipped: {self.why}")
            return
        for lib, b in self.builds.items():
            h.log(f"  libevent: built against {lib}: " + (
                ", ".join(os.path.basename(x) for x in b["needed"]) if b["ok"] else
                f"not built: {b['why']}"))

    def one(self, kind, name, n, a, tmo, rep):
        if self.why:
            return
        if kind == "chain":
            self.run_chain(name, n, a, tmo, rep)
        else:
            self.run_bench(name, kind, n, a, rep, tmo)

    def count_instructions(self):
        """User-space instructions per write passed on, for every program and timeout
        variant: bench.c at the cfg's N and A under callgrind with two numbers of writes W1 <
        W2 (each process runs 25 iterations), (Ir(W2) - Ir(W1)) / (25 (W2 - W1)), what is
        spent in printf & co. left out as in the cost table. Deterministic, so one run each;
        it includes bench.c's own read_cb, recv and send, the same code in every build."""
        c = self.cfg.get("callgrind")
        if not c or self.why:
            return
        self.counts_why = h.callgrind_unavailable(self.args.build_abs)
        if self.counts_why:
            h.log(f"\nlibevent: instructions not counted: {self.counts_why}")
            return
        src = os.path.join(self.work, "src", "nosetrlimit.c")
        preload = os.path.join(self.work, "bin", "nosetrlimit.so")
        with open(src, "w") as f:
            f.write(NO_SETRLIMIT)
        out = subprocess.run([self.compiler(), "-O2", "-shared", "-fPIC", "-o", preload, src],
                             capture_output=True, text=True)
        if out.returncode != 0:
            self.counts_why = f"the setrlimit stand-in does not build: {last_line(out.stderr)}"
            return
        cdir = os.path.join(self.work, "callgrind")
        os.makedirs(cdir, exist_ok=True)
        w1, w2 = c["writes"]
        for t in self.timeouts:
            for name in self.programs:
                p = PROGRAMS[name]
                exe = self.exes.get(("timeouts" if t else "bench", p["lib"]))
                irs, cmds = [], []
                for w in (w1, w2):
                    base = os.path.join(cdir, f"{'timeouts' if t else 'bench'}-{name}-{w}")
                    cmd = self.runner.pin(h.callgrind_cmd(base) + [
                        exe, "-n", str(c["n"]), "-a", str(c["active"]), "-w", str(w), "-m",
                        p["method"]])
                    env, extra = self.env(name, "bench")
                    env["LD_PRELOAD"] = preload
                    shown = (" ".join(f"{k}={v}" for k, v in extra.items()) + " LD_PRELOAD=WORK/"
                             "bin/nosetrlimit.so " + shlex.join(cmd)).replace(self.work + "/",
                                                                             "WORK/")
                    cmds.append(shown)
                    r = subprocess.run(cmd, capture_output=True, text=True, env=env,
                                       timeout=RUN_TIMEOUT)
                    m = re.search(r"using: (\S+)", r.stderr)
                    lines = [l for l in r.stdout.splitlines() if l.strip()]
                    files = glob.glob(glob.escape(base) + ".*")
                    if (r.returncode != 0 or not m or m.group(1) != p["method"]
                            or len(lines) != ITERATIONS or not files):
                        why = (last_line(r.stderr) if r.returncode else
                               f"method {m.group(1) if m else '?'}, {len(lines)} lines")
                        self.fail(name, "callgrind" + (" timeouts" if t else ""), c["n"], why,
                                  shown)
                        irs = None
                        break
                    irs.append(sum(a - b for a, b in map(h.callgrind_file_ir, files)))
                    for f in files:
                        os.unlink(f)
                if irs:
                    self.counts[(t, name)] = dict(
                        per_write=(irs[1] - irs[0]) / (ITERATIONS * (w2 - w1)), ir=irs,
                        cmds=cmds)

    # -----------------------------------------------------------------------------------
    # Statistics and the report.

    def samples(self, kind, t, a, n):
        """{program or driver: {rep: [values]}} of one cell."""
        out = {}
        for r in self.records:
            if r["kind"] == kind and r["n"] == n and r["active"] == a and r["timeouts"] == t:
                out.setdefault(r["driver"], {}).setdefault(r["rep"], []).append(
                    r if kind == "chain" else r["us"])
        return out

    def bench_stats(self, kind, t, a, n):
        """{program: dict(median, min, runs, ratio to libevent, ratio to libev)}."""
        s = self.samples(kind, t, a, n)
        st = {}
        for name, byrep in s.items():
            v = [x for xs in byrep.values() for x in xs]
            st[name] = dict(median=h.median(v), min=min(v), runs=len(v))
            for ref in ("libevent", "libev-emulation"):
                if ref in s and ref != name:
                    st[name][ref] = h.ratio_stats(h.paired(byrep, s[ref]))
        return st

    def chain_stats(self, t, a, n):
        """{backend: {metric: ratio stats of iomux-event-<b> over iomux-<b>, paired}}."""
        s = self.samples("chain", t, a, n)
        out = {}
        for b, native, emu in self.pairs:
            if native not in s or emu not in s:
                continue
            for metric in ("total_ms", "proc_ms"):
                def per(byrep):
                    return {rep: [x for r in rs for x in r[metric]] for rep, rs in byrep.items()}
                pairs = h.paired(per(s[emu]), per(s[native]))
                if pairs:
                    st = h.ratio_stats(pairs)
                    st["native_ms"] = h.median([x for rs in per(s[native]).values() for x in rs])
                    st["emulated_ms"] = h.median([x for rs in per(s[emu]).values() for x in rs])
                    out.setdefault(b, {})[metric] = st
        return out

    def cell_failed(self, name, where, n):
        return any(f[0] == name and f[1] == "libevent" and f[2] == where and f[3] == n
                   for f in self.runner.failures)

    def value(self, st, name, where, n):
        s = st.get(name)
        if s is None:
            return "failed" if self.cell_failed(name, where, n) else "—"
        return f"{h.fmt_num(s['median'])} ({h.fmt_num(s['min'])})"

    @staticmethod
    def ratio(s, ref, mark=None):
        r = (s or {}).get(ref)
        if not r or r["ratio"] is None:
            return "—"
        return f"{r['ratio']:.2f}x ({r['rmin']:.2f}–{r['rmax']:.2f})" + (mark or "")

    def shown_programs(self):
        return [p for p in PROGRAMS if p in self.programs]

    def bench_tables(self, t):
        """The bench.c table of one timeout variant and its ratio table."""
        names = self.shown_programs()
        rows, ratios = [], []
        for a in self.active:
            for n in self.sizes:
                if a > n:
                    continue
                st = self.bench_stats("bench", t, a, n)
                where = f"bench.c A={a}" + (" timeouts" if t else "")
                rows.append(f"| {n:,} | {a:,} | " + " | ".join(
                    self.value(st, p, where, n) for p in names) + " |")
                cells = []
                for p in names:
                    if p == REFERENCE:
                        continue
                    r = (st.get(p) or {}).get(REFERENCE) or {}
                    slow = (p == TARGET_PROGRAM and r.get("ratio") is not None
                            and round(r["ratio"], 2) >= 1)
                    cells.append(self.ratio(st.get(p), REFERENCE, " **!**" if slow else ""))
                ratios.append(f"| {n:,} | {a:,} | " + " | ".join(cells) + " |")
        head = "| N | A | " + " | ".join(names) + " |"
        rhead = "| N | A | " + " | ".join(p for p in names if p != REFERENCE) + " |"
        return ([head, "|---" * (len(names) + 2) + "|"] + rows,
                [rhead, "|---" * (len(names) + 1) + "|"] + ratios)

    def chain_table(self, t):
        lines = ["| N | A | " + " | ".join(
            f"{emu} / {native}: {what}" for _, native, emu in self.pairs
            for what in ("event processing", "total")) + " |",
            "|---" * (2 * len(self.pairs) + 2) + "|"]
        chain_max = self.lim["max_slots"]["socketpair"]
        for a in self.active:
            for n in self.sizes:
                if a > n:
                    continue
                cs = self.chain_stats(t, a, n)
                cells = []
                for b, native, emu in self.pairs:
                    for metric in ("proc_ms", "total_ms"):
                        s = cs.get(b, {}).get(metric)
                        if s:
                            mark = " **!**" if round(s["ratio"], 2) > TARGET_CHAIN else ""
                            cells.append(f"{s['ratio']:.2f}x ({s['rmin']:.2f}–{s['rmax']:.2f})"
                                         f"{mark}; {s['emulated_ms']:.2f} / "
                                         f"{s['native_ms']:.2f} ms")
                        else:
                            cells.append("over the harness's fd limit" if n > chain_max
                                         else "failed" if any(self.cell_failed(
                                             d, f"chain A={a}" + (" timeouts" if t else ""), n)
                                             for d in (native, emu)) else "—")
                lines.append(f"| {n:,} | {a:,} | " + " | ".join(cells) + " |")
        return lines

    def cascade_tables(self):
        names = self.shown_programs()
        rows = ["| N | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
        ratios = ["| N | " + " | ".join(p for p in names if p != REFERENCE) + " |",
                  "|---" * len(names) + "|"]
        for n in self.cascade_sizes:
            st = self.bench_stats("cascade", None, None, n)
            rows.append(f"| {n:,} | " + " | ".join(
                self.value(st, p, "bench_cascade.c", n)
                if ("cascade", PROGRAMS[p]["lib"]) in self.exes else "does not build"
                for p in names) + " |")
            ratios.append(f"| {n:,} | " + " | ".join(
                self.ratio(st.get(p), REFERENCE) for p in names if p != REFERENCE) + " |")
        return rows, ratios

    def misses(self):
        """The targets: iomux-event-epoll's bench.c faster than libevent's and than libev's
        emulation in every cell (paired medians), and in the chain study iomux-event-<backend>
        at most TARGET_CHAIN times iomux-<backend> (event processing and total). Returns
        (missed, not checked, met)."""
        missed, unchecked, met = [], [], []
        for t, a, n in self.cells_:
            what = f"N={n:,} A={a:,}" + (", idle timeouts" if t else ", no timeouts")
            st = self.bench_stats("bench", t, a, n)
            s = st.get(TARGET_PROGRAM)
            for ref, words in (("libevent", "libevent"), ("libev-emulation", "libev's emulation")):
                if not s:
                    if TARGET_PROGRAM in self.programs:
                        missed.append(f"{what}: bench.c {TARGET_PROGRAM} not measured (failed)")
                    else:
                        unchecked.append(f"{what}: {TARGET_PROGRAM} did not run")
                    break
                r = s.get(ref)
                if not r or r["ratio"] is None:
                    unchecked.append(f"{what}: bench.c against {words}: {ref} not measured")
                elif round(r["ratio"], 2) >= 1:
                    missed.append(f"{what}: bench.c {TARGET_PROGRAM} {r['ratio']:.2f}x "
                                  f"{words}'s time ({r['rmin']:.2f}–{r['rmax']:.2f}), not faster"
                                  f" ({s['median']:,.0f} against {st[ref]['median']:,.0f} µs)")
                else:
                    met.append(f"{what}: bench.c {r['ratio']:.2f}x {words}'s time")
            cs = self.chain_stats(t, a, n)
            for b, native, emu in self.pairs:
                for metric, words in (("proc_ms", "event processing"), ("total_ms", "total")):
                    c = cs.get(b, {}).get(metric)
                    if not c:
                        unchecked.append(f"{what}: chain {emu} / {native} ({words}) not measured")
                    elif round(c["ratio"], 2) > TARGET_CHAIN:
                        missed.append(f"{what}: chain {emu} {c['ratio']:.2f}x {native}'s "
                                      f"{words} time ({c['rmin']:.2f}–{c['rmax']:.2f}), over "
                                      f"{TARGET_CHAIN}x")
                    else:
                        met.append(f"{what}: chain {emu} {c['ratio']:.2f}x {native} ({words})")
        return missed, unchecked, met

    def plot(self, out):
        """Lehmann's layout: a panel per number of active clients and timeout variant, the
        bench.c time against N on log axes. [] if matplotlib is missing."""
        panels = []
        for t in self.timeouts:
            for a in self.active:
                lines = {}
                for n in self.sizes:
                    if a > n:
                        continue
                    for p, s in self.bench_stats("bench", t, a, n).items():
                        lines.setdefault(p, []).append((n, s["median"]))
                panels.append((f"{a:,} active, " + ("idle timeouts" if t else "no timeouts"),
                               lines, "µs, second iteration (log scale)"))
        if len(self.sizes) < 2 or not panels:
            return []
        if h.plot(os.path.join(out, "libevent.png"), "libevent's test/bench.c three ways: "
                       "event processing per iteration, lower is better", panels,
                       "Socket pairs N (log scale)", legend_title="bench.c against"):
            return ["![libevent's bench.c](libevent.png)", ""]
        return []

    def report_md(self, out):
        """The report's section, and the target's misses as the run's end lists them."""
        md = ["## The libevent study: libevent's test/bench.c three ways", ""]
        if not self.source or self.why:
            md += [f"Not run: {self.why or 'nothing to run'}.", ""]
            return md, []
        md += [f"libevent's own `test/bench.c` (2.1.12, fetched with `scripts/libevent-source`: "
               f"`{h.shown_path(self.source['tree'])}`), as Lehmann ran it: N socket pairs, A "
               f"of them active, each iteration re-adds every event, writes to the A active "
               f"ones and dispatches (`EVLOOP_ONCE | EVLOOP_NONBLOCK`) until {self.writes:,} "
               "more writes have been passed on; bench.c times that dispatching (event "
               "processing; it does not print the total with the re-adding). Built from the "
               "same file with the same compiler flags (`-O2`) against each library; every "
               f"process pinned to CPU {self.args.cpu_used}, {self.reps} "
               f"process{'es' if self.reps > 1 else ''} per program and cell, in an order that "
               "rotates. Of each process's {ITERATIONS} iterations "
               "the second is used; a cell is the **median (minimum)** over the processes, in "
               "µs. Ratios are to libevent's time in the same repetition: median (min–max). "
               "bench/README.md (\"The libevent study\") gives the method, the timeout variant "
               "and the headers that complete libev's emulation.", "",
               "```", self.reproduce(), "```", ""]
        md += ["| program | built against | links (ldd) | method (checked in every run) |",
               "|---|---|---|---|"]
        for p in self.shown_programs():
            b = self.builds[PROGRAMS[p]["lib"]]
            md.append(f"| {p} | {PROGRAMS[p]['what']} | "
                      + "<br>".join(f"`{x}`" for x in b.get("needed", [])) + " | "
                      + PROGRAMS[p]["method"] + " |")
        for lib, b in self.builds.items():
            if not b["ok"]:
                md.append(f"| — | {lib} | not built: {b['why']} | — |")
        md += ["", "The sources as fetched (sha256): " + ", ".join(
            f"`test/{k}` {v}" for k, v in self.source["sha256"].items()) + "; "
            "`bench_timeouts.c` is `bench.c` with the one change bench/README.md shows."]
        md += ["", "Compile commands (WORK: `" + h.shown_path(self.work) + "`):", "", "```"]
        for lib, b in self.builds.items():
            for kind, cmd in b["cmds"].items():
                md.append(shlex.join(cmd).replace(self.work + "/", "WORK/").replace(
                    h.ROOT + "/", ""))
        md += ["```", ""]
        if self.capped:
            md += ["Sizes that RLIMIT_NOFILE does not allow (bench.c sets it to 2N + 50 fds, "
                   f"soft and hard; the hard limit here is {self.hard:,} and may not be raised): "
                   + ", ".join(f"N = {a:,} ran as N = {r:,}" for a, r in self.capped) + ".", ""]
        if self.left_out:
            md += ["Left out: A > N (" + "; ".join(f"A = {a:,}, N = {n:,}" for a, n in
                                                   sorted({c[1:] for c in self.left_out}))
                   + "): bench.c would write all A tokens into one socket, which blocks.", ""]
        for t in self.timeouts:
            words = ("idle timeouts (every event added with a random 10-11 s timeout, "
                     "restarted by the library on every activation)" if t else "no timeouts")
            rows, ratios = self.bench_tables(t)
            md += [f"### bench.c, {words}: µs of event processing, second iteration, median "
                   "(minimum)", ""] + rows + ["", f"Ratio to {REFERENCE}, paired within each "
                                                  "repetition (lower is better; **!** marks "
                                                  f"{TARGET_PROGRAM} not faster):", ""] + ratios
            md += ["", f"The chain study in the same run, same N, A, writes and timeouts "
                   f"(bench/drivers/libevent.c against libiomux-event over iomux's own driver, "
                   f"paired; event processing and total per iteration; **!** over "
                   f"{TARGET_CHAIN}x; then the two medians):", ""] + self.chain_table(t) + [""]
        if 0 in self.timeouts and 1 in self.timeouts:
            md += ["libev's emulation does less work in the timeout variant than the other two: "
                   "it does not restart a persistent event's timeout when the event fires (its "
                   "`event_add` starts an `ev_timer`, its I/O callback leaves it alone), while "
                   "libevent 2.x and libiomux-event restart it at every activation.", ""]
        if self.cascade_sizes and any(r["kind"] == "cascade" for r in self.records):
            rows, ratios = self.cascade_tables()
            md += ["### bench_cascade.c: µs per iteration (set-up of N events and a write "
                   "passed down the chain of N socket pairs), second iteration, median "
                   "(minimum)", "", "Without `-m`: the method is chosen with libevent's "
                   "`EVENT_NO<METHOD>` variables (LIBEV_FLAGS=4 for libev) and checked.", ""]
            md += rows + ["", f"Ratio to {REFERENCE}, paired:", ""] + ratios + [""]
        md += self.counts_md()
        md += self.plot(out)
        missed, unchecked, met = self.misses()
        md += ["### libiomux-event against its target", "",
               f"Target: libevent's bench.c through libiomux-event (`{TARGET_PROGRAM}`) faster "
               "than through libevent itself and than through libev's emulation in every cell "
               "(the median of the paired ratios under 1), and in the chain study "
               f"`iomux-event-<backend>` at most {TARGET_CHAIN}x `iomux-<backend>` (iomux's own "
               "API) in event processing and in total time per iteration.", ""]
        md += [f"- missed: {m}" for m in missed] or ["- met in every cell"]
        md += [f"- not checked: {m}" for m in unchecked]
        for t in self.timeouts:
            v = {p: (self.counts.get((t, p)) or {}).get("per_write") for p in PROGRAMS}
            if v[TARGET_PROGRAM] and v[REFERENCE]:
                md.append("- user-space instructions per write, exact (callgrind, above), "
                          + ("idle timeouts" if t else "no timeouts") + f": {TARGET_PROGRAM} "
                          f"{v[TARGET_PROGRAM]:.1f}, libevent {v[REFERENCE]:.1f} "
                          f"({v[TARGET_PROGRAM] / v[REFERENCE]:.2f}x)" + (
                              f", libev's emulation {v['libev-emulation']:.1f} "
                              f"({v[TARGET_PROGRAM] / v['libev-emulation']:.2f}x)"
                              if v["libev-emulation"] else ""))
        md.append("")
        if met:
            md += ["<details><summary>cells met</summary>", ""] + [f"- {m}" for m in met] + [
                "", "</details>", ""]
        return md, [f"libevent {m}" for m in missed]

    def counts_md(self):
        """The instruction counts: a row per program, a column per timeout variant."""
        c = self.cfg.get("callgrind")
        if not c:
            return []
        head = (f"### bench.c: user-space instructions per write passed on (callgrind, N = "
                f"{c['n']:,}, A = {c['active']:,})")
        if self.counts_why or not self.counts:
            return [head, "", f"Not counted: {self.counts_why or 'every count failed'}.", ""]
        w1, w2 = c["writes"]
        ts = list(self.timeouts)
        lines = [head, "", f"bench.c run once with `-w {w1:,}` and once with `-w {w2:,}` under "
                 f"callgrind: (Ir(-w {w2:,}) - Ir(-w {w1:,})) / ({ITERATIONS} iterations x "
                 f"{w2 - w1:,}), what is spent in printf & co. left out (as in the cost table). "
                 "Exact (the timeout variant varies a little, as the cost table says); it "
                 "includes bench.c's own read_cb, recv and send, the same code in every build. "
                 "Under valgrind bench.c's setrlimit is replaced by a preloaded no-op (valgrind "
                 "refuses to move the hard limit). The two runs of "
                 f"`{TARGET_PROGRAM}`:", "", "```"]
        first = self.counts.get((ts[0], TARGET_PROGRAM)) or next(iter(self.counts.values()))
        lines += first["cmds"] + ["```", ""]
        lines += ["| program | " + " | ".join(
            ("idle timeouts" if t else "no timeouts") + " | ratio to libevent" for t in ts)
            + " |", "|---" * (2 * len(ts) + 1) + "|"]
        for name in self.shown_programs():
            cells = []
            for t in ts:
                v, ref = self.counts.get((t, name)), self.counts.get((t, REFERENCE))
                cells.append(f"{v['per_write']:.1f}" if v else "—")
                cells.append(f"{v['per_write'] / ref['per_write']:.2f}x" if v and ref else "—")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        return lines + [""]

    def print_tables(self):
        if not self.source or self.why:
            return
        for t in self.timeouts:
            rows, ratios = self.bench_tables(t)
            h.log(f"\nlibevent bench.c, {'idle timeouts' if t else 'no timeouts'}: µs of "
                       "event processing, second iteration, median (minimum)")
            h.log("\n".join(rows))
            h.log(f"ratio to {REFERENCE}, paired:")
            h.log("\n".join(ratios))
            if self.pairs:
                h.log("chain study, iomux-event over iomux, paired:")
                h.log("\n".join(self.chain_table(t)))
        if any(r["kind"] == "cascade" for r in self.records):
            rows, ratios = self.cascade_tables()
            h.log("\nlibevent bench_cascade.c: µs per iteration, median (minimum)")
            h.log("\n".join(rows))
            h.log("\n".join(ratios))
        counts = self.counts_md()
        if counts and self.counts:
            h.log("\n" + counts[0].lstrip("# "))
            h.log("\n".join(l for l in counts if l.startswith("|")))

    def smoke_summary(self):
        if not self.source or self.why:
            return [f"libevent: skipped: {self.why}"]
        runs = [r for r in self.records if r["kind"] != "chain"]
        chain = [r for r in self.records if r["kind"] == "chain"]
        return ["libevent: bench.c built against "
                + ", ".join(lib for lib, b in self.builds.items() if b["ok"])
                + f"; {len(runs)} bench.c and bench_cascade.c runs of {ITERATIONS} iterations, "
                f"each on the method it was asked for; {len(chain)} chain runs"]

    def json(self):
        return dict(source=self.source, programs=self.shown_programs(), builds=self.builds,
                    sizes=self.sizes, cascade_sizes=self.cascade_sizes, active=self.active,
                    writes=self.writes, timeouts=self.timeouts, reps=self.reps,
                    capped=self.capped, pairs=self.pairs, why=self.why,
                    libev_header_dir=self.libev_header_dir,
                    instructions={f"{'timeouts' if t else 'plain'} {name}": v
                                  for (t, name), v in self.counts.items()},
                    instructions_not_counted=self.counts_why,
                    iteration_used=ITERATION + 1, skipped=self.skipped)
