package cellarena;

import java.io.IOException;
import org.msgpack.core.MessagePacker;

/** A game as the kit plays it: how a tick becomes a view V, and how an answer A goes on the wire. */
public interface Game<V, A> {
    String name();

    V view(Message tick, Welcome welcome) throws ClientException.Protocol;

    /** What is sent when the bot's onTick throws. */
    A noop(V view);

    /** Pack the answer as the {@code moves} field's value. */
    void pack(MessagePacker packer, A answer) throws IOException;
}
