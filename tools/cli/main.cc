#include <cstdio>

#include "commands.h"

namespace ocular::cli {

int ExitCode(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return 0;
    case StatusCode::kInvalidArgument: return 2;
    case StatusCode::kNotFound:
    case StatusCode::kIoError: return 3;
    case StatusCode::kDataLoss: return 4;
    case StatusCode::kUnimplemented: return 5;
    case StatusCode::kResourceExhausted: return 6;
    case StatusCode::kInternal: return 1;
  }
  return 1;
}

int Fail(const Status& s) {
  std::fprintf(stderr, "error: %s\n", s.message().c_str());
  return ExitCode(s);
}

}  // namespace ocular::cli

int main(int argc, char** argv) {
  CLI::App app{"ocular: vision-language models on your CPU, identical to the reference"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ocular 0.1");
  int rc = 0;
  ocular::cli::AddRun(app, &rc);
  ocular::cli::AddTrace(app, &rc);
  ocular::cli::AddDiff(app, &rc);
  ocular::cli::AddTokenize(app, &rc);
  ocular::cli::AddBench(app, &rc);
  ocular::cli::AddEval(app, &rc);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return rc;
}
