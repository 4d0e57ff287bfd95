#include "hw/dram/hbm_spec.h"

#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/config_enum.h"

namespace neupims::hw {

void ParseHbmSpec(ConfigObject hbm, HbmSpec* out) {
  out->frequency_mhz = hbm.Double("frequency_mhz", {.min = 1, .max = 1e5});
  out->refresh = hbm.OptionalEnum("refresh_policy", "all_ranks", {"all_ranks", "rank_staggered"}) ==
                         "rank_staggered"
                     ? RefreshPolicy::kRankStaggered
                     : RefreshPolicy::kAllRanks;

  ConfigObject org = hbm.Child("organization");
  HbmOrganization& o = out->org;
  o.channels = static_cast<int>(org.Int("channels", {.min = 1, .max = 1024}));
  o.ranks = static_cast<int>(org.Int("ranks", {.min = 1, .max = 8}));
  o.bank_groups = static_cast<int>(org.Int("bank_groups", {.min = 1, .max = 16}));
  o.banks_per_group = static_cast<int>(org.Int("banks_per_group", {.min = 1, .max = 16}));
  o.rows = org.Int("rows", {.min = 1, .max = int64_t{1} << 24});
  o.page_bytes = static_cast<int>(org.Int("page_bytes", {.min = 32, .max = 1 << 16}));
  o.burst_bytes = static_cast<int>(org.Int("burst_bytes", {.min = 8, .max = 1 << 12}));
  org.Finish();

  ConfigObject t = hbm.Child("timing_cycles");
  HbmTiming& tm = out->timing;
  const IntRange pos{.min = 1, .max = 1 << 20};
  const IntRange nonneg{.min = 0, .max = 1 << 20};
  tm.CL = static_cast<int>(t.Int("CL", pos));
  tm.CWL = static_cast<int>(t.Int("CWL", nonneg));
  tm.tBL = static_cast<int>(t.Int("tBL", pos));
  tm.tRCD = static_cast<int>(t.Int("tRCD", pos));
  tm.tRP = static_cast<int>(t.Int("tRP", pos));
  tm.tRAS = static_cast<int>(t.Int("tRAS", pos));
  tm.tRRD_S = static_cast<int>(t.Int("tRRD_S", pos));
  tm.tRRD_L = static_cast<int>(t.Int("tRRD_L", pos));
  tm.tWTR_S = static_cast<int>(t.Int("tWTR_S", nonneg));
  tm.tWTR_L = static_cast<int>(t.Int("tWTR_L", nonneg));
  tm.tRTP = static_cast<int>(t.Int("tRTP", pos));
  tm.tWR = static_cast<int>(t.Int("tWR", pos));
  tm.tCCD_S = static_cast<int>(t.Int("tCCD_S", pos));
  tm.tCCD_L = static_cast<int>(t.Int("tCCD_L", pos));
  tm.tFAW = static_cast<int>(t.Int("tFAW", pos));
  tm.tRTRS = static_cast<int>(t.Int("tRTRS", nonneg));
  tm.tREFI = static_cast<int>(t.Int("tREFI", pos));
  tm.tRFC = static_cast<int>(t.Int("tRFC", pos));
  t.Finish();

  ConfigObject p = hbm.Child("power");
  HbmPower& pw = out->power;
  // Bounded far above any real part, so no figure makes a reported energy infinite.
  const DoubleRange nonneg_d{.min = 0, .max = 1e6};
  pw.vdd = p.Double("vdd", {.min = 0.1, .max = 5});
  pw.idd0_ma = p.Double("idd0_ma", nonneg_d);
  pw.idd2n_ma = p.Double("idd2n_ma", nonneg_d);
  pw.idd3n_ma = p.Double("idd3n_ma", nonneg_d);
  pw.idd4r_ma = p.Double("idd4r_ma", nonneg_d);
  pw.idd4w_ma = p.Double("idd4w_ma", nonneg_d);
  pw.idd5ab_ma = p.Double("idd5ab_ma", nonneg_d);
  pw.io_pj_per_bit = p.OptionalDouble("io_pj_per_bit", 0.0, nonneg_d);
  p.Finish();
  hbm.Finish();
}

namespace {

// "issue": {"scope": "unlimited" | "channel" | "chip", "instructions_per_ns": r}; absent means
// unlimited.
void ParsePimIssue(ConfigObject issue, PimIssue* out) {
  ReadEnum(issue, "scope", PimIssueScopeNames(), &out->scope);
  out->instructions_per_ns = issue.OptionalDouble("instructions_per_ns", 1.0,
                                                  {.min = 0, .max = 1e6, .min_exclusive = true});
  issue.Finish();
}

// "timing": {"row_close", "gemv", "gwrite", "gwrite_access_bytes", "refresh_guard"}, each
// optional (absent: the controller's physics).
void ParsePimTiming(ConfigObject timing, PimTiming* out) {
  ReadEnum(timing, "row_close", PimRowCloseNames(), &out->row_close);
  ReadEnum(timing, "gemv", PimGemvTimingNames(), &out->gemv);
  out->gemv_releases_row = timing.OptionalBool("gemv_releases_row", out->gemv_releases_row);
  ReadEnum(timing, "gwrite", PimGwriteTimingNames(), &out->gwrite);
  out->gwrite_access_bytes = static_cast<int>(
      timing.OptionalInt("gwrite_access_bytes", out->gwrite_access_bytes, {.min = 1, .max = 4096}));
  ReadEnum(timing, "refresh_guard", PimRefreshGuardNames(), &out->refresh_guard);
  timing.Finish();
}

}  // namespace

void ParsePimSpec(ConfigObject pim, PimSpec* out) {
  out->enabled = pim.Bool("enabled");
  out->row_buffers = pim.Enum("row_buffers", {"single", "dual"}) == "dual" ? RowBufferMode::kDual
                                                                           : RowBufferMode::kSingle;
  out->command_set = pim.Enum("command_set", {"newton", "neupims"}) == "neupims"
                         ? PimCommandSet::kNeuPims
                         : PimCommandSet::kNewton;
  out->mac_lanes_per_bank =
      static_cast<int>(pim.Int("mac_lanes_per_bank", {.min = 1, .max = 4096}));
  out->element_bytes = static_cast<int>(pim.Int("element_bytes", {.min = 1, .max = 8}));
  out->global_buffer_bytes =
      static_cast<int>(pim.Int("global_buffer_bytes", {.min = 32, .max = 1 << 20}));
  ConfigObject e = pim.Child("energy");
  const DoubleRange nonneg{.min = 0, .max = 1e6};  // as the HBM power figures
  out->dot_read_multiple = e.Double("dot_read_multiple", nonneg);
  out->gwrite_read_multiple = e.Double("gwrite_read_multiple", nonneg);
  out->rdresult_read_multiple = e.Double("rdresult_read_multiple", nonneg);
  out->dual_buffer_background_fraction = e.Double("dual_buffer_background_fraction", nonneg);
  e.Finish();
  if (pim.Has("issue")) ParsePimIssue(pim.Child("issue"), &out->issue);
  if (pim.Has("timing")) ParsePimTiming(pim.Child("timing"), &out->timing);
  pim.Finish();
}

absl::Status ValidateHbmSpec(const HbmSpec& spec) {
  const HbmOrganization& o = spec.org;
  if (o.page_bytes % o.burst_bytes != 0) {
    return absl::InvalidArgumentError(absl::StrCat("hbm.organization.page_bytes (", o.page_bytes,
                                                   ") must be a multiple of burst_bytes (",
                                                   o.burst_bytes, ")"));
  }
  if (spec.timing.tRAS < spec.timing.tRCD) {
    return absl::InvalidArgumentError("hbm.timing_cycles.tRAS must be >= tRCD");
  }
  if (spec.timing.tREFI <= spec.timing.tRFC) {
    return absl::InvalidArgumentError("hbm.timing_cycles.tREFI must be > tRFC");
  }
  // JEDEC HBM2: spacing within a bank group (_L) is never shorter than across groups (_S).
  const HbmTiming& t = spec.timing;
  for (const auto& [name, shorter, longer] :
       {std::tuple{"tCCD", t.tCCD_S, t.tCCD_L}, std::tuple{"tRRD", t.tRRD_S, t.tRRD_L},
        std::tuple{"tWTR", t.tWTR_S, t.tWTR_L}}) {
    if (longer < shorter) {
      return absl::InvalidArgumentError(absl::StrCat("hbm.timing_cycles.", name, "_L (", longer,
                                                     ") must be >= ", name, "_S (", shorter, ")"));
    }
  }
  if (spec.pim.enabled) {
    const PimSpec& p = spec.pim;
    const int column_bytes = p.mac_lanes_per_bank * p.element_bytes;
    if (o.page_bytes % column_bytes != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("pim.mac_lanes_per_bank * element_bytes (", column_bytes,
                       ") must divide hbm.organization.page_bytes (", o.page_bytes, ")"));
    }
    if (p.global_buffer_bytes < o.page_bytes) {
      return absl::InvalidArgumentError("pim.global_buffer_bytes must hold at least one page");
    }
    if (p.timing.gemv == PimGemvTiming::kFusedCommand && p.command_set != PimCommandSet::kNeuPims) {
      return absl::InvalidArgumentError(
          "pim.timing.gemv: fused_command needs pim.command_set neupims (Newton has no PIM_GEMV)");
    }
    if (p.timing.gemv_releases_row && p.timing.gemv != PimGemvTiming::kFusedCommand) {
      return absl::InvalidArgumentError(
          "pim.timing.gemv_releases_row needs pim.timing.gemv fused_command (column steps "
          "always hold the row)");
    }
    if (p.timing.gwrite == PimGwriteTiming::kOrdinaryAccess &&
        o.page_bytes % p.timing.gwrite_access_bytes != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("pim.timing.gwrite_access_bytes (", p.timing.gwrite_access_bytes,
                       ") must divide hbm.organization.page_bytes (", o.page_bytes, ")"));
    }
    // A grouped PIM activation opens one bank group at once; it must fit in one tFAW window
    // (four activations), or it could never issue.
    if (o.banks_per_group > 4) {
      return absl::InvalidArgumentError(
          "hbm.organization.banks_per_group must be <= 4 for grouped PIM activation (tFAW)");
    }
  }
  return absl::OkStatus();
}

const char* ToString(RowBufferMode m) { return m == RowBufferMode::kDual ? "dual" : "single"; }
const char* ToString(PimCommandSet s) {
  return s == PimCommandSet::kNeuPims ? "neupims" : "newton";
}
const EnumNames<PimIssueScope>& PimIssueScopeNames() {
  static constexpr EnumName<PimIssueScope> kEntries[] = {{"unlimited", PimIssueScope::kUnlimited},
                                                         {"channel", PimIssueScope::kChannel},
                                                         {"chip", PimIssueScope::kChip}};
  static constexpr EnumNames<PimIssueScope> kNames("PIM issue scope", kEntries);
  return kNames;
}

bool PimTiming::IsDefault() const {
  const PimTiming d;
  return row_close == d.row_close && gemv == d.gemv && gemv_releases_row == d.gemv_releases_row &&
         gwrite == d.gwrite && refresh_guard == d.refresh_guard;
}

const EnumNames<PimRowClose>& PimRowCloseNames() {
  static constexpr EnumName<PimRowClose> kEntries[] = {
      {"all_bank_precharge", PimRowClose::kAllBankPrecharge},
      {"per_bank_precharge", PimRowClose::kPerBankPrecharge}};
  static constexpr EnumNames<PimRowClose> kNames("PIM row close", kEntries);
  return kNames;
}

const EnumNames<PimGemvTiming>& PimGemvTimingNames() {
  static constexpr EnumName<PimGemvTiming> kEntries[] = {
      {"column_steps", PimGemvTiming::kColumnSteps},
      {"fused_command", PimGemvTiming::kFusedCommand}};
  static constexpr EnumNames<PimGemvTiming> kNames("PIM GEMV timing", kEntries);
  return kNames;
}

const EnumNames<PimGwriteTiming>& PimGwriteTimingNames() {
  static constexpr EnumName<PimGwriteTiming> kEntries[] = {
      {"overlapped", PimGwriteTiming::kOverlapped},
      {"ordinary_access", PimGwriteTiming::kOrdinaryAccess}};
  static constexpr EnumNames<PimGwriteTiming> kNames("PIM GWRITE timing", kEntries);
  return kNames;
}

const EnumNames<PimRefreshGuard>& PimRefreshGuardNames() {
  static constexpr EnumName<PimRefreshGuard> kEntries[] = {
      {"refresh_early", PimRefreshGuard::kRefreshEarly},
      {"wait_for_refresh", PimRefreshGuard::kWaitForRefresh}};
  static constexpr EnumNames<PimRefreshGuard> kNames("PIM refresh guard", kEntries);
  return kNames;
}

}  // namespace neupims::hw
