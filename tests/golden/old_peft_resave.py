"""Run by check_configs.py with PEFT 0.13.2 first on PYTHONPATH (requirements-old-peft.txt): for each
IN OUT pair, PEFT 0.13's LoraConfig.from_pretrained(IN) then save_pretrained(OUT), i.e. what that release
writes for the settings IN holds. Prints one JSON object: {"version": ..., "results": {IN: error or null}}."""
import json
import sys
import warnings

warnings.filterwarnings("ignore")

import peft  # noqa: E402
from peft import LoraConfig  # noqa: E402

results = {}
args = sys.argv[1:]
for src, dst in zip(args[::2], args[1::2]):
    try:
        LoraConfig.from_pretrained(src).save_pretrained(dst)
        results[src] = None
    except Exception as e:  # a config this release refuses: reported, judged by the caller
        results[src] = f"{type(e).__name__}: {e}"[:300]
print(json.dumps({"version": peft.__version__, "fields": sorted(LoraConfig.__dataclass_fields__),
                  "results": results}))
