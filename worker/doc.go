// Package worker is the tool runtime worker as a library. [New] and
// [Worker.Run] serve the tools of your categories on a NATS connection of
// yours:
//
//	w, err := worker.New(nc, worker.Config{Name: "weather-1"}, tool.NewCategory("weather", weatherTool))
//	...
//	err = w.Run(ctx) // until ctx ends, then running steps finish within Config.Grace
//
// [Main] is the whole program cmd/worker runs, with its flags and
// environment, its embedded NATS server, signals, telemetry, exit codes
// and built-in categories, so that a program of your own can run it with
// tools of your own beside the built-in ones:
//
//	func main() {
//		worker.Main(context.Background(), worker.Config{Version: "1.2.0"}, tool.NewCategory("weather", weatherTool))
//	}
//
// With no flags the worker starts an embedded NATS server with JetStream on
// 127.0.0.1:4222 (monitoring on 8222) and serves on it; with --nats-url (or
// NATS_URL) it joins an existing server or cluster. Every flag can also be
// set from the environment: --call-timeout is WORKER_CALL_TIMEOUT, and so
// on; --help lists them all.
//
// The first SIGINT or SIGTERM (or the end of Main's context) announces
// the stop and lets running steps finish for --grace; a second one ends
// the process at once, and unfinished steps are delivered again.
package worker
