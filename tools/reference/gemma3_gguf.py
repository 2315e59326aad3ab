"""Gemma 3 text models from llama.cpp GGUF files, for transformers: dequantized weights and config.

Shared by gemma3_gguf_parity.py (the real 270M file) and make_gemma3_gguf_fixture.py (the CI
slice). The config is derived from the file's gemma3.* metadata with llama.cpp's rules
(llama.cpp src/models/gemma3.cpp): a global layer every 6th unless
attention.sliding_window_pattern says otherwise, local RoPE base 10000, query scale
1/sqrt(head_dim) except for the 62-layer 27B. Norm weights are stored as 1 + w by llama.cpp's
converter (convert_hf_to_gguf.py Gemma3Model.norm_shift) and are read back as stored - 1.
"""

import numpy as np
import torch
from gguf import GGUFReader, quants

# llama.cpp's per-layer names -> transformers' (gguf-py TensorNameMap, MODEL_ARCH.GEMMA3).
LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def field(reader, key, default=None):
    f = reader.fields.get(key)
    return default if f is None else f.contents()


def hf_name(gguf_name):
    if gguf_name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if gguf_name == "output_norm.weight":
        return "model.norm.weight"
    blk, i, rest = gguf_name.split(".", 2)
    assert blk == "blk" and rest.endswith(".weight"), gguf_name
    return f"model.layers.{i}.{LAYER_NAMES[rest[:-len('.weight')]]}.weight"


def config_dict(reader):
    """Gemma3TextConfig kwargs from the gemma3.* metadata."""
    g = lambda k, d=None: field(reader, "gemma3." + k, d)  # noqa: E731
    layers, hidden, heads = g("block_count"), g("embedding_length"), g("attention.head_count")
    head_dim = g("attention.key_length")
    embed = next(t for t in reader.tensors if t.name == "token_embd.weight")
    pattern = g("attention.sliding_window_pattern", 6)
    window = g("attention.sliding_window")
    types = ["sliding_attention" if window and i % pattern < pattern - 1 else "full_attention"
             for i in range(layers)]
    scaling = None
    if g("rope.scaling.type") == "linear":
        scaling = {"rope_type": "linear", "factor": float(g("rope.scaling.factor"))}
    return dict(
        vocab_size=int(embed.shape[1]), hidden_size=hidden, intermediate_size=g("feed_forward_length"),
        num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=g("attention.head_count_kv"), head_dim=head_dim,
        max_position_embeddings=g("context_length"), rms_norm_eps=float(g("attention.layer_norm_rms_epsilon")),
        rope_theta=float(g("rope.freq_base", 1e6)), rope_local_base_freq=float(g("rope.freq_base_swa", 1e4)),
        query_pre_attn_scalar=hidden // heads if layers == 62 else head_dim,
        sliding_window=window or 4096, layer_types=types, rope_scaling=scaling,
        final_logit_softcapping=g("final_logit_softcapping"), attn_logit_softcapping=None,
        hidden_activation="gelu_pytorch_tanh", bos_token_id=field(reader, "tokenizer.ggml.bos_token_id"),
        eos_token_id=field(reader, "tokenizer.ggml.eos_token_id"),
        pad_token_id=field(reader, "tokenizer.ggml.padding_token_id", 0))


def state_dict(reader):
    """{HF name: f32 tensor}: gguf-py's dequantize, norms stored - 1."""
    out = {}
    for t in reader.tensors:
        values = quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        values = values.reshape([int(n) for n in reversed(t.shape)])
        if t.name.endswith("norm.weight"):
            values = values - np.float32(1)
        out[hf_name(t.name)] = torch.from_numpy(np.ascontiguousarray(values))
    return out


def load_model(path):
    """A float32 Gemma3ForCausalLM (eager attention) with the file's dequantized weights."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    reader = GGUFReader(path)
    config = Gemma3TextConfig(**config_dict(reader))
    config._attn_implementation = "eager"  # pylint: disable=protected-access
    torch.manual_seed(0)
    model = Gemma3ForCausalLM(config)
    missing, unexpected = model.load_state_dict(state_dict(reader), strict=False)
    assert not unexpected, f"tensors transformers does not know: {unexpected}"
    assert missing in ([], ["lm_head.weight"]), f"weights missing from the file: {missing}"
    model.tie_weights()
    return model.eval()
