package cellarena;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.nio.channels.Channel;
import java.nio.channels.SocketChannel;
import java.util.ArrayDeque;
import java.util.Deque;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLHandshakeException;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;
import org.msgpack.core.MessageBufferPacker;

/** One open connection, plain or TLS. {@link #recv()} throws Server for an {@code error}, Closed for an early end. */
public final class Connection implements AutoCloseable {
    private final Socket socket;
    private final InputStream in;
    private final OutputStream out;
    private final String address;
    private final boolean tls;
    private final Frames.Reader reader = new Frames.Reader();
    private final Deque<Message> inbox = new ArrayDeque<>();
    private boolean eof, ended, started, firstRead = true;
    private String sendFailed;

    /** Connect within 10 s; with {@code tls}, do the handshake and check the certificate is for {@code host}. */
    public Connection(String host, int port, SSLContext tls) throws ClientException {
        this.address = host + ":" + port;
        this.tls = tls != null;
        String hint = "is a cellarena server listening there? (--host/--port, CELLARENA_HOST/PORT)";
        Socket plain = new Socket();
        try {
            plain.connect(new InetSocketAddress(host, port), 10_000);
            // Small moves frames must not wait in Nagle's buffer; keep-alive finds a silently dropped queue wait.
            plain.setTcpNoDelay(true);
            plain.setKeepAlive(true);
        } catch (UnknownHostException e) {
            closeQuietly(plain);
            throw new ClientException.Connect("could not connect to " + address + ": unknown host");
        } catch (ConnectException e) {
            closeQuietly(plain);
            throw new ClientException.Connect("could not connect to " + address + ": connection refused; " + hint);
        } catch (SocketTimeoutException e) {
            closeQuietly(plain);
            throw new ClientException.Connect("could not connect to " + address + ": no answer in 10 s; " + hint);
        } catch (IOException e) {
            closeQuietly(plain);
            throw new ClientException.Connect("could not connect to " + address + ": " + e.getMessage() + "; " + hint);
        }
        Socket s = plain;
        if (tls != null) s = handshake(plain, tls, host, port);
        try {
            s.setSoTimeout(0);  // reads wait as long as the match takes
            this.socket = s;
            this.in = s.getInputStream();
            this.out = s.getOutputStream();
        } catch (IOException e) {
            closeQuietly(s);
            throw new ClientException.Connect("could not connect to " + address + ": " + e.getMessage());
        }
    }

    private Connection(Socket s, String address) throws ClientException {
        this.address = address;
        this.tls = false;
        this.socket = s;
        try {
            s.setTcpNoDelay(true);
            this.in = s.getInputStream();
            this.out = s.getOutputStream();
        } catch (IOException e) {
            closeQuietly(s);
            throw new ClientException.Connect("cannot use " + address + ": " + e.getMessage());
        }
    }

    /**
     * The connection the program which started this bot made and handed over as standard input
     * (CELLARENA_SOCKET_FD=0, docs/protocol.md): it already owns the bot's seat. Java adopts an inherited
     * socket only as standard input, System.inheritedChannel(). Connect when that is no connected socket.
     */
    public static Connection adopt() throws ClientException {
        Channel channel;
        try {
            channel = System.inheritedChannel();
        } catch (IOException e) {
            throw new ClientException.Connect("standard input is not a socket (" + e.getMessage() + ")");
        }
        if (!(channel instanceof SocketChannel) || !((SocketChannel) channel).isConnected())
            throw new ClientException.Connect("standard input is not a connected socket");
        SocketChannel socket = (SocketChannel) channel;
        String address = "the handed-over connection";
        try {
            socket.configureBlocking(true);
            if (socket.getRemoteAddress() instanceof InetSocketAddress) {
                InetSocketAddress peer = (InetSocketAddress) socket.getRemoteAddress();
                address = peer.getAddress().getHostAddress() + ":" + peer.getPort();
            }
        } catch (IOException e) {
            // the address is only for messages
        }
        return new Connection(socket.socket(), address);
    }

    /** A {@code welcome} came: a connection lost from now on is a seat that may be taken back. */
    public void started() {
        started = true;
    }

    private SSLSocket handshake(Socket plain, SSLContext tls, String host, int port) throws ClientException {
        String check = "check that --tls-ca names the CA that signed the server's certificate (without it the "
                + "system's trust store is used) and that --host is a name the certificate is for";
        try {
            SSLSocket s = (SSLSocket) tls.getSocketFactory().createSocket(plain, host, port, true);
            SSLParameters params = s.getSSLParameters();
            params.setEndpointIdentificationAlgorithm("HTTPS");  // the certificate must be for this host
            s.setSSLParameters(params);
            s.setSoTimeout(10_000);  // the handshake counts against the hello timeout
            s.startHandshake();
            return s;
        } catch (SSLHandshakeException e) {
            closeQuietly(plain);
            throw new ClientException.Tls("TLS handshake with " + address + " failed (" + e.getMessage() + "); " + check);
        } catch (SSLException e) {
            closeQuietly(plain);
            throw new ClientException.Tls("TLS handshake with " + address + " failed (" + e.getMessage()
                    + "): is that port serving TLS? If it is, " + check + "; if it is a plain server, drop --tls");
        } catch (IOException e) {
            closeQuietly(plain);
            throw new ClientException.Connect("TLS handshake with " + address + " failed: " + e.getMessage());
        }
    }

    public String address() {
        return address;
    }

    /** Send one frame. A failed send is reported by recv(): the server may have said why before it closed. */
    public void send(MessageBufferPacker body) throws ClientException {
        try {
            out.write(Frames.frame(body));
            out.flush();
        } catch (IOException e) {
            sendFailed = e.getMessage();
        }
    }

    /** The next message, waiting as long as it takes (a ladder's queue may take minutes). */
    public Message recv() throws ClientException {
        byte[] buf = new byte[1 << 16];
        while (inbox.isEmpty()) {
            if (eof) {
                close();
                String text = "the server at " + address + " closed the connection " + (ended ? "after" : "before")
                        + " the match ended" + (sendFailed != null ? " (a send failed: " + sendFailed + ")" : "");
                if (started && !ended) throw new ClientException.Lost(text);
                throw new ClientException.Closed(text);
            }
            int n;
            try {
                n = in.read(buf);
            } catch (IOException e) {
                n = -1;
            }
            if (n <= 0) {
                eof = true;
                continue;
            }
            if (firstRead) {
                firstRead = false;
                // A TLS server answers plain bytes with a TLS record, which would read as a huge frame.
                if (!tls && n >= 2 && (buf[0] == 0x15 || buf[0] == 0x16) && buf[1] == 0x03) {
                    close();
                    throw new ClientException.Tls("the server at " + address + " speaks TLS; connect with --tls "
                            + "(and --tls-ca PATH if its certificate is not signed by a CA the system trusts)");
                }
            }
            inbox.addAll(reader.feed(buf, n));
        }
        Message m = inbox.removeFirst();
        if (m.type.equals("error")) {
            close();
            throw new ClientException.Server(m.getString("code", "?"), m.getString("message", ""));
        }
        if (m.type.equals("end")) ended = true;
        return m;
    }

    @Override
    public void close() {
        closeQuietly(socket);
    }

    private static void closeQuietly(Socket s) {
        try {
            if (s != null) s.close();
        } catch (IOException e) {
            // closing: nothing left to tell
        }
    }
}
