package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/newsflow/newsflow/node"
	"github.com/newsflow/newsflow/query"
	"github.com/newsflow/newsflow/query/auth"
)

const userUsage = `usage: newsflow user add [--admin] [--password-file FILE] [--setup-token T] [--token T] [--addr URL] [flags] NAME
       newsflow user hash [--password-file FILE] [flags]
       newsflow user import [flags] FILE

add creates an account in a stopped node's data directory. The password is
read from --password-file, or else from the first line of standard input;
it never appears on the command line. While the node runs (it holds the
data directory), add asks it instead: the first admin with --setup-token
(the token of the one-time setup link the node printed at start), any
account with an admin token (--token, $NEWSFLOW_ADMIN_TOKEN or
auth.admin_token).

hash prints the stored form of a password (for import files).

import creates accounts from NDJSON lines {"username", "role", "password_hash"}
(hashes printed by hash, or taken from another node) without hashing.
`

// cmdUser runs `newsflow user`: import, or add and hash, which share
// their flags and read the password alike.
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
	setupToken := fs.String("setup-token", "", "a running node's one-time setup token (creates the first admin)")
	var nc nodeClient
	nc.register(fs)
	name, err := parseUserName(fs, args[1:])
	if err != nil {
		return err
	}
	if name == "" && !hashOnly {
		fs.Usage()
		return errors.New("user add: NAME is required")
	}
	password, err := readPassword(stdin, *pwFile)
	if err != nil {
		return err
	}
	if hashOnly {
		return printPasswordHash(&cf, password, stdout)
	}
	role := auth.RoleUser
	if *admin {
		role = auth.RoleAdmin
	}
	if *setupToken != "" && role != auth.RoleAdmin {
		return errors.New("user add: --setup-token creates the first admin only: add --admin")
	}
	return addUser(ctx, fs, &cf, &nc, *setupToken, auth.User{Username: name, Role: role}, password, stdout)
}

// parseUserName parses the arguments of user add or hash, whose flags may
// follow the name, and returns the name ("" if none).
func parseUserName(fs *flag.FlagSet, args []string) (string, error) {
	var name string
	rest := args
	for len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			return "", err
		}
		if fs.NArg() == 0 {
			break
		}
		if name != "" {
			fs.Usage()
			return "", errors.New("user add: one NAME expected")
		}
		name, rest = fs.Arg(0), fs.Args()[1:]
	}
	return name, nil
}

// readPassword returns the first line of the file pwFile, or of stdin if
// pwFile is empty, without its line ending.
func readPassword(stdin io.Reader, pwFile string) (string, error) {
	in := stdin
	if pwFile != "" {
		f, err := os.Open(pwFile)
		if err != nil {
			return "", fmt.Errorf("user add: %w", err)
		}
		defer f.Close()
		in = f
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("user add: read password: %w", err)
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// printPasswordHash prints the stored form of password, hashed with the
// configured bcrypt cost.
func printPasswordHash(cf *commonFlags, password string, stdout io.Writer) error {
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

// addUser creates the account want in the configured data directory, or,
// if a running node holds it, through that node (see addThroughNode).
func addUser(ctx context.Context, fs *flag.FlagSet, cf *commonFlags, nc *nodeClient, setupToken string, want auth.User, password string, stdout io.Writer) error {
	n, err := cf.openNode(ctx)
	if err != nil {
		// A running node holds the data directory: ask it.
		if added, rerr := addThroughNode(ctx, fs, cf, nc, setupToken, want, password, stdout); added || rerr != nil {
			return rerr
		}
		return err
	}
	defer n.Close()
	u, err := n.Auth().AddUser(ctx, want.Username, password, want.Role)
	if err != nil {
		return fmt.Errorf("user add: %w", err)
	}
	fmt.Fprintf(stdout, "added %s (%s, id %s)\n", u.Username, u.Role, u.ID)
	return nil
}

// addThroughNode creates the account through the node that runs on the
// configured data directory, when one answers at its address (--addr, or
// http.addr of the configuration): with the setup token, or an admin
// token. It reports false and no error when no node answers; when one
// does but no token was given, the error says what to do.
func addThroughNode(ctx context.Context, fs *flag.FlagSet, cf *commonFlags, nc *nodeClient, setupToken string, want auth.User, password string, stdout io.Writer) (bool, error) {
	cfg, err := cf.load()
	if err != nil {
		return false, nil
	}
	if !flagSet(fs, "addr") {
		nc.base = "http://" + node.Dialable(cfg.HTTP.Addr)
	}
	nc.token = cmp.Or(nc.token, cfg.Auth.AdminToken)
	nc.http = &http.Client{Timeout: 30 * time.Second}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var st query.SetupStatus
	if err := nc.do(pctx, http.MethodGet, "/api/v1/setup", "", nil, &st); err != nil {
		return false, nil // no node there, or not one that knows setup
	}
	running := fmt.Sprintf("a node is running on data directory %s and answers at %s", cfg.DataDir, nc.base)
	var u auth.User
	switch {
	case setupToken != "":
		body, _ := json.Marshal(map[string]string{"token": setupToken, "username": want.Username, "password": password})
		var sess struct {
			User auth.User `json:"user"`
		}
		if err := nc.do(ctx, http.MethodPost, "/api/v1/setup/admin", "application/json", body, &sess); err != nil {
			return false, fmt.Errorf("user add: %s; creating the first admin with the setup token: %w", running, err)
		}
		u = sess.User
	case nc.token != "":
		body, _ := json.Marshal(map[string]string{"username": want.Username, "password": password, "role": string(want.Role)})
		if err := nc.do(ctx, http.MethodPost, "/api/v1/admin/users", "application/json", body, &u); err != nil {
			return false, fmt.Errorf("user add: %s; adding the account with the admin token: %w", running, err)
		}
	case !st.AdminExists && st.SetupTokenActive:
		return false, fmt.Errorf("user add: %s. No admin exists yet: open the one-time setup link the node printed when it started "+
			"(%s/setup?token=...), or pass its token: newsflow user add --admin --setup-token TOKEN %s", running, nc.base, want.Username)
	case !st.AdminExists:
		return false, fmt.Errorf("user add: %s. No admin exists yet and no setup link is active (it was used, or the node has "+
			"an admin token, which makes none): pass the admin token (--token, $NEWSFLOW_ADMIN_TOKEN or auth.admin_token), "+
			"restart a node without one for a new link, or stop the node and run this command again", running)
	default:
		return false, fmt.Errorf("user add: %s. Pass an admin token (--token, $NEWSFLOW_ADMIN_TOKEN or auth.admin_token) "+
			"to add the account through it, or stop the node and run this command again", running)
	}
	fmt.Fprintf(stdout, "added %s (%s, id %s) through the node at %s\n", u.Username, u.Role, u.ID, nc.base)
	return true, nil
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
	defer n.Close()
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
		if _, err := n.Auth().ImportUser(ctx, rec.Username, rec.Role, rec.Hash); err != nil {
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
