#!/usr/bin/python3
"""A real safetensors file with a 200,000-tensor header and a small data region, for comparing header
parsers on the same bytes (docs/benchmarks.md, "Header parse vs the Rust crate"): MoE-style names
("model.layers.37.mlp.experts.113.gate_proj.weight"), BF16 [1,2] each (4 bytes), written the way the
reference writer would (sorted by name within one dtype, contiguous offsets, padded with spaces to 8).

  make_header_file.py OUT [tensors=200000]
"""
import json
import sys

out = sys.argv[1]
count = int(sys.argv[2]) if len(sys.argv) > 2 else 200_000
names = []
layer = 0
while len(names) < count:
    for expert in range(128):
        for proj in ("down_proj", "gate_proj", "up_proj"):
            names.append(f"model.layers.{layer}.mlp.experts.{expert}.{proj}.weight")
    layer += 1
names = sorted(names[:count])
entries = [f'"{n}":{{"dtype":"BF16","shape":[1,2],"data_offsets":[{4 * i},{4 * i + 4}]}}' for i, n in enumerate(names)]
header = ('{"__metadata__":{"format":"pt"},' + ",".join(entries) + "}").encode()
header += b" " * (-len(header) % 8)
with open(out, "wb") as f:
    f.write(len(header).to_bytes(8, "little"))
    f.write(header)
    f.write(bytes(4 * count))
print(f"{out}: {count} tensors, header {len(header)} bytes, file {8 + len(header) + 4 * count} bytes")
