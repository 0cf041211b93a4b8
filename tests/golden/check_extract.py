"""Live check of `peft-bridge extract`: PEFT and torch's SVD judge the adapters we extract.

1. PEFT loads them. For corpus cases (base/ = the base, peft_merged/ = PEFT's merge_and_unload, a fine-tune whose
   change is the case's LoRA, rounded to the model's dtype), our native CLI extracts an adapter at full rank
   (--rank 128, clamped to each layer's smaller side) in float32. PEFT's PeftModel.from_pretrained loads it with
   every tensor used (get_peft_model_state_dict gives exactly the file's keys), and PEFT's merge_and_unload of it
   on the float32 base gives the tuned model's weights (max |Δ| ≤ 1e-5 · max |W_tuned − W_base| per tensor; the
   saved modules bit for bit), and the same logits as the tuned model (within 1e-4 · max |logit|). On the F32
   cases, the adapter's own rank r reproduces the delta too (every module's reported error ≤ 1e-5).
2. The truncation is optimal. A small LLaMA (hidden 512, MLP 1024) whose tuned weights differ from the base's by
   deltas of known hard spectra (slow decay σᵢ = i^-0.5, geometric decay, a plateau across the cut, exact rank 5):
   at --rank 8 and --energy 0.8, every module's error ‖ΔW − B·A‖_F / ‖ΔW‖_F (from our factors, in float64) is
   within 1e-4 (relative) of the optimal truncated SVD's (torch.linalg.svd in float64) at the same rank (or
   within 1e-7 absolute, the float32 rounding of the factors, where the optimum is below that), the
   rank --energy picks is the smallest whose optimal energy reaches 0.8, and our reported error equals the
   measured one.
Run: "$(bash scripts/golden-venv.sh)" tests/golden/check_extract.py build/native/peft-bridge
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_common import MANIFEST, Report, cli_from_argv  # noqa: E402
import generate  # noqa: E402
import torch  # noqa: E402
from peft import PeftModel, get_peft_model_state_dict  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

CASES = ("llama_lora_f32", "llama_lora_bf16", "gpt2_conv1d_f32", "qwen2_lora_bias", "llama_modules_to_save",
         "llama_embedding_lora", "llama_seq_cls", "arch_mistral", "arch_phi3", "arch_gemma2", "arch_bert", "arch_t5")


def extract(cli, base, tuned, out, *args):
    r = subprocess.run([str(cli), "extract", "--base", str(base), "--tuned", str(tuned), "-o", str(out), "--json", *args],
                       capture_output=True, text=True)
    return r.returncode, (json.loads(r.stdout) if r.returncode == 0 else " ".join(r.stderr.split())[:300])


def load32(case, path):
    return generate.model_class(case.get("task", "causal")).from_pretrained(path, dtype=torch.float32).eval()


def check_case(cli, report, item, case, top):
    name = item["name"]
    root = generate.CORPUS / name
    embeddings = "lora" if "embed" in name else "save"
    ours = top / f"{name}-full"
    code, summary = extract(cli, root / "base", root / "peft_merged", ours, "--rank", "128", "--dtype", "f32",
                            "--embeddings", embeddings)
    if code != 0:
        report.case(False, f"{name}: extract failed: {summary}")
        return
    problems = []
    try:
        model = PeftModel.from_pretrained(load32(case, root / "base"), ours).eval()
    except Exception as e:
        report.case(False, f"{name}: PEFT cannot load it: {type(e).__name__}: {str(e)[:200]}")
        return
    file_keys = set(load_file(ours / "adapter_model.safetensors"))
    used = set(get_peft_model_state_dict(model, save_embedding_layers=False))
    if used != file_keys:
        problems.append(f"PEFT uses {sorted(used - file_keys)[:2]} not in the file, ignores {sorted(file_keys - used)[:2]}")
    logits = generate.logits_of(model, case.get("task", "causal"))
    tuned = load32(case, root / "peft_merged")
    want = generate.logits_of(tuned, case.get("task", "causal"))
    worst_logit = (logits - want).abs().max().item()
    if worst_logit > 1e-4 * want.abs().max().item():
        problems.append(f"logits differ by {worst_logit:.3g} (max |logit| {want.abs().max().item():.3g})")
    merged = model.merge_and_unload().state_dict()
    base_sd, tuned_sd = load32(case, root / "base").state_dict(), tuned.state_dict()
    for key, w in tuned_sd.items():
        d = (merged[key].float() - w.float()).abs().max().item()
        change = (w.float() - base_sd[key].float()).abs().max().item()
        if d > 1e-5 * max(change, 1e-30) and d > 0:
            problems.append(f"{key}: merged differs from the tuned weight by {d:.3g} (its change: {change:.3g})")
            break
    if item.get("dtype", "F32") in ("F32", "float32") or name.endswith("_f32"):
        r = item["lora"].get("r", 8)
        code, small = extract(cli, root / "base", root / "peft_merged", top / f"{name}-r", "--rank", str(r),
                              "--embeddings", embeddings)
        if code != 0:
            problems.append(f"--rank {r} failed: {small}")
        else:
            worst = max((m.get("relativeError", 0) for m in small["modules"]), default=0)
            if worst > 1e-5:
                problems.append(f"--rank {r}: a module's error is {worst:.3g}")
    report.case(not problems, f"{name}: {summary['decomposed']} decomposed, {summary['saved']} saved; PEFT loads it, "
                f"merge = tuned, logits max |Δ| {worst_logit:.2g}" + (": " + "; ".join(problems) if problems else ""))


def spectrum_delta(rows, cols, sigma, seed):
    g = torch.Generator().manual_seed(seed)
    u, _ = torch.linalg.qr(torch.randn(rows, len(sigma), generator=g, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(cols, len(sigma), generator=g, dtype=torch.float64))
    return (u * torch.tensor(sigma, dtype=torch.float64)) @ v.T


def check_optimality(cli, report, top):
    from transformers import AutoConfig, AutoModelForCausalLM
    config = AutoConfig.for_model("llama", hidden_size=512, intermediate_size=1024, num_hidden_layers=1,
                                  num_attention_heads=4, num_key_value_heads=4, vocab_size=64)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).to(torch.float32)
    base, tuned = top / "opt-base", top / "opt-tuned"
    model.save_pretrained(base, safe_serialization=True)
    spectra = {
        "model.layers.0.self_attn.q_proj": [i ** -0.5 for i in range(1, 513)],         # slow decay: the hard case
        "model.layers.0.self_attn.k_proj": [0.97 ** i for i in range(512)],            # geometric
        "model.layers.0.self_attn.v_proj": [1.0] * 12 + [0.9 ** i for i in range(500)],  # a plateau across the cut
        "model.layers.0.self_attn.o_proj": [3, 2, 1, 0.5, 0.25],                        # exact rank 5 < 8
        "model.layers.0.mlp.up_proj": [1 / (1 + i) for i in range(512)],
        "model.layers.0.mlp.down_proj": [i ** -0.25 for i in range(1, 513)],           # nearly flat
    }
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    deltas = {}
    for i, (module, sigma) in enumerate(spectra.items()):
        w = sd[module + ".weight"]
        d = spectrum_delta(w.shape[0], w.shape[1], sigma, 100 + i) * 0.01
        sd[module + ".weight"] = (w.double() + d).float()
        deltas[module] = sd[module + ".weight"].double() - w.double()  # the delta the files hold
    tuned.mkdir()
    save_file({k: v.contiguous() for k, v in sd.items() if k != "lm_head.weight" or not config.tie_word_embeddings},
              str(tuned / "model.safetensors"), metadata={"format": "pt"})
    (tuned / "config.json").write_text((base / "config.json").read_text())
    for label, args in (("rank 8", ["--rank", "8"]), ("energy 0.8", ["--energy", "0.8", "--max-rank", "64"])):
        out = top / f"opt-{label.replace(' ', '-')}"
        code, summary = extract(cli, base, tuned, out, "--dtype", "f32", *args)
        if code != 0:
            report.case(False, f"optimality [{label}]: extract failed: {summary}")
            continue
        factors = load_file(out / "adapter_model.safetensors")
        reported = {m["path"]: m for m in summary["modules"]}
        problems, worst_excess = [], 0.0
        for module, d in deltas.items():
            a = factors[f"base_model.model.{module}.lora_A.weight"].double()
            b = factors[f"base_model.model.{module}.lora_B.weight"].double()
            k = a.shape[0]
            ours = torch.linalg.norm(d - b @ a) / torch.linalg.norm(d)
            s = torch.linalg.svdvals(d)
            total = (s ** 2).sum()
            optimal = torch.sqrt((s[k:] ** 2).sum() / total)
            if label.startswith("energy"):
                kept = torch.cumsum(s ** 2, 0) / total
                want_k = min(int((kept < 0.8 - 1e-12).sum().item()) + 1, 64)
                if k != want_k:
                    problems.append(f"{module}: rank {k}, the optimal spectrum needs {want_k}")
            # Within 1e-4 of the optimum, relatively; below 1e-7 of ‖ΔW‖ (the float32 rounding of the factors
            # themselves) any error is as good as the optimum.
            excess = (ours / optimal).item() - 1 if optimal > 1e-12 else ours.item()
            if optimal > 1e-5:
                worst_excess = max(worst_excess, excess)
            if (ours - optimal).item() > 1e-4 * optimal.item() + 1e-7 or excess < -1e-6:
                problems.append(f"{module}: error {ours.item():.8g} vs optimal {optimal.item():.8g} (rank {k})")
            if abs(reported[module]["relativeError"] - ours.item()) > 1e-6:
                problems.append(f"{module}: reported error {reported[module]['relativeError']:.8g}, measured {ours.item():.8g}")
        report.case(not problems, f"optimality [{label}]: 6 modules 512x512..1024x512, worst excess over the optimal "
                    f"error {worst_excess:.2e} (where it is above 1e-5)" + (": " + "; ".join(problems) if problems else ""))


def main():
    cli = cli_from_argv()
    report = Report("check_extract")
    by_name = {c["name"]: c for c in generate.CASES}
    with tempfile.TemporaryDirectory(prefix="pb-extract-") as top:
        top = Path(top)
        for item in MANIFEST["cases"]:
            if item["name"] in CASES:
                check_case(cli, report, item, by_name[item["name"]], top)
        check_optimality(cli, report, top)
    return report.done()


if __name__ == "__main__":
    sys.exit(main())
