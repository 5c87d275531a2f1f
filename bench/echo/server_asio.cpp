/* SPDX-License-Identifier: MIT */
// The echo server on Boost.Asio (header-only, one io_context run by one thread, its epoll
// reactor): each session loops async_read_some into its buffer, then async_write of what
// was read, the shape of Asio's own performance-test server that the CK Echo Test ran.
#include "echo_common.h"

#include <boost/asio.hpp>
#include <boost/version.hpp>

#include <dirent.h>
#include <memory>
#include <string>
#include <vector>

using boost::asio::ip::tcp;

namespace {

size_t bufsize;

class session : public std::enable_shared_from_this<session> {
public:
    explicit session(tcp::socket socket)
        : socket_(std::move(socket)), buf_(aligned_buffer(bufsize)) {}

    void start()
    {
        socket_.set_option(tcp::no_delay(true));
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
                                 [this, self](boost::system::error_code ec, std::size_t) {
                                     if (!ec)
                                         read();
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
        if (!ec)
            std::make_shared<session>(std::move(socket))->start();
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

} // namespace

int main(int argc, char **argv)
{
    boost::asio::io_context io(1);
    tcp::acceptor acceptor(io); // creates the reactor
    char identity[256];
#if defined(BOOST_ASIO_HAS_EPOLL) && !defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT)
    bool ok = holds_epoll();
#else
    bool ok = false;
#endif
    snprintf(identity, sizeof identity, "Boost.Asio %d.%d.%d (header-only), epoll reactor%s",
             BOOST_VERSION / 100000, BOOST_VERSION / 100 % 1000, BOOST_VERSION % 100,
             ok ? "" : ": this build does not use the epoll reactor");
    struct echo_options o = echo_parse(argc, argv, "echo-asio",
                                       "Boost.Asio io_context, async_read_some + async_write",
                                       identity, ok);
    bufsize = o.bufsize;
    try {
        tcp::endpoint ep(boost::asio::ip::make_address("127.0.0.1"), (unsigned short)o.port);
        acceptor.open(ep.protocol());
        acceptor.set_option(tcp::acceptor::reuse_address(true));
        acceptor.bind(ep);
        acceptor.listen();
    } catch (const boost::system::system_error &e) {
        fprintf(stderr, "echo-asio: listen on 127.0.0.1:%u: %s\n", o.port, e.what());
        return 1;
    }
    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](boost::system::error_code, int) {
        acceptor.close();
        io.stop(); // the sessions are freed with the io_context
    });
    accept(acceptor);
    echo_listening(acceptor.native_handle(), identity);
    io.run();
    return 0;
}
