// Package proc is what both Go proxies do around serving: settings from the environment with defaults,
// exit on SIGTERM or SIGINT, and the `listening <port> <pid>` line bench/floor.ts waits for.
package proc

import (
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
)

// Getenv is the variable's value, or def when it is unset or empty.
func Getenv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Serve prints the ready line for ln, then runs serve(ln) until it fails; SIGTERM or SIGINT exits 0.
func Serve(ln net.Listener, serve func(net.Listener) error) {
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
		os.Exit(0)
	}()
	fmt.Printf("listening %d %d\n", ln.Addr().(*net.TCPAddr).Port, os.Getpid())
	if err := serve(ln); err != nil {
		log.Fatal(err)
	}
}
