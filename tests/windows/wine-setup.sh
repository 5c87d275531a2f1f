#!/bin/sh
# SPDX-License-Identifier: MIT
# Makes the Wine prefix ($WINEPREFIX) the Windows tests run in, and starts its server for the
# run (it ends itself 60 s after the last program). Usage: wine-setup.sh WINE64
wine=${1:?the wine64 program}
[ -x "$wine" ] || { echo "wine-setup: $wine: not found (scripts/install-deps windows)"; exit 1; }
server=$(dirname "$wine")/wineserver
"$wine" wineboot --init >/dev/null 2>&1 || { echo "wine-setup: wineboot failed"; exit 1; }
[ -x "$server" ] && "$server" -p60
echo "Wine prefix ready in $WINEPREFIX"
