// The kit's unit tests, run by ctest: framing, the views, the retry rule, the back-off, the handover.
#include <cellarena.hpp>

#include <cassert>
#include <iostream>
#include <sstream>

using namespace cellarena;

static int failures = 0, checks = 0;
#define CHECK(cond)                                                                   \
    do {                                                                              \
        ++checks;                                                                     \
        if (!(cond)) {                                                                \
            ++failures;                                                               \
            std::cerr << __FILE__ << ":" << __LINE__ << ": failed: " #cond << std::endl; \
        }                                                                             \
    } while (0)

template <class F>
static std::string raises(F f) {
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

static std::string framed(const msgpack::sbuffer& b) { return frame(b); }


static Welcome welcome_for(const std::string& game) {
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(buf);
    pk.pack_map(10);
    pk.pack(std::string("type")), pk.pack(std::string("welcome"));
    pk.pack(std::string("protocol")), pk.pack(1);
    pk.pack(std::string("seat")), pk.pack(1);
    pk.pack(std::string("game")), pk.pack(game);
    pk.pack(std::string("match")), pk.pack(3);
    pk.pack(std::string("players")), pk.pack(2);
    pk.pack(std::string("names")), pk.pack(std::vector<std::string>{"a", "b"});
    pk.pack(std::string("tick_rate")), pk.pack(15.0);
    pk.pack(std::string("budget_ms")), pk.pack(63);
    pk.pack(std::string("config"));
    pk.pack_map(2);
    pk.pack(std::string("view_size")), pk.pack(13);
    pk.pack(std::string("map")), pk.pack(std::string("Duel"));
    FrameReader r;
    const std::string f = framed(buf);
    return Welcome(r.feed(f.data(), f.size()).at(0));
}

static void test_frames_split_anywhere() {
    msgpack::sbuffer a, b;
    msgpack::pack(a, std::map<std::string, int>{{"type", 1}});
    std::map<std::string, std::string> m{{"type", "end"}};
    msgpack::pack(b, m);
    const std::string bytes = framed(b) + framed(b);
    FrameReader r;
    std::vector<Message> got;
    for (char c : bytes)
        for (auto& x : r.feed(&c, 1)) got.push_back(x);
    CHECK(got.size() == 2 && got[0].type() == "end");
    // A TLS record or a huge length is refused before any body is read.
    FrameReader big;
    const char header[4] = {0x16, 0x03, 0x01, 0x02};
    CHECK(raises([&] { big.feed(header, 4); }).find("over the limit") != std::string::npos);
    // Not a map.
    msgpack::sbuffer arr;
    msgpack::pack(arr, std::vector<int>{1, 2});
    FrameReader bad;
    const std::string f = framed(arr);
    CHECK(raises([&] { bad.feed(f.data(), f.size()); }).find("not a map") != std::string::npos);
    // A client frame over 64 KiB is refused before sending.
    msgpack::sbuffer huge;
    msgpack::pack(huge, std::string(70000, 'x'));
    CHECK(raises([&] { frame(huge); }).find("65536") != std::string::npos);
}

static void test_rezzo_view() {
    const Welcome w = welcome_for("rezzo");
    CHECK(w.seat == 1 && w.names.size() == 2 && w.budget_ms == 63 && rezzo::config_of(w).map == "Duel");
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(buf);
    std::string cells(2 * 169, '\0'), damage(2 * 169, '\0');
    cells[169 + 11 * 13 + 6] = rezzo::FLAG;      // agent 1, one ahead: its own flag
    cells[169 + 0 * 13 + 12] = rezzo::BASE + 2;  // agent 1, far right corner: a base of seat 2
    pk.pack_map(6);
    pk.pack(std::string("type")), pk.pack(std::string("tick"));
    pk.pack(std::string("tick")), pk.pack(41);
    pk.pack(std::string("budget_ms")), pk.pack(63);
    pk.pack(std::string("agents")), pk.pack(std::vector<int>{0, 3});
    pk.pack(std::string("cells")), pk.pack_bin(cells.size()), pk.pack_bin_body(cells.data(), cells.size());
    pk.pack(std::string("damage")), pk.pack_bin(damage.size()), pk.pack_bin_body(damage.data(), damage.size());
    FrameReader r;
    const std::string f = framed(buf);
    const auto v = rezzo::Game::view(r.feed(f.data(), f.size()).at(0), w);
    CHECK(v.tick == 41 && v.agents == std::vector<int>({0, 3}));
    CHECK(v.ahead(1) == rezzo::FLAG && v.ahead(0) == rezzo::BLANK);
    CHECK(v.at(1, 12, 6) == rezzo::BASE + 2 && rezzo::kind(v.at(1, 12, 6)) == rezzo::BASE && rezzo::owner(v.at(1, 12, 6)) == 2);
    CHECK(rezzo::Game::noop(v) == rezzo::Answer({0, 0}));
    const std::string moves = framed(moves_body<rezzo::Game>(41, {1, 5}));
    FrameReader back;
    const Message m = back.feed(moves.data(), moves.size()).at(0);
    CHECK(m.type() == "moves" && m.get<int>("tick") == 41 && m.get<std::vector<int>>("moves") == std::vector<int>({1, 5}));
}

static void test_cata_view() {
    const Welcome w = welcome_for("cata");
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(buf);
    std::string board(512, '\0');
    board[0] = char(0x80);  // cell (0, 0) white: the most significant bit of byte 0
    std::vector<int> rule(32, 0);
    for (int i = 16; i < 32; ++i) rule[i] = 1;
    pk.pack_map(16);
    pk.pack(std::string("type")), pk.pack(std::string("tick"));
    pk.pack(std::string("tick")), pk.pack(5);
    pk.pack(std::string("budget_ms")), pk.pack(1000);
    pk.pack(std::string("seat")), pk.pack(0);
    pk.pack(std::string("size")), pk.pack(64);
    pk.pack(std::string("board")), pk.pack_bin(board.size()), pk.pack_bin_body(board.data(), board.size());
    pk.pack(std::string("rule")), pk.pack(rule);
    pk.pack(std::string("health")), pk.pack(std::vector<int>{100, 200});
    pk.pack(std::string("cells_per_hp")), pk.pack(1024);
    pk.pack(std::string("turn")), pk.pack(2);
    pk.pack(std::string("move")), pk.pack(1);
    pk.pack(std::string("moves_left")), pk.pack(2);
    pk.pack(std::string("blocked")), pk.pack(false);
    pk.pack(std::string("meditated")), pk.pack(false);
    pk.pack(std::string("opponent_meditated")), pk.pack(false);
    pk.pack(std::string("refused"));
    pk.pack_map(3);
    pk.pack(std::string("tick")), pk.pack(3);
    pk.pack(std::string("move")), pk.pack(std::vector<int>{1, 2});
    pk.pack(std::string("reason")), pk.pack(std::string("own half"));
    FrameReader r;
    const std::string f = framed(buf);
    const auto v = cata::Game::view(r.feed(f.data(), f.size()).at(0), w);
    CHECK(v.white(0, 0) && !v.white(0, 1) && !v.white(63, 63));
    CHECK(v.refused && v.refused->move == (cata::Answer{1, 2}) && v.refused->reason == "own half");
    const auto legal = v.legal_moves();
    // Black (seat 0) strikes white's entries 16-31, may meditate (lower health), and may pass.
    CHECK(legal.size() == 18 && legal.front() == (cata::Answer{cata::STRIKE, 16}));
    CHECK(legal.back() == (cata::Answer{cata::PASS, 0}) && legal[16] == (cata::Answer{cata::MEDITATE, 0}));
}

static void test_plain_answers_go_out_as_packed() {
    const std::string f = framed(moves_body<plain::Game>(7, plain::Answer::of(std::vector<int>{9, 4})));
    FrameReader r;
    const Message m = r.feed(f.data(), f.size()).at(0);
    CHECK(m.get<int>("tick") == 7 && m.get<std::vector<int>>("moves") == std::vector<int>({9, 4}));
}

static void test_retry_rule_and_backoff() {
    for (const char* code : {"shutdown", "busy", "queue_full", "too_many_connections", "locked_out"}) CHECK(comes_back(code));
    for (const char* code : {"bad_hello", "tls_required", "bad_version", "internal", "seat_taken"}) CHECK(!comes_back(code));
    Backoff b(1.0, 60.0, 7);
    const double w1 = b.next(), w2 = b.next(), w3 = b.next();
    CHECK(w1 >= 0.5 && w1 <= 1.0 && w2 >= 1.0 && w2 <= 2.0 && w3 >= 2.0 && w3 <= 4.0);
    for (int i = 0; i < 20; ++i) CHECK(b.next() <= 60.0);
    CHECK(b.next("too many wrong tokens; refused for another 90 s") >= 90.0);
    CHECK(b.next("refused for 120.5s.") >= 120.5);
    b.reset();
    const double again = b.next();
    CHECK(again >= 0.5 && again <= 1.0);
}

// The same strings as the Python SDK's pattern reads them (sdk/reconnect.py, _WAIT_HINT).
static void test_the_wait_a_refusal_names() {
    CHECK(wait_hint("too many wrong tokens; refused for another 90 s") == 90.0);
    CHECK(wait_hint("refused for 1.5s, then try") == 1.5);
    CHECK(wait_hint("wait for it: for 3 s") == 3.0);
    CHECK(wait_hint("therefor 4 s") == 4.0);
    CHECK(wait_hint("for 2 s_") == std::nullopt);
    CHECK(wait_hint("for another 7 seconds") == std::nullopt);
    CHECK(wait_hint("for 12.s") == std::nullopt);
    CHECK(wait_hint("for 5  s") == std::nullopt);
    CHECK(wait_hint("for another") == std::nullopt);
    CHECK(wait_hint("for ") == std::nullopt);
    CHECK(wait_hint("") == std::nullopt);
}

static void test_token_handover_reads_the_pipe_once_and_closes_it() {
    int fds[2];
    CHECK(::pipe(fds) == 0);
    const std::string line = "0123456789abcdef0123456789abcdef\n";
    CHECK(::write(fds[1], line.data(), line.size()) == ssize_t(line.size()));
    ::close(fds[1]);
    ::setenv("CELLARENA_TOKEN_FD", std::to_string(fds[0]).c_str(), 1);
    ::setenv("CELLARENA_TOKEN", "from-env", 1);
    CHECK(seat_token() == "0123456789abcdef0123456789abcdef");
    CHECK(::fcntl(fds[0], F_GETFD) == -1);  // closed
    ::unsetenv("CELLARENA_TOKEN_FD");
    CHECK(seat_token() == "from-env");
    ::unsetenv("CELLARENA_TOKEN");
}

static void test_options() {
    const char* argv[] = {"bot", "--port", "99999"};
    CHECK(raises([&] { Options::parse(3, const_cast<char**>(argv), "b"); }).find("1-65535") != std::string::npos);
    const char* both[] = {"bot", "--ladder", "--matches", "2"};
    CHECK(raises([&] { Options::parse(4, const_cast<char**>(both), "b"); }).find("give one of them") != std::string::npos);
    const char* tls[] = {"bot", "--tls"};
    CHECK(raises([&] { Options::parse(2, const_cast<char**>(tls), "b"); }).find("TLS proxy") != std::string::npos);
    ::setenv("CELLARENA_PORT", "4242", 1);
    const char* flags[] = {"bot", "--name", "x", "--matches", "3"};
    const Options o = Options::parse(5, const_cast<char**>(flags), "b");
    CHECK(o.port == 4242 && o.name == "x" && o.matches == 3 && !o.ladder);
    ::unsetenv("CELLARENA_PORT");
    const Message hello = [&] {
        Options t = o;
        t.token = "secret";
        FrameReader r;
        const std::string f = framed(hello_body(t.name, t.token, "rezzo"));
        return r.feed(f.data(), f.size()).at(0);
    }();
    CHECK(hello.get<int>("protocol") == 1 && hello.get<std::string>("token") == "secret" && hello.get<std::string>("game") == "rezzo");
    CHECK(hello.get<std::vector<std::string>>("accepts") == std::vector<std::string>{"redirect"});
    // A handed connection owns the seat: the token pipe is not read, and a bad descriptor is refused.
    ::setenv("CELLARENA_SOCKET_FD", "0", 1);
    const char* plain[] = {"bot"};
    CHECK(Options::parse(1, const_cast<char**>(plain), "b").handed_fd == 0 && Options::parse(1, const_cast<char**>(plain), "b").token.empty());
    ::setenv("CELLARENA_SOCKET_FD", "zero", 1);
    CHECK(raises([&] { Options::parse(1, const_cast<char**>(plain), "b"); }).find("not a descriptor number") != std::string::npos);
    ::unsetenv("CELLARENA_SOCKET_FD");
    // The back-off's first round, shortened for tests.
    CHECK(Options::parse(1, const_cast<char**>(plain), "b").backoff_first == 1.0);
    ::setenv("CELLARENA_BACKOFF_FIRST_S", "0.05", 1);
    CHECK(Options::parse(1, const_cast<char**>(plain), "b").backoff_first == 0.05);
    ::setenv("CELLARENA_BACKOFF_FIRST_S", "0", 1);
    CHECK(raises([&] { Options::parse(1, const_cast<char**>(plain), "b"); }).find("CELLARENA_BACKOFF_FIRST_S must be seconds") != std::string::npos);
    ::unsetenv("CELLARENA_BACKOFF_FIRST_S");
    int pipe_ends[2];
    CHECK(::pipe(pipe_ends) == 0);
    CHECK(raises([&] { Connection::adopt(pipe_ends[0]); }).find("not an open stream socket") != std::string::npos);
    ::close(pipe_ends[0]), ::close(pipe_ends[1]);
}

// The answer's `debug` map as the server reads it: a map of the answer decoded again.
static Message answer_of(const msgpack::sbuffer& body) {
    FrameReader r;
    const std::string f = framed(body);
    return r.feed(f.data(), f.size()).at(0);
}

static void test_debug_drawing_is_kept_to_the_caps_and_goes_with_the_answer() {
    Debug d;
    CHECK(d.empty() && answer_of(moves_body<rezzo::Game>(3, {0}, &d)).find("debug") == nullptr);
    d.mark({11, 6}, "Red", "ahead", 7);
    d.mark({1, 2}, "#ABCDEF", "a label longer than sixteen");
    d.mark({1, 2}, "no-such-colour");              // dropped: no colour
    d.mark({int64_t(1) << 31, 0}, "red");          // dropped: no cell
    d.mark({1, 2}, "red", "bad\nlabel");           // dropped: not printable
    d.mark({1, 2}, "red", "\xc3\xa9t\xc3\xa9");  // UTF-8 is printable text
    d.line({12, 6}, {0, 6}, "#00ff00");
    d.line({0, 0}, {1, 1}, "blue", 2);
    d.log("first\nsecond\x01");
    CHECK(d.dropped == 3 && d.first_problem.rfind("mark({1, 2}, \"no-such-colour\")", 0) == 0);
    const Message m = answer_of(moves_body<rezzo::Game>(41, {1}, &d));
    CHECK(m.get<int64_t>("tick") == 41 && m.get<std::vector<int>>("moves") == std::vector<int>{1});
    const msgpack::object* debug = m.find("debug");
    CHECK(debug != nullptr && debug->type == msgpack::type::MAP && debug->via.map.size == 3);
    using Map = std::map<std::string, msgpack::object>;
    const Map drawn = debug->as<Map>();
    const auto marks = drawn.at("marks").as<std::vector<Map>>();
    CHECK(marks.size() == 3);
    CHECK(marks[0].at("cell").as<std::vector<int64_t>>() == (std::vector<int64_t>{11, 6}));
    CHECK(marks[0].at("colour").as<std::string>() == "#e6194b" && marks[0].at("label").as<std::string>() == "ahead");
    CHECK(marks[0].at("agent").as<int>() == 7 && marks[1].count("agent") == 0);
    CHECK(marks[1].at("colour").as<std::string>() == "#abcdef" && marks[1].at("label").as<std::string>() == "a label longer t");
    CHECK(marks[2].at("label").as<std::string>() == "\xc3\xa9t\xc3\xa9");
    const auto lines = drawn.at("lines").as<std::vector<Map>>();
    CHECK(lines.size() == 2 && lines[0].at("to").as<std::vector<int64_t>>() == (std::vector<int64_t>{0, 6}));
    CHECK(lines[0].count("agent") == 0 && lines[1].at("agent").as<int>() == 2 && lines[1].at("colour").as<std::string>() == "#4363d8");
    CHECK(drawn.at("text").as<std::vector<std::string>>() == (std::vector<std::string>{"first", "second "}));
    // The caps: 256 marks, 64 lines, 1 KiB of text a tick; a new tick starts clean.
    d.clear();
    for (int i = 0; i < 266; ++i) d.mark({i, i}, "red");
    for (int i = 0; i < 69; ++i) d.line({0, 0}, {1, 1}, "red");
    d.log(std::string(1000, 'z'));
    d.log(std::string(100, 'z'));  // past 1 KiB in all
    d.log("last");
    CHECK(d.dropped == 3 + 10 + 5 + 1);
    const Message kept = answer_of(moves_body<rezzo::Game>(42, {1}, &d));  // owns what `capped` points into
    const Map capped = kept.find("debug")->as<Map>();
    CHECK(capped.at("marks").as<std::vector<Map>>().size() == Debug::kMaxMarks);
    CHECK(capped.at("lines").as<std::vector<Map>>().size() == Debug::kMaxLines);
    CHECK(capped.at("text").as<std::vector<std::string>>() == (std::vector<std::string>{std::string(1000, 'z'), "last"}));
    d.clear();
    CHECK(d.empty());
}

static void test_a_drawing_that_would_pass_the_frame_limit_goes_and_the_move_stays() {
    Debug d;
    std::string worst;
    for (int i = 0; i < 16; ++i) worst += "\xf0\x9f\x98\x80";  // 4 bytes a character
    for (int i = 0; i < 300; ++i) d.mark({-(int64_t(1) << 31), (int64_t(1) << 31) - 1}, "red", worst, int64_t(1) << 40);
    for (int i = 0; i < 100; ++i) d.line({0, 0}, {1, 1}, "red", int64_t(1) << 40);
    bool said = false;
    std::ostringstream err;
    auto* old = std::cerr.rdbuf(err.rdbuf());
    const Log log("b", false);
    // At the caps a drawing fits; a huge answer (a plain game may answer anything) does not leave room.
    const msgpack::sbuffer fits = answer_body<rezzo::Game>(1, {1}, d, said, log);
    d.mark({0, 0}, "red");
    const msgpack::sbuffer huge = answer_body<plain::Game>(2, plain::Answer::of(std::string(65500, 'x')), d, said, log);
    std::cerr.rdbuf(old);
    CHECK(answer_of(fits).find("debug") != nullptr && fits.size() < kMaxClientFrame);
    CHECK(answer_of(huge).find("debug") == nullptr && answer_of(huge).get<std::string>("moves").size() == 65500);
    CHECK(said && err.str().find("more than 256 marks in one tick (only the first is reported") != std::string::npos);
    CHECK(err.str().find("too large") == std::string::npos);  // said once a match
    CHECK(d.dropped == (300 - 256) + (100 - 64) + 1);  // the drawing that went counts
}

int main() {
    test_frames_split_anywhere();
    test_rezzo_view();
    test_cata_view();
    test_plain_answers_go_out_as_packed();
    test_retry_rule_and_backoff();
    test_the_wait_a_refusal_names();
    test_token_handover_reads_the_pipe_once_and_closes_it();
    test_options();
    test_debug_drawing_is_kept_to_the_caps_and_goes_with_the_answer();
    test_a_drawing_that_would_pass_the_frame_limit_goes_and_the_move_stays();
    std::cout << checks - failures << " of " << checks << " checks passed" << std::endl;
    return failures == 0 ? 0 : 1;
}
