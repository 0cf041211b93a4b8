"""Live cross-check of `translate --to gguf` against llama.cpp's own tools (pinned venv):

    python="$(bash scripts/golden-venv.sh)" && "$python" tests/golden/check_gguf.py build/native/peft-bridge

For each case and --outtype, our .gguf and the one llama.cpp's convert_lora_to_gguf.py writes for the same
adapter (run from the sources of the llama-cpp-python sdist the venv built, unpacked by scripts/golden-venv.sh)
are read with the `gguf` package's GGUFReader (gguf-py, PyPI) and compared: the same tensors in the same order
(names, ggml shapes, types) with the same data bytes, the same offsets, and every key the converter writes with
the same type and value, except the general.* names it makes up from directory names (listed, not compared).
The keys only we write (the PEFT config, the module paths, the naming table, the head counts: what reading the
file back needs to restore the adapter exactly) are listed.

Cases: corpus architecture cases whose llama.cpp names cover the adapter (q/k rows permuted by head for llama),
and a LLaMA-shaped adapter made here with rows of 64 and rank 32, so that Q8_0 blocks are used for A and B alike
(the corpus's rows of 16 fall back to F16, as the converter does).
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
        for name, root in cases:
            adapter, base = root / "adapter", root / "base"
            for outtype in OUTTYPES:
                ours = tmp / f"{name}-{outtype}-ours.gguf"
                ref = tmp / f"{name}-{outtype}-ref.gguf"
                code, err = run(cli, "translate", adapter, ours, "--to", "gguf", "--outtype", outtype,
                                "--base-config", base / "config.json", "-q")
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
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return report.done()


if __name__ == "__main__":
    sys.exit(main())
