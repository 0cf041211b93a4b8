"""Writes the golden corpus: tiny models and LoRA adapters made by transformers and PEFT themselves, with
PEFT's own merge_and_unload() result and the logits of a fixed input, so that the C++ and JS suites can
check peft-bridge against the real tools without Python (tests/golden/README.md).

    python="$(bash scripts/golden-venv.sh)" && "$python" tests/golden/generate.py

Run only from the pinned venv (requirements-golden.txt): the bytes depend on the versions. Everything is
seeded and runs on the CPU in one thread, so a rerun writes the same bytes. No downloads: models come from
AutoConfig.for_model(...) with small sizes.
"""
import hashlib
import re
import json
import os
import shutil
import sys
import warnings
from importlib.metadata import version
from pathlib import Path

# PEFT saves target_modules from a Python set: its order follows str hashing, so fix the hash seed (re-exec
# once with it) for adapter_config.json to be the same bytes on every run.
if os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable, *sys.argv])

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The corpus's logits (logits.safetensors) were computed with torch's AVX2 kernels. On a CPU with AVX-512 torch,
# MKL and oneDNN pick other kernels whose sums round differently (2026-12-03: 321 of 504 adapter routes off by
# 3e-7 in f32 and 0.005 in bf16, tensors identical), so the generator and the live checks pin the ISA to AVX2
# where they can: a rerun of the generator on an AVX2 machine writes the same bytes. The pin is no guarantee
# (another CPU, another BLAS build, no AVX2 at all): no live check compares the stored logits bit for bit with
# ones computed now; each computes its reference in its own process (tests/golden/README.md). Set before torch
# is imported; subprocesses inherit it.
for _isa_var, _isa in (("ATEN_CPU_CAPABILITY", "avx2"), ("MKL_ENABLE_INSTRUCTIONS", "AVX2"),
                       ("ONEDNN_MAX_CPU_ISA", "AVX2")):
    os.environ.setdefault(_isa_var, _isa)
warnings.filterwarnings("ignore")

import torch  # noqa: E402
from peft import LoraConfig, PeftModel, get_peft_model  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import (  # noqa: E402
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForImageClassification,
    AutoModelForMaskedLM,
    AutoModelForSeq2SeqLM,
    AutoModelForSequenceClassification,
)
from transformers.models.auto import modeling_auto  # noqa: E402
from transformers.pytorch_utils import Conv1D  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

hf_logging.set_verbosity_error()
hf_logging.disable_progress_bar()
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
NAMING = HERE.parents[1] / "data" / "naming" / "arch"
sys.path.insert(0, str(HERE))
from tiny_archs import TABLES, tiny_kwargs  # noqa: E402
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
INPUT_IDS = torch.tensor([[1, 7, 42, 3, 99, 15, 64, 2]])

TINY_DECODER = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, vocab_size=128, max_position_embeddings=64)
ARCH = {
    "llama": dict(TINY_DECODER, tie_word_embeddings=False),
    "qwen2": dict(TINY_DECODER, tie_word_embeddings=False),
    "gpt2": dict(n_embd=32, n_layer=2, n_head=4, n_positions=64, vocab_size=128, tie_word_embeddings=True),
    "resnet": dict(num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                   layer_type="basic", num_labels=3),
}


def model_class(task):
    return {"causal": AutoModelForCausalLM, "seq_cls": AutoModelForSequenceClassification,
            "image_cls": AutoModelForImageClassification, "masked": AutoModelForMaskedLM,
            "seq2seq": AutoModelForSeq2SeqLM}[task]


def model_input(task, dtype=torch.float32, vocab_size=None):
    """The fixed input; token ids taken modulo a vocabulary smaller than they are (the tiny architectures')."""
    if task == "image_cls":
        g = torch.Generator().manual_seed(7)
        return {"pixel_values": torch.randn(1, 3, 16, 16, generator=g).to(dtype)}
    ids = INPUT_IDS % vocab_size if vocab_size and vocab_size <= int(INPUT_IDS.max()) else INPUT_IDS
    if task == "seq2seq":
        return {"input_ids": ids, "decoder_input_ids": ids[:, :4].clone()}
    return {"input_ids": ids}


# Every case: architecture, task head, base dtype, LoRA settings, and what it exercises. `shard` saves
# the base (and PEFT's merged model) in several files; `adapter_dtype` stores the adapter in half
# precision (PEFT widens it to fp32 when loading, autocast_adapter_dtype=True).
CASES = [
    dict(name="llama_lora_bf16", arch="llama", dtype="bf16", shard="40KB",
         what="plain LoRA on q_proj/v_proj, sharded base",
         lora=dict(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])),
    dict(name="llama_lora_f32", arch="llama", dtype="f32",
         what="plain LoRA on every attention projection, F32 base",
         lora=dict(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])),
    dict(name="llama_lora_f16", arch="llama", dtype="f16",
         what="plain LoRA on the MLP, F16 base",
         lora=dict(r=4, lora_alpha=4, target_modules=["gate_proj", "up_proj", "down_proj"])),
    dict(name="llama_lora_r1_f32", arch="llama", dtype="f32",
         what="r=1 LoRA: B·A is one product per element, so PEFT's CPU path is one rounding per step",
         lora=dict(r=1, lora_alpha=2, target_modules=["q_proj", "down_proj"])),
    dict(name="llama_lora_bf16_adapter", arch="llama", dtype="bf16", adapter_dtype="bf16",
         what="adapter stored in BF16 (PEFT widens it to fp32 on load)",
         lora=dict(r=4, lora_alpha=8, target_modules=["q_proj", "o_proj"])),
    dict(name="llama_rslora", arch="llama", dtype="bf16",
         what="rsLoRA (alpha/sqrt(r))",
         lora=dict(r=16, lora_alpha=8, use_rslora=True, target_modules=["q_proj", "v_proj", "up_proj"])),
    dict(name="llama_patterns", arch="llama", dtype="bf16",
         what="rank_pattern / alpha_pattern per module",
         lora=dict(r=4, lora_alpha=8, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                   rank_pattern={"k_proj": 2, r"layers\.1\.self_attn\.v_proj": 6},
                   alpha_pattern={"o_proj": 3, "q_proj": 32})),
    dict(name="llama_all_linear", arch="llama", dtype="bf16", shard="30KB",
         what='target_modules="all-linear", sharded base',
         lora=dict(r=4, lora_alpha=8, target_modules="all-linear")),
    dict(name="llama_layers_to_transform", arch="llama", dtype="bf16",
         what="layers_to_transform=[1] with layers_pattern",
         lora=dict(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"],
                   layers_to_transform=[1], layers_pattern="layers")),
    dict(name="llama_exclude_modules", arch="llama", dtype="bf16",
         what="exclude_modules drops layer 0's k_proj and every o_proj",
         lora=dict(r=4, lora_alpha=8, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                   exclude_modules=[r"model.layers.0.self_attn.k_proj", "o_proj"])),
    dict(name="llama_regex_targets", arch="llama", dtype="bf16",
         what="target_modules as a regex string (re.fullmatch)",
         lora=dict(r=4, lora_alpha=8, target_modules=r".*\.layers\.1\.mlp\.(gate|up)_proj|.*\.0\.self_attn\.q_proj")),
    dict(name="llama_embedding_lora", arch="llama", dtype="bf16",
         what="LoRA on the input embedding (lora_embedding_A/B) and lm_head",
         lora=dict(r=4, lora_alpha=8, target_modules=["embed_tokens", "lm_head", "q_proj"])),
    dict(name="llama_dora", arch="llama", dtype="bf16",
         what="DoRA on Linear",
         lora=dict(r=4, lora_alpha=8, use_dora=True, target_modules=["q_proj", "v_proj", "down_proj"])),
    dict(name="llama_dora_f32", arch="llama", dtype="f32",
         what="DoRA on Linear, F32 base",
         lora=dict(r=4, lora_alpha=8, use_dora=True, target_modules=["q_proj", "o_proj"])),
    dict(name="llama_dora_embedding", arch="llama", dtype="bf16",
         what="DoRA on the Embedding",
         lora=dict(r=4, lora_alpha=8, use_dora=True, target_modules=["embed_tokens", "v_proj"])),
    dict(name="qwen2_lora_bias", arch="qwen2", dtype="bf16",
         what="lora_bias=True on q/k/v (which have a bias in Qwen2)",
         lora=dict(r=4, lora_alpha=8, lora_bias=True, target_modules=["q_proj", "k_proj", "v_proj"])),
    dict(name="llama_modules_to_save", arch="llama", dtype="bf16",
         what="modules_to_save: lm_head and layer 1's post_attention_layernorm replaced by the adapter's copies",
         lora=dict(r=4, lora_alpha=8, target_modules=["q_proj"],
                   modules_to_save=["lm_head", "model.layers.1.post_attention_layernorm"])),
    dict(name="llama_seq_cls", arch="llama", dtype="bf16", task="seq_cls",
         what="task_type SEQ_CLS: the score head is saved whole (implied modules_to_save)",
         lora=dict(r=4, lora_alpha=8, task_type="SEQ_CLS", target_modules=["q_proj", "v_proj"])),
    dict(name="llama_trainable_tokens", arch="llama", dtype="bf16",
         what="trainable_token_indices on embed_tokens (rows replaced) with LoRA on q_proj",
         lora=dict(r=4, lora_alpha=8, target_modules=["q_proj"], trainable_token_indices=[3, 7, 42])),
    dict(name="gpt2_trainable_tokens_tied", arch="gpt2", dtype="bf16",
         what="trainable_token_indices on the tied wte (lm_head shares it: PEFT ties a token adapter to it)",
         lora=dict(r=4, lora_alpha=8, target_modules=["c_attn"], fan_in_fan_out=True,
                   trainable_token_indices={"wte": [0, 5, 99, 127]})),
    dict(name="gpt2_conv1d", arch="gpt2", dtype="bf16",
         what="transformers Conv1D (GPT-2 c_attn, c_proj, c_fc; fan_in_fan_out)",
         lora=dict(r=4, lora_alpha=8, target_modules=["c_attn", "c_proj", "c_fc"], fan_in_fan_out=True)),
    dict(name="gpt2_conv1d_f32", arch="gpt2", dtype="f32",
         what="transformers Conv1D, F32 base",
         lora=dict(r=4, lora_alpha=8, target_modules=["c_attn", "mlp.c_proj"], fan_in_fan_out=True)),
    dict(name="gpt2_dora_conv1d", arch="gpt2", dtype="bf16",
         what="DoRA on transformers Conv1D",
         lora=dict(r=4, lora_alpha=8, use_dora=True, target_modules=["c_attn", "c_fc"], fan_in_fan_out=True)),
    dict(name="gpt2_tied_embedding", arch="gpt2", dtype="bf16",
         what="LoRA on the tied embedding wte (lm_head shares it)",
         lora=dict(r=4, lora_alpha=8, target_modules=["wte", "c_attn"], fan_in_fan_out=True)),
    dict(name="resnet_conv2d", arch="resnet", dtype="f32", task="image_cls",
         what="Conv2d LoRA (3x3 and 1x1 kernels) on a tiny ResNet",
         lora=dict(r=4, lora_alpha=8, target_modules=r".*convolution")),
    dict(name="resnet_conv2d_bf16", arch="resnet", dtype="bf16", task="image_cls",
         what="Conv2d LoRA on a tiny ResNet, BF16 base",
         lora=dict(r=2, lora_alpha=4, target_modules=r".*layer\.0\.convolution")),
    dict(name="resnet_dora_conv2d", arch="resnet", dtype="bf16", task="image_cls",
         what="DoRA on Conv2d",
         lora=dict(r=2, lora_alpha=4, use_dora=True, target_modules=r".*encoder.*convolution")),
]


# LoRA on MoE experts: transformers 5 fuses each layer's experts into 3-D parameters, which PEFT targets with
# target_parameters (lora.ParamWrapper: nested keys, interleaved per-expert factors, the delta rounded to the
# parameter's dtype before it is added). Tiny models with three experts (so that the interleaving is visible) and
# r > 1; qwen3_moe's down_proj [E, 16, 16] is square per expert, so its orientation comes from the model type.
MOE = dict(num_local_experts=3, num_experts=3, num_experts_per_tok=2)
CASES += [
    dict(name="mixtral_experts_bf16", arch="mixtral", tiny=True, config=MOE, dtype="bf16",
         what="LoRA on Mixtral's fused experts (target_parameters gate_up_proj and down_proj) and q/v_proj",
         lora=dict(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"],
                   target_parameters=["mlp.experts.gate_up_proj", "mlp.experts.down_proj"])),
    dict(name="mixtral_experts_f32", arch="mixtral", tiny=True, config=MOE, dtype="f32",
         what="LoRA on Mixtral's fused down_proj only (one ParamWrapper, no nesting) and o_proj, F32 base",
         lora=dict(r=4, lora_alpha=8, target_modules=["o_proj"], target_parameters=["experts.down_proj"])),
    dict(name="qwen3_moe_experts_bf16", arch="qwen3_moe", tiny=True, config=MOE, dtype="bf16",
         what="LoRA on Qwen3-MoE's fused experts with rsLoRA and rank/alpha patterns on parameter paths, and k_proj",
         lora=dict(r=2, lora_alpha=4, use_rslora=True, target_modules=["k_proj"],
                   target_parameters=["mlp.experts.down_proj", "mlp.experts.gate_up_proj"],
                   rank_pattern={r"layers\.1\.mlp\.experts\.down_proj": 4}, alpha_pattern={"gate_up_proj": 6})),
    # PEFT's own conversion: MLP targets on DeepSeek-V3 (first layer dense, the second MoE with a shared expert)
    # become target_parameters on the fused experts, while the dense and shared MLPs stay Linear modules.
    dict(name="deepseek_v3_experts_bf16", arch="deepseek_v3", tiny=True, dtype="bf16", keep_parameter_targets=True,
         config=dict(MOE, n_routed_experts=3),
         what="deepseek_v3: LoRA on every linear module of the body; PEFT turns the MLP targets into target_parameters "
              "on the fused experts of the MoE layer",
         lora=dict(r=2, lora_alpha=4, target_modules="body-linear")),
    dict(name="gpt_oss_experts_bf16", arch="gpt_oss", tiny=True, config=MOE, dtype="bf16",
         what="LoRA on gpt-oss's fused experts, stored whole and transposed ([E, in, out], is_transposed), and q_proj",
         lora=dict(r=2, lora_alpha=4, target_modules=["q_proj"],
                   target_parameters=["mlp.experts.gate_up_proj", "mlp.experts.down_proj"])),
]


def arch_task(model_type):
    for task, mapping in (("causal", modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES),
                          ("masked", modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES),
                          ("seq2seq", modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES)):
        if model_type in mapping:
            return task
    return None


# One case per architecture of the naming tables (tests/golden/tiny_archs.py): a tiny model of it (hidden 16,
# 2 layers, vocab 64), LoRA on every nn.Linear / Conv1D of its body (target_modules: their leaf names,
# found when the base is built), so that merge and translate are checked against PEFT for each.
ARCH_CASES = [
    dict(name="arch_" + re.sub(r"[^a-z0-9]", "_", mt), arch=mt, table=table, tiny=True, dtype="bf16",
         task=arch_task(mt), what=f"{mt}: LoRA on every linear module of the body (naming table {table})",
         lora=dict(r=2, lora_alpha=4, target_modules="body-linear"))
    for table, types in TABLES.items() for mt in types if arch_task(mt)
]
CASES += ARCH_CASES


def body_linear_leaves(model):
    """Leaf names of every nn.Linear / Conv1D inside the model's body (not its task head)."""
    prefix = getattr(model, "base_model_prefix", "")
    names = [n for n, _ in model.named_modules()]
    inside = (lambda n: n.startswith(prefix + ".")) if any(n.startswith(prefix + ".") for n in names) else (
        lambda n: not n.startswith(("lm_head", "score", "classifier", "qa_outputs", "cls.", "final_logits")))
    leaves, conv1d, paths, heads = set(), set(), [], []  # paths: to find the attention projections
    for n, m in model.named_modules():
        # A router that subclasses Linear with its own forward (PhiMoE's returns a tuple) is no layer PEFT can
        # wrap; other subclasses (FalconLinear) are.
        custom = (isinstance(m, torch.nn.Linear) and type(m).forward is not torch.nn.Linear.forward
                  and "Router" in type(m).__name__)
        if n and not inside(n) and isinstance(m, (torch.nn.Linear, Conv1D)):
            heads.append(n)
        if n and inside(n) and isinstance(m, (torch.nn.Linear, Conv1D)) and not custom:
            leaf = n.rsplit(".", 1)[-1]
            leaves.add(leaf)
            paths.append(n)
            if isinstance(m, Conv1D):
                conv1d.add(leaf)
    # transformers 5 fuses MoE experts into 3-D parameters (`mlp.experts.gate_up_proj`); PEFT then turns a
    # target such as gate_proj into target_parameters on them, which peft-bridge refuses (docs/adapters.md).
    attention = sorted({p.rsplit(".", 1)[-1] for p in paths if re.search(r"attn|attention", p.rsplit(".", 1)[0])})
    # Head modules whose leaf name a body target shares (BERT's cls.predictions.transform.dense): excluded, so
    # that the adapter changes the body only and every format can hold it.
    shadowed = sorted(h for h in heads if h.rsplit(".", 1)[-1] in leaves)
    return sorted(leaves), leaves == conv1d, attention, shadowed


def seed_for(name):
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little")


def build_base(case, out):
    torch.manual_seed(seed_for(case["name"]))
    task = case.get("task", "causal")
    kwargs = tiny_kwargs(case["arch"]) if case.get("tiny") else dict(ARCH[case["arch"]])
    kwargs.update(case.get("config", {}))
    if task == "seq_cls":
        kwargs.update(num_labels=3, pad_token_id=0)
    config = AutoConfig.for_model(case["arch"], **kwargs)
    model = model_class(task).from_config(config)
    if case["lora"].get("target_modules") == "body-linear":
        leaves, all_conv1d, attention_leaves, shadowed = body_linear_leaves(model)
        case["lora"] = dict(case["lora"], target_modules=leaves, **({"fan_in_fan_out": True} if all_conv1d else {}),
                            **({"exclude_modules": shadowed} if shadowed else {}))
        case["attention_leaves"] = attention_leaves
    # Weights bigger than the default init (std 0.02) so that merged deltas are visible next to them.
    g = torch.Generator().manual_seed(seed_for(case["name"] + "/base"))
    with torch.no_grad():
        for _, p in sorted(model.named_parameters()):
            p.add_(torch.randn(p.shape, generator=g) * 0.05)
    model = model.to(DTYPES[case["dtype"]]).eval()
    save(model, out, case.get("shard"))
    if case.get("tiny"):
        # Saved again as from_pretrained loads it: modules a model keeps in fp32 (MoE routers,
        # _keep_in_fp32_modules) are F32 there, and in PEFT's merged save, as they are in real checkpoints.
        again = out.parent / (out.name + ".again")
        save(load_base(case, out), again, case.get("shard"))
        shutil.rmtree(out)
        again.rename(out)


def save(model, out, shard=None):
    kwargs = dict(safe_serialization=True)
    if shard:
        kwargs["max_shard_size"] = shard
    model.save_pretrained(out, **kwargs)
    for extra in ("README.md", "generation_config.json"):
        (out / extra).unlink(missing_ok=True)


def load_base(case, path):
    return model_class(case.get("task", "causal")).from_pretrained(path, dtype=DTYPES[case["dtype"]]).eval()


def build_adapter(case, base_dir, out):
    base = load_base(case, base_dir)
    config = LoraConfig(**case["lora"])
    model = get_peft_model(base, config)
    if (model.peft_config["default"].target_parameters and case.get("attention_leaves")
            and not case.get("keep_parameter_targets")):
        # transformers 5 fuses MoE experts into 3-D parameters (mlp.experts.gate_up_proj) and PEFT turns
        # gate_proj/up_proj/down_proj targets into target_parameters on them, which peft-bridge refuses
        # (docs/adapters.md): such architectures are tested on their attention projections.
        case["lora"] = dict(case["lora"], target_modules=case["attention_leaves"])
        case["what"] += "; attention only: PEFT turns MLP targets into target_parameters on the fused experts"
        base = load_base(case, base_dir)
        model = get_peft_model(base, LoraConfig(**case["lora"]))
    # Seeded random values for every trainable tensor (lora_B starts at zero; copies of modules_to_save
    # and trainable tokens start equal to the base), so that the merge changes the weights.
    g = torch.Generator().manual_seed(seed_for(case["name"] + "/adapter"))
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if not p.requires_grad:
                continue
            noise = torch.randn(p.shape, generator=g)
            if "magnitude" in name:
                p.mul_(1 + 0.1 * noise.to(p.dtype))
            else:
                p.add_((0.1 * noise).to(p.dtype))
    if case.get("adapter_dtype"):
        for name, p in model.named_parameters():
            if p.requires_grad:
                p.data = p.data.to(DTYPES[case["adapter_dtype"]])
    model.save_pretrained(out, safe_serialization=True)
    (out / "README.md").unlink(missing_ok=True)


def logits_of(model, task):
    with torch.no_grad():
        out = model(**model_input(task, model.dtype, getattr(model.config, "vocab_size", None)))
    return out.logits.detach().clone().contiguous()


def read_folder(folder):
    """Every tensor of a saved model or adapter folder (all shards), by name."""
    out = {}
    for f in sorted(folder.glob("*.safetensors")):
        with safe_open(f, framework="pt") as st:
            for k in st.keys():
                out[k] = st.get_tensor(k)
    return out


HALF_EPS = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}


PARAMETER_FACTORS = "<experts>.lora_A.weight"  # stands for a fused parameter's factors in expectations()


def fused_parameter(name):
    """The fused experts parameter transformers 5 builds from a per-expert checkpoint tensor when loading
    (conversion_mapping.py: qwen2_moe's gate_proj/up_proj/down_proj, mixtral's w1/w3/w2 under block_sparse_moe),
    or the name itself when it is one; None otherwise."""
    m = re.fullmatch(r"(.*)\.(?:mlp|block_sparse_moe)\.experts\.\d+\.(gate_proj|up_proj|down_proj|w1|w2|w3)\.weight", name)
    if m:
        fused = "down_proj" if m.group(2) in ("down_proj", "w2") else "gate_up_proj"
        return f"{m.group(1)}.mlp.experts.{fused}"
    return name if re.search(r"\.experts\.(gate_up_proj|down_proj)$", name) else None


def expectations(case, root, merged_model):
    """How closely peft-bridge must reproduce each tensor PEFT's merge changed (tests/golden/README.md).

    Unchanged tensors, modules_to_save copies, trainable-token rows and lora_B.bias sums (one rounding)
    must be bit-identical, as must r=1 LoRA (one product per element). Other LoRA deltas come from
    torch's BLAS, which orders and fuses the k-sum differently from peft-bridge's in-order sum: BF16/F16
    within 1 ulp, F32 within 4 ulp (DoRA: 1 / 8, its norm is a second sum). Where W + delta cancels,
    ulps of the result mean nothing, so an element also passes within max_ulp times the delta's rounding
    unit at the tensor's largest |delta| (fp32's, or the weight dtype's for embeddings, whose delta PEFT
    rounds to the weight dtype first)."""
    base = read_folder(root / "base")
    merged = read_folder(root / "peft_merged")
    adapter_keys = list(read_folder(root / "adapter"))
    plain_r1 = case["lora"].get("r") == 1 and not case["lora"].get("rank_pattern")
    out = {}
    for name, t in sorted(merged.items()):
        b = base.get(name)
        if b is not None and b.dtype == t.dtype and b.shape == t.shape and torch.equal(b.view(-1), t.view(-1)):
            continue
        module = name.rsplit(".", 1)[0]
        owned = [k for k in adapter_keys if k.startswith(f"base_model.model.{module}.")]
        parameter = fused_parameter(name)
        if parameter is not None and any(parameter == p or parameter.endswith("." + p)
                                         for p in case["lora"].get("target_parameters") or []):
            owned = [PARAMETER_FACTORS]  # the fused parameter's factors (PEFT's nested keys name no parameter)
        half = t.dtype in HALF_EPS
        if any(".lora_magnitude_vector" in k for k in owned):
            kind, max_ulp = "dora", 1 if half else 8
        elif name.endswith(".bias") and any(".lora_B." in k and k.endswith(".bias") for k in owned):
            kind, max_ulp = "lora_bias", 0
        elif any(".lora_" in k for k in owned):
            kind, max_ulp = "lora", 0 if plain_r1 else (1 if half else 4)
        else:
            kind, max_ulp = "copy", 0
        try:
            is_embedding = isinstance(merged_model.get_submodule(module), torch.nn.Embedding)
        except AttributeError:
            is_embedding = False
        # PEFT rounds the delta to the weight's dtype first for LoRA on a parameter (ParamWrapper) too.
        is_parameter = owned == [PARAMETER_FACTORS]
        eps = HALF_EPS[t.dtype] if (is_embedding or is_parameter) and half else 2.0 ** -24
        delta = (t.float() - b.float()).abs().max().item() if b is not None and b.shape == t.shape else 0.0
        out[name] = {"kind": kind, "max_ulp": max_ulp, "abs_tol": max_ulp * eps * delta}
    return out


def unmerge_refusal(root):
    """Why peft-bridge's `unmerge` refuses this case's adapter (docs/merge.md), or None: DoRA needs the norms of
    the original weights, and full tensors or trainable-token rows replaced base values the adapter does not
    keep. PEFT can unmerge those only because it still holds the originals in memory."""
    keys = list(read_folder(root / "adapter"))
    if any(".lora_magnitude_vector" in k for k in keys):
        return "DoRA: the weight norms it needs are those of the original weights"
    if any(".lora_" not in k for k in keys):
        return "the adapter replaces tensors or rows of the base (copies, saved embeddings, trainable tokens)"
    return None


def build_unmerged(case, root, changed):
    """PEFT's unmerge: the adapter loaded on the base, merge_adapter() then unmerge_adapter() (PEFT's
    `W -= delta.to(W.dtype)` on the weights its merge changed), unloaded and saved as save_pretrained names
    them. Only the tensors the merge changed are kept (peft_unmerged.safetensors): every other tensor is the
    base's. Returns the manifest's `unmerge` entry."""
    out = root / "peft_unmerged.safetensors"
    out.unlink(missing_ok=True)
    refusal = unmerge_refusal(root)
    if refusal:
        return {"refused": refusal}
    model = PeftModel.from_pretrained(load_base(case, root / "base"), root / "adapter").eval()
    model.merge_adapter()
    model.unmerge_adapter()
    tmp = root / "peft_unmerged.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    save(model.unload(), tmp)
    tensors = {k: v.contiguous() for k, v in read_folder(tmp).items() if k in changed}
    shutil.rmtree(tmp)
    if set(tensors) != set(changed):
        raise RuntimeError(f"{case['name']}: PEFT's unmerged model lacks {sorted(set(changed) - set(tensors))}")
    save_file(tensors, out, metadata={"format": "pt"})
    base = read_folder(root / "base")
    identical = sum(torch.equal(t.view(-1), base[k].view(-1)) for k, t in tensors.items() if k in base)
    return {"tensors": len(tensors), "identical_to_base": identical,
            "changed_tensors": unmerge_expectations(changed, base, read_folder(root / "peft_merged"))}


WEIGHT_EPS = {torch.float32: 2.0 ** -24, **HALF_EPS}


def unmerge_expectations(changed, base, merged):
    """How closely our `unmerge` of our merge must give PEFT's unmerge of its merge, per tensor. Where the merge
    is bit-identical (max_ulp 0: copies, lora_bias, r=1) so is the unmerge: the same merged input and the same
    delta. Otherwise the merged input may already be the merge's max_ulp apart, and PEFT's unmerge rounds the
    delta to the weight's dtype before subtracting it (`W -= delta.to(W.dtype)`), where our delta's own
    rounding may land one ulp away: max_ulp + 1, or (where W - delta cancels) that many rounding units of the
    weight's dtype at the tensor's largest |delta|."""
    out = {}
    for name, e in changed.items():
        m, b = merged[name], base.get(name)
        max_ulp = e["max_ulp"] + 1 if e["max_ulp"] else 0
        delta = (m.float() - b.float()).abs().max().item() if b is not None and b.shape == m.shape else 0.0
        out[name] = {"kind": e["kind"], "max_ulp": max_ulp, "abs_tol": max_ulp * WEIGHT_EPS[m.dtype] * delta}
    return out


def table_module(table, path):
    """The naming table's module entry for an HF module path, or None (docs/naming-tables.md, MatchHf)."""
    for m in table["modules"]:
        pattern = re.escape(m["hf"]).replace(re.escape("{N}"), r"(0|[1-9][0-9]*)")
        prefixes = [""] if m.get("head") else table["body_prefixes"]
        if any(re.fullmatch(re.escape(p) + pattern, path) for p in prefixes):
            return m
    return None


def config_table(config):
    """The naming table peft-bridge picks for a base config.json (FromModelConfig): the first table listing
    one of its `architectures`, else the one listing its `model_type`. The internlm3 case's config names
    LlamaForCausalLM, the class transformers builds it with, so the llama table (and llama.cpp's LlamaModel)
    applies to it."""
    tables = [dict(json.loads(f.read_text()), name=f.stem) for f in sorted(NAMING.glob("*.json"))]
    for a in config.get("architectures") or []:
        for t in tables:
            if a in t["architectures"]:
                return t
    return next(t for t in tables if config.get("model_type") in t["model_types"])


def translate_expectations(case, root):
    """Per format, what `translate --to F` then back `--to peft` must give for an architecture case: "exact"
    (the original adapter's tensors, bit for bit) or "refused" (the format cannot name a module). kohya spells
    any module the table knows, mlx those inside the blocks (layer modules, no embedding or head); gguf-names
    needs the table's gguf_arch and a GGUF name for every module the adapter changes."""
    table = config_table(json.loads((root / "base" / "config.json").read_text()))
    paths = sorted({k[len("base_model.model."):].split(".lora_")[0] for k in read_folder(root / "adapter")})
    entries = [table_module(table, p) for p in paths]
    unknown = [p for p, e in zip(paths, entries) if e is None]
    if unknown:
        raise RuntimeError(f"{case['name']}: table {table['name']} has no module for {unknown}")
    gguf_ok = bool(table.get("gguf_arch")) and all("gguf" in e for e in entries)
    in_blocks = all("{N}" in e["hf"] and not e.get("head") for e in entries)  # mlx-lm: inside the blocks only
    return {"mlx": "exact" if in_blocks else "refused", "kohya": "exact",
            "gguf-names": "exact" if gguf_ok else "refused"}


def build_case(case):
    root = CORPUS / case["name"]
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    task = case.get("task", "causal")
    build_base(case, root / "base")
    build_adapter(case, root / "base", root / "adapter")

    base = load_base(case, root / "base")
    logits = {"base": logits_of(base, task)}
    model = PeftModel.from_pretrained(load_base(case, root / "base"), root / "adapter").eval()
    logits["adapter"] = logits_of(model, task)
    merged = model.merge_and_unload()
    logits["merged"] = logits_of(merged, task)
    save(merged, root / "peft_merged", case.get("shard"))
    reloaded = load_base(case, root / "peft_merged")
    logits["merged_reloaded"] = logits_of(reloaded, task)
    inputs = {f"input.{k}": v for k, v in model_input(task, vocab_size=getattr(base.config, "vocab_size", None)).items()}
    save_file({**{f"logits.{k}": v for k, v in logits.items()}, **inputs}, root / "logits.safetensors",
              metadata={"format": "pt"})
    return {
        "name": case["name"],
        "what": case["what"],
        "arch": case["arch"],
        "task": task,
        "dtype": case["dtype"],
        "adapter_dtype": case.get("adapter_dtype", "f32"),
        "sharded": bool(case.get("shard")),
        "lora": case["lora"],
        **({"table": case["table"], "translate": translate_expectations(case, root)} if case.get("table") else {}),
        "changed_tensors": (changed := expectations(case, root, merged)),
        "unmerge": build_unmerged(case, root, changed),
        "logits_max_abs_diff": {
            "adapter_vs_merged": float((logits["adapter"].float() - logits["merged"].float()).abs().max()),
            "base_vs_merged": float((logits["base"].float() - logits["merged"].float()).abs().max()),
        },
    }


def refresh_translate_expectations(manifest_path):
    """Recomputes every architecture case's `translate` from its committed adapter and the current naming
    tables (what a full run would write), without rebuilding anything: after a naming-table change."""
    manifest = json.loads(manifest_path.read_text())
    by_name = {c["name"]: c for c in CASES}
    for item in manifest["cases"]:
        if "translate" in item:
            item["translate"] = translate_expectations(by_name[item["name"]], CORPUS / item["name"])
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n")


def refresh_unmerged(manifest_path, only):
    """Rewrites peft_unmerged.safetensors and the manifest's `unmerge` of the named cases (all when none are
    named) from their committed base and adapter, without rebuilding them (what a full run writes)."""
    manifest = json.loads(manifest_path.read_text())
    by_name = {c["name"]: c for c in CASES}
    for item in manifest["cases"]:
        if only and item["name"] not in only:
            continue
        print(f"generate.py: unmerge {item['name']}", file=sys.stderr)
        case = dict(by_name[item["name"]], lora=item["lora"])
        unmerge = build_unmerged(case, CORPUS / item["name"], item["changed_tensors"])
        # The key where a full run puts it: right after changed_tensors.
        rebuilt = {}
        for k, v in item.items():
            if k != "unmerge":
                rebuilt[k] = v
            if k == "changed_tensors":
                rebuilt["unmerge"] = unmerge
        item.clear()
        item.update(rebuilt)
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n")


def main():
    if sys.argv[1:] == ["--translate-expectations"]:
        return refresh_translate_expectations(HERE / "MANIFEST.json")
    if sys.argv[1:2] == ["--unmerged"]:
        return refresh_unmerged(HERE / "MANIFEST.json", set(sys.argv[2:]))
    only = set(sys.argv[1:])
    CORPUS.mkdir(exist_ok=True)
    manifest_path = HERE / "MANIFEST.json"
    old = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    old_cases = {c["name"]: c for c in old.get("cases", [])}
    cases, failed = [], {}
    for case in CASES:
        if only and case["name"] not in only:
            if case["name"] in old_cases:
                cases.append(old_cases[case["name"]])
            continue
        print(f"generate.py: {case['name']}", file=sys.stderr)
        try:
            entry = build_case(case)
        except Exception as e:  # an architecture PEFT or transformers cannot run tiny: reported, not written
            if not case.get("tiny"):
                raise
            failed[case["name"]] = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"
            print(f"generate.py: {case['name']} FAILED: {failed[case['name']]}", file=sys.stderr)
            shutil.rmtree(CORPUS / case["name"], ignore_errors=True)
            continue
        # Hand-kept fields (known failures and their reasons) survive a rerun.
        for key in ("known_failure",):
            if key in old_cases.get(case["name"], {}):
                entry[key] = old_cases[case["name"]][key]
        cases.append(entry)
    manifest = {
        "about": "Golden corpus written by transformers and PEFT (tests/golden/README.md). Per case: base/ "
                 "(save_pretrained), adapter/ (PEFT save_pretrained), peft_merged/ (PEFT merge_and_unload() "
                 "then save_pretrained), logits.safetensors (fixed input; base, adapter unmerged, merged, "
                 "merged reloaded from disk).",
        "command": 'python="$(bash scripts/golden-venv.sh)" && "$python" tests/golden/generate.py',
        "versions": {p: version(p) for p in
                     ("torch", "transformers", "peft", "safetensors", "huggingface_hub", "gguf", "numpy")},
        "python": sys.version.split()[0],
        "cases": cases,
    }
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n")
    if failed:
        print("generate.py: not generated: " + json.dumps(failed, indent=1), file=sys.stderr)


if __name__ == "__main__":
    main()
