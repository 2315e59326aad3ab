// ocular diff A B: per-tap comparison of two activation dumps; names the first divergence.
#include <iostream>
#include <memory>

#include "commands.h"
#include "io/safetensors.h"
#include "runtime/parity.h"

namespace ocular::cli {
namespace {

// Whether a dump's input_ids are a chat template's turn: `ocular trace --chat` writes
// "chat": "1"; trace_hf.py --chat and the goldens' chat cases keep the rendered "chat_text".
bool IsChatDump(const SafetensorsFile& f) {
  const auto& meta = f.metadata();
  auto chat = meta.find("chat");
  return meta.count("chat_text") > 0 || (chat != meta.end() && chat->second == "1");
}

}  // namespace

void AddDiff(CLI::App& app, int* rc) {
  auto* cmd =
      app.add_subcommand("diff", "compare two activation dumps (A under test, B reference)");
  auto a = std::make_shared<std::string>();
  auto b = std::make_shared<std::string>();
  auto tol = std::make_shared<double>(1e-4);
  cmd->add_option("a", *a, "dump under test (e.g. from ocular trace)")->required();
  cmd->add_option("b", *b, "reference dump (e.g. from tools/reference/trace_hf.py)")->required();
  cmd->add_option("--tol", *tol, "relative error tolerance per tap")->check(FiniteRange(0.0, 1e30));
  cmd->callback([=] {
    auto fa = SafetensorsFile::Open(*a);
    if (!fa.ok()) {
      *rc = Fail(fa.status());
      return;
    }
    auto fb = SafetensorsFile::Open(*b);
    if (!fb.ok()) {
      *rc = Fail(fb.status());
      return;
    }
    DiffReport r = DiffDumps(*fa, *fb, *tol);
    if (r.rows.empty()) {
      // Nothing compared is not "within tolerance": these are not two dumps of the same run.
      *rc = Fail(Error(StatusCode::kInvalidArgument, "diff", *a, " and ", *b,
                       " have no tap in common (", r.only_a.size(), " and ", r.only_b.size(),
                       " taps); nothing was compared"));
      return;
    }
    std::cout << FormatDiffReport(r, *tol);
    if (r.first_over >= 0 && r.rows[r.first_over].name == "input_ids" &&
        IsChatDump(*fa) != IsChatDump(*fb)) {
      std::cout << "HINT: " << (IsChatDump(*fa) ? "A" : "B")
                << " is a chat turn (trace --chat / trace_hf.py --chat) and "
                << (IsChatDump(*fa) ? "B" : "A") << " a raw prompt; trace both the same way\n";
    }
    *rc = r.first_over >= 0 ? 1 : 0;
  });
}

}  // namespace ocular::cli
