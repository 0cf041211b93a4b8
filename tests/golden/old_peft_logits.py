"""Run by check_adapters.py with PEFT 0.13.2 first on PYTHONPATH (requirements-old-peft.txt):

    old_peft_logits.py REFERENCES.safetensors CASE=DIR ...

For each CASE=DIR argument, that release's PeftModel.from_pretrained loads the `--old-peft` adapter in DIR on
the corpus base of CASE, and its logits are compared with REFERENCES[CASE]: the original adapter's logits as
the pinned PEFT computed them in the calling process, on this machine (not the corpus's stored logits, which
another CPU's kernels need not reproduce bit for bit). Prints one JSON object:
{"version": ..., "results": {CASE: {"error": str|null, "exact": bool, "delta": float}}}."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generate  # noqa: E402  (its imports are all in PEFT 0.13.2 too)

import peft  # noqa: E402
from peft import PeftModel  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

by_name = {c["name"]: c for c in generate.CASES}
results = {}
references = load_file(sys.argv[1])
for arg in sys.argv[2:]:
    name, folder = arg.split("=", 1)
    case, root = by_name[name], generate.CORPUS / name
    try:
        model = PeftModel.from_pretrained(generate.load_base(case, root / "base"), folder).eval()
        ours = generate.logits_of(model, case.get("task", "causal")).float()
    except Exception as e:  # this release refusing what we wrote is the finding: reported by the caller
        results[name] = {"error": f"{type(e).__name__}: {e}"[:300], "exact": False, "delta": None}
        continue
    ref = references[name].float()
    results[name] = {"error": None, "exact": bool((ours == ref).all()), "delta": (ours - ref).abs().max().item()}
print(json.dumps({"version": peft.__version__, "results": results}))
