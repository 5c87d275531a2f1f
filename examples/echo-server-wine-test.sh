#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The Windows echo-server under Wine, checked byte for byte by the echo study's load client
# (bench/echo/client.c) running natively on this machine: 4 sessions, 16 KB blocks, 1 s after
# a 0.2 s warm-up, plus a 64 KB block. The client fails on any wrong, short, crossed or missing
# byte. Twice: one loop, and --threads 2 (Windows has no SO_REUSEPORT: loop 0 accepts and hands
# the connections out through channels), where both loops must have served connections. Each
# run ends with SIGINT, which Wine turns into Ctrl-C: the server must exit 0.
# Usage: echo-server-wine-test.sh WINE64 ECHO-SERVER.EXE CLIENT.C WORKDIR
set -euo pipefail
wine=$1 server=$2 client_src=$3 dir=$4
cc=${CC_HOST:-cc}
command -v "$cc" >/dev/null || { echo "SKIP: no host C compiler to build the client"; exit 77; }
client=$dir/echo-client-host
"$cc" -O2 -D_GNU_SOURCE -pthread -o "$client" "$client_src" 2>"$dir/echo-client-build.log" ||
    { cat "$dir/echo-client-build.log"; exit 1; }
out=$(mktemp)
pid=
trap 'if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi; rm -f "$out" "$out.c"' EXIT
for threads in 1 2; do
    "$wine" "$server" --port 0 --threads "$threads" >"$out" 2>&1 &
    pid=$!
    for _ in $(seq 200); do grep -q listening "$out" && break; sleep 0.05; done
    port=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$out" | tr -d '\r')
    [ -n "$port" ] || { echo "server did not start"; cat "$out"; exit 1; }
    grep -q "backend ${IOMUX_BACKEND:-}" "$out" || { echo "wrong backend"; cat "$out"; exit 1; }
    for block in 16384 65536; do
        "$client" --port "$port" --sessions 4 --block "$block" --seconds 1 --warmup 0.2 |
            tee "$out.c"
        grep -q '^RESULT' "$out.c" || { echo "the client failed"; exit 1; }
    done
    kill -INT "$pid"
    rc=0
    wait "$pid" || rc=$?
    pid=
    [ "$rc" -eq 0 ] || { echo "exit status $rc after Ctrl-C"; cat "$out"; exit 1; }
    grep -q "SIGINT, closing $threads loop" "$out" || { echo "no word of the signal"; cat "$out"; exit 1; }
    for i in $(seq 0 $((threads - 1))); do
        n=$(sed -n "s/^echo-server: loop $i: \([0-9]*\) connections.*/\1/p" "$out" | tr -d '\r')
        [ -n "$n" ] && [ "$n" -gt 0 ] ||
            { echo "loop $i served no connection"; cat "$out"; exit 1; }
    done
    echo "--threads $threads: every byte echoed and checked, every loop served, exit 0 on Ctrl-C"
done
echo "echo-server under Wine (${IOMUX_BACKEND:-default}): every byte echoed and checked"
