// Fuzzes the SentencePiece tokenizer.model loader (libsentencepiece behind our Status
// wrapper), then Encode / Decode on whatever loads. Seed: testdata/tiny/tokenizer/tokenizer.model.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto tok = ocular::Tokenizer::FromSentencePiece(
      std::string_view(reinterpret_cast<const char*>(data), size));
  if (!tok.ok()) return 0;
  auto ids = (*tok)->Encode("caption en\n<loc0012> \xC3\xA9\xF0\x9F\x98\x80");
  if (ids.ok()) (void)(*tok)->Decode(*ids, false);
  return 0;
}
