"""`extract` on LLaMA-7B-shaped modules (docs/benchmarks.md, "Extract"): time and peak memory, against `cp` and
against the per-module SVD mergekit-extract-lora runs (torch.linalg.svd of ΔW in float32).

    "$(bash scripts/golden-venv.sh)" bench/extract_bench.py [--layers=1] [--runs=1] [--dtype=bf16] [--torch=1]

Writes a base and a "fine-tuned" model of LAYERS LLaMA-7B layers (q/k/v/o_proj 4096 × 4096, gate/up_proj
11008 × 4096, down_proj 4096 × 11008, and the two norms) into a temporary folder: seeded random weights, the
tuned ones differing by a rank-64 change plus small full-rank noise (a delta with a head and a tail, as a real
fine-tune's). Then times, each in its own process with its peak RSS (/usr/bin/time): `cp -r` of both models +
sync (the baseline), the native CLI's `extract` at --rank 16, 64 and 128 and --energy 0.9 (the npm CLI's too
when it has the command), and in this process, with torch's threads, torch.linalg.svd of every module's
float32 delta (mergekit's cost per module) and torch.svd_lowrank(q = r + 10, niter = 2). Prints one line per
measurement (medians of --runs runs) and, for --rank 64, the worst excess of our error over the optimal one.
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
from safetensors.torch import load_file, save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "build", "native", "peft-bridge")
NPM = [shutil.which("node") or "node", os.path.join(ROOT, "web", "bin", "peft-bridge.mjs")]
SHAPES = {"self_attn.q_proj": (4096, 4096), "self_attn.k_proj": (4096, 4096), "self_attn.v_proj": (4096, 4096),
          "self_attn.o_proj": (4096, 4096), "mlp.gate_proj": (11008, 4096), "mlp.up_proj": (11008, 4096),
          "mlp.down_proj": (4096, 11008)}
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
CONFIG = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 11008}


def arg(name, default):
    for a in sys.argv[1:]:
        if a.startswith(f"--{name}="):
            return type(default)(a.split("=", 1)[1])
    return default


def write_models(base, tuned, layers, dtype):
    g = torch.Generator().manual_seed(0)
    b, t = {}, {}
    for layer in range(layers):
        for name, (out, inp) in SHAPES.items():
            key = f"model.layers.{layer}.{name}.weight"
            w = torch.randn((out, inp), generator=g) * 0.02
            u = torch.randn((out, 64), generator=g) * 0.002
            v = torch.randn((64, inp), generator=g) * 0.02
            b[key] = w.to(DTYPES[dtype])
            t[key] = (w + u @ v + torch.randn((out, inp), generator=g) * 2e-4).to(DTYPES[dtype])
        for norm in ("input_layernorm", "post_attention_layernorm"):
            key = f"model.layers.{layer}.{norm}.weight"
            b[key] = torch.ones(4096, dtype=DTYPES[dtype])
            t[key] = (1 + 0.01 * torch.randn(4096, generator=g)).to(DTYPES[dtype])
    for folder, tensors in ((base, b), (tuned, t)):
        os.makedirs(folder)
        save_file(tensors, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(CONFIG, f)


def timed(cmd):
    """(seconds, peak RSS in MiB, stdout) of one process, measured by /usr/bin/time."""
    start = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - start
    if r.returncode != 0:
        return None
    return seconds, int(r.stderr.strip().splitlines()[-1]) / 1024, r.stdout


def main():
    layers, runs, dtype, with_torch = arg("layers", 1), arg("runs", 1), arg("dtype", "bf16"), arg("torch", 1)
    work = tempfile.mkdtemp(prefix="pb-extract-bench-")
    try:
        base, tuned = os.path.join(work, "base"), os.path.join(work, "tuned")
        write_models(base, tuned, layers, dtype)
        size = sum(os.path.getsize(os.path.join(d, "model.safetensors")) for d in (base, tuned))
        print(f"inputs: base + tuned, {layers} LLaMA-7B layer(s) (7 modules each), {dtype}, {size / 1e6:.0f} MB in all; "
              f"torch threads {torch.get_num_threads()}")

        def median(make_cmd):
            results = []
            for i in range(runs):
                out = os.path.join(work, f"out-{i}")
                shutil.rmtree(out, ignore_errors=True)
                r = timed(make_cmd(out))
                if r is None:
                    return None
                results.append(r)
                if i + 1 < runs:
                    shutil.rmtree(out, ignore_errors=True)
            return statistics.median(r[0] for r in results), max(r[1] for r in results), results[-1][2]

        base_s, base_m, _ = median(lambda out: ["sh", "-c", f"mkdir {out} && cp -r {base} {tuned} {out}/ && sync"])
        print(f"baseline cp -r + sync: {base_s:.2f} s, peak {base_m:.0f} MiB")
        kept = {}
        for label, extra in [("--rank 16", ["--rank", "16"]), ("--rank 64", ["--rank", "64"]),
                             ("--rank 128", ["--rank", "128"]), ("--energy 0.9", ["--energy", "0.9"])]:
            for who, cli in (("native", [CLI]), ("npm", NPM)):
                r = median(lambda out: [*cli, "extract", "--base", base, "--tuned", tuned, "-o", out, "--json", *extra])
                if r is None:
                    print(f"{who:6} extract {label:14}: not available")
                    continue
                s, m, stdout = r
                summary = json.loads(stdout)
                worst = max(x.get("relativeError", 0) for x in summary["modules"])
                ranks = sorted({x["rank"] for x in summary["modules"] if "rank" in x})
                print(f"{who:6} extract {label:14}: {s:6.2f} s ({s / base_s:5.1f}x cp), peak {m:5.0f} MiB, "
                      f"ranks {ranks}, worst relative error {worst:.4f}")
                if who == "native" and label == "--rank 64":
                    kept["out"] = os.path.join(work, f"out-{runs - 1}")
        if with_torch:
            b, t = load_file(os.path.join(base, "model.safetensors")), load_file(os.path.join(tuned, "model.safetensors"))
            svd_s = low_s = 0.0
            worst_excess = 0.0
            ours = load_file(os.path.join(kept["out"], "adapter_model.safetensors")) if "out" in kept else None
            for key in b:
                if b[key].dim() != 2:
                    continue
                d = t[key].float() - b[key].float()
                start = time.perf_counter()
                s = torch.linalg.svd(d, full_matrices=False)[1]
                svd_s += time.perf_counter() - start
                start = time.perf_counter()
                torch.svd_lowrank(d, q=74, niter=2)
                low_s += time.perf_counter() - start
                if ours is not None:
                    module = key[: -len(".weight")]
                    a_ = ours[f"base_model.model.{module}.lora_A.weight"].double()
                    b_ = ours[f"base_model.model.{module}.lora_B.weight"].double()
                    err = torch.linalg.norm(d.double() - b_ @ a_) / torch.linalg.norm(d.double())
                    s64 = s.double()
                    opt = torch.sqrt((s64[64:] ** 2).sum() / (s64 ** 2).sum())
                    worst_excess = max(worst_excess, (err / opt).item() - 1)
            print(f"torch.linalg.svd of every delta (float32, mergekit's step): {svd_s:.2f} s")
            print(f"torch.svd_lowrank(q=74, niter=2) of every delta: {low_s:.2f} s")
            if ours is not None:
                print(f"--rank 64: worst excess of our error over the optimal (ours / optimal - 1, factors in "
                      f"{dtype}): {worst_excess:.2e}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
