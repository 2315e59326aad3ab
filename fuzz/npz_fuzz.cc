// libFuzzer target: the .npy header parser and the .npz (zip) reader on arbitrary bytes, then
// the mask-decoder binder on whatever archive opens (names, dtypes, shapes, the decoder's shape
// chain). Whatever parses must hold exactly the bytes its shape and dtype say. Seeds:
// testdata/seg/tiny.npz (a stored and a deflated member) and a bare .npy from scripts/fuzz.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

#include "io/npz.h"
#include "tasks/mask_decoder.h"

namespace {

void CheckArray(const ocular::NpyArray& a) {
  if (a.bytes.size() != static_cast<size_t>(a.view().numel()) * ocular::DTypeSize(a.dtype)) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (auto npy = ocular::ParseNpy(bytes, "fuzz.npy"); npy.ok()) CheckArray(*npy);
  auto npz = ocular::NpzFile::FromBytes(bytes, "fuzz.npz");
  if (!npz.ok()) return 0;
  std::map<std::string, ocular::TensorView> views;
  for (const auto& [name, a] : npz->arrays()) {
    CheckArray(a);
    views.emplace(name, a.view());
  }
  (void)ocular::BindMaskDecoder(views, "fuzz.npz");
  return 0;
}
