// Package integration tests the built numaproxy binary end to end: it builds the
// command once, runs it with real configuration files, real signals and real clients,
// and checks what an operator would see.
package integration
