package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/newsflow/newsflow/operators/crawl/feedfarm"
)

// cmdFeedfarm serves a directory of feed files, generated feeds and,
// with --faults, misbehaving endpoints, for offline demos and tests.
func cmdFeedfarm(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("feedfarm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8090", "listen address")
	faults := fs.Bool("faults", false, "serve /fault/<kind> endpoints")
	items := fs.Int("items", 50, "items per generated feed")
	advance := fs.Duration("advance", 0, "add a new item to every generated feed this often (0: never)")
	var dir string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		dir, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if dir != "" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return fmt.Errorf("feedfarm: %s is not a directory", dir)
		}
	}
	farm := feedfarm.New(feedfarm.Options{Dir: dir, Faults: *faults, Items: *items})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("feedfarm: listen: %w", err)
	}
	srv := &http.Server{Handler: farm, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "feedfarm serving on http://%s (files: /files/..., generated: /gen/N.xml", ln.Addr())
	if *faults {
		fmt.Fprintf(stdout, ", faults: /fault/{%s}", strings.Join(feedfarm.Faults, ","))
	}
	fmt.Fprintln(stdout, ")")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var tick <-chan time.Time
	if *advance > 0 {
		t := time.NewTicker(*advance)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case err := <-errc:
			return err
		case <-tick:
			farm.Advance()
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil {
				return err
			}
			if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		}
	}
}
