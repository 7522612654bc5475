package cellarena;

/** A bot for a game: implement onTick (and, if you like, onStart and onEnd). */
public interface Bot<V, A> {
    default void onStart(Welcome welcome) {}

    A onTick(V view);

    default void onEnd(End end) {}
}
