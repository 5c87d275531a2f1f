# SPDX-License-Identifier: MIT
"""The I/O-model study, run by bench/run (bench/README.md, "The I/O-model study"): the Winsock
comparison of server I/O models (docs/studies.md, study 5) on Linux. One echo server per
model: thread per connection with blocking sockets (bench/models/server_threads.c, plain C),
and iomux's small echo server (bench/models/server_iomux.c) on select, poll, epoll
level-triggered, epoll edge-triggered (io watchers with MUX_EDGE) and io_uring (iomux
streams, the kernel's own receive and send operations: the completion-port model), plus
rtsig when the build has it. The client (bench/models/client.c) ramps the connections from
100 to what the fd limit allows, each echoing a small message at a fixed rate, and reports
per step the connections held, echoes per second, server CPU, server memory (RSS) and
threads; a model breaks at the first step it does not hold or keep up with.

The method is the echo study's: the server pinned to one CPU, the client to the other, a
fresh server for every run, the models in an order that rotates between repetitions.

The shared helpers come from benchlib.py."""
import os
import shlex
import signal
import subprocess
import tempfile

import benchlib as h
import deadconn_study
from benchlib import Cell, Study as Base

FD_MARGIN = 64  # descriptors each process keeps besides the connections
MAX_CONNS = 100000  # the most connections a step asks for, whatever the fd limit
# model -> (server, IOMUX_BACKEND or None, --mode, what it is)
MODELS = {
    "threads": ("model-threads", None, None,
                "thread per connection, blocking sockets (plain C, POSIX threads, default "
                "attributes)"),
    "iomux-select": ("model-iomux", "select", "level", "select(), io watchers"),
    "iomux-poll": ("model-iomux", "poll", "level", "poll(), io watchers"),
    "iomux-rtsig": ("model-iomux", "rtsig", "level", "real-time signals, io watchers"),
    "iomux-epoll-lt": ("model-iomux", "epoll", "level", "epoll level-triggered, io watchers"),
    "iomux-epoll-et": ("model-iomux", "epoll", "edge", "epoll edge-triggered, io watchers "
                       "with MUX_EDGE, reading and writing until EAGAIN"),
    "iomux-uring": ("model-iomux", "uring", "streams", "io_uring, iomux streams: the "
                    "kernel's receive and send operations (the completion-port model)"),
}
SERVERS = list(MODELS)
MODES = {
    "smoke": dict(steps=[100, 300], rate=10, message=64, seconds=0.5, warmup=0.2, reps=1,
                  buffer=4096),
    "quick": dict(steps=[100, 1000, "max"], rate=2, message=64, seconds=0.5, warmup=0.2,
                  reps=1, buffer=4096),
    "full": dict(steps=[100, 1000, 2000, 5000, 10000, 15000, "max"], rate=2, message=64,
                 seconds=5, warmup=1, reps=3, buffer=4096),
}
METRICS = [("held", "connections", "Connections held", "{:,.0f}"),
           ("eps", "echoes/s", "Echoes per second", "{:,.0f}"),
           ("server_cpu_pct", "% of one CPU", "Server CPU use", "{:.1f}"),
           ("server_cpu_us_per_echo", "µs", "Server CPU per echo", "{:.2f}"),
           ("rss_kb_per_conn", "KB", "Server memory (RSS) per connection", "{:.1f}"),
           ("server_threads", "threads", "Server threads", "{:,.0f}"),
           ("rtt_us_p99", "µs", "Round trip, 99th percentile", "{:,.0f}")]


class Study(Base):
    """The I/O-model study of one bench/run."""
    NAME = "models"
    TITLE = "the I/O-model study (the Winsock comparison, study 5)"
    MODES = MODES

    def __init__(self, ctx):
        super().__init__(ctx)
        args, cfg, lim = self.args, self.cfg, ctx.lim
        self.want = want = ctx.want
        self.cpus = args.echo_cpus
        self.reps = args.reps or cfg["reps"]
        # The fd limit's room, capped: model-client spreads its connections over 4 source
        # addresses (about 113,000 ports) and a thread per connection must stay sane.
        self.max_conns = min(lim["nofile"] - FD_MARGIN, MAX_CONNS)
        steps = args.steps.split(",") if args.steps else cfg["steps"]
        self.steps = sorted({self.max_conns if s == "max" else min(int(s), self.max_conns)
                             for s in steps})
        bdir = os.path.join(args.build_abs, "bench", "models")
        self.client = os.path.join(bdir, "model-client")
        backends = deadconn_study.build_backends(args.build_abs)
        self.specs = {}
        for name, (exe, backend, mode, what) in MODELS.items():
            path = os.path.join(bdir, exe)
            if not os.path.exists(path):
                self.skipped.append((f"models {name}", f"{path} not built"))
            elif backend and backend not in backends:
                self.skipped.append((f"models {name}", f"this build has no {backend} backend "
                                     f"(its backends: {', '.join(backends) or 'none'})"))
            elif backend and backends[backend]:
                self.skipped.append((f"models {name}", backends[backend]))
            else:
                cmd = [path, "--port", "0", "--buffer", str(cfg["buffer"])] + (
                    ["--mode", mode] if mode else [])
                self.specs[name] = dict(cmd=cmd, env={"IOMUX_BACKEND": backend} if backend
                                        else {}, backend=backend, what=what)
        if not os.path.exists(self.client):
            self.skipped.append(("models", f"{self.client} not built"))
            self.specs = {}
        self.names = [n for n in self.specs if not want or n in want]
        self.results, self.runs = [], []

    def banner(self):
        return (f"I/O models (Winsock) {', '.join(self.names)}; connections "
                f"{', '.join(f'{s:,}' for s in self.steps)}; server on CPU {self.cpus[0]}, "
                f"client on CPU {self.cpus[1]}")

    def known(self):
        return set(SERVERS)

    def why_not(self):
        return None if self.names else "no server can run"

    def reproduce(self):
        cmd = ["bench/run", "--build", h.build_arg(self.args), "--study", "models"]
        cmd += h.mode_arg(self.args)
        cmd += ["--steps", ",".join(map(str, self.steps)), "--reps", str(self.reps),
                "--echo-cpus", ",".join(map(str, self.cpus))]
        if self.want:
            cmd += ["--drivers", ",".join(self.names)]
        return shlex.join(cmd)

    def client_cmd(self, port, pid):
        c = self.cfg
        return self.runner.pin([self.client, "--port", str(port), "--steps",
                                ",".join(map(str, self.steps)), "--rate", str(c["rate"]),
                                "--message", str(c["message"]), "--seconds", str(c["seconds"]),
                                "--warmup", str(c["warmup"]), "--server-pid", str(pid)]
                               + (["--keep-going"] if self.args.smoke else []), self.cpus[1])

    # -----------------------------------------------------------------------------------
    # Running.

    def schedule(self):
        c, cells = self.cfg, []
        run = len(self.steps) * (c["seconds"] + c["warmup"] + 0.2) + self.steps[-1] / 8000
        for rep in range(self.reps):
            k = rep % len(self.names) if self.names else 0
            for name in self.names[k:] + self.names[:k]:
                cells.append(Cell(f"models {name} (rep {rep + 1})", run,
                                  lambda name=name, rep=rep: self.run_one(name, rep)))
        return cells

    def fail(self, name, why, cmd):
        self.runner.failures.append((name, "models", "tcp", self.steps[-1], why, cmd))
        h.end_line()
        h.log(f"  FAILED models {name}: {why}")

    def run_one(self, name, rep):
        spec = self.specs[name]
        cmd = self.runner.pin(spec["cmd"], self.cpus[0])
        shown = " ".join([f"{k}={v}" for k, v in spec["env"].items()] + [shlex.join(cmd)])
        err = tempfile.TemporaryFile()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err,
                             env=dict(os.environ, **spec["env"]))
        self.runner.live.add(p)
        why, ccmd, steps = None, [], []
        try:
            line = h.read_line(p, 10)
            if line is None or not line.startswith("listening on 127.0.0.1:"):
                why = f"no 'listening on' line within 10 s: {line}"
            elif spec["backend"] and f"backend {spec['backend']}," not in line:
                why = f"wrong backend: '{line}'"
            else:
                port = int(line.split(":")[1].split()[0])
                kind = {"uring": "anon_inode:[io_uring]",
                        "epoll": "anon_inode:[eventpoll]"}.get(spec["backend"])
                if kind and kind not in h.fd_kinds(p.pid):
                    why = f"holds no {kind}: not the mechanism it claims"
            if not why:
                ccmd = self.client_cmd(port, p.pid)
                c = self.cfg
                limit = len(self.steps) * (c["seconds"] + c["warmup"] + 30) + 60
                try:
                    out = subprocess.run(ccmd, capture_output=True, text=True, timeout=limit)
                    for l in out.stdout.splitlines():
                        if l.startswith("STEP "):
                            import json
                            steps.append(json.loads(l[5:]))
                    if out.returncode != 0:
                        why = "client: " + ((out.stdout + out.stderr).strip().splitlines() or
                                            [f"exit status {out.returncode}"])[-1]
                    elif not steps:
                        why = "client printed no STEP line"
                except subprocess.TimeoutExpired:
                    why = f"client did not finish within {limit:.0f} s"
        finally:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                    why = why or "did not exit within 30 s of SIGTERM"
            elif not why:
                why = f"exited by itself during the run (status {p.returncode})"
            self.runner.live.discard(p)
            err.seek(0)
            server_err = err.read().decode(errors="replace").strip().splitlines()
            err.close()
            p.stdout.close()
        if self.args.smoke and not why:
            bad = [s for s in steps if s["held"] != s["connections"] or s["mismatches"] or
                   not s["eps"]]
            if bad or len(steps) != len(self.steps):
                s = (bad or steps)[-1]
                why = (f"smoke: {s['held']:,} of {s['connections']:,} connections held, "
                       f"{s['eps']:.0f} echoes/s, {s['mismatches']} mismatches"
                       + (f" ({s['broke']})" if "broke" in s else ""))
        if why:
            self.fail(name, why, shown + " & " + shlex.join(ccmd))
            return
        for s in steps:
            s.update(model=name, rep=rep)
        # Memory per connection: what the server grew by since the first step, per connection
        # added, so that the process's fixed memory does not count.
        first = steps[0]
        for s in steps:  # only this figure: the client's own (RSS over held) is dropped
            s.pop("rss_kb_per_conn", None)
            if "server_rss_kb" in s and s is not first and s["held"] > first["held"]:
                s["rss_kb_per_conn"] = ((s["server_rss_kb"] - first["server_rss_kb"]) /
                                        (s["held"] - first["held"]))
        self.results += steps
        self.runs.append(dict(model=name, rep=rep, server_cmd=shown, client_cmd=shlex.join(ccmd),
                              server_stderr=server_err[-3:]))

    # -----------------------------------------------------------------------------------
    # The report.

    def table(self, metric, fmt):
        cols = self.steps
        lines = ["| model | " + " | ".join(f"{s:,}" for s in cols) + " |",
                 "|---" * (len(cols) + 1) + "|"]
        for name in self.names:
            row = []
            for c in cols:
                v = [s[metric] for s in self.results if s["model"] == name and
                     s["connections"] == c and s.get(metric) is not None]
                cell = fmt.format(h.median(v)) if v else "—"
                broke = [s for s in self.results if s["model"] == name and
                         s["connections"] == c and "broke" in s]
                row.append(cell + (" **✗**" if broke else ""))
            lines.append(f"| {name} | " + " | ".join(row) + " |")
        return "\n".join(lines)

    def breaks(self):
        """{model: (the earliest step any repetition broke at, why), once at least half of
        the repetitions broke somewhere; else None}."""
        out = {}
        for name in self.names:
            firsts = []
            for rep in range(self.reps):
                b = [s for s in self.results if s["model"] == name and s["rep"] == rep and
                     "broke" in s]
                if b:
                    firsts.append((b[0]["connections"], b[0]["broke"]))
            reps_run = len({s["rep"] for s in self.results if s["model"] == name})
            out[name] = min(firsts) if firsts and len(firsts) * 2 >= reps_run else None
        return out

    def plot(self, path):
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            return False
        panels = [m for m in METRICS if m[0] in ("held", "eps", "server_cpu_pct",
                                                   "rss_kb_per_conn")]
        fig, axes = plt.subplots(2, 2, figsize=(12.8, 8.6), squeeze=False)
        for ax, (metric, unit, title, _) in zip(axes.flat, panels):
            for name in self.names:
                pts = []
                for c in self.steps:
                    v = [s[metric] for s in self.results if s["model"] == name and
                         s["connections"] == c and s.get(metric) is not None]
                    if v:
                        pts.append((c, h.median(v)))
                if not pts:
                    continue
                colour, marker, line, _ = h.driver_style(name)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=colour,
                        linestyle=line, label=name, linewidth=1.6)
            ax.set_xscale("log")
            ax.set_yscale("log" if metric in ("held", "eps") else "linear")
            if metric not in ("held", "eps"):
                ax.set_ylim(bottom=0)
            h.readable_ticks(ax, ax.xaxis, True)
            h.readable_ticks(ax, ax.yaxis, metric in ("held", "eps"))
            ax.set_xlabel("connections offered (log scale)")
            ax.set_ylabel(unit)
            ax.set_title(title, fontsize=10.5)
            ax.grid(True, alpha=0.35)
            ax.tick_params(labelsize=9)
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.suptitle("I/O models (the Winsock comparison on Linux): echo servers under a "
                     "growing number of connections", fontsize=12.5)
        fig.tight_layout()
        fig.legend(handles, labels, title="model", loc="center left", bbox_to_anchor=(1.0, 0.5),
                   fontsize=9, frameon=False)
        fig.savefig(path, dpi=110, bbox_inches="tight", pad_inches=0.15)
        plt.close(fig)
        return True

    def report_md(self, out):
        c = self.cfg
        md = ["## Study 5: I/O models (the Winsock comparison)", "",
              f"One echo server per model, pinned to CPU {self.cpus[0]}; the client "
              f"(bench/models/client.c) on CPU {self.cpus[1]} ramps the connections through "
              "the columns below, over loopback. At each step every connection sends a "
              f"{c['message']}-byte message {c['rate']:g} times a second (phases spread over "
              "the period; a message is sent only once the previous echo is back, else it "
              f"counts as late), {c['warmup']} s warm-up then {c['seconds']} s timed; every "
              "echoed byte is checked. A connection is held once its first echo came back. "
              "Server CPU is its on-CPU time (schedstat, all threads) over the window; memory "
              "per connection is what its RSS grew by since the first step, per connection "
              f"added; every server has a {c['buffer']:,}-byte buffer per connection. A model "
              "breaks (**✗**) at the first step where it does not hold every connection or "
              "answers fewer than 90% of the messages offered; the client stops there. Cells "
              f"are medians over {self.reps} repetitions; the models ran in rotating order, a "
              f"fresh server each time. The most connections the fd limit allows: "
              f"{self.max_conns:,}.", "", "```", self.reproduce(), "```", "",
              "| model | what it is | server |", "|---|---|---|"]
        for name in self.names:
            run = next((r for r in self.runs if r["model"] == name), None)
            md.append(f"| {name} | {self.specs[name]['what']} | "
                      + (f"`{run['server_cmd']}`" if run else "failed") + " |")
        md.append("")
        for metric, unit, title, fmt in METRICS:
            md += [f"### {title} ({unit})", "", self.table(metric, fmt), ""]
        if self.results and self.plot(os.path.join(out, "models.png")):
            md += ["![I/O models](models.png)", ""]
        md += ["### Where each model breaks", ""]
        for name, b in self.breaks().items():
            md.append(f"- {name}: " + (f"at {b[0]:,} connections: {b[1]}" if b else
                                       f"held and kept up at every step, up to "
                                       f"{self.steps[-1]:,} connections"))
        md.append("")
        for name, why in self.skipped:
            md.append(f"Skipped {name}: {why}.")
        if self.skipped:
            md.append("")
        return md, []

    def print_tables(self):
        for metric, unit, title, fmt in METRICS[:3]:
            if self.results:
                h.log(f"\nmodels: {title.lower()} ({unit}; columns: connections)")
                h.log(self.table(metric, fmt))

    def smoke_summary(self):
        echoes = sum(s["eps"] * s["seconds"] for s in self.results)
        return [f"models: {len(self.runs)} runs of {', '.join(self.names) or 'nothing'} at "
                f"{', '.join(f'{s:,}' for s in self.steps)} connections: every connection held, "
                f"{echoes:,.0f} echoes, every byte checked"]

    def json(self):
        return dict(steps=self.steps, results=self.results, runs=self.runs, config=self.cfg,
                    skipped=self.skipped)
