"""Runs the four live cross-checks in one process, as scripts/test.sh does:

    python="$(bash scripts/golden-venv.sh)" && "$python" tests/golden/check_all.py build/native/peft-bridge LOGDIR

check_live.py, check_adapters.py, check_safetensors.py, check_configs.py, check_create.py, check_extract.py,
check_gguf.py, check_llama_cpp.py, check_quantize.py, check_key_mapping.py (and check_combine.py where the combine command has it) each
stay runnable alone; here they
share one import of torch, transformers and PEFT (seconds of CPU each, far more on a loaded machine) and one set
of our CLI's outputs (live_common.merged / translated: a merge or translation two checks need is written once).
Each check's output goes to its own log in LOGDIR (live.log, live-adapters.log, live-safetensors.log,
live-configs.log, live-combine.log) with its exit status beside it (<log>.rc: 0 passed, else failed, as the script alone would
exit) and its time; the last lines of each are printed. Exits non-zero if any check failed.
"""
import contextlib
import importlib
import sys
import time
import traceback
from pathlib import Path

from live_common import cli_from_argv

CHECKS = (
    ("check_live", "live.log", "transformers loads every merged folder we write, logits = PEFT's merged model"),
    ("check_adapters", "live-adapters.log", "PEFT loads every adapter we translate, logits = the original's"),
    ("check_safetensors", "live-safetensors.log", "Python safetensors reads every file we write, tensors = our inspect"),
    ("check_configs", "live-configs.log", "our adapter_config.json = PEFT's own, key for key"),
    ("check_create", "live-create.log", "PEFT loads every adapter we create, logits = the base's, config = PEFT's own"),
    ("check_combine", "live-combine.log", "combine = PEFT's add_weighted_adapter (bits with --peft-compat; ΔW otherwise)"),
    ("check_extract", "live-extract.log", "PEFT loads every adapter we extract, merge = the tuned model; errors = the optimal SVD's"),
    ("check_gguf", "live-gguf.log", "our .gguf adapters = llama.cpp's convert_lora_to_gguf.py (tensors, bytes, keys); both read back by us = the PEFT adapter"),
    ("check_llama_cpp", "live-llama-cpp.log", "llama.cpp runs our .gguf adapters: its logits = transformers + PEFT's"),
    ("check_quantize", "live-quantize.log", "merge --quantize = compressed-tensors' / transformers' own bytes; transformers loads it"),
    ("check_key_mapping", "live-key-mapping.log", "merge into checkpoints transformers loads under other names = PEFT's merge, every model_type of the key mapping"),
)
HERE = Path(__file__).resolve().parent


def main():
    cli_from_argv()
    logs = Path(sys.argv[2] if len(sys.argv) > 2 else "build/test-logs")
    logs.mkdir(parents=True, exist_ok=True)
    worst = 0
    for module, log, what in CHECKS:
        if not (HERE / f"{module}.py").exists():  # check_combine.py comes with the combine command
            continue
        print(f"== live cross-check: {what} ({module}.py, pinned venv)", flush=True)
        start = time.monotonic()
        with open(logs / log, "w") as out, contextlib.redirect_stdout(out):
            try:
                rc = importlib.import_module(module).main()
            except Exception:  # a check that crashed is a failed check, with its traceback in its log
                traceback.print_exc(file=out)
                rc = 1
        seconds = time.monotonic() - start
        (logs / f"{log}.rc").write_text(f"{rc}\n")
        lines = (logs / log).read_text().splitlines()
        print("\n".join(lines[-3:]))
        print(f"({module}: {seconds:.0f} s)", flush=True)
        worst = worst or rc
    return worst


if __name__ == "__main__":
    sys.exit(main())
