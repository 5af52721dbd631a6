// End-to-end tests of the web UI in headless Chromium against a real node.
// One node and one browser serve every test; the tests run in order and
// build on each other (an account registered first logs in later).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import {
  axe, buildDir, eventually, freePort, launchBrowser, newPage, screenshot, skipReason, startFeedServer, startNode,
} from "./harness.mjs";

const skip = skipReason();
if (skip) console.log(`SKIP browser tests: ${skip}`);

// Four events reported by several outlets, and a lone article. Times are
// minutes before now, so the stories are current.
const fixture = [
  ["quake", "https://wire.example/quake-lisbon", "wire", "Strong earthquake shakes Lisbon, buildings damaged", "A magnitude 6.8 earthquake struck near Lisbon on Tuesday morning.", 60],
  ["quake", "https://daily.example/world/lisbon-earthquake", "daily", "Lisbon earthquake: residents flee damaged buildings", "Residents of Lisbon ran into the streets after the earthquake.", 56],
  ["quake", "https://tv.example/news/portugal-quake", "tv", "Portugal earthquake of magnitude 6.8 hits Lisbon region", "Emergency services in Portugal respond to the earthquake near Lisbon.", 51],
  ["quake", "https://post.example/lisbon-quake-damage", "post", "Earthquake near Lisbon damages buildings, injures dozens", "Dozens were injured when the earthquake hit Lisbon.", 45],
  ["rates", "https://wire.example/ecb-rates", "wire", "European Central Bank raises interest rates by a quarter point", "The ECB raised its key interest rate on Tuesday to fight inflation.", 40],
  ["rates", "https://biz.example/ecb-hike", "biz", "ECB hikes interest rates again as inflation persists", "The European Central Bank lifted rates for the third time.", 36],
  ["rates", "https://daily.example/business/ecb-interest-rates", "daily", "Central bank interest rates rise: what the ECB hike means for mortgages", "Mortgage holders face higher costs after the ECB interest rate decision.", 29],
  ["phone", "https://tech.example/acme-phone-x", "tech", "Acme unveils Phone X with foldable screen and satellite messaging", "Acme's new Phone X, unveiled on Tuesday, folds in half and sends texts by satellite.", 20],
  ["phone", "https://gadget.example/acme-phone-x-hands-on", "gadget", "Hands on with the Acme Phone X foldable phone", "We tried the foldable Acme Phone X at the launch event.", 16],
  ["phone", "https://daily.example/tech/acme-foldable", "daily", "Acme Phone X: foldable screen, satellite texts and a high price", "The Acme Phone X launch brings a foldable screen.", 10],
  ["final", "https://sport.example/cup-final", "sport", "United win the cup final after a penalty shootout", "United beat City on penalties in the cup final.", 5],
  ["final", "https://daily.example/sport/cup-final-penalties", "daily", "Cup final decided on penalties as United beat City", "A dramatic cup final at the national stadium ended in a shootout.", 2],
  ["zoo", "https://local.example/zoo-panda", "local", "Zoo welcomes twin panda cubs", "The city zoo announced the birth of twin panda cubs.", 1],
].map(([event, url, source, title, summary, minutesAgo]) => ({ event, url, source, title, summary, minutesAgo }));

// The source an admin adds while the test watches: a local feed server.
const okapi = {
  title: "Ituri Forest Gazette",
  items: [
    { title: "Okapi calves thrive in the Ituri forest reserve", summary: "Rangers counted nine okapi calves in the Ituri reserve this season." },
    { title: "Ituri rangers map okapi trails with camera traps", summary: "Camera traps show okapi trails crossing the Ituri reserve at night." },
  ],
};

const budget = 200 * 1024; // first load, compressed
const report = { pages: {}, firstLoadBytes: 0 };

describe("web UI", { skip: skip || false }, () => {
  let node, feeds, browser, reader;

  before(async () => {
    [node, feeds, browser] = await Promise.all([startNode(), startFeedServer(okapi), launchBrowser()]);
    const now = Date.now();
    // Lead images from the local feed server, through the node's proxy.
    await node.produce("articles", fixture.map((a) => ({
      url: a.url, source_id: a.source, title: a.title, summary: a.summary,
      published_at: new Date(now - a.minutesAgo * 60000).toISOString(),
      ...(a.event === "quake" || a.event === "phone" ? { image_url: `${feeds.url}/img/${a.event}-${a.source}.png` } : {}),
    })));
    // Wait until every article is in a story and searchable.
    await eventually(async () => {
      const s = await node.api("/api/v1/search?limit=1");
      assert.equal(s.total, fixture.length);
      const st = await node.api("/api/v1/stories?limit=100");
      assert.equal(st.stories.reduce((n, x) => n + x.article_count, 0), fixture.length);
    }, 60000);
  });

  after(async () => {
    await writeFile(path.join(buildDir, "report.json"), JSON.stringify(report, null, 2));
    await browser?.close();
    await feeds?.close();
    await node?.stop();
  });

  // checkPage runs axe and saves a screenshot; no serious or critical
  // violations, no script errors, no CSP violations.
  async function checkPage(page, name) {
    // What a person reads: no broken values anywhere on the page.
    const text = await page.evaluate(() => document.body.innerText);
    for (const bad of [/\bNaN\b/, /\bundefined\b/, /Invalid Date/, /\[object Object\]/, /\bnull\b/]) {
      assert.doesNotMatch(text, bad, `${name}: the page shows ${bad}`);
    }
    const violations = await axe(page);
    assert.deepEqual(violations, [], `${name}: accessibility violations`);
    assert.deepEqual(page.problems, [], `${name}: script errors or CSP violations`);
    await screenshot(page, name);
    report.pages[name] = "ok";
  }

  test("first load is small and the feed shows story cards", async () => {
    const page = await newPage(browser);
    let total = 0;
    const sizes = [];
    page.on("requestfinished", async (req) => {
      const s = await req.sizes();
      total += s.responseBodySize + s.responseHeadersSize;
      sizes.push([new URL(req.url()).pathname, s.responseBodySize]);
    });
    await page.goto(node.url + "/");
    await page.locator(".card").first().waitFor();
    await page.locator("#trending-list").waitFor();
    await page.waitForLoadState("networkidle");
    report.firstLoadBytes = total;
    report.firstLoad = sizes;
    assert.ok(total > 0 && total <= budget, `first load ${total} bytes compressed, budget ${budget}: ${JSON.stringify(sizes)}`);
    const enc = await page.evaluate(async () => (await fetch("/app.js")).headers.get("content-encoding"));
    assert.equal(enc, "gzip");

    // Four stories with several sources, newest activity ranked by the feed.
    const cards = page.locator(".card");
    assert.equal(await cards.count(), 5);
    const quake = cards.filter({ hasText: "Lisbon" });
    assert.equal(await quake.count(), 1);
    assert.match(await quake.locator(".sources").innerText(), /^4 sources$/);
    // Lead images load through the node, never from the outlet.
    for (const ev of ["Lisbon", "Phone X"]) {
      const img = cards.filter({ hasText: ev }).locator("img.thumb");
      assert.equal(await img.count(), 1, `${ev} card image`);
      assert.match(await img.getAttribute("src"), /^\/api\/v1\/image\/[0-9a-f]{32}$/);
      await eventually(async () => assert.ok(await img.evaluate((el) => el.complete && el.naturalWidth === 192), "image loaded"));
    }
    assert.equal(await cards.filter({ hasText: "panda" }).locator("img").count(), 0, "no image, no placeholder");
    // Full coverage: the other three outlets' headlines under the card.
    const others = await quake.locator(".coverage li").allInnerTexts();
    assert.equal(others.length, 3, others.join(" | "));
    for (const li of others) assert.match(li, /(Lisbon|Portugal).*(min|h) ago/, li);
    assert.match(await cards.filter({ hasText: "panda" }).locator(".sources").innerText(), /^1 source$/);
    await checkPage(page, "feed-light");
    await page.context().close();
  });

  test("register, log out, log in and set preferences", async () => {
    reader = await newPage(browser);
    const page = reader;
    await page.goto(node.url + "/");
    await page.getByRole("link", { name: "Register" }).click();
    await page.getByRole("heading", { name: "Register" }).waitFor();
    await checkPage(page, "register-light");
    // A weak password is refused with the server's reason.
    await page.getByLabel("Username").fill("reader1");
    await page.getByLabel("Password").fill("short");
    await page.getByLabel("Password").evaluate((el) => el.removeAttribute("minlength"));
    await page.getByRole("button", { name: "Register" }).click();
    await page.getByRole("alert").filter({ hasText: /password/i }).waitFor();
    await page.getByLabel("Password").fill("a long enough password");
    await page.getByRole("button", { name: "Register" }).click();
    await page.locator(".account").getByRole("link", { name: "reader1" }).waitFor();

    await page.getByRole("button", { name: "Log out" }).click();
    await page.locator(".account").getByRole("link", { name: "Log in" }).click();
    await page.getByRole("heading", { name: "Log in" }).waitFor();
    await page.getByLabel("Username").fill("reader1");
    await page.getByLabel("Password").fill("wrong password!");
    await page.getByRole("button", { name: "Log in" }).click();
    await page.getByRole("alert").filter({ hasText: /invalid|incorrect|wrong/i }).waitFor();
    await checkPage(page, "login-light");
    await page.getByLabel("Password").fill("a long enough password");
    await page.getByRole("button", { name: "Log in" }).click();
    await page.locator(".account").getByRole("link", { name: "reader1" }).waitFor();

    await page.locator(".account").getByRole("link", { name: "reader1" }).click();
    await page.getByRole("heading", { name: "Preferences" }).waitFor();
    await page.getByRole("checkbox", { name: "technology" }).check();
    await page.getByRole("checkbox", { name: "sports" }).check();
    await page.getByRole("button", { name: "Save" }).click();
    await page.getByRole("status").filter({ hasText: "Saved." }).waitFor();
    await checkPage(page, "preferences-light");
    await page.reload();
    await page.getByRole("heading", { name: "Preferences" }).waitFor();
    assert.equal(await page.getByRole("checkbox", { name: "technology" }).isChecked(), true);
    assert.equal(await page.getByRole("checkbox", { name: "world" }).isChecked(), false);
    const prefs = await page.evaluate(async () => (await fetch("/api/v1/preferences")).json());
    assert.deepEqual(prefs.topics.sort(), ["sports", "technology"]);
  });

  test("a reader creates an API key for an app in the preferences; the app logs in with it until it is revoked", async () => {
    const page = reader;
    await page.goto(node.url + "/preferences");
    await page.getByRole("heading", { name: "Reader apps" }).waitFor();
    await page.getByText("No API keys.").waitFor();
    await page.getByLabel("App name").fill("newsboat");
    await page.getByRole("button", { name: "Create API key" }).click();
    const secret = (await page.locator("code.secret").textContent()).trim();
    assert.ok(secret.length >= 40, `secret ${secret}`);
    await page.locator("#keys li").filter({ hasText: "newsboat" }).filter({ hasText: "not used yet" }).waitFor();
    // The app: Miniflux's /v1/me with the key, and the Google Reader login.
    const app = async (key) => page.evaluate(async (k) => (await fetch("/v1/me", { headers: { "X-Auth-Token": k }, credentials: "omit" })).status, key);
    assert.equal(await app(secret), 200);
    const login = await page.evaluate(async (k) => (await fetch("/accounts/ClientLogin", { method: "POST", credentials: "omit",
      headers: { "Content-Type": "application/x-www-form-urlencoded" }, body: "Email=reader1&Passwd=" + encodeURIComponent(k) })).text(), secret);
    assert.match(login, /^SID=.*\nLSID=null\nAuth=/);
    await page.reload();
    await page.locator("#keys li").filter({ hasText: "newsboat" }).filter({ hasText: "last used" }).waitFor();
    assert.equal(await page.locator("code.secret").count(), 0, "the secret is shown only when created");
    await checkPage(page, "preferences-apps-light");
    await page.getByRole("button", { name: "Revoke the key of newsboat" }).click();
    await page.getByRole("status").filter({ hasText: "revoked" }).waitFor();
    await page.getByText("No API keys.").waitFor();
    assert.equal(await app(secret), 401);
    // A breaking-news webhook, which the admin console lists.
    const hook = await page.evaluate(async () => (await fetch("/api/v1/me/webhooks", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ url: "https://hooks.example.org/newsflow", topics: ["science"] }) })).status);
    assert.equal(hook, 201);
  });

  test("a story page lists every source; opening an article is a read in the history", async () => {
    const page = reader;
    await page.getByRole("link", { name: "newsflow" }).click();
    const quake = page.locator(".card").filter({ hasText: "Lisbon" });
    await quake.locator("h2 a").click();
    await page.getByRole("heading", { level: 1, name: /Lisbon/ }).waitFor();
    assert.match(await page.locator("main .meta").first().innerText(), /4 articles from 4 sources/);
    const sources = await page.locator(".chips li").allInnerTexts();
    assert.deepEqual(sources.map((s) => s.split(" ")[0]).sort(), ["daily", "post", "tv", "wire"]);
    assert.equal(await page.locator("#articles .card").count(), 4);
    await checkPage(page, "story-light");

    const first = page.locator("#articles .card").first().locator("h3 a");
    const title = await first.innerText();
    const [popup] = await Promise.all([page.waitForEvent("popup"), first.click()]);
    await popup.close();
    await eventually(async () => {
      await page.locator(".account").getByRole("link", { name: "History" }).click();
      await page.getByRole("heading", { name: "Reading history" }).waitFor();
      assert.equal(await page.locator(".history li a").first().innerText(), title);
    }, 20000, 500);
    await checkPage(page, "history-light");
  });

  test("keyboard shortcuts: j/k select, o opens, / searches, ? helps", async () => {
    const page = reader;
    await page.getByRole("link", { name: "newsflow" }).click();
    await page.locator(".card").first().waitFor();
    await page.locator("body").click({ position: { x: 5, y: 300 } });
    await page.keyboard.press("j");
    await page.keyboard.press("j");
    await page.keyboard.press("k");
    const selected = page.locator(".card.selected");
    assert.equal(await selected.count(), 1);
    assert.equal(await selected.getAttribute("data-id"), await page.locator(".card").first().getAttribute("data-id"));
    const title = await selected.locator("h2").innerText();
    await page.keyboard.press("o");
    await page.getByRole("heading", { level: 1, name: title.replace(/^Breaking\s*/i, "") }).waitFor();
    await page.keyboard.press("?");
    await page.getByRole("dialog", { name: "Keyboard shortcuts" }).waitFor();
    await checkPage(page, "help-light");
    await page.keyboard.press("Escape");
    await page.getByRole("dialog").waitFor({ state: "hidden" });
    await page.keyboard.press("/");
    assert.equal(await page.evaluate(() => document.activeElement?.id), "q");
  });

  test("unread counts follow what the reader opens and marks; stars, follows, hide read, keyboard", async () => {
    const page = reader;
    const unread = () => page.evaluate(async () => (await fetch("/api/v1/me/unread")).json());
    const tab = (topic) => page.locator(`.topics a[data-topic="${topic}"] .count`);
    await page.getByRole("link", { name: "newsflow" }).click();
    await page.locator(".card").first().waitFor();
    const before = await unread();
    assert.equal(before.total.articles, fixture.length - 1, "the article opened in the story test is read");
    await eventually(async () => assert.equal(await tab("").innerText(), String(before.total.articles)));

    // Opening an article on the story page: the page's and the tabs' counts drop.
    await page.locator(".card").filter({ hasText: "Lisbon" }).locator("h2 a").click();
    await page.getByRole("heading", { level: 1, name: /Lisbon/ }).waitFor();
    assert.equal(await page.locator("#story-unread").innerText(), "3 of 4 articles unread");
    const unreadArticle = page.locator("#articles .card:not(.read)").first();
    const [popup] = await Promise.all([page.waitForEvent("popup"), unreadArticle.locator("h3 a").click()]);
    await popup.close();
    await eventually(async () => assert.equal(await page.locator("#story-unread").innerText(), "2 of 4 articles unread"));
    await eventually(async () => assert.equal(await tab("").innerText(), String(before.total.articles - 1)));
    assert.equal(await page.locator("#articles .card.read").count(), 2);
    await checkPage(page, "story-read-light");
    await page.getByRole("button", { name: "Mark story read" }).click();
    await eventually(async () => assert.equal(await page.locator("#story-unread").innerText(), "0 of 4 articles unread"));
    await eventually(async () => assert.equal(await tab("").innerText(), String(before.total.articles - 3)));

    // The feed shows it read; "Hide read" leaves it out.
    await page.getByRole("link", { name: "newsflow" }).click();
    const quake = page.locator(".card[data-id]").filter({ hasText: "Lisbon" });
    await quake.waitFor();
    assert.match(await quake.getAttribute("class"), /\bread\b/);
    assert.match(await quake.locator(":scope > .meta").innerText(), /· read/);
    await page.getByLabel("Hide read").check();
    await eventually(async () => assert.equal(await page.locator(".card").filter({ hasText: "Lisbon" }).count(), 0));
    assert.equal(await page.locator(".card").count(), 4);
    await checkPage(page, "feed-hide-read-light");
    await page.getByLabel("Hide read").uncheck();
    await page.locator(".card").filter({ hasText: "Lisbon" }).waitFor();

    // Keyboard: m marks the selected story read, a marks it and those above.
    await page.locator("body").click({ position: { x: 5, y: 300 } });
    await page.keyboard.press("j");
    const firstCard = page.locator(".card.selected");
    const wasRead = /\bread\b/.test(await firstCard.getAttribute("class"));
    await page.keyboard.press("m");
    await eventually(async () => assert.equal(/\bread\b/.test(await page.locator(".card").first().getAttribute("class")), !wasRead));
    await page.keyboard.press("j");
    await page.keyboard.press("j");
    await page.keyboard.press("a");
    await eventually(async () => assert.equal(await page.locator(".card").nth(2).locator("[data-mark]").innerText(), "Mark unread"));
    for (const i of [0, 1, 2]) assert.match(await page.locator(".card").nth(i).getAttribute("class"), /\bread\b/, `card ${i} read`);

    // Stars: from a card, listed on the Starred page, removed there.
    const phone = page.locator(".card").filter({ hasText: "Phone X" });
    await phone.getByRole("button", { name: /^Star:/ }).click();
    await eventually(async () => assert.equal(await phone.getByRole("button", { name: /^Star:/ }).getAttribute("aria-pressed"), "true"));
    await page.locator(".account").getByRole("link", { name: "Starred" }).click();
    await page.getByRole("heading", { level: 1, name: "Starred" }).waitFor();
    assert.equal(await page.locator("#starred .card").count(), 1);
    assert.match(await page.locator("#starred .card h2").innerText(), /Phone X/);
    assert.match(await page.locator("#starred .card .meta").innerText(), /starred \d+ min ago/);
    await checkPage(page, "starred-light");
    await page.locator("#starred").getByRole("button", { name: /^Star:/ }).click();
    await page.reload();
    await page.getByText("Nothing starred yet.").waitFor();

    // A source's page: its unread count and a follow button.
    await page.goto(node.url + "/sources/daily");
    await page.getByRole("heading", { level: 1, name: "daily" }).waitFor();
    const daily = (await unread()).sources.find((x) => x.source_id === "daily")?.articles ?? 0;
    await eventually(async () => assert.equal(await page.locator("[data-unread-source]").innerText(), `${daily} unread`));
    await page.getByRole("button", { name: "Follow", exact: true }).click();
    await page.getByRole("button", { name: "Following ✓" }).waitFor();
    assert.ok((await page.evaluate(async () => (await fetch("/api/v1/preferences")).json())).preferred_sources.includes("daily"));
    await page.getByRole("button", { name: "Mark all as read" }).click();
    await eventually(async () => assert.equal(await page.locator("[data-unread-source]").innerText(), "0 unread"));
    await page.getByRole("button", { name: "Following ✓" }).click();
    await page.getByRole("button", { name: "Follow", exact: true }).waitFor();
    assert.ok(!(await page.evaluate(async () => (await fetch("/api/v1/preferences")).json())).preferred_sources.includes("daily"));

    // Everything read with A: no counts left.
    await page.getByRole("link", { name: "newsflow" }).click();
    await page.locator(".card").first().waitFor();
    await page.locator("body").click({ position: { x: 5, y: 300 } });
    await page.keyboard.press("A");
    await eventually(async () => assert.equal((await unread()).total.articles, 0));
    await eventually(async () => assert.equal(await tab("").innerText(), ""));
    // The cards are marked as the answers come in, not with the counts.
    await eventually(async () => assert.equal(await page.locator(".card:not(.read)").count(), 0));
  });

  test("search shows highlights and a topic filter narrows it", async () => {
    const page = reader;
    await page.locator("#q").fill("tuesday");
    await page.locator("#q").press("Enter");
    await page.getByRole("heading", { name: "Search: tuesday" }).waitFor();
    await page.locator(".hit").first().waitFor();
    // Three stories mention Tuesday: an earthquake, a rate rise, a phone.
    assert.equal(await page.locator(".hit").count(), 3);
    assert.equal(await page.locator(".hit mark").count(), 3, "each match is highlighted");
    assert.equal((await page.locator(".hit mark").first().innerText()).toLowerCase(), "tuesday");
    assert.match(await page.locator("#total").innerText(), /^3 matching articles/);
    // Each hit says when, in words, with the exact time on hover.
    for (const meta of await page.locator(".hit .meta").allInnerTexts()) assert.match(meta, /\d+ (min|h) ago|\d+ days ago/, meta);
    assert.ok(await page.locator(".hit time[title]").count() === 3, "exact time on hover");
    await checkPage(page, "search-light");

    await page.locator("#filters").getByLabel("Topic").selectOption("business");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.waitForURL(/topic=business/);
    await eventually(async () => assert.match(await page.locator("#total").innerText(), /^1 matching article$/));
    assert.deepEqual(await page.locator(".hit h2").allInnerTexts(), ["European Central Bank raises interest rates by a quarter point"]);
    assert.equal(await page.locator("#filters").getByLabel("Topic").inputValue(), "business", "the filter stays chosen");
  });

  test("trending changes live after shares are produced", async () => {
    const page = await newPage(browser);
    await page.goto(node.url + "/");
    const list = page.locator("#trending-list");
    await list.waitFor();
    assert.match(await list.innerText(), /No shares in the last 1h/);
    // Updates are pushed over the live stream: no polling of /trending.
    let polled = 0;
    page.on("request", (r) => { if (new URL(r.url()).pathname === "/api/v1/trending") polled++; });
    const ids = Object.fromEntries((await node.api("/api/v1/search?q=&limit=100")).hits.map((h) => [h.url, h.id]));
    const phone = ids["https://tech.example/acme-phone-x"], final = ids["https://sport.example/cup-final"];
    assert.ok(phone && final, "article ids from search");
    const shares = (article, n, tag) => Array.from({ length: n }, (_, i) => ({
      event_id: `${tag}-${i}`, article_id: article, user_id: `u${i}`, share_type: "link", timestamp: Date.now(),
    }));
    await node.produce("shares", shares(phone, 5, "phone"));
    // The panel refreshes itself: no reload, no click.
    await eventually(async () => {
      const items = await list.locator("li").allInnerTexts();
      assert.match(items[0] ?? "", /Acme unveils Phone X.*5 shares/);
    }, 20000, 500);
    assert.equal(polled, 0, "trending came over /api/v1/stream, not by polling");
    await checkPage(page, "trending-light");
    await node.produce("shares", shares(final, 8, "final"));
    await eventually(async () => {
      const items = await list.locator("li").allInnerTexts();
      assert.match(items[0] ?? "", /United win the cup final.*8 shares/);
      assert.match(items[1] ?? "", /Phone X.*5 shares/);
    }, 20000, 500);
    // Window buttons switch the panel.
    await page.getByRole("button", { name: "24h" }).click();
    await eventually(async () => assert.equal(await page.getByRole("button", { name: "24h" }).getAttribute("aria-pressed"), "true"));
    assert.match(await list.locator("li").first().innerText(), /cup final.*8 shares/);
    // A share button on a story page counts too.
    await list.getByRole("link", { name: /Phone X/ }).click();
    await page.getByRole("heading", { level: 1, name: /Phone X/ }).waitFor();
    const btn = page.locator(`[data-share="${phone}"]`);
    await btn.click();
    await page.locator(`[data-share="${phone}"]`, { hasText: "Shared" }).waitFor();
    await eventually(async () => assert.match(await list.innerText(), /Phone X.*6 shares/), 20000, 500);
    await page.context().close();
  });

  test("an admin adds a source served by a local feed server and sees its articles", async () => {
    const page = await newPage(browser);
    await page.goto(node.url + "/login");
    await page.getByLabel("Username").fill(node.admin.username);
    await page.getByLabel("Password").fill(node.admin.password);
    await page.getByRole("button", { name: "Log in" }).click();
    await page.locator(".account").getByRole("link", { name: "Admin", exact: true }).click();
    await page.getByRole("heading", { level: 1, name: "Admin" }).waitFor();
    assert.match(await page.locator("#srcs").innerText(), /Sources \(0\)/);
    // The readers' webhooks with their delivery status.
    const hooks = await page.locator("section:has(#hooks)").innerText();
    assert.match(hooks, /Webhooks \(1\)/);
    assert.match(hooks, /hooks\.example\.org\/newsflow\s+science\s+0\s+0\s+0\s+never/);
    // The system panel: stages with rates, stores on disk.
    const stages = await page.locator("#system table").first().innerText();
    assert.match(stages, /trending/);
    assert.match(await page.locator("#system").innerText(), /state\s+[\d.]+ (B|KiB|MiB)/);

    // Added by the page's URL: the console discovers the feed.
    await page.getByLabel("Feed or page URL").fill(feeds.url + "/");
    await page.getByRole("button", { name: "Add source" }).click();
    await page.getByRole("status").filter({ hasText: /Added Ituri Forest Gazette/ }).waitFor();
    const row = page.locator("tr[data-source]");
    assert.equal(await row.count(), 1);
    assert.match(await row.locator("th").innerText(), /Ituri Forest Gazette/);
    await eventually(async () => {
      await page.reload();
      await page.locator("tr[data-source]").waitFor();
      const cells = await page.locator("tr[data-source] td").allInnerTexts();
      assert.match(cells[1], /ok/, `last crawl: ${cells}`);
      assert.equal(cells[4], "closed", "circuit");
    }, 30000, 1000);
    assert.ok(feeds.requests.includes("/feed.xml"), "the node fetched the discovered feed");
    await checkPage(page, "admin-light");

    // Its articles appear in search and as stories.
    await page.locator("#q").fill("okapi");
    await page.locator("#q").press("Enter");
    await eventually(async () => {
      await page.reload();
      await page.locator("#total").filter({ hasText: /matching articles?/ }).waitFor();
      // Both articles, one result each or one folded under the other (they
      // are about the same okapi reserve).
      assert.equal(await page.locator(".hit").count() + await page.locator(".hit .also li").count(), 2);
    }, 30000, 1000);
    const titles = [...await page.locator(".hit h2").allInnerTexts(), ...await page.locator(".hit .also li > a").allTextContents()];
    assert.deepEqual(titles.sort(), okapi.items.map((i) => i.title).sort());
    assert.match(await page.locator(".hit .meta").first().innerText(), /Ituri Forest Gazette/);

    // Pause and resume from the console.
    await page.goto(node.url + "/admin");
    await page.getByRole("button", { name: "Pause" }).click();
    await page.locator("tr[data-source] td").first().filter({ hasText: "paused" }).waitFor();
    await page.getByRole("button", { name: "Resume" }).click();
    await page.locator("tr[data-source] td").first().filter({ hasText: "active" }).waitFor();

    // OPML: export lists the source; importing a list adds what is new.
    const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("link", { name: "Export OPML" }).click()]);
    const exported = await readFile(await download.path(), "utf8");
    assert.match(exported, new RegExp(`xmlUrl="${feeds.url}/feed.xml"`));
    const opml = `<?xml version="1.0"?><opml version="2.0"><head><title>more</title></head><body>
      <outline type="rss" text="Second Gazette" xmlUrl="${feeds.url}/second.xml"/>
      <outline type="rss" text="Ituri Forest Gazette" xmlUrl="${feeds.url}/feed.xml"/></body></opml>`;
    await page.getByLabel("Import OPML").setInputFiles({ name: "more.opml", mimeType: "text/xml", buffer: Buffer.from(opml) });
    await page.getByRole("status").filter({ hasText: "Imported: 1 added, 1 skipped." }).waitFor();
    assert.equal(await page.locator("tr[data-source]").count(), 2);
    assert.match(await page.locator("#srcs").innerText(), /Sources \(2\)/);

    // Delete asks first.
    const second = page.locator("tr[data-source]", { hasText: "Second Gazette" });
    page.once("dialog", (d) => d.dismiss());
    await second.getByRole("button", { name: "Delete" }).click();
    assert.equal(await page.locator("tr[data-source]").count(), 2, "dismissed: nothing deleted");
    page.once("dialog", (d) => d.accept());
    await second.getByRole("button", { name: "Delete" }).click();
    await page.locator("#srcs", { hasText: "Sources (1)" }).waitFor();
    assert.equal(await page.locator("tr[data-source]", { hasText: "Second Gazette" }).count(), 0);
    await page.context().close();
  });

  test("the system page shows every service level objective with readable numbers", async () => {
    const page = await newPage(browser);
    await page.goto(node.url + "/login");
    await page.getByLabel("Username").fill(node.admin.username);
    await page.getByLabel("Password").fill(node.admin.password);
    await page.getByRole("button", { name: "Log in" }).click();
    await page.locator(".account").getByRole("link", { name: "Admin", exact: true }).click();
    const table = page.locator("#system table.slo");
    await table.waitFor();
    assert.match(await table.locator("caption").innerText(), /^Service level objectives over 30 days( \(so far: [\w ]+\))?$/);
    const heads = await table.locator("thead th").allInnerTexts();
    assert.deepEqual(heads, ["Objective", "Target", "5 min", "1 h", "30 days", "Error budget", "Status"]);
    const slo = await node.api("/api/v1/admin/slo");
    const rows = await table.locator("tbody tr").evaluateAll((trs) => trs.map((tr) => ({
      id: tr.dataset.slo, cells: [...tr.querySelectorAll("th, td")].map((c) => c.innerText.trim()),
    })));
    const ids = rows.map((r) => r.id).filter((id) => !id.includes("/"));
    assert.deepEqual(ids, slo.objectives.map((o) => o.id), "one row per objective, in the report's order");
    const pct = /^(\d{1,3}(\.\d{1,2})?%|no data)$/;
    for (const { id, cells } of rows) {
      assert.equal(cells.length, 7, `${id}: ${cells}`);
      const [name, target, m5, h1, d30, budget, status] = cells;
      assert.ok(name.length > 10, `${id}: named (${name})`);
      assert.match(target, /^\d{2}(\.\d)?%$/, `${id}: target`);
      for (const v of [m5, h1, d30]) assert.match(v, pct, `${id}: value ${v}`);
      assert.match(budget, /^(\d{1,3}% left|spent [\d.]+× the budget|no data)$/, `${id}: budget ${budget}`);
      assert.match(status, /^(ok|burning|breached|no data)$/, `${id}: status ${status}`);
      for (const c of cells) assert.doesNotMatch(c, /NaN|undefined|null|Infinity/, `${id}: ${c}`);
    }
    // The articles produced for these tests went through every stage: the
    // article objectives have data, as the report says.
    const ingest = rows.find((r) => r.id === "article_ingest").cells;
    assert.match(ingest[4], /^\d{1,3}(\.\d{1,2})?%$/, `article_ingest over 30 days: ${ingest}`);
    const report = slo.objectives.find((o) => o.id === "article_ingest");
    assert.ok(report.windows["30d"].total >= fixture.length, `article_ingest counted ${report.windows["30d"].total}`);
    // The availability groups that had requests have a row each (the
    // report, read after the page, has counted them too).
    const shown = rows.map((r) => r.id).filter((id) => id.includes("/"));
    const counted = slo.objectives.find((o) => o.id === "availability").groups.filter((g) => g.windows["30d"].total > 0).map((g) => `availability/${g.group}`);
    assert.ok(shown.includes("availability/admin") && shown.every((g) => counted.includes(g)), `groups shown ${shown}, counted ${counted}`);
    // Error budgets as meters with a name, between 0 and 100.
    for (const m of await table.locator("meter").all()) {
      const v = Number(await m.getAttribute("value"));
      assert.ok(v >= 0 && v <= 100, `meter ${v}`);
      assert.match(await m.getAttribute("aria-label"), /^Error budget left: /);
    }
    await checkPage(page, "admin-slo");
    await page.context().close();
  });

  test("one result per story in search, a source page, a missing story, fixed topic tabs", async () => {
    const page = await newPage(browser);
    // Four articles about the earthquake: one result, the rest folded.
    await page.goto(node.url + "/search?q=earthquake+lisbon");
    await page.locator(".hit").first().waitFor();
    assert.equal(await page.locator(".hit").count(), 1, "one result for one story");
    const also = page.locator(".hit .also");
    assert.equal(await also.locator("summary").innerText(), "3 more articles in this story");
    await also.locator("summary").click();
    assert.equal(await also.locator("li").count(), 3);
    for (const li of await also.locator("li").allInnerTexts()) assert.match(li, /(min|h) ago/, li);
    await checkPage(page, "search-grouped-light");

    // Outlet names lead to the outlet's page: its articles only.
    await page.locator(".hit .meta a.outlet").first().click();
    await page.waitForURL(/\/sources\//);
    await page.getByRole("heading", { level: 1, name: /^(wire|daily|tv|post)$/ }).waitFor();
    const outlet = (await page.locator("h1").innerText()).trim();
    assert.ok(["wire", "daily", "tv", "post"].includes(outlet), `source page ${outlet}`);
    await page.locator(".hit").first().waitFor();
    const want = fixture.filter((a) => a.source === outlet);
    const shown = (await page.locator(".hit h2").allInnerTexts()).length + (await page.locator(".hit .also li").count());
    assert.equal(shown, want.length, `${outlet} has ${want.length} articles`);
    for (const m of await page.locator(".hit > .meta").allInnerTexts()) assert.match(m, new RegExp(`^${outlet} ·`));
    await checkPage(page, "source-light");

    // A story that is not there says so and leads back.
    await page.goto(node.url + "/stories/no-such-story");
    await page.getByRole("heading", { level: 1, name: "Story not found" }).waitFor();
    await page.getByRole("link", { name: "Back to the top stories" }).click();
    await page.locator(".card").first().waitFor();

    // Topic tabs: alphabetical, the same on every load.
    const tabs = async () => (await page.locator("nav.topics a").allInnerTexts()).slice(1);
    const first = await tabs();
    assert.ok(first.length >= 3, `topic tabs ${first}`);
    assert.deepEqual(first, [...first].sort((a, b) => a.localeCompare(b)));
    await page.reload();
    await page.locator(".card").first().waitFor();
    assert.deepEqual(await tabs(), first);
    await page.context().close();
  });

  test("trending lists each story once, its articles' shares summed", async () => {
    const page = await newPage(browser);
    await page.goto(node.url + "/");
    const list = page.locator("#trending-list");
    await list.waitFor();
    const ids = Object.fromEntries((await node.api("/api/v1/search?q=&limit=100")).hits.map((h) => [h.url, h.id]));
    const quake = fixture.filter((a) => a.event === "quake").map((a) => ids[a.url]);
    assert.equal(quake.filter(Boolean).length, 4);
    // 3 shares on each of the four articles: 12 for the story, more than
    // any other story has had in this run.
    await node.produce("shares", quake.flatMap((id, k) => [0, 1, 2].map((i) => ({
      event_id: `quake-${k}-${i}`, article_id: id, user_id: `q${k}${i}`, share_type: "link", timestamp: Date.now(),
    }))));
    await eventually(async () => {
      const items = await list.locator("li").allInnerTexts();
      assert.match(items[0] ?? "", /Lisbon.*12 shares/, items.join(" | "));
      assert.equal(items.filter((t) => /Lisbon|Portugal/.test(t)).length, 1, `one line for the story: ${items.join(" | ")}`);
    }, 20000, 500);
    const stories = await list.locator("li").evaluateAll((lis) => lis.map((li) => li.dataset.story));
    assert.equal(new Set(stories).size, stories.length, "distinct stories");
    await page.context().close();
  });

  test("installable: a manifest with icons, a service worker, the shell and saved stories offline", async () => {
    const page = await newPage(browser);
    await page.goto(node.url + "/");
    await page.locator(".card").first().waitFor();
    const manifest = await page.evaluate(async () => {
      const r = await fetch(document.querySelector('link[rel="manifest"]').href);
      const body = await r.json();
      const icons = await Promise.all(body.icons.map(async (i) => {
        const ir = await fetch(i.src);
        return { sizes: i.sizes, status: ir.status, type: ir.headers.get("content-type"), bytes: (await ir.arrayBuffer()).byteLength };
      }));
      return { type: r.headers.get("content-type"), body, icons };
    });
    assert.equal(manifest.type, "application/manifest+json");
    assert.equal(manifest.body.display, "standalone");
    assert.equal(manifest.body.start_url, "/");
    for (const size of ["192x192", "512x512"]) {
      const icon = manifest.icons.find((i) => i.sizes === size);
      assert.ok(icon && icon.status === 200 && icon.type === "image/png" && icon.bytes > 100, `${size} icon: ${JSON.stringify(icon)}`);
    }
    await page.evaluate(() => navigator.serviceWorker.ready);
    await page.reload();
    await page.locator(".card").first().waitFor();
    assert.ok(await page.evaluate(() => !!navigator.serviceWorker.controller), "the service worker controls the page");
    const titles = await page.locator(".card h2").allInnerTexts();
    assert.equal(await page.locator(".offline").isVisible(), false);

    // Offline: the shell and the stories read before, and it says so.
    // Every request fails as with no network, the service worker's too
    // (setOffline alone does not survive a reload in every Chromium: the
    // reloaded page then reaches the node and says it is online).
    const noNetwork = (route) => route.abort("internetdisconnected");
    await page.context().setOffline(true);
    await page.context().route("**/*", noNetwork);
    await page.reload();
    await page.locator(".offline").waitFor({ state: "visible" });
    await page.locator(".card").first().waitFor();
    assert.deepEqual(await page.locator(".card h2").allInnerTexts(), titles);
    await checkPage(page, "offline-light");
    // Back online: the page finds the node again and drops the notice.
    await page.context().unroute("**/*", noNetwork);
    await page.context().setOffline(false);
    await page.locator(".offline").waitFor({ state: "hidden" });
    await page.context().close();
  });

  test("the admin console fits a phone and a desktop with every action visible", async () => {
    for (const viewport of [{ width: 390, height: 844 }, { width: 1280, height: 800 }]) {
      const page = await newPage(browser, { viewport });
      await page.goto(node.url + "/login");
      await page.getByLabel("Username").fill(node.admin.username);
      await page.getByLabel("Password").fill(node.admin.password);
      await page.getByRole("button", { name: "Log in" }).click();
      await page.locator(".account").getByRole("link", { name: "Admin", exact: true }).waitFor();
      assert.equal(await page.evaluate(() => window.scrollY), 0, "after logging in the page starts at the top");
      await page.locator(".account").getByRole("link", { name: "Admin", exact: true }).click();
      const row = page.locator("tr[data-source]").first();
      await row.waitFor();
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
      assert.equal(overflow, false, `${viewport.width} px: no horizontal scrolling`);
      for (const name of ["Crawl now", /^(Pause|Resume)$/, "Delete"]) {
        const b = await row.getByRole("button", { name }).boundingBox();
        assert.ok(b && b.x >= 0 && b.x + b.width <= viewport.width && b.width > 30, `${viewport.width} px: ${name} fully visible (${JSON.stringify(b)})`);
      }
      // Rates appear without waiting for the 5 s refresh.
      await eventually(async () => assert.doesNotMatch(await page.locator("#system table").first().innerText(), /measuring/), 10000, 250);
      await checkPage(page, `admin-${viewport.width < 800 ? "mobile" : "desktop"}-light`);
      await page.context().close();
    }
  });

  test("main pages in the dark theme: accessible, screenshots", async () => {
    const page = await newPage(browser, { colorScheme: "dark" });
    await page.goto(node.url + "/");
    await page.locator(".card").first().waitFor();
    assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), "dark");
    const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    assert.equal(bg, "rgb(18, 19, 22)");
    await checkPage(page, "feed-dark");
    await page.locator(".card").filter({ hasText: "Lisbon" }).locator("h2 a").click();
    await page.getByRole("heading", { level: 1, name: /Lisbon/ }).waitFor();
    await checkPage(page, "story-dark");
    await page.goto(node.url + "/search?q=earthquake");
    await page.locator(".hit").first().waitFor();
    await checkPage(page, "search-dark");
    await page.goto(node.url + "/login");
    await page.getByLabel("Username").fill(node.admin.username);
    await page.getByLabel("Password").fill(node.admin.password);
    await page.getByRole("button", { name: "Log in" }).click();
    await page.locator(".account").getByRole("link", { name: "Admin", exact: true }).click();
    await page.locator("tr[data-source]").waitFor();
    await checkPage(page, "admin-dark");
    // The theme button switches back, and the choice sticks.
    await page.getByRole("button", { name: "Dark theme" }).click();
    await page.reload();
    await page.locator("tr[data-source]").waitFor();
    assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), "light");
    await page.context().close();
  });

  test("every page state, light and dark, desktop and phone: readable, accessible, screenshots", async () => {
    const quakeStory = (await node.api("/api/v1/search?q=lisbon+earthquake&limit=1")).hits[0].story_id;
    const topic = (await node.api("/api/v1/topics")).topics.map((t) => t.topic).sort()[0];
    const anonymous = [["login", "/login", "#auth"], ["register", "/register", "#auth"], ["home-anonymous", "/", ".card"]];
    const states = [
      ["home", "/", ".card"], ["topic", `/topics/${encodeURIComponent(topic)}`, ".card"],
      ["story", `/stories/${encodeURIComponent(quakeStory)}`, "#articles .card"], ["search", "/search?q=earthquake", ".hit"],
      ["source", "/sources/daily", ".hit"], ["starred", "/starred", "main h1"], ["history", "/history", "main h1"],
      ["preferences", "/preferences", "#prefs"], ["admin", "/admin", "tr[data-source]"], ["not-found", "/stories/no-such-story", "main h1"],
    ];
    for (const colorScheme of ["light", "dark"]) {
      for (const [device, viewport] of [["desktop", { width: 1280, height: 900 }], ["phone", { width: 390, height: 844 }]]) {
        const page = await newPage(browser, { colorScheme, viewport });
        const visit = async (name, url, ready) => {
          await page.goto(node.url + url);
          await page.locator(ready).first().waitFor();
          await page.locator("#trending-list, aside.trending .error").first().waitFor({ state: "attached" });
          if (device === "phone") {
            assert.equal(await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth), false, `${name}: no horizontal scrolling on a phone`);
          }
          await checkPage(page, `${name}-${colorScheme}-${device}`);
        };
        for (const s of anonymous) await visit(...s);
        await page.goto(node.url + "/login");
        await page.getByLabel("Username").fill(node.admin.username);
        await page.getByLabel("Password").fill(node.admin.password);
        await page.getByRole("button", { name: "Log in" }).click();
        await page.locator(".account").getByRole("link", { name: "Admin", exact: true }).waitFor();
        for (const s of states) await visit(...s);
        await page.goto(node.url + "/");
        await page.locator(".card").first().waitFor();
        await page.locator("body").click({ position: { x: 5, y: 5 } });
        await page.keyboard.press("?");
        await page.getByRole("dialog", { name: "Keyboard shortcuts" }).waitFor();
        await checkPage(page, `help-${colorScheme}-${device}`);
        await page.context().close();
      }
    }
  });

  test("first run: an empty node says what it lacks and why; the setup link creates the first admin", async () => {
    // A node with no admin and sources that cannot be fetched (nothing
    // listens on the port).
    const dead = await freePort();
    const fresh = await startNode({
      admin: null, name: "first-run",
      sources: `<?xml version="1.0"?><opml version="2.0"><head><title>s</title></head><body>
        <outline type="rss" text="Gone A" xmlUrl="http://127.0.0.1:${dead}/a.xml"/>
        <outline type="rss" text="Gone B" xmlUrl="http://127.0.0.1:${dead}/b.xml"/></body></opml>`,
    });
    try {
      const page = await newPage(browser);
      await eventually(async () => assert.equal((await fresh.api("/api/v1/setup")).sources.failing, 2), 30000, 500);
      await page.goto(fresh.url + "/");
      const panel = page.getByRole("region", { name: "Getting started" });
      await panel.waitFor();
      const text = await panel.innerText();
      assert.match(text, /2 sources of 2 cannot be fetched/);
      assert.match(text, /refused|cannot connect|not reachable/i, text);
      assert.match(text, /admin/i, "it says how to create the first admin");
      assert.match(text, /make demo/, "it offers the demo");
      await checkPage(page, "first-run-light");
      await page.goto(fresh.url + "/login");
      await page.locator("#no-admin").filter({ hasText: /No admin account exists yet/ }).waitFor();

      // The link the node printed creates the admin, once.
      const link = fresh.setupURL().replace(/^https?:\/\/[^/]+/, fresh.url);
      await page.goto(link);
      await page.getByRole("heading", { name: "Create the first admin" }).waitFor();
      await checkPage(page, "setup-light");
      await page.getByLabel("Username").fill("first");
      await page.getByLabel("Password").fill("a long first password");
      await page.getByRole("button", { name: "Create admin" }).click();
      await eventually(async () => assert.equal(await page.locator("h1").innerText(), "Admin", await page.locator("main").innerText()), 10000);
      assert.equal(await page.locator(".account").getByRole("link", { name: "first" }).count(), 1, await page.locator(".account").innerText());
      const again = await newPage(browser);
      await again.goto(link);
      await again.getByLabel("Username").fill("second");
      await again.getByLabel("Password").fill("a long second password");
      await again.getByRole("button", { name: "Create admin" }).click();
      await again.getByRole("alert").filter({ hasText: /.+/ }).waitFor();
      assert.equal((await fresh.api("/api/v1/setup")).admin_exists, true);
      await again.context().close();
      await page.context().close();
    } finally {
      await fresh.stop();
    }
  });

  test("a narrow screen stacks the layout", async () => {
    const page = await newPage(browser, { viewport: { width: 390, height: 844 } });
    await page.goto(node.url + "/");
    await page.locator(".card").first().waitFor();
    const main = await page.locator("main").boundingBox(), aside = await page.locator("aside.trending").boundingBox();
    assert.ok(main.width > 300 && aside.width > 300, "both columns take the full width");
    assert.ok(main.y < aside.y, "the page's content comes before trending on a phone");
    const firstCard = await page.locator(".card").first().boundingBox();
    assert.ok(firstCard.y + firstCard.height <= 844, `the first story is on the first screen (at ${firstCard.y})`);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
    assert.equal(overflow, false, "no horizontal scrolling");
    await checkPage(page, "feed-mobile-light");
    await page.context().close();
  });
});
