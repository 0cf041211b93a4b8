"""Live cross-check of transformers' checkpoint key mapping (data/naming/transformers/key-mapping.json): for every
model_type the data lists, `merge` into a base whose checkpoint names differ from its loaded names = PEFT's merge.

    python="$(bash scripts/golden-venv.sh)" && cd tests/golden && "$python" check_key_mapping.py ../../build/native/peft-bridge

Per model_type: its base model class (AutoModel's) built by the pinned transformers from `AutoConfig.for_model`
shrunk to tiny sizes (tiny_archs.TINY on the config and on every sub-config that has the field, vision sizes
16 px / 8 px patches), seeded, saved with `save_pretrained` (which writes the checkpoint's names: transformers
reverts its mapping when it saves); a PEFT LoRA (r = 2, random A and B) on up to four of its nn.Linear modules,
those whose checkpoint name differs from their loaded name first; PEFT's `merge_and_unload()` saved with
`save_pretrained` is the oracle. Our `merge` must write the same tensor names, dtypes and shapes as PEFT's file,
transformers must load our folder, and every weight must equal PEFT's folder's loaded the same way: bit for bit where the LoRA
does not touch it, within the bound docs/merge.md states where it does (|ours - PEFT| <= 2 gamma_{r+1} s |B||A| +
one float32 rounding). A model whose save renames nothing a LoRA can target is a pass of a plain merge, counted
apart ("no renamed Linear"); a module built by a conversion must be refused by us (UnsupportedBase, naming it).
Model types that cannot be built tiny on CPU are listed as skipped with the reason. Ends with
"key_mapping: N passed, N failed".
"""
import copy
import json
import re
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from live_common import Report, cli_from_argv

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent / "data/naming/transformers/key-mapping.json"
SEED = 27
MAX_PARAMETERS = 3_000_000  # a tiny model that stays bigger than this (a config the sizes do not reach) is skipped
VISION = dict(image_size=16, patch_size=8, num_frames=2, tubelet_size=1, max_length=16, num_mel_bins=16)


def shrink(config, tiny, seen=None):
    """Sets the tiny sizes on `config` and, recursively, on every sub-config, where the field exists."""
    seen = set() if seen is None else seen
    if id(config) in seen:
        return
    seen.add(id(config))
    for key, value in {**tiny, **VISION}.items():
        if hasattr(config, key) and not callable(getattr(config, key)):
            current = getattr(config, key)
            if isinstance(current, (int, float)) and not isinstance(current, bool) or current is None and key in tiny:
                try:
                    setattr(config, key, value)
                except Exception:  # noqa: BLE001 - a derived property: left as it is
                    pass
    # Per-layer lists (layer_types, mlp_only_layers as flags...) follow the layer count.
    layers = getattr(config, "num_hidden_layers", None)
    if isinstance(layers, int):
        for key, value in list(vars(config).items()):
            if isinstance(value, list) and len(value) > layers and key.endswith(("layer_types", "_layers_block_type")):
                try:
                    setattr(config, key, value[:layers])
                except Exception:  # noqa: BLE001
                    pass
    for key in getattr(config, "sub_configs", {}) or {}:
        sub = getattr(config, key, None)
        if sub is not None and hasattr(sub, "to_dict"):
            shrink(sub, tiny, seen)


def build(model_type):
    """The tiny seeded base model of `model_type` (AutoModel's class), or raises with why it cannot be built."""
    from tiny_archs import tiny_kwargs
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.for_model(model_type)
    shrink(config, tiny_kwargs(model_type))
    torch.manual_seed(SEED)
    model = AutoModel.from_config(config, dtype=torch.float32)
    n = sum(p.numel() for p in model.parameters())
    if n > MAX_PARAMETERS:
        raise RuntimeError(f"{n / 1e6:.1f} M parameters with the tiny sizes set")
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(-0.1, 0.1)
    return model.eval()


def renamed_linears(model):
    """nn.Linear module names (loaded), renamed ones first: those whose weight save_pretrained writes under
    another name (transformers' revert_weight_conversion), and those it writes unchanged. Converted weights (not the
    same tensor on both sides) are in neither list but in the third."""
    from transformers.core_model_loading import revert_weight_conversion

    state = model.state_dict()
    saved = revert_weight_conversion(model, dict(state))
    saved_name = {id(t): k for k, t in saved.items()}
    renamed, same, converted = [], [], []
    for name, module in model.named_modules():
        if type(module) is not torch.nn.Linear or name + ".weight" not in state:
            continue
        k = saved_name.get(id(state[name + ".weight"]))
        (converted if k is None else renamed if k != name + ".weight" else same).append(name)
    return renamed, same, converted


def bound(delta_abs, r, scale):
    """docs/merge.md: 2 gamma_{r+1} s sum_k |B_ik A_kj|, gamma_n = n u / (1 - n u), u = 2^-24."""
    u = 2.0 ** -24
    gamma = (r + 1) * u / (1 - (r + 1) * u)
    return 2 * gamma * scale * delta_abs


def check_refusal(cli, report, model, model_type, module, base, root):
    """A LoRA on a Linear whose weight transformers builds by a conversion: we refuse it, naming the module."""
    from peft import LoraConfig, get_peft_model

    peft_model = get_peft_model(copy.deepcopy(model), LoraConfig(r=2, target_modules=[module], init_lora_weights=False))
    peft_model.save_pretrained(root / "adapter-converted")
    r = subprocess.run([str(cli), "merge", "--base", base, "--adapter", root / "adapter-converted", "--out",
                        root / "ours-converted", "-q"], capture_output=True, text=True)
    ok = r.returncode != 0 and "UnsupportedBase" in r.stderr and f"`{module}`" in r.stderr and "conversion" in r.stderr
    report.case(ok, f"{model_type}: LoRA on {module} (converted by transformers): "
                    + ("refused, naming it and the conversion" if ok else f"exit {r.returncode}: {r.stderr.strip()[:300]}"))


def check_type(cli, report, model_type, top, skipped):
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModel

    try:
        model = build(model_type)
        renamed, same, converted = renamed_linears(model)
    except Exception as e:  # noqa: BLE001 - listed as skipped, with the reason
        skipped.append((model_type, f"{type(e).__name__}: {str(e).splitlines()[0][:150] if str(e) else ''}"))
        return None
    if not renamed and not same:
        skipped.append((model_type, "no nn.Linear module"))
        return None
    root = top / model_type
    base, adapter, peft_out, ours = root / "base", root / "adapter", root / "peft", root / "ours"
    try:
        model.save_pretrained(base)
    except Exception as e:  # noqa: BLE001 - the shrunk config does not validate: listed as skipped
        skipped.append((model_type, f"save_pretrained: {type(e).__name__}: {str(e).splitlines()[0][:150]}"))
        return None
    if converted:
        check_refusal(cli, report, model, model_type, converted[0], base, root)
    candidates = renamed + same
    targets = (renamed[:3] + same[:1]) if renamed else same[:4]
    for attempt in range(3):
        try:
            peft_model = get_peft_model(copy.deepcopy(model), LoraConfig(r=2, lora_alpha=4, target_modules=targets,
                                                                         init_lora_weights=False))
            break
        except ValueError as e:  # PEFT refuses some modules (Mamba's out_proj, half of a fused pair): others
            said = set(re.findall(r"\w+", str(e)))
            candidates = [c for c in candidates if c.rsplit(".", 1)[-1] not in said]
            targets = candidates[:4]
            if attempt == 2 or not targets:
                skipped.append((model_type, f"PEFT refuses the LoRA targets: {str(e).splitlines()[0][:150]}"))
                return None
    wrapped = [t for t in targets if hasattr(peft_model.base_model.model.get_submodule(t), "lora_A")]
    if wrapped and len(wrapped) < len(targets):
        # PEFT mapped the others onto fused parameters (ParamWrapper): the Linear targets alone, which this checks.
        targets = wrapped
        peft_model = get_peft_model(copy.deepcopy(model), LoraConfig(r=2, lora_alpha=4, target_modules=targets,
                                                                     init_lora_weights=False))
    peft_model.save_pretrained(adapter)
    factors = {}
    for name in targets:
        m = peft_model.base_model.model.get_submodule(name)
        if not hasattr(m, "lora_A"):  # PEFT did not wrap it (it maps some targets onto fused parameters)
            continue
        a, b = m.lora_A["default"].weight.detach(), m.lora_B["default"].weight.detach()
        factors[name + ".weight"] = (b.abs() @ a.abs(), m.scaling["default"])
    merged = peft_model.merge_and_unload()
    merged.save_pretrained(peft_out)

    r = subprocess.run([str(cli), "merge", "--base", base, "--adapter", adapter, "--out", ours, "-q"],
                       capture_output=True, text=True)
    if not factors:
        skipped.append((model_type, f"PEFT wrapped none of {targets}"))
        return None
    what = f"{model_type}: LoRA on {', '.join(n.removesuffix('.weight') for n in factors)}" + ("" if renamed else " (no renamed Linear)")
    if r.returncode != 0:
        report.case(False, f"{what}: our merge failed: {r.stderr.strip()[:400]}")
        return False

    def header(folder):
        out = {}
        for f in sorted(folder.glob("*.safetensors")):
            with safe_open(f, "pt") as s:
                for k in s.keys():
                    t = s.get_slice(k)
                    out[k] = (t.get_dtype(), tuple(t.get_shape()))
        return out

    theirs_h, ours_h = header(peft_out), header(ours)
    if theirs_h != ours_h:
        only_ours = sorted(set(ours_h) - set(theirs_h))[:3]
        only_theirs = sorted(set(theirs_h) - set(ours_h))[:3]
        report.case(False, f"{what}: our file's names/dtypes/shapes differ from PEFT's save: only ours {only_ours}, "
                           f"only PEFT's {only_theirs}")
        return False
    # transformers loads our folder (with the in-memory config: a shrunk one need not survive its own validation).
    # Both folders loaded the same way (a loader may re-initialise a row, e.g. an embedding's padding_idx).
    loaded = AutoModel.from_pretrained(ours, config=merged.config, dtype=torch.float32).state_dict()
    expected = AutoModel.from_pretrained(peft_out, config=merged.config, dtype=torch.float32).state_dict()
    worst, problems = 0.0, []
    for k, want in expected.items():
        got = loaded.get(k)
        if got is None or got.shape != want.shape:
            problems.append(f"{k}: {'missing' if got is None else list(got.shape)}")
            continue
        if k in factors:
            delta_abs, scale = factors[k]
            diff = (got.float() - want.float()).abs()
            allowed = bound(delta_abs, 2, scale) + torch.finfo(torch.float32).eps * want.float().abs()
            if bool((diff > allowed).any()):
                problems.append(f"{k}: |ours - PEFT| {diff.max().item():.3g} beyond the bound")
            worst = max(worst, (diff / allowed.clamp_min(1e-45)).max().item())
        elif not torch.equal(got, want):
            problems.append(f"{k}: not bit-identical to PEFT's ({(got - want).abs().max().item():.3g})")
    changed = len(factors)
    ok = not problems
    report.case(ok, f"{what}: {len(theirs_h)} tensors named as PEFT's save, {changed} merged within "
                    f"{worst:.2f} of the bound, the rest bit-identical" if ok else f"{what}: {'; '.join(problems[:3])}")
    return ok


def main():
    cli = cli_from_argv()
    report = Report("key_mapping")
    data = json.loads(DATA.read_text())
    import transformers

    if transformers.__version__ != data["transformers_version"]:
        print(f"FAIL the data was generated from transformers {data['transformers_version']}, "
              f"the venv has {transformers.__version__}: regenerate it (scripts/transformers-key-mapping.py)")
        return 1
    skipped, tested = [], 0
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pb-keymap-") as top:
        only = os.environ.get("PB_KEYMAP_TYPES")  # a comma-separated subset, when iterating on one
        for model_type in sorted(data["model_types"]):
            if only and model_type not in only.split(","):
                continue
            try:
                result = check_type(cli, report, model_type, Path(top), skipped)
            except Exception as e:  # noqa: BLE001 - a crash in a case is that case's failure
                report.case(False, f"{model_type}: {type(e).__name__}: {str(e)[:300]}")
                result = False
            tested += result is not None
    for model_type, why in skipped:
        print(f"skip {model_type}: {why}")
    print(f"{len(data['model_types'])} model types in the data: {tested} tested end to end, {len(skipped)} skipped "
          f"({time.monotonic() - start:.0f} s)")
    return report.done()


if __name__ == "__main__":
    sys.exit(main())
