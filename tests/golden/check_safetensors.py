"""Live cross-check: the Python `safetensors` package (its Rust core) loads every .safetensors file our CLI
writes, and finds there exactly what our `inspect --json` reports: the same tensor names, dtypes, shapes and
metadata, and for every tensor the same bytes as the file holds at the offsets inspect gives.

    python="$(bash scripts/golden-venv.sh)" && "$python" tests/golden/check_safetensors.py build/native/peft-bridge

Files written: `merge` of every golden case (all shards), `translate --to peft|mlx|kohya|gguf-names` of every
corpus adapter and every third-party adapter fixture (routes our CLI refuses, with the reason, are skipped
silently: check_adapters.py lists them), and `convert --dtype bf16|f16|f32` of every fixture and corpus base
file. One line per written file; ends with "safetensors: N passed, N failed".
"""
import json
import sys
import tempfile
from pathlib import Path

from live_common import MANIFEST, REQUIRE, Report, cli_from_argv, fixtures_dir, generate, merged, run, translated

import subprocess  # noqa: E402
import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402

FORMATS = ("peft", "mlx", "kohya", "gguf-names")
DTYPES = ("bf16", "f16", "f32")
TORCH_DTYPE = {"BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16, "U16": torch.uint16,
               "I32": torch.int32, "U32": torch.uint32, "I64": torch.int64, "U64": torch.uint64,
               "F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32, "F64": torch.float64,
               "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2}


def inspect(cli, path):
    r = subprocess.run([str(cli), "inspect", str(path), "--json"], capture_output=True, text=True)
    return json.loads(r.stdout)


def compare(cli, path):
    """None when Python's safetensors reads what our inspect reports, else the first difference."""
    ours = inspect(cli, path)
    if not ours.get("ok"):
        return f"our inspect rejects our own file: {ours.get('error')}"
    raw = path.read_bytes()
    data_start = ours["fileSize"] - ours["dataSize"]
    with safe_open(path, framework="pt") as f:
        if (f.metadata() or None) != ours["metadata"]:
            return f"metadata {f.metadata()!r} vs ours {ours['metadata']!r}"
        names = list(f.keys())
        if sorted(names) != sorted(t["name"] for t in ours["tensors"]):
            return "tensor names differ"
        for t in ours["tensors"]:
            x = f.get_tensor(t["name"])
            if x.dtype != TORCH_DTYPE[t["dtype"]] or list(x.shape) != t["shape"]:
                return f"{t['name']}: {x.dtype}{list(x.shape)} vs ours {t['dtype']}{t['shape']}"
            b, e = t["dataOffsets"]
            stored = raw[data_start + b:data_start + e]
            if x.contiguous().view(-1).view(torch.uint8).numpy().tobytes() != stored:
                return f"{t['name']}: bytes differ from the file's at our offsets [{b}, {e})"
    return None


def written_files(cli, tmp):
    """Yields (what, path) for every .safetensors file our CLI writes here."""
    n = 0

    def out_dir():
        nonlocal n
        n += 1
        return tmp / str(n)

    for item in MANIFEST["cases"]:
        root = generate.CORPUS / item["name"]
        if "known_failure" not in item:
            code, err, out = merged(cli, root)
            if code:
                yield f"merge {item['name']}: {err}", None
            for f in sorted(out.glob("*.safetensors")):
                yield f"merge {item['name']} -> {f.name}", f
        for fmt in FORMATS:
            code, _, out = translated(cli, root / "adapter", fmt, base_config=root / "base" / "config.json")
            if code == 0:
                for f in sorted(out.glob("*.safetensors")):
                    yield f"translate {item['name']} --to {fmt} -> {f.name}", f
        for f in sorted((root / "base").glob("*.safetensors")):
            for dtype in DTYPES:
                out = out_dir() / f.name
                out.parent.mkdir()
                code, err = run(cli, "convert", f, out, "--dtype", dtype, "-q")
                yield f"convert {item['name']}/base/{f.name} --dtype {dtype}", out if code == 0 else None
    fixtures = fixtures_dir()
    if fixtures is None:
        yield f"{'FAIL' if REQUIRE else 'no'} third-party fixtures (tests/fixtures, ../shared/fixtures)", None if REQUIRE else "skip"
        return
    adapters = ("adapter_config.json", "pytorch_lora_weights.safetensors")  # PEFT and mlx; diffusers (no config)
    for d in sorted(p for p in fixtures.iterdir() if any((p / name).exists() for name in adapters)):
        for fmt in FORMATS:
            code, _, out = translated(cli, d, fmt)
            if code == 0:
                for f in sorted(out.glob("*.safetensors")):
                    yield f"translate {d.name} --to {fmt} -> {f.name}", f
    for f in sorted(fixtures.rglob("*.safetensors")):
        rel = f.relative_to(fixtures)
        if inspect(cli, f).get("ok") is not True:
            continue  # a malformed fixture: convert refuses it (the reader tests check that)
        for dtype in DTYPES:
            out = out_dir() / f.name
            out.parent.mkdir()
            code, err = run(cli, "convert", f, out, "--dtype", dtype, "-q")
            yield f"convert {rel} --dtype {dtype}", out if code == 0 else None


def main():
    cli = cli_from_argv()
    report = Report("safetensors")
    with tempfile.TemporaryDirectory() as tmp:
        for what, path in written_files(cli, Path(tmp)):
            if path == "skip":
                print(f"SKIP {what}")
            elif path is None:
                report.case(False, f"{what}: our CLI failed to write it")
            else:
                why = compare(cli, path)
                report.case(why is None, f"{what}{': ' + why if why else ''}")
    return report.done()


if __name__ == "__main__":
    sys.exit(main())
