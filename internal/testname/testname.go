// Package testname gives tests unique table names and election keys. It imports
// no driver, so the conformance suite (internal/storetest) can use it.
package testname

import (
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
)

var nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)

// Name returns a unique identifier for t, usable as a table name or an election key:
// "t_" + a readable part of the test name + a random suffix.
func Name(t testing.TB) string {
	n := nonIdent.ReplaceAllString(strings.ToLower(t.Name()), "_")
	if len(n) > 40 {
		n = n[len(n)-40:]
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "t_" + strings.Trim(n, "_") + "_" + hex.EncodeToString(b)
}
