#!/usr/bin/env python3
"""Opens a typeshard checkpoint from Python and compares it with the arrays' values.

Usage: checkpoint_numpy.py <unit_checkpoint_roundtrip executable> <work directory>

Runs the executable's "[.python-fixture]" case, which saves arrays a, b, c (float32,
float64, int64) at step 42 under <work>/checkpoint and writes each array's values to
<work>/<name>.bin. Then, with numpy: reads index.json, parses each safetensors file by hand
(8-byte little-endian header length, JSON header, raw data), checks every tensor's CRC-32
against the file's __metadata__ and assembles each global array from its boxes; with the
`safetensors` package, if importable, loads every file with safetensors.numpy.load_file as
well. Both must equal the values element for element. Exits 77 (CTest's skip) when numpy is
missing.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import zlib

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not installed (pip install numpy; optionally safetensors)")
    sys.exit(77)

try:
    from safetensors.numpy import load_file
except ImportError:
    load_file = None

DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64,
          "U8": np.uint8, "I8": np.int8, "I16": np.int16, "U16": np.uint16,
          "U32": np.uint32, "U64": np.uint64}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        buf = data[begin:end]
        want = int(meta["crc32:" + name], 16)
        if zlib.crc32(buf) != want:
            raise SystemExit(f"FAIL: {path}: tensor {name} does not match its CRC-32")
        dt = np.dtype(DTYPES[t["dtype"]]).newbyteorder("<")
        tensors[name] = np.frombuffer(buf, dtype=dt).reshape(t["shape"])
    return tensors


def assemble(directory, index, name, reader):
    entry = index["arrays"][name]
    out = np.zeros(entry["shape"], dtype=DTYPES[entry["dtype"]])
    filled = np.zeros(entry["shape"], dtype=bool)
    files = {}
    for s in entry["shards"]:
        if s["file"] not in files:
            files[s["file"]] = reader(os.path.join(directory, s["file"]))
        box = tuple(slice(a, b) for a, b in zip(s["start"], s["stop"]))
        out[box] = files[s["file"]][s["tensor"]]
        if filled[box].any():
            raise SystemExit(f"FAIL: {name}: shard {s['tensor']} overlaps another")
        filled[box] = True
    if not filled.all():
        raise SystemExit(f"FAIL: {name}: the shards do not cover the array")
    return out


def main():
    exe, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ, TYPESHARD_CHECKPOINT_FIXTURE=work)
    subprocess.run([exe, "[.python-fixture]"], env=env, check=True, stdout=subprocess.DEVNULL)
    directory = os.path.join(work, "checkpoint", "42")
    with open(os.path.join(directory, "index.json")) as f:
        index = json.load(f)
    assert index["step"] == 42, index["step"]
    assert sorted(index["arrays"]) == ["a", "b", "c"], sorted(index["arrays"])
    readers = [("numpy", read_safetensors)]
    if load_file is not None:
        readers.append(("safetensors", load_file))
    else:
        print("note: the safetensors package is not installed: checked with numpy only")
    for name in ("a", "b", "c"):
        entry = index["arrays"][name]
        expected = np.fromfile(os.path.join(work, name + ".bin"),
                               dtype=DTYPES[entry["dtype"]]).reshape(entry["shape"])
        for label, reader in readers:
            got = assemble(directory, index, name, reader)
            if not np.array_equal(got, expected):
                raise SystemExit(f"FAIL: {name} read with {label} differs from the values")
            print(f"{name}: {entry['dtype']} {entry['shape']} {entry['spec']} "
                  f"({len(entry['shards'])} shards) equal with {label}")
    shutil.rmtree(work, ignore_errors=True)
    print("OK")


if __name__ == "__main__":
    main()
