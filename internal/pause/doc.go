// Package pause holds the worker's wait between two tries of a request
// (a conflicting write of a bucket, a stream that is not there yet): the
// caller tries, calls For, and tries again unless For returned its
// context's cause.
package pause
