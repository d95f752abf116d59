#!/usr/bin/env python3
"""The field numbers of Kubernetes' protobuf messages, read from upstream's generated.proto files
(k8s.io/api core/v1; k8s.io/apimachinery meta/v1, resource, intstr, runtime), for both sides of
fitledger that speak the API server's protobuf encoding (issue 50 item 5):

  sim/k8s_schema.inc              fitledger-sim's encoder and decoder (sim/protobuf.cc): every
                                  message reachable from Pod, Node and Status, one a line,
                                  "Name field=number:type ..." (the format is described there);
  model/k8s_field_numbers.h the fields either side reads or writes by number in its own
                                  code (server/kube/protobuf_objects.cc, the envelope and the
                                  special values of sim/protobuf.cc), as constants.

Field names, numbers and types come from generated.proto; which embedded fields Go's JSON inlines
into their parent (`json:",inline"`: Volume.volumeSource, Probe.handler, ...) from types.go's
struct tags, which generated.proto does not carry.

Usage (the module folders: `go list -m -f '{{.Dir}}' k8s.io/api k8s.io/apimachinery` in
tests/upstream/suite, after tests/upstream/build has filled the Go module cache):
  sim/tools/gen_k8s_schema.py API_DIR APIMACHINERY_DIR --write      rewrite both files
  sim/tools/gen_k8s_schema.py API_DIR APIMACHINERY_DIR --check      exit 1 if either differs
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMA_OUT = os.path.join(ROOT, "sim", "k8s_schema.inc")
NUMBERS_OUT = os.path.join(ROOT, "model", "k8s_field_numbers.h")

CORE = "k8s.io.api.core.v1"
META = "k8s.io.apimachinery.pkg.apis.meta.v1"
RUNTIME = "k8s.io.apimachinery.pkg.runtime"
ROOTS = [CORE + ".Pod", CORE + ".Node", META + ".Status"]
# Messages the schema writes as one value (their JSON is a string, a number or kept whole).
SPECIAL = {
    META + ".Time": "time",
    "k8s.io.apimachinery.pkg.api.resource.Quantity": "quantity",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": "intorstring",
    META + ".FieldsV1": "fieldsv1",
}
SCALARS = {"string": "string", "bool": "bool", "int32": "int32", "int64": "int64"}
# The fields the code names by number: fitledger-server's decoder, and the sim's envelope and
# special values (message -> proto field names).
NAMED_FIELDS = [
    (RUNTIME + ".Unknown", ["typeMeta", "raw", "contentEncoding"]),
    (RUNTIME + ".TypeMeta", ["apiVersion", "kind"]),
    (RUNTIME + ".RawExtension", ["raw"]),
    (META + ".WatchEvent", ["type", "object"]),
    (META + ".Status", ["message", "code"]),
    (META + ".ObjectMeta", ["name", "namespace", "uid", "resourceVersion", "deletionTimestamp",
                            "annotations"]),
    (META + ".Time", ["seconds", "nanos"]),
    ("k8s.io.apimachinery.pkg.api.resource.Quantity", ["string"]),
    ("k8s.io.apimachinery.pkg.util.intstr.IntOrString", ["type", "intVal", "strVal"]),
    (META + ".FieldsV1", ["Raw"]),
    (CORE + ".Pod", ["metadata", "spec", "status"]),
    (CORE + ".PodSpec", ["containers", "initContainers", "nodeName", "schedulerName", "overhead",
                         "resources", "priority"]),
    (CORE + ".PodStatus", ["phase", "conditions", "message", "reason", "containerStatuses",
                           "initContainerStatuses", "resize", "allocatedResources", "resources"]),
    (CORE + ".PodCondition", ["type", "reason"]),
    (CORE + ".Container", ["name", "resources", "restartPolicy"]),
    (CORE + ".ContainerStatus", ["name", "allocatedResources", "resources"]),
    (CORE + ".ResourceRequirements", ["limits", "requests"]),
    (CORE + ".Node", ["metadata", "status"]),
    (CORE + ".NodeStatus", ["capacity", "allocatable"]),
]
PROTO_FILES = [
    ("api", "core/v1/generated.proto"),
    ("apimachinery", "pkg/apis/meta/v1/generated.proto"),
    ("apimachinery", "pkg/api/resource/generated.proto"),
    ("apimachinery", "pkg/util/intstr/generated.proto"),
    ("apimachinery", "pkg/runtime/generated.proto"),
]
TYPES_GO = [("api", "core/v1/types.go"), ("apimachinery", "pkg/apis/meta/v1/types.go")]

FIELD_RE = re.compile(r"^\s*(?:(optional|repeated|required)\s+)?"
                      r"(map\s*<\s*string\s*,\s*([\w.]+)\s*>|[\w.]+)\s+(\w+)\s*=\s*(\d+)\s*[;\[]")


class Field:
    def __init__(self, name, number, type_name, repeated, is_map):
        self.name, self.number, self.type_name = name, number, type_name
        self.repeated, self.is_map = repeated, is_map


def read_protos(dirs):
    """{qualified message name: [Field]} in declaration order; types resolved to qualified
    names or scalar names."""
    messages = {}
    for module, path in PROTO_FILES:
        text = open(os.path.join(dirs[module], path)).read()
        package = re.search(r"^package\s+([\w.]+)\s*;", text, re.M).group(1)
        current, depth = None, 0
        for line in text.splitlines():
            line = line.split("//", 1)[0]
            if not line.strip():
                continue
            m = re.match(r"^\s*message\s+(\w+)\s*\{", line)
            if m and depth == 0:
                current = package + "." + m.group(1)
                messages[current] = []
                depth = 1
                continue
            if current is None:
                continue
            if re.match(r"^\s*message\s", line):
                sys.exit(f"{path}: nested message in {current}: not handled")
            f = FIELD_RE.match(line)
            if f and depth == 1:
                label, type_text, map_value, name, number = f.groups()
                is_map = type_text.startswith("map")
                t = map_value if is_map else type_text
                if t not in SCALARS and t != "bytes":
                    t = t[1:] if t.startswith(".") else package + "." + t
                messages[current].append(Field(name, int(number), t, label == "repeated", is_map))
            depth += line.count("{") - line.count("}")
            if depth == 0:
                current = None
    return messages


def read_inlined(dirs):
    """{(Go struct name, protobuf field number)} of the embedded fields Go's JSON inlines."""
    inlined = set()
    for module, path in TYPES_GO:
        struct = None
        for line in open(os.path.join(dirs[module], path)):
            m = re.match(r"^type (\w+) struct \{", line)
            if m:
                struct = m.group(1)
                continue
            if line.startswith("}"):
                struct = None
                continue
            # An embedded struct (a type and no field name) whose JSON tag gives no name:
            # Go's encoding/json writes its fields into the parent (`json:",inline"`, or since
            # v1.37 `json:""`).
            m = re.match(r'^\s+\*?[\w.]+\s+`json:"(,[^"]*)?".*protobuf:"\w+,(\d+),', line)
            if struct and m:
                inlined.add((struct, int(m.group(2))))
    return inlined


def short(qualified):
    return qualified.rsplit(".", 1)[1]


def schema_text(messages, inlined):
    order, seen, queue = [], set(), list(ROOTS)
    while queue:
        name = queue.pop(0)
        if name in seen:
            continue
        seen.add(name)
        if name not in messages:
            sys.exit(f"message {name} is not in the generated.proto files read")
        order.append(name)
        for f in messages[name]:
            if f.type_name in messages and f.type_name not in SPECIAL:
                queue.append(f.type_name)
    names = {}
    for name in order:
        s = short(name)
        if s in names:
            sys.exit(f"two messages named {s}: {names[s]} and {name}")
        names[s] = name
    lines = []
    for name in order:
        parts = [short(name)]
        for f in messages[name]:
            if f.type_name in SCALARS:
                t = SCALARS[f.type_name]
            elif f.type_name in SPECIAL:
                t = SPECIAL[f.type_name]
            elif f.type_name in messages:
                t = short(f.type_name)
            else:
                sys.exit(f"{short(name)}.{f.name}: type {f.type_name} is not handled by sim/protobuf.cc")
            if f.is_map:
                t = f"map<{t}>"
            elif f.repeated:
                t = "[]" + t
            elif (short(name), f.number) in inlined:
                t = "^" + t
            parts.append(f"{f.name}={f.number}:{t}")
        lines.append(" ".join(parts))
    return lines


def c_string_lines(lines, width=100):
    """The schema as C string literals of at most `width` columns, each message ending in \\n."""
    out = []
    for line in lines:
        tokens = line.split(" ")
        chunk = "    \""
        for i, tok in enumerate(tokens):
            piece = tok + (" " if i < len(tokens) - 1 else "\\n")
            if len(chunk) + len(piece) + 1 > width and chunk != "    \"":
                out.append(chunk + "\"")
                chunk = "    \""
            chunk += piece
        out.append(chunk + "\"")
    return out


HEADER = ("// Generated by sim/tools/gen_k8s_schema.py from k8s.io/api and k8s.io/apimachinery "
          "{version}'s\n// generated.proto files (and types.go's inline JSON tags). Do not edit: "
          "regenerate (ctest -R\n// k8s_schema_up_to_date checks it).\n")


def render_schema(lines, version):
    body = "\n".join(c_string_lines(lines))
    return (HEADER.format(version=version) +
            "// Included by sim/protobuf.cc as the initializer of its schema table.\n" +
            body.lstrip() + "\n")


def render_numbers(messages, version):
    out = [HEADER.format(version=version).rstrip("\n"),
           "// The protobuf field numbers fitledger-server's watch decoder "
           "(server/kube/protobuf_objects.cc) and",
           "// fitledger-sim's envelope and special values (sim/protobuf.cc) use by name.",
           "#ifndef FITLEDGER_MODEL_K8S_FIELD_NUMBERS_H_",
           "#define FITLEDGER_MODEL_K8S_FIELD_NUMBERS_H_", "",
           "namespace fitledger::k8s_fields {", ""]
    for message, wanted in NAMED_FIELDS:
        if message not in messages:
            sys.exit(f"message {message} is not in the generated.proto files read")
        by_name = {f.name: f for f in messages[message]}
        out.append(f"// {message}")
        out.append(f"namespace {short(message)} {{")
        for name in wanted:
            if name not in by_name:
                sys.exit(f"{message} has no field {name}")
            const = "k" + name[0].upper() + name[1:]
            out.append(f"inline constexpr int {const} = {by_name[name].number};")
        out.append(f"}}  // namespace {short(message)}")
        out.append("")
    out += ["}  // namespace fitledger::k8s_fields", "",
            "#endif  // FITLEDGER_MODEL_K8S_FIELD_NUMBERS_H_", ""]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("api_dir")
    ap.add_argument("apimachinery_dir")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    ap.add_argument("--schema", default=SCHEMA_OUT, help="the schema file (default: sim/k8s_schema.inc)")
    ap.add_argument("--numbers", default=NUMBERS_OUT,
                    help="the constants (default: model/k8s_field_numbers.h)")
    a = ap.parse_args()
    dirs = {"api": a.api_dir, "apimachinery": a.apimachinery_dir}
    version = os.path.basename(a.api_dir.rstrip("/")).split("@")[-1]
    messages = read_protos(dirs)
    inlined = read_inlined(dirs)
    files = {a.schema: render_schema(schema_text(messages, inlined), version),
             a.numbers: render_numbers(messages, version)}
    stale = []
    for path, text in files.items():
        old = open(path).read() if os.path.exists(path) else None
        if old == text:
            continue
        if a.write:
            with open(path, "w") as f:
                f.write(text)
            print(f"wrote {os.path.relpath(path, ROOT)}")
        else:
            stale.append(os.path.relpath(path, ROOT))
    if stale:
        print("out of date with upstream's generated.proto: " + ", ".join(stale) +
              " (run sim/tools/gen_k8s_schema.py API_DIR APIMACHINERY_DIR --write)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
