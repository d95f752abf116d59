// meta.k8s.io/v1 Table responses, which kubectl asks for (`Accept:
// application/json;as=Table;v=v1;g=meta.k8s.io`) to print `get` output: the columns the API
// server's own printers use for pods and nodes (priority 1 columns appear with -o wide).
#ifndef FITLEDGER_SIM_TABLES_H_
#define FITLEDGER_SIM_TABLES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "sim/store.h"

namespace fitledger::sim {

// True when the Accept header asks for a meta.k8s.io/v1 Table.
bool WantsTable(absl::string_view accept);

// Kubernetes' HumanDuration ("45s", "3m12s", "5h", "2d3h", ...).
std::string HumanDuration(absl::Duration d);

// What each row carries as its `object`, by the request's `includeObject` (apiserver
// pkg/endpoints/handlers/response.go `asTable`): the object's metadata as a
// PartialObjectMetadata (Metadata, the default), the whole object (Object: what kubectl asks for
// with --sort-by), or nothing (None).
enum class TableObject { kMetadata, kObject, kNone };
// "" and "Metadata": kMetadata; "Object"; "None". InvalidArgument (400) otherwise, with the API
// server's message (`unrecognized includeObject value: "X"`).
absl::StatusOr<TableObject> ParseIncludeObject(absl::string_view value);

// The column definitions for `kind`.
nlohmann::json TableColumns(Kind kind);
// One row: the cells and the object as `include` says.
nlohmann::json TableRow(const StoredObject& object, absl::Time now,
                        TableObject include = TableObject::kMetadata);

// A Table of `items`. `continue_token` / `remaining` as in a list; column definitions omitted
// when `with_columns` is false (later events of a watch).
std::string TableJson(Kind kind, const std::vector<ObjectPtr>& items, uint64_t resource_version,
                      absl::string_view continue_token, std::optional<int64_t> remaining,
                      bool with_columns, absl::Time now,
                      TableObject include = TableObject::kMetadata);

}  // namespace fitledger::sim

#endif  // FITLEDGER_SIM_TABLES_H_
