"""Generates the naming tables data/naming/arch/*.json from the pinned transformers (docs/naming-tables.md).

    python="$(bash scripts/golden-venv.sh)" && "$python" tests/golden/naming/generate.py [table ...]

For every table of tests/golden/tiny_archs.py it instantiates each model_type tiny on the CPU, in every task
class transformers has for it (CausalLM, MaskedLM, Seq2SeqLM, SequenceClassification, TokenClassification,
QuestionAnswering and the bare model), walks named_modules() and records each module LoRA can target: its
path (the first layer index becomes {N}), its kind (nn.Linear, transformers Conv1D, nn.Embedding, nn.Conv2d),
whether the default config ties it to the input embedding, and which roles a fused projection computes. GGUF
names come from gguf-py's tensor_mapping.py, only for architectures whose llama.cpp converter was read
(tiny_archs.GGUF_CONVERTERS), with its row permutations.

What was first written by hand stays in tests/golden/naming/curated/<table>.json and is laid over the result:
its table fields and module entries win, modules it lacks are added. A curated module whose kind disagrees
with the model, or a model module that the curated table spells with another kind, stops the run.
Prints, per table, what generation added to the curated table. No downloads, no weights written.
"""
import json
import os
import re
import sys
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
warnings.filterwarnings("ignore")

import gguf  # noqa: E402
import torch  # noqa: E402
from transformers import AutoConfig  # noqa: E402
from transformers.models.auto import modeling_auto as auto  # noqa: E402
from transformers.pytorch_utils import Conv1D  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE.parent))
from tiny_archs import GGUF_CONVERTERS, TABLES, tiny_kwargs  # noqa: E402

hf_logging.set_verbosity_error()
torch.set_num_threads(1)
OUT = ROOT / "data" / "naming" / "arch"
CURATED = HERE / "curated"

# Task classes, the body's own class first: its modules (no prefix) tell the body from a task class's heads.
TASKS = [
    ("base", auto.MODEL_MAPPING_NAMES),
    ("causal", auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES),
    ("masked", auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES),
    ("seq2seq", auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES),
    ("seq_cls", auto.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES),
    ("token_cls", auto.MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES),
    ("qa", auto.MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES),
]

ATTN_ROLES = {
    "query": ("q_proj", "query", "q", "q_lin", "wq"),
    "key": ("k_proj", "key", "k", "k_lin", "wk"),
    "value": ("v_proj", "value", "v", "v_lin", "wv"),
    "output": ("o_proj", "out_proj", "o", "out_lin", "dense", "c_proj", "wo", "dense_out"),
    "qkv": ("qkv_proj", "c_attn", "query_key_value", "Wqkv", "qkv", "W_pack"),
    "q_a": ("q_a_proj",), "q_b": ("q_b_proj",), "kv_a": ("kv_a_proj_with_mqa",), "kv_b": ("kv_b_proj",),
}
MLP_ROLES = {
    "gate": ("gate_proj", "w1", "wi_0"),
    "up": ("up_proj", "w3", "c_fc", "fc1", "dense_h_to_4h", "wi", "wi_1", "fc_in"),
    "down": ("down_proj", "w2", "fc2", "dense_4h_to_h", "wo", "c_proj", "fc_out"),
    "gate_up": ("gate_up_proj",),
}
FUSED = {"qkv": ["query", "key", "value"], "gate_up": ["gate", "up"]}
EMBED_ROLES = {
    "tokens": ("embed_tokens", "wte", "word_embeddings", "embed_in", "shared", "tok_embeddings", "word_embedding"),
    "positions": ("wpe", "position_embeddings", "embed_positions"),
    "token_types": ("token_type_embeddings",),
}
HEAD_ROLES = {
    "lm_head": "head/lm", "embed_out": "head/lm", "score": "head/score", "classifier": "head/classifier",
    "qa_outputs": "head/qa", "classifier.dense": "head/classifier/dense",
    "classifier.out_proj": "head/classifier/out", "classification_head.dense": "head/classifier/dense",
    "classification_head.out_proj": "head/classifier/out", "pre_classifier": "head/classifier/dense",
    "lm_head.dense": "head/lm/transform", "lm_head.decoder": "head/lm", "cls.predictions.decoder": "head/lm",
    "cls.predictions.transform.dense": "head/lm/transform", "output_projection": "head/lm",
    "generator_predictions.dense": "head/lm/transform", "generator_lm_head": "head/lm",
    "head.dense": "head/lm/transform", "decoder": "head/lm", "vocab_projector": "head/lm",
    "vocab_transform": "head/lm/transform", "final_logits_bias": "head/lm",
}
LAYER = re.compile(r"^(.*?)\.(\d+)(\.|$)")


def kind_of(module):
    if isinstance(module, Conv1D):
        return "conv1d"
    if isinstance(module, torch.nn.Linear):
        return "linear"
    if isinstance(module, torch.nn.Embedding):
        return "embedding"
    if isinstance(module, torch.nn.Conv2d):
        return "conv2d"
    return None


def template(path):
    """The first layer index becomes {N}; a second index under `experts` means per-expert modules (None)."""
    m = LAYER.match(path)
    if not m:
        return path, None
    rest = path[m.end():]
    if re.search(r"(^|\.)experts\.\d+(\.|$)", rest):
        return None, None
    return f"{m.group(1)}.{{N}}{m.group(3)}{rest}", int(m.group(2))


def role(tmpl):
    """Canonical path for a body template (docs/naming-tables.md's vocabulary), or None if unknown."""
    parts = tmpl.split(".")
    side = ""
    if parts[0] in ("encoder", "decoder") and len(parts) > 1:
        side = parts[0] + "/"
    leaf = parts[-1]
    if "{N}" not in tmpl:
        for r, names in EMBED_ROLES.items():
            if leaf in names:
                return side + "embeddings/" + r
        if tmpl in ("pooler.dense",):
            return "pooler/dense"
        return None
    within = parts[parts.index("{N}") + 1:-1]
    ctx = ".".join(within).lower()
    shared = "shared" in ctx
    if any(w in ctx for w in ("encdecattention", "encoder_attn", "cross_attn", "crossattention")):
        group = "cross_attention"
    elif "attn" in ctx or "attention" in ctx or "mixer" in ctx:
        group = "attention"
    elif any(w in ctx for w in ("mlp", "ffn", "feed_forward", "densereludense", "moe")) or not within:
        group = "mlp"
    elif ctx in ("intermediate",) and leaf == "dense":
        return side + "layers/{N}/mlp/up"
    elif ctx in ("output",) and leaf == "dense":
        return side + "layers/{N}/mlp/down"
    else:
        return None
    if group == "attention" and ctx.endswith("output") and leaf == "dense":
        return side + "layers/{N}/attention/output"
    roles = ATTN_ROLES if group != "mlp" else MLP_ROLES
    if group == "mlp" and not within and leaf in ("fc1", "fc2"):  # BART-style layers hold fc1/fc2 directly
        roles = MLP_ROLES
    for r, names in roles.items():
        if leaf in names:
            return f"{side}layers/{{N}}/{group}/" + ("shared/" if shared else "") + r
    return None


def path_canonical(tmpl, head):
    """A canonical name spelled from the path, for modules outside the vocabulary (unique: paths are)."""
    body = tmpl.replace(".{N}.", "/{N}/").replace(".", "/")
    return ("head/" if head else "other/") + body


def gguf_map(conv, n_blocks):
    if not conv:
        return None
    arch = next(a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == conv["arch"])
    return gguf.get_tensor_name_map(arch, n_blocks)


def gguf_name(name_map, full_path, layer):
    if name_map is None:
        return None
    got = name_map.get_name(full_path + ".weight", try_suffixes=(".weight",))
    if not got:
        return None
    got = got[: -len(".weight")] if got.endswith(".weight") else got
    if layer is not None:
        got, n = re.subn(rf"(^|\.)blk\.{layer}\.", rf"\1blk.{{N}}.", got)
        if n != 1:
            return None
    return got


def found_key(found, tmpl):
    return (tmpl, True) if (tmpl, True) in found else (tmpl, False)


def walk(model_type):
    """Every LoRA-targetable module of every task class of model_type, and the classes and prefixes found."""
    config = AutoConfig.for_model(model_type, **tiny_kwargs(model_type))
    classes, body_prefixes, found, tied, errors = [], [], {}, {}, []
    for task, mapping in TASKS:
        name = mapping.get(model_type)
        if not name:
            continue
        if isinstance(name, (list, tuple)):
            name = name[0]
        cls = getattr(__import__("transformers", fromlist=[name]), name, None)
        if cls is None:
            continue
        try:
            kwargs = dict(num_labels=3) if task in ("seq_cls", "token_cls") else {}
            cfg = AutoConfig.for_model(model_type, **tiny_kwargs(model_type), **kwargs)
            torch.manual_seed(0)
            model = cls._from_config(cfg)
        except Exception as e:  # a class that cannot be built tiny: recorded, the others still count
            errors.append(f"{name}: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
            continue
        # A class of another family reused for this model_type (internlm3 -> LlamaForCausalLM) is walked but
        # not claimed: FromModelConfig must find one table per class name.
        owner_type = getattr(getattr(cls, "config_class", None), "model_type", model_type)
        if owner_type == model_type and name not in classes:
            classes.append(name)
        names = [n for n, _ in model.named_modules()]
        prefix = "" if task == "base" else (getattr(model, "base_model_prefix", "") or "")
        prefix = prefix + "." if prefix and any(n.startswith(prefix + ".") for n in names) else ""
        if task != "base" and not prefix:
            # The body under an attribute base_model_prefix does not name (Llama4ForCausalLM's `model` while
            # its prefix says language_model): the top-level child under which the bare model's modules sit.
            tops = {n.split(".", 1)[0] for n in names if "." in n}
            hits = {t: sum((template(n[len(t) + 1:])[0], False) in found for n in names if n.startswith(t + "."))
                    for t in tops}
            best = max(hits, key=hits.get, default=None)
            if best and hits[best] > 0:
                prefix = best + "."
        if prefix not in body_prefixes:
            body_prefixes.append(prefix)
        owner = {}  # id(weight) -> template of the first module holding it (tied weights share one tensor)
        for path, module in model.named_modules():
            kind = kind_of(module)
            if not kind or not path:
                continue
            inside = path.startswith(prefix) if prefix else True
            rel = path[len(prefix):] if inside else path
            tmpl, layer = template(rel)
            if tmpl is None:
                continue
            # A task class's module is body if the bare model has it (T5 keeps its body at the root).
            head = task != "base" and not (inside and (tmpl, False) in found) and not (prefix and inside)
            if head:
                tmpl, layer = template(path)
                rel = path
            key = (tmpl, head)
            entry = found.setdefault(key, dict(hf=tmpl, head=head, kind=kind, layer=layer,
                                              full=(prefix if not head else "") + rel))
            if entry["kind"] != kind:
                raise SystemExit(f"{model_type}: {tmpl} is {entry['kind']} in one class and {kind} in another")
            w = getattr(module, "weight", None)
            if w is not None:
                # The embedding owns a tied weight (the checkpoint stores it under the embedding's name),
                # whichever module named_modules() lists first.
                first = owner.setdefault(id(w), (tmpl, kind))
                if first[0] != tmpl:
                    if kind == "embedding" and first[1] != "embedding":
                        tied.setdefault(found_key(found, first[0]), tmpl)
                    else:
                        tied.setdefault(key, first[0])
    return config, classes, body_prefixes, found, tied, errors


def generate(table, model_types):
    curated_path = CURATED / f"{table}.json"
    curated = json.loads(curated_path.read_text()) if curated_path.exists() else None
    conv = GGUF_CONVERTERS.get(model_types[0])
    found, tied, classes, prefixes, errors = {}, {}, [], [], []
    for mt in model_types:
        config, c, p, f, t, e = walk(mt)
        classes += [x for x in c if x not in classes]
        prefixes += [x for x in p if x not in prefixes]
        for k, v in f.items():
            found.setdefault(k, v)
        tied.update(t)
        errors += e
    if not found:
        raise RuntimeError("no class could be built: " + "; ".join(errors))
    n_blocks = 2
    name_map = gguf_map(conv, n_blocks)
    # Body prefixes: the wrapper attributes found, then "" (the bare model); "" last unless curated says.
    prefixes = [p for p in prefixes if p] + [""]
    modules, added = [], []
    by_hf = {(m["hf"], bool(m.get("head"))): m for m in (curated or {}).get("modules", [])}
    canonicals = {m["canonical"] for m in (curated or {}).get("modules", [])}
    ggufs = {m["gguf"] for m in (curated or {}).get("modules", []) if "gguf" in m}
    # Curated modules the model does not have, by (canonical, kind, head): a model module with that role is
    # a newer spelling of it.
    aliases = {(m["canonical"], m["kind"], bool(m.get("head"))): m for m in (curated or {}).get("modules", [])
               if (m["hf"], bool(m.get("head"))) not in found}
    before = {}
    for key, f in found.items():
        if key in by_hf:
            if by_hf[key]["kind"] != f["kind"]:
                raise SystemExit(f"{table}: curated {f['hf']} is {by_hf[key]['kind']}, the model's is {f['kind']}")
            continue
        canonical = HEAD_ROLES.get(f["hf"]) if f["head"] else role(f["hf"])
        alias = aliases.get((canonical, f["kind"], f["head"]))
        if alias is not None:
            # The curated table spells this role with a name the pinned transformers no longer uses (GPT-NeoX's
            # embed_out is lm_head since transformers 5): both spellings share the role, the current one first.
            entry = {"hf": f["hf"], **({"head": True} if f["head"] else {}), "canonical": canonical}
            if "gguf" in alias:
                entry["gguf"] = alias["gguf"]
            entry["kind"] = f["kind"]
            entry["note"] = f"the pinned transformers' name; older checkpoints and adapters name it {alias['hf']}"
            if key in tied:
                entry["tied_to"] = tied[key]
            before.setdefault(alias["hf"], []).append(entry)
            added.append(f["hf"] + (" (head)" if f["head"] else "") + f" (alias of {alias['hf']})")
            continue
        if canonical is None or canonical in canonicals:
            canonical = path_canonical(f["hf"], f["head"])
            if canonical in canonicals:
                raise SystemExit(f"{table}: canonical {canonical} twice")
        canonicals.add(canonical)
        entry = {"hf": f["hf"]}
        if f["head"]:
            entry["head"] = True
        entry["canonical"] = canonical
        name = None
        if conv and not any(f["hf"].endswith(x) for x in conv.get("no_gguf", [])) and not (key in tied):
            name = gguf_name(name_map, f["full"], f["layer"])
            if not name and not f["head"]:
                # Found first in the bare model (no prefix): gguf-py may know only the checkpoint's spelling,
                # under the task class's prefix (LFM2's model.layers.{bid}.conv.in_proj).
                name = next((n for p in prefixes if p for n in [gguf_name(name_map, p + f["full"], f["layer"])] if n),
                            None)
            if name in ggufs:
                name = None
        if name:
            ggufs.add(name)
            entry["gguf"] = name
        entry["kind"] = f["kind"]
        if name and conv and conv.get("permute"):
            leaf = f["hf"].rsplit(".", 1)[-1]
            if leaf == "q_proj":
                entry["gguf_permute"] = {"kind": "llama_rope", "heads": "num_attention_heads"}
            elif leaf == "k_proj":
                entry["gguf_permute"] = {"kind": "llama_rope", "heads": "num_key_value_heads"}
        r = canonical.rsplit("/", 1)[-1]
        if r in FUSED:
            entry["fused"] = FUSED[r]
        if key in tied:
            entry["tied_to"] = tied[key]
            if conv:
                entry["note"] = "tied to the input embedding by default: llama.cpp writes no output tensor then"
        modules.append(entry)
        added.append(f["hf"] + (" (head)" if f["head"] else ""))
    # Curated modules first, in their order (lookups by a shared canonical name return the first listed),
    # with the tie found in the model; then what generation added.
    merged_modules = []
    for m in (curated or {}).get("modules", []):
        m = dict(m)
        key = (m["hf"], bool(m.get("head")))
        if key in tied and "tied_to" not in m:
            m["tied_to"] = tied[key]
        r = m["canonical"].rsplit("/", 1)[-1]
        if r in FUSED and "fused" not in m:
            m["fused"] = FUSED[r]
        merged_modules += before.get(m["hf"], [])
        merged_modules.append(m)
    merged_modules += modules
    out = {}
    if curated:
        out["note"] = curated.get("note", "")
    else:
        note = "Generated from transformers' modeling code by tests/golden/naming/generate.py."
        note += (f" llama.cpp: {conv['source']}." if conv else
                 " No GGUF names: no llama.cpp converter was checked for this architecture.")
        out["note"] = note
    out["model_types"] = list((curated or {}).get("model_types", []))
    out["model_types"] += [t for t in model_types if t not in out["model_types"]]
    arches = list((curated or {}).get("architectures", []))
    arches += [c for c in classes if c not in arches]
    out["architectures"] = arches
    gguf_arch = (curated or {}).get("gguf_arch") or (conv["arch"] if conv else None)
    if gguf_arch:
        out["gguf_arch"] = gguf_arch
    out["body_prefixes"] = (curated or {}).get("body_prefixes") or prefixes
    for p in prefixes:
        if p not in out["body_prefixes"]:
            out["body_prefixes"].append(p)
    if curated and "detect_priority" in curated:
        out["detect_priority"] = curated["detect_priority"]
    elif not curated:
        # Detect's ties (the same module names: camembert and roberta, most llama-like decoders) go to the
        # tables whose llama.cpp facts were checked by hand.
        out["detect_priority"] = -1
    out["modules"] = merged_modules
    missing = [m["hf"] for m in (curated or {}).get("modules", []) if (m["hf"], bool(m.get("head"))) not in found]
    return out, added, missing, errors


def dump(table):
    """One module per line, like the hand-written tables, so that a diff shows one module per line."""
    lines = ["{"]
    keys = [k for k in table if k != "modules"]
    for k in keys:
        lines.append(f"  {json.dumps(k)}: {json.dumps(table[k])},")
    lines.append('  "modules": [')
    for i, m in enumerate(table["modules"]):
        lines.append("    " + json.dumps(m) + ("," if i + 1 < len(table["modules"]) else ""))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main():
    only = set(sys.argv[1:])
    OUT.mkdir(parents=True, exist_ok=True)
    report = {}
    failed = {}
    for table, model_types in TABLES.items():
        if only and table not in only:
            continue
        try:
            out, added, missing, errors = generate(table, model_types)
        except Exception as e:
            failed[table] = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"
            if os.environ.get("NAMING_TRACE"):
                import traceback
                traceback.print_exc()
            print(f"naming: {table}: FAILED {failed[table]}", file=sys.stderr)
            continue
        (OUT / f"{table}.json").write_text(dump(out))
        report[table] = dict(added=added, curated_not_in_model=missing, classes_not_built=errors)
        print(f"naming: {table}: {len(out['modules'])} modules; added {added}; curated-only {missing}"
              + (f"; not built {errors}" if errors else ""), file=sys.stderr)
    print(json.dumps({"tables": len(report), "failed": failed}, indent=1))


if __name__ == "__main__":
    main()
