// Package heaptest holds what the tests that bound the heap a call or a
// step keeps in flight share: the live heap read right after a
// collection, and goroutine records left for reuse so that the goroutines
// a test starts next are not counted.
package heaptest
