#!/usr/bin/env python3
"""Writes the plugin_ops seeds into the current directory (byte layout: fuzz_plugin_ops.c). Run in tests/fuzz/corpus/plugin_ops."""
import struct

def s(text):                       # a string: length byte, bytes
    b = text.encode()
    return bytes([len(b)]) + b

NULL = bytes([255])

def setting(name, kind=0, default=4, required=0):
    return s(name) + bytes([kind, 0, default & 0xff, required]) + NULL

def table(name, version=0, settings=(), drop=0):
    out = bytes([version]) + s(name) + s("seed table")
    out += bytes([len(settings)]) + b"".join(settings) if settings is not None else NULL
    return out + struct.pack("<H", drop)

def behaviour(n_params=2, kv=16, check_rc=0, msg=b""):
    out = bytes([n_params])
    specs = [(b"wq", 8, 8, 0), (b"wo", 8, 8, 1)] + [(b"", 0, 0, 0)] * 14
    for name, rows, cols, init in specs:
        out += name.ljust(32, b"\0") + struct.pack("<iib", rows, cols, init)
    out += bytes([4]) + struct.pack("<I", kv) + bytes([1, 1, 1, 1])
    return out + bytes([check_rc]) + msg.ljust(600, b"\0")

def use(*values):                  # per setting: given, as an int
    return b"".join(bytes([0, 1]) + struct.pack("<i", v) for v in values)

seeds = {
    "v3_one_table": bytes([0, 0, 0]) + table("fz", settings=[setting("window")])
                    + behaviour() + use(3),
    "v2_table": bytes([3, 0, 0]) + table("fz2", version=3, settings=[]) + behaviour(),
    "two_tables": bytes([0, 0, 1]) + table("fa", settings=[setting("k", 1, 0, 1)])
                  + table("fb", settings=[setting("a"), setting("b")]) + behaviour()
                  + use(1) + use(2, 5),
    "same_name_twice": bytes([0, 0, 1]) + table("fz") + table("fz") + behaviour(),
    "builtin_name": bytes([0, 0, 0]) + table("mha") + behaviour(),
    "old_version": bytes([5, 0, 0]) + table("fz") + behaviour(),
    "table_of_unknown_version": bytes([0, 0, 0]) + table("fz", version=6) + bytes([40])
                                + behaviour(),
    "check_refuses": bytes([0, 0, 0]) + table("fz", settings=[setting("window")])
                     + behaviour(check_rc=1, msg=b"'window' (3) must be even") + use(3),
    "missing_member": bytes([0, 0, 0]) + table("fz", drop=1 << 4) + behaviour(),
}
for name, data in seeds.items():
    with open(name, "wb") as f:
        f.write(data)
