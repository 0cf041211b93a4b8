"""Live cross-check: transformers loads every folder peft-bridge's `merge` writes for the golden corpus, and its
logits for the corpus's fixed input are compared with those of PEFT's merged model.

    python="$(bash scripts/golden-venv.sh)" && "$python" tests/golden/check_live.py build/native/peft-bridge

The reference is computed here, in this process on this machine: transformers loads PEFT's merged model
(peft_merged/, PEFT's merge_and_unload saved with save_pretrained) the same way as ours. Prints per case max
|Δ| of the logits (0 = bit-identical) and ends with "N passed, N failed". Where our merged tensors are PEFT's
bit for bit, the logits must be bit-identical (the same tensors through the same kernels); elsewhere (the
merge is within PEFT's float32 evaluation-order bound, not bit-identical: tests/golden/README.md) max |Δ| must
be at most 16 ulp of the model dtype at the largest |logit|. The logits stored in the corpus
(logits.safetensors) were computed on the generating machine, whose kernels may round sums differently from
this one's: their distance to the reference computed here is printed, not judged (check_adapters.py judges it
for the adapters).
"""
import sys

from live_common import MANIFEST, Report, cli_from_argv, generate, merged, tensors_equal

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
        peft = generate.logits_of(generate.load_base(case, root / "peft_merged"), item["task"]).float()
        different = tensors_equal(generate.read_folder(root / "peft_merged"), generate.read_folder(out))
        delta = (ours - peft).abs().max().item()
        exact = torch.equal(ours, peft)
        scale = peft.abs().max().item()
        ulp = torch.finfo(generate.DTYPES[item["dtype"]]).eps * 2.0 ** torch.tensor(scale).log2().floor().item()
        stored = load_file(root / "logits.safetensors")
        drift = (stored["logits.merged"].float() - peft).abs().max().item()
        spread = (stored["logits.adapter"].float() - stored["logits.merged"].float()).abs().max().item()
        report.case(exact if different is None else delta <= 16 * ulp,
                    f"{item['name']} [{item['dtype']}]: max |Δ| logits {delta:.3g}"
                    f"{' (bit-identical)' if exact else ''}; tensors "
                    f"{'identical' if different is None else 'differ: ' + different}; PEFT's merged model here vs "
                    f"the corpus's stored logits {drift:.3g}; PEFT unmerged vs merged {spread:.3g}")
    return report.done()


if __name__ == "__main__":
    sys.exit(main())
