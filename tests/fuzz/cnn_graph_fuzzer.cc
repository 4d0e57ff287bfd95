// Fuzzes the CNN graph JSON (models/cnn/graph.h): an accepted graph is topologically ordered and
// every shape is positive; a refused one is InvalidArgument naming the file.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "models/cnn/graph.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr absl::string_view kSource = "fuzz-graph.json";
  absl::StatusOr<neupims::models::cnn::Graph> g =
      neupims::models::cnn::ParseGraph(neupims::fuzz::AsText(data, size), kSource);
  if (!g.ok()) {
    neupims::fuzz::CheckRefusal(g.status(), kSource);
    return 0;
  }
  FUZZ_CHECK(!g->nodes.empty() && g->batch >= 1, g->name);
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    const neupims::models::cnn::Node& n = g->nodes[i];
    FUZZ_CHECK(n.out.c > 0 && n.out.h > 0 && n.out.w > 0, n.name);
    for (int in : n.inputs) {
      FUZZ_CHECK(in >= 0 && static_cast<size_t>(in) < i, absl::StrCat(n.name, " input ", in));
    }
  }
  return 0;
}
