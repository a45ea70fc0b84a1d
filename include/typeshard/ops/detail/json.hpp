// typeshard/ops/detail/json.hpp: the little JSON that checkpoints need: a value type (null,
// bool, integer, string, array, object), a writer and a strict parser. Numbers are unsigned
// integers only (extents, offsets, steps), which is all a checkpoint's index and safetensors
// headers hold. Malformed input throws json_error with the offset it stopped at.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace typeshard::checkpoint::detail {

struct json_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// json: one value. Objects keep their keys sorted (std::map), which makes output canonical.
struct json {
  enum class kind { null, boolean, integer, string, array, object };
  kind k = kind::null;
  bool b = false;
  std::uint64_t n = 0;
  std::string s;
  std::vector<json> items;
  std::map<std::string, json> fields;

  json() = default;
  json(bool v) : k(kind::boolean), b(v) {}                                  // NOLINT
  json(std::uint64_t v) : k(kind::integer), n(v) {}                         // NOLINT
  json(std::string v) : k(kind::string), s(std::move(v)) {}                 // NOLINT
  json(const char* v) : k(kind::string), s(v) {}                            // NOLINT
  static json array() {
    json j;
    j.k = kind::array;
    return j;
  }
  static json object() {
    json j;
    j.k = kind::object;
    return j;
  }

  // Object member access that throws json_error when missing or of the wrong kind.
  const json& at(const std::string& key) const {
    if (k != kind::object) throw json_error("expected an object holding \"" + key + "\"");
    const auto it = fields.find(key);
    if (it == fields.end()) throw json_error("missing \"" + key + "\"");
    return it->second;
  }
  bool has(const std::string& key) const { return k == kind::object && fields.count(key) != 0; }
  std::uint64_t integer() const {
    if (k != kind::integer) throw json_error("expected an integer");
    return n;
  }
  const std::string& string() const {
    if (k != kind::string) throw json_error("expected a string");
    return s;
  }
  const std::vector<json>& list() const {
    if (k != kind::array) throw json_error("expected an array");
    return items;
  }
};

inline void write_string(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      out += "\\u00";
      out += hex[u >> 4];
      out += hex[u & 0xF];
    } else {
      out += c;
    }
  }
  out += '"';
}

// to_json(v): compact text, object keys in sorted order.
inline void write_json(std::string& out, const json& v) {
  switch (v.k) {
    case json::kind::null: out += "null"; break;
    case json::kind::boolean: out += v.b ? "true" : "false"; break;
    case json::kind::integer: out += std::to_string(v.n); break;
    case json::kind::string: write_string(out, v.s); break;
    case json::kind::array: {
      out += '[';
      for (std::size_t i = 0; i < v.items.size(); ++i) {
        if (i) out += ',';
        write_json(out, v.items[i]);
      }
      out += ']';
      break;
    }
    case json::kind::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, value] : v.fields) {
        if (!first) out += ',';
        first = false;
        write_string(out, key);
        out += ':';
        write_json(out, value);
      }
      out += '}';
      break;
    }
  }
}

inline std::string to_json(const json& v) {
  std::string out;
  write_json(out, v);
  return out;
}

class json_parser {
 public:
  explicit json_parser(std::string_view text) : t_(text) {}

  json parse_document() {
    json v = parse_value(0);
    skip_space();
    if (i_ != t_.size()) fail("text after the value");
    return v;
  }

 private:
  std::string_view t_;
  std::size_t i_ = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw json_error("malformed JSON at byte " + std::to_string(i_) + ": " + what);
  }
  void skip_space() {
    while (i_ < t_.size() &&
           (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\r' || t_[i_] == '\t'))
      ++i_;
  }
  bool take(char c) {
    skip_space();
    if (i_ < t_.size() && t_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!take(c)) fail(std::string("expected '") + c + "'");
  }
  bool take_word(std::string_view w) {
    if (t_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }

  std::string parse_string() {
    expect('"');
    std::string out;
    while (true) {
      if (i_ >= t_.size()) fail("unterminated string");
      const char c = t_[i_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= t_.size()) fail("unterminated escape");
      const char e = t_[i_++];
      switch (e) {
        case '"': case '\\': case '/': out += e; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          if (i_ + 4 > t_.size()) fail("short \\u escape");
          unsigned cp = 0;
          for (int d = 0; d < 4; ++d) {
            const char h = t_[i_++];
            cp <<= 4;
            if (h >= '0' && h <= '9') cp |= unsigned(h - '0');
            else if (h >= 'a' && h <= 'f') cp |= unsigned(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F') cp |= unsigned(h - 'A' + 10);
            else fail("bad \\u escape");
          }
          if (cp >= 0x80) fail("non-ASCII \\u escapes are not supported");
          out += static_cast<char>(cp);
          break;
        }
        default: fail("bad escape");
      }
    }
  }

  json parse_value(int depth) {
    if (depth > 64) fail("nested too deeply");
    skip_space();
    if (i_ >= t_.size()) fail("unexpected end");
    const char c = t_[i_];
    if (c == '"') return json(parse_string());
    if (c == '{') {
      ++i_;
      json o = json::object();
      if (take('}')) return o;
      do {
        skip_space();
        std::string key = parse_string();
        expect(':');
        o.fields[std::move(key)] = parse_value(depth + 1);
      } while (take(','));
      expect('}');
      return o;
    }
    if (c == '[') {
      ++i_;
      json a = json::array();
      if (take(']')) return a;
      do a.items.push_back(parse_value(depth + 1));
      while (take(','));
      expect(']');
      return a;
    }
    if (take_word("true")) return json(true);
    if (take_word("false")) return json(false);
    if (take_word("null")) return json();
    if (c >= '0' && c <= '9') {
      std::uint64_t v = 0;
      while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') {
        const std::uint64_t d = std::uint64_t(t_[i_++] - '0');
        if (v > (UINT64_MAX - d) / 10) fail("integer too large");
        v = v * 10 + d;
      }
      if (i_ < t_.size() && (t_[i_] == '.' || t_[i_] == 'e' || t_[i_] == 'E'))
        fail("only unsigned integers are supported");
      return json(v);
    }
    fail("unexpected character");
  }
};

inline json parse_json(std::string_view text) { return json_parser(text).parse_document(); }

}  // namespace typeshard::checkpoint::detail
