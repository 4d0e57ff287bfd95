#include "engine/options.h"

namespace neupims::engine {
namespace {

constexpr EnumName<PrefillPlacement> kPrefillPlacements[] = {
    {"standalone", PrefillPlacement::kStandalone},
    {"local", PrefillPlacement::kLocal},
};

constexpr EnumName<MhaEstimatorKind> kMhaEstimators[] = {
    {"analytic", MhaEstimatorKind::kAnalytic},
    {"algorithm1", MhaEstimatorKind::kAlgorithm1},
};

constexpr EnumName<SubBatchInterleaving> kSubBatchInterleavings[] = {
    {"on", SubBatchInterleaving::kOn},
    {"off", SubBatchInterleaving::kOff},
    {"auto", SubBatchInterleaving::kAuto},
};

}  // namespace

const EnumNames<PrefillPlacement>& PrefillPlacementNames() {
  static constexpr EnumNames<PrefillPlacement> kNames("prefill mode", kPrefillPlacements);
  return kNames;
}
const char* ToString(PrefillPlacement p) { return PrefillPlacementNames().ToString(p); }

const EnumNames<MhaEstimatorKind>& MhaEstimatorNames() {
  static constexpr EnumNames<MhaEstimatorKind> kNames("MHA estimator", kMhaEstimators);
  return kNames;
}
const char* ToString(MhaEstimatorKind k) { return MhaEstimatorNames().ToString(k); }

const EnumNames<SubBatchInterleaving>& SubBatchInterleavingNames() {
  static constexpr EnumNames<SubBatchInterleaving> kNames("sub-batch interleaving",
                                                          kSubBatchInterleavings);
  return kNames;
}
const char* ToString(SubBatchInterleaving s) { return SubBatchInterleavingNames().ToString(s); }

}  // namespace neupims::engine
