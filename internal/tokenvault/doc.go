// Package tokenvault keeps OAuth tokens of remote MCP servers per
// credential owner (an agent, or a fairness key) in a NATS KV bucket,
// sealed, so that any worker can use and refresh them and no worker,
// NATS operator or log ever sees one in the clear.
//
// Data flow: a person connects an account (the console's connect page,
// or the conformance harness) and the token lands here with Put, under
// the key "t.<server>.<hash of owner>". A worker's MCP client reads it
// with Fresh before each request: a token about to expire is refreshed
// by exactly one worker, the one whose compare-and-set (KV revision) took
// the record's refresh lease; the others wait for the refreshed revision.
// Disconnecting deletes the record.
//
// Sealing: each record's token is sealed with XChaCha20-Poly1305 under
// the first key of a Keyring, with the KV key as associated data (a record
// copied under another owner's key does not open). The Keyring is read
// from a file or an environment variable, never from NATS; its other keys
// only open records, which is how a key is rotated (docs/mcp-client.md).
package tokenvault
