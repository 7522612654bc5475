// cellarena C++ kit: what a bot draws for its own eyes each tick (`debug.mark`, `debug.line`,
// `debug.log` in on_tick), sent as the optional `debug` map of that tick's answer
// (docs/protocol.md#debug-drawing), kept in the replay and drawn by the web player. It mirrors the
// Python SDK's DebugLayer (cellarena/sdk/debug.py), caps included.
//
// Forgiving on purpose: drawing is for debugging, so a bad call (a colour that is no colour, a label
// that is not printable text) or one past the caps is dropped and counted, never thrown, and never
// costs the move.
#pragma once

#include <msgpack.hpp>

#include <array>
#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cellarena {

class Debug {
  public:
    // The server's caps (cellarena/sdk/protocol/debug.py): what is past them would be dropped there.
    static constexpr std::size_t kMaxMarks = 256;
    static constexpr std::size_t kMaxLines = 64;
    static constexpr std::size_t kMaxTextBytes = 1024;  // UTF-8, all of a tick's lines together
    static constexpr std::size_t kMaxLabel = 16;        // characters; a longer label is cut
    // A cell: a board cell {x, y}, or in Rezzo {row, col} of an agent's viewport (the agent at {12, 6}).
    using Cell = std::array<int64_t, 2>;

    // Colour names taken besides "#rrggbb" (the Python SDK's): {name, colour} pairs.
    static constexpr const char* kColours[][2] = {
        {"red", "#e6194b"},    {"green", "#3cb44b"}, {"blue", "#4363d8"},  {"yellow", "#ffe119"},
        {"orange", "#f58231"}, {"purple", "#911eb4"}, {"cyan", "#42d4f4"}, {"magenta", "#f032e6"},
        {"white", "#ffffff"},  {"black", "#000000"}, {"grey", "#a9a9a9"}};

    // Mark `cell` in `colour` ("#rrggbb" or a name of kColours), with an optional label of up to 16
    // characters (cut beyond); in Rezzo `agent` names whose viewport the cell is in (default: the
    // tick's first agent).
    void mark(Cell cell, const std::string& colour, const std::string& label = "",
              std::optional<int64_t> agent = std::nullopt) {
        if (marks_.size() >= kMaxMarks) return drop("more than " + std::to_string(kMaxMarks) + " marks in one tick");
        const std::string col = colour_of(colour);
        if (!on_board(cell) || col.empty())
            return drop("mark(" + show(cell) + ", \"" + colour.substr(0, 20) +
                        "\"): a cell is two ints, a colour #rrggbb or a name");
        if (!printable(label)) return drop("mark label \"" + label.substr(0, 40) + "\": a label is printable text");
        marks_.push_back(Mark{cell, col, cut(label, kMaxLabel), agent});
    }

    // A line from cell `a` to cell `b` in `colour`.
    void line(Cell a, Cell b, const std::string& colour, std::optional<int64_t> agent = std::nullopt) {
        if (lines_.size() >= kMaxLines) return drop("more than " + std::to_string(kMaxLines) + " lines in one tick");
        const std::string col = colour_of(colour);
        if (!on_board(a) || !on_board(b) || col.empty())
            return drop("line(" + show(a) + ", " + show(b) + ", \"" + colour.substr(0, 20) +
                        "\"): cells are two ints, a colour #rrggbb");
        lines_.push_back(Line{a, b, col, agent});
    }

    // One or more text lines (split at newlines) for this tick's panel; 1 KiB a tick in all.
    // Characters that are not printable become spaces.
    void log(const std::string& text) {
        std::vector<std::string> pieces;
        std::string piece;
        for (std::size_t i = 0; i < text.size(); ++i) {
            if (text[i] == '\r' || text[i] == '\n') {
                if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
                pieces.push_back(piece);
                piece.clear();
            } else {
                piece.push_back(text[i]);
            }
        }
        if (!piece.empty() || pieces.empty()) pieces.push_back(piece);  // as Python's splitlines()
        for (const std::string& raw : pieces) {
            const std::string clean = printable_copy(raw);
            if (clean.size() > text_room_) {
                drop("more than " + std::to_string(kMaxTextBytes) + " bytes of text in one tick");
                continue;
            }
            text_room_ -= clean.size();
            text_.push_back(clean);
        }
    }

    // Whether anything was drawn this tick.
    bool empty() const { return marks_.empty() && lines_.empty() && text_.empty(); }

    // Forget this tick's drawing (the loop does it before each on_tick).
    void clear() {
        marks_.clear();
        lines_.clear();
        text_.clear();
        text_room_ = kMaxTextBytes;
    }

    // This tick's `debug` map, packed as the value of an answer's "debug" key.
    void pack(msgpack::packer<msgpack::sbuffer>& pk) const {
        pk.pack_map(std::size_t(!marks_.empty()) + !lines_.empty() + !text_.empty());
        if (!marks_.empty()) {
            pk.pack(std::string("marks"));
            pk.pack_array(marks_.size());
            for (const Mark& m : marks_) {
                pk.pack_map(2 + !m.label.empty() + m.agent.has_value());
                pk.pack(std::string("cell")), pack_cell(pk, m.cell);
                pk.pack(std::string("colour")), pk.pack(m.colour);
                if (!m.label.empty()) pk.pack(std::string("label")), pk.pack(m.label);
                if (m.agent) pk.pack(std::string("agent")), pk.pack(*m.agent);
            }
        }
        if (!lines_.empty()) {
            pk.pack(std::string("lines"));
            pk.pack_array(lines_.size());
            for (const Line& l : lines_) {
                pk.pack_map(3 + l.agent.has_value());
                pk.pack(std::string("from")), pack_cell(pk, l.from);
                pk.pack(std::string("to")), pack_cell(pk, l.to);
                pk.pack(std::string("colour")), pk.pack(l.colour);
                if (l.agent) pk.pack(std::string("agent")), pk.pack(*l.agent);
            }
        }
        if (!text_.empty()) pk.pack(std::string("text")), pk.pack(text_);
    }

    // Calls dropped over the match (malformed, or past a cap), and what was wrong with the first: the
    // loop reports it once.
    int dropped = 0;
    std::string first_problem;

  private:
    struct Mark {
        Cell cell;
        std::string colour, label;
        std::optional<int64_t> agent;
    };
    struct Line {
        Cell from, to;
        std::string colour;
        std::optional<int64_t> agent;
    };

    void drop(const std::string& why) {
        ++dropped;
        if (first_problem.empty()) first_problem = why;
    }

    // Far beyond any board, and what the server takes as a cell.
    static bool on_board(const Cell& c) {
        constexpr int64_t limit = int64_t(1) << 31;
        return c[0] >= -limit && c[0] < limit && c[1] >= -limit && c[1] < limit;
    }
    static std::string show(const Cell& c) { return "{" + std::to_string(c[0]) + ", " + std::to_string(c[1]) + "}"; }
    static void pack_cell(msgpack::packer<msgpack::sbuffer>& pk, const Cell& c) {
        pk.pack_array(2);
        pk.pack(c[0]), pk.pack(c[1]);
    }

    static std::string colour_of(const std::string& value) {
        std::string lower;
        for (char ch : value) lower.push_back(char(std::tolower(static_cast<unsigned char>(ch))));
        if (lower.size() == 7 && lower[0] == '#') {
            for (std::size_t i = 1; i < 7; ++i)
                if (!std::isxdigit(static_cast<unsigned char>(lower[i]))) return "";
            return lower;
        }
        for (const auto& named : kColours)
            if (lower == named[0]) return named[1];
        return "";
    }

    // The length of the UTF-8 character at `at`, or 0 if the bytes there are none.
    static std::size_t char_length(const std::string& s, std::size_t at) {
        const auto b = static_cast<unsigned char>(s[at]);
        const std::size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xe ? 3 : (b >> 3) == 0x1e ? 4 : 0;
        if (n == 0 || at + n > s.size()) return 0;
        for (std::size_t i = 1; i < n; ++i)
            if ((static_cast<unsigned char>(s[at + i]) >> 6) != 0x2) return 0;
        return n;
    }
    // Control characters (C0, DEL, C1) are not printable, nor are bytes that are not UTF-8.
    static bool control(const std::string& s, std::size_t at, std::size_t n) {
        const auto b = static_cast<unsigned char>(s[at]);
        if (n == 1) return b < 0x20 || b == 0x7f;
        return n == 2 && b == 0xc2 && static_cast<unsigned char>(s[at + 1]) < 0xa0;
    }
    static bool printable(const std::string& s) {
        for (std::size_t at = 0; at < s.size();) {
            const std::size_t n = char_length(s, at);
            if (n == 0 || control(s, at, n)) return false;
            at += n;
        }
        return true;
    }
    static std::string printable_copy(const std::string& s) {
        std::string out;
        for (std::size_t at = 0; at < s.size();) {
            const std::size_t n = char_length(s, at);
            if (n == 0 || control(s, at, n)) {
                out.push_back(' ');
                at += n == 0 ? 1 : n;
            } else {
                out.append(s, at, n);
                at += n;
            }
        }
        return out;
    }
    // The first `chars` characters of printable UTF-8 text.
    static std::string cut(const std::string& s, std::size_t chars) {
        std::size_t at = 0;
        for (std::size_t taken = 0; at < s.size() && taken < chars; ++taken) at += char_length(s, at);
        return s.substr(0, at);
    }

    std::vector<Mark> marks_;
    std::vector<Line> lines_;
    std::vector<std::string> text_;
    std::size_t text_room_ = kMaxTextBytes;
};

}  // namespace cellarena
