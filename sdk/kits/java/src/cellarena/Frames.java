package cellarena;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.Value;

/** Frames: a 4-byte big-endian length, then one msgpack map (docs/protocol.md, "Frames"). */
public final class Frames {
    public static final int PROTOCOL = 1;
    /** A client frame holds at most this many body bytes. */
    public static final int MAX_CLIENT_FRAME = 64 * 1024;
    /** A server frame holds at most this many body bytes. */
    public static final int MAX_SERVER_FRAME = 64 * 1024 * 1024;

    private Frames() {}

    /** The packed body as a frame; refused when over the client limit. */
    public static byte[] frame(MessageBufferPacker body) throws IOException {
        body.flush();
        byte[] bytes = body.toByteArray();
        if (bytes.length > MAX_CLIENT_FRAME)
            throw new IOException("a client frame may hold " + MAX_CLIENT_FRAME + " bytes, this one " + bytes.length);
        byte[] out = new byte[bytes.length + 4];
        out[0] = (byte) (bytes.length >>> 24);
        out[1] = (byte) (bytes.length >>> 16);
        out[2] = (byte) (bytes.length >>> 8);
        out[3] = (byte) bytes.length;
        System.arraycopy(bytes, 0, out, 4, bytes.length);
        return out;
    }

    /** Bytes in as they arrive, whole messages out. */
    public static final class Reader {
        private final ByteArrayOutputStream buffer = new ByteArrayOutputStream();

        public List<Message> feed(byte[] data, int length) throws ClientException.Protocol {
            buffer.write(data, 0, length);
            byte[] all = buffer.toByteArray();
            List<Message> out = new ArrayList<>();
            int at = 0;
            while (all.length - at >= 4) {
                long size = ((all[at] & 0xFFL) << 24) | ((all[at + 1] & 0xFF) << 16) | ((all[at + 2] & 0xFF) << 8) | (all[at + 3] & 0xFF);
                if (size > MAX_SERVER_FRAME)
                    throw new ClientException.Protocol("a server frame of " + size + " bytes is over the limit");
                if (all.length - at - 4 < size) break;
                Value value;
                try (MessageUnpacker u = MessagePack.newDefaultUnpacker(all, at + 4, (int) size)) {
                    value = u.unpackValue();
                } catch (IOException | RuntimeException e) {
                    throw new ClientException.Protocol("a server frame is not valid msgpack (" + e.getMessage() + ")");
                }
                if (!value.isMapValue()) throw new ClientException.Protocol("a server frame is not a map");
                Message m = new Message(value.asMapValue().map());
                if (m.type.isEmpty()) throw new ClientException.Protocol("a server message has no string 'type'");
                out.add(m);
                at += 4 + (int) size;
            }
            buffer.reset();
            buffer.write(all, at, all.length - at);
            return out;
        }
    }
}
