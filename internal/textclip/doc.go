// Package textclip holds the small text helpers the worker's packages
// shared as copies: cutting text to a byte budget without splitting a
// character, and writing a size for people.
package textclip
