GO      ?= go
BIN     := bin/newsflow
PKGS    := ./...
STATICCHECK_VERSION ?= v0.8.2

.PHONY: all build run demo test test-go test-e2e test-short test-race bench fuzz lint fmt clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/newsflow

## run: a single node with the embedded log and the default config.
run: build
	./$(BIN) run --config configs/newsflow.yaml

## demo: a node fed by a local feed farm of generated news and a generator
## of reads and shares; open http://127.0.0.1:8080 (no internet needed).
demo: build
	./$(BIN) demo

## test: the whole suite: Go tests (including crash tests against the real
## binary), then the browser tests of the web UI in headless Chromium.
test: test-go test-e2e

test-go:
	$(GO) test -count=1 -timeout 45m $(PKGS)

## test-e2e: browser tests (query/web/e2e) with playwright-core and axe-core from
## npm, driving /usr/bin/chromium (apt-get install chromium).
test-e2e: build
	cd query/web/e2e && npm ci --no-audit --no-fund --silent && node --test --test-reporter=spec --test-concurrency=1 --test-timeout=600000

## test-short: skips the long crash, accuracy and external-client tests.
test-short:
	$(GO) test -count=1 -short $(PKGS)

test-race:
	$(GO) test -count=1 -race -short -timeout 30m $(PKGS)

## bench: benchmarks printed as a table (see README).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 1 -timeout 60m $(PKGS) | tee bench.out
	$(GO) run ./cmd/benchreport < bench.out

FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDecodeShare -fuzztime $(FUZZTIME) ./internal/schema/
	$(GO) test -run '^$$' -fuzz FuzzDecodeRead -fuzztime $(FUZZTIME) ./internal/schema/
	$(GO) test -run '^$$' -fuzz FuzzDecodeRecord -fuzztime $(FUZZTIME) ./engine/eventlog/embedded/
	$(GO) test -run '^$$' -fuzz FuzzShareBatch -fuzztime $(FUZZTIME) ./query/
	$(GO) test -run '^$$' -fuzz FuzzCanonical -fuzztime $(FUZZTIME) ./internal/canon/
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) ./internal/feed/
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME) ./operators/story/model/
	$(GO) test -run '^$$' -fuzz FuzzExtract -fuzztime $(FUZZTIME) ./operators/story/model/
	$(GO) test -run '^$$' -fuzz FuzzText -fuzztime $(FUZZTIME) ./operators/internal/neardup/
	$(GO) test -run '^$$' -fuzz FuzzClean -fuzztime $(FUZZTIME) ./operators/articles/
	$(GO) test -run '^$$' -fuzz FuzzClassify -fuzztime $(FUZZTIME) ./internal/classify/
	$(GO) test -run '^$$' -fuzz FuzzDecodeCursor -fuzztime $(FUZZTIME) ./operators/searchindex/
	$(GO) test -run '^$$' -fuzz FuzzSearch -fuzztime $(FUZZTIME) ./operators/searchindex/

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo 'gofmt: files above need formatting'; exit 1)
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin bench.out query/web/e2e/node_modules query/web/e2e/build
