/* SPDX-License-Identifier: MIT */
// The echo server on Boost.Asio (header-only, its epoll reactor): each session loops
// async_read_some into its buffer, then async_write of what was read, the shape of Asio's
// own performance-test server that the CK Echo Test ran.
//
// Asio's CPU-scalability test, the two ways (the scaling study runs both):
//  - echo-asio: one io_context run by --threads N threads (1 by default: the echo study's
//    server). The threads share the reactor and the handler queue.
//  - echo-asio-contexts (built with ECHO_ASIO_CONTEXTS): N io_contexts, each run by a thread
//    of its own, each with its own acceptor on the port (SO_REUSEPORT): an io_context per CPU.
#include "echo_common.h"

#include <boost/asio.hpp>
#include <boost/version.hpp>

#include <dirent.h>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using boost::asio::ip::tcp;

namespace {

size_t bufsize;

#ifdef ECHO_ASIO_CONTEXTS
const char *NAME = "echo-asio-contexts";
const char *HANDLERS = "loop"; // the counts at exit are an io_context's
#else
const char *NAME = "echo-asio";
const char *HANDLERS = "thread"; // a thread's: it ran those handlers of the one io_context
#endif

// What one thread (its handlers) served: a thread's own, summed by nobody until it ends.
struct counts {
    unsigned long accepted = 0;
    uint64_t bytes = 0;
};
thread_local counts *mine = nullptr;

class session : public std::enable_shared_from_this<session> {
public:
    explicit session(tcp::socket socket)
        : socket_(std::move(socket)), buf_(aligned_buffer(bufsize)) {}

    void start()
    {
        boost::system::error_code ec; // not the throwing form: a connection accepted as
        socket_.set_option(tcp::no_delay(true), ec); // another thread shuts down may be gone
        read();
    }

private:
    void read()
    {
        auto self = shared_from_this();
        socket_.async_read_some(boost::asio::buffer(buf_.get(), bufsize),
                                [this, self](boost::system::error_code ec, std::size_t n) {
                                    if (!ec)
                                        write(n);
                                });
    }

    void write(std::size_t n)
    {
        auto self = shared_from_this();
        boost::asio::async_write(socket_, boost::asio::buffer(buf_.get(), n),
                                 [this, self](boost::system::error_code ec, std::size_t m) {
                                     if (!ec) {
                                         if (mine)
                                             mine->bytes += m;
                                         read();
                                     }
                                 });
    }

    // 64-byte aligned, as in every server of the study: the kernel copies into misaligned
    // buffers much slower (bench/README.md), which is not what the study compares.
    struct free_deleter {
        void operator()(char *p) const { std::free(p); }
    };
    static std::unique_ptr<char[], free_deleter> aligned_buffer(size_t n)
    {
        void *p = nullptr;
        if (posix_memalign(&p, 64, n) != 0)
            throw std::bad_alloc();
        return std::unique_ptr<char[], free_deleter>(static_cast<char *>(p));
    }

    tcp::socket socket_;
    std::unique_ptr<char[], free_deleter> buf_;
};

void accept(tcp::acceptor &acceptor)
{
    acceptor.async_accept([&acceptor](boost::system::error_code ec, tcp::socket socket) {
        if (!acceptor.is_open())
            return; // closed by the signal handler
        if (!ec) {
            if (mine)
                mine->accepted++;
            std::make_shared<session>(std::move(socket))->start();
        }
        accept(acceptor);
    });
}

// Asio is header-only, so there is no shared object to find with dladdr: check instead that
// the build selected the epoll reactor, and, once the io_context exists, that this process
// really holds an epoll instance.
bool holds_epoll()
{
    DIR *d = opendir("/proc/self/fd");
    bool found = false;
    for (struct dirent *e; d && (e = readdir(d));) {
        char path[300], target[64];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n > 0 && std::string(target, (size_t)n) == "anon_inode:[eventpoll]")
            found = true;
    }
    if (d)
        closedir(d);
    return found;
}

void open_acceptor(tcp::acceptor &acceptor, unsigned port, bool reuseport)
{
    tcp::endpoint ep(boost::asio::ip::make_address("127.0.0.1"), (unsigned short)port);
    acceptor.open(ep.protocol());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    if (reuseport)
        acceptor.set_option(
            boost::asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>(true));
    acceptor.bind(ep);
    acceptor.listen();
}

// Runs `io` on this thread, pinned to `cpu` (>= 0), counting into `c`.
void run(boost::asio::io_context &io, counts *c, int cpu)
{
    if (cpu >= 0)
        echo_pin(NAME, cpu);
    mine = c;
    io.run();
}

} // namespace

int main(int argc, char **argv)
{
    boost::asio::io_context probe(1);
    tcp::acceptor probe_acceptor(probe); // creates a reactor, to check which one it is
    char identity[256];
#if defined(BOOST_ASIO_HAS_EPOLL) && !defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT)
    bool ok = holds_epoll();
#else
    bool ok = false;
#endif
#ifdef ECHO_ASIO_CONTEXTS
    const char *how = "an io_context per thread";
#else
    const char *how = "one io_context";
#endif
    snprintf(identity, sizeof identity, "Boost.Asio %d.%d.%d (header-only), epoll reactor, %s%s",
             BOOST_VERSION / 100000, BOOST_VERSION / 100 % 1000, BOOST_VERSION % 100, how,
             ok ? "" : ": this build does not use the epoll reactor");
    struct echo_options o =
        echo_parse_mt(argc, argv, NAME,
#ifdef ECHO_ASIO_CONTEXTS
                      "Boost.Asio, N io_contexts a thread each, async_read_some + async_write",
#else
                      "Boost.Asio, one io_context run by N threads, async_read_some + "
                      "async_write",
#endif
                      identity, ok, ECHO_MAX_THREADS);
    bufsize = o.bufsize;
    int n = o.threads;
    std::vector<counts> count((size_t)n);
    std::vector<int> cpu((size_t)n, -1); /* read before any thread is pinned */
    for (int i = 0; o.pin && i < n; i++)
        cpu[(size_t)i] = echo_cpu(i);
    std::vector<std::thread> threads;
#ifdef ECHO_ASIO_CONTEXTS
    // An io_context per thread, each with its own acceptor on the port.
    std::vector<std::unique_ptr<boost::asio::io_context>> ios;
    std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
    unsigned port = o.port;
    try {
        for (int i = 0; i < n; i++) {
            ios.emplace_back(new boost::asio::io_context(1));
            acceptors.emplace_back(new tcp::acceptor(*ios.back()));
            open_acceptor(*acceptors.back(), port, n > 1);
            port = acceptors.back()->local_endpoint().port();
        }
    } catch (const boost::system::system_error &e) {
        fprintf(stderr, "%s: listen on 127.0.0.1:%u: %s\n", NAME, port, e.what());
        return 1;
    }
    boost::asio::signal_set signals(*ios[0], SIGINT, SIGTERM);
    signals.async_wait([&](boost::system::error_code, int) {
        for (int i = 0; i < n; i++) // each closes its own acceptor, then stops
            boost::asio::post(*ios[(size_t)i], [&, i] {
                acceptors[(size_t)i]->close();
                ios[(size_t)i]->stop(); // the sessions are freed with the io_context
            });
    });
    for (int i = 0; i < n; i++)
        accept(*acceptors[(size_t)i]);
    echo_listening(acceptors[0]->native_handle(), identity);
    for (int i = 1; i < n; i++)
        threads.emplace_back(run, std::ref(*ios[(size_t)i]), &count[(size_t)i],
                             cpu[(size_t)i]);
    run(*ios[0], &count[0], cpu[0]);
#else
    // One io_context, run by every thread.
    boost::asio::io_context io(n);
    tcp::acceptor acceptor(io);
    try {
        open_acceptor(acceptor, o.port, false);
    } catch (const boost::system::system_error &e) {
        fprintf(stderr, "%s: listen on 127.0.0.1:%u: %s\n", NAME, o.port, e.what());
        return 1;
    }
    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](boost::system::error_code, int) {
        acceptor.close();
        io.stop(); // the sessions are freed with the io_context
    });
    accept(acceptor);
    echo_listening(acceptor.native_handle(), identity);
    for (int i = 1; i < n; i++)
        threads.emplace_back(run, std::ref(io), &count[(size_t)i], cpu[(size_t)i]);
    run(io, &count[0], cpu[0]);
#endif
    for (auto &t : threads)
        t.join();
    if (n > 1 || o.pin)
        for (int i = 0; i < n; i++)
            echo_loop_line(NAME, HANDLERS, i, cpu[(size_t)i], count[(size_t)i].accepted,
                           count[(size_t)i].bytes);
    return 0;
}
