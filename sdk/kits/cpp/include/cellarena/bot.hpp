// cellarena C++ kit: the bot loop. Command line and CELLARENA_* variables, the connection (or else the
// seat token) a launcher hands over, one match or many, ladder mode with back-off and the retry rule
// of RETRY_LATER, a ladder's redirects, a seat taken back after a lost connection, SIGTERM.
#pragma once

#include "debug.hpp"
#include "games.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <optional>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <thread>

namespace cellarena {

// The refusals that mean "not now": a ladder bot waits and comes back. Any other `error` before a
// match means the bot or its token is wrong, and retrying cannot help. Mirrors RETRY_LATER in
// cellarena/sdk/protocol/codes.py (docs/protocol.md, "Joining a ladder").
inline const std::vector<std::string>& retry_later() {
    static const std::vector<std::string> codes{"shutdown", "busy", "queue_full", "too_many_connections", "locked_out"};
    return codes;
}
inline bool comes_back(const std::string& code) {
    const auto& c = retry_later();
    return std::find(c.begin(), c.end(), code) != c.end();
}

// The seconds a refusal names: "... refused for another 42 s" -> 42, as the Python SDK's pattern
// `for (?:another )?(\d+(?:\.\d+)?) ?s\b` reads it. Parsed by hand: <regex> made every bot's build
// half as long again (g++ -O2, 7.4 s against 4.2 s a bot.cpp).
inline std::optional<double> wait_hint(const std::string& message) {
    const auto digit = [&](std::size_t i) { return i < message.size() && message[i] >= '0' && message[i] <= '9'; };
    for (std::size_t at = message.find("for "); at != std::string::npos; at = message.find("for ", at + 1)) {
        std::size_t i = at + 4;
        if (message.compare(i, 8, "another ") == 0) i += 8;
        const std::size_t start = i;
        while (digit(i)) ++i;
        if (i == start) continue;
        if (i < message.size() && message[i] == '.' && digit(i + 1)) {
            ++i;
            while (digit(i)) ++i;
        }
        const std::size_t end = i;
        if (i < message.size() && message[i] == ' ') ++i;
        const auto word = [&](std::size_t k) {
            return k < message.size() && (std::isalnum(static_cast<unsigned char>(message[k])) || message[k] == '_');
        };
        if (i < message.size() && message[i] == 's' && !word(i + 1)) return std::stod(message.substr(start, end - start));
    }
    return std::nullopt;
}

// The wait after the n-th failure in a row: a random time between half and all of min(60, 2^(n-1))
// seconds, and at least what a `locked_out` message names ("refused for another 42 s").
class Backoff {
  public:
    explicit Backoff(double first = 1.0, double cap = 60.0, unsigned seed = std::random_device{}())
        : first_(first), cap_(cap), rng_(seed) {}
    double next(const std::string& server_message = "") {
        ++failures_;
        const double ceiling = std::min(cap_, first_ * std::pow(2.0, std::min(failures_ - 1, 32)));
        double wait = std::uniform_real_distribution<double>(ceiling / 2, ceiling)(rng_);
        if (const std::optional<double> hinted = wait_hint(server_message))
            wait = std::max(wait, *hinted + std::uniform_real_distribution<double>(0, 1)(rng_));
        return wait;
    }
    void reset() { failures_ = 0; }
    int failures() const { return failures_; }

  private:
    double first_, cap_;
    int failures_ = 0;
    std::mt19937 rng_;
};

inline std::string env(const char* name) {
    const char* v = std::getenv(name);
    std::string s = v ? v : "";
    s.erase(0, s.find_first_not_of(" \t\r\n"));
    s.erase(s.find_last_not_of(" \t\r\n") + 1);
    return s;
}

// The seat token a launcher hands over: one line read from the pipe CELLARENA_TOKEN_FD names, and the
// descriptor closed (docs/protocol.md, "Bots that cellarena starts"); else CELLARENA_TOKEN.
inline std::string seat_token() {
    const std::string fd_text = env("CELLARENA_TOKEN_FD");
    if (!fd_text.empty() && std::all_of(fd_text.begin(), fd_text.end(), ::isdigit)) {
        const int fd = std::stoi(fd_text);
        std::string line;
        char c;
        while (line.size() < 4096 && ::read(fd, &c, 1) == 1 && c != '\n') line.push_back(c);
        ::close(fd);
        while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
        if (!line.empty()) return line;
    }
    return env("CELLARENA_TOKEN");
}

struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Options {
    std::string host = "127.0.0.1";
    int port = 7777;
    std::string name;
    std::string token;
    int matches = 1;
    bool ladder = false;
    bool quiet = false;
    int handed_fd = -1;  // CELLARENA_SOCKET_FD: a connection the launcher made, owning the seat
    // CELLARENA_BACKOFF_FIRST_S: the longest wait of the back-off's first round (1 s). For tests, which
    // set milliseconds so that a retry is quick; a server's "for another N s" is still waited out.
    double backoff_first = 1.0;

    // Flags win over CELLARENA_* variables, which win over the defaults.
    static Options parse(int argc, char** argv, const std::string& default_name) {
        Options o;
        o.name = default_name;
        if (!env("CELLARENA_HOST").empty()) o.host = env("CELLARENA_HOST");
        if (!env("CELLARENA_PORT").empty()) o.port = port_of(env("CELLARENA_PORT"), "CELLARENA_PORT");
        if (!env("CELLARENA_NAME").empty()) o.name = env("CELLARENA_NAME");
        if (!env("CELLARENA_BACKOFF_FIRST_S").empty()) o.backoff_first = backoff_first_of(env("CELLARENA_BACKOFF_FIRST_S"));
        std::string token_flag, token_file;
        bool matches_given = false;
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            auto value = [&]() -> std::string {
                if (i + 1 >= argc) throw UsageError(a + " needs a value");
                return argv[++i];
            };
            if (a == "--host") o.host = value();
            else if (a == "--port") o.port = port_of(value(), "--port");
            else if (a == "--name") o.name = value();
            else if (a == "--token") token_flag = value();
            else if (a == "--token-file") token_file = value();
            else if (a == "--matches") {
                const std::string v = value();
                char* end = nullptr;
                const long n = std::strtol(v.c_str(), &end, 10);
                if (v.empty() || *end || n < 1) throw UsageError("--matches must be 1 or more, got " + v);
                o.matches = static_cast<int>(n);
                matches_given = true;
            } else if (a == "--ladder") o.ladder = true;
            else if (a == "-q" || a == "--quiet") o.quiet = true;
            else if (a == "--tls" || a == "--tls-ca")
                throw UsageError(a + ": the C++ kit speaks plain TCP; reach a TLS server through a local TLS proxy "
                                     "(stunnel or socat, see the kit's README) and point --host/--port at it");
            else if (a == "-h" || a == "--help") throw UsageError("help");
            else throw UsageError("unknown option " + a);
        }
        if (matches_given && o.ladder) throw UsageError("--matches N plays N matches and --ladder plays until stopped: give one of them");
        if (!token_flag.empty() && !token_file.empty()) throw UsageError("--token and --token-file: give one of them");
        if (o.name.empty() || o.name.size() > 64) throw UsageError("--name must be 1 to 64 characters");
        const std::string handed = env("CELLARENA_SOCKET_FD");
        if (!handed.empty()) {
            if (!std::all_of(handed.begin(), handed.end(), ::isdigit) || handed.size() > 9)
                throw UsageError("CELLARENA_SOCKET_FD: '" + handed + "' is not a descriptor number; unset it to connect to --host/--port instead");
            o.handed_fd = std::stoi(handed);
        }
        if (!token_file.empty()) {
            std::FILE* f = std::fopen(token_file.c_str(), "r");
            if (!f) throw UsageError("--token-file " + token_file + ": cannot read it (" + std::strerror(errno) + ")");
            char buf[4096];
            const std::size_t n = std::fread(buf, 1, sizeof buf, f);
            std::fclose(f);
            std::string t(buf, n);
            t.erase(t.find_last_not_of(" \t\r\n") + 1);
            t.erase(0, t.find_first_not_of(" \t\r\n"));
            if (t.empty()) throw UsageError("--token-file " + token_file + ": the file is empty");
            o.token = t;
        } else if (!token_flag.empty()) {
            o.token = token_flag;
        } else if (o.handed_fd < 0) {  // the handed connection owns the seat: no token needed, none read
            o.token = seat_token();
        }
        return o;
    }

    static int port_of(const std::string& v, const std::string& what) {
        char* end = nullptr;
        const long n = std::strtol(v.c_str(), &end, 10);
        if (v.empty() || *end || n < 1 || n > 65535) throw UsageError(what + " must be 1-65535, got " + v);
        return static_cast<int>(n);
    }

    static double backoff_first_of(const std::string& v) {
        char* end = nullptr;
        const double s = std::strtod(v.c_str(), &end);
        if (*end || !(s > 0 && s <= 60))
            throw UsageError("CELLARENA_BACKOFF_FIRST_S must be seconds in (0, 60], got " + v + "; unset it for 1 s");
        return s;
    }
};

inline const char* kUsage =
    "options: --host H --port P (CELLARENA_HOST/PORT, default 127.0.0.1:7777) --name N (CELLARENA_NAME)\n"
    "         --token T | --token-file PATH (else the launcher's CELLARENA_TOKEN_FD, or CELLARENA_TOKEN)\n"
    "         CELLARENA_SOCKET_FD: a connection the launcher made, owning the seat (the first match)\n"
    "         --matches N (play N matches) | --ladder (play until stopped, backing off after refusals) -q\n"
    "         CELLARENA_BACKOFF_FIRST_S: the first back-off's longest wait (default 1 s; tests set less)\n";

// A bot for Game: override on_tick (and, if you like, on_start and on_end). `debug` is this tick's
// drawing for your own eyes (debug.hpp): sent with the answer, drawn by the web player.
template <class G>
class Bot {
  public:
    using Game = G;
    virtual ~Bot() = default;
    virtual void on_start(const Welcome&) {}
    virtual typename G::Answer on_tick(const typename G::View& view, Debug& debug) = 0;
    virtual void on_end(const End&) {}
};

// The hello: `accepts` says this kit follows a ladder's `redirect` (docs/protocol.md).
inline msgpack::sbuffer hello_body(const std::string& name, const std::string& token, const std::string& game) {
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(buf);
    pk.pack_map(token.empty() ? 5 : 6);
    pk.pack(std::string("type")), pk.pack(std::string("hello"));
    pk.pack(std::string("protocol")), pk.pack(kProtocol);
    pk.pack(std::string("name")), pk.pack(name);
    pk.pack(std::string("game")), pk.pack(game);
    pk.pack(std::string("accepts")), pk.pack(std::vector<std::string>{"redirect"});
    if (!token.empty()) pk.pack(std::string("token")), pk.pack(token);
    return buf;
}

// Where a ladder sends this bot's match (docs/protocol.md, "redirect"): not a failure, another address.
struct Redirected : std::runtime_error {
    std::string host, token;
    int port = 0;
    bool tls = false;
    explicit Redirected(const Message& m)
        : std::runtime_error("redirected"),
          host(m.get<std::string>("host")),
          token(m.get<std::string>("token")),
          port(m.get<int>("port")),
          tls(m.get<bool>("tls")) {
        if (host.empty() || port < 1 || port > 65535)
            throw ProtocolError("redirect: no host, or a port outside 1-65535 (" + std::to_string(port) + ")");
    }
};

// A `moves` answer, with this tick's drawing when there is one.
template <class G>
msgpack::sbuffer moves_body(int64_t tick, const typename G::Answer& answer, const Debug* debug = nullptr) {
    const bool drawn = debug && !debug->empty();
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(buf);
    pk.pack_map(drawn ? 4 : 3);
    pk.pack(std::string("type")), pk.pack(std::string("moves"));
    pk.pack(std::string("tick")), pk.pack(tick);
    pk.pack(std::string("moves"));
    G::pack(buf, answer);
    if (drawn) pk.pack(std::string("debug")), debug->pack(pk);
    return buf;
}

class Log {
  public:
    Log(std::string name, bool quiet) : name_(std::move(name)), quiet_(quiet) {}
    void operator()(const std::string& text, bool always = true) const {
        if (always || !quiet_) std::cerr << name_ << ": " << text << std::endl;
    }

  private:
    std::string name_;
    bool quiet_;
};

// This tick's answer with its drawing, unless the frame would pass the protocol's limit (the caps
// keep it far below; a huge answer could not): then the drawing goes, never the move. A dropped
// drawing is said once a match.
template <class G>
msgpack::sbuffer answer_body(int64_t tick, const typename G::Answer& answer, Debug& debug, bool& said, const Log& log) {
    if (!debug.first_problem.empty() && !said) {
        said = true;
        log("debug drawing dropped: " + debug.first_problem + " (only the first is reported; the move is kept)");
    }
    msgpack::sbuffer body = moves_body<G>(tick, answer, &debug);
    if (!debug.empty() && body.size() > kMaxClientFrame) {
        body = moves_body<G>(tick, answer);
        ++debug.dropped;
        if (!said) {
            said = true;
            log("tick " + std::to_string(tick) + ": the debug drawing would make the answer too large; sent without it");
        }
    }
    debug.clear();
    return body;
}

// One match on an open connection: hello sent, then welcome, ticks, end.
template <class B>
End play(B& bot, Connection& conn, const Log& log, const std::string& game) {
    using G = typename B::Game;
    std::optional<Welcome> welcome;
    Debug debug;
    bool debug_said = false;
    for (;;) {
        const Message m = conn.recv();
        const std::string type = m.type();
        if (type == "welcome") {
            welcome.emplace(m);
            conn.started();
            log("seat " + std::to_string(welcome->seat) + " of match " + std::to_string(welcome->match), false);
            try {
                bot.on_start(*welcome);
            } catch (const std::exception& e) {
                log(std::string("on_start failed: ") + e.what());
            }
        } else if (type == "tick") {
            if (!welcome) throw ProtocolError("a tick came before the welcome");
            const auto view = G::view(m, *welcome);
            typename G::Answer answer = G::noop(view);
            debug.clear();
            try {
                answer = bot.on_tick(view, debug);
            } catch (const std::exception& e) {
                log("on_tick failed at tick " + std::to_string(view.tick) + " (" + e.what() + "); answering a no-op");
            }
            conn.send(answer_body<G>(view.tick, answer, debug, debug_said, log));
        } else if (type == "end") {
            End end(m);
            log("end after " + std::to_string(end.ticks) + " ticks: " + end.result + " (rank " +
                    std::to_string(end.rank) + "), late " + std::to_string(end.late) + ", invalid " +
                    std::to_string(end.invalid) + ", illegal " + std::to_string(end.illegal),
                false);
            try {
                bot.on_end(end);
            } catch (const std::exception& e) {
                log(std::string("on_end failed: ") + e.what());
            }
            return end;
        } else if (type == "redirect") {
            if (welcome) throw ProtocolError("a redirect arrived in the middle of a match");
            throw Redirected(m);
        } else {
            log("ignoring a message of type '" + type + "' (a later protocol's)", false);
        }
    }
    (void)game;
}

// What to do about an error that waiting cannot fix, said with it.
inline std::string fix_for(const std::string& code) {
    if (code == "bad_hello") return "; check the bot's token (--token-file, --token or CELLARENA_TOKEN) and its game";
    if (code == "bad_version") return "; this kit speaks protocol 1: update it";
    if (code == "tls_required") return "; connect through a local TLS proxy (see the kit's README)";
    if (code == "revoked") return "; ask the ladder's host for the bot's current token";
    if (code == "paused") return "; the ladder paused this bot (the message says why); fix it, then resume it on your page on the ladder or with `cellarena ladder resume`";
    return "";
}

// Connections to a match host tried before a redirected match is given up; the waits (s) before each
// try to take back a seat lost mid-match, while a ladder keeps it (its grace, a few seconds).
constexpr int kFollowAttempts = 3;
constexpr double kRejoinWaits[] = {0.25, 0.5, 1.0};

namespace detail {
// What the SIGTERM handler says: only async-signal-safe calls there, so the text is ready beforehand.
inline char sigterm_name[80] = "cpp_bot";
inline volatile std::sig_atomic_t played = 0;

extern "C" inline void on_sigterm(int) {
    char text[160];
    std::size_t n = 0;
    auto put = [&](const char* s) {
        while (*s && n < sizeof text - 1) text[n++] = *s++;
    };
    put(sigterm_name);
    put(": stopped by SIGTERM after ");
    char digits[16];
    int d = 0;
    long v = played;
    do digits[d++] = char('0' + v % 10), v /= 10;
    while (v && d < 15);
    while (d) text[n++] = digits[--d];
    put(" matches\n");
    (void)!::write(2, text, n);
    ::_exit(0);  // stopped as asked: a normal exit (docs/protocol.md), whatever it was waiting for
}
}  // namespace detail

// The matches one run() plays, one connection each, with back-off between failed attempts.
template <class B>
class Series {
  public:
    Series(const Options& o, const Log& log, std::string game) : o_(o), log_(log), game_(std::move(game)) {}

    int play_all(std::unique_ptr<Connection> handed) {
        auto bot = std::make_unique<B>();  // a new bot per match; a match cut short keeps its bot
        while (o_.ladder || played_ < o_.matches) {
            try {
                try {
                    if (handed) {
                        // The first match on the connection the launcher made: it owns the seat.
                        auto conn = std::move(handed);
                        conn->send(hello_body(o_.name, "", game_));
                        play(*bot, *conn, log_, game_);
                    } else {
                        play_at(*bot, o_.host, o_.port, o_.token);
                    }
                } catch (const Redirected& r) {
                    if (!follow(*bot, r)) continue;
                }
            } catch (const ServerError& e) {
                if (keep_trying_ && comes_back(e.code)) {
                    wait(std::string(e.what()), e.message);
                    continue;
                }
                return fail(std::string(e.what()) + fix_for(e.code) +
                            (keep_trying_ ? "; not trying again: waiting cannot fix this" : ""));
            } catch (const ProtocolError& e) {
                return fail(std::string("the server sent something this kit cannot read (") + e.what() + ")");
            } catch (const ClientError& e) {
                if (!keep_trying_) return fail(e.what());
                wait(e.what());
                continue;
            }
            detail::played = ++played_;
            backoff_.reset();
            bot = std::make_unique<B>();
            if (!o_.ladder && played_ >= o_.matches) break;
            log_("match " + std::to_string(played_) + (o_.ladder ? "" : " of " + std::to_string(o_.matches)) +
                     " played; connecting for the next",
                 false);
        }
        return 0;
    }

  private:
    // Connect, say hello, play one match. A connection lost mid-match takes its seat back (the same
    // bot, the same token) while the host keeps it, then counts as a lost connection.
    void play_at(B& bot, const std::string& host, int port, const std::string& token) {
        std::string lost;
        for (std::size_t attempt = 0;; ++attempt) {
            try {
                Connection conn(host, port);
                conn.send(hello_body(o_.name, token, game_));
                play(bot, conn, log_, game_);
                return;
            } catch (const LostMidMatch& e) {
                // Without a token the seat is no one's to take back (`cellarena serve` seats whoever comes).
                if (token.empty() || attempt >= std::size(kRejoinWaits)) throw ClosedError(e.what());
                lost = e.what();
                log_(lost + "; taking the seat back");
                std::this_thread::sleep_for(std::chrono::duration<double>(kRejoinWaits[attempt]));
            } catch (const ServerError&) {
                if (!lost.empty()) throw ClosedError(lost);  // the grace was over: the loss is the news
                throw;
            }
        }
    }

    // Play the match a ladder sent this bot to; whether it was played. A failure there is the match's,
    // not the bot's: with more matches to play the bot goes back to the ladder after a wait.
    bool follow(B& bot, const Redirected& target) {
        const std::string where = "the match host " + target.host + ":" + std::to_string(target.port);
        if (target.tls)
            return give_up(where + " speaks TLS, which the C++ kit does not: reach it through a local TLS proxy "
                                   "(see the kit's README), or ask the ladder's host for plain matches");
        log_("playing this match at " + target.host + ":" + std::to_string(target.port), false);
        for (int attempt = 1; attempt <= kFollowAttempts; ++attempt) {
            try {
                play_at(bot, target.host, target.port, target.token);
                return true;
            } catch (const Redirected&) {
                return give_up(where + " redirected this bot again; a match host must not");
            } catch (const ServerError& e) {
                return give_up(where + " refused this bot: " + e.what());
            } catch (const ProtocolError&) {
                throw;
            } catch (const ClientError& e) {
                if (attempt == kFollowAttempts) return give_up("lost " + where + " (" + e.what() + ")");
                log_("lost " + where + " (" + e.what() + "); connecting there again");
                std::this_thread::sleep_for(std::chrono::milliseconds(200 * attempt));
            }
        }
        return false;
    }

    bool give_up(const std::string& text) {
        if (!keep_trying_) throw ClientError(text);
        wait(text);
        return false;
    }

    void wait(const std::string& why, const std::string& server_message = "") {
        const double delay = backoff_.next(server_message);
        char text[32];
        std::snprintf(text, sizeof text, "%.1f", delay);
        log_(why + "; trying again in " + text + " s");
        std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    }

    int fail(const std::string& text) {
        log_("error: " + text + (keep_trying_ ? " (after " + std::to_string(played_) + " matches)" : ""));
        return 1;
    }

    const Options& o_;
    const Log& log_;
    std::string game_;
    bool keep_trying_ = o_.ladder || o_.matches > 1;
    Backoff backoff_{o_.backoff_first};
    int played_ = 0;
};

// Play as the command line says: one match, --matches N, or --ladder; a new B for each match. The exit
// status: 0 when played or stopped by SIGTERM, 1 (one line on stderr) when it cannot go on, 64 for a
// bad command line.
template <class B>
int run(int argc, char** argv, const std::string& game = B::Game::kName, const std::string& default_name = "cpp_bot") {
    Options o;
    std::unique_ptr<Connection> handed;
    try {
        o = Options::parse(argc, argv, default_name);
        if (o.handed_fd >= 0) {
            try {
                handed = Connection::adopt(o.handed_fd);
            } catch (const ClientError& e) {
                throw UsageError(std::string("CELLARENA_SOCKET_FD: ") + e.what() +
                                 "; unset it to connect to --host/--port instead");
            }
        }
    } catch (const UsageError& e) {
        if (std::string(e.what()) == "help") {
            std::cout << kUsage;
            return 0;
        }
        std::cerr << default_name << ": " << e.what() << "\n" << kUsage;
        return 64;
    }
    std::snprintf(detail::sigterm_name, sizeof detail::sigterm_name, "%s", o.name.c_str());
    std::signal(SIGTERM, detail::on_sigterm);
    const Log log(o.name, o.quiet);
    return Series<B>(o, log, game).play_all(std::move(handed));
}

}  // namespace cellarena
