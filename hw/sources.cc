#include "hw/sources.h"

namespace neupims::hw {

void ReadSources(ConfigObject& root, const std::vector<std::string>& figures) {
  ConfigObject sources = root.Child("sources");
  for (const std::string& f : figures) {
    if (sources.String(f).empty()) sources.Error(f, "must name a source");
  }
  sources.Finish();
}

}  // namespace neupims::hw
