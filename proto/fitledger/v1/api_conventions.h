// Conventions of fitledger's gRPC API beyond the .proto files, shared by fitledger-server and its
// clients (no gRPC headers here).
#ifndef FITLEDGER_PROTO_FITLEDGER_V1_API_CONVENTIONS_H_
#define FITLEDGER_PROTO_FITLEDGER_V1_API_CONVENTIONS_H_

namespace fitledger::v1 {

// Trailing metadata fitledger-server adds to every reply of its Extender and Introspection
// services (value "fitledger-server"). A failed call without it did not get an answer from the
// server's code: the server was unreachable, or gRPC gave up first (a deadline).
inline constexpr char kServerOriginMetadata[] = "fitledger-origin";

}  // namespace fitledger::v1

#endif  // FITLEDGER_PROTO_FITLEDGER_V1_API_CONVENTIONS_H_
