// uws_peer: the reference server of benchmarks/fanout_compare.py, on uWebSockets' pub/sub.
// Our own few lines; uWebSockets and uSockets are fetched and built by build_uws.sh (not committed).
//
// The subset of Vigil's protocol fanout_client speaks: a text message containing "subscribe"
// subscribes the connection to one topic and is answered {"type":"ok"}; any other text message is
// published to that topic as one event of SIZE bytes that contains the received message (the
// client reads its send time from it), and answered {"type":"ok"}. Everything is uWebSockets' own
// fast path (App::publish: one topic, corked sends); nothing is compressed.
//
//   uws_peer PORT SIZE      prints "listening on PORT" when ready
#include "App.h"

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: uws_peer PORT EVENT_BYTES\n");
        return 2;
    }
    int port = std::atoi(argv[1]);
    size_t size = (size_t) std::atol(argv[2]);
    struct PerSocket {};
    uWS::App *app = nullptr;
    std::string event;
    uWS::App server;
    app = &server;
    server.ws<PerSocket>("/*", {
        .compression = uWS::DISABLED,
        .maxPayloadLength = 64 * 1024,
        .idleTimeout = 0,                      // no timeouts or pings: vigild's bench config has none at this load either
        .maxBackpressure = 64 * 1024 * 1024,   // never drop: the client checks that every event arrives
        .closeOnBackpressureLimit = false,
        .sendPingsAutomatically = false,
        .message = [&](auto *ws, std::string_view message, uWS::OpCode) {
            if (message.find("subscribe") != std::string_view::npos) {
                ws->subscribe("map");
                ws->send("{\"type\":\"ok\"}", uWS::OpCode::TEXT);
                return;
            }
            // {"type":"event","m":<message>,"p":"xxx…"} padded to SIZE bytes.
            event.assign("{\"type\":\"event\",\"m\":");
            event.append(message);
            event.append(",\"p\":\"");
            if (event.size() + 2 < size) event.append(size - event.size() - 2, 'x');
            event.append("\"}");
            ws->send("{\"type\":\"ok\"}", uWS::OpCode::TEXT);
            // Published after the handler returns: inside it the publisher's socket holds the loop's
            // cork buffer, so the subscribers could not be corked and each event would cost one
            // send() per subscriber; deferred, uWebSockets corks each subscriber's batch.
            uWS::Loop::get()->defer([app, copy = event]() { app->publish("map", copy, uWS::OpCode::TEXT); });
        },
    }).listen("127.0.0.1", port, [port](auto *listenSocket) {
        if (!listenSocket) {
            std::fprintf(stderr, "cannot listen on %d\n", port);
            std::exit(1);
        }
        std::printf("listening on %d\n", port);
        std::fflush(stdout);
    }).run();
    return 0;
}
