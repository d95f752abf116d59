// The HTTP server's options from a listener's configuration (config/http_listener.h): one
// translation for fitledger-server's `webhook:` block and fitledger-shim's top-level keys.
#ifndef FITLEDGER_WEBHOOK_LISTENER_OPTIONS_H_
#define FITLEDGER_WEBHOOK_LISTENER_OPTIONS_H_

#include "config/http_listener.h"
#include "webhook/http_server.h"

namespace fitledger::webhook {

HttpServerOptions ListenerOptions(const config::HttpListenerConfig& config);

}  // namespace fitledger::webhook

#endif  // FITLEDGER_WEBHOOK_LISTENER_OPTIONS_H_
