#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CTest core.abi_matches_last_release: does this tree's shared library keep the ABI of the last
# release, or say by its SONAME that it does not?
#
#   abi-check.sh SOURCE_DIR [NEW_LIBRARY] [-DOPTION=VALUE...]
#
# The last release is the newest tag matching v* that HEAD descends from (else the highest v*
# tag). Its source (git archive) is built in a scratch directory with the options given, as a
# shared library with debug information, and compared with NEW_LIBRARY (this build's
# libiomux.so) by abidiff from libabigail (Debian: abigail-tools), which reads the types from
# the debug information and keeps to those of the public headers. Without NEW_LIBRARY (a
# sanitized build, or one without debug information) this source tree is built the same way
# as the release.
#
# Added functions are compatible. Any other change (a function removed, a public struct's
# size or layout changed, its private fields included) passes only if the SONAME changed too:
# while 0.x that is a new minor version (README.md, "Versions and the ABI").
# Exit: 0 compatible or SONAME changed, 1 incompatible or failed, 77 skipped (with a line
# "SKIP abi_matches_last_release: <why>" for scripts/skip-reasons).
set -euo pipefail

src=${1:?usage: $0 SOURCE_DIR [NEW_LIBRARY] [-DOPTION=VALUE...]}
shift
new_lib=
if [ $# -gt 0 ] && [ "${1#-D}" = "$1" ]; then new_lib=$1; shift; fi
options=("$@")

skip() { echo "SKIP abi_matches_last_release: $*"; exit 77; }
fail() { echo "abi_matches_last_release: $*" >&2; exit 1; }

command -v git >/dev/null || skip "git not installed"
top=$(git -C "$src" rev-parse --show-toplevel 2>/dev/null) || top=
# (A tree inside another project's checkout has that project's tags, not its own.)
[ -n "$top" ] && [ "$top" -ef "$src" ] || skip "$src is not a git checkout of its own"
tag=$(git -C "$src" describe --tags --abbrev=0 --match 'v*' HEAD 2>/dev/null) ||
    tag=$(git -C "$src" tag -l 'v*' --sort=-v:refname | head -n1)
[ -n "$tag" ] || skip "no release tagged yet (git tag v*)"
command -v abidiff >/dev/null ||
    skip "abidiff not installed (scripts/install-deps test installs abigail-tools)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# build DIR SOURCE LABEL: configures and builds the shared library only, prints its path.
build() {
    local dir=$tmp/$1-build tree=$2 label=$3
    if ! cmake -S "$tree" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
            -DIOMUX_TESTS=OFF -DIOMUX_BENCH=OFF -DIOMUX_SANITIZE= -DIOMUX_WERROR=OFF \
            "${options[@]}" >"$dir.log" 2>&1 ||
       ! cmake --build "$dir" --target iomux_shared >>"$dir.log" 2>&1; then
        tail -n 30 "$dir.log" >&2
        fail "could not build the shared library of $label"
    fi
    readlink -f "$dir/libiomux.so"
}

soname() { readelf -d "$1" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p'; }

echo "abi_matches_last_release: comparing with $tag ($(git -C "$src" rev-parse --short "$tag^{commit}"))"
mkdir "$tmp/release"
git -C "$src" archive --format=tar "$tag" | tar -x -C "$tmp/release"
old_lib=$(build release "$tmp/release" "$tag")
if [ -z "$new_lib" ]; then
    new_lib=$(build tree "$src" "this tree")
fi
new_lib=$(readlink -f "$new_lib")
[ -f "$new_lib" ] || fail "$new_lib: no such library"
old_so=$(soname "$old_lib") new_so=$(soname "$new_lib")

# Added functions are left out of the verdict (old programs do not call them), not out of the
# report below.
rc=0
abidiff --no-added-syms --headers-dir1 "$tmp/release/include" --headers-dir2 "$src/include" \
    "$old_lib" "$new_lib" >"$tmp/verdict.txt" 2>&1 || rc=$?
if [ $((rc & 3)) -ne 0 ]; then
    cat "$tmp/verdict.txt" >&2
    fail "abidiff failed (exit $rc)"
fi
abidiff --headers-dir1 "$tmp/release/include" --headers-dir2 "$src/include" \
    "$old_lib" "$new_lib" >"$tmp/report.txt" 2>&1 || true

if [ "$rc" -eq 0 ]; then
    if grep -q '^ *\[A\]' "$tmp/report.txt"; then
        cat "$tmp/report.txt"
        echo "abi_matches_last_release: only additions since $tag: compatible ($new_so)"
    else
        echo "abi_matches_last_release: the ABI of $tag, unchanged ($new_so)"
    fi
    exit 0
fi
cat "$tmp/report.txt"
if [ "$old_so" != "$new_so" ]; then
    echo "abi_matches_last_release: the ABI changed since $tag and the SONAME with it" \
         "($old_so -> $new_so)"
    exit 0
fi
fail "the ABI changed since $tag (above) but the SONAME is still $new_so: release it as a new" \
     "minor version while 0.x (a new major from 1.0), or undo the change"
