// The `ocular` command-line tool: one function per subcommand, using only the public API
// (plus the parity module for `diff`).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "ocular/status.h"

namespace ocular::cli {

// Exit codes (documented in README.md).
int ExitCode(const Status& s);
// Prints "error: <message>" (and a hint for common mistakes) to stderr; returns ExitCode(s).
int Fail(const Status& s);

// A CLI11 check: a finite number in [lo, hi] (CLI::Range lets NaN through). `describe`: show
// the range in --help (off when another check on the option already shows it).
CLI::Validator FiniteRange(double lo, double hi, bool describe = true);

// A CLI11 check: an integer (decimal digits, optional '-') in [lo, hi]. Unlike CLI::Range it
// names a non-number as such ("abc is not an integer") and refuses "2e64" and "1.5".
CLI::Validator IntRange(int64_t lo, int64_t hi);
// A CLI11 check for a uint64 option (--seed): decimal digits only, at most 2^64 - 1 (CLI11
// itself wraps "-1" to 2^64 - 1).
CLI::Validator Uint64Text();

// Checks an output path given with `flag` before any work is done: its folder exists
// (kNotFound), and it is not a directory nor a file the command reads — a file in `model_dir`
// (the checkpoint, its configs) or one of `inputs` (kInvalidArgument). Device and inode are
// compared, so links and other spellings of the same file are caught.
Status CheckOutputIsNotAnInput(const char* flag, const std::string& out,
                               const std::string& model_dir,
                               const std::vector<std::string>& inputs);

// Bounds, finiteness checks and help text for the options the subcommands define, applied by
// option name after every subcommand is registered (each command defines only the options that
// apply to it: options.h).
void TightenOptions(CLI::App& app);

// Each registers a subcommand whose callback stores the process exit code in *rc.
void AddRun(CLI::App& app, int* rc);
void AddTrace(CLI::App& app, int* rc);
void AddDiff(CLI::App& app, int* rc);
void AddTokenize(CLI::App& app, int* rc);
void AddBench(CLI::App& app, int* rc);
void AddEval(CLI::App& app, int* rc);
void AddQuantize(CLI::App& app, int* rc);
void AddServe(CLI::App& app, int* rc);  // tools/server/serve_command.cc

}  // namespace ocular::cli
