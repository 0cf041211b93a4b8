#!/usr/bin/python3
"""Compares peft-bridge's dtype conversions with real torch, bit for bit.

Run with Debian's python3-torch (never a dependency of the library):
    /usr/bin/python3 tests/torch/compare_with_torch.py build/native/peft-bridge

It writes a safetensors file holding every BF16 and F16 bit pattern, F32 edge cases and random F32
and F64 bit patterns, converts it with the CLI to bf16, f16 and f32, and converts the same tensors
with torch's `.to()`. Non-NaN results must be bit-identical. NaN inputs must give NaN; their bits are
reported, not required to match, because torch's vectorised CPU kernels write other NaN patterns
than its scalar c10 code, which the library follows (docs/kernels.md).
Exit status: 0 if everything non-NaN matches, 1 otherwise, 77 if torch is not installed (skip).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
except ImportError:
    print("SKIP: python3-torch / python3-numpy not installed")
    sys.exit(77)

NP = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "BF16": np.uint16}
TORCH = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
BITS = {"BF16": np.uint16, "F16": np.uint16, "F32": np.uint32, "F64": np.uint64}


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, (dtype, array) in tensors.items():
        raw = array.tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = data[8 + n + b : 8 + n + e]
        out[name] = (info["dtype"], np.frombuffer(raw, dtype=BITS[info["dtype"]]).copy())
    return out


def as_torch(dtype, bits):
    """A torch tensor holding exactly these bit patterns."""
    if dtype == "BF16":
        return torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16)
    if dtype == "F16":
        return torch.from_numpy(bits.view(np.float16))
    if dtype == "F32":
        return torch.from_numpy(bits.view(np.float32))
    return torch.from_numpy(bits.view(np.float64))


def torch_bits(t):
    if t.dtype in (torch.bfloat16, torch.float16):
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.view(torch.int32).numpy().view(np.uint32)


def is_nan(dtype, bits):
    return np.isnan(as_torch(dtype, bits).float().numpy())


def main():
    cli = sys.argv[1] if len(sys.argv) > 1 else "build/native/peft-bridge"
    rng = np.random.default_rng(20261130)
    edges = np.array([0.0, -0.0, 1.0, -1.0, 1.00390625, 1.01171875, 65504.0, 65519.99, 65520.0, 3.0e38,
                      1e-45, 1e-40, 5.96e-8, 2.98e-8, 6.1e-5, np.inf, -np.inf, np.nan], dtype=np.float32)
    random_f32 = rng.integers(0, 2**32, size=1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    weights = rng.standard_normal(1 << 20).astype(np.float32) * 0.02
    tensors = {
        "bf16_all": ("BF16", np.arange(65536, dtype=np.uint32).astype(np.uint16)),
        "f16_all": ("F16", np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)),
        "f32_edges": ("F32", edges),
        "f32_random_bits": ("F32", random_f32),
        "f32_weights": ("F32", weights),
        "f64_random_bits": ("F64", rng.integers(0, 2**63, size=1 << 18, dtype=np.uint64).view(np.float64)),
        "f64_weights": ("F64", rng.standard_normal(1 << 18) * 0.02),
    }
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "in.safetensors")
        write_safetensors(src, tensors)
        source = read_safetensors(src)
        for target in ("bf16", "f16", "f32"):
            out = os.path.join(tmp, f"out.{target}.safetensors")
            subprocess.run([cli, "convert", src, out, "--dtype", target], check=True, stdout=subprocess.DEVNULL)
            ours = read_safetensors(out)
            for name, (src_dtype, src_bits) in source.items():
                expected = torch_bits(as_torch(src_dtype, src_bits).to(TORCH[target]))
                got = ours[name][1]
                nan_in = is_nan(src_dtype, src_bits)
                same = expected == got
                mismatches = int(np.count_nonzero(~same & ~nan_in))
                nan_ok = bool(np.all(is_nan(ours[name][0], got)[nan_in]))
                nan_bits_differ = int(np.count_nonzero(~same & nan_in))
                status = "ok" if mismatches == 0 and nan_ok else "MISMATCH"
                failures += status != "ok"
                print(f"{src_dtype:>4} -> {target:<4} {name:<16} {len(src_bits):>8} values: "
                      f"{mismatches} non-NaN mismatches, NaN->NaN {'yes' if nan_ok else 'NO'} "
                      f"({int(nan_in.sum())} NaN inputs, {nan_bits_differ} with other NaN bits than torch)  {status}")
                if mismatches:
                    idx = np.flatnonzero(~same & ~nan_in)[:5]
                    for i in idx:
                        print(f"      input {src_bits[i]:#x}: torch {expected[i]:#x}, ours {got[i]:#x}")
    print(f"torch {torch.__version__}: {'all non-NaN results bit-identical' if not failures else f'{failures} mismatching rows'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
