package cellarena;

/** What went wrong, in one line. The subclasses say whether another try can help. */
public class ClientException extends Exception {
    public ClientException(String message) {
        super(message);
    }

    /** The connection could not be opened: worth another try in ladder mode. */
    public static class Connect extends ClientException {
        public Connect(String message) {
            super(message);
        }
    }

    /** The TLS handshake failed (certificate refused, not a TLS port): retrying cannot help. */
    public static class Tls extends ClientException {
        public Tls(String message) {
            super(message);
        }
    }

    /** The connection ended without {@code end} or {@code error}. */
    public static class Closed extends ClientException {
        public Closed(String message) {
            super(message);
        }
    }

    /**
     * The connection was lost after the match's {@code welcome}: a ladder keeps the seat for its grace, and
     * the bot may take it back with the same token (docs/protocol.md, "Joining a ladder").
     */
    public static class Lost extends Closed {
        public Lost(String message) {
            super(message);
        }
    }

    /** The server sent bytes this kit cannot read: retrying cannot help. */
    public static class Protocol extends ClientException {
        public Protocol(String message) {
            super(message);
        }
    }

    /** The server sent an {@code error} message; {@code code} is one of docs/protocol.md's codes. */
    public static class Server extends ClientException {
        public final String code;
        public final String serverMessage;

        public Server(String code, String message) {
            super("the server sent error " + code + ": " + message);
            this.code = code;
            this.serverMessage = message;
        }
    }
}
