#!/usr/bin/python3
"""Malformed and edge-case safetensors files, for the Rust crate to judge (tests/rust_oracle/README.md).

  generate_vectors.py emit            the vectors, crate columns unfilled ("?"), to stdout
  generate_vectors.py finish FILLED   adds our expected verdict where we deliberately differ, to stdout

Deterministic: every group draws from its own random.Random seeded by the group's name, so adding a group
changes no other group's vectors. Line format: see src/main.rs (id crate digest ours reason size:crc32
label encoding).
"""
import json
import random
import re
import sys
import zlib

DTYPES = [("BOOL", 8), ("F4", 4), ("F6_E2M3", 6), ("F6_E3M2", 6), ("U8", 8), ("I8", 8), ("F8_E5M2", 8),
          ("F8_E4M3", 8), ("F8_E8M0", 8), ("F8_E4M3FNUZ", 8), ("F8_E5M2FNUZ", 8), ("I16", 16), ("U16", 16),
          ("F16", 16), ("BF16", 16), ("I32", 32), ("U32", 32), ("F32", 32), ("C64", 64), ("F64", 64),
          ("I64", 64), ("U64", 64)]
BITS = dict(DTYPES)
U64 = 2**64 - 1
VECTORS = []  # (id, label, bytes, segments or None)
COUNTS = {}


def u64(n):
    return (n & U64).to_bytes(8, "little")


def file(header, data=b"", n=None):
    header = header.encode() if isinstance(header, str) else header
    return u64(len(header) if n is None else n) + header + data


def add(group, label, data):
    """`data` is the file's bytes, or a list of (bytes, repeat count) pieces that keeps a large file's encoding short."""
    segments = None
    if isinstance(data, list):
        segments = data
        data = b"".join(piece * count for piece, count in segments)
    COUNTS[group] = COUNTS.get(group, 0) + 1
    VECTORS.append((f"{group}-{COUNTS[group] - 1:04d}", label, data, segments))


def tensor(dtype="U8", shape="[1]", offsets="[0,1]", extra=""):
    return f'{{"dtype":"{dtype}","shape":{shape},"data_offsets":{offsets}{extra}}}'


def one(value, data=b"\0", name="a"):
    """A header with one entry `name` whose JSON value is `value`."""
    return file(f'{{"{name}":{value}}}', data)


def nbytes(dtype, shape):
    n = 1
    for d in shape:
        n *= d
    return n * BITS[dtype] // 8


class Layout:
    """A valid header as parts that perturbations can change before rendering."""

    def __init__(self, rng, count, metadata=None):
        self.entries = []  # [name_literal, dtype, shape, begin, end, extra]
        pos = 0
        for i in range(count):
            dtype = rng.choice(DTYPES)[0]
            while True:
                shape = [rng.choice([0, 1, 1, 2, 3, 4, 8]) for _ in range(rng.randint(0, 3))]
                n = 1
                for d in shape:
                    n *= d
                if n * BITS[dtype] % 8 == 0:
                    break
            size = nbytes(dtype, shape)
            name = rng.choice(["w", "layer.0.weight", "lora_A", "é", "\\u00e9x", "emb_tokens", "a/b", "x y"]) + str(i)
            self.entries.append([name, dtype, shape, pos, pos + size, ""])
            pos += size
        self.metadata = metadata
        self.data_size = pos

    def render(self, rng=None, shuffle=True):
        entries = list(self.entries)
        if rng and shuffle:
            rng.shuffle(entries)
        parts = []
        if self.metadata is not None:
            parts.append('"__metadata__":' + self.metadata)
        for name, dtype, shape, b, e, extra in entries:
            shape_text = "[" + ",".join(str(d) for d in shape) + "]"
            parts.append(f'"{name}":' + tensor(dtype, shape_text, f"[{b},{e}]", extra))
        if rng and parts and rng.random() < 0.5:
            k = rng.randrange(len(parts) + 1)
            parts.insert(k, parts.pop(0)) if self.metadata is not None else None
        return "{" + ",".join(parts) + "}"

    def file(self, rng=None, data_size=None, pad=0):
        h = self.render(rng) + " " * pad
        size = self.data_size if data_size is None else data_size
        return file(h, bytes(size))


def group_prefix(rng):
    for length in range(8):
        for k in range(3):
            add("prefix", f"{length} bytes, pattern {k}", bytes(rng.randrange(256) for _ in range(length)))
    bodies = {"nothing": b"", "{}": b"{}", "valid I32": b'{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}' + bytes(16)}
    for n in [0, 1, 2, 7, 8, 60, 61, 76, 77, 10**8 - 1, 10**8, 10**8 + 1, 2**31, 2**32, 2**53, 2**63, U64, U64 - 7, U64 - 8]:
        for body_name, body in bodies.items():
            add("prefix", f"N={n} before {body_name}", u64(n) + body)
    add("prefix", "N=1e8, a 100,000,000-byte header of {} and spaces", pieces(("{}", 1), (" ", 10**8 - 2)))
    add("prefix", "N=1e8+1, full header present", pieces(("{}", 1), (" ", 10**8 - 1)))


VALID_SEEDS = []


def valid_files(rng, count):
    out = []
    for i in range(count):
        meta = rng.choice([None, '{"format":"pt"}', "{}", "null", '{"a":"1","b":"\\u0000"}'])
        layout = Layout(rng, rng.randint(0, 4), meta)
        out.append(layout.file(rng, pad=rng.choice([0, 0, 3, 7])))
    return out


def group_truncate(rng):
    for f in valid_files(rng, 6):
        for cut in range(len(f)):
            add("truncate", f"valid file of {len(f)} bytes cut to {cut}", f[:cut])
        for extra in [b"\0", b" ", b"\0\0\0", b"extra_bogus"]:
            add("truncate", f"valid file of {len(f)} bytes plus {len(extra)} trailing", f + extra)


def group_nshift(rng):
    for f in valid_files(rng, 12):
        n = int.from_bytes(f[:8], "little")
        for delta in [-9, -3, -2, -1, 1, 2, 3, 8, 16]:
            if n + delta >= 0:
                add("nshift", f"N {n} declared as {n + delta}", u64(n + delta) + f[8:])
        # The same file with the data bytes turned into spaces: a longer N reads valid JSON whitespace.
        body = f[8 + n:]
        for delta in [1, 4, len(body)]:
            if 0 < delta <= len(body):
                add("nshift", f"N {n} declared as {n + delta}, data are spaces", u64(n + delta) + f[8:8 + n] + b" " * len(body))


UTF8_SEQUENCES = [
    (b"\x7f", "DEL"), (b"\xc2\x80", "U+0080"), (b"\xdf\xbf", "U+07FF"), (b"\xe0\xa0\x80", "U+0800"),
    (b"\xef\xbf\xbf", "U+FFFF"), (b"\xef\xbf\xbe", "U+FFFE"), (b"\xef\xbb\xbf", "BOM in string"),
    (b"\xf0\x90\x80\x80", "U+10000"), (b"\xf4\x8f\xbf\xbf", "U+10FFFF"), (b"\xf4\x90\x80\x80", "U+110000"),
    (b"\xed\x9f\xbf", "U+D7FF"), (b"\xed\xa0\x80", "surrogate D800"), (b"\xed\xbf\xbf", "surrogate DFFF"),
    (b"\xee\x80\x80", "U+E000"), (b"\xc0\x80", "overlong NUL"), (b"\xc1\xbf", "overlong C1"),
    (b"\xe0\x80\xaf", "overlong 3-byte"), (b"\xe0\x9f\xbf", "overlong 3-byte max"),
    (b"\xf0\x80\x80\xaf", "overlong 4-byte"), (b"\xf0\x8f\xbf\xbf", "overlong 4-byte max"), (b"\x80", "lone continuation"),
    (b"\xbf", "lone continuation BF"), (b"\xc2", "truncated 2-byte"), (b"\xe0\xa0", "truncated 3-byte"),
    (b"\xf0\x90\x80", "truncated 4-byte"), (b"\xf5\x80\x80\x80", "F5 lead"), (b"\xf8\x88\x80\x80\x80", "5-byte form"),
    (b"\xfe", "FE"), (b"\xff", "FF"), (b"\xc2\xc2", "lead then lead"), (b"\xe2\x80\xa8", "U+2028"),
    (b"\xc3\xa9", "e acute"), (b"\xf0\x9f\x98\x80", "emoji"),
]


def group_utf8(rng):
    for seq, what in UTF8_SEQUENCES:
        add("utf8", f"{what} in a tensor name", file(b'{"a' + seq + b'":' + tensor().encode() + b"}", b"\0"))
        add("utf8", f"{what} in a metadata value", file(b'{"__metadata__":{"k":"' + seq + b'"}}'))
        add("utf8", f"{what} in a metadata key", file(b'{"__metadata__":{"' + seq + b'":"v"}}'))
        add("utf8", f"{what} outside strings", file(b'{' + seq + b'}'))
        add("utf8", f"{what} after the object", file(b'{}' + seq))
        add("utf8", f"{what} in padding before valid data", file(b'{"a":' + tensor().encode() + b"}" + seq, b"\0"))
        add("utf8", f"{what} as the dtype", file(b'{"a":{"dtype":"' + seq + b'","shape":[1],"data_offsets":[0,1]}}', b"\0"))
        add("utf8", f"{what} in an ignored field", file(b'{"a":' + tensor(extra=',"x":"').encode()[:-1] + seq + b'"}}', b"\0"))
    add("utf8", "header ends inside a 2-byte character", file(b'{}  \xc3'))
    add("utf8", "2-byte character split by N (second byte in data)", u64(3) + b'{}\xc3\xa9')


WHITESPACE = [(b" ", "space"), (b"\t", "tab"), (b"\n", "LF"), (b"\r", "CR"), (b"\x0c", "form feed"),
              (b"\x0b", "vertical tab"), (b"\x00", "NUL"), (b"\xc2\xa0", "NBSP"), (b"\xe2\x80\xa8", "U+2028"),
              (b"\xef\xbb\xbf", "BOM"), (b"\x1c", "file separator"), (b"\r\n", "CRLF"), (b"   \t\n\r" * 3, "mixed run")]


def group_whitespace(rng):
    h = '{"__metadata__":{"k":"v"},"a":{"dtype":"U8","shape":[1,2],"data_offsets":[0,2]}}'
    positions = [0] + [m.end() for m in re.finditer(r'[{}\[\]:,]|"(?:[^"\\]|\\.)*"|\d+', h)]
    for ws, what in WHITESPACE:
        for pos in positions:
            add("ws", f"{what} at byte {pos}", file(h[:pos].encode() + ws + h[pos:].encode(), b"\0\0"))
        add("ws", f"{what} inside a number", file(h.encode().replace(b"[0,2]", b"[0,1" + ws + b"2]"), b"\0\0"))
        add("ws", f"{what} inside a key", file(h.encode().replace(b'"a":', b'"a' + ws + b'":', 1), b"\0\0"))
    for pad in range(0, 17):
        add("ws", f"header padded with {pad} spaces", file('{"a":' + tensor() + "}" + " " * pad, b"\0"))
        add("ws", f"header padded with {pad} NULs", file(('{"a":' + tensor() + "}").encode() + b"\0" * pad, b"\0"))


STRING_FORMS = [
    (r"a", True), (r"\"", True), (r"\\", True), (r"\/", True), (r"\b", True), (r"\f", True), (r"\n", True),
    (r"\r", True), (r"\t", True), (r"\u0041", True), (r"\u00e9", True), (r"\u00E9", True), (r"\uFFFF", True),
    (r"\u0000", True), (r"\u001f", True), (r"\ud83d\ude00", True), (r"\uD83D\uDE00", True), (r"\ud800", False),
    (r"\udc00", False), (r"\ude00\ud83d", False), (r"\ud83dx", False), (r"\ud83d\u0041", False),
    (r"\ud83d\ud83d", False), (r"\u12", False), (r"\u12g4", False), (r"\x41", False), (r"\a", False), (r"\U0041", False),
    (r"\'", False), (r"\0", False), ("\\", False), ("\x01", False), ("\x1f", False), ("\t", False), ("\n", False),
    ("\x7f", True), ("'", True), (r"\u0022", True), (r"\u005c", True), (r"\u002f", True),
]


def group_escape(rng):
    for s, _ in STRING_FORMS:
        add("escape", f"name {s!r}", file('{"x' + s + '":' + tensor() + "}", b"\0"))
        add("escape", f"metadata value {s!r}", file('{"__metadata__":{"k":"' + s + '"}}'))
        add("escape", f"metadata key {s!r}", file('{"__metadata__":{"' + s + '":"v"}}'))
        add("escape", f"ignored field value {s!r}", file('{"a":' + tensor(extra=',"x":"' + s + '"') + "}", b"\0"))
        add("escape", f"ignored field name {s!r}", file('{"a":' + tensor(extra=',"' + s + '":1') + "}", b"\0"))
    for field, spelled in [("dtype", r"dt\u0079pe"), ("shape", r"\u0073hape"), ("data_offsets", r"data\u005foffsets")]:
        h = '{"a":' + tensor() + "}"
        add("escape", f"field {field} spelled {spelled}", file(h.replace(f'"{field}"', f'"{spelled}"'), b"\0"))
        add("escape", f"field {field} and {spelled} both", file(h.replace(f'"{field}"', f'"{spelled}":' + ('"U8"' if field == "dtype" else "[1]" if field == "shape" else "[0,1]") + f',"{field}"'), b"\0"))
    for spelled in [r"F\u00332", r"\u0046\u0033\u0032", r"F32\u0000"]:
        add("escape", f"dtype spelled {spelled}", file('{"a":{"dtype":"' + spelled + '","shape":[1],"data_offsets":[0,4]}}', bytes(4)))
    for spelled in [r"__metadata\u005f_", r"\u005f_metadata__", "__METADATA__", "__metadata_", "__metadata__ ", "_metadata_"]:
        add("escape", f"metadata key spelled {spelled!r} with a string map", file('{"' + spelled + '":{"k":"v"}}'))
        add("escape", f"metadata key spelled {spelled!r} with a tensor", file('{"' + spelled + '":' + tensor() + "}", b"\0"))
        add("escape", f"metadata key spelled {spelled!r} next to __metadata__", file('{"__metadata__":{},"' + spelled + '":{"k":"v"}}'))


TOP_LEVEL = ["", "{", "}", "[]", "[{}]", '""', "0", "null", "true", "false", "{}", "{ }", "{,}", '{"a"}', '{"a":}',
             '{"a":1}', '{"a":null}', '{"a":[]}', '{"a":"x"}', '{"a":{}}', '{"a":true}', '{"a":-1}', "{}{}", "{}[]",
             "{}}", "{{}}", '{"a":' + tensor() + ",}", '{"a":' + tensor() + "", '{"a" ' + tensor() + "}",
             "{'a':" + tensor() + "}", '{a:' + tensor() + "}", "/*c*/{}", "{}//c", '{"a":' + tensor() + "}}",
             '{"a":' + tensor()[:-1] + ",}}", '{"a":' + tensor().replace(",", ", ,", 1) + "}", "{}\0", "{}x", "NaN",
             '{"a":NaN}', '{"__metadata__":{"k":"v"},}', '{"__metadata__"}', '{"__metadata__":}', '{"":' + tensor() + "}",
             '{"a":' + tensor().replace('"U8"', "'U8'") + "}", '{"a":' + tensor().replace(":", "=", 1) + "}"]


def group_literal(rng):
    for text in TOP_LEVEL:
        add("literal", f"header {text[:60]!r}", file(text, b"\0"))
        add("literal", f"header {text[:60]!r}, no data", file(text))


VALUES = ["null", "true", "false", "0", "1", "-1", "1.5", '""', '"x"', "[]", "[1]", "[[1]]", "{}", '{"a":1}',
          "[0,1]", "[1,0]", "[-1,1]", '["0","1"]', "[0,1,2]", "[0]", "[0,1.0]", "[0,1e0]", "[0,01]", "[0,+1]",
          "[ 0 , 1 ]", "[0,1,]", "[,0,1]", '{"0":0,"1":1}', "[null,1]", "[true,1]", "[0,18446744073709551615]",
          "[0,18446744073709551616]", "[18446744073709551615,18446744073709551615]"]


def group_schema(rng):
    for dtype, bits in DTYPES:
        for count in [0, 1, 2, 3, 4, 5, 7, 8, 12]:
            exact = count * bits
            for delta in [0, -1, 1]:
                size = max(0, exact // 8 + delta)
                add("schema", f"{dtype} x{count} with {size} bytes", one(tensor(dtype, f"[{count}]", f"[0,{size}]"), bytes(size)))
        add("schema", f"{dtype} scalar", one(tensor(dtype, "[]", f"[0,{max(bits // 8, 1)}]"), bytes(max(bits // 8, 1))))
    for bad in ["f32", "F32 ", " F32", "FP32", "float32", "E8M0", "FP4", "UE8", "F8_E4M3FN", "F8_E5M2FN", "C128",
                "F128", "U4", "I4", "BF8", "F6", "F8", "F4_E2M1", "bool", "Bool", "I128", "U128", "complex64", "", "F3",
                "F8_E4M3fnuz", "F8_E4M3FNUZ\u0000", "STR", "F32,F16"]:
        add("schema", f"dtype {bad!r}", one(tensor(bad.replace("\u0000", "\\u0000"), "[1]", "[0,4]"), bytes(4)))
    for field in ["dtype", "shape", "data_offsets"]:
        for value in VALUES:
            parts = {"dtype": '"U8"', "shape": "[1]", "data_offsets": "[0,1]"}
            parts[field] = value
            add("schema", f"{field} = {value}", one("{" + ",".join(f'"{k}":{v}' for k, v in parts.items()) + "}"))
        parts = {"dtype": '"U8"', "shape": "[1]", "data_offsets": "[0,1]"}
        add("schema", f"{field} missing", one("{" + ",".join(f'"{k}":{v}' for k, v in parts.items() if k != field) + "}"))
        add("schema", f"{field} repeated", one("{" + ",".join(f'"{k}":{v}' for k, v in parts.items()) + f',"{field}":{parts[field]}' + "}"))
        add("schema", f"{field} capitalised", one("{" + ",".join(f'"{k.capitalize() if k == field else k}":{v}' for k, v in parts.items()) + "}"))
    for order in [("dtype", "shape", "data_offsets"), ("data_offsets", "shape", "dtype"), ("shape", "data_offsets", "dtype")]:
        parts = {"dtype": '"U8"', "shape": "[1]", "data_offsets": "[0,1]"}
        add("schema", f"field order {order}", one("{" + ",".join(f'"{k}":{parts[k]}' for k in order) + "}"))
    for value in VALUES + ["1e400", "-1e400", "1e-400", "1.7976931348623157e308", "1.7976931348623159e308", "-0", "0.0",
                           "-0.0", ".5", "5.", "+1", "0x10", "1e", "1e+", "1E+2", "1e-2", "00", "9" * 30, "9" * 400,
                           "-" + "9" * 30, "Infinity", "-Infinity", "undefined", '"\\u"', "[" * 3 + "]" * 3, "{" * 2,
                           '{"k":1,"k":2}', "[1,2,3,]", "[1 2]", "tru", "nul"]:
        add("schema", f"ignored field x = {value[:50]}", one(tensor(extra=f',"x":{value}')))
    add("schema", "ignored field repeated", one(tensor(extra=',"x":1,"x":2')))
    add("schema", "ignored field repeated, different types", one(tensor(extra=',"x":[],"x":{}')))


def group_numbers(rng):
    forms = ["1", "01", "-1", "-0", "1.0", "1e0", "1E0", "10e-1", " 1", "1 ", "+1", "0x1", '"1"', "1.", ".1", "1_0",
             "18446744073709551615", "18446744073709551616", "340282366920938463463374607431768211456", "4294967296",
             "4294967295", "9007199254740993", "1" + "0" * 25]
    for f in forms:
        add("numbers", f"shape dim {f}", one(tensor("U8", f"[{f}]", "[0,1]")))
        add("numbers", f"begin {f}", file('{"a":' + tensor("U8", "[0]", f"[{f},1]") + ',"b":' + tensor("U8", "[1]", "[0,1]") + "}", b"\0"))
        add("numbers", f"end {f}", one(tensor("U8", "[1]", f"[0,{f}]")))
    big = 2**64 - 1
    shapes = [[2, 2**63], [2**32, 2**32], [2**32 - 1, 2**32 + 1], [2**61], [2**61 - 1], [2**60], [2**60, 2], [0, big],
              [big, 0], [big, 2, 0], [big, 1], [1, big], [3, 6148914691236517205], [3, 6148914691236517206],
              [2**62, 4], [2**31, 2**31, 2**2], [2**21] * 3, [2**22] * 3, [255] * 8, [256] * 8, [1] * 64 + [2**60]]
    for shape in shapes:
        for dtype in ["U8", "F4", "F6_E2M3", "F64", "BOOL", "C64"]:
            add("numbers", f"{dtype} shape {shape[:4]}… rank {len(shape)}", one(tensor(dtype, "[" + ",".join(map(str, shape)) + "]", "[0,0]"), b""))
            add("numbers", f"{dtype} shape {shape[:4]}… rank {len(shape)}, offsets [0,1]", one(tensor(dtype, "[" + ",".join(map(str, shape)) + "]", "[0,1]")))
    for begin, end in [(0, big), (big, big), (big, 0), (1, 0), (0, 2**63), (2**63, 2**63 + 1)]:
        add("numbers", f"offsets [{begin},{end}]", one(tensor("U8", "[1]", f"[{begin},{end}]")))
        add("numbers", f"zero-size offsets [{begin},{end}]", one(tensor("U8", "[0]", f"[{begin},{end}]"), b""))


METADATA = ["null", "{}", '{"k":"v"}', '{"k":""}', '{"":""}', '{"k":1}', '{"k":null}', '{"k":true}', '{"k":[]}',
            '{"k":["v"]}', '{"k":{}}', '{"k":{"a":"b"}}', "[]", '[["k","v"]]', '"x"', "1", "true", "false",
            '{"k":"v",}', '{"k":"v" "l":"w"}', '{"k":"v","l":"w"}', '{"format":"pt"}', '{"format":"mlx","x":"1"}',
            '{"a":"1","a":"2"}', '{"a":"1","a":1}', '{"dtype":"U8","shape":[1],"data_offsets":[0,1]}',
            '{"dtype":"U8"}', '{"k":"v"', '{"k":1.5}', '{"k":"\\ud800"}']


def group_metadata(rng):
    t = '"a":' + tensor()
    for m in METADATA:
        add("metadata", f"__metadata__ = {m} alone", file('{"__metadata__":' + m + "}"))
        add("metadata", f"__metadata__ = {m} before a tensor", file('{"__metadata__":' + m + "," + t + "}", b"\0"))
        add("metadata", f"__metadata__ = {m} after a tensor", file("{" + t + ',"__metadata__":' + m + "}", b"\0"))
    for a, b in [("{}", "{}"), ("null", "null"), ("null", "{}"), ('{"k":"v"}', '{"k":"w"}'), ("{}", "1")]:
        add("metadata", f"__metadata__ twice: {a}, {b}", file('{"__metadata__":' + a + ',"__metadata__":' + b + "}"))
        add("metadata", f"__metadata__ twice around a tensor: {a}, {b}", file('{"__metadata__":' + a + "," + t + ',"__metadata__":' + b + "}", b"\0"))
    for count in [1, 10, 1000]:
        m = "{" + ",".join(f'"k{i}":"v{i}"' for i in range(count)) + "}"
        add("metadata", f"{count} metadata entries", file('{"__metadata__":' + m + "}"))
    add("metadata", "a 100 kB metadata value", file('{"__metadata__":{"k":"' + "x" * 100_000 + '"}}'))


def group_duplicates(rng):
    u8 = tensor()
    for h, data in [
        ('{"a":' + u8 + ',"a":' + u8 + "}", b"\0"),
        ('{"a":' + u8 + ',"a":' + tensor("U8", "[1]", "[1,2]") + "}", b"\0\0"),
        ('{"a":' + tensor("U8", "[1]", "[1,2]") + ',"a":' + u8 + "}", b"\0"),
        ('{"a":' + tensor("U8", "[1]", "[1,2]") + ',"a":' + u8 + "}", b"\0\0"),
        ('{"a":' + u8 + ',"\\u0061":' + u8 + "}", b"\0"),
        ('{"a":' + u8 + ',"b":' + tensor("U8", "[1]", "[1,2]") + ',"a":' + u8 + "}", b"\0\0"),
        ('{"a":1,"a":' + u8 + "}", b"\0"),
        ('{"a":' + u8 + ',"a":1}', b"\0"),
        ('{"a":' + u8 + ',"a":' + u8 + ',"a":' + u8 + "}", b"\0"),
        ('{"__metadata__":{"k":"1","k":"2"}}', b""),
        ('{"__metadata__":{"k":"1","\\u006b":"2"}}', b""),
        ('{"__metadata__":{"k":"1","k":"2"},"a":' + u8 + "}", b"\0"),
        ('{"__metadata__":{"k":"1","k":"2"},"a":' + u8 + "}", b"\0\0"),
        ('{"__metadata__":{"k":"1","k":"2"},"a":' + tensor("U8", "[1]", "[1,2]") + "}", b"\0\0"),
        ('{"__metadata__":{"k":"1","k":2}}', b""),
        ('{"__metadata__":{"k":"1","k":"2"}}  ', b"\0"),
        ('{"a":' + u8 + ',"a":' + u8 + "}", b""),
        ('{"a":' + tensor("F32", "[1]", "[0,4]") + ',"a":' + tensor("F4", "[3]", "[0,2]") + "}", b"\0\0"),
        ('{"a":' + tensor("U8", "[2]", "[0,2]") + ',"a":' + tensor("U8", "[2]", "[0,3]") + "}", b"\0\0\0"),
    ]:
        add("dup", f"repeated key: {h[:90]}", file(h, data))
    for i in range(40):
        layout = Layout(rng, rng.randint(2, 5))
        k = rng.randrange(len(layout.entries))
        dup = list(layout.entries[k])
        if rng.random() < 0.5:
            dup[3], dup[4] = layout.data_size, layout.data_size + (dup[4] - dup[3])
            layout.data_size = dup[4]
        layout.entries.append(dup)
        add("dup", f"layout with tensor {dup[0]} twice", layout.file(rng))


def group_forms(rng):
    for h, data in [
        ('{"a":["U8",[1],[0,1]]}', b"\0"), ('{"a":["U8",[1],[0,1],1]}', b"\0"), ('{"a":["U8",[1]]}', b"\0"),
        ('{"a":[]}', b""), ('{"a":{"dtype":{"U8":null},"shape":[1],"data_offsets":[0,1]}}', b"\0"),
        ('{"a":{"dtype":{"U8":1},"shape":[1],"data_offsets":[0,1]}}', b"\0"),
        ('{"a":{"dtype":{"U8":null,"I8":null},"shape":[1],"data_offsets":[0,1]}}', b"\0"),
        ('{"a":{"dtype":["U8"],"shape":[1],"data_offsets":[0,1]}}', b"\0"),
        ('{"a":[{"U8":null},[1],[0,1]]}', b"\0"), ('{"a":["U8",[1],[0,2]]}', b"\0"), ('{"a":["U8",[1],[1,2]]}', b"\0\0"),
        ('{"__metadata__":{"k":"v"},"a":["F32",[1],[0,4]]}', bytes(4)), ('{"a":["U8",[1],[0,1]],"b":' + tensor("U8", "[1]", "[1,2]") + "}", b"\0\0"),
        ('{"a":{"dtype":"U8","shape":{"0":1},"data_offsets":[0,1]}}', b"\0"),
        ('{"a":{"dtype":"U8","shape":[1],"data_offsets":{"0":0,"1":1}}}', b"\0"),
        ('{"a":["U8",[1],[0,1]],"a":' + tensor() + "}", b"\0"),
    ]:
        add("forms", f"serde form: {h[:90]}", file(h, data))


def group_offsets(rng):
    for i in range(700):
        layout = Layout(rng, rng.randint(1, 7), rng.choice([None, '{"format":"pt"}']))
        e = layout.entries
        kind = rng.choice(["valid", "gap", "overlap", "swap", "reverse", "shift-all", "zero-move", "end-move",
                           "begin-move", "size+1", "size-1", "data+1", "data-1", "zero-far", "same-begin"])
        data_size = layout.data_size
        k = rng.randrange(len(e))
        if kind == "gap":
            g = rng.randint(1, 3)
            for x in e[k:]:
                x[3] += g
                x[4] += g
            data_size += g
        elif kind == "overlap" and k > 0:
            for x in e[k:]:
                x[3] -= 1
                x[4] -= 1
            data_size -= 1
        elif kind == "swap":
            e[k][3], e[k][4] = e[k][4], e[k][3]
        elif kind == "reverse":
            spans = [(x[3], x[4]) for x in e][::-1]
            for x, (b, en) in zip(e, spans):
                x[3], x[4] = b, en
        elif kind == "shift-all":
            for x in e:
                x[3] += 1
                x[4] += 1
            data_size += 1
        elif kind == "zero-move":
            e.append([f"zero{i}", "F32", [0], rng.randint(0, data_size + 2), 0, ""])
            e[-1][4] = e[-1][3]
        elif kind == "zero-far":
            e.append([f"zero{i}", "U8", [2, 0], data_size + rng.randint(0, 3), 0, ""])
            e[-1][4] = e[-1][3]
        elif kind == "end-move":
            e[k][4] += rng.choice([-1, 1])
        elif kind == "begin-move":
            e[k][3] += rng.choice([-1, 1])
        elif kind in ("size+1", "size-1"):
            e[k][2] = list(e[k][2]) + [2] if kind == "size+1" else [d for d in e[k][2] if d != 1][:1] or [0]
        elif kind == "same-begin" and len(e) > 1:
            e[1][3], e[1][4] = e[0][3], e[0][3] + (e[1][4] - e[1][3])
        if kind == "data+1":
            data_size += 1
        if kind == "data-1":
            data_size = max(0, data_size - 1)
        data_size = max(data_size, 0)
        if any(x[3] < 0 or x[4] < 0 for x in e):
            continue
        add("offsets", f"{kind}: {len(e)} tensors", layout.file(rng, data_size=data_size))
    # Tensors with equal (begin, end): the crate validates them in its HashMap's random order.
    ties = [
        ("F32 [2] and F32 [1] at [0,4]", [tensor("F32", "[2]", "[0,4]"), tensor("F32", "[1]", "[0,4]")], 4),
        ("F4 [3] and U8 [2] at [0,2]", [tensor("F4", "[3]", "[0,2]"), tensor("U8", "[2]", "[0,2]")], 2),
        ("overflowing and valid at [0,1]", [tensor("U8", "[18446744073709551615,2]", "[0,1]"), tensor()], 1),
        ("three at [0,1]: bad size, misaligned, valid", [tensor("U8", "[2]", "[0,1]"), tensor("F4", "[1]", "[0,1]"), tensor()], 1),
        ("two valid at [0,1]", [tensor(), tensor("I8")], 1),
        ("zero-size F32 [0] and U8 [1] at [0,0]", [tensor("F32", "[0]", "[0,0]"), tensor("U8", "[1]", "[0,0]")], 0),
    ]
    for what, values, size in ties:
        body = ",".join(f'"t{i}":{v}' for i, v in enumerate(values))
        add("offsets", f"tie: {what}", file("{" + body + "}", bytes(size)))
        body = ",".join(f'"t{i}":{v}' for i, v in reversed(list(enumerate(values))))
        add("offsets", f"tie, reversed document order: {what}", file("{" + body + "}", bytes(size)))


def group_nesting(rng):
    for depth in [1, 2, 64, 100, 124, 125, 126, 127, 128, 200]:
        add("nesting", f"ignored field nested {depth} arrays", one(tensor(extra=',"x":' + "[" * depth + "]" * depth)))
        add("nesting", f"ignored field nested {depth} objects", one(tensor(extra=',"x":' + '{"k":' * depth + "1" + "}" * depth)))
        add("nesting", f"ignored field nested {depth} mixed", one(tensor(extra=',"x":' + '[{"k":' * (depth // 2) + "1" + "}]" * (depth // 2))))
        add("nesting", f"tensor value nested {depth} arrays", file('{"a":' + "[" * depth + "]" * depth + "}"))
        add("nesting", f"metadata value nested {depth} arrays", file('{"__metadata__":{"k":' + "[" * depth + "]" * depth + "}}"))
        add("nesting", f"unclosed {depth} arrays", one(tensor(extra=',"x":' + "[" * depth)))
    field = '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":'
    add("nesting", "ignored field nested 100,000 arrays", pieces((field, 1), ("[", 100_000), ("]", 100_000), ("}}", 1), (DATA, 1)))
    add("nesting", "ignored field nested 100,000 objects", pieces((field, 1), ('{"k":', 100_000), ("1", 1), ("}", 100_000), ("}}", 1), (DATA, 1)))
    add("nesting", "ignored field nested 10,000 mixed", pieces((field, 1), ('[{"k":', 5_000), ("1", 1), ("}]", 5_000), ("}}", 1), (DATA, 1)))


def pieces(*parts):
    """A file as (text or bytes, count) pieces after its computed 8-byte length prefix."""
    body = [(p.encode() if isinstance(p, str) else p, c) for p, c in parts]
    header = [(p, c) for p, c in body if p is not DATA]
    n = sum(len(p) * c for p, c in header)
    return [(u64(n), 1)] + [(b"\0", c) if p is DATA else (p, c) for p, c in body]


DATA = b"<data>"


def group_big(rng):
    add("big", "70,000 dimensions of 1", pieces(('{"a":{"dtype":"U8","shape":[1', 1), (",1", 69_999), ('],"data_offsets":[0,1]}}', 1), (DATA, 1)))
    tensors = ",".join(f'"t{i}":' + tensor("U8", "[1]", f"[{i},{i + 1}]") for i in range(2000))
    add("big", "2,000 tensors", file("{" + tensors + "}", bytes(2000)))
    add("big", "a 100 kB tensor name", pieces(('{"', 1), ("n", 100_000), ('":' + tensor() + "}", 1), (DATA, 1)))
    add("big", "a 100 kB escaped tensor name", pieces(('{"', 1), ("\\u00e9", 20_000), ('":' + tensor() + "}", 1), (DATA, 1)))
    add("big", "1 MB of data", file('{"a":' + tensor("F32", "[262144]", "[0,1048576]") + "}", bytes(1 << 20)))


def group_mutate(rng):
    seeds = valid_files(rng, 40)
    alphabet = b'{}[]:,"\\ 0123456789-.eEuU8F_a\x00\x80\xff\t'
    for i in range(1500):
        f = bytearray(rng.choice(seeds))
        n = int.from_bytes(f[:8], "little")
        ops = []
        for _ in range(rng.randint(1, 3)):
            op = rng.choice(["replace", "insert", "delete", "copy", "prefix"])
            pos = rng.randrange(8, max(9, 8 + n))
            if op == "replace" and pos < len(f):
                f[pos] = rng.choice(alphabet)
            elif op == "insert":
                f[pos:pos] = bytes([rng.choice(alphabet)])
                n += 1
            elif op == "delete" and pos < len(f):
                del f[pos]
                n -= 1
            elif op == "copy":
                a = rng.randrange(8, max(9, 8 + n))
                piece = f[a:a + rng.randint(1, 12)]
                f[pos:pos] = piece
                n += len(piece)
            elif op == "prefix":
                n += rng.choice([-1, 1, 0])
            ops.append(op)
        f[:8] = u64(max(n, 0))
        add("mutate", "mutated valid file: " + ",".join(ops), bytes(f))


GROUPS = [group_prefix, group_truncate, group_nshift, group_utf8, group_whitespace, group_escape, group_literal,
          group_schema, group_numbers, group_metadata, group_duplicates, group_forms, group_offsets, group_nesting,
          group_big, group_mutate]


def pct(chunk):
    return "".join(chr(b) if 0x21 <= b <= 0x7E and b not in b"%*@" else f"%{b:02X}" for b in chunk)


def encode_piece(piece, count, is_prefix):
    if is_prefix:
        assert count == 1 and len(piece) == 8
        return "@" + str(int.from_bytes(piece, "little"))
    return pct(piece) + ("" if count == 1 else f"*{count}")


def encode(data):
    """@N for the 8-byte prefix, then percent-encoded runs, long repeats as `<byte>*<count>` tokens."""
    tokens = []
    if len(data) >= 8:
        tokens.append("@" + str(int.from_bytes(data[:8], "little")))
        data = data[8:]

    pos = 0
    for m in re.finditer(rb"(.)\1{15,}", data, re.S):
        if m.start() > pos:
            tokens.append(pct(data[pos:m.start()]))
        tokens.append(pct(m.group(1)) + "*" + str(m.end() - m.start()))
        pos = m.end()
    if pos < len(data):
        tokens.append(pct(data[pos:]))
    return " ".join(tokens)


def emit():
    for g in GROUPS:
        g(random.Random(g.__name__))
    print("# Malformed and edge-case safetensors files judged by the Rust safetensors crate (tests/rust_oracle/README.md).")
    print("# Regenerate: scripts/rust-oracle.sh --regenerate. Columns (tab-separated):")
    print("# id  crate-verdict  crate-digest  ours  reason  size:crc32  label  encoding")
    print("# ours: '=' (same as the crate) or our verdict where we deliberately differ; reason names the rule")
    print("# (docs/format.md, 'Deliberate differences').")
    seen = set()
    for vid, label, data, segments in VECTORS:
        if data in seen:
            continue
        seen.add(data)
        label = label.replace("\t", " ").replace("\n", " ")
        text = " ".join(encode_piece(p, c, i == 0) for i, (p, c) in enumerate(segments)) if segments else encode(data)
        assert decode(text) == data, vid
        print("\t".join([vid, "?", "?", "?", "?", f"{len(data)}:{zlib.crc32(data):08x}", label, text]))


# --- finish: where our reader is deliberately stricter (docs/format.md "Deliberate differences") ---
LATER_THAN_JSON = {"ok", "InvalidOffset", "ValidationOverflow", "MisalignedSlice", "TensorInvalidInfo",
                   "MetadataIncompleteBuffer"}


def decode(encoding):
    out = bytearray()
    for token in encoding.split(" "):
        if token.startswith("@"):
            out += u64(int(token[1:]))
            continue
        count = 1
        if "*" in token:
            token, c = token.rsplit("*", 1)
            count = int(c)
        piece = re.sub(rb"%([0-9A-F]{2})", lambda m: bytes([int(m.group(1), 16)]), token.encode())
        out += piece * count
    return bytes(out)


def deliberate_difference(data):
    """The reason our reader rejects a header the crate's JSON stage accepts, or None."""
    n = int.from_bytes(data[:8], "little")
    text = data[8:8 + n].decode("utf-8")
    reason = []

    def pairs(kv):
        keys = [k for k, _ in kv]
        if len(set(keys)) != len(keys):
            reason.append("repeated-key")
        return dict(kv)

    top = json.loads(text, object_pairs_hook=pairs)
    for name, value in top.items():
        if name == "__metadata__":
            continue
        if isinstance(value, list) or isinstance(value.get("dtype"), dict):
            reason.append("serde-form")
    return "+".join(sorted(set(reason))) or None


def finish(path):
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if line.startswith("#") or not line:
            print(line)
            continue
        cols = line.split("\t")
        ours, reason = "=", "-"
        if cols[1] in LATER_THAN_JSON:
            why = deliberate_difference(decode(cols[7]))
            if why:
                ours, reason = "InvalidHeaderDeserialization", why
        cols[3], cols[4] = ours, reason
        print("\t".join(cols))


if __name__ == "__main__":
    if sys.argv[1:] == ["emit"]:
        emit()
    elif len(sys.argv) == 3 and sys.argv[1] == "finish":
        finish(sys.argv[2])
    else:
        sys.exit(__doc__)
