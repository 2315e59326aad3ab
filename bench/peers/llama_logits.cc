// llama.cpp's logits and per-layer outputs for given token ids, written as a safetensors file
// with the tap names `ocular trace` uses, so `ocular diff` and tools/reference compare the two.
// Built against a llama.cpp build by bench/peers/build_llamacpp.sh (links libllama; no
// llama.cpp source is kept here).
//
//   llama_logits MODEL.gguf OUT.safetensors --ids 2,818,5279 [--gen N] [--force 1,2,3]
//                [--fa on|off|auto] [--ctk f16|f32] [--ctv f16|f32] [-t THREADS]
//
// The prompt runs as one batch with logits at every position (`logits` [T, V]); the layer
// outputs of that batch are recorded through llama.cpp's eval callback (`l_out-N` as
// `decoder.layers.N` [T, n_embd], `result_norm` as `decoder.norm`). Then N tokens are decoded
// one at a time, as llama-completion --temp 0 does: each is the argmax of the previous logits
// (or the next --force id: teacher forcing), `decode_logits[k]` the row that chose token k.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

namespace {

struct Tap {
  std::vector<int64_t> shape;
  std::vector<float> f32;
  std::vector<int64_t> i64;
};

struct Recorder {
  std::map<std::string, Tap> taps;
  bool active = true;
};

std::string TapName(const char* name) {
  if (std::strncmp(name, "l_out-", 6) == 0) return std::string("decoder.layers.") + (name + 6);
  if (std::strcmp(name, "result_norm") == 0) return "decoder.norm";
  if (std::strcmp(name, "inp_scaled") == 0) return "decoder.embed_scaled";
  // Every intermediate of the first layer under llama.cpp's own name (debugging aid).
  const size_t n = std::strlen(name);
  if (n > 2 && std::strcmp(name + n - 2, "-0") == 0) return std::string("llama.") + name;
  return "";
}

bool OnEval(ggml_tensor* t, bool ask, void* user) {
  auto* rec = static_cast<Recorder*>(user);
  const std::string name = TapName(t->name);
  if (ask) return rec->active && !name.empty();
  if (!rec->active || name.empty() || t->type != GGML_TYPE_F32 || !ggml_is_contiguous(t)) {
    return true;
  }
  Tap tap;
  for (int d = GGML_MAX_DIMS - 1; d >= 0; --d) {  // ggml's ne reversed, leading 1s dropped
    if (t->ne[d] > 1 || !tap.shape.empty() || d < 2) tap.shape.push_back(t->ne[d]);
  }
  tap.f32.resize(static_cast<size_t>(ggml_nelements(t)));
  ggml_backend_tensor_get(t, tap.f32.data(), 0, ggml_nbytes(t));
  rec->taps[name] = std::move(tap);
  return true;
}

std::vector<int32_t> ParseIds(const char* s) {
  std::vector<int32_t> ids;
  std::stringstream in(s);
  std::string tok;
  while (std::getline(in, tok, ',')) {
    if (!tok.empty()) ids.push_back(std::atoi(tok.c_str()));
  }
  return ids;
}

ggml_type CacheType(const char* s) {
  if (std::strcmp(s, "f32") == 0) return GGML_TYPE_F32;
  if (std::strcmp(s, "f16") == 0) return GGML_TYPE_F16;
  std::fprintf(stderr, "llama_logits: cache type %s: use f16 or f32\n", s);
  std::exit(2);
}

bool WriteSafetensors(const char* path, const std::map<std::string, Tap>& taps) {
  std::string header = "{";
  size_t offset = 0;
  for (const auto& [name, tap] : taps) {
    const size_t bytes = tap.i64.empty() ? 4 * tap.f32.size() : 8 * tap.i64.size();
    if (header.size() > 1) header += ",";
    header +=
        "\"" + name + "\":{\"dtype\":\"" + (tap.i64.empty() ? "F32" : "I64") + "\",\"shape\":[";
    for (size_t i = 0; i < tap.shape.size(); ++i) {
      header += (i ? "," : "") + std::to_string(tap.shape[i]);
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  header += "}";
  while (header.size() % 8) header += " ";
  FILE* f = std::fopen(path, "wb");
  if (!f) return false;
  const uint64_t n = header.size();
  bool ok = std::fwrite(&n, 8, 1, f) == 1 && std::fwrite(header.data(), 1, n, f) == n;
  for (const auto& [name, tap] : taps) {
    if (tap.i64.empty()) {
      ok = ok && std::fwrite(tap.f32.data(), 4, tap.f32.size(), f) == tap.f32.size();
    } else {
      ok = ok && std::fwrite(tap.i64.data(), 8, tap.i64.size(), f) == tap.i64.size();
    }
  }
  return std::fclose(f) == 0 && ok;
}

int Argmax(const float* row, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

struct Options {
  std::vector<int32_t> ids, force;
  int gen = 0, threads = 2;
  llama_flash_attn_type fa = LLAMA_FLASH_ATTN_TYPE_AUTO;
  ggml_type ctk = GGML_TYPE_F16, ctv = GGML_TYPE_F16;
};

// The options after MODEL and OUT; false (after a message) on an unknown one or no --ids.
bool ParseOptions(int argc, char** argv, Options* o) {
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string opt = argv[i];
    const char* v = argv[i + 1];
    if (opt == "--ids") {
      o->ids = ParseIds(v);
    } else if (opt == "--force") {
      o->force = ParseIds(v);
    } else if (opt == "--gen") {
      o->gen = std::atoi(v);
    } else if (opt == "-t") {
      o->threads = std::atoi(v);
    } else if (opt == "--ctk") {
      o->ctk = CacheType(v);
    } else if (opt == "--ctv") {
      o->ctv = CacheType(v);
    } else if (opt == "--fa") {
      o->fa = std::strcmp(v, "on") == 0    ? LLAMA_FLASH_ATTN_TYPE_ENABLED
              : std::strcmp(v, "off") == 0 ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                                           : LLAMA_FLASH_ATTN_TYPE_AUTO;
    } else {
      std::fprintf(stderr, "llama_logits: unknown option %s\n", opt.c_str());
      return false;
    }
  }
  if (o->ids.empty()) std::fprintf(stderr, "llama_logits: --ids is required\n");
  return !o->ids.empty();
}

llama_context* MakeContext(llama_model* model, const Options& o, Recorder* rec) {
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(o.ids.size() + o.gen + 16);
  cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(o.ids.size());
  cp.n_threads = cp.n_threads_batch = o.threads;
  cp.flash_attn_type = o.fa;
  cp.type_k = o.ctk;
  cp.type_v = o.ctv;
  cp.cb_eval = OnEval;
  cp.cb_eval_user_data = rec;
  return llama_init_from_model(model, cp);
}

// The prompt as one batch (logits at every position, layer taps recorded), then o.gen tokens
// decoded one at a time; the results go into rec->taps. False if llama_decode fails.
bool Run(llama_context* ctx, int V, const Options& o, Recorder* rec) {
  const int T = static_cast<int>(o.ids.size());
  llama_batch batch = llama_batch_init(T, 0, 1);
  for (int i = 0; i < T; ++i) {
    batch.token[i] = o.ids[i];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = T;
  const bool ok = llama_decode(ctx, batch) == 0;
  llama_batch_free(batch);
  if (!ok) return false;
  rec->active = false;
  Tap logits{{T, V}, std::vector<float>(static_cast<size_t>(T) * V), {}};
  for (int i = 0; i < T; ++i) {
    std::memcpy(&logits.f32[static_cast<size_t>(i) * V], llama_get_logits_ith(ctx, i), 4 * V);
  }
  Tap generated{{o.gen}, {}, {}}, decode{{o.gen, V}, {}, {}};
  std::vector<float> last(logits.f32.end() - V, logits.f32.end());
  for (int k = 0; k < o.gen; ++k) {
    decode.f32.insert(decode.f32.end(), last.begin(), last.end());
    llama_token next = k < static_cast<int>(o.force.size()) ? o.force[k] : Argmax(last.data(), V);
    generated.i64.push_back(next);
    if (k + 1 == o.gen) break;
    llama_batch one = llama_batch_get_one(&next, 1);
    if (llama_decode(ctx, one) != 0) return false;
    const float* row = llama_get_logits_ith(ctx, -1);
    last.assign(row, row + V);
  }
  rec->taps["logits"] = std::move(logits);
  rec->taps["input_ids"] = Tap{{T}, {}, std::vector<int64_t>(o.ids.begin(), o.ids.end())};
  if (o.gen > 0) {
    rec->taps["generated_ids"] = std::move(generated);
    rec->taps["decode_logits"] = std::move(decode);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: %s MODEL.gguf OUT.safetensors --ids A,B,C [--gen N] "
                 "[--force A,B] [--fa on|off|auto] [--ctk f16|f32] [--ctv f16|f32] [-t N]\n",
                 argv[0]);
    return 2;
  }
  if (!ParseOptions(argc, argv, &o)) return 2;
  llama_backend_init();
  llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (!model) {
    std::fprintf(stderr, "llama_logits: cannot load %s\n", argv[1]);
    return 1;
  }
  Recorder rec;
  llama_context* ctx = MakeContext(model, o, &rec);
  if (!ctx) return 1;
  const int V = llama_vocab_n_tokens(llama_model_get_vocab(model));
  const bool ok = Run(ctx, V, o, &rec);
  llama_free(ctx);
  llama_model_free(model);
  if (!ok) return 1;
  if (!WriteSafetensors(argv[2], rec.taps)) {
    std::fprintf(stderr, "llama_logits: cannot write %s\n", argv[2]);
    return 1;
  }
  return 0;
}
