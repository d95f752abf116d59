// A stand-in for grpcurl (github.com/fullstorydev/grpcurl), for machines where grpcurl cannot be
// installed (no Debian package, no network). tests/docs/run.sh puts it on PATH for the
// `sh runnable requires=grpcurl` blocks of the docs when the real grpcurl is not installed.
//
// It implements only the subset of grpcurl's command line that README.md and docs/*.md use, over
// server reflection (grpc.reflection.v1alpha, what gRPC C++ 1.51 serves), with grpcurl's output:
//
//   grpcurl [flags] ADDRESS list                  services, sorted, one a line
//   grpcurl [flags] ADDRESS list SERVICE          its methods, fully qualified, sorted
//   grpcurl [flags] ADDRESS describe [SYMBOL]     "X is a service:" + proto source (no comments:
//                                                 gRPC C++ serves descriptors without them)
//   grpcurl [flags] ADDRESS SERVICE/METHOD        a unary call; request and response in the
//                                                 protobuf JSON mapping
//
//   flags: -plaintext (required: TLS is outside the subset), -unix (ADDRESS is a socket path),
//          -d DATA ("@": read stdin), -allow-unknown-fields, -max-time SECONDS,
//          -connect-timeout SECONDS, -help, -version.
//
// Every other grpcurl flag (-cacert, -cert, -key, -servername, -H, -v, -format, ...) is refused
// with exit status 2 and a message saying the stand-in lacks it; so are streaming methods. Where
// grpcurl's behaviour changed between releases, this follows 1.9.x (jhump/protoreflect's
// dynamic messages): field order by number, map keys sorted, doubles as Go's %g.
//
// Exit status, as grpcurl's: 0; 1 for a failure before the call (dial, reflection, method not
// found, bad request data); 2 for a usage error; 64 + the gRPC status code when the call returns
// a non-OK status (printed to stderr as "ERROR:\n  Code: NotFound\n  Message: ...").
//
// Requires node and tests/e2e/reflection/node_modules (scripts/install-deps: npm ci there).
'use strict';

const fs = require('fs');
const net = require('net');
const path = require('path');

const kModules = path.join(__dirname, '..', '..', 'e2e', 'reflection', 'node_modules');
const kStatusCodeOffset = 64;
const kProg = 'grpcurl';

// ---- Exits -----------------------------------------------------------------------------------

// grpcurl's fail(): with a cause, "MSG: CAUSE" and exit 1; without one, a usage error (exit 2).
function fail(cause, msg) {
  if (cause !== null) {
    process.stderr.write(`${msg}: ${cause}\n`);
    process.exit(1);
  }
  process.stderr.write(`${msg}\nTry '${kProg} -help' for more details.\n`);
  process.exit(2);
}
// A grpcurl feature outside the subset the docs use, which this stand-in deliberately leaves
// out: a usage error that says so (use the real grpcurl for it).
function outsideSubset(what) {
  process.stderr.write(`grpcurl stand-in (tests/tools/grpcurl): ${what} is outside the subset of ` +
                       'grpcurl that the docs use, which is all it covers (see its header); use ' +
                       'the real grpcurl for it.\n');
  process.exit(2);
}
function warn(msg) { process.stderr.write(`Warning: ${msg}\n`); }

function loadModule(name) {
  try {
    return require(path.join(kModules, name));
  } catch (err) {
    process.stderr.write(`grpcurl stand-in: cannot load ${name} from ${kModules} ` +
                         `(run scripts/install-deps): ${err.message}\n`);
    process.exit(2);
  }
}
const grpc = loadModule('@grpc/grpc-js');
const protoLoader = loadModule('@grpc/proto-loader');
const protobuf = loadModule('protobufjs');
const descriptorExt = loadModule('protobufjs/ext/descriptor');

// ---- Flags (Go's flag package: -f, --f, -f=v, -f v; parsing stops at the first argument) -----

const kFlags = new Map([
  ['plaintext', 'bool'], ['unix', 'bool'], ['allow-unknown-fields', 'bool'], ['help', 'bool'],
  ['version', 'bool'], ['d', 'string'], ['max-time', 'float'], ['connect-timeout', 'float'],
]);
// grpcurl's other flags: recognised, so that the refusal names them as missing from the stand-in.
const kGrpcurlOnlyFlags = new Set([
  'insecure', 'cacert', 'cert', 'key', 'servername', 'authority', 'alts', 'alts-handshaker-service',
  'alts-target-service-account', 'protoset', 'proto', 'import-path', 'use-reflection', 'H',
  'rpc-header', 'reflect-header', 'expand-headers', 'user-agent', 'format', 'format-error',
  'keepalive-time', 'max-msg-sz', 'emit-defaults', 'keep-proto-names', 'protoset-out',
  'proto-out-dir', 'msg-template', 'v', 'vv',
]);

function parseBool(s) {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(s)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(s)) return false;
  return null;
}

function parseFlags(argv) {
  const flags = { d: '', 'max-time': 0, 'connect-timeout': 0 };
  const args = argv.slice();
  while (args.length > 0) {
    const s = args[0];
    if (s.length < 2 || s[0] !== '-') break;
    let minuses = 1;
    if (s[1] === '-') {
      minuses = 2;
      if (s.length === 2) { args.shift(); break; }
    }
    let name = s.slice(minuses);
    if (name.length === 0 || name[0] === '-' || name[0] === '=') fail(null, `bad flag syntax: ${s}`);
    args.shift();
    let value = null;
    const eq = name.indexOf('=');
    if (eq >= 0) { value = name.slice(eq + 1); name = name.slice(0, eq); }
    if (name === 'h') name = 'help';
    if (kGrpcurlOnlyFlags.has(name)) outsideSubset(`grpcurl's -${name} flag`);
    const kind = kFlags.get(name);
    if (kind === undefined) fail(null, `flag provided but not defined: -${name}`);
    if (kind === 'bool') {
      if (value === null) value = 'true';
      const b = parseBool(value);
      if (b === null) fail(null, `invalid boolean value "${value}" for -${name}: parse error`);
      flags[name] = b;
    } else {
      if (value === null) {
        if (args.length === 0) fail(null, `flag needs an argument: -${name}`);
        value = args.shift();
      }
      if (kind === 'float') {
        const f = Number(value);
        if (value.trim() === '' || Number.isNaN(f)) {
          fail(null, `invalid value "${value}" for flag -${name}: parse error`);
        }
        flags[name] = f;
      } else {
        flags[name] = value;
      }
    }
  }
  return { flags, args };
}

function usage() {
  process.stderr.write(`Usage:
	${kProg} [flags] [address] [list|describe] [symbol]

This is fitledger's grpcurl stand-in (tests/tools/grpcurl/grpcurl.js): it implements only the
subset of grpcurl's command line that fitledger's docs use, over server reflection.

If 'list' is indicated, the symbol (if present) should be a fully-qualified service name. If
present, all methods of that service are listed. If not present, all exposed services are listed.

If 'describe' is indicated, the descriptor for the given symbol is shown. If no symbol is given
then the descriptors for all exposed services are shown.

If neither verb is present, the symbol must be a fully-qualified method name in 'service/method'
or 'service.method' format, of a unary method. The request body (-d) is used to invoke it; without
one an empty request is sent.

Available flags:
  -allow-unknown-fields  Ignore JSON fields the request message does not have.
  -connect-timeout SECS  The maximum time to wait for the connection (default 10).
  -d DATA                Request contents in JSON; '@' reads them from stdin.
  -help                  Print usage instructions and exit.
  -max-time SECS         The maximum total time the operation can take.
  -plaintext             Use plain-text HTTP/2 (no TLS). Required: TLS is outside the subset.
  -unix                  The address is the path to a Unix domain socket.
  -version               Print version.
`);
}

// ---- Descriptors -----------------------------------------------------------------------------

// The default JSON name of a field, as protoc computes it.
function defaultJsonName(name) {
  let out = '';
  let upper = false;
  for (const ch of name) {
    if (ch === '_') { upper = true; continue; }
    out += upper ? ch.toUpperCase() : ch;
    upper = false;
  }
  return out;
}

// The files reflection returned, indexed by the fully qualified name of what they declare.
class DescriptorPool {
  constructor() {
    this.files = new Map();    // name -> FileDescriptorProto as a plain object
    this.decoded = new Map();  // name -> decoded FileDescriptorProto (for protobufjs)
    this.symbols = new Map();  // fqn -> {kind, fqn, proto, parent, file}
    this.root = null;
  }

  addFile(bytes) {
    const decoded = descriptorExt.FileDescriptorProto.decode(bytes);
    if (this.files.has(decoded.name)) return;
    const file = descriptorExt.FileDescriptorProto.toObject(decoded, { enums: String, longs: Number });
    this.files.set(file.name, file);
    this.decoded.set(file.name, decoded);
    this.root = null;
    const pkg = file.package ? `${file.package}.` : '';
    const addMessage = (proto, prefix, parent) => {
      const fqn = prefix + proto.name;
      this.symbols.set(fqn, { kind: 'message', fqn, proto, parent, file });
      for (const f of proto.field || []) {
        this.symbols.set(`${fqn}.${f.name}`, { kind: 'field', fqn: `${fqn}.${f.name}`, proto: f, parent: fqn, file });
      }
      for (const n of proto.nestedType || []) addMessage(n, `${fqn}.`, fqn);
      for (const e of proto.enumType || []) addEnum(e, `${fqn}.`, fqn);
    };
    const addEnum = (proto, prefix, parent) => {
      const fqn = prefix + proto.name;
      this.symbols.set(fqn, { kind: 'enum', fqn, proto, parent, file });
    };
    for (const m of file.messageType || []) addMessage(m, pkg, null);
    for (const e of file.enumType || []) addEnum(e, pkg, null);
    for (const s of file.service || []) {
      const fqn = pkg + s.name;
      this.symbols.set(fqn, { kind: 'service', fqn, proto: s, parent: null, file });
      for (const m of s.method || []) {
        this.symbols.set(`${fqn}.${m.name}`, { kind: 'method', fqn: `${fqn}.${m.name}`, proto: m, parent: fqn, file });
      }
    }
  }

  lookup(fqn) { return this.symbols.get(fqn.replace(/^\./, '')); }

  // The protobufjs type of a message, for the binary encoding.
  protobufType(fqn) {
    if (this.root === null) {
      this.root = protobuf.Root.fromDescriptor({ file: Array.from(this.decoded.values()) });
    }
    return this.root.lookupType(fqn.replace(/^\./, ''));
  }

  // Whether protobufjs holds this map field as an object; some protobufjs versions build a map
  // field from a descriptor as the repeated entry message it is on the wire ([{key, value}]).
  protobufHasMap(messageFqn, fieldName) {
    return Boolean(this.protobufType(messageFqn).fields[fieldName].map);
  }
}

function isMapField(pool, field) {
  if (field.label !== 'LABEL_REPEATED' || field.type !== 'TYPE_MESSAGE') return false;
  const entry = pool.lookup(field.typeName);
  return Boolean(entry && entry.proto.options && entry.proto.options.mapEntry);
}
function mapEntryFields(pool, field) {
  const entry = pool.lookup(field.typeName).proto;
  const byNumber = (n) => entry.field.find((f) => f.number === n);
  return { key: byNumber(1), value: byNumber(2) };
}
function sortedFields(proto) {
  return (proto.field || []).slice().sort((a, b) => a.number - b.number);
}

// ---- Reflection ------------------------------------------------------------------------------

class NotFoundError extends Error {}

// grpc-go's "rpc error: code = X desc = Y" for an RPC failure.
function rpcErrorText(err) {
  if (err && typeof err.code === 'number') return `rpc error: code = ${codeName(err.code)} desc = ${err.details}`;
  return String(err && err.message ? err.message : err);
}

class ReflectionSource {
  constructor(channel) {
    const def = protoLoader.loadSync(
      path.join(kModules, 'grpc-js-reflection-client', 'proto', 'v1alpha.proto'),
      { keepCase: true, longs: Number, enums: String, defaults: false, oneofs: true });
    const pkg = grpc.loadPackageDefinition(def).grpc.reflection.v1alpha;
    this.client = new pkg.ServerReflection('unused', grpc.credentials.createInsecure(),
                                           { channelOverride: channel });
    this.pool = new DescriptorPool();
  }

  // One request on its own stream; resolves with the response.
  request(req, deadline) {
    return new Promise((resolve, reject) => {
      const call = this.client.ServerReflectionInfo(deadline ? { deadline } : {});
      let done = false;
      call.on('data', (res) => {
        if (done) return;
        done = true;
        call.end();
        if (res.error_response) {
          const e = res.error_response;
          if (e.error_code === grpc.status.NOT_FOUND) reject(new NotFoundError(e.error_message));
          else reject(new Error(`rpc error: code = ${codeName(e.error_code)} desc = ${e.error_message}`));
          return;
        }
        resolve(res);
      });
      call.on('error', (err) => {
        if (done) return;
        done = true;
        if (err.code === grpc.status.UNIMPLEMENTED) {
          reject(new Error('server does not support the reflection API'));
        } else {
          reject(new Error(rpcErrorText(err)));
        }
      });
      call.on('end', () => {
        if (!done) { done = true; reject(new Error('reflection stream ended without a response')); }
      });
      call.write(req);
    });
  }

  async listServices(deadline) {
    const res = await this.request({ list_services: '*' }, deadline);
    return res.list_services_response.service.map((s) => s.name);
  }

  async loadFiles(fileDescriptorProtos, deadline) {
    for (const bytes of fileDescriptorProtos) this.pool.addFile(bytes);
    for (const file of Array.from(this.pool.files.values())) {
      for (const dep of file.dependency || []) {
        if (this.pool.files.has(dep)) continue;
        let res;
        try {
          res = await this.request({ file_by_filename: dep }, deadline);
        } catch (err) {
          if (err instanceof NotFoundError) throw new NotFoundError(`File not found: ${dep}`);
          throw err;
        }
        await this.loadFiles(res.file_descriptor_response.file_descriptor_proto, deadline);
      }
    }
  }

  // The symbol's pool entry; NotFoundError("Symbol not found: X") when the server lacks it.
  async findSymbol(fqn, deadline) {
    const known = this.pool.lookup(fqn);
    if (known) return known;
    let res;
    try {
      res = await this.request({ file_containing_symbol: fqn }, deadline);
    } catch (err) {
      if (err instanceof NotFoundError) throw new NotFoundError(`Symbol not found: ${fqn}`);
      throw err;
    }
    await this.loadFiles(res.file_descriptor_response.file_descriptor_proto, deadline);
    const found = this.pool.lookup(fqn);
    if (!found) throw new NotFoundError(`Symbol not found: ${fqn}`);
    return found;
  }
}

// ---- gRPC status -----------------------------------------------------------------------------

// grpc-go's codes.Code names.
const kCodeNames = [
  'OK', 'Canceled', 'Unknown', 'InvalidArgument', 'DeadlineExceeded', 'NotFound', 'AlreadyExists',
  'PermissionDenied', 'ResourceExhausted', 'FailedPrecondition', 'Aborted', 'OutOfRange',
  'Unimplemented', 'Internal', 'Unavailable', 'DataLoss', 'Unauthenticated',
];
function codeName(code) { return kCodeNames[code] || `Code(${code})`; }

// ---- Request: JSON text -> protobufjs object -------------------------------------------------

class JsonError extends Error {}

const kStringToken = /"(?:[^"\\\u0000-\u001f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"/y;
const kNumberToken = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

// A JSON value with its source text kept for numbers (int64 precision).
//   {t: 'object', entries: [[key, value]]} | {t: 'array', items} | {t: 'string', v}
//   {t: 'number', raw} | {t: 'bool', v} | {t: 'null'}
class JsonReader {
  constructor(text) { this.s = text; this.i = 0; }
  skipSpace() { while (this.i < this.s.length && ' \t\r\n'.includes(this.s[this.i])) this.i++; }
  atEnd() { this.skipSpace(); return this.i >= this.s.length; }
  unexpected(context) {
    if (this.i >= this.s.length) return new JsonError('unexpected EOF');
    const c = this.s[this.i];
    return new JsonError(`invalid character ${c === "'" ? "'\\''" : `'${c}'`} ${context}`);
  }
  value() {
    this.skipSpace();
    const c = this.s[this.i];
    if (c === '{') return this.object();
    if (c === '[') return this.array();
    if (c === '"') return { t: 'string', v: this.string() };
    if (c === '-' || (c >= '0' && c <= '9')) return this.number();
    for (const [word, node] of [['true', { t: 'bool', v: true }], ['false', { t: 'bool', v: false }],
                                ['null', { t: 'null' }]]) {
      if (this.s.startsWith(word, this.i)) { this.i += word.length; return node; }
    }
    throw this.unexpected('looking for beginning of value');
  }
  object() {
    this.i++;
    const entries = [];
    this.skipSpace();
    if (this.s[this.i] === '}') { this.i++; return { t: 'object', entries }; }
    for (;;) {
      this.skipSpace();
      if (this.s[this.i] !== '"') throw this.unexpected('looking for beginning of object key string');
      const key = this.string();
      this.skipSpace();
      if (this.s[this.i] !== ':') throw this.unexpected('after object key');
      this.i++;
      entries.push([key, this.value()]);
      this.skipSpace();
      if (this.s[this.i] === ',') { this.i++; continue; }
      if (this.s[this.i] === '}') { this.i++; return { t: 'object', entries }; }
      throw this.unexpected('after object key:value pair');
    }
  }
  array() {
    this.i++;
    const items = [];
    this.skipSpace();
    if (this.s[this.i] === ']') { this.i++; return { t: 'array', items }; }
    for (;;) {
      items.push(this.value());
      this.skipSpace();
      if (this.s[this.i] === ',') { this.i++; continue; }
      if (this.s[this.i] === ']') { this.i++; return { t: 'array', items }; }
      throw this.unexpected('after array element');
    }
  }
  string() {
    kStringToken.lastIndex = this.i;
    const m = kStringToken.exec(this.s);
    if (!m) {
      const rest = this.s.slice(this.i + 1);
      const bad = /[\u0000-\u001f]|\\(?!["\\/bfnrt]|u[0-9a-fA-F]{4})/.exec(rest);
      if (bad && rest.indexOf('"') > bad.index) {
        this.i += 1 + bad.index;
        throw this.unexpected('in string literal');
      }
      this.i = this.s.length;
      throw new JsonError('unexpected EOF');
    }
    this.i += m[0].length;
    return JSON.parse(m[0]);
  }
  number() {
    kNumberToken.lastIndex = this.i;
    const m = kNumberToken.exec(this.s);
    if (!m) { this.i++; throw this.unexpected('in numeric literal'); }
    this.i += m[0].length;
    return { t: 'number', raw: m[0] };
  }
}

const kInt32 = new Set(['TYPE_INT32', 'TYPE_SINT32', 'TYPE_SFIXED32']);
const kUint32 = new Set(['TYPE_UINT32', 'TYPE_FIXED32']);
const kInt64 = new Set(['TYPE_INT64', 'TYPE_SINT64', 'TYPE_SFIXED64']);
const kUint64 = new Set(['TYPE_UINT64', 'TYPE_FIXED64']);
const kJsonTypeNames = { object: 'object', array: 'array', string: 'string', number: 'number', bool: 'bool' };

// Converts JSON to the plain object protobufjs's fromObject takes (keys: proto field names).
class RequestConverter {
  constructor(pool, allowUnknownFields) {
    this.pool = pool;
    this.allowUnknownFields = allowUnknownFields;
  }

  message(fqn, node) {
    const entry = this.pool.lookup(fqn);
    if (fqn.replace(/^\./, '').startsWith('google.protobuf.')) {
      outsideSubset(`the JSON form of well-known type ${entry.fqn}`);
    }
    if (node.t === 'null') return null;
    if (node.t !== 'object') {
      throw new JsonError(`cannot unmarshal ${kJsonTypeNames[node.t]} into message ${entry.fqn}`);
    }
    const byJsonName = new Map();
    const byName = new Map();
    for (const f of entry.proto.field || []) {
      byJsonName.set(f.jsonName !== undefined ? f.jsonName : defaultJsonName(f.name), f);
      byName.set(f.name, f);
    }
    const out = {};
    for (const [key, value] of node.entries) {
      const field = byJsonName.get(key) || byName.get(key);
      if (!field) {
        if (this.allowUnknownFields) continue;
        throw new JsonError(`message type ${entry.fqn} has no known field named ${key}`);
      }
      if (value.t === 'null') { delete out[field.name]; continue; }
      out[field.name] = this.field(entry.fqn, field, value);
    }
    return out;
  }

  field(messageFqn, field, node) {
    if (isMapField(this.pool, field)) {
      if (node.t !== 'object') throw new JsonError(`field ${field.name}: expecting a JSON object for a map`);
      const { key, value } = mapEntryFields(this.pool, field);
      const out = new Map();
      for (const [k, v] of node.entries) {
        const mapKey = key.type === 'TYPE_STRING' ? k : this.scalar(key, { t: 'string', v: k });
        if (v.t === 'null') continue;
        out.set(String(mapKey), [mapKey, this.single(value, v)]);
      }
      if (this.pool.protobufHasMap(messageFqn, field.name)) {
        return Object.fromEntries(Array.from(out, ([k, [, v]]) => [k, v]));
      }
      return Array.from(out.values(), ([k, v]) => ({ key: k, value: v }));
    }
    // Like jhump/protoreflect: an array for a singular field keeps its last element, and a single
    // value for a repeated field is a list of one.
    if (field.label === 'LABEL_REPEATED') {
      const items = node.t === 'array' ? node.items : [node];
      return items.filter((n) => n.t !== 'null').map((n) => this.single(field, n));
    }
    if (node.t === 'array') {
      const items = node.items.filter((n) => n.t !== 'null');
      return items.length > 0 ? this.single(field, items[items.length - 1]) : undefined;
    }
    return this.single(field, node);
  }

  single(field, node) {
    if (field.type === 'TYPE_MESSAGE' || field.type === 'TYPE_GROUP') return this.message(field.typeName, node);
    return this.scalar(field, node);
  }

  scalar(field, node) {
    const bad = () => new JsonError(
      `bad value for field ${field.name} (${field.type.replace(/^TYPE_/, '').toLowerCase()}): ` +
      `${node.t === 'string' ? JSON.stringify(node.v) : node.raw !== undefined ? node.raw : node.t}`);
    const integer = (min, max) => {
      let text;
      if (node.t === 'number') text = node.raw;
      else if (node.t === 'string') text = node.v.trim();
      else throw bad();
      if (!/^-?[0-9]+$/.test(text)) throw bad();
      const n = BigInt(text);
      if (n < min || n > max) throw new JsonError(`value out of range for field ${field.name}: ${text}`);
      return n;
    };
    switch (field.type) {
      case 'TYPE_STRING':
        if (node.t !== 'string') throw bad();
        return node.v;
      case 'TYPE_BOOL':
        if (node.t === 'bool') return node.v;
        if (node.t === 'string' && (node.v === 'true' || node.v === 'false')) return node.v === 'true';
        throw bad();
      case 'TYPE_BYTES':
        if (node.t !== 'string') throw bad();
        return node.v.replace(/-/g, '+').replace(/_/g, '/');
      case 'TYPE_DOUBLE':
      case 'TYPE_FLOAT': {
        if (node.t === 'number') return Number(node.raw);
        if (node.t === 'string') {
          if (node.v === 'NaN') return NaN;
          if (node.v === 'Infinity') return Infinity;
          if (node.v === '-Infinity') return -Infinity;
          if (/^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$/.test(node.v)) return Number(node.v);
        }
        throw bad();
      }
      case 'TYPE_ENUM': {
        const e = this.pool.lookup(field.typeName).proto;
        if (node.t === 'string') {
          const v = (e.value || []).find((x) => x.name === node.v);
          if (!v) throw new JsonError(`enum ${field.typeName.replace(/^\./, '')} does not have value named ${JSON.stringify(node.v)}`);
          return v.number;
        }
        return Number(integer(-(2n ** 31n), 2n ** 31n - 1n));
      }
      default:
        if (kInt32.has(field.type)) return Number(integer(-(2n ** 31n), 2n ** 31n - 1n));
        if (kUint32.has(field.type)) return Number(integer(0n, 2n ** 32n - 1n));
        if (kInt64.has(field.type)) return integer(-(2n ** 63n), 2n ** 63n - 1n).toString();
        if (kUint64.has(field.type)) return integer(0n, 2n ** 64n - 1n).toString();
        throw new JsonError(`unsupported field type ${field.type}`);
    }
  }
}

// ---- Response: protobufjs object -> JSON text ------------------------------------------------

class Raw { constructor(text) { this.text = text; } }
class Pairs { constructor(pairs) { this.pairs = pairs; } }

// Go's strconv.FormatFloat(f, 'g', -1, 64): shortest digits, exponent form below 1e-4 and from
// 1e+06 up, with a two-digit exponent.
function formatDouble(x) {
  if (Number.isNaN(x)) return '"NaN"';
  if (x === Infinity) return '"Infinity"';
  if (x === -Infinity) return '"-Infinity"';
  if (x === 0) return Object.is(x, -0) ? '-0' : '0';
  const [mantissa, expText] = x.toExponential().split('e');
  const exp = Number(expText);
  if (exp < -4 || exp >= 6) {
    const digits = String(Math.abs(exp)).padStart(2, '0');
    return `${mantissa}e${exp < 0 ? '-' : '+'}${digits}`;
  }
  return String(x);
}

// Go's encoding/json string escaping (HTML-safe), which jhump/protoreflect's JSON uses.
function goQuote(s) {
  return JSON.stringify(s)
    .replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

class ResponseFormatter {
  constructor(pool) { this.pool = pool; }

  // A message (protobufjs toObject output) as ordered pairs, fields by number: present message
  // fields (even empty), non-empty lists and maps, scalars that differ from their default.
  message(fqn, obj) {
    const entry = this.pool.lookup(fqn);
    if (entry.fqn.startsWith('google.protobuf.')) outsideSubset(`the JSON form of well-known type ${entry.fqn}`);
    const pairs = [];
    for (const field of sortedFields(entry.proto)) {
      if (!Object.prototype.hasOwnProperty.call(obj, field.name)) continue;
      const value = obj[field.name];
      if (value === null || value === undefined) continue;
      const name = field.jsonName !== undefined ? field.jsonName : defaultJsonName(field.name);
      if (isMapField(this.pool, field)) {
        const { key: keyField, value: valueField } = mapEntryFields(this.pool, field);
        const map = Array.isArray(value)
          ? Object.fromEntries(value.map((e) => [String(e.key), e.value])) : value;
        const keys = Object.keys(map).sort(keyField.type === 'TYPE_STRING' || keyField.type === 'TYPE_BOOL'
          ? undefined : (a, b) => (BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0));
        if (keys.length === 0) continue;
        pairs.push([name, new Pairs(keys.map((k) => [k, this.single(valueField, map[k])]))]);
      } else if (field.label === 'LABEL_REPEATED') {
        if (value.length === 0) continue;
        pairs.push([name, value.map((v) => this.single(field, v))]);
      } else if (field.type === 'TYPE_MESSAGE' || field.type === 'TYPE_GROUP' ||
                 field.oneofIndex !== undefined || !isDefault(field, value)) {
        pairs.push([name, this.single(field, value)]);
      }
    }
    return new Pairs(pairs);
  }

  single(field, value) {
    switch (field.type) {
      case 'TYPE_MESSAGE':
      case 'TYPE_GROUP':
        return this.message(field.typeName, value);
      case 'TYPE_ENUM': {
        const e = this.pool.lookup(field.typeName).proto;
        const v = (e.value || []).find((x) => x.number === value);
        return v ? v.name : new Raw(String(value));
      }
      case 'TYPE_DOUBLE':
      case 'TYPE_FLOAT':
        return new Raw(formatDouble(value));
      case 'TYPE_BOOL':
        return new Raw(value ? 'true' : 'false');
      case 'TYPE_STRING':
      case 'TYPE_BYTES':
        return String(value);
      default:
        if (kInt64.has(field.type) || kUint64.has(field.type)) return String(value);
        return new Raw(String(value));
    }
  }
}

function isDefault(field, value) {
  if (kInt64.has(field.type) || kUint64.has(field.type)) return String(value) === '0';
  if (field.type === 'TYPE_STRING' || field.type === 'TYPE_BYTES') return value === '';
  if (field.type === 'TYPE_BOOL') return value === false;
  return value === 0 && !Object.is(value, -0);
}

// JSON with two-space indentation, as Go's json.Indent lays it out ({} and [] stay compact).
function serialize(value, indent = '') {
  const inner = `${indent}  `;
  if (value instanceof Raw) return value.text;
  if (typeof value === 'string') return goQuote(value);
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]';
    return `[\n${value.map((v) => inner + serialize(v, inner)).join(',\n')}\n${indent}]`;
  }
  if (value.pairs.length === 0) return '{}';
  return `{\n${value.pairs.map(([k, v]) => `${inner}${goQuote(k)}: ${serialize(v, inner)}`).join(',\n')}\n${indent}}`;
}

// ---- describe: proto source, as jhump/protoprint prints it for grpcurl -----------------------
// (Compact, SortElements, ForceFullyQualifiedNames; no comments: gRPC C++ serves none.)

const kScalarNames = {
  TYPE_DOUBLE: 'double', TYPE_FLOAT: 'float', TYPE_INT64: 'int64', TYPE_UINT64: 'uint64',
  TYPE_INT32: 'int32', TYPE_FIXED64: 'fixed64', TYPE_FIXED32: 'fixed32', TYPE_BOOL: 'bool',
  TYPE_STRING: 'string', TYPE_BYTES: 'bytes', TYPE_UINT32: 'uint32', TYPE_SFIXED32: 'sfixed32',
  TYPE_SFIXED64: 'sfixed64', TYPE_SINT32: 'sint32', TYPE_SINT64: 'sint64',
};

class ProtoPrinter {
  constructor(pool) { this.pool = pool; }

  typeName(field) { return kScalarNames[field.type] || field.typeName; }

  field(field, file, indent) {
    let text;
    if (isMapField(this.pool, field)) {
      const { key, value } = mapEntryFields(this.pool, field);
      text = `map<${this.typeName(key)}, ${this.typeName(value)}> ${field.name} = ${field.number}`;
    } else {
      let label = '';
      if (field.label === 'LABEL_REPEATED') label = 'repeated ';
      else if (field.label === 'LABEL_REQUIRED') label = 'required ';
      else if (file.syntax !== 'proto3' || field.proto3Optional) label = 'optional ';
      text = `${label}${this.typeName(field)} ${field.name} = ${field.number}`;
    }
    if (field.jsonName !== undefined && field.jsonName !== defaultJsonName(field.name)) {
      text += ` [json_name = ${JSON.stringify(field.jsonName)}]`;
    }
    return `${indent}${text};`;
  }

  message(proto, file, indent) {
    const inner = `${indent}  `;
    const lines = [`${indent}message ${proto.name} {`];
    const fields = sortedFields(proto);
    const printedOneofs = new Set();
    for (const f of fields) {
      if (f.oneofIndex === undefined || f.proto3Optional) {
        lines.push(this.field(f, file, inner));
      } else if (!printedOneofs.has(f.oneofIndex)) {
        printedOneofs.add(f.oneofIndex);
        lines.push(`${inner}oneof ${proto.oneofDecl[f.oneofIndex].name} {`);
        for (const g of fields.filter((x) => x.oneofIndex === f.oneofIndex)) {
          lines.push(this.field(g, file, `${inner}  `));
        }
        lines.push(`${inner}}`);
      }
    }
    const byName = (a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
    for (const n of (proto.nestedType || []).filter((m) => !(m.options && m.options.mapEntry)).sort(byName)) {
      lines.push(this.message(n, file, inner));
    }
    for (const e of (proto.enumType || []).slice().sort(byName)) lines.push(this.enumText(e, inner));
    lines.push(`${indent}}`);
    return lines.join('\n');
  }

  enumText(proto, indent) {
    const values = (proto.value || []).slice().sort((a, b) => a.number - b.number);
    return [`${indent}enum ${proto.name} {`, ...values.map((v) => `${indent}  ${v.name} = ${v.number};`),
            `${indent}}`].join('\n');
  }

  method(proto, indent) {
    const input = `${proto.clientStreaming ? 'stream ' : ''}${proto.inputType}`;
    const output = `${proto.serverStreaming ? 'stream ' : ''}${proto.outputType}`;
    return `${indent}rpc ${proto.name} ( ${input} ) returns ( ${output} );`;
  }

  service(proto) {
    const methods = (proto.method || []).slice().sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    return [`service ${proto.name} {`, ...methods.map((m) => this.method(m, '  ')), '}'].join('\n');
  }

  describe(entry) {
    switch (entry.kind) {
      case 'service': return ['a service', this.service(entry.proto)];
      case 'method': return ['a method', this.method(entry.proto, '')];
      case 'enum': return ['an enum', this.enumText(entry.proto, '')];
      case 'field': return ['a field', this.field(entry.proto, entry.file, '')];
      default: {
        const parent = entry.parent ? this.pool.lookup(entry.parent) : null;
        if (entry.proto.options && entry.proto.options.mapEntry && parent) {
          const field = parent.proto.field.find((f) => f.typeName === `.${entry.fqn}`);
          return ['the entry type for a map field', this.field(field, entry.file, '')];
        }
        return ['a message', this.message(entry.proto, entry.file, '')];
      }
    }
  }
}

// ---- Connection ------------------------------------------------------------------------------

// Why a connection to ADDRESS fails, in Go's words ("dial tcp 127.0.0.1:1: connect: connection
// refused"), found by trying it once with a plain socket.
function describeDialFailure(address, isUnix) {
  return new Promise((resolve) => {
    let options;
    if (isUnix) {
      options = { path: address };
    } else {
      const m = /^(.*):([^:]*)$/.exec(address);
      if (!m) { resolve(`dial tcp: address ${address}: missing port in address`); return; }
      options = { host: m[1].replace(/^\[(.*)\]$/, '$1'), port: Number(m[2]) };
    }
    const socket = net.connect(options);
    socket.setTimeout(2000);
    const kind = isUnix ? 'unix' : 'tcp';
    const texts = {
      ECONNREFUSED: 'connection refused', ENOENT: 'no such file or directory',
      EACCES: 'permission denied', ENOTSOCK: 'socket operation on non-socket',
      EHOSTUNREACH: 'no route to host', ENETUNREACH: 'network is unreachable',
    };
    socket.on('connect', () => { socket.destroy(); resolve('the connection closed during the HTTP/2 handshake'); });
    socket.on('timeout', () => { socket.destroy(); resolve('context deadline exceeded'); });
    socket.on('error', (err) => {
      resolve(`dial ${kind} ${address}: connect: ${texts[err.code] || err.message}`);
    });
  });
}

// grpcurl's BlockingDial: READY within the connect timeout, or fail at the first failure.
function blockingDial(channel, deadline) {
  return new Promise((resolve, reject) => {
    const check = () => {
      const state = channel.getConnectivityState(true);
      if (state === grpc.connectivityState.READY) { resolve(); return; }
      if (state === grpc.connectivityState.TRANSIENT_FAILURE || state === grpc.connectivityState.SHUTDOWN) {
        reject(new Error('failure'));
        return;
      }
      channel.watchConnectivityState(state, deadline, (err) => {
        if (err) reject(new Error('context deadline exceeded'));
        else check();
      });
    };
    check();
  });
}

// ---- Main ------------------------------------------------------------------------------------

function parseSymbol(symbol) {
  let pos = symbol.lastIndexOf('/');
  if (pos < 0) pos = symbol.lastIndexOf('.');
  if (pos < 0) return ['', ''];
  return [symbol.slice(0, pos), symbol.slice(pos + 1)];
}

function readRequestData(data) {
  return data === '@' ? fs.readFileSync(0, 'utf8') : data;
}

async function invoke(source, channel, symbol, flags, deadline) {
  const [svc, mth] = parseSymbol(symbol);
  const failInvoke = (cause) => fail(cause, `Error invoking method "${symbol}"`);
  if (svc === '' || mth === '') {
    failInvoke(`given method name "${symbol}" is not in expected format: 'service/method' or 'service.method'`);
  }
  let service;
  try {
    service = await source.findSymbol(svc, deadline);
  } catch (err) {
    if (err instanceof NotFoundError) failInvoke(`target server does not expose service "${svc}"`);
    failInvoke(`failed to query for service descriptor "${svc}": ${err.message}`);
  }
  if (service.kind !== 'service') failInvoke(`target server does not expose service "${svc}"`);
  const method = (service.proto.method || []).find((m) => m.name === mth);
  if (!method) failInvoke(`service "${svc}" does not include a method named "${mth}"`);
  const methodFqn = `${service.fqn}.${method.name}`;
  if (method.clientStreaming || method.serverStreaming) outsideSubset(`calling streaming method ${methodFqn}`);

  // The request: the first JSON value of the data (none: an empty message); a second is an error.
  const pool = source.pool;
  const converter = new RequestConverter(pool, flags['allow-unknown-fields']);
  let reader;
  try {
    reader = new JsonReader(readRequestData(flags.d));
  } catch (err) {
    failInvoke(`error getting request data: read /dev/stdin: ${err.message}`);
  }
  let request = {};
  try {
    if (!reader.atEnd()) {
      request = converter.message(method.inputType, reader.value()) || {};
      if (!reader.atEnd()) {
        reader.value();
        failInvoke(`method "${methodFqn}" is a unary RPC, but request data contained more than 1 message`);
      }
    }
  } catch (err) {
    if (!(err instanceof JsonError)) throw err;
    failInvoke(`error getting request data: ${err.message}`);
  }

  const inputType = pool.protobufType(method.inputType);
  const outputType = pool.protobufType(method.outputType);
  const client = new grpc.Client('unused', grpc.credentials.createInsecure(), { channelOverride: channel });
  const [err, response] = await new Promise((resolve) => {
    client.makeUnaryRequest(
      `/${service.fqn}/${method.name}`,
      (message) => Buffer.from(inputType.encode(inputType.fromObject(message)).finish()),
      (buffer) => outputType.decode(buffer),
      request, new grpc.Metadata(), deadline ? { deadline } : {},
      (e, r) => resolve([e, r]));
  });
  if (err) {
    if (typeof err.code !== 'number') failInvoke(`grpc call for "${methodFqn}" failed: ${err.message}`);
    process.stderr.write(`ERROR:\n  Code: ${codeName(err.code)}\n  Message: ${err.details}\n`);
    process.exit(kStatusCodeOffset + err.code);
  }
  const obj = outputType.toObject(response, { longs: String, enums: Number, bytes: String });
  const formatter = new ResponseFormatter(pool);
  process.stdout.write(`${serialize(formatter.message(method.outputType, obj))}\n`);
}

async function main() {
  const { flags, args } = parseFlags(process.argv.slice(2));
  if (flags.help) { usage(); process.exit(0); }
  if (flags.version) {
    process.stderr.write(`${kProg} stand-in (tests/tools/grpcurl: the subset of grpcurl the docs use)\n`);
    process.exit(0);
  }
  if (flags['connect-timeout'] < 0) fail(null, 'The -connect-timeout argument must not be negative.');
  if (flags['max-time'] < 0) fail(null, 'The -max-time argument must not be negative.');

  let rest = args;
  if (rest.length === 0) fail(null, 'Too few arguments.');
  let target = '';
  if (rest[0] !== 'list' && rest[0] !== 'describe') { target = rest[0]; rest = rest.slice(1); }
  if (rest.length === 0) fail(null, 'Too few arguments.');
  let verb = 'invoke';
  if (rest[0] === 'list' || rest[0] === 'describe') { verb = rest[0]; rest = rest.slice(1); }
  let symbol = '';
  if (verb === 'invoke') {
    if (rest.length === 0) fail(null, 'Too few arguments.');
    symbol = rest[0];
    rest = rest.slice(1);
  } else {
    if (flags.d !== '') warn("The -d argument is not used with 'list' or 'describe' verb.");
    if (rest.length > 0) { symbol = rest[0]; rest = rest.slice(1); }
  }
  if (rest.length > 0) fail(null, 'Too many arguments.');
  if (verb === 'invoke' && target === '') fail(null, 'No host:port specified.');
  if (target === '') fail(null, 'No host:port specified, no protoset specified, and no proto sources specified.');
  if (!flags.plaintext) outsideSubset('TLS (grpcurl without -plaintext)');

  const start = Date.now();
  const deadline = flags['max-time'] > 0 ? start + flags['max-time'] * 1000 : null;
  const connectMs = flags['connect-timeout'] > 0 ? flags['connect-timeout'] * 1000 : 10000;
  const dialDeadline = deadline === null ? start + connectMs : Math.min(deadline, start + connectMs);

  let grpcTarget = target;
  if (flags.unix && !target.startsWith('unix:')) {
    grpcTarget = path.isAbsolute(target) ? `unix://${target}` : `unix:${target}`;
  }
  const channel = new grpc.Channel(grpcTarget, grpc.credentials.createInsecure(), {});
  try {
    await blockingDial(channel, dialDeadline);
  } catch (err) {
    const why = err.message === 'failure' ? await describeDialFailure(target, flags.unix) : err.message;
    fail(why, `Failed to dial target host "${target}"`);
  }
  const source = new ReflectionSource(channel);

  if (verb === 'list' && symbol === '') {
    let services;
    try {
      services = (await source.listServices(deadline)).sort();
    } catch (err) {
      fail(err.message, 'Failed to list services');
    }
    process.stdout.write(services.length === 0 ? '(No services)\n' : `${services.join('\n')}\n`);
  } else if (verb === 'list') {
    let entry;
    try {
      entry = await source.findSymbol(symbol, deadline);
    } catch (err) {
      fail(err.message, `Failed to list methods for service "${symbol}"`);
    }
    if (entry.kind !== 'service') fail(`Service not found: ${symbol}`, `Failed to list methods for service "${symbol}"`);
    const methods = (entry.proto.method || []).map((m) => `${entry.fqn}.${m.name}`).sort();
    process.stdout.write(methods.length === 0 ? '(No methods)\n' : `${methods.join('\n')}\n`);
  } else if (verb === 'describe') {
    let symbols = [symbol];
    if (symbol === '') {
      try {
        symbols = await source.listServices(deadline);  // grpcurl keeps the server's order here
      } catch (err) {
        fail(err.message, 'Failed to list services');
      }
      if (symbols.length === 0) process.stdout.write('Server returned an empty list of exposed services\n');
    }
    const printer = new ProtoPrinter(source.pool);
    for (let s of symbols) {
      if (s.startsWith('.')) s = s.slice(1);
      let entry;
      try {
        entry = await source.findSymbol(s, deadline);
      } catch (err) {
        fail(err.message, `Failed to resolve symbol "${s}"`);
      }
      const [what, text] = printer.describe(entry);
      process.stdout.write(`${entry.fqn} is ${what}:\n${text}\n`);
    }
  } else {
    await invoke(source, channel, symbol, flags, deadline);
  }
  process.exit(0);
}

main().catch((err) => {
  process.stderr.write(`grpcurl stand-in: internal error: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
