#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs one program under Wine, and once more when Wine itself broke down, which says nothing
# about the case; the retry is printed. Wine broke down when its client lost the connection to
# the Wine server ("wine client error"), or when the program failed without printing a word:
# the harness prints a line for every outcome (PASS, SKIP and its reason, or the failed
# check), so a silent failure is Wine not having run it (seen under load, about once in
# 2,000 cases, in 0.01 s). Usage: wine-run.sh WINE64 PROGRAM ARGS...
err=$(mktemp) || exit 1
out=$(mktemp) || { rm -f "$err"; exit 1; }
"$@" >"$out" 2>"$err"
rc=$?
cat "$out"
cat "$err" >&2
why=
if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then
    if grep -q "wine client error" "$err"; then
        why="Wine's own connection failed"
    elif [ ! -s "$out" ] && [ ! -s "$err" ]; then
        why="the program exited $rc without a word, which the harness never does"
    fi
fi
rm -f "$err" "$out"
if [ -n "$why" ]; then
    echo "wine-run: $why; running the case once more" >&2
    "$@"
    rc=$?
fi
exit "$rc"
