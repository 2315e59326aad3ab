// What quantization costs on any model: the unquantized model and a quantized GGUF of it, both
// with f32 activations, on one image and prompt; the reference decodes greedily, then both are
// teacher-forced on its tokens. Prints top-1 agreement and KL(ref || quant) of the next-token
// distributions over every prompt and decode position (docs/quantization.md).
//   build/bench/quant_quality REF_DIR QUANT.gguf IMAGE [PROMPT] [DECODE_TOKENS]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/file_io.h"
#include "core/file_set.h"
#include "image/image.h"
#include "image/preprocess.h"
#include "models/config.h"
#include "models/paligemma/processor.h"
#include "support/agreement.h"
#include "support/harness.h"

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
  auto ref = OrDie(testing_support::Harness::Load(ref_dir, &f32));
  auto q = OrDie(testing_support::Harness::Load(quant, &f32));
  DirectoryFiles files(ref_dir);
  auto processor = OrDie(paligemma::PaliGemmaProcessor::Load(files, ref->model->config()));
  auto pp = OrDie(LoadPreprocessConfig(ref_dir + "/preprocessor_config.json"));
  Tensor chw = Preprocess(OrDie(LoadImage(image)), pp);
  Tensor pixels(Shape{1, chw.shape[0], chw.shape[1], chw.shape[2]});
  pixels.data = chw.data;
  const Prompt prompt = OrDie(processor->BuildPrompt(1, text, {}));

  GenerationRequest req;
  req.ids = prompt.ids;
  req.pixel_values = &pixels;
  req.max_new_tokens = decode;
  const GenerationOutput out = OrDie(ref->Generate(req));
  const TensorView pv = pixels.view();
  const std::vector<float> a = testing_support::TeacherForcedLogits(*ref, prompt.ids, out.generated, &pv);
  const std::vector<float> b = testing_support::TeacherForcedLogits(*q, prompt.ids, out.generated, &pv);
  const int64_t V = ref->model->spec().vocab_size;
  testing_support::Agreement all, after_image;
  all.Add(a, b, V);
  after_image.Add(a, b, V, static_cast<size_t>(ref->model->spec().image_tokens));
  std::printf("{\"positions\": %d, \"top1\": %.4f, \"mean_kl\": %.3e, \"max_kl\": %.3e, "
              "\"text_positions\": %d, \"text_top1\": %.4f, \"text_mean_kl\": %.3e}\n",
              all.positions, all.top1_rate(), all.mean_kl(), all.kl_max, after_image.positions,
              after_image.top1_rate(), after_image.mean_kl());
  return 0;
}
