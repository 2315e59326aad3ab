// The model-family seam: what the runtime needs from a vision-language model, whatever its
// family (PaliGemma today; Gemma 3 and Llama 3.2 Vision plug in here). One implementation per
// family lives in its own folder (models/paligemma/, ...), registered in models/registry.h.
//
// All methods run on an Exec (backend, precision, arena) and take scratch from its arena only:
// the runtime plans the arena from WorkspaceBytes() once, so a decode step never allocates.
// Methods are const and safe to call from several threads with different Execs and caches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/matrix.h"
#include "core/tensor.h"
#include "kernels/exec.h"
#include "models/kv_cache.h"
#include "models/prompt.h"
#include "models/tracer.h"
#include "ocular/status.h"

namespace ocular {

enum class LayerKind : uint8_t { kSelfAttention, kCrossAttention };

// One decoder layer as the runtime sees it.
struct LayerSpec {
  LayerKind kind = LayerKind::kSelfAttention;
  int window = 0;        // sliding window in tokens while decoding; 0 = global
  float rope_theta = 0;  // RoPE base of this layer
};

struct ModelSpec {
  std::string family;        // registry key: "paligemma"
  std::string architecture;  // for people: "PaliGemma 2 (gemma2)"
  int hidden_size = 0;
  int vocab_size = 0;     // rows of the output projection (logits per token)
  int max_positions = 0;  // context length
  std::vector<LayerSpec> layers;
  KvLayout kv;                // what one sequence's cache holds
  int image_size = 0;         // the encoder's crop size in pixels (R of [3, R, R]; mllama's tile)
  int image_tokens = 0;       // feature rows of a typical image, for planning and ModelInfo (the
                              // rows of each image are its VisionInput::feature_rows)
  int64_t feature_width = 0;  // floats per feature row (0: hidden_size); a family whose encoder
                              // hands extra per-layer inputs to the decoder (DeepStack) is wider
  double image_gflop = 0;     // matmul + attention FLOPs (2 per MAC) to encode one image
  int32_t image_token_id = -1;
  // End-of-generation ids from the config (Gemma 3: eos_token_id [1, 106], <end_of_turn>).
  std::vector<int32_t> eos_ids;
  DType weight_dtype = DType::kF32;  // of the weight matrices (F32 if mixed or quantized)
  // Of the matrices that are not quantized (BoundWeights::float_dtype); whether some matrix is
  // quantized.
  DType float_dtype = DType::kF32;
  bool quantized = false;
  std::string weight_formats;  // every matrix format, "+"-joined: "bf16", "q4_k+q6_k+f32"
  size_t weight_bytes = 0;
  size_t text_weight_bytes = 0;  // what one decode step streams (decoder + output projection)

  int64_t feature_floats() const { return feature_width > 0 ? feature_width : hidden_size; }
};

// What a family keeps with one sequence besides its K/V rows (mllama: the cross-attention keys
// its cross layers hold and the key range a decode step reads; Qwen2-VL's rope delta would fit
// here too). Made by VlModel::NewState, owned by the runtime's Sequence, read and written only
// by the family's ForwardLayers.
class SequenceState {
 public:
  virtual ~SequenceState() = default;
  // A copy, for a sequence that starts from this one's cached prompt K/V (runtime's prefix
  // cache); null: the state cannot be copied (the prompt is then not cached).
  virtual std::unique_ptr<SequenceState> Clone() const { return nullptr; }
};

// One sequence's rows in a batched forward pass. Rows are laid out sequence after sequence.
//
// The attention mask and positions are the family's, from the sequence's typed prompt
// (models/prompt.h: ids, positions, bidirectional spans, images) and its own state. A prefill
// chunk holds the whole prompt (start 0, count == prompt->size()); a decode chunk one row at
// cache index `start`. `features`: a prefill's image features [prompt->feature_rows(),
// feature_width] (else null), for families that read them inside the decoder (mllama's
// cross-attention K/V, computed once and kept in the sequence's cache).
struct SeqChunk {
  KvCache* cache;
  int64_t start;                    // cache position of the first row
  int64_t count;                    // rows of this sequence in the pass
  const Prompt* prompt = nullptr;   // the sequence's prompt; null: a causal text prompt
  SequenceState* state = nullptr;   // the family's (VlModel::NewState), or null
  const float* features = nullptr;  // a prefill's image features, image after image

  bool prefill() const { return prompt != nullptr && start == 0 && count == prompt->size(); }
  // The rows' token ids in a prefill, else null (HF applies no token-type mask to decode steps).
  const int32_t* ids() const { return prefill() ? prompt->ids.data() : nullptr; }
  // Positions [0, prefix_len()) form one bidirectional block (PaliGemma's prefix-LM).
  int64_t prefix_len() const { return prompt != nullptr ? prompt->prefix_len() : 0; }
  int64_t feature_rows() const {
    return features != nullptr && prompt != nullptr ? prompt->feature_rows() : 0;
  }
};

struct Batch {
  std::span<const SeqChunk> seqs;
  int64_t rows = 0;  // sum of counts
};

// The largest shapes one Exec will run, for WorkspaceBytes.
struct WorkspaceShape {
  int64_t rows = 1;     // rows of one forward pass (prefill length, or decode batch size)
  int64_t context = 1;  // longest sequence (keys per attention call)
  int64_t images = 0;   // images of one EncodeImages call
  int threads = 1;
};

class VlModel {
 public:
  virtual ~VlModel() = default;
  virtual const ModelSpec& spec() const = 0;

  // Arena bytes the calls below take at most, for shapes up to `shape`.
  virtual size_t WorkspaceBytes(const WorkspaceShape& shape) const = 0;

  // The images' features, image after image: images[i].feature_rows rows of feature_floats()
  // each, ready to stand in for the image tokens' embeddings (or, mllama, for the
  // cross-attention layers to read). `pixels`: images[0]'s pixel values, the images' values
  // one after the other in the family's layout (as Prompt::pixels holds them).
  virtual void EncodeImages(const Exec& ex, std::span<const VisionInput> images,
                            const float* pixels, float* features, Tracer* tracer) const = 0;

  // A new sequence's family state (SequenceState), or null when the family keeps none.
  virtual std::unique_ptr<SequenceState> NewState() const { return nullptr; }

  // x[ids.size(), H] = input embeddings of `ids`, image-token rows taking the feature rows in
  // order. Errors: an id outside the vocabulary, image token count != feature_rows.
  virtual Status Embed(const Exec& ex, std::span<const int32_t> ids, const float* features,
                       int64_t feature_rows, float* x, Tracer* tracer) const = 0;

  // Runs every decoder layer on x[batch.rows, H] in place (K/V appended to each sequence's
  // cache) and leaves the final-normed hidden states in x.
  void Forward(const Exec& ex, const Batch& batch, float* x, Tracer* tracer) const {
    ForwardLayers(ex, batch, x, tracer, 0, static_cast<int>(spec().layers.size()));
  }

  // Decoder layers [begin, end) of Forward on x in place; end == spec().layers.size() also
  // applies the final norm. Forward in pieces (a chunked prefill: a few layers per scheduler
  // step) computes exactly what one Forward computes: each layer reads only x and its own
  // K/V. REQUIRES: 0 <= begin <= end <= spec().layers.size().
  virtual void ForwardLayers(const Exec& ex, const Batch& batch, float* x, Tracer* tracer,
                             int begin, int end) const = 0;

  // logits[rows, vocab_size] = output projection of hidden[rows, H].
  virtual void Logits(const Exec& ex, const float* hidden, int64_t rows, float* logits) const = 0;

  // Every weight as loaded, in module order, under its GGUF name (`ocular quantize`): a
  // matrix (`matrix` set) or a float vector/table (`vector` set). A tied output projection
  // is visited once, as the embedding.
  using WeightVisitor = std::function<Status(const std::string& gguf_name, const Shape& shape,
                                             const Matrix* matrix, const TensorView* vector)>;
  virtual Status ForEachWeight(const WeightVisitor& fn) const = 0;
};

}  // namespace ocular
