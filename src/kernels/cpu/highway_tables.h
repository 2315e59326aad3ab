// The Highway kernel tables compiled into this binary (one per enabled x86 target).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernel_table.h"

namespace ocular::cpu {

struct IsaTable {
  const char* name;    // "avx2", "avx512"
  int64_t hwy_target;  // HWY_AVX2, HWY_AVX3: checked against hwy::SupportedTargets()
  const kernels::KernelTable* table;
};

// Best target first.
std::vector<IsaTable> HighwayTables();

}  // namespace ocular::cpu
