# SPDX-License-Identifier: MIT
# Thin wrapper around CMake so that the README's commands stay short.
#   make            release build of the library and examples in build/release; installs
#                   only what the library needs (scripts/install-deps lib)
#   make test       install deps, build with -Werror + ASan/UBSan, run every test; then the
#                   portable-POSIX build (every Linux-only path off), what a Mac builds, and
#                   the whole suite on its kqueue (through libkqueue, built from
#                   ../shared/vendor or IOMUX_LIBKQUEUE; skipped with the reason without it),
#                   poll and select; then the threaded tests under ThreadSanitizer
#   make test-portable  only the portable-POSIX run
#   make test-tsan  only the ThreadSanitizer run
#   make test-fault only the fault-injection sweeps and cases (tests/fault/README.md)
#   make test-windows  cross-build for Windows (mingw-w64) in build/windows and run the suite,
#                   hello and an echo run under Wine, on iocp and select (docs/windows.md)
#   make coverage   build with --coverage in build/coverage, run every test there, and print
#                   line and branch coverage per file of src/ (scripts/coverage, gcovr)
#   make bench      install deps, release build, run the quick benchmark suite (every
#                   study at low repetition, about ten minutes; indicative verdicts)
#   make bench-full the full matrix (the repetitions that settle the verdicts)
#   make bench-compare  BASE=<git ref> (default HEAD~1): builds BASE in a git worktree
#                   (build/baseline-src, built in build/baseline) and runs the suite once with
#                   its iomux drivers interleaved as <name>@base; the report gives new/base
#   make install    PREFIX=/usr/local DESTDIR=   the release build, installed
#   make uninstall  DESTDIR=   removes what make install installed (build/release/install_record.txt)
PREFIX ?= /usr/local
JOBS ?= $(shell nproc)
CMAKE_GEN := -G Ninja

.PHONY: all release test test-asan test-portable test-tsan test-fault test-windows coverage bench bench-full bench-compare \
        install uninstall clean deps deps-lib deps-bench deps-coverage

all: release

deps-lib:
	@scripts/install-deps lib

deps:
	@scripts/install-deps test

deps-bench:
	@scripts/install-deps bench

deps-coverage:
	@scripts/install-deps coverage

# No tests and no benchmarks: they need the peers (libev, libevent, libuv, Boost); the library
# and the examples need only liburing. `make bench` turns the benchmarks on in the same tree.
# kqueue against libkqueue (a test dependency) is for the benchmarks only, never in the release.
RELEASE_OPTS := -DCMAKE_BUILD_TYPE=Release -DIOMUX_TESTS=OFF

release: deps-lib
	cmake -S . -B build/release $(CMAKE_GEN) $(RELEASE_OPTS) -DIOMUX_BENCH=OFF -DIOMUX_KQUEUE=OFF \
	      -DCMAKE_INSTALL_PREFIX=$(PREFIX)
	cmake --build build/release -j $(JOBS)

test: test-asan test-portable test-tsan

test-asan: deps
	cmake -S . -B build/asan $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DIOMUX_WERROR=ON \
	      -DIOMUX_SANITIZE=address,undefined
	cmake --build build/asan -j $(JOBS)
	cd build/asan && { ctest --output-on-failure -j $(JOBS) --timeout 300; rc=$$?; \
	  ../../scripts/skip-reasons .; exit $$rc; }

# The path macOS and the BSDs take, on this machine: kqueue (libkqueue), poll and select, no
# accept4, SOCK_NONBLOCK, eventfd, timerfd or ppoll, POSIX declarations only.
test-portable: deps
	cmake -S . -B build/portable $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DIOMUX_WERROR=ON \
	      -DIOMUX_SANITIZE=address,undefined -DIOMUX_PORTABLE_POSIX=ON -DIOMUX_BENCH=OFF \
	      -DIOMUX_KQUEUE=ON
	cmake --build build/portable -j $(JOBS)
	cd build/portable && { ctest --output-on-failure -j $(JOBS) --timeout 300; rc=$$?; \
	  ../../scripts/skip-reasons .; exit $$rc; }

test-tsan: deps
	cmake -S . -B build/tsan $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DIOMUX_WERROR=ON \
	      -DIOMUX_SANITIZE=thread -DIOMUX_BENCH=OFF
	cmake --build build/tsan -j $(JOBS)
	cd build/tsan && { ctest --output-on-failure -j $(JOBS) --timeout 300 -L thread; rc=$$?; \
	  ../../scripts/skip-reasons .; exit $$rc; }

# Windows, cross-built with mingw-w64 and run under Wine (installed by scripts/install-deps
# windows): the behavioural suite on iocp and select, hello, and an echo-server run checked byte
# for byte. Wine is for correctness only: its timings mean nothing.
test-windows:
	@scripts/install-deps windows
	cmake -S . -B build/windows $(CMAKE_GEN) -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64-x86_64.cmake \
	      -DCMAKE_BUILD_TYPE=Debug -DIOMUX_WERROR=ON -DIOMUX_BENCH=OFF
	cmake --build build/windows -j $(JOBS)
	cd build/windows && { ctest --output-on-failure -j $(JOBS) --timeout 300; rc=$$?; \
	  ../../scripts/skip-reasons .; exit $$rc; }

# The fault label of the sanitized build: the sweep on every backend variant and the
# cases of test_fault.c; then the same on kqueue, in the portable build.
FAULT_CASES := '^fault\.|wake_fd|interrupted|fork_handler'
test-fault: deps
	cmake -S . -B build/asan $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DIOMUX_WERROR=ON \
	      -DIOMUX_SANITIZE=address,undefined
	cmake --build build/asan -j $(JOBS)
	cd build/asan && ctest --output-on-failure -j $(JOBS) --timeout 900 -R $(FAULT_CASES)
	cmake -S . -B build/portable $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DIOMUX_WERROR=ON \
	      -DIOMUX_SANITIZE=address,undefined -DIOMUX_PORTABLE_POSIX=ON -DIOMUX_BENCH=OFF \
	      -DIOMUX_KQUEUE=ON
	cmake --build build/portable -j $(JOBS)
	cd build/portable && ctest --output-on-failure -j $(JOBS) --timeout 900 -R $(FAULT_CASES)

coverage: deps-coverage
	scripts/coverage build/coverage

bench: deps-bench
	cmake -S . -B build/release $(CMAKE_GEN) $(RELEASE_OPTS) -DIOMUX_BENCH=ON -DIOMUX_KQUEUE=ON
	cmake --build build/release -j $(JOBS)
	bench/run --build build/release $(BENCH_ARGS)

bench-full:
	$(MAKE) bench BENCH_ARGS="--full $(BENCH_ARGS)"

# Is this tree slower than BASE? Both builds run in one interleaved run (bench/README.md,
# "Against an earlier commit"). The worktree is kept for the next comparison and moved to
# BASE then; `git worktree remove --force build/baseline-src` drops it.
BASE ?= HEAD~1
BASE_SRC := build/baseline-src
BASE_BUILD := build/baseline

bench-compare: deps-bench
	@rev=$$(git rev-parse --verify --quiet '$(BASE)^{commit}') || \
	  { echo "bench-compare: BASE=$(BASE) is not a commit" >&2; exit 1; }; \
	if [ -e $(BASE_SRC) ]; then \
	  top=$$(git -C $(BASE_SRC) rev-parse --show-toplevel 2>/dev/null); \
	  if [ -z "$$top" ] || [ "$$(cd "$$top" && pwd -P)" != "$$(cd $(BASE_SRC) && pwd -P)" ]; \
	  then echo "bench-compare: $(BASE_SRC) is not a git worktree: remove it" >&2; exit 1; fi; \
	  echo "git -C $(BASE_SRC) checkout --detach $$rev  # $(BASE)"; \
	  git -C $(BASE_SRC) checkout -q --detach $$rev || exit 1; \
	else \
	  echo "git worktree add --detach $(BASE_SRC) $$rev  # $(BASE)"; \
	  git worktree add -q --force --detach $(BASE_SRC) $$rev || exit 1; \
	fi
	cmake -S $(BASE_SRC) -B $(BASE_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BASE_BUILD) -j $(JOBS)
	cmake -S . -B build/release $(CMAKE_GEN) $(RELEASE_OPTS) -DIOMUX_BENCH=ON -DIOMUX_KQUEUE=ON
	cmake --build build/release -j $(JOBS)
	bench/run --build build/release --baseline $(BASE_BUILD) $(BENCH_ARGS)

install: release
	DESTDIR='$(DESTDIR)' cmake/install-tree.sh install build/release '$(PREFIX)'

uninstall:
	DESTDIR='$(DESTDIR)' cmake/install-tree.sh uninstall build/release

clean:
	rm -rf build
