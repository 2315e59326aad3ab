// libFuzzer target: SafetensorsFile::Open on arbitrary bytes (header length, JSON header,
// dtypes, shapes, offsets, metadata). Whatever opens must describe tensors that lie inside the
// file with byte sizes that match their shapes. Seeds: a small file written by scripts/fuzz.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Open() maps a path, so each input goes through a per-process scratch file.
  static const std::string path =
      "/tmp/ocular_safetensors_fuzz_" + std::to_string(::getpid()) + ".safetensors";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  auto file = ocular::SafetensorsFile::Open(path);
  if (!file.ok()) return 0;
  const uint8_t* begin = nullptr;
  for (const auto& [name, view] : file->tensors()) {
    if (view.nbytes() > size) std::abort();
    if (view.nbytes() > 0) {
      begin = static_cast<const uint8_t*>(view.data);
      // Touch the first and last byte: out-of-file views are caught by ASan or SIGBUS.
      volatile uint8_t first = begin[0], last = begin[view.nbytes() - 1];
      (void)first;
      (void)last;
    }
  }
  return 0;
}
