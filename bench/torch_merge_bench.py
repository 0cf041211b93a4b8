#!/usr/bin/python3
"""PEFT's CPU merge path in torch, for comparison with bench/merge_bench.cc (same shape and thread counts).

    /usr/bin/python3 bench/torch_merge_bench.py [--runs=7] [--ranks=8,16,64] [--threads=1,2]

PEFT's default LoRA merge on CPU with fp32 adapters on a bf16 base (tuners/lora/layer.py get_delta_weight and
merge, safe_merge=False) does, per module:
    delta = (B @ A) * s                 fp32 matmul, then a separate multiply by the scaling
    W' = (W.float() + delta).to(bf16)   one fp32 add, rounded once to bf16
This script times exactly that on a 4096 x 4096 bf16 weight ("peft": the statements above, each allocating
its result as torch does), and two leaner variants of the same arithmetic for reference ("inplace_fp32":
delta.add_(W) into the delta buffer, then .to(bf16); "addmm": torch.addmm(W.float(), B, A, alpha=s), which
fuses the scaling into the matmul and so is NOT the same rounding). Times are the median and minimum of
--runs runs after one warm-up, in ms, with torch.set_num_threads(T). Exits 0 with a "skipped" line when torch
is not installed (Debian: apt-get install python3-torch).
"""
import statistics
import sys
import time


def main():
    try:
        import torch
    except ImportError:
        print("torch_merge_bench: skipped (torch is not installed; Debian: apt-get install python3-torch)")
        return 0

    args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    runs = int(args.get("runs", 7))
    ranks = [int(r) for r in args.get("ranks", "8,16,64").split(",")]
    thread_counts = [int(t) for t in args.get("threads", "1,2").split(",")]
    rows = cols = 4096

    import re

    blas = re.findall(r"BLAS_INFO=[^,\s]*", torch.__config__.show())
    print(f"torch {torch.__version__}, {blas[0] if blas else 'BLAS_INFO unknown'}, "
          f"{torch.get_num_threads()} threads available by default")
    print(f"shape {rows}x{cols} bf16 -> bf16, fp32 adapters; median (min) of {runs} runs after a warm-up, ms")

    gen = torch.Generator().manual_seed(0)
    w = (torch.randn(rows, cols, generator=gen) * 0.02).to(torch.bfloat16)

    def peft(w, a, b, s):
        delta = (b @ a) * s
        return (w.float() + delta).to(torch.bfloat16)

    def inplace_fp32(w, a, b, s):
        delta = torch.matmul(b, a)
        delta.mul_(s)
        delta.add_(w)  # w (bf16) is widened exactly; same sum as w.float() + delta
        return delta.to(torch.bfloat16)

    def addmm(w, a, b, s):
        return torch.addmm(w.float(), b, a, alpha=s).to(torch.bfloat16)

    variants = [("peft", peft), ("inplace_fp32", inplace_fp32), ("addmm", addmm)]
    print(f"{'variant':<14}{'threads':>8}{'rank':>6}{'median_ms':>11}{'min_ms':>9}{'GFLOP/s':>9}")
    for threads in thread_counts:
        torch.set_num_threads(threads)
        for rank in ranks:
            a = torch.randn(rank, cols, generator=gen) * 0.01  # lora_A [r, in]
            b = torch.randn(rows, rank, generator=gen) * 0.01  # lora_B [out, r]
            s = 16.0 / rank
            want = peft(w, a, b, s)
            for name, fn in variants:
                out = fn(w, a, b, s)  # warm-up
                if name == "inplace_fp32":
                    assert torch.equal(out, want), "inplace_fp32 must round like peft"
                times = []
                for _ in range(runs):
                    t0 = time.perf_counter()
                    out = fn(w, a, b, s)
                    times.append(time.perf_counter() - t0)
                med = statistics.median(times)
                gflops = 2.0 * rows * cols * rank / min(times) / 1e9
                print(f"{name:<14}{threads:>8}{rank:>6}{med * 1e3:>11.1f}{min(times) * 1e3:>9.1f}{gflops:>9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
