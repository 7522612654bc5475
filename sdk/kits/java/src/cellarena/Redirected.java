package cellarena;

/** A ladder sent this bot's match elsewhere (docs/protocol.md, "redirect"): another address, not a failure. */
public final class Redirected extends Exception {
    private static final long serialVersionUID = 1L;
    public final String host, token;
    public final int port;
    public final boolean tls;

    public Redirected(Message m) throws ClientException.Protocol {
        super("redirected");
        host = m.getString("host");
        port = (int) m.getLong("port");
        token = m.getString("token");
        tls = m.getBool("tls");
        if (host.isEmpty() || port < 1 || port > 65535)
            throw new ClientException.Protocol("redirect: no host, or a port outside 1-65535 (" + port + ")");
    }
}
