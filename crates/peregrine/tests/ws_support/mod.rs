//! The WebSocket echo server the tests talk to.

use peregrine::ws::{Message, WebSocket};

/// The echo handler: text and binary messages back, until the connection closes.
pub async fn echo(mut ws: WebSocket) {
    while let Some(Ok(msg)) = ws.recv().await {
        let reply = match msg {
            Message::Text(_) | Message::Binary(_) => msg,
            _ => continue,
        };
        if ws.send(reply).await.is_err() {
            break;
        }
    }
}

/// Serves `GET /ws` with the echo handler (messages up to `max_message` bytes) on a loopback
/// port, through the framework and the engine.
pub async fn start_echo(max_message: usize) -> std::net::SocketAddr {
    use peregrine::ws::WebSocketUpgrade;
    use peregrine::{get, App, Error, Request, Response};
    let app = App::new().route(
        "/ws",
        get(move |req: Request| async move {
            let up = WebSocketUpgrade::from_request(&req)?
                .max_message_size(max_message)
                .max_frame_size(max_message);
            Ok::<Response, Error>(up.on_upgrade(echo))
        }),
    );
    serve_for_the_process(app)
}

/// Serves `app` on a loopback port (one worker) for the rest of the test process.
pub fn serve_for_the_process(app: peregrine::App) -> std::net::SocketAddr {
    let config = peregrine::ServerConfig::builder()
        .addr("127.0.0.1:0".parse().unwrap())
        .workers(1)
        .build();
    let handle = app.serve(config).unwrap();
    let addr = handle.local_addr();
    // The server lives for the rest of the test process.
    std::mem::forget(handle);
    addr
}
