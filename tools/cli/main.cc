#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <new>
#include <string>

#include "commands.h"

namespace ocular::cli {

int ExitCode(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
      return 0;
    case StatusCode::kInvalidArgument:
      return 2;
    case StatusCode::kNotFound:
    case StatusCode::kIoError:
      return 3;
    case StatusCode::kDataLoss:
      return 4;
    case StatusCode::kUnimplemented:
      return 5;
    case StatusCode::kResourceExhausted:
      return 6;
    case StatusCode::kInternal:
      return 1;
  }
  return 1;
}

int Fail(const Status& s) {
  std::fflush(stdout);  // what was printed so far comes before the error
  std::fprintf(stderr, "error: %s\n", s.message().c_str());
  return ExitCode(s);
}

CLI::Validator FiniteRange(double lo, double hi, bool describe) {
  const std::string range =
      "[" + CLI::detail::to_string(lo) + " - " + CLI::detail::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v)) return "Value " + text + " is not a number";
        if (!std::isfinite(v) || v < lo || v > hi) {
          return "Value " + text + " not in range " + range;
        }
        return std::string();
      },
      describe ? "FLOAT in " + range : std::string());
}

CLI::Validator IntRange(int64_t lo, int64_t hi) {
  const std::string range = "[" + std::to_string(lo) + " - " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        const size_t digits = !text.empty() && text[0] == '-' ? 1 : 0;
        if (text.size() == digits ||
            text.find_first_not_of("0123456789", digits) != std::string::npos) {
          return "Value " + text + " is not an integer";
        }
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (errno == ERANGE || v < lo || v > hi) return "Value " + text + " not in range " + range;
        return std::string();
      },
      "INT in " + range);
}

CLI::Validator Uint64Text() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        errno = 0;
        if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos ||
            (std::strtoull(text.c_str(), nullptr, 10), errno == ERANGE)) {
          return "Value " + text + " is not an integer in [0, 18446744073709551615]";
        }
        return std::string();
      },
      "UINT64");
}

Status CheckOutputIsNotAnInput(const char* flag, const std::string& out,
                               const std::string& model_dir,
                               const std::vector<std::string>& inputs) {
  // The folder must exist now: finding out after minutes of generation loses the work.
  const std::filesystem::path parent = std::filesystem::path(out).parent_path();
  std::error_code ec;
  if (!parent.empty() && !std::filesystem::is_directory(parent, ec)) {
    return Error(StatusCode::kNotFound, "cli", flag, " ", out, ": directory ", parent.string(),
                 " does not exist");
  }
  struct stat out_st {};
  if (::stat(out.c_str(), &out_st) != 0) return Status::Ok();  // a new file reads nothing
  if (S_ISDIR(out_st.st_mode)) {
    return Error(StatusCode::kInvalidArgument, "cli", flag, " ", out, " is a directory");
  }
  auto same = [&](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && st.st_dev == out_st.st_dev &&
           st.st_ino == out_st.st_ino;
  };
  for (const std::string& in : inputs) {
    if (same(in)) {
      return Error(StatusCode::kInvalidArgument, "cli", flag, " ", out, " is the input ", in,
                   "; refusing to overwrite it");
    }
  }
  if (same(model_dir)) {  // a GGUF model is one file
    return Error(StatusCode::kInvalidArgument, "cli", flag, " ", out, " is the model ", model_dir,
                 "; refusing to overwrite it");
  }
  for (const auto& entry : std::filesystem::directory_iterator(model_dir, ec)) {
    if (same(entry.path().string())) {
      return Error(StatusCode::kInvalidArgument, "cli", flag, " ", out, " is ",
                   entry.path().string(),
                   ", a file of the model being read; refusing to "
                   "overwrite it");
    }
  }
  return Status::Ok();
}

namespace {

// Upper bounds for options: far above any real use, low enough that nothing derived from them
// can exhaust the machine before a clear error (a thread per core, RGB buffers of max pixels).
constexpr int kMaxThreads = 1024;
constexpr int64_t kMaxPixelsLimit = int64_t{1} << 28;  // 268M pixels: 805 MB as RGB
constexpr int kMaxTokens = 1 << 20;

}  // namespace

void TightenOptions(CLI::App& app) {
  for (CLI::App* cmd : app.get_subcommands(nullptr)) {
    auto option = [&](const char* name) { return cmd->get_option_no_throw(name); };
    if (CLI::Option* o = option("--threads")) {
      o->check(IntRange(0, kMaxThreads))
          ->description("worker threads; 0 = $OCULAR_THREADS, else the physical cores");
    }
    if (CLI::Option* o = option("--max-image-pixels")) {
      o->check(IntRange(1, kMaxPixelsLimit))
          ->description("refuse images with more pixels than this before decoding them (exit 6)");
    }
    if (CLI::Option* o = option("--min-pixels")) {
      o->check(IntRange(1, kMaxPixelsLimit))
          ->description(
              "Qwen-VL: the image processor's min_pixels (smart_resize scales smaller images "
              "up to it) in place of preprocessor_config.json's; other families refuse it");
    }
    if (CLI::Option* o = option("--max-pixels")) {
      o->check(IntRange(1, kMaxPixelsLimit))
          ->description(
              "Qwen-VL: the image processor's max_pixels (smart_resize scales larger images "
              "down to it; the workspace is planned for it) in place of "
              "preprocessor_config.json's; other families refuse it");
    }
    if (CLI::Option* o = option("--exif-rotate")) {
      o->description(
          "apply EXIF orientation (JPEG, PNG, WebP) as transformers' load_image does; off = "
          "pixels as stored, like Image.open");
    }
    if (CLI::Option* o = option("--max-tokens")) o->check(IntRange(0, kMaxTokens));
    for (const char* name : {"--prompt-tokens", "--decode-tokens"}) {
      if (CLI::Option* o = option(name)) o->check(IntRange(1, kMaxTokens));
    }
    if (CLI::Option* o = option("--seed")) o->check(Uint64Text());
    // CLI::Range and NonNegativeNumber let NaN through: these must be finite.
    if (CLI::Option* o = option("--temperature")) o->check(FiniteRange(0.0, 100.0));
    if (CLI::Option* o = option("--top-p")) o->check(FiniteRange(0.0, 1.0, /*describe=*/false));
    if (CLI::Option* o = option("--roofline-gbs")) {
      o->check(FiniteRange(0.0, 1e6))
          ->description(
              "memory bandwidth (GB/s) to compare decode against; 0 = measure it here with a "
              "simple read probe, which may underestimate what the hardware sustains");
    }
  }
}

}  // namespace ocular::cli

int main(int argc, char** argv) {
  CLI::App app{"ocular: vision-language models on your CPU, identical to the reference"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ocular 0.1");
  // Subcommands inherit this: every option's --help line shows its default.
  app.option_defaults()->always_capture_default();
  app.footer(
      "Environment:\n"
      "  OCULAR_ISA=amx|avx512|avx2|scalar\n"
      "                                 force the kernel ISA (default: the best the CPU and OS\n"
      "                                 support)\n"
      "  OCULAR_THREADS=N               worker threads when --threads is 0 (default: physical\n"
      "                                 cores)\n"
      "  OCULAR_GGUF_DEQUANTIZE=1       run a GGUF's quantized matrices in f32 (parity checks)\n"
      "  OCULAR_MMAP_WEIGHTS=1          read the weights through the file mapping (no copy on\n"
      "                                 2 MiB pages, no repacking: less memory held, slower)\n"
      "Exit codes: 0 ok, 1 runtime failure (diff: over tolerance), 2 bad argument or\n"
      "undecodable input, 3 file not found or unreadable, 4 corrupt file, 5 unsupported model\n"
      "or format, 6 over a limit (image pixels, context length, file size).\n"
      "Run `ocular COMMAND --help` for a command's options.");
  int rc = 0;
  ocular::cli::AddRun(app, &rc);
  ocular::cli::AddTrace(app, &rc);
  ocular::cli::AddDiff(app, &rc);
  ocular::cli::AddTokenize(app, &rc);
  ocular::cli::AddBench(app, &rc);
  ocular::cli::AddEval(app, &rc);
  ocular::cli::AddQuantize(app, &rc);
  ocular::cli::AddServe(app, &rc);
  ocular::cli::TightenOptions(app);
  // CLI11 answers an unknown first word with "A subcommand is required": name it instead.
  std::string names;
  bool known = false;
  for (const CLI::App* cmd : app.get_subcommands({})) {
    names += (names.empty() ? "" : ", ") + cmd->get_name();
    known = known || (argc > 1 && cmd->check_name(argv[1]));
  }
  if (argc > 1 && argv[1][0] != '-' && !known) {
    std::fprintf(stderr, "error: unknown command '%s' (the commands: %s)\n", argv[1],
                 names.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const std::bad_alloc&) {
    // Last line of defence: sizes are validated before allocating, so reaching this is a bug,
    // but the user gets a message and the "over a limit" code rather than an abort.
    std::fflush(stdout);
    std::fprintf(stderr,
                 "error: out of memory (HINT: a smaller model, image or --max-image-pixels)\n");
    return 6;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: internal error (a bug, please report it): %s\n", e.what());
    return 1;
  }
  return rc;
}
