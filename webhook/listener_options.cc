#include "webhook/listener_options.h"

namespace fitledger::webhook {

HttpServerOptions ListenerOptions(const config::HttpListenerConfig& c) {
  HttpServerOptions o;
  o.io_threads = static_cast<int>(c.io_threads);
  o.max_connections = static_cast<int>(c.max_connections);
  o.max_body_bytes = c.max_body_bytes;
  o.read_timeout = c.read_timeout;
  o.write_timeout = c.write_timeout;
  o.idle_timeout = c.idle_timeout;
  o.handshake_timeout = c.handshake_timeout;
  o.keep_alive_max_requests = static_cast<int>(c.keep_alive_max_requests);
  o.cert_file = c.tls.cert_file;
  o.key_file = c.tls.key_file;
  o.client_ca_file = c.tls.client_ca_file;
  return o;
}

}  // namespace fitledger::webhook
