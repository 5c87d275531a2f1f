#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the build into a scratch DESTDIR and builds a program against it twice: with
# pkg-config and with CMake's find_package. Usage: install-test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
DESTDIR="$tmp/dest" cmake --install "$build" --prefix /opt/iomux >/dev/null
root="$tmp/dest/opt/iomux"
pcdir=$(dirname "$(find "$root" -name iomux.pc | head -n1)")
libdir=$(dirname "$pcdir")
test -f "$root/include/iomux.h"
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
cmake -S "$src/cmake/consumer" -B "$tmp/cm" -G Ninja -DCMAKE_PREFIX_PATH="$root" >/dev/null
cmake --build "$tmp/cm" >/dev/null
LD_LIBRARY_PATH="$libdir" "$tmp/cm/consumer_shared"
"$tmp/cm/consumer_static"
LD_LIBRARY_PATH="$libdir" "$tmp/cm/event_consumer_shared"
"$tmp/cm/event_consumer_static"
echo "install test: pkg-config and find_package consumers built and ran"
