#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs echo-server on a free loopback port with the backend in IOMUX_BACKEND, echoes a few
# messages through it with bash's /dev/tcp, then stops it with SIGTERM and expects exit 0.
set -euo pipefail
server=$1
"$server" --help | grep -q -- '--port' || { echo "no --help"; exit 1; }
# A misspelt backend: the error names the variable and lists this build's backends.
if err=$(IOMUX_BACKEND=EPOLL "$server" --port 0 2>&1); then echo "EPOLL was accepted"; exit 1; fi
grep -q "IOMUX_BACKEND=EPOLL; this build has: .*poll" <<<"$err" || { echo "unhelpful: $err"; exit 1; }
out=$(mktemp)
trap 'kill "$pid" 2>/dev/null || true; rm -f "$out"' EXIT
"$server" --port 0 >"$out" &
pid=$!
for _ in $(seq 100); do grep -q listening "$out" && break; sleep 0.05; done
port=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$out")
[ -n "$port" ] || { echo "server did not start"; cat "$out"; exit 1; }
grep -q "backend ${IOMUX_BACKEND:-}" "$out" || { echo "wrong backend"; cat "$out"; exit 1; }
for msg in hello "second message" "$(head -c 3000 /dev/zero | tr '\0' x)"; do
    exec 3<>"/dev/tcp/127.0.0.1/$port"
    printf '%s' "$msg" >&3
    IFS= read -r -N "${#msg}" -t 5 -u 3 reply
    exec 3>&-
    [ "$reply" = "$msg" ] || { echo "echo mismatch: got ${#reply} bytes"; exit 1; }
done
kill -TERM "$pid"
wait "$pid"
echo "echo-server: 3 echoes verified, clean exit on SIGTERM"
