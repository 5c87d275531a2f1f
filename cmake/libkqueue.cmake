# SPDX-License-Identifier: MIT
# libkqueue: kqueue(2) and kevent(2) in a library over epoll, so that the kqueue backend builds
# and runs its tests on Linux (docs/backends.md has what differs from a BSD kernel). A test
# dependency, never copied into this repository. Its source is, in this order:
#   -DIOMUX_LIBKQUEUE=<path>, or the environment variable IOMUX_LIBKQUEUE: a source tarball, a
#       source tree, or an install prefix (with include/kqueue/sys/event.h);
#   ../shared/vendor/libkqueue-*.tar.gz beside the repository's root (the workplace's copy).
# A source is built in the build tree, at build time (about 20 s), without this build's
# sanitizers. Sets IOMUX_LIBKQUEUE_LIBRARY, IOMUX_LIBKQUEUE_INCLUDE and IOMUX_LIBKQUEUE_DEPENDS
# (a target to build first, or empty), or IOMUX_KQUEUE_MISSING: why there is no libkqueue.
set(IOMUX_LIBKQUEUE "$ENV{IOMUX_LIBKQUEUE}" CACHE PATH
  "libkqueue for the kqueue backend on Linux: a source tarball, a source tree or an install prefix")
set(IOMUX_KQUEUE_MISSING "")
set(IOMUX_LIBKQUEUE_DEPENDS "")

set(kq_from "${IOMUX_LIBKQUEUE}")
if(NOT kq_from)
  file(GLOB kq_from "${PROJECT_SOURCE_DIR}/../shared/vendor/libkqueue-*.tar.gz")
  if(kq_from)
    list(SORT kq_from)
    list(GET kq_from -1 kq_from) # the last name, if several
  endif()
endif()

if(NOT kq_from)
  string(CONCAT IOMUX_KQUEUE_MISSING "no libkqueue: none at ../shared/vendor/libkqueue-*.tar.gz "
    "beside the repository, and no -DIOMUX_LIBKQUEUE=<tarball, source tree or install prefix> "
    "(or IOMUX_LIBKQUEUE in the environment)")
elseif(NOT EXISTS "${kq_from}")
  set(IOMUX_KQUEUE_MISSING "IOMUX_LIBKQUEUE names ${kq_from}, which does not exist")
elseif(IS_DIRECTORY "${kq_from}" AND EXISTS "${kq_from}/include/kqueue/sys/event.h")
  # An install prefix.
  find_library(IOMUX_LIBKQUEUE_LIBRARY NAMES libkqueue.a kqueue
    PATHS "${kq_from}/lib" "${kq_from}/lib64" "${kq_from}/lib/${CMAKE_LIBRARY_ARCHITECTURE}"
    NO_DEFAULT_PATH)
  set(IOMUX_LIBKQUEUE_INCLUDE "${kq_from}/include/kqueue")
  if(NOT IOMUX_LIBKQUEUE_LIBRARY)
    set(IOMUX_KQUEUE_MISSING "no libkqueue library under ${kq_from}/lib")
  endif()
else()
  # A source tarball or tree: built here, static, position-independent (the shared iomux
  # carries it), with this build's compiler.
  include(ExternalProject)
  set(kq_bin "${CMAKE_BINARY_DIR}/libkqueue")
  if(IS_DIRECTORY "${kq_from}")
    set(kq_source SOURCE_DIR "${kq_from}")
  else()
    set(kq_source URL "${kq_from}" DOWNLOAD_EXTRACT_TIMESTAMP ON
      SOURCE_DIR "${kq_bin}/src")
  endif()
  ExternalProject_Add(iomux_libkqueue ${kq_source}
    BINARY_DIR "${kq_bin}/build"
    CMAKE_ARGS -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=${CMAKE_C_COMPILER}
               -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DENABLE_SHARED=OFF -DENABLE_TESTING=OFF
    INSTALL_COMMAND ""
    BUILD_BYPRODUCTS "${kq_bin}/build/libkqueue.a"
    LOG_CONFIGURE ON LOG_BUILD ON LOG_OUTPUT_ON_FAILURE ON)
  set(IOMUX_LIBKQUEUE_LIBRARY "${kq_bin}/build/libkqueue.a")
  set(IOMUX_LIBKQUEUE_INCLUDE "${kq_bin}/build/include")
  set(IOMUX_LIBKQUEUE_DEPENDS iomux_libkqueue)
  file(MAKE_DIRECTORY "${IOMUX_LIBKQUEUE_INCLUDE}") # for the include path before the build
endif()

if(IOMUX_KQUEUE_MISSING)
  message(STATUS "iomux: kqueue backend skipped: ${IOMUX_KQUEUE_MISSING}")
else()
  message(STATUS "iomux: kqueue backend against libkqueue from ${kq_from}")
endif()
