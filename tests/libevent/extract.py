#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Takes libevent's own regression cases that use only libevent's public API out of its
source tree, for tests/libevent/run-regress: those of test/regress.c and regress_et.c (the
event core), regress_util.c (evutil), regress_buffer.c (evbuffers), regress_bufferevent.c
and regress_listener.c.

The source files are run through the C preprocessor against the headers given with -I
(iomux's event2/ emulation, or libevent's own for the control run) and against small
stand-ins for the libevent-internal headers they include (tests/libevent/shim). The
preprocessed file is cut into its top-level definitions; for every case of the chosen
groups' tables (main_testcases, signal_testcases, edgetriggered_testcases) the test function
and everything it needs from the same file (helpers, callbacks, globals, types) is kept.
A case is left out, with the reason recorded, when what it needs names a libevent-internal
interface (INTERNAL below), or when it does not compile or link against the public headers
(the compiler's or linker's first message is the reason).

Writes OUT/cases_<file>.c per source file (the kept definitions and filtered tables),
OUT/groups.c (the groups' table for the runner's main), OUT/manifest.tsv
("run<TAB>group/name" or "left-out<TAB>group/name<TAB>reason" per case) and prints a summary.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

GROUPS = [("main", "regress.c", "main_testcases"), ("signal", "regress.c", "signal_testcases"),
          ("et", "regress_et.c", "edgetriggered_testcases"),
          ("util", "regress_util.c", "util_testcases"),
          ("evbuffer", "regress_buffer.c", "evbuffer_testcases"),
          ("bufferevent", "regress_bufferevent.c", "bufferevent_testcases"),
          ("listener", "regress_listener.c", "listener_testcases")]

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

# Helpers of the test files that look inside libevent's structures, replaced by the runner's
# own (regress_runner.c), which check what the public API shows of the same thing.
STAND_INS = {
    "evbuffer_validate_": "regress_buffer.c's check of an evbuffer's chains",
}

# Cases that check libevent's internal representation, or a limit iomux does not have.
GLASS_BOX = {
    "main/common_timeout": "glass-box: checks libevent's encoding of common timeouts "
                           "(magic bits in tv_usec, a timeout queue per duration)",
    "signal/signal_switchbase": "checks libevent's limit that only the base that added a "
                                "signal event last hears the signal; iomux delivers it to "
                                "every base watching it (docs/libevent.md)",
}
# evbuffer_reserve_space over two chunks (the end of the last and a new one) is libevent's;
# libiomux-event reserves one extent, in one chunk (docs/libevent.md).
for _case in ("reserve2", "reserve_many", "reserve_many2", "reserve_many3", "reserve_with_empty"):
    GLASS_BOX[f"evbuffer/{_case}"] = ("needs a reservation spread over two chunks; "
                                      "libiomux-event reserves one extent (docs/libevent.md)")

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
        """The chunks the roots need, without those the runner's stand-ins replace."""
        stand_in = {k for name in STAND_INS for k in self.defs.get(name, [])}
        seen, todo = set(), [k for r in roots for k in self.defs.get(r, [])]
        while todo:
            k = todo.pop()
            if k in seen or k in stand_in:
                continue
            seen.add(k)
            for name in used_names(self.chunks[k]):
                todo += [j for j in self.defs.get(name, []) if j not in seen]
        return seen


def case_of(entry):
    fields = [f.strip() for f in entry.strip("{} \n").split(",")]
    name = "".join(re.findall(r'"((?:\\.|[^"\\])*)"', fields[0]))  # "a" "b" is "ab"
    roots = {fields[1]}
    m = re.fullmatch(r"&\s*([A-Za-z_]\w*)", fields[3]) if len(fields) > 3 else None
    if m:
        roots.add(m.group(1))  # a setup of the file's own (regress_buffer.c's nil_setup)
    if len(fields) > 4 and IDENT.fullmatch(fields[4] or ""):
        roots.add(fields[4])  # a legacy case's test function rides in setup_data
    return name, roots


def top_fields(entry):
    """The fields of a table entry, split at its own commas only."""
    body, out, depth, start = entry.strip()[1:-1], [], 0, 0
    for i, c in enumerate(body):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(body[start:i])
            start = i + 1
    out.append(body[start:])
    return out


def retriable(src, ks, entry):
    """A case that measures elapsed time (timeval_msec_diff: libevent's test_timeval_diff_*
    checks) is retried, as libevent marks some such cases itself (TT_RETRIABLE: up to three
    runs): on a machine busy with other work a timer is late now and then. A case that is
    wrong is wrong three times."""
    if not any("timeval_msec_diff" in used_names(src.chunks[k]) for k in ks):
        return entry
    f = top_fields(entry)
    f[2] = f"({f[2].strip()})|TT_RETRIABLE"
    return "{" + ",".join(f) + "}"


def internal_reason(src, ks):
    for k in sorted(ks):
        used = used_names(src.chunks[k])
        for key, why in INTERNAL.items():
            if key in used or (key.endswith("_") and any(u.startswith(key) for u in used)):
                return why
    return None


def emit(out, headers, sources, plan):
    """plan: {file: (kept chunk indices, {table: [entries]})}. Writes one C file per source
    file, so that the static helpers of two files may share a name. Returns the C files and
    {(C file, line): (source file, chunk index)}."""
    cfiles, where = [], {}
    for fname, (keep, tables) in plan.items():
        path = os.path.join(out, "cases_" + fname)
        lines = list(headers)
        src = sources[fname]
        for k in sorted(keep):
            c = src.chunks[k]
            if any(t in defined_names(c) for t in tables):
                continue
            for _ in c.splitlines():
                where[(path, len(lines) + 1)] = (fname, k)
                lines.append(_)
            lines.append("")
        for table, entries in tables.items():
            lines.append(f"struct testcase_t {table}[] = {{")
            lines += [f"    {e}," for e in entries]
            lines.append("    { ((void*)0), ((void*)0), 0, ((void*)0), ((void*)0) } };")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        cfiles.append(path)
    return cfiles, where


def emit_groups(path):
    """The table of groups for tinytest_main (regress_runner.c)."""
    lines = ['#include <stddef.h>', '#include "tinytest.h"', ""]
    lines += [f"extern struct testcase_t {table}[];" for _, _, table in GROUPS]
    lines += ["", "struct testgroup_t regress_groups[] = {"]
    lines += [f'    {{"{group}/", {table}}},' for group, _, table in GROUPS]
    lines += ["    END_OF_GROUPS,", "};"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


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
    files = sorted({fname for _, fname, _ in GROUPS})
    for f in files + ["regress.h", "tinytest.c", "tinytest.h", "tinytest_macros.h",
                      "tinytest_local.h"]:
        shutil.copy(os.path.join(a.src, "test", f), work)
    # "../util-internal.h" and the like from test/ must find the stand-ins, not libevent's own.
    for f in os.listdir(a.shim):
        if f.endswith(".h"):
            shutil.copy(os.path.join(a.shim, f), out)
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
            cases.append([group, name, fname, table, retriable(src, ks, entry), ks])

    headers = ['#include "util-internal.h"', '#include "shim_includes.h"', '#include "regress.h"']
    exe = os.path.join(out, "regress")
    groups_c = os.path.join(out, "groups.c")
    emit_groups(groups_c)
    for attempt in range(100):
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
        cfiles, where = emit(out, headers, sources, plan)
        cmd = (f"{a.cc} -std=gnu11 -D_GNU_SOURCE -DTINYTEST_LOCAL {a.cflags} "
               f"-Werror=implicit-function-declaration -Wno-deprecated-declarations "
               f"-I {work} " + " ".join(f"-I {i}" for i in incs) +
               f" {' '.join(cfiles)} {groups_c} {os.path.join(work, 'tinytest.c')} {a.runner}"
               f" -o {exe} {a.link}")
        r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
        if r.returncode == 0:
            break
        blamed = blame(r.stderr, where, sources, cases)
        if not blamed:
            sys.exit(f"extract: the build failed and no case could be blamed:\n{cmd}\n{r.stderr}")
        for c, msg in blamed:
            manifest[f"{c[0]}/{c[1]}"] = msg
            cases.remove(c)
    else:
        sys.exit("extract: gave up after 100 builds")

    for c in cases:
        manifest[f"{c[0]}/{c[1]}"] = None
    with open(os.path.join(out, "manifest.tsv"), "w") as f:
        for group, fname, table in GROUPS:
            for entry in table_entries(sources[fname].chunks[sources[fname].defs[table][0]]):
                full = f"{group}/{case_of(entry)[0]}"
                why = manifest.get(full)
                f.write(f"run\t{full}\n" if why is None else f"left-out\t{full}\t{why}\n")
    left_out = sum(1 for v in manifest.values() if v)
    print(f"extract: {len(cases)} cases kept after {attempt + 1} builds; {left_out} left out; "
          f"binary {exe}")


def blame(stderr, where, sources, cases):
    """Which cases the errors belong to, each with its first error as the reason: every case
    one build can blame, so that a file of many left-out cases needs few builds."""
    out, seen = [], set()
    lines = stderr.splitlines()
    for i, line in enumerate(lines):
        hit, msg = [], None
        m = re.match(r"(.*):(\d+):\d+: error: (.*)", line)
        if m and (m.group(1), int(m.group(2))) in where:
            fname, k = where[(m.group(1), int(m.group(2)))]
            msg = f"does not build against the public API: {m.group(3)}"
            hit = [c for c in cases if c[2] == fname and k in c[5]]
            # The compiler names an undeclared function or identifier once per file: every
            # case of that file that uses it is blamed with this message.
            u = re.search(r"(?:implicit declaration of function|^) ?[‘']([A-Za-z_]\w*)[’']"
                          r"(?: undeclared)?", m.group(3))
            if u and ("implicit declaration" in m.group(3) or "undeclared" in m.group(3)):
                hit += [c for c in cases if c[2] == fname and c not in hit and
                        any(u.group(1) in used_names(sources[fname].chunks[j]) for j in c[5])]
        m = re.search(r"in function `([A-Za-z_]\w*)'|in function ‘([A-Za-z_]\w*)’", line)
        if m and not hit:
            fn = m.group(1) or m.group(2)
            nxt = re.search(r"undefined reference to [`‘]([^'’]*)", "\n".join(lines[i:]))
            msg = f"does not link: undefined reference to {nxt.group(1) if nxt else '?'}"
            hit = [c for c in cases
                   if any(fn in defined_names(sources[c[2]].chunks[k]) for k in c[5])]
        for c in hit:
            if id(c) not in seen:
                seen.add(id(c))
                out.append((c, msg))
    return out


if __name__ == "__main__":
    main()
