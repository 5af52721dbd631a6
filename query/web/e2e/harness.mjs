// Test harness for the browser tests: a newsflow node (the real binary,
// embedded log, a fresh data directory), a local feed server, headless
// Chromium, axe-core, screenshots and size accounting.
import { spawn, execFile } from "node:child_process";
import { existsSync, createWriteStream, readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { promisify } from "node:util";

const require = createRequire(import.meta.url);
export const root = path.resolve(import.meta.dirname, "../../..");
export const bin = path.join(root, "bin", "newsflow");
export const buildDir = path.join(import.meta.dirname, "build");
export const chromiumPath = process.env.CHROMIUM || "/usr/bin/chromium";
export const adminToken = "e2e-admin-token";
export const ingestToken = "e2e-ingest-token";

// skipReason says why the browser tests cannot run here, or "" if they can.
// With NEWSFLOW_E2E_REQUIRED=1 (CI) a missing browser is a failure instead.
export function skipReason() {
  const missing = [];
  if (!existsSync(chromiumPath)) missing.push(`${chromiumPath} not found (apt-get install chromium, or set CHROMIUM)`);
  if (!existsSync(bin)) missing.push(`${bin} not found (make build)`);
  if (!missing.length) return "";
  const reason = missing.join("; ");
  if (process.env.NEWSFLOW_E2E_REQUIRED === "1") throw new Error(`browser tests required but cannot run: ${reason}`);
  return reason;
}

export async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// eventually retries fn until it stops throwing or the timeout passes, then
// throws fn's last error.
export async function eventually(fn, timeoutMs = 30000, everyMs = 250) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await sleep(everyMs);
    }
  }
}

const run = promisify(execFile);

// startNode runs `newsflow run` on a free port with a fresh data directory,
// an admin account and the admin token (neither with admin: null: a node
// without an admin or an admin token prints a one-time setup link,
// node.setupURL()), and waits until it is ready. sources is an OPML document the node seeds its sources from.
export async function startNode({ admin = { username: "admin", password: "admin-password-e2e" }, sources = "", name = "node" } = {}) {
  const dir = await mkdtemp(path.join(os.tmpdir(), "newsflow-e2e-"));
  const port = await freePort();
  const config = path.join(dir, "newsflow.yaml");
  await writeFile(config, `data_dir: ${JSON.stringify(path.join(dir, "data"))}
http:
  addr: 127.0.0.1:${port}
log:
  partitions: 4
  fsync: never
crawl:
  seed_opml: ${JSON.stringify(sources ? path.join(dir, "sources.opml") : "")}
  allow_private: true
  ignore_robots: true
search:
  commit_interval: 300ms
auth:
${admin ? `  admin_token: ${adminToken}\n` : ""}  ingest_token: ${ingestToken}
  login_burst_per_ip: 100
  login_burst_per_user: 100
logging:
  level: info
`);
  if (sources) await writeFile(path.join(dir, "sources.opml"), sources);
  if (admin) {
    const pwFile = path.join(dir, "admin-password");
    await writeFile(pwFile, admin.password + "\n");
    await run(bin, ["user", "add", "--admin", "--password-file", pwFile, "--config", config, admin.username]);
  }
  await mkdir(buildDir, { recursive: true });
  const logPath = path.join(buildDir, `${name}.log`);
  const log = createWriteStream(logPath);
  const proc = spawn(bin, ["run", "--config", config], { stdio: ["ignore", "pipe", "pipe"] });
  proc.stdout.pipe(log, { end: false });
  proc.stderr.pipe(log, { end: false });
  let exited = null;
  proc.on("exit", (code, sig) => { exited = `exited with ${code ?? sig}`; });
  const url = `http://127.0.0.1:${port}`;
  await eventually(async () => {
    if (exited) throw new Error(`newsflow ${exited}; see ${logPath}`);
    const res = await fetch(`${url}/health/ready`);
    if (res.status !== 200) throw new Error(`not ready: ${res.status}`);
  }, 60000);
  return {
    url, dir, config, admin,
    // setupURL is the one-time setup link the node printed (no admin).
    setupURL() {
      const m = readFileSync(logPath, "utf8").match(/https?:\/\/\S+\/setup\?token=[\w-]+/);
      if (!m) throw new Error(`no setup link in ${logPath}`);
      return m[0];
    },
    // produce runs `newsflow produce shares|articles` with NDJSON lines.
    async produce(kind, lines) {
      const file = path.join(dir, `${kind}-${Date.now()}.ndjson`);
      await writeFile(file, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
      await run(bin, ["produce", kind, file, "--addr", url, "--token", ingestToken]);
    },
    async api(p, opts = {}) {
      const res = await fetch(url + p, { ...opts, headers: { Authorization: `Bearer ${adminToken}`, ...(opts.headers || {}) } });
      const body = await res.json();
      if (!res.ok) throw new Error(`${p}: ${res.status} ${JSON.stringify(body)}`);
      return body;
    },
    async stop() {
      if (!exited) {
        proc.kill("SIGTERM");
        await new Promise((r) => proc.once("exit", r));
      }
      log.end();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

// startFeedServer serves an HTML page that links its RSS feed (for feed
// discovery) and the feed itself, with the given items.
export async function startFeedServer({ title, items }) {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const x = (s) => s.replace(/[<&>]/g, (c) => ({ "<": "&lt;", "&": "&amp;", ">": "&gt;" })[c]);
  const feed = () => `<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0"><channel><title>${x(title)}</title><link>${base}/</link><description>${x(title)}</description>
${items.map((it, i) => `<item><title>${x(it.title)}</title><link>${base}/articles/${i}</link><guid>${base}/articles/${i}</guid>
<description>${x(it.summary)}</description><pubDate>${new Date(Date.now() - (i + 1) * 60000).toUTCString()}</pubDate></item>`).join("\n")}
</channel></rss>`;
  const requests = [];
  const srv = http.createServer((req, res) => {
    requests.push(req.url);
    if (req.url === "/" || req.url === "/index.html") {
      res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
      res.end(`<!doctype html><html><head><title>${x(title)}</title><link rel="alternate" type="application/rss+xml" title="${x(title)}" href="/feed.xml"></head><body><h1>${x(title)}</h1></body></html>`);
    } else if (req.url === "/feed.xml") {
      res.writeHead(200, { "Content-Type": "application/rss+xml; charset=utf-8" });
      res.end(feed());
    } else if (req.url.startsWith("/img/")) {
      res.writeHead(200, { "Content-Type": "image/png" });
      res.end(readFileSync(path.join(root, "query/web/static/icon-192.png")));
    } else if (req.url === "/robots.txt") {
      res.writeHead(200, { "Content-Type": "text/plain" });
      res.end("User-agent: *\nAllow: /\n");
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise((r) => srv.listen(port, "127.0.0.1", r));
  return { url: base, requests, close: () => new Promise((r) => srv.close(r)) };
}

// launchBrowser starts headless Chromium with the flags a closed network
// needs (no background connections to the outside).
export async function launchBrowser() {
  const { chromium } = await import("playwright-core");
  return chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
  });
}

// newPage opens a page in a fresh context (own cookies and storage) in the
// given colour scheme. Requests to other hosts (article links) are aborted;
// script errors and CSP violations are collected in page.problems.
export async function newPage(browser, { colorScheme = "light", viewport = { width: 1280, height: 900 } } = {}) {
  const context = await browser.newContext({ colorScheme, viewport });
  await context.route((u) => u.hostname !== "127.0.0.1", (r) => r.abort());
  const page = await context.newPage();
  page.problems = [];
  page.on("pageerror", (e) => page.problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error" && !/Failed to load resource/.test(m.text())) page.problems.push(`console: ${m.text()}`);
  });
  return page;
}

const axeSource = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

// axe runs axe-core in the page (evaluated, so the page's CSP need not
// allow it) and returns the serious and critical violations.
export async function axe(page) {
  if (!(await page.evaluate(() => typeof window.axe !== "undefined"))) await page.evaluate(axeSource);
  const res = await page.evaluate(() => window.axe.run(document, { resultTypes: ["violations"] }));
  return res.violations.filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join(", ")}`);
}

export async function screenshot(page, name) {
  const dir = path.join(buildDir, "screenshots");
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}
