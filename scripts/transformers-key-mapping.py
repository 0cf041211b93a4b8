#!/usr/bin/env python3
"""Writes data/naming/transformers/key-mapping.json: transformers' checkpoint key mapping as data.

transformers 5 loads checkpoints whose tensor names differ from its modules' names (ViT's checkpoint holds
`vit.encoder.layer.0.attention.attention.query.weight`, the module is `vit.layers.0.attention.q_proj`) by
renaming keys with its conversion rules (transformers/conversion_mapping.py, applied by core_model_loading.py),
and `save_pretrained` writes the checkpoint names back. PEFT names an adapter's modules by the loaded names, so a
merge must map a checkpoint's names to the loaded ones the same way. This script extracts the rules the pinned
transformers applies, per model_type, as data the C++ core embeds (adapter/key_mapping.h):

- The rules are resolved the way transformers resolves them for a model (get_model_conversion_mapping): the
  model_type's base model class (AutoModel's) is built on the meta device from its default config, and every
  PreTrainedModel inside it contributes its model_type's or class's rules, scoped to its path. Class-keyed rules
  (`Qwen2_5_VLForConditionalGeneration`...) are resolved on that class too, under "architectures".
- A rename is stored as its compiled regex's branches (Python `re`, each with the `(?!\\w)` name boundary
  transformers appends) and its replacement; a WeightConverter (fusing, splitting, transposing, permuting) as its
  branches, all its target names and its operations, so that a module built by one can be refused by name.
  Renames transformers implements in code rather than by regex (GroupWeightRename, LayerPairCollapse, index
  offsets) are kept as "unsupported" with their branches: a key they would rename is refused, never guessed.
- Model types whose base model cannot be built on the meta device fall back to their static rules, unscoped
  (recorded under "static").

Run with the pinned venv: python="$(bash scripts/golden-venv.sh)" && "$python" scripts/transformers-key-mapping.py
"""
import json
import re
try:
    import re._parser as sre_parse  # Python 3.11+
except ImportError:  # pragma: no cover
    import sre_parse
import sys
import warnings
from pathlib import Path

import torch
import transformers
from transformers import AutoConfig
from transformers import conversion_mapping as cm
from transformers.core_model_loading import (
    GroupWeightRename,
    Inkling2IndexOffsetWeightRename,
    LayerPairCollapse,
    WeightConverter,
    WeightRenaming,
)
from transformers.models.auto import modeling_auto

OUT = Path(__file__).resolve().parent.parent / "data/naming/transformers/key-mapping.json"


LEADING_LOOKBEHIND = re.compile(r"^\(\?<!((?:[^()\\]|\\.|\([^()]*\))*)\)")


def branches(t):
    """The compiled source regex's branches in matching order, as plain patterns (named group removed). Leading
    negative lookbehinds (fixed width, as Python requires) are split off as "not_after": [{pattern, width}], which
    the core checks before the match's start (its regex engine has no lookbehind)."""
    out = []
    pattern = t.compiled_sources.pattern
    # The compiled pattern is "(?P<gI>body)|(?P<gJ>body)..." in matching order (longest source first).
    for i, source in sorted(enumerate(t.source_patterns), key=lambda item: -len(item[1])):
        body = source.replace("*.", r".*\.")
        if re.search(r"[a-zA-Z0-9]$", body):
            body += r"(?!\w)"
        out.append({"pattern": body, "source": i})
    rebuilt = "|".join(f"(?P<g{b['source']}>{b['pattern']})" for b in out)
    assert rebuilt == pattern, (rebuilt, pattern)
    for b in out:
        not_after = []
        while m := LEADING_LOOKBEHIND.match(b["pattern"]):
            lo, hi = sre_parse.parse(m.group(1)).getwidth()
            assert lo == hi, m.group(1)
            not_after.append({"pattern": m.group(1), "width": lo})
            b["pattern"] = b["pattern"][m.end():]
        assert "(?<" not in b["pattern"], b["pattern"]
        if not_after:
            b["not_after"] = not_after
    # The core matches a rule with lookbehinds position by position, each branch on the text from there: no branch
    # of such a rule may look at what comes before its start otherwise.
    if any("not_after" in b for b in out):
        assert not any("^" in b["pattern"] or r"\b" in b["pattern"] or r"\B" in b["pattern"] for b in out), out
    return out


def rule(t):
    r = {"branches": branches(t), "targets": list(t.target_patterns)}
    if t.scope_prefix is not None:
        r["scope"] = t.scope_prefix
        r["base_model_prefix"] = t.base_model_prefix or ""
    if isinstance(t, (GroupWeightRename, LayerPairCollapse, Inkling2IndexOffsetWeightRename)):
        r["kind"] = "unsupported"
        r["what"] = type(t).__name__
    elif isinstance(t, WeightRenaming):
        r["kind"] = "rename"
    elif isinstance(t, WeightConverter):
        r["kind"] = "convert"
        r["what"] = ", ".join(repr(op) for op in t.operations)
    else:
        raise TypeError(f"unknown transform {type(t).__name__}")
    return r


def ordered(transforms):
    """Renamings first, then converters, each in order: core_model_loading applies them so."""
    renames = [t for t in transforms if isinstance(t, WeightRenaming)]
    converters = [t for t in transforms if isinstance(t, WeightConverter)]
    return [rule(t) for t in renames + converters]


def resolve(cls, config):
    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = cls(config)
    return cm.get_model_conversion_mapping(model, add_legacy=False)


def model_class(name):
    return getattr(transformers, name, None)


def config_model_types(config, seen=None):
    """The model_type of a config and of every sub-config in it, recursively."""
    seen = set() if seen is None else seen
    if config.model_type in seen:
        return seen
    seen.add(config.model_type)
    for key in getattr(config, "sub_configs", {}) or {}:
        sub = getattr(config, key, None)
        if sub is not None and hasattr(sub, "model_type"):
            config_model_types(sub, seen)
    return seen


def dump(doc):
    """JSON with one rule per line (a readable diff when transformers changes a rule, a third of indent=1's size)."""
    def rules(items, indent):
        return "[\n" + ",\n".join(indent + json.dumps(r) for r in items) + "\n" + indent[:-1] + "]"

    def named(obj, nested):
        lines = []
        for k, v in obj.items():
            if nested:
                body = "{" + f'"model_type": {json.dumps(v["model_type"])}, "rules": ' + rules(v["rules"], "   ") + "}"
            else:
                body = rules(v, "   ")
            lines.append(f"  {json.dumps(k)}: {body}")
        return "{\n" + ",\n".join(lines) + "\n }"

    parts = [f' "about": {json.dumps(doc["about"])}', f' "transformers_version": {json.dumps(doc["transformers_version"])}',
             f' "legacy": {rules(doc["legacy"], "  ")}', f' "model_types": {named(doc["model_types"], False)}',
             f' "architectures": {named(doc["architectures"], True)}', f' "static": {json.dumps(doc["static"], indent=2)}',
             f' "base_model_prefix": {json.dumps(doc["base_model_prefix"], indent=2)}']
    text = "{\n" + ",\n".join(parts) + "\n}\n"
    assert json.loads(text) == doc
    return text


def main():
    static = cm._build_checkpoint_conversion_mapping()
    model_types, architectures, fallbacks, skipped, prefixes = {}, {}, {}, {}, {}
    base_classes = dict(modeling_auto.MODEL_MAPPING_NAMES)
    classes_of = {}
    for mapping_name, mapping in vars(modeling_auto).items():
        if mapping_name.endswith("_MAPPING_NAMES") and isinstance(mapping, dict):
            for model_type, name in mapping.items():
                for n in name if isinstance(name, (list, tuple)) else [name]:
                    classes_of.setdefault(model_type, set()).add(n)
    for model_type, class_name in sorted(base_classes.items()):
        if isinstance(class_name, (list, tuple)):
            class_name = class_name[0]
        cls = model_class(class_name)
        # Only a model with a rule key among its (sub-)models' model_types and classes can have rules: the others
        # are not built (building every model type's default model on the meta device takes many minutes).
        try:
            involved = config_model_types(AutoConfig.for_model(model_type))
        except Exception:  # noqa: BLE001 - then it is built, or its failure recorded, below
            involved = {model_type}
        keys = set(involved) | {n for t in involved for n in classes_of.get(t, ())}
        if not keys & static.keys():
            continue
        try:
            config = AutoConfig.for_model(model_type)
            transforms = resolve(cls, config)
        except Exception as e:  # noqa: BLE001 - recorded, and the static rules used instead
            transforms = cm.get_checkpoint_conversion_mapping(class_name) or cm.get_checkpoint_conversion_mapping(model_type)
            if transforms:
                fallbacks[model_type] = f"{class_name} not built on meta ({type(e).__name__}: {str(e)[:120]})"
            else:
                skipped[model_type] = f"{class_name}: {type(e).__name__}"
        if transforms:
            model_types[model_type] = ordered(transforms)
            prefixes[model_type] = getattr(cls, "base_model_prefix", "") or ""
        print(f"{model_type}: {len(transforms or [])}", file=sys.stderr)
    # Class-keyed rules of head classes (the base model's resolution does not see them).
    heads = {}
    for mapping_name, mapping in vars(modeling_auto).items():
        if mapping_name.endswith("_MAPPING_NAMES") and isinstance(mapping, dict):
            for model_type, name in mapping.items():
                if isinstance(name, str) and name in static and model_type in base_classes and name != base_classes[model_type]:
                    heads[name] = model_type
    for name, model_type in sorted(heads.items()):
        try:
            transforms = resolve(model_class(name), AutoConfig.for_model(model_type))
        except Exception as e:  # noqa: BLE001
            skipped[name] = f"{type(e).__name__}"
            continue
        architectures[name] = {"model_type": model_type, "rules": ordered(transforms)}
    doc = {
        "about": "transformers' checkpoint key mapping (conversion_mapping.py) per model_type, resolved as "
                 "get_model_conversion_mapping does; generated by scripts/transformers-key-mapping.py, do not edit",
        "transformers_version": transformers.__version__,
        "legacy": [rule(t) for t in cm.get_checkpoint_conversion_mapping("legacy")],
        "model_types": model_types,
        "architectures": architectures,
        "static": fallbacks,
        # The loader finally adds or strips the model's base_model_prefix to find a renamed key in the model
        # (rename_source_key): rules written for `XForY` ("^vision_model." -> "model.vision_model.") then also name
        # the base model's modules ("vision_model....").
        "base_model_prefix": prefixes,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(dump(doc))
    print(f"{len(model_types)} model types, {len(architectures)} head classes, {len(fallbacks)} static, "
          f"{len(skipped)} without rules that failed to build: {OUT}", file=sys.stderr)
    for k, v in sorted(fallbacks.items()):
        print(f"static {k}: {v}", file=sys.stderr)


if __name__ == "__main__":
    main()
