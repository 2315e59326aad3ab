// ocular run: one prompt, or (--chat) prompts read line by line with the model loaded once.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "ocular/engine.h"
#include "ocular/tasks.h"
#include "options.h"
#include "progress.h"
#include "run_output.h"

namespace ocular::cli {

namespace {

struct RunArgs {
  ModelArgs model;
  std::vector<std::string> images;
  std::string prompt;
  GenerateOptions gen;
  std::string draw;
  std::string seg_model;  // mask model for <seg> codes ("": looked up in the model directory)
  bool json = false;
  bool json_stream = false;
  bool chat = false;
  bool quiet = false;
  bool progress = false;
  bool stats = false;
  std::string json_schema;  // --json-schema: a file or the schema's text
};

// --json-schema's value: the schema itself when it looks like JSON, else a file to read.
// Then the structured-output options are compiled, before the model loads.
Status ResolveStructuredOutput(RunArgs* a) {
  if (!a->json_schema.empty()) {
    const size_t first = a->json_schema.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && a->json_schema[first] == '{') {
      a->gen.json_schema = a->json_schema;
    } else {
      std::ifstream in(a->json_schema, std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      if (!in || text.str().empty()) {
        return Error(StatusCode::kInvalidArgument, "cli", "--json-schema ", a->json_schema,
                     ": not a schema ('{...}') and not a readable, non-empty file");
      }
      a->gen.json_schema = text.str();
    }
  }
  return CheckStructuredOutput(a->gen);
}

constexpr char kChatHelp[] =
    "Type a prompt (e.g. \"caption en\", \"detect cat\") and press Enter. Commands:\n"
    "  /image PATH...  use these images for the next prompts (/image alone: text-only);\n"
    "                  with a chat template: attach them to the next turn\n"
    "  /reset          forget the conversation so far (chat template)\n"
    "  /help           this text\n"
    "  /quit           leave (so does end of input)\n";

// Options that cannot work together, found before anything is loaded.
Status CheckRunArgs(const RunArgs& a, bool prompt_given) {
  auto bad = [](const char* what) { return Error(StatusCode::kInvalidArgument, "cli", what); };
  if (!a.chat && !prompt_given)
    return bad("--prompt is required (or --chat to read prompts from stdin)");
  if (a.chat && ReadsStdin(a.images)) {
    return bad(
        "--chat reads prompts from stdin, so -i - cannot read an image from it; use /image PATH");
  }
  if (a.chat && !a.draw.empty()) return bad("--draw works with one prompt, not --chat");
  if (!a.draw.empty()) {
    if (a.images.empty()) return bad("--draw needs an --image");
    if (a.images[0] == "-") return bad("--draw needs the first --image to be a file, not stdin");
    // Checked before generating, not after: a bad path must not cost the run.
    std::vector<std::string> read = a.images;
    if (!a.model.mmproj.empty()) read.push_back(a.model.mmproj);
    return CheckOutputIsNotAnInput("--draw", a.draw, a.model.model, read);
  }
  return Status::Ok();
}

// Runs one prompt and writes its output; returns the exit code.
// With `messages`, runs that conversation (Engine::GenerateChat) and, on success, appends the
// answer to it as the assistant's turn; `prompt` is then the last user turn, for the output.
int RunOne(Engine& engine, const RunArgs& a, const RunContext& ctx,
           const std::vector<ImageInput>& images, const std::string& prompt, Reporter& reporter,
           std::vector<ChatMessage>* messages = nullptr) {
  GenerateOptions gen = a.gen;
  gen.on_progress = reporter.Callback();
  TokenCallback on_text = nullptr;
  int pieces = 0;
  if (a.json_stream) {
    std::cout << StartEvent(prompt) << std::endl;
    on_text = [&pieces](const std::string& piece) {
      std::cout << TokenEvent(pieces++, piece) << std::endl;
      return true;
    };
  } else if (!a.json) {
    on_text = [&pieces](const std::string& piece) {
      std::cout << piece << std::flush;
      ++pieces;
      return true;
    };
  }
  StatusOr<GenerateResult> r = messages ? engine.GenerateChat(images, *messages, gen, on_text)
                                        : engine.Generate(images, prompt, gen, on_text);
  reporter.Clear();  // the progress line goes before anything else is printed
  if (!r.ok()) {
    if (a.json_stream) std::cout << ErrorEvent(r.status(), ExitCode(r.status())) << std::endl;
    if (!a.json && !a.json_stream && pieces > 0) std::cout << "\n";  // end the partial answer
    return Fail(r.status());
  }
  if (messages) messages->push_back(ChatMessage::Text("assistant", r->text));
  // Boxes from <loc> tokens or Qwen's grounding JSON, in the first image's pixel coordinates
  // (docs/models.md §3, §12).
  std::vector<Detection> boxes;
  if (!r->image_sizes.empty()) {
    StatusOr<GroundingFormat> grounding = LoadGroundingFormat(a.model.model, a.model.resize);
    if (!grounding.ok()) return Fail(grounding.status());
    boxes = ParseGroundedDetections(*grounding, r->text, r->image_sizes[0].width,
                                    r->image_sizes[0].height);
    // <seg> codes → masks (docs/segmentation.md); the mask model is loaded only for them.
    auto warning = AttachMasks(&boxes, a.seg_model, a.model.model, r->image_sizes[0].width,
                               r->image_sizes[0].height);
    if (!warning.ok()) return Fail(warning.status());
    if (!warning->empty()) Note(*warning);
  }
  if (a.json || a.json_stream) {
    auto j = RunJson(ctx, prompt, *r, boxes, PeakRssBytes());
    std::cout << (a.json ? FormatRunJson(j) : DoneEvent(std::move(j))) << std::endl;
  } else {
    std::cout << "\n" << std::flush;
  }
  reporter.Finish(*r);
  if (!a.draw.empty()) {
    if (Status s = DrawDetectionsToPng(a.images[0], boxes, a.draw); !s.ok()) return Fail(s);
    const auto masks = std::count_if(boxes.begin(), boxes.end(),
                                     [](const Detection& d) { return d.mask.has_value(); });
    if (!a.quiet) {
      auto count = [](size_t n, const char* noun) {
        return std::to_string(n) + " " + noun + (n == 1 ? "" : "es");
      };
      Note("wrote " + a.draw + " (" + count(boxes.size(), "box") +
           (masks ? ", " + std::to_string(masks) + (masks == 1 ? " mask)" : " masks)") : ")"));
    }
  }
  return 0;
}

// /image PATH...: the images of the next prompts; returns an exit code (0: set).
int SetChatImages(const std::string& args, std::vector<std::string>* images, bool interactive) {
  std::vector<std::string> paths;
  std::error_code ec;
  if (std::filesystem::is_regular_file(args, ec)) {
    paths.push_back(args);  // one file whose name has spaces
  } else {
    std::istringstream in(args);
    for (std::string p; in >> p;) paths.push_back(p);
  }
  for (const std::string& p : paths) {
    if (p == "-") {
      return Fail(
          Error(StatusCode::kInvalidArgument, "cli", "/image -: stdin carries the prompts"));
    }
    if (!std::filesystem::is_regular_file(p, ec)) {
      return Fail(Error(StatusCode::kNotFound, "cli", "/image ", p, ": no such file"));
    }
  }
  *images = std::move(paths);
  if (interactive) {
    std::string names;
    for (const std::string& p : *images) names += " " + p;
    Note(images->empty() ? "images: none (text-only prompts)" : "images:" + names);
  }
  return 0;
}

// The state of a chat session. With a chat template (ModelInfo::chat_format), turns build one
// conversation: each prompt is a user turn (UserTurn: its images are those set since the
// previous turn), each answer an assistant turn, and the whole conversation is sent each time.
// Without one (PaliGemma), each prompt runs alone with the images last set.
struct ChatSession {
  bool templated = false;
  std::string marker;                       // the model's image marker
  std::vector<std::string> images;          // templated: for the next turn; else: for every prompt
  std::vector<std::string> history_images;  // templated: the images of the earlier turns
  std::vector<ChatMessage> history;

  int Turn(Engine& engine, const RunArgs& a, RunContext ctx, const std::string& line,
           Reporter& reporter) {
    if (!templated) {
      ctx.image_sources = images;
      StatusOr<std::vector<ImageInput>> inputs = ReadImages(images);
      return inputs.ok() ? RunOne(engine, a, ctx, *inputs, line, reporter) : Fail(inputs.status());
    }
    std::vector<std::string> all = history_images;
    all.insert(all.end(), images.begin(), images.end());
    ctx.image_sources = all;
    StatusOr<std::vector<ImageInput>> inputs = ReadImages(all);
    if (!inputs.ok()) return Fail(inputs.status());
    std::vector<ChatMessage> messages = history;
    messages.push_back(UserTurn(line, static_cast<int>(images.size()), marker));
    const int rc = RunOne(engine, a, ctx, *inputs, line, reporter, &messages);
    if (rc == 0) {  // the turn and its answer join the conversation
      history = std::move(messages);
      history_images = std::move(all);
      images.clear();
    }
    return rc;
  }
};

// Reads prompts and commands from stdin until /quit or end of input. Exit code: 0 if every
// prompt and command succeeded, else the code of the last one that failed.
int Chat(Engine& engine, const RunArgs& a, RunContext ctx, Reporter& reporter) {
  const bool interactive = ::isatty(STDIN_FILENO) != 0;
  if (interactive) Note("ocular chat on " + a.model.model + ". /help for commands.");
  ChatSession session;
  session.templated = !ctx.info.chat_format.empty() || !a.gen.chat_template.empty();
  session.marker = ctx.info.image_marker;
  session.images = a.images;
  int rc = 0;
  if (!a.prompt.empty()) rc = session.Turn(engine, a, ctx, a.prompt, reporter);  // -p first
  std::string line;
  while (true) {
    if (interactive) {
      std::fflush(stdout);
      std::fputs("> ", stderr);
      std::fflush(stderr);
    }
    if (!std::getline(std::cin, line)) break;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
      line.pop_back();
    }
    if (line.empty()) continue;
    if (line[0] != '/') {
      if (int code = session.Turn(engine, a, ctx, line, reporter); code != 0) rc = code;
      continue;
    }
    const size_t space = line.find(' ');
    const std::string command = line.substr(0, space);
    const std::string rest = space == std::string::npos ? "" : line.substr(space + 1);
    if (command == "/quit" || command == "/exit") break;
    if (command == "/help") {
      std::cout << kChatHelp << std::flush;
    } else if (command == "/image" || command == "/images") {
      if (int code = SetChatImages(rest, &session.images, interactive); code != 0) rc = code;
    } else if (command == "/reset") {
      session.history.clear();
      session.history_images.clear();
      if (interactive) Note("conversation cleared");
    } else {
      rc = Fail(Error(StatusCode::kInvalidArgument, "cli", "unknown command ", command,
                      " (/help lists them)"));
    }
  }
  return rc;
}

// Decoding: limits, stop strings, sampling, constrained output, prompt tokenization.
void AddGenerationOptions(CLI::App* cmd, RunArgs* a) {
  cmd->add_option("--max-tokens", a->gen.max_tokens, "generation limit");
  cmd->add_option("--stop", a->gen.stop,
                  "stop when the answer contains this string (repeatable; cut before it; "
                  "finish_reason \"stop\")")
      ->default_str("none");
  cmd->add_option("--temperature", a->gen.temperature, "0 = greedy");
  cmd->add_option("--top-k", a->gen.top_k, "sample among the k most likely (0 = off)")
      ->check(IntRange(0, 1 << 30));
  cmd->add_option("--top-p", a->gen.top_p, "nucleus sampling mass (1 = off)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--seed", a->gen.seed, "sampling seed");
  auto* schema = cmd->add_option("--json-schema", a->json_schema,
                                 "constrain the answer to JSON this JSON Schema accepts: a file, "
                                 "or the schema itself (docs/structured-output.md)");
  auto* regex = cmd->add_option("--regex", a->gen.regex,
                                "constrain the answer to text this regular expression matches");
  cmd->add_flag("--json-object", a->gen.json_object, "constrain the answer to a JSON object")
      ->excludes(schema)
      ->excludes(regex);
  schema->excludes(regex);
  cmd->add_flag("--separate-newline", a->gen.separate_newline,
                "tokenize the prompt's trailing \\n separately (big_vision style)");
  AddPanAndScanFlags(cmd, &a->gen);
}

// What is written besides the answer: the drawing, the JSON forms, progress and summary.
void AddOutputOptions(CLI::App* cmd, RunArgs* a) {
  cmd->add_option("--draw", a->draw,
                  "write the first image with the detected boxes and masks to this PNG")
      ->default_str("off");
  cmd->add_option("--seg-model", a->seg_model,
                  "mask model for `segment` answers: vae-oid.npz or a safetensors copy")
      ->default_str("vae-oid.npz / vae.safetensors in the model directory");
  auto* json = cmd->add_flag("--json", a->json,
                             "print the result as one JSON object (schema ocular.run/1, "
                             "docs/cli.md)");
  cmd->add_flag("--json-stream", a->json_stream,
                "print NDJSON: a start event, one event per decoded piece, then the result")
      ->excludes(json);
  cmd->add_flag("--quiet,-q", a->quiet, "no progress and no summary, even on a terminal");
  cmd->add_flag("--progress", a->progress,
                "show progress on stderr even when it is not a terminal (one line per stage)");
  cmd->add_flag("--stats", a->stats,
                "print the summary line (tokens, tok/s, image ms, peak RSS) on stderr even when "
                "it is not a terminal");
}

// `ocular run` once its flags are parsed: checks them, reads the images, loads the model and
// answers (once, or --chat, line by line). Returns the exit code.
int RunCommand(const std::shared_ptr<RunArgs>& a, bool has_prompt) {
  if (Status s = CheckRunArgs(*a, has_prompt); !s.ok()) {
    return Fail(s);
  }
  if (Status s = ResolveStructuredOutput(a.get()); !s.ok()) {
    return Fail(s);
  }
  // Images given on stdin are read now, before the model, so a bad pipe costs no load.
  StatusOr<std::vector<ImageInput>> images =
      ReadImages(a->chat ? std::vector<std::string>{} : a->images);
  if (!images.ok()) {
    return Fail(images.status());
  }
  // Streamed text and stream events show the decode progress themselves.
  Reporter reporter(ChooseReports(a->quiet, a->progress, a->stats, !a->json));
  reporter.BeginLoad();
  auto engine = LoadEngine(a->model);
  reporter.EndLoad();
  if (!engine.ok()) {
    return Fail(engine.status());
  }
  RunContext ctx{a->model.model, (*engine)->Info(), reporter.load_ms(), a->images};
  return a->chat ? Chat(**engine, *a, ctx, reporter)
                 : RunOne(**engine, *a, ctx, *images, a->prompt, reporter);
}

}  // namespace

void AddRun(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("run", "answer a prompt about an image (or, --chat, many)");
  auto a = std::make_shared<RunArgs>();
  AddModelArgs(cmd, &a->model, kCompute | kImages | kResize);
  cmd->add_option("--image,-i", a->images,
                  "image file, or - for stdin (repeatable; none = text-only)")
      ->default_str("none");
  auto* prompt = cmd->add_option("--prompt,-p", a->prompt, "task prompt, e.g. \"caption en\"");
  cmd->add_flag(
      "--chat", a->chat,
      "load the model once, then read prompts from stdin line by line (/image PATH, "
      "/reset, /help, /quit; --prompt runs first); with a chat template (the checkpoint's, "
      "or --chat-template) the lines are the user turns of one conversation; works piped");
  cmd->add_option("--date", a->gen.date,
                  "the date a chat template writes (Llama 3.2 Vision, text-only chats: "
                  "\"Today Date: 26 Jul 2024\")")
      ->default_str("today");
  AddChatTemplateOption(cmd, &a->gen);
  AddGenerationOptions(cmd, a.get());
  AddOutputOptions(cmd, a.get());
  cmd->footer(
      "On a terminal, stderr shows progress for work over ~1 s and a summary after each\n"
      "answer; elsewhere only with --progress / --stats. Output formats: docs/cli.md.\n\n" +
      cmd->get_footer());
  cmd->callback([=] { *rc = RunCommand(a, prompt->count() > 0); });
}

}  // namespace ocular::cli
