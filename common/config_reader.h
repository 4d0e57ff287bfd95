// Strict reader for the project's JSON configuration files.
//
// Role: every hardware / model parameter is data under configs/. This reader turns a JSON
// document into typed values and refuses anything it was not asked for, so a typo in a field
// name is an error rather than a silently ignored default.
//
// Contract:
//  - Every error names the source (file path or builtin name) and the dotted field path,
//    e.g. "configs/devices/neupims.json: field 'hbm.timing_cycles.tRCD': expected an integer
//    >= 1, got -3".
//  - Accessors return the parsed value (or the fallback on error) and record errors; call
//    Finish() on each object (reports unknown fields) and then ConfigDocument::status() once.
//  - A ConfigObject is a view into its ConfigDocument and must not outlive it. Not thread-safe.
#ifndef NEUPIMS_COMMON_CONFIG_READER_H_
#define NEUPIMS_COMMON_CONFIG_READER_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json_fwd.hpp"  // nlohmann::ordered_json

namespace neupims {

class ConfigDocument;

// Deepest nesting of arrays and objects ParseStrictJson accepts. Our inputs nest a few levels;
// a bound keeps a hostile document (100,000 nested arrays) from exhausting the stack of the
// recursive code that copies, prints or walks a parsed document.
inline constexpr int kMaxJsonDepth = 64;

// Parses `text` as one JSON value, strictly: a duplicate key in an object, a number too large
// for a double (1e400) and any syntax error are InvalidArgument errors naming `source` (when
// not empty) and the key path, e.g. "dev.json: duplicate key 'hbm.channels'". No nlohmann
// exception escapes. Every JSON input of the project (configs, trace JSONL) is parsed here.
absl::Status ParseStrictJson(absl::string_view text, absl::string_view source,
                             nlohmann::ordered_json* out);

struct IntRange {
  int64_t min = std::numeric_limits<int64_t>::min();
  int64_t max = std::numeric_limits<int64_t>::max();
};

// Values outside, NaN and infinities are refused. common/option_ranges.h holds the table of
// ranges shared by CLI flags and config files.
struct DoubleRange {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_exclusive = false;  // "> min" rather than ">= min"
};

// A view of one JSON object inside a document.
class ConfigObject {
 public:
  // Required fields: a missing field is an error.
  int64_t Int(absl::string_view key, IntRange range = {});
  double Double(absl::string_view key, DoubleRange range = {});
  bool Bool(absl::string_view key);
  std::string String(absl::string_view key);
  // A string that must be one of `allowed`; the error lists the allowed values.
  std::string Enum(absl::string_view key, const std::vector<std::string>& allowed);

  // Optional fields: absent -> `fallback`, present but wrong -> error.
  int64_t OptionalInt(absl::string_view key, int64_t fallback, IntRange range = {});
  double OptionalDouble(absl::string_view key, double fallback, DoubleRange range = {});
  bool OptionalBool(absl::string_view key, bool fallback);
  std::string OptionalString(absl::string_view key, std::string fallback);
  std::string OptionalEnum(absl::string_view key, std::string fallback,
                           const std::vector<std::string>& allowed);

  // Arrays (required; test Has() first for an optional one). Each element is checked like a
  // scalar field and an error names it by index, e.g. "input.shape[1]" or "layers[3].kernel".
  std::vector<int64_t> IntList(absl::string_view key, IntRange range = {});
  std::vector<std::string> StringList(absl::string_view key);
  // An array of objects: one view per element, with path "key[i]"; call Finish() on each. A
  // non-object element is an error and yields an empty view (so indices stay aligned). With a
  // `label_key`, an element holding a string field of that name is labelled by it instead, so
  // errors read "layers[conv1].kernel" rather than "layers[1].kernel".
  std::vector<ConfigObject> Objects(absl::string_view key, absl::string_view label_key = "");

  bool Has(absl::string_view key) const;
  // Nested object. A missing or non-object field is an error and yields an empty view.
  ConfigObject Child(absl::string_view key);
  // The keys of this object, in document order (for maps such as per-op tables).
  std::vector<std::string> Keys() const;

  // Records an error for `key` (used by callers for cross-field validation).
  void Error(absl::string_view key, absl::string_view message);
  // Reports every field present in the object that no accessor asked for.
  void Finish();

  const std::string& path() const { return path_; }

 private:
  friend class ConfigDocument;
  ConfigObject(ConfigDocument* doc, const nlohmann::ordered_json* json, std::string path);
  const nlohmann::ordered_json* Lookup(absl::string_view key, bool required);
  // The array at `key`, or null (with an error) when it is missing or not an array.
  const nlohmann::ordered_json* LookupArray(absl::string_view key);
  std::string FieldPath(absl::string_view key) const;

  ConfigDocument* doc_;
  const nlohmann::ordered_json* json_;  // null when this view stands for a missing/invalid object
  std::string path_;
  std::set<std::string, std::less<>> consumed_;
};

// A parsed JSON document and the errors found while reading it.
class ConfigDocument {
 public:
  static absl::StatusOr<std::unique_ptr<ConfigDocument>> FromFile(const std::string& path);
  static absl::StatusOr<std::unique_ptr<ConfigDocument>> FromString(absl::string_view text,
                                                                    std::string source);
  ~ConfigDocument();

  ConfigObject Root();
  const std::string& source() const { return source_; }

  // OK if no accessor recorded an error, else InvalidArgument listing every error.
  absl::Status status() const;

 private:
  friend class ConfigObject;
  ConfigDocument(std::unique_ptr<nlohmann::ordered_json> json, std::string source);
  void AddError(std::string message);

  std::unique_ptr<nlohmann::ordered_json> json_;
  std::string source_;
  std::vector<std::string> errors_;
};

}  // namespace neupims

#endif  // NEUPIMS_COMMON_CONFIG_READER_H_
