package scripts

import (
	"strings"
	"testing"
)

// Every script carries the helpers it names, and what they name in turn,
// and no others.
func TestPreludeCarriesWhatAScriptUses(t *testing.T) {
	parts := splitCommon(commonFor(true, true))
	has := func(src, name string) bool {
		return strings.Contains(src, "local function "+name+"(") || strings.Contains(src, "local "+name+" =")
	}
	p := prelude(parts, "local now = now_ms()\nif lease_live(KEYS[1], ARGV[1], now) then publish('c', 'm') end\n")
	for _, name := range []string{"now_ms", "lease_live", "publish", "PUBLISH_COMMAND"} {
		if !has(p, name) {
			t.Errorf("%s missing from\n%s", name, p)
		}
	}
	for _, name := range []string{"now_us", "stat", "stats_flush", "STATS", "entry_id"} {
		if has(p, name) {
			t.Errorf("%s carried needlessly", name)
		}
	}
	if !strings.Contains(p, "SPUBLISH") {
		t.Error("the publish command is lost")
	}
	// A helper's own helpers come along, above it.
	p = prelude(parts, "return stat('x', 1)")
	if i, j := strings.Index(p, "local STATS ="), strings.Index(p, "local function stat("); i < 0 || j < 0 || i > j {
		t.Errorf("stat needs STATS defined above it:\n%s", p)
	}
}

// Every part of common.lua is cut at a definition, so that nothing of it
// is lost between parts: joined again, they are the file less its opening
// comment.
func TestSplitCommonLosesNothing(t *testing.T) {
	src := commonFor(false, false)
	var b strings.Builder
	for _, p := range splitCommon(src) {
		if len(p.names) == 0 {
			t.Errorf("a part defines nothing: %q", p.src)
		}
		b.WriteString(p.src)
	}
	if !strings.HasSuffix(strings.TrimSpace(src), strings.TrimSpace(b.String())) {
		t.Error("parts joined again differ from common.lua")
	}
}
