// ocular trace / tokenize: look inside a run (activations, the prompt's tokens).
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "ocular/engine.h"
#include "options.h"

namespace ocular::cli {

void AddTrace(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("trace", "dump every named activation to a safetensors file");
  auto m = std::make_shared<ModelArgs>();
  auto images = std::make_shared<std::vector<std::string>>();
  auto prompt = std::make_shared<std::string>();
  auto gen = std::make_shared<GenerateOptions>();
  auto out = std::make_shared<std::string>();
  gen->max_tokens = 16;
  AddModelArgs(cmd, m.get(), kCompute | kImages | kResize);
  cmd->add_option("--image,-i", *images, "image file, or - for stdin (repeatable)")
      ->default_str("none");
  cmd->add_option("--prompt,-p", *prompt, "task prompt, e.g. \"caption en\"")->required();
  cmd->add_option("--max-tokens", gen->max_tokens, "greedy decode steps to record");
  cmd->add_flag("--separate-newline", gen->separate_newline,
                "tokenize the prompt's trailing \\n separately (big_vision style)");
  AddPanAndScanFlags(cmd, gen.get());
  cmd->add_flag("--chat", gen->chat,
                "the prompt as one user turn of the chat template (input_ids as run --chat "
                "builds them)");
  cmd->add_option("--date", gen->date, "with --chat: the date a chat template writes")
      ->default_str("today");
  AddChatTemplateOption(cmd, gen.get());
  cmd->add_option("--out,-o", *out, "output .safetensors")->required();
  cmd->callback([=] {
    // The dump must not overwrite what is being read: the checkpoint or an input image.
    std::vector<std::string> read = *images;
    if (!m->mmproj.empty()) read.push_back(m->mmproj);
    if (Status s = CheckOutputIsNotAnInput("--out", *out, m->model, read); !s.ok()) {
      *rc = Fail(s);
      return;
    }
    StatusOr<std::vector<ImageInput>> inputs = ReadImages(*images);
    if (!inputs.ok()) {
      *rc = Fail(inputs.status());
      return;
    }
    auto engine = LoadEngine(*m);
    if (!engine.ok()) {
      *rc = Fail(engine.status());
      return;
    }
    auto r = (*engine)->Trace(*inputs, *prompt, *gen, *out);
    if (!r.ok()) {
      *rc = Fail(r.status());
      return;
    }
    std::cout << "wrote " << *out << " (" << r->prompt_ids.size() << " prompt tokens, "
              << r->output_ids.size() << " generated)\n";
    *rc = 0;
  });
}

namespace {

std::string Quoted(const std::string& piece) {
  return nlohmann::json(piece).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The prompt `run` builds, token by token; a run of one id (the image tokens) on one line.
int PrintPrompt(const Engine& engine, int n_images, const std::string& prompt,
                const GenerateOptions& gen) {
  auto p = engine.BuildPrompt(n_images, prompt, gen);
  if (!p.ok()) return Fail(p.status());
  const ModelInfo info = engine.Info();
  const size_t n = p->ids.size();
  std::cout << "# " << n << " tokens: " << n_images << " image(s) x " << info.image_tokens
            << " image tokens, BOS, the prompt, the separator; the first " << p->prefix_len
            << " attend bidirectionally (the prefix)\n";
  std::cout << "# position\tid\tpiece\n";
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && p->ids[j] == p->ids[i]) ++j;
    const std::string piece = Quoted(engine.TokenPiece(p->ids[i]));
    if (j - i > 1) {
      std::cout << i << "-" << j - 1 << "\t" << p->ids[i] << "\t" << piece << " x" << j - i << "\n";
    } else {
      std::cout << i << "\t" << p->ids[i] << "\t" << piece << "\n";
    }
    i = j;
  }
  return 0;
}

}  // namespace

void AddTokenize(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand(
      "tokenize", "print the tokens of a text, or (--prompt) of the whole prompt run builds");
  auto m = std::make_shared<ModelArgs>();
  auto text = std::make_shared<std::string>();
  auto prompt = std::make_shared<std::string>();
  auto images = std::make_shared<std::vector<std::string>>();
  auto gen = std::make_shared<GenerateOptions>();
  AddModelArgs(cmd, m.get(), kModelOnly);
  auto* text_opt = cmd->add_option("text", *text, "text to tokenize alone (no BOS is added)");
  auto* prompt_opt =
      cmd->add_option("--prompt,-p", *prompt,
                      "show the full prompt `run` builds for this task prompt: image tokens, "
                      "BOS, the prompt, the \\n separator")
          ->excludes(text_opt);
  cmd->add_option("--image,-i", *images,
                  "with --prompt: one image token block per -i (the files are not read)")
      ->default_str("none")
      ->needs(prompt_opt);
  cmd->add_flag("--separate-newline", gen->separate_newline,
                "with --prompt: tokenize the trailing \\n separately (big_vision style)")
      ->needs(prompt_opt);
  cmd->add_flag("--chat", gen->chat,
                "with --prompt: the prompt as one user turn of the checkpoint's chat template, "
                "as run --chat sends its first turn")
      ->needs(prompt_opt);
  cmd->add_option("--date", gen->date, "with --chat: the date a chat template writes")
      ->default_str("today")
      ->needs(prompt_opt);
  AddChatTemplateOption(cmd, gen.get());
  cmd->callback([=] {
    if (text_opt->count() == 0 && prompt_opt->count() == 0) {
      *rc = Fail(Error(StatusCode::kInvalidArgument, "cli", "give a text or --prompt"));
      return;
    }
    auto engine = LoadEngine(*m);
    if (!engine.ok()) {
      *rc = Fail(engine.status());
      return;
    }
    if (prompt_opt->count() > 0) {
      *rc = PrintPrompt(**engine, static_cast<int>(images->size()), *prompt, *gen);
      return;
    }
    auto ids = (*engine)->Tokenize(*text);
    if (!ids.ok()) {
      *rc = Fail(ids.status());
      return;
    }
    for (int32_t id : *ids) std::cout << id << "\t" << Quoted((*engine)->TokenPiece(id)) << "\n";
    *rc = 0;
  });
}

}  // namespace ocular::cli
