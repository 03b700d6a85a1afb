package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/worqr/worqr"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1 // the command failed, or found nothing where it needed something
	exitUsage   = 2 // the command line is wrong
)

const (
	envAddr        = "WORQR_ADDR"
	envPrefix      = "WORQR_PREFIX"
	defaultAddr    = "127.0.0.1:6379"
	defaultTimeout = 30 * time.Second
)

// command is one subcommand: "queues", or "dead requeue".
type command struct {
	name     string
	synopsis string // the arguments, after the name
	group    string // heading in worqr help
	summary  string // one line, for worqr help
	help     string // for worqr <name> -h
	noLimit  bool   // --timeout defaults to none (wait)
	run      func(e *env, args []string) error
}

// groups are the headings of worqr help, in order.
var groups = []string{"Inspect", "Change", "Dead letters", "Outcomes", "Maintenance", "Dashboard"}

// commands lists every command, in the order worqr help shows them.
func commands() []*command {
	var all []*command
	for _, part := range [][]*command{inspectCommands(), groupsCommands(), gatheringsCommands(), workflowCommands(), statsCommands(), taskCommands(), controlCommands(), deadCommands(), maintenanceCommands(), uiCommands()} {
		all = append(all, part...)
	}
	return all
}

// lookup finds the command that args start with, and returns the
// arguments after its name. "dead list" is another name for "dead", and
// "workflow show" for "workflow".
func lookup(args []string) (*command, []string) {
	find := func(name string) *command {
		for _, c := range commands() {
			if c.name == name {
				return c
			}
		}
		return nil
	}
	for _, parent := range []struct{ name, alias string }{{"dead", "list"}, {"workflow", "show"}} {
		if len(args) < 2 || args[0] != parent.name {
			continue
		}
		if args[1] == parent.alias {
			return find(parent.name), args[2:]
		}
		if c := find(parent.name + " " + args[1]); c != nil {
			return c, args[2:]
		}
	}
	if c := find(args[0]); c != nil {
		return c, args[1:]
	}
	return nil, nil
}

// globals are the flags every command takes, before or after its name.
type globals struct {
	addr       string
	prefix     string
	json       bool
	timeout    time.Duration
	timeoutSet bool
}

func defaultGlobals() globals {
	g := globals{addr: os.Getenv(envAddr), prefix: os.Getenv(envPrefix)}
	if g.addr == "" {
		g.addr = defaultAddr
	}
	if g.prefix == "" {
		g.prefix = worqr.DefaultPrefix
	}
	return g
}

// register adds the global flags to fs. They are flag.Values over the
// same fields, so registering them on a second FlagSet keeps what the
// first one parsed.
func (g *globals) register(fs *flag.FlagSet) {
	fs.Var(stringFlag{&g.addr}, "addr", "Redis `address`: host:port, host:port,... or a URL (env "+envAddr+")")
	fs.Var(stringFlag{&g.prefix}, "prefix", "key `prefix` (env "+envPrefix+")")
	fs.Var(boolFlag{&g.json}, "json", "print one JSON document instead of a table")
	fs.Var(durationFlag{&g.timeout, &g.timeoutSet}, "timeout", "give up after this `duration`; 0 for no limit (default 30s; wait: no limit)")
}

func isGlobal(name string) bool {
	switch name {
	case "addr", "prefix", "json", "timeout":
		return true
	}
	return false
}

type stringFlag struct{ p *string }

func (f stringFlag) String() string {
	if f.p == nil {
		return ""
	}
	return *f.p
}
func (f stringFlag) Set(s string) error { *f.p = s; return nil }

type boolFlag struct{ p *bool }

func (f boolFlag) String() string   { return strconv.FormatBool(f.p != nil && *f.p) }
func (f boolFlag) IsBoolFlag() bool { return true }
func (f boolFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("not a boolean")
	}
	*f.p = v
	return nil
}

type durationFlag struct {
	p   *time.Duration
	set *bool
}

func (f durationFlag) String() string {
	if f.p == nil {
		return "0s"
	}
	return f.p.String()
}

func (f durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration (like 30s, 5m, 1h)")
	}
	if d < 0 {
		return errors.New("negative duration")
	}
	*f.p, *f.set = d, true
	return nil
}

// duration defines a flag of a duration that is not negative, and says
// what is wrong with one that cannot be read.
func duration(fs *flag.FlagSet, name, usage string) *time.Duration {
	d, set := new(time.Duration), new(bool)
	fs.Var(durationFlag{d, set}, name, usage)
	return d
}

// flagGiven reports whether the flag name was on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// env is what a command runs with.
type env struct {
	base           context.Context // ends on SIGINT or SIGTERM
	ctx            context.Context // base, bounded by --timeout once flags are parsed
	cancel         context.CancelFunc
	stdin          io.Reader
	stdout, stderr io.Writer
	g              globals
	cmd            *command
	c              *worqr.Client
}

// Errors that set the exit status.
var errHelp = errors.New("help shown")

// usageError is a wrong command line: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// notFound is an id or outcome that is not there: exit status 1.
type notFound struct{ msg string }

func (e notFound) Error() string { return e.msg }

func notFoundf(format string, args ...any) error { return notFound{fmt.Sprintf(format, args...)} }

// run runs the command line args and returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{base: ctx, ctx: ctx, cancel: func() {}, stdin: stdin, stdout: stdout, stderr: stderr, g: defaultGlobals()}
	defer func() { e.cancel() }()
	top := flag.NewFlagSet("worqr", flag.ContinueOnError)
	top.SetOutput(io.Discard)
	e.g.register(top)
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(stdout)
			return exitOK
		}
		return e.report(usageError{err.Error()})
	}
	args = top.Args()
	if len(args) == 0 {
		printHelp(stderr)
		return exitUsage
	}
	cmd, rest := lookup(args)
	if cmd == nil {
		return e.report(usagef("unknown command %q", args[0]))
	}
	e.cmd = cmd
	err := cmd.run(e, rest)
	if e.c != nil {
		closing, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = e.c.Close(closing)
		cancel()
	}
	return e.report(err)
}

// report prints err, if any, and returns the exit status for it.
func (e *env) report(err error) int {
	name := "worqr"
	if e.cmd != nil {
		name += " " + e.cmd.name
	}
	var usage usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &usage):
		hint := "worqr help"
		if e.cmd != nil {
			hint = name + " -h"
		}
		fmt.Fprintf(e.stderr, "%s: %s\nrun '%s' for usage\n", name, usage.msg, hint)
		return exitUsage
	}
	msg := err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded) && e.base.Err() == nil:
		msg += fmt.Sprintf(" (gave up after --timeout %v)", e.limit())
	case errors.Is(err, context.Canceled) && e.base.Err() != nil:
		msg = "interrupted"
	}
	if !strings.HasPrefix(msg, "worqr: ") {
		msg = name + ": " + msg
	}
	fmt.Fprintln(e.stderr, msg)
	return exitFailure
}

// parse parses a command's flags (its own and the global ones, anywhere
// among the arguments) and returns its positional arguments, between min
// and max of them (max < 0: any number). It then bounds e.ctx by
// --timeout.
func (e *env) parse(fs *flag.FlagSet, args []string, min, max int) ([]string, error) {
	e.g.register(fs)
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		e.usage(e.stdout, fs)
		return nil, errHelp
	}
	if err != nil {
		return nil, usageError{err.Error()}
	}
	switch {
	case len(pos) < min:
		return nil, usagef("missing arguments")
	case max >= 0 && len(pos) > max:
		return nil, usagef("too many arguments")
	}
	if strings.ContainsAny(e.g.prefix, "{}") || e.g.prefix == "" {
		return nil, usagef("--prefix %q: must not be empty or contain '{' or '}'", e.g.prefix)
	}
	if limit := e.limit(); limit > 0 {
		e.ctx, e.cancel = context.WithTimeout(e.base, limit)
	}
	return pos, nil
}

// limit is how long the command may take: --timeout, else its default.
func (e *env) limit() time.Duration {
	switch {
	case e.g.timeoutSet:
		return e.g.timeout
	case e.cmd != nil && e.cmd.noLimit:
		return 0
	}
	return defaultTimeout
}

// parseInterspersed is fs.Parse that also takes flags after positional
// arguments ("worqr dead q --limit 5"). Negative numbers ("range q -1")
// and "-" (stdin) are positional, and so is every argument after "--".
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' || isNumber(a) {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := fs.Lookup(name)
		if hasValue || f == nil || isBool(f) || i+1 == len(args) {
			continue // fs.Parse reports an unknown flag or a missing value
		}
		i++
		flags = append(flags, args[i])
	}
	if err := fs.Parse(flags); err != nil {
		return nil, err
	}
	return pos, nil
}

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// flags returns a FlagSet for the running command.
func (e *env) flags() *flag.FlagSet {
	fs := flag.NewFlagSet("worqr "+e.cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// client connects to Redis, once.
func (e *env) client() (*worqr.Client, error) {
	if e.c != nil {
		return e.c, nil
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// --timeout bounds the connecting too: a server that accepts but does
	// not answer is given up on then.
	c, err := worqr.NewContext(e.ctx, worqr.Options{Addr: e.g.addr, Prefix: e.g.prefix, Logger: log})
	if err != nil {
		what := "cannot connect to"
		if errors.Is(err, worqr.ErrUnavailable) {
			what = "cannot reach"
		}
		// The error names the address too ("worqr: connect to <addr>: ...").
		msg := strings.TrimPrefix(err.Error(), "worqr: ")
		msg = strings.TrimPrefix(msg, "connect to "+redact(e.g.addr)+": ")
		return nil, connectError{msg: fmt.Sprintf("%s Redis at %s: %s", what, redact(e.g.addr), msg), err: err}
	}
	e.c = c
	return c, nil
}

// connectError is worqr.NewContext's error in the command's words; it
// still matches what that error does (a --timeout that ran out).
type connectError struct {
	msg string
	err error
}

func (e connectError) Error() string { return e.msg }
func (e connectError) Unwrap() error { return e.err }

// redact hides the password of a URL address.
func redact(addr string) string {
	if !strings.Contains(addr, "://") {
		return addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// queueClient checks a queue name given on the command line, then
// connects: the start of every command on one queue.
func (e *env) queueClient(name string) (*worqr.Client, string, error) {
	queue, err := queueArg(name)
	if err != nil {
		return nil, "", err
	}
	c, err := e.client()
	if err != nil {
		return nil, "", err
	}
	return c, queue, nil
}

// queueArg checks a queue name given on the command line.
func queueArg(name string) (string, error) {
	if name == "" || len(name) > worqr.MaxQueueNameLen {
		return "", usagef("queue name must be 1 to %d bytes", worqr.MaxQueueNameLen)
	}
	return name, nil
}
