#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs greeter on a free loopback port with the backend in IOMUX_BACKEND. Three clients in
# turn read the greeting and then end of stream, and hang up; the server must close their
# streams (its descriptors come back to where they were). A fourth client stays connected
# while SIGTERM stops the server, which must close that stream too and exit 0.
# With IOMUX_TEST_WINE set to Wine's program, SERVER is greeter.exe, run under Wine and stopped
# with SIGINT (which Wine turns into Ctrl-C); its descriptors are not counted (Wine's are not
# the program's sockets).
set -euo pipefail
server=$1
greeting="hello from iomux"
out=$(mktemp)
trap 'kill "$pid" 2>/dev/null || true; rm -f "$out"' EXIT
stop=TERM
if [ -n "${IOMUX_TEST_WINE:-}" ]; then
    stop=INT
    "$IOMUX_TEST_WINE" "$server" 0 >"$out" &
else
    "$server" 0 >"$out" &
fi
pid=$!
for _ in $(seq 200); do grep -q listening "$out" && break; sleep 0.05; done
port=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$out" | tr -d '\r')
[ -n "$port" ] || { echo "server did not start"; cat "$out"; exit 1; }
grep -q "backend ${IOMUX_BACKEND:-}" "$out" || { echo "wrong backend"; cat "$out"; exit 1; }

# The server's open descriptors (Linux's /proc; elsewhere that check is left out).
fds() {
    if [ -d /proc/$$/fd ] && [ -z "${IOMUX_TEST_WINE:-}" ]; then ls "/proc/$pid/fd" | wc -l
    else echo 0; fi
}
before=$(fds)

# Reads the greeting from fd 3, then expects end of stream (read's status 1, not a timeout).
expect_greeting() {
    local line rest rc=0
    IFS= read -r -t 5 -u 3 line || { echo "no greeting line"; exit 1; }
    [ "$line" = "$greeting" ] || { echo "wrong greeting: '$line'"; exit 1; }
    IFS= read -r -t 5 -u 3 rest || rc=$?
    [ "$rc" -eq 1 ] && [ -z "$rest" ] ||
        { echo "expected end of stream after the greeting (status $rc, '$rest')"; exit 1; }
}

for _ in 1 2 3; do
    exec 3<>"/dev/tcp/127.0.0.1/$port"
    printf 'dropped\n' >&3 # what a client sends is read and dropped
    expect_greeting
    exec 3>&-
done
for _ in $(seq 100); do [ "$(fds)" -eq "$before" ] && break; sleep 0.05; done
[ "$(fds)" -eq "$before" ] ||
    { echo "streams not closed after the clients hung up: $(fds) fds, $before before"; exit 1; }

exec 3<>"/dev/tcp/127.0.0.1/$port"
expect_greeting
kill -"$stop" "$pid"
rc=0
wait "$pid" || rc=$? # a stream left open would keep it running: CTest's timeout ends that
exec 3>&-
[ "$rc" -eq 0 ] || { echo "exit status $rc after SIG$stop"; exit 1; }
echo "greeter: 4 greetings verified, streams closed when the clients hung up, clean exit on SIG$stop"
