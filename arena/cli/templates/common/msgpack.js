// A small msgpack codec: what cellarena's protocol sends and receives (maps with string keys, strings,
// integers, floats, booleans, nil, arrays and bin), with no dependency to install. Integers beyond
// 2^53 are read as (rounded) numbers; nothing in the protocol comes near that.
"use strict";

class Writer {
  constructor() {
    this.buf = Buffer.alloc(256);
    this.pos = 0;
  }

  room(n) {
    if (this.pos + n <= this.buf.length) return;
    const bigger = Buffer.alloc(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(bigger, 0, 0, this.pos);
    this.buf = bigger;
  }

  byte(b) {
    this.room(1);
    this.buf[this.pos++] = b;
  }

  bytes(data) {
    this.room(data.length);
    Buffer.from(data.buffer, data.byteOffset, data.byteLength).copy(this.buf, this.pos);
    this.pos += data.length;
  }

  head(small, small8, u8, u16, u32, n) {
    if (small !== null && n < small8) this.byte(small | n);
    else if (u8 !== null && n < 0x100) {
      this.byte(u8);
      this.byte(n);
    } else if (n < 0x10000) {
      this.byte(u16);
      this.room(2);
      this.buf.writeUInt16BE(n, this.pos);
      this.pos += 2;
    } else {
      this.byte(u32);
      this.room(4);
      this.buf.writeUInt32BE(n, this.pos);
      this.pos += 4;
    }
  }

  value(v) {
    if (v === null || v === undefined) this.byte(0xc0);
    else if (v === false) this.byte(0xc2);
    else if (v === true) this.byte(0xc3);
    else if (typeof v === "number" && Number.isInteger(v)) this.integer(v);
    else if (typeof v === "number") {
      this.byte(0xcb);
      this.room(8);
      this.buf.writeDoubleBE(v, this.pos);
      this.pos += 8;
    } else if (typeof v === "string") {
      const data = Buffer.from(v, "utf8");
      this.head(0xa0, 32, 0xd9, 0xda, 0xdb, data.length);
      this.bytes(data);
    } else if (v instanceof Uint8Array) {
      this.head(null, 0, 0xc4, 0xc5, 0xc6, v.length);
      this.bytes(v);
    } else if (Array.isArray(v)) {
      this.head(0x90, 16, null, 0xdc, 0xdd, v.length);
      for (const item of v) this.value(item);
    } else if (typeof v === "object") {
      const keys = Object.keys(v).filter((k) => v[k] !== undefined);
      this.head(0x80, 16, null, 0xde, 0xdf, keys.length);
      for (const k of keys) {
        this.value(k);
        this.value(v[k]);
      }
    } else throw new TypeError(`msgpack cannot encode a ${typeof v}`);
  }

  integer(n) {
    if (n >= 0 && n < 0x80) this.byte(n);
    else if (n < 0 && n >= -32) this.byte(n & 0xff);
    else if (n >= 0 && n <= 0xffffffff) {
      this.byte(0xce);
      this.room(4);
      this.buf.writeUInt32BE(n, this.pos);
      this.pos += 4;
    } else if (n < 0 && n >= -0x80000000) {
      this.byte(0xd2);
      this.room(4);
      this.buf.writeInt32BE(n, this.pos);
      this.pos += 4;
    } else {
      this.byte(n >= 0 ? 0xcf : 0xd3);
      this.room(8);
      if (n >= 0) this.buf.writeBigUInt64BE(BigInt(n), this.pos);
      else this.buf.writeBigInt64BE(BigInt(n), this.pos);
      this.pos += 8;
    }
  }
}

function encode(value) {
  const w = new Writer();
  w.value(value);
  return w.buf.subarray(0, w.pos);
}

function decode(buf) {
  let pos = 0;
  const need = (n) => {
    if (pos + n > buf.length) throw new Error("msgpack: the data ends in the middle of a value");
  };
  const uint = (n) => {
    need(n);
    const v = n === 1 ? buf[pos] : n === 2 ? buf.readUInt16BE(pos) : n === 4 ? buf.readUInt32BE(pos) : Number(buf.readBigUInt64BE(pos));
    pos += n;
    return v;
  };
  const int = (n) => {
    need(n);
    const v = n === 1 ? buf.readInt8(pos) : n === 2 ? buf.readInt16BE(pos) : n === 4 ? buf.readInt32BE(pos) : Number(buf.readBigInt64BE(pos));
    pos += n;
    return v;
  };
  const str = (n) => {
    need(n);
    const s = buf.toString("utf8", pos, pos + n);
    pos += n;
    return s;
  };
  const bin = (n) => {
    need(n);
    const b = new Uint8Array(buf.subarray(pos, pos + n));
    pos += n;
    return b;
  };
  const array = (n) => {
    const out = [];
    for (let i = 0; i < n; i++) out.push(value());
    return out;
  };
  const map = (n) => {
    const out = {};
    for (let i = 0; i < n; i++) {
      const k = value();
      out[String(k)] = value();
    }
    return out;
  };
  function value() {
    const b = uint(1);
    if (b < 0x80) return b;
    if (b >= 0xe0) return b - 0x100;
    if ((b & 0xf0) === 0x80) return map(b & 0x0f);
    if ((b & 0xf0) === 0x90) return array(b & 0x0f);
    if ((b & 0xe0) === 0xa0) return str(b & 0x1f);
    switch (b) {
      case 0xc0:
        return null;
      case 0xc2:
        return false;
      case 0xc3:
        return true;
      case 0xc4:
        return bin(uint(1));
      case 0xc5:
        return bin(uint(2));
      case 0xc6:
        return bin(uint(4));
      case 0xca: {
        need(4);
        const f = buf.readFloatBE(pos);
        pos += 4;
        return f;
      }
      case 0xcb: {
        need(8);
        const d = buf.readDoubleBE(pos);
        pos += 8;
        return d;
      }
      case 0xcc:
        return uint(1);
      case 0xcd:
        return uint(2);
      case 0xce:
        return uint(4);
      case 0xcf:
        return uint(8);
      case 0xd0:
        return int(1);
      case 0xd1:
        return int(2);
      case 0xd2:
        return int(4);
      case 0xd3:
        return int(8);
      case 0xd9:
        return str(uint(1));
      case 0xda:
        return str(uint(2));
      case 0xdb:
        return str(uint(4));
      case 0xdc:
        return array(uint(2));
      case 0xdd:
        return array(uint(4));
      case 0xde:
        return map(uint(2));
      case 0xdf:
        return map(uint(4));
      default:
        throw new Error(`msgpack: unsupported type byte 0x${b.toString(16)}`);
    }
  }
  const out = value();
  if (pos !== buf.length) throw new Error("msgpack: bytes left over after one value");
  return out;
}

module.exports = { encode, decode };
