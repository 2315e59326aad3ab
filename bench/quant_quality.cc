// What quantization costs on any model: the unquantized model and a quantized GGUF of it, both
// with f32 activations, on one image and prompt; the reference decodes greedily, then both are
// teacher-forced on its tokens. Prints top-1 agreement and KL(ref || quant) of the next-token
// distributions over every prompt and decode position, and over the positions after the last
// image token (docs/quantization.md). Any family: PaliGemma ("caption en"), Gemma 3, Llama 3.2
// Vision ("<|image|>Describe the image.").
//   build/bench/quant_quality REF_DIR QUANT.gguf IMAGE [PROMPT] [DECODE_TOKENS]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "image/image.h"
#include "runtime/generator.h"
#include "support/agreement.h"
#include "support/any_model.h"

using namespace ocular;

namespace {

template <typename T>
T OrDie(StatusOr<T> v) {
  if (!v.ok()) {
    std::fprintf(stderr, "error: %s\n", v.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*v);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s REF_DIR QUANT.gguf IMAGE [PROMPT] [DECODE_TOKENS]\n", argv[0]);
    return 2;
  }
  const std::string ref_dir = argv[1], quant = argv[2], image = argv[3];
  const std::string text = argc > 4 ? argv[4] : "caption en";
  const int decode = argc > 5 ? std::atoi(argv[5]) : 32;
  const Precision f32 = Precision::kF32;
  auto ref = OrDie(testing_support::AnyModel::Load(ref_dir, &f32, 1));
  auto q = OrDie(testing_support::AnyModel::Load(quant, &f32, 1));
  Prompt vision;
  const Status added =
      ref->processor->AddImage(OrDie(LoadImage(image)), ImageOptions{}, 0, &vision);
  if (!added.ok()) OrDie(StatusOr<int>(added));
  const auto shared = std::make_shared<const Prompt>(
      OrDie(ref->processor->MakePrompt(std::move(vision), 1, text, nullptr, {})));
  const Prompt& prompt = *shared;

  GenerationRequest req;
  req.prompt = shared;
  req.max_new_tokens = decode;
  const GenerationOutput out = OrDie(Generate(*ref->runner, *ref->kv, req, nullptr));
  const std::vector<float> a = testing_support::TeacherForced(*ref, prompt, out.generated);
  const std::vector<float> b = testing_support::TeacherForced(*q, prompt, out.generated);
  const int64_t V = ref->model->spec().vocab_size;
  size_t first_text = 0;  // the position after the last image token
  for (size_t i = 0; i < prompt.ids.size(); ++i) {
    if (prompt.ids[i] == ref->model->spec().image_token_id) first_text = i + 1;
  }
  testing_support::Agreement all, after_image;
  all.Add(a, b, V);
  after_image.Add(a, b, V, first_text);
  std::printf(
      "{\"positions\": %d, \"top1\": %.4f, \"mean_kl\": %.3e, \"max_kl\": %.3e, "
      "\"text_positions\": %d, \"text_top1\": %.4f, \"text_mean_kl\": %.3e}\n",
      all.positions, all.top1_rate(), all.mean_kl(), all.kl_max, after_image.positions,
      after_image.top1_rate(), after_image.mean_kl());
  return 0;
}
