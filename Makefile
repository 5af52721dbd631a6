GO      ?= go
BIN     := bin/newsflow
PKGS    := ./...
STATICCHECK_VERSION ?= 2025.1.1

.PHONY: all build run test test-short test-race bench fuzz lint fmt clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/newsflow

## run: a single node with the embedded log and the default config.
run: build
	./$(BIN) run --config configs/newsflow.yaml

## test: the whole suite, including crash tests against the real binary.
test:
	$(GO) test -count=1 -timeout 45m $(PKGS)

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
	$(GO) test -run '^$$' -fuzz FuzzDecodeShare -fuzztime $(FUZZTIME) ./operators/events/
	$(GO) test -run '^$$' -fuzz FuzzDecodeRead -fuzztime $(FUZZTIME) ./operators/events/
	$(GO) test -run '^$$' -fuzz FuzzDecodeRecord -fuzztime $(FUZZTIME) ./engine/eventlog/embedded/
	$(GO) test -run '^$$' -fuzz FuzzShareBatch -fuzztime $(FUZZTIME) ./query/
	$(GO) test -run '^$$' -fuzz FuzzCanonical -fuzztime $(FUZZTIME) ./operators/canon/
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) ./operators/crawl/feed/
	$(GO) test -run '^$$' -fuzz FuzzText -fuzztime $(FUZZTIME) ./operators/neardup/
	$(GO) test -run '^$$' -fuzz FuzzClean -fuzztime $(FUZZTIME) ./operators/article/
	$(GO) test -run '^$$' -fuzz FuzzClassify -fuzztime $(FUZZTIME) ./operators/classify/
	$(GO) test -run '^$$' -fuzz FuzzDecodeCursor -fuzztime $(FUZZTIME) ./state/search/
	$(GO) test -run '^$$' -fuzz FuzzSearch -fuzztime $(FUZZTIME) ./state/search/

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo 'gofmt: files above need formatting'; exit 1)
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin bench.out
