#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs one program under Wine, and once more when Wine itself broke down (its client lost the
# connection to the Wine server: "wine client error"), which says nothing about the case; the
# retry is printed. Usage: wine-run.sh WINE64 PROGRAM ARGS...
err=$(mktemp) || exit 1
"$@" 2>"$err"
rc=$?
if [ "$rc" != 0 ] && [ "$rc" != 77 ] && grep -q "wine client error" "$err"; then
    cat "$err" >&2
    echo "wine-run: Wine's own connection failed; running the case once more" >&2
    "$@"
    rc=$?
else
    cat "$err" >&2
fi
rm -f "$err"
exit "$rc"
