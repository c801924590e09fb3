// Package principal is who calls the MCP door: the principals file that
// maps bearer tokens (by their SHA-256) and JWT subjects to principals,
// and the verification of a request's token against it.
//
// A principal fixes everything of a turn a client must not choose: the
// agent id, the fairness key and weight, the bindings, skills and MCP
// servers, and the approval scope. The file is read once at start; a
// token is looked up by comparing its hash with every entry in constant
// time, so the time taken says nothing about which entry matched.
package principal
