// Package natsconn is the connection code the worker and the console
// share: a NATS CLI context read from its file, and the nats.go options
// of a user, token, nkey, credentials and TLS settings.
package natsconn
