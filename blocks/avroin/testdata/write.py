#!/usr/bin/env python3
"""Writes Avro container files with Apache Avro's own Python implementation
(Debian's python3-avro, with python3-snappy and python3-zstandard for those
codecs), and expected.json: for each file, the key and value fields to read
and every record's key and value as spangle must read them (hex)."""
import json
import os
import random
import struct
import sys

import avro.datafile
import avro.io
import avro.schema

out = sys.argv[1]
rnd = random.Random(42)
expected = {}

KV = avro.schema.parse(json.dumps({
    "type": "record", "name": "KV", "namespace": "spangle.test",
    "fields": [{"name": "key", "type": "bytes"}, {"name": "value", "type": "string"}]}))

TYPED = avro.schema.parse(json.dumps({
    "type": "record", "name": "Typed",
    "fields": [
        {"name": "tags", "type": {"type": "array", "items": "int"}},
        {"name": "id", "type": "long"},
        {"name": "small", "type": "int"},
        {"name": "name", "type": ["null", "string"]},
        {"name": "score", "type": "double"},
        {"name": "flag", "type": "boolean"},
        {"name": "code", "type": {"type": "fixed", "name": "Code", "size": 4}},
        {"name": "nested", "type": {"type": "record", "name": "N", "fields": [{"name": "x", "type": "string"}]}},
    ]}))


def write(name, schema, codec, records):
    with open(os.path.join(out, name), "wb") as f:
        w = avro.datafile.DataFileWriter(f, avro.io.DatumWriter(), schema, codec=codec)
        for r in records:
            w.append(r)
        w.close()


def text(n):
    return "".join(rnd.choice("abcdefghijklmnopqrstuvwxyzäöü€日本 ") for _ in range(n))


for codec in ["null", "deflate", "snappy", "zstandard"]:
    recs = []
    for i in range(3000):
        k = bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 24)))
        recs.append({"key": k, "value": text(rnd.randint(0, 120))})
    name = "kv-%s.avro" % codec
    write(name, KV, codec, recs)
    expected[name] = {"key": "key", "value": "value",
                      "records": [[r["key"].hex(), r["value"].encode("utf-8").hex()] for r in recs]}

recs = []
for i in range(500):
    recs.append({"tags": [i, i + 1], "id": i * 1000003 - 250000000, "small": -i,
                 "name": None if i % 7 == 0 else "name-%d" % i, "score": i / 3.0,
                 "flag": i % 2 == 0, "code": struct.pack(">I", i * 7), "nested": {"x": "n%d" % i}})
write("typed.avro", TYPED, "deflate", recs)
expected["typed.avro#id,name"] = {"file": "typed.avro", "key": "id", "value": "name", "records": [
    [struct.pack(">q", r["id"]).hex(), (r["name"] or "").encode().hex()] for r in recs]}
expected["typed.avro#code,score"] = {"file": "typed.avro", "key": "code", "value": "score", "records": [
    [r["code"].hex(), struct.pack(">d", r["score"]).hex()] for r in recs]}
expected["typed.avro#small,flag"] = {"file": "typed.avro", "key": "small", "value": "flag", "records": [
    [struct.pack(">i", r["small"]).hex(), (b"\x01" if r["flag"] else b"\x00").hex()] for r in recs]}

with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(expected, f)
