// A reflection-based gRPC client (no generated stubs, no .proto files): lists the server's
// services, downloads fitledger.v1.Extender's descriptor through server reflection, calls
// Filter with the very JSON kube-scheduler POSTs (PascalCase keys), and checks health.
//
//   node reflect.js HOST:PORT ARGS.json
//
// Prints one JSON object: {"services":[...],"filter":{...},"health":"SERVING"}.
'use strict';
const fs = require('fs');
const grpc = require('@grpc/grpc-js');
const { GrpcReflection } = require('grpc-js-reflection-client');

const [host, argsFile] = process.argv.slice(2);
if (!host || !argsFile) {
  console.error('usage: node reflect.js HOST:PORT ARGS.json');
  process.exit(2);
}

// JSON keys -> proto field names, the way kube-scheduler's decoder matches them: case-insensitive
// (and, for the Kubernetes objects inside, camelCase to snake_case). Unknown keys are dropped.
function normalize(key) {
  return key.replace(/_/g, '').toLowerCase();
}
function toProto(type, value) {
  if (value === null || value === undefined) return undefined;
  const out = {};
  const fields = {};
  for (const field of type.fieldsArray) fields[normalize(field.name)] = field;
  for (const [key, v] of Object.entries(value)) {
    const field = fields[normalize(key)];
    if (!field || v === null) continue;
    field.resolve();
    const convert = (x) => (field.resolvedType && field.resolvedType.fieldsArray ? toProto(field.resolvedType, x) : x);
    if (field.map) {
      out[field.name] = {};
      for (const [mk, mv] of Object.entries(v)) out[field.name][mk] = convert(mv);
    } else if (field.repeated) {
      out[field.name] = v.map(convert);
    } else {
      out[field.name] = convert(v);
    }
  }
  return out;
}

// A unary call encoded and decoded with the message types reflection returned.
function unary(client, path, requestType, responseType, request) {
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(
      path,
      (message) => Buffer.from(requestType.encode(requestType.fromObject(message)).finish()),
      (buffer) => responseType.toObject(responseType.decode(buffer), { longs: String, enums: String }),
      request,
      { deadline: Date.now() + 10000 },
      (err, res) => (err ? reject(err) : resolve(res)));
  });
}

(async () => {
  const credentials = grpc.ChannelCredentials.createInsecure();
  const reflection = new GrpcReflection(host, credentials);
  const services = (await reflection.listServices()).sort();

  const client = new grpc.Client(host, credentials);
  const root = (await reflection.getDescriptorBySymbol('fitledger.v1.Extender')).getProtobufJsRoot();
  const service = root.lookupService('fitledger.v1.Extender');
  const method = service.methods.Filter;
  method.resolve();
  const body = JSON.parse(fs.readFileSync(argsFile, 'utf8'));
  const filter = await unary(client, '/fitledger.v1.Extender/Filter', method.resolvedRequestType,
                             method.resolvedResponseType, toProto(method.resolvedRequestType, body));

  const healthRoot = (await reflection.getDescriptorBySymbol('grpc.health.v1.Health')).getProtobufJsRoot();
  const check = healthRoot.lookupService('grpc.health.v1.Health').methods.Check;
  check.resolve();
  const status = await unary(client, '/grpc.health.v1.Health/Check', check.resolvedRequestType,
                             check.resolvedResponseType, {});

  console.log(JSON.stringify({ services, filter, health: status.status }));
  process.exit(0);
})().catch((err) => {
  console.error(`reflect.js: ${err.message || err}`);
  process.exit(1);
});
