package cellarena;

import java.util.List;
import org.msgpack.value.Value;

/** The {@code welcome}: your seat and the game's settings ({@code config} as msgpack data; see each game). */
public final class Welcome {
    public final int seat;
    public final String game;
    public final long match;
    public final int players;
    public final List<String> names;
    /** Ticks per second; 0 in fast mode. */
    public final double tickRate;
    public final int budgetMs;
    /** The game's settings, a msgpack map (null if absent). */
    public final Value config;
    public final Message raw;

    public Welcome(Message m) throws ClientException.Protocol {
        raw = m;
        seat = (int) m.getLong("seat", 0);
        game = m.getString("game");
        match = m.getLong("match");
        players = m.getInt("players");
        names = m.getStrings("names");
        tickRate = m.getDouble("tick_rate");
        budgetMs = m.getInt("budget_ms");
        config = m.get("config");
    }
}
