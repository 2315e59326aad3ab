// libFuzzer target: GgufFile::Parse on arbitrary bytes (header, metadata of every type,
// tensor infos, alignment, offsets). Whatever parses must describe tensors that lie inside the
// input with sizes that match their shapes and types. Seed: testdata/gguf/small.gguf.
#include <cstdint>
#include <cstdlib>

#include "io/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = ocular::GgufFile::Parse({data, size}, "fuzz.gguf");
  if (!file.ok()) return 0;
  const auto* end = reinterpret_cast<const std::byte*>(data + size);
  for (const ocular::GgufTensor& t : (*file)->tensors()) {
    const ocular::GgmlType* type = ocular::FindGgmlType(t.type);
    if (type == nullptr || t.data + t.nbytes > end) std::abort();
    int64_t numel = 1;
    for (int64_t ne : t.ne) numel *= ne;
    if (static_cast<size_t>(numel / type->block_values * type->block_bytes) != t.nbytes)
      std::abort();
    if (t.nbytes > 0) {  // out-of-input views are caught by ASan
      volatile std::byte first = t.data[0], last = t.data[t.nbytes - 1];
      (void)first;
      (void)last;
    }
  }
  for (const auto& [key, v] : (*file)->metadata()) {
    for (std::string_view s : v.strings) {
      if (!s.empty()) {
        volatile char c = s.back();
        (void)c;
      }
    }
  }
  return 0;
}
