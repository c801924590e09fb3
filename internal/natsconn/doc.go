// Package natsconn is the connection code the worker and the console
// share: the connection flags, read from the command line, the
// environment and a NATS CLI context file, as the CLI reads them, and the
// nats.go options of a user, token, nkey, credentials and TLS settings.
package natsconn
