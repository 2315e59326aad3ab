// Placeholder until the Highway kernels land.
#include "kernels/cpu/highway_tables.h"

namespace ocular::cpu {
std::vector<IsaTable> HighwayTables() { return {}; }
}  // namespace ocular::cpu
