#include "models/gemma3/llamacpp_write.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "models/gemma3/config.h"
#include "text/sp_tokenizer.h"

namespace ocular::gemma3 {

namespace {

using json = nlohmann::json;

Status Refuse(const FileSet& side, const auto&... what) {
  return Error(StatusCode::kUnimplemented, "quantize", side.origin(),
               ": llama.cpp's Gemma 3 files cannot express ", what...);
}

// A side file as JSON; an empty object when absent.
StatusOr<json> ReadJson(const FileSet& side, const char* name) {
  if (!side.Has(name)) return json::object();
  OCULAR_ASSIGN_OR_RETURN(std::string text, side.Read(name, kMaxTokenizerFileBytes, "quantize"));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Error(StatusCode::kDataLoss, "quantize", side.Where(name), ": not a JSON object");
  }
  return j;
}

// gemma3.* (Gemma3Model.set_gguf_parameters and TextModel's).
Status AddTextKeys(const FileSet& side, const Gemma3Config& cfg, GgufWriter* w) {
  const Gemma3TextConfig& t = cfg.text;
  const GemmaTextConfig& g = t.gemma;
  // llama.cpp's query scale (gemma3.cpp): 1/sqrt(head_dim), 1/sqrt(hidden/heads) at 62 layers.
  const int scalar = g.num_hidden_layers == 62 ? g.hidden_size / g.num_attention_heads : g.head_dim;
  if (g.query_pre_attn_scalar != static_cast<float>(scalar)) {
    return Refuse(side, "text_config.query_pre_attn_scalar = ", g.query_pre_attn_scalar,
                  " (llama.cpp scales queries by 1/sqrt(", scalar, "))");
  }
  if (g.attn_logit_softcapping > 0) return Refuse(side, "text_config.attn_logit_softcapping");
  bool any_sliding = false;
  for (int i = 0; i < g.num_hidden_layers; ++i) {
    any_sliding = any_sliding || g.layer_is_sliding[static_cast<size_t>(i)];
  }
  for (int i = 0; i < g.num_hidden_layers && any_sliding; ++i) {
    if (g.layer_is_sliding[static_cast<size_t>(i)] != (i % 6 < 5)) {
      return Refuse(side, "text_config.layer_types other than every 6th layer global (layer ", i,
                    ")");
    }
  }
  w->SetU32("gemma3.block_count", g.num_hidden_layers);
  w->SetU32("gemma3.context_length", g.max_position_embeddings);
  w->SetU32("gemma3.embedding_length", g.hidden_size);
  w->SetU32("gemma3.feed_forward_length", g.intermediate_size);
  w->SetU32("gemma3.attention.head_count", g.num_attention_heads);
  w->SetU32("gemma3.attention.head_count_kv", g.num_key_value_heads);
  if (t.rope_scaling_factor != 1.0f) {
    w->SetString("gemma3.rope.scaling.type", "linear");
    w->SetF32("gemma3.rope.scaling.factor", t.rope_scaling_factor);
  }
  w->SetF32("gemma3.rope.freq_base", g.rope_theta);
  w->SetF32("gemma3.rope.freq_base_swa", t.rope_local_base_freq);
  w->SetF32("gemma3.attention.layer_norm_rms_epsilon", g.rms_norm_eps);
  w->SetU32("gemma3.attention.key_length", g.head_dim);
  w->SetU32("gemma3.attention.value_length", g.head_dim);
  if (g.final_logit_softcapping > 0) {
    w->SetF32("gemma3.final_logit_softcapping", g.final_logit_softcapping);
  }
  if (any_sliding) w->SetU32("gemma3.attention.sliding_window", g.sliding_window);
  return Status::Ok();
}

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
};

// `s` with SentencePiece's meta space U+2581 written as a plain space.
std::string SpacesForMetaspace(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.substr(i, 3) == "\xE2\x96\x81") {
      out += ' ';
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// _create_vocab_sentencepiece: the model's pieces, then added_tokens.json (user-defined), then
// added_tokens_decoder (control when special or looking special), padded with [PADn].
StatusOr<Vocab> ReadVocab(const FileSet& side, int vocab_size, const json& tokenizer_config) {
  OCULAR_ASSIGN_OR_RETURN(std::string proto,
                          side.Read("tokenizer.model", kMaxTokenizerFileBytes, "quantize"));
  OCULAR_ASSIGN_OR_RETURN(std::vector<text::SentencePiece> pieces, text::SentencePieces(proto));
  Vocab v;
  const size_t n = static_cast<size_t>(vocab_size);
  for (size_t i = 0; i < n; ++i) v.tokens.push_back("[PAD" + std::to_string(i) + "]");
  v.scores.assign(n, -10000.0f);
  v.types.assign(n, 5);
  for (size_t i = 0; i < pieces.size() && i < n; ++i) {
    v.tokens[i] = pieces[i].piece;
    v.scores[i] = pieces[i].score;
    v.types[i] = pieces[i].type;
  }
  OCULAR_ASSIGN_OR_RETURN(json added, ReadJson(side, "added_tokens.json"));
  for (const auto& [content, id] : added.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size) {
      continue;  // the converter skips ids out of range
    }
    const size_t i = id.get<size_t>();
    v.tokens[i] = content;
    v.scores[i] = -1000.0f;
    v.types[i] = 4;
  }
  const json decoder = tokenizer_config.value("added_tokens_decoder", json::object());
  for (const auto& [key, entry] : decoder.items()) {
    const int64_t id = std::strtoll(key.c_str(), nullptr, 10);
    if (id < 0 || id >= vocab_size || !entry.is_object()) continue;
    std::string content = entry.value("content", "");
    const bool looks_special = content == "<pad>" || content == "<mask>" || content == "<2mass>" ||
                               content == "[@BOS@]" ||
                               (content.starts_with("<|") && content.ends_with("|>")) ||
                               (content.starts_with("<unused") && content.ends_with(">"));
    const size_t i = static_cast<size_t>(id);
    if (entry.value("special", false) || looks_special) {
      v.types[i] = 3;
    } else {
      content = SpacesForMetaspace(content);  // user-defined spaces pre-normalized
      v.types[i] = 4;
    }
    v.scores[i] = -1000.0f;
    v.tokens[i] = std::move(content);
  }
  return v;
}

// The content of tokenizer_config.json's "<typ>_token" (a string or {"content": ...}).
std::string TokenContent(const json& tc, const std::string& typ) {
  const json e = tc.value(typ + "_token", json());
  if (e.is_string()) return e.get<std::string>();
  if (e.is_object() && e.contains("content") && e["content"].is_string()) {
    return e["content"].get<std::string>();
  }
  return "";
}

// SpecialVocab's ids and add_* flags (the TemplateProcessing cases Gemma's tokenizer has).
Status AddSpecial(const FileSet& side, const json& tc, int vocab_size, GgufWriter* w) {
  OCULAR_ASSIGN_OR_RETURN(json tj, ReadJson(side, "tokenizer.json"));
  OCULAR_ASSIGN_OR_RETURN(json config, ReadJson(side, "config.json"));
  for (const char* typ : {"sep", "cls", "mask"}) {
    if (!TokenContent(tc, typ).empty()) {
      return Refuse(side, "a ", typ, "_token (tokenizer_config.json)");
    }
  }
  std::map<std::string, bool> add;
  const json pp = tj.value("post_processor", json());
  if (pp.is_object() && pp.value("type", "") == "TemplateProcessing") {
    auto special = [](const json& e) {
      return e.value("SpecialToken", json::object()).value("id", "");
    };
    const json single = pp.value("single", json::array());
    if (single.size() > 1) {
      add["bos"] = special(single.front()) == TokenContent(tc, "bos");
      if (const std::string last = special(single.back()); !last.empty()) {
        add["eos"] = last == TokenContent(tc, "eos");
      }
    }
    const json pair = pp.value("pair", json::array());
    if (pair.size() == 4 && special(pair[2]) != TokenContent(tc, "eos")) add["sep"] = false;
  } else if (pp.is_object()) {
    return Refuse(side, "tokenizer.json's post_processor '", pp.value("type", ""), "'");
  }
  for (const char* typ : {"bos", "eos"}) {
    const json e = tc.value(std::string("add_") + typ + "_token", json());
    if (e.is_boolean() && !add.contains(typ)) add[typ] = e.get<bool>();
  }
  const json added = tj.value("added_tokens", json::array());
  for (auto [typ, key] :
       {std::pair{"bos", "bos_token_id"}, std::pair{"eos", "eos_token_id"},
        std::pair{"unk", "unknown_token_id"}, std::pair{"pad", "padding_token_id"}}) {
    int64_t id = -1;
    const std::string content = TokenContent(tc, typ);
    for (const json& a : added) {
      if (!content.empty() && a.value("content", "") == content) {
        id = a.value("id", int64_t{-1});
        break;
      }
    }
    const std::string cfg_key = std::string(typ) + "_token_id";
    for (const json* c :
         {&config, config.contains("text_config") ? &config["text_config"] : &config}) {
      if (id < 0 && c->contains(cfg_key) && (*c)[cfg_key].is_number_integer()) {
        id = (*c)[cfg_key].get<int64_t>();
      }
    }
    if (id >= 0 && id < vocab_size)
      w->SetU32(std::string("tokenizer.ggml.") + key, static_cast<uint32_t>(id));
  }
  for (const char* typ : {"bos", "sep", "eos"}) {
    if (add.contains(typ))
      w->SetBool(std::string("tokenizer.ggml.add_") + typ + "_token", add[typ]);
  }
  return Status::Ok();
}

// tokenizer_config.json's chat_template, else chat_template.jinja, else chat_template.json's.
StatusOr<std::string> ChatTemplate(const FileSet& side, const json& tc) {
  if (tc.contains("chat_template") && tc["chat_template"].is_string()) {
    return tc["chat_template"].get<std::string>();
  }
  if (side.Has("chat_template.jinja")) {
    return side.Read("chat_template.jinja", kMaxTokenizerFileBytes, "quantize");
  }
  OCULAR_ASSIGN_OR_RETURN(json ct, ReadJson(side, "chat_template.json"));
  return ct.value("chat_template", "");
}

Status AddVocab(const FileSet& side, const Gemma3Config& cfg, GgufWriter* w) {
  OCULAR_ASSIGN_OR_RETURN(json tc, ReadJson(side, "tokenizer_config.json"));
  OCULAR_ASSIGN_OR_RETURN(Vocab v, ReadVocab(side, cfg.text.gemma.vocab_size, tc));
  w->SetString("tokenizer.ggml.model", "llama");
  w->SetString("tokenizer.ggml.pre", "default");
  w->SetStringArray("tokenizer.ggml.tokens", v.tokens);
  w->SetF32Array("tokenizer.ggml.scores", v.scores);
  w->SetI32Array("tokenizer.ggml.token_type", v.types);
  OCULAR_RETURN_IF_ERROR(AddSpecial(side, tc, cfg.text.gemma.vocab_size, w));
  OCULAR_ASSIGN_OR_RETURN(std::string chat, ChatTemplate(side, tc));
  if (!chat.empty()) w->SetString("tokenizer.chat_template", chat);
  w->SetBool("tokenizer.ggml.add_space_prefix", false);
  return Status::Ok();
}

// clip.* (MmprojModel.set_gguf_parameters, Gemma3VisionModel's).
Status AddMmprojKeys(const FileSet& side, const Gemma3Config& cfg, GgufWriter* w) {
  const SiglipVisionConfig& v = cfg.vision;
  if (v.hidden_act != Activation::kGeluTanh) {
    return Refuse(side, "vision_config.hidden_act other than gelu_pytorch_tanh");
  }
  if (v.vision_use_head) return Refuse(side, "vision_config.vision_use_head");
  OCULAR_ASSIGN_OR_RETURN(json pre, ReadJson(side, "preprocessor_config.json"));
  std::vector<float> mean, std;
  for (auto [key, out] : {std::pair{"image_mean", &mean}, std::pair{"image_std", &std}}) {
    const json a = pre.value(key, json());
    if (!a.is_array() || a.size() != 3) {
      return Refuse(side, "a preprocessor_config.json without three ", key, " values");
    }
    for (const json& x : a) out->push_back(x.get<float>());
  }
  const json size = pre.value("size", json::object());
  if (size.value("height", v.image_size) != v.image_size ||
      size.value("width", v.image_size) != v.image_size || pre.value("resample", 2) != 2 ||
      pre.value("do_pan_and_scan", false)) {
    return Refuse(side, "preprocessor_config.json's size, resample or do_pan_and_scan other ",
                  "than the image_size square, bilinear, off");
  }
  w->SetBool("clip.has_vision_encoder", true);
  w->SetU32("clip.vision.projection_dim", cfg.text.gemma.hidden_size);
  w->SetU32("clip.vision.image_size", v.image_size);
  w->SetU32("clip.vision.patch_size", v.patch_size);
  w->SetU32("clip.vision.embedding_length", v.hidden_size);
  w->SetU32("clip.vision.feed_forward_length", v.intermediate_size);
  w->SetU32("clip.vision.block_count", v.num_hidden_layers);
  w->SetU32("clip.vision.attention.head_count", v.num_attention_heads);
  w->SetF32Array("clip.vision.image_mean", mean);
  w->SetF32Array("clip.vision.image_std", std);
  w->SetString("clip.projector_type", "gemma3");
  w->SetF32("clip.vision.attention.layer_norm_epsilon", v.layer_norm_eps);
  w->SetBool("clip.use_gelu", true);
  if (cfg.pool_kernel() != 4) {
    w->SetU32("clip.vision.projector.scale_factor", static_cast<uint32_t>(cfg.pool_kernel()));
  }
  return Status::Ok();
}

}  // namespace

Status AddLlamaCppMetadata(const FileSet& side, GgufWriter* text, GgufWriter* mmproj) {
  OCULAR_ASSIGN_OR_RETURN(Gemma3Config cfg, LoadGemma3Config(side));
  if (!cfg.has_vision) {
    return Refuse(side, "a text-only model as a pair (write it without --mmproj-out)");
  }
  OCULAR_RETURN_IF_ERROR(AddTextKeys(side, cfg, text));
  OCULAR_RETURN_IF_ERROR(AddVocab(side, cfg, text));
  return AddMmprojKeys(side, cfg, mmproj);
}

LlamaCppTensorRule LlamaCppTensor(const std::string& name) {
  LlamaCppTensorRule r;
  r.mmproj = name.starts_with("v.") || name.starts_with("mm.");
  r.plus_one = name.ends_with("norm.weight") && !name.starts_with("v.");
  if (name.starts_with("v.patch_embd.") || name.starts_with("v.position_embd.")) {
    r.forced = WFormat::kF32;
  } else if (name == "mm.input_projection.weight") {
    r.forced = WFormat::kF16;
  }
  return r;
}

}  // namespace ocular::gemma3
