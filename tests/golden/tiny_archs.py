"""Tiny configs for every architecture the naming tables and the golden corpus cover.

Shared by tests/golden/naming/generate.py (which walks each model's modules to write data/naming/arch/*.json)
and tests/golden/generate.py (which writes a tiny PEFT adapter and PEFT's merge for each). One set of small
sizes fits almost every config class, because transformers maps the usual names (hidden_size,
num_attention_heads...) onto each family's own (n_embd, d_model...) through attribute_map; the few that need
more are in OVERRIDES. Sizes are tiny (hidden 16, 2 layers, vocab 64) so that the whole corpus stays small.
"""
import copy

TINY = dict(
    hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
    head_dim=8, vocab_size=64, max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
    # MoE: two experts, one routed per token, small expert MLPs; DeepSeek's first layer dense, the second MoE.
    num_local_experts=2, num_experts=2, num_experts_per_tok=1, moe_intermediate_size=16,
    shared_expert_intermediate_size=16, n_routed_experts=2, n_shared_experts=1, first_k_dense_replace=1,
    n_group=1, topk_group=1, decoder_sparse_step=1, moe_layer_freq=1,
    # DeepSeek-V2/V3 multi-head latent attention.
    q_lora_rank=8, kv_lora_rank=8, qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=8,
    # GPT-2 style and encoder-decoder names not covered by attribute_map.
    n_inner=32, d_ff=32, d_kv=8, num_decoder_layers=2, encoder_layers=2, decoder_layers=2,
    encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
    type_vocab_size=2,
)

# Per model_type: extra or replacing config values, where TINY alone does not build (or builds something
# that is not the family's usual layout).
OVERRIDES = {
    "llama4_text": dict(intermediate_size_mlp=32, interleave_moe_layer_step=1, no_rope_layers=[1, 1]),
    "gpt_neox": dict(rotary_pct=0.5),
    "falcon": dict(new_decoder_architecture=True, num_kv_heads=1, alibi=False, head_dim=None),
    "phi": dict(partial_rotary_factor=0.5),
    "gemma3_text": dict(sliding_window=8, layer_types=["sliding_attention", "full_attention"]),
    "gemma2": dict(sliding_window=8),
    "cohere2": dict(sliding_window=8, layer_types=["sliding_attention", "full_attention"]),
    "t5": dict(feed_forward_proj="relu"),
    "mt5": dict(feed_forward_proj="gated-gelu"),
    "umt5": dict(feed_forward_proj="gated-gelu"),
    "bloom": dict(n_head=2),
    "mpt": dict(d_model=16, n_heads=2, n_layers=2, expansion_ratio=2),
    "deepseek_v2": dict(head_dim=4),  # the rotary part of a head: qk_rope_head_dim
    "deepseek_v3": dict(head_dim=4),
    "granitemoeshared": dict(shared_intermediate_size=16),
    "codegen": dict(n_ctx=64, rotary_dim=4),
    "gptj": dict(rotary_dim=4),
    "gpt_neo": dict(attention_types=[[["global", "local"], 1]], num_layers=2),
    "diffllama": dict(num_key_value_heads=2),
    "opt": dict(ffn_dim=32, word_embed_proj_dim=16),
    "xglm": dict(ffn_dim=32),
    "distilbert": dict(dim=16, hidden_dim=32, n_layers=2, n_heads=2),
    # One short-convolution layer and one attention layer, the two kinds of LFM2 block.
    "lfm2": dict(layer_types=["conv", "full_attention"], full_attn_idxs=None, block_ff_dim=32),
}


def tiny_kwargs(model_type):
    """TINY with the model_type's overrides; an override of None drops the key (a derived property)."""
    kwargs = copy.deepcopy(TINY)
    kwargs.update(copy.deepcopy(OVERRIDES.get(model_type, {})))  # config classes may edit the lists they get
    return {k: v for k, v in kwargs.items() if v is not None}


# The tables: name -> model_types it covers (the first is the one instantiated to walk its modules; every
# other one is walked too and must give a subset). Tables whose knowledge was first written by hand keep it
# in tests/golden/naming/curated/<name>.json (notes, GGUF exceptions, row permutations), which the
# generator lays over what it finds.
TABLES = {
    # Hand-written first (curated overlays).
    "llama": ["llama", "mistral"],
    "qwen2": ["qwen2"],
    "gemma": ["gemma"],
    "gemma2": ["gemma2"],
    "gpt2": ["gpt2"],
    "gpt_neox": ["gpt_neox"],
    "gptj": ["gptj"],
    "gpt_neo": ["gpt_neo"],
    "falcon": ["falcon"],
    "phi": ["phi"],
    "phi3": ["phi3"],
    "bert": ["bert"],
    "roberta": ["roberta", "xlm-roberta"],
    "distilbert": ["distilbert"],
    "t5": ["t5", "mt5", "umt5"],
    # Generated only.
    "mixtral": ["mixtral"],
    "ministral": ["ministral"],
    "qwen2_moe": ["qwen2_moe"],
    "qwen3": ["qwen3"],
    "qwen3_moe": ["qwen3_moe"],
    "gemma3_text": ["gemma3_text"],
    "llama4_text": ["llama4_text"],
    "phimoe": ["phimoe"],
    "olmo": ["olmo"],
    "olmo2": ["olmo2"],
    "olmo3": ["olmo3"],
    "olmoe": ["olmoe"],
    "granite": ["granite"],
    "granitemoe": ["granitemoe"],
    "granitemoeshared": ["granitemoeshared"],
    "starcoder2": ["starcoder2"],
    "cohere": ["cohere"],
    "cohere2": ["cohere2"],
    "stablelm": ["stablelm"],
    "deepseek_v2": ["deepseek_v2"],
    "deepseek_v3": ["deepseek_v3"],
    "gpt_bigcode": ["gpt_bigcode"],
    "bloom": ["bloom"],
    "opt": ["opt"],
    "codegen": ["codegen"],
    "mpt": ["mpt"],
    "persimmon": ["persimmon"],
    "nemotron": ["nemotron"],
    "glm": ["glm"],
    "glm4": ["glm4"],
    "glm4_moe": ["glm4_moe"],
    "helium": ["helium"],
    "arcee": ["arcee"],
    "smollm3": ["smollm3"],
    "seed_oss": ["seed_oss"],
    "ernie4_5": ["ernie4_5"],
    "ernie4_5_moe": ["ernie4_5_moe"],
    "hunyuan_v1_dense": ["hunyuan_v1_dense"],
    "exaone4": ["exaone4"],
    "diffllama": ["diffllama"],
    "apertus": ["apertus"],
    "bitnet": ["bitnet"],
    "dots1": ["dots1"],
    "vaultgemma": ["vaultgemma"],
    "biogpt": ["biogpt"],
    "xglm": ["xglm"],
    "openai-gpt": ["openai-gpt"],
    "gpt_oss": ["gpt_oss"],
    "jetmoe": ["jetmoe"],
    "internlm3": ["internlm3"],
    "electra": ["electra"],
    "camembert": ["camembert"],
    "modernbert": ["modernbert"],
    "bart": ["bart"],
    "mbart": ["mbart"],
    "pegasus": ["pegasus"],
    "marian": ["marian"],
    "lfm2": ["lfm2"],
}

# llama.cpp conversions checked for these tables (model_type -> gguf architecture, the converter class that
# was read, and what it does besides renaming). GGUF names are written only where a converter was read:
# gguf-py's tensor_mapping.py maps names for many more, but only the converter says whether a tensor is
# written row for row (a split, a dropped tied head or a q/k permutation would make a translated adapter
# silently wrong). `permute`: LlamaModel.permute on q_proj (num_attention_heads) and k_proj
# (num_key_value_heads). `no_gguf`: hf templates the converter splits, fuses or drops.
GGUF_CONVERTERS = {
    "mixtral": dict(arch="llama", permute=True,
                    source="conversion/llama.py LlamaModel (registered for MixtralForCausalLM), undo_permute"),
    "granite": dict(arch="granite", permute=True,
                    source="conversion/granite.py GraniteModel(LlamaModel), inherits undo_permute"),
    "granitemoe": dict(arch="granitemoe", permute=True,
                       source="conversion/granite.py GraniteMoeModel(GraniteModel): splits input_linear",
                       no_gguf=["input_linear", "shared_mlp.input_linear", "shared_mlp.output_linear"]),
    "granitemoeshared": dict(arch="granitemoe", permute=True,
                             source="conversion/granite.py GraniteMoeModel (registered for "
                                    "GraniteMoeSharedForCausalLM): splits input_linear",
                             no_gguf=["input_linear", "shared_mlp.input_linear", "shared_mlp.output_linear"]),
    "arcee": dict(arch="arcee", permute=True,
                  source="conversion/arcee.py ArceeModel(LlamaModel), inherits undo_permute"),
    "olmo2": dict(arch="olmo2", permute=False,
                  source="conversion/olmo.py Olmo2Model(TextModel): names only"),
    "olmo3": dict(arch="olmo2", permute=False,
                  source="conversion/olmo.py Olmo2Model (registered for Olmo3ForCausalLM): names only"),
    "seed_oss": dict(arch="seed_oss", permute=False,
                     source="conversion/olmo.py SeedOssModel(TextModel): names only"),
    "lfm2": dict(arch="lfm2", permute=False,
                 source="conversion/lfm2.py LFM2Model(TextModel): names only (it squeezes conv.conv, which LoRA "
                        "does not target)"),
    "qwen3": dict(arch="qwen3", permute=False,
                  source="conversion/qwen.py Qwen3Model(Qwen2Model): names only"),
    "gemma3_text": dict(arch="gemma3", permute=False,
                        source="conversion/gemma.py Gemma3Model (registered for Gemma3ForCausalLM): names; it cuts "
                               "token_embd to the tokenizer's vocabulary and shifts the norms, so no embedding LoRA",
                        no_gguf=["embed_tokens"]),
    "smollm3": dict(arch="smollm3", permute=True,
                    source="conversion/llama.py SmolLM3Model(LlamaModel), inherits undo_permute"),
    "olmo": dict(arch="olmo", permute=True,
                 source="conversion/olmo.py OlmoModel(TextModel): permutes q_proj and k_proj as LlamaModel does"),
    "starcoder2": dict(arch="starcoder2", permute=False,
                       source="conversion/starcoder.py StarCoder2Model(TextModel): names only"),
}

