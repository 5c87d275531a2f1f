# SPDX-License-Identifier: MIT
# <event2/event-config.h> for libiomux-event: libevent's platform macros (EVENT__HAVE_*,
# EVENT__SIZEOF_*), true for what this platform has, as libevent's own build finds them.
# Programs test them before they include a system header or use a system call (libevent's
# test-fdleak.c: `#ifdef EVENT__HAVE_SYS_RESOURCE_H`). The event mechanisms (EVENT__HAVE_EPOLL,
# _POLL, _SELECT, _KQUEUE) follow the backends this build has. Included by CMakeLists.txt;
# writes ${IOMUX_EVENT_CONFIG_DIR}/event2/event-config.h.
include(CheckIncludeFile)
include(CheckSymbolExists)
include(CheckTypeSize)
include(CheckStructHasMember)

set(IOMUX_EVENT_CONFIG_DIR ${CMAKE_CURRENT_BINARY_DIR}/include-event)
set(_evcfg_defs "")
macro(_evcfg_define name)
  string(APPEND _evcfg_defs "#define EVENT__${name} 1\n")
endmacro()

set(_evcfg_saved_defs "${CMAKE_REQUIRED_DEFINITIONS}")
if(NOT WIN32)
  set(CMAKE_REQUIRED_DEFINITIONS -D_GNU_SOURCE)
endif()
foreach(h arpa/inet.h afunix.h dlfcn.h errno.h fcntl.h ifaddrs.h inttypes.h memory.h netdb.h
          netinet/in.h netinet/in6.h netinet/tcp.h poll.h port.h stdarg.h stddef.h stdint.h
          stdlib.h string.h sys/epoll.h sys/event.h sys/eventfd.h sys/ioctl.h sys/mman.h
          sys/param.h sys/queue.h sys/random.h sys/resource.h sys/select.h sys/sendfile.h
          sys/socket.h sys/stat.h sys/sysctl.h sys/time.h sys/timerfd.h sys/types.h sys/uio.h
          sys/un.h sys/wait.h unistd.h winsock2.h ws2tcpip.h)
  string(TOUPPER "${h}" _var)
  string(REGEX REPLACE "[/.]" "_" _var "${_var}")
  check_include_file(${h} IOMUX_EVCFG_HAVE_${_var})
  if(IOMUX_EVCFG_HAVE_${_var})
    _evcfg_define(HAVE_${_var})
  endif()
endforeach()

# Functions, each with the header that declares it.
foreach(pair accept4:sys/socket.h arc4random:stdlib.h arc4random_buf:stdlib.h
             clock_gettime:time.h eventfd:sys/eventfd.h fcntl:fcntl.h getaddrinfo:netdb.h
             getegid:unistd.h geteuid:unistd.h getifaddrs:ifaddrs.h getnameinfo:netdb.h
             getprotobynumber:netdb.h getrandom:sys/random.h getservbyname:netdb.h
             gettimeofday:sys/time.h inet_ntop:arpa/inet.h inet_pton:arpa/inet.h
             issetugid:unistd.h mmap:sys/mman.h nanosleep:time.h pipe:unistd.h pipe2:unistd.h
             putenv:stdlib.h sendfile:sys/sendfile.h setenv:stdlib.h setrlimit:sys/resource.h
             sigaction:signal.h signal:signal.h splice:fcntl.h strlcpy:string.h strsep:string.h
             strtok_r:string.h strtoll:stdlib.h sysctl:sys/sysctl.h timerfd_create:sys/timerfd.h
             umask:sys/stat.h unsetenv:stdlib.h usleep:unistd.h vasprintf:stdio.h
             epoll_create1:sys/epoll.h epoll_ctl:sys/epoll.h timeradd:sys/time.h
             timerclear:sys/time.h timercmp:sys/time.h timerisset:sys/time.h
             TAILQ_FOREACH:sys/queue.h)
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 _fn)
  list(GET pair 1 _hdr)
  string(TOUPPER "${_fn}" _var)
  check_symbol_exists(${_fn} "${_hdr}" IOMUX_EVCFG_HAVE_${_var})
  if(IOMUX_EVCFG_HAVE_${_var})
    if(_var STREQUAL "TAILQ_FOREACH")
      _evcfg_define(HAVE_TAILQFOREACH)
    else()
      _evcfg_define(HAVE_${_var})
    endif()
  endif()
endforeach()

# Types and structures.
set(CMAKE_EXTRA_INCLUDE_FILES sys/types.h sys/socket.h netinet/in.h netdb.h stdint.h)
if(WIN32)
  set(CMAKE_EXTRA_INCLUDE_FILES winsock2.h ws2tcpip.h stdint.h)
endif()
foreach(t "uint8_t" "uint16_t" "uint32_t" "uint64_t" "uintptr_t" "sa_family_t"
          "struct addrinfo" "struct in6_addr" "struct sockaddr_in6" "struct sockaddr_storage"
          "struct linger")
  string(TOUPPER "${t}" _var)
  string(REPLACE " " "_" _var "${_var}")
  check_type_size("${t}" IOMUX_EVCFG_SIZE_${_var})
  if(HAVE_IOMUX_EVCFG_SIZE_${_var})
    _evcfg_define(HAVE_${_var})
  endif()
endforeach()
if(NOT WIN32)
  set(CMAKE_EXTRA_INCLUDE_FILES sys/types.h sys/un.h)
  check_type_size("struct sockaddr_un" IOMUX_EVCFG_SIZE_STRUCT_SOCKADDR_UN)
  if(HAVE_IOMUX_EVCFG_SIZE_STRUCT_SOCKADDR_UN)
    _evcfg_define(HAVE_STRUCT_SOCKADDR_UN)
  endif()
endif()
check_struct_has_member("struct sockaddr_storage" ss_family "sys/types.h;sys/socket.h"
  IOMUX_EVCFG_SS_FAMILY)
if(IOMUX_EVCFG_SS_FAMILY)
  _evcfg_define(HAVE_STRUCT_SOCKADDR_STORAGE_SS_FAMILY)
endif()
check_struct_has_member("struct sockaddr_in" sin_len "sys/types.h;netinet/in.h"
  IOMUX_EVCFG_SIN_LEN)
if(IOMUX_EVCFG_SIN_LEN)
  _evcfg_define(HAVE_STRUCT_SOCKADDR_IN_SIN_LEN)
endif()
unset(CMAKE_EXTRA_INCLUDE_FILES)

# Sizes (libevent's EVENT__SIZEOF_*).
set(_evcfg_sizes "")
set(CMAKE_EXTRA_INCLUDE_FILES sys/types.h sys/socket.h)
if(WIN32)
  set(CMAKE_EXTRA_INCLUDE_FILES sys/types.h winsock2.h ws2tcpip.h)
endif()
foreach(t int long "long long" short size_t ssize_t off_t "void *" socklen_t time_t pthread_t)
  string(TOUPPER "${t}" _var)
  string(REGEX REPLACE "[ *]+" "_" _var "${_var}")
  string(REGEX REPLACE "_$" "" _var "${_var}")
  if(_var STREQUAL "VOID")
    set(_var VOID_P)
  endif()
  if(t STREQUAL "pthread_t")
    set(CMAKE_EXTRA_INCLUDE_FILES pthread.h)
  endif()
  check_type_size("${t}" IOMUX_EVCFG_SIZEOF_${_var})
  if(IOMUX_EVCFG_SIZEOF_${_var})
    string(APPEND _evcfg_sizes "#define EVENT__SIZEOF_${_var} ${IOMUX_EVCFG_SIZEOF_${_var}}\n")
  endif()
endforeach()
unset(CMAKE_EXTRA_INCLUDE_FILES)
set(CMAKE_REQUIRED_DEFINITIONS "${_evcfg_saved_defs}")

# The event mechanisms: those of this build's backends (libevent's names).
foreach(b epoll poll select kqueue)
  if(b IN_LIST IOMUX_BACKENDS)
    string(TOUPPER ${b} _var)
    _evcfg_define(HAVE_${_var})
  endif()
endforeach()
if("kqueue" IN_LIST IOMUX_BACKENDS)
  _evcfg_define(HAVE_WORKING_KQUEUE)
endif()
if(NOT WIN32)
  _evcfg_define(HAVE_PTHREADS)
  _evcfg_define(HAVE_FD_MASK)
  _evcfg_define(HAVE_SETFD)
endif()
_evcfg_define(HAVE___FUNCTION__)
_evcfg_define(TIME_WITH_SYS_TIME)

set(IOMUX_EVENT_CONFIG_DEFINES "${_evcfg_defs}")
set(IOMUX_EVENT_CONFIG_SIZES "${_evcfg_sizes}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/event-config.h.in
  ${IOMUX_EVENT_CONFIG_DIR}/event2/event-config.h @ONLY)
