//! The browser page: `/` and `/assets/{file}`, embedded in the binary from
//! `web/` (plain ES modules, no build step, nothing fetched from elsewhere).
//!
//! Every answer carries an ETag and `Cache-Control: no-cache`, so a browser
//! revalidates on each load and gets `304 Not Modified` while the binary is
//! the same.

use std::sync::OnceLock;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::extract::AssetName;

/// One embedded file.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

const INDEX: Asset = Asset {
    name: "index.html",
    content_type: "text/html; charset=utf-8",
    body: include_bytes!("../../../../web/index.html"),
};

/// Served under `/assets/`.
const ASSETS: &[Asset] = &[
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../../../web/app.js"),
    },
    Asset {
        name: "dom.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../../../web/dom.js"),
    },
    Asset {
        name: "api.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../../../web/api.js"),
    },
    Asset {
        name: "cluster.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../../../web/cluster.js"),
    },
    Asset {
        name: "search.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../../../web/search.js"),
    },
    Asset {
        name: "budget.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../../../web/budget.js"),
    },
    Asset {
        name: "forms.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../../../web/forms.js"),
    },
    Asset {
        name: "person.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../../../web/person.js"),
    },
    Asset {
        name: "requests.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../../../web/requests.js"),
    },
    Asset {
        name: "reviews.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../../../web/reviews.js"),
    },
    Asset {
        name: "certificate.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../../../web/certificate.js"),
    },
    Asset {
        name: "requests-model.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../../../web/requests-model.js"),
    },
    Asset {
        name: "seal.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../../../web/seal.js"),
    },
    Asset {
        name: "util.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../../../web/util.js"),
    },
    Asset {
        name: "xarchive-filter.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../../../web/xarchive-filter.js"),
    },
    Asset {
        name: "style.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../../../../web/style.css"),
    },
    Asset {
        name: "favicon.svg",
        content_type: "image/svg+xml",
        body: include_bytes!("../../../../web/favicon.svg"),
    },
];

/// The page may talk to every domain of the cluster (their addresses come
/// from `/v1/cluster`), but runs only its own scripts and styles.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   img-src 'self' data:; connect-src 'self' http: https:; \
                   base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// A strong ETag per asset: MurmurHash3 of its bytes, computed once.
fn etag(asset: &Asset) -> &'static str {
    static TAGS: OnceLock<Vec<(&'static str, String)>> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        std::iter::once(&INDEX)
            .chain(ASSETS)
            .map(|a| {
                let d = xarchive_filter::murmur3_x64_128(a.body, 0);
                (a.name, format!("\"{:016x}{:016x}\"", d.h1, d.h2))
            })
            .collect()
    });
    tags.iter()
        .find(|(name, _)| *name == asset.name)
        .map_or("\"\"", |(_, tag)| tag.as_str())
}

fn serve(asset: &Asset, request: &HeaderMap) -> Response {
    let tag = etag(asset);
    let fresh = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag || t.trim() == "*"));
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, asset.content_type)], asset.body).into_response()
    };
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(tag) {
        headers.insert(header::ETAG, value);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if asset.name == INDEX.name {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
    }
    response
}

/// `GET /`: the page.
#[utoipa::path(
    get,
    path = "/",
    tag = "page",
    responses(
        (status = 200, description = "The page", body = String, content_type = "text/html"),
        (status = 304, description = "Not modified (`If-None-Match` matched its ETag)"),
    )
)]
pub async fn index(headers: HeaderMap) -> Response {
    serve(&INDEX, &headers)
}

/// `GET /assets/{file}`: a script, the style sheet or the icon.
#[utoipa::path(
    get,
    path = "/assets/{file}",
    tag = "page",
    params(("file" = String, Path, description = "`app.js`, `style.css`, ...")),
    responses(
        (
            status = 200,
            description = "The file",
            content(
                (String = "text/javascript"),
                (String = "text/css"),
                (String = "image/svg+xml"),
            )
        ),
        (status = 304, description = "Not modified (`If-None-Match` matched its ETag)"),
        (status = 404, description = "`asset_not_found`", body = crate::wire::ErrorBody),
    )
)]
pub async fn asset(AssetName(name): AssetName, headers: HeaderMap) -> Result<Response, ApiError> {
    ASSETS
        .iter()
        .find(|a| a.name == name)
        .map(|a| serve(a, &headers))
        .ok_or_else(|| ApiError::asset_not_found(format!("no asset {name:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_are_embedded_with_distinct_etags() {
        let mut seen = std::collections::HashSet::new();
        for a in std::iter::once(&INDEX).chain(ASSETS) {
            assert!(!a.body.is_empty(), "{} is empty", a.name);
            assert!(seen.insert(etag(a)), "{} shares an ETag", a.name);
        }
        // The page names every asset it loads by the path served here.
        let page = std::str::from_utf8(INDEX.body).unwrap();
        for name in ["app.js", "style.css", "favicon.svg"] {
            assert!(page.contains(&format!("/assets/{name}")), "{name}");
        }
    }

    /// The router serves the page and answers cross-origin calls, as the
    /// page needs when it reads and writes the other domains.
    #[tokio::test]
    async fn the_router_serves_the_page_and_allows_other_origins() {
        use axum::body::Body;
        use axum::http::{Method, Request};
        use http_body_util::BodyExt;
        use tower::ServiceExt;

        let dir = tempfile::tempdir().unwrap();
        let mut config = crate::NodeConfig {
            name: "A".parse().unwrap(),
            data: dir.path().join("A"),
            ..crate::NodeConfig::default()
        };
        config.filter.expected_items = 1_000;
        let node = crate::Node::open(config, "http://127.0.0.1:1").unwrap();
        let call = |request: Request<Body>| {
            let app = crate::http::router(node.clone());
            async move { app.oneshot(request).await.unwrap() }
        };
        let get = |uri: &str| {
            Request::get(uri)
                .header(header::ORIGIN, "http://127.0.0.1:7702")
                .body(Body::empty())
                .unwrap()
        };

        let page = call(get("/")).await;
        assert_eq!(page.status(), StatusCode::OK);
        assert_eq!(
            page.headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        assert!(page.headers().contains_key(header::CONTENT_SECURITY_POLICY));
        let body = page.into_body().collect().await.unwrap().to_bytes();
        assert!(body.starts_with(b"<!doctype html>"));

        for (name, kind) in [
            ("app.js", "text/javascript; charset=utf-8"),
            ("dom.js", "text/javascript; charset=utf-8"),
            ("api.js", "text/javascript; charset=utf-8"),
            ("cluster.js", "text/javascript; charset=utf-8"),
            ("search.js", "text/javascript; charset=utf-8"),
            ("budget.js", "text/javascript; charset=utf-8"),
            ("forms.js", "text/javascript; charset=utf-8"),
            ("person.js", "text/javascript; charset=utf-8"),
            ("requests.js", "text/javascript; charset=utf-8"),
            ("reviews.js", "text/javascript; charset=utf-8"),
            ("certificate.js", "text/javascript; charset=utf-8"),
            ("requests-model.js", "text/javascript; charset=utf-8"),
            ("seal.js", "text/javascript; charset=utf-8"),
            ("util.js", "text/javascript; charset=utf-8"),
            ("xarchive-filter.js", "text/javascript; charset=utf-8"),
            ("style.css", "text/css; charset=utf-8"),
            ("favicon.svg", "image/svg+xml"),
        ] {
            let r = call(get(&format!("/assets/{name}"))).await;
            assert_eq!(r.status(), StatusCode::OK, "{name}");
            assert_eq!(r.headers()[header::CONTENT_TYPE], kind, "{name}");
            assert_eq!(r.headers()[header::CACHE_CONTROL], "no-cache", "{name}");
        }
        let missing = call(get("/assets/nothing.js")).await;
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
        let body = missing.into_body().collect().await.unwrap().to_bytes();
        assert!(std::str::from_utf8(&body)
            .unwrap()
            .contains("asset_not_found"));

        // A filter read from another origin: allowed, position headers readable.
        let filter = call(get("/v1/filter")).await;
        assert_eq!(filter.status(), StatusCode::OK);
        assert_eq!(
            filter.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN],
            "http://127.0.0.1:7702"
        );
        let exposed = filter.headers()[header::ACCESS_CONTROL_EXPOSE_HEADERS]
            .to_str()
            .unwrap();
        assert!(exposed.contains("x-xarchive-epoch"), "{exposed}");

        // The preflight of a cross-origin DELETE: from a page of the
        // cluster (this domain's own origin here), allowed; from any other
        // origin, not (no Access-Control-Allow-Origin: the browser refuses).
        let preflight = |origin: &'static str| {
            Request::builder()
                .method(Method::OPTIONS)
                .uri("/v1/archives/J001")
                .header(header::ORIGIN, origin)
                .header(header::ACCESS_CONTROL_REQUEST_METHOD, "DELETE")
                .header(header::ACCESS_CONTROL_REQUEST_HEADERS, "content-type")
                .body(Body::empty())
                .unwrap()
        };
        let foreign = call(preflight("http://127.0.0.1:7702")).await;
        assert!(!foreign
            .headers()
            .contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN));
        let preflight = call(preflight("http://127.0.0.1:1")).await;
        assert!(preflight.status().is_success(), "{}", preflight.status());
        assert_eq!(
            preflight.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN],
            "http://127.0.0.1:1"
        );
        let methods = preflight.headers()[header::ACCESS_CONTROL_ALLOW_METHODS]
            .to_str()
            .unwrap();
        assert!(
            methods.contains("DELETE") && methods.contains("PUT"),
            "{methods}"
        );
    }

    /// A script added to `web/` but not embedded would be a 404 for every
    /// page that imports it: each one there is served.
    #[test]
    fn every_file_of_the_page_in_web_is_served() {
        let web = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web");
        let mut files = 0;
        for entry in std::fs::read_dir(&web).unwrap() {
            let path = entry.unwrap().path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if !path.is_file() || name == "index.html" {
                continue;
            }
            let served = ASSETS.iter().find(|a| a.name == name);
            let served =
                served.unwrap_or_else(|| panic!("web/{name} is not served under /assets/"));
            assert_eq!(served.body, std::fs::read(&path).unwrap(), "{name}");
            files += 1;
        }
        assert_eq!(files, ASSETS.len());
    }

    #[test]
    fn revalidation_answers_not_modified() {
        let first = serve(&ASSETS[0], &HeaderMap::new());
        assert_eq!(first.status(), StatusCode::OK);
        let tag = first.headers()[header::ETAG].clone();
        let mut again = HeaderMap::new();
        again.insert(header::IF_NONE_MATCH, tag);
        assert_eq!(serve(&ASSETS[0], &again).status(), StatusCode::NOT_MODIFIED);
    }
}
