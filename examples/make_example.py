"""Writes tiny-llama.safetensors: a 2-layer LLaMA-shaped model with deterministic F32 weights.

Kept in the repository as the bundled example for scripts/run-example.sh; regenerate with
`python3 examples/make_example.py`. Standard library only; tensors are written in the reference
serializer's order (dtype descending, then name) with {"format":"pt"} metadata, as transformers does.
"""
import json, math, struct, pathlib

HIDDEN, VOCAB, INTER, LAYERS = 32, 128, 64, 2
shapes = {"model.embed_tokens.weight": [VOCAB, HIDDEN], "model.norm.weight": [HIDDEN], "lm_head.weight": [VOCAB, HIDDEN]}
for i in range(LAYERS):
    p = f"model.layers.{i}."
    for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
        shapes[p + f"self_attn.{proj}.weight"] = [HIDDEN, HIDDEN]
    shapes[p + "mlp.gate_proj.weight"] = [INTER, HIDDEN]
    shapes[p + "mlp.up_proj.weight"] = [INTER, HIDDEN]
    shapes[p + "mlp.down_proj.weight"] = [HIDDEN, INTER]
    shapes[p + "input_layernorm.weight"] = [HIDDEN]
    shapes[p + "post_attention_layernorm.weight"] = [HIDDEN]

header, data = {"__metadata__": {"format": "pt"}}, bytearray()
for k, name in enumerate(sorted(shapes, key=lambda s: s.encode())):
    n = math.prod(shapes[name])
    values = [math.sin(0.37 * j + k) * 0.05 for j in range(n)]
    begin = len(data)
    data += struct.pack(f"<{n}f", *values)
    header[name] = {"dtype": "F32", "shape": shapes[name], "data_offsets": [begin, len(data)]}
text = json.dumps(header, separators=(",", ":")).encode()
text += b" " * (-len(text) % 8)
out = pathlib.Path(__file__).with_name("tiny-llama.safetensors")
out.write_bytes(struct.pack("<Q", len(text)) + text + bytes(data))
print(f"wrote {out} ({out.stat().st_size} bytes)")
