"""Live cross-check of `translate --to gguf` against llama.cpp's own tools (pinned venv):

    python="$(bash scripts/golden-venv.sh)" && "$python" tests/golden/check_gguf.py build/native/peft-bridge

For each case and --outtype, our .gguf and the one llama.cpp's convert_lora_to_gguf.py writes for the same
adapter (run from the sources of the llama-cpp-python sdist the venv built, unpacked by scripts/golden-venv.sh)
are read with the `gguf` package's GGUFReader (gguf-py, PyPI) and compared: the same tensors in the same order
(names, ggml shapes, types) with the same data bytes, the same offsets, and every key the converter writes with
the same type and value, except the general.* names it makes up from directory names (listed, not compared).
The keys only we write (the PEFT config, the module paths, the naming table, the head counts: what reading the
file back needs to restore the adapter exactly) are listed.

Reading back (peft-bridge's .gguf reader, `translate X.gguf OUT --to peft`), for each case and --outtype:
- our .gguf -> PEFT equals the original adapter: for f32, adapter_model.safetensors and adapter_config.json byte for
  byte (as `translate --to peft` of the original writes them); otherwise every tensor within the outtype's rounding
  (f16, bf16, q8_0's blocks) and the same config;
- the converter's .gguf (no keys of ours; head counts from --base-config) -> our reader gives the original
  adapter's tensors under the same PEFT keys, exactly for f32 and within the rounding otherwise, and the same r and
  lora_alpha.

Cases: corpus architecture cases whose llama.cpp names cover the adapter (q/k rows permuted by head for llama),
a LLaMA-shaped adapter made here with rows of 64 and rank 32, so that Q8_0 blocks are used for A and B alike
(the corpus's rows of 16 fall back to F16, as the converter does), and an adapter on every linear module of a tiny
model of each architecture in MADE_HERE_ARCHS (LFM2, Qwen3, Gemma 3, SmolLM3, OLMo, StarCoder2), translated by us
without --base-config (the base found from the adapter's base_model_name_or_path).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from live_common import REQUIRE, Report, cli_from_argv, llama_cpp_dir, run

import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
CASES = ("arch_llama", "arch_qwen2", "arch_mistral", "llama_lora_f32")
OUTTYPES = ("f32", "f16", "bf16", "q8_0")
# What the converter derives from directory and model-card names (gguf Metadata heuristics): not ours to match.
MADE_UP = ("general.name", "general.basename", "general.finetune", "general.size_label", "general.version",
           "general.organization", "general.license", "general.tags", "general.languages", "general.base_model.")


def convert_reference(adapter, base, outtype, out):
    """llama.cpp's convert_lora_to_gguf.py; (ok, error text)."""
    script = llama_cpp_dir("convert_lora_to_gguf.py") / "convert_lora_to_gguf.py"
    env = dict(os.environ, PYTHONPATH=str(script.parent / "gguf-py"), HF_HUB_OFFLINE="1")
    r = subprocess.run([sys.executable, str(script), "--base", str(base), "--outtype", outtype, "--outfile", str(out),
                        str(adapter)], capture_output=True, text=True, env=env)
    return r.returncode == 0, (r.stderr.strip().splitlines() or [""])[-1]


def read_gguf(path):
    """(keys: name -> (types, value), tensors: [(name, shape, type, offset, bytes)]) with gguf-py's reader."""
    from gguf import GGUFReader
    reader = GGUFReader(str(path))
    keys = {}
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        value = field.contents()
        keys[name] = (tuple(int(t) for t in field.types), value)
    tensors = [(t.name, tuple(int(d) for d in t.shape), int(t.tensor_type), int(t.data_offset),
                bytes(np.asarray(t.data).tobytes())) for t in reader.tensors]
    return keys, tensors


def compare(ours_path, ref_path):
    """A list of differences (empty: the same file apart from the listed keys), our extra keys, made-up keys."""
    ours_keys, ours_t = read_gguf(ours_path)
    ref_keys, ref_t = read_gguf(ref_path)
    problems = []
    if [t[:3] for t in ours_t] != [t[:3] for t in ref_t]:
        problems.append(f"tensor infos differ: ours {[t[:3] for t in ours_t][:3]}..., theirs {[t[:3] for t in ref_t][:3]}...")
    else:
        for a, b in zip(ours_t, ref_t):
            if a[4] != b[4]:
                problems.append(f"{a[0]}: data differs")
            if a[3] - ours_t[0][3] != b[3] - ref_t[0][3]:
                problems.append(f"{a[0]}: offset in the data section differs")
    made_up = []
    for k, v in ref_keys.items():
        if k.startswith(MADE_UP):
            made_up.append(k)
            continue
        if k not in ours_keys:
            problems.append(f"key {k} missing")
        elif ours_keys[k] != v:
            problems.append(f"key {k}: ours {ours_keys[k]}, theirs {v}")
    extra = sorted(k for k in ours_keys if k not in ref_keys)
    ours_order = [k for k in ours_keys if k in ref_keys]
    ref_order = [k for k in ref_keys if k in ours_keys]
    if ours_order != ref_order:
        problems.append(f"key order differs: ours {ours_order}, theirs {ref_order}")
    return problems, extra, made_up


# Largest |ours - original| allowed per tensor, relative to the tensor's largest |value|: fp16 and bf16 round once
# (half an ulp of 11 and 8 significant bits); Q8_0 rounds to 1/127 of a block's largest value (and its fp16 scale).
TOLERANCE = {"f32": 0.0, "f16": 2.0 ** -11, "bf16": 2.0 ** -8, "q8_0": 1.0 / 127}


def peft_tensors(adapter_dir):
    from safetensors.torch import load_file
    return {k: v.float() for k, v in load_file(str(Path(adapter_dir) / "adapter_model.safetensors")).items()}


def compare_tensors(original, read, outtype):
    """Differences between two {key: float tensor} maps, [] when every tensor is within the outtype's tolerance."""
    problems = []
    if sorted(original) != sorted(read):
        return [f"keys differ: {sorted(set(original) ^ set(read))[:4]}"]
    for k, a in original.items():
        b = read[k]
        if tuple(a.shape) != tuple(b.shape):
            problems.append(f"{k}: shape {tuple(b.shape)}, not {tuple(a.shape)}")
            continue
        worst = float((a - b).abs().max()) if a.numel() else 0.0
        scale = float(a.abs().max()) if a.numel() else 0.0
        if worst > TOLERANCE[outtype] * scale * 1.0001:
            problems.append(f"{k}: off by {worst:.3g} (largest |value| {scale:.3g})")
    return problems


def read_back(cli, gguf_path, out_dir, *extra):
    code, err = run(cli, "translate", gguf_path, out_dir, "--to", "peft", "-q", *extra)
    return None if code != 0 else out_dir, err


def check_read_back(report, cli, name, adapter, base, outtype, ours, ref, tmp):
    # Ours -> PEFT: byte for byte at f32 (against translate --to peft of the original), else values and config.
    direct = tmp / f"{name}-direct-peft"
    if not direct.exists():
        run(cli, "translate", adapter, direct, "--to", "peft", "-q")
    back, err = read_back(cli, ours, tmp / f"{name}-{outtype}-ours-peft")
    if back is None:
        report.case(False, f"{name} {outtype}: reading our .gguf failed: {err}")
    else:
        config_same = (back / "adapter_config.json").read_bytes() == (direct / "adapter_config.json").read_bytes()
        if outtype == "f32":
            same = (back / "adapter_model.safetensors").read_bytes() == (direct / "adapter_model.safetensors").read_bytes()
            report.case(same and config_same, f"{name} f32: our .gguf read back = the PEFT adapter "
                        f"({'adapter_model.safetensors' if same else 'WEIGHTS DIFFER'}, "
                        f"{'adapter_config.json' if config_same else 'CONFIG DIFFERS'} byte for byte)")
        else:
            problems = compare_tensors(peft_tensors(adapter), peft_tensors(back), outtype)
            report.case(not problems and config_same, f"{name} {outtype}: our .gguf read back = the PEFT adapter within "
                        f"{outtype} rounding, config byte for byte{'; ' + '; '.join(problems[:3]) if problems else ''}"
                        f"{'' if config_same else '; CONFIG DIFFERS'}")
    # The converter's .gguf -> our reader: the same tensors (the head counts from --base-config).
    back, err = read_back(cli, ref, tmp / f"{name}-{outtype}-ref-peft", "--base-config", base / "config.json")
    if back is None:
        report.case(False, f"{name} {outtype}: reading the converter's .gguf failed: {err}")
        return
    problems = compare_tensors(peft_tensors(adapter), peft_tensors(back), outtype)
    original = json.loads((adapter / "adapter_config.json").read_text())
    read = json.loads((back / "adapter_config.json").read_text())
    if (read["r"], read["lora_alpha"]) != (original["r"], original["lora_alpha"]):
        problems.append(f"r/lora_alpha {read['r']}/{read['lora_alpha']}, not {original['r']}/{original['lora_alpha']}")
    report.case(not problems, f"{name} {outtype}: the converter's .gguf read by us = the PEFT adapter's tensors "
                f"({'exactly' if outtype == 'f32' else 'within ' + outtype + ' rounding'}), r and lora_alpha"
                f"{'; ' + '; '.join(problems[:3]) if problems else ''}")


def make_q8_case(root):
    """A LLaMA-shaped base (hidden 64, GQA 4/2 heads) and a PEFT adapter of rank 32 on every projection, random B."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(7)
    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                         num_hidden_layers=2, vocab_size=64, max_position_embeddings=64)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(root / "base")
    lora = LoraConfig(r=32, lora_alpha=16, init_lora_weights=False,
                      target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    peft_model = get_peft_model(model, lora)
    peft_model.save_pretrained(root / "adapter")
    return root


# Architectures whose llama.cpp names came from reading their converter (tiny_archs.GGUF_CONVERTERS) and that the
# corpus cases above do not cover: an adapter on every linear module of a tiny model of each, made here. Ours is
# translated without --base-config: the base comes from the adapter's base_model_name_or_path (the local folder
# PEFT recorded), as convert_lora_to_gguf.py finds it.
MADE_HERE_ARCHS = ("lfm2", "qwen3", "gemma3_text", "smollm3", "olmo", "starcoder2")


def make_arch_case(root, model_type):
    """A tiny `model_type` base (tiny_archs sizes, float32) saved to root/base, and a PEFT adapter on all its linear
    modules (random B) whose base_model_name_or_path is that folder."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM
    from tiny_archs import tiny_kwargs
    torch.manual_seed(13)
    config = AutoConfig.for_model(model_type, **tiny_kwargs(model_type))
    AutoModelForCausalLM.from_config(config).float().save_pretrained(root / "base")
    model = AutoModelForCausalLM.from_pretrained(root / "base", torch_dtype=torch.float32)
    peft_model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, init_lora_weights=False,
                                                  target_modules="all-linear"))
    peft_model.save_pretrained(root / "adapter")
    return root


def main():
    cli = cli_from_argv()
    report = Report("gguf")
    if llama_cpp_dir("convert_lora_to_gguf.py") is None:
        print(f"{'FAIL' if REQUIRE else 'SKIP'}: llama.cpp's converter is not unpacked in {sys.prefix} (scripts/golden-venv.sh)")
        return 1 if REQUIRE else 77
    tmp = Path(tempfile.mkdtemp(prefix="pb-gguf-"))
    try:
        cases = [(name, CORPUS / name) for name in CASES]
        cases.append(("llama_r32_made_here", make_q8_case(tmp / "q8case")))
        cases += [(f"{t}_made_here", make_arch_case(tmp / f"{t}case", t)) for t in MADE_HERE_ARCHS]
        for name, root in cases:
            adapter, base = root / "adapter", root / "base"
            # The new architectures' cases rely on base_model_name_or_path instead.
            base_flag = [] if name.removesuffix("_made_here") in MADE_HERE_ARCHS else ["--base-config", base / "config.json"]
            for outtype in OUTTYPES:
                ours = tmp / f"{name}-{outtype}-ours.gguf"
                ref = tmp / f"{name}-{outtype}-ref.gguf"
                code, err = run(cli, "translate", adapter, ours, "--to", "gguf", "--outtype", outtype, *base_flag, "-q")
                if code != 0:
                    report.case(False, f"{name} {outtype}: our translate failed: {err}")
                    continue
                ok, err = convert_reference(adapter, base, outtype, ref)
                if not ok:
                    report.case(False, f"{name} {outtype}: convert_lora_to_gguf.py failed: {err}")
                    continue
                problems, extra, made_up = compare(ours, ref)
                same_file = ours.read_bytes() == ref.read_bytes()
                report.case(not problems, f"{name} {outtype}: {'byte-identical file' if same_file else 'tensors, data and the converter keys identical'}"
                            f"{'' if same_file else f' (made-up names not compared: {made_up}; ours only: {extra})'}"
                            f"{'; ' + '; '.join(problems[:3]) if problems else ''}")
                check_read_back(report, cli, name, adapter, base, outtype, ours, ref, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return report.done()


if __name__ == "__main__":
    sys.exit(main())
