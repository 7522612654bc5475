// cellarena C++ kit: the bot loop. Command line and CELLARENA_* variables, the seat token a launcher
// hands over, one match or many, ladder mode with back-off, and the retry rule of RETRY_LATER.
#pragma once

#include "games.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <random>
#include <regex>
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
        static const std::regex hint(R"(for (?:another )?(\d+(?:\.\d+)?) ?s\b)");
        std::smatch found;
        if (std::regex_search(server_message, found, hint))
            wait = std::max(wait, std::stod(found[1].str()) + std::uniform_real_distribution<double>(0, 1)(rng_));
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

    // Flags win over CELLARENA_* variables, which win over the defaults.
    static Options parse(int argc, char** argv, const std::string& default_name) {
        Options o;
        o.name = default_name;
        if (!env("CELLARENA_HOST").empty()) o.host = env("CELLARENA_HOST");
        if (!env("CELLARENA_PORT").empty()) o.port = port_of(env("CELLARENA_PORT"), "CELLARENA_PORT");
        if (!env("CELLARENA_NAME").empty()) o.name = env("CELLARENA_NAME");
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
        } else {
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
};

inline const char* kUsage =
    "options: --host H --port P (CELLARENA_HOST/PORT, default 127.0.0.1:7777) --name N (CELLARENA_NAME)\n"
    "         --token T | --token-file PATH (else the launcher's CELLARENA_TOKEN_FD, or CELLARENA_TOKEN)\n"
    "         --matches N (play N matches) | --ladder (play until stopped, backing off after refusals) -q\n";

// A bot for Game: override on_tick (and, if you like, on_start and on_end).
template <class G>
class Bot {
  public:
    using Game = G;
    virtual ~Bot() = default;
    virtual void on_start(const Welcome&) {}
    virtual typename G::Answer on_tick(const typename G::View& view) = 0;
    virtual void on_end(const End&) {}
};

inline msgpack::sbuffer hello_body(const Options& o, const std::string& game) {
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(buf);
    pk.pack_map(o.token.empty() ? 4 : 5);
    pk.pack(std::string("type")), pk.pack(std::string("hello"));
    pk.pack(std::string("protocol")), pk.pack(kProtocol);
    pk.pack(std::string("name")), pk.pack(o.name);
    pk.pack(std::string("game")), pk.pack(game);
    if (!o.token.empty()) pk.pack(std::string("token")), pk.pack(o.token);
    return buf;
}

template <class G>
msgpack::sbuffer moves_body(int64_t tick, const typename G::Answer& answer) {
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(buf);
    pk.pack_map(3);
    pk.pack(std::string("type")), pk.pack(std::string("moves"));
    pk.pack(std::string("tick")), pk.pack(tick);
    pk.pack(std::string("moves"));
    G::pack(buf, answer);
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

// One match on an open connection: hello sent, then welcome, ticks, end.
template <class B>
End play(B& bot, Connection& conn, const Log& log, const std::string& game) {
    using G = typename B::Game;
    std::optional<Welcome> welcome;
    for (;;) {
        const Message m = conn.recv();
        const std::string type = m.type();
        if (type == "welcome") {
            welcome.emplace(m);
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
            try {
                answer = bot.on_tick(view);
            } catch (const std::exception& e) {
                log("on_tick failed at tick " + std::to_string(view.tick) + " (" + e.what() + "); answering a no-op");
            }
            conn.send(moves_body<G>(view.tick, answer));
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
    return "";
}

// Play as the command line says: one match, --matches N, or --ladder; a new B for each match. The exit
// status: 0 when played, 1 (one line on stderr) when it cannot go on, 64 for a bad command line.
template <class B>
int run(int argc, char** argv, const std::string& game = B::Game::kName, const std::string& default_name = "cpp_bot") {
    Options o;
    try {
        o = Options::parse(argc, argv, default_name);
    } catch (const UsageError& e) {
        if (std::string(e.what()) == "help") {
            std::cout << kUsage;
            return 0;
        }
        std::cerr << default_name << ": " << e.what() << "\n" << kUsage;
        return 64;
    }
    const Log log(o.name, o.quiet);
    const bool keep_trying = o.ladder || o.matches > 1;
    Backoff backoff;
    int played = 0;
    auto wait = [&](const std::string& why, const std::string& server_message = "") {
        const double delay = backoff.next(server_message);
        char text[32];
        std::snprintf(text, sizeof text, "%.1f", delay);
        log(why + "; trying again in " + text + " s");
        std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    };
    auto fail = [&](const std::string& text) {
        log("error: " + text + (keep_trying ? " (after " + std::to_string(played) + " matches)" : ""));
        return 1;
    };
    while (o.ladder || played < o.matches) {
        try {
            Connection conn(o.host, o.port);
            conn.send(hello_body(o, game));
            B bot;
            play(bot, conn, log, game);
        } catch (const ServerError& e) {
            if (keep_trying && comes_back(e.code)) {
                wait(std::string(e.what()), e.message);
                continue;
            }
            return fail(std::string(e.what()) + fix_for(e.code) + (keep_trying ? "; not trying again: waiting cannot fix this" : ""));
        } catch (const ProtocolError& e) {
            return fail(std::string("the server sent something this kit cannot read (") + e.what() + ")");
        } catch (const ClientError& e) {
            if (!keep_trying) return fail(e.what());
            wait(e.what());
            continue;
        }
        ++played;
        backoff.reset();
        if (!o.ladder && played >= o.matches) break;
        log("match " + std::to_string(played) + (o.ladder ? "" : " of " + std::to_string(o.matches)) +
                " played; connecting for the next",
            false);
    }
    return 0;
}

}  // namespace cellarena
