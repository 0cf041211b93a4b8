"""Live cross-check: transformers loads every folder peft-bridge's `merge` writes for the golden corpus, and its
logits for the corpus's fixed input are compared with those of PEFT's merged model (logits.safetensors).

    python="$(bash scripts/golden-venv.sh)" && "$python" tests/golden/check_live.py build/native/peft-bridge

Prints per case max |Δ| of the logits (0 = bit-identical) and ends with "N passed, N failed". A case passes
when the logits are bit-identical, or (where the merged tensors may differ by the manifest's tolerance) when
max |Δ| is at most 16 ulp of the model dtype at the largest |logit|.
"""
import sys

from live_common import MANIFEST, Report, cli_from_argv, generate, merged

import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402


def main():
    cli = cli_from_argv()
    report = Report("live")
    by_name = {c["name"]: c for c in generate.CASES}
    for item in MANIFEST["cases"]:
        if "known_failure" in item:
            print(f"known failure {item['name']}: {item['known_failure']['symptom']}")
            continue
        case = by_name[item["name"]]
        root = generate.CORPUS / item["name"]
        code, err, out = merged(cli, root)
        if code:
            report.case(False, f"{item['name']}: our merge failed: {err}")
            continue
        model = generate.load_base(case, out)
        ours = generate.logits_of(model, item["task"]).float()
        ref = load_file(root / "logits.safetensors")
        peft = ref["logits.merged"].float()
        delta = (ours - peft).abs().max().item()
        spread = (ref["logits.adapter"].float() - peft).abs().max().item()
        exact = torch.equal(ours, peft)
        scale = peft.abs().max().item()
        ulp = torch.finfo(generate.DTYPES[item["dtype"]]).eps * 2.0 ** torch.tensor(scale).log2().floor().item()
        report.case(exact or delta <= 16 * ulp,
                    f"{item['name']} [{item['dtype']}]: max |Δ| logits {delta:.3g}"
                    f"{' (bit-identical)' if exact else ''}; PEFT unmerged vs merged {spread:.3g}")
    return report.done()


if __name__ == "__main__":
    sys.exit(main())
