package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/worqr/worqr"
)

// usage prints the running command's help.
func (e *env) usage(w io.Writer, fs *flag.FlagSet) {
	for i, syn := range strings.Split(e.cmd.synopsis, "\n") {
		lead := "usage:"
		if i > 0 {
			lead = "      "
		}
		fmt.Fprintf(w, "%s %s\n", lead, strings.TrimSpace("worqr "+e.cmd.name+" "+syn))
	}
	fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(e.cmd.help))
	var own, global []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if isGlobal(f.Name) {
			global = append(global, f)
		} else {
			own = append(own, f)
		}
	})
	if len(own) > 0 {
		fmt.Fprintln(w, "\nflags:")
		printFlags(w, own)
	}
	fmt.Fprintln(w, "\nglobal flags:")
	printFlags(w, global)
}

func printFlags(w io.Writer, fl []*flag.Flag) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, f := range fl {
		typ, usage := flag.UnquoteUsage(f)
		if typ != "" {
			typ = " " + typ
		}
		switch f.DefValue {
		case "", "0", "false", "0s":
		default:
			if f.Name != "timeout" {
				usage += fmt.Sprintf(" (default %s)", redact(f.DefValue))
			}
		}
		fmt.Fprintf(tw, "  --%s%s\t%s\n", f.Name, typ, usage)
	}
	_ = tw.Flush()
}

// printHelp prints the list of commands.
func printHelp(w io.Writer) {
	fmt.Fprint(w, `worqr inspects and manages worqr queues in Redis.

usage: worqr [global flags] <command> [arguments] [flags]
`)
	// Headings and blank lines carry a cell too, so that one column
	// runs through every group.
	var list strings.Builder
	tw := tabwriter.NewWriter(&list, 0, 8, 2, ' ', 0)
	for _, g := range groups {
		fmt.Fprintf(tw, "\t\n%s:\t\n", g)
		for _, c := range commands() {
			if c.group != g {
				continue
			}
			for i, syn := range strings.Split(c.synopsis, "\n") {
				summary := c.summary
				if i > 0 {
					summary = ""
				}
				fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimSpace(c.name+" "+syn), summary)
			}
		}
	}
	fmt.Fprintf(tw, "\t\n%s:\t\n", "Help")
	fmt.Fprintf(tw, "  help [command]\t%s\n", "this list, or a command's flags (also: worqr <command> -h)")
	_ = tw.Flush()
	for _, line := range strings.Split(strings.TrimSuffix(list.String(), "\n"), "\n") {
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	fmt.Fprintf(w, `
Global flags, before or after the command:
  --addr address     Redis: host:port, cluster seeds a:p,b:p, or a redis://, rediss://
                     or unix:// URL; add ?protocol=2 to a URL for RESP2-only servers
                     (default $%s, else %s)
  --prefix prefix    key prefix (default $%s, else %s)
  --json             print one JSON document instead of a table
  --timeout d        give up after d (default %v; wait: no limit; 0: no limit)

Exit status: 0 ok; 1 failure, including not found and problems found by check;
2 usage error.
`, envAddr, defaultAddr, envPrefix, worqr.DefaultPrefix, defaultTimeout)
}

func helpCommand() *command {
	return &command{name: "help", synopsis: "[command]", run: func(e *env, args []string) error {
		if len(args) == 0 {
			printHelp(e.stdout)
			return nil
		}
		cmd, _ := lookup(args)
		if cmd == nil {
			return usagef("unknown command %q", strings.Join(args, " "))
		}
		e.cmd = cmd
		return cmd.run(e, []string{"-h"})
	}}
}
