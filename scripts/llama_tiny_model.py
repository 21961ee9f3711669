# Tiny random-weight LLaMA model for llama.cpp (GGUF), tokenizer copied from
# llama.cpp's models/ggml-vocab-llama-spm.gguf (LLaMA SPM vocab, 32000 tokens).
# Usage: python3 scripts/llama_tiny_model.py LLAMA_CPP_TREE OUT.gguf (scripts/gpu-llama.sh;
# written by a helper in the thirty-third session).
import os, sys, numpy as np
sys.path.insert(0, sys.argv[1] + "/gguf-py")
import gguf
src, out = sys.argv[1], sys.argv[2]
L, E, H, HKV, FF, CTX = 4, 256, 4, 2, 688, 2048
HD = E // H
QK = float(os.environ.get("QK_STD", "0.15"))
voc = gguf.GGUFReader(src + "/models/ggml-vocab-llama-spm.gguf")
tokens = voc.fields["tokenizer.ggml.tokens"].contents()
scores = voc.fields["tokenizer.ggml.scores"].contents()
types = voc.fields["tokenizer.ggml.token_type"].contents()
V = len(tokens)
rng = np.random.default_rng(1234)
w = gguf.GGUFWriter(out, "llama")
w.add_name("graft-tiny-llama")
w.add_context_length(CTX); w.add_embedding_length(E); w.add_block_count(L)
w.add_feed_forward_length(FF); w.add_head_count(H); w.add_head_count_kv(HKV)
w.add_layer_norm_rms_eps(1e-5); w.add_rope_dimension_count(HD); w.add_rope_freq_base(10000.0)
w.add_vocab_size(V); w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
w.add_tokenizer_model("llama"); w.add_tokenizer_pre("default")
w.add_token_list(tokens); w.add_token_scores(scores); w.add_token_types(types)
w.add_bos_token_id(1); w.add_eos_token_id(2); w.add_unk_token_id(0)
w.add_add_bos_token(True); w.add_add_eos_token(False)
def rnd(*shape, std=0.02): return (rng.standard_normal(shape) * std).astype(np.float32)
emb = rnd(V, E, std=float(os.environ.get("EMB_STD", "0.1")))
emb[:3] = 0  # <unk>, <s>, </s>: logit 0 with the tied output, so greedy never picks EOS
q = gguf.quants.quantize(emb, gguf.GGMLQuantizationType.Q8_0)
w.add_tensor("token_embd.weight", q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
w.add_tensor("output_norm.weight", np.ones(E, np.float32))
for i in range(L):
    p = f"blk.{i}."
    w.add_tensor(p + "attn_norm.weight", (1 + rnd(E, std=0.1)))
    w.add_tensor(p + "ffn_norm.weight", (1 + rnd(E, std=0.1)))
    for n, shp, s in (("attn_q", (E, E), QK), ("attn_k", (HKV * HD, E), QK), ("attn_v", (HKV * HD, E), 0.06),
                      ("attn_output", (E, E), 0.06), ("ffn_gate", (FF, E), 0.06), ("ffn_up", (FF, E), 0.06),
                      ("ffn_down", (E, FF), 0.04)):
        w.add_tensor(p + n + ".weight", rnd(*shp, std=s).astype(np.float16))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
print("wrote", out, "vocab", V)
