#include "runtime/generator.h"

#include <mutex>

#include "runtime/scheduler.h"

namespace ocular {

StatusOr<GenerationOutput> Generate(Runner& runner, KvPool& kv, const GenerationRequest& req,
                                    Tracer* tracer, const TokenSink& on_token) {
  std::mutex runner_mu;
  Scheduler scheduler(runner, kv, runner_mu, /*cache=*/nullptr, /*max_batch=*/1);
  ScheduledRequest r;
  r.gen = req;
  if (tracer != nullptr) r.gen.tracer = tracer;
  return scheduler.Generate(r, on_token);
}

}  // namespace ocular
