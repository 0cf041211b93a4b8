"""Live cross-check of `merge --quantize`: our quantized bytes against the Python packages' own quantization of
the same merged weights, and transformers loading what we write.

    python="$(bash scripts/golden-venv.sh)" && cd tests/golden && "$python" check_quantize.py ../../build/native/peft-bridge

A tiny LLaMA whose Linear dims are multiples of 128 (hidden 256, intermediate 512; BF16, F16 and F32)
and a PEFT LoRA on every linear layer are generated here (seeded); our CLI merges it plainly and with each
--quantize scheme. Per scheme:

(a) bit identity: every tensor of ours equals the package's own: compressed-tensors 0.20.1 (the model loaded from
    our plain merge, `apply_quantization_config` with the preset scheme and `ignore=["lm_head"]`, the weight scales
    from the min-max observer's amin/amax through `calculate_qparams`, then `ModelCompressor.from_pretrained_model`
    + `compress_model`: its state dict, and its `update_config`'s quantization_config against our config.json);
    transformers' FineGrainedFP8 `Fp8Quantize` for --scheme block;
`convert PLAIN OUT --quantize` of the plain merge gives the same tensors. (b) transformers 5.24 (CPU) loads our folder with `from_pretrained` (compressed-tensors decompressing to dense,
    fine-grained FP8 dequantizing to BF16): each Linear weight = the dequantized weight (q times its scale in the
    model dtype), and the logits against the unquantized merge are reported. Our summary's dequantization errors
    (--json) are printed and checked against the ones computed here.
Ends with "quantize: N passed, N failed".
"""
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from live_common import Report, cli_from_argv, tensors_equal

import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

SEED = 1234
SCHEMES = [  # (label, method, scheme, group size, model dtype)
    ("fp8 per-channel", "fp8", None, None, "bf16"),
    ("int8 per-group 128", "int8", None, None, "bf16"),
    ("int4 per-group 128", "int4", None, None, "bf16"),
    ("int4 per-channel", "int4", "per-channel", None, "bf16"),
    ("int8 per-channel f16", "int8", "per-channel", None, "f16"),
    ("int4 per-group 64 f16", "int4", "per-group", "64", "f16"),
    ("fp8 per-channel f32", "fp8", None, None, "f32"),
    ("fp8 block (fine-grained)", "fp8", "block", None, "bf16"),
]
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def build(root, dtype):
    """A tiny LLaMA (Linear dims multiples of 128) and a PEFT LoRA with non-zero B on every linear layer."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(SEED)
    config = LlamaConfig(hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=64, num_hidden_layers=2, vocab_size=256, max_position_embeddings=64,
                         tie_word_embeddings=False)
    model = LlamaForCausalLM(config).to(DTYPES[dtype]).eval()
    base = root / f"base-{dtype}"
    model.save_pretrained(base, safe_serialization=True)
    peft_model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear",
                                                  init_lora_weights=False))
    peft_model.save_pretrained(root / f"adapter-{dtype}")
    return base, root / f"adapter-{dtype}"


def run(cli, *args):
    r = subprocess.run([str(cli), *map(str, args)], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr.strip()


def ct_reference(plain, method, scheme, group):
    """compressed-tensors' own compression of our plain merge: (state dict, quantization_config)."""
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import (QuantizationArgs, QuantizationConfig, QuantizationScheme,
                                                 QuantizationStatus, apply_quantization_config)
    from compressed_tensors.quantization.quant_scheme import FP8_DYNAMIC
    from compressed_tensors.quantization.utils import calculate_qparams
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(plain, dtype="auto").eval()
    if method == "fp8":
        preset = dict(FP8_DYNAMIC)
    else:
        bits = 8 if method == "int8" else 4
        if scheme == "per-channel":
            weights = QuantizationArgs(num_bits=bits, type="int", strategy="channel", symmetric=True, dynamic=False)
        else:
            weights = QuantizationArgs(num_bits=bits, type="int", strategy="group", group_size=int(group or 128),
                                       symmetric=True, dynamic=False)
        preset = dict(weights=weights)
    config = QuantizationConfig(config_groups={"group_0": QuantizationScheme(targets=["Linear"], **preset)},
                                ignore=["lm_head"], quantization_status=QuantizationStatus.FROZEN)
    apply_quantization_config(model, config)
    for module in model.modules():
        s = getattr(module, "quantization_scheme", None)
        if s is None or s.weights is None:
            continue
        w, args = module.weight.data, s.weights
        if args.strategy == "group":  # the min-max observer's reduction, in the weight's dtype
            g = w.unflatten(-1, (w.shape[-1] // args.group_size, args.group_size))
            lo, hi = g.amin(dim=-1), g.amax(dim=-1)
        else:
            lo, hi = w.amin(dim=-1, keepdim=True), w.amax(dim=-1, keepdim=True)
        scale, zp = calculate_qparams(lo, hi, args)
        module.weight_scale.data.copy_(scale)
        if hasattr(module, "weight_zero_point"):
            module.weight_zero_point.data.copy_(zp)
    compressor = ModelCompressor.from_pretrained_model(model)
    compressor.compress_model(model)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(plain / "config.json", Path(tmp) / "config.json")
        compressor.update_config(tmp)
        qconfig = json.loads((Path(tmp) / "config.json").read_text())["quantization_config"]
    return state, qconfig


def fp8_block_reference(plain):
    """transformers' FineGrainedFP8 quantizer (Fp8Quantize) on every Linear weight it would convert."""
    from types import SimpleNamespace
    from transformers import FineGrainedFP8Config
    from transformers.integrations.finegrained_fp8 import Fp8Quantize
    op = Fp8Quantize(SimpleNamespace(quantization_config=FineGrainedFP8Config()))
    out = {}
    for name, w in load_plain(plain).items():
        if w.ndim == 2 and name.endswith("_proj.weight"):
            out.update(op.convert({name: w}))
        else:
            out[name] = w
    return out


def load_plain(folder):
    tensors = {}
    for f in sorted(folder.glob("*.safetensors")):
        tensors.update(load_file(f))
    return tensors


def dequantized(ours, name, method, scheme, dtype):
    """Ours, dequantized as the loaders do: q in the model dtype times the scale (compressed-tensors), or
    (q.float() * weight_scale_inv per 128 block).to(dtype) (fine-grained FP8)."""
    m = name[: -len(".weight")]
    if scheme == "block":
        q, s = ours[name].float(), ours[m + ".weight_scale_inv"]
        s = s.repeat_interleave(128, 0).repeat_interleave(128, 1)
        return (q * s).to(dtype)
    scale = ours[m + ".weight_scale"]
    if method == "fp8":
        q = ours[name].to(scale.dtype)
    else:
        from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32
        bits = 8 if method == "int8" else 4
        q = unpack_from_int32(ours[m + ".weight_packed"], bits, torch.Size(ours[m + ".weight_shape"].tolist()))
        q = q.to(scale.dtype)
    groups = scale.shape[1]
    return (q.unflatten(1, (groups, -1)) * scale.unsqueeze(-1)).flatten(1).to(dtype)


def main():
    cli = cli_from_argv()
    report = Report("quantize")
    from transformers import AutoModelForCausalLM, CompressedTensorsConfig
    work = Path(tempfile.mkdtemp(prefix="pb-quantize-"))
    try:
        inputs, plains = {}, {}
        for label, method, scheme, group, dtype in SCHEMES:
            if dtype not in inputs:
                base, adapter = build(work, dtype)
                plain = work / f"plain-{dtype}"
                code, _, err = run(cli, "merge", "--base", base, "--adapter", adapter, "--out", plain, "-q")
                if code:
                    report.case(False, f"plain merge ({dtype}) failed: {err}")
                    return report.done()
                inputs[dtype], plains[dtype] = (base, adapter), plain
            base, adapter = inputs[dtype]
            plain = plains[dtype]
            out = work / f"q-{len(list(work.iterdir()))}"
            quantize = ["--quantize", method] + (["--scheme", scheme] if scheme else []) + (["--group-size", group] if group else [])
            code, stdout, err = run(cli, "merge", "--base", base, "--adapter", adapter, "--out", out, *quantize, "--json")
            if code:
                report.case(False, f"{label}: our merge --quantize failed: {err}")
                continue
            summary = json.loads(stdout)
            ours = load_plain(out)
            our_config = json.loads((out / "config.json").read_text())["quantization_config"]

            # (a) bit identity with the package's own quantization of the same merged weights.
            if scheme == "block":
                theirs, their_config = fp8_block_reference(plain), None
            else:
                theirs, their_config = ct_reference(plain, method, scheme, group)
            diff = tensors_equal(theirs, ours)
            quantized = len(summary["quantization"]["quantized"])
            report.case(diff is None and quantized > 0,
                        f"{label} [{dtype}]: {quantized} weights, {len(ours)} tensors "
                        + ("bit-identical to " + ("transformers' Fp8Quantize" if scheme == "block" else "compressed-tensors 0.20.1")
                           if diff is None else f"differ: {diff}"))
            if their_config is not None:
                same = {k: v for k, v in our_config.items() if k != "ignore"} == {k: v for k, v in their_config.items() if k != "ignore"}
                same_ignore = sorted(our_config["ignore"]) == sorted(their_config["ignore"])
                report.case(same and same_ignore,
                            f"{label}: quantization_config = ModelCompressor.update_config's"
                            + ("" if same and same_ignore else f": ours {json.dumps(our_config, sort_keys=True)}\n"
                               f"     theirs {json.dumps(their_config, sort_keys=True)}"))

            # `convert PLAIN --quantize` (no adapter) of the plain merge: the same tensors, since merge --quantize
            # quantizes the merge as rounded to the model dtype.
            converted = work / f"c-{len(list(work.iterdir()))}"
            code, _, err = run(cli, "convert", plain, converted, *quantize, "-q")
            diff = tensors_equal(ours, load_plain(converted)) if code == 0 else err
            report.case(diff is None, f"{label}: convert PLAIN --quantize = merge --quantize"
                        + ("" if diff is None else f": {diff}"))

            # (b) transformers loads it; each Linear weight is the dequantized weight; logits vs the plain merge.
            torch_dtype = DTYPES[dtype]
            kwargs = {} if scheme == "block" else {"quantization_config": CompressedTensorsConfig(dequantize=True)}
            try:
                model = AutoModelForCausalLM.from_pretrained(out, dtype=torch_dtype, **kwargs).eval()
            except Exception as e:  # noqa: BLE001 - a failed load is a failed case, with its reason
                report.case(False, f"{label}: transformers cannot load it: {type(e).__name__}: {str(e)[:300]}")
                continue
            reference = AutoModelForCausalLM.from_pretrained(plain, dtype=torch_dtype).eval()
            loaded = dict(model.named_parameters())
            plain_tensors = load_plain(plain)
            bad, worst = [], {}
            for name in summary["quantization"]["quantized"]:
                expect = dequantized(ours, name, method, scheme, torch_dtype)
                got = loaded[name].detach()
                if got.dtype != expect.dtype or not torch.equal(got, expect):
                    bad.append(name)
                err = (expect.double() - plain_tensors[name].double())
                worst[name] = (err.abs().max().item(), err.pow(2).mean().sqrt().item(),
                               (err.norm() / plain_tensors[name].double().norm()).item())
            ids = torch.arange(24).reshape(2, 12) % 256
            with torch.no_grad():
                lq = model(input_ids=ids).logits.float()
                lp = reference(input_ids=ids).logits.float()
            delta = (lq - lp).abs().max().item()
            rel = ((lq - lp).norm() / lp.norm()).item()
            report.case(not bad, f"{label}: transformers loads it, {len(summary['quantization']['quantized']) - len(bad)}/"
                        f"{len(summary['quantization']['quantized'])} weights = q·scale"
                        + (f" (differ: {bad[:3]})" if bad else "")
                        + f"; logits vs the unquantized merge: max |Δ| {delta:.4g}, relative {rel:.3g}")
            # Our summary's errors against the same numbers computed here.
            errors = {e["tensor"]: e for e in summary["quantization"]["errors"]}
            mismatch = [n for n, (mx, rms, relative) in worst.items()
                        if n not in errors or abs(errors[n]["maxAbs"] - mx) > 1e-9 * max(1.0, mx)
                        or abs(errors[n]["rms"] - rms) > 1e-6 * rms or abs(errors[n]["relative"] - relative) > 1e-6 * relative]
            top = max(worst.items(), key=lambda kv: kv[1][2])
            report.case(not mismatch, f"{label}: dequantization error (ours = recomputed here"
                        + (f"; differs for {mismatch[:3]}" if mismatch else "")
                        + f"): max abs {max(v[0] for v in worst.values()):.4g}, "
                        f"worst relative {top[1][2]:.4g} ({top[0]})")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report.done()


if __name__ == "__main__":
    sys.exit(main())
