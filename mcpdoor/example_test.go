package mcpdoor_test

import (
	"log"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentbull/toolruntime/mcpdoor"
)

// A door mounted in a server of one's own: MCP at /mcp and the protected
// resource metadata under /.well-known/, for the principals of a file.
func ExampleNew() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	ps, err := mcpdoor.LoadPrincipals("principals.json")
	if err != nil {
		log.Fatal(err)
	}
	door, err := mcpdoor.New(mcpdoor.Config{NC: nc, Principals: ps, Resource: "https://mcp.example.com/mcp"})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", door)
	mux.Handle("/.well-known/", door)
	srv := &http.Server{Addr: "127.0.0.1:8471", Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
