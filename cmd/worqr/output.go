package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
)

// previewLen is how many characters of a payload, result or error a table
// shows.
const previewLen = 40

// table writes aligned columns to stdout.
type table struct{ tw *tabwriter.Writer }

// table starts a table with these column headings.
func (e *env) table(header ...string) *table {
	t := &table{tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")) }

func (t *table) flush() error { return t.tw.Flush() }

// printJSON writes v as the command's one JSON document.
func (e *env) printJSON(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// note tells the person at the terminal something that is not the
// result: on stderr, so stdout holds only the table.
func (e *env) note(format string, args ...any) {
	fmt.Fprintf(e.stderr, format+"\n", args...)
}

// escape shows any bytes as one line of text: printable characters as
// they are, a backslash as \\, newlines, tabs and carriage returns as \n,
// \t and \r, and other control or unprintable characters and bytes that
// are not UTF-8 as Go escapes (\x1b, \u200b, \xff).
func escape(s string) string { return preview([]byte(s), 0) }

// preview is escape cut to at most max characters, ending with "…" when
// cut (max 0: no limit).
func preview(b []byte, max int) string {
	var out strings.Builder
	n := 0 // characters written
	for i := 0; i < len(b) && (max <= 0 || n <= max); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&out, `\x%02x`, b[i])
			n += 4
		case r == '\\':
			out.WriteString(`\\`)
			n += 2
		case r == '\n', r == '\t', r == '\r':
			q := strconv.QuoteRune(r) // '\n'
			out.WriteString(q[1 : len(q)-1])
			n += 2
		case unicode.IsPrint(r):
			out.WriteRune(r)
			n++
		default:
			q := strconv.QuoteRuneToASCII(r) // '\x00', '\u200b'
			out.WriteString(q[1 : len(q)-1])
			n += len(q) - 2
		}
		i += size
	}
	if max > 0 && n > max {
		return string([]rune(out.String())[:max-1]) + "…"
	}
	return out.String()
}

// stamp is a time for a table, to the second, in UTC.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// ago says how long before now t was, "12s ago"; a time after now is
// "in 3s".
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if d := now.Sub(t); d >= 0 {
		return span(d) + " ago"
	}
	return "in " + span(t.Sub(now))
}

// span is a duration for people: 350ms, 4.2s, 4m12s, 5h3m, 3d4h.
func span(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour-time.Second/2:
		return d.Round(time.Second).String()
	case d < 48*time.Hour-time.Minute/2:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%dm", d/time.Hour, d%time.Hour/time.Minute)
	}
	d = d.Round(time.Hour)
	return fmt.Sprintf("%dd%dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
}

// jsonTime is a time for JSON: RFC 3339 in UTC, or null when unknown.
func jsonTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// payloadJSON carries bytes whole in JSON: as a string when they are valid
// UTF-8, else in base64.
type payloadJSON struct {
	Payload       *string `json:"payload,omitempty"`
	PayloadBase64 string  `json:"payloadBase64,omitempty"`
	Size          int     `json:"size"`
}

func payloadOf(b []byte) payloadJSON {
	s, b64 := textOrBase64(b)
	return payloadJSON{Payload: s, PayloadBase64: b64, Size: len(b)}
}

// textOrBase64 returns b as a string if it is valid UTF-8, else as base64.
func textOrBase64(b []byte) (*string, string) {
	if utf8.Valid(b) {
		s := string(b)
		return &s, ""
	}
	return nil, base64.StdEncoding.EncodeToString(b)
}

// writeLines writes label-value pairs as two aligned columns.
func writeLines(w io.Writer, pairs ...string) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(tw, "%s:\t%s\n", pairs[i], pairs[i+1])
	}
	return tw.Flush()
}

func itoa[T ~int | ~int64](n T) string { return strconv.FormatInt(int64(n), 10) }
