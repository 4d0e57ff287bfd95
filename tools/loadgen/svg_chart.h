// A small SVG line-chart module for the load generator's HTML report (report.h): axes with
// 1-2-5 ticks (log scale when the data spans 20x or more and the chart allows it), gridlines,
// series (solid or dashed lines, markers, shaded areas, point labels), horizontal reference
// lines and a wrapping legend. Output is plain inline SVG, no scripts; every coordinate is a
// finite number whatever the data (non-finite and huge values are skipped).
//
// The page (report.cc) decides what to draw; this module only draws it.
#ifndef NEUPIMS_TOOLS_LOADGEN_SVG_CHART_H_
#define NEUPIMS_TOOLS_LOADGEN_SVG_CHART_H_

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace neupims::loadgen {

// Series colours (one per charted run) and the neutral colour of legend-only entries.
inline constexpr int kPaletteSize = 8;
inline constexpr const char* kPalette[kPaletteSize] = {"#1f77b4", "#e8710a", "#2ca02c", "#d62728",
                                                       "#9467bd", "#8c564b", "#e377c2", "#17becf"};
inline constexpr const char* kNeutral = "#57606a";

// A value a chart or table can show: finite and at most 1e12 in magnitude (larger ones would
// only wreck the axes).
bool Usable(double v);

// Text escaped for HTML / SVG content and attribute values.
std::string Esc(absl::string_view s);

// At most `max_chars` UTF-8 code points, with an ellipsis when cut.
std::string Truncate(absl::string_view s, size_t max_chars);

// The 1-2-5 step (x 10^k) at or above `raw`; 1 for a non-positive or non-finite `raw`.
double NiceStep(double raw);

using Points = std::vector<std::pair<double, double>>;

struct Series {
  std::string name;  // legend text; empty: not in the legend
  std::string color;
  bool dashed = false;
  bool markers = false;
  bool fill = false;  // shade the area down to y = 0
  Points points;
  std::vector<std::string> point_labels;  // optional, parallel to points
};

struct LegendEntry {
  std::string text;
  std::string color;
  bool dashed = false;
  bool marker = false;
};

struct RefLine {  // horizontal reference line
  double y = 0;
  std::string label;
};

struct ChartSpec {
  std::string title, x_label, y_label;
  bool log_x_allowed = false;  // log x when the (positive) data spans at least kLogSpan
  bool log_y_allowed = false;  // likewise for y
  bool x_from_zero = false, y_from_zero = false;
  bool pad_x = false;      // keep data off the left and right frame
  bool y_integer = false;  // tick step at least 1
  std::optional<std::pair<double, double>> y_fixed;
  std::vector<RefLine> refs;
  std::vector<Series> series;
  std::vector<LegendEntry> legend;  // empty: one entry per named series
  std::string empty_text = "no data";
};

// The chart as one <svg> element; `id` must be unique on the page (it names the clip path).
std::string RenderChart(const ChartSpec& spec, int id);

// A heat map of values in [0, 1]: one column per x (time), one row per entry of `rows` (row 0 at
// the bottom), colour from white (0) to `color` (1). Each cell is a <rect class="cell"> whose
// <title> gives its x, row and value, so the data can be read back from the page.
struct HeatmapSpec {
  std::string title, x_label, y_label, row_name;  // row_name: "channel" -> "channel 3"
  std::string color = "#d62728";
  std::vector<double> xs;                 // increasing
  std::vector<std::vector<double>> rows;  // rows[r][k]: row r at xs[k]
  std::string empty_text = "no data";
};
std::string RenderHeatmap(const HeatmapSpec& spec);

}  // namespace neupims::loadgen

#endif  // NEUPIMS_TOOLS_LOADGEN_SVG_CHART_H_
