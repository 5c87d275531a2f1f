#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The drop-in install (IOMUX_EVENT_AS_LIBEVENT, the libevent_dropin component): installs the
# build into a private prefix with the component, then builds libevent programs as their own
# build systems do, unchanged: `pkg-config --cflags --libs libevent_core` (tmux's configure),
# `pkg-config libevent` and a bare `-levent` (memcached's configure), and
# `pkg-config iomux-event` with --as-needed; each must start without LD_LIBRARY_PATH and run
# on libiomux-event, not on a system libevent.
# Usage: dropin-test.sh BUILD_DIR SOURCE_DIR [SANITIZE]
set -euo pipefail
build=$1 src=$2 sanitize=${3:-}
san=()
[ -n "$sanitize" ] && san=(-fsanitize="$sanitize")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
cmake --install "$build" --prefix "$prefix" --component libevent_dropin >/dev/null
pcdir=$(dirname "$(find "$prefix" -name libevent_core.pc | head -n1)")
libdir=$(dirname "$pcdir")
for f in libevent.pc libevent_core.pc libevent_pthreads.pc; do test -f "$pcdir/$f"; done
for f in libevent.so libevent_core.so libevent_pthreads.so libevent.a libevent_core.a; do
  test -e "$libdir/$f" || { echo "dropin: $libdir/$f is missing" >&2; exit 1; }
done
# This prefix's .pc files first, as a user of a private prefix sets it: a system libevent-dev's
# must not answer (check() looks at what the programs need).
export PKG_CONFIG_PATH="$pcdir"
unset LD_LIBRARY_PATH
prog="$src/cmake/consumer/event_main.c"
check() { # NAME: it starts, runs on iomux, and needs libiomux-event, no libevent
  local exe="$tmp/$1"
  if readelf -d "$exe" | grep -q 'NEEDED.*libevent'; then
    echo "dropin: $1 needs a libevent library: $(readelf -d "$exe" | grep NEEDED)" >&2; exit 1
  fi
  readelf -d "$exe" | grep -q 'NEEDED.*libiomux-event' ||
    { echo "dropin: $1 does not need libiomux-event" >&2; exit 1; }
  "$exe" | grep -q '^libevent 2\.1\.12-stable API on iomux' ||
    { echo "dropin: $1 did not run on libiomux-event" >&2; exit 1; }
  echo "dropin: $1 runs ($(ldd "$exe" | grep -c "$prefix") libraries from the prefix)"
}
test "$(pkg-config --modversion libevent_core)" = 2.1.12-stable
pkg-config --libs libevent_core | grep -q -- "-L$libdir " ||
  { echo "dropin: pkg-config libevent_core answers $(pkg-config --libs libevent_core)" >&2; exit 1; }
cc "${san[@]}" -Wl,--as-needed -o "$tmp/core" "$prog" \
   $(pkg-config --cflags --libs libevent_core)
check core
cc "${san[@]}" -Wl,--as-needed -o "$tmp/event" "$prog" $(pkg-config --cflags --libs libevent)
check event
# memcached's configure: its own -I and -L for --with-libevent=DIR (DIR/include, DIR/lib),
# then -levent, and a run path to DIR as its configure adds it. The headers it compiled with
# must be the prefix's: a system libevent-dev's <event.h> would give it another struct event.
for f in event.h evutil.h event2/event.h event2/event_struct.h event2/event-config.h; do
  test -f "$prefix/include/$f" || { echo "dropin: $prefix/include/$f is missing" >&2; exit 1; }
done
cc "${san[@]}" -MD -MF "$tmp/bare.d" -o "$tmp/bare" "$prog" -I"$prefix/include" -L"$libdir" \
   -Wl,-rpath,"$libdir" -levent
if grep -q '/usr/include/event' "$tmp/bare.d"; then
  echo "dropin: a system libevent header went into the program:" \
       "$(grep -o '/usr/include/event[^ ]*' "$tmp/bare.d" | sort -u)" >&2; exit 1
fi
check bare
# iomux-event.pc with a run path to the prefix: libiomux-event.so finds libiomux.so by its
# own run path ($ORIGIN), though --as-needed dropped the program's -liomux.
cc "${san[@]}" -Wl,--as-needed -o "$tmp/own" "$prog" $(pkg-config --cflags --libs iomux-event) \
   -Wl,-rpath,"$libdir"
check own
