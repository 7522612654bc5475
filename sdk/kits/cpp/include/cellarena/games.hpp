// cellarena C++ kit: what a bot is shown and what it answers, per game (docs/protocol.md, "Games").
// Rezzo and C.A.T.A. are typed; every game can be played through `Plain`, which hands over the
// tick as msgpack data and sends back whatever msgpack value the bot packs.
#pragma once

#include "wire.hpp"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace cellarena {

// The `welcome`: your seat and the game's settings (`config` stays msgpack data: see each game).
struct Welcome {
    int seat = 0;
    std::string game;
    int64_t match = 0;
    int players = 0;
    std::vector<std::string> names;
    double tick_rate = 0;  // 0: fast mode
    int budget_ms = 0;
    Message raw;  // the whole message, config included

    explicit Welcome(const Message& m) : raw(m) {
        seat = m.get_or<int>("seat", 0);
        game = m.get<std::string>("game");
        match = m.get<int64_t>("match");
        players = m.get<int>("players");
        names = m.get<std::vector<std::string>>("names");
        tick_rate = m.get<double>("tick_rate");
        budget_ms = m.get<int>("budget_ms");
    }
    const msgpack::object* config() const { return raw.find("config"); }
};

// The `end`: the result and your counts.
struct End {
    int64_t ticks = 0;
    std::string result, reason;
    int rank = 0;
    std::vector<int> ranks;
    std::optional<int> winner;
    int64_t late = 0, invalid = 0, illegal = 0;

    explicit End(const Message& m) {
        ticks = m.get<int64_t>("ticks");
        result = m.get<std::string>("result");
        reason = m.get_or<std::string>("reason", "");
        rank = m.get<int>("rank");
        ranks = m.get<std::vector<int>>("ranks");
        const msgpack::object* w = m.find("winner");
        if (w && w->type != msgpack::type::NIL) winner = w->as<int>();
        late = m.get_or<int64_t>("late", 0);
        invalid = m.get_or<int64_t>("invalid", 0);
        illegal = m.get_or<int64_t>("illegal", 0);
    }
};

inline std::vector<uint8_t> bytes_of(const Message& m, const std::string& key) {
    const msgpack::object* v = m.find(key);
    if (!v || v->type != msgpack::type::BIN) throw ProtocolError(m.type() + ": the field '" + key + "' is not bin");
    const auto* p = reinterpret_cast<const uint8_t*>(v->via.bin.ptr);
    return std::vector<uint8_t>(p, p + v->via.bin.size);
}

// ------------------------------------------------------------------------------------------- Rezzo
namespace rezzo {

// Move codes.
enum Move : int { NOOP = 0, ADVANCE = 1, LEFT = 2, RIGHT = 3, BUILD = 4, HIT = 5 };
// Cell codes: unowned 0-4, OOB 7; owned codes are kind + owner (owner 0 is always you).
enum Cell : uint8_t { BLANK = 0, WIRE = 1, ELECTRON = 2, TAIL = 3, PHOTON = 4, OOB = 7,
                      AGENT = 8, FLAG = 16, GEYSER = 24, BASE = 32 };
inline uint8_t kind(uint8_t code) { return code >= 8 ? code & 0xF8 : code; }
inline int owner(uint8_t code) { return code >= 8 ? code & 7 : -1; }

struct Config {
    std::string map;
    int width = 0, height = 0, agents_per_player = 1, view_size = 13;
    int64_t max_ticks = 0;
    bool torus = false, own_base_counts = true;
};

inline Config config_of(const Welcome& w) {
    Config c;
    const msgpack::object* o = w.config();
    if (!o || o->type != msgpack::type::MAP) return c;
    for (uint32_t i = 0; i < o->via.map.size; ++i) {
        const auto& kv = o->via.map.ptr[i];
        if (kv.key.type != msgpack::type::STR) continue;
        const std::string k = kv.key.as<std::string>();
        if (k == "map") c.map = kv.val.as<std::string>();
        else if (k == "width") c.width = kv.val.as<int>();
        else if (k == "height") c.height = kv.val.as<int>();
        else if (k == "agents_per_player") c.agents_per_player = kv.val.as<int>();
        else if (k == "view_size") c.view_size = kv.val.as<int>();
        else if (k == "max_ticks") c.max_ticks = kv.val.as<int64_t>();
        else if (k == "torus") c.torus = kv.val.as<bool>();
        else if (k == "own_base_counts") c.own_base_counts = kv.val.as<bool>();
    }
    return c;
}

// A tick: your live agents and one view_size x view_size viewport each, row 0 farthest ahead, the
// agent at the bottom row's middle column (row 12, column 6).
struct View {
    int64_t tick = 0;
    int budget_ms = 0;
    int view_size = 13;
    std::vector<int> agents;
    std::vector<uint8_t> cells, damage;

    // Agent i's (i-th in `agents`) viewport cell at row r, column c.
    uint8_t cell(std::size_t i, int r, int c) const { return cells[i * view_size * view_size + r * view_size + c]; }
    uint8_t damage_at(std::size_t i, int r, int c) const { return damage[i * view_size * view_size + r * view_size + c]; }
    // Relative to the agent: `forward` 0..12 ahead, `right` -6..6 (negative is left).
    uint8_t at(std::size_t i, int forward, int right) const {
        return cell(i, view_size - 1 - forward, view_size / 2 + right);
    }
    uint8_t ahead(std::size_t i) const { return at(i, 1, 0); }
};

// One move per agent, in `agents` order.
using Answer = std::vector<int>;

struct Game {
    using View = rezzo::View;
    using Answer = rezzo::Answer;
    static constexpr const char* kName = "rezzo";
    static View view(const Message& m, const Welcome& w) {
        View v;
        v.tick = m.get<int64_t>("tick");
        v.budget_ms = m.get<int>("budget_ms");
        v.view_size = config_of(w).view_size;
        v.agents = m.get<std::vector<int>>("agents");
        v.cells = bytes_of(m, "cells");
        v.damage = bytes_of(m, "damage");
        const std::size_t plane = std::size_t(v.view_size) * v.view_size;
        if (v.cells.size() != v.agents.size() * plane || v.damage.size() != v.cells.size())
            throw ProtocolError("tick: cells/damage do not hold one viewport per agent");
        return v;
    }
    static Answer noop(const View& v) { return Answer(v.agents.size(), NOOP); }
    static void pack(msgpack::sbuffer& out, const Answer& a) { msgpack::pack(out, a); }
};

}  // namespace rezzo

// ------------------------------------------------------------------------------------------ C.A.T.A.
namespace cata {

enum Act : int { PASS = 0, STRIKE = 1, BLOCK = 2, MEDITATE = 3 };

// One move: [code, index]; index is the rule entry 0-31 (0 for pass and meditate).
struct Answer {
    int code = PASS;
    int index = 0;
    bool operator==(const Answer& o) const { return code == o.code && index == o.index; }
};

// Your previous move, when it was illegal.
struct Refused {
    int64_t tick = 0;
    Answer move;
    std::string reason;
};

// A tick: the board (packed bits, a set bit is white), the rule, both healths. Seat 0 is black, 1 white.
struct View {
    int64_t tick = 0;
    int budget_ms = 0;
    int seat = 0, size = 0;
    std::vector<uint8_t> board;
    std::array<int, 32> rule{};
    std::array<int64_t, 2> health{};
    int64_t cells_per_hp = 1;
    int turn = 1, move = 0, moves_left = 1;
    bool blocked = false, meditated = false, opponent_meditated = false;
    std::optional<Refused> refused;
    Message raw;  // the whole tick: `last_reaction` and any later field, as msgpack data

    explicit View(const Message& m) : raw(m) {}
    // Whether the cell at (row, col) is white: cell k = row * size + col is bit 7 - k % 8 of byte k / 8.
    bool white(int row, int col) const {
        const int k = row * size + col;
        return (board[k / 8] >> (7 - k % 8)) & 1;
    }
    // Every legal move now, strikes first (docs/protocol.md lists what is legal).
    std::vector<Answer> legal_moves() const {
        const int other = 1 - seat;
        std::vector<Answer> strikes, rest;
        for (int i = 0; i < 32; ++i) {
            const bool mine = (i >> 4) == seat;
            if (!mine && rule[i] == other) strikes.push_back({STRIKE, i});
            if (mine && turn > 1 && !blocked && rule[i] == other) rest.push_back({BLOCK, i});
        }
        if (turn > 1) {
            if (!meditated && health[seat] < health[other]) rest.push_back({MEDITATE, 0});
            rest.push_back({PASS, 0});
        }
        strikes.insert(strikes.end(), rest.begin(), rest.end());
        return strikes;
    }
};

struct Game {
    using View = cata::View;
    using Answer = cata::Answer;
    static constexpr const char* kName = "cata";
    static View view(const Message& m, const Welcome&) {
        View v(m);
        v.tick = m.get<int64_t>("tick");
        v.budget_ms = m.get<int>("budget_ms");
        v.seat = m.get<int>("seat");
        v.size = m.get<int>("size");
        v.board = bytes_of(m, "board");
        if (v.board.size() * 8 < std::size_t(v.size) * v.size) throw ProtocolError("tick: board too short");
        const auto rule = m.get<std::vector<int>>("rule");
        const auto health = m.get<std::vector<int64_t>>("health");
        if (rule.size() != 32 || health.size() != 2) throw ProtocolError("tick: rule or health has the wrong length");
        std::copy(rule.begin(), rule.end(), v.rule.begin());
        std::copy(health.begin(), health.end(), v.health.begin());
        v.cells_per_hp = m.get<int64_t>("cells_per_hp");
        v.turn = m.get<int>("turn");
        v.move = m.get<int>("move");
        v.moves_left = m.get<int>("moves_left");
        v.blocked = m.get<bool>("blocked");
        v.meditated = m.get<bool>("meditated");
        v.opponent_meditated = m.get<bool>("opponent_meditated");
        const msgpack::object* r = m.find("refused");
        if (r && r->type == msgpack::type::MAP) {
            Message refused(msgpack::clone(*r));
            Refused out;
            out.tick = refused.get<int64_t>("tick");
            const auto move = refused.get<std::vector<int>>("move");
            if (move.size() == 2) out.move = {move[0], move[1]};
            out.reason = refused.get_or<std::string>("reason", "");
            v.refused = out;
        }
        return v;
    }
    static Answer noop(const View&) { return {PASS, 0}; }
    static void pack(msgpack::sbuffer& out, const Answer& a) {
        msgpack::packer<msgpack::sbuffer> pk(out);
        pk.pack_array(2);
        pk.pack(a.code);
        pk.pack(a.index);
    }
};

}  // namespace cata

// -------------------------------------------------------------------------------- any game, untyped
namespace plain {

// The tick as msgpack data: read fields with view.raw.get<T>("field") (docs/protocol.md, "Games").
struct View {
    int64_t tick = 0;
    int budget_ms = 0;
    Message raw;
    explicit View(const Message& m) : raw(m) {}
};

// The `moves` value, packed: Answer::of(std::vector<int>{4}) or anything msgpack-cxx packs.
struct Answer {
    msgpack::sbuffer packed;
    template <class T>
    static Answer of(const T& value) {
        Answer a;
        msgpack::pack(a.packed, value);
        return a;
    }
};

struct Game {
    using View = plain::View;
    using Answer = plain::Answer;
    static constexpr const char* kName = "";  // give the game's name to run()
    static View view(const Message& m, const Welcome&) {
        View v(m);
        v.tick = m.get<int64_t>("tick");
        v.budget_ms = m.get<int>("budget_ms");
        return v;
    }
    static Answer noop(const View&) { return Answer::of(msgpack::type::nil_t()); }
    // The answer is already msgpack: its bytes go out as they are.
    static void pack(msgpack::sbuffer& out, const Answer& a) { out.write(a.packed.data(), a.packed.size()); }
};

}  // namespace plain

}  // namespace cellarena
