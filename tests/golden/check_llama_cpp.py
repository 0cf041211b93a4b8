"""Live check that llama.cpp itself runs the .gguf LoRA adapters `translate --to gguf` writes (pinned venv):

    python="$(bash scripts/golden-venv.sh)" && "$python" tests/golden/check_llama_cpp.py build/native/peft-bridge

check_gguf.py shows our file equals convert_lora_to_gguf.py's; this one shows the file means what the PEFT
adapter means to the program that reads it. A tiny LLaMA (GQA 4/2 heads, float32, seeded) is saved with a
tiny LLaMA-style byte-fallback BPE tokenizer and converted with llama.cpp's own convert_hf_to_gguf.py. For each
PEFT adapter (random B) our `translate ADAPTER OUT.gguf --to gguf --outtype T --base-config BASE/config.json`
is loaded by llama.cpp (llama-cpp-python's Llama(lora_path=...), scale 1) on that base, a fixed token list is
evaluated, and the logits of every position must equal transformers + PEFT's (float32) on the same tokens
within the outtype's tolerance, relative to the largest |logit|. The adapter must change the logits far more
than that error (adapter vs base at least 100x the error), else the comparison would prove nothing.

What it proves: llama.cpp's head permutation of the q/k rows (B rows of q_proj and k_proj), the ggml shapes,
the adapter.lora.alpha key (alpha/r for plain LoRA; 0, i.e. scale 1, where PEFT's scaling is folded into
lora_b: rsLoRA and alpha_pattern/rank_pattern) and the F16 and Q8_0 encodings.
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

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# (name, LoraConfig arguments, --outtype, relative tolerance). f32: both sides compute in float32, only the
# order of the sums differs. f16 / q8_0: the adapter's A and B are rounded (and ggml's CPU matmul rounds the
# activations to the weight's type: F16, or Q8 blocks), so only the adapter's part of the logits moves.
CASES = (
    ("plain r8 alpha16", dict(r=8, lora_alpha=16), "f32", 1e-4),
    ("plain r8 alpha16", dict(r=8, lora_alpha=16), "f16", 2e-3),
    ("rslora r8 alpha16", dict(r=8, lora_alpha=16, use_rslora=True), "f32", 1e-4),
    ("rank/alpha_pattern", dict(r=8, lora_alpha=16, rank_pattern={"q_proj": 4, "down_proj": 12},
                                alpha_pattern={"v_proj": 8, "gate_proj": 40}), "f32", 1e-4),
    ("r32 alpha16", dict(r=32, lora_alpha=16), "q8_0", 1e-2),
)
TOKENS = [1, 37, 120, 5, 250, 77, 190, 33, 264, 12, 101, 280, 64, 9, 150, 200]


def write_tokenizer(folder):
    """A LLaMA-2-style tokenizer.json (BPE with byte fallback, '▁' for spaces): what convert_hf_to_gguf.py's
    LlamaHfVocab accepts without sentencepiece. <unk> <s> </s>, the 256 byte tokens, '▁', a-z and a few merges."""
    from tokenizers import Tokenizer, decoders, models, normalizers
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece in ["\u2581", *"abcdefghijklmnopqrstuvwxyz"]:
        vocab[piece] = len(vocab)
    merges = [("\u2581", "t"), ("\u2581", "a"), ("t", "h"), ("h", "e"), ("i", "n"), ("e", "r")]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
        "unk_token": "<unk>", "add_bos_token": True, "add_eos_token": False}))
    return len(vocab)


def make_base(folder):
    """The tiny LLaMA in float32 with its tokenizer; vocab_size = the tokenizer's, as the converter asserts."""
    from transformers import LlamaConfig, LlamaForCausalLM
    folder.mkdir(parents=True)
    n_vocab = write_tokenizer(folder)
    torch.manual_seed(11)
    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                         num_hidden_layers=2, vocab_size=n_vocab, max_position_embeddings=256,
                         bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
    model = LlamaForCausalLM(config).float()
    with torch.no_grad():  # LLaMA's init gives logits of ~0.1: scale up so relative errors mean something
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(4.0)
    model.save_pretrained(folder)
    return folder


def convert_base(base, out):
    """llama.cpp's convert_hf_to_gguf.py --outtype f32; (ok, error text)."""
    script = llama_cpp_dir("convert_hf_to_gguf.py") / "convert_hf_to_gguf.py"
    # Its LLaMA set_vocab imports sentencepiece before it looks for tokenizer.model (absent here, so it goes on
    # to tokenizer.json); the venv has no sentencepiece, so an empty module stands in for that import only.
    stub = out.parent / "no-sentencepiece"
    stub.mkdir(exist_ok=True)
    (stub / "sentencepiece.py").write_text("class SentencePieceProcessor:\n    pass\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(script.parent / "gguf-py"), str(stub)]), HF_HUB_OFFLINE="1")
    r = subprocess.run([sys.executable, str(script), str(base), "--outtype", "f32", "--outfile", str(out)],
                       capture_output=True, text=True, env=env)
    return r.returncode == 0, (r.stderr.strip().splitlines() or [""])[-1]


def make_adapter(base, lora_args, seed, out):
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM
    model = LlamaForCausalLM.from_pretrained(base, torch_dtype=torch.float32)
    torch.manual_seed(seed)
    peft_model = get_peft_model(model, LoraConfig(init_lora_weights=False, target_modules=TARGETS, **lora_args))
    peft_model.save_pretrained(out)
    return out


def torch_logits(base, adapter=None):
    """transformers (+ PEFT's PeftModel.from_pretrained) float32 logits of TOKENS, every position."""
    from peft import PeftModel
    from transformers import LlamaForCausalLM
    model = LlamaForCausalLM.from_pretrained(base, torch_dtype=torch.float32)
    if adapter is not None:
        model = PeftModel.from_pretrained(model, adapter)
    model.eval()
    with torch.no_grad():
        return model(torch.tensor([TOKENS])).logits[0].double().numpy()


def llama_cpp_logits(base_gguf, lora_gguf=None):
    """llama.cpp's logits of TOKENS at every position, the adapter applied at scale 1. The KV cache in F32
    (llama.cpp's default is F16, which alone moves the base's logits by ~4e-4 relative)."""
    from llama_cpp import GGML_TYPE_F32, Llama
    llm = Llama(model_path=str(base_gguf), lora_path=str(lora_gguf) if lora_gguf else None, logits_all=True,
                n_ctx=64, n_threads=1, n_threads_batch=1, type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32,
                verbose=False)
    try:
        llm.eval(TOKENS)
        return np.array(llm.scores[:len(TOKENS)], dtype=np.float64)
    finally:
        llm.close()


def main():
    cli = cli_from_argv()
    report = Report("llama.cpp")
    if llama_cpp_dir("convert_hf_to_gguf.py") is None:
        print(f"{'FAIL' if REQUIRE else 'SKIP'}: llama.cpp's converter is not unpacked in {sys.prefix} (scripts/golden-venv.sh)")
        return 1 if REQUIRE else 77
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        print(f"{'FAIL' if REQUIRE else 'SKIP'}: llama-cpp-python is not in the venv (scripts/golden-venv.sh)")
        return 1 if REQUIRE else 77
    tmp = Path(tempfile.mkdtemp(prefix="pb-llama-cpp-"))
    try:
        base = make_base(tmp / "base")
        base_gguf = tmp / "base.gguf"
        ok, err = convert_base(base, base_gguf)
        if not ok:
            report.case(False, f"convert_hf_to_gguf.py failed on the tiny LLaMA: {err}")
            return report.done()
        ref_base = torch_logits(base)
        cpp_base = llama_cpp_logits(base_gguf)
        scale = np.abs(ref_base).max()
        err = np.abs(cpp_base - ref_base).max()
        report.case(err <= 1e-4 * scale, f"base alone: llama.cpp = transformers, max |Δ| {err:.3g} "
                    f"(max |logit| {scale:.3g}, relative {err / scale:.2g}, tolerance 1e-4)")
        adapters = {}
        for i, (name, lora_args, outtype, tol) in enumerate(CASES):
            if name not in adapters:
                adapter = make_adapter(base, lora_args, 100 + i, tmp / f"adapter{i}")
                adapters[name] = (adapter, torch_logits(base, adapter))
            adapter, ref = adapters[name]
            ours = tmp / f"adapter{i}-{outtype}.gguf"
            code, err_text = run(cli, "translate", adapter, ours, "--to", "gguf", "--outtype", outtype,
                                 "--base-config", base / "config.json", "-q")
            if code != 0:
                report.case(False, f"{name} {outtype}: our translate failed: {err_text}")
                continue
            got = llama_cpp_logits(base_gguf, ours)
            scale = np.abs(ref).max()
            err = np.abs(got - ref).max()
            effect = np.abs(ref - ref_base).max()
            ok = err <= tol * scale and effect >= 100 * err
            report.case(ok, f"{name} {outtype}: llama.cpp logits = PEFT's, max |Δ| {err:.3g} (relative {err / scale:.2g}, "
                        f"tolerance {tol:g}); the adapter moves them by {effect:.3g} ({effect / max(err, 1e-30):.0f}x the error)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return report.done()


if __name__ == "__main__":
    sys.exit(main())
