// cellarena C++ kit: the wire. One TCP connection, length-prefixed msgpack frames (docs/protocol.md).
// POSIX sockets and msgpack-cxx only; blocking reads, since a bot plays one match at a time.
#pragma once

#include <msgpack.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace cellarena {

constexpr int kProtocol = 1;
// A client frame holds at most this many body bytes; the server's at most kMaxServerFrame.
constexpr std::size_t kMaxClientFrame = 64 * 1024;
constexpr std::size_t kMaxServerFrame = 64u * 1024 * 1024;

// Every error the kit raises says what happened in one line.
struct ClientError : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// The connection could not be opened; worth another try in ladder mode.
struct ConnectError : ClientError {
    using ClientError::ClientError;
};
// The connection ended without `end` or `error`.
struct ClosedError : ClientError {
    using ClientError::ClientError;
};
// The server sent bytes this kit cannot read (not a frame, not a map): retrying cannot help.
struct ProtocolError : ClientError {
    using ClientError::ClientError;
};
// The connection was lost after the match's `welcome`: a ladder keeps the seat for its grace, and the
// bot may take it back with the same token (docs/protocol.md, "Joining a ladder").
struct LostMidMatch : ClosedError {
    using ClosedError::ClosedError;
};
// The server sent an `error` message; `code` is one of docs/protocol.md's codes.
struct ServerError : ClientError {
    std::string code, message;
    ServerError(std::string c, std::string m)
        : ClientError("the server sent error " + c + ": " + m), code(std::move(c)), message(std::move(m)) {}
};

// One decoded message: the msgpack map and the zone that owns its memory.
class Message {
  public:
    explicit Message(msgpack::object_handle handle)
        : handle_(std::make_shared<msgpack::object_handle>(std::move(handle))) {}
    const msgpack::object& object() const { return handle_->get(); }
    // The value under `key`, or nullptr when absent.
    const msgpack::object* find(const std::string& key) const {
        const msgpack::object& o = object();
        for (uint32_t i = 0; i < o.via.map.size; ++i) {
            const msgpack::object_kv& kv = o.via.map.ptr[i];
            if (kv.key.type == msgpack::type::STR && kv.key.via.str.size == key.size() &&
                std::memcmp(kv.key.via.str.ptr, key.data(), key.size()) == 0)
                return &kv.val;
        }
        return nullptr;
    }
    // `type`, or "" when it is missing or not a string.
    std::string type() const {
        const msgpack::object* t = find("type");
        return t && t->type == msgpack::type::STR ? t->as<std::string>() : std::string();
    }
    // A field converted to T; ProtocolError naming the field when it is missing or of another type.
    template <class T>
    T get(const std::string& key) const {
        const msgpack::object* v = find(key);
        if (!v) throw ProtocolError(type() + ": the field '" + key + "' is missing");
        try {
            return v->as<T>();
        } catch (const msgpack::type_error&) {
            throw ProtocolError(type() + ": the field '" + key + "' has the wrong type");
        }
    }
    template <class T>
    T get_or(const std::string& key, T fallback) const {
        const msgpack::object* v = find(key);
        if (!v || v->type == msgpack::type::NIL) return fallback;
        try {
            return v->as<T>();
        } catch (const msgpack::type_error&) {
            return fallback;
        }
    }

  private:
    std::shared_ptr<msgpack::object_handle> handle_;  // shared: views keep it alive cheaply
};

// Frames in, messages out: feed bytes as they arrive, take whole messages.
class FrameReader {
  public:
    std::vector<Message> feed(const char* data, std::size_t size) {
        buffer_.insert(buffer_.end(), data, data + size);
        std::vector<Message> out;
        std::size_t at = 0;
        while (buffer_.size() - at >= 4) {
            const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + at);
            const std::size_t length = (std::size_t(p[0]) << 24) | (std::size_t(p[1]) << 16) |
                                       (std::size_t(p[2]) << 8) | std::size_t(p[3]);
            if (length > kMaxServerFrame)
                throw ProtocolError("a server frame of " + std::to_string(length) + " bytes is over the limit");
            if (buffer_.size() - at - 4 < length) break;
            msgpack::object_handle handle;
            try {
                handle = msgpack::unpack(buffer_.data() + at + 4, length);
            } catch (const std::exception& e) {
                throw ProtocolError(std::string("a server frame is not valid msgpack (") + e.what() + ")");
            }
            if (handle.get().type != msgpack::type::MAP) throw ProtocolError("a server frame is not a map");
            Message message(std::move(handle));
            if (message.type().empty()) throw ProtocolError("a server message has no string 'type'");
            out.push_back(std::move(message));
            at += 4 + length;
        }
        buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(at));
        return out;
    }

  private:
    std::vector<char> buffer_;
};

// A frame: the 4-byte big-endian length, then the packed body.
inline std::string frame(const msgpack::sbuffer& body) {
    if (body.size() > kMaxClientFrame)
        throw std::length_error("a client frame may hold " + std::to_string(kMaxClientFrame) +
                                " bytes, this one " + std::to_string(body.size()));
    const auto n = static_cast<uint32_t>(body.size());
    std::string out{char(n >> 24), char(n >> 16), char(n >> 8), char(n)};
    out.append(body.data(), body.size());
    return out;
}

// One open TCP connection. recv() raises ServerError for an `error`, ClosedError for an early end.
class Connection {
  public:
    Connection(const std::string& host, int port, int timeout_ms = 10000) : address_(host + ":" + std::to_string(port)) {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* found = nullptr;
        const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
        if (rc != 0) throw ConnectError("could not connect to " + address_ + ": unknown host (" + gai_strerror(rc) + ")");
        std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(found, ::freeaddrinfo);
        std::string why = "no address";
        for (addrinfo* a = found; a; a = a->ai_next) {
            const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
            if (fd < 0) continue;
            if (connect_within(fd, a, timeout_ms, why)) {
                fd_ = fd;
                break;
            }
            ::close(fd);
        }
        if (fd_ < 0)
            throw ConnectError("could not connect to " + address_ + ": " + why +
                               "; is a cellarena server listening there? (--host/--port, CELLARENA_HOST/PORT)");
        const int one = 1;
        // Small moves frames must not wait in Nagle's buffer; keep-alive finds a silently dropped queue wait.
        ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        ::setsockopt(fd_, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    }
    // Adopt `fd`, a connected stream socket that the program which started this bot handed over
    // (CELLARENA_SOCKET_FD, docs/protocol.md): it already owns the bot's seat. ClientError when `fd` is
    // not an open stream socket.
    static std::unique_ptr<Connection> adopt(int fd) {
        int type = 0;
        socklen_t len = sizeof type;
        if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
            throw ClientError("descriptor " + std::to_string(fd) + " is not an open stream socket");
        std::unique_ptr<Connection> c(new Connection());
        c->fd_ = fd;
        c->address_ = "the handed-over connection";
        sockaddr_storage peer{};
        socklen_t peer_len = sizeof peer;
        char host[NI_MAXHOST], port[NI_MAXSERV];
        if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0 &&
            ::getnameinfo(reinterpret_cast<sockaddr*>(&peer), peer_len, host, sizeof host, port, sizeof port,
                          NI_NUMERICHOST | NI_NUMERICSERV) == 0)
            c->address_ = std::string(host) + ":" + port;
        ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // not for any program the bot starts
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // fails harmlessly on a Unix socket
        return c;
    }
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;
    ~Connection() { close(); }

    const std::string& address() const { return address_; }
    bool ended() const { return ended_; }
    // Whether a `welcome` came: a connection lost after it is a seat that may be taken back.
    void started() { started_ = true; }

    void send(const msgpack::sbuffer& body) {
        const std::string bytes = frame(body);
        std::size_t sent = 0;
        while (sent < bytes.size()) {
            const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                // The server may have said why before closing: recv() reports that, or the lost pipe.
                send_failed_ = std::string(std::strerror(errno));
                return;
            }
            sent += static_cast<std::size_t>(n);
        }
    }

    // The next message, waiting as long as it takes (a ladder's queue may take minutes).
    Message recv() {
        while (inbox_.empty()) {
            if (eof_) {
                close();
                std::string when = ended_ ? "after" : "before";
                std::string extra = send_failed_.empty() ? "" : " (a send failed: " + send_failed_ + ")";
                if (started_ && !ended_)
                    throw LostMidMatch("the server at " + address_ + " closed the connection before the match ended" + extra);
                throw ClosedError("the server at " + address_ + " closed the connection " + when +
                                  " the match ended" + extra);
            }
            char buf[1 << 16];
            const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                eof_ = true;
                continue;
            }
            if (first_read_) {
                first_read_ = false;
                // A TLS server answers plain bytes with a TLS record, which would read as a huge frame.
                if (n >= 2 && (buf[0] == 0x15 || buf[0] == 0x16) && buf[1] == 0x03)
                    throw ConnectError("the server at " + address_ +
                                       " speaks TLS; this kit speaks plain TCP: run a local TLS proxy (see the kit's README)");
            }
            for (Message& m : reader_.feed(buf, static_cast<std::size_t>(n))) inbox_.push_back(std::move(m));
        }
        Message m = std::move(inbox_.front());
        inbox_.pop_front();
        const std::string type = m.type();
        if (type == "error") {
            close();
            throw ServerError(m.get_or<std::string>("code", "?"), m.get_or<std::string>("message", ""));
        }
        if (type == "end") ended_ = true;
        return m;
    }

    void close() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

  private:
    Connection() = default;
    static bool connect_within(int fd, addrinfo* a, int timeout_ms, std::string& why) {
        const int flags = ::fcntl(fd, F_GETFL);
        ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
        int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
        if (rc < 0 && errno == EINPROGRESS) {
            pollfd p{fd, POLLOUT, 0};
            rc = ::poll(&p, 1, timeout_ms);
            if (rc == 0) {
                why = "no answer in " + std::to_string(timeout_ms / 1000) + " s";
                return false;
            }
            int err = 0;
            socklen_t len = sizeof err;
            ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
            if (err != 0) {
                why = std::strerror(err);
                return false;
            }
            rc = 0;
        }
        if (rc < 0) {
            why = std::strerror(errno);
            return false;
        }
        ::fcntl(fd, F_SETFL, flags);  // reads block from now on
        return true;
    }

    std::string address_;
    int fd_ = -1;
    FrameReader reader_;
    std::deque<Message> inbox_;
    bool eof_ = false, ended_ = false, started_ = false, first_read_ = true;
    std::string send_failed_;
};

}  // namespace cellarena
