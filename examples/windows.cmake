# SPDX-License-Identifier: MIT
# The examples that build for Windows (included by examples/CMakeLists.txt when WIN32), and
# their runs under Wine: hello, and echo-server with every echoed byte checked by the echo
# study's client (bench/echo/client.c), built for this (Linux) machine by the test itself and
# talking to the Wine process over loopback. greeter and iomux-httpd need the HTTP module or
# signals and are not built here (docs/windows.md).
add_executable(hello hello.c)
target_link_libraries(hello PRIVATE iomux_static)
add_library(iomux_examples_cli STATIC cli.c)
target_link_libraries(iomux_examples_cli PUBLIC iomux_static)
add_executable(echo-server echo-server.c)
target_link_libraries(echo-server PRIVATE iomux_examples_cli iomux_static)
set_target_properties(echo-server PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})

if(IOMUX_TESTS)
  set(wine_env "WINEDEBUG=-all;WINEPREFIX=${CMAKE_BINARY_DIR}/wineprefix")
  foreach(b IN LISTS IOMUX_BACKENDS)
    add_test(NAME ${b}.example_hello_runs
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/hello-wine-test.sh ${IOMUX_WINE} $<TARGET_FILE:hello>)
    add_test(NAME ${b}.example_echo_server_wine
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/echo-server-wine-test.sh ${IOMUX_WINE}
              $<TARGET_FILE:echo-server> ${PROJECT_SOURCE_DIR}/bench/echo/client.c
              ${CMAKE_CURRENT_BINARY_DIR})
    set_tests_properties(${b}.example_hello_runs ${b}.example_echo_server_wine PROPERTIES
      ENVIRONMENT "${wine_env};IOMUX_BACKEND=${b}" LABELS "example;windows;${b}" TIMEOUT 120
      SKIP_RETURN_CODE 77 FIXTURES_REQUIRED wine)
  endforeach()
endif()
