#include "text/unicode_normalizer.h"

#include <unicode/unorm2.h>
#include <unicode/uset.h>
#include <unicode/ustring.h>

#include <string>

namespace ocular::text {
namespace {

// The characters Unicode 9.0 assigned: those unicode-normalization-alignments has data for.
constexpr char16_t kKnownToTokenizers[] = u"[:age=9.0:]";

class IcuNormalizer final : public Normalizer {
 public:
  IcuNormalizer(USet* set, UNormalizer2* norm) : set_(set), norm_(norm) {}
  ~IcuNormalizer() override {
    unorm2_close(norm_);  // before the set it filters by
    uset_close(set_);
  }
  IcuNormalizer(const IcuNormalizer&) = delete;
  IcuNormalizer& operator=(const IcuNormalizer&) = delete;

  // UTF-8 -> UTF-16 -> normalize -> UTF-8, lengths explicit (a NUL is a character like any
  // other). Each step sizes its buffer with a preflight call.
  std::string Normalize(std::string s) const override {
    if (s.empty()) return s;
    UErrorCode err = U_ZERO_ERROR;
    int32_t n16 = 0;
    u_strFromUTF8(nullptr, 0, &n16, s.data(), static_cast<int32_t>(s.size()), &err);
    std::u16string in(static_cast<size_t>(n16), u'\0');
    err = U_ZERO_ERROR;
    u_strFromUTF8(in.data(), n16, nullptr, s.data(), static_cast<int32_t>(s.size()), &err);
    if (U_FAILURE(err)) return s;  // REQUIRES valid UTF-8: unreachable
    err = U_ZERO_ERROR;
    const int32_t nout = unorm2_normalize(norm_, in.data(), n16, nullptr, 0, &err);
    std::u16string out(static_cast<size_t>(nout), u'\0');
    err = U_ZERO_ERROR;
    unorm2_normalize(norm_, in.data(), n16, out.data(), nout, &err);
    if (U_FAILURE(err)) return s;
    int32_t n8 = 0;
    err = U_ZERO_ERROR;
    u_strToUTF8(nullptr, 0, &n8, out.data(), nout, &err);
    std::string result(static_cast<size_t>(n8), '\0');
    err = U_ZERO_ERROR;
    u_strToUTF8(result.data(), n8, nullptr, out.data(), nout, &err);
    return U_FAILURE(err) ? s : result;
  }

 private:
  USet* set_;
  UNormalizer2* norm_;
};

}  // namespace

StatusOr<std::unique_ptr<Normalizer>> MakeUnicodeNormalizer(std::string_view form) {
  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2* base = nullptr;
  if (form == "NFC") {
    base = unorm2_getNFCInstance(&err);
  } else if (form == "NFD") {
    base = unorm2_getNFDInstance(&err);
  } else if (form == "NFKC") {
    base = unorm2_getNFKCInstance(&err);
  } else if (form == "NFKD") {
    base = unorm2_getNFKDInstance(&err);
  } else {
    return Error(StatusCode::kInvalidArgument, "tokenizer", "'", form,
                 "' is not a Unicode normalization form");
  }
  USet* set = U_SUCCESS(err) ? uset_openPattern(kKnownToTokenizers, -1, &err) : nullptr;
  if (set != nullptr) uset_freeze(set);
  UNormalizer2* norm = U_SUCCESS(err) ? unorm2_openFiltered(base, set, &err) : nullptr;
  if (U_FAILURE(err) || norm == nullptr) {
    if (set != nullptr) uset_close(set);
    return Error(StatusCode::kInternal, "tokenizer", "ICU could not open the ", form,
                 " normalizer: ", u_errorName(err));
  }
  return std::unique_ptr<Normalizer>(new IcuNormalizer(set, norm));
}

}  // namespace ocular::text
