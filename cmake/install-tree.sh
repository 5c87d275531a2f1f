#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `make install` and `make uninstall`.
#   install-tree.sh install BUILD_DIR PREFIX    cmake --install BUILD_DIR --prefix PREFIX
#   install-tree.sh uninstall BUILD_DIR         removes what the last installs put there
# Both honour DESTDIR from the environment.
#
# The install keeps a record, BUILD_DIR/install_record.txt: the files of CMake's
# install_manifest.txt, and the directories that the install created (found by a trial install
# into a scratch DESTDIR first), so that an uninstall removes exactly those and leaves
# directories that were there before, empty or not. Paths are recorded without DESTDIR; a second
# install into the same DESTDIR adds to the record, one into another DESTDIR replaces it.
set -euo pipefail

usage() { echo "usage: $0 install BUILD_DIR PREFIX | uninstall BUILD_DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1 build=$2
dest=${DESTDIR:-}
dest=${dest%/}
record="$build/install_record.txt"

# The paths of install_manifest.txt, one a line (its last line has no newline).
manifest() { sed -e '$a\' "$build/install_manifest.txt"; }

case "$cmd" in
install)
    [ $# -eq 3 ] || usage
    prefix=$3
    [ -f "$build/cmake_install.cmake" ] || { echo "$0: $build is not a configured build" >&2; exit 1; }
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    # Which directories will this install create? Install into a scratch DESTDIR, then look.
    DESTDIR="$tmp/trial" cmake --install "$build" --prefix "$prefix" >/dev/null
    manifest | while IFS= read -r f; do
        d=$(dirname "$f")
        while [ "$d" != / ] && [ "$d" != . ] && [ ! -d "$dest$d" ]; do
            echo "$d"
            d=$(dirname "$d")
        done
    done | sort -u >"$tmp/dirs"

    DESTDIR="$dest" cmake --install "$build" --prefix "$prefix"

    old_files=/dev/null old_dirs=/dev/null
    if [ -f "$record" ]; then
        if [ "$(sed -n 's/^# DESTDIR=//p' "$record")" = "$dest" ]; then
            sed -n 's/^f //p' "$record" >"$tmp/old-files"
            sed -n 's/^d //p' "$record" >"$tmp/old-dirs"
            old_files="$tmp/old-files" old_dirs="$tmp/old-dirs"
        else
            echo "-- Note: the record of an earlier install into another DESTDIR is replaced"
        fi
    fi
    {
        echo "# What make install installed; make uninstall removes it (cmake/install-tree.sh)."
        echo "# DESTDIR=$dest"
        { manifest; cat "$old_files"; } | sort -u | sed 's/^/f /'
        # Deepest first: a directory is removed after what is in it.
        sort -u "$tmp/dirs" "$old_dirs" | sort -r | sed 's/^/d /'
    } >"$record.tmp"
    mv "$record.tmp" "$record"

    # Can the dynamic linker find the library now? (ldconfig's cache covers system prefixes.)
    if [ -z "$dest" ] && command -v ldconfig >/dev/null; then
        # The SONAME is the name of the versioned symlink: libiomux.so.0.1 -> libiomux.so.0.1.0
        soname=
        while IFS= read -r f; do
            case "$f" in */libiomux.so.*) [ -L "$f" ] && soname=${f##*/} ;; esac
        done < <(manifest)
        if [ -n "$soname" ] && ! ldconfig -p 2>/dev/null | grep -qF "$soname "; then
            echo "-- Note: the dynamic linker does not know $soname yet: run ldconfig (as root) if"
            echo "   $prefix is a system prefix, else use an rpath or LD_LIBRARY_PATH (README.md)"
        fi
    fi
    ;;
uninstall)
    [ $# -eq 2 ] || usage
    if [ ! -f "$record" ]; then
        echo "$0: no record of an install from $build (make install writes $record)" >&2
        exit 1
    fi
    installed_into=$(sed -n 's/^# DESTDIR=//p' "$record")
    if [ "$installed_into" != "$dest" ]; then
        echo "-- Note: installed with DESTDIR='$installed_into', removing with DESTDIR='$dest'"
    fi
    sed -n 's/^f //p' "$record" | while IFS= read -r f; do
        if [ -e "$dest$f" ] || [ -L "$dest$f" ]; then
            echo "-- Removing: $dest$f"
            rm -f "$dest$f"
        else
            echo "-- Not there: $dest$f"
        fi
    done
    sed -n 's/^d //p' "$record" | while IFS= read -r d; do
        [ -d "$dest$d" ] || continue
        if rmdir "$dest$d" 2>/dev/null; then
            echo "-- Removing: $dest$d/"
        else
            echo "-- Keeping: $dest$d/ (not empty: something else was put there)"
        fi
    done
    rm -f "$record"
    ;;
*) usage ;;
esac
