"""Live cross-check: our adapter_config.json is what PEFT itself writes for the same settings, text for text
(json.dumps(indent=2, sort_keys=True) of the same keys and values), for the installed PEFT and for the
oldest release `--old-peft` writes for (PEFT 0.13.2, requirements-old-peft.txt).

    python="$(bash scripts/golden-venv.sh)" && "$python" tests/golden/check_configs.py build/native/peft-bridge

Installed PEFT: every corpus adapter_config.json was written by PEFT's own save_pretrained in the pinned
venv (the check first asserts the installed PEFT is the manifest's). Ours must be that text byte for byte
after `translate --to peft` (peft -> peft) and after a round trip through each other format
(mlx/kohya/gguf-names -> peft, which carry the PEFT config in their metadata); a difference lists the keys.
Where a route changed the tensors (gguf-names folds a per-module or rsLoRA scale into B, so alpha and the
patterns change with it), ours must instead be byte for byte what the installed PEFT's save_pretrained writes
for the settings ours holds (target_modules compared as a set there: PEFT writes it in str-hash order); so
must the configs we derive for the real mlx-lm and diffusers adapters of tests/fixtures (no PEFT config).
PEFT 0.13.2: ours from `translate --to peft --old-peft` must load in that release's LoraConfig, and its
save_pretrained of what it loaded must write our text back byte for byte. A corpus adapter using a field
0.13 lacks (non-default) must instead be refused by our CLI with an error naming a field 0.13 does not have.
Ends with "configs: N passed, N failed".
"""
import json
import os
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

from live_common import (MANIFEST, REQUIRE, Report, cli_from_argv, fixtures_dir, generate, old_peft_path, run,
                         tensors_equal, translated)

from peft import LoraConfig  # noqa: E402

ROUND_TRIP_FORMATS = ("mlx", "kohya", "gguf-names")


def key_difference(ours, theirs):
    try:
        a, b = json.loads(theirs), json.loads(ours)
    except ValueError as e:
        return f"not JSON: {e}"
    keys = sorted(k for k in a.keys() | b.keys() if a.get(k, "<absent>") != b.get(k, "<absent>"))
    if not keys:
        return "same keys and values, different text (order, spacing or number spelling)"
    return "; ".join(f"{k}: ours {b.get(k, '<absent>')!r}, PEFT {a.get(k, '<absent>')!r}" for k in keys[:4])


def same_set_order(ours, theirs):
    """PEFT's text with its target_modules list in our order when both hold the same names. PEFT writes that
    field from a Python set, so its order follows str hashing (PYTHONHASHSEED) and is not a property of the
    settings; ours is sorted. json.dumps(indent=2, sort_keys=True) of PEFT's parsed dict rewrites its text
    exactly (it is how PEFT wrote it), so only the order changes."""
    a, b = json.loads(theirs), json.loads(ours)
    if isinstance(a.get("target_modules"), list) and isinstance(b.get("target_modules"), list) \
            and sorted(a["target_modules"]) == sorted(b["target_modules"]) and json.dumps(a, indent=2, sort_keys=True) == theirs:
        a["target_modules"] = b["target_modules"]
        return json.dumps(a, indent=2, sort_keys=True)
    return theirs


def check_installed(cli, report, tmp):
    for item in MANIFEST["cases"]:
        root = generate.CORPUS / item["name"]
        theirs = (root / "adapter" / "adapter_config.json").read_text()
        original = generate.read_folder(root / "adapter")
        base_config = root / "base" / "config.json"
        routes = [("peft -> peft", root / "adapter")]
        for fmt in ROUND_TRIP_FORMATS:
            code, why, mid = translated(cli, root / "adapter", fmt, base_config=base_config)
            if code:
                report.not_applicable(f"{item['name']} [{fmt} -> peft]: --to {fmt}: {why}")
                continue
            routes.append((f"{fmt} -> peft", mid))
        for route, src in routes:
            code, why, out = translated(cli, src, "peft", base_config=base_config)
            if code:
                report.case(False, f"{item['name']} [{route}]: our CLI failed: {why}")
                continue
            ours = (out / "adapter_config.json").read_text()
            label = f"{item['name']} [{route}]"
            if tensors_equal(original, generate.read_folder(out)) is None:
                report.case(ours == theirs, f"{label}: "
                            + ("byte-identical to PEFT's" if ours == theirs else key_difference(ours, theirs)))
                continue
            # Our CLI changed the tensors (gguf-names folds a per-module or rsLoRA scale into B): the config
            # is then a different one with the same deltas, and PEFT's own writer must write it as we did.
            resaved = tmp / f"{item['name']}-{route.split()[0]}-resaved"
            LoraConfig.from_pretrained(out).save_pretrained(resaved)
            again = same_set_order(ours, (resaved / "adapter_config.json").read_text())
            report.case(ours == again, f"{label}: scale folded into B, so PEFT's settings differ; "
                        + ("byte-identical to PEFT's save_pretrained of the settings ours holds" if ours == again
                           else key_difference(ours, again)))


def check_fixtures(cli, report, tmp):
    """Real mlx-lm and diffusers adapters (tests/fixtures) carry no PEFT config: the one we derive must be what
    PEFT's save_pretrained writes for the settings it holds."""
    fixtures = fixtures_dir()
    if fixtures is None:
        report.case(not REQUIRE, "no third-party fixtures (tests/fixtures, ../shared/fixtures)")
        return
    for d in sorted(fixtures.iterdir()):
        if not ((d / "adapters.safetensors").exists() or (d / "pytorch_lora_weights.safetensors").exists()):
            continue
        out, resaved = tmp / f"fixture-{d.name}", tmp / f"fixture-{d.name}-resaved"
        code, why = run(cli, "translate", d, out, "--to", "peft", "-q")
        if code:
            report.case(False, f"{d.name} [fixture -> peft]: our CLI failed: {why}")
            continue
        ours = (out / "adapter_config.json").read_text()
        LoraConfig.from_pretrained(out).save_pretrained(resaved)
        again = same_set_order(ours, (resaved / "adapter_config.json").read_text())
        report.case(ours == again, f"{d.name} [fixture -> peft]: " + (
            "byte-identical to PEFT's save_pretrained of the settings ours holds" if ours == again
            else key_difference(ours, again)))


def check_old(cli, report, tmp, old):
    pairs, refused = [], []
    for item in MANIFEST["cases"]:
        root = generate.CORPUS / item["name"]
        code, why, out = translated(cli, root / "adapter", "peft", "--old-peft", base_config=root / "base" / "config.json")
        if code:
            refused.append((item, why))
        else:
            pairs.append((item, out, tmp / f"{item['name']}-old-resaved"))
    env = dict(os.environ, PYTHONPATH=str(old), PYTHONHASHSEED="0")
    args = [str(p) for _, src, dst in pairs for p in (src, dst)]
    r = subprocess.run([sys.executable, str(generate.HERE / "old_peft_resave.py"), *args],
                       capture_output=True, text=True, env=env)
    if r.returncode:
        report.case(False, f"PEFT 0.13 could not run: {r.stderr.strip().splitlines()[-1:]}")
        return
    answer = json.loads(r.stdout)
    fields = set(answer["fields"])
    print(f"old PEFT: {answer['version']} from {old}")
    for item, src, dst in pairs:
        label = f"{item['name']} [--old-peft, PEFT {answer['version']}]"
        error = answer["results"][str(src)]
        ours = (src / "adapter_config.json").read_text()
        extra = sorted(set(json.loads(ours)) - fields)
        if error:
            report.case(False, f"{label}: PEFT {answer['version']} refuses our config: {error}")
        elif extra:
            report.case(False, f"{label}: keys that release does not have: {extra}")
        else:
            # PEFT 0.13 also writes target_modules from a set: its order is str hashing's, not the settings'.
            resaved = same_set_order(ours, (dst / "adapter_config.json").read_text())
            report.case(resaved == ours, f"{label}: " + ("PEFT 0.13 rewrites it byte for byte" if resaved == ours
                                                          else key_difference(ours, resaved)))
    for item, why in refused:
        # The refusal must name a field of the original that 0.13 lacks and that holds a non-default value.
        original = json.loads((generate.CORPUS / item["name"] / "adapter" / "adapter_config.json").read_text())
        named = [k for k in original if k not in fields and f"`{k}`" in why]
        report.case(bool(named), f"{item['name']} [--old-peft]: refused, naming {named or 'no 0.13-less field'}: {why}")


def main():
    cli = cli_from_argv()
    report = Report("configs")
    installed, wrote = version("peft"), MANIFEST["versions"]["peft"]
    report.case(installed == wrote, f"installed PEFT {installed} is the one that wrote the corpus ({wrote})")
    with tempfile.TemporaryDirectory() as tmp:
        check_installed(cli, report, Path(tmp))
        check_fixtures(cli, report, Path(tmp))
        old = old_peft_path()
        if old is None:
            print(f"{'FAIL' if REQUIRE else 'SKIP'}: PEFT 0.13.2 not installed beside the venv (bash scripts/golden-venv.sh)")
            if REQUIRE:
                report.case(False, "PEFT 0.13.2 (requirements-old-peft.txt) missing under PB_REQUIRE_FIXTURES=1")
        else:
            check_old(cli, report, Path(tmp), old)
    return report.done()


if __name__ == "__main__":
    sys.exit(main())
