#include "sim/tables.h"

#include <cctype>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/json_access.h"
#include "sim/objects.h"

namespace fitledger::sim {

using nlohmann::json;

namespace {

const json& Child(const json& j, const char* key) {
  static const json kEmpty = json::object();
  if (!j.is_object()) return kEmpty;
  auto it = j.find(key);
  return it == j.end() ? kEmpty : *it;
}

std::string Str(const json& j, const char* key, const std::string& fallback = "") {
  const json& v = Child(j, key);
  return v.is_string() && !v.get<std::string>().empty() ? v.get<std::string>() : fallback;
}

json Column(const char* name, const char* type, const char* format, const char* description,
            int priority) {
  return json{{"name", name},
              {"type", type},
              {"format", format},
              {"description", description},
              {"priority", priority}};
}

std::string Age(const json& object, absl::Time now) {
  absl::Time created = ParseTimestamp(Str(Child(object, "metadata"), "creationTimestamp"));
  if (created == absl::InfinitePast()) return "<unknown>";
  return HumanDuration(now - created);
}

json PodCells(const json& pod, absl::Time now) {
  const json& spec = Child(pod, "spec");
  const json& status = Child(pod, "status");
  int total =
      Child(spec, "containers").is_array() ? static_cast<int>(Child(spec, "containers").size()) : 0;
  int ready = 0;
  if (Child(status, "containerStatuses").is_array()) {
    for (const json& cs : Child(status, "containerStatuses")) {
      if (Child(cs, "ready").is_boolean() && Child(cs, "ready").get<bool>()) ++ready;
    }
  }
  std::string phase = Str(status, "reason", Str(status, "phase", "Unknown"));
  // printers.go printPod: a pod being deleted shows Terminating.
  if (!Str(Child(pod, "metadata"), "deletionTimestamp").empty()) phase = "Terminating";
  return json::array({Str(Child(pod, "metadata"), "name"), absl::StrCat(ready, "/", total), phase,
                      "0", Age(pod, now), Str(status, "podIP", "<none>"),
                      Str(spec, "nodeName", "<none>"), Str(status, "nominatedNodeName", "<none>"),
                      "<none>"});
}

json NodeCells(const json& node, absl::Time now) {
  const json& status = Child(node, "status");
  std::string ready = "Unknown";
  if (Child(status, "conditions").is_array()) {
    for (const json& c : Child(status, "conditions")) {
      if (Str(c, "type") == "Ready") ready = Str(c, "status") == "True" ? "Ready" : "NotReady";
    }
  }
  // printers.go printNode: a cordoned node adds SchedulingDisabled.
  if (Child(Child(node, "spec"), "unschedulable") == json(true)) ready += ",SchedulingDisabled";
  std::string roles;
  for (const auto& [k, v] : Child(Child(node, "metadata"), "labels").items()) {
    constexpr absl::string_view kRolePrefix = "node-role.kubernetes.io/";
    if (absl::StartsWith(k, kRolePrefix)) {
      absl::StrAppend(&roles, roles.empty() ? "" : ",", k.substr(kRolePrefix.size()));
    }
  }
  std::string internal_ip = "<none>", external_ip = "<none>";
  if (Child(status, "addresses").is_array()) {
    for (const json& a : Child(status, "addresses")) {
      if (Str(a, "type") == "InternalIP") internal_ip = Str(a, "address", "<none>");
      if (Str(a, "type") == "ExternalIP") external_ip = Str(a, "address", "<none>");
    }
  }
  const json& info = Child(status, "nodeInfo");
  return json::array({Str(Child(node, "metadata"), "name"), ready, roles.empty() ? "<none>" : roles,
                      Age(node, now), Str(info, "kubeletVersion"), internal_ip, external_ip,
                      Str(info, "osImage", "<unknown>"), Str(info, "kernelVersion", "<unknown>"),
                      Str(info, "containerRuntimeVersion", "<unknown>")});
}

// The template's container names and images, and the selector, as the workload printers show them
// with -o wide (printers.go layoutContainerCells, metav1.FormatLabelSelector for matchLabels).
void AddWorkloadWideCells(const json& object, json& cells) {
  std::string names, images;
  for (const json& c :
       Child(Child(Child(Child(object, "spec"), "template"), "spec"), "containers")) {
    absl::StrAppend(&names, names.empty() ? "" : ",", Str(c, "name"));
    absl::StrAppend(&images, images.empty() ? "" : ",", Str(c, "image"));
  }
  std::string selector;
  for (const auto& [k, v] :
       Child(Child(Child(object, "spec"), "selector"), "matchLabels").items()) {
    absl::StrAppend(&selector, selector.empty() ? "" : ",", k, "=",
                    v.is_string() ? v.get<std::string>() : v.dump());
  }
  cells.push_back(names);
  cells.push_back(images);
  cells.push_back(selector.empty() ? "<none>" : selector);
}

// printers.go printDeployment: NAME READY UP-TO-DATE AVAILABLE AGE (CONTAINERS IMAGES SELECTOR).
json DeploymentCells(const json& d, absl::Time now) {
  const json& status = Child(d, "status");
  json cells = json::array(
      {Str(Child(d, "metadata"), "name"),
       absl::StrCat(JsonInt(status, "readyReplicas"), "/", JsonInt(Child(d, "spec"), "replicas")),
       JsonInt(status, "updatedReplicas"), JsonInt(status, "availableReplicas"), Age(d, now)});
  AddWorkloadWideCells(d, cells);
  return cells;
}

// printers.go printReplicaSet: NAME DESIRED CURRENT READY AGE (CONTAINERS IMAGES SELECTOR).
json ReplicaSetCells(const json& rs, absl::Time now) {
  const json& status = Child(rs, "status");
  json cells =
      json::array({Str(Child(rs, "metadata"), "name"), JsonInt(Child(rs, "spec"), "replicas"),
                   JsonInt(status, "replicas"), JsonInt(status, "readyReplicas"), Age(rs, now)});
  AddWorkloadWideCells(rs, cells);
  return cells;
}

// printers.go printLease: NAME HOLDER AGE.
json LeaseCells(const json& lease, absl::Time now) {
  return json::array({Str(Child(lease, "metadata"), "name"),
                      Str(Child(lease, "spec"), "holderIdentity"), Age(lease, now)});
}

// printers.go printEvent: LAST SEEN TYPE REASON OBJECT MESSAGE (SUBOBJECT SOURCE FIRST SEEN COUNT
// NAME with -o wide).
json EventCells(const json& e, absl::Time now) {
  auto since = [&](const std::string& ts) {
    absl::Time t = ParseTimestamp(ts);
    return t == absl::InfinitePast() ? std::string("<unknown>") : HumanDuration(now - t);
  };
  std::string last = Str(e, "lastTimestamp", Str(e, "eventTime"));
  std::string first = Str(e, "firstTimestamp", Str(e, "eventTime"));
  const json& involved = Child(e, "involvedObject");
  std::string kind = Str(involved, "kind");
  for (char& c : kind) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const json& source = Child(e, "source");
  std::string from = Str(source, "component", Str(e, "reportingComponent"));
  if (!Str(source, "host").empty()) absl::StrAppend(&from, ", ", Str(source, "host"));
  int64_t count = JsonInt(e, "count");
  return json::array({since(last), Str(e, "type"), Str(e, "reason"),
                      absl::StrCat(kind, "/", Str(involved, "name")), Str(e, "message"),
                      Str(involved, "fieldPath"), from, since(first), count == 0 ? 1 : count,
                      Str(Child(e, "metadata"), "name")});
}

}  // namespace

bool WantsTable(absl::string_view accept) { return absl::StrContains(accept, "as=Table"); }

std::string HumanDuration(absl::Duration d) {
  int64_t seconds = absl::ToInt64Seconds(d);
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 60 * 2) return absl::StrCat(seconds, "s");
  int64_t minutes = seconds / 60;
  if (minutes < 10) {
    int64_t s = seconds % 60;
    return s == 0 ? absl::StrCat(minutes, "m") : absl::StrCat(minutes, "m", s, "s");
  }
  if (minutes < 60 * 3) return absl::StrCat(minutes, "m");
  int64_t hours = minutes / 60;
  if (hours < 8) {
    int64_t m = minutes % 60;
    return m == 0 ? absl::StrCat(hours, "h") : absl::StrCat(hours, "h", m, "m");
  }
  if (hours < 48) return absl::StrCat(hours, "h");
  if (hours < 24 * 8) {
    int64_t h = hours % 24;
    return h == 0 ? absl::StrCat(hours / 24, "d") : absl::StrCat(hours / 24, "d", h, "h");
  }
  if (hours < 24 * 365 * 2) return absl::StrCat(hours / 24, "d");
  if (hours < 24 * 365 * 8) {
    int64_t dy = (hours / 24) % 365;
    return dy == 0 ? absl::StrCat(hours / 24 / 365, "y")
                   : absl::StrCat(hours / 24 / 365, "y", dy, "d");
  }
  return absl::StrCat(hours / 24 / 365, "y");
}

json TableColumns(Kind kind) {
  const char* kAgeDescription =
      "CreationTimestamp is a timestamp representing the server time when this object was "
      "created.";
  if (kind == Kind::kLease) {
    return json::array(
        {Column("Name", "string", "name", "Name must be unique within a namespace.", 0),
         Column("Holder", "string", "",
                "holderIdentity contains the identity of the holder of a current lease.", 0),
         Column("Age", "string", "", kAgeDescription, 0)});
  }
  if (kind == Kind::kDeployment || kind == Kind::kReplicaSet) {
    json columns = json::array(
        {Column("Name", "string", "name", "Name must be unique within a namespace.", 0)});
    if (kind == Kind::kDeployment) {
      columns.push_back(Column("Ready", "string", "", "Number of the pod with ready state", 0));
      columns.push_back(Column("Up-to-date", "string", "",
                               "Total number of non-terminated pods targeted by this deployment "
                               "that have the desired template spec.",
                               0));
      columns.push_back(Column("Available", "string", "",
                               "Total number of available pods (ready for at least "
                               "minReadySeconds) targeted by this deployment.",
                               0));
    } else {
      columns.push_back(Column("Desired", "integer", "", "Number of desired pods.", 0));
      columns.push_back(Column("Current", "integer", "", "Number of actual pods.", 0));
      columns.push_back(Column("Ready", "integer", "", "Number of ready pods.", 0));
    }
    columns.push_back(Column("Age", "string", "", kAgeDescription, 0));
    columns.push_back(
        Column("Containers", "string", "", "Names of each container in the template.", 1));
    columns.push_back(
        Column("Images", "string", "", "Images referenced by each container in the template.", 1));
    columns.push_back(Column("Selector", "string", "", "Label selector for pods.", 1));
    return columns;
  }
  if (kind == Kind::kEvent) {
    return json::array(
        {Column("Last Seen", "string", "", "Time when last this event was observed.", 0),
         Column("Type", "string", "", "Type of this event (Normal, Warning).", 0),
         Column("Reason", "string", "", "Why the action was taken.", 0),
         Column("Object", "string", "", "The object that this event is about.", 0),
         Column("Message", "string", "",
                "A human-readable description of the status of this operation.", 0),
         Column("Subobject", "string", "", "The subobject (fieldPath) of the object.", 1),
         Column("Source", "string", "", "The component reporting this event.", 1),
         Column("First Seen", "string", "", "The time at which the event was first recorded.", 1),
         Column("Count", "string", "", "The number of times this event has occurred.", 1),
         Column("Name", "string", "name", "Name must be unique within a namespace.", 1)});
  }
  if (kind == Kind::kPod) {
    return json::array(
        {Column("Name", "string", "name", "Name must be unique within a namespace.", 0),
         Column("Ready", "string", "",
                "The aggregate readiness state of this pod for accepting "
                "traffic.",
                0),
         Column("Status", "string", "", "The aggregate status of the containers in this pod.", 0),
         Column("Restarts", "string", "",
                "The number of times the containers in this pod have "
                "been restarted and when the last container in this pod has restarted.",
                0),
         Column("Age", "string", "",
                "CreationTimestamp is a timestamp representing the server "
                "time when this object was created.",
                0),
         Column("IP", "string", "", "IP address allocated to the pod.", 1),
         Column("Node", "string", "", "Name of the Node this pod is bound to.", 1),
         Column("Nominated Node", "string", "", "Name of the node nominated for preemption.", 1),
         Column("Readiness Gates", "string", "", "Pod readiness gates.", 1)});
  }
  return json::array(
      {Column("Name", "string", "name", "Name must be unique within a namespace.", 0),
       Column("Status", "string", "", "The status of the node", 0),
       Column("Roles", "string", "", "The roles of the node", 0),
       Column("Age", "string", "",
              "CreationTimestamp is a timestamp representing the server "
              "time when this object was created.",
              0),
       Column("Version", "string", "", "Kubelet Version reported by the node.", 0),
       Column("Internal-IP", "string", "", "List of internal IPs in NodeAddress.", 1),
       Column("External-IP", "string", "", "List of external IPs in NodeAddress.", 1),
       Column("OS-Image", "string", "", "OS Image reported by the node.", 1),
       Column("Kernel-Version", "string", "", "Kernel Version reported by the node.", 1),
       Column("Container-Runtime", "string", "",
              "Container Runtime Version reported by the "
              "node.",
              1)});
}

absl::StatusOr<TableObject> ParseIncludeObject(absl::string_view value) {
  if (value.empty() || value == "Metadata") return TableObject::kMetadata;
  if (value == "Object") return TableObject::kObject;
  if (value == "None") return TableObject::kNone;
  return absl::InvalidArgumentError(
      absl::StrCat("unrecognized includeObject value: \"", value, "\""));
}

json TableRow(const StoredObject& object, absl::Time now, TableObject include) {
  json j = json::parse(object.json, nullptr, false);
  json cells;
  switch (object.kind) {
    case Kind::kPod:
      cells = PodCells(j, now);
      break;
    case Kind::kNode:
      cells = NodeCells(j, now);
      break;
    case Kind::kEvent:
      cells = EventCells(j, now);
      break;
    case Kind::kDeployment:
      cells = DeploymentCells(j, now);
      break;
    case Kind::kReplicaSet:
      cells = ReplicaSetCells(j, now);
      break;
    case Kind::kLease:
      cells = LeaseCells(j, now);
      break;
  }
  json row = {{"cells", cells}};
  switch (include) {
    case TableObject::kMetadata:
      row["object"] = {{"kind", "PartialObjectMetadata"},
                       {"apiVersion", "meta.k8s.io/v1"},
                       {"metadata", Child(j, "metadata")}};
      break;
    case TableObject::kObject:
      row["object"] = std::move(j);
      break;
    case TableObject::kNone:
      row["object"] = nullptr;
      break;
  }
  return row;
}

std::string TableJson(Kind kind, const std::vector<ObjectPtr>& items, uint64_t resource_version,
                      absl::string_view continue_token, std::optional<int64_t> remaining,
                      bool with_columns, absl::Time now, TableObject include) {
  json metadata = {{"resourceVersion", absl::StrCat(resource_version)}};
  if (!continue_token.empty()) {
    metadata["continue"] = std::string(continue_token);
    if (remaining.has_value()) metadata["remainingItemCount"] = *remaining;
  }
  json table = {{"kind", "Table"}, {"apiVersion", "meta.k8s.io/v1"}, {"metadata", metadata}};
  if (with_columns) table["columnDefinitions"] = TableColumns(kind);
  json rows = json::array();
  for (const ObjectPtr& item : items) rows.push_back(TableRow(*item, now, include));
  table["rows"] = rows;
  return Dump(table);
}

}  // namespace fitledger::sim
