// Command fastproxy is bench/support/bare-proxy.ts on fasthttp: its server, and a HostClient (a
// keep-alive pool to one upstream) with response streaming on. It forwards the method, path, headers
// and body; an answer with a length is read whole and sent in one write, an event stream
// (text/event-stream) is written on and flushed chunk by chunk as it comes. No auth, routing, limits or
// logs (docs/benchmarks.md, "A native data plane: what it would buy").
//
// Env: NATIVE_UPSTREAM (origin, http://host:port), NATIVE_PORT (0: any); prints
// `listening <port> <pid>` once serving.
package main

import (
	"bufio"
	"bytes"
	"log"
	"net"
	"net/url"
	"time"

	"github.com/valyala/fasthttp"

	"apphost.local/bench/native/internal/proc"
)

var eventStream = []byte("text/event-stream")

func main() {
	upstream, err := url.Parse(proc.Getenv("NATIVE_UPSTREAM", "http://127.0.0.1:8080"))
	if err != nil {
		log.Fatalf("NATIVE_UPSTREAM: %v", err)
	}
	client := &fasthttp.HostClient{
		Addr:                          upstream.Host,
		MaxConns:                      1024,
		MaxIdleConnDuration:           30 * time.Second,
		StreamResponseBody:            true,
		NoDefaultUserAgentHeader:      true,
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
	}
	handler := func(ctx *fasthttp.RequestCtx) {
		req := &ctx.Request
		for _, h := range []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Upgrade"} {
			req.Header.Del(h)
		}
		resp := fasthttp.AcquireResponse()
		if err := client.Do(req, resp); err != nil {
			fasthttp.ReleaseResponse(resp)
			ctx.SetStatusCode(fasthttp.StatusBadGateway)
			return
		}
		resp.Header.Del("Keep-Alive")
		if !bytes.HasPrefix(resp.Header.ContentType(), eventStream) {
			resp.Body() // reads the stream whole
			_ = resp.CloseBodyStream()
			resp.CopyTo(&ctx.Response)
			fasthttp.ReleaseResponse(resp)
			return
		}
		resp.Header.CopyTo(&ctx.Response.Header)
		stream := resp.BodyStream()
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			buf := make([]byte, 4096)
			for {
				n, err := stream.Read(buf)
				if n > 0 {
					if _, werr := w.Write(buf[:n]); werr != nil || w.Flush() != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			_ = resp.CloseBodyStream()
			fasthttp.ReleaseResponse(resp)
		})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+proc.Getenv("NATIVE_PORT", "0"))
	if err != nil {
		log.Fatalf("listen: %v", err)
	}
	server := &fasthttp.Server{
		Handler:                       handler,
		IdleTimeout:                   65 * time.Second,
		DisableHeaderNamesNormalizing: true,
		NoDefaultServerHeader:         true,
		NoDefaultContentType:          true,
		NoDefaultDate:                 true,
	}
	proc.Serve(ln, server.Serve)
}
