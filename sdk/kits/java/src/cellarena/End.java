package cellarena;

/** The {@code end}: your result and counts. */
public final class End {
    public final long ticks;
    public final String result;
    public final int rank;
    public final long[] ranks;
    /** The winning seat, or null for a draw. */
    public final Integer winner;
    public final String reason;
    public final long late, invalid, illegal;

    public End(Message m) throws ClientException.Protocol {
        ticks = m.getLong("ticks");
        result = m.getString("result");
        rank = m.getInt("rank");
        ranks = m.getLongs("ranks");
        winner = m.get("winner") == null || m.get("winner").isNilValue() ? null : m.getInt("winner");
        reason = m.getString("reason", "");
        late = m.getLong("late", 0);
        invalid = m.getLong("invalid", 0);
        illegal = m.getLong("illegal", 0);
    }
}
