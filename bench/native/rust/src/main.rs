//! bench/support/bare-proxy.ts on hyper 1: hyper's HTTP/1 server, and hyper-util's legacy client (a
//! keep-alive pool to one upstream), on tokio. It forwards the method, path, headers and body, drops
//! hop-by-hop headers both ways, and streams the answer frame by frame as it comes (an event stream's
//! events go on at once). No auth, routing, limits or logs: the least a Rust proxy does per call
//! (docs/benchmarks.md, "A native data plane: what it would buy").
//!
//! With NATIVE_WORK=1 it also does the gateway's own per-call work on a sync call (src/work.rs).
//!
//! Env: NATIVE_UPSTREAM (origin, http://host:port), NATIVE_PORT (0: any), NATIVE_THREADS (1: tokio's
//! current_thread runtime; N > 1: the multi-thread runtime with N workers), NATIVE_WORK. Prints
//! `listening <port> <pid>` once serving.

mod work;

use std::convert::Infallible;
use std::time::Duration;

use http_body_util::{Either, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderMap, HeaderName};
use hyper::server::conn::http1;
use hyper::service::{Service, service_fn};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpListener;

type Body = Either<Incoming, Empty<Bytes>>;

const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    for h in HOP_BY_HOP {
        headers.remove(HeaderName::from_static(h));
    }
}

fn env(name: &str, def: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| def.to_string())
}

fn main() {
    let threads: usize = env("NATIVE_THREADS", "1")
        .parse()
        .expect("NATIVE_THREADS: a number");
    let runtime = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    }
    .expect("tokio runtime");
    runtime.block_on(serve());
}

fn connector() -> HttpConnector {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_keepalive(Some(Duration::from_secs(30)));
    connector
}

fn client<B>() -> Client<HttpConnector, B>
where
    B: hyper::body::Body + Send + 'static + Unpin,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(1024)
        .pool_timer(TokioTimer::new())
        .build(connector())
}

/// Serves each accepted connection with the service `make` returns, as HTTP/1.1 with keep-alive.
async fn accept_loop<S, B>(listener: TcpListener, make: impl Fn() -> S)
where
    S: Service<Request<Incoming>, Response = Response<B>, Error = Infallible> + Send + 'static,
    S::Future: Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = make();
        tokio::spawn(async move {
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn serve() {
    let upstream: Uri = env("NATIVE_UPSTREAM", "http://127.0.0.1:8080")
        .parse()
        .expect("NATIVE_UPSTREAM");
    let authority = upstream
        .authority()
        .expect("NATIVE_UPSTREAM has host:port")
        .clone();
    let listener = TcpListener::bind(format!("127.0.0.1:{}", env("NATIVE_PORT", "0")))
        .await
        .expect("listen");
    println!(
        "listening {} {}",
        listener.local_addr().expect("address").port(),
        std::process::id()
    );

    if env("NATIVE_WORK", "") == "1" {
        let gw = work::Gateway::from_env(&upstream, client::<Full<Bytes>>());
        return accept_loop(listener, move || {
            let gw = gw.clone();
            service_fn(move |req| {
                let gw = gw.clone();
                async move { Ok::<_, Infallible>(work::call(gw, req).await) }
            })
        })
        .await;
    }

    let client: Client<HttpConnector, Incoming> = client();
    accept_loop(listener, move || {
        let client = client.clone();
        let authority = authority.clone();
        service_fn(move |req: Request<Incoming>| {
            let client = client.clone();
            let authority = authority.clone();
            async move {
                let (mut parts, body) = req.into_parts();
                let mut uri = Uri::builder().scheme("http").authority(authority);
                if let Some(pq) = parts.uri.path_and_query() {
                    uri = uri.path_and_query(pq.clone());
                }
                parts.uri = uri.build().expect("upstream URI");
                strip_hop_by_hop(&mut parts.headers);
                let answer: Response<Body> =
                    match client.request(Request::from_parts(parts, body)).await {
                        Ok(res) => {
                            let (mut parts, body) = res.into_parts();
                            strip_hop_by_hop(&mut parts.headers);
                            Response::from_parts(parts, Either::Left(body))
                        }
                        Err(_) => {
                            let mut res = Response::new(Either::Right(Empty::new()));
                            *res.status_mut() = StatusCode::BAD_GATEWAY;
                            res
                        }
                    };
                Ok::<_, Infallible>(answer)
            }
        })
    })
    .await;
}
