// Helpers shared by the server tests: base64, reading files, building request bodies.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ocular::server::testing {

inline std::string Base64(const std::string& in) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kAlphabet[(acc >> bits) & 63];
    }
  }
  if (bits > 0) out += kAlphabet[(acc << (6 - bits)) & 63];
  while (out.size() % 4 != 0) out += '=';
  return out;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::string DataUrl(const std::string& bytes, const std::string& type = "image/png") {
  return "data:" + type + ";base64," + Base64(bytes);
}

// {"messages":[{"role":"user","content":[{"type":"text","text":PROMPT},{"type":"image_url",
// "image_url":{"url":URL}}]}] EXTRA}; `extra` is spliced in verbatim (",\"stream\":true").
inline std::string ChatBody(const std::string& prompt, const std::string& url,
                            const std::string& extra = "") {
  std::string content = "[{\"type\":\"text\",\"text\":\"" + prompt + "\"}";
  if (!url.empty()) {
    content += ",{\"type\":\"image_url\",\"image_url\":{\"url\":\"" + url + "\"}}";
  }
  content += "]";
  return "{\"messages\":[{\"role\":\"user\",\"content\":" + content + "}]" + extra + "}";
}

}  // namespace ocular::server::testing
