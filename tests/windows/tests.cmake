# SPDX-License-Identifier: MIT
# The behavioural suite cross-built for Windows (included by tests/CMakeLists.txt when
# WIN32): one executable, one CTest per case per backend (iocp, select), each case run under
# Wine (the emulator the toolchain file found) in a Wine prefix of this build tree.
#
# The case files are the Linux suite's. Those whose subject Windows lacks are not compiled:
# each of their cases is registered all the same, from a generated file whose case skips
# (exit 77) with the reason below, so every case of the suite is reported. The others are
# compiled with tests/windows/posix.h force-included (sockets for socketpairs, read/write/
# close on them, skips for what has no counterpart) and tests/windows/include standing in for
# the POSIX headers.
set(win_skipped_files
  test_uring.c "Windows has no such thing: io_uring is Linux's"
  test_rtsig.c "Windows has no such thing: real-time signals are Linux's"
  test_event_fd.c
  "Windows has no such thing: a pipe a loop can watch (a bufferevent there is on a socket: test_event_bufferevent.c)")
set(win_ported_files test_core.c test_loop.c test_badinput.c test_io.c test_timer.c
  test_periodic.c test_hooks.c test_async.c test_ref.c test_cleanup.c test_stream.c test_stream_read.c
  test_stream_write.c test_stream_file.c test_stream_timeout.c test_bufpool.c
  test_stream_errors.c test_listener.c test_http_parser.c test_http_server.c test_http_static.c
  test_chan.c test_multiloop.c test_signal.c test_event.c test_event_util.c test_event_buffer.c
  test_event_base.c test_event_bufferevent.c test_event_listener.c test_event_alloc.c test_fs.c
  test_event_compat.c test_child.c test_process.c test_udp.c test_work.c test_resolve.c
  test_event_pair.c test_event_closed.c test_io_rdhup.c test_stream_poolwrite.c
  test_event_http.c
  windows/test_windows.c)

set(win_sources harness.c event_fixture.c ${win_ported_files})
set(win_all_files ${win_ported_files})

# Every test file of the suite is one of the two above (test_fault.c runs only in the fault
# variant of the Linux library): a new file cannot go unregistered on Windows unnoticed.
file(GLOB win_every_file RELATIVE ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/test_*.c)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR})
set(win_unlisted "")
foreach(f IN LISTS win_every_file)
  if(NOT f IN_LIST win_ported_files AND NOT f IN_LIST win_skipped_files AND
     NOT f STREQUAL "test_fault.c")
    list(APPEND win_unlisted ${f})
  endif()
endforeach()
if(win_unlisted)
  message(FATAL_ERROR "tests/windows/tests.cmake: ${win_unlisted} in neither win_ported_files "
    "nor win_skipped_files (port each, or list it as skipped with the reason)")
endif()
list(LENGTH win_skipped_files n)
math(EXPR last "${n} - 1")
foreach(i RANGE 0 ${last} 2)
  math(EXPR j "${i} + 1")
  list(GET win_skipped_files ${i} src)
  list(GET win_skipped_files ${j} reason)
  list(APPEND win_all_files ${src})
  set(path ${CMAKE_CURRENT_SOURCE_DIR}/${src})
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${path})
  file(STRINGS ${path} lines REGEX "^(CORE_|THREAD_)?TEST\\([A-Za-z0-9_]+\\)")
  set(code "/* Generated from tests/${src} for Windows: every case skips. */\n")
  string(APPEND code "#include \"harness.h\"\n")
  foreach(line IN LISTS lines)
    string(REGEX MATCH "^((CORE_|THREAD_)?TEST)\\(([A-Za-z0-9_]+)\\)" unused "${line}")
    string(APPEND code "${CMAKE_MATCH_1}(${CMAKE_MATCH_3})\n{\n    SKIP(\"${reason}\");\n}\n")
  endforeach()
  string(REPLACE ".c" "" stem ${src})
  set(out ${CMAKE_CURRENT_BINARY_DIR}/win_skip_${stem}.c)
  file(WRITE ${out}.tmp "${code}")
  configure_file(${out}.tmp ${out} COPYONLY)
  list(APPEND win_sources ${out})
endforeach()

add_executable(iomux-tests ${win_sources})
target_link_libraries(iomux-tests PRIVATE iomux_event_static iomux_static ws2_32 pthread)
target_include_directories(iomux-tests BEFORE PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/windows/include
  ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/src)
target_compile_options(iomux-tests PRIVATE -include ${CMAKE_CURRENT_SOURCE_DIR}/windows/posix.h
  -Wno-unused-function -Wno-unused-parameter -Wno-type-limits -Wno-maybe-uninitialized
  -Wno-overflow)
string(REPLACE ";" "," backends_csv "${IOMUX_BACKENDS}")
target_compile_definitions(iomux-tests PRIVATE IOMUX_TEST_BACKENDS="${backends_csv}")

# The cases that send files run once more on iocp with TransmitFile (iocp-transmitfile.<case>):
# the backend sends files with it on Windows' server editions only, and reads them itself
# elsewhere, Wine included (src/backend/iocp.c says why).
set(win_file_sources test_stream_file.c test_http_server.c test_http_static.c)

# Cases that keep Wine's one server busy for seconds (5,000 loopback TCP pairs; 20,000 files
# made and removed), which every other Wine process waits on: they run alone.
set(win_serial_cases io_ten_thousand_fds_only_written_ones_fire
  fs_event_ten_thousand_files_all_heard_or_an_overflow)
# Cases whose thousands of socket calls each go through the Wine server: 37 to 64 s at a load
# of 13 to 15, and once past the 120 s the others get; bounded at 600 s instead.
set(win_long_cases udp_20000_datagrams_echoed_with_a_window_of_32)

# Wine: its own prefix in the build tree, made (and its server started, kept for a minute
# after the last program) by the first test, which every other one waits for.
set(wine_env "WINEDEBUG=-all;WINEPREFIX=${CMAKE_BINARY_DIR}/wineprefix")
add_test(NAME core.wine_prefix
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/windows/wine-setup.sh ${IOMUX_WINE})
set_tests_properties(core.wine_prefix PROPERTIES ENVIRONMENT "${wine_env}"
  FIXTURES_SETUP wine TIMEOUT 300 LABELS "core;windows")

foreach(src IN LISTS win_all_files)
  set(path ${CMAKE_CURRENT_SOURCE_DIR}/${src})
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${path})
  file(STRINGS ${path} lines REGEX "^(CORE_|THREAD_)?TEST\\([A-Za-z0-9_]+\\)")
  foreach(line IN LISTS lines)
    string(REGEX MATCH "^((CORE_|THREAD_)?TEST)\\(([A-Za-z0-9_]+)\\)" unused "${line}")
    set(kind ${CMAKE_MATCH_1})
    set(name ${CMAKE_MATCH_3})
    set(variants ${IOMUX_BACKENDS})
    if(kind STREQUAL "CORE_TEST")
      set(variants core)
    elseif(src IN_LIST win_file_sources)
      list(APPEND variants iocp-transmitfile)
    endif()
    foreach(b IN LISTS variants)
      set(env "${wine_env}")
      if(b STREQUAL "iocp-transmitfile")
        list(APPEND env "IOMUX_BACKEND=iocp" "IOMUX_IOCP_FILES=transmitfile")
      elseif(NOT b STREQUAL "core")
        list(APPEND env "IOMUX_BACKEND=${b}")
      endif()
      add_test(NAME ${b}.${name} COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/windows/wine-run.sh
        ${IOMUX_WINE} $<TARGET_FILE:iomux-tests> ${name})
      set_tests_properties(${b}.${name} PROPERTIES ENVIRONMENT "${env}" TIMEOUT 120
        SKIP_RETURN_CODE 77 FIXTURES_REQUIRED wine LABELS "${b};windows")
      if(name IN_LIST win_serial_cases)
        set_tests_properties(${b}.${name} PROPERTIES RUN_SERIAL TRUE)
      endif()
      if(name IN_LIST win_long_cases)
        set_tests_properties(${b}.${name} PROPERTIES TIMEOUT 600)
      endif()
    endforeach()
  endforeach()
endforeach()

# libevent's own regression cases against libiomux-event (tests/libevent/README.md), built for
# Windows as libevent builds them there and run under Wine on each backend.
set(regress_dir ${CMAKE_BINARY_DIR}/libevent-regress)
set(regress_libs "$<TARGET_FILE:iomux_event_static> $<TARGET_FILE:iomux_static> -static -lws2_32 -lmswsock -lntdll -lbcrypt -lpthread")
add_test(NAME core.libevent_regress_build
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/libevent/run-regress build ${regress_dir}
          ${CMAKE_C_COMPILER} "-g -O1" ${regress_libs} ${IOMUX_EVENT_CONFIG_DIR})
set_tests_properties(core.libevent_regress_build PROPERTIES
  TIMEOUT 600 SKIP_RETURN_CODE 77 LABELS "core;libevent;windows" FIXTURES_SETUP libevent_regress)
foreach(b IN LISTS IOMUX_BACKENDS)
  add_test(NAME ${b}.libevent_regress
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/libevent/run-regress run ${regress_dir} ${b})
  set_tests_properties(${b}.libevent_regress PROPERTIES
    ENVIRONMENT "${wine_env};IOMUX_TEST_WINE=${IOMUX_WINE}" TIMEOUT 600 SKIP_RETURN_CODE 77
    LABELS "${b};libevent;windows" FIXTURES_REQUIRED "libevent_regress;wine")
endforeach()
# libevent's own test programs (tests/libevent/run-programs), built for Windows as libevent's
# CMakeLists.txt builds them there and run under Wine on each backend.
add_test(NAME core.libevent_programs_build
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/libevent/run-programs build ${regress_dir}
          ${CMAKE_C_COMPILER} "-g -O1" ${regress_libs} ${IOMUX_EVENT_CONFIG_DIR})
set_tests_properties(core.libevent_programs_build PROPERTIES
  TIMEOUT 600 SKIP_RETURN_CODE 77 LABELS "core;libevent;windows"
  FIXTURES_REQUIRED libevent_regress FIXTURES_SETUP libevent_programs)
foreach(b IN LISTS IOMUX_BACKENDS)
  add_test(NAME ${b}.libevent_programs
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/libevent/run-programs run ${regress_dir} ${b})
  # RUN_SERIAL: test-ratelim's fairness bound (--check-stddev) failed all three tries once
  # while the other backend's programs (their own test-ratelim) and the example servers ran
  # beside it under Wine; alone it passed 4 runs of 4.
  set_tests_properties(${b}.libevent_programs PROPERTIES
    ENVIRONMENT "${wine_env};IOMUX_TEST_WINE=${IOMUX_WINE}" TIMEOUT 900 SKIP_RETURN_CODE 77
    LABELS "${b};libevent;windows" FIXTURES_REQUIRED "libevent_programs;wine" RUN_SERIAL TRUE)
endforeach()
