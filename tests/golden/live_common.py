"""What the live cross-checks (check_*.py) share: running our CLI, reading folders, comparing tensors and
logits, and the one-line-per-case / "N passed, N failed" report. Imports generate.py for the corpus's
models, inputs and loading code (generate re-execs with PYTHONHASHSEED=0 so PEFT writes sets in one order)."""
import atexit
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generate  # noqa: E402,F401  (re-execs once with PYTHONHASHSEED=0)

import torch  # noqa: E402

MANIFEST = json.loads((generate.HERE / "MANIFEST.json").read_text())
REQUIRE = os.environ.get("PB_REQUIRE_FIXTURES") == "1"


def cli_from_argv():
    """The native CLI named on the command line; a missing one skips (exit 77), or fails under PB_REQUIRE_FIXTURES=1."""
    cli = Path(sys.argv[1] if len(sys.argv) > 1 else "build/native/peft-bridge").resolve()
    if not cli.is_file():
        print(f"{'FAIL' if REQUIRE else 'SKIP'}: {cli} not built")
        sys.exit(1 if REQUIRE else 77)
    return cli


def run(cli, *args):
    """Runs our CLI; returns (exit code, the first two lines of stderr: the error and its first detail)."""
    r = subprocess.run([str(cli), *map(str, args)], capture_output=True, text=True)
    lines = [ln.strip() for ln in r.stderr.splitlines() if ln.strip()]
    return r.returncode, " ".join(lines[:2])


class _Outputs:
    """What our CLI wrote, by command: the checks ask for the same merges and translations (check_all.py runs
    them in one process), and each is written once, into one temporary directory removed at exit."""

    def __init__(self):
        self.dir = None
        self.done = {}

    def get(self, key, write):
        if key not in self.done:
            if self.dir is None:
                self.dir = Path(tempfile.mkdtemp(prefix="pb-live-"))
                atexit.register(shutil.rmtree, self.dir, True)
            out = self.dir / str(len(self.done))
            code, err = write(out)
            self.done[key] = (code, err, out)
        return self.done[key]


_OUTPUTS = _Outputs()


def merged(cli, root):
    """Our `merge` of corpus case folder `root` (base/ + adapter/): (exit code, error, output folder)."""
    return _OUTPUTS.get(("merge", str(cli), str(root)), lambda out: run(
        cli, "merge", "--base", root / "base", "--adapter", root / "adapter", "--out", out, "-q"))


def translated(cli, src, fmt, *extra, base_config=None):
    """Our `translate SRC OUT --to FMT [--base-config FILE] EXTRA...`: (exit code, error, output folder). The
    outputs are read only, so a route one check asks for is the folder another check already has."""
    config = ("--base-config", base_config) if base_config else ()
    return _OUTPUTS.get(("translate", str(cli), str(src), fmt, *map(str, config), *extra), lambda out: run(
        cli, "translate", src, out, "--to", fmt, "-q", *config, *extra))


def tensors_equal(a, b):
    """Same names, dtypes, shapes and bits; else a short description of the first difference."""
    if a.keys() != b.keys():
        return f"names differ: only ours {sorted(b.keys() - a.keys())[:3]}, only theirs {sorted(a.keys() - b.keys())[:3]}"
    for k in sorted(a):
        x, y = a[k], b[k]
        if x.dtype != y.dtype or x.shape != y.shape:
            return f"{k}: {y.dtype}{list(y.shape)} vs {x.dtype}{list(x.shape)}"
        if not torch.equal(x.reshape(-1).view(torch.uint8), y.reshape(-1).view(torch.uint8)):  # 0-dim too
            return f"{k}: values differ (max |Δ| {(x.float() - y.float()).abs().max().item():.3g})"
    return None


def logits_delta(ours, ref, dtype):
    """(bit-identical, max |Δ|, 16 ulp of `dtype` at the largest |logit|): the tolerance check_live.py uses."""
    ours, ref = ours.float(), ref.float()
    return torch.equal(ours, ref), (ours - ref).abs().max().item(), tolerance(ref, dtype)


def tolerance(ref, dtype):
    """16 ulp of `dtype` at the largest |logit| of `ref`."""
    scale = ref.float().abs().max().item()
    return 16 * torch.finfo(dtype).eps * 2.0 ** torch.tensor(scale).log2().floor().item()


class Report:
    """One line per case; `done()` prints "<label>: N passed, N failed" and returns the exit status."""

    def __init__(self, label):
        self.label, self.passed, self.failed, self.na = label, 0, 0, 0

    def case(self, ok, text):
        self.passed += bool(ok)
        self.failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {text}", flush=True)

    def not_applicable(self, text):
        """A route the target format documents it cannot hold (our CLI refused it with the reason): not counted."""
        self.na += 1
        print(f"n/a  {text}", flush=True)

    def done(self):
        extra = f" ({self.na} routes not applicable: the target format cannot hold the adapter)" if self.na else ""
        print(f"{self.label}: {self.passed} passed, {self.failed} failed{extra}")
        return 1 if self.failed or not self.passed else 0


def fixtures_dir():
    """The third-party fixtures: vendored in tests/fixtures, else ../shared/fixtures beside the repository."""
    repo = generate.HERE.parent.parent
    for d in (repo / "tests" / "fixtures", repo.parent / "shared" / "fixtures"):
        if d.is_dir():
            return d
    return None


def old_peft_path():
    """PEFT 0.13.2 (requirements-old-peft.txt), installed by scripts/golden-venv.sh beside the venv, or None."""
    req = generate.HERE.parent.parent / "requirements-old-peft.txt"
    path = Path(sys.prefix) / f"old-peft-{hashlib.sha256(req.read_bytes()).hexdigest()[:16]}"
    return path if (path / ".ready").exists() else None


def llama_cpp_dir(script):
    """llama.cpp's sources (its converters and gguf-py), unpacked by scripts/golden-venv.sh from the llama-cpp-python
    sdist the venv built, when `script` (e.g. "convert_lora_to_gguf.py") is there; else None."""
    d = Path(sys.prefix) / "llama.cpp"
    return d if (d / script).is_file() else None
