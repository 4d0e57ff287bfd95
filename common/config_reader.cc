#include "common/config_reader.h"

#include <cmath>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_io.h"
#include "common/option_ranges.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace neupims {
namespace {

// Objects keep their keys in document order (Keys() promises it).
using Json = nlohmann::ordered_json;

std::string Describe(const Json& j) {
  std::string s = j.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// A SAX handler building the document itself, so it sees every key (duplicates are refused)
// and every number error (an overflow is refused with its key path instead of thrown).
class StrictSax {
 public:
  explicit StrictSax(Json* root) : root_(root) {}

  bool null() { return Put(Json(nullptr)); }
  bool boolean(bool b) { return Put(Json(b)); }
  bool number_integer(Json::number_integer_t v) { return Put(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return Put(Json(v)); }
  bool number_float(Json::number_float_t v, const Json::string_t& /*text*/) {
    if (!std::isfinite(v)) return Fail(absl::StrCat("number out of range at ", Where()));
    return Put(Json(v));
  }
  bool string(Json::string_t& s) { return Put(Json(std::move(s))); }
  bool binary(Json::binary_t& /*b*/) { return Fail("binary values are not JSON"); }
  bool start_object(std::size_t /*n*/) { return Open(Json::object()); }
  bool start_array(std::size_t /*n*/) { return Open(Json::array()); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool key(Json::string_t& k) {
    Frame& top = stack_.back();
    if (!top.keys.insert(k).second) {
      top.key = k;
      return Fail(absl::StrCat("duplicate key '", Path(), "'"));
    }
    top.key = std::move(k);
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& e) {
    if (error_.empty()) {
      error_ = e.id == 406 ? absl::StrCat("number out of range at ", Where(), " (", e.what(), ")")
                           : absl::StrCat("invalid JSON: ", e.what());
    }
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  struct Frame {
    Json* node;
    std::string key;  // the pending key (objects)
    std::unordered_set<std::string> keys;
  };

  bool Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }
  // The dotted path of the value being parsed, e.g. "hbm.channels" or "layers[2].kernel".
  std::string Path() const {
    std::string path;
    for (size_t i = 0; i < stack_.size(); ++i) {
      const Frame& f = stack_[i];
      if (f.node->is_array()) {
        // An enclosing array already holds the element being parsed; the innermost does not.
        const size_t index = f.node->size() - (i + 1 < stack_.size() ? 1 : 0);
        absl::StrAppend(&path, "[", index, "]");
      } else {
        absl::StrAppend(&path, path.empty() ? "" : ".", f.key);
      }
    }
    return path;
  }
  std::string Where() const {
    const std::string path = Path();
    return path.empty() ? std::string("top level") : absl::StrCat("field '", path, "'");
  }
  Json* Insert(Json value) {
    if (stack_.empty()) {
      *root_ = std::move(value);
      return root_;
    }
    Json& top = *stack_.back().node;
    if (top.is_array()) {
      top.push_back(std::move(value));
      return &top.back();
    }
    Json& slot = top[stack_.back().key];
    slot = std::move(value);
    return &slot;
  }
  bool Put(Json value) {
    Insert(std::move(value));
    return true;
  }
  bool Open(Json value) {
    if (stack_.size() >= static_cast<size_t>(kMaxJsonDepth)) {
      return Fail(absl::StrCat("JSON nested deeper than ", kMaxJsonDepth, " levels at ", Where()));
    }
    Json* node = Insert(std::move(value));
    stack_.push_back(Frame{node, "", {}});
    return true;
  }
  bool Close() {
    stack_.pop_back();
    return true;
  }

  Json* root_;
  std::vector<Frame> stack_;
  std::string error_;
};

}  // namespace

absl::Status ParseStrictJson(absl::string_view text, absl::string_view source, Json* out) {
  const std::string prefix = source.empty() ? "" : absl::StrCat(source, ": ");
  *out = Json();
  StrictSax sax(out);
  bool ok = false;
  try {
    ok = Json::sax_parse(text, &sax, nlohmann::detail::input_format_t::json, /*strict=*/true,
                         /*ignore_comments=*/false);
  } catch (const Json::exception& e) {  // defensive: the handler reports, but never let one out
    return absl::InvalidArgumentError(absl::StrCat(prefix, "invalid JSON: ", e.what()));
  }
  if (!ok) {
    *out = Json();
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, sax.error().empty() ? "invalid JSON" : sax.error()));
  }
  return absl::OkStatus();
}

ConfigObject::ConfigObject(ConfigDocument* doc, const Json* json, std::string path)
    : doc_(doc), json_(json), path_(std::move(path)) {}

std::string ConfigObject::FieldPath(absl::string_view key) const {
  return path_.empty() ? std::string(key) : absl::StrCat(path_, ".", key);
}

void ConfigObject::Error(absl::string_view key, absl::string_view message) {
  doc_->AddError(absl::StrCat(doc_->source(), ": field '", FieldPath(key), "': ", message));
}

bool ConfigObject::Has(absl::string_view key) const {
  return json_ != nullptr && json_->contains(key);
}

const Json* ConfigObject::Lookup(absl::string_view key, bool required) {
  consumed_.emplace(key);
  if (json_ == nullptr) return nullptr;  // parent already reported
  auto it = json_->find(key);
  if (it == json_->end()) {
    if (required) {
      doc_->AddError(
          absl::StrCat(doc_->source(), ": missing required field '", FieldPath(key), "'"));
    }
    return nullptr;
  }
  return &*it;
}

namespace {
bool ReadInt(const Json& j, int64_t* out) {
  if (j.is_number_unsigned()) {  // may exceed INT64_MAX: never wrap
    const uint64_t u = j.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    *out = static_cast<int64_t>(u);
    return true;
  }
  if (j.is_number_integer()) {
    *out = j.get<int64_t>();
    return true;
  }
  if (j.is_number_float()) {  // accept 4.0 but not 4.5; stay inside int64 before casting
    const double d = j.get<double>();
    if (!(d >= -9.2233720368547758e18 && d < 9.2233720368547758e18)) return false;
    if (d == std::trunc(d)) {
      *out = static_cast<int64_t>(d);
      return true;
    }
  }
  return false;
}

std::string DescribeIntRange(IntRange range) {
  std::string want = "an integer";
  if (range.min != std::numeric_limits<int64_t>::min()) absl::StrAppend(&want, " >= ", range.min);
  if (range.max != std::numeric_limits<int64_t>::max()) absl::StrAppend(&want, " <= ", range.max);
  return want;
}
}  // namespace

int64_t ConfigObject::Int(absl::string_view key, IntRange range) {
  const Json* j = Lookup(key, /*required=*/true);
  if (j == nullptr) return range.min > 0 ? range.min : 0;
  int64_t v = 0;
  if (!ReadInt(*j, &v) || v < range.min || v > range.max) {
    Error(key, absl::StrCat("expected ", DescribeIntRange(range), ", got ", Describe(*j)));
    return range.min > 0 ? range.min : 0;
  }
  return v;
}

double ConfigObject::Double(absl::string_view key, DoubleRange range) {
  const Json* j = Lookup(key, /*required=*/true);
  if (j == nullptr) return range.min > 0 ? range.min : 0.0;
  if (!j->is_number() || !DoubleRangeProblem(j->get<double>(), range).empty()) {
    std::string want = "a number";
    if (range.min > -std::numeric_limits<double>::infinity()) {
      absl::StrAppend(&want, range.min_exclusive ? " > " : " >= ", range.min);
    }
    if (range.max < std::numeric_limits<double>::infinity()) {
      absl::StrAppend(&want, " <= ", range.max);
    }
    Error(key, absl::StrCat("expected ", want, ", got ", Describe(*j)));
    return range.min > 0 ? range.min : 0.0;
  }
  return j->get<double>();
}

bool ConfigObject::Bool(absl::string_view key) {
  const Json* j = Lookup(key, /*required=*/true);
  if (j == nullptr) return false;
  if (!j->is_boolean()) {
    Error(key, absl::StrCat("expected true or false, got ", Describe(*j)));
    return false;
  }
  return j->get<bool>();
}

std::string ConfigObject::String(absl::string_view key) {
  const Json* j = Lookup(key, /*required=*/true);
  if (j == nullptr) return "";
  if (!j->is_string()) {
    Error(key, absl::StrCat("expected a string, got ", Describe(*j)));
    return "";
  }
  return j->get<std::string>();
}

std::string ConfigObject::Enum(absl::string_view key, const std::vector<std::string>& allowed) {
  const Json* j = Lookup(key, /*required=*/true);
  if (j == nullptr) return allowed.empty() ? "" : allowed.front();
  if (!j->is_string()) {
    Error(key,
          absl::StrCat("expected one of {", absl::StrJoin(allowed, ", "), "}, got ", Describe(*j)));
    return allowed.empty() ? "" : allowed.front();
  }
  std::string v = j->get<std::string>();
  for (const auto& a : allowed) {
    if (a == v) return v;
  }
  Error(key, absl::StrCat("expected one of {", absl::StrJoin(allowed, ", "), "}, got \"", v, "\""));
  return allowed.empty() ? "" : allowed.front();
}

int64_t ConfigObject::OptionalInt(absl::string_view key, int64_t fallback, IntRange range) {
  if (!Has(key)) {
    consumed_.emplace(key);
    return fallback;
  }
  return Int(key, range);
}

double ConfigObject::OptionalDouble(absl::string_view key, double fallback, DoubleRange range) {
  if (!Has(key)) {
    consumed_.emplace(key);
    return fallback;
  }
  return Double(key, range);
}

bool ConfigObject::OptionalBool(absl::string_view key, bool fallback) {
  if (!Has(key)) {
    consumed_.emplace(key);
    return fallback;
  }
  return Bool(key);
}

std::string ConfigObject::OptionalString(absl::string_view key, std::string fallback) {
  if (!Has(key)) {
    consumed_.emplace(key);
    return fallback;
  }
  return String(key);
}

std::string ConfigObject::OptionalEnum(absl::string_view key, std::string fallback,
                                       const std::vector<std::string>& allowed) {
  if (!Has(key)) {
    consumed_.emplace(key);
    return fallback;
  }
  return Enum(key, allowed);
}

ConfigObject ConfigObject::Child(absl::string_view key) {
  const Json* j = Lookup(key, /*required=*/true);
  if (j != nullptr && !j->is_object()) {
    Error(key, absl::StrCat("expected an object, got ", Describe(*j)));
    j = nullptr;
  }
  return ConfigObject(doc_, j, FieldPath(key));
}

const Json* ConfigObject::LookupArray(absl::string_view key) {
  const Json* j = Lookup(key, /*required=*/true);
  if (j != nullptr && !j->is_array()) {
    Error(key, absl::StrCat("expected an array, got ", Describe(*j)));
    return nullptr;
  }
  return j;
}

std::vector<int64_t> ConfigObject::IntList(absl::string_view key, IntRange range) {
  std::vector<int64_t> values;
  const Json* array = LookupArray(key);
  if (array == nullptr) return values;
  for (size_t i = 0; i < array->size(); ++i) {
    int64_t v = 0;
    const Json& element = (*array)[i];
    if (!ReadInt(element, &v) || v < range.min || v > range.max) {
      Error(absl::StrCat(key, "[", i, "]"),
            absl::StrCat("expected ", DescribeIntRange(range), ", got ", Describe(element)));
      v = range.min > 0 ? range.min : 0;
    }
    values.push_back(v);
  }
  return values;
}

std::vector<std::string> ConfigObject::StringList(absl::string_view key) {
  std::vector<std::string> values;
  const Json* array = LookupArray(key);
  if (array == nullptr) return values;
  for (size_t i = 0; i < array->size(); ++i) {
    const Json& element = (*array)[i];
    if (!element.is_string()) {
      Error(absl::StrCat(key, "[", i, "]"),
            absl::StrCat("expected a string, got ", Describe(element)));
      values.emplace_back();
      continue;
    }
    values.push_back(element.get<std::string>());
  }
  return values;
}

std::vector<ConfigObject> ConfigObject::Objects(absl::string_view key,
                                                absl::string_view label_key) {
  std::vector<ConfigObject> objects;
  const Json* array = LookupArray(key);
  if (array == nullptr) return objects;
  for (size_t i = 0; i < array->size(); ++i) {
    const Json* element = &(*array)[i];
    std::string element_key = absl::StrCat(key, "[", i, "]");
    if (!element->is_object()) {
      Error(element_key, absl::StrCat("expected an object, got ", Describe(*element)));
      element = nullptr;
    } else if (!label_key.empty()) {
      auto label = element->find(label_key);
      if (label != element->end() && label->is_string() && !label->get<std::string>().empty()) {
        element_key = absl::StrCat(key, "[", label->get<std::string>(), "]");
      }
    }
    objects.push_back(ConfigObject(doc_, element, FieldPath(element_key)));
  }
  return objects;
}

std::vector<std::string> ConfigObject::Keys() const {
  std::vector<std::string> keys;
  if (json_ == nullptr) return keys;
  for (auto it = json_->begin(); it != json_->end(); ++it) keys.push_back(it.key());
  return keys;
}

void ConfigObject::Finish() {
  if (json_ == nullptr) return;
  for (auto it = json_->begin(); it != json_->end(); ++it) {
    if (consumed_.find(it.key()) == consumed_.end()) {
      doc_->AddError(absl::StrCat(doc_->source(), ": unknown field '", FieldPath(it.key()), "'"));
    }
  }
}

ConfigDocument::ConfigDocument(std::unique_ptr<Json> json, std::string source)
    : json_(std::move(json)), source_(std::move(source)) {}

ConfigDocument::~ConfigDocument() = default;

absl::StatusOr<std::unique_ptr<ConfigDocument>> ConfigDocument::FromFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadInputFile(path, kMaxConfigFileBytes));
  return FromString(text, path);
}

absl::StatusOr<std::unique_ptr<ConfigDocument>> ConfigDocument::FromString(absl::string_view text,
                                                                           std::string source) {
  auto json = std::make_unique<Json>();
  RETURN_IF_ERROR(ParseStrictJson(text, source, json.get()));
  if (!json->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": expected a JSON object at top level"));
  }
  return std::unique_ptr<ConfigDocument>(new ConfigDocument(std::move(json), std::move(source)));
}

ConfigObject ConfigDocument::Root() { return ConfigObject(this, json_.get(), ""); }

void ConfigDocument::AddError(std::string message) { errors_.push_back(std::move(message)); }

absl::Status ConfigDocument::status() const {
  if (errors_.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors_, "\n"));
}

}  // namespace neupims
