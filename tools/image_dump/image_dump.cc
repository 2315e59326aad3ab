// image_dump FILE...: decodes each image with ocular's decoders (PIL's convert("RGB")) and
// writes FILE.ocular next to it: "OK <width> <height>\n" then the RGB bytes, or
// "ERR <StatusCode name> <message>". Used by tools/reference/compare_bmp_with_pillow.py to
// compare ocular with Pillow on many generated files; not part of the ocular binary.
#include <cstdio>
#include <string>

#include "image/image.h"

int main(int argc, char** argv) {
  int failures = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string out = std::string(argv[i]) + ".ocular";
    std::FILE* f = std::fopen(out.c_str(), "wb");
    if (f == nullptr) {
      std::fprintf(stderr, "image_dump: cannot write %s\n", out.c_str());
      ++failures;
      continue;
    }
    auto image = ocular::LoadImage(argv[i]);
    if (image.ok()) {
      std::fprintf(f, "OK %d %d\n", image->width, image->height);
      std::fwrite(image->rgb.data(), 1, image->rgb.size(), f);
    } else {
      std::fprintf(f, "ERR %s %s", ocular::StatusCodeName(image.status().code()),
                   image.status().message().c_str());
    }
    std::fclose(f);
  }
  return failures == 0 ? 0 : 1;
}
