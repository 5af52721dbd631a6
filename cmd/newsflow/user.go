package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/newsflow/newsflow/query/auth"
)

const userUsage = `usage: newsflow user add [--admin] [--password-file FILE] [flags] NAME
       newsflow user hash [--password-file FILE] [flags]
       newsflow user import [flags] FILE

add creates an account in a stopped node's data directory. The password is
read from --password-file, or else from the first line of standard input;
it never appears on the command line.

hash prints the stored form of a password (for import files).

import creates accounts from NDJSON lines {"username", "role", "password_hash"}
(hashes printed by hash, or taken from another node) without hashing.
`

func cmdUser(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "import" {
		return cmdUserImport(ctx, args[1:], stdout, stderr)
	}
	if len(args) == 0 || (args[0] != "add" && args[0] != "hash") {
		fmt.Fprint(stderr, userUsage)
		return errors.New("user: unknown subcommand")
	}
	hashOnly := args[0] == "hash"
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
	if name == "" && !hashOnly {
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
	if hashOnly {
		cfg, err := cf.load()
		if err != nil {
			return err
		}
		st, err := auth.NewStore(nil, nil, auth.Options{BcryptCost: cfg.Auth.BcryptCost})
		if err != nil {
			return err
		}
		h, err := st.HashPassword(password)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, h)
		return nil
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

// cmdUserImport creates accounts from an NDJSON file of hashed passwords.
func cmdUserImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("user import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, userUsage) }
	var cf commonFlags
	cf.register(fs)
	var file string
	rest := args
	for len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		file, rest = fs.Arg(0), fs.Args()[1:]
	}
	if file == "" {
		fs.Usage()
		return errors.New("user import: FILE is required")
	}
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("user import: %w", err)
	}
	defer f.Close()
	n, err := cf.openNode(ctx)
	if err != nil {
		return err
	}
	defer n.close()
	sc := bufio.NewScanner(f)
	added := 0
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var rec struct {
			Username string    `json:"username"`
			Role     auth.Role `json:"role"`
			Hash     string    `json:"password_hash"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return fmt.Errorf("user import: %s line %d: %w", file, line, err)
		}
		if rec.Role == "" {
			rec.Role = auth.RoleUser
		}
		if _, err := n.auth.ImportUser(ctx, rec.Username, rec.Role, rec.Hash); err != nil {
			return fmt.Errorf("user import: %s line %d: %w", file, line, err)
		}
		added++
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("user import: %w", err)
	}
	fmt.Fprintf(stdout, "imported %d accounts\n", added)
	return nil
}
