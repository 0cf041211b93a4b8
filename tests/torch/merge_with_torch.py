#!/usr/bin/python3
"""Merges generated LoRA adapters with the peft-bridge CLI and with torch, doing what PEFT's
merge_and_unload does on the CPU (fp32 delta = (B @ A) * s, added in fp32, rounded once to the base dtype;
Conv1D transposed; embeddings: the delta rounded to the weight dtype first; DoRA: row norms), and compares.

Expected: every element of a BF16/F16 output equals torch's, or differs by 1 ulp where fp32 summation order
differs (torch's BLAS blocks the k loop; peft-bridge sums k in order); F32 outputs agree to a few ulp, but F32 DoRA,
which peft-bridge evaluates in float64: it must be the float64 result rounded (<= 1 ulp) and no further from it than
torch's float32 evaluation.
Uses Debian's python3-torch; exits 77 (skip) when it is missing. Writes safetensors itself (no extra package).

    /usr/bin/python3 tests/torch/merge_with_torch.py build/native/peft-bridge
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("SKIP: python3-torch is not installed")
    sys.exit(77)

DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}
FROM_NAME = {v: k for k, v in DTYPES.items()}


def save(path, tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        t = t.contiguous()
        raw = t.view(torch.int16).numpy().tobytes() if t.dtype in (torch.bfloat16, torch.float16) else t.numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = bytearray(data[8 + n + b:8 + n + e])
        dtype = FROM_NAME[info["dtype"]]
        if dtype in (torch.bfloat16, torch.float16):
            t = torch.frombuffer(raw, dtype=torch.int16).view(dtype)
        else:
            t = torch.frombuffer(raw, dtype=dtype)
        out[name] = t.reshape(info["shape"]).clone()
    return out


def ulp_diff(a, b):
    """Distance in units in the last place between two tensors of the same 16-bit dtype (or F32)."""
    if a.dtype == torch.float32:
        ai, bi = a.view(torch.int32).long(), b.view(torch.int32).long()
        ai = torch.where(ai < 0, -(ai & 0x7FFFFFFF), ai)
        bi = torch.where(bi < 0, -(bi & 0x7FFFFFFF), bi)
    else:
        ai, bi = a.view(torch.int16).long(), b.view(torch.int16).long()
        ai = torch.where(ai < 0, -(ai & 0x7FFF), ai)
        bi = torch.where(bi < 0, -(bi & 0x7FFF), bi)
    return (ai - bi).abs()


def peft_delta(A, B, s):
    return (B.float() @ A.float()) * s


def run_case(cli, work, name, base, adapter, config, expected, base_config=None, max_ulp=1, exact=None):
    d = os.path.join(work, name)
    os.makedirs(os.path.join(d, "adapter"))
    save(os.path.join(d, "model.safetensors"), base, {"format": "pt"})
    save(os.path.join(d, "adapter", "adapter_model.safetensors"), adapter, {"format": "pt"})
    with open(os.path.join(d, "adapter", "adapter_config.json"), "w") as f:
        json.dump(config, f)
    if base_config is not None:
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(base_config, f)
    out = os.path.join(work, name + "-merged")  # merge refuses --out inside its --base directory
    subprocess.run([cli, "merge", "--base", d, "--adapter", os.path.join(d, "adapter"), "--out", out, "--json"],
                   check=True, stdout=subprocess.DEVNULL)
    merged = load(os.path.join(out, "model.safetensors"))
    worst, same, total = 0, 0, 0
    for key, want in expected.items():
        got = merged[key]
        diff = ulp_diff(got, want)
        worst = max(worst, int(diff.max()))
        same += int((diff == 0).sum())
        total += diff.numel()
    if exact is not None:
        # Judged against the float64 result instead (F32 DoRA, which peft-bridge evaluates in float64): ours is that
        # result rounded (<= 1 ulp) and no further from it than torch's float32 evaluation anywhere in the tensor.
        for key, ref in exact.items():
            got, theirs = merged[key], expected[key]
            ours_err = float((got.double() - ref).abs().max())
            torch_err = float((theirs.double() - ref).abs().max())
            to_ref = int(ulp_diff(got, ref.to(got.dtype)).max())
            ok = to_ref <= 1 and ours_err <= torch_err
            print(f"{'ok  ' if ok else 'FAIL'} {name}: {same}/{total} elements identical to torch (worst {worst} ulp); "
                  f"against float64: ours within {to_ref} ulp, max error {ours_err:.3g} (torch's {torch_err:.3g})")
            if not ok:
                return False
        for key in base:
            if key not in expected and not torch.equal(merged[key], base[key]):
                print(f"FAIL {name}: untouched tensor {key} changed")
                return False
        return True
    for key in base:
        if key not in expected and not torch.equal(merged[key], base[key]):
            print(f"FAIL {name}: untouched tensor {key} changed")
            return False
    ok = worst <= max_ulp
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {same}/{total} elements identical to torch, worst {worst} ulp")
    return ok


def main():
    cli = sys.argv[1]
    g = torch.Generator().manual_seed(0)
    rnd = lambda *shape: torch.randn(*shape, generator=g) * 0.05
    ok = True
    with tempfile.TemporaryDirectory() as work:
        for dtype in (torch.bfloat16, torch.float16, torch.float32):
            tag = DTYPES[dtype].lower()
            r, s = 8, 16 / 8
            # Linear (LLaMA q_proj / v_proj), rank 8, alpha 16.
            base = {"model.layers.0.self_attn.q_proj.weight": rnd(96, 64).to(dtype),
                    "model.layers.0.self_attn.v_proj.weight": rnd(32, 64).to(dtype),
                    "model.norm.weight": torch.ones(64).to(dtype)}
            A, B = rnd(r, 64), rnd(96, r)
            A2, B2 = rnd(r, 64), rnd(32, r)
            adapter = {"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": A,
                       "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": B,
                       "base_model.model.model.layers.0.self_attn.v_proj.lora_A.weight": A2,
                       "base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight": B2}
            cfg = {"peft_type": "LORA", "r": r, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"]}
            exp = {"model.layers.0.self_attn.q_proj.weight": (base["model.layers.0.self_attn.q_proj.weight"].float() + peft_delta(A, B, s)).to(dtype),
                   "model.layers.0.self_attn.v_proj.weight": (base["model.layers.0.self_attn.v_proj.weight"].float() + peft_delta(A2, B2, s)).to(dtype)}
            ok &= run_case(cli, work, f"linear-{tag}", base, adapter, cfg, exp, max_ulp=1 if dtype != torch.float32 else 4)

            # GPT-2 Conv1D: weight [in, out], delta transposed; the checkpoint has no "transformer." prefix.
            base = {"h.0.attn.c_attn.weight": rnd(64, 192).to(dtype), "h.0.ln_1.weight": torch.ones(64).to(dtype)}
            A, B = rnd(r, 64), rnd(192, r)
            adapter = {"base_model.model.transformer.h.0.attn.c_attn.lora_A.weight": A,
                       "base_model.model.transformer.h.0.attn.c_attn.lora_B.weight": B}
            cfg = {"peft_type": "LORA", "r": r, "lora_alpha": 16, "target_modules": ["c_attn"], "fan_in_fan_out": True}
            exp = {"h.0.attn.c_attn.weight": (base["h.0.attn.c_attn.weight"].float() + peft_delta(A, B, s).T).to(dtype)}
            ok &= run_case(cli, work, f"conv1d-{tag}", base, adapter, cfg, exp,
                           base_config={"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"},
                           max_ulp=1 if dtype != torch.float32 else 4)

            # Embedding: PEFT rounds the delta to the weight's dtype, then adds (both paths).
            base = {"model.embed_tokens.weight": rnd(100, 64).to(dtype)}
            A, B = rnd(r, 100), rnd(64, r)
            adapter = {"base_model.model.model.embed_tokens.lora_embedding_A": A,
                       "base_model.model.model.embed_tokens.lora_embedding_B": B}
            cfg = {"peft_type": "LORA", "r": r, "lora_alpha": 16, "target_modules": ["embed_tokens"]}
            exp = {"model.embed_tokens.weight": base["model.embed_tokens.weight"] + (peft_delta(A, B, s).T).to(dtype)}
            ok &= run_case(cli, work, f"embedding-{tag}", base, adapter, cfg, exp, max_ulp=1 if dtype != torch.float32 else 4)

            # DoRA on Linear: W' = m / ||W + dW||_row * (W + dW), in fp32, rounded once.
            W = rnd(48, 64).to(dtype)
            A, B, m = rnd(r, 64), rnd(48, r), torch.rand(48, generator=g) + 0.5
            adapter = {"base_model.model.model.layers.0.mlp.up_proj.lora_A.weight": A,
                       "base_model.model.model.layers.0.mlp.up_proj.lora_B.weight": B,
                       "base_model.model.model.layers.0.mlp.up_proj.lora_magnitude_vector": m}
            cfg = {"peft_type": "LORA", "r": r, "lora_alpha": 16, "target_modules": ["up_proj"], "use_dora": True}
            V = W.float() + peft_delta(A, B, s)
            exp = {"model.layers.0.mlp.up_proj.weight": ((m / torch.linalg.norm(V, dim=1)).view(-1, 1) * V).to(dtype)}
            exact = None
            if dtype == torch.float32:  # peft-bridge evaluates F32 DoRA in float64 (kernels::DoraRowsF64)
                s32 = float(torch.tensor(s, dtype=torch.float32))
                V64 = W.double() + (B.double() @ A.double()) * s32
                exact = {"model.layers.0.mlp.up_proj.weight": (m.double() / torch.linalg.norm(V64, dim=1)).view(-1, 1) * V64}
            ok &= run_case(cli, work, f"dora-{tag}", {"model.layers.0.mlp.up_proj.weight": W}, adapter, cfg, exp,
                           max_ulp=1 if dtype != torch.float32 else 8, exact=exact)
    print("torch merge check:", "passed" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
