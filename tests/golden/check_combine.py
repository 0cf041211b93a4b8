"""Live cross-check of `combine`: PEFT's own add_weighted_adapter is the judge.

Adapters are made here with PEFT (seeded random A and B on the corpus's llama_lora_f32 base, float32), then
combined both ways: by PEFT (add_weighted_adapter on a PeftModel holding them, saved with save_pretrained) and
by our CLI. What must agree (docs/combine.md):
  - --peft-compat with the deterministic methods (cat, linear, ties, magnitude_prune): the same tensors, bit for
    bit, and the config fields PEFT sets (r, lora_alpha, use_rslora, target_modules as a set, patterns);
  - the SVD methods (svd, ties_svd, magnitude_prune_svd): the same ΔW = s·B·A per module within 1e-4 relative
    (PEFT's float32 LAPACK against our float64 Jacobi);
  - DARE: the same law: with density 1 bit-identical to the unpruned method; with density d, the fraction of
    elements each adapter keeps is d within 4 standard deviations, for PEFT and for us;
  - the exact default (cat): ΔW = Σ wᵢ·sᵢ·Bᵢ·Aᵢ within float32 rounding, for mixed ranks, negative weights and
    rsLoRA, and PEFT loads our adapter and gives the logits of the base plus that exact sum;
  - what PEFT refuses (linear over different ranks), we refuse too.
Usage: python check_combine.py [path/to/peft-bridge]
"""
import json
import math
import shutil
import tempfile
from pathlib import Path

from live_common import Report, cli_from_argv, generate, tensors_equal
import torch
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

BASE = generate.HERE / "corpus" / "llama_lora_f32" / "base"
PREFIX = "base_model.model."


def base_model():
    return AutoModelForCausalLM.from_pretrained(BASE, dtype=torch.float32).eval()


def make_adapter(out, seed, r, alpha, targets, rslora=False):
    """A PEFT adapter with seeded random A and B (float32), saved in `out`."""
    torch.manual_seed(seed)
    model = get_peft_model(base_model(), LoraConfig(r=r, lora_alpha=alpha, target_modules=targets, use_rslora=rslora))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.requires_grad:
                p.copy_(torch.randn(p.shape, generator=g) * 0.2)
    model.save_pretrained(out, safe_serialization=True)
    (out / "README.md").unlink(missing_ok=True)


def same_values(theirs, ours_):
    """tensors_equal, except that PEFT's zero padding may be -0.0: it multiplies the new adapter's random init by
    0.0, so a padded entry carries that init's sign. Every other bit must agree."""
    t, o = load_file(theirs / "adapter_model.safetensors"), load_file(ours_ / "adapter_model.safetensors")
    for k in t:
        t[k] = torch.where(t[k] == 0, torch.zeros_like(t[k]), t[k])
    return tensors_equal(t, o)


def peft_combined(dirs, weights, method, out, seed=None, **kwargs):
    """PEFT's add_weighted_adapter of `dirs`, saved as a plain adapter folder in `out`; also returns the model."""
    model = PeftModel.from_pretrained(base_model(), dirs[0], adapter_name="a0")
    for i, d in enumerate(dirs[1:], 1):
        model.load_adapter(d, adapter_name=f"a{i}")
    if seed is not None:
        torch.manual_seed(seed)
    model.add_weighted_adapter([f"a{i}" for i in range(len(dirs))], weights, "combined", combination_type=method, **kwargs)
    model.set_adapter("combined")
    tmp = Path(tempfile.mkdtemp())
    model.save_pretrained(tmp, selected_adapters=["combined"], safe_serialization=True)
    shutil.copytree(tmp / "combined", out)
    shutil.rmtree(tmp)
    return model


def ours(cli, dirs, weights, method, out, *extra):
    import subprocess

    args = [str(cli), "combine", *map(str, dirs), "--weights", ",".join(map(str, weights)), "--method", method, "-o", str(out),
            "-q", *map(str, extra)]
    r = subprocess.run(args, capture_output=True, text=True)
    return r.returncode, r.stderr.strip()


def deltas(folder):
    """Per module: the runtime ΔW = scaling·B·A (float64) of an adapter folder, PEFT's scaling rules."""
    config = json.loads((folder / "adapter_config.json").read_text())
    tensors = load_file(folder / "adapter_model.safetensors")
    out = {}
    for key, a in tensors.items():
        if ".lora_A." not in key and not key.endswith("lora_embedding_A"):
            continue
        module = key[len(PREFIX):].split(".lora_")[0]
        b = tensors[key.replace("lora_A", "lora_B").replace("lora_embedding_A", "lora_embedding_B")]
        r = a.shape[0]
        alpha = config["lora_alpha"]
        scale = alpha / math.sqrt(r) if config.get("use_rslora") else alpha / r
        out[module] = scale * (b.double() @ a.double())
    return out


def exact_sum(dirs, weights):
    """Σ wᵢ·ΔWᵢ over the inputs, per module (float64)."""
    total = {}
    for d, w in zip(dirs, weights):
        for module, delta in deltas(d).items():
            total[module] = total.get(module, 0) + w * delta
    return total


def compare_deltas(got, want, tol):
    if got.keys() != want.keys():
        return f"modules differ: {sorted(got.keys() ^ want.keys())[:3]}"
    worst = 0.0
    for m in want:
        denom = want[m].norm().item()
        worst = max(worst, ((got[m] - want[m]).norm().item() / denom) if denom else got[m].norm().item())
    return None if worst <= tol else f"relative ΔW error {worst:.3g} > {tol:g}"


def config_fields(folder):
    c = json.loads((folder / "adapter_config.json").read_text())
    t = c["target_modules"]
    return {"r": c["r"], "lora_alpha": c["lora_alpha"], "use_rslora": c["use_rslora"],
            "target_modules": sorted(t) if isinstance(t, list) else t, "rank_pattern": c["rank_pattern"],
            "alpha_pattern": c["alpha_pattern"]}


def kept_fraction(combined, inputs, weights, density):
    """For DARE over two adapters: the fraction of elements where each adapter's term survived, estimated from the
    combined A (values are sums of v_i·A_i/d over the kept i; solved per element)."""
    a0, a1 = inputs
    v = [math.copysign(math.sqrt(abs(w)), w) for w in weights]  # the A side's weights (scaling is 1 here)
    t0, t1 = v[0] * a0 / density, v[1] * a1 / density
    kept = [0, 0]
    n = combined.numel()
    for x, p, q in zip(combined.flatten().tolist(), t0.flatten().tolist(), t1.flatten().tolist()):
        options = {(0, 0): 0.0, (1, 0): p, (0, 1): q, (1, 1): p + q}
        best = min(options, key=lambda k: abs(options[k] - x))
        kept[0] += best[0]
        kept[1] += best[1]
    return [k / n for k in kept], n


def main():
    cli = cli_from_argv()
    report = Report("combine (PEFT's add_weighted_adapter judges)")
    work = Path(tempfile.mkdtemp(prefix="pb-combine-"))
    try:
        a = work / "a"
        b = work / "b"
        c = work / "c"
        rs = work / "rs"
        make_adapter(a, 1, 8, 16, ["q_proj", "v_proj"])
        make_adapter(b, 2, 8, 8, ["q_proj", "v_proj", "k_proj"])
        make_adapter(c, 3, 4, 8, ["q_proj", "o_proj"])
        make_adapter(rs, 4, 8, 16, ["q_proj", "v_proj"], rslora=True)
        pair, weights = [a, b], [0.7, -0.4]

        # --peft-compat, deterministic methods: PEFT's tensors bit for bit, and its config fields.
        for method, kw, extra in [("cat", {}, []), ("linear", {}, []),
                                  ("ties", {"density": 0.5}, ["--density", "0.5"]),
                                  ("ties", {"density": 0.5, "majority_sign_method": "frequency"}, ["--density", "0.5", "--majority-sign", "frequency"]),
                                  ("magnitude_prune", {"density": 0.3}, ["--density", "0.3"])]:
            name = f"{method}{'-freq' if 'majority_sign_method' in kw else ''}"
            theirs = work / f"peft-{name}"
            peft_combined(pair, weights, method, theirs, **kw)
            mine = work / f"ours-{name}"
            rc, err = ours(cli, pair, weights, method, mine, "--peft-compat", *extra)
            if rc != 0:
                report.case(False, f"--peft-compat {name}: our CLI failed: {err}")
                continue
            diff = same_values(theirs, mine)
            diff = diff or (None if config_fields(mine) == config_fields(theirs) else f"config {config_fields(mine)} vs {config_fields(theirs)}")
            report.case(diff is None, f"--peft-compat {name}: PEFT's tensors bit for bit{'' if diff is None else ': ' + diff}")

        # rsLoRA first: PEFT keeps use_rslora (an overscale by √r); --peft-compat reproduces it, bits and config.
        theirs = work / "peft-rs-cat"
        peft_combined([rs, a], [1.0, 0.5], "cat", theirs)
        mine = work / "ours-rs-cat"
        rc, err = ours(cli, [rs, a], [1.0, 0.5], "cat", mine, "--peft-compat")
        diff = err if rc else same_values(theirs, mine)
        diff = diff or (None if config_fields(mine) == config_fields(theirs) else "config differs")
        report.case(diff is None, f"--peft-compat cat with rsLoRA first: PEFT's overscaled adapter reproduced{'' if diff is None else ': ' + str(diff)}")

        # The exact default: Σ wᵢ·ΔWᵢ for mixed ranks, negative weights, rsLoRA; and PEFT loads it.
        for label, dirs, ws in [("mixed ranks, negative weight", [a, b, c], [0.7, -0.4, 1.5]),
                                ("rsLoRA first", [rs, a], [1.0, 0.5])]:
            mine = work / f"ours-exact-{len(dirs)}-{ws[0]}"
            rc, err = ours(cli, dirs, ws, "cat", mine)
            if rc:
                report.case(False, f"exact cat ({label}): our CLI failed: {err}")
                continue
            diff = compare_deltas(deltas(mine), exact_sum(dirs, ws), 1e-6)
            report.case(diff is None, f"exact cat ({label}): ΔW = Σ wᵢ·ΔWᵢ within float32 rounding{'' if diff is None else ': ' + diff}")
            # PEFT applies our adapter: the logits of the base plus the exact sum, merged into the weights by hand.
            model = PeftModel.from_pretrained(base_model(), mine)
            reference = base_model()
            with torch.no_grad():
                for module, delta in exact_sum(dirs, ws).items():
                    reference.get_submodule(module).weight += delta.float()
            ids = torch.arange(1, 9).unsqueeze(0)
            with torch.no_grad():
                got, want = model(input_ids=ids).logits, reference(input_ids=ids).logits
            err = (got - want).abs().max().item()
            report.case(err < 1e-4, f"exact cat ({label}): PEFT loads it, logits = base + Σ wᵢ·ΔWᵢ (max |Δ| {err:.2g})")

        # SVD methods: the same ΔW within 1e-4 (PEFT's float32 SVD against ours).
        for method, kw, extra in [("svd", {"svd_rank": 6}, ["--rank", "6"]), ("svd", {}, []),
                                  ("ties_svd", {"density": 0.6, "svd_rank": 8}, ["--density", "0.6", "--rank", "8"]),
                                  ("magnitude_prune_svd", {"density": 0.5, "svd_rank": 5}, ["--density", "0.5", "--rank", "5"])]:
            name = f"{method}-{kw.get('svd_rank', 'default')}"
            theirs = work / f"peft-{name}"
            peft_combined(pair, weights, method, theirs, **kw)
            mine = work / f"ours-{name}"
            rc, err = ours(cli, pair, weights, method, mine, *extra)
            diff = err if rc else compare_deltas(deltas(mine), deltas(theirs), 1e-4)
            report.case(diff is None, f"{name}: PEFT's ΔW within 1e-4{'' if diff is None else ': ' + str(diff)}")

        # DARE: density 1 is the unpruned method exactly; density d keeps each term with probability d.
        theirs = work / "peft-dare-1"
        peft_combined(pair, weights, "linear", theirs)
        mine = work / "ours-dare-1"
        rc, err = ours(cli, pair, weights, "dare_linear", mine, "--density", "1", "--peft-compat")
        diff = err if rc else tensors_equal(load_file(theirs / "adapter_model.safetensors"), load_file(mine / "adapter_model.safetensors"))
        report.case(diff is None, f"dare_linear density 1 = linear, bit for bit{'' if diff is None else ': ' + str(diff)}")
        density = 0.3
        key = PREFIX + "model.layers.0.self_attn.q_proj.lora_A.weight"
        inputs = [load_file(d / "adapter_model.safetensors")[key].double() for d in pair]
        scalings = [json.loads((d / "adapter_config.json").read_text()) for d in pair]
        ws = [w * s["lora_alpha"] / s["r"] for w, s in zip(weights, scalings)]
        for who in ("PEFT", "ours"):
            folder = work / f"{who}-dare"
            if who == "PEFT":
                peft_combined(pair, weights, "dare_linear", folder, seed=0, density=density)
            else:
                rc, err = ours(cli, pair, weights, "dare_linear", folder, "--density", str(density), "--seed", "7")
                if rc:
                    report.case(False, f"dare_linear: our CLI failed: {err}")
                    continue
            combined = load_file(folder / "adapter_model.safetensors")[key].double()
            fractions, n = kept_fraction(combined, inputs, ws, density)
            sigma = math.sqrt(density * (1 - density) / n)
            ok = all(abs(f - density) <= 4 * sigma for f in fractions)
            report.case(ok, f"dare_linear density {density} ({who}): each adapter's terms kept {', '.join(f'{f:.3f}' for f in fractions)} of {n} (expected {density} ± {4 * sigma:.3f})")
        again = work / "ours-dare-again"
        ours(cli, pair, weights, "dare_linear", again, "--density", str(density), "--seed", "7")
        same = tensors_equal(load_file(work / "ours-dare" / "adapter_model.safetensors"), load_file(again / "adapter_model.safetensors"))
        report.case(same is None, "dare_linear with --seed: the same bytes on a second run")

        # What PEFT refuses, we refuse.
        rc, err = ours(cli, [a, c], [1, 1], "linear", work / "never", "--peft-compat")
        report.case(rc == 1 and "same rank" in err, f"linear over ranks 8 and 4 refused, as PEFT refuses it: {err[:120]}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report.done()


if __name__ == "__main__":
    raise SystemExit(main())
