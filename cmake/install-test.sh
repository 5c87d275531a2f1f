#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the build into a scratch DESTDIR and builds a program against it twice: with
# pkg-config and with CMake's find_package; checks the installed programs; and runs the
# README's first program as the README writes it against an install to a real prefix.
# Usage: install-test.sh BUILD_DIR SOURCE_DIR [SANITIZE]; a sanitized build's libraries need
# the consumers built with the same sanitizers (SANITIZE, as -fsanitize= takes it).
set -euo pipefail
build=$1 src=$2 sanitize=${3:-}
san=()
[ -n "$sanitize" ] && san=(-fsanitize="$sanitize")
cc() { command cc "${san[@]}" "$@"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
DESTDIR="$tmp/dest" cmake --install "$build" --prefix /opt/iomux >/dev/null
root="$tmp/dest/opt/iomux"
pcdir=$(dirname "$(find "$root" -name iomux.pc | head -n1)")
libdir=$(dirname "$pcdir")
test -f "$root/include/iomux.h"
test -f "$root/include/iomux/http.h"
test -f "$root/include/iomux/event2/event.h"
# The programs, linked with the static library: they run from the staged tree as they are.
"$root/bin/iomux-httpd" --version | grep -q '^iomux-httpd (iomux [0-9]*\.[0-9]*\.[0-9]*)$'
"$root/bin/echo-server" --help | grep -q '^usage: echo-server'
# The .pc file names the install prefix, not the staging directory.
grep -qx 'prefix=/opt/iomux' "$pcdir/iomux.pc"

# pkg-config, as on the machine the staged tree is for: the sysroot maps /opt/iomux to it.
export PKG_CONFIG_PATH="$pcdir" PKG_CONFIG_SYSROOT_DIR="$tmp/dest"
# shared library
cc -o "$tmp/pc" "$src/cmake/consumer/main.c" $(pkg-config --cflags --libs iomux)
LD_LIBRARY_PATH="$libdir" "$tmp/pc"
# static library, the README's way: the archive by name, its dependencies from --static
cc -o "$tmp/pc-static" "$src/cmake/consumer/main.c" \
   $(pkg-config --static --cflags --libs iomux | sed 's/-liomux\b/-l:libiomux.a/')
if readelf -d "$tmp/pc-static" | grep -q 'NEEDED.*libiomux'; then
    echo "install test: the static consumer needs libiomux.so" >&2
    exit 1
fi
"$tmp/pc-static"
# libiomux-event: a libevent program through iomux-event.pc, shared and static
cc -o "$tmp/ev" "$src/cmake/consumer/event_main.c" $(pkg-config --cflags --libs iomux-event)
LD_LIBRARY_PATH="$libdir" "$tmp/ev"
cc -o "$tmp/ev-static" "$src/cmake/consumer/event_main.c" \
   $(pkg-config --static --cflags --libs iomux-event |
     sed 's/-liomux-event\b/-l:libiomux-event.a/; s/-liomux\b/-l:libiomux.a/')
if readelf -d "$tmp/ev-static" | grep -q 'NEEDED.*lib\(iomux\|event\)'; then
    echo "install test: the static libevent consumer needs a shared library" >&2
    exit 1
fi
"$tmp/ev-static"
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR

# CMake package
cmake -S "$src/cmake/consumer" -B "$tmp/cm" -G Ninja -DCMAKE_PREFIX_PATH="$root" \
    -DCMAKE_C_FLAGS="${san[*]}" >/dev/null
cmake --build "$tmp/cm" >/dev/null
LD_LIBRARY_PATH="$libdir" "$tmp/cm/consumer_shared"
"$tmp/cm/consumer_static"
LD_LIBRARY_PATH="$libdir" "$tmp/cm/event_consumer_shared"
"$tmp/cm/event_consumer_static"

# The README's first program, its lines as written, against an install to a real prefix: the
# run path it records finds the library with no LD_LIBRARY_PATH.
prefix="$tmp/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name iomux.pc | head -n1)")
export PKG_CONFIG_PATH
lines=$(awk '/^cc -std=c11 -o hello examples\/hello.c/ {p = 1} p {print} p && /^printf/ {exit}' \
    "$src/README.md")
case "$lines" in *printf*) ;; *) echo "install test: no hello lines in README.md" >&2; exit 1;; esac
mkdir -p "$tmp/readme/examples"
cp "$src/examples/hello.c" "$tmp/readme/examples/"
out=$(cd "$tmp/readme" && eval "$lines")
case "$out" in
*"read 13 bytes: hello, iomux"*"quiet for 100 ms, stopping"*) ;;
*) echo "install test: the README's hello printed '$out'" >&2; exit 1;;
esac
echo "install test: pkg-config and find_package consumers built and ran; the README's hello ran"
