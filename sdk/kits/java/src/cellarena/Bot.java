package cellarena;

/**
 * A bot for a game: implement onTick (and, if you like, onStart and onEnd). {@code debug} is this tick's
 * drawing for your own eyes ({@link Debug}): sent with the answer, drawn by the web player.
 */
public interface Bot<V, A> {
    default void onStart(Welcome welcome) {}

    A onTick(V view, Debug debug);

    default void onEnd(End end) {}
}
