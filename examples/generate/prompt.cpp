// UTF-8 validation and prompt checks.
#include "prompt.hpp"

#include <cstdio>
#include <stdexcept>

namespace generate {

std::size_t first_invalid_utf8(const std::string& text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    std::size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
    if (c < 0x80)
      length = 1;
    else if (c >= 0xC2 && c <= 0xDF)
      length = 2;
    else if (c == 0xE0)
      length = 3, low = 0xA0;
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF)
      length = 3;
    else if (c == 0xED)
      length = 3, high = 0x9F;  // no UTF-16 surrogates
    else if (c == 0xF0)
      length = 4, low = 0x90;
    else if (c >= 0xF1 && c <= 0xF3)
      length = 4;
    else if (c == 0xF4)
      length = 4, high = 0x8F;  // nothing above U+10FFFF
    else
      return i;
    if (i + length > n) return i;
    for (std::size_t k = 1; k < length; ++k) {
      const unsigned char b = s[i + k];
      const unsigned char lo = k == 1 ? low : 0x80, hi = k == 1 ? high : 0xBF;
      if (b < lo || b > hi) return i;
    }
    i += length;
  }
  return std::string::npos;
}

std::vector<std::int32_t> prompt_tokens(const std::string& prompt, int context) {
  if (prompt.empty())
    throw std::invalid_argument("--prompt is empty: give at least one byte of text to continue");
  const std::size_t bad = first_invalid_utf8(prompt);
  if (bad != std::string::npos) {
    char byte[8];
    std::snprintf(byte, sizeof(byte), "0x%02X", unsigned(static_cast<unsigned char>(prompt[bad])));
    throw std::invalid_argument("--prompt is not valid UTF-8: byte " + std::string(byte) + " at offset " +
                                std::to_string(bad) + " starts no well-formed character");
  }
  if (prompt.size() > std::size_t(context)) {
    throw std::invalid_argument("--prompt has " + std::to_string(prompt.size()) +
                                " bytes, more than the model's context of " + std::to_string(context) +
                                " bytes");
  }
  return std::vector<std::int32_t>(reinterpret_cast<const unsigned char*>(prompt.data()),
                                   reinterpret_cast<const unsigned char*>(prompt.data()) + prompt.size());
}

}  // namespace generate
