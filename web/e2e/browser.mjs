// The chat page in a real browser: Debian's Chromium driven by playwright-core
// (never a downloaded browser), against the real stream and entities handlers
// with the scripted model (tests/tests/browser.rs starts them, serves web/dist
// with its config.json, and runs this).
//
//   OTHER_SESSION=<id> OTHER_PROJECT=<id> NEW_USER_TOKEN=<jwt> node e2e/browser.mjs <page URL> [screenshot.png]
//
// NEW_USER_TOKEN is a user without projects (a project is made in the chat).
// SCREENSHOT_DIR=<dir>, if set, gets calendar-chat.png and project-chat.png.
//
// Exits 0 when every scenario passed; prints one line per scenario. The
// scripted model's answers are fixed by tests/tests/browser.rs: keep the
// prompts and texts below in step with it. OTHER_SESSION is a finished
// session of OTHER_PROJECT, which is not the user's first project (named
// OTHER_PROJECT_NAME, with the document OTHER_DOC).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const [site, screenshot] = process.argv.slice(2);
if (!site) throw new Error('usage: node e2e/browser.mjs <page URL> [screenshot.png]');

const CHECKLIST_REPLY = 'I added the Launch checklist to the plan.';
const words = (prefix, n) => Array.from({ length: n }, (_, i) => `${prefix}${i} `).join('');
const STOP_REPLY = words('essay', 120);
const RESUME_REPLY = words('resumed', 40);
const STORY_REPLY = words('story', 150);
const OTHER_PROJECT_NAME = 'Garden planner';
const OTHER_DOC = 'Seed list';
const { OTHER_SESSION, OTHER_PROJECT, NEW_USER_TOKEN, SCREENSHOT_DIR } = process.env;
const NEW_PROJECT = 'Kitchen remodel';
// The page's request timeout in the scenario where the server stops
// answering (config.json's requestTimeoutMs; the default is 15 s). Only a
// hang guard for the real requests there: loopback answers in milliseconds.
const SHORT_TIMEOUT_MS = 4000;
// The browser's time zone (not the machine's, nor UTC): the agenda's days and
// the calendar turn's local times are in it.
const ZONE = 'Europe/Berlin';
const CALENDAR_REPLY = 'Booked the design review.';
const APPROVAL_REPLY = 'Deleted one draft and kept the other.';
const SUGGESTION = 'Please add a launch date to the checklist.';
if (!OTHER_SESSION || !OTHER_PROJECT || !NEW_USER_TOKEN) {
  throw new Error('OTHER_SESSION, OTHER_PROJECT and NEW_USER_TOKEN must be set');
}

const profile = mkdtempSync(join(tmpdir(), 'agentic-chat-chromium-'));
const t0 = Date.now();
const browser = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  headless: true,
  viewport: { width: 1280, height: 760 },
  timezoneId: ZONE,
  args: [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});
const pageErrors = [];
// The body of every POST /chat the page made, in order.
const posted = [];
// The query of every GET <entitiesUrl>/events the page made, in order.
const listed = [];
// Every answer of 400 or more the page got (URL and status).
const failed = [];
// The body of every POST .../suggestion the page made, in order.
const suggestions = [];
try {
  const page = browser.pages()[0] ?? (await browser.newPage());
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('console', (m) => m.type() === 'error' && /React error|Maximum update depth/.test(m.text()) && pageErrors.push(m.text()));
  page.on('response', (r) => r.status() >= 400 && failed.push(`${r.status()} ${r.url()}`));
  page.on('request', (r) => {
    if (r.method() === 'POST' && new URL(r.url()).pathname.endsWith('/chat')) posted.push(r.postDataJSON());
    if (r.method() === 'POST' && new URL(r.url()).pathname.endsWith('/suggestion')) suggestions.push(r.postDataJSON());
    if (r.method() === 'GET' && new URL(r.url()).pathname.endsWith('/events')) {
      listed.push(Object.fromEntries(new URL(r.url()).searchParams));
    }
  });
  page.setDefaultTimeout(20_000);

  await scenario('the page loads its config, the session list and the project tree', async () => {
    await page.goto(site);
    await page.locator('[data-testid=input]').waitFor();
    await page.locator('[data-testid=doc]').first().waitFor();
    assert.match(page.url(), /#\/s\/[A-Za-z0-9]+$/, 'a new chat gets its id in the address');
    // The icon is the page's own SVG: no favicon.ico asked for and missed.
    const icon = await page.evaluate(async () => {
      const href = document.querySelector('link[rel=icon]')?.href;
      const r = href ? await fetch(href) : null;
      return r && { status: r.status, type: r.headers.get('content-type'), body: (await r.text()).slice(0, 4) };
    });
    assert.deepEqual(icon, { status: 200, type: 'image/svg+xml', body: '<svg' });
    assert.deepEqual(failed.filter((f) => /favicon/.test(f)), [], 'no favicon request failed');
    // A project chat: the input names the project; its tree is in view, with
    // "Ask me first" collapsed above it, its tools grouped in words.
    const name = await page.locator('[data-testid=project-name]').textContent();
    assert.equal(await page.locator('[data-testid=input]').getAttribute('placeholder'), `Ask about ${name}…`);
    await page.locator('[data-testid=ask-first][data-state=ready]').waitFor({ state: 'attached' });
    assert.equal(await page.locator('[data-testid=ask-first]').evaluate((d) => d.open), false, 'collapsed');
    assert.ok(await page.locator('[data-testid=doc]').first().isVisible(), 'the tree is in view');
    const groups = await page.$$eval('[data-testid=ask-first-group]', (els) => els.map((e) => e.dataset.group));
    assert.deepEqual(groups, ['Creating', 'Changing', 'Deleting', 'Calendar']);
    const creating = await page
      .locator('[data-testid=ask-first-group][data-group=Creating] label')
      .evaluateAll((els) => els.map((e) => e.textContent.trim()));
    assert.ok(creating.includes('a task') && !creating.some((t) => t.includes('_')), `words, not names: ${creating}`);
  });

  await scenario('a turn streams its text; its operation and entity patch reach the panel', async () => {
    const docsBefore = await page.locator('[data-testid=doc]').count();
    await send(page, 'Please add a launch checklist');
    const seen = await watchAssistant(page, (t) => t === CHECKLIST_REPLY);
    assert.ok(seen.size >= 3, `text arrived in ${seen.size} steps: ${[...seen].join(' | ')}`);
    await page.locator('[data-testid=operation]', { hasText: 'Created document “Launch checklist”' }).waitFor();
    await page.locator('[data-testid=doc]', { hasText: 'Launch checklist' }).waitFor();
    assert.equal(await page.locator('[data-testid=doc]').count(), docsBefore + 1, 'one document added, in place');
    await page.locator('[data-testid=tool]', { hasText: 'create document' }).waitFor();
  });

  await scenario('Stop ends the turn and keeps its partial answer', async () => {
    await send(page, 'Write a long essay');
    await watchAssistant(page, (t) => t.split(' ').length > 12, { untilReady: false });
    // Mid-turn, with the first turn's tool call, operation and new document in view.
    if (screenshot) await page.screenshot({ path: screenshot });
    await page.locator('[data-testid=stop]').click();
    await waitReady(page);
    const shown = await lastAssistantText(page);
    assert.ok(shown.length > 0 && shown.length < STOP_REPLY.length, `partial: ${shown.length} chars`);
    assert.ok(STOP_REPLY.startsWith(shown), 'the partial is a prefix of the answer');
    await page.waitForTimeout(1500);
    assert.equal(await lastAssistantText(page), shown, 'nothing more arrives after Stop');
    await page.reload();
    await page.locator('[data-testid=message-assistant]').last().waitFor();
    const stored = await lastAssistantText(page);
    assert.ok(stored.startsWith(shown) && stored.length < STOP_REPLY.length, 'the stored partial is kept');
    await page.locator('[data-testid=message-assistant]').last().getByText('(stopped)').waitFor();
  });

  await scenario('a turn posts only its last message, with the scope', async () => {
    const chatId = /#\/s\/(.+)$/.exec(page.url())[1];
    assert.equal(posted.length, 2, `POST /chat bodies: ${JSON.stringify(posted)}`);
    const texts = ['Please add a launch checklist', 'Write a long essay'];
    for (const [i, body] of posted.entries()) {
      assert.equal(body.id, chatId);
      assert.equal(body.trigger, 'submit-message');
      // The second turn's conversation held three messages; only the last is sent.
      assert.equal(body.messages.length, 1, `turn ${i + 1} sent ${body.messages.length} messages`);
      assert.equal(body.messages[0].role, 'user');
      assert.deepEqual(body.messages[0].parts, [{ type: 'text', text: texts[i] }]);
      assert.equal(body.context_type, 'project');
      assert.ok(body.projectFocus?.projectId, 'the turn names its project');
    }
  });

  let resumeMs;
  await scenario('a reload mid-turn resumes it with no duplicated text', async () => {
    await send(page, 'Now reload while I answer');
    await watchAssistant(page, (t) => t.split(' ').length > 8, { untilReady: false });
    const reloaded = Date.now();
    await page.reload();
    const afterReload = await watchAssistant(page, (t) => t === RESUME_REPLY, {
      onFirst: () => (resumeMs = Date.now() - reloaded),
    });
    assert.ok(afterReload.size >= 2, 'the resumed turn went on streaming after the reload');
    const turns = await conversation(page);
    assert.deepEqual(turns.slice(-2), [
      ['user', 'Now reload while I answer'],
      ['assistant', RESUME_REPLY],
    ]);
  });

  await scenario('history after a reload is the conversation as it was', async () => {
    const before = await conversation(page);
    await page.reload();
    await page.locator('[data-testid=message-assistant]').nth(2).waitFor();
    await waitReady(page);
    const after = await conversation(page);
    assert.deepEqual(after, before);
    assert.deepEqual(
      after.map(([role]) => role),
      ['user', 'assistant', 'user', 'assistant', 'user', 'assistant'],
    );
    assert.equal(after[1][1], CHECKLIST_REPLY);
    await page.locator('[data-testid=session]').first().waitFor();
    // The first turn's tool call and its operation, rebuilt from the stored log:
    // in its message and in the panel's feed.
    const first = page.locator('[data-testid=message-assistant]').first();
    await first.locator('[data-testid=tool]', { hasText: 'create document' }).waitFor();
    await first.locator('.operation', { hasText: 'Created document “Launch checklist”' }).waitFor();
    await page.locator('aside [data-testid=operation]', { hasText: 'Created document “Launch checklist”' }).waitFor();
    assert.equal(await page.locator('aside [data-testid=operation]').count(), 1, 'the feed lists the operation once');
    assert.deepEqual(pageErrors, [], 'the page threw');
    if (SCREENSHOT_DIR) await page.screenshot({ path: join(SCREENSHOT_DIR, 'project-chat.png') });
  });

  await scenario('a delete waits: Approve runs one, Deny keeps the other; the answers show after a reload', async () => {
    await send(page, 'Please clean up the old drafts');
    const asked = (name) => page.locator('[data-testid=approval]', { hasText: name });
    await asked('Old draft A').locator('[data-testid=approve]').waitFor();
    await asked('Old draft B').locator('[data-testid=deny]').waitFor();
    await waitReady(page);
    assert.match(await asked('Old draft A').textContent(), /Delete the task “?"?Old draft A/);
    await asked('Old draft A').locator('[data-testid=approve]').click();
    await asked('Old draft B').locator('[data-testid=deny]').click();
    // Both answered: the page sends them at once; the same message goes on.
    await watchAssistant(page, (t) => t === APPROVAL_REPLY);
    const answered = posted.at(-1);
    assert.equal(answered.messages.at(-1).role, 'assistant', 'the answer posts the assistant message');
    const check = async () => {
      await asked('Old draft A').locator('[data-testid=approval-answer]', { hasText: 'Approved' }).waitFor();
      await asked('Old draft B').locator('[data-testid=approval-answer]', { hasText: 'Denied' }).waitFor();
      assert.equal(await page.locator('[data-testid=approval][data-state=waiting]').count(), 0);
    };
    await check();
    await page.reload();
    await page.locator('[data-testid=message-assistant]').nth(3).waitFor();
    await waitReady(page);
    await check();
    await page.waitForTimeout(500);
    assert.deepEqual((await conversation(page)).slice(-2), [
      ['user', 'Please clean up the old drafts'],
      ['assistant', APPROVAL_REPLY],
    ], 'one answer, in the message that asked');
  });

  await scenario('the messages follow a streaming answer to its end, unless scrolled up', async () => {
    await page.setViewportSize({ width: 1280, height: 480 });
    const pane = page.locator('[data-testid=messages]');
    await send(page, 'Tell me a long story');
    // Once the answer overflows the pane, every step of it is in view.
    await page.waitForFunction(() => {
      const el = document.querySelector('[data-testid=messages]');
      return el.scrollHeight > el.clientHeight + 60;
    });
    for (let i = 0; i < 3; i++) {
      const shown = (await lastAssistantText(page)).length;
      await page.waitForFunction((n) => {
        const texts = document.querySelectorAll('[data-testid=message-assistant]');
        return (texts[texts.length - 1]?.textContent.length ?? 0) > n;
      }, shown + 20);
      assert.ok(await atBottom(pane), `step ${i}: the pane is at its end (${await scrollState(pane)})`);
    }
    // Scrolled up by the user: it stays there while the answer goes on.
    await pane.hover();
    await page.mouse.wheel(0, -400);
    await page.waitForFunction(() => {
      const el = document.querySelector('[data-testid=messages]');
      return el.scrollHeight - el.scrollTop - el.clientHeight > 200;
    });
    const top = await pane.evaluate((el) => el.scrollTop);
    const shown = (await lastAssistantText(page)).length;
    await page.waitForFunction((n) => {
      const texts = document.querySelectorAll('[data-testid=message-assistant]');
      return (texts[texts.length - 1]?.textContent.length ?? 0) > n;
    }, shown + 40);
    const now = await pane.evaluate((el) => ({ top: el.scrollTop, below: el.scrollHeight - el.scrollTop - el.clientHeight }));
    assert.ok(now.top <= top && now.below > 200, `the pane stays where the user scrolled (${top} then ${JSON.stringify(now)})`);
    // Back at the end: it follows again, to the answer's end.
    await pane.evaluate((el) => el.scrollTo({ top: el.scrollHeight }));
    await watchAssistant(page, (t) => t === STORY_REPLY);
    assert.ok(await atBottom(pane), `the pane ends at the answer's end (${await scrollState(pane)})`);
    await page.setViewportSize({ width: 1280, height: 760 });
  });

  await scenario('a turn of many tool calls, and a reload right after it, render without an update loop', async () => {
    // Some 150 parts, most arriving together; within a minute of the turn's end
    // the resume route replays it, all at once. Each part is a render: none
    // may leave another update behind (React error #185 came of that).
    await send(page, 'Please read every list of the project');
    await watchAssistant(page, (t) => t === 'Everything is in order.');
    const tools = () => page.locator('[data-testid=message-assistant]').last().locator('[data-testid=tool]');
    assert.equal(await tools().count(), 28);
    const before = await conversation(page);
    await page.reload();
    await page.locator('[data-testid=message-assistant]').nth(4).waitFor();
    await waitReady(page);
    assert.deepEqual(pageErrors, [], 'the page threw');
    assert.deepEqual(await conversation(page), before);
    assert.equal(await tools().count(), 28);
  });

  await scenario("a session of another project shows that project's tree and names it in its turns", async () => {
    await page.goto(new URL(`#/s/${OTHER_SESSION}`, site).href);
    await page.reload();
    await page.locator('[data-testid=message-assistant]').first().waitFor();
    await page.locator('aside h2', { hasText: OTHER_PROJECT_NAME }).waitFor();
    await page.locator('[data-testid=doc]', { hasText: OTHER_DOC }).waitFor();
    assert.equal(await page.locator('[data-testid=doc]', { hasText: 'Launch checklist' }).count(), 0);
    // Each session is labelled with its project, this one with its own.
    const label = page.locator(`[data-testid=session][href="#/s/${OTHER_SESSION}"] [data-testid=session-scope]`);
    await label.filter({ hasText: OTHER_PROJECT_NAME }).waitFor();
    assert.equal(await page.locator('[data-testid=input]').getAttribute('placeholder'), `Ask about ${OTHER_PROJECT_NAME}…`);
    await waitReady(page);
    const before = posted.length;
    await send(page, 'Hello again');
    await page.locator('[data-testid=message-assistant]').nth(1).waitFor();
    await watchAssistant(page, (t) => t === 'Hello.' && posted.length > before);
    const body = posted.at(-1);
    assert.equal(body.id, OTHER_SESSION);
    assert.equal(body.projectFocus?.projectId, OTHER_PROJECT, 'the turn stays in the session\'s project');
    assert.equal(body.messages.length, 1);
    await page.locator('aside h2', { hasText: OTHER_PROJECT_NAME }).waitFor();
  });

  const today = dayIn(ZONE);
  const tomorrow = plusDays(today, 1);
  const agendaDay = (date) => page.locator(`[data-testid=agenda-day][data-date="${date}"]`);

  await scenario('the agenda groups a listing by local day: all-day events first, on each of their days', async () => {
    // The listing as the route answers (src/agenda.ts): a two-day all-day
    // event, two timed ones out of order, an occurrence of a series.
    const at = (day, hm) => `${day}T${hm}:00+01:00`;
    const d2 = plusDays(today, 2);
    const events = [
      { event_id: 'e1', title: 'Standup', start: at(d2, '09:00'), end: at(d2, '09:15'), all_day: false, recurring: true, instance: `${d2}T08:00:00Z`, version: 1 },
      { event_id: 'e2', title: 'Offsite', start: today, end: plusDays(today, 2), all_day: true, recurring: false, version: 1 },
      { event_id: 'e3', title: 'Breakfast', start: at(d2, '08:30'), end: at(d2, '09:00'), all_day: false, recurring: false, version: 1 },
    ];
    await page.route(isListing, (route) =>
      route.fulfill({ json: { from: today, to: plusDays(today, 6), timezone: ZONE, events, truncated: false } }),
    );
    try {
      await page.reload();
      await page.locator('[data-testid=agenda][data-state=ready]').waitFor();
      const rows = async (date) =>
        agendaDay(date).locator('[data-testid=agenda-event]').evaluateAll((els) => els.map((el) => el.textContent));
      assert.deepEqual(await rows(today), ['all day Offsite']);
      assert.deepEqual(await rows(tomorrow), ['all day Offsite']);
      assert.deepEqual(await rows(d2), ['08:30 Breakfast', '09:00 Standup']);
    } finally {
      await page.unroute(isListing);
    }
  });

  await scenario("a calendar that cannot be listed says so and the page goes on working", async () => {
    await page.route(isListing, (route) =>
      route.fulfill({ status: 503, json: { error: { code: 'unavailable', message: 'no calendar' } } }),
    );
    try {
      await page.reload();
      await page.locator('[data-testid=agenda-unavailable]', { hasText: 'calendar unavailable' }).waitFor();
      await page.locator('[data-testid=doc]').first().waitFor();
      await waitReady(page);
      const before = posted.length;
      await send(page, 'Hello once more');
      await watchAssistant(page, (t) => t === 'Hello.' && posted.length > before);
    } finally {
      await page.unroute(isListing);
    }
  });

  await scenario("the agenda lists today and the next six days in the browser's zone", async () => {
    await page.reload();
    await page.locator('[data-testid=agenda][data-state=ready]').waitFor();
    const days = await page.$$eval('[data-testid=agenda-day]', (els) => els.map((el) => el.getAttribute('data-date')));
    assert.deepEqual(days, Array.from({ length: 7 }, (_, i) => plusDays(today, i)));
    assert.deepEqual(listed.at(-1), { from: today, to: plusDays(today, 6), timezone: ZONE });
    assert.equal(await agendaDay(today).locator('h3').textContent(), 'Today');
  });

  await scenario("a calendar turn's event appears in the agenda in place, and stays after a reload", async () => {
    await page.locator('[data-testid=new-calendar-chat]').click();
    await page.locator('[data-testid=agenda][data-state=ready]').waitFor();
    // A calendar chat looks like one: its prompt, the agenda and no project's tree.
    assert.equal(await page.locator('[data-testid=input]').getAttribute('placeholder'), 'Ask about your calendar…');
    assert.equal(await page.locator('[data-testid=project-name]').count(), 0, 'no project heading');
    assert.equal(await page.locator('[data-testid=doc]').count(), 0, 'no project tree');
    await page.evaluate(() => (window.__samePage = true));
    const listings = listed.length;
    await send(page, `Schedule a design review on ${tomorrow} at 10:00`);
    await watchAssistant(page, (t) => t === CALENDAR_REPLY);
    const body = posted.at(-1);
    assert.equal(body.context_type, 'calendar', 'a calendar chat names its scope');
    assert.equal(body.timezone, ZONE, "the turn sends the browser's zone");
    assert.equal(body.projectFocus, undefined);
    // The patch made the page list the week again; the event is under tomorrow, at 10:00 local.
    const event = agendaDay(tomorrow).locator('[data-testid=agenda-event]', { hasText: 'Design review' });
    await event.waitFor();
    assert.ok(listed.length > listings, 'the calendar patch listed the week again');
    assert.equal(await event.locator('[data-testid=agenda-time]').textContent(), '10:00');
    assert.equal(await page.evaluate(() => window.__samePage), true, 'no reload');
    await page.locator('aside [data-testid=operation]', { hasText: /Design review/ }).first().waitFor();
    // Its session is labelled "Calendar" (the list is read again after the turn).
    const chatId = /#\/s\/(.+)$/.exec(page.url())[1];
    await page.locator(`[data-testid=session][href="#/s/${chatId}"] [data-testid=session-scope]`, { hasText: 'Calendar' }).waitFor();
    if (SCREENSHOT_DIR) await page.screenshot({ path: join(SCREENSHOT_DIR, 'calendar-chat.png') });
    // After a reload (the finished turn replayed, its patch with it) it is still there, once.
    await page.reload();
    await page.locator('[data-testid=message-assistant]').first().waitFor();
    await waitReady(page);
    await event.waitFor();
    await page.waitForTimeout(500);
    assert.equal(await page.locator('[data-testid=agenda-event]', { hasText: 'Design review' }).count(), 1);
    assert.equal(await event.locator('[data-testid=agenda-time]').textContent(), '10:00');
    await page.locator('aside [data-testid=operation]', { hasText: /Design review/ }).first().waitFor();
    // A stored calendar session keeps its scope.
    await send(page, 'Hello calendar');
    await watchAssistant(page, (t) => t === 'Hello.');
    assert.equal(posted.at(-1).context_type, 'calendar');
  });

  await scenario('"Ask me first" saves a ticked tool; it stays ticked after a reload', async () => {
    const box = page.locator('[data-testid=ask-first-tool][data-tool=create_task]');
    const saved = (checked) =>
      page.waitForFunction((checked) => {
        const b = document.querySelector('[data-testid=ask-first-tool][data-tool=create_task]');
        return b && !b.disabled && b.checked === checked;
      }, checked);
    const open = () => page.locator('[data-testid=ask-first] summary').click();
    await box.waitFor({ state: 'attached' });
    assert.equal(await box.isChecked(), false);
    await open();
    await box.check();
    await saved(true);
    await page.reload();
    await page.locator('[data-testid=ask-first][data-state=ready]').waitFor();
    assert.equal(await box.isChecked(), true, 'stored: read back after a reload');
    await page.locator('[data-testid=ask-first-count]', { hasText: '1 ticked' }).waitFor();
    await open();
    await box.uncheck();
    await saved(false);
  });

  await scenario('the zone control sets the user\'s zone: the agenda and the turns use it, a turn never changes it', async () => {
    const select = page.locator('[data-testid=zone-select]');
    await page.locator('[data-testid=zone][data-state=ready]').waitFor();
    // The calendar turns above sent Europe/Berlin: none of them stored it.
    assert.equal(await select.inputValue(), '', 'no zone chosen yet');
    await select.selectOption('America/New_York');
    await page.locator('[data-testid=zone][data-state=ready]').waitFor();
    await page.locator('[data-testid=agenda][data-zone="America/New_York"]').waitFor();
    assert.equal(listed.at(-1).timezone, 'America/New_York');
    await page.reload();
    await page.locator('[data-testid=zone][data-state=ready]').waitFor();
    assert.equal(await select.inputValue(), 'America/New_York', 'stored: read back after a reload');
    await page.locator('[data-testid=agenda][data-zone="America/New_York"]').waitFor();
    await waitReady(page);
    await send(page, 'Hello zone');
    await watchAssistant(page, (t) => t === 'Hello.');
    assert.equal(posted.at(-1).timezone, 'America/New_York', 'the turn names the chosen zone');
  });

  await scenario('a server that stops answering: the page says so, retries, and goes on once it answers', async () => {
    // A short timeout for this page load; the sessions list and the chat's
    // history get no answer (the connection is taken, nothing comes back).
    const config = await (await page.request.get(new URL('config.json', site).href)).json();
    const short = (route) => route.fulfill({ json: { ...config, requestTimeoutMs: SHORT_TIMEOUT_MS } });
    const held = [];
    const hold = (route) => held.push(route);
    const isSessions = (url) => url.pathname.endsWith('/sessions');
    const isHistory = (url) => url.pathname.endsWith('/messages');
    await page.route('**/config.json', short);
    await page.route(isSessions, hold);
    await page.route(isHistory, hold);
    try {
      await page.reload();
      const error = (what) => page.locator('[data-testid=load-error]', { hasText: `Could not load ${what}` });
      await error('the sessions').filter({ hasText: 'did not answer' }).waitFor();
      await error('this chat').filter({ hasText: 'Trying again in' }).waitFor();
      assert.equal(await page.locator('main .muted', { hasText: 'Loading…' }).count(), 0, 'no endless Loading…');
      // The function answers again: the button brings the sessions back, the
      // chat's history comes back by itself (the backoff's next try).
      await error('the sessions').locator('[data-testid=retry]').waitFor();
      await page.unroute(isSessions, hold);
      await page.unroute(isHistory, hold);
      // Retry now (unless the backoff's next try came first: either brings them back).
      await page.evaluate(() =>
        [...document.querySelectorAll('[data-testid=load-error]')]
          .find((e) => e.textContent.includes('the sessions'))
          ?.querySelector('[data-testid=retry]')
          ?.click(),
      );
      await page.locator('[data-testid=session]').first().waitFor();
      await page.locator('[data-testid=message-assistant]').first().waitFor();
      await page.waitForFunction(() => !document.querySelector('[data-testid=load-error]'));
      await waitReady(page);
      // A turn whose start gets no answer: the error and a Retry that sends it once.
      const isChat = (url) => url.pathname.endsWith('/chat');
      await page.route(isChat, hold);
      const before = (await conversation(page)).length;
      await send(page, 'Hello after the outage');
      await page.locator('[data-testid=turn-error]', { hasText: 'did not answer' }).waitFor();
      await page.unroute(isChat, hold);
      await page.locator('[data-testid=retry-turn]').click();
      await watchAssistant(page, (t) => t === 'Hello.');
      const after = await conversation(page);
      assert.deepEqual(after.slice(before), [['user', 'Hello after the outage'], ['assistant', 'Hello.']]);
    } finally {
      await page.unroute('**/config.json', short);
      for (const r of held) await r.abort().catch(() => undefined);
    }
    await page.reload();
    await page.locator('[data-testid=session]').first().waitFor();
    assert.equal(await page.locator('[data-testid=load-error]').count(), 0);
  });

  await scenario('Suggest streams a draft into the input; edited and sent, it is a turn; the draft is stored nowhere', async () => {
    await waitReady(page);
    const before = await conversation(page);
    assert.ok(before.length > 0, 'a chat with history');
    const input = page.locator('[data-testid=input]');
    // Words in the input are the draft's goal.
    await input.fill('  a launch date ');
    await page.locator('[data-testid=suggest]').click();
    // The draft streams into the input, piece by piece.
    const seen = new Set();
    const deadline = Date.now() + 20_000;
    while ((await input.inputValue()) !== SUGGESTION) {
      seen.add(await input.inputValue());
      if (Date.now() > deadline) throw new Error(`no suggestion; the input holds ${JSON.stringify(await input.inputValue())}`);
      await page.waitForTimeout(20);
    }
    await page.locator('[data-testid=suggest][data-suggesting=false]').waitFor();
    const partial = [...seen].filter((v) => v && v !== SUGGESTION && SUGGESTION.startsWith(v));
    assert.ok(partial.length > 0, `streamed, not set at once: ${[...seen].join(' | ')}`);
    assert.deepEqual(suggestions, [{ goal: 'a launch date' }], 'one suggestion asked for, with the input as its goal');
    assert.deepEqual(await conversation(page), before, 'a suggestion adds nothing to the conversation');
    // The user edits it and sends it as any message.
    await input.press('End');
    await input.pressSequentially(' Thanks!');
    const sent = `${SUGGESTION} Thanks!`;
    assert.equal(await input.inputValue(), sent);
    await page.locator('[data-testid=send]').click();
    await watchAssistant(page, (t) => t === 'Hello.');
    assert.deepEqual((await conversation(page)).slice(before.length), [['user', sent], ['assistant', 'Hello.']]);
    assert.deepEqual(posted.at(-1).messages[0].parts, [{ type: 'text', text: sent }]);
    // Stored as a turn; the unsent draft nowhere.
    await page.reload();
    await page.locator('[data-testid=message-user]', { hasText: sent }).waitFor();
    await waitReady(page);
    const after = await conversation(page);
    assert.deepEqual(after.slice(-2), [['user', sent], ['assistant', 'Hello.']]);
    assert.equal(after.filter(([, text]) => text === SUGGESTION).length, 0, 'the draft as suggested was not stored');
  });

  await scenario('a project made in the chat shows in the panel at once', async () => {
    // Another user, with no project yet.
    const config = await (await page.request.get(new URL('config.json', site).href)).json();
    const newcomer = (route) => route.fulfill({ json: { ...config, token: NEW_USER_TOKEN } });
    await page.route('**/config.json', newcomer);
    try {
      await page.goto(new URL('#/', site).href);
      await page.reload();
      await page.locator('[data-testid=project-name]', { hasText: 'No project' }).waitFor();
      await waitReady(page);
      assert.equal(await page.locator('[data-testid=input]').getAttribute('placeholder'), 'Ask anything, or start a project…');
      await page.evaluate(() => (window.__samePage = true));
      await send(page, `Start a project called ${NEW_PROJECT}`);
      await watchAssistant(page, (t) => t === `Started ${NEW_PROJECT}.`);
      await page.locator('[data-testid=project-name]', { hasText: NEW_PROJECT }).waitFor();
      await page.locator('[data-testid=doc]').first().waitFor();
      assert.equal(await page.evaluate(() => window.__samePage), true, 'no reload');
      assert.equal(await page.locator('[data-testid=input]').getAttribute('placeholder'), `Ask about ${NEW_PROJECT}…`);
      const chatId = /#\/s\/(.+)$/.exec(page.url())[1];
      await page.locator(`[data-testid=session][href="#/s/${chatId}"] [data-testid=session-scope]`, { hasText: NEW_PROJECT }).waitFor();
      // The next turn works in it.
      await send(page, 'Hello project');
      await watchAssistant(page, (t) => t === 'Hello.');
      assert.equal(posted.at(-1).context_type, 'project');
      assert.ok(posted.at(-1).projectFocus?.projectId, 'the turn names the new project');
    } finally {
      await page.unroute('**/config.json', newcomer);
    }
  });

  assert.deepEqual(pageErrors, [], 'the page threw');
  console.log(`browser: every scenario passed in ${Date.now() - t0} ms (resume: first text ${resumeMs} ms after reload)`);
} finally {
  await browser.close();
  rmSync(profile, { recursive: true, force: true });
}

/** Whether `url` is the calendar's listing (`GET <entitiesUrl>/events`), for page.route. */
function isListing(url) {
  return url.pathname.endsWith('/events');
}

/** Today's date (YYYY-MM-DD) in `zone`. */
function dayIn(zone) {
  return new Intl.DateTimeFormat('en-CA', { timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(new Date());
}

/** `day` plus `n` days. */
function plusDays(day, n) {
  const [y, m, d] = day.split('-').map(Number);
  return new Date(Date.UTC(y, m - 1, d + n)).toISOString().slice(0, 10);
}

async function scenario(name, body) {
  const t = Date.now();
  try {
    await body();
  } catch (e) {
    console.error(`FAILED: ${name}\n${e.stack ?? e}`);
    const shown = await browser.pages()[0]?.evaluate(() => document.body.innerText).catch(() => '');
    console.error(`the page showed:\n${shown}`);
    if (pageErrors.length) console.error(`page errors: ${pageErrors.join('\n')}`);
    throw e;
  }
  console.log(`ok: ${name} (${Date.now() - t} ms)`);
}

async function send(page, text) {
  await page.locator('[data-testid=input]').fill(text);
  await page.locator('[data-testid=send]').click();
}

async function status(page) {
  return page.locator('[data-testid=status]').getAttribute('data-status');
}

async function waitReady(page) {
  await page.waitForFunction(() => {
    const s = document.querySelector('[data-testid=status]')?.getAttribute('data-status');
    return s === 'ready' || s === 'error';
  });
}

/** Whether the scroll container `pane` shows its end. */
async function atBottom(pane) {
  return pane.evaluate((el) => el.scrollHeight - el.scrollTop - el.clientHeight <= 2);
}

async function scrollState(pane) {
  return pane.evaluate((el) => `scrollTop ${el.scrollTop}, clientHeight ${el.clientHeight}, scrollHeight ${el.scrollHeight}`);
}

/** The text of the last message when it is the assistant's (else ''). */
async function lastAssistantText(page) {
  const last = (await conversation(page)).at(-1);
  return last?.[0] === 'assistant' ? last[1] : '';
}

/** [role, text] of every message shown. */
async function conversation(page) {
  return page.$$eval('[data-testid^=message-]', (els) =>
    els.map((el) => [
      el.getAttribute('data-testid').slice('message-'.length),
      [...el.querySelectorAll('[data-testid=text]')].map((t) => t.textContent).join(''),
    ]),
  );
}

/**
 * Samples the last assistant message's text every 20 ms until `done(text)`
 * (and, by default, the chat is ready again): the distinct texts seen.
 */
async function watchAssistant(page, done, { untilReady = true, onFirst } = {}) {
  const seen = new Set();
  const deadline = Date.now() + 20_000;
  for (;;) {
    const text = await lastAssistantText(page);
    if (text && !seen.size) onFirst?.();
    if (text) seen.add(text);
    const now = await status(page);
    if (now === 'error') throw new Error(`the chat failed: ${await page.locator('[data-testid=status]').textContent()}`);
    if (done(text) && (!untilReady || now === 'ready')) return seen;
    if (Date.now() > deadline) throw new Error(`timed out; last text: ${JSON.stringify(text)}; status ${await status(page)}`);
    await page.waitForTimeout(20);
  }
}
