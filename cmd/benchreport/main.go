// Command benchreport turns `go test -bench` output into readable tables.
//
// It reads the output on standard input and prints, per package, one table
// per benchmark: a row per sub-benchmark and a column per unit reported
// (ns/op, B/op, allocs/op and any b.ReportMetric units). Lines it does not
// understand (ok, FAIL, --- SKIP and their log lines, build errors) are
// passed through in order. It exits with status 1 if the input contains a
// failure, so that `go test ... | tee bench.out; benchreport < bench.out`
// fails when a benchmark did.
//
//	go test -run '^$' -bench . -benchmem ./... | tee bench.out
//	go run ./cmd/benchreport < bench.out
package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"
)

func main() {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(2)
	}
	failed, err := report(os.Stdout, in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// result is one benchmark result line.
type result struct {
	row    string // sub-benchmark name, "" for a benchmark without
	values []benchfmt.Value
}

// group is the results of one top-level benchmark.
type group struct {
	name    string
	units   []string // in order of first appearance, standard units first
	results []result
}

// block is what one package printed between its pkg: line and its ok or
// FAIL line: results, grouped by benchmark, and other lines.
type block struct {
	pkg    string
	groups []*group
	lines  []string
}

func (b *block) add(name, row string, values []benchfmt.Value) {
	var g *group
	for _, x := range b.groups {
		if x.name == name {
			g = x
		}
	}
	if g == nil {
		g = &group{name: name}
		b.groups = append(b.groups, g)
	}
	for _, v := range values {
		if !contains(g.units, unitOf(v)) {
			g.units = append(g.units, unitOf(v))
		}
	}
	g.results = append(g.results, result{row: row, values: values})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// unitOf is the unit as the benchmark printed it (benchfmt converts ns/op
// to sec/op and the like).
func unitOf(v benchfmt.Value) string {
	if v.OrigUnit != "" {
		return v.OrigUnit
	}
	return v.Unit
}

func valueOf(v benchfmt.Value) float64 {
	if v.OrigUnit != "" {
		return v.OrigValue
	}
	return v.Value
}

// standardUnits come first in every table, in this order.
var standardUnits = []string{"ns/op", "MB/s", "B/op", "allocs/op"}

func (g *group) columns() []string {
	var cols []string
	for _, u := range standardUnits {
		if contains(g.units, u) {
			cols = append(cols, u)
		}
	}
	for _, u := range g.units {
		if !contains(standardUnits, u) {
			cols = append(cols, u)
		}
	}
	return cols
}

// report parses in and writes the tables and passed-through lines to w. It
// reports whether in contains a failure.
func report(w io.Writer, in []byte) (failed bool, err error) {
	// benchfmt parses the result lines; the rest are classified by line
	// number.
	results := map[int]*benchfmt.Result{}
	r := benchfmt.NewReader(bytes.NewReader(in), "stdin")
	for r.Scan() {
		if res, ok := r.Result().(*benchfmt.Result); ok {
			_, line := res.Pos()
			results[line] = res.Clone()
		}
	}
	if err := r.Err(); err != nil {
		return false, err
	}

	var (
		cur    *block
		env    = map[string]string{}
		shown  string
		output strings.Builder
	)
	flush := func() {
		if cur == nil {
			return
		}
		if len(cur.groups) > 0 && output.Len() > 0 {
			output.WriteString("\n")
		}
		if e := fmt.Sprintf("%s/%s, %s", env["goos"], env["goarch"], env["cpu"]); len(cur.groups) > 0 && e != shown {
			fmt.Fprintf(&output, "# %s\n\n", e)
			shown = e
		}
		cur.write(&output)
		cur = nil
	}
	lines := strings.Split(strings.TrimSuffix(string(in), "\n"), "\n")
	for i, line := range lines {
		if res, ok := results[i+1]; ok {
			if cur == nil {
				cur = &block{pkg: res.GetConfig("pkg")}
			}
			base, parts := res.Name.Parts()
			var row []string
			for _, p := range parts {
				if p[0] == '/' {
					row = append(row, string(p[1:]))
				}
			}
			cur.add("Benchmark"+string(base), strings.Join(row, "/"), res.Values)
			continue
		}
		if key, val, ok := strings.Cut(line, ": "); ok && (key == "goos" || key == "goarch" || key == "cpu" || key == "pkg") {
			env[key] = strings.TrimSpace(val)
			if key == "pkg" {
				flush()
				cur = &block{pkg: env["pkg"]}
			}
			continue
		}
		if isFailure(line) {
			failed = true
		}
		if cur != nil && !endsPackage(line) {
			cur.lines = append(cur.lines, line)
			continue
		}
		flush()
		fmt.Fprintln(&output, line)
	}
	flush()
	_, err = io.WriteString(w, output.String())
	return failed, err
}

// isFailure reports whether a line of go test output reports a failure.
func isFailure(line string) bool {
	return strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "--- FAIL") ||
		strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ")
}

// endsPackage reports whether a line closes a package's output.
func endsPackage(line string) bool {
	return line == "PASS" || strings.HasPrefix(line, "ok ") || strings.HasPrefix(line, "ok\t") ||
		strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "? ")
}

// write prints the block's tables, then its other lines.
func (b *block) write(w io.Writer) {
	if len(b.groups) > 0 {
		fmt.Fprintf(w, "%s\n\n", b.pkg)
	}
	for _, g := range b.groups {
		cols := g.columns()
		table := [][]string{append([]string{g.name}, cols...)}
		for _, res := range g.results {
			row := make([]string, len(cols)+1)
			row[0] = "  " + res.row
			if res.row == "" {
				row[0] = "  -"
			}
			for i, c := range cols {
				row[i+1] = "-"
				for _, v := range res.values {
					if unitOf(v) == c {
						row[i+1] = format(valueOf(v))
					}
				}
			}
			table = append(table, row)
		}
		writeTable(w, table)
		fmt.Fprintln(w)
	}
	for _, l := range b.lines {
		fmt.Fprintln(w, l)
	}
}

// writeTable prints rows with the first column left-aligned and the others
// right-aligned.
func writeTable(w io.Writer, rows [][]string) {
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	for _, r := range rows {
		var sb strings.Builder
		for i, c := range r {
			if i == 0 {
				sb.WriteString(c + strings.Repeat(" ", width[0]-len(c)))
				continue
			}
			sb.WriteString("  " + strings.Repeat(" ", width[i]-len(c)) + c)
		}
		fmt.Fprintln(w, strings.TrimRight(sb.String(), " "))
	}
}

// format prints values of 1000 and more as integers with thousands
// separators and smaller ones with four significant digits.
func format(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return strconv.FormatFloat(v, 'f', -1, 64)
	case math.Abs(v) >= 1000:
		s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
		neg := strings.HasPrefix(s, "-")
		s = strings.TrimPrefix(s, "-")
		var sb strings.Builder
		for i, c := range s {
			if i > 0 && (len(s)-i)%3 == 0 {
				sb.WriteByte(',')
			}
			sb.WriteRune(c)
		}
		if neg {
			return "-" + sb.String()
		}
		return sb.String()
	case v == 0:
		return "0"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}
