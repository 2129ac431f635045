#!/usr/bin/python3
"""llama-tiny-model.py writes a tiny random-weight vision language model for llama-server,
for tests only (a few hundred KiB).

tiny-llm.gguf    a 'llama' language model: 2 blocks, n_embd 64, a byte-fallback SentencePiece
                 vocabulary (<unk>, <s>, </s> and the 256 bytes), random weights.
tiny-mmproj.gguf a CLIP vision encoder with an MLP projector (LLaVA-1.5 layout, projector
                 'mlp'): 32x32 images, 8x8 patches, so an image is 16 tokens of the LLM's width.

Usage: llama-tiny-model.py DIR. scripts/build-llama-image.sh runs it inside the image at
build time (Debian's python3-gguf); nothing is downloaded. The answers are gibberish: what
the tests need is the server's real request parsing, image decoding (stb_image), multimodal
embedding and grammar-constrained sampling.
"""
import sys

import numpy as np
import gguf

out = sys.argv[1] if len(sys.argv) > 1 else "."
rng = np.random.default_rng(20261202)

N_EMBD, N_FF, N_LAYER, N_HEAD, N_CTX = 64, 128, 2, 4, 2048


def rand(*shape, scale=0.02):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def ones(n):
    return np.ones((n,), dtype=np.float32)


def zeros(n):
    return np.zeros((n,), dtype=np.float32)


def write_llm(path):
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("pgimageai tiny test llm")
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)

    tokens = [b"<unk>", b"<s>", b"</s>"] + [("<0x%02X>" % i).encode() for i in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * len(tokens))
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    # No leading space before the text: with one, the generation prompt that the server
    # puts at the start of a response_format grammar ("<|im_start|>assistant\n") does not
    # tokenize to itself, and the grammar sampler fails to initialise (build b11669).
    w.add_add_space_prefix(False)
    n_vocab = len(tokens)
    w.add_vocab_size(n_vocab)

    w.add_tensor("token_embd.weight", rand(n_vocab, N_EMBD))
    w.add_tensor("output_norm.weight", ones(N_EMBD))
    # Only printable ASCII bytes get output weights: every other token's logit is 0, far
    # below theirs, so the answers are valid UTF-8 text without NUL or control bytes,
    # which a text column could not hold.
    out = np.zeros((n_vocab, N_EMBD), dtype=np.float32)
    for b in range(0x20, 0x7F):
        out[3 + b] = rand(N_EMBD, scale=1.0)
    w.add_tensor("output.weight", out)
    for i in range(N_LAYER):
        p = "blk.%d." % i
        w.add_tensor(p + "attn_norm.weight", ones(N_EMBD))
        for t in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(p + t + ".weight", rand(N_EMBD, N_EMBD))
        w.add_tensor(p + "ffn_norm.weight", ones(N_EMBD))
        w.add_tensor(p + "ffn_gate.weight", rand(N_FF, N_EMBD))
        w.add_tensor(p + "ffn_up.weight", rand(N_FF, N_EMBD))
        w.add_tensor(p + "ffn_down.weight", rand(N_EMBD, N_FF))
    finish(w)


V_EMBD, V_FF, V_LAYER, V_HEAD, IMG, PATCH = 32, 64, 1, 2, 32, 8


def write_mmproj(path):
    w = gguf.GGUFWriter(path, "clip")
    w.add_name("pgimageai tiny test projector")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_clip_has_vision_encoder(True)
    w.add_clip_projector_type("mlp")
    w.add_vision_image_size(IMG)
    w.add_vision_patch_size(PATCH)
    w.add_vision_embedding_length(V_EMBD)
    w.add_vision_feed_forward_length(V_FF)
    w.add_vision_projection_dim(N_EMBD)
    w.add_vision_block_count(V_LAYER)
    w.add_vision_head_count(V_HEAD)
    w.add_vision_attention_layernorm_eps(1e-6)
    w.add_vision_image_mean([0.5, 0.5, 0.5])
    w.add_vision_image_std([0.5, 0.5, 0.5])
    w.add_vision_use_gelu(True)

    n_pos = (IMG // PATCH) ** 2 + 1
    w.add_tensor("v.patch_embd.weight", rand(V_EMBD, 3, PATCH, PATCH))
    w.add_tensor("v.class_embd", rand(V_EMBD))
    w.add_tensor("v.position_embd.weight", rand(n_pos, V_EMBD))
    w.add_tensor("v.pre_ln.weight", ones(V_EMBD))
    w.add_tensor("v.pre_ln.bias", zeros(V_EMBD))
    for i in range(V_LAYER):
        p = "v.blk.%d." % i
        for t in ("attn_q", "attn_k", "attn_v", "attn_out"):
            w.add_tensor(p + t + ".weight", rand(V_EMBD, V_EMBD))
            w.add_tensor(p + t + ".bias", zeros(V_EMBD))
        for t in ("ln1", "ln2"):
            w.add_tensor(p + t + ".weight", ones(V_EMBD))
            w.add_tensor(p + t + ".bias", zeros(V_EMBD))
        w.add_tensor(p + "ffn_up.weight", rand(V_FF, V_EMBD))
        w.add_tensor(p + "ffn_up.bias", zeros(V_FF))
        w.add_tensor(p + "ffn_down.weight", rand(V_EMBD, V_FF))
        w.add_tensor(p + "ffn_down.bias", zeros(V_EMBD))
    w.add_tensor("mm.0.weight", rand(N_EMBD, V_EMBD))
    w.add_tensor("mm.0.bias", zeros(N_EMBD))
    w.add_tensor("mm.2.weight", rand(N_EMBD, N_EMBD))
    w.add_tensor("mm.2.bias", zeros(N_EMBD))
    finish(w)


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


write_llm(out + "/tiny-llm.gguf")
write_mmproj(out + "/tiny-mmproj.gguf")
