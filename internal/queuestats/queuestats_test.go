package queuestats

import "testing"

func TestLabel(t *testing.T) {
	for in, want := range map[string]string{
		"":              "",
		"emails":        "emails",
		"café":          "café",
		"jobs-\xff\xfe": "jobs-\uFFFD",
		"\xffa\xffb":    "\uFFFDa\uFFFDb",
	} {
		if got := Label(in); got != want {
			t.Errorf("Label(%q) = %q, want %q", in, got, want)
		}
	}
}
