// Fuzzes the tokenizer.json loader, then Encode / Decode / streaming on whatever loads.
// Input layout: [json text] '\0' [text to encode]. Seeds: the test tokenizers
// (testdata/tiny/tokenizer, testdata/text/*) cut to ~5 KB by scripts/fuzz.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string_view json = input.substr(0, split);
  const std::string_view text =
      split == std::string_view::npos ? std::string_view("a <image> b\n") : input.substr(split + 1);
  auto tok = ocular::Tokenizer::FromHfJson(json);
  if (!tok.ok()) return 0;
  auto ids = (*tok)->Encode(text);
  if (!ids.ok()) return 0;
  (void)(*tok)->Decode(*ids, false);
  ocular::StreamingDecoder stream(**tok, true);
  for (int32_t id : *ids) (void)stream.Put(id);
  (void)stream.Finish();
  for (int32_t id : *ids) (void)(*tok)->IdToPiece(id);
  return 0;
}
