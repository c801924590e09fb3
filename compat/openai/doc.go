// Package openai checks, from outside the runtime, that what a gateway
// gets from a worker goes through the official Go SDK of the OpenAI
// Responses API (github.com/openai/openai-go/v3) unchanged: every tool
// definition of a full catalog and every output item a step produces
// unmarshal into the SDK's request types and marshal back to equal JSON,
// and the catalog's bytes passed with param.Override reach the request
// body exactly, so its digest (and the provider's prompt cache) holds.
//
// The tests build cmd/worker and run it as a gateway meets it: a process
// on an embedded NATS server, every category switched on by its flags,
// an MCP server of its own (the Go SDK's, over streamable HTTP), a
// skills directory, and media to return: MCP images, audio and PDF
// blobs, images and PDFs in an agent's home, an image on a web site on
// loopback, so that array outputs (input_text, input_image, input_file)
// are the worker's own. It is a separate module so that the SDK never
// enters the runtime's dependencies. Run: go test ./... (in this
// directory).
package openai
