"""Live check of `peft-bridge create`: PEFT itself judges the fresh adapters we write.

For every corpus case whose targets are Linear / Conv1D layers (the manifest's target_modules, its r, alpha,
rsLoRA and DoRA settings; some cases also with all-linear and with init gaussian), our native CLI creates an
adapter on the case's base, and:
  - PEFT's PeftModel.from_pretrained loads it and its logits equal the base model's bit for bit (B = 0); with
    DoRA, whose forward rescales the base output even when fresh, they equal those of PEFT's own fresh adapter
    (bit for bit on BF16/F16 bases; on F32 ones within 16 ulp, the magnitudes there being within 1 ulp of
    torch's float32 norm, whose summation order we do not reproduce);
  - PEFT's own get_peft_model(base, LoraConfig(same settings)).save_pretrained writes the same tensor names,
    dtypes and shapes, lora_B (zeros) and DoRA magnitudes bit for bit (F32: ≤ 1 ulp), and the same adapter_config.json key for
    key (target_modules compared as a set: PEFT saves a set);
  - every lora_A follows the init's distribution: kaiming within ±1/sqrt(in) with mean 0 and variance 1/3 of
    bound² (normalised, within 5 standard errors), gaussian with mean 0 and variance 1/r² likewise.
Run: "$(bash scripts/golden-venv.sh)" tests/golden/check_create.py build/native/peft-bridge
"""
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_common import MANIFEST, Report, cli_from_argv, tolerance  # noqa: E402
import generate  # noqa: E402
import torch  # noqa: E402
from peft import LoraConfig, PeftModel, get_peft_model  # noqa: E402
from safetensors.torch import load_file  # noqa: E402


def settings_for(item):
    """The create runs for a manifest case: (label, CLI arguments, LoraConfig kwargs), or a reason it has none."""
    lora = item["lora"]
    targets = lora.get("target_modules")
    if item["task"] == "image_cls":
        return None, "no Linear targets"
    if isinstance(targets, str):  # all-linear, or a regex (PEFT's string form)
        flag = ["--target-modules", targets] if targets.lower() == "all-linear" else ["--target-regex", targets]
        kwargs = dict(r=lora.get("r", 8), lora_alpha=lora.get("lora_alpha", 8), target_modules=targets)
        return [("string", ["--r", str(kwargs["r"]), "--alpha", str(kwargs["lora_alpha"]), *flag], kwargs)], None
    if any(k in lora for k in ("modules_to_save", "trainable_token_indices")) or "embed" in " ".join(targets):
        return None, "embedding or copied modules (create makes Linear/Conv1D LoRA only)"
    base = dict(r=lora.get("r", 8), lora_alpha=lora.get("lora_alpha", 8), use_rslora=bool(lora.get("use_rslora")),
                use_dora=bool(lora.get("use_dora")))
    args = ["--r", str(base["r"]), "--alpha", str(base["lora_alpha"])] + (["--rslora"] if base["use_rslora"] else []) + \
        (["--dora"] if base["use_dora"] else [])
    runs = [("list", args + ["--target-modules", ",".join(targets)], dict(base, target_modules=targets))]
    name = item["name"]
    if name in ("llama_all_linear", "gpt2_conv1d", "llama_dora", "gpt2_dora_conv1d", "arch_bert", "arch_t5") or \
            (name.startswith("arch_") and hash(name) % 8 == 0):
        runs.append(("all-linear", args + ["--target-modules", "all-linear"], dict(base, target_modules="all-linear")))
    if name in ("llama_lora_f32", "gpt2_conv1d", "arch_qwen2"):
        runs.append(("gaussian", args + ["--target-modules", ",".join(targets), "--init", "gaussian", "--seed", "7"],
                     dict(base, target_modules=targets, init_lora_weights="gaussian")))
    return runs, None


def ulps(a, b):
    """The largest distance in float32 ulps between two same-shaped float32 tensors (same signs)."""
    return (a.contiguous().view(torch.int32).long() - b.contiguous().view(torch.int32).long()).abs().max().item()


def config_difference(ours, theirs):
    a, b = json.loads(ours.read_text()), json.loads(theirs.read_text())
    for d in (a, b):
        if isinstance(d.get("target_modules"), list):
            d["target_modules"] = sorted(d["target_modules"])
    keys = sorted(set(a) | set(b))
    diff = [f"{k}: ours {a.get(k, '<absent>')!r} theirs {b.get(k, '<absent>')!r}" for k in keys if a.get(k, "<absent>") != b.get(k, "<absent>")]
    return "; ".join(diff)[:400]


def a_statistics(tensors, config, shapes_in):
    """How far lora_A's values are from the init's distribution, in standard errors (mean and variance); or a
    string naming a value outside kaiming's bound."""
    values = []
    for key, t in tensors.items():
        if not key.endswith("lora_A.weight"):
            continue
        t = t.double().flatten()
        if config.get("init_lora_weights") == "gaussian":
            values.append(t * config["r"])  # N(0, 1)
        else:
            bound = math.sqrt(3.0) * math.sqrt(2.0 / 6.000000000000001) / math.sqrt(shapes_in[key])
            if t.abs().max().item() > bound:
                return None, f"{key}: |a| {t.abs().max().item()} > bound {bound}"
            values.append(t / bound)  # U(-1, 1)
    x = torch.cat(values)
    n = x.numel()
    var = 1.0 if config.get("init_lora_weights") == "gaussian" else 1.0 / 3.0
    fourth = 3.0 if config.get("init_lora_weights") == "gaussian" else 1.0 / 5.0  # E[x^4]
    mean_z = x.mean().item() / math.sqrt(var / n)
    var_z = ((x * x).mean().item() - var) / math.sqrt((fourth - var * var) / n)
    return max(abs(mean_z), abs(var_z)), f"n={n} mean z {mean_z:+.2f}, variance z {var_z:+.2f}"


def check(cli, report, item, case, top):
    runs, why = settings_for(item)
    if runs is None:
        report.not_applicable(f"{item['name']}: {why}")
        return
    base_dir = generate.CORPUS / item["name"] / "base"
    task = item["task"]
    base_logits = generate.logits_of(generate.load_base(case, base_dir), task)
    for label, args, kwargs in runs:
        name = f"{item['name']} [{label}]"
        ours = top / f"{item['name']}-{label}-ours"
        r = subprocess.run([str(cli), "create", "--base", str(base_dir), "-o", str(ours), "-q", *args], capture_output=True, text=True)
        theirs = top / f"{item['name']}-{label}-peft"
        try:
            peft_model = get_peft_model(generate.load_base(case, base_dir), LoraConfig(**kwargs)).eval()
            peft_model.save_pretrained(theirs, safe_serialization=True)
            peft_logits = generate.logits_of(peft_model, task)
        except Exception as e:
            report.not_applicable(f"{name}: PEFT itself cannot make this adapter: {type(e).__name__}: {str(e)[:150]}")
            continue
        if peft_model.peft_config["default"].target_parameters is not None:
            report.not_applicable(f"{name}: PEFT turns these targets into target_parameters (fused MoE experts), which create does not make")
            continue
        ours_keys = set(load_file(ours / "adapter_model.safetensors")) if r.returncode == 0 else set()
        peft_keys = set(load_file(theirs / "adapter_model.safetensors"))
        if ours_keys - peft_keys and all(".experts." in k for k in ours_keys - peft_keys):
            report.not_applicable(f"{name}: transformers fuses the checkpoint's per-expert Linear weights when it loads "
                                  f"the model, so PEFT sees no such modules; create sees the checkpoint's layout")
            continue
        if r.returncode != 0:
            refused = "cannot have a LoRA layer" in r.stderr
            (report.not_applicable if refused else lambda t: report.case(False, t))(f"{name}: create {'refuses' if refused else 'failed'}: {' '.join(r.stderr.split())[:300]}")
            continue
        problems = []
        dora = kwargs.get("use_dora")
        # Without DoRA the output is the base's exactly (B = 0). PEFT's DoRA forward is not the identity even
        # fresh (it rescales the base output by magnitude / norm in the model's dtype), so a DoRA adapter must
        # give what PEFT's own fresh one gives.
        want = peft_logits if dora else base_logits
        try:
            model = PeftModel.from_pretrained(generate.load_base(case, base_dir), ours).eval()
            logits = generate.logits_of(model, task)
        except Exception as e:  # PEFT refusing what we wrote is what this check is for
            report.case(False, f"{name}: PEFT cannot load it: {type(e).__name__}: {str(e)[:200]}")
            continue
        f32_dora = dora and item["dtype"] == "f32"
        if not torch.equal(logits, want):
            delta = (logits.float() - want.float()).abs().max().item()
            if not (f32_dora and delta <= tolerance(want, torch.float32)):
                problems.append(f"logits differ from {'PEFT' if dora else 'the base'}'s (max |Δ| {delta:.3g})")
        if (d := config_difference(ours / "adapter_config.json", theirs / "adapter_config.json")):
            problems.append("config differs: " + d)
        mine, peft = load_file(ours / "adapter_model.safetensors"), load_file(theirs / "adapter_model.safetensors")
        if mine.keys() != peft.keys():
            problems.append(f"tensor names differ: only ours {sorted(mine.keys() - peft.keys())[:3]}, only PEFT's {sorted(peft.keys() - mine.keys())[:3]}")
        magnitude_ulps = 0
        for k in sorted(mine.keys() & peft.keys()):
            a, b = mine[k], peft[k]
            if a.dtype != b.dtype or a.shape != b.shape:
                problems.append(f"{k}: ours {a.dtype}{list(a.shape)}, PEFT's {b.dtype}{list(b.shape)}")
            elif f32_dora and "magnitude" in k and ulps(a, b) <= 1:
                magnitude_ulps = max(magnitude_ulps, ulps(a, b))
            elif "lora_A" not in k and not torch.equal(a, b):
                problems.append(f"{k}: values differ from PEFT's (max |Δ| {(a - b).abs().max().item():.3g})")
        shapes_in = {k: t.shape[1] for k, t in mine.items() if k.endswith("lora_A.weight")}
        z, stats = a_statistics(mine, json.loads((ours / "adapter_config.json").read_text()), shapes_in)
        if z is None or z > 5:
            problems.append(f"lora_A's statistics: {stats}")
        report.case(not problems, f"{name}: {len(mine)} tensors; logits {'DIFFER' if any('logits' in p for p in problems) else '= PEFT' + chr(39) + 's fresh DoRA' if dora else '= base'}; "
                                  f"A {stats}" + (f"; F32 magnitudes within {magnitude_ulps} ulp of torch's float norm" if magnitude_ulps else "") + ("; " + "; ".join(problems) if problems else ""))


def main():
    cli = cli_from_argv()
    report = Report("create")
    by_name = {c["name"]: c for c in generate.CASES}
    with tempfile.TemporaryDirectory() as top:
        for item in MANIFEST["cases"]:
            check(cli, report, item, by_name[item["name"]], Path(top))
    return report.done()


if __name__ == "__main__":
    sys.exit(main())
