//! The baseline for `scripts/bench-domain.sh`: the least an axum server
//! can do per request (a fixed small JSON body), on the same runtime
//! settings as `xarchive serve`.

use axum::routing::get;
use axum::{Json, Router};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:7790".into());
    let app = Router::new().route(
        "/v1/contains/{id}",
        get(|| async { Json(serde_json::json!({"maybe": true})) }),
    );
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app).await
}
