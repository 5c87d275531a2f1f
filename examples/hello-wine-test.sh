#!/bin/sh
# SPDX-License-Identifier: MIT
# hello under Wine: input from a pipe, which Windows cannot watch (only sockets can be: the
# watcher gets MUX_ERROR and hello says so), then the 100 ms idle timer ends the loop with
# status 0. Usage: hello-wine-test.sh WINE64 HELLO.EXE
out=$(printf 'hello, iomux\n' | "$1" "$2" 100 2>&1); rc=$?
printf '%s\n' "$out"
[ $rc = 0 ] || { echo "exit status $rc"; exit 1; }
printf '%s\n' "$out" | grep -q "backend: ${IOMUX_BACKEND:-}" || { echo "wrong backend"; exit 1; }
printf '%s\n' "$out" | grep -q "stdin cannot be watched" || { echo "no MUX_ERROR for stdin"; exit 1; }
printf '%s\n' "$out" | grep -q "quiet for 100 ms, stopping" || { echo "no idle stop"; exit 1; }
