package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"github.com/newsflow/newsflow/demo/feedfarm"
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
	pages := fs.Bool("article-pages", true, "link news articles to their pages on the farm (/article/...), not to their outlets' .example sites")
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
	farm := feedfarm.New(feedfarm.Options{Dir: dir, Faults: *faults, Items: *items, ArticlePages: *pages})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("feedfarm: listen: %w", err)
	}
	fmt.Fprintf(stdout, "feedfarm serving on http://%s (files: /files/..., generated: /gen/N.xml, news: /news/N.xml", ln.Addr())
	if *pages {
		fmt.Fprint(stdout, ", article pages: /article/...")
	}
	if *faults {
		fmt.Fprintf(stdout, ", faults: /fault/{%s}", strings.Join(feedfarm.Faults, ","))
	}
	fmt.Fprintln(stdout, ")")
	if *advance > 0 {
		actx, stop := context.WithCancel(ctx)
		defer stop() // the advancer ends with the server
		go advanceFarm(actx, farm, *advance, nil)
	}
	return serveFarm(ctx, farm, ln)
}
