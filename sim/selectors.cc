#include "sim/selectors.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace fitledger::sim {
namespace {

const std::string* FindLabel(const std::vector<std::pair<std::string, std::string>>& labels,
                             absl::string_view key) {
  auto it = std::lower_bound(labels.begin(), labels.end(), key,
                             [](const auto& kv, absl::string_view k) { return kv.first < k; });
  if (it == labels.end() || it->first != key) return nullptr;
  return &it->second;
}

}  // namespace

absl::StatusOr<FieldSelector> FieldSelector::Parse(absl::string_view text, Kind kind) {
  FieldSelector selector;
  for (absl::string_view term : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    term = absl::StripAsciiWhitespace(term);
    bool equal = true;
    size_t op_pos = term.find("!=");
    size_t value_pos;
    if (op_pos != absl::string_view::npos) {
      equal = false;
      value_pos = op_pos + 2;
    } else if ((op_pos = term.find("==")) != absl::string_view::npos) {
      value_pos = op_pos + 2;
    } else if ((op_pos = term.find('=')) != absl::string_view::npos) {
      value_pos = op_pos + 1;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid selector: '", text, "'; can't understand '", term, "'"));
    }
    absl::string_view name = absl::StripAsciiWhitespace(term.substr(0, op_pos));
    std::string value(absl::StripAsciiWhitespace(term.substr(value_pos)));
    Field field;
    static const std::vector<std::pair<absl::string_view, Field>> kPodFields = {
        {"metadata.name", Field::kName},
        {"metadata.namespace", Field::kNamespace},
        {"spec.nodeName", Field::kNodeName},
        {"spec.host", Field::kNodeName},  // old v1 clients' spelling, converted
        {"spec.restartPolicy", Field::kRestartPolicy},
        {"spec.schedulerName", Field::kSchedulerName},
        {"spec.serviceAccountName", Field::kServiceAccountName},
        {"spec.hostNetwork", Field::kHostNetwork},
        {"status.phase", Field::kPhase},
        {"status.podIP", Field::kPodIp},
        {"status.podIPs", Field::kEmpty},
        {"status.nominatedNodeName", Field::kNominatedNodeName},
    };
    static const std::vector<std::pair<absl::string_view, Field>> kNodeFields = {
        {"metadata.name", Field::kName},
        {"spec.unschedulable", Field::kUnschedulable},
    };
    // Events, deployments, replica sets and leases: the fields every namespaced object has
    // (apiserver pkg/registry/generic/matcher.go ObjectMetaFieldsSet), plus the ones below.
    static const std::vector<std::pair<absl::string_view, Field>> kNamespacedFields = {
        {"metadata.name", Field::kName},
        {"metadata.namespace", Field::kNamespace},
    };
    static const std::vector<absl::string_view> kEventFields = {"involvedObject.kind",
                                                                "involvedObject.namespace",
                                                                "involvedObject.name",
                                                                "involvedObject.uid",
                                                                "involvedObject.apiVersion",
                                                                "involvedObject.resourceVersion",
                                                                "involvedObject.fieldPath",
                                                                "reason",
                                                                "reportingComponent",
                                                                "source",
                                                                "type"};
    const auto& known = kind == Kind::kPod    ? kPodFields
                        : kind == Kind::kNode ? kNodeFields
                                              : kNamespacedFields;
    auto found = std::find_if(known.begin(), known.end(),
                              [&](const auto& entry) { return entry.first == name; });
    if (found != known.end()) {
      field = found->second;
    } else if ((kind == Kind::kEvent &&
                std::find(kEventFields.begin(), kEventFields.end(), name) != kEventFields.end()) ||
               (kind == Kind::kReplicaSet && name == "status.replicas")) {
      field = Field::kOther;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("field label not supported: ", name));
    }
    selector.terms_.push_back(
        Term{field, equal, std::move(value), field == Field::kOther ? std::string(name) : ""});
  }
  return selector;
}

bool FieldSelector::Matches(const ObjectFields& fields) const {
  static const std::string kEmptyValue;
  static const std::string kTrue = "true";
  static const std::string kFalse = "false";
  for (const Term& term : terms_) {
    const std::string* actual = &kEmptyValue;
    switch (term.field) {
      case Field::kName:
        actual = &fields.name;
        break;
      case Field::kNamespace:
        actual = &fields.namespace_name;
        break;
      case Field::kNodeName:
        actual = &fields.node_name;
        break;
      case Field::kPhase:
        actual = &fields.phase;
        break;
      case Field::kSchedulerName:
        actual = &fields.scheduler_name;
        break;
      case Field::kRestartPolicy:
        actual = &fields.restart_policy;
        break;
      case Field::kServiceAccountName:
        actual = &fields.service_account_name;
        break;
      case Field::kHostNetwork:
        actual = fields.host_network ? &kTrue : &kFalse;
        break;
      case Field::kPodIp:
        actual = &fields.pod_ip;
        break;
      case Field::kNominatedNodeName:
        actual = &fields.nominated_node_name;
        break;
      case Field::kUnschedulable:
        actual = fields.unschedulable ? &kTrue : &kFalse;
        break;
      case Field::kEmpty:
        break;
      case Field::kOther:
        if (const std::string* v = FindLabel(fields.other, term.name); v != nullptr) actual = v;
        break;
    }
    if ((*actual == term.value) != term.equal) return false;
  }
  return true;
}

namespace {

// The terms of a label selector: split at the commas outside parentheses.
std::vector<absl::string_view> LabelTerms(absl::string_view text) {
  std::vector<absl::string_view> terms;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || (text[i] == ',' && depth == 0)) {
      absl::string_view term = absl::StripAsciiWhitespace(text.substr(start, i - start));
      if (!term.empty()) terms.push_back(term);
      start = i + 1;
    } else if (text[i] == '(') {
      ++depth;
    } else if (text[i] == ')') {
      --depth;
    }
  }
  return terms;
}

}  // namespace

absl::StatusOr<LabelSelector> LabelSelector::Parse(absl::string_view text) {
  LabelSelector selector;
  for (absl::string_view term : LabelTerms(text)) {
    Term t;
    size_t pos;
    if (const size_t open = term.find('('); open != absl::string_view::npos) {
      // Set-based: `key in (v1,v2)`, `key notin (v1,v2)` (apimachinery pkg/labels/selector.go:
      // In is "the key exists with one of the values", NotIn "the key is absent or has none of
      // them"; the set may not be empty).
      absl::string_view head = absl::StripAsciiWhitespace(term.substr(0, open));
      const size_t space = head.find_first_of(" \t");
      if (space == absl::string_view::npos || term.back() != ')') {
        return absl::InvalidArgumentError(
            absl::StrCat("unable to parse requirement: '", term, "'"));
      }
      t.key = std::string(head.substr(0, space));
      const absl::string_view op = absl::StripAsciiWhitespace(head.substr(space));
      if (op == "in") {
        t.op = Op::kIn;
      } else if (op == "notin") {
        t.op = Op::kNotIn;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("unable to parse requirement: '", term, "'"));
      }
      // `()` is the empty set; otherwise every member counts, empty ones as "" (selector.go
      // parseIdentifiersList: `k in (a,)` is {a, ""}).
      const absl::string_view inside =
          absl::StripAsciiWhitespace(term.substr(open + 1, term.size() - open - 2));
      for (absl::string_view v : absl::StrSplit(inside, ',')) {
        if (inside.empty()) break;
        v = absl::StripAsciiWhitespace(v);
        if (v.find_first_of(" \t!=()") != absl::string_view::npos) {
          return absl::InvalidArgumentError(
              absl::StrCat("unable to parse requirement: '", term, "'"));
        }
        t.values.emplace_back(v);
      }
      if (t.values.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("unable to parse requirement: for 'in', 'notin' operators, values set "
                         "can't be empty: '",
                         term, "'"));
      }
      if (t.key.find_first_of(" \t!=()") != std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("unable to parse requirement: '", term, "'"));
      }
      selector.terms_.push_back(std::move(t));
      continue;
    }
    if ((pos = term.find("!=")) != absl::string_view::npos) {
      t.op = Op::kNotEqual;
      t.key = std::string(term.substr(0, pos));
      t.value = std::string(term.substr(pos + 2));
    } else if ((pos = term.find("==")) != absl::string_view::npos) {
      t.op = Op::kEqual;
      t.key = std::string(term.substr(0, pos));
      t.value = std::string(term.substr(pos + 2));
    } else if ((pos = term.find('=')) != absl::string_view::npos) {
      t.op = Op::kEqual;
      t.key = std::string(term.substr(0, pos));
      t.value = std::string(term.substr(pos + 1));
    } else if (absl::StartsWith(term, "!")) {
      t.op = Op::kNotExists;
      t.key = std::string(term.substr(1));
    } else {
      t.op = Op::kExists;
      t.key = std::string(term);
    }
    absl::StripAsciiWhitespace(&t.key);
    absl::StripAsciiWhitespace(&t.value);
    if (t.key.empty() || t.key.find_first_of(" \t!=()") != std::string::npos ||
        t.value.find_first_of(" \t!=()") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("unable to parse requirement: '", term, "'"));
    }
    selector.terms_.push_back(std::move(t));
  }
  return selector;
}

bool LabelSelector::Matches(const std::vector<std::pair<std::string, std::string>>& labels) const {
  for (const Term& term : terms_) {
    const std::string* value = FindLabel(labels, term.key);
    switch (term.op) {
      case Op::kEqual:
        if (value == nullptr || *value != term.value) return false;
        break;
      case Op::kIn:
        if (value == nullptr ||
            std::find(term.values.begin(), term.values.end(), *value) == term.values.end()) {
          return false;
        }
        break;
      case Op::kNotIn:
        if (value != nullptr &&
            std::find(term.values.begin(), term.values.end(), *value) != term.values.end()) {
          return false;
        }
        break;
      case Op::kNotEqual:
        if (value != nullptr && *value == term.value) return false;
        break;
      case Op::kExists:
        if (value == nullptr) return false;
        break;
      case Op::kNotExists:
        if (value != nullptr) return false;
        break;
    }
  }
  return true;
}

}  // namespace fitledger::sim
