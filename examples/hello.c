/* SPDX-License-Identifier: MIT */
/* hello: echo what arrives on stdin, and stop after a quiet spell.
 *
 *     printf 'hi\n' | ./hello 100     reads "hi", sees end of input, waits 100 ms, exits 0
 *     ./hello                          echoes lines you type; gives up after 5 s of silence
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <iomux.h>

struct app {
    mux_io_t input;   /* readiness of stdin */
    mux_timer_t idle; /* fires after `quiet_ms` without input */
    unsigned long quiet_ms;
    size_t bytes;
};

static void on_input(mux_loop_t *loop, mux_io_t *w, unsigned revents)
{
    struct app *app = w->data;
    if (revents & MUX_ERROR) { /* the watcher is already stopped */
        fprintf(stderr, "hello: stdin cannot be watched\n");
        return;
    }
    char buf[4096];
    ssize_t n = read(mux_io_fd(w), buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return; /* nothing after all; the loop calls again when there is */
    if (n <= 0) {
        printf("end of input after %zu bytes\n", app->bytes);
        mux_io_stop(loop, w); /* the callback will not run again */
        return;
    }
    app->bytes += (size_t)n;
    printf("read %zd bytes: %.*s", n, (int)n, buf);
    mux_timer_again(loop, &app->idle); /* push the deadline back: one heap operation */
}

static void on_idle(mux_loop_t *loop, mux_timer_t *t)
{
    struct app *app = t->data;
    printf("quiet for %lu ms, stopping\n", app->quiet_ms);
    mux_timer_stop(loop, t);
    mux_io_stop(loop, &app->input); /* nothing is active now, so mux_run returns */
}

static int fail(const char *what, int err)
{
    fprintf(stderr, "hello: %s: %s\n", what, mux_strerror(err));
    return 1;
}

int main(int argc, char **argv)
{
    struct app app = {.quiet_ms = argc > 1 ? strtoul(argv[1], NULL, 10) : 5000};
    mux_loop_t loop;
    int rc = mux_loop_init(&loop, NULL); /* IOMUX_BACKEND picks a backend, else the best */
    if (rc < 0)
        return fail("mux_loop_init", rc);
    printf("backend: %s\n", mux_loop_backend(&loop));

    if ((rc = mux_io_init(&app.input, on_input, STDIN_FILENO, MUX_READ)) < 0)
        return fail("mux_io_init", rc);
    if ((rc = mux_timer_init(&app.idle, on_idle)) < 0)
        return fail("mux_timer_init", rc);
    app.input.data = &app; /* `data` is the one field that is ours */
    app.idle.data = &app;

    if ((rc = mux_io_start(&loop, &app.input)) < 0)
        return fail("mux_io_start", rc);
    if ((rc = mux_timer_set_repeat(&app.idle, app.quiet_ms * 1000000ull)) < 0 ||
        (rc = mux_timer_again(&loop, &app.idle)) < 0) /* starts it, due in quiet_ms */
        return fail("idle timer", rc);

    rc = mux_run(&loop, MUX_RUN_DEFAULT); /* until no watcher is active */
    if (rc < 0)
        return fail("mux_run", rc);
    rc = mux_loop_close(&loop);
    if (rc < 0)
        return fail("mux_loop_close", rc);
    return 0;
}
