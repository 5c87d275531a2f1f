# SPDX-License-Identifier: MIT
# The examples for Windows (included by examples/CMakeLists.txt when WIN32), and their runs
# under Wine, each driven by clients that run on this (Linux) machine and talk to the Wine
# process over loopback: hello; echo-server, every echoed byte checked by the echo study's
# client (bench/echo/client.c, built for this machine by the test itself), on one loop and on
# two (--threads 2: an acceptor and channels, Windows having no SO_REUSEPORT); greeter; and
# iomux-httpd with the Linux build's HTTP cases (h11 and curl), on one loop and on two. Ctrl-C,
# which Wine makes of a SIGINT, stops each server.
add_executable(hello hello.c)
target_link_libraries(hello PRIVATE iomux_static)
add_library(iomux_examples_cli STATIC cli.c)
target_link_libraries(iomux_examples_cli PUBLIC iomux_static)
add_executable(echo-server echo-server.c)
target_link_libraries(echo-server PRIVATE iomux_examples_cli iomux_static)
add_executable(greeter greeter.c)
target_link_libraries(greeter PRIVATE iomux_static)
add_executable(iomux-httpd iomux-httpd.c httpd_log.c httpd_watch.c)
target_link_libraries(iomux-httpd PRIVATE iomux_examples_cli iomux_static)
set_target_properties(echo-server iomux-httpd PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})
install(TARGETS echo-server iomux-httpd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

if(IOMUX_TESTS)
  set(wine_env "WINEDEBUG=-all;WINEPREFIX=${CMAKE_BINARY_DIR}/wineprefix")
  foreach(b IN LISTS IOMUX_BACKENDS)
    set(env "${wine_env};IOMUX_BACKEND=${b};IOMUX_TEST_WINE=${IOMUX_WINE}")
    add_test(NAME ${b}.example_hello_runs
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/hello-wine-test.sh ${IOMUX_WINE} $<TARGET_FILE:hello>)
    add_test(NAME ${b}.example_echo_server_wine
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/echo-server-wine-test.sh ${IOMUX_WINE}
              $<TARGET_FILE:echo-server> ${PROJECT_SOURCE_DIR}/bench/echo/client.c
              ${CMAKE_CURRENT_BINARY_DIR})
    add_test(NAME ${b}.example_greeter
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/greeter-test.sh $<TARGET_FILE:greeter>)
    add_test(NAME ${b}.example_iomux_httpd
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/iomux-httpd-test.py $<TARGET_FILE:iomux-httpd>)
    add_test(NAME ${b}.example_iomux_httpd_threads
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/iomux-httpd-threads-test.py $<TARGET_FILE:iomux-httpd>)
    set_tests_properties(${b}.example_hello_runs ${b}.example_echo_server_wine
      ${b}.example_greeter ${b}.example_iomux_httpd ${b}.example_iomux_httpd_threads PROPERTIES
      ENVIRONMENT "${env}" LABELS "example;windows;${b}" TIMEOUT 180
      SKIP_RETURN_CODE 77 FIXTURES_REQUIRED wine)
  endforeach()
  # iomux-httpd with TransmitFile for its files (src/backend/iocp.c: not Wine's default).
  add_test(NAME iocp-transmitfile.example_iomux_httpd
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/iomux-httpd-test.py $<TARGET_FILE:iomux-httpd>)
  set_tests_properties(iocp-transmitfile.example_iomux_httpd PROPERTIES
    ENVIRONMENT "${wine_env};IOMUX_BACKEND=iocp;IOMUX_IOCP_FILES=transmitfile;IOMUX_TEST_WINE=${IOMUX_WINE}"
    LABELS "example;windows;iocp" TIMEOUT 180 SKIP_RETURN_CODE 77 FIXTURES_REQUIRED wine)
endif()
