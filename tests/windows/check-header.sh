#!/bin/sh
# SPDX-License-Identifier: MIT
# Compiles tests/windows/header_check.c with the mingw-w64 cross compiler, or skips (77)
# saying why. Usage: check-header.sh SOURCE_DIR
src=${1:?source dir}
cc=x86_64-w64-mingw32-gcc
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "SKIP public_header_compiles_for_windows: $cc not installed (scripts/install-deps test installs gcc-mingw-w64-x86-64)"
    exit 77
fi
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
"$cc" -std=c11 -Wall -Wextra -Werror -I"$src/include" -o "$out/check.exe" \
    "$src/tests/windows/header_check.c" -lws2_32 && echo "the public header compiles for Windows"
