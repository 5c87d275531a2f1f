#!/usr/bin/env bash
# Installs the build into a scratch DESTDIR and builds a program against it twice: with
# pkg-config and with CMake's find_package. Usage: install-test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
DESTDIR="$tmp/dest" cmake --install "$build" --prefix /opt/iomux >/dev/null
root="$tmp/dest/opt/iomux"
libdir=$(dirname "$(find "$root" -name iomux.pc | head -n1)")
test -f "$root/include/iomux.h"

# pkg-config, shared library
export PKG_CONFIG_PATH="$libdir"
cc -o "$tmp/pc" "$src/cmake/consumer/main.c" $(pkg-config --cflags --libs iomux)
LD_LIBRARY_PATH="$root/lib:$(dirname "$libdir")" "$tmp/pc"
# pkg-config, static library
cc -o "$tmp/pc-static" "$src/cmake/consumer/main.c" $(pkg-config --cflags iomux) \
   "$(dirname "$libdir")/libiomux.a" $(pkg-config --libs --static iomux | sed 's/-liomux//')
"$tmp/pc-static"

# CMake package
cmake -S "$src/cmake/consumer" -B "$tmp/cm" -G Ninja -DCMAKE_PREFIX_PATH="$root" >/dev/null
cmake --build "$tmp/cm" >/dev/null
LD_LIBRARY_PATH="$(dirname "$libdir")" "$tmp/cm/consumer_shared"
"$tmp/cm/consumer_static"
echo "install test: pkg-config and find_package consumers built and ran"
