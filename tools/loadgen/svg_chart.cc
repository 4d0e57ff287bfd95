#include "tools/loadgen/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace neupims::loadgen {
namespace {

constexpr double kMaxMagnitude = 1e12;
// Log scale when the (positive) data spans at least this factor and the chart allows it.
constexpr double kLogSpan = 20;

// An SVG coordinate: always a plain finite number.
std::string Coord(double v) {
  if (!std::isfinite(v)) v = 0;
  v = std::clamp(v, -1e6, 1e6);
  if (std::abs(v) < 0.05) v = 0;  // no "-0.0"
  return absl::StrFormat("%.1f", v);
}

struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  std::vector<double> ticks;
  std::vector<double> label_steps;  // per tick: the precision its label needs
  std::vector<double> minor;        // unlabelled gridlines (log axes with decade ticks only)

  // Position in [0, 1] along the axis.
  double Frac(double v) const {
    if (log) {
      const double lv = std::log10(std::max(v, lo));
      return (lv - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
    }
    return (v - lo) / (hi - lo);
  }
};

// Linear axis with 1-2-5 ticks covering [lo, hi]. `pad`: the data never sits on the frame (the
// range extends by a step beyond a value that lands exactly on an end), except at zero.
Axis LinearAxis(double lo, double hi, bool from_zero, bool integer,
                const std::optional<std::pair<double, double>>& fixed, bool pad) {
  Axis a;
  double step = 1;
  if (fixed) {
    a.lo = fixed->first;
    a.hi = fixed->second;
    step = NiceStep((a.hi - a.lo) / 5);
  } else {
    if (from_zero) {
      lo = std::min(lo, 0.0);
      hi = std::max(hi, 0.0);
    }
    if (!(hi > lo)) {  // one distinct value: pad around it
      const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
      if (!(from_zero && lo == 0)) lo -= pad;
      hi += pad;
    }
    step = NiceStep((hi - lo) / 5);
    if (integer) step = std::max(step, 1.0);
    a.lo = std::floor(lo / step + 1e-9) * step;
    a.hi = std::ceil(hi / step - 1e-9) * step;
    if (pad && lo != 0 && a.lo >= lo - step * 1e-6) a.lo -= step;
    if (pad && a.hi <= hi + step * 1e-6) a.hi += step;
    if (lo >= 0) a.lo = std::max(a.lo, 0.0);
    if (!(a.hi > a.lo)) a.hi = a.lo + step;
  }
  const double first = std::ceil(a.lo / step - 1e-9) * step;
  for (int i = 0; i <= 60; ++i) {
    double t = first + i * step;
    if (t > a.hi + step * 1e-6) break;
    if (std::abs(t) < step * 1e-9) t = 0;
    a.ticks.push_back(t);
    a.label_steps.push_back(step);
  }
  return a;
}

// Log axis over [lo, hi] (lo > 0), ends snapped to the 1-2-5 grid (strictly outside with `pad`).
Axis LogAxis(double lo, double hi, bool pad) {
  Axis a;
  a.log = true;
  auto down = [pad](double v) {
    const double m = std::pow(10, std::floor(std::log10(v)));
    for (double f : {5.0, 2.0, 1.0}) {
      if (pad ? f * m < v * (1 - 1e-9) : f * m <= v * (1 + 1e-9)) return f * m;
    }
    return m / 2;
  };
  auto up = [pad](double v) {
    const double m = std::pow(10, std::floor(std::log10(v)));
    for (double f : {1.0, 2.0, 5.0, 10.0}) {
      if (pad ? f * m > v * (1 + 1e-9) : f * m >= v * (1 - 1e-9)) return f * m;
    }
    return 20 * m;
  };
  a.lo = down(lo);
  a.hi = up(hi);
  if (!(a.hi > a.lo)) a.hi = a.lo * 10;
  const bool fine = std::log10(a.hi / a.lo) <= 3.2;
  for (int e = static_cast<int>(std::floor(std::log10(a.lo))) - 1;
       e <= static_cast<int>(std::ceil(std::log10(a.hi))); ++e) {
    const double m = std::pow(10, e);
    for (double f : {1.0, 2.0, 5.0}) {
      const double t = f * m;
      if (t < a.lo * (1 - 1e-9) || t > a.hi * (1 + 1e-9)) continue;
      if (!fine && f != 1.0) {
        a.minor.push_back(t);
        continue;
      }
      a.ticks.push_back(t);
      a.label_steps.push_back(t);
    }
  }
  return a;
}

std::string TickLabel(double v, double step) {
  if (v == 0) return "0";
  std::string suffix;
  if (std::abs(v) >= 1e6 && step >= 1e5) {
    v /= 1e6;
    step /= 1e6;
    suffix = "M";
  } else if (std::abs(v) >= 1e4 && step >= 1e3) {
    v /= 1e3;
    step /= 1e3;
    suffix = "k";
  }
  const int decimals =
      step >= 1 ? 0 : std::min(6, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  return absl::StrFormat("%.*f%s", decimals, v, suffix);
}

// Geometry (SVG user units; the page scales the SVG to its column).
constexpr double kWidth = 560;
constexpr double kPlotLeft = 64, kPlotRight = 20, kPlotTop = 40, kPlotHeight = 230;
constexpr double kPlotWidth = kWidth - kPlotLeft - kPlotRight;
constexpr double kLegendRow = 18;

std::string LegendSwatch(double x, double y, const std::string& color, bool dashed, bool marker) {
  std::string out =
      absl::StrCat("<line x1=\"", Coord(x), "\" y1=\"", Coord(y), "\" x2=\"", Coord(x + 22),
                   "\" y2=\"", Coord(y), "\" stroke=\"", color, "\" stroke-width=\"2.5\"",
                   dashed ? " stroke-dasharray=\"6 3\"" : "", "/>");
  if (marker) {
    absl::StrAppend(&out, "<circle cx=\"", Coord(x + 11), "\" cy=\"", Coord(y),
                    "\" r=\"3.5\" fill=\"", color, "\"/>");
  }
  return out;
}

}  // namespace

bool Usable(double v) { return std::isfinite(v) && std::abs(v) <= kMaxMagnitude; }

std::string Esc(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Truncate(absl::string_view s, size_t max_chars) {
  size_t chars = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;  // continuation byte
    if (chars == max_chars) return absl::StrCat(s.substr(0, i), "\u2026");
    ++chars;
  }
  return std::string(s);
}

double NiceStep(double raw) {
  if (!(raw > 0) || !std::isfinite(raw)) return 1;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

std::string RenderChart(const ChartSpec& spec, int id) {
  // Data ranges (non-finite points are skipped).
  double min_x = std::numeric_limits<double>::max(), max_x = -min_x, min_pos_x = min_x;
  double min_y = min_x, max_y = -min_x, min_pos_y = min_x;
  bool any = false;
  for (const Series& s : spec.series) {
    for (const auto& [x, y] : s.points) {
      if (!Usable(x) || !Usable(y)) continue;
      any = true;
      min_x = std::min(min_x, x);
      max_x = std::max(max_x, x);
      if (x > 0) min_pos_x = std::min(min_pos_x, x);
      min_y = std::min(min_y, y);
      max_y = std::max(max_y, y);
      if (y > 0) min_pos_y = std::min(min_pos_y, y);
    }
  }
  for (const RefLine& r : spec.refs) {
    if (!Usable(r.y)) continue;
    min_y = std::min(min_y, r.y);
    max_y = std::max(max_y, r.y);
  }
  if (!any) min_x = max_x = min_y = max_y = 0;

  const bool log_x = any && spec.log_x_allowed && min_x > 0 && max_x / min_pos_x >= kLogSpan;
  const bool log_y =
      any && spec.log_y_allowed && !spec.y_fixed && min_y > 0 && max_y / min_pos_y >= kLogSpan;
  const Axis xa = log_x ? LogAxis(min_pos_x, max_x, spec.pad_x)
                        : LinearAxis(min_x, max_x, spec.x_from_zero || !any, false, std::nullopt,
                                     spec.pad_x && any);
  const Axis ya = log_y ? LogAxis(min_pos_y, max_y, false)
                        : LinearAxis(min_y, max_y, spec.y_from_zero || !any, spec.y_integer,
                                     spec.y_fixed, false);
  auto px = [&](double x) { return kPlotLeft + std::clamp(xa.Frac(x), -0.02, 1.02) * kPlotWidth; };
  auto py = [&](double y) {
    return kPlotTop + (1 - std::clamp(ya.Frac(y), -0.02, 1.02)) * kPlotHeight;
  };
  const double bottom = kPlotTop + kPlotHeight;

  // Legend layout: entries flow left to right, wrapping at the plot width.
  std::vector<LegendEntry> legend = spec.legend;
  if (legend.empty()) {
    for (const Series& s : spec.series) {
      if (!s.name.empty()) legend.push_back({s.name, s.color, s.dashed, s.markers});
    }
  }
  if (!any) legend.clear();
  struct Placed {
    LegendEntry entry;
    std::string text;
    double x, y;
  };
  std::vector<Placed> placed;
  const double legend_top = bottom + 54;
  double lx = kPlotLeft, ly = legend_top;
  for (const LegendEntry& e : legend) {
    std::string text = Truncate(e.text, 34);
    size_t chars = 0;
    for (char c : text) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    const double w = 30 + 6.4 * static_cast<double>(chars) + 16;
    if (lx > kPlotLeft && lx + w > kPlotLeft + kPlotWidth) {
      lx = kPlotLeft;
      ly += kLegendRow;
    }
    placed.push_back({e, std::move(text), lx, ly});
    lx += w;
  }
  const double height = placed.empty() ? bottom + 46 : ly + 12;

  std::string o;
  absl::StrAppend(&o, "<svg class=\"chart\" viewBox=\"0 0 ", Coord(kWidth), " ", Coord(height),
                  "\" role=\"img\" aria-label=\"", Esc(spec.title), "\">");
  absl::StrAppend(&o, "<defs><clipPath id=\"clip", id, "\"><rect x=\"", Coord(kPlotLeft), "\" y=\"",
                  Coord(kPlotTop - 2), "\" width=\"", Coord(kPlotWidth), "\" height=\"",
                  Coord(kPlotHeight + 4), "\"/></clipPath></defs>");
  absl::StrAppend(&o, "<text class=\"ct\" x=\"", Coord(kPlotLeft - 52), "\" y=\"22\">",
                  Esc(spec.title), "</text>");

  // Gridlines and tick labels.
  // Vertical lines at `xs`, then horizontal ones at `ys`, in one group of class `cls`.
  auto grid = [&](const char* cls, const std::vector<double>& xs, const std::vector<double>& ys) {
    absl::StrAppend(&o, "<g class=\"", cls, "\">");
    for (double t : xs) {
      absl::StrAppend(&o, "<line x1=\"", Coord(px(t)), "\" y1=\"", Coord(kPlotTop), "\" x2=\"",
                      Coord(px(t)), "\" y2=\"", Coord(bottom), "\"/>");
    }
    for (double t : ys) {
      absl::StrAppend(&o, "<line x1=\"", Coord(kPlotLeft), "\" y1=\"", Coord(py(t)), "\" x2=\"",
                      Coord(kPlotLeft + kPlotWidth), "\" y2=\"", Coord(py(t)), "\"/>");
    }
    absl::StrAppend(&o, "</g>");
  };
  grid("minor", xa.minor, ya.minor);
  grid("grid", xa.ticks, ya.ticks);
  absl::StrAppend(&o, "<rect class=\"frame\" x=\"", Coord(kPlotLeft), "\" y=\"", Coord(kPlotTop),
                  "\" width=\"", Coord(kPlotWidth), "\" height=\"", Coord(kPlotHeight), "\"/>");
  for (size_t i = 0; i < xa.ticks.size(); ++i) {
    absl::StrAppend(&o, "<text class=\"tk\" x=\"", Coord(px(xa.ticks[i])), "\" y=\"",
                    Coord(bottom + 16), "\" text-anchor=\"middle\">",
                    TickLabel(xa.ticks[i], xa.label_steps[i]), "</text>");
  }
  for (size_t i = 0; i < ya.ticks.size(); ++i) {
    absl::StrAppend(&o, "<text class=\"tk\" x=\"", Coord(kPlotLeft - 6), "\" y=\"",
                    Coord(py(ya.ticks[i]) + 4), "\" text-anchor=\"end\">",
                    TickLabel(ya.ticks[i], ya.label_steps[i]), "</text>");
  }
  const std::string x_label =
      log_x ? absl::StrCat(spec.x_label, " \u2014 log scale") : spec.x_label;
  absl::StrAppend(&o, "<text class=\"al\" x=\"", Coord(kPlotLeft + kPlotWidth / 2), "\" y=\"",
                  Coord(bottom + 36), "\" text-anchor=\"middle\">", Esc(x_label), "</text>");
  const double y_mid = kPlotTop + kPlotHeight / 2;
  const std::string y_label = log_y ? absl::StrCat(spec.y_label, " \u2014 log") : spec.y_label;
  absl::StrAppend(&o, "<text class=\"al\" x=\"14\" y=\"", Coord(y_mid),
                  "\" text-anchor=\"middle\" transform=\"rotate(-90 14 ", Coord(y_mid), ")\">",
                  Esc(y_label), "</text>");

  if (!any) {
    absl::StrAppend(&o, "<text class=\"empty\" x=\"", Coord(kPlotLeft + kPlotWidth / 2), "\" y=\"",
                    Coord(y_mid + 5), "\" text-anchor=\"middle\">", Esc(spec.empty_text),
                    "</text></svg>");
    return o;
  }

  // Reference lines.
  for (const RefLine& r : spec.refs) {
    if (!Usable(r.y)) continue;
    absl::StrAppend(&o, "<line class=\"ref\" x1=\"", Coord(kPlotLeft), "\" y1=\"", Coord(py(r.y)),
                    "\" x2=\"", Coord(kPlotLeft + kPlotWidth), "\" y2=\"", Coord(py(r.y)), "\"/>");
    absl::StrAppend(&o, "<text class=\"rl\" x=\"", Coord(kPlotLeft + 4), "\" y=\"",
                    Coord(py(r.y) - 4), "\">", Esc(r.label), "</text>");
  }

  // Series: fills first, then lines, then markers and labels on top.
  std::vector<std::string> paths(spec.series.size());
  for (size_t i = 0; i < spec.series.size(); ++i) {
    std::string& d = paths[i];
    for (const auto& [x, y] : spec.series[i].points) {
      if (!Usable(x) || !Usable(y)) continue;
      absl::StrAppend(&d, d.empty() ? "M" : "L", Coord(px(x)), ",", Coord(py(y)));
    }
  }
  absl::StrAppend(&o, "<g clip-path=\"url(#clip", id, ")\">");
  for (size_t i = 0; i < spec.series.size(); ++i) {
    const Series& s = spec.series[i];
    if (!s.fill || paths[i].empty()) continue;
    double first_x = 0, last_x = 0;
    bool first = true;
    for (const auto& [x, y] : s.points) {
      if (!Usable(x) || !Usable(y)) continue;
      if (first) first_x = x;
      first = false;
      last_x = x;
    }
    const double base = py(std::clamp(0.0, ya.lo, ya.hi));
    absl::StrAppend(&o, "<path d=\"M", Coord(px(first_x)), ",", Coord(base), "L",
                    paths[i].substr(1), "L", Coord(px(last_x)), ",", Coord(base), "Z\" fill=\"",
                    s.color, "\" fill-opacity=\"0.12\" stroke=\"none\"/>");
  }
  for (size_t i = 0; i < spec.series.size(); ++i) {
    const Series& s = spec.series[i];
    if (paths[i].empty()) continue;
    absl::StrAppend(&o, "<path d=\"", paths[i], "\" fill=\"none\" stroke=\"", s.color,
                    "\" stroke-width=\"2\" stroke-linejoin=\"round\"",
                    s.dashed ? " stroke-dasharray=\"6 4\"" : "", "/>");
  }
  absl::StrAppend(&o, "</g>");
  for (const Series& s : spec.series) {
    const auto usable = std::count_if(s.points.begin(), s.points.end(), [](const auto& p) {
      return Usable(p.first) && Usable(p.second);
    });
    for (size_t j = 0; j < s.points.size(); ++j) {
      const auto& [x, y] = s.points[j];
      if (!Usable(x) || !Usable(y)) continue;
      if (s.markers || usable == 1) {  // a lone point draws no line
        absl::StrAppend(&o, "<circle cx=\"", Coord(px(x)), "\" cy=\"", Coord(py(y)),
                        "\" r=\"3.5\" fill=\"", s.dashed ? "#fff" : s.color, "\" stroke=\"",
                        s.color, "\" stroke-width=\"1.5\"/>");
      }
      if (j < s.point_labels.size() && !s.point_labels[j].empty()) {
        const bool near_right = px(x) > kPlotLeft + kPlotWidth - 40;  // keep the label inside
        absl::StrAppend(&o, "<text class=\"pl\" x=\"", Coord(px(x) + (near_right ? -6 : 6)),
                        "\" y=\"", Coord(py(y) + 14), "\"",
                        near_right ? " text-anchor=\"end\"" : "", ">", Esc(s.point_labels[j]),
                        "</text>");
      }
    }
  }

  for (const Placed& p : placed) {
    absl::StrAppend(&o, LegendSwatch(p.x, p.y - 4, p.entry.color, p.entry.dashed, p.entry.marker));
    absl::StrAppend(&o, "<text class=\"lg\" x=\"", Coord(p.x + 28), "\" y=\"", Coord(p.y), "\">",
                    Esc(p.text), "</text>");
  }
  absl::StrAppend(&o, "</svg>");
  return o;
}

namespace {

// `color` (#rrggbb) mixed with white: 0 -> white, 1 -> color.
std::string Shade(const std::string& color, double v) {
  const double t = std::clamp(Usable(v) ? v : 0.0, 0.0, 1.0);
  std::string out = "#";
  for (int i = 0; i < 3; ++i) {
    const int c = std::stoi(color.substr(1 + 2 * i, 2), nullptr, 16);
    absl::StrAppend(&out,
                    absl::StrFormat("%02x", static_cast<int>(std::lround(255 - (255 - c) * t))));
  }
  return out;
}

}  // namespace

std::string RenderHeatmap(const HeatmapSpec& spec) {
  const double bottom = kPlotTop + kPlotHeight;
  const double height = bottom + 46;
  std::string o;
  absl::StrAppend(&o, "<svg class=\"chart heatmap\" viewBox=\"0 0 ", Coord(kWidth), " ",
                  Coord(height), "\" role=\"img\" aria-label=\"", Esc(spec.title), "\">");
  absl::StrAppend(&o, "<text class=\"ct\" x=\"", Coord(kPlotLeft - 52), "\" y=\"22\">",
                  Esc(spec.title), "</text>");
  const size_t n = spec.xs.size();
  const size_t rows = spec.rows.size();
  const double y_mid = kPlotTop + kPlotHeight / 2;
  absl::StrAppend(&o, "<text class=\"al\" x=\"", Coord(kPlotLeft + kPlotWidth / 2), "\" y=\"",
                  Coord(bottom + 36), "\" text-anchor=\"middle\">", Esc(spec.x_label), "</text>");
  absl::StrAppend(&o, "<text class=\"al\" x=\"14\" y=\"", Coord(y_mid),
                  "\" text-anchor=\"middle\" transform=\"rotate(-90 14 ", Coord(y_mid), ")\">",
                  Esc(spec.y_label), "</text>");
  if (n == 0 || rows == 0) {
    absl::StrAppend(&o, "<text class=\"empty\" x=\"", Coord(kPlotLeft + kPlotWidth / 2), "\" y=\"",
                    Coord(y_mid + 5), "\" text-anchor=\"middle\">", Esc(spec.empty_text),
                    "</text></svg>");
    return o;
  }
  // Column k spans from xs[k] to xs[k+1] (the last one as wide as the one before it).
  const double x0 = Usable(spec.xs.front()) ? spec.xs.front() : 0;
  double x1 = Usable(spec.xs.back()) ? spec.xs.back() : x0;
  if (n > 1) x1 += (x1 - (Usable(spec.xs[n - 2]) ? spec.xs[n - 2] : x1));
  if (!(x1 > x0)) x1 = x0 + 1;
  auto px = [&](double x) { return kPlotLeft + (x - x0) / (x1 - x0) * kPlotWidth; };
  const double row_h = kPlotHeight / static_cast<double>(rows);
  absl::StrAppend(&o, "<g class=\"cells\">");
  for (size_t r = 0; r < rows; ++r) {
    const double y = bottom - static_cast<double>(r + 1) * row_h;
    for (size_t k = 0; k < n && k < spec.rows[r].size(); ++k) {
      if (!Usable(spec.xs[k])) continue;
      const double left = px(spec.xs[k]);
      const double right = k + 1 < n && Usable(spec.xs[k + 1]) ? px(spec.xs[k + 1]) : px(x1);
      const double v = spec.rows[r][k];
      absl::StrAppend(&o, "<rect class=\"cell\" x=\"", Coord(left), "\" y=\"", Coord(y),
                      "\" width=\"", Coord(std::max(0.5, right - left)), "\" height=\"",
                      Coord(row_h), "\" fill=\"", Shade(spec.color, v), "\"><title>",
                      Esc(absl::StrFormat("t=%.2f s, %s %d: %.1f%%", spec.xs[k], spec.row_name,
                                          static_cast<int>(r), Usable(v) ? 100 * v : 0.0)),
                      "</title></rect>");
    }
  }
  absl::StrAppend(&o, "</g>");
  absl::StrAppend(&o, "<rect class=\"frame\" x=\"", Coord(kPlotLeft), "\" y=\"", Coord(kPlotTop),
                  "\" width=\"", Coord(kPlotWidth), "\" height=\"", Coord(kPlotHeight), "\"/>");
  // Row labels (first, middle, last) and the time axis ends.
  for (size_t r : {size_t{0}, rows / 2, rows - 1}) {
    absl::StrAppend(&o, "<text class=\"tk\" x=\"", Coord(kPlotLeft - 6), "\" y=\"",
                    Coord(bottom - (static_cast<double>(r) + 0.5) * row_h + 4),
                    "\" text-anchor=\"end\">", r, "</text>");
  }
  for (double x : {x0, x1}) {
    absl::StrAppend(&o, "<text class=\"tk\" x=\"", Coord(px(x)), "\" y=\"", Coord(bottom + 16),
                    "\" text-anchor=\"middle\">", absl::StrFormat("%.1f", x), "</text>");
  }
  absl::StrAppend(&o, "</svg>");
  return o;
}

}  // namespace neupims::loadgen
