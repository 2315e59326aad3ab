// The page `ocular serve` answers at GET / (tools/server/web/index.html, compiled in by
// tools/server/CMakeLists.txt): pick or drop an image, choose a task, watch the answer stream,
// see the boxes and masks drawn and the timings.
#pragma once

namespace ocular::server {

extern const char kWebPage[];

}  // namespace ocular::server
