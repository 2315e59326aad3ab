// Engine::Bench on a Runner: `batch` sequences of a synthetic image and prompt, each encoded and
// prefilled alone (timed), then decoded together step by step (timed).
#pragma once

#include "models/processor.h"
#include "ocular/engine.h"
#include "runtime/kv_pool.h"
#include "runtime/runner.h"

namespace ocular {

// REQUIRES: the caller has the runner to itself. Errors: options < 1, prompt + decode tokens
// over the context length.
StatusOr<BenchResult> RunBench(Runner& runner, KvPool& kv, const Processor& processor,
                               const BenchOptions& b);

}  // namespace ocular
