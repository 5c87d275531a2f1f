#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Takes libevent's own regression cases (test/regress.c, test/regress_et.c) that use only
libevent's public API out of its source tree, for tests/libevent/run-regress.

The source files are run through the C preprocessor against the headers given with -I
(iomux's event2/ emulation, or libevent's own for the control run) and against small
stand-ins for the libevent-internal headers they include (tests/libevent/shim). The
preprocessed file is cut into its top-level definitions; for every case of the chosen
groups' tables (main_testcases, signal_testcases, edgetriggered_testcases) the test function
and everything it needs from the same file (helpers, callbacks, globals, types) is kept.
A case is left out, with the reason recorded, when what it needs names a libevent-internal
interface (INTERNAL below), or when it does not compile or link against the public headers
(the compiler's or linker's first message is the reason).

Writes OUT/cases.c (the kept definitions and filtered tables), OUT/manifest.tsv
("run<TAB>group/name" or "left-out<TAB>group/name<TAB>reason" per case) and prints a summary.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

GROUPS = [("main", "regress.c", "main_testcases"), ("signal", "regress.c", "signal_testcases"),
          ("et", "regress_et.c", "edgetriggered_testcases")]

# Interfaces private to libevent: what a case that names them tests is libevent's inside.
INTERNAL = {
    "event_active_later_": "event_active_later_ (libevent-internal deferred activation)",
    "event_base_add_virtual_": "event_base_add_virtual_ (libevent-internal virtual events)",
    "event_base_del_virtual_": "event_base_del_virtual_ (libevent-internal virtual events)",
    "event_global_current_base_": "event_global_current_base_ (libevent's global, internal)",
    "ev_signal_pair": "the signal backend's socketpair (internal field of struct event_base)",
    "th_base_lock": "the base's lock (internal field of struct event_base)",
    "evthread_enable_lock_debugging": "lock debugging (libevent-internal threading)",
    "event_base_start_iocp_": "IOCP start-up (internal)",
    "evsig_set_base_": "the signal backend (internal)",
    "event_debug_map_HT_GROW": "the debug-mode map (internal)",
    "evmap_": "the fd map (internal)",
    "event_debug_mode_on_": "debug mode's state (internal)",
    "event_mm_malloc_": "the allocator hooks' internals",
}

# Cases that check libevent's internal representation, or a limit iomux does not have.
GLASS_BOX = {
    "main/common_timeout": "glass-box: checks libevent's encoding of common timeouts "
                           "(magic bits in tv_usec, a timeout queue per duration)",
    "signal/signal_switchbase": "checks libevent's limit that only the base that added a "
                                "signal event last hears the signal; iomux delivers it to "
                                "every base watching it (docs/libevent.md)",
}

# regress.c's globals that the runner's fixtures use (regress_runner.c), kept whether a case
# needs them or not: on Windows the runner cannot define them weakly (PE has no weak data).
RUNNER_GLOBALS = ["pair", "test_ok", "called", "global_base"]

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
KEYWORDS = set("""auto break case char const continue default do double else enum extern float
for goto if inline int long register restrict return short signed sizeof static struct switch
typedef union unsigned void volatile while _Bool __attribute__ __extension__ __restrict
__inline __asm__ asm""".split())


def preprocess(src, cc, incs, defs):
    cmd = [cc, "-E", "-std=gnu11", "-D_GNU_SOURCE"] + [f"-D{d}" for d in defs]
    for i in incs:
        cmd += ["-I", i]
    return subprocess.run(cmd + [src], check=True, capture_output=True, text=True).stdout


def own_text(pre, name):
    """The preprocessed lines that come from file `name` itself, not from its headers."""
    out, mine = [], False
    for line in pre.splitlines():
        m = re.match(r'# \d+ "([^"]*)"', line)
        if m:
            mine = os.path.basename(m.group(1)) == name
            continue
        if mine:
            out.append(line)
    return "\n".join(out)


def chunks(text):
    """Cuts C text into top-level definitions: functions, declarations, type definitions."""
    res, start, depth, i, n = [], 0, 0, 0, len(text)
    fn_candidate = False
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c == "{":
            if depth == 0:
                head = text[start:i].strip()
                fn_candidate = head.endswith(")") and "=" not in head.split("(")[0]
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0 and fn_candidate:
                res.append(text[start:i + 1].strip())
                start, fn_candidate = i + 1, False
        elif c == ";" and depth == 0:
            chunk = text[start:i + 1].strip()
            if chunk != ";":
                res.append(chunk)
            start = i + 1
        i += 1
    return [c for c in res if c]


def defined_names(chunk):
    """The names a top-level chunk defines (a function, variables, a struct, a typedef)."""
    head = chunk.split("{")[0] if not chunk.lstrip().startswith("typedef") else chunk
    names = set()
    m = re.match(r"\s*(?:typedef\s+)?(struct|union|enum)\s+([A-Za-z_]\w*)\s*\{", chunk)
    if m:
        names.add(f"{m.group(1)} {m.group(2)}")
    if chunk.lstrip().startswith("typedef"):
        ids = IDENT.findall(re.sub(r"\{.*\}", " ", chunk, flags=re.S))
        if ids:
            names.add(ids[-1])
        return names
    if "(" in head and re.search(r"\)\s*$", head.strip()):  # a function definition
        m = re.search(r"([A-Za-z_]\w*)\s*\([^()]*(\([^()]*\)[^()]*)*\)\s*$", head.strip())
        if m:
            names.add(m.group(1))
        return names
    # declarations: every declarator name before '=' ',' ';' '[' at depth 0
    flat = re.sub(r"\{.*\}", " ", chunk, flags=re.S)
    flat = re.sub(r"=[^,;]*", " ", flat)
    for part in flat.split(","):
        part = re.sub(r"\[[^\]]*\]", " ", part)
        part = re.sub(r"\([^()]*\)\s*;?\s*$", " ", part) if "(*" not in part else part
        m = re.search(r"\(\s*\*\s*([A-Za-z_]\w*)\s*\)", part)
        ids = [m.group(1)] if m else [x for x in IDENT.findall(part) if x not in KEYWORDS]
        if ids:
            names.add(ids[-1])
    return names


def used_names(chunk):
    body = re.sub(r'"(\\.|[^"\\])*"', '""', chunk)
    ids = set(IDENT.findall(body))
    for m in re.finditer(r"\b(struct|union|enum)\s+([A-Za-z_]\w*)", body):
        ids.add(f"{m.group(1)} {m.group(2)}")
    return ids


def table_entries(chunk):
    """The brace-enclosed entries of a testcase table's initializer."""
    body = chunk[chunk.index("{") + 1:chunk.rindex("}")]
    out, depth, start = [], 0, None
    for i, c in enumerate(body):
        if c == "{":
            if depth == 0:
                start = i
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0 and body[start + 1:i].strip().startswith('"'):
                out.append(body[start:i + 1])  # not END_OF_TESTCASES' { NULL, ... }
    return out


class Source:
    def __init__(self, text):
        self.chunks = chunks(text)
        self.defs = {}
        for k, c in enumerate(self.chunks):
            for name in defined_names(c):
                self.defs.setdefault(name, []).append(k)

    def closure(self, roots):
        seen, todo = set(), [k for r in roots for k in self.defs.get(r, [])]
        while todo:
            k = todo.pop()
            if k in seen:
                continue
            seen.add(k)
            for name in used_names(self.chunks[k]):
                todo += [j for j in self.defs.get(name, []) if j not in seen]
        return seen


def case_of(entry):
    fields = [f.strip() for f in entry.strip("{} \n").split(",")]
    name = fields[0].strip('"')
    roots = {fields[1]}
    if len(fields) > 4 and IDENT.fullmatch(fields[4] or ""):
        roots.add(fields[4])  # a legacy case's test function rides in setup_data
    return name, roots


def internal_reason(src, ks):
    for k in sorted(ks):
        used = used_names(src.chunks[k])
        for key, why in INTERNAL.items():
            if key in used or (key.endswith("_") and any(u.startswith(key) for u in used)):
                return why
    return None


def emit(path, headers, sources, plan):
    """plan: {file: (kept chunk indices, {table: [entries]})}. Returns {line: (file, k)}."""
    lines, where = list(headers), {}
    for fname, (keep, tables) in plan.items():
        src = sources[fname]
        for k in sorted(keep):
            c = src.chunks[k]
            if any(t in defined_names(c) for t in tables):
                continue
            for _ in c.splitlines():
                where[len(lines) + 1] = (fname, k)
                lines.append(_)
            lines.append("")
        for table, entries in tables.items():
            lines.append(f"struct testcase_t {table}[] = {{")
            lines += [f"    {e}," for e in entries]
            lines.append("    { ((void*)0), ((void*)0), 0, ((void*)0), ((void*)0) } };")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return where


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True, help="libevent's source tree")
    ap.add_argument("--out", required=True)
    ap.add_argument("--shim", required=True, help="tests/libevent/shim")
    ap.add_argument("-I", dest="incs", action="append", default=[], help="public headers first")
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("--cflags", default="")
    ap.add_argument("--link", default="", help="what to link a check binary with")
    ap.add_argument("--runner", required=True, help="tests/libevent/regress_runner.c")
    ap.add_argument("--only", help="a manifest: keep only the cases it says were run")
    a = ap.parse_args()

    out = os.path.abspath(a.out)
    work = os.path.join(out, "test")
    os.makedirs(work, exist_ok=True)
    for f in ["regress.c", "regress_et.c", "regress.h", "tinytest.c", "tinytest.h",
              "tinytest_macros.h", "tinytest_local.h"]:
        shutil.copy(os.path.join(a.src, "test", f), work)
    # "../util-internal.h" from test/ must find the stand-in, not libevent's own.
    shutil.copy(os.path.join(a.shim, "util-internal.h"), out)
    incs = [a.shim] + a.incs
    defs = ["TINYTEST_LOCAL"]
    only = None
    if a.only:
        only = {l.rstrip("\n").split("\t")[1] for l in open(a.only) if l.startswith("run\t")}

    sources, texts = {}, {}
    for _, fname, _ in GROUPS:
        if fname not in sources:
            pre = preprocess(os.path.join(work, fname), a.cc, incs, defs)
            texts[fname] = own_text(pre, fname)
            sources[fname] = Source(texts[fname])

    cases = []  # (group, name, file, table, entry, chunk set)
    manifest = {}
    for group, fname, table in GROUPS:
        src = sources[fname]
        tk = src.defs.get(table)
        if not tk:
            sys.exit(f"extract: no table {table} in {fname}")
        for entry in table_entries(src.chunks[tk[0]]):
            name, roots = case_of(entry)
            full = f"{group}/{name}"
            if only is not None and full not in only:
                manifest[full] = "left out: not run in the libiomux-event run"
                continue
            if full in GLASS_BOX:
                manifest[full] = GLASS_BOX[full]
                continue
            ks = src.closure(roots - {"run_legacy_test_fn"})
            ks = {k for k in ks if table not in defined_names(src.chunks[k])}
            why = internal_reason(src, ks)
            if why:
                manifest[full] = f"internal API: {why}"
                continue
            cases.append([group, name, fname, table, entry, ks])

    headers = ['#include "util-internal.h"', '#include "shim_includes.h"', '#include "regress.h"']
    cfile = os.path.join(out, "cases.c")
    exe = os.path.join(out, "regress")
    for attempt in range(60):
        plan = {}
        for group, name, fname, table, entry, ks in cases:
            keep, tables = plan.setdefault(fname, (set(), {}))
            keep |= ks
            tables.setdefault(table, []).append(entry)
        for group, fname, table in GROUPS:  # a table with no case left stays, empty
            plan.setdefault(fname, (set(), {}))[1].setdefault(table, [])
        for name in RUNNER_GLOBALS:
            for k in sources["regress.c"].defs.get(name, []):
                plan.setdefault("regress.c", (set(), {}))[0].add(k)
        where = emit(cfile, headers, sources, plan)
        cmd = (f"{a.cc} -std=gnu11 -D_GNU_SOURCE -DTINYTEST_LOCAL {a.cflags} "
               f"-Werror=implicit-function-declaration -Wno-deprecated-declarations "
               f"-I {work} " + " ".join(f"-I {i}" for i in incs) +
               f" {cfile} {os.path.join(work, 'tinytest.c')} {a.runner} -o {exe} {a.link}")
        r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
        if r.returncode == 0:
            break
        blamed = blame(r.stderr, cfile, where, sources, cases)
        if not blamed:
            sys.exit(f"extract: the build failed and no case could be blamed:\n{cmd}\n{r.stderr}")
        for c, msg in blamed:
            manifest[f"{c[0]}/{c[1]}"] = msg
            cases.remove(c)
    else:
        sys.exit("extract: gave up after 60 builds")

    for c in cases:
        manifest[f"{c[0]}/{c[1]}"] = None
    with open(os.path.join(out, "manifest.tsv"), "w") as f:
        for group, fname, table in GROUPS:
            for entry in table_entries(sources[fname].chunks[sources[fname].defs[table][0]]):
                full = f"{group}/{case_of(entry)[0]}"
                why = manifest.get(full)
                f.write(f"run\t{full}\n" if why is None else f"left-out\t{full}\t{why}\n")
    print(f"extract: {len(cases)} cases kept; {sum(1 for v in manifest.values() if v)} left out; "
          f"binary {exe}")


def blame(stderr, cfile, where, sources, cases):
    """Which cases the first error belongs to, with the message as the reason."""
    out = []
    for line in stderr.splitlines():
        m = re.match(re.escape(cfile) + r":(\d+):\d+: error: (.*)", line)
        if m and int(m.group(1)) in where:
            fname, k = where[int(m.group(1))]
            msg = f"does not build against the public API: {m.group(2)}"
            out = [c for c in cases if c[2] == fname and k in c[5]]
            if out:
                return [(c, msg) for c in out]
        m = re.search(r"in function `([A-Za-z_]\w*)'|in function ‘([A-Za-z_]\w*)’", line)
        if m:
            fn = m.group(1) or m.group(2)
            nxt = re.search(r"undefined reference to [`‘]([^'’]*)", stderr[stderr.index(line):])
            sym = nxt.group(1) if nxt else "?"
            hit = [c for c in cases if any(fn in defined_names(sources[c[2]].chunks[k]) for k in c[5])]
            if hit:
                return [(c, f"does not link: undefined reference to {sym}") for c in hit]
    return out


if __name__ == "__main__":
    main()
