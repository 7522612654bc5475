package cellarena;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.msgpack.value.Value;
import org.msgpack.value.ValueFactory;

/** One decoded message: a msgpack map with a string {@code type}. Typed getters name a bad field. */
public final class Message {
    public final String type;
    public final Map<Value, Value> fields;

    public Message(Map<Value, Value> fields) {
        this.fields = fields;
        Value t = fields.get(ValueFactory.newString("type"));
        this.type = t != null && t.isStringValue() ? t.asStringValue().asString() : "";
    }

    /** The field, or null when absent. */
    public Value get(String key) {
        return fields.get(ValueFactory.newString(key));
    }

    private Value need(String key) throws ClientException.Protocol {
        Value v = get(key);
        if (v == null) throw new ClientException.Protocol(type + ": the field '" + key + "' is missing");
        return v;
    }

    private ClientException.Protocol wrong(String key, String what) {
        return new ClientException.Protocol(type + ": the field '" + key + "' must be " + what);
    }

    public long getLong(String key) throws ClientException.Protocol {
        Value v = need(key);
        if (!v.isIntegerValue()) throw wrong(key, "an int");
        return v.asIntegerValue().toLong();
    }

    public long getLong(String key, long fallback) throws ClientException.Protocol {
        Value v = get(key);
        return v == null || v.isNilValue() ? fallback : getLong(key);
    }

    public int getInt(String key) throws ClientException.Protocol {
        return (int) getLong(key);
    }

    public double getDouble(String key) throws ClientException.Protocol {
        Value v = need(key);
        if (v.isFloatValue()) return v.asFloatValue().toDouble();
        if (v.isIntegerValue()) return v.asIntegerValue().toLong();
        throw wrong(key, "a number");
    }

    public boolean getBool(String key) throws ClientException.Protocol {
        Value v = need(key);
        if (!v.isBooleanValue()) throw wrong(key, "a bool");
        return v.asBooleanValue().getBoolean();
    }

    public String getString(String key) throws ClientException.Protocol {
        Value v = need(key);
        if (!v.isStringValue()) throw wrong(key, "a string");
        return v.asStringValue().asString();
    }

    public String getString(String key, String fallback) throws ClientException.Protocol {
        Value v = get(key);
        return v == null || v.isNilValue() ? fallback : getString(key);
    }

    public byte[] getBytes(String key) throws ClientException.Protocol {
        Value v = need(key);
        if (!v.isBinaryValue()) throw wrong(key, "bin");
        return v.asBinaryValue().asByteArray();
    }

    public long[] getLongs(String key) throws ClientException.Protocol {
        Value v = need(key);
        if (!v.isArrayValue()) throw wrong(key, "an array of int");
        List<Value> items = v.asArrayValue().list();
        long[] out = new long[items.size()];
        for (int i = 0; i < out.length; i++) {
            if (!items.get(i).isIntegerValue()) throw wrong(key, "an array of int");
            out[i] = items.get(i).asIntegerValue().toLong();
        }
        return out;
    }

    public List<String> getStrings(String key) throws ClientException.Protocol {
        Value v = need(key);
        if (!v.isArrayValue()) throw wrong(key, "an array of str");
        List<String> out = new ArrayList<>();
        for (Value item : v.asArrayValue()) {
            if (!item.isStringValue()) throw wrong(key, "an array of str");
            out.add(item.asStringValue().asString());
        }
        return out;
    }
}
