package dashboard

import (
	"bytes"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/worqr/worqr"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var embedded embed.FS

// staticFS holds static/app.js and static/app.css, served under /static/.
var staticFS fs.FS = embedded

var funcs = template.FuncMap{
	"display":           display,
	"statsKinds":        func() int { return worqr.StatsKinds },
	"otherKind":         func() string { return worqr.StatsOtherKind },
	"qhex":              func(s string) string { return hex.EncodeToString([]byte(s)) },
	"preview":           preview,
	"pretty":            pretty,
	"short":             short,
	"when":              when,
	"millis":            func(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() },
	"act":               act,
	"queueURL":          queuePath,
	"taskURL":           taskPath,
	"workflowURL":       workflowPath,
	"add":               func(a, b int) int { return a + b },
	"neg":               func(a int) int { return -a },
	"taskPreview":       func() int { return taskPreview },
	"bytes":             func(s string) []byte { return []byte(s) },
	"maxLimit":          func() int64 { return worqr.MaxLimit },
	"maxAttemptHistory": func() int { return worqr.MaxAttemptHistory },
}

// actForm is what the "act" template renders: one action's form.
type actForm struct {
	P                                          view
	Op, Back, Queue, ID, Label, Class, Confirm string
}

func act(p view, op, back, queue, id, label string) actForm {
	f := actForm{P: p, Op: op, Back: back, Queue: queue, ID: id, Label: label}
	f.Confirm = actions[op].verb + " " + display(queue)
	if id != "" {
		f.Confirm += ", task " + id
	}
	f.Confirm += "?"
	switch op {
	case "cancel", "purge", "deletequeue", "deletedead":
		f.Class = "danger"
	}
	return f
}

var pages = func() map[string]*template.Template {
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html"))
	out := make(map[string]*template.Template)
	for _, name := range []string{"overview", "queue", "task", "workers", "periodic", "found", "login", "confirm", "error", "visit", "workflow"} {
		out[name] = template.Must(template.Must(layout.Clone()).ParseFS(templateFS, "templates/"+name+".html"))
	}
	return out
}()

// view is what every template gets: the layout's fields and the page's
// own Data.
type view struct {
	Base     string
	CSRF     string
	ReadOnly bool
	Authed   bool
	SignOut  bool // signed in with a session, which can be ended
	Title    string
	Nav      string
	Queue    string // the queue the page is about, for the search box
	Done     string
	Data     any
}

// render writes a page. Data may be a page (its Data then set) or any
// value for page.Data.
func (h *handler) render(w http.ResponseWriter, r *http.Request, name string, status int, data any) {
	p := view{Base: base(r), ReadOnly: h.opts.ReadOnly, Nav: name, Data: data}
	if name != "login" && name != "visit" { // pages shown to anyone
		p.CSRF = h.csrfToken(w, r)
		p.Authed = true
		p.SignOut = h.session(r) != ""
	}
	p.Title = name
	if t, ok := data.(titled); ok {
		p.Title = t.title()
	}
	if q, ok := data.(interface{ queueName() string }); ok {
		p.Queue = q.queueName()
	}
	if d := r.URL.Query().Get("done"); d != "" {
		p.Done = doneMessages[d]
		if strings.Contains(p.Done, "%d") {
			p.Done = fmt.Sprintf(p.Done, countParam(r))
		}
	}
	var buf bytes.Buffer
	if err := pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		h.log.Error("worqr dashboard: rendering", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

type titled interface{ title() string }

// fail shows an error page.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h.render(w, r, "error", status, errorData{Status: status, Message: msg})
}

// errorStatus is the status of a page whose call failed with err: the
// request's fault (bad input, no such queue), or else Redis's.
func errorStatus(err error) int {
	switch {
	case errors.Is(err, worqr.ErrInvalidOptions), errors.Is(err, worqr.ErrInvalidQueueName):
		return http.StatusBadRequest
	case errors.Is(err, worqr.ErrNoQueue):
		return http.StatusNotFound
	}
	return http.StatusBadGateway
}

type errorData struct {
	Status  int
	Message string
}

func (errorData) title() string { return "error" }

// display shows a name of any bytes unambiguously: as it is if it is
// printable UTF-8, else quoted with escapes.
func display(s string) string {
	if s == "" {
		return `""`
	}
	if utf8.ValidString(s) {
		printable := true
		for _, r := range s {
			if !unicode.IsPrint(r) {
				printable = false
				break
			}
		}
		if printable {
			return s
		}
	}
	return strconv.QuoteToASCII(s)
}

// previewed is a payload shown as text, or as a hex dump if it is not
// UTF-8.
type previewed struct {
	Text      string
	Binary    bool
	Size      int
	Shown     int // the bytes of the payload Text shows
	Truncated bool
	JSON      bool // indented by pretty
}

// More is the bytes of the payload not shown.
func (p previewed) More() int { return p.Size - p.Shown }

// preview shows at most limit bytes of b, the first bytes of a payload of
// size bytes (b may be a prefix already: see worqr.PayloadPrefix).
func preview(b []byte, size, limit int) previewed {
	p := previewed{Size: max(size, len(b))}
	if len(b) > limit {
		b = b[:limit]
	}
	p.Truncated = len(b) < p.Size
	if utf8.Valid(b) || (p.Truncated && utf8.Valid(trimPartialRune(b))) {
		p.Text = string(trimPartialRune(b))
		p.Shown = len(p.Text)
		return p
	}
	p.Binary = true
	p.Text = strings.TrimRight(hex.Dump(b), "\n")
	p.Shown = len(b)
	return p
}

// pretty indents a whole JSON text (not one cut short), for the task
// page; it stays text, escaped as any other when rendered.
func pretty(p previewed) previewed {
	if p.Binary || p.Truncated {
		return p
	}
	t := strings.TrimSpace(p.Text)
	if t == "" || (t[0] != '{' && t[0] != '[') || !json.Valid([]byte(t)) || indentedSize(t) > prettyGrowth*len(t)+prettySlack {
		return p
	}
	var buf bytes.Buffer
	if json.Indent(&buf, []byte(t), "", "  ") == nil {
		p.Text, p.JSON = buf.String(), true
	}
	return p
}

// A JSON text indented grows with its depth: each line break indents to
// it, and 20 KB of nested brackets make 200 MB. One that would grow past
// prettyGrowth times its size and prettySlack bytes more is shown as it
// is.
const (
	prettyGrowth = 8
	prettySlack  = 64 << 10
)

// indentedSize is at least the size of the valid JSON text t indented by
// json.Indent with two spaces: it counts a line break with its indent
// after each opening bracket and comma and before each closing bracket,
// and a space after each colon.
func indentedSize(t string) int {
	n, depth, inString, escaped := len(t), 0, false, false
	for i := 0; i < len(t); i++ {
		c := t[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			n += 1 + 2*depth
		case ',':
			n += 1 + 2*depth
		case '}', ']':
			depth--
			n += 1 + 2*depth
		case ':':
			n++
		}
	}
	return n
}

func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		if r, _ := utf8.DecodeLastRune(b); r != utf8.RuneError {
			break
		}
		b = b[:len(b)-1]
	}
	return b
}

// short is a one-line preview of a payload of size bytes (b holds at
// least its first rowPreview bytes), for tables.
func short(b []byte, size int) string {
	p := preview(b, size, rowPreview)
	if p.Binary {
		return strconv.QuoteToASCII(string(b[:min(len(b), 40)])) + "…"
	}
	s := strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return '·'
	}, p.Text)
	if p.Truncated {
		s += "…"
	}
	return s
}

func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}
