#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (stdlib only; see docs/fuzzing.md).

  make_seeds.py repo                       hand-made seeds -> fuzz/corpus_seeds/<target>/ (committed)
  make_seeds.py fixtures FIXTURES OUT      seeds derived from tests/fixtures -> OUT/<target>/ (run time,
                                           never committed: adapters shrunk to 4x4 factors, zero-cost to run)

Inputs use the layout of fuzz/fuzz_input.h: parts joined by "\\n--\\n", and the compact encoding
\\x01R<count>\\x02<body>\\x03 (body repeated; \\x01# = the repetition index) for huge values.
"""
import json
import os
import random
import struct
import sys

SEP = b"\n--\n"
HERE = os.path.dirname(os.path.abspath(__file__))


def rep(count, body):
    if isinstance(body, str):
        body = body.encode()
    return b"\x01R" + str(count).encode() + b"\x02" + body + b"\x03"


def parts(*ps):
    return SEP.join(p.encode() if isinstance(p, str) else p for p in ps)


def js(obj):
    return json.dumps(obj, indent=2).encode()


DTYPE_BYTES = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8, "I32": 4, "U8": 1, "I8": 1, "BOOL": 1,
               "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "U32": 4, "U64": 8}
QUARTER = {"F32": struct.pack("<f", 0.25), "F16": b"\x00\x34", "BF16": b"\x80\x3e", "F64": struct.pack("<d", 0.25)}


def safetensors(tensors, metadata=None):
    """tensors: list of (name, dtype, shape). Data: 0.25 in float dtypes, zeros otherwise."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        n = 1
        for d in shape:
            n *= d
        one = QUARTER.get(dtype, b"\x00" * DTYPE_BYTES[dtype])
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + n * len(one)]}
        data += one * n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def write(out, target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


PEFT_CONFIG = {
    "alpha_pattern": {}, "auto_mapping": None, "base_model_name_or_path": "meta-llama/Llama-3.2-1B", "bias": "none",
    "fan_in_fan_out": False, "inference_mode": True, "init_lora_weights": True, "layers_pattern": None,
    "layers_to_transform": None, "lora_alpha": 16, "lora_dropout": 0.05, "modules_to_save": None,
    "peft_type": "LORA", "r": 4, "rank_pattern": {}, "revision": None, "target_modules": ["q_proj", "v_proj"],
    "task_type": "CAUSAL_LM", "use_dora": False, "use_rslora": False,
}


def config_seeds():
    c = dict(PEFT_CONFIG)
    yield "peft_typical", js(c)
    yield "minimal", b'{"peft_type":"LORA"}'
    yield "regex_targets", js(dict(c, target_modules=r".*\.(q_proj|v_proj)$"))
    yield "all_linear", js(dict(c, target_modules="all-linear", exclude_modules=["lm_head"]))
    yield "patterns", js(dict(c, rank_pattern={"q_proj": 8, r"layers\.0\..*": 2, "^model": 1},
                              alpha_pattern={"v_proj": 32.5, "(?i)Q_PROJ": 1}))
    yield "layers", js(dict(c, layers_to_transform=[0, 2], layers_pattern="layers"))
    yield "layers_int", js(dict(c, layers_to_transform=1, layers_pattern=["h", "layers"]))
    yield "dora_rslora", js(dict(c, use_dora=True, use_rslora=True, lora_alpha=8.0, bias="lora_only"))
    yield "unsupported_pissa", js(dict(c, init_lora_weights="pissa"))
    yield "unsupported_loha", js(dict(c, peft_type="LOHA"))
    yield "tokens", js(dict(c, trainable_token_indices={"embed_tokens": [1, 2, 3]}, modules_to_save=["score"]))
    yield "floats", b'{"peft_type":"LORA","r":8,"lora_alpha":1e-05,"lora_dropout":0.1,"x":[1.5e+300,-0.0,1e16,123456789012345678901234]}'
    yield "unknown_unicode", '{"peft_type":"LORA","r":2,"note\\u00e9":"\\ud83d\\ude00\\n","target_modules":["a.b"]}'.encode()
    yield "with_names", parts(js(dict(c, target_modules=r"model\.layers\.\d+\.self_attn\.(q|k)_proj")),
                              "model.layers.0.self_attn.q_proj\nmodel.layers.11.self_attn.k_proj\nq_proj\n")
    # Huge values, compactly: long names, deep nesting, many keys (the lost harness's two crashes were a
    # 100,000-deep config and a pattern std::regex threw on).
    yield "huge_long_target", b'{"peft_type":"LORA","r":4,"target_modules":["' + rep(100000, "q_proj.") + b'v"]}'
    yield "huge_long_key", b'{"peft_type":"LORA","r":4,"rank_pattern":{"' + rep(20000, "a") + b'":2}}'
    yield "huge_deep_unknown", b'{"peft_type":"LORA","r":4,"x":' + rep(100000, "[") + b"1" + rep(100000, "]") + b"}"
    yield "huge_deep_objects", b'{"peft_type":"LORA","y":' + rep(5000, '{"a":') + b"1" + rep(5000, "}") + b"}"
    yield "huge_many_patterns", b'{"peft_type":"LORA","r":4,"rank_pattern":{' + rep(20000, '"m\x01#":2,') + b'"z":1}}'
    yield "huge_many_targets", b'{"peft_type":"LORA","r":4,"target_modules":[' + rep(50000, '"t\x01#",') + b'"z"]}'
    yield "huge_many_unknown", b'{"peft_type":"LORA",' + rep(30000, '"k\x01#":1,') + b'"z":1}'
    yield "nested_quantifier", js(dict(c, target_modules="(a+)+$"))


def regex_seeds():
    yield "literal", parts("q_proj", "q_proj", "q_proj_x", "x.q_proj")
    yield "icase", parts("(?i)Q_Proj", "q_proj", "Q_PROJ")
    yield "suffix", parts(r".*\.q_proj", "model.layers.0.self_attn.q_proj", "q_proj")
    yield "alternation", parts(r"model\.layers\.(0|1|2)\.(self_attn|mlp)\.\w+", "model.layers.1.mlp.up_proj")
    yield "classes", parts(r"[^.]+\.[a-z_]{1,8}\d?$", "a.b_c1", "a.b.c")
    yield "escapes", parts(r"\x41\101\u0041\t\.\-[\]\\]", "AAA\t.-]")
    yield "lookahead", parts(r"(?=q)q_proj(?!x)", "q_proj")
    yield "rejected", parts(r"(?P<name>a)(?<=a)\Aa*+", "a")
    yield "repeat", parts(r"(ab){2,5}c{3}", "ababc", "ababccc")
    yield "nested", parts("(a+)+$", b"a" * 28 + b"b")
    yield "long_subject", parts(r".*\.q_proj", rep(200000, "x."))
    yield "long_pattern", rep(3000, "a?") + rep(3000, "a")
    yield "deep_groups", rep(5000, "(") + b"a" + rep(5000, ")")


def arch_table(**kw):
    t = {"model_types": ["toy"], "architectures": ["ToyForCausalLM"], "gguf_arch": "toy",
         "body_prefixes": ["model.", ""], "modules": [
             {"hf": "embed_tokens", "canonical": "embeddings/tokens", "gguf": "token_embd", "kind": "embedding"},
             {"hf": "layers.{N}.attn.q", "canonical": "layers/{N}/attention/query", "gguf": "blk.{N}.attn_q",
              "kind": "linear", "gguf_permute": {"kind": "llama_rope", "heads": "num_attention_heads"}},
             {"hf": "layers.{N}.attn.k", "canonical": "layers/{N}/attention/key", "gguf": "blk.{N}.attn_k",
              "kind": "linear", "gguf_permute": {"kind": "llama_rope", "heads": "num_key_value_heads"}},
             {"hf": "layers.{N}.mlp.c_fc", "canonical": "layers/{N}/mlp/up", "kind": "conv1d"},
             {"hf": "lm_head", "head": True, "canonical": "head/lm", "gguf": "output", "kind": "linear"}]}
    t.update(kw)
    return t


def naming_seeds():
    yield "arch_toy", js(arch_table())
    yield "arch_replaces_llama", js(arch_table(model_types=["llama"], detect_priority=5))
    yield "arch_two", parts(js(arch_table()), js(arch_table(model_types=["toy2"], body_prefixes=["transformer."])))
    yield "arch_qkv", js(arch_table(modules=[{"hf": "h.{N}.self_attention.query_key_value", "canonical": "layers/{N}/attention/qkv",
                                             "gguf": "blk.{N}.attn_qkv", "kind": "linear",
                                             "gguf_permute": {"kind": "falcon_qkv", "heads": "num_attention_heads"}},
                                            {"hf": "h.{N}.attention.qkv", "canonical": "layers/{N}/attention/qkv2",
                                             "gguf_permute": {"kind": "gptneox_qkv", "heads": "num_attention_heads"}}]))
    yield "format_table", js({"format": "peft", "weights_file": "adapter_model.safetensors", "config_file": "adapter_config.json",
                              "prefixes": ["base_model.model."], "path_style": "dotted", "metadata": {"format": "pt"},
                              "path_rewrites": [{"from": ".processor.to_out", "to": ".to_out.0"}],
                              "roles": {"lora_A": {"suffix": ".lora_A.weight"}, "lora_B": {"suffix": ".lora_B.weight"},
                                        "lora_B_bias": {"suffix": ".lora_B.bias"},
                                        "embedding_A": {"suffix": ".lora_embedding_A", "transpose": True},
                                        "magnitude": {"suffix": ".lora_magnitude_vector"}}, "scale": "config"})
    yield "base_config", b'{"model_type":"toy","architectures":["ToyForCausalLM"],"num_attention_heads":4,"num_key_value_heads":2}'
    yield "huge_many_modules", b'{"model_types":["m"],"body_prefixes":[""],"modules":[' + \
        rep(3000, '{"hf":"l\x01#.{N}.q","canonical":"c\x01#/{N}/q","gguf":"g\x01#.{N}.q"},') + \
        b'{"hf":"z","canonical":"z"}]}'
    yield "huge_long_prefix", b'{"model_types":["m"],"body_prefixes":["' + rep(100000, "p.") + \
        b'"],"modules":[{"hf":"layers.{N}.q","canonical":"layers/{N}/q"}]}'
    yield "huge_deep", b'{"note":' + rep(100000, "[") + rep(100000, "]") + b',"modules":[]}'


def index_seeds():
    idx = {"metadata": {"total_size": 123456}, "weight_map": {
        "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
        "model.layers.0.mlp.up_proj.weight": "model-00001-of-00002.safetensors",
        "lm_head.weight": "model-00002-of-00002.safetensors"}}
    yield "typical", js(idx)
    yield "added", parts(js(idx), "score.weight\nlm_head.weight\n", b"\x10\x27\x00\x00\x00\x00\x00\x00")
    yield "traversal", b'{"weight_map":{"a":"../evil.safetensors","b":"x/y.safetensors"}}'
    yield "empty_map", b'{"metadata":{},"weight_map":{}}'
    yield "no_metadata", b'{"weight_map":{"a":"m.safetensors"},"extra":[1,2.5,null,"\\u00e9"]}'
    yield "metadata_not_object", b'{"metadata":[1],"weight_map":{"a":"m.safetensors"}}'
    yield "huge_many_tensors", b'{"weight_map":{' + rep(50000, '"t\x01#":"model-0000\x01#.safetensors",') + b'"z":"z.safetensors"}}'
    yield "huge_deep_metadata", b'{"metadata":{"x":' + rep(100000, "[") + rep(100000, "]") + \
        b'},"weight_map":{"a":"m.safetensors"}}'
    yield "huge_long_name", b'{"weight_map":{"a":"' + rep(200000, "m") + b'.safetensors"}}'


def merge_seeds():
    rng = random.Random(20261130)
    for i in range(12):
        yield "choices_%02d" % i, bytes(rng.randrange(256) for _ in range(rng.choice([16, 48, 128, 256])))
    yield "overlay", parts(bytes(rng.randrange(256) for _ in range(96)), b'{"rank_pattern":{"q_proj":2},"use_rslora":true}')
    yield "base_config", parts(bytes(rng.randrange(256) for _ in range(96)), b"{}",
                               b'{"model_type":"llama","num_attention_heads":2,"num_key_value_heads":1,"tie_word_embeddings":true}')


def engine_seeds():
    """fuzz_merge_engine: random choices (part 0), and hostile configs over them (part 1: the adapter_config
    overlay; part 2: the base config.json). regress-* beside these are reproducers, committed as they are."""
    rng = random.Random(20261206)
    choices = [bytes(rng.randrange(256) for _ in range(rng.choice([64, 160, 400, 900]))) for _ in range(12)]
    for i, c in enumerate(choices):
        yield "choices_%02d" % i, c
    yield "rank_2_62_in_config", parts(choices[0], b'{"r":4611686018427387904}')
    yield "rank_pattern_100000_on_tiny", parts(choices[1], b'{"rank_pattern":{".*":100000},"alpha_pattern":{".*":1e308}}')
    yield "alpha_huge_rslora", parts(choices[2], b'{"lora_alpha":1.7976931348623157e308,"use_rslora":true}')
    yield "alpha_negative_zero_r", parts(choices[3], b'{"lora_alpha":-8,"r":0}')
    yield "dora_fan_in_fan_out", parts(choices[4], b'{"use_dora":true,"fan_in_fan_out":true}')
    for name, heads in (("2_63", 1 << 63), ("wrap_3n", 6148914691236517206)):
        cfg = ('{"model_type":"llama","num_attention_heads":%d,"num_key_value_heads":%d,"hidden_size":8,'
               '"tie_word_embeddings":true}' % (heads, heads)).encode()
        yield "base_config_heads_" + name, parts(choices[5], b"{}", cfg)
        yield "base_config_heads_gpt2_" + name, parts(choices[6], b"{}", cfg.replace(b"llama", b"gpt2"))


def reader_seeds():
    m = "model.layers.0.self_attn."
    peft = safetensors([("base_model.model." + m + "q_proj.lora_A.weight", "F32", [4, 8]),
                        ("base_model.model." + m + "q_proj.lora_B.weight", "F32", [8, 4]),
                        ("base_model.model." + m + "v_proj.lora_A.weight", "BF16", [4, 8]),
                        ("base_model.model." + m + "v_proj.lora_B.weight", "BF16", [8, 4]),
                        ("base_model.model.model.embed_tokens.lora_embedding_A", "F32", [4, 16]),
                        ("base_model.model.model.embed_tokens.lora_embedding_B", "F32", [8, 4])], {"format": "pt"})
    cfg = js(dict(PEFT_CONFIG, target_modules=["q_proj", "v_proj", "embed_tokens"]))
    base = b'{"model_type":"llama","num_attention_heads":2,"num_key_value_heads":1,"hidden_size":8}'
    yield "peft", parts(b"\x01\x00\x00", peft, cfg, base)
    yield "peft_detect_llama", parts(b"\x00\x1a\x03", peft, cfg, base)
    dora = safetensors([("base_model.model." + m + "q_proj.lora_A.weight", "F32", [2, 4]),
                        ("base_model.model." + m + "q_proj.lora_B.weight", "F32", [4, 2]),
                        ("base_model.model." + m + "q_proj.lora_B.bias", "F32", [4]),
                        ("base_model.model." + m + "q_proj.lora_magnitude_vector", "F32", [4]),
                        ("base_model.model.score.weight", "F16", [2, 4])])
    yield "peft_dora", parts(b"\x01\x01\x01", dora, js(dict(PEFT_CONFIG, r=2, use_dora=True, modules_to_save=["score"])))
    mlx = safetensors([("model.layers.0.self_attn.q_proj.lora_a", "F32", [8, 4]),
                       ("model.layers.0.self_attn.q_proj.lora_b", "F32", [4, 8])])
    yield "mlx", parts(b"\x02\x00\x02", mlx, js({"fine_tune_type": "lora", "num_layers": 1,
                                                 "lora_parameters": {"rank": 4, "alpha": 8, "scale": 2.0, "dropout": 0.0}}))
    kohya = safetensors([("lora_te_text_model_encoder_layers_0_self_attn_q_proj.lora_down.weight", "F16", [4, 8]),
                         ("lora_te_text_model_encoder_layers_0_self_attn_q_proj.lora_up.weight", "F16", [8, 4]),
                         ("lora_te_text_model_encoder_layers_0_self_attn_q_proj.alpha", "F32", [])],
                        {"ss_network_module": "networks.lora"})
    yield "kohya", parts(b"\x03\x00\x00", kohya)
    kohya_llama = safetensors([("lora_te_model_layers_0_self_attn_q_proj.lora_down.weight", "F32", [4, 8]),
                               ("lora_te_model_layers_0_self_attn_q_proj.lora_up.weight", "F32", [8, 4]),
                               ("lora_te_model_layers_0_self_attn_q_proj.alpha", "F32", [])])
    yield "kohya_llama", parts(b"\x03\x1a\x01", kohya_llama, b"", base)
    gguf = safetensors([("blk.0.attn_q.weight.lora_a", "F32", [4, 8]), ("blk.0.attn_q.weight.lora_b", "F32", [8, 4]),
                        ("token_embd.weight.lora_a", "F32", [16, 4]), ("token_embd.weight.lora_b", "F32", [8, 4])],
                       {"general.type": "adapter", "adapter.type": "lora", "adapter.lora.alpha": "8"})
    yield "gguf_names", parts(b"\x04\x1a\x00", gguf, b"", base)
    diff = safetensors([("down_blocks.0.attentions.0.transformer_blocks.0.attn1.processor.to_k_lora.down.weight", "F32", [4, 8]),
                        ("down_blocks.0.attentions.0.transformer_blocks.0.attn1.processor.to_k_lora.up.weight", "F32", [8, 4]),
                        ("down_blocks.0.attentions.0.transformer_blocks.0.attn1.processor.to_out_lora.down.weight", "F32", [4, 8]),
                        ("down_blocks.0.attentions.0.transformer_blocks.0.attn1.processor.to_out_lora.up.weight", "F32", [8, 4])],
                       {"format": "pt"})
    yield "diffusers", parts(b"\x05\x00\x00", diff)
    yield "detect_no_config", parts(b"\x00\x00\x00", peft)
    # A header holding a 200,000-character module name and a header with 20,000 tensors, compactly.
    long_name = b'{"base_model.model.' + rep(200000, "a") + b'.lora_A.weight":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]}}'
    yield "huge_long_name", parts(b"\x01\x00\x00", struct.pack("<Q", 200000 + len(long_name) - len(rep(200000, "a"))) + long_name + b"\0\0\0\0", cfg)
    yield "huge_deep_config", parts(b"\x01\x00\x00", peft, b'{"peft_type":"LORA","x":' + rep(100000, "[") + rep(100000, "]") + b"}")
    # Sizes the file declares but does not back: zero-size factors of rank 2^62, r = 40,000 on a 4 x 4 module,
    # 0-D and empty llama.cpp factors, and head counts whose products wrap (2^63, 3 * 6148914691236517206 = 2).
    zero = safetensors([("base_model.model." + m + "q_proj.lora_A.weight", "F32", [1 << 62, 0]),
                        ("base_model.model." + m + "q_proj.lora_B.weight", "F32", [0, 1 << 62])])
    yield "zero_size_factors_rank_2_62", parts(b"\x01\x00\x00", zero, js(dict(PEFT_CONFIG, r=1)))
    wide_header = safetensors([("base_model.model." + m + "q_proj.lora_A.weight", "F16", [40000, 4]),
                               ("base_model.model." + m + "q_proj.lora_B.weight", "F16", [4, 40000])])[:-640000]
    wide = wide_header + rep(320000, QUARTER["F16"])  # compactly: the 640,000 data bytes as one repetition
    yield "rank_40000_on_4x4", parts(b"\x01\x00\x00", wide, js(dict(PEFT_CONFIG, r=40000, target_modules=["q_proj"])))
    flat = safetensors([("blk.0.attn_q.weight.lora_a", "F32", []), ("blk.0.attn_q.weight.lora_b", "F32", [0, 4]),
                        ("blk.0.attn_k.weight.lora_a", "F32", [4, 8]), ("blk.0.attn_k.weight.lora_b", "F32", [8, 4])])
    for name, heads in (("2_63", 1 << 63), ("wrap_3n", 6148914691236517206)):
        wrap = ('{"model_type":"llama","num_attention_heads":%d,"num_key_value_heads":%d,"hidden_size":8}' % (heads, heads)).encode()
        yield "gguf_names_0d_heads_" + name, parts(b"\x04\x1a\x00", flat, b"", wrap)


def gguf(keys, tensors, alignment=32, version=3):
    """A GGUF file as gguf-py writes it. keys: list of (key, type id, value) with type 8 = string, 6 = float32,
    4 = uint32, ("arr", 4, [..]) arrays of uint32; tensors: list of (name, torch shape, ggml type, bytes)."""
    def s(t):
        b = t.encode()
        return struct.pack("<Q", len(b)) + b
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(keys))
    for k, t, v in keys:
        out += s(k)
        if t == 8:
            out += struct.pack("<I", 8) + s(v)
        elif t == 6:
            out += struct.pack("<If", 6, v)
        elif t == 4:
            out += struct.pack("<II", 4, v)
        elif t == "arr":
            out += struct.pack("<IIQ", 9, 4, len(v)) + b"".join(struct.pack("<I", x) for x in v)
    offset, blobs = 0, b""
    for name, shape, gtype, data in tensors:
        out += s(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in reversed(shape))
        out += struct.pack("<IQ", gtype, offset)
        pad = (-len(data)) % alignment
        blobs += data + b"\0" * pad
        offset += len(data) + pad
    out += b"\0" * ((-len(out)) % alignment)
    return out + blobs


def f32s(n, scale=0.125):
    return b"".join(struct.pack("<f", scale * ((i % 7) - 3)) for i in range(n))


def q8_0(n):
    """n (a multiple of 32) values as Q8_0 blocks: d = 1/64 (fp16 0x2400), q = i % 9 - 4."""
    return b"".join(b"\x00\x24" + bytes(((i % 9) - 4) & 0xFF for i in range(32)) for _ in range(n // 32))


def gguf_seeds():
    """fuzz_gguf inputs: byte 0 options (bit 0 size known, bits 1-7 first read 1 << (n % 17)), byte 1 (odd: the
    LLaMA base config), then the .gguf file."""
    keys = [("general.architecture", 8, "llama"), ("general.type", 8, "adapter"), ("adapter.type", 8, "lora"),
            ("adapter.lora.alpha", 6, 8.0), ("general.quantization_version", 4, 2)]
    ours = keys + [("peft_bridge.arch", 8, "llama"),
                   ("peft_bridge.module_paths", 8, '["model.layers.0.self_attn.q_proj","model.layers.0.self_attn.v_proj"]'),
                   ("peft_config", 8, json.dumps(dict(PEFT_CONFIG, lora_alpha=8), sort_keys=True)),
                   ("llama.attention.head_count", 4, 4), ("llama.attention.head_count_kv", 4, 2)]
    f32 = [("blk.0.attn_q.weight.lora_a", [4, 32], 0, f32s(128)), ("blk.0.attn_q.weight.lora_b", [32, 4], 0, f32s(128)),
           ("blk.0.attn_v.weight.lora_a", [4, 32], 0, f32s(128)), ("blk.0.attn_v.weight.lora_b", [16, 4], 0, f32s(64))]
    yield "ours_f32", b"\x01\x00" + gguf(ours, f32)
    yield "ours_f32_pushed", b"\x08\x00" + gguf(ours, f32)
    yield "converter_f32_base", b"\x03\x01" + gguf(keys, f32)
    yield "converter_no_heads", b"\x01\x00" + gguf(keys, f32)
    f16 = [(n, sh, 1, b"\x00\x30" * (len(d) // 4)) for n, sh, _, d in f32]
    yield "ours_f16", b"\x01\x00" + gguf(ours, f16)
    q8 = [("blk.0.attn_q.weight.lora_a", [32, 64], 8, q8_0(32 * 64)), ("blk.0.attn_q.weight.lora_b", [32, 32], 8, q8_0(32 * 32)),
          ("token_embd.weight.lora_a", [64, 32], 8, q8_0(64 * 32)), ("token_embd.weight.lora_b", [32, 32], 1, b"\x00\x30" * 1024)]
    yield "q8_0_mixed", b"\x05\x01" + gguf(keys + [("adapter.alora.invocation_tokens", "arr", [1, 2, 3])], q8)
    yield "alignment_64_v2", b"\x01\x01" + gguf(keys + [("general.alignment", 4, 64)], f32, alignment=64, version=2)
    yield "alpha_zero", b"\x01\x01" + gguf([k if k[0] != "adapter.lora.alpha" else (k[0], 6, 0.0) for k in keys], f32)
    yield "model_not_adapter", b"\x01\x00" + gguf([("general.architecture", 8, "llama"), ("general.type", 8, "model")], f32[:1])
    yield "bad_offset", b"\x01\x00" + gguf(keys, f32)[:-1]
    yield "hostile_counts", b"\x01\x00" + b"GGUF" + struct.pack("<IQQ", 3, 1 << 60, 1 << 62)


def reader_file_seeds():
    yield "empty", b"\x2a\x00\x00\x00" + safetensors([])
    yield "metadata", b"\x01\x00\x00\x00" + safetensors([], {"format": "pt", "k": "v\u00e9\n"})
    yield "dtypes", b"\x07\x13\x5a\xc3" + safetensors([("a", "F32", [2, 2]), ("b", "BF16", [3]), ("c", "F8_E4M3", [0]),
                                                        ("d", "I64", []), ("e", "BOOL", [5])])


def f32_file(tensors):
    """tensors: list of (name, shape, value(i)): an F32 safetensors file with those values."""
    header, data = {}, b""
    for name, shape, value in tensors:
        n = 1
        for d in shape:
            n *= d
        body = b"".join(struct.pack("<f", value(i)) for i in range(n))
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(body)]}
        data += body
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def extract_seeds():
    """fuzz_extract: options, a tiny LLaMA base and a tuned copy whose q_proj changed by a rank-1 term, whose
    layer-1 v_proj bias and final norm changed (bias, saved norm, dropped unchanged layers), and a config."""
    def model(tuned, bias=False, embed_change=False):
        tensors = [("model.embed_tokens.weight", [8, 4], lambda i: (i % 5) * 0.125 + (0.5 if embed_change and i == 3 else 0)),
                   ("lm_head.weight", [8, 4], lambda i: (i % 3) * 0.25),
                   ("model.norm.weight", [4], lambda i: 1.0 + (0.25 if tuned and i == 1 else 0))]
        for layer in range(2):
            p = f"model.layers.{layer}."
            tensors.append((p + "self_attn.q_proj.weight", [4, 4],
                            lambda i, l=layer: (i % 7) * 0.125 + (((i // 4) + 1) * ((i % 4) + 1) * 0.0625 if tuned and l == 0 else 0)))
            tensors.append((p + "self_attn.v_proj.weight", [2, 4], lambda i: (i % 3) * 0.5))
            if bias:
                tensors.append((p + "self_attn.v_proj.bias", [2], lambda i, l=layer: 0.5 + (0.25 if tuned and l == 1 else 0)))
            tensors.append((p + "input_layernorm.weight", [4], lambda i: 1.0))
        return f32_file(tensors)
    config = js({"model_type": "llama", "architectures": ["LlamaForCausalLM"]})
    yield "rank-1", parts(js({"rank": "1", "dtype": "f32"}), model(False), model(True), config)
    yield "energy-bias", parts(js({"energy": "0.9", "max_rank": "2"}), model(False, True), model(True, True), config)
    yield "embeddings-lora", parts(js({"rank": "2", "embeddings": "lora"}), model(False), model(True, embed_change=True), config)
    yield "modules-list-skip", parts(js({"modules": "q_proj", "embeddings": "skip", "dtype": "bf16"}), model(False), model(True), config)
    yield "no-config", parts(js({}), model(False), model(True), b"")
    yield "shape-mismatch", parts(js({"rank": "1"}), model(False), model(True, True), config)


def repo():
    out = os.path.join(HERE, "corpus_seeds")
    for name, data in extract_seeds():
        write(out, "fuzz_extract", name, data)
    for target, gen in [("fuzz_adapter_config", config_seeds), ("fuzz_regex", regex_seeds),
                        ("fuzz_naming_tables", naming_seeds), ("fuzz_model_index", index_seeds),
                        ("fuzz_merge_plan", merge_seeds), ("fuzz_merge_engine", engine_seeds), ("fuzz_adapter_readers", reader_seeds),
                        ("fuzz_reader", reader_file_seeds), ("fuzz_gguf", gguf_seeds)]:
        for name, data in gen():
            write(out, target, name, data)


def shrink(path):
    """A safetensors file with every dimension cut to at most 4 (so factors stay consistent) and 0.25 data."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    meta = header.pop("__metadata__", None)
    tensors = [(k, v["dtype"], [min(d, 4) for d in v["shape"]]) for k, v in header.items() if v["dtype"] in DTYPE_BYTES]
    return safetensors(tensors, meta)


def shrink_config(path):
    with open(path) as f:
        c = json.load(f)
    if "r" in c:
        c["r"] = min(c["r"], 4)
    for k in ("rank_pattern",):
        if isinstance(c.get(k), dict):
            c[k] = {p: min(v, 4) for p, v in c[k].items()}
    if isinstance(c.get("lora_parameters"), dict) and "rank" in c["lora_parameters"]:
        c["lora_parameters"]["rank"] = min(c["lora_parameters"]["rank"], 4)
    return js(c)


def fixtures(src, out):
    for d in sorted(os.listdir(src)):
        full = os.path.join(src, d)
        if not os.path.isdir(full):
            continue
        files = sorted(os.listdir(full))
        weights = [f for f in files if f.endswith(".safetensors")]
        for f in files:
            p = os.path.join(full, f)
            if f.endswith("adapter_config.json"):
                write(out, "fuzz_adapter_config", d + "_" + f, open(p, "rb").read())
            if f.endswith(".index.json"):
                write(out, "fuzz_model_index", d + "_" + f, open(p, "rb").read())
        config = os.path.join(full, "adapter_config.json")
        if any(w.startswith("adapter") or "lora" in w for w in weights):
            for w in weights:
                cfg = shrink_config(config) if os.path.exists(config) else None
                ps = [b"\x00\x00\x00", shrink(os.path.join(full, w))] + ([cfg] if cfg else [])
                write(out, "fuzz_adapter_readers", d + "_" + w, parts(*ps))
    naming = os.path.join(os.path.dirname(HERE), "data", "naming")
    for sub in ("arch", "formats"):
        for f in sorted(os.listdir(os.path.join(naming, sub))):
            write(out, "fuzz_naming_tables", sub + "_" + f, open(os.path.join(naming, sub, f), "rb").read())


if __name__ == "__main__":
    if sys.argv[1:] == ["repo"]:
        repo()
    elif len(sys.argv) == 4 and sys.argv[1] == "fixtures":
        fixtures(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
