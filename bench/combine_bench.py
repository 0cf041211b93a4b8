"""`combine` on LLaMA-7B-shaped adapters (docs/benchmarks.md, "Combine"): time and peak memory per method.

    "$(bash scripts/golden-venv.sh)" bench/combine_bench.py [--layers=32] [--rank=16] [--runs=3] [--dtype=bf16]

Writes two PEFT adapters (seeded random A and B, r=RANK, alpha=2·RANK, on q/k/v/o_proj (4096 × 4096) and
gate/up/down_proj (11008 × 4096, 4096 × 11008) of LAYERS layers: LLaMA-7B's modules) into a temporary folder,
then times, each in its own process with its peak RSS (/usr/bin/time): `cp -r` of both inputs + sync (the baseline), and
`peft-bridge combine` (native CLI, and the npm CLI over WASM) with cat, linear --peft-compat, svd --rank RANK,
ties --density 0.5 and dare_linear --density 0.5. Prints one line per measurement: medians of --runs runs.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from safetensors.torch import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "build", "native", "peft-bridge")
NPM = [shutil.which("node") or "node", os.path.join(ROOT, "web", "bin", "peft-bridge.mjs")]
SHAPES = {"q_proj": (4096, 4096), "k_proj": (4096, 4096), "v_proj": (4096, 4096), "o_proj": (4096, 4096),
          "gate_proj": (11008, 4096), "up_proj": (11008, 4096), "down_proj": (4096, 11008)}
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def arg(name, default):
    for a in sys.argv[1:]:
        if a.startswith(f"--{name}="):
            return type(default)(a.split("=", 1)[1])
    return default


def write_adapter(folder, seed, layers, rank, dtype):
    g = torch.Generator().manual_seed(seed)
    tensors = {}
    for layer in range(layers):
        for name, (out, inp) in SHAPES.items():
            part = "self_attn" if name.endswith(("q_proj", "k_proj", "v_proj", "o_proj")) else "mlp"
            key = f"base_model.model.model.layers.{layer}.{part}.{name}"
            tensors[f"{key}.lora_A.weight"] = (torch.randn((rank, inp), generator=g) * 0.02).to(DTYPES[dtype])
            tensors[f"{key}.lora_B.weight"] = (torch.randn((out, rank), generator=g) * 0.02).to(DTYPES[dtype])
    os.makedirs(folder)
    save_file(tensors, os.path.join(folder, "adapter_model.safetensors"), metadata={"format": "pt"})
    config = {"peft_type": "LORA", "r": rank, "lora_alpha": 2 * rank, "target_modules": list(SHAPES), "task_type": "CAUSAL_LM"}
    with open(os.path.join(folder, "adapter_config.json"), "w") as f:
        json.dump(config, f)


def timed(cmd):
    """(seconds, peak RSS in MiB) of one process, measured by /usr/bin/time: a child forked from this (large)
    Python process would report the parent's RSS as its own peak (Linux counts it from the fork)."""
    start = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - start
    if r.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}: {r.stderr[:500]}")
    return seconds, int(r.stderr.strip().splitlines()[-1]) / 1024


def main():
    layers, rank, runs, dtype = arg("layers", 32), arg("rank", 16), arg("runs", 3), arg("dtype", "bf16")
    work = tempfile.mkdtemp(prefix="pb-combine-bench-")
    try:
        a, b = os.path.join(work, "a"), os.path.join(work, "b")
        write_adapter(a, 1, layers, rank, dtype)
        write_adapter(b, 2, layers, rank, dtype)
        size = sum(os.path.getsize(os.path.join(d, "adapter_model.safetensors")) for d in (a, b))
        print(f"inputs: 2 adapters, {layers} layers x 7 modules, r={rank}, {dtype}, {size / 1e6:.1f} MB in all")

        def median(make_cmd):
            results = []
            for i in range(runs):
                out = os.path.join(work, f"out-{i}")
                shutil.rmtree(out, ignore_errors=True)
                results.append(timed(make_cmd(out)))
                shutil.rmtree(out, ignore_errors=True)
            return statistics.median(r[0] for r in results), max(r[1] for r in results)

        base_s, base_m = median(lambda out: ["sh", "-c", f"mkdir {out} && cp -r {a} {b} {out}/ && sync"])
        print(f"baseline cp -r + sync: {base_s:.2f} s, peak {base_m:.0f} MiB")
        for label, extra in [("cat", []), ("linear --peft-compat", ["--method", "linear", "--peft-compat"]),
                             ("svd --rank %d" % rank, ["--method", "svd", "--rank", str(rank)]),
                             ("ties --density 0.5", ["--method", "ties", "--density", "0.5"]),
                             ("dare_linear --density 0.5", ["--method", "dare_linear", "--density", "0.5"])]:
            for who, cli in (("native", [CLI]), ("npm", NPM)):
                s, m = median(lambda out: [*cli, "combine", a, b, "--weights", "0.7,0.3", "-o", out, "-q", *extra])
                print(f"{who:6} combine {label:28}: {s:6.2f} s ({s / base_s:5.1f}x cp), peak {m:5.0f} MiB")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
