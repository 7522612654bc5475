package cellarena;

import java.io.IOException;
import org.msgpack.core.MessagePacker;
import org.msgpack.value.Value;
import org.msgpack.value.ValueFactory;

/** Any game, untyped: the tick as a {@link Message}, the answer any msgpack {@link Value} (docs/protocol.md, "Games"). */
public final class Plain implements Game<Plain.View, Value> {
    private final String game;

    public Plain(String game) {
        this.game = game;
    }

    public static final class View {
        public final long tick;
        public final int budgetMs;
        /** The whole tick: read its fields with raw.getBytes("row") and the like. */
        public final Message raw;

        View(long tick, int budgetMs, Message raw) {
            this.tick = tick;
            this.budgetMs = budgetMs;
            this.raw = raw;
        }
    }

    @Override
    public String name() {
        return game;
    }

    @Override
    public View view(Message m, Welcome w) throws ClientException.Protocol {
        return new View(m.getLong("tick"), m.getInt("budget_ms"), m);
    }

    @Override
    public Value noop(View v) {
        return ValueFactory.newNil();
    }

    @Override
    public void pack(MessagePacker p, Value answer) throws IOException {
        p.packValue(answer);
    }
}
