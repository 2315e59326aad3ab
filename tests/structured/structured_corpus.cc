// Structured output over a schema corpus, through the public API, many requests at once (so
// each grammar state lives in a batch with others): writes one JSON line per answer for
// validate.py, which checks them with Python's `jsonschema` and `re`.
//
//   structured_corpus MODEL_DIR IMAGE|- SCHEMAS.jsonl UNSUPPORTED.jsonl MAX_TOKENS OUT.jsonl
//
// Per schema: greedy and two seeded temperature-1 samples. Per model: the unconstrained greedy
// answer, and the answers under regexes it may already match (validate.py checks that the
// constrained answer is then the same). Unsupported schemas: the error message.
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "ocular/engine.h"

namespace {

using json = nlohmann::json;

struct Job {
  json record;  // what validate.py needs besides the answer
  ocular::GenerateOptions options;
};

std::vector<json> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> out;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(json::parse(line));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::cerr << "usage: structured_corpus MODEL_DIR IMAGE|- SCHEMAS UNSUPPORTED MAX_TOKENS OUT\n";
    return 2;
  }
  const std::string model = argv[1], image = argv[2];
  const int max_tokens = std::stoi(argv[5]);
  auto engine = ocular::Engine::Load(model, {});
  if (!engine.ok()) {
    std::cerr << engine.status().message() << "\n";
    return 1;
  }
  const std::vector<ocular::ImageInput> images =
      image == "-" ? std::vector<ocular::ImageInput>{} : std::vector<ocular::ImageInput>{image};
  const std::string prompt = image == "-" ? "Describe a red square." : "caption en";
  ocular::GenerateOptions base;
  base.max_tokens = max_tokens;
  std::vector<Job> jobs;
  for (const json& s : ReadLines(argv[3])) {
    for (int setting = 0; setting < 3; ++setting) {
      Job j{{{"kind", "schema"}, {"name", s["name"]}, {"schema", s["schema"]}}, base};
      j.options.json_schema = s["schema"].dump();
      j.options.temperature = setting == 0 ? 0.0f : 1.0f;
      j.options.seed = static_cast<uint64_t>(setting);
      j.record["temperature"] = j.options.temperature;
      j.record["seed"] = setting;
      jobs.push_back(std::move(j));
    }
  }
  jobs.push_back({{{"kind", "json_object"}}, base});
  jobs.back().options.json_object = true;
  jobs.push_back({{{"kind", "unconstrained"}}, base});
  for (const char* re : {"(.|\n)*", "[a-z ,]+", "[^{]*"}) {
    jobs.push_back({{{"kind", "regex"}, {"regex", re}}, base});
    jobs.back().options.regex = re;
  }
  for (const json& u : ReadLines(argv[4])) {
    jobs.push_back(
        {{{"kind", "unsupported"}, {"error", u["error"]}, {"schema", u["schema"]}}, base});
    jobs.back().options.json_schema = u["schema"].dump();
  }
  std::mutex mu;
  size_t next = 0;
  std::vector<std::string> lines(jobs.size());
  auto worker = [&] {
    while (true) {
      size_t i;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (next == jobs.size()) return;
        i = next++;
      }
      json r = jobs[i].record;
      r["model"] = model;
      auto out = (*engine)->Generate(images, prompt, jobs[i].options);
      if (out.ok()) {
        r["answer"] = out->text;
        r["finish_reason"] = out->finish_reason;
        r["tokens"] = out->output_ids.size();
      } else {
        r["error_message"] = out.status().message();
      }
      lines[i] = r.dump(-1, ' ', false, json::error_handler_t::replace);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  std::ofstream out(argv[6]);
  for (const auto& l : lines) out << l << "\n";
  return out ? 0 : 1;
}
