/* SPDX-License-Identifier: MIT */
/* The thread-per-connection echo server of the I/O-model study (bench/README.md): plain C,
 * blocking sockets, POSIX threads with their default attributes, no event library. The
 * main thread accepts; each connection gets a detached thread that reads into its buffer
 * and writes the bytes back until the client closes. This is the first of Winsock's models
 * (the book's server used two threads per client, one to read and one to write; one is
 * enough for an echo). When a thread cannot be created (EAGAIN: the process or the system
 * is out of threads; ENOMEM), the connection is closed: that is where the model breaks, and
 * the first failure is printed once. SIGINT or SIGTERM ends the process with status 0; the
 * kernel closes the sockets. */
#include "../echo/echo_common.h"

#include <pthread.h>
#include <signal.h>

static size_t bufsize;

static void *serve(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char *buf = malloc(bufsize);
    for (ssize_t n; buf && (n = read(fd, buf, bufsize)) > 0;) {
        for (ssize_t off = 0, w; off < n; off += w)
            if ((w = write(fd, buf + off, (size_t)(n - off))) < 0)
                goto out;
    }
out:
    free(buf);
    close(fd);
    return NULL;
}

static void on_signal(int signum)
{
    (void)signum;
    _exit(0);
}

int main(int argc, char **argv)
{
    const char *identity = "thread per connection, blocking sockets, POSIX threads";
    struct echo_options o = echo_parse(argc, argv, "model-threads",
                                       "one thread per connection, blocking I/O", identity, 1);
    bufsize = o.bufsize;
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    int lfd = echo_listen_socket("model-threads", o.port);
    fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) & ~O_NONBLOCK); /* blocking, like the rest */
    echo_listening(lfd, identity);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    unsigned long served = 0;
    int said = 0;
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) { /* out of descriptors: wait, retry */
                if (!said++)
                    fprintf(stderr, "model-threads: accept: %s after %lu connections\n",
                            strerror(errno), served);
                usleep(10000);
            }
            continue;
        }
        echo_nodelay(fd);
        pthread_t t;
        int r = pthread_create(&t, &attr, serve, (void *)(intptr_t)fd);
        if (r != 0) {
            if (!said++)
                fprintf(stderr, "model-threads: pthread_create: %s after %lu connections\n",
                        strerror(r), served);
            close(fd);
            continue;
        }
        served++;
    }
}
