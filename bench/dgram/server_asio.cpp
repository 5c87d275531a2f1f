// SPDX-License-Identifier: MIT
// The datagram study's Boost.Asio server, in the idiom of Asio's own UDP echo example: one
// udp::socket on one io_context, async_receive_from into a buffer, then async_send_to of
// what came back to its sender, and the next receive once that send is done.
#include <boost/asio.hpp>
#include <boost/version.hpp>
#include <sys/epoll.h>

#include "common.h"

using boost::asio::ip::udp;

namespace
{
class server
{
  public:
    server(boost::asio::io_context &io, int fd) : socket_(io, udp::v4(), fd)
    {
        receive();
    }
    void close()
    {
        boost::system::error_code ec;
        socket_.close(ec);
    }

  private:
    void receive()
    {
        socket_.async_receive_from(boost::asio::buffer(data_), sender_,
                                   [this](boost::system::error_code ec, std::size_t n) {
                                       if (ec)
                                           return;
                                       send(n);
                                   });
    }
    void send(std::size_t n)
    {
        socket_.async_send_to(boost::asio::buffer(data_, n), sender_,
                              [this](boost::system::error_code, std::size_t) { receive(); });
    }
    udp::socket socket_;
    udp::endpoint sender_;
    alignas(64) char data_[DGRAM_MAX];
};
} // namespace

int main(int argc, char **argv)
{
#if defined(BOOST_ASIO_HAS_EPOLL) && !defined(BOOST_ASIO_HAS_IO_URING)
    const char *identity = "Boost.Asio " BOOST_LIB_VERSION " (header-only), epoll reactor";
    int ok = 1;
#else
    const char *identity = "Boost.Asio without its epoll reactor";
    int ok = 0;
#endif
    struct dgram_options o =
        dgram_parse(argc, argv, "dgram-asio", "Asio async_receive_from/async_send_to", identity, ok);
    int fd = dgram_socket(o.port, 1);
    boost::asio::io_context io(1);
    server s(io, fd);
    boost::asio::signal_set term(io, SIGTERM);
    term.async_wait([&](boost::system::error_code, int) { s.close(); });
    dgram_listening(fd, "Boost.Asio udp::socket");
    io.run();
    return 0;
}
