package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/newsflow/newsflow/query/auth"
)

const userUsage = `usage: newsflow user add [--admin] [--password-file FILE] [flags] NAME

Creates an account in a stopped node's data directory. The password is
read from --password-file, or else from the first line of standard input;
it never appears on the command line.
`

func cmdUser(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "add" {
		fmt.Fprint(stderr, userUsage)
		return errors.New("user: unknown subcommand")
	}
	fs := flag.NewFlagSet("user add", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, userUsage) }
	var cf commonFlags
	cf.register(fs)
	admin := fs.Bool("admin", false, "give the account the admin role")
	pwFile := fs.String("password-file", "", "file whose first line is the password")
	// Flags may follow the name.
	var name string
	rest := args[1:]
	for len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		if name != "" {
			fs.Usage()
			return errors.New("user add: one NAME expected")
		}
		name, rest = fs.Arg(0), fs.Args()[1:]
	}
	if name == "" {
		fs.Usage()
		return errors.New("user add: NAME is required")
	}
	in := stdin
	if *pwFile != "" {
		f, err := os.Open(*pwFile)
		if err != nil {
			return fmt.Errorf("user add: %w", err)
		}
		defer f.Close()
		in = f
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("user add: read password: %w", err)
	}
	password := strings.TrimRight(line, "\r\n")
	role := auth.RoleUser
	if *admin {
		role = auth.RoleAdmin
	}
	n, err := cf.openNode(ctx)
	if err != nil {
		return err
	}
	defer n.close()
	u, err := n.auth.AddUser(ctx, name, password, role)
	if err != nil {
		return fmt.Errorf("user add: %w", err)
	}
	fmt.Fprintf(stdout, "added %s (%s, id %s)\n", u.Username, u.Role, u.ID)
	return nil
}
