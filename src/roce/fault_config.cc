#include "roce/fault_config.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <iterator>
#include <set>
#include <tuple>

namespace softverbs::roce {
namespace {

bool ParseFraction(std::string_view key, std::string_view value, double* out, std::string* error) {
  double v = -1;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size() ||
      !(v >= 0 && v <= 1)) {
    *error = std::string(key) + "=" + std::string(value) + ": not a fraction between 0 and 1";
    return false;
  }
  *out = v;
  return true;
}

template <typename T>
bool ParseInteger(std::string_view key, std::string_view value, T* out, std::string* error) {
  T v{};
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size()) {
    *error = std::string(key) + "=" + std::string(value) + ": not a non-negative integer";
    return false;
  }
  *out = v;
  return true;
}

// The CM MAD kinds cm_drop names, in attribute id order from 0x10.
constexpr std::string_view kCmKinds[] = {"req",  "mra",  "rej",      "rep",     "rtu",
                                         "dreq", "drep", "sidr_req", "sidr_rep"};
static_assert(std::size(kCmKinds) == std::tuple_size_v<decltype(FaultConfig::cm_drop)>);

bool ParseCmDrop(std::string_view value, FaultConfig* out, std::string* error) {
  while (!value.empty()) {
    const size_t plus = value.find('+');
    std::string_view item = value.substr(0, plus);
    value = plus == std::string_view::npos ? std::string_view() : value.substr(plus + 1);
    uint32_t count = 1;
    if (const size_t colon = item.find(':'); colon != std::string_view::npos) {
      if (!ParseInteger("cm_drop", item.substr(colon + 1), &count, error)) return false;
      item = item.substr(0, colon);
    }
    const auto* kind = std::find(std::begin(kCmKinds), std::end(kCmKinds), item);
    if (kind == std::end(kCmKinds)) {
      *error = "cm_drop: unknown CM message '" + std::string(item) +
               "' (req, mra, rej, rep, rtu, dreq, drep, sidr_req, sidr_rep)";
      return false;
    }
    out->cm_drop[kind - std::begin(kCmKinds)] = count;
  }
  return true;
}

}  // namespace

bool ParseFaultConfig(std::string_view text, FaultConfig* out, std::string* error) {
  *out = FaultConfig{};
  std::set<std::string_view> seen;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (item.empty()) continue;  // "drop=0.1," or ",,"
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      *error = std::string(item) + ": expected key=value";
      return false;
    }
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    if (!seen.insert(key).second) {
      *error = std::string(key) + ": given twice";
      return false;
    }
    bool ok;
    if (key == "drop") {
      ok = ParseFraction(key, value, &out->drop, error);
    } else if (key == "dup") {
      ok = ParseFraction(key, value, &out->dup, error);
    } else if (key == "reorder") {
      ok = ParseFraction(key, value, &out->reorder, error);
    } else if (key == "delay") {
      ok = ParseFraction(key, value, &out->delay, error);
    } else if (key == "corrupt") {
      ok = ParseFraction(key, value, &out->corrupt, error);
    } else if (key == "delay_us") {
      ok = ParseInteger(key, value, &out->delay_us, error);
    } else if (key == "seed") {
      ok = ParseInteger(key, value, &out->seed, error);
    } else if (key == "cm_drop") {
      ok = ParseCmDrop(value, out, error);
    } else {
      *error = std::string(key) +
               ": unknown key (drop, dup, reorder, delay, corrupt, delay_us, seed, cm_drop)";
      return false;
    }
    if (!ok) return false;
  }
  const double sum = out->drop + out->dup + out->reorder + out->delay + out->corrupt;
  if (sum > 1 + 1e-12) {
    *error = "the fractions add up to " + std::to_string(sum) +
             ": each packet suffers at most one fault, so at most 1";
    return false;
  }
  return true;
}

bool FaultConfigFromEnvironment(FaultConfig* out, std::string* error) {
  const char* text = std::getenv(kFaultsEnvironmentVariable);
  if (!text) {
    *out = FaultConfig{};
    return true;
  }
  if (!ParseFaultConfig(text, out, error)) {
    *error = std::string(kFaultsEnvironmentVariable) + ": " + *error;
    return false;
  }
  return true;
}

}  // namespace softverbs::roce
