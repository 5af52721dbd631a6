// Browser tests of the node's cross-site defences: pages of other origins
// (another host name, and a sibling port on the node's own host) try to log
// the victim's browser into the attacker's account with forms, and to use
// the victim's session cookie. Headless Chromium sends what a real browser
// sends (Origin, Sec-Fetch-Site, the cookie as SameSite allows);
// query/csrf_test.go replays the same requests byte for byte in Go.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { freePort, launchBrowser, skipReason, startNode } from "./harness.mjs";

const skip = skipReason();
if (skip) console.log(`SKIP browser tests: ${skip}`);

// Mallory's password holds the "=" that a text/plain form puts between a
// field's name and value, so that the form's body is her JSON login.
const mallory = { username: "mallory", password: "mallory-pass=word-e2e" };
const victim = { username: "victim", password: "victim-password-e2e" };

// attackerPages serves the attacker's pages: forms that post Mallory's
// credentials to the node's login, as text/plain (a body that reads as
// JSON) and as an urlencoded form, and an empty page for scripts.
async function attackerPages(nodeURL) {
  const port = await freePort();
  const esc = (s) => s.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;");
  // text/plain sends name=value: the name holds the JSON up to the "=" in
  // the password, the value the rest of it.
  const [pwHead, pwTail] = mallory.password.split("=");
  const plainName = `{"username":"${mallory.username}","password":"${pwHead}`;
  const pages = {
    "/plain": `<form method="POST" action="${nodeURL}/api/v1/auth/login" enctype="text/plain">
<input type="hidden" name="${esc(plainName)}" value="${esc(pwTail + '"}')}"><button>win a prize</button></form>`,
    "/form": `<form method="POST" action="${nodeURL}/api/v1/auth/login">
<input type="hidden" name="username" value="${mallory.username}"><input type="hidden" name="password" value="${mallory.password}"><button>win a prize</button></form>`,
    "/blank": "<p>nothing to see</p>",
  };
  const srv = http.createServer((req, res) => {
    const body = pages[req.url];
    res.writeHead(body ? 200 : 404, { "Content-Type": "text/html; charset=utf-8" });
    res.end(body ? `<!doctype html><html><body>${body}</body></html>` : "");
  });
  await new Promise((r) => srv.listen(port, "127.0.0.1", r));
  return {
    // Another site (localhost is not 127.0.0.1), and a sibling origin on
    // the node's own host (same site: SameSite=Lax sends the cookie).
    crossSite: `http://localhost:${port}`,
    sameSite: `http://127.0.0.1:${port}`,
    close: () => new Promise((r) => srv.close(r)),
  };
}

describe("cross-site requests", { skip: skip || false }, () => {
  let node, browser, evil;

  before(async () => {
    [node, browser] = await Promise.all([startNode({ name: "csrf" }), launchBrowser()]);
    for (const u of [mallory, victim]) {
      const res = await fetch(node.url + "/api/v1/auth/register", {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(u),
      });
      assert.equal(res.status, 201, `register ${u.username}: ${await res.text()}`);
    }
    evil = await attackerPages(node.url);
  });
  after(async () => {
    await browser?.close();
    await evil?.close();
    await node?.stop();
  });

  // whoami is the account the context's cookie logs into, or null.
  async function whoami(page) {
    await page.goto(node.url + "/");
    return page.evaluate(async () => {
      const res = await fetch("/api/v1/me", { credentials: "same-origin" });
      return res.status === 200 ? (await res.json()).username : null;
    });
  }

  // submit clicks the attacker page's button and returns the node's
  // answer to the form and the headers Chromium sent with it.
  async function submit(page, origin, path) {
    await page.goto(origin + path);
    const [res] = await Promise.all([
      page.waitForResponse((r) => r.url() === node.url + "/api/v1/auth/login"),
      page.getByRole("button", { name: "win a prize" }).click(),
    ]);
    return { status: res.status(), body: await res.text(), sent: await res.request().allHeaders() };
  }

  // loginInUI logs the victim in through the web UI's own form.
  async function loginInUI(page) {
    await page.goto(node.url + "/login");
    await page.getByLabel("Username").fill(victim.username);
    await page.getByLabel("Password").fill(victim.password);
    await page.getByRole("button", { name: "Log in" }).click();
    await page.waitForURL((u) => !u.pathname.startsWith("/login"));
  }

  for (const [kind, path, contentType] of [["text/plain", "/plain", "text/plain"], ["urlencoded", "/form", "application/x-www-form-urlencoded"]]) {
    for (const site of ["crossSite", "sameSite"]) {
      test(`a ${kind} form from a ${site === "crossSite" ? "foreign site" : "sibling origin"} cannot log the browser in`, async () => {
        const context = await browser.newContext();
        try {
          const page = await context.newPage();
          // A browser with no session, then one logged in as the victim.
          for (const loggedIn of [false, true]) {
            if (loggedIn) await loginInUI(page);
            const r = await submit(page, evil[site], path);
            assert.equal(r.sent["content-type"].split(";")[0], contentType);
            assert.equal(r.sent.origin, evil[site]);
            assert.equal(r.status, 403, r.body);
            assert.match(r.body, /cross-site request refused/);
            assert.equal(await whoami(page), loggedIn ? victim.username : null, "the forged login changed the browser's account");
            const cookies = await context.cookies(node.url);
            assert.equal(cookies.filter((c) => c.name === "nf_session").length, loggedIn ? 1 : 0);
          }
        } finally {
          await context.close();
        }
      });
    }
  }

  test("another origin's script cannot use the session cookie, with or without an Authorization header", async () => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await loginInUI(page);
      assert.equal(await whoami(page), victim.username);
      const basic = "Basic " + Buffer.from(`${victim.username}:${victim.password}`).toString("base64");
      for (const origin of [evil.crossSite, evil.sameSite]) {
        await page.goto(origin + "/blank");
        const outcome = await page.evaluate(async ({ url, basic }) => {
          const out = {};
          // With the Authorization header Chromium must ask first
          // (a preflight the node does not grant): nothing is sent.
          try {
            const res = await fetch(url + "/api/v1/auth/logout", { method: "POST", credentials: "include", headers: { Authorization: basic } });
            out.basic = `answered ${res.status}`;
          } catch (e) {
            out.basic = "blocked";
          }
          // Without it the request goes out with the cookie (on the same
          // site) and the node must refuse it; its answer is opaque here.
          await fetch(url + "/api/v1/auth/logout", { method: "POST", mode: "no-cors", credentials: "include", body: "x" });
          out.plain = "sent";
          return out;
        }, { url: node.url, basic });
        assert.deepEqual(outcome, { basic: "blocked", plain: "sent" });
        assert.equal(await whoami(page), victim.username, `a logout from ${origin} ended the victim's session`);
      }
    } finally {
      await context.close();
    }
  });
});
