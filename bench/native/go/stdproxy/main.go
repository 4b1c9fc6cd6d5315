// Command stdproxy is bench/support/bare-proxy.ts in Go: net/http's server and httputil.ReverseProxy
// on a keep-alive Transport to one upstream. It forwards the method, path, headers and body, drops
// hop-by-hop headers (ReverseProxy's own rule), and streams the answer. A body with a length up to 64 KiB
// is read first and sent on from memory (as bare-proxy.ts and the gateway do), so the Transport writes
// the request's head and body in one write instead of flushing the head first. FlushInterval stays 0:
// ReverseProxy then flushes after every write (-1) by itself for text/event-stream and for answers of
// unknown length, and sends an answer with a length in one write; NATIVE_FLUSH_INTERVAL=-1 forces -1 for
// every answer (its timer flushes the head before the body: one write more per call). No auth, routing,
// limits or logs: the least a Go proxy does per call (docs/benchmarks.md, "A native data plane: what it
// would buy").
//
// Env: NATIVE_UPSTREAM (origin, e.g. http://127.0.0.1:8080), NATIVE_PORT (0: any),
// NATIVE_FLUSH_INTERVAL (a Go duration; 0); prints `listening <port> <pid>` once serving. GOMAXPROCS and
// GOGC apply as usual.
package main

import (
	"bytes"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"apphost.local/bench/native/internal/proc"
)

// Request bodies up to this size are read before the upstream call.
const maxBuffered = 64 << 10

func main() {
	upstream, err := url.Parse(proc.Getenv("NATIVE_UPSTREAM", "http://127.0.0.1:8080"))
	if err != nil {
		log.Fatalf("NATIVE_UPSTREAM: %v", err)
	}
	transport := &http.Transport{
		Proxy:       nil,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		// Keep-alive pool to the one upstream: as many idle connections as callers (c=32 and more).
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	flush, err := time.ParseDuration(proc.Getenv("NATIVE_FLUSH_INTERVAL", "0s"))
	if err != nil {
		log.Fatalf("NATIVE_FLUSH_INTERVAL: %v", err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(upstream)
			if n := r.In.ContentLength; n > 0 && n <= maxBuffered {
				body, err := io.ReadAll(io.LimitReader(r.In.Body, n))
				if err == nil && int64(len(body)) == n {
					r.Out.Body = io.NopCloser(bytes.NewReader(body))
					r.Out.GetBody = nil
				}
			}
		},
		Transport:     transport,
		FlushInterval: flush,
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+proc.Getenv("NATIVE_PORT", "0"))
	if err != nil {
		log.Fatalf("listen: %v", err)
	}
	server := &http.Server{Handler: proxy, IdleTimeout: 65 * time.Second, ReadHeaderTimeout: 30 * time.Second}
	proc.Serve(ln, server.Serve)
}
