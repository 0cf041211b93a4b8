"""Our tools against the real peers, in one run on the same files (docs/benchmarks.md, "Against the peers").

    "$(bash scripts/golden-venv.sh)" bench/peer_bench.py [--layers=8] [--hidden=1024] [--runs=5] [--threads=1]

1. Merge: a LLaMA-shaped bf16 model built by transformers from a config (seeded weights, no download) and a PEFT
   LoRA (r=16 on every linear of the decoder, B seeded non-zero), saved with save_pretrained. Then, each in its
   own process, timed wall-clock with its peak RSS (wait4):
     - PEFT: AutoModelForCausalLM.from_pretrained(bf16) + PeftModel.from_pretrained + merge_and_unload +
       save_pretrained(safe_serialization), torch.set_num_threads(THREADS);
     - ours: build/native/peft-bridge merge --base --adapter -o (one thread: the CLI merges on one core).
   Both outputs are compared tensor by tensor (equal count and max |difference|).
2. Remote inspect against the local Hub stand-in (tests/hub/server.mjs) of the same model's repo, and of a
   repo whose one file has a 200,000-tensor header (bench/make_header_file.py):
     - huggingface_hub.get_safetensors_metadata in a warm process (per call), and as a fresh process (import
       included);
     - ours: build/native/peft-bridge inspect hf://owner/repo/model.safetensors --json, a fresh process each time.
Prints one line per measurement; medians of --runs runs.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "build", "native", "peft-bridge")


def timed(argv, env=None):
    """Runs argv under /usr/bin/time; returns (seconds, peak RSS in MiB, stdout). Fails loudly on a non-zero exit.
    (wait4's ru_maxrss would count this torch-laden process's own RSS, which a child keeps across exec.)"""
    with tempfile.NamedTemporaryFile("r") as rss:
        start = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name] + argv, env=env, capture_output=True)
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(f"peer_bench: {argv[:3]}... failed:\n{proc.stderr.decode()[-2000:]}")
        return seconds, int(rss.read().split()[-1]) / 1024, proc.stdout


def median_of(runs, fn):
    results = [fn() for _ in range(runs)]
    return statistics.median(r[0] for r in results), max(r[1] for r in results)


PEFT_MERGE = r"""
import sys, time, torch
from transformers import AutoModelForCausalLM
from peft import PeftModel
torch.set_num_threads(int(sys.argv[4]))
start = time.perf_counter()
base = AutoModelForCausalLM.from_pretrained(sys.argv[1], torch_dtype=torch.bfloat16)
model = PeftModel.from_pretrained(base, sys.argv[2]).merge_and_unload()
model.save_pretrained(sys.argv[3], safe_serialization=True)
print(time.perf_counter() - start)  # after the imports: load + merge + save
"""

HUB_METADATA = r"""
import sys, time
from huggingface_hub import get_safetensors_metadata
runs = int(sys.argv[2])
times = []
for _ in range(runs):
    t = time.perf_counter()
    m = get_safetensors_metadata(sys.argv[1])
    times.append(time.perf_counter() - t)
n = sum(len(f.tensors) for f in m.files_metadata.values())
times.sort()
print(times[len(times) // 2], n)
"""


def make_model(work, layers, hidden):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=hidden, intermediate_size=hidden * 11 // 4, num_hidden_layers=layers,
                         num_attention_heads=hidden // 64, num_key_value_heads=hidden // 128, vocab_size=32000,
                         tie_word_embeddings=False, torch_dtype="bfloat16")
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    base = os.path.join(work, "base")
    model.save_pretrained(base, safe_serialization=True, max_shard_size="10GB")
    lora = LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                                           "up_proj", "down_proj"], task_type="CAUSAL_LM")
    peft_model = get_peft_model(model, lora)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.02)
    adapter = os.path.join(work, "adapter")
    peft_model.save_pretrained(adapter)
    size = sum(os.path.getsize(os.path.join(base, f)) for f in os.listdir(base) if f.endswith(".safetensors"))
    return base, adapter, size


def compare(ours_dir, peft_dir, base, adapter):
    """Tensor by tensor: how many are bit-identical; where elements differ, which side equals the float64 result
    W + s * B @ A rounded once to bf16 (the difference is fp32 summation order of B @ A, visible where W and
    the delta nearly cancel)."""
    import torch
    from safetensors import safe_open

    def open_dir(d):
        files = [safe_open(os.path.join(d, f), "pt") for f in sorted(os.listdir(d)) if f.endswith(".safetensors")]
        return {k: h for h in files for k in h.keys()}
    ours, peft_out, base_t = open_dir(ours_dir), open_dir(peft_dir), open_dir(base)
    lora = safe_open(os.path.join(adapter, "adapter_model.safetensors"), "pt")
    config = json.load(open(os.path.join(adapter, "adapter_config.json")))
    scaling = config["lora_alpha"] / config["r"]
    equal = differing = ours_exact = peft_exact = 0
    for k, h in ours.items():
        a, b = h.get_tensor(k), peft_out[k].get_tensor(k)
        if a.equal(b):
            equal += 1
            continue
        d = a != b
        differing += int(d.sum())
        key_a = "base_model.model." + k[: -len(".weight")] + ".lora_A.weight"
        if key_a in lora.keys():
            A = lora.get_tensor(key_a).double()
            B = lora.get_tensor(key_a.replace("lora_A", "lora_B")).double()
            exact = (base_t[k].get_tensor(k).double() + (B @ A) * scaling).float().to(torch.bfloat16)
            ours_exact += int((a[d] == exact[d]).sum())
            peft_exact += int((b[d] == exact[d]).sum())
    return equal, len(ours), differing, ours_exact, peft_exact


def start_hub(repos):
    args = ["node", os.path.join(ROOT, "tests", "hub", "server.mjs")]
    for repo, d in repos.items():
        args += ["--dir", f"{repo}={d}"]
    hub = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    endpoint = hub.stdout.readline().strip()
    return hub, endpoint


def main():
    args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    layers, hidden = int(args.get("layers", 8)), int(args.get("hidden", 1024))
    runs, threads = int(args.get("runs", 5)), int(args.get("threads", 1))
    import huggingface_hub
    import peft
    import torch
    import transformers
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}, "
          f"huggingface_hub {huggingface_hub.__version__}; {threads} threads; medians of {runs} runs")
    with tempfile.TemporaryDirectory(prefix="pb-peer-bench.") as work:
        base, adapter, size = make_model(work, layers, hidden)
        print(f"model: LLaMA-shaped, {layers} layers, hidden {hidden}, bf16, {size / 1e6:.1f} MB of safetensors; "
              f"adapter r=16 on 7 projections")
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        subprocess.run(["sync"], check=True)

        def ours():
            out = os.path.join(work, "ours")
            subprocess.run(["rm", "-rf", out], check=True)
            return timed([CLI, "merge", "--base", base, "--adapter", adapter, "-o", out, "--json", "--no-copy-extra"],
                         env)

        def theirs():
            out = os.path.join(work, "peft")
            subprocess.run(["rm", "-rf", out], check=True)
            return timed([sys.executable, "-c", PEFT_MERGE, base, adapter, out, str(threads)], env)
        # Interleaved so that both see the same machine state; the page cache is warm for both after run 1.
        ours_runs, peft_runs = [], []
        for _ in range(runs):
            ours_runs.append(ours())
            peft_runs.append(theirs())
        o_t, o_m = statistics.median(r[0] for r in ours_runs), max(r[1] for r in ours_runs)
        p_t, p_m = statistics.median(r[0] for r in peft_runs), max(r[1] for r in peft_runs)
        p_work = statistics.median(float(r[2].decode().split()[-1]) for r in peft_runs)
        print(f"merge: peft-bridge {o_t:.2f} s, peak {o_m:.0f} MiB; PEFT merge_and_unload+save_pretrained "
              f"{p_t:.2f} s ({p_work:.2f} s after its imports), peak {p_m:.0f} MiB; ratio (PEFT / ours) time "
              f"{p_t / o_t:.1f}x ({p_work / o_t:.1f}x without imports), memory {p_m / o_m:.1f}x")
        equal, total, differing, ours_exact, peft_exact = compare(os.path.join(work, "ours"),
                                                                  os.path.join(work, "peft"), base, adapter)
        print(f"merge outputs: {equal} of {total} tensors bit-identical; {differing} elements differ elsewhere, of "
              f"which the float64 result rounded once to bf16 is ours at {ours_exact}, PEFT's at {peft_exact}")

        big = os.path.join(work, "big")
        os.makedirs(big)
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "make_header_file.py"),
                        os.path.join(big, "model.safetensors")], check=True, stdout=subprocess.DEVNULL)
        hub, endpoint = start_hub({"bench/model": base, "bench/moe-header": big})
        try:
            hub_env = dict(os.environ, HF_ENDPOINT=endpoint, HF_TOKEN="", HF_HOME=os.path.join(work, "hf-home"),
                           HF_HUB_DISABLE_TELEMETRY="1")
            for repo, label in (("bench/model", "the model above"), ("bench/moe-header", "200,000 tensors")):
                file = f"hf://{repo}/model.safetensors"
                o_t, o_m = median_of(runs, lambda: timed([CLI, "inspect", file, "--json"], hub_env))
                w_t, w_m, w_out = timed([sys.executable, "-c", HUB_METADATA, repo, str(runs)], hub_env)
                warm, tensors = w_out.decode().split()
                c_t, c_m = median_of(runs, lambda: timed([sys.executable, "-c", HUB_METADATA, repo, "1"], hub_env))
                print(f"remote inspect, {label} ({tensors} tensors): peft-bridge {o_t * 1000:.0f} ms per process, "
                      f"peak {o_m:.0f} MiB; get_safetensors_metadata {float(warm) * 1000:.0f} ms per call warm, "
                      f"{c_t * 1000:.0f} ms per process, peak {max(w_m, c_m):.0f} MiB")
        finally:
            hub.terminate()
            hub.wait()


if __name__ == "__main__":
    main()
