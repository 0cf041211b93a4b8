"""Writes the bundled example's LoRA adapter and base config: tiny-llama-lora/ (a PEFT adapter, r 4,
alpha 8, on q_proj and v_proj of both layers, F32, as PEFT's save_pretrained lays it out) and config.json
(the base's transformers config, found beside tiny-llama.safetensors by `peft-bridge merge`).

Regenerate with `python3 examples/make_example_adapter.py`. Standard library only.
"""
import json, math, struct, pathlib

here = pathlib.Path(__file__).parent
HIDDEN, R = 32, 4
shapes = {}
for i in range(2):
    for proj in ("q_proj", "v_proj"):
        p = f"base_model.model.model.layers.{i}.self_attn.{proj}"
        shapes[p + ".lora_A.weight"] = [R, HIDDEN]
        shapes[p + ".lora_B.weight"] = [HIDDEN, R]
header, data = {"__metadata__": {"format": "pt"}}, bytearray()
for k, name in enumerate(sorted(shapes, key=lambda s: s.encode())):
    n = math.prod(shapes[name])
    values = [math.cos(0.61 * j + 3 * k) * 0.1 for j in range(n)]
    begin = len(data)
    data += struct.pack(f"<{n}f", *values)
    header[name] = {"dtype": "F32", "shape": shapes[name], "data_offsets": [begin, len(data)]}
text = json.dumps(header, separators=(",", ":")).encode()
text += b" " * (-len(text) % 8)
out = here / "tiny-llama-lora"
out.mkdir(exist_ok=True)
(out / "adapter_model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + bytes(data))
config = {"base_model_name_or_path": "tiny-llama", "bias": "none", "fan_in_fan_out": False, "inference_mode": True,
          "lora_alpha": 8, "lora_dropout": 0.0, "modules_to_save": None, "peft_type": "LORA", "r": R,
          "target_modules": ["q_proj", "v_proj"], "task_type": "CAUSAL_LM", "use_dora": False, "use_rslora": False}
(out / "adapter_config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
base = {"architectures": ["LlamaForCausalLM"], "hidden_size": HIDDEN, "intermediate_size": 64, "model_type": "llama",
        "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 4, "tie_word_embeddings": False,
        "torch_dtype": "float32", "vocab_size": 128}
(here / "config.json").write_text(json.dumps(base, indent=2, sort_keys=True) + "\n")
print(f"wrote {out} and {here / 'config.json'}")
