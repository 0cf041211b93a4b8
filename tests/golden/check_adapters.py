"""Live cross-check: PEFT loads every adapter our `translate --to peft` writes, from each format we read, and
gives the logits of the original PEFT adapter.

    python="$(bash scripts/golden-venv.sh)" && "$python" tests/golden/check_adapters.py build/native/peft-bridge

For each corpus case, the PEFT adapter PEFT wrote goes through our CLI by these routes:
  peft                 translate --to peft
  peft --old-peft      translate --to peft --old-peft
  F -> peft            translate --to F, then that folder --to peft (F = mlx, kohya, gguf-names)
and PEFT's own `PeftModel.from_pretrained` loads the result on the corpus base. The reference is computed
here, in this process on this machine: PEFT loads the original corpus adapter the same way and gives the
same fixed input's logits. Where the result's tensors are the original's bit for bit, the logits must be
bit-identical to that reference (the same tensors through the same kernels); where our CLI changed them
(gguf-names folds a per-module scale into B, one rounding) max |Δ| is reported and must stay within 16 ulp of
the model dtype at the largest |logit|.
The logits stored in the corpus (logits.safetensors "adapter") were computed on the machine that generated it:
another CPU's torch kernels may sum in another order (last bits differ), so they are never compared bit for
bit. Each case's "[reference]" line compares them with the reference computed here, within the same 16 ulp:
a check that this venv still computes what the generating one did (the same PEFT and transformers
semantics), not of our CLI.
The `--old-peft` adapters are also loaded by PEFT 0.13.2 (requirements-old-peft.txt, installed beside the
venv), the oldest release that option writes for, in a subprocess on this machine; their logits must be the
reference's bit for bit, except for DoRA on a BF16/F16 base (PEFT 0.13's DoRA arithmetic differs there:
within 16 ulp) and the one adapter PEFT 0.13.2 itself cannot run (OLD_PEFT_KNOWN_FAILURES: its DoRA Conv2d
on a BF16 base raises), which must still fail so the entry is removed once it does not.
A route whose target format cannot hold the adapter (our CLI refuses it and says why, docs/adapters.md) is
printed as "n/a" with the reason and not counted. Routes that wrote the same two files (adapter_config.json and
adapter_model.safetensors, byte for byte: peft, mlx -> peft and kohya -> peft usually do) are loaded by PEFT
once per case and judged each. Ends with "adapters: N passed, N failed".
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

from live_common import (MANIFEST, REQUIRE, Report, cli_from_argv, generate, logits_delta, old_peft_path,
                         tensors_equal, tolerance, translated)

from peft import PeftConfig, PeftModel  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

warnings.filterwarnings("ignore")
ROUND_TRIP_FORMATS = ("mlx", "kohya", "gguf-names")
# PEFT 0.13.2 itself fails on these (the pinned PEFT loads the same tensors): recorded with its error text.
OLD_PEFT_KNOWN_FAILURES = {
    "resnet_dora_conv2d": "expected scalar type Float but found BFloat16",  # its DoRA Conv2d on a BF16 base
}


def routes(cli, adapter, base_config):
    """Yields (route name, translated PEFT folder or None, why not)."""
    for name, extra in (("peft", ()), ("peft --old-peft", ("--old-peft",))):
        code, why, out = translated(cli, adapter, "peft", *extra, base_config=base_config)
        yield name, None if code else out, why or f"exit {code}"
    for fmt in ROUND_TRIP_FORMATS:
        code, why, mid = translated(cli, adapter, fmt, base_config=base_config)
        if code:
            yield f"{fmt} -> peft", None, f"--to {fmt}: {why or f'exit {code}'}"
            continue
        code, why, out = translated(cli, mid, "peft", base_config=base_config)
        yield f"{fmt} -> peft", None if code else out, f"{fmt} --to peft: {why or f'exit {code}'}"


def content_key(folder):
    """The bytes PEFT's from_pretrained reads from an adapter folder: two routes that wrote the same files load
    the same model, so PEFT loads each distinct one once per case."""
    h = hashlib.sha256()
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        h.update((folder / name).read_bytes() if (folder / name).exists() else b"<absent>")
    return h.hexdigest()


def config_difference(ours, theirs):
    """PEFT's reading of both configs (target_modules as a set, as PEFT holds it), or None when equal."""
    a, b = (PeftConfig.from_pretrained(p).to_dict() for p in (theirs, ours))
    for d in (a, b):
        if isinstance(d.get("target_modules"), (list, set)):
            d["target_modules"] = sorted(d["target_modules"])
    keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    return ", ".join(f"{k}: {b.get(k)!r} vs {a.get(k)!r}" for k in keys[:3]) or None


def check_old_peft(report, outputs, references):
    """PEFT 0.13.2 (the oldest release --old-peft writes for) loads each --old-peft adapter: the logits of the
    original adapter as the pinned PEFT computed them in this process (`references`, by case name)."""
    old = old_peft_path()
    if old is None:
        print(f"{'FAIL' if REQUIRE else 'SKIP'}: PEFT 0.13.2 not installed beside the venv (bash scripts/golden-venv.sh)")
        if REQUIRE:
            report.case(False, "PEFT 0.13.2 (requirements-old-peft.txt) missing under PB_REQUIRE_FIXTURES=1")
        return
    env = dict(os.environ, PYTHONPATH=str(old), PYTHONHASHSEED="0")
    with tempfile.TemporaryDirectory(prefix="pb-old-peft-") as tmp:
        ref_file = Path(tmp) / "references.safetensors"
        save_file({name: references[name].contiguous() for name, _ in outputs}, str(ref_file))
        r = subprocess.run([sys.executable, str(generate.HERE / "old_peft_logits.py"), str(ref_file),
                            *(f"{name}={out}" for name, out in outputs)], capture_output=True, text=True, env=env)
    if r.returncode:
        report.case(False, f"PEFT 0.13.2 could not run: {r.stderr.strip().splitlines()[-1:]}")
        return
    answer = json.loads(r.stdout)
    items = {c["name"]: c for c in MANIFEST["cases"]}
    for name, _ in outputs:
        res, item = answer["results"][name], items[name]
        label = f"{name} [peft --old-peft, loaded by PEFT {answer['version']}]"
        known = OLD_PEFT_KNOWN_FAILURES.get(name)
        if known:  # must still fail as recorded, so that the entry goes once it loads
            report.case(bool(res["error"]) and known in res["error"],
                        f"{label}: known failure of that release ({known}): {res['error'] or 'it loads now: remove the entry'}")
        elif res["error"]:
            report.case(False, f"{label}: PEFT {answer['version']} cannot load it: {res['error']}")
        else:
            # --old-peft changes only the config, so the tensors are the original's: bit-identical logits, except
            # where PEFT 0.13's own DoRA arithmetic differs from the pinned release's in half precision.
            half_dora = item["lora"].get("use_dora") and item["dtype"] != "f32"
            tol = tolerance(references[name], generate.DTYPES[item["dtype"]])
            ok = res["exact"] or (half_dora and res["delta"] <= tol)
            report.case(ok, f"{label}: max |Δ| logits {res['delta']:.3g}{' (bit-identical)' if res['exact'] else ''}"
                            f"{' (PEFT 0.13 half-precision DoRA; tolerance %.3g)' % tol if half_dora and not res['exact'] else ''}")


def main():
    cli = cli_from_argv()
    report = Report("adapters")
    by_name = {c["name"]: c for c in generate.CASES}
    old_outputs, references = [], {}
    for item in MANIFEST["cases"]:
        reference = check_case(cli, report, item, by_name[item["name"]], old_outputs)
        if reference is not None:
            references[item["name"]] = reference
    check_old_peft(report, old_outputs, references)
    return report.done()


def reference_logits(report, item, case, root):
    """The original corpus adapter's logits, computed here: PEFT loads it on the corpus base as it loads ours.
    Reported against the logits the generating machine stored (within 16 ulp: other CPUs round sums
    differently; a larger gap means this venv computes something else)."""
    model = PeftModel.from_pretrained(generate.load_base(case, root / "base"), root / "adapter").eval()
    reference = generate.logits_of(model, item["task"])
    exact, delta, tol = logits_delta(reference, load_file(root / "logits.safetensors")["logits.adapter"],
                                     generate.DTYPES[item["dtype"]])
    report.case(delta <= tol, f"{item['name']} [reference]: PEFT's logits of the corpus adapter here vs the corpus's "
                              f"stored ones: max |Δ| {delta:.3g}{' (bit-identical)' if exact else ''} (tolerance {tol:.3g})")
    return reference


def check_case(cli, report, item, case, old_outputs):
    """Judges every route of one corpus case; returns the reference logits computed here."""
    root = generate.CORPUS / item["name"]
    original = generate.read_folder(root / "adapter")
    try:
        reference = reference_logits(report, item, case, root)
    except Exception as e:  # without the original's logits no route of this case can be judged
        report.case(False, f"{item['name']} [reference]: PEFT cannot load the corpus adapter: {type(e).__name__}: {str(e)[:200]}")
        return None
    dtype = generate.DTYPES[item["dtype"]]
    # content_key -> logits, or the error PEFT raised; a route that wrote the original's two files loads the
    # very model the reference was computed from
    loaded = {content_key(root / "adapter"): reference}
    for route, out, why in routes(cli, root / "adapter", root / "base" / "config.json"):
        label = f"{item['name']} [{route}]"
        if out is None:
            report.not_applicable(f"{label}: {why}")
            continue
        different = tensors_equal(original, generate.read_folder(out))
        key = content_key(out)
        if key not in loaded:
            try:
                model = PeftModel.from_pretrained(generate.load_base(case, root / "base"), out).eval()
                loaded[key] = generate.logits_of(model, item["task"])
            except Exception as e:  # PEFT refusing what we wrote is exactly what this check is for
                loaded[key] = f"{type(e).__name__}: {str(e)[:200]}"
        logits = loaded[key]
        if isinstance(logits, str):
            report.case(False, f"{label}: PEFT cannot load it: {logits}")
            continue
        exact, delta, tol = logits_delta(logits, reference, dtype)
        ok = exact if different is None else delta <= tol
        config = config_difference(out, root / "adapter")
        report.case(ok, f"{label}: max |Δ| logits {delta:.3g}{' (bit-identical)' if exact else ''}; "
                        f"tensors {'identical' if different is None else 'differ: ' + different}"
                        f"{'; config differs: ' + config if config else ''}")
        if route == "peft --old-peft":
            old_outputs.append((item["name"], out))
    return reference


if __name__ == "__main__":
    sys.exit(main())
